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

/// Without any ignore file at start, a command plants `sub/.cursorignore` with a
/// `!` line; the person later adds a root `.cursorignore` hiding that name. The
/// default applies no `!` line, so the planted file re-includes nothing.
#[test]
fn a_planted_negation_never_re_includes_what_a_later_root_file_hides() {
    let t = Tree {
        tmp: common::temp_tree(
            "veilfs-default-planted",
            &["ws/sub/deep", "mnt", "rt", "home"],
        ),
    };
    for rel in ["ws/creds.txt", "ws/sub/creds.txt", "ws/sub/deep/creds.txt"] {
        std::fs::write(t.p(rel), "CREDS\n").unwrap();
    }
    let mount = || t.mount();
    let d = mount();
    std::fs::write(t.p("mnt/sub/.cursorignore"), "!creds.txt\n").unwrap();
    drop(d);
    std::fs::write(t.p("ws/.cursorignore"), "creds.txt\n").unwrap();
    let d = mount();
    assert!(
        d.said.contains("with the rules of .cursorignore"),
        "{}",
        d.said
    );
    for rel in ["creds.txt", "sub/creds.txt", "sub/deep/creds.txt"] {
        assert_errno(std::fs::read(t.p("mnt").join(rel)), libc::EACCES, rel);
    }
    drop(d);
}
