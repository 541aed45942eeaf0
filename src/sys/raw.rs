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

/// `AUDIT_ARCH_*` of this build's native system call ABI, its compat ABI (32-bit
/// programs on a 64-bit kernel), the compat ABI's calls that can connect or
/// bypass seccomp (`socketcall`, `connect`, io_uring's three), and its `socket`.
#[cfg(target_arch = "x86_64")]
const SECCOMP_ABI: (u32, u32, [u32; 5], u32) =
    (0xC000_003E, 0x4000_0003, [102, 362, 425, 426, 427], 359);
#[cfg(target_arch = "aarch64")]
const SECCOMP_ABI: (u32, u32, [u32; 5], u32) =
    (0xC000_00B7, 0x4000_0028, [283, 283, 425, 426, 427], 281);

/// One BPF instruction (`struct sock_filter`).
const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// A jump's target in [`Program`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Allow,
    Enosys,
    Notify,
    Compat,
    CompatAllow,
    CompatEnosys,
    Socket,
    NoFamily,
    Next,
}

/// A seccomp program being written: conditional jumps name labels, resolved to
/// offsets once every label is placed.
struct Program {
    code: Vec<(libc::sock_filter, Label, Label)>,
    at: Vec<(Label, usize)>,
}

impl Program {
    fn op(&mut self, code: u32, k: u32) {
        self.code
            .push((bpf(code as u16, 0, 0, k), Label::Next, Label::Next));
    }
    fn jeq(&mut self, k: u32, yes: Label, no: Label) {
        use libc::{BPF_JEQ, BPF_JMP, BPF_K};
        self.code
            .push((bpf((BPF_JMP | BPF_JEQ | BPF_K) as u16, 0, 0, k), yes, no));
    }
    fn jge(&mut self, k: u32, yes: Label, no: Label) {
        use libc::{BPF_JGE, BPF_JMP, BPF_K};
        self.code
            .push((bpf((BPF_JMP | BPF_JGE | BPF_K) as u16, 0, 0, k), yes, no));
    }
    fn label(&mut self, l: Label) {
        self.at.push((l, self.code.len()));
    }
    fn finish(self) -> Vec<libc::sock_filter> {
        let at = |l: Label, i: usize| -> u8 {
            if l == Label::Next {
                return 0;
            }
            let target = self.at.iter().find(|(x, _)| *x == l).map_or(i + 1, |x| x.1);
            // Forward jumps only (the tests run the program), within a program
            // far shorter than 256.
            target.saturating_sub(i + 1) as u8
        };
        self.code
            .iter()
            .enumerate()
            .map(|(i, (f, yes, no))| libc::sock_filter {
                jt: at(*yes, i),
                jf: at(*no, i),
                ..*f
            })
            .collect()
    }
}

/// The seccomp program of [`seccomp_connect_listener`]: `refused` socket
/// families fail `socket()` with `EAFNOSUPPORT`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn connect_filter(refused: &[i32]) -> Vec<libc::sock_filter> {
    use Label::*;
    use libc::{
        BPF_ABS, BPF_K, BPF_LD, BPF_RET, BPF_W, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO,
        SECCOMP_RET_USER_NOTIF,
    };
    let (native, compat, compat_calls, compat_socket) = SECCOMP_ABI;
    let (ld, ret) = (BPF_LD | BPF_W | BPF_ABS, BPF_RET | BPF_K);
    let enosys = SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let socket = if refused.is_empty() { Allow } else { Socket };
    let mut p = Program {
        code: Vec::new(),
        at: Vec::new(),
    };
    p.op(ld, 4); // arch
    p.jeq(native, Next, Compat);
    p.op(ld, 0); // nr
    p.jge(0x4000_0000, Enosys, Next); // x32
    p.jeq(libc::SYS_connect as u32, Notify, Next);
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        p.jeq(nr as u32, Enosys, Next);
    }
    p.jeq(libc::SYS_socket as u32, socket, Allow);
    p.label(Allow);
    p.op(ret, SECCOMP_RET_ALLOW);
    p.label(Enosys);
    p.op(ret, enosys);
    p.label(Notify);
    p.op(ret, SECCOMP_RET_USER_NOTIF);
    // Compat: each listed call fails with ENOSYS; its `socket` is checked too.
    p.label(Compat);
    p.jeq(compat, Next, CompatAllow);
    p.op(ld, 0);
    for nr in compat_calls {
        p.jeq(nr, CompatEnosys, Next);
    }
    p.jeq(compat_socket, socket, CompatAllow);
    p.label(CompatAllow);
    p.op(ret, SECCOMP_RET_ALLOW);
    p.label(CompatEnosys);
    p.op(ret, enosys);
    if !refused.is_empty() {
        // socket(domain, ...): the low word of the first argument.
        p.label(Socket);
        p.op(ld, 16);
        for &f in refused {
            p.jeq(f as u32, NoFamily, Next);
        }
        p.op(ret, SECCOMP_RET_ALLOW);
        p.label(NoFamily);
        p.op(ret, SECCOMP_RET_ERRNO | libc::EAFNOSUPPORT as u32);
    }
    p.finish()
}

