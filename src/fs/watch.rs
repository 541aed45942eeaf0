//! Keeping long kernel caches coherent with edits made outside the mount.
//!
//! Every directory the kernel holds (every directory node) is watched with inotify.
//! When a name in it is created, removed or renamed, its kernel dentry and the
//! directory's attributes are invalidated; when a file in it is written or its
//! attributes change, that file's attributes and cached pages are invalidated. The
//! kernel can only have cached what lies in a directory it holds, so these watches
//! cover everything it caches.
//!
//! No outside edit is lost:
//! * A change made through the mount is not echoed back (the kernel already knows
//!   it), but an event counts as its echo only while the name still shows the state
//!   that change left ([`Own`]): same inode, size, mode, owner, link count, mtime and
//!   ctime (for a new or removed name: the same inode there, or still none). Any
//!   later change moves the ctime (Linux ≥ 6.13 gives a ctime that has been read a
//!   new, fine-grained value at the next change), so an outside edit that follows
//!   one made through the mount, however closely, is never taken for its echo. The
//!   time an event comes at plays no part; an event on a name being changed through
//!   the mount at that moment is judged once that change is noted.
//!   What this cannot tell apart: an outside edit made in the microseconds between a
//!   change through the mount and the daemon's `stat` right after it, to the same
//!   name; and, on kernels with coarse timestamps, one of unchanged size within the
//!   same clock tick.
//! * When inotify's queue overflows (`IN_Q_OVERFLOW`), events were lost: every node
//!   the kernel holds is compared with the disk, and what changed since its
//!   attributes were handed to the kernel (its attributes, pages, and the names in a
//!   changed directory that lead elsewhere now) is invalidated (see
//!   [`super::inval::invalidate_changed`]); the rest stays cached. The watches
//!   themselves live on (they belong to the directories' inodes), so watching goes on
//!   with the next event.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use inotify::WatchDescriptor;

use super::{Inodes, Node};
use crate::sys;

const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_EXCL_UNLINK;

// Not IN_CLOSE_WRITE: passthrough handles are opened read-write even for readers,
// so every close would echo one; the writes themselves raise IN_MODIFY.

/// How many notes of changes made through the mount are kept at least before the
/// oldest are forgotten (see [`Watcher::own_change`]).
const OWN_NOTES: usize = 4096;

/// A note older than this may be forgotten once there are [`OWN_NOTES`]. Forgetting
/// one only costs an extra invalidation if its echo is late.
const OWN_NOTE_AGE: Duration = Duration::from_secs(10);

/// How long the watcher may wait for the kernel to take an invalidation before
/// every place is checked at every request (see `Watcher::in_kernel_since`).
const STUCK_AFTER: Duration = Duration::from_millis(50);

/// How long an event on a name that is being changed through the mount waits for
/// that change to be noted before it is taken, in doubt, for an outside edit.
const HOLD_BACK: Duration = Duration::from_millis(20);

