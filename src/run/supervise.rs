//! The supervisor of the command's `connect()` calls: a process of the session,
//! beside the command, outside its seccomp filter.
//!
//! Covering sockets by the names the kernel lists misses those reached by
//! another name (bound through a link or relative to a directory, renamed after
//! binding, hard-linked): so the command reaches no socket by the name it gives
//! at all. Its every `connect()` waits (seccomp user notification) while the
//! supervisor decides and, when it allows, **connects the command's own socket
//! itself** (taken with `pidfd_getfd`) to the very object it checked, then
//! answers with the result. Nothing the command changes after the check (the
//! address in its memory, the descriptor behind the number, a link or a rename)
//! reaches the connection: the supervisor never lets the call "continue".
//!
//! What is allowed:
//! * an address of another family (`AF_INET`, `AF_INET6`, ...): connected as
//!   given (the network is the `--net` issue's; loopback stays reachable);
//! * a path socket that lies in one of the session's own mounts (the private
//!   `/tmp`, `/var/tmp`, `/dev/shm`, `/run`, and veilfs's workspace and home
//!   mounts, where a socket bound outside is never reached), or below an
//!   `--allow-socket` path: opened `O_PATH` as the command's user would, and
//!   connected through `/proc/self/fd/N`, that object and no other;
//! * an abstract name that a process of the session holds a socket bound to.
//!
//! Anything else answers `ECONNREFUSED`, as if nothing listened. Under `--user`
//! the thread that connects takes the command's user first, so the socket's
//! permissions and the peer's credentials are the command's.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sys;

/// What the supervisor decides by.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The mount ids of the session's own mounts (see the module's documentation).
    pub mounts: Vec<u64>,
    /// `--allow-socket` paths (canonical).
    pub allowed: Vec<PathBuf>,
    /// `--user`: the command's uid and gid.
    pub user: Option<(u32, u32)>,
}

/// The mount ids of `places` (the covered private places, veilfs's mount roots),
/// in this mount namespace.
pub fn mount_ids(places: &[PathBuf]) -> Vec<u64> {
    places
        .iter()
        .filter_map(|p| super::confine::mount_id_of(p).ok())
        .collect()
}

/// Serves `listener` until no process uses its filter any more.
pub fn serve(listener: OwnedFd, rules: Rules) -> ! {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let listener = Arc::new(listener);
    let rules = Arc::new(rules);
    loop {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => sys::exit_now(0),
        }
        let revents = fds[0].revents().unwrap_or(PollFlags::empty());
        if !revents.contains(PollFlags::POLLIN) {
            // Every process under the filter is gone.
            sys::exit_now(0);
        }
        let n = match sys::seccomp_receive(listener.as_fd()) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(_) => sys::exit_now(0),
        };
        let (theirs, rules) = (listener.clone(), rules.clone());
        // A thread each: a connect to a slow host must not hold the others.
        let spawned = std::thread::Builder::new()
            .name("veilfs-connect".into())
            .spawn(move || {
                let result = answer(theirs.as_fd(), &n, &rules);
                let _ = sys::seccomp_answer(theirs.as_fd(), n.id, result);
            });
        if spawned.is_err() {
            let _ = sys::seccomp_answer(listener.as_fd(), n.id, Err(libc::EAGAIN));
        }
    }
}

/// Decides one `connect(fd, addr, len)` and makes it: the errno the command gets.
fn answer(listener: BorrowedFd<'_>, n: &sys::Notification, rules: &Rules) -> Result<(), i32> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let (fd, addr, len) = (n.args[0], n.args[1], n.args[2] as usize);
    if len > std::mem::size_of::<libc::sockaddr_storage>() || len < 2 {
        return Err(libc::EINVAL);
    }
    let pid = rustix::process::Pid::from_raw(n.pid as i32).ok_or(libc::ESRCH)?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        .map_err(|e| e.raw_os_error())?;
    let mut bytes = vec![0u8; len];
    File::open(format!("/proc/{}/mem", n.pid))
        .and_then(|m| m.read_exact_at(&mut bytes, addr))
        .map_err(|_| libc::EFAULT)?;
    let sock =
        rustix::process::pidfd_getfd(&pidfd, fd as i32, rustix::process::PidfdGetfdFlags::empty())
            .map_err(|e| e.raw_os_error())?;
    // Still the process that asked (not another that took its pid).
    if !sys::seccomp_still_waits(listener, n.id) {
        return Err(libc::EINTR);
    }
    let cwd = File::open(format!("/proc/{}/cwd", n.pid)).map_err(errno)?;
    if let Some((uid, gid)) = rules.user {
        sys::become_user_this_thread(uid, gid).map_err(errno)?;
    }
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    if family != libc::AF_UNIX as u16 {
        return sys::connect_bytes(sock.as_fd(), &bytes).map_err(errno);
    }
    let path = &bytes[2..];
    match path.first() {
        Some(0) => connect_abstract(sock.as_fd(), &bytes),
        Some(_) => connect_path(sock.as_fd(), cwd.as_fd(), &as_theirs(path, n.pid), rules),
        // Unnamed: the kernel's own answer.
        None => sys::connect_bytes(sock.as_fd(), &bytes).map_err(errno),
    }
}

