//! The file half: what the filesystem does to the backing tree, and inotify.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::{Gid, Uid, UnlinkatFlags};

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// A single path component as a C string. Refuses `/`, NUL, `.`, `..` and the empty
/// name, so no wrapper can be made to walk more than one step.
pub fn name(n: &OsStr) -> io::Result<CString> {
    let b = n.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(einval());
    }
    CString::new(b).map_err(|_| einval())
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub fn openat(dir: BorrowedFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::openat(
        dir,
        name,
        flags,
        Mode::from_bits_retain(mode),
    )?)
}

/// An `O_PATH` descriptor on the entry `name` in `dir`, without following it.
pub fn open_path(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    openat(dir, name, libc::O_PATH, 0)
}

/// Opens `path` (absolute, outside any request) as an `O_PATH` directory descriptor.
pub fn open_dir_path(path: &std::path::Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(path, flags, Mode::empty())?)
}

/// The name of an fd under `/proc/self/fd`, for reopening an `O_PATH` descriptor.
fn fd_name(fd: BorrowedFd) -> CString {
    CString::new(fd.as_raw_fd().to_string()).expect("digits have no NUL")
}

/// `/proc/self/fd/N` as an absolute C path for the few calls with no `*at` form.
/// The magic link resolves to the inode itself, never to a path in the source.
fn proc_path(fd: BorrowedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL")
}

