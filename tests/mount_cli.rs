//! `veilfs mount` as a process: ready line, clean exit on SIGTERM / SIGINT and on an
//! outside unmount, and every refusal to start (exit 2, nothing mounted).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Fixture, require_fuse, wait_until};
use veilfs::session::mount::is_mount_point;

/// A `veilfs mount` child process, killed and unmounted on drop if still running.
struct Daemon {
    child: Child,
    mnt: std::path::PathBuf,
    ready: String,
}

impl Daemon {
    fn start(f: &Fixture, extra: &[&str]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("mount")
            .args(extra)
            .arg(&f.src)
            .arg(&f.mnt)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.starts_with("veilfs: mounted "),
            "unexpected first line: {line:?}"
        );
        assert!(
            is_mount_point(&f.mnt.canonicalize().unwrap()),
            "ready line before the mount was live"
        );
        Daemon {
            child,
            mnt: f.mnt.clone(),
            ready: line,
        }
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let mut code = None;
        assert!(
            wait_until(Duration::from_secs(10), || {
                match self.child.try_wait().unwrap() {
                    Some(s) => {
                        code = s.code();
                        true
                    }
                    None => false,
                }
            }),
            "veilfs mount did not exit"
        );
        code
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            // A clean stop first (it unmounts and removes its control socket).
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            if !wait_until(Duration::from_secs(5), || {
                self.child.try_wait().unwrap().is_some()
            }) {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        if is_mount_point(&self.mnt.canonicalize().unwrap()) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

fn signal(d: &Daemon, sig: i32) {
    // SAFETY: sending a signal to our own child by pid.
    assert_eq!(unsafe { libc::kill(d.child.id() as i32, sig) }, 0);
}

#[test]
fn sigterm_unmounts_and_exits_zero() {
    let mut f = Fixture::new();
    f.file("a.txt", "a\n");
    let mut d = Daemon::start(&f, &[]);
    assert!(d.ready.contains("built-in default policy"), "{}", d.ready);
    assert_eq!(std::fs::read_to_string(f.m("a.txt")).unwrap(), "a\n");
    signal(&d, libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0));
    assert!(!is_mount_point(&f.mnt.canonicalize().unwrap()));
    f.mount = None;
}

#[test]
fn ttl_inf_mounts_serves_and_still_shows_outside_edits() {
    let mut f = Fixture::new();
    f.file("a.txt", "a\n");
    let mut d = Daemon::start(&f, &["--ttl", "inf"]);
    assert_eq!(std::fs::read_to_string(f.m("a.txt")).unwrap(), "a\n");
    std::fs::write(f.m("a.txt"), "b\n").unwrap();
    assert_eq!(std::fs::read_to_string(f.m("a.txt")).unwrap(), "b\n");
    // The source is watched: an outside edit invalidates the forever-cached entry.
    std::fs::write(f.s("a.txt"), "outside\n").unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(
            f.m("a.txt")
        )
        .is_ok_and(|s| s == "outside\n")),
        "an outside edit never showed with --ttl inf"
    );
    signal(&d, libc::SIGTERM);
    assert_eq!(d.wait_exit(), Some(0));
    f.mount = None;
}

#[test]
fn sigint_unmounts_and_exits_zero() {
    let f = Fixture::new();
    let mut d = Daemon::start(&f, &[]);
    signal(&d, libc::SIGINT);
    assert_eq!(d.wait_exit(), Some(0));
    assert!(!is_mount_point(&f.mnt.canonicalize().unwrap()));
}

#[test]
fn an_outside_umount_ends_the_daemon_with_zero() {
    let f = Fixture::new();
    let mut d = Daemon::start(&f, &[]);
    let st = Command::new("umount").arg(&f.mnt).status().unwrap();
    assert!(st.success());
    assert_eq!(d.wait_exit(), Some(0));
}

