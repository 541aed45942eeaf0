//! What every request handler shares: the one place an error becomes an errno
//! ([`err`]), the panic guard, the audit and notice of refusals, attributes and
//! times as fuser wants them, and serving a listing.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, ReplyDirectory, ReplyEmpty,
    ReplyEntry, Request, TimeOrNow,
};

use super::VeilFs;
use super::refusal::Refusal;
use super::request::{Req, Who};

/// The one place an `io::Error` becomes a reply errno: a policy refusal is
/// `EACCES`, anything else the backing errno untouched.
pub(super) fn err(e: io::Error) -> Errno {
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
pub(super) fn guard(op: &'static str, handler: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(handler)) {
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string payload");
        log::error!("{op}: the request handler panicked ({what}); answered EIO");
    }
}

/// Open flags for a handle the daemon serves: pages stay cached across opens (the
/// watcher drops them on outside edits), and `flush` (a no-op here) is not sent.
pub(super) const CACHED_OPEN: FopenFlags =
    FopenFlags::FOPEN_KEEP_CACHE.union(FopenFlags::FOPEN_NOFLUSH);

/// Open flags for a passthrough handle (the kernel adds `FOPEN_PASSTHROUGH`).
pub(super) const PASSTHROUGH_OPEN: FopenFlags = FopenFlags::FOPEN_NOFLUSH;

