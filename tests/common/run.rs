//! Helpers shared by the tests that start `veilfs run`: a command's output shown
//! whole in a failure, and the non-root test user.

use std::path::Path;
use std::process::{Command, Output};

/// Bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A command's status, stdout and stderr, for a failure message.
pub fn show(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The suite's non-root user, made with `useradd -M` when missing (its home
/// directory from the password database is not made).
pub fn test_user() -> &'static str {
    let user = "veilfs-test";
    if Command::new("id").arg(user).output().unwrap().status.code() != Some(0) {
        let st = Command::new("useradd")
            .args(["-M", "-s", "/bin/sh", user])
            .status()
            .unwrap();
        assert!(st.success(), "useradd failed");
    }
    user
}

/// Makes `/dev/fuse` usable by every user, as the fuse3 package sets it up (for
/// `veilfs run` through a user namespace).
pub fn fuse_for_everyone() {
    std::fs::set_permissions(
        "/dev/fuse",
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
}

/// `chown -R user:user path`.
pub fn chown_r(user: &str, path: &Path) {
    let st = Command::new("chown")
        .args(["-R", &format!("{user}:{user}")])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Asserts that none of `roots` (a run's workspace and home) is a mount point here,
/// outside the run.
pub fn assert_not_mounted_outside(roots: &[&Path]) {
    for root in roots {
        assert!(
            !veilfs::session::mount::is_mount_point(&root.canonicalize().unwrap()),
            "{} is a mount point outside the run",
            root.display()
        );
    }
}
