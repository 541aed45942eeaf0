//! The built-in default policy honours the ignore files a workspace already has
//! (`.cursorignore` and kin at its root): without a policy file, what they list is
//! hidden through `veilfs mount` and `veilfs run`, the start-up line and `explain`
//! say so, the files cannot be changed through the mount, and an outside edit
//! reloads.

mod common;

use std::time::Duration;

use common::{Tree, assert_errno, wait_until};

/// A workspace with ignore files at its root and in `sub`; `mnt`, `rt` beside it.
fn ignore_tree() -> Tree {
    let t = Tree::new("veilfs-default-imports", &["ws/sub", "mnt", "rt", "home"]);
    for (rel, body) in [
        ("ws/.cursorignore", "secret.txt\n"),
        ("ws/secret.txt", "SECRET-1\n"),
        ("ws/readme.md", "readme\n"),
        ("ws/sub/.aiexclude", "notes.txt\n"),
        ("ws/sub/notes.txt", "sub-notes\n"),
    ] {
        std::fs::write(t.p(rel), body).unwrap();
    }
    t
}

#[test]
fn without_a_policy_file_the_ignore_files_are_honoured_through_a_mount() {
    let t = ignore_tree();
    let d = t.mount();
    assert!(
        d.said
            .contains("with policy built-in default policy, with the rules of .cursorignore"),
        "{}",
        d.said
    );
    let m = |rel: &str| t.p("mnt").join(rel);
    assert_errno(std::fs::read(m("secret.txt")), libc::EACCES, "secret.txt");
    assert_eq!(std::fs::read_to_string(m("readme.md")).unwrap(), "readme\n");
    // The subdirectory's `.aiexclude` is not honoured: only the names present at
    // the root are imported (documented).
    assert_eq!(
        std::fs::read_to_string(m("sub/notes.txt")).unwrap(),
        "sub-notes\n"
    );
    let listed: Vec<String> = std::fs::read_dir(t.p("mnt"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!listed.contains(&"secret.txt".to_string()), "{listed:?}");
    // The files the default reads rules from cannot be changed through the mount.
    let before = common::snapshot(&t.p("ws"));
    assert_errno(
        std::fs::write(m(".cursorignore"), "nothing\n"),
        libc::EACCES,
        "write .cursorignore",
    );
    assert_errno(
        std::fs::remove_file(m(".cursorignore")),
        libc::EACCES,
        "rm .cursorignore",
    );
    // Nor can any other ignore file name be planted, at the root or below: read
    // at the next start or reload, its `!` lines would loosen what the others hide.
    for name in veilfs::policy::ignore::NAMES {
        for dir in ["", "sub/"] {
            assert_errno(
                std::fs::write(m(&format!("{dir}{name}")), "!secret.txt\n"),
                libc::EACCES,
                &format!("plant {dir}{name}"),
            );
        }
    }
    assert_eq!(
        common::snapshot(&t.p("ws")),
        before,
        "the workspace changed"
    );
    // An outside edit reloads the built-in default with the new rules.
    std::fs::write(t.p("ws/.cursorignore"), "secret.txt\nreadme.md\n").unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::read(m("readme.md"))
            .is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))),
        "readme.md is still readable after the edit"
    );
    // `explain` says where the rule comes from.
    let o = t
        .veilfs()
        .args(["explain", "secret.txt"])
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("# policy: built-in default policy, with the rules of .cursorignore"),
        "{out}"
    );
    assert!(
        out.contains("deny      secret.txt  (rule ")
            && out.contains("\"secret.txt\" (.cursorignore:1): listed in an ignore file"),
        "{out}"
    );
}

#[test]
fn veilfs_run_without_a_policy_file_honours_them_too() {
    let t = ignore_tree();
    let o = t
        .veilfs()
        .env("HOME", t.p("home"))
        .env_remove("XDG_CONFIG_HOME")
        .args(["run", "--workspace"])
        .arg(t.p("ws"))
        .args([
            "--",
            "sh",
            "-c",
            "cat secret.txt; echo rc=$?; cat readme.md; echo x > .cursorignore; echo w=$?; \
             echo '!secret.txt' > .geminiignore; echo g=$?",
        ])
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("rc=1\nreadme\n"), "{out}\n{err}");
    assert!(out.contains("w=") && !out.contains("w=0"), "{out}\n{err}");
    assert!(out.contains("g=") && !out.contains("g=0"), "{out}\n{err}");
    assert!(
        !t.p("ws/.geminiignore").exists(),
        "a .geminiignore was planted"
    );
    assert!(!out.contains("SECRET-1"), "{out}");
    assert!(
        err.contains("built-in default policy, with the rules of .cursorignore"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(t.p("ws/.cursorignore")).unwrap(),
        "secret.txt\n"
    );
}

