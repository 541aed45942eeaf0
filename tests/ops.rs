//! The filesystem's operations without a mount: a `VeilFs` on a temp directory,
//! called the way the FUSE adapter calls it. Node ids are whatever `lookup`
//! returns (never assumed to be `st_ino`).

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use veilfs::Policy;
use veilfs::fs::VeilFs;
use veilfs::fs::inode::ROOT;
use veilfs::fs::ops::{Refusal, SetAttr};

mod common;

use common::inproc::{Ws, cx};

/// Asserts a policy refusal (`EACCES` at the kernel) for `path`.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: io::Result<T>, path: &str) {
    let e = r.expect_err("expected a policy refusal");
    let refusal = e
        .get_ref()
        .and_then(|x| x.downcast_ref::<Refusal>())
        .unwrap_or_else(|| panic!("expected a policy refusal, got {e}"));
    assert_eq!(String::from_utf8_lossy(&refusal.path), path);
}

const SECRETS: &str = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/"]

[[rules]]
action = "read-only"
paths = ["locked.txt"]
"#;

#[test]
fn a_denied_name_is_refused_whether_or_not_it_exists() {
    let ws = Ws::new(
        SECRETS,
        &[(".env", "TOKEN=1"), ("app/a.txt", "a"), ("secrets/", "")],
    );
    refused(ws.walk(".env"), ".env");
    refused(ws.walk("app/.env"), "app/.env");
    refused(ws.walk("secrets"), "secrets");
    assert_eq!(
        ws.walk("app/missing").unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
}

#[test]
fn listings_omit_denied_entries() {
    let ws = Ws::new(
        SECRETS,
        &[
            (".env", "x"),
            ("secrets/", ""),
            ("a.txt", "a"),
            ("app/.env", "y"),
        ],
    );
    assert_eq!(ws.names(""), ["a.txt", "app"]);
    assert!(ws.names("app").is_empty());
}

#[test]
fn create_write_and_read_back() {
    let ws = Ws::new(SECRETS, &[("app/", "")]);
    let app = ws.walk("app").unwrap();
    let (node, st, fh) = ws
        .fs
        .create(
            &cx(),
            app,
            OsStr::new("new.txt"),
            0o644,
            0o022,
            libc::O_WRONLY,
        )
        .unwrap();
    assert_eq!(st.st_mode & 0o777, 0o644);
    assert_eq!(ws.fs.write(&cx(), node.ino, fh, 0, b"hello").unwrap(), 5);
    ws.fs.release(fh);
    let fh = ws.fs.open(&cx(), node.ino, libc::O_RDONLY).unwrap();
    assert_eq!(ws.fs.read(&cx(), node.ino, fh, 1, 100).unwrap(), b"ello");
    ws.fs.release(fh);
    assert_eq!(std::fs::read(ws.s("app/new.txt")).unwrap(), b"hello");
    assert_eq!(ws.fs.getattr(&cx(), node.ino, None).unwrap().st_size, 5);
    // Looked up again by name: the same node.
    assert_eq!(ws.walk("app/new.txt").unwrap(), node.ino);
    // A denied name is never created.
    refused(
        ws.fs
            .create(&cx(), app, OsStr::new(".env"), 0o644, 0, libc::O_WRONLY),
        "app/.env",
    );
    assert!(!ws.s("app/.env").exists());
}

#[test]
fn a_read_only_file_refuses_every_change() {
    let ws = Ws::new(SECRETS, &[("locked.txt", "keep")]);
    let ino = ws.walk("locked.txt").unwrap();
    let truncate = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    refused(ws.fs.setattr(&cx(), ino, &truncate, None), "locked.txt");
    refused(ws.fs.open(&cx(), ino, libc::O_WRONLY), "locked.txt");
    refused(
        ws.fs.unlink(&cx(), ROOT, OsStr::new("locked.txt")),
        "locked.txt",
    );
    refused(
        ws.fs.rename(
            &cx(),
            ROOT,
            OsStr::new("locked.txt"),
            ROOT,
            OsStr::new("x"),
            0,
        ),
        "locked.txt",
    );
    let fh = ws.fs.open(&cx(), ino, libc::O_RDONLY).unwrap();
    assert_eq!(ws.fs.read(&cx(), ino, fh, 0, 10).unwrap(), b"keep");
    ws.fs.release(fh);
    assert_eq!(std::fs::read(ws.s("locked.txt")).unwrap(), b"keep");
}

#[test]
fn renaming_a_directory_may_not_expose_a_denied_descendant() {
    let policy = "[[rules]]\naction = \"deny\"\npaths = [\"/a/inner/.token\"]\n";
    let ws = Ws::new(policy, &[("a/inner/.token", "t"), ("a/b.txt", "b")]);
    ws.walk("a").unwrap();
    refused(
        ws.fs
            .rename(&cx(), ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), 0),
        "a/inner/.token",
    );
    assert!(ws.s("a/inner/.token").exists() && !ws.s("b").exists());
}

