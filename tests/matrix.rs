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

/// Tries one case on `ws`: what went wrong, if anything (a refusal must be
/// `EACCES` and leave the backing tree as it was; what is allowed is served).
fn attempt(ws: &Ws, (target, what, op, want): Case) -> Option<String> {
    let before = common::snapshot(&ws.src);
    let r = op(ws, target);
    let after = common::snapshot(&ws.src);
    match (want, &r) {
        (Refused, Err(e)) if errno(e) == libc::EACCES => (before != after)
            .then(|| format!("{what} on {target}: refused but the backing tree changed")),
        (Allowed, Ok(())) => None,
        _ => Some(format!("{what} on {target}: wanted {want:?}, got {r:?}")),
    }
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
    for &case in MATRIX {
        wrong.extend(attempt(&matrix_ws(), case));
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

fn mkdir_at(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.fs.mkdir(&cx(), dir, name, 0o755, 0).map(drop)
}
fn symlink_at(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.fs
        .symlink(&cx(), dir, name, Path::new("elsewhere").as_os_str())
        .map(drop)
}
fn exchange_with_ok(ws: &Ws, rel: &str) -> io::Result<()> {
    let (dir, name) = parent(ws, rel)?;
    ws.walk(rel)?;
    ws.walk("ok.txt")?;
    ws.fs
        .rename(
            &cx(),
            ROOT,
            OsStr::new("ok.txt"),
            dir,
            name,
            libc::RENAME_EXCHANGE,
        )
        .map(drop)
}

type Case = (&'static str, &'static str, Op, Outcome);

/// A workspace set up for one guard of the gatekeeper, permissive or not.
type Setup = fn(permissive: bool) -> Ws;

fn config(permissive: bool) -> veilfs::fs::config::FsConfig {
    veilfs::fs::config::FsConfig {
        permissive,
        ..Default::default()
    }
}

const ALLOW_ALL: &str = "default = \"allow\"\n";

/// The policy file, read from inside the workspace, with a hard link to it made
/// outside the mount.
fn policy_file_ws(permissive: bool) -> Ws {
    let ws = Ws::build(
        ALLOW_ALL,
        &[("ok.txt", "ok\n"), ("conf/other.txt", "x\n")],
        Some("conf/pol.toml"),
        |_| config(permissive),
    );
    std::fs::hard_link(ws.s("conf/pol.toml"), ws.s("pol-alias")).unwrap();
    ws
}
const POLICY_FILE: &[Case] = &[
    ("conf/pol.toml", "read", read, Allowed),
    ("conf/pol.toml", "write", write, Refused),
    ("conf/pol.toml", "append", append, Refused),
    ("conf/pol.toml", "truncate", truncate, Refused),
    ("conf/pol.toml", "chmod", chmod, Refused),
    ("conf/pol.toml", "utimes", utimes, Refused),
    ("conf/pol.toml", "setxattr", setxattr, Refused),
    ("conf/pol.toml", "unlink", remove, Refused),
    ("conf/pol.toml", "rename out", rename_out, Refused),
    ("conf/pol.toml", "rename over", rename_in, Refused),
    ("conf/pol.toml", "exchange", exchange_with_ok, Refused),
    ("conf/pol.toml", "link from", link_from, Refused),
    ("conf/pol.toml", "create without O_EXCL", write_new, Refused),
    ("pol-alias", "write (a hard link)", write, Refused),
    ("pol-alias", "truncate (a hard link)", truncate, Refused),
    ("pol-alias", "unlink (a hard link)", remove, Refused),
    ("pol-alias", "rename out (a hard link)", rename_out, Refused),
    ("conf", "rename its directory", rename_out, Refused),
    ("conf", "exchange its directory", exchange_with_ok, Refused),
    ("conf/other.txt", "write beside it", write, Allowed),
];

/// The run's audit log, served by the mount.
fn run_log_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            ("logs/audit.log", "{}\n"),
            ("logs/x", "x\n"),
        ],
        None,
        |src| {
            use std::os::unix::fs::MetadataExt;
            let md = std::fs::metadata(src.join("logs/audit.log")).unwrap();
            veilfs::fs::config::FsConfig {
                run_logs: vec![(b"logs/audit.log".to_vec(), (md.dev(), md.ino()))],
                ..config(permissive)
            }
        },
    )
}
const RUN_LOG: &[Case] = &[
    ("logs/audit.log", "read", read, Allowed),
    ("logs/audit.log", "write", write, Refused),
    ("logs/audit.log", "truncate", truncate, Refused),
    ("logs/audit.log", "unlink", remove, Refused),
    ("logs/audit.log", "rename out", rename_out, Refused),
    ("logs/audit.log", "rename over", rename_in, Refused),
    ("logs/audit.log", "link from", link_from, Refused),
    ("logs", "rename its directory", rename_out, Refused),
    ("logs/x", "write beside it", write, Allowed),
];

