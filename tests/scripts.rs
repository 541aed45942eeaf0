//! `scripts/with-veilfs.sh`: mount, run, unmount on every exit path, CMD's status.

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