#[test]
fn a_reload_applies_to_nodes_decided_before_it() {
    let ws = Ws::new(
        "default = \"allow\"\n",
        &[("dir/a.txt", "a"), ("b.txt", "b")],
    );
    let a = ws.walk("dir/a.txt").unwrap();
    let dir = ws.walk("dir").unwrap();
    assert_eq!(ws.names("dir"), ["a.txt"]);
    std::fs::write(
        &ws.policy_file,
        "[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n",
    )
    .unwrap();
    ws.fs.reloader().reload().unwrap();
    // The node looked up under the old policy is decided again before use.
    refused(ws.fs.getattr(&cx(), a, None), "dir/a.txt");
    refused(ws.fs.open(&cx(), a, libc::O_RDONLY), "dir/a.txt");
    refused(ws.fs.lookup(&cx(), dir, OsStr::new("a.txt")), "dir/a.txt");
    assert!(
        ws.names("dir").is_empty(),
        "a listing taken after the reload"
    );
    assert!(ws.walk("b.txt").is_ok());
}

/// Set for the child process of the test below: the workspace it works in.
const AS_NOBODY: &str = "VEILFS_OPS_AS_NOBODY";

#[test]
fn create_of_a_name_that_exists_falls_back_to_the_callers_access_mode() {
    // The kernel sends CREATE for a name its lookup did not find; the name can have
    // appeared on disk since. A daemon that is not root cannot then open it
    // read-write for passthrough if the file is write-only for it: the caller's
    // own O_WRONLY must still work. Run as uid 65534 in a child (this test binary
    // again, filtered to the child test), so no other test loses root.
    let tmp = tempfile::Builder::new()
        .prefix("veilfs-ops")
        .tempdir()
        .unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for p in [tmp.path(), &src] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let f = src.join("w.txt");
    std::fs::write(&f, "").unwrap();
    std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o200)).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "create_as_nobody_child", "--nocapture"])
        .env(AS_NOBODY, &src)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success() && out.contains("1 passed"),
        "the child failed:\n{out}"
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"written by nobody");
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o200);
}

/// The child of the test above; does nothing unless that test started it.
#[test]
fn create_as_nobody_child() {
    let Some(src) = std::env::var_os(AS_NOBODY) else {
        return;
    };
    let p = Policy::parse("allow", "default = \"allow\"\n").unwrap();
    let fs = VeilFs::new(Path::new(&src), p, None, Default::default()).unwrap();
    let nobody = veilfs::fs::request::Req::new("create", std::process::id(), 65534, 65534);
    let (node, _, fh) = fs
        .create(
            &nobody,
            ROOT,
            OsStr::new("w.txt"),
            0o644,
            0o022,
            libc::O_WRONLY,
        )
        .expect("create (O_WRONLY) of a write-only file that exists");
    fs.write(&cx(), node.ino, fh, 0, b"written by nobody")
        .unwrap();
    fs.release(fh);
}

const DIR_ONLY: &str = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/"]
"#;

