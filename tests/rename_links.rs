//! Renames never expose a descendant; symlinks are served as links and following one
//! meets the policy again; hard links cannot reach into or out of denied places.

mod common;

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::{Fixture, assert_errno};

fn renameat2(from: &Path, to: &Path, flags: u32) -> io::Result<()> {
    let (a, b) = (
        CString::new(from.as_os_str().as_bytes()).unwrap(),
        CString::new(to.as_os_str().as_bytes()).unwrap(),
    );
    // SAFETY: valid C strings.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn attack() -> Fixture {
    let mut f = Fixture::new();
    f.file("a/inner/.token", "TOPSECRET\n")
        .file("a/inner/ok.txt", "ok\n")
        .file("a/other/x.txt", "x\n")
        .file("x/y.txt", "y\n");
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\"/a/inner/.token\"]\n");
    f
}

#[test]
fn renaming_an_ancestor_cannot_expose_a_denied_descendant() {
    let f = attack();
    let before = f.snapshot();
    assert_errno(fs::rename(f.m("a"), f.m("b")), libc::EACCES, "mv a b");
    assert_errno(
        fs::rename(f.m("a/inner"), f.m("inner")),
        libc::EACCES,
        "mv a/inner inner",
    );
    assert_errno(fs::rename(f.m("a"), f.m("x/a2")), libc::EACCES, "mv a x/a2");
    assert_eq!(
        before,
        f.snapshot(),
        "a refused rename changed the backing dir"
    );
    assert_errno(
        fs::read(f.m("b/inner/.token")),
        libc::ENOENT,
        "nothing at b",
    );
    // A rename that exposes nothing is fine.
    fs::rename(f.m("a/other"), f.m("other")).unwrap();
    assert!(f.s("other/x.txt").exists());
}

#[test]
fn exchange_is_checked_in_both_directions() {
    let f = attack();
    let before = f.snapshot();
    assert_errno(
        renameat2(&f.m("a"), &f.m("x"), libc::RENAME_EXCHANGE),
        libc::EACCES,
        "exchange a x",
    );
    assert_errno(
        renameat2(&f.m("x"), &f.m("a"), libc::RENAME_EXCHANGE),
        libc::EACCES,
        "exchange x a",
    );
    assert_eq!(before, f.snapshot());
    renameat2(
        &f.m("a/other/x.txt"),
        &f.m("x/y.txt"),
        libc::RENAME_EXCHANGE,
    )
    .unwrap();
    assert_eq!(fs::read_to_string(f.s("x/y.txt")).unwrap(), "x\n");
}

#[test]
fn noreplace_passes_the_backing_errno_through() {
    let f = attack();
    assert_errno(
        renameat2(
            &f.m("a/other/x.txt"),
            &f.m("x/y.txt"),
            libc::RENAME_NOREPLACE,
        ),
        libc::EEXIST,
        "RENAME_NOREPLACE onto an existing name",
    );
}

#[test]
fn a_rename_that_restricts_takes_effect_at_once() {
    let mut f = Fixture::new();
    f.file("a/inner/file.txt", "now hidden\n");
    // Read-only where it is (a name that may be changed never arrives where none
    // may be made), denied where it goes; by patterns, so that neither `a` nor `b`
    // is a directory on the way to a named path (which is not renamed).
    f.mount(
        "[[rules]]\naction = \"read-only\"\npaths = [\"/a*/inner/\"]\n\n\
         [[rules]]\naction = \"deny\"\npaths = [\"/b*/inner/\"]\n",
    );
    // Warm the kernel's and the daemon's caches under the old name.
    assert_eq!(
        fs::read_to_string(f.m("a/inner/file.txt")).unwrap(),
        "now hidden\n"
    );
    fs::rename(f.m("a"), f.m("b")).unwrap();
    // At once: every open asks the daemon, whose decisions went stale with the
    // rename before it was answered (the kernel's cached subtree, dropped a moment
    // later, serves no open). This once stayed readable for two seconds.
    assert_errno(
        fs::read(f.m("b/inner/file.txt")),
        libc::EACCES,
        "read under the new, denied name",
    );
    // Listing it is refused: at `opendir`, or (when the kernel still holds the
    // moved directory and opens it without asking) at the first read.
    assert_errno(
        fs::read_dir(f.m("b/inner")).and_then(|mut d| d.next().transpose()),
        libc::EACCES,
        "list the new, denied name",
    );
}

fn links() -> Fixture {
    let mut f = Fixture::new();
    f.file(".env", "TOPSECRET\n")
        .file("secrets/token.txt", "TOPSECRET\n")
        .file("deep/x/keep.txt", "k\n")
        .file("ok.txt", "ok\n");
    symlink(".env", f.s("to-env")).unwrap();
    symlink("../../secrets/token.txt", f.s("deep/x/to-token")).unwrap();
    symlink("secrets", f.s("to-secrets")).unwrap();
    symlink("deep/x/../../.env", f.s("dotdot")).unwrap();
    symlink("ok.txt", f.s("to-ok")).unwrap();
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\".env\", \"secrets/\", \"*.pem\"]\n");
    f
}

