//! The action × operation matrix of `tests/enforce.rs`, against the filesystem
//! object directly: each operation made as the kernel would make it (names looked
//! up one at a time, then the request), in milliseconds and without a mount. Every
//! change to a read-only or denied path, and every access to a denied one, is
//! refused (`EACCES` at the kernel) and leaves the backing directory exactly as it
//! was; what the policy allows is served. Listings hide, and a rename never exposes
//! a denied descendant. `tests/enforce.rs`, `tests/hiding.rs` and
//! `tests/rename_links.rs` keep the same cases through a real mount, for what only
//! the kernel shows.

mod common;

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use veilfs::fs::inode::ROOT;
use veilfs::fs::ops::SetAttr;

use common::inproc::{Ws, cx};
use common::{MATRIX_FILES as FILES, MATRIX_POLICY as POLICY};

/// A fresh workspace with [`FILES`], served by [`POLICY`].
fn matrix_ws() -> Ws {
    Ws::new(POLICY, &FILES)
}

/// The node of `rel`'s parent directory, and `rel`'s last name.
fn parent<'a>(ws: &Ws, rel: &'a str) -> io::Result<(u64, &'a OsStr)> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    Ok((ws.walk(dir)?, OsStr::new(name)))
}

type Op = fn(&Ws, &str) -> io::Result<()>;

fn is_dir(ws: &Ws, rel: &str) -> bool {
    ws.s(rel).is_dir()
}

fn read(ws: &Ws, rel: &str) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    if is_dir(ws, rel) {
        ws.fs.opendir(&cx(), ino)?;
        return ws.fs.listing_at(&cx(), ino, 0).map(drop);
    }
    let fh = ws.fs.open(&cx(), ino, libc::O_RDONLY)?;
    let r = ws.fs.read(&cx(), ino, fh, 0, 4096).map(drop);
    ws.fs.release(fh);
    r
}
fn stat(ws: &Ws, rel: &str) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    ws.fs.getattr(&cx(), ino, None).map(drop)
}
fn write_with(ws: &Ws, rel: &str, flags: i32) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    let fh = ws.fs.open(&cx(), ino, flags)?;
    let r = ws.fs.write(&cx(), ino, fh, 0, b"x").map(drop);
    ws.fs.release(fh);
    r
}
fn write(ws: &Ws, rel: &str) -> io::Result<()> {
    write_with(ws, rel, libc::O_WRONLY)
}
fn append(ws: &Ws, rel: &str) -> io::Result<()> {
    write_with(ws, rel, libc::O_WRONLY | libc::O_APPEND)
}
fn setattr(ws: &Ws, rel: &str, a: SetAttr) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    ws.fs.setattr(&cx(), ino, &a, None).map(drop)
}
fn truncate(ws: &Ws, rel: &str) -> io::Result<()> {
    setattr(
        ws,
        rel,
        SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
    )
}
fn chmod(ws: &Ws, rel: &str) -> io::Result<()> {
    setattr(
        ws,
        rel,
        SetAttr {
            mode: Some(0o777),
            ..SetAttr::default()
        },
    )
}
fn chown(ws: &Ws, rel: &str) -> io::Result<()> {
    setattr(
        ws,
        rel,
        SetAttr {
            uid: Some(1),
            gid: Some(1),
            ..SetAttr::default()
        },
    )
}
fn utimes(ws: &Ws, rel: &str) -> io::Result<()> {
    setattr(
        ws,
        rel,
        SetAttr {
            atime: Some(None),
            mtime: Some(None),
            ..SetAttr::default()
        },
    )
}
fn setxattr(ws: &Ws, rel: &str) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    ws.fs
        .setxattr(&cx(), ino, OsStr::new("user.veilfs"), b"1", 0)
}
fn remove(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.walk(rel)?;
    if is_dir(ws, rel) {
        ws.fs.rmdir(&cx(), dir, name)
    } else {
        ws.fs.unlink(&cx(), dir, name)
    }
}
fn rename_out(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.walk(rel)?;
    ws.fs
        .rename(&cx(), dir, name, ROOT, OsStr::new("moved"), 0)
        .map(drop)
}
fn rename_in(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.walk("ok.txt")?;
    ws.fs
        .rename(&cx(), ROOT, OsStr::new("ok.txt"), dir, name, 0)
        .map(drop)
}
fn link_from(ws: &Ws, rel: &str) -> io::Result<()> {
    let ino = ws.walk(rel)?;
    ws.fs.link(&cx(), ino, ROOT, OsStr::new("alias")).map(drop)
}
fn link_onto(ws: &Ws, rel: &str) -> io::Result<()> {
    let ok = ws.walk("ok.txt")?;
    let (dir, name) = parent(ws, rel)?;
    let new = format!("{}.new", name.to_string_lossy());
    ws.fs.link(&cx(), ok, dir, OsStr::new(&new)).map(drop)
}
fn create_inside(ws: &Ws, rel: &str) -> io::Result<()> {
    let dir = ws.walk(rel)?;
    let (_, _, fh) = ws.fs.create(
        &cx(),
        dir,
        OsStr::new("new.txt"),
        0o644,
        0o022,
        libc::O_WRONLY | libc::O_CREAT,
    )?;
    ws.fs.release(fh);
    Ok(())
}
fn write_new(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    let (_, _, fh) = ws.fs.create(
        &cx(),
        dir,
        name,
        0o644,
        0o022,
        libc::O_WRONLY | libc::O_CREAT,
    )?;
    ws.fs.release(fh);
    Ok(())
}
fn mkdir_inside(ws: &Ws, rel: &str) -> io::Result<()> {
    let dir = ws.walk(rel)?;
    ws.fs
        .mkdir(&cx(), dir, OsStr::new("newdir"), 0o755, 0)
        .map(drop)
}
fn symlink_inside(ws: &Ws, rel: &str) -> io::Result<()> {
    let dir = ws.walk(rel)?;
    ws.fs
        .symlink(
            &cx(),
            dir,
            OsStr::new("link"),
            Path::new("target").as_os_str(),
        )
        .map(drop)
}
fn mknod_inside(ws: &Ws, rel: &str) -> io::Result<()> {
    let dir = ws.walk(rel)?;
    ws.fs
        .mknod(&cx(), dir, OsStr::new("fifo"), libc::S_IFIFO | 0o644, 0, 0)
        .map(drop)
}

