//! What `veilfs run` checks and sets up, before the command starts, so that nothing
//! the command is handed reaches past the mount: descriptors inherited from the
//! caller, and the policy file.

use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::mount::MsFlags;
use nix::sys::stat::SFlag;
use nix::sys::statvfs::FsFlags;

/// Refuses a descriptor 0–2 that is a directory: it was opened in the caller's mount
/// namespace, where the workspace is not covered, so `openat(fd, "…/.env")` or
/// `/proc/self/fd/N/.env` would reach the real files (from any directory, `..` leads
/// there). Descriptors from 3 up are closed before the command starts.
pub fn check_inherited_fds() -> Result<(), String> {
    use std::os::fd::AsFd;
    let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let fds: [BorrowedFd; 3] = [i.as_fd(), o.as_fd(), e.as_fd()];
    for (fd, borrowed) in fds.into_iter().enumerate() {
        // A closed descriptor is simply `EBADF`.
        let Ok(st) = nix::sys::stat::fstat(borrowed) else {
            continue;
        };
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            let name = ["stdin", "stdout", "stderr"][fd];
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "a directory".into());
            return Err(format!(
                "{name} (descriptor {fd}) is open on the directory {target}: through it the \
                 command could reach the real workspace, around the mount. Start `veilfs run` \
                 with {name} on a terminal, a file or a pipe."
            ));
        }
    }
    Ok(())
}

/// Under `run`, no file the command can change is a source of policy.
///
/// The daemon reads the policy file through a descriptor on its real directory
/// (taken before mounting), so what counts is the file, not its spelling. Inside the
/// workspace the filesystem keeps it read-only by identity. Outside it, the file is
/// bind-mounted read-only onto itself in the command's mount namespace: writes,
/// truncation, `chmod`, and an `unlink` or `rename` onto its name all fail there
/// (`EROFS`/`EBUSY`), while the person outside still edits it at will. A file with
/// other hard links is refused: another name could rewrite it.
pub fn protect_policy_file(file: &Path, ws: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let canon = file
        .canonicalize()
        .map_err(|e| format!("policy file {}: {e}", file.display()))?;
    let meta =
        std::fs::metadata(&canon).map_err(|e| format!("policy file {}: {e}", file.display()))?;
    if meta.nlink() > 1 {
        return Err(format!(
            "the policy file {} has {} hard links: the command could rewrite it through \
             another name. Give `veilfs run` a policy file with a single link (copy it).",
            file.display(),
            meta.nlink()
        ));
    }
    if canon.starts_with(ws) {
        // Served by the mount, which keeps it read-only.
        return Ok(());
    }
    bind_read_only(&canon)
        .map_err(|e| format!("cannot protect the policy file {}: {e}", canon.display()))
}

/// The kernel's knobs the command must not turn, even as root: `kernel.core_pattern`
/// and `kernel.modprobe` name programs the kernel runs as full root in the first
/// namespaces (where the workspace is not covered), cgroup v1's `release_agent` and
/// `uevent_helper` likewise, and `/sys/fs/fuse/connections` aborts mounts. In the
/// command's mount namespace `/proc/sys`, `/proc/sysrq-trigger` and every mount
/// under `/sys` are read-only; without `CAP_SYS_ADMIN` it cannot remount them.
///
/// Called by init in the command's own mount namespace, after its `/proc` is
/// mounted. `strict`: fail when a remount fails (a real root); in a user namespace
/// the command is no real root and cannot write these anyway.
pub fn kernel_knobs_read_only(strict: bool) -> std::io::Result<()> {
    let mut targets: Vec<std::path::PathBuf> =
        vec!["/proc/sys".into(), "/proc/sysrq-trigger".into()];
    targets.extend(mounts_under(Path::new("/sys")));
    for t in targets {
        if !t.exists() {
            continue;
        }
        if let Err(e) = bind_read_only(&t) {
            if strict {
                return Err(std::io::Error::other(format!("{}: {e}", t.display())));
            }
            log::info!("{}: not made read-only: {e}", t.display());
        }
    }
    Ok(())
}

/// The mount points at or under `top`, from `/proc/self/mountinfo`, outermost first.
fn mounts_under(top: &Path) -> Vec<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(info) = std::fs::read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out: Vec<std::path::PathBuf> = info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(|mp| {
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
                &crate::mount::unescape_mountinfo(mp),
            ))
        })
        .filter(|mp| mp.starts_with(top))
        .collect();
    out.sort_by_key(|p| p.components().count());
    out.dedup();
    out
}

/// Bind-mounts `path` onto itself (unless it is a mount point already) and makes
/// that mount read-only, keeping the flags that lock it in a user namespace.
fn bind_read_only(path: &Path) -> Result<(), nix::Error> {
    let flags = nix::sys::statvfs::statvfs(path)
        .map(|s| s.flags())
        .unwrap_or(FsFlags::empty());
    // A remount inside a user namespace must keep the flags that lock the mount.
    let mut keep = MsFlags::empty();
    for (st, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if flags.contains(st) {
            keep |= ms;
        }
    }
    let none: Option<&str> = None;
    if !crate::mount::is_mount_point(path) {
        nix::mount::mount(Some(path), path, none, MsFlags::MS_BIND, none)?;
    }
    nix::mount::mount(
        none,
        path,
        none,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | keep,
        none,
    )
}
