//! `veilfs doctor`: what this machine offers veilfs, and what to do about what it
//! lacks. Exit 0 when `veilfs mount` will work.

use std::process::ExitCode;

use crate::sys;

/// One finding.
struct Check {
    level: Level,
    what: &'static str,
    detail: String,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Level {
    Ok,
    Warn,
    Fail,
}

fn kernel_version() -> (String, Option<(u32, u32)>) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let v = match (
        it.next().and_then(|s| s.parse().ok()),
        it.next().and_then(|s| s.parse().ok()),
    ) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    (release, v)
}

fn read_num(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn in_path(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|c| c.is_file())
    })
}

/// Why no user namespace could be made (see [`userns_works`]).
#[derive(Debug, thiserror::Error)]
enum UsernsError {
    /// The child's `unshare` failed (or the child did not say it worked).
    #[error("unshare(CLONE_NEWUSER | CLONE_NEWNS) was refused")]
    Refused,
    /// No child could be forked to try.
    #[error("cannot fork to try: {0}")]
    Fork(#[source] std::io::Error),
}

/// Whether this process can create a user namespace with a mount namespace in it
/// (tried in a forked child, so this process is unchanged).
#[allow(unsafe_code)]
fn userns_works() -> Result<(), UsernsError> {
    // SAFETY: `veilfs doctor` starts no thread; the child only calls `unshare` and
    // `_exit`.
    match unsafe { sys::fork() } {
        Ok(0) => {
            let ok = sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).is_ok();
            sys::exit_now(if ok { 0 } else { 1 })
        }
        Ok(pid) => match sys::wait(pid, 0) {
            Ok(Some((_, sys::Exit::Code(0)))) => Ok(()),
            _ => Err(UsernsError::Refused),
        },
        Err(e) => Err(UsernsError::Fork(e)),
    }
}

/// Where the fuse module says whether FUSE over io_uring may be used.
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether `--transport uring` can be granted here, and how to make it so.
fn uring(version: Option<(u32, u32)>, release: &str, root: bool) -> (Level, String) {
    if !matches!(version, Some(v) if v >= (6, 14)) {
        return (
            Level::Ok,
            format!("unavailable: kernel {release} < 6.14; requests travel through /dev/fuse"),
        );
    }
    match std::fs::read_to_string(ENABLE_URING).map(|s| s.trim().to_string()) {
        Ok(v) if v == "Y" || v == "1" => (
            Level::Ok,
            "available: `--transport uring` serves requests through one io_uring queue per CPU"
                .into(),
        ),
        Ok(_) if root => (
            Level::Ok,
            format!(
                "off: `echo Y > {ENABLE_URING}` turns it on until the next boot (`options fuse enable_uring=1` in /etc/modprobe.d/ for good); then `--transport uring`"
            ),
        ),
        Ok(_) => (
            Level::Ok,
            format!(
                "off: root can turn it on (`echo Y > {ENABLE_URING}`); then `--transport uring`"
            ),
        ),
        Err(_) => (
            Level::Ok,
            format!("unavailable: {ENABLE_URING} is missing (the kernel was built without it)"),
        ),
    }
}

/// Whether `veilfs run` can make its user namespace without root, and if not, why
/// and what to change.
fn user_namespaces() -> (Level, String) {
    let max = read_num("/proc/sys/user/max_user_namespaces");
    let clone = read_num("/proc/sys/kernel/unprivileged_userns_clone");
    let apparmor = read_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    match userns_works() {
        Ok(()) => (
            Level::Ok,
            "available: `veilfs run` works without root".to_string(),
        ),
        Err(e) => {
            let mut why = vec![e.to_string()];
            if max == Some(0) {
                why.push(
                    "user.max_user_namespaces is 0 (sysctl -w user.max_user_namespaces=10000)"
                        .into(),
                );
            }
            if clone == Some(0) {
                why.push("kernel.unprivileged_userns_clone is 0 (sysctl -w kernel.unprivileged_userns_clone=1)".into());
            }
            if apparmor == Some(1) {
                why.push("AppArmor restricts them (sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)".into());
            }
            (Level::Warn, why.join("; "))
        }
    }
}