#[test]
fn symlinks_are_served_as_links_and_followed_through_the_policy() {
    let f = links();
    assert_eq!(fs::read_link(f.m("to-env")).unwrap(), Path::new(".env"));
    assert_errno(
        fs::read(f.m("to-env")),
        libc::EACCES,
        "relative link to .env",
    );
    assert_errno(
        fs::read(f.m("deep/x/to-token")),
        libc::EACCES,
        "link up into secrets/",
    );
    assert_errno(
        fs::read_dir(f.m("to-secrets")),
        libc::EACCES,
        "link to a denied directory",
    );
    assert_errno(
        fs::read(f.m("to-secrets/token.txt")),
        libc::EACCES,
        "through a link to a denied directory",
    );
    assert_errno(fs::read(f.m("dotdot")), libc::EACCES, "..-laden link");
    assert_eq!(fs::read_to_string(f.m("to-ok")).unwrap(), "ok\n");
    let abs = f.m(".env");
    symlink(&abs, f.s("absolute")).unwrap();
    assert_errno(
        fs::read(f.m("absolute")),
        libc::EACCES,
        "absolute link into the mount",
    );
}

#[test]
fn a_symlink_cannot_be_created_at_a_denied_name() {
    let f = links();
    let before = f.snapshot();
    assert_errno(
        symlink("ok.txt", f.m("new.pem")),
        libc::EACCES,
        "symlink named *.pem",
    );
    assert_errno(
        symlink("ok.txt", f.m("secrets/l")),
        libc::EACCES,
        "symlink inside secrets/",
    );
    assert_eq!(before, f.snapshot());
    // Its target is checked when followed, not when made.
    symlink(".env", f.m("later")).unwrap();
    assert_errno(
        fs::read(f.m("later")),
        libc::EACCES,
        "following the new link",
    );
}

#[test]
fn hard_links_cannot_reach_into_or_out_of_denied_places() {
    let f = links();
    let before = f.snapshot();
    assert_errno(
        fs::hard_link(f.m(".env"), f.m("env-copy")),
        libc::EACCES,
        "link out of .env",
    );
    assert_errno(
        fs::hard_link(f.m("secrets/token.txt"), f.m("t")),
        libc::EACCES,
        "link out of secrets/",
    );
    assert_errno(
        fs::hard_link(f.m("ok.txt"), f.m("secrets/ok")),
        libc::EACCES,
        "link into secrets/",
    );
    assert_errno(
        fs::hard_link(f.m("ok.txt"), f.m("ok.pem")),
        libc::EACCES,
        "link to a denied name",
    );
    assert_eq!(before, f.snapshot());
    fs::hard_link(f.m("ok.txt"), f.m("deep/ok2.txt")).unwrap();
    assert_eq!(fs::read_to_string(f.s("deep/ok2.txt")).unwrap(), "ok\n");
}

/// A directory's move is checked by walking its subtree; a second rename that moved
/// a subtree into it during that walk (allowed on its own: the secret is denied at
/// both its old and its new place) slipped past the check, and the first rename
/// then exposed the secret. The two renames race here many times.
#[test]
fn a_subtree_moved_in_while_a_rename_is_checked_is_never_exposed() {
    let mut f = Fixture::new();
    f.file("c/x/tok", "TOKEN\n").dir("a");
    // Enough entries that the walk of `a` takes a while.
    for i in 0..20_000 {
        fs::File::create(f.s(&format!("a/f{i}"))).unwrap();
    }
    f.mount(
        "default = \"allow\"\n\n[[rules]]\naction = \"deny\"\npaths = [\"/a/x/tok\", \"/c/x/tok\"]\n",
    );
    for round in 0..40 {
        let (a, b) = (f.m("a"), f.m("b"));
        let mover = std::thread::spawn(move || fs::rename(a, b).is_ok());
        std::thread::sleep(std::time::Duration::from_micros(500 * (round % 10)));
        let _ = fs::rename(f.m("c/x"), f.m("a/x"));
        let _ = mover.join().unwrap();
        let leak = fs::read_to_string(f.m("b/x/tok"));
        assert!(
            leak.is_err(),
            "round {round}: the secret is readable at b/x/tok: {leak:?}"
        );
        assert!(
            !f.s("b/x/tok").exists(),
            "round {round}: both renames went through, moving the secret to an allowed path"
        );
        // Back to the start.
        for p in ["b/x", "a/x"] {
            if f.s(p).exists() {
                fs::rename(f.s(p), f.s("c/x")).unwrap();
            }
        }
        if f.s("b").exists() {
            fs::rename(f.s("b"), f.s("a")).unwrap();
        }
    }
}