/// Reopens an `O_PATH` descriptor with real access `flags`, through the
/// `/proc/self/fd` directory descriptor `proc_fd` (the inode itself, not a path).
/// `O_NOFOLLOW` is never set: the magic link must be followed to reach the inode.
pub fn reopen(proc_fd: BorrowedFd, fd: BorrowedFd, flags: i32) -> io::Result<OwnedFd> {
    let flags = (OFlag::from_bits_retain(flags) | OFlag::O_CLOEXEC)
        .difference(OFlag::O_NOFOLLOW | OFlag::O_CREAT);
    Ok(nix::fcntl::openat(
        proc_fd,
        fd_name(fd).as_c_str(),
        flags,
        Mode::empty(),
    )?)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn statat(dir: BorrowedFd, name: &CStr) -> io::Result<libc::stat> {
    Ok(nix::sys::stat::fstatat(
        dir,
        name,
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?)
}

/// `fstat` of the entry `path` (one or more names) beneath `dir`, resolved with
/// `openat2` so that no symbolic link is followed on the way, nor the last one
/// (an `O_PATH` descriptor on the link itself), and nothing leaves `dir`.
pub fn stat_beneath(dir: BorrowedFd, path: &CStr) -> io::Result<libc::stat> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = rustix::fs::openat2(
        dir,
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    stat(fd.as_fd())
}

/// Opens the file at the absolute `path` for reading and appending (outside any
/// request: `veilfs prompt` adding a rule to a policy file), resolved with
/// `openat2` so that no symbolic link is followed on the way nor at the end.
/// Opening never waits (`O_NONBLOCK`: a FIFO put there) and never takes a
/// controlling terminal; the caller checks what it opened.
pub fn open_append(path: &Path) -> io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::RDWR
            | OFlags::APPEND
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY
            | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(std::fs::File::from(fd))
}

/// `fstat` of any descriptor, `O_PATH` ones included.
pub fn stat(fd: BorrowedFd) -> io::Result<libc::stat> {
    Ok(nix::sys::stat::fstatat(
        fd,
        c"",
        AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW,
    )?)
}

pub fn mkdirat(dir: BorrowedFd, name: &CStr, mode: u32) -> io::Result<()> {
    Ok(nix::sys::stat::mkdirat(
        dir,
        name,
        Mode::from_bits_retain(mode),
    )?)
}

pub fn mknodat(dir: BorrowedFd, name: &CStr, mode: u32, rdev: u64) -> io::Result<()> {
    // The type and permission bits travel together, as mknodat(2) takes them.
    Ok(nix::sys::stat::mknodat(
        dir,
        name,
        SFlag::from_bits_retain(mode & libc::S_IFMT),
        Mode::from_bits_retain(mode & !libc::S_IFMT),
        rdev,
    )?)
}

pub fn symlinkat(target: &OsStr, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    let t = CString::new(target.as_bytes()).map_err(|_| einval())?;
    Ok(nix::unistd::symlinkat(t.as_c_str(), dir, name)?)
}

pub fn unlinkat(dir: BorrowedFd, name: &CStr, dir_flag: bool) -> io::Result<()> {
    let flag = if dir_flag {
        UnlinkatFlags::RemoveDir
    } else {
        UnlinkatFlags::NoRemoveDir
    };
    Ok(nix::unistd::unlinkat(dir, name, flag)?)
}

pub fn renameat2(
    old_dir: BorrowedFd,
    old: &CStr,
    new_dir: BorrowedFd,
    new: &CStr,
    flags: u32,
) -> io::Result<()> {
    Ok(nix::fcntl::renameat2(
        old_dir,
        old,
        new_dir,
        new,
        RenameFlags::from_bits_retain(flags),
    )?)
}

/// A new hard link `name` in `dir` to the inode of the `O_PATH` descriptor `fd`
/// (through `/proc/self/fd`, which needs no `CAP_DAC_READ_SEARCH`).
pub fn linkat(proc_fd: BorrowedFd, fd: BorrowedFd, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    Ok(nix::unistd::linkat(
        proc_fd,
        fd_name(fd).as_c_str(),
        dir,
        name,
        AtFlags::AT_SYMLINK_FOLLOW,
    )?)
}

/// The target of the symlink behind an `O_PATH` descriptor, unchanged.
pub fn readlink(fd: BorrowedFd) -> io::Result<Vec<u8>> {
    Ok(nix::fcntl::readlinkat(fd, c"")?.into_vec())
}

/// `fchmodat` through `/proc/self/fd` (an `O_PATH` descriptor cannot `fchmod`).
pub fn chmod(proc_fd: BorrowedFd, fd: BorrowedFd, mode: u32) -> io::Result<()> {
    Ok(nix::sys::stat::fchmodat(
        proc_fd,
        fd_name(fd).as_c_str(),
        Mode::from_bits_retain(mode),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )?)
}

/// `fchownat(fd, "", AT_EMPTY_PATH)`: works on `O_PATH` descriptors, links included.
pub fn chown(fd: BorrowedFd, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    Ok(nix::unistd::fchownat(
        fd,
        c"",
        uid.map(Uid::from_raw),
        gid.map(Gid::from_raw),
        AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW,
    )?)
}

/// `utimensat` on the inode behind `fd`; `None` leaves a time unchanged, and
/// `Some(None)` means "now". (rustix: nix's `utimensat` has no `AT_EMPTY_PATH`,
/// which reaches a symbolic link itself through its `O_PATH` descriptor.)
pub fn utimes(
    proc_fd: BorrowedFd,
    fd: BorrowedFd,
    is_symlink: bool,
    atime: Option<Option<libc::timespec>>,
    mtime: Option<Option<libc::timespec>>,
) -> io::Result<()> {
    use rustix::fs::{AtFlags, Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
    let conv = |t: Option<Option<libc::timespec>>| match t {
        None => Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        Some(None) => Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        },
        Some(Some(ts)) => Timespec {
            tv_sec: ts.tv_sec,
            tv_nsec: ts.tv_nsec,
        },
    };
    let times = Timestamps {
        last_access: conv(atime),
        last_modification: conv(mtime),
    };
    if is_symlink {
        return Ok(rustix::fs::utimensat(
            fd,
            c"",
            &times,
            AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
        )?);
    }
    Ok(rustix::fs::utimensat(
        proc_fd,
        fd_name(fd).as_c_str(),
        &times,
        AtFlags::empty(),
    )?)
}

/// One directory entry as read from the backing directory.
pub struct DirEntry {
    pub ino: u64,
    /// `DT_*` type (`DT_UNKNOWN` when the filesystem does not say).
    pub kind: u8,
    pub name: Vec<u8>,
}

/// Every entry of the directory behind `dir` (a readable directory descriptor),
/// without `.` and `..`.
pub fn read_dir(dir: OwnedFd) -> io::Result<Vec<DirEntry>> {
    use nix::dir::Type;
    let mut out = Vec::new();
    for e in nix::dir::Dir::from_fd(dir)? {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match e.file_type() {
            Some(Type::Fifo) => libc::DT_FIFO,
            Some(Type::CharacterDevice) => libc::DT_CHR,
            Some(Type::Directory) => libc::DT_DIR,
            Some(Type::BlockDevice) => libc::DT_BLK,
            Some(Type::File) => libc::DT_REG,
            Some(Type::Symlink) => libc::DT_LNK,
            Some(Type::Socket) => libc::DT_SOCK,
            None => libc::DT_UNKNOWN,
        };
        out.push(DirEntry {
            ino: e.ino(),
            kind,
            name: name.to_vec(),
        });
    }
    Ok(out)
}

/// Extended attributes through `/proc/self/fd/N` (the inode behind an `O_PATH` fd).
/// With `size == 0` only the length is asked for: the data comes back empty.
pub fn getxattr(fd: BorrowedFd, name: &CStr, size: usize) -> io::Result<(usize, Vec<u8>)> {
    let path = proc_path(fd);
    if size == 0 {
        return Ok((
            rustix::fs::getxattr_query(path.as_c_str(), name)?,
            Vec::new(),
        ));
    }
    let mut buf = vec![0u8; size];
    let n = rustix::fs::getxattr(path.as_c_str(), name, &mut buf[..])?;
    buf.truncate(n);
    Ok((n, buf))
}

/// The attribute names, as for [`getxattr`].
pub fn listxattr(fd: BorrowedFd, size: usize) -> io::Result<(usize, Vec<u8>)> {
    let path = proc_path(fd);
    if size == 0 {
        return Ok((rustix::fs::listxattr_query(path.as_c_str())?, Vec::new()));
    }
    let mut buf = vec![0u8; size];
    let n = rustix::fs::listxattr(path.as_c_str(), &mut buf[..])?;
    buf.truncate(n);
    Ok((n, buf))
}

pub fn setxattr(fd: BorrowedFd, name: &CStr, value: &[u8], flags: i32) -> io::Result<()> {
    let flags = rustix::fs::XattrFlags::from_bits_retain(flags as u32);
    Ok(rustix::fs::setxattr(
        proc_path(fd).as_c_str(),
        name,
        value,
        flags,
    )?)
}

pub fn removexattr(fd: BorrowedFd, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::removexattr(proc_path(fd).as_c_str(), name)?)
}