/// A directory-only deny pattern: no entry and a directory of that name answer
/// alike, on every path that names it; a file of that name is served.
#[test]
fn a_directory_only_deny_never_says_whether_the_directory_exists() {
    let ws = Ws::new(
        DIR_ONLY,
        &[
            ("a/secrets/t", "TOPSECRET"),
            ("b/secrets", "a file"),
            ("c/", ""),
        ],
    );
    let (b, c) = (ws.walk("b").unwrap(), ws.walk("c").unwrap());
    refused(ws.walk("a/secrets"), "a/secrets");
    refused(ws.walk("c/secrets"), "c/secrets");
    assert!(
        ws.walk("b/secrets").is_ok(),
        "a file of that name is served"
    );
    let new = |dir| {
        ws.fs
            .create(&cx(), dir, OsStr::new("secrets"), 0o644, 0, libc::O_WRONLY)
    };
    refused(new(c), "c/secrets");
    refused(
        ws.fs
            .mknod(&cx(), c, OsStr::new("secrets"), libc::S_IFREG | 0o644, 0, 0),
        "c/secrets",
    );
    refused(
        ws.fs
            .symlink(&cx(), c, OsStr::new("secrets"), OsStr::new("x")),
        "c/secrets",
    );
    refused(
        ws.fs.mkdir(&cx(), c, OsStr::new("secrets"), 0o755, 0),
        "c/secrets",
    );
    refused(ws.fs.unlink(&cx(), c, OsStr::new("secrets")), "c/secrets");
    assert!(!ws.s("c/secrets").exists());
    refused(
        ws.fs
            .mkdir(&cx(), b, OsStr::new("x"), 0o755, 0)
            .and_then(|_| {
                ws.fs
                    .mkdir(&cx(), ws.walk("b/x")?, OsStr::new("secrets"), 0o755, 0)
            }),
        "b/x/secrets",
    );
    // The file that exists is opened (`O_CREAT` without `O_EXCL`) as usual.
    let (_, _, fh) = new(b).expect("create of an existing file named like the pattern");
    ws.fs.release(fh);
    assert_eq!(ws.names("c"), Vec::<String>::new());
    assert_eq!(ws.names("b"), ["secrets", "x"]);
}

/// Set for the child process of the test below: the workspace it works in.
const SEALED: &str = "VEILFS_OPS_SEALED";

#[test]
fn the_policy_answers_before_the_disk() {
    // The daemon runs as uid 65534 in a child process (this test binary again), and
    // `sealed` is a directory it may not search: any backing access of a name in it
    // fails with the disk's own `EACCES`, not a policy refusal.
    let tmp = tempfile::Builder::new()
        .prefix("veilfs-ops")
        .tempdir()
        .unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sealed/secrets")).unwrap();
    std::fs::create_dir_all(src.join("bare")).unwrap();
    std::fs::write(src.join("sealed/.env"), "TOPSECRET").unwrap();
    std::fs::write(src.join("sealed/open.txt"), "x").unwrap();
    for p in [tmp.path(), &src] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for d in ["sealed", "bare"] {
        std::fs::set_permissions(src.join(d), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "sealed_child", "--nocapture"])
        .env(SEALED, &src)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success() && out.contains("1 passed"),
        "the child failed:\n{out}"
    );
}