/// The errno the kernel would get for `e`: a policy refusal is `EACCES`.
fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(match e.kind() {
        io::ErrorKind::PermissionDenied => libc::EACCES,
        _ => libc::EIO,
    })
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    Refused,
    Allowed,
}
use Outcome::{Allowed, Refused};

const MATRIX: &[(&str, &str, Op, Outcome)] = &[
    // A denied file: nothing at all.
    (".env", "read", read, Refused),
    (".env", "stat", stat, Refused),
    (".env", "write", write, Refused),
    (".env", "append", append, Refused),
    (".env", "truncate", truncate, Refused),
    (".env", "chmod", chmod, Refused),
    (".env", "chown", chown, Refused),
    (".env", "utimes", utimes, Refused),
    (".env", "setxattr", setxattr, Refused),
    (".env", "unlink", remove, Refused),
    (".env", "rename out", rename_out, Refused),
    (".env", "rename in", rename_in, Refused),
    (".env", "link from", link_from, Refused),
    ("app/key.pem", "read (nested glob)", read, Refused),
    (
        "app/missing.pem",
        "stat (missing denied name)",
        stat,
        Refused,
    ),
    ("other.pem", "create (denied name)", write_new, Refused),
    // A denied directory.
    ("secrets", "list", read, Refused),
    ("secrets", "stat", stat, Refused),
    ("secrets/token", "read child", read, Refused),
    ("secrets", "rmdir", remove, Refused),
    ("secrets", "rename out", rename_out, Refused),
    ("secrets", "create inside", create_inside, Refused),
    ("secrets", "mkdir inside", mkdir_inside, Refused),
    ("secrets", "chmod", chmod, Refused),
    // A read-only file: readable, unchangeable.
    ("README.md", "read", read, Allowed),
    ("README.md", "stat", stat, Allowed),
    ("README.md", "write", write, Refused),
    ("README.md", "append", append, Refused),
    ("README.md", "truncate", truncate, Refused),
    ("README.md", "chmod", chmod, Refused),
    ("README.md", "chown", chown, Refused),
    ("README.md", "utimes", utimes, Refused),
    ("README.md", "setxattr", setxattr, Refused),
    ("README.md", "unlink", remove, Refused),
    ("README.md", "rename out", rename_out, Refused),
    ("README.md", "rename in", rename_in, Refused),
    ("README.md", "link from", link_from, Refused),
    // A read-only directory.
    ("ro", "list", read, Allowed),
    ("ro/a.txt", "read child", read, Allowed),
    ("ro/a.txt", "write child", write, Refused),
    ("ro/a.txt", "unlink child", remove, Refused),
    ("ro/a.txt", "rename child out", rename_out, Refused),
    ("ro/b.txt", "rename in", rename_in, Refused),
    ("ro/a.txt", "link onto", link_onto, Refused),
    ("ro", "create inside", create_inside, Refused),
    ("ro", "mkdir inside", mkdir_inside, Refused),
    ("ro", "symlink inside", symlink_inside, Refused),
    ("ro", "mknod inside", mknod_inside, Refused),
    ("ro", "rmdir", remove, Refused),
    ("ro", "rename out", rename_out, Refused),
    ("ro", "chmod", chmod, Refused),
    // What the policy allows is served.
    ("ok.txt", "write", write, Allowed),
    ("ok.txt", "chmod", chmod, Allowed),
    ("ok.txt", "setxattr", setxattr, Allowed),
    ("app", "mknod inside", mknod_inside, Allowed),
];

