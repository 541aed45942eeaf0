//! The process half: ids, signal masks, children, namespaces, mounts and
//! capabilities, for `veilfs run` and the daemon's own set-up (never on a request
//! path).

use std::io;
use std::os::fd::OwnedFd;

use nix::mount::{MntFlags, MsFlags};
use nix::sys::signal::{SigSet, Signal};
use nix::unistd::{Gid, Pid, Uid};

fn signal_of(sig: i32) -> io::Result<Signal> {
    Signal::try_from(sig).map_err(io::Error::from)
}

fn sigset(signals: &[i32]) -> io::Result<SigSet> {
    let mut set = SigSet::empty();
    for &s in signals {
        set.add(signal_of(s)?);
    }
    Ok(set)
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    Uid::effective().as_raw()
}

pub fn getuid() -> u32 {
    Uid::current().as_raw()
}

pub fn getgid() -> u32 {
    Gid::current().as_raw()
}

/// Blocks `signals` in the calling thread (and the threads it starts afterwards), so
/// that [`wait_signal`] can take them synchronously.
pub fn block_signals(signals: &[i32]) -> io::Result<()> {
    Ok(sigset(signals)?.thread_block()?)
}

/// Waits for one of `signals` (blocked beforehand) and returns it.
pub fn wait_signal(signals: &[i32]) -> io::Result<i32> {
    Ok(sigset(signals)?.wait()? as i32)
}

/// Raises the open-file limit as far as this process may: each inode the kernel holds
/// keeps one `O_PATH` descriptor open, and a walk of a large tree makes the kernel
/// hold one inode per file until memory pressure or `FORGET`s let them go. With
/// `CAP_SYS_RESOURCE` (root) both limits go up to the kernel's `fs.nr_open`, else the
/// soft limit goes up to the hard one. Returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(hard);
    if nr_open > hard && setrlimit(Resource::RLIMIT_NOFILE, nr_open, nr_open).is_ok() {
        return Ok(nr_open);
    }
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard)
}

/// The open-file limit: (soft, hard).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    Ok(nix::sys::resource::getrlimit(
        nix::sys::resource::Resource::RLIMIT_NOFILE,
    )?)
}

/// `unshare(flags)`, with `CLONE_*` flags.
pub fn unshare(flags: i32) -> io::Result<()> {
    Ok(nix::sched::unshare(
        nix::sched::CloneFlags::from_bits_retain(flags),
    )?)
}

/// Makes every mount in this mount namespace private, so nothing mounted here
/// propagates back to the namespace it was copied from.
pub fn make_mounts_private() -> io::Result<()> {
    Ok(nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?)
}

/// Mounts a fresh procfs (of the caller's PID namespace) on `/proc`.
pub fn mount_proc() -> io::Result<()> {
    Ok(nix::mount::mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )?)
}

/// Detaches the mount at `path` now, even while it is busy (`umount -l`); it goes
/// away completely when its last user lets go.
pub fn umount_detach(path: &std::path::Path) -> io::Result<()> {
    Ok(nix::mount::umount2(path, MntFlags::MNT_DETACH)?)
}

/// A pipe whose ends close on exec: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Kill this process with `sig` when its parent dies.
pub fn die_with_parent(sig: i32) -> io::Result<()> {
    Ok(nix::sys::prctl::set_pdeathsig(signal_of(sig)?)?)
}

pub fn set_no_new_privs() -> io::Result<()> {
    Ok(nix::sys::prctl::set_no_new_privs()?)
}

/// Removes `caps` from the bounding set and from the effective, permitted and
/// inheritable sets, and clears the ambient set: they can never come back. A
/// capability this kernel does not know is skipped (nothing can hold it).
pub fn drop_capabilities(caps: &[caps::Capability]) -> io::Result<()> {
    use caps::CapSet;
    let to_io = |e: caps::errors::CapsError| io::Error::other(e.to_string());
    let known = caps::runtime::thread_all_supported();
    let caps: Vec<caps::Capability> = caps.iter().copied().filter(|c| known.contains(c)).collect();
    // The bounding set first, while CAP_SETPCAP is still effective.
    for &c in &caps {
        caps::drop(None, CapSet::Bounding, c).map_err(to_io)?;
    }
    caps::clear(None, CapSet::Ambient).map_err(to_io)?;
    // Effective before permitted: the effective set must stay within the permitted.
    for set in [CapSet::Effective, CapSet::Inheritable, CapSet::Permitted] {
        let mut now = caps::read(None, set).map_err(to_io)?;
        for c in &caps {
            now.remove(c);
        }
        caps::set(None, set, &now).map_err(to_io)?;
    }
    Ok(())
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// The shell convention: the code, or 128 + the signal.
    pub fn status(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

/// `waitpid(pid, flags)`; `Ok(None)` when `WNOHANG` found nothing.
pub fn wait(pid: i32, flags: i32) -> io::Result<Option<(i32, Exit)>> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus};
    let status = nix::sys::wait::waitpid(
        Pid::from_raw(pid),
        Some(WaitPidFlag::from_bits_retain(flags)),
    )?;
    Ok(match status {
        WaitStatus::Exited(p, code) => Some((p.as_raw(), Exit::Code(code))),
        WaitStatus::Signaled(p, sig, _) => Some((p.as_raw(), Exit::Signal(sig as i32))),
        WaitStatus::StillAlive => None,
        // Stopped or continued (only with `WUNTRACED`/`WCONTINUED`, which no caller
        // passes): reported as the shell would, by the signal number as a code.
        WaitStatus::Stopped(p, sig) => Some((p.as_raw(), Exit::Code(sig as i32))),
        WaitStatus::PtraceEvent(p, sig, _) => Some((p.as_raw(), Exit::Code(sig as i32))),
        WaitStatus::PtraceSyscall(p) | WaitStatus::Continued(p) => {
            Some((p.as_raw(), Exit::Code(libc::SIGCONT)))
        }
    })
}

/// `kill(pid, sig)`: a negative `pid` is a process group, signal 0 only checks.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    let sig = if sig == 0 {
        None
    } else {
        Some(signal_of(sig)?)
    };
    Ok(nix::sys::signal::kill(Pid::from_raw(pid), sig)?)
}

/// Becomes `uid:gid` with no supplementary groups but `gid`.
pub fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
    nix::unistd::setgroups(&[g])?;
    nix::unistd::setresgid(g, g, g)?;
    nix::unistd::setresuid(u, u, u)?;
    Ok(())
}

pub fn chdir(p: &std::path::Path) -> io::Result<()> {
    Ok(nix::unistd::chdir(p)?)
}

/// The addresses of this network namespace's interfaces (`getifaddrs`).
pub fn own_addresses() -> Vec<std::net::IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|a| {
            let sa = a.address?;
            if let Some(v4) = sa.as_sockaddr_in() {
                return Some(std::net::IpAddr::V4(v4.ip()));
            }
            sa.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip()))
        })
        .collect()
}
