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
//!   given (what the network namespace reaches: the host's network, or under
//!   `--net none` and `--net allow=` its loopback only, where a family the
//!   namespace does not bound, such as `AF_VSOCK`, is refused);
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
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sys;

/// Connections decided at once; more wait (`EAGAIN`).
const MAX_WAITING: usize = 256;

/// What the supervisor decides by.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The mount ids of the session's own mounts (see the module's documentation).
    pub mounts: Vec<u64>,
    /// `--allow-socket` paths (canonical).
    pub allowed: Vec<PathBuf>,
    /// `--user`: the command's uid and gid.
    pub user: Option<(u32, u32)>,
    /// The command has a network namespace of its own (`--net none`, `--net
    /// allow=`): only the families that namespace bounds are connected (IPv4,
    /// IPv6, netlink); another (`AF_VSOCK`, a channel to a virtual machine's host)
    /// would lead out of it.
    pub own_net: bool,
}

/// The families a command in a network namespace of its own may connect, besides
/// `AF_UNIX` (decided by name, as always): those the namespace bounds.
const NAMESPACED: [i32; 3] = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

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
    let busy = Arc::new(AtomicUsize::new(0));
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
        // A thread each: a connect to a slow host must not hold the others. A
        // connect the command gave up on (a signal) may block its thread until
        // the kernel ends it: at most MAX_WAITING at once, then EAGAIN.
        if busy.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            busy.fetch_sub(1, Ordering::AcqRel);
            let _ = sys::seccomp_answer(listener.as_fd(), n.id, Err(libc::EAGAIN));
            continue;
        }
        let (theirs, rules, done) = (listener.clone(), rules.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("veilfs-connect".into())
            .spawn(move || {
                let result = answer(theirs.as_fd(), &n, &rules);
                let _ = sys::seccomp_answer(theirs.as_fd(), n.id, result);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, Ordering::AcqRel);
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
    // The notification names the calling thread; a pidfd is opened on its
    // process (a thread other than the first has none of its own), whose
    // descriptor table the thread shares.
    let pid = rustix::process::Pid::from_raw(thread_group(n.pid)? as i32).ok_or(libc::ESRCH)?;
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
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    // An abstract name is looked for among the session's sockets while this
    // thread may still take copies of them (before it takes the command's user).
    let abstract_bound = (family == libc::AF_UNIX as u16 && bytes.get(2) == Some(&0))
        .then(|| session_binds(&bytes[3..]));
    if let Some((uid, gid)) = rules.user {
        sys::become_user_this_thread(uid, gid).map_err(errno)?;
    }
    if family != libc::AF_UNIX as u16 {
        if rules.own_net && !NAMESPACED.contains(&i32::from(family)) {
            return Err(libc::ECONNREFUSED);
        }
        return sys::connect_bytes(sock.as_fd(), &bytes).map_err(errno);
    }
    let path = &bytes[2..];
    match path.first() {
        Some(0) if abstract_bound == Some(true) => {
            sys::connect_bytes(sock.as_fd(), &bytes).map_err(errno)
        }
        Some(0) => Err(libc::ECONNREFUSED),
        Some(_) => connect_path(sock.as_fd(), n.pid, path, rules),
        // Unnamed: the kernel's own answer.
        None => sys::connect_bytes(sock.as_fd(), &bytes).map_err(errno),
    }
}

/// The name a process gave, spelled as a path in the supervisor's own mount
/// namespace: a relative name after the process's current directory, a leading
/// `/proc/self/fd/N/` (or `cwd/`, `root/`; `thread-self` too) after what that
/// names (`veilfs reload` reaches its runtime directory through a descriptor).
/// The supervisor then resolves the spelling in its own view, never through the
/// process's descriptors or current directory: those may lie in a mount
/// namespace the process made (`unshare -Urm`, a bind mount over an allowed
/// directory), where the same spelling leads elsewhere.
fn spelled(pid: u32, name: &Path) -> io::Result<PathBuf> {
    let own = |what: &str| std::fs::read_link(format!("/proc/{pid}/{what}"));
    for me in ["/proc/self", "/proc/thread-self"] {
        let Ok(rest) = name.strip_prefix(me) else {
            continue;
        };
        let mut parts = rest.components();
        let base = match parts
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
        {
            Some(c) if c == "cwd" || c == "root" => own(&c)?,
            Some(c) if c == "fd" => {
                let n = parts
                    .next()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned());
                match n.filter(|n| n.bytes().all(|b| b.is_ascii_digit())) {
                    Some(n) => own(&format!("fd/{n}"))?,
                    None => return Err(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
                }
            }
            _ => return Err(io::Error::from_raw_os_error(libc::ECONNREFUSED)),
        };
        return Ok(base.join(parts.as_path()));
    }
    if name.is_absolute() {
        return Ok(name.to_path_buf());
    }
    Ok(own("cwd")?.join(name))
}

/// `path` opened `O_PATH` in this namespace, following links but no magic link
/// (`/proc/PID/fd/N` would lead into another process's view); beneath `dir`
/// when given.
fn open_here(dir: Option<&Path>, path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    Ok(match dir {
        Some(d) => {
            let base = rustix::fs::open(
                d,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let rest = path
                .strip_prefix(d)
                .map_err(|_| io::Error::from_raw_os_error(libc::ECONNREFUSED))?;
            let rest = if rest.as_os_str().is_empty() {
                Path::new(".")
            } else {
                rest
            };
            rustix::fs::openat2(
                &base,
                rest,
                flags,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            )?
        }
        None => rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::NO_MAGICLINKS,
        )?,
    })
}

/// A path socket: allowed where the session's own mounts hold it, or an
/// `--allow-socket` path (that very socket, or one beneath that directory),
/// each as resolved in the supervisor's own view; connected through the
/// descriptor that was checked.
fn connect_path(sock: BorrowedFd<'_>, pid: u32, raw: &[u8], rules: &Rules) -> Result<(), i32> {
    use std::os::unix::fs::MetadataExt;
    let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let name = Path::new(std::ffi::OsStr::from_bytes(&raw[..end]));
    if name.as_os_str().is_empty() {
        return Err(libc::EINVAL);
    }
    let path = spelled(pid, name).map_err(errno)?;
    let target = open_here(None, &path).map_err(errno)?;
    let at = PathBuf::from(format!("/proc/self/fd/{}", target.as_raw_fd()));
    let mount = super::confine::mount_id_of(&at).map_err(errno)?;
    let target = if rules.mounts.contains(&mount) {
        target
    } else {
        let meta = std::fs::metadata(&at).map_err(errno)?;
        let same = |a: &Path| {
            std::fs::metadata(a).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()))
        };
        match rules
            .allowed
            .iter()
            .find(|a| same(a) || (a.is_dir() && path.starts_with(a)))
        {
            Some(a) if a.is_dir() => open_here(Some(a), &path).map_err(errno)?,
            Some(_) => target,
            None => {
                log::debug!(
                    "connect to {} refused: a socket outside the session",
                    path.display()
                );
                return Err(libc::ECONNREFUSED);
            }
        }
    };
    let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    addr.extend_from_slice(format!("/proc/self/fd/{}", target.as_raw_fd()).as_bytes());
    addr.push(0);
    sys::connect_bytes(sock, &addr).map_err(errno)
}

