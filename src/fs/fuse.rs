//! `impl fuser::Filesystem`: decode the request, call [`super::ops`], reply. Errors
//! become the reply's errno in exactly one place, `err`.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::VeilFs;
use super::inval::Inval;
use super::ops::{Caller, Refusal, SetAttr};

/// The one place an `io::Error` becomes a reply errno: a policy refusal is
/// `EACCES`, anything else the backing errno untouched.
fn err(e: io::Error) -> Errno {
    if e.get_ref()
        .is_some_and(|x| x.is::<Refusal>() || x.is::<super::ask::NeedsApproval>())
    {
        return Errno::from_i32(libc::EACCES);
    }
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Runs the handler of one request. A panic in it (a bug) is caught and logged, and
/// the request is answered `EIO`: the reply, dropped unsent while the handler
/// unwinds, answers `EIO` by itself (fuser's `ReplyRaw` does so on drop), and a reply
/// already sent stays sent. fuser runs handlers on its worker threads without
/// catching panics, so without this one bug would cost a worker for the rest of the
/// mount, and with every worker gone the mount would hang. Nothing is left
/// half-locked: the locks are `parking_lot`'s, released on unwinding and never
/// poisoned.
fn guard(op: &'static str, handler: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(handler)) {
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::error!("{op}: the request handler panicked ({what}); answered EIO");
    }
}

/// Set while a fault is injected (see [`inject_lookup_panic`]).
static FAULT_ARMED: AtomicBool = AtomicBool::new(false);
static PANIC_ON_LOOKUP: parking_lot::Mutex<Option<OsString>> = parking_lot::Mutex::new(None);

/// Fault injection, for tests of [`guard`]: while `name` is set, every lookup of that
/// name (in any directory, in every mount of this process) panics inside its
/// handler, holding the parent directory's node lock.
#[doc(hidden)]
pub fn inject_lookup_panic(name: Option<&OsStr>) {
    *PANIC_ON_LOOKUP.lock() = name.map(OsStr::to_os_string);
    FAULT_ARMED.store(name.is_some(), Ordering::SeqCst);
}

impl VeilFs {
    /// Panics here if a test injected a fault for a lookup of `name`.
    fn injected_fault(&self, parent: u64, name: &OsStr) {
        if FAULT_ARMED.load(Ordering::Relaxed) && PANIC_ON_LOOKUP.lock().as_deref() == Some(name) {
            let dir = self.inodes.get(parent);
            let _held = dir.as_ref().map(|d| d.place.lock());
            panic!("injected fault: lookup of {name:?}");
        }
    }
}

/// The filesystem as fuser serves it: shared, so that a request parked on a
/// question (see [`super::ask`]) can be answered from another thread.
pub struct Served(pub Arc<VeilFs>);

impl Served {
    pub fn new(fs: VeilFs) -> Served {
        Served(Arc::new(fs))
    }

    /// Runs the body of a request that may wait for a person: on this thread,
    /// and, when it hands back its reply with a question, again once the question
    /// is answered (see [`park`]).
    fn asking<R: Refuse>(
        &self,
        req: &Request,
        op: &'static str,
        reply: R,
        body: impl Fn(&VeilFs, Who, R) -> Parked<R> + Send + Sync + 'static,
    ) {
        let who = Who::from(req);
        guard(op, || {
            if let Err((e, reply)) = body(&self.0, who, reply) {
                park(
                    self.0.clone(),
                    who,
                    op,
                    e,
                    reply,
                    Arc::new(body),
                    Vec::new(),
                );
            }
        })
    }
}

impl std::ops::Deref for Served {
    type Target = VeilFs;
    fn deref(&self) -> &VeilFs {
        &self.0
    }
}

/// What the body of a request that may wait returns: answered, or its reply handed
/// back with the question it waits on.
type Parked<R> = Result<(), (io::Error, R)>;

/// The body of a parked request, run again after an approval.
type Body<R> = dyn Fn(&VeilFs, Who, R) -> Parked<R> + Send + Sync;

/// A reply a parked request can be refused with.
pub(crate) trait Refuse: Send + 'static {
    fn refuse(self, e: Errno);
}

