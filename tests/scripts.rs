//! `scripts/with-veilfs.sh`: mount, run, unmount on every exit path, CMD's status.

mod common;

use std::path::Path;
use std::process::Command;

use common::Fixture;

fn script() -> Command {
    let mut c = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/with-veilfs.sh"));
    c.env("VEILFS", env!("CARGO_BIN_EXE_veilfs"));
    c
}

fn mounts_of(prefix: &str) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(prefix))
        .count()
}

#[test]
fn runs_the_command_in_the_mount_and_passes_its_status() {
    let f = Fixture::new();
    f.file(".env", "TOPSECRET").file("a.txt", "a");
    let o = script()
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
    assert_eq!(mounts_of("veilfs-mnt."), 0, "a mount was left behind");
}

#[test]
fn unmounts_when_interrupted() {
    let f = Fixture::new();
    let mut child = script()
        .arg(&f.src)
        .args(["--", "sleep", "30"])
        .spawn()
        .unwrap();
    assert!(common::wait_until(
        std::time::Duration::from_secs(20),
        || mounts_of("veilfs-mnt.") > 0
    ));
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert_eq!(mounts_of("veilfs-mnt."), 0, "a mount was left behind");
}
