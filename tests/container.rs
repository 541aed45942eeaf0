//! `veilfs run` where a container runs it: in a mount and PID namespace of its own,
//! as root with the capability bounding set Docker gives by default plus
//! `SYS_ADMIN` (`docker run --device /dev/fuse --cap-add SYS_ADMIN`). The policy
//! holds there as anywhere, and the command is left without `CAP_SYS_ADMIN`.

mod common;

use std::process::Command;

use common::run::{show, text};

/// Docker's default capabilities, and `SYS_ADMIN`, as `setpriv --bounding-set` takes
/// them.
const CONTAINER_CAPS: &str = "-all,+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,\
+setgid,+setuid,+setfcap,+setpcap,+net_bind_service,+sys_chroot,+kill,+audit_write,+sys_admin";

#[test]
fn run_in_a_container_with_cap_sys_admin_enforces_the_policy() {
    common::require_fuse();
    let ws = tempfile::Builder::new()
        .prefix("veilfs-container")
        .tempdir()
        .unwrap();
    std::fs::write(ws.path().join(".env"), "TOPSECRET\n").unwrap();
    std::fs::write(ws.path().join("a.txt"), "visible\n").unwrap();
    let script = "cat a.txt; cat .env; echo \"cat=$?\"; ls -A; \
                  echo changed > a.txt; grep -E '^Cap(Eff|Bnd):' /proc/self/status";
    let o = Command::new("unshare")
        .current_dir(ws.path())
        .args(["--mount", "--pid", "--fork", "--mount-proc", "setpriv"])
        .args(["--bounding-set", CONTAINER_CAPS, "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--workspace"])
        .arg(ws.path())
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(out.starts_with("visible\n"), "{}", show(&o));
    assert!(out.contains("cat=1"), "{}", show(&o));
    assert!(!out.contains("TOPSECRET"), "{}", show(&o));
    assert!(!out.contains(".env\n"), ".env is not listed: {}", show(&o));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".env")).unwrap(),
        "TOPSECRET\n"
    );
    // The command holds no CAP_SYS_ADMIN, in any set: it cannot mount over or
    // unmount the workspace.
    let admin = caps::Capability::CAP_SYS_ADMIN.bitmask();
    for line in out.lines().filter(|l| l.starts_with("Cap")) {
        let (set, hex) = line.split_once(':').unwrap();
        let bits = u64::from_str_radix(hex.trim(), 16).unwrap();
        assert_eq!(bits & admin, 0, "{set} holds CAP_SYS_ADMIN: {}", show(&o));
    }
}