/// The workspace's own repository under `veilfs run`.
fn git_root_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".git/config", "[core]\n"),
            (".git/hooks/pre-commit", "#!/bin/sh\n"),
            (".git/objects/ab/cd", "x"),
            ("src/main.rs", "x"),
        ],
        None,
        |_| veilfs::fs::config::FsConfig {
            git: veilfs::fs::config::Git::Root,
            ..config(permissive)
        },
    )
}
const GIT_ROOT: &[Case] = &[
    (".git/config", "write", write, Refused),
    (".git/config", "truncate", truncate, Refused),
    (".git/config", "unlink", remove, Refused),
    (".git/config", "rename over", rename_in, Refused),
    (".git/hooks/pre-commit", "chmod", chmod, Refused),
    (".git/hooks", "create a hook", create_inside, Refused),
    (".git/hooks", "symlink a hook", symlink_inside, Refused),
    (
        ".git/objects",
        "symlink into objects",
        symlink_inside,
        Refused,
    ),
    (".git", "rename the repository", rename_out, Refused),
    ("HEAD", "make a bare repository's HEAD", write_new, Refused),
    ("src/.git", "make a repository inside it", mkdir_at, Refused),
    (".git/HEAD", "write what git writes", write, Allowed),
    (
        ".git/objects",
        "make an object directory",
        mkdir_inside,
        Allowed,
    ),
    ("src/main.rs", "write a source file", write, Allowed),
];

/// The home directory under `veilfs run`: every repository that was there.
fn git_everywhere_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            ("p/.git/HEAD", "ref: refs/heads/main\n"),
            ("p/.git/config", "[core]\n"),
            ("q/readme", "x"),
            ("d1/repo/.git/HEAD", "ref: refs/heads/main\n"),
            ("d1/repo/.git/config", "[core]\n"),
            ("b.git/HEAD", "ref: refs/heads/main\n"),
            ("b.git/config", "[core]\n\tbare = true\n"),
            ("b.git/objects/ab/cd", "x"),
        ],
        None,
        |_| veilfs::fs::config::FsConfig {
            git: veilfs::fs::config::Git::Everywhere,
            ..config(permissive)
        },
    )
}
const GIT_EVERYWHERE: &[Case] = &[
    ("p/.git/config", "write", write, Refused),
    ("p/.git", "rename the repository", rename_out, Refused),
    ("p", "move a project that holds one", rename_out, Refused),
    ("d1", "move a directory above one", rename_out, Refused),
    ("b.git/HEAD", "remove a bare one's HEAD", remove, Refused),
    (
        "b.git/HEAD",
        "rename a bare one's HEAD away",
        rename_out,
        Refused,
    ),
    ("b.git", "move a bare one", rename_out, Refused),
    (
        "q/.git",
        "git init in a directory that was there",
        mkdir_at,
        Refused,
    ),
    (
        "q/.git",
        "a .git file pointing elsewhere",
        write_new,
        Refused,
    ),
    ("q/.git", "a .git link", symlink_at, Refused),
    ("q/readme", "write", write, Allowed),
    ("fresh", "make a directory", mkdir_at, Allowed),
];