/// A name's state as `lstat` shows it, reduced to what any change to it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(st: &libc::stat) -> Stamp {
        Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            nlink: st.st_nlink,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// The state of `name` in `dir`: `Ok(None)` when there is no such name.
    fn at(dir: BorrowedFd, name: &[u8]) -> io::Result<Option<Stamp>> {
        let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match sys::statat(dir, &c) {
            Ok(st) => Ok(Some(Stamp::of(&st))),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What changes made through the mount did to one name.
#[derive(Debug, Default)]
struct Note {
    /// What the last one that succeeded left: `None` if none was noted yet,
    /// `Some(None)` if it removed the name (or renamed it away).
    left: Option<Option<Stamp>>,
    /// Changes under way (begun, not yet noted or given up).
    busy: u32,
    /// When it was last touched: only for forgetting old notes, never to judge an
    /// event.
    at: Option<Instant>,
}

/// A change to one name made through the mount, under way: hold it across the
/// change and call [`Own::done`] once the change succeeded. Then the state the
/// change left at the name is noted, and the watcher takes an event on that name
/// for the change's echo only while the name still shows that state (see
/// `Watcher::is_echo`); while the change is under way, the watcher holds back
/// its judgement of events on the name. Dropped without `done` (the change failed,
/// or nobody said), nothing is noted and the change's events invalidate like any
/// outside edit: safe, only slower.
#[derive(Debug)]
pub struct Own<'a> {
    /// `None` when nothing is watched, or once noted.
    watch: Option<(&'a Watcher, Arc<Node>)>,
    name: Vec<u8>,
}

impl Own<'_> {
    /// A change that nobody watches for.
    pub fn none() -> Own<'static> {
        Own {
            watch: None,
            name: Vec::new(),
        }
    }

    /// The change succeeded: note what it left.
    pub fn done(mut self) {
        let Some((w, dir)) = self.watch.take() else {
            return;
        };
        // Taken before the lock: two changes to one name noted out of order leave
        // the older state, and so cost an invalidation, never an echo dropped wrongly.
        let state = dir.dir_fd().and_then(|fd| Stamp::at(fd, &self.name));
        let mut own = w.own.lock();
        let note = own
            .entry((dir.ino, std::mem::take(&mut self.name)))
            .or_default();
        note.busy = note.busy.saturating_sub(1);
        note.left = state.ok();
        note.at = Some(Instant::now());
    }

    /// `done` if `r` is `Ok`; returns `r`.
    pub fn done_if<T>(self, r: io::Result<T>) -> io::Result<T> {
        if r.is_ok() {
            self.done();
        }
        r
    }
}

impl Drop for Own<'_> {
    fn drop(&mut self) {
        if let Some((w, dir)) = self.watch.take()
            && let Some(note) = w
                .own
                .lock()
                .get_mut(&(dir.ino, std::mem::take(&mut self.name)))
        {
            note.busy = note.busy.saturating_sub(1);
        }
    }
}

/// The watches: watch descriptor → directory node, and back.
#[derive(Debug)]
struct Table {
    watches: inotify::Watches,
    nodes: HashMap<WatchDescriptor, u64>,
    wds: HashMap<u64, WatchDescriptor>,
}

#[derive(Debug)]
pub struct Watcher {
    /// Read by the event loop only ([`Watcher::run`]).
    events: Mutex<inotify::Inotify>,
    wds: Mutex<Table>,
    /// (directory node, name) → what changes made there through the mount did
    /// (see [`Own`]).
    own: Mutex<HashMap<(u64, Vec<u8>), Note>>,
    /// The number of notes at which old ones are next forgotten: at least
    /// [`OWN_NOTES`], and twice what the last pruning kept, so that a burst of
    /// changes (an untar: thousands within [`OWN_NOTE_AGE`]) prunes now and then,
    /// not at every change (read and written under `own`'s lock).
    own_prune_at: std::sync::atomic::AtomicUsize,
    /// A queue overflow to be fed to the event loop as if inotify had reported one
    /// (see [`Watcher::inject_overflow`]).
    injected: AtomicBool,
    /// The filesystem's epoch (see [`super::inode`]): bumped when a directory moves
    /// or goes outside the mount, so every place is decided, and each directory's
    /// name checked, again.
    epoch: Arc<AtomicU64>,
    /// A directory could not be watched (the watch limit,
    /// `fs.inotify.max_user_watches`, was reached): from then on an outside move of
    /// a directory may go unseen, so every place is checked at every request (see
    /// `VeilFs::place`).
    missed: AtomicBool,
    /// While the watcher waits for the kernel to take an invalidation: when it
    /// began (milliseconds since `started`, plus one; 0: not waiting). The kernel
    /// takes a directory's lock to invalidate an entry, and a request waiting for a
    /// person's answer (a rename into an `ask` directory) can hold it for the whole
    /// question; meanwhile no outside change is read, so past `STUCK_AFTER` every
    /// place is checked at every request, as when a watch is missed.
    in_kernel_since: AtomicU64,
    started: Instant,
    /// Act as if the watch limit were reached (see [`Watcher::inject_full`]).
    full: AtomicBool,
    /// Queue overflows handled so far.
    overflows: AtomicU64,
    /// Nodes invalidated by the overflows handled so far.
    overflow_invalidated: AtomicU64,
    /// Told when a name the policy reads rules from changes outside the mount
    /// (see [`Watcher::on_sources`]).
    sources: Mutex<Option<Sources>>,
}

