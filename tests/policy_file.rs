//! The policy file can never be planted or changed through a mount, as a hostile
//! process would try: every change to the name `.veilfs.toml` (at the root and in a
//! subdirectory, existing or not, under the built-in policy and under `default =
//! "allow"` with a rule allowing it), to the policy file read however it is reached (a
//! hard link, `--policy` given as a symbolic link), and to the directories holding it,
//! fails with EACCES and leaves the backing tree exactly as it was.

mod common;

use std::ffi::CString;
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Fixture, assert_errno, wait_until};
use veilfs::Policy;

/// Loosens everything, and allows the policy file's name by a rule: neither may
/// make it writable.
const ALLOW: &str = r#"default = "allow"

[[rules]]
action = "allow"
paths = [".veilfs.toml", "*.toml", "**"]
"#;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn ret(r: i32) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

type Op = fn(&Fixture, &Path) -> io::Result<()>;

fn create(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::File::create(p)?.write_all(b"default = \"allow\"\n")
}
fn create_new(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)?
        .write_all(b"default = \"allow\"\n")
}
fn open_creat_wronly(_: &Fixture, p: &Path) -> io::Result<()> {
    // O_CREAT | O_WRONLY without O_TRUNC.
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .map(drop)
}
fn open_wronly(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(p)?
        .write_all(b"default = \"allow\"\n")
}
fn open_trunc(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(p)
        .map(drop)
}
fn append(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new()
        .append(true)
        .open(p)?
        .write_all(b"\ndefault = \"allow\"\n")
}
fn truncate(_: &Fixture, p: &Path) -> io::Result<()> {
    nix::unistd::truncate(p, 0).map_err(io::Error::from)
}
fn chmod(_: &Fixture, p: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(0o666))
}
fn chown(_: &Fixture, p: &Path) -> io::Result<()> {
    std::os::unix::fs::lchown(p, Some(1), Some(1))
}
fn utimes(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string; NULL times means now.
    ret(unsafe { libc::utimensat(libc::AT_FDCWD, c(p).as_ptr(), std::ptr::null(), 0) })
}
fn setxattr(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C strings and value.
    ret(unsafe {
        libc::setxattr(
            c(p).as_ptr(),
            c"user.veilfs".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        )
    })
}
fn removexattr(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C strings.
    ret(unsafe { libc::removexattr(c(p).as_ptr(), c"user.kept".as_ptr()) })
}
fn unlink(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::remove_file(p)
}
fn rmdir(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::remove_dir(p)
}
fn rename_from(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::rename(p, f.m("moved"))
}
/// A new file (made through the mount) renamed over the name.
fn rename_onto(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::rename(f.m("new.toml"), p)
}
fn link_onto(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::hard_link(f.m("new.toml"), p)
}
fn link_from(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::hard_link(p, f.m("alias"))
}
fn symlink_at(_: &Fixture, p: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink("new.toml", p)
}
fn mknod_at(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string.
    ret(unsafe { libc::mknod(c(p).as_ptr(), libc::S_IFIFO | 0o644, 0) })
}
fn mkdir_at(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::create_dir(p)
}

/// How the mount under attack gets its policy.
#[derive(Clone, Copy, Debug)]
enum Given {
    /// The built-in policy, no policy file.
    Builtin,
    /// `default = "allow"` (and a rule allowing `.veilfs.toml`) from a file outside
    /// the workspace, as `--policy /outside/p.toml`.
    AllowOutside,
}

/// A workspace with the files the attacks use; `.veilfs.toml` (at the root and in
/// `sub/`) exists when `planted`.
fn workspace(planted: bool) -> Fixture {
    let f = Fixture::new();
    f.file("ok.txt", "ok\n")
        .file("new.toml", "default = \"allow\"\n")
        .file(".env", "SECRET=1\n")
        .dir("sub");
    if planted {
        f.file(".veilfs.toml", "default = \"deny\"\n")
            .file("sub/.veilfs.toml", "default = \"deny\"\n");
        for p in [".veilfs.toml", "sub/.veilfs.toml"] {
            // SAFETY: valid C strings and value.
            let _ = unsafe {
                libc::setxattr(
                    c(&f.s(p)).as_ptr(),
                    c"user.kept".as_ptr(),
                    b"1".as_ptr().cast(),
                    1,
                    0,
                )
            };
        }
    }
    f
}