/// veilfs's configuration directory in the home mount, and one whose way is not
/// there yet.
fn config_dir_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            (".config/veilfs/policy.toml", "x"),
            (".config/other", "x"),
        ],
        None,
        |_| veilfs::fs::config::FsConfig {
            config_dirs: vec![b".config/veilfs".to_vec(), b".local/veilfs".to_vec()],
            ..config(permissive)
        },
    )
}
const CONFIG_DIR: &[Case] = &[
    (".config/veilfs/policy.toml", "write", write, Refused),
    (".config/veilfs/policy.toml", "unlink", remove, Refused),
    (".config/veilfs", "create inside", create_inside, Refused),
    (".config/veilfs", "rename it", rename_out, Refused),
    (".config", "rename the way to it", rename_out, Refused),
    (
        ".local",
        "a link where its way belongs",
        symlink_at,
        Refused,
    ),
    (".local", "a file where its way belongs", write_new, Refused),
    (".local", "its way made as a directory", mkdir_at, Allowed),
    (".config/other", "write beside it", write, Allowed),
];

/// Directories on the way to what the policy names.
fn ways_ws(permissive: bool) -> Ws {
    Ws::build(
        "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\"/deep/secret\"]\n",
        &[("ok.txt", "ok\n"), ("deep/secret", "x"), ("deep/x", "x")],
        None,
        |_| veilfs::fs::config::FsConfig {
            ways: vec![b"deep".to_vec(), b"later".to_vec()],
            ..config(permissive)
        },
    )
}
const WAYS: &[Case] = &[
    ("deep", "rename it", rename_out, Refused),
    ("later", "a link where it belongs", symlink_at, Refused),
    ("later", "a file where it belongs", write_new, Refused),
    ("later", "made as a directory", mkdir_at, Allowed),
    ("deep/x", "write inside", write, Allowed),
];

/// A workspace inside the home directory, under the home policy.
fn outer_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[("ok.txt", "ok\n"), ("private/x", "x"), ("kept.txt", "x")],
        None,
        |_| {
            let home = veilfs::Policy::parse(
                "home.toml",
                "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\"/ws/private/\"]\n\
                 [[rules]]\naction = \"read-only\"\npaths = [\"/ws/kept.txt\"]\n",
            )
            .unwrap();
            veilfs::fs::config::FsConfig {
                outer: Some(veilfs::fs::protect::Outer {
                    prefix: b"ws".to_vec(),
                    policy: std::sync::Arc::new(parking_lot::RwLock::new(std::sync::Arc::new(
                        home,
                    ))),
                }),
                ..config(permissive)
            }
        },
    )
}
const OUTER: &[Case] = &[
    ("private", "list", read, Refused),
    ("private/x", "read", read, Refused),
    ("kept.txt", "read", read, Allowed),
    ("kept.txt", "write", write, Refused),
    ("ok.txt", "write", write, Allowed),
];

/// The workspace's `--policy` file kept by another mount (the home directory's),
/// named as given (a link) and resolved.
fn other_policy_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            ("pol/inner/p.toml", "default = \"deny\"\n"),
            ("pol/other", "x"),
        ],
        None,
        |src| {
            std::os::unix::fs::symlink("pol/inner/p.toml", src.join("pl.toml")).unwrap();
            veilfs::fs::config::FsConfig {
                other_policy_files: vec![b"pl.toml".to_vec(), b"pol/inner/p.toml".to_vec()],
                ..config(permissive)
            }
        },
    )
}
const OTHER_POLICY: &[Case] = &[
    ("pol/inner/p.toml", "write", write, Refused),
    ("pol/inner", "rename its directory", rename_out, Refused),
    ("pol", "rename the directory above", rename_out, Refused),
    ("pl.toml", "remove the link it is named by", remove, Refused),
    ("pl.toml", "rename over the link", rename_in, Refused),
    ("pol/other", "write beside it", write, Allowed),
];

fn dir_onto_cfg(ws: &Ws, rel: &str) -> io::Result<()> {
    ws.walk(rel)?;
    ws.fs
        .rename(&cx(), ROOT, OsStr::new(rel), ROOT, OsStr::new("cfg"), 0)
        .map(drop)
}

