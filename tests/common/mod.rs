//! Test fixture for real mounts: a temp workspace, a mount that is live when
//! `Fixture::mount` returns and unmounted on drop, and failures that explain
//! themselves (the command, its output, and the listing of both trees).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use veilfs::{Mount, MountOptions, Policy};

pub mod daemon;
pub mod inproc;
pub mod leftovers;
pub mod outside;
pub mod run;
pub mod tmux;

/// The policy of the action × operation matrix (`tests/enforce.rs` through a mount,
/// `tests/matrix.rs` against the filesystem object).
pub const MATRIX_POLICY: &str = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/", "*.pem"]

[[rules]]
action = "read-only"
paths = ["ro/", "README.md"]
"#;

/// The files of the action × operation matrix, as `(path, body)`.
pub const MATRIX_FILES: [(&str, &str); 6] = [
    (".env", "SECRET=1\n"),
    ("secrets/token", "tok\n"),
    ("app/key.pem", "KEY\n"),
    ("ro/a.txt", "read me\n"),
    ("README.md", "hello\n"),
    ("ok.txt", "ok\n"),
];

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub src: PathBuf,
    pub mnt: PathBuf,
    pub mount: Option<Mount>,
}

/// Fails loudly (never skips) when this machine cannot mount FUSE.
pub fn require_fuse() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "these tests mount for real and need FUSE: /dev/fuse is missing (install fuse3, load the fuse module)"
    );
}