fn mount(f: &mut Fixture, given: Given) {
    match given {
        Given::Builtin => {
            f.mount_policy(Policy::builtin(), None);
        }
        Given::AllowOutside => {
            let file = f.tmp.path().join("p.toml");
            fs::write(&file, ALLOW).unwrap();
            let p = Policy::parse(&file.display().to_string(), ALLOW).unwrap();
            f.mount_policy(p, Some(&file));
        }
    }
}

/// Runs `op` on `target` in the mount: EACCES, and the backing tree unchanged.
#[track_caller]
fn refused(f: &Fixture, target: &str, op: Op, what: &str) {
    let before = f.snapshot();
    let r = op(f, &f.m(target));
    assert_errno(r, libc::EACCES, &format!("{what} on {target}"));
    assert_eq!(
        before,
        f.snapshot(),
        "{what} on {target} changed the backing tree:\n{}",
        common::listing(&f.src)
    );
}

/// `op` on `.veilfs.toml` and `sub/.veilfs.toml`, under each policy: refused.
fn on_the_name(planted: bool, op: Op, what: &str) {
    for given in [Given::Builtin, Given::AllowOutside] {
        let mut f = workspace(planted);
        mount(&mut f, given);
        for target in [".veilfs.toml", "sub/.veilfs.toml"] {
            refused(&f, target, op, &format!("{what} ({given:?})"));
            if !planted {
                assert!(
                    fs::symlink_metadata(f.s(target)).is_err(),
                    "{what} ({given:?}) planted {target}"
                );
            }
        }
    }
}

macro_rules! name_attacks {
    ($($name:ident: $planted:expr, $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                on_the_name($planted, $op, stringify!($op));
            }
        )*
    };
}

name_attacks! {
    // The name before it exists: nothing can bring it into existence.
    missing_name_create: false, create;
    missing_name_create_new: false, create_new;
    missing_name_open_creat_wronly: false, open_creat_wronly;
    missing_name_rename_onto: false, rename_onto;
    missing_name_link_onto: false, link_onto;
    missing_name_symlink: false, symlink_at;
    missing_name_mknod: false, mknod_at;
    missing_name_mkdir: false, mkdir_at;
    // The name once it exists: nothing changes it.
    existing_name_open_wronly: true, open_wronly;
    existing_name_open_trunc: true, open_trunc;
    existing_name_append: true, append;
    existing_name_create: true, create;
    existing_name_truncate: true, truncate;
    existing_name_chmod: true, chmod;
    existing_name_chown: true, chown;
    existing_name_utimes: true, utimes;
    existing_name_setxattr: true, setxattr;
    existing_name_removexattr: true, removexattr;
    existing_name_unlink: true, unlink;
    existing_name_rename_from: true, rename_from;
    existing_name_rename_onto: true, rename_onto;
    existing_name_link_from: true, link_from;
}

#[test]
fn the_name_stays_readable_and_a_deny_rule_still_hides_it() {
    let mut f = workspace(true);
    mount(&mut f, Given::AllowOutside);
    assert_eq!(
        fs::read_to_string(f.m("sub/.veilfs.toml")).unwrap(),
        "default = \"deny\"\n"
    );
    // Other names stay writable under `default = "allow"`.
    fs::write(f.m("sub/other.toml"), "x").unwrap();
    fs::rename(f.m("sub/other.toml"), f.m("sub/veilfs.toml")).unwrap();
    drop(f);

    let mut f = workspace(true);
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\".veilfs.toml\"]\n");
    assert_errno(fs::read(f.m(".veilfs.toml")), libc::EACCES, "read");
    let names: Vec<_> = fs::read_dir(f.m("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "a denied name was listed: {names:?}");
}

/// A workspace whose policy file `conf/pol.toml` (`default = "allow"`) is also
/// reached by the hard link `notes.txt`; mounted with that policy file.
fn hard_linked() -> Fixture {
    let mut f = Fixture::new();
    f.file("conf/pol.toml", ALLOW)
        .file("new.toml", "x\n")
        .file("ok.txt", "ok\n");
    fs::hard_link(f.s("conf/pol.toml"), f.s("notes.txt")).unwrap();
    let file = f.s("conf/pol.toml");
    let p = Policy::parse(&file.display().to_string(), ALLOW).unwrap();
    f.mount_policy(p, Some(&file));
    f
}

macro_rules! link_attacks {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let f = hard_linked();
                refused(&f, "notes.txt", $op, stringify!($op));
                assert_eq!(fs::read_to_string(f.s("conf/pol.toml")).unwrap(), ALLOW);
            }
        )*
    };
}

