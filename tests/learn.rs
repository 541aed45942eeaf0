//! A policy learned from a session: `veilfs run --learn LOG` runs a small session
//! (reads, a listing, writes, a directory made, a probe of a missing file),
//! `veilfs init --from-audit LOG` writes the allow-list, and under it the same
//! session runs again while a file the session never touched, and a secret in a
//! directory it learned whole, are refused; `veilfs explain --audit` of the
//! enforcing run shows what the learned policy refused.

mod common;

use common::run::{show, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::require_fuse;

const SECRET: &str = "learn-secret-8086";
const UNTOUCHED: &str = "untouched-notes-4242";

/// The session: what a command does in the workspace, its output the same each
/// time it succeeds.
const SESSION: &str = "set -e
cat src/a.rs src/b.rs > combined.txt
ls src
wc -l < data/x.csv
mkdir -p build
echo built > build/log.txt
mv build/log.txt build/done.txt
test -e missing.cfg || echo no config
echo session done
";

/// A workspace (`ws`) and the directory beside it for the logs.
struct Scratch {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ws: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-learn")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        let ws = dir.join("ws");
        for (path, body) in [
            ("src/a.rs", "fn a() {}\n"),
            ("src/b.rs", "fn b() {}\n"),
            ("src/c.rs", "fn c() {}\n"),
            ("src/.env", SECRET),
            ("data/x.csv", "1\n2\n"),
            ("data/y.csv", "3\n"),
            ("notes.txt", UNTOUCHED),
            ("session.sh", SESSION),
        ] {
            let p = ws.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        Scratch { _tmp: tmp, dir, ws }
    }

    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `veilfs ARGS` in the workspace.
    fn veilfs(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(args)
            .current_dir(&self.ws)
            .output()
            .unwrap()
    }

    /// `veilfs run ARGS -- sh -c SCRIPT` in the workspace.
    fn run(&self, args: &[&str], script: &str) -> Output {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "sh", "-c", script]);
        self.veilfs(&all)
    }

    /// Removes what the session made, as before its first run.
    fn undo_session(&self) {
        std::fs::remove_dir_all(self.ws.join("build")).unwrap();
        std::fs::remove_file(self.ws.join("combined.txt")).unwrap();
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_learned_policy_runs_the_session_again_and_refuses_the_rest() {
    let s = Scratch::new();
    let learn_log = s.log("session.learn.log");

    // The session, learning.
    let learning = s.run(&["--learn", path_str(&learn_log)], "sh session.sh");
    assert!(learning.status.success(), "{}", show(&learning));
    assert!(
        text(&learning.stderr).contains(&format!(
            "LEARNING: nothing in the workspace is refused, every access logged to {}",
            learn_log.display()
        )),
        "{}",
        show(&learning)
    );
    let expected = text(&learning.stdout);
    assert!(
        expected.ends_with("no config\nsession done\n"),
        "{expected}"
    );

    // The policy learned, written and checked.
    let init = s.veilfs(&["init", "--from-audit", path_str(&learn_log)]);
    assert!(init.status.success(), "{}", show(&init));
    assert!(
        text(&init.stdout).contains("(an allow-list learned from"),
        "{}",
        show(&init)
    );
    let policy = std::fs::read_to_string(s.ws.join(".veilfs.toml")).unwrap();
    assert!(policy.contains("default = \"deny\""), "{policy}");
    assert!(
        policy.contains("\"/src\",  # directory, all it holds"),
        "{policy}"
    );
    assert!(
        policy.contains("\"/build\",  # directory, all it holds"),
        "{policy}"
    );
    assert!(!policy.contains("notes.txt"), "{policy}");
    let check = s.veilfs(&["check"]);
    assert!(check.status.success(), "{}\n{policy}", show(&check));
    // Never replaced without --force.
    let again = s.veilfs(&["init", "--from-audit", path_str(&learn_log)]);
    assert_eq!(again.status.code(), Some(1), "{}", show(&again));

    // The same session, enforced, from where it started.
    s.undo_session();
    let enforced_log = s.log("enforced.log");
    let enforced = s.run(&["-q", "--audit", path_str(&enforced_log)], "sh session.sh");
    assert!(enforced.status.success(), "{}\n{policy}", show(&enforced));
    assert_eq!(text(&enforced.stdout), expected, "{}", show(&enforced));
    assert_eq!(
        std::fs::read_to_string(s.ws.join("build/done.txt")).unwrap(),
        "built\n"
    );

    // What the session never touched, and the secret in the directory it listed.
    let audit = s.log("refused.log");
    let o = s.run(
        &["-q", "--audit", path_str(&audit)],
        "cat notes.txt; echo \"notes: $?\"; cat data/y.csv; echo \"y: $?\"; \
         cat src/.env; echo \"env: $?\"; cat src/c.rs",
    );
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(
        out.contains("notes: 1\ny: 1\nenv: 1\nfn c() {}\n"),
        "{}",
        show(&o)
    );
    assert!(
        !out.contains(UNTOUCHED) && !out.contains(SECRET),
        "{}",
        show(&o)
    );
    for refused in ["notes.txt", "data/y.csv", "src/.env"] {
        assert!(
            err.contains(&format!("cat: {refused}: Permission denied")),
            "{refused}: {}",
            show(&o)
        );
    }

    // `explain --audit` of the enforcing run says what the learned policy refused.
    let explained = s.veilfs(&["explain", "--audit", path_str(&audit)]);
    assert!(explained.status.success(), "{}", show(&explained));
    let said = text(&explained.stdout);
    assert!(
        said.contains("no rule matches: the policy default is \"deny\": data/y.csv, notes.txt"),
        "{said}"
    );
    assert!(said.contains("rule 4 \".env\" ("), "{said}");
    assert!(
        said.contains("notes.txt  1 refused by cat; lookup; now deny"),
        "{said}"
    );
}

#[test]
fn learn_is_permissive_audit_and_audit_all_together() {
    let s = Scratch::new();
    for other in [
        &["--audit", "/tmp/x.log"][..],
        &["--audit-all"][..],
        &["--permissive"][..],
    ] {
        let mut args = vec!["--learn", "/tmp/x.learn.log"];
        args.extend_from_slice(other);
        let o = s.run(&args, "true");
        assert_eq!(o.status.code(), Some(2), "{other:?}: {}", show(&o));
        assert!(
            text(&o.stderr).contains("cannot be used with"),
            "{other:?}: {}",
            show(&o)
        );
    }
    // Its log is refused inside the workspace, as --audit's.
    let inside = s.ws.join("x.learn.log");
    let o = s.run(&["--learn", path_str(&inside)], "true");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("inside the workspace"),
        "{}",
        show(&o)
    );
}

