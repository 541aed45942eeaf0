//! `veilfs explain --all`: every path the policy denies or holds, with the rule,
//! from one walk that opens no file; a summary line; `--json`.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::git;

fn veilfs(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A walk that opened the FIFO below would wait for a writer for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("veilfs {args:?} did not end: it opened a file it should only list");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_held_path_is_listed_with_its_rule_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    for d in ["secrets/db", "docs", "src"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    for (rel, body) in [
        ("secrets/a.txt", "a"),
        ("secrets/db/b.txt", "b"),
        ("docs/guide.md", "g"),
        ("src/main.rs", "m"),
        ("src/dev.key", "k"),
    ] {
        std::fs::write(ws.join(rel), body).unwrap();
    }
    // A FIFO by a denied name: listing it must not open it.
    assert!(
        Command::new("mkfifo")
            .arg(ws.join(".env"))
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"read-only\"\npaths = [\"docs/\"]\n",
    )
    .unwrap();
    let o = veilfs(ws, &["explain", "--all"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with("# ")).collect();
    assert_eq!(
        rows,
        [
            "deny      .env  (rule 1 \".env\" (<built-in>:20:3): where people keep secrets and credentials)",
            "read-only .veilfs.toml  (the policy file's name, read-only at every depth: veilfs never lets a policy be planted)",
            format!(
                "read-only docs/  (rule 6 \"docs/\" ({}/.veilfs.toml:4:10))",
                ws.canonicalize().unwrap().display()
            )
            .as_str(),
            "deny      secrets/  (rule 1 \"secrets/\" (<built-in>:43:3): where people keep secrets and credentials)",
            "deny      src/dev.key  (rule 1 \"*.key\" (<built-in>:25:3): where people keep secrets and credentials)",
        ],
        "{out}"
    );
    // secrets/ counts with the three paths inside it; docs/guide.md inherits.
    assert!(
        out.ends_with(
            "# hiding 6 paths in 3 places; 3 more read-only or asked for (.git not walked)\n"
        ),
        "{out}"
    );
    let o = veilfs(ws, &["explain", "--all", "--json"]);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(lines[3]["path"], "secrets");
    assert_eq!(lines[3]["dir"], true);
    assert_eq!(lines[3]["action"], "deny");
    assert_eq!(lines[5]["hidden"], 6);
    assert_eq!(lines[5]["places"], 3);
}

/// The start-up line of `mount` and `run` says how much the policy hides, and warns
/// of a denied path that git tracks (its content is readable through history),
/// still on one line.
#[test]
fn the_start_up_line_says_what_is_hidden_and_warns_of_tracked_denied_paths() {
    let t = common::Tree::new("veilfs-startup", &["ws/config", "ws/certs", "mnt", "rt"]);
    let ws = t.p("ws");
    std::fs::write(ws.join("config/prod.yaml"), "password: x\n").unwrap();
    std::fs::write(ws.join("config/dev.yaml"), "password: y\n").unwrap();
    std::fs::write(ws.join("certs/dev.key"), "KEY\n").unwrap();
    std::fs::write(ws.join(".env"), "X=1\n").unwrap();
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\n\
         paths = [\"config/prod.yaml\", \"config/dev.yaml\"]\n",
    )
    .unwrap();
    // Untracked: the counts only.
    let d = t.mount();
    let line = d.said.lines().last().unwrap().to_string();
    drop(d);
    assert!(
        line.ends_with("; hiding 4 paths in 4 places (`veilfs explain --all` lists them)"),
        "{line}"
    );
    // Tracked: the first is named with the fix, the rest counted.
    git(&ws, &["init", "-q", "."]);
    git(&ws, &["add", "config/prod.yaml", "config/dev.yaml"]);
    git(&ws, &["commit", "-qm", "x"]);
    let warning = "; warning: config/dev.yaml is denied but tracked in git: its content is \
                   readable through history (`git show HEAD:config/dev.yaml`); deny `.git/` or \
                   remove it from history (1 more denied paths are tracked: `veilfs check` \
                   names them)";
    let d = t.mount();
    let line = d.said.lines().last().unwrap().to_string();
    drop(d);
    assert!(line.contains(warning), "{line}");
    let o = t
        .veilfs()
        .args(["run", "--", "true"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // The warning, then the three start-up lines.
    assert_eq!(err.lines().count(), 4, "{err}");
    assert!(err.starts_with("veilfs: warning: "), "{err}");
    assert!(err.contains(", hiding 4 paths in 4 places\n"), "{err}");
    assert!(
        err.contains(&format!("veilfs: {}\n", &warning[2..])),
        "{err}"
    );
    // Quiet: nothing is said, and nothing walked for it.
    let o = t
        .veilfs()
        .args(["run", "--quiet", "--", "true"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

/// A tree larger than the start-up walk reads is counted as "at least".
#[test]
fn the_start_up_walk_is_bounded() {
    let t = common::Tree::new("veilfs-startup", &["ws", "mnt", "rt"]);
    let ws = t.p("ws");
    for i in 0..veilfs::workspace::walk::STARTUP_DIRS + 10 {
        std::fs::create_dir(ws.join(format!("d{i}"))).unwrap();
    }
    std::fs::write(ws.join(".env"), "X=1\n").unwrap();
    let d = t.mount();
    let line = d.said.lines().last().unwrap().to_string();
    drop(d);
    assert!(
        line.contains(
            "; hiding at least 1 path in 1 place (`veilfs explain --all` lists them all: this \
             count stopped early)"
        ),
        "{line}"
    );
}

/// Names, rule reasons and workspace paths carry no control character to the
/// terminal: `explain PATH` and its header, and the start-up lines of `mount` and
/// `run`, show them escaped.
#[test]
fn explain_and_the_start_up_lines_escape_control_characters() {
    let t = common::Tree::new("veilfs-escape", &["mnt", "rt"]);
    let ws = t.p("w\x1b]0;PWN\x07\x1b[2J");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("\x1b[31mred.txt"), "r").unwrap();
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\n\
         paths = [\"\\u001b\\\\[31mred.txt\"]\nwhy = \"\\u001b[5mblink\\r\\nveilfs: forged line\"\n",
    )
    .unwrap();
    let o = t
        .veilfs()
        .args(["explain", "\x1b[31mred.txt", "."])
        .current_dir(&ws)
        .output()
        .unwrap();
    let all = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&all));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !all.iter().any(|&b| b == 0x1b || b == b'\r' || b == 0x07),
        "a control character reached the terminal: {out:?}"
    );
    assert!(out.contains("deny      \\x1b[31mred.txt  (rule 6"), "{out}");
    assert!(
        out.contains("\\x1b[5mblink\\x0d\\x0aveilfs: forged line"),
        "{out}"
    );
    assert!(out.contains("# workspace: "), "{out}");
    // The start-up lines.
    let mut c = t.veilfs();
    c.arg("mount").arg(&ws).arg(t.p("mnt"));
    let d = common::daemon::Daemon::start(c, &t.p("mnt"));
    let said = d.said.clone();
    drop(d);
    assert!(!said.contains('\x1b'), "{said:?}");
    assert!(said.contains("w\\x1b]0;PWN\\x07\\x1b[2J"), "{said}");
    let o = t
        .veilfs()
        .args(["run", "--no-home", "--", "true"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!o.stderr.iter().any(|&b| b == 0x1b || b == 0x07), "{err:?}");
    assert!(err.contains("w\\x1b]0;PWN\\x07\\x1b[2J"), "{err}");
}
