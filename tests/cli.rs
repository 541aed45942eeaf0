//! `veilfs check` and `veilfs explain` as a user runs them.

use std::path::Path;
use std::process::{Command, Output};

fn veilfs(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(args: &[&str], o: &Output) -> String {
    format!(
        "veilfs {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

fn write(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
fn check_accepts_a_good_policy() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "p.toml",
        "extends = \"none\"\n[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n",
    );
    let args = ["check", "p.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    assert_eq!(
        text(&o.stdout),
        "p.toml: ok: 1 rules, 1 patterns, default \"allow\"\n"
    );
    assert!(o.stderr.is_empty(), "{}", show(&args, &o));
}

#[test]
fn check_refuses_a_bad_policy_with_locations() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "p.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\"a[\"]\n",
    );
    let args = ["check", "p.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", show(&args, &o));
    assert_eq!(
        text(&o.stderr),
        "p.toml:3:10: error: rule 1: pattern \"a[\": invalid glob: unclosed character class; missing ']'\n"
    );
}

#[test]
fn check_reports_a_missing_file() {
    let t = tempfile::tempdir().unwrap();
    let args = ["check", "nope.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", show(&args, &o));
    assert!(
        text(&o.stderr).contains("cannot read policy nope.toml"),
        "{}",
        show(&args, &o)
    );
}

#[test]
fn check_warns_about_an_allow_beneath_a_denied_directory() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "p.toml",
        "extends = \"none\"\n[[rules]]\naction = \"deny\"\npaths = [\"secrets/\"]\n\n[[rules]]\naction = \"allow\"\npaths = [\"secrets/public.txt\"]\n",
    );
    let args = ["check", "p.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    assert_eq!(
        text(&o.stderr),
        "p.toml:8:10: warning: rule 2 pattern \"secrets/public.txt\" can never take effect: \
         `secrets` is denied by rule 1 \"secrets/\" (p.toml:4:10), and nothing beneath it can be \
         more permissive\n"
    );
    assert!(
        text(&o.stdout).ends_with(", 1 warning\n"),
        "{}",
        show(&args, &o)
    );
}

#[test]
fn check_warns_about_an_allow_beneath_an_ask_directory_and_explain_says_ask() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "p.toml",
        "extends = \"none\"\n[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n\n[[rules]]\naction = \"allow\"\npaths = [\"mig/open.sql\"]\n\n[[rules]]\naction = \"read-only\"\npaths = [\"mig/frozen.sql\"]\n",
    );
    let args = ["check", "p.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    // The read-only rule beneath the question takes effect (once approved): no
    // warning for it.
    assert_eq!(
        text(&o.stderr),
        "p.toml:8:10: warning: rule 2 pattern \"mig/open.sql\" cannot skip the question: `mig` \
         asks (rule 1 \"mig/\" (p.toml:4:10)), and an `allow` beneath an `ask` directory still \
         asks\n"
    );
    std::fs::create_dir(t.path().join("mig")).unwrap();
    let args = [
        "explain",
        "--policy",
        "p.toml",
        "mig",
        "mig/open.sql",
        "mig/frozen.sql",
    ];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    let out = text(&o.stdout);
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        rows,
        [
            "ask       mig/  (rule 1 \"mig/\" (p.toml:4:10))",
            "ask       mig/open.sql  (ancestor `mig` put behind a question by rule 1 \"mig/\" (p.toml:4:10))",
            "ask       mig/frozen.sql  (ancestor `mig` put behind a question by rule 1 \"mig/\" (p.toml:4:10); read-only once approved)",
        ],
        "{}",
        show(&args, &o)
    );
}

#[test]
fn check_warns_about_a_shadowed_pattern() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        "p.toml",
        "extends = \"none\"\n[[rules]]\naction = \"allow\"\npaths = [\"debug.log\"]\n\n[[rules]]\naction = \"deny\"\npaths = [\"*.log\"]\n",
    );
    let args = ["check", "p.toml"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    assert_eq!(
        text(&o.stderr),
        "p.toml:4:10: warning: rule 1 pattern \"debug.log\" never takes effect: rule 2 \"*.log\" \
         (p.toml:8:10) matches every path it matches and, coming later, decides instead (deny)\n"
    );
}

#[test]
fn check_without_argument_uses_the_workspace_file_else_the_builtin() {
    let t = tempfile::tempdir().unwrap();
    let o = veilfs(t.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).starts_with("built-in default policy: ok"),
        "{}",
        text(&o.stdout)
    );
    write(
        t.path(),
        ".veilfs.toml",
        "extends = \"none\"\ndefault = \"read-only\"\n",
    );
    let o = veilfs(t.path(), &["check"]);
    assert_eq!(
        text(&o.stdout),
        "./.veilfs.toml: ok: 0 rules, 0 patterns, default \"read-only\"\n"
    );
}