/// A read-only path not there yet, and a directory that would bring it.
fn arriving_ws(permissive: bool) -> Ws {
    Ws::build(
        "default = \"allow\"\n[[rules]]\naction = \"read-only\"\npaths = [\"/cfg/prod.yaml\"]\n\
         [[rules]]\naction = \"deny\"\npaths = [\"/cfg/secret\"]\n\
         [[rules]]\naction = \"read-only\"\npaths = [\"*.lock\"]\n",
        &[
            ("ok.txt", "ok\n"),
            ("cfgx/prod.yaml", "PWN\n"),
            ("cfgy/secret", "x"),
            ("cfgz/plain.yaml", "x"),
            ("cfgz/Cargo.lock", "x"),
        ],
        None,
        |_| config(permissive),
    )
}
const ARRIVING: &[Case] = &[
    (
        "cfgx",
        "bring a read-only name by a directory rename",
        dir_onto_cfg,
        Refused,
    ),
    (
        "cfgy",
        "bring a denied name by a directory rename",
        dir_onto_cfg,
        Refused,
    ),
    (
        "cfgz",
        "bring only what may be made (a read-only file stays so)",
        dir_onto_cfg,
        Allowed,
    ),
];

/// A workspace that is no repository, holding one that was there before.
fn nested_repo_ws(permissive: bool) -> Ws {
    Ws::build(
        ALLOW_ALL,
        &[
            ("ok.txt", "ok\n"),
            ("vendor/lib/.git/HEAD", "ref: refs/heads/main\n"),
            ("vendor/lib/.git/config", "[core]\n"),
            ("vendor/lib/src.c", "x"),
        ],
        None,
        |_| veilfs::fs::config::FsConfig {
            git: veilfs::fs::config::Git::Root,
            ..config(permissive)
        },
    )
}
fn make_repo_then_move(ws: &Ws, _: &str) -> io::Result<()> {
    let d = ws
        .fs
        .mkdir(&cx(), ROOT, OsStr::new("mine"), 0o755, 0)?
        .0
        .ino;
    let sub = ws.fs.mkdir(&cx(), d, OsStr::new("lib"), 0o755, 0)?.0.ino;
    ws.fs.mkdir(&cx(), sub, OsStr::new(".git"), 0o755, 0)?;
    ws.fs
        .rename(
            &cx(),
            ROOT,
            OsStr::new("mine"),
            ROOT,
            OsStr::new("mine2"),
            0,
        )
        .map(drop)
}
const NESTED_REPO: &[Case] = &[
    (
        "vendor",
        "move a directory above a repository",
        rename_out,
        Refused,
    ),
    ("vendor/lib", "move the repository", rename_out, Refused),
    (
        "vendor/lib/.git/HEAD",
        "remove its HEAD (git would walk up)",
        remove,
        Refused,
    ),
    (
        "vendor/lib/.git/HEAD",
        "rename its HEAD away",
        rename_out,
        Refused,
    ),
    (
        "vendor/lib/.git/HEAD",
        "rename a HEAD over it, as git does",
        rename_in,
        Allowed,
    ),
    ("vendor/lib/src.c", "write in it", write, Allowed),
    (
        "",
        "move a repository made in the session",
        make_repo_then_move,
        Allowed,
    ),
];

/// The built-in default of a workspace holding one ignore file.
fn builtin_ws(permissive: bool) -> Ws {
    let text = veilfs::workspace::imports::builtin_text(&[".cursorignore"]);
    Ws::build(
        &text,
        &[
            ("ok.txt", "ok\n"),
            (".cursorignore", "x.log\n"),
            ("sub/a", "x"),
        ],
        None,
        |_| config(permissive),
    )
}
const IGNORE_NAMES: &[Case] = &[
    (".cursorignore", "write the imported one", write, Refused),
    (
        ".aiexclude",
        "plant another at the root",
        write_new,
        Refused,
    ),
    ("sub/.geminiignore", "plant one below", write_new, Refused),
    ("sub/a", "write beside", write, Allowed),
];