link_attacks! {
    hard_link_open_wronly: open_wronly;
    hard_link_open_trunc: open_trunc;
    hard_link_append: append;
    hard_link_truncate: truncate;
    hard_link_chmod: chmod;
    hard_link_utimes: utimes;
    hard_link_setxattr: setxattr;
    hard_link_unlink: unlink;
    hard_link_rename_from: rename_from;
    hard_link_rename_onto: rename_onto;
    hard_link_link_from: link_from;
}

#[test]
fn hard_link_write_with_strict_open_before_and_after_the_policy_name_was_seen() {
    let mut f = Fixture::new();
    f.file("pol.toml", ALLOW);
    fs::hard_link(f.s("pol.toml"), f.s("notes.txt")).unwrap();
    let file = f.s("pol.toml");
    let p = Policy::parse("pol.toml", ALLOW).unwrap();
    let opts = veilfs::MountOptions {
        strict_open: true,
        ..Default::default()
    };
    f.mount_with(p, Some(&file), &opts);
    refused(&f, "notes.txt", open_wronly, "open_wronly");
    // Both names looked up and read: one node, read-only whichever name asks.
    assert_eq!(fs::read_to_string(f.m("notes.txt")).unwrap(), ALLOW);
    assert_eq!(fs::read_to_string(f.m("pol.toml")).unwrap(), ALLOW);
    refused(&f, "notes.txt", open_wronly, "open_wronly");
    refused(&f, "notes.txt", truncate, "truncate");
    // And no new name for it is made through the mount.
    refused(&f, "pol.toml", link_from, "link_from");
}

/// `--policy link.toml`, a symbolic link outside the workspace to `SRC/pol.toml`:
/// the file read is protected under its real name.
#[test]
fn policy_given_as_a_link_from_outside_protects_the_target() {
    for (op, what) in [
        (open_wronly as Op, "open_wronly"),
        (open_trunc, "open_trunc"),
        (truncate, "truncate"),
        (chmod, "chmod"),
        (setxattr, "setxattr"),
        (unlink, "unlink"),
        (rename_onto, "rename_onto"),
    ] {
        let mut f = Fixture::new();
        f.file("pol.toml", ALLOW).file("new.toml", "x\n");
        let link = f.tmp.path().join("link.toml");
        std::os::unix::fs::symlink(f.s("pol.toml"), &link).unwrap();
        let p = Policy::parse("link.toml", ALLOW).unwrap();
        f.mount_policy(p, Some(&link));
        refused(&f, "pol.toml", op, what);
        assert_eq!(fs::read_to_string(f.s("pol.toml")).unwrap(), ALLOW);
    }
}

/// `--policy SRC/link.toml`, a link inside the workspace to `conf/pol.toml`: both
/// the target and the link itself (what reloads follow) are protected.
#[test]
fn policy_given_as_a_link_inside_protects_the_target_and_the_link() {
    let mut f = Fixture::new();
    f.file("conf/pol.toml", ALLOW).file("new.toml", "x\n");
    std::os::unix::fs::symlink("conf/pol.toml", f.s("link.toml")).unwrap();
    let link = f.s("link.toml");
    let p = Policy::parse("link.toml", ALLOW).unwrap();
    f.mount_policy(p, Some(&link));
    refused(&f, "conf/pol.toml", open_wronly, "open_wronly");
    refused(&f, "conf/pol.toml", truncate, "truncate");
    refused(&f, "conf/pol.toml", rename_onto, "rename_onto");
    refused(&f, "link.toml", unlink, "unlink");
    refused(&f, "link.toml", rename_onto, "rename_onto");
    assert_eq!(fs::read_to_string(f.s("conf/pol.toml")).unwrap(), ALLOW);
}

/// The directories holding the policy file are neither renamed nor removed.
#[test]
fn directories_holding_the_policy_file_stay_put() {
    let mut f = Fixture::new();
    f.file("conf/deep/pol.toml", ALLOW)
        .dir("empty")
        .dir("other/x");
    let file = f.s("conf/deep/pol.toml");
    let p = Policy::parse("pol.toml", ALLOW).unwrap();
    f.mount_policy(p, Some(&file));
    refused(&f, "conf", rename_from, "rename_from");
    refused(&f, "conf/deep", rename_from, "rename_from");
    refused(&f, "conf", rmdir, "rmdir");
    refused(&f, "conf/deep", rmdir, "rmdir");
    let r = fs::rename(f.m("empty"), f.m("conf/deep"));
    assert_errno(r, libc::EACCES, "rename an empty directory over conf/deep");
    // Other directories move as usual.
    fs::rename(f.m("other"), f.m("other2")).unwrap();
    fs::remove_dir(f.m("other2/x")).unwrap();
    assert_eq!(
        fs::read_to_string(f.s("conf/deep/pol.toml")).unwrap(),
        ALLOW
    );
}

