//! No host socket by default: what init does in the command's mount namespace so
//! that the command reaches no socket it did not make itself, unless the person
//! passed it by name (`--allow-socket PATH`).
//!
//! A read-only mount does not stop `connect()`, so sockets are kept out of reach
//! by three means, each closing a class:
//!
//! 1. **Private places** (see [`super::private`]): `/run` (the runtime
//!    directories: `/run/user/UID` with D-Bus, Wayland, gpg-agent and editor IPC,
//!    `/run/veilfs` with the sessions' control sockets, the Docker, containerd and
//!    system bus sockets, `/run/screen`), and `/tmp`, `/var/tmp` and `/dev/shm`
//!    (tmux's, X11's, ssh-agent's and screen's sockets) unless `--share-tmp`, are
//!    the session's own.
//! 2. **The sockets elsewhere** ([`cover_listed_sockets`]): every path socket this
//!    network namespace lists in `/proc/net/unix` that is still in view (outside
//!    the private places and veilfs's own mounts, where the kernel never reaches
//!    the socket behind a name) gets `/dev/null` bound over it: `connect()` then
//!    answers `ECONNREFUSED`. A socket bound after the start, outside the private
//!    places, is not covered.
//! 3. **Abstract sockets and signals** ([`scope_self`]): Landlock's scopes (ABI 6,
//!    Linux 6.12) confine the command to abstract sockets made inside the session,
//!    and to signalling its own processes. Abstract sockets belong to a network
//!    namespace, so without this the host's (X11's `@/tmp/.X11-unix/X0`, D-Bus's)
//!    were reachable even under `--user`.
//!
//! And the IPC namespace of the command's own ([`private_ipc`]: SysV shared
//! memory, semaphores, message queues; POSIX queues on a fresh `/dev/mqueue`).
//!
//! Every step fails the start when it fails: a session that would run open does
//! not run.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;

/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` and `LANDLOCK_SCOPE_SIGNAL`.
const SCOPES: u64 = 1 | 2;
/// The first Landlock ABI with both scopes.
pub const SCOPE_ABI: u32 = 6;

/// The path sockets `/proc/net/unix` lists (absolute names only: an abstract or
/// relative name has no place in the tree).
pub fn listed_sockets(table: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // Num RefCount Protocol Flags Type St Inode [Path], the path may hold
            // spaces.
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(' ')?;
                rest = rest[end..].trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Binds `/dev/null` over every socket this network namespace lists that the
/// command would still reach by its path (see the module's documentation).
pub fn cover_listed_sockets(allowed: &[PathBuf]) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let table = fs::read_to_string("/proc/net/unix")?;
    // Never looked up through veilfs's mounts (a refused name would be a notice).
    let fuse = super::confine::fuse_mount_points()?;
    for sock in listed_sockets(&table) {
        if allowed.iter().chain(&fuse).any(|a| sock.starts_with(a)) {
            continue;
        }
        // Gone, or hidden under a private place.
        let Ok(meta) = fs::symlink_metadata(&sock) else {
            continue;
        };
        if !meta.file_type().is_socket() {
            continue;
        }
        let none: Option<&str> = None;
        nix::mount::mount(Some("/dev/null"), &sock, none, MsFlags::MS_BIND, none)
            .map_err(|e| super::private::at(&sock, "cannot cover this socket", e.into()))?;
        log::debug!("{}: covered", sock.display());
    }
    Ok(())
}

/// An IPC namespace of the command's own, with a fresh `/dev/mqueue` where the
/// system has one.
pub fn private_ipc() -> io::Result<()> {
    crate::sys::unshare(libc::CLONE_NEWIPC)?;
    let mq = Path::new("/dev/mqueue");
    if mq.is_dir() {
        let none: Option<&str> = None;
        nix::mount::mount(
            Some("mqueue"),
            mq,
            Some("mqueue"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            none,
        )?;
    }
    Ok(())
}

/// Whether this kernel can scope abstract sockets and signals.
pub fn can_scope() -> bool {
    crate::sys::landlock_abi() >= SCOPE_ABI
}

/// Confines the calling process (the command, before `exec`) to the abstract
/// sockets and the processes of its own Landlock domain.
pub fn scope_self() -> io::Result<()> {
    crate::sys::landlock_scope_self(SCOPES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sockets_takes_absolute_paths_with_spaces() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1234 /run/a b.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1235 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03  5044\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1236 rel.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1237 /tmp/tmux-0/default\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1238 /tmp/tmux-0/default\n";
        assert_eq!(
            listed_sockets(table),
            vec![
                PathBuf::from("/run/a b.sock"),
                PathBuf::from("/tmp/tmux-0/default")
            ]
        );
    }
}