/// The process (thread group) of thread `tid` (`Tgid:` in its status).
fn thread_group(tid: u32) -> Result<u32, i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| libc::ESRCH)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(libc::ESRCH)
}

/// Whether a socket that a process in view holds (every process this supervisor
/// sees in its `/proc` is of the session) is bound to the abstract `name`. Each
/// such socket is asked its own name (`getsockname` on a copy of it), never
/// `/proc/net/unix`, whose lines print a name's bytes raw: a name holding a
/// newline could forge a line there.
fn session_binds(name: &[u8]) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            return false;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            return false;
        };
        let sockets: Vec<i32> = fds
            .flatten()
            .filter(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|l| l.as_os_str().as_bytes().starts_with(b"socket:["))
            })
            .filter_map(|fd| fd.file_name().to_str()?.parse().ok())
            .collect();
        !sockets.is_empty() && holds_bound(pid, &sockets, name)
    })
}

/// Whether one of the descriptors `fds` of process `pid` is a Unix socket bound to
/// the abstract `name`.
fn holds_bound(pid: i32, fds: &[i32], name: &[u8]) -> bool {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
    let Some(pidfd) =
        rustix::process::Pid::from_raw(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
    else {
        return false;
    };
    fds.iter().any(|&fd| {
        pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).is_ok_and(|s| {
            nix::sys::socket::getsockname::<nix::sys::socket::UnixAddr>(s.as_raw_fd())
                .ok()
                .is_some_and(|a| a.as_abstract() == Some(name))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_in_the_supervisors_view() {
        let me = std::process::id();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            spelled(me, Path::new("rel.sock")).unwrap(),
            cwd.join("rel.sock")
        );
        assert_eq!(
            spelled(me, Path::new("/a/b.sock")).unwrap(),
            Path::new("/a/b.sock")
        );
        assert_eq!(
            spelled(me, Path::new("/proc/self/cwd/x")).unwrap(),
            cwd.join("x")
        );
        let f = std::fs::File::open(&cwd).unwrap();
        let by_fd = format!("/proc/self/fd/{}/y.sock", f.as_raw_fd());
        assert_eq!(spelled(me, Path::new(&by_fd)).unwrap(), cwd.join("y.sock"));
        assert!(spelled(me, Path::new("/proc/self/fd/x/y")).is_err());
        assert!(spelled(me, Path::new("/proc/self/mem")).is_err());
    }
}
