//! `impl fuser::Filesystem`: decode the request, call [`super::ops`], reply. Errors
//! become the reply's errno in exactly one place (`err`, in the `reply` module).

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::VeilFs;
use super::inval::Inval;
use super::ops::SetAttr;

#[cfg(feature = "fault-injection")]
pub use super::fault::inject_lookup_panic;
pub use super::parked::Served;

use super::reply::{CACHED_OPEN, PASSTHROUGH_OPEN, fill_dir, fill_dir_plus, guard, timespec};

impl Filesystem for Served {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        use fuser::InitFlags as F;
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        for flag in [
            F::FUSE_PARALLEL_DIROPS,
            F::FUSE_CACHE_SYMLINKS,
            F::FUSE_DO_READDIRPLUS,
            F::FUSE_READDIRPLUS_AUTO,
            // Cached pages are dropped when a file's size or mtime changes (an edit
            // made outside the mount), so KEEP_CACHE stays coherent.
            F::FUSE_AUTO_INVAL_DATA,
        ] {
            let _ = config.add_capabilities(flag);
        }
        let no_opendir = self.kernel.no_opendir.load(Ordering::Relaxed)
            && config.add_capabilities(F::FUSE_NO_OPENDIR_SUPPORT).is_ok();
        self.kernel.no_opendir.store(no_opendir, Ordering::Relaxed);
        if self.kernel.passthrough.load(Ordering::Relaxed) {
            let ok = config.add_capabilities(F::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(2).is_ok();
            self.kernel.passthrough.store(ok, Ordering::Relaxed);
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.guard_req(req, "lookup", |cx| {
            #[cfg(feature = "fault-injection")]
            self.injected_fault(parent.0, name);
            let r = VeilFs::lookup(self, cx, parent.0, name);
            match &r {
                Ok((node, _)) => self.allowed(cx, "lookup", node.ino),
                Err(e) => self.notice_refused_lookup(req.pid(), name, e),
            }
            self.reply_entry(cx, "lookup", r, reply)
        })
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        guard("forget", || {
            VeilFs::forget(self, ino.0, nlookup);
        })
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.guard_req(req, "getattr", |cx| {
            match VeilFs::getattr(self, cx, ino.0, fh.map(|f| f.0)) {
                Ok(st) => reply.attr(&self.ttl_of(ino.0), &self.attr(ino.0, &st)),
                Err(e) => reply.error(self.fail(req, "getattr", e)),
            }
        })
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(timespec),
            mtime: mtime.map(timespec),
        };
        self.asking(
            req,
            "setattr",
            reply,
            move |fs, cx| VeilFs::setattr(fs, cx, ino.0, &a, fh.map(|f| f.0)),
            move |fs, cx, r, reply| match r {
                Ok(st) => reply.attr(&fs.ttl_of(ino.0), &fs.attr(ino.0, &st)),
                Err(e) => reply.error(fs.fail(cx, "setattr", e)),
            },
        )
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.guard_req(req, "readlink", |cx| {
            match VeilFs::readlink(self, cx, ino.0) {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(self.fail(req, "readlink", e)),
            }
        })
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.asking(
            req,
            "mknod",
            reply,
            move |fs, cx| VeilFs::mknod(fs, cx, parent.0, &name, mode, umask, rdev),
            |fs, cx, r, reply| fs.reply_entry(cx, "mknod", r, reply),
        )
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.asking(
            req,
            "mkdir",
            reply,
            move |fs, cx| VeilFs::mkdir(fs, cx, parent.0, &name, mode, umask),
            |fs, cx, r, reply| fs.reply_entry(cx, "mkdir", r, reply),
        )
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(
            req,
            "unlink",
            reply,
            move |fs, cx| VeilFs::unlink(fs, cx, parent.0, &name),
            |fs, cx, r, reply| fs.reply_empty(cx, "unlink", r, reply),
        )
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(
            req,
            "rmdir",
            reply,
            move |fs, cx| VeilFs::rmdir(fs, cx, parent.0, &name),
            |fs, cx, r, reply| fs.reply_empty(cx, "rmdir", r, reply),
        )
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (link_name, target) = (link_name.to_owned(), target.as_os_str().to_owned());
        self.asking(
            req,
            "symlink",
            reply,
            move |fs, cx| VeilFs::symlink(fs, cx, parent.0, &link_name, &target),
            |fs, cx, r, reply| fs.reply_entry(cx, "symlink", r, reply),
        )
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.to_owned(), newname.to_owned());
        let flags = flags.bits();
        let names = (name.clone(), newname.clone());
        self.asking(
            req,
            "rename",
            reply,
            move |fs, cx| VeilFs::rename(fs, cx, parent.0, &names.0, newparent.0, &names.1, flags),
            move |fs, cx, r, reply| match r {
                Ok(moved_dir) => {
                    reply.ok();
                    if moved_dir {
                        // The kernel moved its cached subtree along: drop it, so that
                        // whatever is opened there next is looked up (and decided) anew
                        // under its new path; files are opened without asking.
                        let entry =
                            |p: INodeNo, n: &OsStr| Inval::Entry(p.0, n.as_bytes().to_vec());
                        fs.inval.queue(entry(newparent, &newname));
                        if flags & libc::RENAME_EXCHANGE != 0 {
                            fs.inval.queue(entry(parent, &name));
                        }
                    }
                }
                Err(e) => reply.error(fs.fail(cx, "rename", e)),
            },
        )
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let newname = newname.to_owned();
        self.asking(
            req,
            "link",
            reply,
            move |fs, cx| VeilFs::link(fs, cx, ino.0, newparent.0, &newname),
            |fs, cx, r, reply| fs.reply_entry(cx, "link", r, reply),
        )
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writes = super::ops::opens_for_writing(flags.0);
        self.asking(
            req,
            "open",
            reply,
            move |fs, cx| {
                if fs.kernel.light_open.load(Ordering::Relaxed) && !writes {
                    // Checked, and no handle: reads come with handle 0 and are
                    // checked again when they miss the cache (see
                    // `VeilFs::light_open`), unless a writer holds the file in
                    // passthrough mode, which a handle-less open cannot join: then a
                    // handle on the same backing file, as below.
                    VeilFs::open_for_reading(fs, cx, ino.0)?;
                    if fs.light_opened(ino.0) {
                        return Ok(None);
                    }
                }
                VeilFs::open(fs, cx, ino.0, flags.0).map(Some)
            },
            move |fs, cx, r, reply| match r {
                Ok(None) => {
                    fs.allowed(cx, "open", ino.0);
                    reply.opened(FileHandle(super::ops::NO_HANDLE), CACHED_OPEN);
                }
                Ok(Some(fh)) => {
                    if !writes {
                        // An open for writing is logged where the policy allowed
                        // the change (`VeilFs::admit`).
                        fs.allowed(cx, "open", ino.0);
                    }
                    let rw = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
                    match fs.io_mode_for(ino.0, fh, rw, |f| reply.open_backing(f)) {
                        Some(id) => reply.opened_passthrough(FileHandle(fh), PASSTHROUGH_OPEN, &id),
                        None => reply.opened(FileHandle(fh), CACHED_OPEN),
                    }
                }
                Err(e) => reply.error(fs.fail(cx, "open", e)),
            },
        )
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.guard_req(req, "read", |cx| {
            match VeilFs::read(self, cx, ino.0, fh.0, offset, size) {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(self.fail(req, "read", e)),
            }
        })
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.guard_req(req, "write", |cx| {
            match VeilFs::write(self, cx, ino.0, fh.0, offset, data) {
                Ok(n) => reply.written(n),
                Err(e) => {
                    reply.error(self.fail(req, "write", e));
                    if fh.0 == super::ops::NO_HANDLE {
                        // Only an open for reading goes without a handle, so this does
                        // not happen; should it, the refused bytes may sit in cached
                        // pages: drop them.
                        self.inval.queue(Inval::Inode(ino.0));
                    }
                }
            }
        })
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        guard("flush", || {
            // Nothing to do at close (writes are not buffered here, and locks are the
            // kernel's): ENOSYS makes the kernel stop sending FLUSH, one synchronous
            // round trip per close() of a file opened without a handle.
            reply.error(Errno::ENOSYS);
        })
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        guard("release", || {
            if fh.0 == super::ops::NO_HANDLE {
                VeilFs::release_light(self, ino.0);
            } else {
                VeilFs::release(self, fh.0);
            }
            reply.ok();
        })
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.guard_req(req, "fsync", |cx| {
            self.reply_empty(
                req,
                "fsync",
                VeilFs::fsync(self, cx, ino.0, fh.0, datasync),
                reply,
            )
        })
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.kernel.no_opendir.load(Ordering::Relaxed) {
            // The kernel then stops sending OPENDIR and RELEASEDIR (two round trips
            // per directory walked) and caches listings itself; the policy is
            // checked on every lookup and readdir instead.
            return reply.error(Errno::from_i32(libc::ENOSYS));
        }
        self.asking(
            req,
            "opendir",
            reply,
            move |fs, cx| VeilFs::opendir(fs, cx, ino.0),
            |fs, cx, r, reply| match r {
                // The kernel may keep the listing; the watcher invalidates it when the
                // directory changes outside the mount.
                Ok(()) => reply.opened(
                    FileHandle(0),
                    FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
                ),
                Err(e) => reply.error(fs.fail(cx, "opendir", e)),
            },
        )
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.asking(
            req,
            "readdir",
            reply,
            move |fs, cx| fs.listing_at(cx, ino.0, offset),
            move |fs, cx, r, reply| match r {
                Ok((listing, pos)) => {
                    if offset == 0 {
                        // A listing read from its start: the directory was listed.
                        fs.allowed(cx, "readdir", ino.0);
                    }
                    fill_dir(ino, &listing, pos, reply);
                    fs.after_listing(cx, ino.0);
                }
                Err(e) => reply.error(fs.fail(cx, "readdir", e)),
            },
        )
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        self.asking(
            req,
            "readdirplus",
            reply,
            move |fs, cx| fs.listing_at(cx, ino.0, offset),
            move |fs, cx, r, reply| match r {
                Ok((listing, pos)) => {
                    if offset == 0 {
                        // A listing read from its start: the directory was listed.
                        fs.allowed(cx, "readdirplus", ino.0);
                    }
                    fill_dir_plus(fs, cx, ino, &listing, pos, reply);
                    fs.after_listing(cx, ino.0);
                }
                Err(e) => reply.error(fs.fail(cx, "readdirplus", e)),
            },
        )
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        guard("releasedir", || {
            reply.ok();
        })
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.guard_req(req, "fsyncdir", |cx| {
            self.reply_empty(
                req,
                "fsyncdir",
                VeilFs::fsyncdir(self, cx, ino.0, datasync),
                reply,
            )
        })
    }

    /// No `ioctl` reaches the backing file (a flag such as append-only or
    /// immutable, set through the mount, would change what the policy guards), and
    /// the answer is the one a regular file gives a request it does not know,
    /// `ENOTTY`: every `isatty` on a file (Python asks at each `open` in text mode)
    /// lands here, so without a log line.
    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::from_i32(libc::ENOTTY));
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.guard_req(req, "statfs", |_| match VeilFs::statfs(self, ino.0) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(self.fail(req, "statfs", e)),
        })
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let (name, value) = (name.to_owned(), value.to_vec());
        self.asking(
            req,
            "setxattr",
            reply,
            move |fs, cx| VeilFs::setxattr(fs, cx, ino.0, &name, &value, flags),
            |fs, cx, r, reply| fs.reply_empty(cx, "setxattr", r, reply),
        )
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.guard_req(req, "getxattr", |cx| {
            match VeilFs::getxattr(self, cx, ino.0, name, size) {
                Ok((n, _)) if size == 0 => reply.size(n as u32),
                Ok((_, data)) => reply.data(&data),
                Err(e) => reply.error(self.fail(req, "getxattr", e)),
            }
        })
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.guard_req(req, "listxattr", |cx| {
            match VeilFs::listxattr(self, cx, ino.0, size) {
                Ok((n, _)) if size == 0 => reply.size(n as u32),
                Ok((_, data)) => reply.data(&data),
                Err(e) => reply.error(self.fail(req, "listxattr", e)),
            }
        })
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(
            req,
            "removexattr",
            reply,
            move |fs, cx| VeilFs::removexattr(fs, cx, ino.0, &name),
            |fs, cx, r, reply| fs.reply_empty(cx, "removexattr", r, reply),
        )
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        self.guard_req(req, "access", |cx| {
            self.reply_empty(
                req,
                "access",
                VeilFs::access(self, cx, ino.0, mask.bits()),
                reply,
            )
        })
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.to_owned();
        self.asking(
            req,
            "create",
            reply,
            move |fs, cx| VeilFs::create(fs, cx, parent.0, &name, mode, umask, flags),
            |fs, cx, r, reply| match r {
                Ok((node, st, fh)) => {
                    let attr = fs.attr(node.ino, &st);
                    // Counted like any open, whichever mode it gets (see `IoMode`).
                    match fs.io_mode_for(node.ino, fh, true, |f| reply.open_backing(f)) {
                        Some(id) => reply.created_passthrough(
                            &fs.ttl_of(node.ino),
                            &attr,
                            Generation(0),
                            FileHandle(fh),
                            PASSTHROUGH_OPEN,
                            &id,
                        ),
                        None => reply.created(
                            &fs.ttl_of(node.ino),
                            &attr,
                            Generation(0),
                            FileHandle(fh),
                            CACHED_OPEN,
                        ),
                    }
                }
                Err(e) => reply.error(fs.fail(cx, "create", e)),
            },
        )
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.guard_req(req, "fallocate", |cx| {
            self.reply_empty(
                req,
                "fallocate",
                VeilFs::fallocate(self, cx, ino.0, fh.0, mode, offset, length),
                reply,
            )
        })
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.guard_req(req, "lseek", |cx| {
            match VeilFs::lseek(self, cx, ino.0, fh.0, offset, whence) {
                Ok(o) => reply.offset(o),
                Err(e) => reply.error(self.fail(req, "lseek", e)),
            }
        })
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        self.guard_req(req, "copy_file_range", |cx| {
            match VeilFs::copy_file_range(
                self,
                cx,
                (ino_in.0, fh_in.0, offset_in),
                (ino_out.0, fh_out.0, offset_out),
                len,
            ) {
                Ok(n) => reply.written(u32::try_from(n).unwrap_or(u32::MAX)),
                Err(e) => reply.error(self.fail(req, "copy_file_range", e)),
            }
        })
    }
}