/// `veilfs explain` gives the name's guard as the reason, whatever the rules.
#[test]
fn explain_says_the_name_is_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let pol = tmp.path().join("p.toml");
    fs::write(&pol, ALLOW).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", "--policy"])
        .arg(&pol)
        .arg("--workspace")
        .arg(tmp.path())
        .args([".veilfs.toml", "sub/.veilfs.toml", "x.toml"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    for l in &lines[..2] {
        assert!(
            l.starts_with("read-only") && l.contains("policy file's name"),
            "{text}"
        );
    }
    assert!(lines[2].starts_with("allow"), "{text}");
}

/// A `veilfs mount` child, stopped (SIGTERM) and waited for on drop.
struct Daemon {
    child: Child,
    ready: String,
    mnt: PathBuf,
}

impl Daemon {
    fn start(f: &Fixture) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("mount")
            .arg(&f.src)
            .arg(&f.mnt)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(child.stderr.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert!(ready.starts_with("veilfs: mounted "), "{ready:?}");
        Daemon {
            child,
            ready,
            mnt: f.mnt.clone(),
        }
    }

    fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            if !wait_until(Duration::from_secs(10), || {
                self.child.try_wait().unwrap().is_some()
            }) {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        if veilfs::session::mount::is_mount_point(&self.mnt.canonicalize().unwrap()) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// `veilfs mount` with the built-in policy: a command plants `.veilfs.toml` every
/// way it can; the next `veilfs mount` (no `--policy`) still uses the built-in
/// policy and still hides `.env`.
#[test]
fn a_planted_policy_is_never_honoured_by_the_next_mount() {
    let f = Fixture::new();
    f.file(".env", "SECRET=1\n").file("sub/a.txt", "a\n");
    let d = Daemon::start(&f);
    assert!(d.ready.contains("built-in default policy"), "{}", d.ready);
    let plant = "default = \"allow\"\n";
    assert_errno(fs::write(f.m(".veilfs.toml"), plant), libc::EACCES, "write");
    fs::write(f.m("planted"), plant).unwrap();
    assert_errno(
        fs::rename(f.m("planted"), f.m(".veilfs.toml")),
        libc::EACCES,
        "rename",
    );
    assert_errno(
        fs::hard_link(f.m("planted"), f.m(".veilfs.toml")),
        libc::EACCES,
        "link",
    );
    assert_errno(
        std::os::unix::fs::symlink("planted", f.m(".veilfs.toml")),
        libc::EACCES,
        "symlink",
    );
    let o = f.sh("printf 'default = \"allow\"\\n' > .veilfs.toml");
    assert!(!o.status.success(), "{}", f.explain("sh plant", &o));
    d.stop();
    assert!(fs::symlink_metadata(f.s(".veilfs.toml")).is_err());

    let d = Daemon::start(&f);
    assert!(d.ready.contains("built-in default policy"), "{}", d.ready);
    assert_errno(fs::read(f.m(".env")), libc::EACCES, "read .env");
    d.stop();
}

/// The guard is part of every decision the policy makes (one source of truth for the
/// mount and `explain`): at any depth, under any rule but `deny`.
#[test]
fn the_policy_decides_the_name_read_only() {
    use veilfs::{Action, Decision, Reason};
    let p = Policy::parse("p.toml", ALLOW).unwrap();
    for path in [&b".veilfs.toml"[..], b"a/b/.veilfs.toml"] {
        let d = p.decide(path, false);
        assert_eq!(d.action, Action::ReadOnly);
        assert!(matches!(d.reason, Reason::PolicyName), "{}", d.why());
        let d = p.decide_child(&Decision::root(), b".veilfs.toml", || false);
        assert_eq!(d.action, Action::ReadOnly);
    }
    assert_eq!(p.decide(b"a/veilfs.toml", false).action, Action::Allow);
    assert_eq!(p.decide(b".veilfs.toml.bak", false).action, Action::Allow);
    let deny = Policy::parse(
        "d.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\".veilfs.toml\"]\n",
    )
    .unwrap();
    assert_eq!(deny.decide(b"x/.veilfs.toml", false).action, Action::Deny);
}
