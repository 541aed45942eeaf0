//! `veilfs check` says, with the fix, what a policy cannot do as written: an
//! absolute path, `***`, a `**` inside a name, a `dir/` naming a file, a pattern
//! that matches nothing in the workspace, an empty file, a policy that drops the
//! built-in default without saying so, and the common spelling mistakes.

mod common;

use std::path::Path;

use common::git;
use std::process::{Command, Output};

fn veilfs(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A workspace (`config/prod.yaml`, `certs/dev.key`) whose `.veilfs.toml` is
/// `policy`; `veilfs check` run in it.
fn check_in_workspace(policy: &str) -> (Output, tempfile::TempDir) {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::create_dir_all(ws.join("certs")).unwrap();
    std::fs::write(ws.join("config/prod.yaml"), "password: x\n").unwrap();
    std::fs::write(ws.join("certs/dev.key"), "KEY\n").unwrap();
    std::fs::write(ws.join(".veilfs.toml"), policy).unwrap();
    let o = veilfs(ws, &["check"]);
    (o, t)
}

#[test]
fn each_pattern_that_cannot_do_what_was_meant_is_a_warning_with_the_fix() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().canonicalize().unwrap();
    let policy = format!(
        "extends = \"default\"\n\
         [[rules]]\n\
         action = \"deny\"\n\
         paths = [\"{}/config/prod.yaml\", \"/home/me/proj/.env\", \"***\", \"a/**b\", \
         \"config/prod.yaml/\", \"config/prod.yml\"]\n",
        ws.display()
    );
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::write(ws.join("config/prod.yaml"), "password: x\n").unwrap();
    std::fs::write(ws.join(".veilfs.toml"), &policy).unwrap();
    let o = veilfs(&ws, &["check"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let abs = format!("{}/config/prod.yaml", ws.display());
    let want = [
        format!(
            "./.veilfs.toml:4:10: warning: rule 6 pattern {abs:?} is an absolute path, but \
             patterns are relative to the workspace root (it names `{ws}{abs}` inside the \
             workspace); write \"/config/prod.yaml\"",
            ws = ws.display()
        ),
        "warning: rule 6 pattern \"/home/me/proj/.env\" looks like an absolute path, but \
         patterns are relative to the workspace root (a leading `/` anchors there): write \
         the path below the workspace, e.g. \"/.env\" for its top-level .env"
            .to_string(),
        "warning: rule 6 pattern \"***\" matches every path: in \"***\", `***` is not a glob \
         of its own (a `*` matches within a name, `**` as a whole segment spans \
         directories); write `**` for everything below, or `*` for one name"
            .to_string(),
        "warning: rule 6 pattern \"a/**b\" does not span directories: `**` does only as a \
         whole segment, so \"**b\" is \"*b\" (one name); write \"a/**/*b\""
            .to_string(),
        "warning: rule 6 pattern \"config/prod.yaml/\" ends in `/`, so it matches \
         directories only, but config/prod.yaml is a file: write \"config/prod.yaml\""
            .to_string(),
        "warning: rule 6 pattern \"config/prod.yml\" matches nothing in the workspace now (a \
         typo? it may be meant for files to come)"
            .to_string(),
    ];
    for w in &want {
        assert!(err.contains(w.as_str()), "missing:\n{w}\nin:\n{err}");
    }
}

#[test]
fn a_policy_that_drops_the_default_or_is_empty_is_a_warning() {
    let (o, _t) = check_in_workspace("[[rules]]\naction = \"deny\"\npaths = [\"config/\"]\n");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "./.veilfs.toml:1:1: warning: the policy does not extend the built-in default, \
             so .env, *.pem, *.key, secrets/, .ssh/ and the other credential files are \
             hidden only where its own rules say so; add `extends = \"default\"` at the \
             top (its rules first, yours win), or `extends = \"none\"` to say you mean it"
        ),
        "{err}"
    );
    let (o, _t) = check_in_workspace("# nothing yet\n");
    let err = stderr(&o);
    assert!(
        err.contains(
            "./.veilfs.toml:1:1: warning: the policy is empty: it allows everything \
             (nothing is hidden, not even .env); start from the built-in default with \
             `extends = \"default\"` (`veilfs init` writes one)"
        ),
        "{err}"
    );
    // Said on purpose, or extending the default: no such warning.
    for p in [
        "extends = \"none\"\n[[rules]]\naction = \"deny\"\npaths = [\"config/\"]\n",
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\npaths = [\"config/\"]\n",
    ] {
        let (o, _t) = check_in_workspace(p);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(!err.contains("warning"), "{p}: {err}");
    }
}

#[test]
fn the_common_mistakes_get_a_message_that_says_the_fix() {
    let t = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "[[rules]]\naction = \"readonly\"\npaths = [\".env\"]\n",
            "p.toml:2:10: error: rule 1: unknown action \"readonly\" (did you mean \
             \"read-only\"?): expected \"allow\", \"read-only\", \"ask\" or \"deny\"",
        ),
        (
            "[[rules]]\naction = \"hide\"\npaths = [\".env\"]\n",
            "(did you mean \"deny\"?)",
        ),
        (
            "default = \"Read_Only\"\n",
            "unknown default action \"Read_Only\" (did you mean \"read-only\"?)",
        ),
        (
            "[[rules]]\naction = \"deny\"\npaths = \".env\"\n",
            "p.toml:3:9: error: `paths` must be a list: `paths = [\".env\"]`",
        ),
    ] {
        std::fs::write(t.path().join("p.toml"), text).unwrap();
        let o = veilfs(t.path(), &["check", "p.toml"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{text}: {err}");
        assert!(err.contains(want), "{text}:\nwant {want}\ngot {err}");
    }
}

/// A denied path that git tracks: its content is in `.git/objects`, which veilfs
/// cannot filter; `check` and `explain` say so (an untracked one is not named).
#[test]
fn a_denied_path_tracked_in_git_is_a_warning() {
    let (_, t) = check_in_workspace(
        "extends = \"default\"\n[[rules]]\naction = \"deny\"\npaths = [\"config/prod.yaml\"]\n",
    );
    let ws = t.path();
    git(ws, &["init", "-q", "."]);
    git(ws, &["add", "config/prod.yaml"]);
    git(ws, &["commit", "-qm", "x"]);
    let want = "warning: config/prod.yaml is denied but tracked in git: its content is \
                readable through history (`git show HEAD:config/prod.yaml`); deny `.git/` \
                or remove it from history";
    let o = veilfs(ws, &["check"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(want), "{err}");
    // certs/dev.key is denied (by the default) but not tracked: not named.
    assert!(!err.contains("certs/dev.key is denied"), "{err}");
    let o = veilfs(ws, &["explain", "config/prod.yaml", "certs/dev.key"]);
    let err = stderr(&o);
    assert!(err.contains(&format!("veilfs explain: {want}")), "{err}");
    assert!(!err.contains("certs/dev.key is denied"), "{err}");
}
