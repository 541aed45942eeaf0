//! `veilfs doctor` on this machine, and on one without /dev/fuse.

use std::process::Command;

#[test]
fn doctor_passes_here_and_names_each_capability() {
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("doctor")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for what in [
        "/dev/fuse:",
        "fusermount3:",
        "kernel:",
        "FUSE passthrough:",
        "user namespaces:",
        "--allow-other:",
        "open-file limit:",
    ] {
        assert!(
            out.lines().any(|l| l.contains(what)),
            "no line for {what}:\n{out}"
        );
    }
    assert!(out.contains("veilfs can mount here."), "{out}");
}

#[test]
fn doctor_fails_without_a_fuse_device_and_says_what_to_do() {
    let script = format!(
        "mount -t tmpfs tmpfs /dev && exec {} doctor",
        env!("CARGO_BIN_EXE_veilfs")
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL  /dev/fuse: FUSE is unavailable: /dev/fuse does not exist"),
        "{out}"
    );
    assert!(out.contains("install fuse3"), "{out}");
}