/// A mount's stderr carries what a person should read, not noise: an `isatty`
/// on a file (Python asks at every `open` in text mode) is answered `ENOTTY`, as
/// natively, without a line, and an unmount from outside ends the daemon quietly.
#[test]
fn ioctls_and_an_outside_unmount_leave_stderr_quiet() {
    use std::io::Read;
    let f = Fixture::new();
    f.file("a.txt", "a\n");
    let mut d = Daemon::start(&f, &[]);
    for _ in 0..3 {
        let file = std::fs::File::open(f.m("a.txt")).unwrap();
        assert_eq!(nix::unistd::isatty(&file), Ok(false));
        // SAFETY: an ioctl with a pointer to a local of the size it writes.
        let mut ws = [0u16; 4];
        let r = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::TIOCGWINSZ,
                ws.as_mut_ptr(),
            )
        };
        assert_eq!(
            (r, std::io::Error::last_os_error().raw_os_error()),
            (-1, Some(libc::ENOTTY)),
            "TIOCGWINSZ on a file through the mount"
        );
    }
    let st = Command::new("umount").arg(&f.mnt).status().unwrap();
    assert!(st.success());
    assert_eq!(d.wait_exit(), Some(0));
    let mut rest = String::new();
    d.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    assert_eq!(rest, "", "the mount said more than its start-up line");
}

#[test]
fn the_workspace_policy_file_is_used_and_named() {
    let f = Fixture::new();
    f.file(
        ".veilfs.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\"*.txt\"]\n",
    )
    .file("a.txt", "a");
    let d = Daemon::start(&f, &[]);
    assert!(d.ready.contains(".veilfs.toml"), "{}", d.ready);
    let e = std::fs::read(f.m("a.txt")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES));
    let e = std::fs::write(f.m(".veilfs.toml"), "").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EACCES));
}

/// Runs `veilfs mount ARGS` expecting a refusal: exit 2, one message, nothing mounted.
fn refuses(args: &[&Path], mnt: &Path, want: &str) {
    require_fuse();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("mount")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(want), "expected {want:?} in: {err}");
    assert_eq!(err.lines().count(), 1, "one clear message: {err}");
    if let Ok(c) = mnt.canonicalize() {
        assert!(
            !is_mount_point(&c),
            "something was mounted at {}",
            mnt.display()
        );
    }
}

#[test]
fn refuses_a_bad_policy() {
    let f = Fixture::new();
    let p = f.tmp.path().join("bad.toml");
    std::fs::write(&p, "default = \"maybe\"\n").unwrap();
    refuses(
        &[Path::new("--policy"), &p, &f.src, &f.mnt],
        &f.mnt,
        "bad.toml:1:11: error: unknown default action",
    );
}

#[test]
fn refuses_a_source_that_is_not_a_directory() {
    let f = Fixture::new();
    let file = f.tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    refuses(&[&file, &f.mnt], &f.mnt, "is not a directory");
    refuses(
        &[&f.tmp.path().join("missing"), &f.mnt],
        &f.mnt,
        "is not a directory",
    );
}

#[test]
fn refuses_a_missing_or_non_directory_mount_point() {
    let f = Fixture::new();
    let missing = f.tmp.path().join("nope");
    refuses(&[&f.src, &missing], &missing, "does not exist");
    let file = f.tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    refuses(&[&f.src, &file], &file, "is not a directory");
}

#[test]
fn refuses_a_mount_point_inside_the_source() {
    let f = Fixture::new();
    f.dir("inner");
    refuses(
        &[&f.src, &f.s("inner")],
        &f.s("inner"),
        "is inside the source",
    );
}

#[test]
fn refuses_a_mount_point_that_is_already_mounted() {
    let f = Fixture::new();
    let _d = Daemon::start(&f, &[]);
    let other = f.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("mount")
        .arg(&other)
        .arg(&f.mnt)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already a mount point"));
}

#[test]
fn refuses_when_fuse_is_unavailable() {
    // In a private mount namespace whose /dev has no fuse device.
    let f = Fixture::new();
    let script = format!(
        "mount -t tmpfs tmpfs /dev && exec {} mount {} {}",
        env!("CARGO_BIN_EXE_veilfs"),
        f.src.display(),
        f.mnt.display()
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("FUSE is unavailable: /dev/fuse does not exist"),
        "{err}"
    );
    assert!(err.contains("install fuse3"), "{err}");
    assert!(!is_mount_point(&f.mnt.canonicalize().unwrap()));
}