macro_rules! refuse_with_error {
    ($($t:ty),*) => {
        $(impl Refuse for $t {
            fn refuse(self, e: Errno) {
                self.error(e)
            }
        })*
    };
}
refuse_with_error!(
    ReplyOpen,
    ReplyEntry,
    ReplyEmpty,
    ReplyAttr,
    ReplyDirectory,
    fuser::ReplyDirectoryPlus,
    ReplyCreate
);

/// Hands the reply back with the error when the error is a question; otherwise
/// answers with `done`.
fn settle<T, R>(r: io::Result<T>, reply: R, done: impl FnOnce(io::Result<T>, R)) -> Parked<R> {
    match r {
        Err(e) if super::ask::question_of(&e).is_some() => Err((e, reply)),
        r => {
            done(r, reply);
            Ok(())
        }
    }
}

/// The most questions one request may raise one after another (a rename asks
/// about its source and its destination, each of them as it is now and as it
/// would be).
const MAX_QUESTIONS_PER_REQUEST: usize = 8;

/// Parks a request on the question `e` carries: the broker calls back once it is
/// answered, and the body runs again with every grant this request was given (a
/// rename may ask twice), or the reply is refused.
fn park<R: Refuse>(
    fs: Arc<VeilFs>,
    who: Who,
    op: &'static str,
    e: io::Error,
    reply: R,
    body: Arc<Body<R>>,
    grants: Vec<super::ask::Grant>,
) {
    let seat = fs.seat.clone();
    let (Some(seat), Some(q)) = (seat, super::ask::question_of(&e)) else {
        return reply.refuse(fs.fail(who, op, e));
    };
    if grants.len() >= MAX_QUESTIONS_PER_REQUEST {
        return reply.refuse(fs.fail(who, op, e));
    }
    let asker = super::ask::Asker::of(who.pid, who.uid, who.gid);
    let waiter = {
        let fs = fs.clone();
        Box::new(move |verdict| match verdict {
            super::ask::Verdict::Granted(g) => {
                let mut grants = grants;
                grants.push(g);
                guard(op, || {
                    if let Err((e, reply)) =
                        super::ask::with_grants(&grants, || body(&fs, who, reply))
                    {
                        park(fs.clone(), who, op, e, reply, body.clone(), grants.clone());
                    }
                })
            }
            super::ask::Verdict::Refused(_) => reply.refuse(Errno::from_i32(libc::EACCES)),
        })
    };
    seat.broker.ask(&seat, op, q, &asker, waiter);
}

/// Open flags for a handle the daemon serves: pages stay cached across opens (the
/// watcher drops them on outside edits), and `flush` (a no-op here) is not sent.
const CACHED_OPEN: FopenFlags = FopenFlags::FOPEN_KEEP_CACHE.union(FopenFlags::FOPEN_NOFLUSH);

/// Open flags for a passthrough handle (the kernel adds `FOPEN_PASSTHROUGH`).
const PASSTHROUGH_OPEN: FopenFlags = FopenFlags::FOPEN_NOFLUSH;

/// A backing file's `(st_*time, st_*time_nsec)`, saturated at the ends of what
/// `SystemTime` holds (a filesystem may store any 64-bit time).
fn time(sec: i64, nsec: i64) -> SystemTime {
    let nsec = Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64);
    let secs = Duration::from_secs(sec.unsigned_abs());
    let t = if sec >= 0 {
        UNIX_EPOCH.checked_add(secs)
    } else {
        UNIX_EPOCH.checked_sub(secs)
    };
    t.and_then(|t| t.checked_add(nsec)).unwrap_or(if sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(i64::MAX as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(i64::MAX as u64)
    })
}