/// Without any ignore file at start, a command tries to plant `sub/.cursorignore`
/// with a `!` line: read at the next start, after the person adds a root
/// `.cursorignore` hiding that name, it would re-include what the person's file
/// hides. Every ignore file name is read-only at every depth even with none at the
/// root, so nothing is planted and the person's file hides the name everywhere.
#[test]
fn a_negation_cannot_be_planted_before_a_root_file_exists() {
    let t = Tree {
        tmp: common::temp_tree(
            "veilfs-default-planted",
            &["ws/sub/deep", "mnt", "rt", "home"],
        ),
    };
    for rel in ["ws/creds.txt", "ws/sub/creds.txt", "ws/sub/deep/creds.txt"] {
        std::fs::write(t.p(rel), "CREDS\n").unwrap();
    }
    let d = t.mount();
    let before = common::snapshot(&t.p("ws"));
    for name in veilfs::policy::ignore::NAMES {
        for dir in ["", "sub/", "sub/deep/"] {
            assert_errno(
                std::fs::write(t.m(&format!("{dir}{name}")), "!creds.txt\n"),
                libc::EACCES,
                &format!("plant {dir}{name}"),
            );
        }
    }
    assert_eq!(
        common::snapshot(&t.p("ws")),
        before,
        "something was planted"
    );
    drop(d);
    std::fs::write(t.p("ws/.cursorignore"), "creds.txt\n").unwrap();
    let d = t.mount();
    assert!(
        d.said.contains("with the rules of .cursorignore"),
        "{}",
        d.said
    );
    for rel in ["creds.txt", "sub/creds.txt", "sub/deep/creds.txt"] {
        assert_errno(std::fs::read(t.m(rel)), libc::EACCES, rel);
    }
    drop(d);
}

/// A workspace whose root `.cursorignore` hides `*.log` but re-includes `keep.log`
/// (and tries `!.env`), and whose `.geminiignore` tries to re-include `x.log`.
fn negation_tree() -> Tree {
    let t = Tree::new("veilfs-default-negation", &["ws/sub", "mnt", "rt", "home"]);
    for (rel, body) in [
        ("ws/.cursorignore", "*.log\n!keep.log\n!.env\n"),
        ("ws/.geminiignore", "notes.txt\n!x.log\n"),
        ("ws/keep.log", "KEEP\n"),
        ("ws/x.log", "X-LOG\n"),
        ("ws/.env", "TOKEN=1\n"),
        ("ws/notes.txt", "NOTES\n"),
        ("ws/other.txt", "other\n"),
        ("ws/sub/.cursorignore", "*.tmp\n"),
        ("ws/sub/keep.log", "SUB-KEEP\n"),
        ("ws/sub/x.log", "SUB-X\n"),
    ] {
        std::fs::write(t.p(rel), body).unwrap();
    }
    t
}

