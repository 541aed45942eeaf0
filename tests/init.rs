//! `veilfs init` on a fixture tree: the file it writes (extends the default,
//! imports the ignore files and Claude Code's settings found, lists the
//! secret-looking files by name), that it loads and hides what it says, and that
//! it never replaces a file without `--force`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::assert_errno;
use common::daemon::Daemon;

fn tree() -> tempfile::TempDir {
    let t = common::temp_tree(
        "veilfs-init",
        &[
            "ws/certs",
            "ws/config",
            "ws/src",
            "ws/sub/deep",
            "ws/.claude",
            "mnt",
            "rt",
        ],
    );
    for (rel, body) in [
        ("ws/.env", "A=1\n"),
        ("ws/.env.production", "A=2\n"),
        ("ws/.env.example", "A=\n"),
        ("ws/certs/server.pem", "PEM\n"),
        ("ws/certs/server.pem.example", "PEM\n"),
        ("ws/config/credentials.json", "{}\n"),
        ("ws/src/main.py", "print(1)\n"),
        ("ws/.cursorignore", "data.csv\n"),
        ("ws/data.csv", "a,b\n"),
        ("ws/sub/deep/.aiexclude", "notes.txt\n"),
        ("ws/sub/deep/notes.txt", "deep notes\n"),
        ("ws/sub/api_token.json", "{\"t\":1}\n"),
        ("ws/sub/weird*name.key.txt", "x\n"),
        (
            "ws/.claude/settings.json",
            "{\"permissions\":{\"deny\":[\"Edit(./src/**)\"]}}",
        ),
    ] {
        std::fs::write(t.path().join(rel), body).unwrap();
    }
    t
}

fn veilfs(t: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(args)
        .current_dir(t.join("ws"))
        .env("VEILFS_RUNTIME_DIR", t.join("rt"))
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn init_writes_a_policy_that_loads_and_hides_what_it_says() {
    let t = tree();
    let p = |rel: &str| -> PathBuf { t.path().join(rel) };
    let o = veilfs(t.path(), &["init"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "veilfs init: wrote {} (extends the built-in default; imports .cursorignore, \
             .aiexclude, .claude/settings.json; 5 secret-looking files listed)",
            p("ws/.veilfs.toml").display()
        )),
        "{out}"
    );
    let written = std::fs::read_to_string(p("ws/.veilfs.toml")).unwrap();
    for want in [
        "extends = \"default\"\n",
        "# directory of each file and below, with gitignore syntax. Found:\n#   .cursorignore\n#   sub/deep/.aiexclude\n",
        // One rule per ignore file name, `!` lines applied, as the built-in default.
        "\n[[rules]]\naction = \"deny\"\nimport = \".cursorignore\"\nwhy = \"listed in an ignore file of this workspace\"\n\n[[rules]]\naction = \"deny\"\nimport = \".aiexclude\"\n",
        "\n[[rules]]\naction = \"deny\"\nimport = \".codeiumignore\"\n",
        "[[rules]]\nimport = [\".claude/settings.json\"]\n",
        "# Held by the rules above already:\n#   deny      .env\n#   deny      .env.production\n#   deny      certs/server.pem\n",
        "# [[rules]]\n# action = \"deny\"\n# paths = [\n#   \"/config/credentials.json\",\n#   \"/sub/api_token.json\",\n# ]\n",
    ] {
        assert!(written.contains(want), "missing {want:?} in:\n{written}");
    }
    // Names only: the example files are not listed, nor is any content.
    assert!(!written.contains(".env.example"), "{written}");
    assert!(!written.contains("server.pem.example"), "{written}");
    assert!(!written.contains("A=1"), "{written}");
    // It prints what the mount will hide, as `explain` says it.
    assert!(
        out.contains("  deny      .env  (rule 1 \".env\" (<built-in>"),
        "{out}"
    );
    assert!(out.contains("  deny      data.csv  (rule "), "{out}");
    assert!(
        out.contains("  allow     sub/api_token.json  (no rule matches"),
        "{out}"
    );
    // `check` accepts it without a warning.
    let o = veilfs(t.path(), &["check"]);
    let out = text(&o);
    assert!(o.status.success() && !out.contains("warning"), "{out}");
    // Uncommenting the suggested rule hides the rest; a mount honours the file.
    let enabled = written
        .replace("# [[rules]]\n", "[[rules]]\n")
        .replace("# action = \"deny\"\n", "action = \"deny\"\n")
        .replace("# paths = [\n", "paths = [\n")
        .replace("#   \"/", "  \"/")
        .replace("# ]\n", "]\n");
    std::fs::write(p("ws/.veilfs.toml"), enabled).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
    c.env("VEILFS_RUNTIME_DIR", p("rt"))
        .arg("mount")
        .arg(p("ws"))
        .arg(p("mnt"));
    let d = Daemon::start(c, &p("mnt"));
    let m = |rel: &str| p("mnt").join(rel);
    for rel in [
        ".env",
        ".env.production",
        "certs/server.pem",
        "config/credentials.json",
        "sub/api_token.json",
        "data.csv",
        "sub/deep/notes.txt",
    ] {
        assert_errno(std::fs::read(m(rel)), libc::EACCES, rel);
    }
    assert_eq!(
        std::fs::read_to_string(m("src/main.py")).unwrap(),
        "print(1)\n"
    );
    assert_errno(
        std::fs::write(m("src/main.py"), "x"),
        libc::EACCES,
        "Edit deny in the settings",
    );
    assert_errno(
        std::fs::write(m(".veilfs.toml"), ""),
        libc::EACCES,
        "the policy file",
    );
    // No ignore file can be planted (one whose `!` lines a later `init --force`
    // would import), and none is changed.
    for rel in ["src/.geminiignore", "sub/.cursorignore", ".aiderignore"] {
        assert_errno(std::fs::write(m(rel), "!*\n"), libc::EACCES, rel);
        assert!(!p(&format!("ws/{rel}")).exists(), "{rel}");
    }
    assert_errno(
        std::fs::write(m(".cursorignore"), "\n"),
        libc::EACCES,
        ".cursorignore",
    );
    drop(d);
}