fn checks() -> Vec<Check> {
    let mut out = Vec::new();
    let root = sys::euid() == 0;
    let mut add = |level, what, detail: String| {
        out.push(Check {
            level,
            what,
            detail,
        })
    };

    // The device.
    match crate::session::mount::check_fuse_device() {
        Ok(()) => add(
            Level::Ok,
            "/dev/fuse",
            "present, readable and writable".into(),
        ),
        Err(e) => add(Level::Fail, "/dev/fuse", e.to_string()),
    }

    // fusermount3, needed to mount without root.
    match in_path("fusermount3") {
        Some(p) => add(Level::Ok, "fusermount3", format!("{}", p.display())),
        None if root => add(
            Level::Warn,
            "fusermount3",
            "not installed: root mounts without it, other users need it (apt-get install fuse3)"
                .into(),
        ),
        None => add(
            Level::Fail,
            "fusermount3",
            "not installed: needed to mount as a normal user (apt-get install fuse3)".into(),
        ),
    }

    // Kernel and FUSE passthrough.
    let (release, version) = kernel_version();
    add(Level::Ok, "kernel", release.clone());
    let passthrough = match version {
        Some(v) if v >= (6, 9) && root => (Level::Ok, "available (kernel >= 6.9, running as root)".to_string()),
        Some(v) if v >= (6, 9) => (
            Level::Warn,
            "the kernel has it, but it needs CAP_SYS_ADMIN: as a normal user reads and writes go through the daemon".to_string(),
        ),
        _ => (
            Level::Warn,
            format!("unavailable: kernel {release} < 6.9; reads and writes go through the daemon"),
        ),
    };
    add(passthrough.0, "FUSE passthrough", passthrough.1);
    let (level, detail) = uring(version, &release, root);
    add(level, "FUSE over io_uring", detail);

    // User namespaces, for `veilfs run` without root.
    let (level, detail) = user_namespaces();
    add(level, "user namespaces", detail);

    // The supervisor of `veilfs run`'s connections: seccomp user notification
    // (Linux 5.0) and pidfd_getfd (5.6).
    add(
        match version {
            Some(v) if v >= (5, 6) => Level::Ok,
            _ => Level::Warn,
        },
        "connect supervision",
        match version {
            Some(v) if v >= (5, 6) => "seccomp user notification and pidfd_getfd: `veilfs run` decides every connect() of the command".to_string(),
            _ => format!("kernel {release} < 5.6: `veilfs run` cannot supervise the command's connections and will not start"),
        },
    );

    // Landlock's scopes, for `veilfs run`'s abstract sockets and signals.
    let abi = sys::landlock_abi();
    add(
        if abi >= crate::run::SCOPE_ABI {
            Level::Ok
        } else {
            Level::Warn
        },
        "Landlock scopes",
        if abi >= crate::run::SCOPE_ABI {
            format!(
                "ABI {abi}: `veilfs run` keeps the command from the host's abstract sockets and processes"
            )
        } else if abi == 0 {
            "unavailable (Landlock is off: add landlock to the lsm= boot parameter): `veilfs run` refuses to start without --without-landlock".into()
        } else {
            format!(
                "ABI {abi} < {}: needs Linux 6.12; `veilfs run` refuses to start without --without-landlock",
                crate::run::SCOPE_ABI
            )
        },
    );

    // allow_other.
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    let allow = conf.lines().any(|l| l.trim() == "user_allow_other");
    add(
        if allow || root {
            Level::Ok
        } else {
            Level::Warn
        },
        "--allow-other",
        if root {
            "root may always use it".into()
        } else if allow {
            "user_allow_other is set in /etc/fuse.conf".into()
        } else {
            "normal users need `user_allow_other` in /etc/fuse.conf for --allow-other".into()
        },
    );

    // Open files: one per directory the kernel holds.
    let (soft, hard) = sys::nofile_limit().unwrap_or((0, 0));
    add(
        if hard >= 65_536 {
            Level::Ok
        } else {
            Level::Warn
        },
        "open-file limit",
        format!(
            "soft {soft}, hard {hard} (veilfs raises the soft limit to the hard one; each directory the kernel caches holds one){}",
            if hard < 65_536 {
                "; raise the hard limit (ulimit -Hn, limits.conf) for very large trees"
            } else {
                ""
            }
        ),
    );
    out
}

pub fn doctor() -> ExitCode {
    let checks = checks();
    for c in &checks {
        let tag = match c.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{tag}  {}: {}", c.what, c.detail);
    }
    if checks.iter().any(|c| c.level == Level::Fail) {
        println!("\nveilfs cannot mount here until the FAIL lines are fixed.");
        ExitCode::from(1)
    } else {
        println!("\nveilfs can mount here.");
        ExitCode::SUCCESS
    }
}