#[test]
fn explain_uses_the_workspace_to_tell_directories() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("ws/secrets")).unwrap();
    write(
        &t.path().join("ws"),
        "notes/secrets",
        "a file, not a directory",
    );
    let args = [
        "explain",
        "--workspace",
        "ws",
        "secrets",
        "notes/secrets",
        "other/secrets/",
        "secrets/x",
    ];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    let out = text(&o.stdout);
    // The home line (`# home: …`) depends on the machine.
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with("# home")).collect();
    assert_eq!(lines[0], "# policy: built-in default policy");
    assert!(
        lines[1].starts_with("deny      secrets/  (rule 1 \"secrets/\" (<built-in>:"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("allow     notes/secrets  (no rule matches"),
        "{out}"
    );
    assert!(
        lines[3].starts_with("deny      other/secrets/  (rule 1"),
        "{out}"
    );
    assert!(
        lines[4].starts_with("deny      secrets/x  (ancestor `secrets` denied by rule 1"),
        "{out}"
    );
}

#[test]
fn explain_json_and_workspace_policy() {
    let t = tempfile::tempdir().unwrap();
    write(
        t.path(),
        ".veilfs.toml",
        "[[rules]]\naction = \"read-only\"\npaths = [\".git/\"]\n",
    );
    std::fs::create_dir(t.path().join(".git")).unwrap();
    let args = ["explain", "--json", ".git/config", ".git"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
    let out = text(&o.stdout);
    let v: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["action"], "read-only");
    assert_eq!(v[0]["reason"], "ancestor");
    assert_eq!(v[0]["ancestor"], ".git");
    // The workspace is found from the current directory: its absolute path.
    let at = t.path().canonicalize().unwrap().join(".veilfs.toml:3:10");
    assert_eq!(v[0]["location"], at.to_str().unwrap());
    assert_eq!(v[1]["reason"], "rule");
    assert_eq!(v[1]["dir"], true);
}

#[test]
fn explain_refuses_paths_outside_the_workspace() {
    let t = tempfile::tempdir().unwrap();
    let args = ["explain", "../x"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&args, &o));
    assert!(
        text(&o.stderr).contains("leaves the workspace"),
        "{}",
        show(&args, &o)
    );
}

#[test]
fn explain_refuses_a_bad_policy() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "p.toml", "default = \"maybe\"\n");
    let args = ["explain", "--policy", "p.toml", "x"];
    let o = veilfs(t.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&args, &o));
    assert!(
        text(&o.stderr).contains("p.toml:1:11: error: unknown default action"),
        "{}",
        show(&args, &o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn ttl_takes_seconds_or_inf_and_refuses_the_rest_without_panicking() {
    let t = tempfile::tempdir().unwrap();
    // Accepted (the mount then fails on the missing source, after the options).
    for ttl in ["0", "0.5", "30", "inf", "1e300"] {
        let args = ["mount", "--ttl", ttl, "no-such-src", "no-such-mnt"];
        let o = veilfs(t.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{}", show(&args, &o));
        assert!(
            text(&o.stderr).contains("source no-such-src is not a directory"),
            "{}",
            show(&args, &o)
        );
    }
    // Refused by the parser, with a message.
    for ttl in ["--ttl=nan", "--ttl=-1", "--ttl=soon"] {
        let args = ["mount", ttl, "no-such-src", "no-such-mnt"];
        let o = veilfs(t.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{}", show(&args, &o));
        let err = text(&o.stderr);
        assert!(
            err.contains("--ttl") && err.contains("or `inf`") && !err.contains("panicked"),
            "{}",
            show(&args, &o)
        );
    }
}

#[test]
fn verbose_is_accepted_anywhere_and_changes_no_output_of_check() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "p.toml", "default = \"allow\"\n");
    let plain = veilfs(t.path(), &["check", "p.toml"]);
    for args in [["-v", "check", "p.toml"], ["check", "-vv", "p.toml"]] {
        let o = veilfs(t.path(), &args);
        assert_eq!(o.status.code(), Some(0), "{}", show(&args, &o));
        assert_eq!(o.stdout, plain.stdout, "{}", show(&args, &o));
    }
}

/// `veilfs run --typo` names the unknown option instead of running a program of
/// that name; the command's own options pass, and one starting with `-` after `--`.
#[test]
fn run_refuses_an_unknown_option_and_passes_the_commands_own() {
    let dir = tempfile::tempdir().unwrap();
    let o = veilfs(dir.path(), &["run", "--quite", "--", "true"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        show(&["run", "--quite"], &o)
    );
    let err = text(&o.stderr);
    assert!(err.contains("--quite") && err.contains("--quiet"), "{err}");
    let o = veilfs(dir.path(), &["run", "--typo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("unexpected argument '--typo'"),
        "{}",
        text(&o.stderr)
    );
    let o = veilfs(
        dir.path(),
        &["run", "-q", "sh", "-c", "echo ok $0 -x", "-n"],
    );
    assert_eq!(text(&o.stdout), "ok -n -x\n", "{}", show(&["run"], &o));
}

/// `veilfs --help` gives each subcommand one short line; the paragraphs are in
/// each subcommand's `--help` (and the man pages).
#[test]
fn the_top_level_help_is_one_short_line_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let o = veilfs(dir.path(), &["--help"]);
    let help = text(&o.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 10, "{help}");
    for line in commands {
        assert!(line.len() <= 80, "too long: {line}");
    }
    let o = veilfs(dir.path(), &["run", "--help"]);
    assert!(text(&o.stdout).contains("(128+N when it dies of signal N)"));
}