#[test]
fn every_action_and_operation_without_a_mount() {
    let mut wrong = Vec::new();
    for &(target, what, op, want) in MATRIX {
        let ws = matrix_ws();
        let before = common::snapshot(&ws.src);
        let r = op(&ws, target);
        let after = common::snapshot(&ws.src);
        match (want, &r) {
            (Refused, Err(e)) if errno(e) == libc::EACCES => {
                if before != after {
                    wrong.push(format!(
                        "{what} on {target}: refused but the backing tree changed"
                    ));
                }
            }
            (Allowed, Ok(())) => {}
            _ => wrong.push(format!("{what} on {target}: wanted {want:?}, got {r:?}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        MATRIX.len(),
        wrong.join("\n")
    );
}

/// Hiding without a mount: a listing shows only what may be seen, a directory
/// holding only hidden entries cannot be removed (`ENOTEMPTY`, never what is
/// there), and a denied name answers `EACCES` whether or not it exists.
#[test]
fn listings_hide_what_is_denied_without_a_mount() {
    let ws = Ws::new(
        POLICY,
        &[
            (".env", "x"),
            ("secrets/token", "x"),
            ("app/key.pem", "x"),
            ("app/main.rs", "x"),
            ("only-hidden/.env", "x"),
            ("ok.txt", "x"),
        ],
    );
    assert_eq!(ws.names(""), ["app", "ok.txt", "only-hidden"]);
    assert_eq!(ws.names("app"), ["main.rs"]);
    assert_eq!(ws.names("only-hidden"), Vec::<String>::new());
    let (dir, name) = parent(&ws, "only-hidden").unwrap();
    let e = ws.fs.rmdir(&cx(), dir, name).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY), "{e}");
    assert!(ws.s("only-hidden/.env").exists());
    for rel in [".env", "nothing/.env", "app/missing.pem"] {
        let e = ws.walk(rel).unwrap_err();
        assert_eq!(
            errno(&e),
            if rel.starts_with("nothing") {
                libc::ENOENT
            } else {
                libc::EACCES
            },
            "{rel}: {e}"
        );
    }
}

/// Renames without a mount: moving an ancestor of a denied path (by rename or by
/// exchange, either way round) would expose it under a new name and is refused
/// with the backing tree untouched; a rename that exposes nothing is served.
#[test]
fn a_rename_never_exposes_a_denied_descendant_without_a_mount() {
    let ws = Ws::new(
        "[[rules]]\naction = \"deny\"\npaths = [\"/a/inner/.token\"]\n",
        &[
            ("a/inner/.token", "TOPSECRET\n"),
            ("a/inner/ok.txt", "ok\n"),
            ("a/other/x.txt", "x\n"),
            ("x/y.txt", "y\n"),
        ],
    );
    let before = common::snapshot(&ws.src);
    let a = OsStr::new("a");
    let a_dir = ws.walk("a").unwrap();
    ws.walk("a/inner").unwrap();
    ws.walk("x").unwrap();
    let attempts: [(&str, io::Result<()>); 4] = [
        (
            "mv a b",
            ws.fs
                .rename(&cx(), ROOT, a, ROOT, OsStr::new("b"), 0)
                .map(drop),
        ),
        (
            "mv a/inner inner",
            ws.fs
                .rename(
                    &cx(),
                    a_dir,
                    OsStr::new("inner"),
                    ROOT,
                    OsStr::new("inner"),
                    0,
                )
                .map(drop),
        ),
        (
            "exchange a x",
            ws.fs
                .rename(&cx(), ROOT, a, ROOT, OsStr::new("x"), libc::RENAME_EXCHANGE)
                .map(drop),
        ),
        (
            "exchange x a",
            ws.fs
                .rename(&cx(), ROOT, OsStr::new("x"), ROOT, a, libc::RENAME_EXCHANGE)
                .map(drop),
        ),
    ];
    for (what, r) in attempts {
        match r {
            Err(e) if errno(&e) == libc::EACCES => {}
            other => panic!("{what}: wanted EACCES, got {other:?}"),
        }
    }
    assert_eq!(
        before,
        common::snapshot(&ws.src),
        "a refused rename changed the backing tree"
    );
    ws.walk("a/other").unwrap();
    ws.fs
        .rename(
            &cx(),
            a_dir,
            OsStr::new("other"),
            ROOT,
            OsStr::new("other"),
            0,
        )
        .unwrap();
    assert!(ws.s("other/x.txt").exists());
}