/// The child of the test above; does nothing unless that test started it.
#[test]
fn sealed_child() {
    let Some(src) = std::env::var_os(SEALED) else {
        return;
    };
    let p = Policy::parse("policy.toml", DIR_ONLY).unwrap();
    let fs = VeilFs::new(Path::new(&src), p, None, Default::default()).unwrap();
    let sealed = fs.lookup(&cx(), ROOT, OsStr::new("sealed")).unwrap().0.ino;
    // The disk would refuse: this is its own EACCES, not the policy's.
    let e = fs
        .lookup(&cx(), sealed, OsStr::new("open.txt"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
    assert!(
        e.get_ref()
            .and_then(|x| x.downcast_ref::<Refusal>())
            .is_none(),
        "{e}"
    );
    // A denied name is refused by the policy without the disk being asked, where
    // it exists (`sealed/.env`) and where it does not (`bare/.env`).
    for dir in ["sealed", "bare"] {
        let ino = fs.lookup(&cx(), ROOT, OsStr::new(dir)).unwrap().0.ino;
        refused(
            fs.lookup(&cx(), ino, OsStr::new(".env")),
            &format!("{dir}/.env"),
        );
    }
    // A directory-only pattern needs the type; one that cannot be read is refused.
    refused(
        fs.lookup(&cx(), sealed, OsStr::new("secrets")),
        "sealed/secrets",
    );
}

/// A policy reloaded while a lookup is between the directory's decision and the
/// name's: the answer is the old policy's or the new one's, never a mix.
const MID_OLD: &str = "default = \"deny\"\n[[rules]]\naction = \"allow\"\npaths = [\"d/\"]\n[[rules]]\naction = \"deny\"\npaths = [\"d/x\"]\n";
const MID_NEW: &str = "default = \"deny\"\n[[rules]]\naction = \"allow\"\npaths = [\"d/keep\"]\n";

/// A workspace under `MID_OLD` whose next lookup or listing reloads `MID_NEW`
/// mid-request (once), and the node of `d`.
fn mid_request_reload() -> (Ws, u64) {
    let ws = Ws::new(MID_OLD, &[("d/x", "hidden by both"), ("d/keep", "k")]);
    let reloader = ws.fs.reloader();
    let file = ws.policy_file.clone();
    let armed = std::sync::atomic::AtomicBool::new(false);
    let d = ws.walk("d").unwrap();
    ws.fs.set_mid_request_hook(move || {
        if !armed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::fs::write(&file, MID_NEW).unwrap();
            reloader.reload().unwrap();
        }
    });
    (ws, d)
}

#[test]
fn a_reload_mid_lookup_never_mixes_two_policies() {
    let (ws, d) = mid_request_reload();
    // Hidden under each policy; a mix (the directory's decision from the old one,
    // the name's from the new) would admit it.
    refused(ws.fs.lookup(&cx(), d, OsStr::new("x")), "d/x");
    refused(ws.fs.lookup(&cx(), d, OsStr::new("x")), "d/x");
    let keep = ws.walk("d/keep").unwrap();
    assert!(ws.fs.getattr(&cx(), keep, None).is_ok());
}

#[test]
fn a_reload_mid_listing_never_mixes_two_policies() {
    let (ws, d) = mid_request_reload();
    let names = || -> Vec<String> {
        let (listing, _) = ws.fs.listing_at(&cx(), d, 0).unwrap();
        let mut v: Vec<String> = listing
            .entries
            .iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(), ["keep"], "the listing the reload landed in");
    assert_eq!(names(), ["keep"], "a listing taken after it");
}

#[test]
fn a_decision_taken_before_a_reload_is_cached_as_stale() {
    let ws = Ws::new("default = \"allow\"\n", &[("d/a.txt", "a")]);
    let reloader = ws.fs.reloader();
    let file = ws.policy_file.clone();
    let armed = std::sync::atomic::AtomicBool::new(false);
    let d = ws.walk("d").unwrap();
    ws.fs.set_mid_request_hook(move || {
        if !armed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::fs::write(&file, "[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n").unwrap();
            reloader.reload().unwrap();
        }
    });
    // Answered under one of the two policies (the one the lookup started with);
    // an admission under the old one is never served as current afterwards.
    match ws.fs.lookup(&cx(), d, OsStr::new("a.txt")) {
        Ok((a, _)) => refused(ws.fs.getattr(&cx(), a.ino, None), "d/a.txt"),
        r => refused(r, "d/a.txt"),
    }
    refused(ws.fs.lookup(&cx(), d, OsStr::new("a.txt")), "d/a.txt");
}

/// An editor's save (write a temporary, rename it over the file) keeps every other
/// cached decision; a directory rename recomputes the moved subtree's.
#[test]
fn an_editor_save_keeps_the_other_cached_decisions() {
    let mut files: Vec<(String, &str)> = (0..50).map(|i| (format!("src/f{i}.rs"), "x")).collect();
    files.push(("notes/a.txt".into(), "a"));
    let files: Vec<(&str, &str)> = files.iter().map(|(p, b)| (p.as_str(), *b)).collect();
    let ws = Ws::new(SECRETS, &files);
    let inos: Vec<u64> = files.iter().map(|(p, _)| ws.walk(p).unwrap()).collect();
    let src = ws.walk("src").unwrap();
    let stat_all = || {
        for &ino in &inos {
            ws.fs.getattr(&cx(), ino, None).unwrap();
        }
    };
    stat_all();
    let before = ws.fs.decisions_recomputed();
    let (tmp, _, fh) = ws
        .fs
        .create(
            &cx(),
            src,
            OsStr::new(".f0.rs.swp"),
            0o644,
            0,
            libc::O_WRONLY,
        )
        .unwrap();
    ws.fs.write(&cx(), tmp.ino, fh, 0, b"saved").unwrap();
    ws.fs.release(fh);
    ws.fs
        .rename(
            &cx(),
            src,
            OsStr::new(".f0.rs.swp"),
            src,
            OsStr::new("f0.rs"),
            0,
        )
        .unwrap();
    stat_all();
    let after_save = ws.fs.decisions_recomputed() - before;
    assert!(
        after_save <= 1,
        "an editor save recomputed {after_save} cached decisions"
    );
    // The saved file is decided under its new name.
    assert_eq!(ws.walk("src/f0.rs").unwrap(), tmp.ino);
    assert!(ws.fs.getattr(&cx(), tmp.ino, None).is_ok());
    // A directory rename still recomputes what it moved.
    let before = ws.fs.decisions_recomputed();
    ws.fs
        .rename(
            &cx(),
            ROOT,
            OsStr::new("notes"),
            ROOT,
            OsStr::new("notes2"),
            0,
        )
        .unwrap();
    stat_all();
    assert!(ws.fs.decisions_recomputed() > before);
}

