//! `veilfs run`: the command sees the workspace through the policy at its usual path,
//! with no way around it, and nothing is ever mounted outside.

mod common;

use common::run::{show, text};

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{require_fuse, wait_until};

const SECRET: &str = "TOPSECRET-run";

/// A workspace with a denied `.env` and `secrets/`, and an allowed file.
struct Ws {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-run")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(dir.join("secrets")).unwrap();
        std::fs::write(dir.join(".env"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.join("secrets/token"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
        Ws { tmp, dir }
    }

    fn veilfs(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run").args(args).current_dir(cwd);
        c
    }

    /// `veilfs run -- sh -c SCRIPT` from the workspace root.
    fn sh(&self, script: &str) -> Output {
        let o = self
            .veilfs(&self.dir, &["--quiet", "--", "sh", "-c", script])
            .output()
            .unwrap();
        assert_no_mount_outside(&self.dir);
        o
    }
}

/// The test process is in the original mount namespace: the workspace must never be
/// a mount point here.
#[track_caller]
fn assert_no_mount_outside(dir: &Path) {
    assert!(
        !veilfs::session::mount::is_mount_point(&dir.canonicalize().unwrap()),
        "{} is a mount point outside the run",
        dir.display()
    );
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !info.contains(&format!("veilfs:{}", dir.display())),
        "a veilfs mount is visible outside:\n{info}"
    );
}

#[test]
fn exit_status_is_the_commands() {
    let ws = Ws::new();
    assert_eq!(ws.sh("exit 7").status.code(), Some(7));
    assert_eq!(ws.sh("exit 0").status.code(), Some(0));
    assert_eq!(ws.sh("kill -TERM $$").status.code(), Some(128 + 15));
    assert_eq!(ws.sh("kill -KILL $$").status.code(), Some(128 + 9));
    let o = ws
        .veilfs(&ws.dir, &["--quiet", "--", "no-such-command-veilfs"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
}

#[test]
fn prints_three_lines_unless_quiet() {
    let ws = Ws::new();
    let o = ws.veilfs(&ws.dir, &["--", "true"]).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.starts_with("veilfs: running true in "), "{err}");
    assert!(err.contains("built-in default policy"), "{err}");
    let o = ws.veilfs(&ws.dir, &["-q", "--", "true"]).output().unwrap();
    assert!(o.stderr.is_empty(), "{}", show(&o));
}

#[test]
fn the_working_directory_is_kept_and_reached_through_the_mount() {
    let ws = Ws::new();
    let sub = ws.dir.join("sub/deeper");
    let wsdir = ws.dir.to_str().unwrap();
    let o = ws
        .veilfs(
            &sub,
            &[
                "-q",
                "--workspace",
                wsdir,
                "--",
                "sh",
                "-c",
                "pwd; cat ../../.env; echo st=$?",
            ],
        )
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(
        out.starts_with(&format!("{}\n", sub.display())),
        "{}",
        show(&o)
    );
    assert!(out.contains("st=1"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
}

#[test]
fn the_environment_and_stdin_pass_through() {
    let ws = Ws::new();
    let mut child = ws
        .veilfs(
            &ws.dir,
            &[
                "-q",
                "--",
                "sh",
                "-c",
                "read line; echo \"$VEILFS_TEST_VAR:$line\"",
            ],
        )
        .env("VEILFS_TEST_VAR", "kept")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"typed\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(text(&o.stdout), "kept:typed\n");
}

#[test]
fn allowed_edits_land_in_the_real_workspace() {
    let ws = Ws::new();
    let o = ws.sh("echo new > made.txt && mkdir -p d/e && echo x > d/e/f && echo more >> a.txt");
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("made.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("d/e/f")).unwrap(),
        "x\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("a.txt")).unwrap(),
        "hello\nmore\n"
    );
    let o = ws.sh("echo x > new.pem");
    assert!(!o.status.success());
    assert!(!ws.dir.join("new.pem").exists());
}

/// Every route to the real `.env` that the command might try.
#[test]
fn the_real_workspace_is_unreachable() {
    let ws = Ws::new();
    let abs = ws.dir.join(".env");
    let link = ws.tmp.path().join("abs-link");
    std::os::unix::fs::symlink(&abs, &link).unwrap();
    let script = format!(
        r#"
        cat .env; cat {abs}; cat {link}; cat {dir}/secrets/token
        cat {dir}/sub/../.env; cd / && cat {rel}/.env; cd {dir}
        for p in /proc/[0-9]*; do
          cat $p/root{abs} $p/cwd/.env 2>/dev/null
          for fd in $p/fd/*; do cat $fd/.env 2>/dev/null; done
        done
        umount {dir}; umount -l {dir}; cat {abs}
        mkdir -p /tmp/veilfs-run-bind && mount --bind / /tmp/veilfs-run-bind && cat /tmp/veilfs-run-bind{abs}
        mount -t proc proc /tmp/veilfs-run-bind 2>/dev/null && ls /tmp/veilfs-run-bind
        nsenter -t 1 -m cat {abs}
        grep -E '^Cap(Eff|Bnd)' /proc/self/status
        true
        "#,
        abs = abs.display(),
        link = link.display(),
        dir = ws.dir.display(),
        rel = ws.dir.strip_prefix("/").unwrap().display(),
    );
    let o = ws.sh(&script);
    let out = text(&o.stdout);
    assert!(!out.contains(SECRET), "the secret leaked:\n{}", show(&o));
    // The capabilities that could undo the overlay are gone from the bounding set.
    let bnd = out
        .lines()
        .find(|l| l.starts_with("CapBnd:"))
        .expect("CapBnd line");
    let bnd = u64::from_str_radix(bnd.split_whitespace().nth(1).unwrap(), 16).unwrap();
    for cap in veilfs::run::DROPPED_CAPS {
        assert_eq!(
            bnd & cap.bitmask(),
            0,
            "capability {cap} is still in the bounding set"
        );
    }
    let _ = std::fs::remove_dir("/tmp/veilfs-run-bind");
}

#[test]
fn the_serving_process_is_not_visible() {
    let ws = Ws::new();
    let child = ws
        .veilfs(
            &ws.dir,
            &[
                "-q",
                "--",
                "sh",
                "-c",
                "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; sleep 1",
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let daemon = child.id();
    let o = child.wait_with_output().unwrap();
    let pids: Vec<u32> = text(&o.stdout)
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|&p| p < 20), "host pids visible: {pids:?}");
    assert!(
        !pids.contains(&daemon) || daemon < 20,
        "the daemon's pid {daemon} is visible"
    );
}

fn handle_of(path: &Path) -> (u32, i32, Vec<u8>) {
    #[repr(C)]
    struct FileHandle {
        bytes: u32,
        kind: i32,
        data: [u8; 128],
    }
    let mut fh = FileHandle {
        bytes: 128,
        kind: 0,
        data: [0; 128],
    };
    let mut mount_id = 0;
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C string and a handle buffer of the declared size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c.as_ptr(),
            &mut fh as *mut FileHandle,
            &mut mount_id as *mut i32,
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at: {}",
        std::io::Error::last_os_error()
    );
    (fh.bytes, fh.kind, fh.data[..fh.bytes as usize].to_vec())
}

#[test]
fn open_by_handle_is_refused() {
    let ws = Ws::new();
    let (bytes, kind, data) = handle_of(&ws.dir.join(".env"));
    let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
    let py = format!(
        r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("kind", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
fh = FH({bytes}, {kind})
raw = bytes.fromhex("{hex}")
for i, b in enumerate(raw): fh.data[i] = b
mfd = os.open("/", os.O_RDONLY)
fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY)
if fd >= 0:
    print(os.read(fd, 100).decode())
else:
    print("refused errno", ctypes.get_errno())
"#
    );
    let o = ws
        .veilfs(&ws.dir, &["-q", "--", "python3", "-c", &py])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(out.contains("refused errno"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
}

#[test]
fn user_option_runs_as_that_user() {
    let ws = Ws::new();
    for p in [ws.tmp.path(), &ws.dir] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let o = ws
        .veilfs(
            &ws.dir,
            &[
                "-q",
                "--user",
                "65534:65534",
                "--",
                "sh",
                "-c",
                "id -u; id -g; cat a.txt; cat .env; grep '^CapBnd:' /proc/self/status",
            ],
        )
        .output()
        .unwrap();
    let out = text(&o.stdout);
    let (out, bnd) = out.split_once("CapBnd:").expect("CapBnd line");
    assert_eq!(out, "65534\n65534\nhello\n", "{}", show(&o));
    // As another user too, the bounding set has lost them for good (a set-user-ID
    // binary could not bring them back).
    let bnd = u64::from_str_radix(bnd.trim(), 16).unwrap();
    for cap in veilfs::run::DROPPED_CAPS {
        assert_eq!(
            bnd & cap.bitmask(),
            0,
            "capability {cap} is still in the bounding set"
        );
    }
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
}

#[test]
fn no_mount_is_left_after_the_command_is_killed_or_veilfs_gets_sigterm() {
    let ws = Ws::new();
    // The command killed from inside.
    assert_eq!(ws.sh("kill -9 $$").status.code(), Some(137));
    // veilfs run itself terminated: the command gets SIGTERM, the status is 143.
    // Signalled once the command runs (before, `run` may still be starting).
    let mut child = ws
        .veilfs(
            &ws.dir,
            &["-q", "--", "sh", "-c", "echo started; exec sleep 30"],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "started\n");
    assert_no_mount_outside(&ws.dir);
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut code = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            code = child.try_wait().unwrap().map(|s| s.code());
            code.is_some()
        }),
        "veilfs run did not end after SIGTERM"
    );
    assert_eq!(code.unwrap(), Some(143));
    assert_no_mount_outside(&ws.dir);
}

#[test]
fn an_interactive_shell_on_a_pty() {
    let ws = Ws::new();
    let cmd = format!("{} run -q -- bash --norc -i", env!("CARGO_BIN_EXE_veilfs"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&ws.dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo pty-$((40+2)); cat .env; sleep 5 & jobs; kill %1; exit 5\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = text(&o.stdout);
    assert!(out.contains("pty-42"), "{}", show(&o));
    assert!(out.contains("Permission denied"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(out.contains("Running"), "job control: {}", show(&o));
    assert_eq!(o.status.code(), Some(5), "{}", show(&o));
    assert_no_mount_outside(&ws.dir);
}

#[test]
fn a_non_root_user_runs_it_through_a_user_namespace() {
    let ws = Ws::new();
    let user = common::run::test_user();
    common::run::fuse_for_everyone();
    common::run::chown_r(user, ws.tmp.path());
    let o = Command::new("setpriv")
        .args(["--reuid", user, "--regid", user, "--init-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args([
            "run",
            "-q",
            "--",
            "sh",
            "-c",
            "id -u; cat a.txt; echo hi > by-user.txt; cat .env; exit 4",
        ])
        .current_dir(&ws.dir)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    assert!(out.contains("hello"), "{}", show(&o));
    assert!(!out.contains(SECRET), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(ws.dir.join("by-user.txt")).unwrap(),
        "hi\n"
    );
    assert_no_mount_outside(&ws.dir);
}

/// As root, the command cannot turn the kernel's knobs that run a program as full
/// root outside every namespace (`kernel.core_pattern`, `kernel.modprobe`, cgroup
/// v1's `release_agent`), nor abort the mount: `/proc/sys` and `/sys` are read-only
/// inside. (The value written is the current one, so an old veilfs that let it
/// through changes nothing on this machine.)
#[test]
fn the_kernels_settings_are_read_only_inside() {
    let ws = Ws::new();
    let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let o = ws.sh(
        "for f in /proc/sys/kernel/core_pattern /proc/sys/kernel/modprobe; do \
           v=$(cat $f); if printf '%s\\n' \"$v\" > $f; then echo WROTE $f; else echo refused $f; fi; \
         done; \
         for f in $(find /sys/fs/cgroup /sys/kernel -maxdepth 2 \\( -name release_agent -o -name uevent_helper \\) 2>/dev/null); do \
           v=$(cat $f); if printf '%s\\n' \"$v\" > $f; then echo WROTE $f; else echo refused $f; fi; \
         done; \
         if (true > /proc/sysrq-trigger); then echo WROTE sysrq; else echo refused sysrq; fi; \
         for f in /proc/irq/default_smp_affinity $(ls -d /proc/bus/pci/*/* 2>/dev/null | head -1); do \
           [ -e $f ] || continue; \
           if python3 -c 'import os,sys; os.open(sys.argv[1], os.O_WRONLY)' $f 2>/dev/null; \
           then echo WROTE $f; else echo refused $f; fi; \
         done",
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("refused /proc/sys/kernel/core_pattern"),
        "{}",
        show(&o)
    );
    assert!(out.contains("refused sysrq"), "{}", show(&o));
    assert!(!out.contains("WROTE"), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Read-only file system"),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        before
    );
}

/// The text console's keymap is the machine's, and outlasts the session: a key
/// bound to a string is typed into the next console login. Writing it (`KDSKBSENT`,
/// here the F1 string back as it was) needs `CAP_SYS_TTY_CONFIG`, which the command
/// never holds (attacker pass 11 wrote it). Where this machine has a console, the
/// test first proves the call works outside.
#[test]
fn the_consoles_keymap_cannot_be_changed() {
    const PROBE: &str = "import fcntl, os, sys\n\
        fd = os.open('/dev/tty0', os.O_RDWR)\n\
        buf = bytearray(513)\n\
        fcntl.ioctl(fd, 0x4B48, buf)\n\
        try:\n    fcntl.ioctl(fd, 0x4B49, buf)\n    print('WROTE')\n\
        except OSError as e:\n    print('refused', e.errno)\n";
    let ws = Ws::new();
    if std::fs::File::open("/dev/tty0").is_ok() {
        let o = Command::new("python3")
            .args(["-c", PROBE])
            .output()
            .unwrap();
        assert_eq!(text(&o.stdout), "WROTE\n", "outside: {}", show(&o));
        let o = ws.sh(&format!("python3 -c \"{}\"", PROBE.replace('"', "\\\"")));
        assert_eq!(
            text(&o.stdout),
            format!("refused {}\n", libc::EPERM),
            "{}",
            show(&o)
        );
    }
    let o = ws.sh("grep '^CapBnd' /proc/self/status");
    let bnd = u64::from_str_radix(text(&o.stdout).split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(bnd & caps::Capability::CAP_SYS_TTY_CONFIG.bitmask(), 0);
}

/// `--dry-run` says what the session would be, in full, and stops: the command
/// does not run and nothing is mounted; a session `run` would refuse is refused
/// the same way.
#[test]
fn a_dry_run_says_the_session_and_starts_nothing() {
    let ws = Ws::new();
    let marker = ws.dir.join("ran");
    let script = format!("touch {}", marker.display());
    let o = ws
        .veilfs(&ws.dir, &["--dry-run", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "veilfs: would run sh in {} (the current directory)\n",
            ws.dir.canonicalize().unwrap().display()
        )),
        "{err}"
    );
    for said in [
        "veilfs:   policy: built-in default policy; hiding 3 paths in 2 places",
        "veilfs:   system read-only but /tmp",
        "veilfs:   no host socket",
    ] {
        assert!(err.contains(said), "no {said:?}: {err}");
    }
    assert!(!marker.exists(), "the command ran: {}", show(&o));
    assert_no_mount_outside(&ws.dir);
    // Refused as `run` would refuse.
    let inside = ws.dir.join("n.log");
    let o = ws
        .veilfs(
            &ws.dir,
            &[
                "--dry-run",
                "--notices",
                inside.to_str().unwrap(),
                "--",
                "true",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("is inside the workspace"),
        "{}",
        show(&o)
    );
}

/// `-v` says how the session's requests travel: through FUSE over io_uring where
/// the kernel grants it (this suite turns it on, see `scripts/test`), through
/// /dev/fuse with `--transport dev`.
#[test]
fn verbose_says_how_requests_travel() {
    let ws = Ws::new();
    for (transport, said) in [
        (
            "uring",
            "veilfs:   requests: through FUSE over io_uring, one queue per CPU\n",
        ),
        ("dev", "veilfs:   requests: through /dev/fuse"),
    ] {
        let o = ws
            .veilfs(&ws.dir, &["-v", "--transport", transport, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        assert!(
            text(&o.stderr).contains(said),
            "--transport {transport}: {}",
            show(&o)
        );
    }
}