/// Installs on the calling process a seccomp filter under which every `connect`
/// waits for the supervisor holding the returned listener (user notification),
/// io_uring fails (`ENOSYS`: its connect would pass the filter by), the
/// 32-bit ABI's `socketcall` and `connect` fail (`ENOSYS`), and `socket()` of a
/// family in `refused` fails (`EAFNOSUPPORT`). It is inherited by
/// everything the process execs and forks, and cannot be removed. Needs
/// `no_new_privs`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn seccomp_connect_listener(refused: &[i32]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let filter = connect_filter(refused);
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `filter`, alive for the call; the kernel copies it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor, owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(r as RawFd) })
}

/// One system call waiting for the supervisor.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// Takes the next notification from `listener` (blocks). `ENOENT`: the call went
/// away meanwhile (the process was signalled); other errors end the listener.
pub fn seccomp_receive(listener: std::os::fd::BorrowedFd<'_>) -> io::Result<Notification> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid `seccomp_notif` (plain data), as the kernel
    // demands of the buffer it fills.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a `seccomp_notif` the ioctl fills, alive for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Whether the notification `id` still waits (its process has not been replaced
/// by another of the same pid since it was taken).
pub fn seccomp_still_waits(listener: std::os::fd::BorrowedFd<'_>, id: u64) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: the ioctl reads the `u64` at this address, alive for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        )
    };
    r == 0
}

/// Answers the notification `id`: the call returns 0 (`Ok`) or fails with the
/// errno (`Err`). Never "continue": the supervisor did the call itself.
pub fn seccomp_answer(
    listener: std::os::fd::BorrowedFd<'_>,
    id: u64,
    result: Result<(), i32>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: match result {
            Ok(()) => 0,
            Err(errno) => -errno,
        },
        flags: 0,
    };
    // SAFETY: the ioctl reads `resp`, alive for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &resp as *const libc::seccomp_notif_resp,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `connect(fd, addr)` with an address given as the bytes of a `sockaddr` of any