impl Fixture {
    /// An empty workspace, not yet mounted.
    pub fn new() -> Fixture {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-test")
            .tempdir()
            .unwrap();
        let src = tmp.path().join("src");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&src).unwrap();
        std::fs::create_dir(&mnt).unwrap();
        Fixture {
            tmp,
            src,
            mnt,
            mount: None,
        }
    }

    /// Writes `body` to `rel` in the backing workspace, creating directories.
    pub fn file(&self, rel: &str, body: &str) -> &Self {
        let p = self.src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        self
    }

    pub fn dir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.src.join(rel)).unwrap();
        self
    }

    /// Mounts with `policy` (TOML text); returns once the mount is live.
    pub fn mount(&mut self, policy: &str) -> &mut Self {
        let p = Policy::parse("test-policy.toml", policy).unwrap_or_else(|e| panic!("{e}"));
        self.mount_policy(p, None)
    }

    pub fn mount_policy(&mut self, p: Policy, file: Option<&Path>) -> &mut Self {
        self.mount_with(p, file, &MountOptions::default())
    }

    pub fn mount_with(&mut self, p: Policy, file: Option<&Path>, opts: &MountOptions) -> &mut Self {
        let m = Mount::new(&self.src, &self.mnt, p, file, opts)
            .unwrap_or_else(|e| panic!("mount failed: {e}"));
        assert!(
            wait_until(Duration::from_secs(10), || {
                veilfs::session::mount::is_mount_point(&self.mnt.canonicalize().unwrap())
            }),
            "the mount did not appear in the mount table"
        );
        self.mount = Some(m);
        self
    }

    /// Path inside the mount.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Path inside the backing workspace.
    pub fn s(&self, rel: &str) -> PathBuf {
        self.src.join(rel)
    }

    /// Runs `sh -c script` with the mount as working directory.
    pub fn sh(&self, script: &str) -> Output {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.mnt)
            .output()
            .unwrap()
    }

    /// Runs a script that must succeed; on failure prints everything.
    pub fn sh_ok(&self, script: &str) -> String {
        let o = self.sh(script);
        assert!(o.status.success(), "{}", self.explain(script, &o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn explain(&self, what: &str, o: &Output) -> String {
        format!(
            "$ {what}\nstatus: {}\nstdout:\n{}\nstderr:\n{}\nbacking tree:\n{}\nmounted tree:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            listing(&self.src),
            listing(&self.mnt),
        )
    }

    /// Everything in the backing workspace: path → (mode, uid, size, mtime, content).
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, String> {
        snapshot(&self.src)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
    }
}

/// A temporary directory (named `prefix…`) holding the directories `dirs`
/// (created with their parents); one named `rt`, a runtime directory for control
/// sockets, is made private (0700) as veilfs demands. Fails loudly without FUSE.
pub fn temp_tree(prefix: &str, dirs: &[&str]) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    require_fuse();
    let tmp = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    for d in dirs {
        std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        if *d == "rt" {
            std::fs::set_permissions(tmp.path().join(d), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
    }
    tmp
}

/// A [`temp_tree`] with the paths and the `veilfs` command its tests use.
pub struct Tree {
    pub tmp: tempfile::TempDir,
}

impl Tree {
    pub fn new(prefix: &str, dirs: &[&str]) -> Tree {
        Tree {
            tmp: temp_tree(prefix, dirs),
        }
    }

    /// `rel` in the tree.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `rel` inside the mount point `mnt` of the tree.
    pub fn m(&self, rel: &str) -> PathBuf {
        self.p("mnt").join(rel)
    }

    /// The veilfs binary, with the tree's `rt` as its runtime directory.
    pub fn veilfs(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.p("rt"));
        c
    }

    /// `veilfs mount ws mnt` (no policy file: the one found in `ws`, else the
    /// built-in default), once it is ready.
    pub fn mount(&self) -> daemon::Daemon {
        let mut c = self.veilfs();
        c.arg("mount").arg(self.p("ws")).arg(self.p("mnt"));
        daemon::Daemon::start(c, &self.p("mnt"))
    }
}

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `git ARGS` in `dir` (with a committer name), which must succeed: its stdout.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits for `child` (its stdout and stderr piped) at most `limit`, killing it and
/// failing after that: exit code (-1 for a signal), stdout, stderr.
#[track_caller]
pub fn finish(mut child: std::process::Child, limit: Duration) -> (i32, String, String) {
    use std::io::Read;
    if !wait_until(limit, || child.try_wait().unwrap().is_some()) {
        let _ = child.kill();
        panic!("the command did not end within {limit:?}");
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out).unwrap();
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (child.wait().unwrap().code().unwrap_or(-1), out, err)
}

pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// A recursive snapshot of a tree (names as bytes), without following links.
pub fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        let md = std::fs::symlink_metadata(&p).unwrap();
        let content = if md.is_file() {
            format!("{:?}", std::fs::read(&p).unwrap_or_default())
        } else if md.file_type().is_symlink() {
            format!("-> {:?}", std::fs::read_link(&p).unwrap())
        } else {
            String::new()
        };
        let xattrs = xattr_list(&p);
        out.insert(
            rel,
            format!(
                "mode {:o} uid {} gid {} size {} mtime {}.{} nlink {} xattrs {xattrs:?} {content}",
                md.mode(),
                md.uid(),
                md.gid(),
                md.size(),
                md.mtime(),
                md.mtime_nsec(),
                md.nlink()
            ),
        );
        if md.is_dir() {
            walk(root, &p, out);
        }
    }
}

fn xattr_list(p: &Path) -> Vec<u8> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid C string and buffer.
    let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Vec::new();
    }
    buf.truncate(n as usize);
    buf
}

pub fn listing(root: &Path) -> String {
    let mut s = String::new();
    for (k, v) in snapshot(root) {
        s += &format!(
            "  {}  {}\n",
            String::from_utf8_lossy(&k),
            &v[..v.len().min(120)]
        );
    }
    s
}

/// Asserts that `r` failed with `errno`.
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(r: io::Result<T>, errno: i32, what: &str) {
    match r {
        Ok(v) => panic!("{what}: expected errno {errno}, but it succeeded: {v:?}"),
        Err(e) => assert_eq!(
            e.raw_os_error(),
            Some(errno),
            "{what}: expected errno {errno} ({}), got {e}",
            io::Error::from_raw_os_error(errno)
        ),
    }
}

pub fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// Runs `sh -c script` in `cwd` as uid and gid 65534 with no supplementary groups
/// (another user than the daemon's).
pub fn as_nobody(cwd: &Path, script: &str) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .current_dir(cwd)
        .output()
        .unwrap()
}