/// Says whether a name is one the policy reads rules from.
type NameTest = dyn Fn(&[u8]) -> bool + Send + Sync;

/// Which names are sources of the policy (an imported ignore file), and what to do
/// when one changes.
struct Sources {
    is_source: Box<NameTest>,
    changed: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sources")
    }
}

impl Watcher {
    pub fn new(epoch: Arc<AtomicU64>) -> io::Result<Watcher> {
        let events = sys::inotify_init()?;
        let watches = events.watches();
        Ok(Watcher {
            events: Mutex::new(events),
            wds: Mutex::new(Table {
                watches,
                nodes: HashMap::new(),
                wds: HashMap::new(),
            }),
            own: Mutex::new(HashMap::new()),
            own_prune_at: std::sync::atomic::AtomicUsize::new(OWN_NOTES),
            injected: AtomicBool::new(false),
            epoch,
            missed: AtomicBool::new(false),
            in_kernel_since: AtomicU64::new(0),
            started: Instant::now(),
            full: AtomicBool::new(false),
            overflows: AtomicU64::new(0),
            overflow_invalidated: AtomicU64::new(0),
            sources: Mutex::new(None),
        })
    }

    /// Calls `changed` after a batch of outside events that touched a name for
    /// which `is_source` holds (an ignore file the policy imports: the policy is
    /// then reloaded, as for an edit of the policy file). Edits of the files read
    /// are also watched where they are by the reloader
    /// ([`super::reload::Reloader::watch_sources`]); a file made outside in a
    /// directory the kernel does not hold is read at the next reload.
    pub fn on_sources(
        &self,
        is_source: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
        changed: impl Fn() + Send + Sync + 'static,
    ) {
        *self.sources.lock() = Some(Sources {
            is_source: Box::new(is_source),
            changed: Box::new(changed),
        });
    }

    /// Watches the directory node `ino` (idempotent).
    pub fn watch(&self, ino: u64, dir: BorrowedFd) {
        let mut w = self.wds.lock();
        if w.wds.contains_key(&ino) {
            return;
        }
        // A full watch table costs coherence for this directory until the TTL, and
        // the check of every place at every request from then on.
        let added = if self.full.load(Ordering::Acquire) {
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            sys::inotify_add_watch(&mut w.watches, dir, MASK)
        };
        match added {
            Ok(wd) => {
                w.nodes.insert(wd.clone(), ino);
                w.wds.insert(ino, wd);
            }
            Err(e) => {
                // An error, so that it is seen by default (under `run` too): the
                // checks get slower from here on.
                if !self.missed.swap(true, Ordering::AcqRel) {
                    log::error!(
                        "cannot watch a directory for outside edits ({e}; see \
                         fs.inotify.max_user_watches): from now on every path is checked \
                         against the disk at every request, and the kernel's caches of \
                         unwatched directories last until the TTL"
                    );
                }
            }
        }
    }