/// family (as a process passed it).
pub fn connect_bytes(fd: std::os::fd::BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut storage = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
    let len = addr.len().min(storage.len());
    storage[..len].copy_from_slice(&addr[..len]);
    // SAFETY: `storage` holds `len` bytes of the address, alive for the call; the
    // kernel reads no more than `len`.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            storage.as_ptr() as *const libc::sockaddr,
            len as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Switches the calling **thread** alone to `uid` and `gid` with no
/// supplementary groups (the raw calls: libc's wrappers change every thread).
/// Its capabilities go with root; the thread cannot switch back.
pub fn become_user_this_thread(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls on this thread's credentials; no memory passed
    // but a null list of groups of length 0.
    let r = unsafe {
        if libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) < 0
            || libc::syscall(libc::SYS_setresgid, gid, gid, gid) < 0
            || libc::syscall(libc::SYS_setresuid, uid, uid, uid) < 0
        {
            -1
        } else {
            0
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Brings the loopback interface of this network namespace up (`SIOCGIFFLAGS`
/// and `SIOCSIFFLAGS`, which neither nix nor rustix wraps): a new network
/// namespace starts with `lo` down, and nothing listens on 127.0.0.1 until it is
/// up.
pub fn loopback_up() -> io::Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    use std::os::fd::AsRawFd;
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: `ifreq` is plain data, for which all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads `ifr_name` and writes `ifru_flags` of `req`,
    // which lives across the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `ifru_flags`, the union's member for these calls.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`, alive for the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// Descriptors passed between processes over a Unix socket (`SCM_RIGHTS`), as
// `veilfs run` hands the listener of a network namespace to the proxy outside it.

/// Sends `fd` (with one byte) over the Unix socket `over`.
pub fn send_fd(over: impl std::os::fd::AsFd, fd: impl std::os::fd::AsFd) -> io::Result<()> {
    let fds = [std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())];
    let byte = [1u8];
    nix::sys::socket::sendmsg::<nix::sys::socket::UnixAddr>(
        std::os::fd::AsRawFd::as_raw_fd(&over.as_fd()),
        &[std::io::IoSlice::new(&byte)],
        &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`] over `over`; end of file (the
/// sender gone without sending) is `UnexpectedEof`.
pub fn recv_fd(over: impl std::os::fd::AsFd) -> io::Result<std::os::fd::OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = nix::sys::socket::recvmsg::<nix::sys::socket::UnixAddr>(
        std::os::fd::AsRawFd::as_raw_fd(&over.as_fd()),
        &mut iov,
        Some(&mut space),
        nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut got = None;
    for c in msg.cmsgs()? {
        if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // SAFETY: the kernel just installed `fd` in this process for us
                // (SCM_RIGHTS); nothing else owns it.
                let owned =
                    unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                got.get_or_insert(owned);
            }
        }
    }
    got.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    /// Runs a seccomp program (the instructions it uses) on one call.
    fn run(p: &[libc::sock_filter], arch: u32, nr: u32, arg0: u32) -> u32 {
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let f = p[pc];
            match f.code as u32 {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    acc = match f.k {
                        0 => nr,
                        4 => arch,
                        16 => arg0,
                        k => panic!("load at {k}"),
                    };
                    pc += 1;
                }
                c if c == libc::BPF_RET | libc::BPF_K => return f.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += 1 + usize::from(if acc == f.k { f.jt } else { f.jf });
                }
                c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => {
                    pc += 1 + usize::from(if acc >= f.k { f.jt } else { f.jf });
                }
                c => panic!("instruction {c:#x}"),
            }
        }
    }

    #[test]
    fn the_filter_decides_each_kind_of_call() {
        let (native, compat, calls, compat_socket) = SECCOMP_ABI;
        let allow = libc::SECCOMP_RET_ALLOW;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let nofamily = libc::SECCOMP_RET_ERRNO | libc::EAFNOSUPPORT as u32;
        let socket = libc::SYS_socket as u32;
        let vsock = libc::AF_VSOCK as u32;
        for refused in [&[][..], &[libc::AF_VSOCK][..]] {
            let p = connect_filter(refused);
            let vsock_result = if refused.is_empty() { allow } else { nofamily };
            let table = [
                (
                    native,
                    libc::SYS_connect as u32,
                    0,
                    libc::SECCOMP_RET_USER_NOTIF,
                ),
                (native, libc::SYS_io_uring_setup as u32, 0, enosys),
                (native, 0x4000_0000 | 42, 0, enosys),
                (native, libc::SYS_read as u32, 0, allow),
                (native, socket, libc::AF_INET as u32, allow),
                (native, socket, libc::AF_UNIX as u32, allow),
                (native, socket, vsock, vsock_result),
                (compat, calls[0], 0, enosys),
                (compat, calls[1], 0, enosys),
                (compat, 3, 0, allow),
                (compat, compat_socket, vsock, vsock_result),
                (compat, compat_socket, libc::AF_INET as u32, allow),
                (0x1234, socket, vsock, allow),
            ];
            for (arch, nr, arg0, want) in table {
                assert_eq!(
                    run(&p, arch, nr, arg0),
                    want,
                    "arch {arch:#x} nr {nr} arg {arg0} (refused {refused:?})"
                );
            }
        }
    }
}
