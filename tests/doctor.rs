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
        "FUSE over io_uring:",
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

/// What doctor says of FUSE over io_uring with the fuse module's `enable_uring` off
/// and on (a file bound over the parameter in a private mount namespace, so the
/// machine's setting is neither read nor changed).
#[test]
fn doctor_says_whether_the_ring_is_on_and_how_to_turn_it_on() {
    let tmp = tempfile::tempdir().unwrap();
    let said = |value: &str| {
        let f = tmp.path().join(value);
        std::fs::write(&f, format!("{value}\n")).unwrap();
        let script = format!(
            "mount --bind {} /sys/module/fuse/parameters/enable_uring && exec {} doctor",
            f.display(),
            env!("CARGO_BIN_EXE_veilfs")
        );
        let o = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .find(|l| l.contains("FUSE over io_uring:"))
            .unwrap_or_else(|| {
                panic!(
                    "no io_uring line:\n{out}\n{}",
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .to_string()
    };
    let off = said("N");
    assert!(
        off.contains("off: `echo Y > /sys/module/fuse/parameters/enable_uring`"),
        "{off}"
    );
    let on = said("Y");
    assert!(on.contains("available: `--transport uring`"), "{on}");
}