/// A backing file's `(st_*time, st_*time_nsec)`, saturated at the ends of what
/// `SystemTime` holds (a filesystem may store any 64-bit time).
pub(super) fn time(sec: i64, nsec: i64) -> SystemTime {
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

pub(super) fn kind(fmt: u32) -> FileType {
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

pub(super) fn dt_kind(dt: u8) -> FileType {
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
    pub(super) fn attr(&self, ino: u64, st: &libc::stat) -> FileAttr {
        // Only a watcher compares it with the disk (after lost events).
        if self.watcher.is_some()
            && let Some(n) = self.inodes.get(ino)
        {
            n.attrs_sent.store(
                super::inode::fingerprint(st),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
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

/// The `timespec` a `setattr` asked for (`None`: now).
///
/// The kernel sends `(tv_sec, tv_nsec)`, `tv_nsec` in `0..1e9` added to a `tv_sec`
/// that is negative before 1970. fuser 0.18 decodes a negative one as
/// `UNIX_EPOCH - (|tv_sec| s + tv_nsec ns)` (its `system_time_from_time`); a time
/// before the epoch is undone the same way here, which gives back the kernel's
/// exact pair (`tests/posix.rs` checks 1960 with nanoseconds, so a fuser that
/// decodes otherwise is caught).
pub(super) fn timespec(t: TimeOrNow) -> Option<libc::timespec> {
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
    /// [`guard`] for the request `op` of `req`'s, handed to `handler` as the
    /// operations see it.
    pub(super) fn guard_req(&self, req: &Request, op: &'static str, handler: impl FnOnce(&Req)) {
        guard(op, || handler(&Req::of(Who::from(req), op)))
    }

    /// The errno for a failed request; a policy refusal also goes to the audit log.
    pub(super) fn fail(&self, who: impl Into<Who>, op: &'static str, e: io::Error) -> Errno {
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
    pub(super) fn audit(
        &self,
        who: impl Into<Who>,
        op: &'static str,
        path: Vec<u8>,
        decision: crate::Decision,
        refused: bool,
    ) {
        if self.audit.is_some() {
            let mut e = self.event(who.into(), op, path, decision);
            e.refused = refused;
            self.record(e);
        }
    }

    /// Hands `e` to the audit log, if there is one.
    pub(super) fn record(&self, e: crate::session::audit::Event) {
        if let Some(audit) = &self.audit {
            audit.record(e);
        }
    }

    /// The audit event of `who`'s `op` on `path`, decided `decision`: allowed, and
    /// neither a change nor absent until the caller says otherwise.
    pub(super) fn event(
        &self,
        who: Who,
        op: &'static str,
        path: Vec<u8>,
        decision: crate::Decision,
    ) -> crate::session::audit::Event {
        crate::session::audit::Event {
            time: SystemTime::now(),
            op,
            path,
            decision,
            refused: false,
            pid: who.pid,
            uid: who.uid,
            gid: who.gid,
            comm: crate::session::audit::comm(who.pid),
            result: None,
            ask: None,
            change: false,
            absent: false,
            dir: false,
        }
    }

    /// Whether allowed operations are logged (`--audit-all`).
    pub(super) fn logs_allowed(&self) -> bool {
        self.audit.as_ref().is_some_and(|a| a.all())
    }

    /// Logs that the policy allowed `req` to change `path` (decided `d`), when
    /// allowed operations are logged: once per request and path.
    pub(super) fn allowed_change(&self, req: &Req, path: &[u8], d: &crate::Decision) {
        if self.logs_allowed() && req.first_change(path) {
            let mut e = self.event(req.who, req.op, path.to_vec(), d.clone());
            e.change = true;
            self.record(e);
        }
    }

    /// Logs that the policy allowed `req` to look `path` up (decided `d`) and that
    /// nothing is there, when allowed operations are logged.
    pub(super) fn allowed_absent(&self, req: &Req, path: Vec<u8>, d: crate::Decision) {
        if self.logs_allowed() {
            let mut e = self.event(req.who, req.op, path, d);
            e.absent = true;
            self.record(e);
        }
    }

    /// Replies with a new or found entry. (A lookup is logged by its handler; a
    /// name made, where the policy allowed the change: see [`VeilFs::admit`].)
    pub(super) fn reply_entry(
        &self,
        cx: &Req,
        op: &'static str,
        r: io::Result<(std::sync::Arc<super::Node>, libc::stat)>,
        reply: ReplyEntry,
    ) {
        match r {
            Ok((node, st)) => reply.entry(
                &self.ttl_of(node.ino),
                &self.attr(node.ino, &st),
                Generation(0),
            ),
            Err(e) => reply.error(self.fail(cx, op, e)),
        }
    }

    /// Replies to an operation that returns nothing.
    pub(super) fn reply_empty(
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
    pub(super) fn ttl_of(&self, ino: u64) -> Duration {
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
    pub(super) fn allowed(&self, cx: &Req, op: &'static str, ino: u64) {
        if self.logs_allowed()
            && let Some(node) = self.inodes.get(ino)
        {
            let place = node.place();
            // A path that cannot be spelled (its parent gone) is logged empty.
            let path = self.path_of(&self.snapshot(cx), &node, &place);
            let path = path.map(|p| p.to_vec()).unwrap_or_default();
            let mut e = self.event(cx.who, op, path, place.decision);
            e.dir = node.is_dir();
            self.record(e);
        }
    }

    /// The I/O mode for the new handle `fh` on node `ino`: `Some(backing id)` for
    /// passthrough, `None` for cached I/O through the daemon. The inode's current
    /// mode while other handles are open, else passthrough for a regular file of at
    /// least [`super::PASSTHROUGH_MIN_SIZE`] bytes or opened to be written. A refused registration turns
    /// passthrough off for the rest of the mount.
    pub(super) fn io_mode_for(
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
            // The first handle chooses the mode: passthrough only while no file is
            // open without a handle (those are in cached mode). The backing file
            // is shared by every later handle, readers and writers alike: only a
            // read-write descriptor can serve them all.
            // (A passthrough write still clears set-user-ID and set-group-ID bits
            // as the caller's own write would: the kernel asks for that, with a
            // SETATTR, before it writes the backing file with our credentials.)
            io.passthrough = io.light == 0
                && node.fmt == libc::S_IFREG
                && self.kernel.passthrough.load(Ordering::Relaxed)
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
                        self.kernel.passthrough.store(false, Ordering::Relaxed);
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

/// Serves `listing` from position `pos` (see [`VeilFs::listing_at`]).
pub(super) fn fill_dir(
    ino: INodeNo,
    listing: &super::ops::Listing,
    mut pos: u64,
    mut reply: ReplyDirectory,
) {
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
pub(super) fn fill_dir_plus(
    fs: &VeilFs,
    cx: &Req,
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
        if let Ok(st) = VeilFs::getattr(fs, cx, ino.0, None) {
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
        let full = match VeilFs::lookup(fs, cx, ino.0, name) {
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
                    // Not handed over after all: what the kernel holds is unknown.
                    node.attrs_sent
                        .store(0, std::sync::atomic::Ordering::Relaxed);
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