#[test]
fn a_log_that_is_not_an_audit_log_is_refused_and_nothing_written() {
    let s = Scratch::new();
    let log = s.log("bad.log");
    std::fs::write(&log, "{\"op\":\"open\"}\nnot json\n").unwrap();
    let o = s.veilfs(&["init", "--from-audit", path_str(&log)]);
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("line 2: not an audit line: not json"),
        "{}",
        show(&o)
    );
    assert!(!s.ws.join(".veilfs.toml").exists());
}

/// A learning log cannot be planted by an earlier session, nor extended by a later
/// one (third attacker pass: a log a session wrote in the home directory, then
/// learned into, gave rules for paths the learning session never used): `--learn`
/// takes a new file named `*.learn.log`, and every session finds such names
/// read-only.
#[test]
fn a_learning_log_is_new_and_no_session_writes_one() {
    let s = Scratch::new();
    let planted = s.log("planted.learn.log");
    std::fs::write(&planted, "{\"op\":\"create\",\"path\":\"secret.txt\"}\n").unwrap();
    let o = s.run(&["--learn", path_str(&planted)], "true");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("exists"), "{}", show(&o));
    let o = s.run(&["--learn", path_str(&s.log("session.log"))], "true");
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("ends in `.learn.log`"),
        "{}",
        show(&o)
    );
    // From inside a session, no such name is made in the home directory, nor is
    // one there extended.
    let home = s.dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("old.learn.log"), "").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--", "sh", "-c"])
        .arg(
            "for f in new.learn.log old.learn.log; do \
             (echo x >> \"$HOME/$f\") 2>/dev/null && echo made || echo refused; done",
        )
        .current_dir(&s.ws)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "refused\nrefused\n", "{}", show(&o));
    assert!(!home.join("new.learn.log").exists());
    assert_eq!(
        std::fs::read_to_string(home.join("old.learn.log")).unwrap(),
        ""
    );
}

/// A learning log is held read-only wherever it lies, whatever the policy says (a
/// home policy without the built-in rules, a workspace): a standing guard, not a
/// rule (fourth attacker pass).
#[test]
fn no_policy_lets_a_session_plant_a_learning_log() {
    let s = Scratch::new();
    let home = s.dir.join("home2");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("old.learn.log"), "").unwrap();
    std::fs::write(s.ws.join("kept.learn.log"), "").unwrap();
    let open = s.dir.join("open.toml");
    std::fs::write(&open, "extends = \"none\"\ndefault = \"allow\"\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--home-policy", path_str(&open), "--", "sh", "-c"])
        .arg(
            "for f in \"$HOME/new.learn.log\" \"$HOME/old.learn.log\" kept.learn.log w.learn.log; do \
             (echo '{}' >> \"$f\") 2>/dev/null && echo made || echo refused; done",
        )
        .current_dir(&s.ws)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(
        text(&o.stdout),
        "refused\nrefused\nrefused\nrefused\n",
        "{}",
        show(&o)
    );
    assert!(!home.join("new.learn.log").exists() && !s.ws.join("w.learn.log").exists());
    assert_eq!(
        std::fs::read_to_string(home.join("old.learn.log")).unwrap(),
        ""
    );
}