#[test]
fn init_never_replaces_a_policy_without_force() {
    let t = tree();
    let file = t.path().join("ws/.veilfs.toml");
    std::fs::write(&file, "# mine\n").unwrap();
    let o = veilfs(t.path(), &["init"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("exists: not replaced (--force replaces it"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "# mine\n");
    // Nor through a link planted at its name.
    std::fs::remove_file(&file).unwrap();
    let elsewhere = t.path().join("elsewhere.txt");
    std::fs::write(&elsewhere, "keep\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let o = veilfs(t.path(), &["init"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep\n");
    // --force replaces it (the link itself, not its target).
    let o = veilfs(t.path(), &["init", "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep\n");
    let m = std::fs::symlink_metadata(&file).unwrap();
    assert!(m.file_type().is_file());
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("extends = \"default\"")
    );
    // Nothing was left beside it.
    let left: Vec<String> = std::fs::read_dir(t.path().join("ws"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".init-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn init_in_an_empty_workspace_writes_the_default_alone() {
    let t = common::temp_tree("veilfs-init-empty", &["ws", "rt"]);
    let o = veilfs(t.path(), &["init", "--workspace", "."]);
    assert!(o.status.success(), "{}", text(&o));
    let written = std::fs::read_to_string(t.path().join("ws/.veilfs.toml")).unwrap();
    assert!(written.ends_with("extends = \"default\"\n"), "{written}");
    assert!(!written.contains("[[rules]]"), "{written}");
}

/// Names in the workspace reach the terminal escaped: a name holding an escape
/// sequence and a carriage return cannot forge a line or drive the terminal.
#[test]
fn init_prints_names_escaped() {
    let t = common::temp_tree("veilfs-init-esc", &["ws/d", "rt"]);
    let evil = "x\x1b[2J\x1b]0;pwned\x07\rveilfs init: forged_secret.txt";
    std::fs::write(t.path().join("ws").join(evil), "s\n").unwrap();
    std::fs::write(t.path().join("ws/d/y\x1b[31mRED_secret.txt"), "s\n").unwrap();
    let o = veilfs(t.path(), &["init"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        !out.contains('\x1b') && !out.contains('\r') && !out.contains('\x07'),
        "{out:?}"
    );
    assert!(out.contains("x\\x1b[2J"), "{out}");
    assert!(out.contains("d/y\\x1b[31mRED_secret.txt"), "{out}");
}

/// A name the command chose cannot write policy into the file `init` writes: a
/// secret-looking file whose name holds newlines and TOML, held by a rule (so it
/// is listed among the files held already), stays one escaped comment line.
#[test]
fn a_planted_name_never_writes_policy() {
    let t = common::temp_tree("veilfs-init-inject", &["ws/tests", "rt"]);
    let ws = t.path().join("ws");
    std::fs::write(ws.join(".env"), "SECRET=hunter2\n").unwrap();
    std::fs::write(ws.join("tests/.cursorignore"), "*.key\n").unwrap();
    let evil = "z\n[[rules]]\naction = \"allow\"\npaths = [\".env\"]\n#.key";
    std::fs::write(ws.join("tests").join(evil), "k\n").unwrap();
    let o = veilfs(t.path(), &["init"]);
    assert!(o.status.success(), "{}", text(&o));
    let written = std::fs::read_to_string(ws.join(".veilfs.toml")).unwrap();
    assert!(
        written.contains("#   deny      tests/z\\x0a[[rules]]\\x0aaction = \"allow\""),
        "{written}"
    );
    assert!(
        !written.contains("\n[[rules]]\naction = \"allow\""),
        "{written}"
    );
    let o = veilfs(t.path(), &["explain", ".env"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("deny      .env"), "{}", text(&o));
}

/// The policy `init` writes decides each path as the built-in default it replaces:
/// a `!` line of an ignore file re-includes what that file hides, and nothing more.
#[test]
fn the_written_policy_means_what_the_built_in_default_meant() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(".cursorignore"), "*.log\n!keep.log\n!.env\n").unwrap();
    std::fs::write(ws.join(".geminiignore"), "notes/\n!creds.txt\n").unwrap();
    std::fs::write(ws.join(".aiexclude"), "creds.txt\n").unwrap();
    let paths = [
        "keep.log",
        "x.log",
        ".env",
        "creds.txt",
        "notes/a.txt",
        "other.txt",
    ];
    let decide = |t: &Path| {
        let mut args = vec!["explain"];
        args.extend(paths);
        let o = veilfs(t, &args);
        text(&o)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
    };
    let before = decide(t.path());
    assert_eq!(
        before,
        [
            "allow keep.log",
            "deny x.log",
            "deny .env",
            "deny creds.txt",
            "deny notes/a.txt",
            "allow other.txt"
        ]
    );
    let o = veilfs(t.path(), &["init"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(decide(t.path()), before);
}

/// A secret-looking name with a newline (a hostile repository's) neither breaks
/// the file `init` writes nor ends its comment: the ready rule, uncommented, hides
/// exactly that file.
#[test]
fn a_name_with_a_newline_stays_on_its_line() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("credentials\n.json"), "x").unwrap();
    let o = veilfs(t.path(), &["init"]);
    assert!(o.status.success(), "{}", text(&o));
    let written = std::fs::read_to_string(ws.join(".veilfs.toml")).unwrap();
    let line = "#   \"/credentials\\n.json\",\n";
    assert!(written.contains(line), "{written}");
    // Uncommented as the file says, it hides that name.
    let uncommented: String = written
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with("[[rules]]")
                    || rest.starts_with("action")
                    || rest.starts_with("paths")
                    || rest.starts_with("  \"")
                    || rest == "]" =>
            {
                format!("{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(ws.join(".veilfs.toml"), uncommented).unwrap();
    let o = veilfs(t.path(), &["explain", "credentials\n.json"]);
    assert!(
        text(&o).contains("deny      credentials\\x0a.json"),
        "{}",
        text(&o)
    );
}
