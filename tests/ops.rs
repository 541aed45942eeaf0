//! The filesystem's operations without a mount: a `VeilFs` on a temp directory,
//! called the way the FUSE adapter calls it. Node ids are whatever `lookup`
//! returns (never assumed to be `st_ino`).

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use veilfs::Policy;
use veilfs::fs::VeilFs;
use veilfs::fs::inode::ROOT;
use veilfs::fs::ops::{Caller, Refusal, SetAttr};

const ROOT_CALLER: Caller = Caller { uid: 0, gid: 0 };

/// A workspace on a temp directory and the filesystem serving it.
struct Ws {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    policy_file: PathBuf,
    fs: VeilFs,
}

impl Ws {
    /// `files` are `(path, body)`; a path ending in `/` is a directory.
    fn new(policy: &str, files: &[(&str, &str)]) -> Ws {
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-ops")
            .tempdir()
            .unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        for (rel, body) in files {
            let p = src.join(rel);
            if rel.ends_with('/') {
                std::fs::create_dir_all(&p).unwrap();
            } else {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, body).unwrap();
            }
        }
        // Outside the workspace, so that it is not itself guarded.
        let policy_file = tmp.path().join("policy.toml");
        std::fs::write(&policy_file, policy).unwrap();
        let p = Policy::parse("policy.toml", policy).unwrap_or_else(|e| panic!("{e}"));
        let fs = VeilFs::new(&src, p, Some(&policy_file)).unwrap();
        Ws {
            _tmp: tmp,
            src,
            policy_file,
            fs,
        }
    }

    /// Looks `rel` up one name at a time, as the kernel would; the node id.
    fn walk(&self, rel: &str) -> io::Result<u64> {
        let mut ino = ROOT;
        for name in rel.split('/') {
            ino = self.fs.lookup(ino, OsStr::new(name))?.0.ino;
        }
        Ok(ino)
    }

    fn names(&self, rel: &str) -> Vec<String> {
        let ino = if rel.is_empty() {
            ROOT
        } else {
            self.walk(rel).unwrap()
        };
        let (listing, _) = self.fs.listing_at(ino, 0).unwrap();
        let mut v: Vec<String> = listing
            .entries
            .iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect();
        v.sort();
        v
    }

    fn s(&self, rel: &str) -> PathBuf {
        self.src.join(rel)
    }
}

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
            app,
            OsStr::new("new.txt"),
            0o644,
            0o022,
            libc::O_WRONLY,
            ROOT_CALLER,
        )
        .unwrap();
    assert_eq!(st.st_mode & 0o777, 0o644);
    assert_eq!(ws.fs.write(node.ino, fh, 0, b"hello").unwrap(), 5);
    ws.fs.release(fh);
    let fh = ws.fs.open(node.ino, libc::O_RDONLY).unwrap();
    assert_eq!(ws.fs.read(node.ino, fh, 1, 100).unwrap(), b"ello");
    ws.fs.release(fh);
    assert_eq!(std::fs::read(ws.s("app/new.txt")).unwrap(), b"hello");
    assert_eq!(ws.fs.getattr(node.ino, None).unwrap().st_size, 5);
    // Looked up again by name: the same node.
    assert_eq!(ws.walk("app/new.txt").unwrap(), node.ino);
    // A denied name is never created.
    refused(
        ws.fs.create(
            app,
            OsStr::new(".env"),
            0o644,
            0,
            libc::O_WRONLY,
            ROOT_CALLER,
        ),
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
    refused(ws.fs.setattr(ino, &truncate, None), "locked.txt");
    refused(ws.fs.open(ino, libc::O_WRONLY), "locked.txt");
    refused(ws.fs.unlink(ROOT, OsStr::new("locked.txt")), "locked.txt");
    refused(
        ws.fs
            .rename(ROOT, OsStr::new("locked.txt"), ROOT, OsStr::new("x"), 0),
        "locked.txt",
    );
    let fh = ws.fs.open(ino, libc::O_RDONLY).unwrap();
    assert_eq!(ws.fs.read(ino, fh, 0, 10).unwrap(), b"keep");
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
            .rename(ROOT, OsStr::new("a"), ROOT, OsStr::new("b"), 0),
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
    refused(ws.fs.getattr(a, None), "dir/a.txt");
    refused(ws.fs.open(a, libc::O_RDONLY), "dir/a.txt");
    refused(ws.fs.lookup(dir, OsStr::new("a.txt")), "dir/a.txt");
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
    let fs = VeilFs::new(Path::new(&src), p, None).unwrap();
    let me = Caller {
        uid: 65534,
        gid: 65534,
    };
    let (node, _, fh) = fs
        .create(ROOT, OsStr::new("w.txt"), 0o644, 0o022, libc::O_WRONLY, me)
        .expect("create (O_WRONLY) of a write-only file that exists");
    fs.write(node.ino, fh, 0, b"written by nobody").unwrap();
    fs.release(fh);
}
