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
    let flags = nix::sys::statvfs::statvfs(&canon)
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
    nix::mount::mount(Some(&canon), &canon, none, MsFlags::MS_BIND, none).map_err(|e| {
        format!(
            "cannot protect the policy file {}: bind mount: {e}",
            canon.display()
        )
    })?;
    nix::mount::mount(
        none,
        &canon,
        none,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | keep,
        none,
    )
    .map_err(|e| {
        format!(
            "cannot protect the policy file {}: read-only remount: {e}",
            canon.display()
        )
    })
}
