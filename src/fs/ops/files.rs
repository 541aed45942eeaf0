//! Opening, reading and writing files: handles, handle-less opens for reading, and
//! the I/O mode (cached or passthrough) each open gets.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::Caller;
use super::MAX_COPY;
use super::NO_HANDLE;
use super::opens_for_writing;
use crate::fs::FileHandle;
use crate::fs::Node;
use crate::fs::VeilFs;
use crate::fs::gate::Intent;
use crate::fs::gate::Target;
use crate::fs::inode::key_of;
use crate::fs::refusal::errno;
use crate::fs::request::Req;
use crate::sys;

/// The descriptor an I/O request works on (see [`VeilFs::io`]).
pub(super) enum Io {
    Handle(Arc<FileHandle>),
    Node(File),
}

impl Io {
    pub(super) fn file(&self) -> &File {
        match self {
            Io::Handle(h) => &h.file,
            Io::Node(f) => f,
        }
    }
}

impl VeilFs {
    pub(super) fn new_fh(&self) -> u64 {
        self.handles.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps `fd`, opened on node `ino` (for writing when `writes` names its object),
    /// as a new handle.
    pub(super) fn register(
        &self,
        fd: OwnedFd,
        ino: u64,
        writes: Option<crate::fs::inode::Key>,
    ) -> u64 {
        if let Some(key) = writes {
            self.gate.protected.writing(key, true);
        }
        let fh = self.new_fh();
        self.handles.files.write().insert(
            fh,
            Arc::new(FileHandle {
                file: File::from(fd),
                ino,
                backing: Mutex::new(None),
                counted: std::sync::atomic::AtomicBool::new(false),
                writes,
            }),
        );
        fh
    }

    pub fn file(&self, fh: u64) -> io::Result<Arc<FileHandle>> {
        self.handles
            .files
            .read()
            .get(&fh)
            .cloned()
            .ok_or_else(|| errno(libc::EBADF))
    }

    /// An open for reading answered without a handle (see
    /// [`crate::fs::config::FsConfig::light_open`]): only the policy check.
    pub fn open_for_reading(&self, cx: &Req, ino: u64) -> io::Result<()> {
        let node = self.node(ino)?;
        self.still_named(&node)?;
        self.readable(cx, &node)?;
        self.pin(&node);
        Ok(())
    }

    /// Counts an open for reading about to be answered without a handle, and says
    /// whether it may be: not while files are open on the inode in passthrough
    /// mode (see [`crate::fs::inode::IoMode`]).
    pub fn light_opened(&self, ino: u64) -> bool {
        let Some(node) = self.inodes.get(ino) else {
            return true;
        };
        let mut io = node.io.lock();
        if io.in_passthrough() {
            return false;
        }
        io.light += 1;
        true
    }

    pub fn open(&self, cx: &Req, ino: u64, flags: i32) -> io::Result<u64> {
        let node = self.node(ino)?;
        self.still_named(&node)?;
        self.pin(&node);
        let writes = opens_for_writing(flags);
        let own = if writes {
            let place = self.writable(cx, &node)?;
            self.gate.protected.written(node.key);
            self.own(place.parent, &place.name)
        } else {
            self.readable(cx, &node)?;
            crate::fs::watch::Own::none()
        };
        // `O_DIRECT` is the kernel's business on the FUSE side: the daemon's buffers
        // carry no alignment, so the backing descriptor is opened without it.
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_DIRECT);
        let mut fd = self.open_node(&node, flags)?;
        if self.may_register_backing(&node, writes, fd.as_fd()) {
            // This descriptor may become the passthrough backing file that every
            // handle on the inode shares, writers included: open it read-write (the
            // kernel still enforces each opener's own access mode).
            if let Ok(rw) = self.open_node(&node, (flags & !libc::O_ACCMODE) | libc::O_RDWR) {
                fd = rw;
            }
        }
        own.done();
        Ok(self.register(fd, ino, writes.then_some(node.key)))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> io::Result<(Arc<Node>, libc::stat, u64)> {
        let caller = Caller::of(cx);
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(cx), parent, name, false)?;
        let (dfd, mode) = (c.dir.dir_fd()?, mode & !umask);
        // Without `O_EXCL` an existing name is opened (and maybe truncated): never
        // an object a guard keeps (the policy file, say).
        let there = sys::statat(dfd, &c.name).ok();
        let at = Target::at(&c.path, libc::S_IFREG).holding(there.as_ref().map(key_of));
        self.guarded(&at, Intent::Make)?;
        // `O_DIRECT` stays on the FUSE side (see `open`); never block on the open.
        let flags = (flags & !libc::O_DIRECT) | libc::O_CREAT | libc::O_NONBLOCK;
        let fd = if self.kernel.passthrough.load(Ordering::Relaxed) {
            // Read-write, so that the descriptor can back passthrough for every
            // later handle; with the caller's own access mode where that is
            // refused (the name already exists, without read permission for us).
            let rw = (flags & !libc::O_ACCMODE) | libc::O_RDWR;
            match sys::openat(dfd, &c.name, rw, mode) {
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                    sys::openat(dfd, &c.name, flags, mode)?
                }
                r => r?,
            }
        } else {
            sys::openat(dfd, &c.name, flags, mode)?
        };
        // The node stands for the file this descriptor opened, whatever the name
        // holds by now.
        let path_fd = sys::reopen(self.proc_fd.as_fd(), fd.as_fd(), libc::O_PATH)?;
        let st = sys::stat(path_fd.as_fd())?;
        let path = c.path.clone();
        // Pinned like a file opened (see `pin`), within the cap.
        let path_fd = (self.inodes.pinned() < self.limits.pins).then_some(path_fd);
        let (node, _) = self.adopt(c.at(), &c.name, path_fd, st, path, c.decision.clone())?;
        self.gate.protected.written(node.key);
        let nfd = self.inodes.fd_of(&node)?;
        self.give(dfd, nfd.as_fd(), caller)?;
        let st = sys::stat(nfd.as_fd())?;
        drop(nfd);
        own.done();
        let fh = self.register(fd, node.ino, Some(node.key));
        Ok((node, st, fh))
    }

    /// Whether a handle opened now on `node` could register the inode's passthrough
    /// backing file: passthrough is on, no other handle is open, and the file will be
    /// written or is large (see [`crate::fs::PASSTHROUGH_MIN_SIZE`]).
    pub(super) fn may_register_backing(&self, node: &Node, writes: bool, fd: BorrowedFd) -> bool {
        node.fmt == libc::S_IFREG
            && self.kernel.passthrough.load(Ordering::Relaxed)
            && node.io.lock().is_free()
            && (writes
                || sys::stat(fd)
                    .is_ok_and(|st| st.st_size as u64 >= crate::fs::PASSTHROUGH_MIN_SIZE))
    }

    /// Opens the node's own object with `flags`, by reopening its `O_PATH` descriptor
    /// (an unpinned node through one of its names, checked to reach its object). Never blocks: `O_NONBLOCK` is added (a regular file ignores
    /// it, and a lease or a special file cannot hold the request thread).
    pub(super) fn open_node(&self, node: &Node, flags: i32) -> io::Result<OwnedFd> {
        let flags = flags | libc::O_NONBLOCK;
        match node.fd() {
            Some(fd) => sys::reopen(self.proc_fd.as_fd(), fd, flags),
            None => self.inodes.through_links(node, |dir, name| {
                let fd = sys::openat(dir, name, flags, 0)?;
                Ok((sys::stat(fd.as_fd())?, fd))
            }),
        }
    }

    /// What an I/O request works on: the handle it names, or, for handle 0 (a file
    /// opened for reading without a handle, see [`crate::fs::config::FsConfig::light_open`]), the
    /// node reopened for this one request after the check an open would have made.
    pub(super) fn io(&self, cx: &Req, ino: u64, fh: u64, write: bool) -> io::Result<Io> {
        if fh != NO_HANDLE {
            let h = self.file(fh)?;
            if write
                && let Some(node) = self.inodes.get(h.ino)
                && self.gate.keeps_object(node.key)
            {
                // A handle opened before its file became the policy file.
                self.guard_node(&self.snapshot(cx), &node, &node.place())?;
            }
            return Ok(Io::Handle(h));
        }
        let node = self.node(ino)?;
        if node.fmt != libc::S_IFREG {
            return Err(errno(libc::EINVAL));
        }
        let access = if write {
            self.writable(cx, &node)?;
            libc::O_WRONLY
        } else {
            self.visible(cx, &node)?;
            libc::O_RDONLY
        };
        Ok(Io::Node(File::from(self.open_node(&node, access)?)))
    }

    pub fn read(&self, cx: &Req, ino: u64, fh: u64, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let io = self.io(cx, ino, fh, false)?;
        let mut buf = vec![0u8; size as usize];
        let mut done = 0;
        while done < buf.len() {
            match io.file().read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    pub fn write(&self, cx: &Req, ino: u64, fh: u64, offset: u64, data: &[u8]) -> io::Result<u32> {
        let io = self.io(cx, ino, fh, true)?;
        let own = self.own_node(match &io {
            Io::Handle(h) => h.ino,
            Io::Node(_) => ino,
        });
        io.file().write_all_at(data, offset)?;
        own.done();
        Ok(data.len() as u32)
    }

    /// `RELEASE` of a file opened on node `ino` for reading without a handle.
    pub fn release_light(&self, ino: u64) {
        if let Some(node) = self.inodes.get(ino) {
            let mut io = node.io.lock();
            io.light = io.light.saturating_sub(1);
        }
    }

    pub fn release(&self, fh: u64) {
        let Some(h) = self.handles.files.write().remove(&fh) else {
            return;
        };
        if let Some(key) = h.writes {
            self.gate.protected.writing(key, false);
        }
        if h.counted.load(Ordering::Relaxed)
            && let Some(node) = self.inodes.get(h.ino)
        {
            let mut io = node.io.lock();
            io.open = io.open.saturating_sub(1);
        }
    }

    pub fn fsync(&self, cx: &Req, ino: u64, fh: u64, datasync: bool) -> io::Result<()> {
        sys::fsync(self.io(cx, ino, fh, false)?.file().as_fd(), datasync)
    }

    pub fn fallocate(
        &self,
        cx: &Req,
        ino: u64,
        fh: u64,
        mode: i32,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let io = self.io(cx, ino, fh, true)?;
        sys::fallocate(io.file().as_fd(), mode, offset as i64, len as i64)
    }

    pub fn lseek(&self, cx: &Req, ino: u64, fh: u64, offset: i64, whence: i32) -> io::Result<i64> {
        sys::lseek(self.io(cx, ino, fh, false)?.file().as_fd(), offset, whence)
    }

    /// `(ino, fh, offset)` in and out. Copies at most [`MAX_COPY`] bytes (the
    /// reply counts them in a `u32`); the caller asks again for the rest.
    pub fn copy_file_range(
        &self,
        cx: &Req,
        from: (u64, u64, u64),
        to: (u64, u64, u64),
        len: u64,
    ) -> io::Result<usize> {
        let (a, b) = (
            self.io(cx, from.0, from.1, false)?,
            self.io(cx, to.0, to.1, true)?,
        );
        let off_in = i64::try_from(from.2).map_err(|_| errno(libc::EINVAL))?;
        let off_out = i64::try_from(to.2).map_err(|_| errno(libc::EINVAL))?;
        sys::copy_file_range(
            a.file().as_fd(),
            off_in,
            b.file().as_fd(),
            off_out,
            len.min(MAX_COPY) as usize,
        )
    }
}