/// `path` with a leading `/proc/self/` or `/proc/thread-self/` (a socket reached
/// through a descriptor, as `veilfs reload` does) made the asking process's: here
/// they would name the supervisor.
fn as_theirs(path: &[u8], pid: u32) -> Vec<u8> {
    for own in [&b"/proc/self/"[..], b"/proc/thread-self/"] {
        if let Some(rest) = path.strip_prefix(own) {
            let mut out = format!("/proc/{pid}/").into_bytes();
            out.extend_from_slice(rest);
            return out;
        }
    }
    path.to_vec()
}

/// A path socket: allowed where the session's own mounts or `--allow-socket`
/// hold it; connected through the descriptor that was checked.
fn connect_path(
    sock: BorrowedFd<'_>,
    cwd: BorrowedFd<'_>,
    raw: &[u8],
    rules: &Rules,
) -> Result<(), i32> {
    use rustix::fs::{Mode, OFlags};
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let name = Path::new(std::ffi::OsStr::from_bytes(&raw[..end]));
    if name.as_os_str().is_empty() {
        return Err(libc::EINVAL);
    }
    let target = rustix::fs::openat(cwd, name, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| e.raw_os_error())?;
    let at = PathBuf::from(format!("/proc/self/fd/{}", target.as_raw_fd()));
    let mount = super::confine::mount_id_of(&at).map_err(errno)?;
    let real = std::fs::read_link(&at).unwrap_or_default();
    let ours = rules.mounts.contains(&mount) || rules.allowed.iter().any(|a| real.starts_with(a));
    if !ours {
        log::debug!(
            "connect to {} refused: a socket outside the session",
            real.display()
        );
        return Err(libc::ECONNREFUSED);
    }
    let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    addr.extend_from_slice(at.as_os_str().as_bytes());
    addr.push(0);
    sys::connect_bytes(sock, &addr).map_err(errno)
}

/// An abstract name: allowed when a process of the session holds a socket bound
/// to it (every process this supervisor sees in its `/proc` is of the session).
fn connect_abstract(sock: BorrowedFd<'_>, addr: &[u8]) -> Result<(), i32> {
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    // As `/proc/net/unix` shows it: `@`, then the name with NUL bytes as `@`.
    let shown: Vec<u8> = addr[2..]
        .iter()
        .map(|&b| if b == 0 { b'@' } else { b })
        .collect();
    let table = std::fs::read("/proc/net/unix").map_err(errno)?;
    let held = session_socket_inodes();
    let bound = table.split(|&b| b == b'\n').skip(1).any(|line| {
        let fields: Vec<&[u8]> = line
            .splitn(8, |&b| b == b' ')
            .filter(|f| !f.is_empty())
            .collect();
        let inode = fields
            .get(6)
            .and_then(|f| std::str::from_utf8(f).ok()?.parse::<u64>().ok());
        let path = line
            .iter()
            .rposition(|&b| b == b' ')
            .map(|i| &line[i + 1..]);
        matches!((inode, path), (Some(i), Some(p)) if p == shown.as_slice() && held.contains(&i))
    });
    if !bound {
        return Err(libc::ECONNREFUSED);
    }
    sys::connect_bytes(sock, addr).map_err(errno)
}

/// The inodes of the sockets the processes in view hold (`socket:[N]` links in
/// `/proc/*/fd`).
fn session_socket_inodes() -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let link = link.as_os_str().as_bytes();
            if let Some(n) = link
                .strip_prefix(b"socket:[")
                .and_then(|r| r.strip_suffix(b"]"))
            {
                out.extend(
                    std::str::from_utf8(n)
                        .ok()
                        .and_then(|n| n.parse::<u64>().ok()),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_through_the_asking_process_s_own_proc_entries_are_made_its() {
        assert_eq!(
            as_theirs(b"/proc/self/fd/7/x.sock", 42),
            b"/proc/42/fd/7/x.sock"
        );
        assert_eq!(
            as_theirs(b"/proc/thread-self/fd/7/x", 42),
            b"/proc/42/fd/7/x"
        );
        assert_eq!(as_theirs(b"/proc/selfish/x", 42), b"/proc/selfish/x");
        assert_eq!(as_theirs(b"rel.sock", 42), b"rel.sock");
    }
}
