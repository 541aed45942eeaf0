//! Any depth the backing filesystem allows is served: a chain of directories far
//! deeper than a request thread's stack could recurse is walked, looked up at the
//! bottom after every cached decision went stale, and renamed (refused when the
//! rename would expose a denied file at the bottom), and the mount keeps serving.
//!
//! Paths here are far longer than `PATH_MAX`, so everything goes one name at a time
//! relative to a directory descriptor.

mod common;

use std::ffi::CStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use common::{Fixture, assert_errno};
use veilfs::sys;

/// Levels below the top directory: deep enough that a walk recursing once per level
/// overflows a request thread's stack.
const DEPTH: usize = 12_000;

fn dir_at(path: &Path) -> OwnedFd {
    OwnedFd::from(std::fs::File::open(path).unwrap())
}

fn open_dir(dir: &OwnedFd, name: &CStr) -> std::io::Result<OwnedFd> {
    sys::openat(dir.as_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0)
}

/// Builds `top/d/d/…/d` (`DEPTH` levels of `d` below `top`) in `root`, with the file
/// `leaf` (content `bottom`) in the deepest directory.
fn build_chain(root: &Path, top: &CStr, leaf: &CStr) {
    let mut dir = dir_at(root);
    sys::mkdirat(dir.as_fd(), top, 0o755).unwrap();
    dir = open_dir(&dir, top).unwrap();
    for _ in 0..DEPTH {
        sys::mkdirat(dir.as_fd(), c"d", 0o755).unwrap();
        dir = open_dir(&dir, c"d").unwrap();
    }
    let fd = sys::openat(
        dir.as_fd(),
        leaf,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        0o644,
    )
    .unwrap();
    std::fs::File::from(fd).write_all(b"bottom\n").unwrap();
}

/// The deepest directory of the chain `top` under `root`, reached one lookup at a
/// time (through the mount, each one is a request at a greater depth).
fn descend(root: &Path, top: &CStr) -> OwnedFd {
    let mut dir = open_dir(&dir_at(root), top).unwrap();
    for level in 0..DEPTH {
        dir = open_dir(&dir, c"d").unwrap_or_else(|e| panic!("lookup at depth {level}: {e}"));
    }
    dir
}

/// Removes the chain `top` under `root` (the files `leaves` in its deepest
/// directory first), climbing back with `..`: neither a recursive walk nor one
/// descriptor per level.
fn remove_chain(root: &Path, top: &CStr, leaves: &[&CStr]) {
    let bottom = descend(root, top);
    for leaf in leaves {
        sys::unlinkat(bottom.as_fd(), leaf, false).unwrap();
    }
    let mut dir = bottom;
    for _ in 0..DEPTH {
        let up = sys::openat(dir.as_fd(), c"..", libc::O_PATH | libc::O_DIRECTORY, 0).unwrap();
        sys::unlinkat(up.as_fd(), c"d", true).unwrap();
        dir = up;
    }
    sys::unlinkat(dir_at(root).as_fd(), top, true).unwrap();
}

fn read_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<String> {
    let fd = sys::openat(dir.as_fd(), name, libc::O_RDONLY, 0)?;
    let mut s = String::new();
    std::fs::File::from(fd).read_to_string(&mut s)?;
    Ok(s)
}

/// The mount still answers at its root.
fn still_serving(f: &Fixture) {
    let names: Vec<_> = std::fs::read_dir(f.m(""))
        .expect("the mount stopped serving")
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(!names.is_empty(), "the mount root lists nothing");
}

#[test]
fn a_chain_deeper_than_any_stack_is_walked_renamed_and_served() {
    // Both variants in one test, one after the other: each mount holds a descriptor
    // per directory the kernel knows, and two at once would approach the open-file
    // limit.
    nothing_denied_below();
    a_denied_file_at_the_bottom();
}

fn nothing_denied_below() {
    let mut f = Fixture::new();
    f.dir("x");
    build_chain(&f.src, c"top", c"leaf.txt");
    f.mount("default = \"allow\"\n");

    let bottom = descend(&f.mnt, c"top");
    assert_eq!(read_at(&bottom, c"leaf.txt").unwrap(), "bottom\n");
    // A directory rename elsewhere makes every cached decision stale: the next
    // request at the bottom recomputes them along the whole chain.
    std::fs::rename(f.m("x"), f.m("y")).unwrap();
    assert_errno(
        sys::statat(bottom.as_fd(), c"missing"),
        libc::ENOENT,
        "lookup at the bottom after a rename elsewhere",
    );
    let made = sys::openat(
        bottom.as_fd(),
        c"new.txt",
        libc::O_WRONLY | libc::O_CREAT,
        0o644,
    );
    std::fs::File::from(made.expect("create at the bottom"))
        .write_all(b"new\n")
        .unwrap();
    drop(bottom);

    std::fs::rename(f.m("top"), f.m("moved")).expect("renaming the top of the chain");
    still_serving(&f);
    let bottom = descend(&f.mnt, c"moved");
    assert_eq!(read_at(&bottom, c"leaf.txt").unwrap(), "bottom\n");
    assert_eq!(read_at(&bottom, c"new.txt").unwrap(), "new\n");
    drop(bottom);

    f.mount.take().unwrap().unmount().unwrap();
    remove_chain(&f.src, c"moved", &[c"leaf.txt", c"new.txt"]);
}

fn a_denied_file_at_the_bottom() {
    let mut f = Fixture::new();
    build_chain(&f.src, c"top", c"secret");
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\"/top/**/secret\"]\n");

    let bottom = descend(&f.mnt, c"top");
    assert_errno(
        sys::statat(bottom.as_fd(), c"secret"),
        libc::EACCES,
        "the denied file at the bottom",
    );
    drop(bottom);

    // Under another name the file would no longer be denied.
    assert_errno(
        std::fs::rename(f.m("top"), f.m("moved")),
        libc::EACCES,
        "renaming the top of the chain",
    );
    assert!(f.s("top").is_dir() && !f.s("moved").exists());
    still_serving(&f);
    let bottom = descend(&f.mnt, c"top");
    assert_errno(
        sys::statat(bottom.as_fd(), c"secret"),
        libc::EACCES,
        "the denied file at the bottom, after the refused rename",
    );
    drop(bottom);

    f.mount.take().unwrap().unmount().unwrap();
    remove_chain(&f.src, c"top", &[c"secret"]);
}