fn kind(fmt: u32) -> FileType {
    match fmt {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn dt_kind(dt: u8) -> FileType {
    match dt {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_BLK => FileType::BlockDevice,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_SOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

impl VeilFs {
    /// The attributes of node `ino` (its id is also the inode number `stat` shows).
    fn attr(&self, ino: u64, st: &libc::stat) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: time(st.st_atime, st.st_atime_nsec),
            mtime: time(st.st_mtime, st.st_mtime_nsec),
            ctime: time(st.st_ctime, st.st_ctime_nsec),
            crtime: UNIX_EPOCH,
            kind: kind(st.st_mode & libc::S_IFMT),
            perm: (st.st_mode & 0o7777) as u16,
            // Never counting hidden subdirectories (see `ops::shown_nlink`).
            nlink: super::ops::shown_nlink(st.st_mode, st.st_nlink) as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u32,
            blksize: st.st_blksize as u32,
            flags: 0,
        }
    }
}

/// Who made a request (kept past the request, for one answered after a question).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl From<&Request> for Who {
    fn from(req: &Request) -> Who {
        Who {
            pid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

fn caller(who: impl Into<Who>) -> Caller {
    let who = who.into();
    Caller {
        uid: who.uid,
        gid: who.gid,
    }
}

/// The `timespec` a `setattr` asked for (`None`: now).
///
/// The kernel sends `(tv_sec, tv_nsec)`, `tv_nsec` in `0..1e9` added to a `tv_sec`
/// that is negative before 1970. fuser 0.18 decodes a negative one as
/// `UNIX_EPOCH - (|tv_sec| s + tv_nsec ns)` (its `system_time_from_time`); a time
/// before the epoch is undone the same way here, which gives back the kernel's
/// exact pair (`tests/posix.rs` checks 1960 with nanoseconds, so a fuser that
/// decodes otherwise is caught).
fn timespec(t: TimeOrNow) -> Option<libc::timespec> {
    let TimeOrNow::SpecificTime(t) = t else {
        return None;
    };
    let (sec, d) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (i64::try_from(d.as_secs()).unwrap_or(i64::MAX), d),
        Err(before) => {
            let d = before.duration();
            (0i64.saturating_sub_unsigned(d.as_secs()), d)
        }
    };
    Some(libc::timespec {
        tv_sec: sec,
        tv_nsec: i64::from(d.subsec_nanos()),
    })
}

impl VeilFs {
    /// The errno for a failed request; a policy refusal also goes to the audit log.
    fn fail(&self, who: impl Into<Who>, op: &'static str, e: io::Error) -> Errno {
        let who = who.into();
        if let Some(q) = super::ask::question_of(&e) {
            // A question nobody parked (an operation that does not wait): refused.
            self.audit(who, op, q.path.clone(), q.decision.clone(), true);
        }
        if let Some(r) = e.get_ref().and_then(|x| x.downcast_ref::<Refusal>()) {
            self.audit(who, op, r.path.clone(), r.decision.clone(), true);
            if super::notice::makes_a_name(op) {
                self.notices.refused(op, &r.path, &r.decision);
            }
        }
        err(e)
    }

    /// Hands one operation to the audit log, if there is one.
    fn audit(
        &self,
        who: impl Into<Who>,
        op: &'static str,
        path: Vec<u8>,
        decision: crate::Decision,
        refused: bool,
    ) {
        if let Some(audit) = &self.audit {
            let who = who.into();
            audit.record(crate::audit::Event {
                time: SystemTime::now(),
                op,
                path,
                decision,
                refused,
                pid: who.pid,
                uid: who.uid,
                gid: who.gid,
                comm: crate::audit::comm(who.pid),
                result: None,
                ask: None,
            });
        }
    }

    /// Replies with a new or found entry, logging it when asked to.
    fn reply_entry(
        &self,
        req: impl Into<Who>,
        op: &'static str,
        r: io::Result<(std::sync::Arc<super::inode::Node>, libc::stat)>,
        reply: ReplyEntry,
    ) {
        let req = req.into();
        match r {
            Ok((node, st)) => {
                self.allowed(req, op, node.ino);
                reply.entry(
                    &self.ttl_of(node.ino),
                    &self.attr(node.ino, &st),
                    Generation(0),
                )
            }
            Err(e) => reply.error(self.fail(req, op, e)),
        }
    }

    /// Replies to an operation that returns nothing.
    fn reply_empty(
        &self,
        req: impl Into<Who>,
        op: &'static str,
        r: io::Result<()>,
        reply: ReplyEmpty,
    ) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.fail(req, op, e)),
        }
    }

    /// How long the kernel may cache node `ino`'s entry and attributes: long while
    /// its directory is watched (every outside change invalidates them at once),
    /// else the mount's `ttl`.
    fn ttl_of(&self, ino: u64) -> Duration {
        let Some(w) = &self.watcher else {
            return self.ttl;
        };
        let parent = match self.inodes.get(ino) {
            Some(n) if ino != super::inode::ROOT => n.place.lock().parent,
            Some(_) => super::inode::ROOT,
            None => return self.ttl,
        };
        if w.is_watched(parent) {
            self.ttl.max(super::WATCHED_TTL)
        } else {
            self.ttl
        }
    }

    /// Logs an allowed operation on node `ino` when the audit log wants them all.
    fn allowed(&self, req: impl Into<Who>, op: &'static str, ino: u64) {
        if self.audit.as_ref().is_some_and(|a| a.all())
            && let Some(node) = self.inodes.get(ino)
        {
            let place = node.place();
            self.audit(req.into(), op, place.path.to_vec(), place.decision, false);
        }
    }

    /// The I/O mode for the new handle `fh` on node `ino`: `Some(backing id)` for
    /// passthrough, `None` for cached I/O through the daemon. The inode's current
    /// mode while other handles are open, else passthrough for a regular file of at
    /// least [`super::PASSTHROUGH_MIN_SIZE`] bytes or opened to be written. A refused registration turns
    /// passthrough off for the rest of the mount.
    fn io_mode_for(
        &self,
        ino: u64,
        fh: u64,
        writer: bool,
        register: impl FnOnce(&std::fs::File) -> io::Result<fuser::BackingId>,
    ) -> Option<std::sync::Arc<fuser::BackingId>> {
        let node = self.inodes.get(ino)?;
        let handle = self.file(fh).ok()?;
        let mut io = node.io.lock();
        if io.open == 0 {
            // The backing file is shared by every later handle, readers and
            // writers alike: only a read-write descriptor can serve them all.
            io.passthrough = node.fmt == libc::S_IFREG
                && self.passthrough.load(Ordering::Relaxed)
                && crate::sys::is_read_write(std::os::fd::AsFd::as_fd(&handle.file))
                && (writer
                    || handle
                        .file
                        .metadata()
                        .is_ok_and(|m| m.len() >= super::PASSTHROUGH_MIN_SIZE));
            io.backing = std::sync::Weak::new();
        }
        let id = if !io.passthrough {
            None
        } else if let Some(id) = io.backing.upgrade() {
            Some(id)
        } else {
            match register(&handle.file) {
                Ok(id) => {
                    let id = std::sync::Arc::new(id);
                    io.backing = std::sync::Arc::downgrade(&id);
                    Some(id)
                }
                Err(e) if io.open == 0 => {
                    if e.raw_os_error() == Some(libc::EPERM) {
                        self.passthrough.store(false, Ordering::Relaxed);
                    }
                    io.passthrough = false;
                    None
                }
                // Other handles are open in passthrough mode: this one cannot be
                // cached; the kernel will fail the open.
                Err(_) => None,
            }
        };
        io.open += 1;
        handle.counted.store(true, Ordering::Relaxed);
        *handle.backing.lock() = id.clone();
        id
    }
}

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
        let no_opendir = self.no_opendir.load(Ordering::Relaxed)
            && config.add_capabilities(F::FUSE_NO_OPENDIR_SUPPORT).is_ok();
        self.no_opendir.store(no_opendir, Ordering::Relaxed);
        if self.passthrough.load(Ordering::Relaxed) {
            let ok = config.add_capabilities(F::FUSE_PASSTHROUGH).is_ok()
                && config.set_max_stack_depth(2).is_ok();
            self.passthrough.store(ok, Ordering::Relaxed);
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        guard("lookup", || {
            self.injected_fault(parent.0, name);
            let r = VeilFs::lookup(self, parent.0, name);
            if let Err(e) = &r {
                self.notice_refused_lookup(req.pid(), name, e);
            }
            self.reply_entry(req, "lookup", r, reply)
        })
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        guard("forget", || {
            VeilFs::forget(self, ino.0, nlookup);
        })
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        guard("getattr", || {
            match VeilFs::getattr(self, ino.0, fh.map(|f| f.0)) {
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
        self.asking(req, "setattr", reply, move |fs, who, reply| {
            settle(
                VeilFs::setattr(fs, ino.0, &a, fh.map(|f| f.0)),
                reply,
                |r, reply| match r {
                    Ok(st) => reply.attr(&fs.ttl_of(ino.0), &fs.attr(ino.0, &st)),
                    Err(e) => reply.error(fs.fail(who, "setattr", e)),
                },
            )
        })
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        guard("readlink", || match VeilFs::readlink(self, ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(self.fail(req, "readlink", e)),
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
        self.asking(req, "mknod", reply, move |fs, who, reply| {
            let r = VeilFs::mknod(fs, parent.0, &name, mode, umask, rdev, caller(who));
            settle(r, reply, |r, reply| fs.reply_entry(who, "mknod", r, reply))
        })
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
        self.asking(req, "mkdir", reply, move |fs, who, reply| {
            let r = VeilFs::mkdir(fs, parent.0, &name, mode, umask, caller(who));
            settle(r, reply, |r, reply| fs.reply_entry(who, "mkdir", r, reply))
        })
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(req, "unlink", reply, move |fs, who, reply| {
            let r = VeilFs::unlink(fs, parent.0, &name);
            settle(r, reply, |r, reply| fs.reply_empty(who, "unlink", r, reply))
        })
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(req, "rmdir", reply, move |fs, who, reply| {
            let r = VeilFs::rmdir(fs, parent.0, &name);
            settle(r, reply, |r, reply| fs.reply_empty(who, "rmdir", r, reply))
        })
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
        self.asking(req, "symlink", reply, move |fs, who, reply| {
            let r = VeilFs::symlink(fs, parent.0, &link_name, &target, caller(who));
            settle(r, reply, |r, reply| {
                fs.reply_entry(who, "symlink", r, reply)
            })
        })
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
        self.asking(req, "rename", reply, move |fs, who, reply| {
            let flags = flags.bits();
            let r = VeilFs::rename(fs, parent.0, &name, newparent.0, &newname, flags);
            settle(r, reply, |r, reply| match r {
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
                Err(e) => reply.error(fs.fail(who, "rename", e)),
            })
        })
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
        self.asking(req, "link", reply, move |fs, who, reply| {
            let r = VeilFs::link(fs, ino.0, newparent.0, &newname);
            settle(r, reply, |r, reply| fs.reply_entry(who, "link", r, reply))
        })
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.asking(req, "open", reply, move |fs, who, reply| {
            if fs.light_open.load(Ordering::Relaxed) && !super::ops::opens_for_writing(flags.0) {
                // Checked, and no handle: reads come with handle 0 and are checked
                // again when they miss the cache (see `VeilFs::set_light_open`).
                return settle(
                    VeilFs::open_for_reading(fs, ino.0),
                    reply,
                    |r, reply| match r {
                        Ok(()) => {
                            fs.allowed(who, "open", ino.0);
                            reply.opened(FileHandle(super::ops::NO_HANDLE), CACHED_OPEN)
                        }
                        Err(e) => reply.error(fs.fail(who, "open", e)),
                    },
                );
            }
            settle(
                VeilFs::open(fs, ino.0, flags.0),
                reply,
                |r, reply| match r {
                    Ok(fh) => match fs.io_mode_for(
                        ino.0,
                        fh,
                        flags.0 & libc::O_ACCMODE != libc::O_RDONLY,
                        |f| reply.open_backing(f),
                    ) {
                        Some(id) => reply.opened_passthrough(FileHandle(fh), PASSTHROUGH_OPEN, &id),
                        None => reply.opened(FileHandle(fh), CACHED_OPEN),
                    },
                    Err(e) => reply.error(fs.fail(who, "open", e)),
                },
            )
        })
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
        guard("read", || {
            match VeilFs::read(self, ino.0, fh.0, offset, size) {
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
        guard("write", || {
            match VeilFs::write(self, ino.0, fh.0, offset, data) {
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
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        guard("release", || {
            VeilFs::release(self, fh.0);
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
        guard("fsync", || {
            self.reply_empty(
                req,
                "fsync",
                VeilFs::fsync(self, ino.0, fh.0, datasync),
                reply,
            )
        })
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.asking(req, "opendir", reply, move |fs, who, reply| {
            if fs.no_opendir.load(Ordering::Relaxed) {
                // The kernel then stops sending OPENDIR and RELEASEDIR (two round trips
                // per directory walked) and caches listings itself; the policy is
                // checked on every lookup and readdir instead.
                reply.error(Errno::from_i32(libc::ENOSYS));
                return Ok(());
            }
            settle(VeilFs::opendir(fs, ino.0), reply, |r, reply| match r {
                // The kernel may keep the listing; the watcher invalidates it when the
                // directory changes outside the mount.
                Ok(()) => reply.opened(
                    FileHandle(0),
                    FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
                ),
                Err(e) => reply.error(fs.fail(who, "opendir", e)),
            })
        })
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.asking(req, "readdir", reply, move |fs, who, reply| {
            match fs.listing_at(ino.0, offset) {
                Ok((listing, pos)) => {
                    fill_dir(ino, &listing, pos, reply);
                    fs.after_listing(ino.0);
                    Ok(())
                }
                Err(e) if super::ask::question_of(&e).is_some() => Err((e, reply)),
                Err(e) => {
                    reply.error(fs.fail(who, "readdir", e));
                    Ok(())
                }
            }
        })
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        self.asking(req, "readdirplus", reply, move |fs, who, reply| {
            match fs.listing_at(ino.0, offset) {
                Ok((listing, pos)) => {
                    fill_dir_plus(fs, ino, &listing, pos, reply);
                    fs.after_listing(ino.0);
                    Ok(())
                }
                Err(e) if super::ask::question_of(&e).is_some() => Err((e, reply)),
                Err(e) => {
                    reply.error(fs.fail(who, "readdirplus", e));
                    Ok(())
                }
            }
        })
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
        guard("fsyncdir", || {
            self.reply_empty(
                req,
                "fsyncdir",
                VeilFs::fsyncdir(self, ino.0, datasync),
                reply,
            )
        })
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        guard("statfs", || match VeilFs::statfs(self, ino.0) {
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
        self.asking(req, "setxattr", reply, move |fs, who, reply| {
            let r = VeilFs::setxattr(fs, ino.0, &name, &value, flags);
            settle(r, reply, |r, reply| {
                fs.reply_empty(who, "setxattr", r, reply)
            })
        })
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        guard("getxattr", || {
            match VeilFs::getxattr(self, ino.0, name, size) {
                Ok((n, _)) if size == 0 => reply.size(n as u32),
                Ok((_, data)) => reply.data(&data),
                Err(e) => reply.error(self.fail(req, "getxattr", e)),
            }
        })
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        guard("listxattr", || match VeilFs::listxattr(self, ino.0, size) {
            Ok((n, _)) if size == 0 => reply.size(n as u32),
            Ok((_, data)) => reply.data(&data),
            Err(e) => reply.error(self.fail(req, "listxattr", e)),
        })
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.asking(req, "removexattr", reply, move |fs, who, reply| {
            let r = VeilFs::removexattr(fs, ino.0, &name);
            settle(r, reply, |r, reply| {
                fs.reply_empty(who, "removexattr", r, reply)
            })
        })
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        guard("access", || {
            self.reply_empty(
                req,
                "access",
                VeilFs::access(self, ino.0, mask.bits()),
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
        self.asking(req, "create", reply, move |fs, who, reply| {
            let r = VeilFs::create(fs, parent.0, &name, mode, umask, flags, caller(who));
            settle(r, reply, |r, reply| match r {
                Ok((node, st, fh)) => {
                    let attr = fs.attr(node.ino, &st);
                    // While opens for reading go without a handle, a created file is
                    // not served by passthrough: the kernel fails (EIO) an open of an
                    // inode in passthrough mode that is not itself in passthrough mode.
                    let io = if fs.light_open.load(Ordering::Relaxed) {
                        None
                    } else {
                        fs.io_mode_for(node.ino, fh, true, |f| reply.open_backing(f))
                    };
                    match io {
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
                Err(e) => reply.error(fs.fail(who, "create", e)),
            })
        })
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
        guard("fallocate", || {
            self.reply_empty(
                req,
                "fallocate",
                VeilFs::fallocate(self, ino.0, fh.0, mode, offset, length),
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
        guard("lseek", || {
            match VeilFs::lseek(self, ino.0, fh.0, offset, whence) {
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
        guard("copy_file_range", || {
            match VeilFs::copy_file_range(
                self,
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

/// Serves `listing` from position `pos` (see [`VeilFs::listing_at`]).
fn fill_dir(ino: INodeNo, listing: &super::ops::Listing, mut pos: u64, mut reply: ReplyDirectory) {
    let cookie = |p: u64| (u64::from(listing.generation) << 32) | p;
    if pos == 0 {
        if reply.add(ino, cookie(1), FileType::Directory, ".") {
            return reply.ok();
        }
        pos = 1;
    }
    if pos == 1 {
        if reply.add(
            INodeNo(super::inode::ROOT),
            cookie(2),
            FileType::Directory,
            "..",
        ) {
            return reply.ok();
        }
        pos = 2;
    }
    for (i, e) in listing.entries.iter().enumerate().skip((pos - 2) as usize) {
        // Refused since the listing was taken (see `listing_at`).
        if e.name.is_empty() {
            continue;
        }
        if reply.add(
            INodeNo(e.ino),
            cookie(i as u64 + 3),
            dt_kind(e.kind),
            OsStr::from_bytes(&e.name),
        ) {
            break;
        }
    }
    reply.ok();
}

/// Serves `listing` from position `pos` with each entry's attributes.
fn fill_dir_plus(
    fs: &VeilFs,
    ino: INodeNo,
    listing: &super::ops::Listing,
    mut pos: u64,
    mut reply: fuser::ReplyDirectoryPlus,
) {
    let cookie = |p: u64| (u64::from(listing.generation) << 32) | p;
    // Each entry given with its attributes counts as a lookup, so it is looked
    // up (policy included) and forgotten again if the reply buffer had no room
    // for it. "." and ".." are not counted (node id 0).
    if pos < 2 {
        if let Ok(st) = VeilFs::getattr(fs, ino.0, None) {
            let attr = FileAttr {
                ino,
                ..fs.attr(ino.0, &st)
            };
            if pos == 0
                && reply.add(
                    INodeNo(0),
                    cookie(1),
                    ".",
                    &fs.ttl_of(ino.0),
                    &attr,
                    Generation(0),
                )
            {
                return reply.ok();
            }
            if reply.add(
                INodeNo(0),
                cookie(2),
                "..",
                &fs.ttl_of(ino.0),
                &attr,
                Generation(0),
            ) {
                return reply.ok();
            }
        }
        pos = 2;
    }
    for (i, e) in listing.entries.iter().enumerate().skip((pos - 2) as usize) {
        if e.name.is_empty() {
            continue;
        }
        let name = OsStr::from_bytes(&e.name);
        let offset = cookie(i as u64 + 3);
        let full = match VeilFs::lookup(fs, ino.0, name) {
            Ok((node, st)) => {
                let full = reply.add(
                    INodeNo(node.ino),
                    offset,
                    name,
                    &fs.ttl_of(node.ino),
                    &fs.attr(node.ino, &st),
                    Generation(0),
                );
                if full {
                    VeilFs::forget(fs, node.ino, 1);
                }
                full
            }
            // Gone, or refused by a policy loaded since the listing was taken:
            // list the name as the listing has it (one policy per listing),
            // under a node id the daemon never issues and with no time to
            // live, so the kernel caches nothing for it and the next use of
            // the name is looked up (and refused) anew. (Node id 0 would say
            // "no entry" more plainly, but fuser takes the node id from the
            // attributes, and a listed inode number of 0 makes the C library
            // skip the entry.)
            Err(_) => {
                let bare = FileAttr {
                    kind: dt_kind(e.kind),
                    ..fs.attr(super::inode::PHANTOM, &crate::sys::zeroed_stat())
                };
                let none = Duration::ZERO;
                reply.add(INodeNo(0), offset, name, &none, &bare, Generation(0))
            }
        };
        if full {
            break;
        }
    }
    reply.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_times_convert_without_panicking_at_any_value() {
        assert_eq!(time(0, 0), UNIX_EPOCH);
        assert_eq!(
            time(-1, 500_000_000),
            UNIX_EPOCH - Duration::from_millis(500)
        );
        assert_eq!(time(86_400, 1), UNIX_EPOCH + Duration::new(86_400, 1));
        for sec in [i64::MIN, i64::MIN + 1, i64::MAX] {
            for nsec in [0, 999_999_999, -1, i64::MAX] {
                let _ = time(sec, nsec);
            }
        }
    }

    #[test]
    fn times_before_1970_are_set_as_they_were_asked() {
        let at = |t: SystemTime| timespec(TimeOrNow::SpecificTime(t)).unwrap();
        let ts = at(UNIX_EPOCH - Duration::from_secs(100));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-100, 0));
        // The kernel's (-2, 500_000_000) is 1.5 s before the epoch; fuser 0.18 hands
        // it over as the epoch less 2.5 s (see `timespec`).
        let ts = at(UNIX_EPOCH - Duration::from_millis(2500));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-2, 500_000_000));
        let ts = at(UNIX_EPOCH + Duration::new(7, 3));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (7, 3));
    }
}