/// Names this long make paths longer than a directory's place keeps (1 KiB): each
/// path is spelled from the names on the way up, and after a rename from the new
/// names (only the renamed node's place changed).
#[test]
fn a_path_longer_than_a_place_keeps_is_spelled_from_its_names() {
    let levels: Vec<String> = (0..8).map(|i| format!("{i}{}", "n".repeat(200))).collect();
    let dir = levels.join("/");
    let locked = format!("{dir}/locked.txt");
    let ws = Ws::new(SECRETS, &[(&locked, "x")]);
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    let bottom = ws.walk(&dir).unwrap();
    let file = ws.walk(&locked).unwrap();
    refused(
        ws.fs.lookup(&cx(), bottom, OsStr::new(".env")),
        &format!("{dir}/.env"),
    );
    refused(ws.fs.setattr(&cx(), file, &chmod, None), &locked);
    ws.fs
        .rename(
            &cx(),
            ROOT,
            OsStr::new(&levels[0]),
            ROOT,
            OsStr::new("top"),
            0,
        )
        .unwrap();
    let moved = format!("top/{}", levels[1..].join("/"));
    refused(
        ws.fs.lookup(&cx(), bottom, OsStr::new(".env")),
        &format!("{moved}/.env"),
    );
    refused(
        ws.fs.setattr(&cx(), file, &chmod, None),
        &format!("{moved}/locked.txt"),
    );
    // And the decisions follow the new names: `top/…/locked.txt` is still read-only,
    // and a file made at the bottom is allowed.
    let made = ws.fs.create(
        &cx(),
        bottom,
        OsStr::new("new.txt"),
        0o644,
        0,
        libc::O_WRONLY,
    );
    assert!(made.is_ok(), "{made:?}");
}

/// The `ask` action without a mount: a request with no grant stops with a question
/// (and its body leaves the disk alone), the same request run again with the grant
/// an approval gives is served, a grant covers its path and access only, and a grant
/// never reaches another request.
#[test]
fn a_grant_serves_the_request_that_holds_it_and_no_other() {
    use veilfs::fs::ask::{Access, Broker, Grant, question_of};
    use veilfs::fs::request::Req;
    let approvals = veilfs::fs::ask::Approvals {
        broker: Broker::new("test".into(), std::time::Duration::from_secs(1), None),
        root: "",
        mount: "/mnt".into(),
        policy_file: None,
    };
    let ws = Ws::with_config(
        "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n",
        &[
            ("mig/001.sql", "one\n"),
            ("mig/002.sql", "two\n"),
            ("plain", "p\n"),
        ],
        veilfs::fs::config::FsConfig {
            approvals: Some(approvals),
            ..Default::default()
        },
    );
    let one = ws.walk("mig/001.sql").unwrap();
    let two = ws.walk("mig/002.sql").unwrap();
    let asked = |r: io::Result<u64>| match r {
        Err(e) => question_of(&e).map(|q| String::from_utf8_lossy(&q.path).into_owned()),
        Ok(_) => None,
    };
    assert_eq!(
        asked(ws.fs.open(&cx(), one, libc::O_RDONLY)),
        Some("mig/001.sql".into())
    );
    let grant = |path: &str, access| Grant {
        root: "",
        path: path.as_bytes().to_vec(),
        beneath: false,
        access,
    };
    let approved = Req::new("open", 1, 0, 0).with_grants(vec![grant("mig/001.sql", Access::Read)]);
    let fh = ws.fs.open(&approved, one, libc::O_RDONLY).unwrap();
    ws.fs.release(fh);
    // The grant is for that path, and for reading.
    assert_eq!(
        asked(ws.fs.open(&approved, two, libc::O_RDONLY)),
        Some("mig/002.sql".into())
    );
    let w = ws.fs.open(&approved, one, libc::O_WRONLY);
    assert_eq!(asked(w), Some("mig/001.sql".into()));
    // Another request, after the approved one was served: asked again.
    assert_eq!(
        asked(ws.fs.open(&cx(), one, libc::O_RDONLY)),
        Some("mig/001.sql".into())
    );
    assert_eq!(
        std::fs::read_to_string(ws.src.join("mig/001.sql")).unwrap(),
        "one\n"
    );
}