pub fn fallocate(fd: BorrowedFd, mode: i32, offset: i64, len: i64) -> io::Result<()> {
    Ok(nix::fcntl::fallocate(
        fd,
        nix::fcntl::FallocateFlags::from_bits_retain(mode),
        offset,
        len,
    )?)
}

pub fn lseek(fd: BorrowedFd, offset: i64, whence: i32) -> io::Result<i64> {
    use nix::unistd::Whence;
    let whence = match whence {
        libc::SEEK_SET => Whence::SeekSet,
        libc::SEEK_CUR => Whence::SeekCur,
        libc::SEEK_END => Whence::SeekEnd,
        libc::SEEK_DATA => Whence::SeekData,
        libc::SEEK_HOLE => Whence::SeekHole,
        _ => return Err(einval()),
    };
    Ok(nix::unistd::lseek(fd, offset, whence)?)
}

pub fn copy_file_range(
    fd_in: BorrowedFd,
    off_in: i64,
    fd_out: BorrowedFd,
    off_out: i64,
    len: usize,
) -> io::Result<usize> {
    let (mut a, mut b) = (off_in, off_out);
    Ok(nix::fcntl::copy_file_range(
        fd_in,
        Some(&mut a),
        fd_out,
        Some(&mut b),
        len,
    )?)
}

pub fn statvfs(fd: BorrowedFd) -> io::Result<rustix::fs::StatVfs> {
    Ok(rustix::fs::fstatvfs(fd)?)
}

pub fn fsync(fd: BorrowedFd, datasync: bool) -> io::Result<()> {
    if datasync {
        Ok(nix::unistd::fdatasync(fd)?)
    } else {
        Ok(nix::unistd::fsync(fd)?)
    }
}

/// Whether `fd` was opened for both reading and writing.
pub fn is_read_write(fd: BorrowedFd) -> bool {
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL)
        .is_ok_and(|flags| flags & libc::O_ACCMODE == libc::O_RDWR)
}

/// A new inotify instance (close-on-exec, non-blocking reads: see [`inotify_read`]).
pub fn inotify_init() -> io::Result<inotify::Inotify> {
    inotify::Inotify::init()
}

/// Watches the directory behind `dir` (any descriptor, `O_PATH` included, reached
/// through `/proc/self/fd`) for the events in `mask` (`IN_*`).
pub fn inotify_add_watch(
    watches: &mut inotify::Watches,
    dir: BorrowedFd,
    mask: u32,
) -> io::Result<inotify::WatchDescriptor> {
    let path = proc_path(dir);
    watches.add(
        Path::new(OsStr::from_bytes(path.as_bytes())),
        inotify::WatchMask::from_bits_retain(mask),
    )
}

/// One inotify event: its watch, its mask (`IN_*`), and the name it concerns
/// (empty for an event on the watched directory itself).
pub type InotifyEvent<'a> = (inotify::WatchDescriptor, u32, &'a [u8]);

/// Reads the events queued on `ino` into `buf`, waiting at most `timeout_ms` for
/// the first. `Ok(None)`: none came in time (or a signal came first).
pub fn inotify_read<'a>(
    ino: &mut inotify::Inotify,
    buf: &'a mut [u8],
    timeout_ms: i32,
) -> io::Result<Option<impl Iterator<Item = InotifyEvent<'a>> + use<'a>>> {
    match poll_readable(ino.as_fd(), timeout_ms) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
        Err(e) => return Err(e),
    }
    match ino.read_events(buf) {
        Ok(events) => Ok(Some(events.map(|e| {
            let name = e.name.map_or(&[][..], |n| n.as_bytes());
            (e.wd, e.mask.bits(), name)
        }))),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `read(2)` into `buf`.
pub fn read(fd: BorrowedFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(nix::unistd::read(fd, buf)?)
}

/// Reads one byte from `fd`; `Ok(None)` at end of file.
pub fn read_byte(fd: BorrowedFd) -> io::Result<Option<u8>> {
    let mut b = [0u8; 1];
    loop {
        match nix::unistd::read(fd, &mut b) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(n) => return Ok((n == 1).then_some(b[0])),
        }
    }
}

pub fn write_byte(fd: BorrowedFd, b: u8) -> io::Result<()> {
    nix::unistd::write(fd, &[b])?;
    Ok(())
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn poll_readable(fd: BorrowedFd, timeout_ms: i32) -> io::Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    let timeout = PollTimeout::try_from(timeout_ms).map_err(|_| einval())?;
    let mut p = [PollFd::new(fd, PollFlags::POLLIN)];
    Ok(nix::poll::poll(&mut p, timeout)? > 0)
}