    /// Whether outside changes may go unseen: some directory could not be watched
    /// (see [`Watcher::missed`]'s field), or the watcher has been waiting for the
    /// kernel for longer than `STUCK_AFTER` (50 ms; see `in_kernel_since`).
    pub fn missed(&self) -> bool {
        if self.missed.load(Ordering::Acquire) {
            return true;
        }
        match self.in_kernel_since.load(Ordering::Acquire) {
            0 => false,
            since => self.now_ms().saturating_sub(since) >= STUCK_AFTER.as_millis() as u64,
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Runs `f` (a call into the kernel) with the watcher noted as waiting for it.
    fn in_kernel<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_kernel_since.store(self.now_ms(), Ordering::Release);
        let r = f();
        self.in_kernel_since.store(0, Ordering::Release);
        r
    }

    /// Has the watcher act as if the user's watch limit were reached: no directory
    /// met from now on is watched. For tests: a real limit would need the user's
    /// watches used up, which every mount of that user would feel.
    #[doc(hidden)]
    pub fn inject_full(&self) {
        self.full.store(true, Ordering::Release);
    }

    /// Whether directory node `ino` is watched (its entries may be cached long).
    pub fn is_watched(&self, ino: u64) -> bool {
        self.wds.lock().wds.contains_key(&ino)
    }

    pub fn unwatch(&self, ino: u64) {
        let mut w = self.wds.lock();
        if let Some(wd) = w.wds.remove(&ino) {
            w.nodes.remove(&wd);
            let _ = w.watches.remove(wd);
        }
    }

    /// A change to `name` in directory node `dir` is about to be made through the
    /// mount: see [`Own`].
    pub fn own_change(&self, dir: Arc<Node>, name: &[u8]) -> Own<'_> {
        let now = Instant::now();
        let mut own = self.own.lock();
        if own.len() >= self.own_prune_at.load(Ordering::Relaxed) {
            own.retain(|_, n| n.busy > 0 || n.at.is_some_and(|t| now - t < OWN_NOTE_AGE));
            self.own_prune_at
                .store((own.len() * 2).max(OWN_NOTES), Ordering::Relaxed);
        }
        let note = own.entry((dir.ino, name.to_vec())).or_default();
        note.busy += 1;
        note.at = Some(now);
        drop(own);
        Own {
            watch: Some((self, dir)),
            name: name.to_vec(),
        }
    }