const GUARDS: &[(&str, Setup, &[Case])] = &[
    ("policy file", policy_file_ws, POLICY_FILE),
    ("run log", run_log_ws, RUN_LOG),
    ("git (root)", git_root_ws, GIT_ROOT),
    ("git (everywhere)", git_everywhere_ws, GIT_EVERYWHERE),
    ("veilfs config", config_dir_ws, CONFIG_DIR),
    ("ways", ways_ws, WAYS),
    ("outer policy", outer_ws, OUTER),
    ("another mount's policy file", other_policy_ws, OTHER_POLICY),
    ("a repository that was there", nested_repo_ws, NESTED_REPO),
    ("ignore file names", builtin_ws, IGNORE_NAMES),
];

/// Every guard of the gatekeeper attacked through every operation that could
/// reach what it keeps, against the filesystem object directly: refused with
/// `EACCES` and the backing tree untouched, in an enforcing mount and in a
/// permissive one alike (permissive mode waives the policy's rules, never a
/// guard); the operation next to it is served, which shows the attack could work.
#[test]
fn every_guard_holds_against_every_operation_without_a_mount() {
    let mut wrong = Vec::new();
    let mut n = 0;
    for &(guard, setup, cases) in GUARDS {
        for permissive in [false, true] {
            let mode = if permissive {
                "permissive"
            } else {
                "enforcing"
            };
            for &case in cases {
                n += 1;
                let w = attempt(&setup(permissive), case);
                wrong.extend(w.map(|w| format!("{guard}, {mode}: {w}")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {n} cases wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// `mig/` asks; `ro/` is read-only, with `ro/q/` asking beneath it.
const ASK_POLICY: &str = "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n\n\
    [[rules]]\naction = \"read-only\"\npaths = [\"ro/\"]\n\n\
    [[rules]]\naction = \"ask\"\npaths = [\"ro/q/\"]\n";

fn ask_ws(permissive: bool) -> Ws {
    Ws::build(
        ASK_POLICY,
        &[
            ("ok.txt", "ok\n"),
            ("mig/001.sql", "create table t;\n"),
            ("mig/sub/002.sql", "drop table t;\n"),
            ("ro/q/a.txt", "q\n"),
        ],
        None,
        |_| veilfs::fs::config::FsConfig {
            permissive,
            approvals: Some(veilfs::fs::ask::Approvals {
                broker: veilfs::fs::ask::Broker::new(
                    "test".into(),
                    std::time::Duration::from_secs(1),
                    None,
                ),
                root: "",
                mount: "test".into(),
                policy_file: None,
            }),
            ..Default::default()
        },
    )
}

/// A request holding `grants` (as one run again after approvals is).
fn with(grants: &[(&str, bool, veilfs::fs::grant::Access)]) -> veilfs::fs::request::Req {
    cx().with_grants(
        grants
            .iter()
            .map(|&(path, beneath, access)| veilfs::fs::grant::Grant {
                root: "",
                path: path.as_bytes().to_vec(),
                beneath,
                access,
            })
            .collect(),
    )
}

/// What a request came to: served, a question (for reading or writing), or
/// refused with an errno.
#[derive(Debug, PartialEq)]
enum Came {
    Served,
    Asks(veilfs::fs::grant::Access),
    Errno(i32),
}

fn came<T>(r: io::Result<T>) -> Came {
    match r {
        Ok(_) => Came::Served,
        Err(e) => match veilfs::fs::ask::question_of(&e) {
            Some(q) => Came::Asks(q.access),
            None => Came::Errno(errno(&e)),
        },
    }
}

/// The ask semantics without a mount: a request that would use an `ask` path's
/// content comes to a question (for the access it needs) and changes nothing;
/// run again holding a grant it is served, but only for the access, the path (or
/// the directory beneath) and the mount root granted; a grant never goes beyond
/// what the path is once approved (beneath a read-only rule a change is refused
/// without a question); a permissive mount asks nothing.
#[test]
fn ask_paths_wait_for_a_grant_and_a_grant_reaches_no_further_without_a_mount() {
    use veilfs::fs::grant::Access::{Read, Write};
    let ws = ask_ws(false);
    let before = common::snapshot(&ws.src);
    let mig = ws.walk("mig").unwrap();
    let file = ws.walk("mig/001.sql").unwrap();
    let open = |req: &veilfs::fs::request::Req, ino: u64, flags: i32| {
        let r = ws.fs.open(req, ino, flags);
        if let Ok(fh) = &r {
            ws.fs.release(*fh);
        }
        came(r)
    };
    let rd = libc::O_RDONLY;
    let wr = libc::O_WRONLY | libc::O_TRUNC;
    // Seen without a question; content waits for one.
    assert_eq!(came(ws.fs.getattr(&cx(), file, None)), Came::Served);
    assert_eq!(open(&cx(), file, rd), Came::Asks(Read));
    assert_eq!(open(&cx(), file, wr), Came::Asks(Write));
    assert_eq!(came(ws.fs.listing_at(&cx(), mig, 0)), Came::Asks(Read));
    let (_, new) = parent(&ws, "mig/new.sql").unwrap();
    let made = ws.fs.create(
        &cx(),
        mig,
        new,
        0o644,
        0o022,
        libc::O_WRONLY | libc::O_CREAT,
    );
    assert_eq!(came(made), Came::Asks(Write));
    let moved = ws.fs.rename(
        &cx(),
        ROOT,
        OsStr::new("ok.txt"),
        mig,
        OsStr::new("ok.txt"),
        0,
    );
    assert_eq!(came(moved), Came::Asks(Write));
    assert_eq!(
        before,
        common::snapshot(&ws.src),
        "a question changed the tree"
    );
    // A grant serves its access, path and root only.
    let read_it = with(&[("mig/001.sql", false, Read)]);
    assert_eq!(open(&read_it, file, rd), Came::Served);
    assert_eq!(open(&read_it, file, wr), Came::Asks(Write));
    let sub = ws.walk("mig/sub/002.sql").unwrap();
    assert_eq!(open(&read_it, sub, rd), Came::Asks(Read));
    let other_root = cx().with_grants(vec![veilfs::fs::grant::Grant {
        root: "home",
        path: b"mig/001.sql".to_vec(),
        beneath: false,
        access: Read,
    }]);
    assert_eq!(open(&other_root, file, rd), Came::Asks(Read));
    let whole_dir = with(&[("mig", true, Write)]);
    assert_eq!(open(&whole_dir, sub, rd), Came::Served);
    assert_eq!(open(&whole_dir, file, wr), Came::Served);
    assert_eq!(std::fs::read(ws.s("mig/001.sql")).unwrap(), b"");
    // Beneath a read-only rule an approval grants reading only.
    let q = ws.walk("ro/q/a.txt").unwrap();
    assert_eq!(open(&cx(), q, wr), Came::Errno(libc::EACCES));
    assert_eq!(
        open(&with(&[("ro/q", true, Write)]), q, wr),
        Came::Errno(libc::EACCES)
    );
    assert_eq!(open(&with(&[("ro/q", true, Read)]), q, rd), Came::Served);
    assert_eq!(std::fs::read(ws.s("ro/q/a.txt")).unwrap(), b"q\n");
    // A permissive mount asks nothing.
    let ws = ask_ws(true);
    let file = ws.walk("mig/001.sql").unwrap();
    let r = ws.fs.open(&cx(), file, rd);
    assert_eq!(came(r.map(|fh| ws.fs.release(fh))), Came::Served);
}

/// A directory renamed into place never brings a name where none may be made: a
/// file that could be changed where it was, arriving at a read-only or denied path
/// (not there yet), refuses the rename with the backing tree untouched, as making
/// that name would be refused; a file read-only on both sides moves along. A
/// permissive mount waives these rules (they are the policy's), as it does for
/// making the name.
#[test]
fn a_directory_rename_never_brings_a_name_where_none_may_be_made_without_a_mount() {
    let mut wrong = Vec::new();
    for permissive in [false, true] {
        for &(target, what, op, want) in ARRIVING {
            let want = if permissive { Allowed } else { want };
            let w = attempt(&arriving_ws(permissive), (target, what, op, want));
            wrong.extend(w.map(|w| format!("permissive {permissive}: {w}")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
