//! The calls no crate offers as safe functions: the only module where `unsafe` is
//! allowed. Functions that are only sound under a condition their callers must
//! keep (a process with one thread) are `unsafe fn` themselves.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal};

/// A plain `fork()`: `Ok(0)` in the child, the child's pid in the parent.
///
/// # Safety
/// The process must have a single thread: the child gets a copy of the address
/// space in which a lock held by another thread would stay held forever.
pub unsafe fn fork() -> io::Result<i32> {
    use nix::unistd::ForkResult;
    // SAFETY: the caller guarantees a single thread (see above).
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Child => Ok(0),
        ForkResult::Parent { child } => Ok(child.as_raw()),
    }
}

/// `fork()` into a new PID namespace: returns 0 in the child (PID 1 there) and the
/// child's pid in the parent.
///
/// # Safety
/// As [`fork`]: the process must have a single thread.
pub unsafe fn fork_new_pid_ns() -> io::Result<i32> {
    // SAFETY: a raw clone with no stack and no CLONE_VM behaves like fork(); the
    // caller guarantees no other thread exists, so the child's copy of the address
    // space holds no lock another thread owned. (nix's `clone` runs a callback on
    // a stack of its own instead of returning in the child.)
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWPID | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

/// Closes every descriptor from `first` on except `keep` (`close_range`, which
/// neither nix nor rustix wraps).
///
/// # Safety
/// Nothing in the process may use or drop an object owning one of the descriptors
/// closed (their numbers can be reused at once): call it only in a process about to
/// `exec`, that holds nothing above `first` but `keep`.
pub unsafe fn close_from(first: u32, keep: &[RawFd]) {
    let mut keep: Vec<u32> = keep.iter().map(|&k| k as u32).collect();
    keep.sort_unstable();
    let mut start = first;
    for k in keep.into_iter().filter(|&k| k >= first) {
        if k > start {
            // SAFETY: closing descriptors this process owns (see above).
            unsafe { libc::syscall(libc::SYS_close_range, start, k - 1, 0) };
        }
        start = k + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, start, u32::MAX, 0) };
}

extern "C" fn ignore_signal(_: libc::c_int) {}

fn set_handler(sig: i32, handler: SigHandler) -> io::Result<()> {
    let sig = Signal::try_from(sig)?;
    let sa = SigAction::new(handler, SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handlers installed are the default, ignore, and a handler that
    // does nothing (so it is async-signal-safe).
    unsafe { nix::sys::signal::sigaction(sig, &sa) }?;
    Ok(())
}

/// Installs a handler that does nothing for `sig` (so PID 1 of a namespace receives
/// it from outside, where the default disposition would be dropped).
pub fn catch_signal(sig: i32) -> io::Result<()> {
    set_handler(sig, SigHandler::Handler(ignore_signal))
}

pub fn ignore_signal_default(sig: i32) -> io::Result<()> {
    set_handler(sig, SigHandler::SigIgn)
}

/// Every signal back to its default disposition and unblocked (before `exec`).
pub fn reset_signals() {
    for sig in Signal::iterator() {
        if sig != Signal::SIGKILL && sig != Signal::SIGSTOP {
            let _ = set_handler(sig as i32, SigHandler::SigDfl);
        }
    }
    let _ = SigSet::empty().thread_set_mask();
}

/// `execvpe`: runs `args[0]` (looked up in `env`'s `PATH` when it has no `/`, in
/// `/bin:/usr/bin` when `env` has no `PATH`) with exactly the environment `env`.
/// Returns only on failure. It sets this process's own `PATH` to `env`'s, where
/// glibc's `execvpe` looks.
///
/// # Safety
/// The process must have a single thread (nothing may read or write the
/// environment concurrently), and be about to exec.
pub unsafe fn execvpe(
    args: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> io::Error {
    let cstr = |b: &[u8]| CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let cargs: Vec<CString> = match args.iter().map(|a| cstr(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(e) => return e,
    };
    let cenv: Vec<CString> = match env
        .iter()
        .map(|(k, v)| cstr(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect()
    {
        Ok(v) => v,
        Err(e) => return e,
    };
    let Some(file) = cargs.first() else {
        return io::Error::from_raw_os_error(libc::ENOENT);
    };
    let path = env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v);
    // SAFETY: the caller guarantees that no other thread exists, so nothing reads
    // or writes the environment concurrently.
    unsafe {
        match path {
            Some(p) => std::env::set_var("PATH", p),
            None => std::env::remove_var("PATH"),
        }
    }
    match nix::unistd::execvpe(file, &cargs, &cenv) {
        Err(e) => e.into(),
        Ok(never) => match never {},
    }
}

/// Leaves the process at once with `code`, running no destructors nor `atexit`
/// handlers (what a forked child must do).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call.
    unsafe { libc::_exit(code) }
}

/// An all-zero `stat`, for attributes that are not known.
pub fn zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// `struct landlock_ruleset_attr` as of Landlock ABI 6 (`linux/landlock.h`).
#[repr(C)]
struct LandlockRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version, create nothing.
const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;

/// The Landlock ABI version this kernel offers (0: none, or Landlock disabled).
/// Neither nix nor rustix wraps Landlock.
pub fn landlock_abi() -> u32 {
    // SAFETY: with the VERSION flag the kernel reads no attribute (NULL, size 0)
    // and only returns a number.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<LandlockRulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).unwrap_or(0)
}

/// Confines the calling thread (and what it execs and forks later) to a Landlock
/// domain that restricts only the IPC scopes `scoped` (`LANDLOCK_SCOPE_*`: no
/// file or network access is handled). Needs `no_new_privs` (or
/// `CAP_SYS_ADMIN`); it can never be undone.
pub fn landlock_scope_self(scoped: u64) -> io::Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let attr = LandlockRulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped,
    };
    // SAFETY: `attr` is a valid `landlock_ruleset_attr` of the size given, alive
    // for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const LandlockRulesetAttr,
            std::mem::size_of::<LandlockRulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor, owned by no one else.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: a plain call on a descriptor this function owns; no memory is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            std::os::fd::AsRawFd::as_raw_fd(&ruleset),
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