#[test]
fn allow_other_lets_another_user_in_and_the_policy_still_applies() {
    let f = Fixture::new();
    f.file("a.txt", "for everyone\n")
        .file(".env", "TOPSECRET\n");
    // The temp dir is private to root; let the other user walk to the mount.
    for p in [f.tmp.path(), &f.src] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let _d = Daemon::start(&f, &["--allow-other"]);
    let as_nobody = |cmd: &str| common::as_nobody(Path::new("/"), cmd);
    let o = as_nobody(&format!("cat {}", f.m("a.txt").display()));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "for everyone\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = as_nobody(&format!("cat {}", f.m(".env").display()));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("Permission denied"));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"));
}

#[test]
fn without_allow_other_another_user_is_kept_out() {
    let f = Fixture::new();
    f.file("a.txt", "root only\n");
    for p in [f.tmp.path(), &f.src] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let _d = Daemon::start(&f, &[]);
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
        .arg(f.m("a.txt"))
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "another user read a mount without --allow-other"
    );
}

#[test]
fn read_only_mounts_refuse_every_change_with_erofs() {
    let f = Fixture::new();
    f.file("a.txt", "a\n");
    let _d = Daemon::start(&f, &["--read-only"]);
    let before = f.snapshot();
    assert_eq!(std::fs::read_to_string(f.m("a.txt")).unwrap(), "a\n");
    common::assert_errno(std::fs::write(f.m("a.txt"), "b"), libc::EROFS, "write");
    common::assert_errno(std::fs::write(f.m("new.txt"), "b"), libc::EROFS, "create");
    common::assert_errno(std::fs::remove_file(f.m("a.txt")), libc::EROFS, "unlink");
    assert_eq!(before, f.snapshot());
}

#[test]
fn a_busy_mount_guard_detaches_on_drop() {
    let mut f = Fixture::new();
    f.file("a.txt", "a");
    f.mount("default = \"allow\"\n");
    // A process that keeps its working directory inside the mount.
    let mut busy = Command::new("sleep")
        .arg("30")
        .current_dir(&f.mnt)
        .spawn()
        .unwrap();
    let m = f.mount.take().unwrap();
    drop(m);
    let gone = !is_mount_point(&f.mnt.canonicalize().unwrap());
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(
        gone,
        "a busy mount was left in the mount table after the guard dropped"
    );
}

/// A write by another user clears a set-user-ID or set-group-ID file's bits, as
/// natively, whether the file is written by passthrough (with the daemon's
/// credentials, which would keep them) or through the daemon.
#[test]
fn a_write_by_another_user_clears_set_id_bits() {
    use std::os::unix::fs::PermissionsExt;
    for flags in [&["--allow-other"][..], &["--allow-other", "--strict-open"]] {
        let f = Fixture::new();
        for p in [f.tmp.path(), &f.src] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let native = f.tmp.path().join("native");
        std::fs::create_dir(&native).unwrap();
        std::fs::set_permissions(&native, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (name, mode) in [("suid.bin", 0o4777), ("sgid.bin", 0o2777)] {
            for dir in [&f.src, &native] {
                let p = dir.join(name);
                std::fs::write(&p, "#!/bin/sh\n").unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        let _d = Daemon::start(&f, flags);
        for dir in [&f.mnt, &native] {
            for name in ["suid.bin", "sgid.bin"] {
                let p = dir.join(name);
                let o = common::as_nobody(
                    std::path::Path::new("/"),
                    &format!("echo 'id' >> '{}'", p.display()),
                );
                assert!(o.status.success(), "{flags:?} {}: {o:?}", p.display());
            }
        }
        for name in ["suid.bin", "sgid.bin"] {
            let mode = |d: &std::path::Path| {
                std::fs::metadata(d.join(name))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o7777
            };
            assert_eq!(mode(&native), 0o777, "natively, {name}");
            assert_eq!(mode(&f.src), 0o777, "{flags:?}: {name} in the backing tree");
            assert_eq!(
                std::fs::read(f.src.join(name)).unwrap(),
                b"#!/bin/sh\nid\n",
                "{flags:?}: {name}"
            );
        }
    }
}