    /// Whether an event `mask` on `name` in directory node `dir`, whose state is now
    /// `now`, is the echo of a change made through the mount, judged by what that
    /// change left there:
    /// * a removal (`IN_DELETE`, `IN_MOVED_FROM`) while the change left the name
    ///   gone and it still is;
    /// * a new name (`IN_CREATE`, `IN_MOVED_TO`) while it names the very inode the
    ///   change left there (whatever changed in that inode since raises an
    ///   `IN_MODIFY` or `IN_ATTRIB` of its own, and an inode number taken again
    ///   after a removal comes after an `IN_DELETE` that is no echo);
    /// * a change to the inode (`IN_MODIFY`, `IN_ATTRIB`) while the name shows
    ///   exactly the state the change left.
    ///
    /// `None` while a change to the name is under way: ask again once it is noted.
    fn is_echo(&self, dir: u64, name: &[u8], mask: u32, now: Option<Stamp>) -> Option<bool> {
        let own = self.own.lock();
        let Some(note) = own.get(&(dir, name.to_vec())) else {
            return Some(false);
        };
        if note.busy > 0 {
            return None;
        }
        let Some(left) = note.left else {
            return Some(false);
        };
        Some(if mask & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0 {
            left.is_none() && now.is_none()
        } else if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
            matches!((left, now), (Some(l), Some(n)) if l.ino == n.ino)
        } else {
            now.is_some() && left == now
        })
    }

    /// Judges an event `mask` on `name` in directory node `dir`: `Held` while a
    /// change to the name is under way through the mount, else an echo or not. The
    /// name's state is taken after the event was read (a change made later raises
    /// an event of its own), and after checking that no change of ours is under
    /// way; if one began meanwhile, the event is held again.
    fn judge(&self, inodes: &Inodes, dir: u64, name: &[u8], mask: u32) -> Verdict {
        let busy = self
            .own
            .lock()
            .get(&(dir, name.to_vec()))
            .is_some_and(|n| n.busy > 0);
        if busy {
            return Verdict::Held;
        }
        let Some(now) = state_of(inodes, dir, name) else {
            // Unknown (an error): not an echo.
            return Verdict::Stale(None);
        };
        match self.is_echo(dir, name, mask, now) {
            Some(true) => Verdict::Echo,
            Some(false) => Verdict::Stale(now),
            None => Verdict::Held,
        }
    }

    /// Makes the event loop handle an `IN_Q_OVERFLOW` within half a second, exactly
    /// as if inotify had reported one. For tests: a real overflow needs the global
    /// `/proc/sys/fs/inotify/max_queued_events` lowered.
    #[doc(hidden)]
    pub fn inject_overflow(&self) {
        self.injected.store(true, Ordering::SeqCst);
    }

    /// How many queue overflows the watcher has handled (injected ones included).
    #[doc(hidden)]
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::SeqCst)
    }

    /// How many nodes the overflows handled so far invalidated (only those that
    /// changed: see [`super::inval::invalidate_changed`]).
    pub fn overflow_invalidated(&self) -> u64 {
        self.overflow_invalidated.load(Ordering::SeqCst)
    }

    /// Reads events until the filesystem is gone (its node table dropped),
    /// invalidating through `notifier`.
    pub fn run(self: Arc<Self>, inodes: Weak<Inodes>, notifier: fuser::Notifier) {
        let mut buf = vec![0u8; 64 * 1024];
        let mut events = self.events.lock();
        loop {
            if self.injected.swap(false, Ordering::SeqCst) {
                let Some(inodes) = inodes.upgrade() else {
                    return;
                };
                self.handle(&inodes, &notifier, [(None, libc::IN_Q_OVERFLOW, &b""[..])]);
            }
            let batch = match sys::inotify_read(&mut events, &mut buf, 500) {
                Ok(Some(batch)) => batch,
                Ok(None) => {
                    if inodes.strong_count() == 0 {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    log::warn!("inotify: {e}; outside edits are no longer watched");
                    return;
                }
            };
            let Some(inodes) = inodes.upgrade() else {
                return;
            };
            self.handle(
                &inodes,
                &notifier,
                batch.map(|(wd, mask, name)| (Some(wd), mask, name)),
            );
        }
    }

    /// Handles one batch of events read from the inotify descriptor (with no watch
    /// descriptor: an overflow injected by [`Watcher::inject_overflow`]).
    fn handle<'a>(
        &self,
        inodes: &Inodes,
        notifier: &fuser::Notifier,
        batch: impl IntoIterator<Item = (Option<WatchDescriptor>, u32, &'a [u8])>,
    ) {
        // Coalesce one batch: each (dir, name) is invalidated once.
        let mut entries: HashSet<(u64, Vec<u8>)> = HashSet::new();
        let mut files: HashMap<(u64, Vec<u8>), Option<Stamp>> = HashMap::new();
        let mut dirs: HashSet<u64> = HashSet::new();
        // Directories moved or removed outside: (where, name, mask).
        let mut moved: Vec<(u64, Vec<u8>, u32)> = Vec::new();
        // Notes what an event that is no echo invalidates: for an event on a watched
        // directory itself (no name), the directory.
        let mut stale = |dir: u64, name: &[u8], mask: u32, now: Option<Stamp>| {
            if mask & libc::IN_ISDIR != 0
                && mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE) != 0
            {
                moved.push((dir, name.to_vec(), mask));
            }
            if name.is_empty() {
                dirs.insert(dir);
            } else if mask
                & (libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO)
                != 0
            {
                entries.insert((dir, name.to_vec()));
                dirs.insert(dir);
            } else {
                let known = files.entry((dir, name.to_vec())).or_default();
                *known = now.or(*known);
            }
        };
        let mut held: Vec<(u64, Vec<u8>, u32)> = Vec::new();
        let mut overflow = false;
        // A name the policy reads rules from changed (never an echo: such a name is
        // read-only through the mount).
        let sources = self.sources.lock();
        let mut source_changed = false;
        for (wd, mask, name) in batch {
            if !source_changed
                && !name.is_empty()
                && let Some(s) = sources.as_ref()
            {
                source_changed = (s.is_source)(name);
            }
            if mask & libc::IN_IGNORED != 0 {
                let mut w = self.wds.lock();
                if let Some(ino) = wd.and_then(|wd| w.nodes.remove(&wd)) {
                    w.wds.remove(&ino);
                }
                continue;
            }
            overflow |= mask & libc::IN_Q_OVERFLOW != 0;
            if overflow {
                continue;
            }
            let Some(dir) = wd.and_then(|wd| self.wds.lock().nodes.get(&wd).copied()) else {
                continue;
            };
            if name.is_empty() {
                stale(dir, name, mask, None);
                continue;
            }
            match self.judge(inodes, dir, name, mask) {
                Verdict::Echo => {}
                Verdict::Stale(now) => stale(dir, name, mask, now),
                Verdict::Held => held.push((dir, name.to_vec(), mask)),
            }
        }
        // Events on names being changed through the mount right now: judged once
        // those changes are noted (microseconds, as a rule); past HOLD_BACK, in
        // doubt, invalidated.
        let deadline = Instant::now() + HOLD_BACK;
        while !held.is_empty() && !overflow {
            let late = Instant::now() >= deadline;
            held.retain(|(dir, name, mask)| {
                match self.judge(inodes, *dir, name, *mask) {
                    Verdict::Echo => {}
                    Verdict::Held if !late => return true,
                    Verdict::Held => {
                        stale(*dir, name, *mask, state_of(inodes, *dir, name).flatten())
                    }
                    Verdict::Stale(now) => stale(*dir, name, *mask, now),
                }
                false
            });
            if !held.is_empty() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        if let Some(s) = sources.as_ref()
            && (source_changed || overflow)
        {
            (s.changed)();
        }
        drop(sources);
        if overflow {
            log::warn!(
                "inotify queue overflow: outside edits went unreported; dropping the \
                 kernel's caches of what changed on disk"
            );
            self.own.lock().clear();
            let n = self.in_kernel(|| super::inval::invalidate_changed(inodes, notifier));
            self.overflow_invalidated
                .fetch_add(n as u64, Ordering::SeqCst);
            self.overflows.fetch_add(1, Ordering::SeqCst);
            // Directories may have moved unreported.
            self.epoch.fetch_add(1, Ordering::AcqRel);
            return;
        }
        if !moved.is_empty() {
            self.replace_moved(inodes, &moved);
        }
        self.in_kernel(|| {
            for (dir, name) in &entries {
                if !inodes.entry_kept(*dir, name) {
                    let _ = notifier.inval_entry(fuser::INodeNo(*dir), OsStr::from_bytes(name));
                }
            }
            for now in files.into_values().flatten() {
                if let Some(n) = inodes.find((now.dev, now.ino)) {
                    let _ = notifier.inval_inode(fuser::INodeNo(n.ino), 0, 0);
                }
            }
            for dir in dirs {
                let _ = notifier.inval_inode(fuser::INodeNo(dir), 0, 0);
            }
        });
    }

    /// Directories moved or removed outside the mount: one that arrived in a
    /// directory the kernel holds takes that place; then every place is decided
    /// again (a moved directory's paths changed), and a directory whose name no
    /// longer holds it is refused until it is found again (see `VeilFs::place`).
    fn replace_moved(&self, inodes: &Inodes, moved: &[(u64, Vec<u8>, u32)]) {
        for (dir, name, _) in moved.iter().filter(|(_, _, m)| m & libc::IN_MOVED_TO != 0) {
            let Some(Some(now)) = state_of(inodes, *dir, name) else {
                continue;
            };
            if let Some(n) = inodes.find((now.dev, now.ino)) {
                let mut p = n.place.lock();
                p.parent = *dir;
                p.name = name.clone();
                p.links = vec![(*dir, name.clone())];
                p.epoch = u64::MAX;
            }
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

/// The state of `name` in directory node `dir`: `Some(None)` when there is no such
/// name, `None` when it cannot be told.
fn state_of(inodes: &Inodes, dir: u64, name: &[u8]) -> Option<Option<Stamp>> {
    Stamp::at(inodes.get(dir)?.dir_fd().ok()?, name).ok()
}

/// What the watcher makes of an event on a name.
enum Verdict {
    /// The echo of a change made through the mount.
    Echo,
    /// Not an echo: invalidate. The name's state now (`None`: gone, or unknown).
    Stale(Option<Stamp>),
    /// A change to the name is under way through the mount: judge once it is noted.
    Held,
}
