//! The only `unsafe` in veilfs: thin, safe wrappers over the syscalls the filesystem
//! needs. Every path argument here is ONE name relative to a directory descriptor
//! (never a path string resolved against the source), and nothing follows a symlink
//! unless it says so. Each wrapper turns `-1` into the `errno` as an `io::Error`.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// `-1` → the thread's errno.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_ssize(ret: libc::ssize_t) -> io::Result<usize> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A single path component as a C string. Refuses `/`, NUL, `.`, `..` and the empty
/// name, so no wrapper can be made to walk more than one step.
pub fn name(n: &OsStr) -> io::Result<CString> {
    let b = n.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub fn openat(dir: BorrowedFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string; the returned fd is new and
    // owned by us.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` descriptor on the entry `name` in `dir`, without following it.
pub fn open_path(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    openat(dir, name, libc::O_PATH, 0)
}

/// Opens `path` (absolute, outside any request) as an `O_PATH` directory descriptor.
pub fn open_dir_path(path: &std::path::Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid C string; the fd returned is new.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The name of an fd under `/proc/self/fd`, for reopening an `O_PATH` descriptor.
fn fd_name(fd: RawFd) -> CString {
    CString::new(fd.to_string()).expect("digits have no NUL")
}

/// Reopens an `O_PATH` descriptor with real access `flags`, through the
/// `/proc/self/fd` directory descriptor `proc_fd` (the inode itself, not a path).
pub fn reopen(proc_fd: BorrowedFd, fd: BorrowedFd, flags: i32) -> io::Result<OwnedFd> {
    let n = fd_name(fd.as_raw_fd());
    // SAFETY: valid C string; O_NOFOLLOW is not set because the magic link must be
    // followed to reach the inode; the fd returned is new.
    let r = check(unsafe {
        libc::openat(
            proc_fd.as_raw_fd(),
            n.as_ptr(),
            (flags | libc::O_CLOEXEC) & !libc::O_NOFOLLOW & !libc::O_CREAT,
        )
    })?;
    // SAFETY: fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn statat(dir: BorrowedFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid out-pointer; the kernel fills it on success.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded, so `st` is initialised.
    Ok(unsafe { st.assume_init() })
}

/// `fstat` of any descriptor, `O_PATH` ones included.
pub fn stat(fd: BorrowedFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: valid out-pointer; AT_EMPTY_PATH acts on the descriptor itself.
    check(unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            st.as_mut_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: initialised on success.
    Ok(unsafe { st.assume_init() })
}

pub fn mkdirat(dir: BorrowedFd, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: valid C string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

pub fn mknodat(dir: BorrowedFd, name: &CStr, mode: u32, rdev: u64) -> io::Result<()> {
    // SAFETY: valid C string.
    check(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode, rdev) }).map(drop)
}

pub fn symlinkat(target: &OsStr, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    let t =
        CString::new(target.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid C strings.
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

pub fn unlinkat(dir: BorrowedFd, name: &CStr, dir_flag: bool) -> io::Result<()> {
    let flags = if dir_flag { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: valid C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

pub fn renameat2(
    old_dir: BorrowedFd,
    old: &CStr,
    new_dir: BorrowedFd,
    new: &CStr,
    flags: u32,
) -> io::Result<()> {
    // SAFETY: valid C strings and descriptors; renameat2 has no libc wrapper on
    // every target, so it is called as a raw syscall.
    check(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            flags,
        ) as libc::c_int
    })
    .map(drop)
}

/// A new hard link `name` in `dir` to the inode of the `O_PATH` descriptor `fd`
/// (through `/proc/self/fd`, which needs no `CAP_DAC_READ_SEARCH`).
pub fn linkat(proc_fd: BorrowedFd, fd: BorrowedFd, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    let n = fd_name(fd.as_raw_fd());
    // SAFETY: valid C strings and descriptors.
    check(unsafe {
        libc::linkat(
            proc_fd.as_raw_fd(),
            n.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
    .map(drop)
}

/// The target of the symlink behind an `O_PATH` descriptor, unchanged.
pub fn readlink(fd: BorrowedFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `buf` is writable for its length; an empty name reads the link the
    // O_PATH descriptor itself refers to.
    let n = check_ssize(unsafe {
        libc::readlinkat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    buf.truncate(n);
    Ok(buf)
}

/// `fchmodat` through `/proc/self/fd` (an `O_PATH` descriptor cannot `fchmod`).
pub fn chmod(proc_fd: BorrowedFd, fd: BorrowedFd, mode: u32) -> io::Result<()> {
    let n = fd_name(fd.as_raw_fd());
    // SAFETY: valid C string.
    check(unsafe { libc::fchmodat(proc_fd.as_raw_fd(), n.as_ptr(), mode, 0) }).map(drop)
}

/// `fchownat(fd, "", AT_EMPTY_PATH)`: works on `O_PATH` descriptors, links included.
pub fn chown(fd: BorrowedFd, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let u = uid.unwrap_or(u32::MAX);
    let g = gid.unwrap_or(u32::MAX);
    // SAFETY: empty C string with AT_EMPTY_PATH acts on the descriptor itself.
    check(unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            u,
            g,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `utimensat` on the inode behind `fd`; `None` leaves a time unchanged, and
/// `Some(None)` means "now".
pub fn utimes(
    proc_fd: BorrowedFd,
    fd: BorrowedFd,
    is_symlink: bool,
    atime: Option<Option<libc::timespec>>,
    mtime: Option<Option<libc::timespec>>,
) -> io::Result<()> {
    let conv = |t: Option<Option<libc::timespec>>| match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(None) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(Some(ts)) => ts,
    };
    let times = [conv(atime), conv(mtime)];
    if is_symlink {
        // SAFETY: `times` has two entries; AT_EMPTY_PATH acts on the link itself.
        return check(unsafe {
            libc::utimensat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                times.as_ptr(),
                libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            )
        })
        .map(drop);
    }
    let n = fd_name(fd.as_raw_fd());
    // SAFETY: valid C string; `times` has two entries.
    check(unsafe { libc::utimensat(proc_fd.as_raw_fd(), n.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

/// One directory entry as read from the backing directory.
pub struct DirEntry {
    pub ino: u64,
    pub kind: u8,
    pub name: Vec<u8>,
}

/// Every entry of the directory behind `dir` (a readable directory descriptor),
/// without `.` and `..`.
pub fn read_dir(dir: OwnedFd) -> io::Result<Vec<DirEntry>> {
    let raw = dir.as_raw_fd();
    // SAFETY: fdopendir takes ownership of `raw`; `dir` is forgotten so it is not
    // closed twice, and closedir below closes it.
    let dp = unsafe { libc::fdopendir(raw) };
    if dp.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(dir);
    let mut out = Vec::new();
    loop {
        // SAFETY: errno is thread-local; clearing it tells end-of-directory from
        // failure.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dp` is a valid DIR* until closedir.
        let ent = unsafe { libc::readdir64(dp) };
        if ent.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: closing the DIR* we opened.
            unsafe { libc::closedir(dp) };
            if err.raw_os_error() == Some(0) {
                return Ok(out);
            }
            return Err(err);
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated.
        let (ino, kind, name) = unsafe {
            let e = &*ent;
            (
                e.d_ino,
                e.d_type,
                CStr::from_ptr(e.d_name.as_ptr()).to_bytes().to_vec(),
            )
        };
        if name == b"." || name == b".." {
            continue;
        }
        out.push(DirEntry { ino, kind, name });
    }
}

/// Calls a `*xattr` function that fills a buffer of `size` bytes (or, with `size`
/// 0, only says how many it would need): (that length, the data).
fn sized(
    size: usize,
    call: impl FnOnce(*mut libc::c_void, usize) -> libc::ssize_t,
) -> io::Result<(usize, Vec<u8>)> {
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    let n = check_ssize(call(ptr, size))?;
    buf.truncate(n.min(size));
    Ok((n, buf))
}

/// Extended attributes through `/proc/self/fd/N` (the inode behind an `O_PATH` fd).
/// With `size == 0` only the length is asked for: the data comes back empty.
pub fn getxattr(fd: BorrowedFd, name: &CStr, size: usize) -> io::Result<(usize, Vec<u8>)> {
    let path = proc_path(fd);
    // SAFETY: valid C strings; `ptr` is NULL or writable for `len` bytes.
    sized(size, |ptr, len| unsafe {
        libc::getxattr(path.as_ptr(), name.as_ptr(), ptr, len)
    })
}

/// The attribute names, as for [`getxattr`].
pub fn listxattr(fd: BorrowedFd, size: usize) -> io::Result<(usize, Vec<u8>)> {
    let path = proc_path(fd);
    // SAFETY: as for getxattr.
    sized(size, |ptr, len| unsafe {
        libc::listxattr(path.as_ptr(), ptr.cast(), len)
    })
}

pub fn setxattr(fd: BorrowedFd, name: &CStr, value: &[u8], flags: i32) -> io::Result<()> {
    let path = proc_path(fd);
    // SAFETY: valid C strings; `value` is readable for its length.
    check(unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
    .map(drop)
}

pub fn removexattr(fd: BorrowedFd, name: &CStr) -> io::Result<()> {
    let path = proc_path(fd);
    // SAFETY: valid C strings.
    check(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }).map(drop)
}

/// `/proc/self/fd/N` as an absolute C path for the few calls with no `*at` form.
/// The magic link resolves to the inode itself, never to a path in the source.
fn proc_path(fd: BorrowedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL")
}

pub fn fallocate(fd: BorrowedFd, mode: i32, offset: i64, len: i64) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor.
    check(unsafe { libc::fallocate(fd.as_raw_fd(), mode, offset, len) }).map(drop)
}

pub fn lseek(fd: BorrowedFd, offset: i64, whence: i32) -> io::Result<i64> {
    // SAFETY: plain syscall on a descriptor.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset, whence) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn copy_file_range(
    fd_in: BorrowedFd,
    off_in: i64,
    fd_out: BorrowedFd,
    off_out: i64,
    len: usize,
) -> io::Result<usize> {
    let (mut a, mut b) = (off_in, off_out);
    // SAFETY: offsets are valid out-pointers; descriptors are open.
    check_ssize(unsafe {
        libc::copy_file_range(
            fd_in.as_raw_fd(),
            &mut a,
            fd_out.as_raw_fd(),
            &mut b,
            len,
            0,
        )
    })
}

pub fn statvfs(fd: BorrowedFd) -> io::Result<libc::statvfs> {
    let mut st = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: valid out-pointer.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: initialised on success.
    Ok(unsafe { st.assume_init() })
}

pub fn fsync(fd: BorrowedFd, datasync: bool) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor.
    check(unsafe {
        if datasync {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    })
    .map(drop)
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Blocks `signals` in the calling thread (and the threads it starts afterwards), so
/// that [`wait_signal`] can take them synchronously.
pub fn block_signals(signals: &[i32]) -> io::Result<()> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset and pthread_sigmask take
    // valid pointers to it.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut());
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
    }
    Ok(())
}

/// Waits for one of `signals` (blocked beforehand) and returns it.
pub fn wait_signal(signals: &[i32]) -> io::Result<i32> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    let mut sig = 0;
    // SAFETY: as above; sigwait writes the signal number to `sig`.
    let r = unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        libc::sigwait(set.as_ptr(), &mut sig)
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(sig)
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

// ---- process and namespace set-up for `veilfs run` (never on a request path) ----

fn cpath(p: &std::path::Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub fn unshare(flags: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// Makes every mount in this mount namespace private, so nothing mounted here
/// propagates back to the namespace it was copied from.
pub fn make_mounts_private() -> io::Result<()> {
    // SAFETY: valid C string; NULL source/type/data are allowed for a propagation change.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Mounts a fresh procfs (of the caller's PID namespace) on `/proc`.
pub fn mount_proc() -> io::Result<()> {
    // SAFETY: valid C strings.
    check(unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// `fork()` into a new PID namespace: returns 0 in the child (PID 1 there) and the
/// child's pid in the parent. Call only while the process has a single thread.
pub fn fork_new_pid_ns() -> io::Result<i32> {
    // SAFETY: a raw clone with no stack and no CLONE_VM behaves like fork(); the
    // caller guarantees no other thread exists, so the child's copy of the address
    // space holds no lock another thread owned.
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

/// A plain `fork()`. The caller must be single-threaded.
pub fn fork() -> io::Result<i32> {
    // SAFETY: the caller guarantees it has a single thread.
    check(unsafe { libc::fork() })
}

/// A pipe whose ends close on exec: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Closes every descriptor from `first` on except `keep`.
pub fn close_from(first: u32, keep: &[RawFd]) {
    let mut keep: Vec<u32> = keep.iter().map(|&k| k as u32).collect();
    keep.sort_unstable();
    let mut start = first;
    for k in keep.into_iter().filter(|&k| k >= first) {
        if k > start {
            // SAFETY: closing descriptors this process owns.
            unsafe { libc::syscall(libc::SYS_close_range, start, k - 1, 0) };
        }
        start = k + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, start, u32::MAX, 0) };
}

/// Kill this process with `sig` when its parent dies.
pub fn die_with_parent(sig: i32) -> io::Result<()> {
    // SAFETY: plain prctl.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) }).map(drop)
}

pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: plain prctl.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Removes `caps` from the bounding set and from the effective, permitted and
/// inheritable sets, and clears the ambient set: they can never come back.
pub fn drop_capabilities(caps: &[u32]) -> io::Result<()> {
    for &c in caps {
        // SAFETY: plain prctl; EINVAL means the kernel does not know the capability.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, c as libc::c_ulong, 0, 0, 0) };
        if r == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: plain prctl.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let mut hdr = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and two data structs, as version 3 requires.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) as libc::c_int })?;
    for &c in caps {
        let (i, bit) = ((c / 32) as usize, 1u32 << (c % 32));
        data[i].effective &= !bit;
        data[i].permitted &= !bit;
        data[i].inheritable &= !bit;
    }
    // SAFETY: as above.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) as libc::c_int })
        .map(drop)
}

/// Whether this process holds capability `cap` in its effective set.
pub fn has_capability(cap: u32) -> bool {
    let mut hdr = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: as in drop_capabilities.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) };
    r == 0 && data[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Installs a handler that does nothing for `sig` (so PID 1 of a namespace receives
/// it from outside, where the default disposition would be dropped).
pub fn catch_signal(sig: i32) -> io::Result<()> {
    set_handler(sig, ignore_signal as *const () as libc::sighandler_t)
}

pub fn ignore_signal_default(sig: i32) -> io::Result<()> {
    set_handler(sig, libc::SIG_IGN)
}

fn set_handler(sig: i32, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART;
        check(libc::sigaction(sig, &sa, std::ptr::null_mut())).map(drop)
    }
}

/// Every signal back to its default disposition and unblocked (before `exec`).
pub fn reset_signals() {
    for sig in 1..libc::SIGRTMIN() {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            let _ = set_handler(sig, libc::SIG_DFL);
        }
    }
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, set.as_ptr(), std::ptr::null_mut());
    }
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
    let mut status = 0;
    // SAFETY: valid out-pointer.
    let r = check(unsafe { libc::waitpid(pid, &mut status, flags) })?;
    if r == 0 {
        return Ok(None);
    }
    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    Ok(Some((r, exit)))
}

pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// Becomes `uid:gid` with no supplementary groups but `gid`.
pub fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain syscalls with a one-element group list.
    unsafe {
        check(libc::setgroups(1, &gid))?;
        check(libc::setresgid(gid, gid, gid))?;
        check(libc::setresuid(uid, uid, uid))?;
    }
    Ok(())
}

pub fn chdir(p: &std::path::Path) -> io::Result<()> {
    let c = cpath(p)?;
    // SAFETY: valid C string.
    check(unsafe { libc::chdir(c.as_ptr()) }).map(drop)
}

/// `execvpe`: runs `args[0]` (looked up in `env`'s `PATH` when it has no `/`, in
/// `/bin:/usr/bin` when `env` has no `PATH`) with exactly the environment `env`.
/// Returns only on failure. Call only in a single-threaded process that is about to
/// exec: it sets this process's own `PATH` to `env`'s, where glibc's `execvpe` looks.
pub fn execvpe(
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

/// Leaves the process at once with `code`, running no destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is always safe to call.
    unsafe { libc::_exit(code) }
}

pub fn getuid() -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::getuid() }
}

pub fn getgid() -> u32 {
    // SAFETY: cannot fail.
    unsafe { libc::getgid() }
}

/// Reads one byte from `fd`; `Ok(None)` at end of file.
pub fn read_byte(fd: BorrowedFd) -> io::Result<Option<u8>> {
    let mut b = 0u8;
    loop {
        // SAFETY: one writable byte.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&mut b as *mut u8).cast(), 1) };
        if n == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok((n == 1).then_some(b));
    }
}

pub fn write_byte(fd: BorrowedFd, b: u8) -> io::Result<()> {
    // SAFETY: one readable byte.
    check_ssize(unsafe { libc::write(fd.as_raw_fd(), (&b as *const u8).cast(), 1) }).map(drop)
}

/// A new inotify instance (close-on-exec, blocking reads).
pub fn inotify_init() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd returned is new.
    let fd = check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC) })?;
    // SAFETY: fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watches the directory behind `dir` (any descriptor, `O_PATH` included, reached
/// through `/proc/self/fd`). Returns the watch descriptor.
pub fn inotify_add_watch(ino_fd: BorrowedFd, dir: BorrowedFd, mask: u32) -> io::Result<i32> {
    let path = proc_path(dir);
    // SAFETY: valid C string.
    check(unsafe { libc::inotify_add_watch(ino_fd.as_raw_fd(), path.as_ptr(), mask) })
}

pub fn inotify_rm_watch(ino_fd: BorrowedFd, wd: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::inotify_rm_watch(ino_fd.as_raw_fd(), wd) }).map(drop)
}

/// `read(2)` into `buf`.
pub fn read(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length.
    check_ssize(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn poll_readable(fd: BorrowedFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = check(unsafe { libc::poll(&mut p, 1, timeout_ms) })?;
    Ok(n > 0)
}

/// Detaches the mount at `path` now, even while it is busy (`umount -l`); it goes
/// away completely when its last user lets go.
pub fn umount_detach(path: &std::path::Path) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: valid C string.
    check(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// The open-file limit: (soft, hard).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: valid out-pointer.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) })?;
    // SAFETY: initialised on success.
    let lim = unsafe { lim.assume_init() };
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// An all-zero `stat`, for attributes that are not known.
pub fn zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Whether `fd` was opened for both reading and writing.
pub fn is_read_write(fd: BorrowedFd) -> bool {
    // SAFETY: F_GETFL on an open descriptor has no side effects.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags != -1 && flags & libc::O_ACCMODE == libc::O_RDWR
}

// ---- terminals, for the pty that `veilfs run` puts between the command and the
// caller's terminal (never on a request path) ----

/// `ioctl(fd, TIOCSCTTY, 0)`: the terminal `fd` becomes the controlling terminal of
/// the calling session leader (which must have none).
pub fn set_controlling_tty(fd: BorrowedFd) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an int argument, no pointer.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSCTTY, 0) }).map(drop)
}

/// `TIOCGWINSZ`: the window size of the terminal `fd`.
pub fn window_size(fd: BorrowedFd) -> io::Result<libc::winsize> {
    let mut ws = MaybeUninit::<libc::winsize>::zeroed();
    // SAFETY: TIOCGWINSZ writes one winsize to a valid pointer.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, ws.as_mut_ptr()) })?;
    // SAFETY: zero-initialised, and filled on success.
    Ok(unsafe { ws.assume_init() })
}

/// `TIOCSWINSZ`: sets the window size of the terminal `fd` (its foreground process
/// group gets `SIGWINCH`).
pub fn set_window_size(fd: BorrowedFd, ws: &libc::winsize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, ws as *const libc::winsize) })
        .map(drop)
}
