//! The scripts a person starts from a clone: `scripts/with-veilfs.sh` (mount, run,
//! unmount on every exit path, CMD's status), `scripts/mount.sh` (a mount in the
//! foreground) and `scripts/veilfs` (the README's first line). The last two build
//! veilfs in release mode unless `VEILFS` names a built binary, as it does here.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use common::Fixture;

/// The script, with its temporary mount point made under this test's own directory
/// (so tests running side by side do not see each other's mounts).
fn script(f: &Fixture) -> Command {
    let mut c = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/with-veilfs.sh"));
    c.env("VEILFS", env!("CARGO_BIN_EXE_veilfs"));
    c.env("TMPDIR", f.tmp.path());
    c
}

/// Mounts made by the script of this fixture.
fn mounts_of(f: &Fixture) -> usize {
    let prefix = format!("{}/veilfs-mnt.", f.tmp.path().display());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&prefix))
        .count()
}

#[test]
fn runs_the_command_in_the_mount_and_passes_its_status() {
    let f = Fixture::new();
    f.file(".env", "TOPSECRET").file("a.txt", "a");
    let o = script(&f)
        .arg(&f.src)
        .args(["--", "sh", "-c", "ls -A; cat .env 2>&1; exit 7"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(7),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("a.txt"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!out.contains("TOPSECRET"), "{out}");
    assert_eq!(mounts_of(&f), 0, "a mount was left behind");
}

#[test]
fn unmounts_when_interrupted() {
    let f = Fixture::new();
    // Ctrl-C signals the whole foreground process group: the script, the daemon and
    // the command. Run the script in a group of its own and signal that group.
    let mut child = script(&f)
        .arg(&f.src)
        .args(["--", "sleep", "30"])
        .process_group(0)
        .spawn()
        .unwrap();
    assert!(common::wait_until(
        std::time::Duration::from_secs(20),
        || mounts_of(&f) > 0
    ));
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert_eq!(mounts_of(&f), 0, "a mount was left behind");
}

/// A script of the repository, given the built binary (so it does not build).
fn repo_script(name: &str) -> Command {
    let mut c = Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(name),
    );
    c.env("VEILFS", env!("CARGO_BIN_EXE_veilfs"));
    c
}

#[test]
fn mount_sh_mounts_in_the_foreground_until_terminated() {
    let f = Fixture::new();
    f.file(".env", "TOPSECRET").file("a.txt", "a");
    // mount.sh makes the mount point when it is missing.
    let mnt = f.tmp.path().join("made-by-mount.sh");
    let mut child = repo_script("mount.sh")
        .arg(&f.src)
        .arg(&mnt)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let live = common::wait_until(std::time::Duration::from_secs(20), || {
        mnt.exists() && veilfs::session::mount::is_mount_point(&mnt.canonicalize().unwrap())
    });
    let seen = (
        std::fs::read_to_string(mnt.join("a.txt")).ok(),
        std::fs::read(mnt.join(".env")).map_err(|e| e.kind()),
    );
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(live, "scripts/mount.sh: the mount did not appear");
    assert_eq!(seen.0.as_deref(), Some("a"), "a.txt through the mount");
    assert_eq!(
        seen.1,
        Err(std::io::ErrorKind::PermissionDenied),
        ".env through the mount"
    );
    assert_eq!(st.code(), Some(0), "scripts/mount.sh after SIGTERM");
    assert!(
        !veilfs::session::mount::is_mount_point(&mnt.canonicalize().unwrap()),
        "a mount was left behind"
    );
}

#[test]
fn veilfs_script_runs_veilfs_with_its_arguments() {
    let f = Fixture::new();
    f.file(".env", "TOPSECRET").file("a.txt", "a");
    let home = f.tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let o = repo_script("veilfs")
        .args([
            "run",
            "-q",
            "--",
            "sh",
            "-c",
            "ls -A; cat .env 2>&1; exit 3",
        ])
        .current_dir(&f.src)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let all = format!("{out}\nstderr:\n{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{all}");
    assert_eq!(out, "a.txt\ncat: .env: Permission denied\n", "{all}");
    assert!(
        !veilfs::session::mount::is_mount_point(&f.src.canonicalize().unwrap()),
        "a mount was left behind"
    );
}