#[test]
fn a_re_included_file_is_listed_and_no_ignore_file_can_be_written() {
    let t = negation_tree();
    let d = t.mount();
    let listed = common::names(&t.p("mnt"));
    for shown in ["keep.log", "other.txt", ".cursorignore", ".geminiignore"] {
        assert!(listed.contains(&shown.to_string()), "{shown}: {listed:?}");
    }
    for hidden in ["x.log", ".env", "notes.txt"] {
        assert!(
            !listed.contains(&hidden.to_string()),
            "{hidden}: {listed:?}"
        );
    }
    assert_eq!(common::names(&t.m("sub")), [".cursorignore", "keep.log"]);
    assert_eq!(std::fs::read_to_string(t.m("keep.log")).unwrap(), "KEEP\n");
    assert_eq!(
        std::fs::read_to_string(t.m("sub/keep.log")).unwrap(),
        "SUB-KEEP\n"
    );
    for hidden in ["x.log", ".env", "notes.txt", "sub/x.log"] {
        assert_errno(std::fs::read(t.m(hidden)), libc::EACCES, hidden);
    }
    let before = common::snapshot(&t.p("ws"));
    for dir in ["", "sub/"] {
        for name in [".cursorignore", ".geminiignore"] {
            let target = t.m(&format!("{dir}{name}"));
            let what = |op: &str| format!("{op} {dir}{name}");
            // Making a name that exists is refused by the kernel before veilfs is
            // asked: EEXIST.
            let exists = t.p("ws").join(format!("{dir}{name}")).exists();
            let making = if exists { libc::EEXIST } else { libc::EACCES };
            assert_errno(
                std::fs::write(&target, "!x.log\n"),
                libc::EACCES,
                &what("write"),
            );
            if exists {
                assert_errno(
                    std::fs::OpenOptions::new().append(true).open(&target),
                    libc::EACCES,
                    &what("append to"),
                );
            }
            assert_errno(
                std::fs::rename(t.m("other.txt"), &target),
                libc::EACCES,
                &what("rename onto"),
            );
            assert_errno(
                std::fs::hard_link(t.m("other.txt"), &target),
                making,
                &what("link"),
            );
            assert_errno(
                std::os::unix::fs::symlink("other.txt", &target),
                making,
                &what("symlink"),
            );
            assert_errno(std::fs::create_dir(&target), making, &what("mkdir"));
        }
    }
    assert_eq!(
        common::snapshot(&t.p("ws")),
        before,
        "the workspace changed:\n{}",
        common::listing(&t.p("ws"))
    );
    // A name that differs only in case is no file veilfs reads: whether or not it
    // can be made, the next start re-includes nothing by it.
    let _ = std::fs::write(t.m(".CURSORIGNORE"), "!x.log\n!.env\n");
    let _ = std::fs::write(t.m("sub/.GeminiIgnore"), "!x.log\n");
    drop(d);
    let d = t.mount();
    for hidden in ["x.log", ".env", "sub/x.log"] {
        assert_errno(std::fs::read(t.m(hidden)), libc::EACCES, hidden);
    }
    drop(d);
    // `explain` names the line that re-includes `keep.log`.
    let o = t
        .veilfs()
        .args(["explain", "keep.log", ".env"])
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("allow     keep.log  (")
            && out.contains("\"!keep.log\" (.cursorignore:2) takes it out of rule"),
        "{out}"
    );
    assert!(
        out.contains("deny      .env  (")
            && out.contains("\"!.env\" (.cursorignore:3) takes it out of rule"),
        "{out}"
    );
}

/// The same under `veilfs run`: the re-included file is listed and read, the
/// others are not, and no ignore file can be made or changed, by any means.
#[test]
fn veilfs_run_lists_a_re_included_file_and_plants_no_ignore_file() {
    let t = negation_tree();
    let before = common::snapshot(&t.p("ws"));
    let script = "ls -a; echo ---; cat keep.log; cat x.log; echo x=$?; cat .env; echo e=$?; \
                  echo '!x.log' > .cursorignore; echo w=$?; \
                  echo '!x.log' > sub/.geminiignore; echo c=$?; \
                  mv other.txt sub/.cursorignore; echo mv=$?; \
                  ln other.txt .geminiignore; echo ln=$?; \
                  ln -s other.txt sub/.geminiignore; echo sl=$?; \
                  mkdir sub/.cursorignore; echo mk=$?";
    let o = t
        .veilfs()
        .env("HOME", t.p("home"))
        .env_remove("XDG_CONFIG_HOME")
        .args(["run", "--workspace"])
        .arg(t.p("ws"))
        .args(["--", "sh", "-c", script])
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}\n{err}");
    let (listing, rest) = out.split_once("---\n").unwrap_or(("", ""));
    let listed: Vec<&str> = listing.lines().collect();
    assert!(listed.contains(&"keep.log"), "{out}\n{err}");
    for hidden in ["x.log", ".env", "notes.txt"] {
        assert!(!listed.contains(&hidden), "{hidden}: {out}\n{err}");
    }
    assert!(rest.starts_with("KEEP\nx=1\ne=1\n"), "{out}\n{err}");
    for op in ["w", "c", "mv", "ln", "sl", "mk"] {
        assert!(
            rest.contains(&format!("\n{op}=")) && !rest.contains(&format!("\n{op}=0")),
            "{op}: {out}\n{err}"
        );
    }
    assert!(!out.contains("X-LOG") && !out.contains("TOKEN"), "{out}");
    assert_eq!(
        common::snapshot(&t.p("ws")),
        before,
        "the workspace changed:\n{}",
        common::listing(&t.p("ws"))
    );
}
