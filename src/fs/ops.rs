//! Every filesystem operation as a plain function returning `io::Result`: the policy
//! check first, then one syscall relative to a parent's descriptor. This is the only
//! place the policy is enforced; every refusal is [`eacces`].

use parking_lot::Mutex;
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

mod exposure;
mod unseen;

pub use unseen::shown_nlink;

use super::ask::Access;
use super::inode::{Key, Node, Place};
use super::permissive::Need::{Change, See};
use super::snapshot::Snapshot;
use super::{FileHandle, VeilFs};
use crate::policy::{Decision, Policy};
use crate::sys;

/// The one refusal errno, without a decision to report (a node whose parent is
/// gone).
pub fn eacces() -> io::Error {
    io::Error::from_raw_os_error(libc::EACCES)
}

/// A policy refusal: `EACCES` at the kernel, carrying the path and the decision for
/// the audit log. Only [`super::fuse`] turns it into an errno.
#[derive(Debug)]
pub struct Refusal {
    pub path: Vec<u8>,
    pub decision: Decision,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            String::from_utf8_lossy(&self.path),
            self.decision.action,
            self.decision.why()
        )
    }
}

impl std::error::Error for Refusal {}

/// Refuses an operation on `path` because of `decision`.
pub fn refuse(path: &[u8], decision: &Decision) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        Refusal {
            path: path.to_vec(),
            decision: decision.clone(),
        },
    )
}

/// The policy refusal `e` carries, if it is one.
pub fn refusal_of(e: &io::Error) -> Option<&Refusal> {
    e.get_ref().and_then(|x| x.downcast_ref::<Refusal>())
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// One listing of a directory, as the policy admitted it when it was taken.
#[derive(Debug)]
pub struct Listing {
    /// Carried in the offsets handed out for this listing.
    pub generation: u32,
    /// (mtime seconds, mtime nanoseconds, policy epoch) when it was taken.
    stamp: (i64, i64, u64),
    pub entries: Vec<Listed>,
    /// For a directory that asks: the processes (pids) approved to read this
    /// listing, who alone may continue it at a later offset (see
    /// [`VeilFs::listing_at`]).
    readers: Mutex<Vec<u32>>,
}

impl Listing {
    /// The most readers remembered per listing.
    const READERS: usize = 64;

    fn approved_for(&self, pid: u32) -> bool {
        self.readers.lock().contains(&pid)
    }

    fn approve_for(&self, pid: u32) {
        let mut r = self.readers.lock();
        if !r.contains(&pid) {
            if r.len() >= Self::READERS {
                r.remove(0);
            }
            r.push(pid);
        }
    }
}

/// One admitted directory entry.
#[derive(Clone, Debug)]
pub struct Listed {
    pub ino: u64,
    /// `DT_*` type.
    pub kind: u8,
    pub name: Vec<u8>,
}

/// The attribute changes of one `setattr`.
#[derive(Default, Debug)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    /// `Some(None)` = now.
    pub atime: Option<Option<libc::timespec>>,
    pub mtime: Option<Option<libc::timespec>>,
}

/// Who asked, for the owner of what they create.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    if parent.is_empty() {
        name.to_vec()
    } else {
        let mut p = Vec::with_capacity(parent.len() + 1 + name.len());
        p.extend_from_slice(parent);
        p.push(b'/');
        p.extend_from_slice(name);
        p
    }
}

impl VeilFs {
    fn node(&self, ino: u64) -> io::Result<Arc<Node>> {
        self.inodes.get(ino).ok_or_else(|| errno(libc::ESTALE))
    }

    /// The decision for `path` given its parent's, with the policy-file guard.
    fn decide(
        &self,
        policy: &Policy,
        parent: &Decision,
        path: &[u8],
        is_dir: impl FnOnce() -> bool,
    ) -> Decision {
        if self.outer.is_none() {
            return self.guard_policy_path(path, policy.decide_child(parent, path, is_dir));
        }
        let is_dir = is_dir();
        let d = self.guard_policy_path(path, policy.decide_child(parent, path, || is_dir));
        self.with_outer(path, is_dir, d)
    }

    /// A node's place with a decision that is current for this epoch.
    ///
    /// A stale place is recomputed from the nearest ancestor whose place is current,
    /// walking up and then down without recursion (any depth). Each step goes through
    /// the node's name in a parent the kernel still holds: its decision name, else
    /// another of its links; a node none of whose parents is held any more (the kernel
    /// forgot them) is decided from its last known path.
    fn place(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let epoch = s.epoch;
        let place = node.place();
        if place.epoch == epoch || node.ino == super::inode::ROOT {
            return Ok(place);
        }
        let policy = &*s.policy;
        // Stale nodes from `node` up, each with the parent it is decided under.
        let mut stale: Vec<(Option<Arc<Node>>, Place)> = vec![(None, place)];
        let mut base: Option<Place> = None;
        let limit = self.inodes.len() + 1;
        loop {
            let top = stale.len() - 1;
            let Some((parent, name)) = self.anchor(&stale[top].1) else {
                break;
            };
            let pp = parent.place();
            stale[top].1.parent = parent.ino;
            stale[top].1.name = name;
            if pp.epoch == epoch || parent.ino == super::inode::ROOT {
                base = Some(pp);
                break;
            }
            if stale.len() > limit {
                // A cycle in the recorded parents (should not happen): fail closed.
                return Err(eacces());
            }
            stale.push((Some(parent), pp));
        }
        // Downwards: the outermost stale node is decided under `base`, or from its own
        // last known path when no parent of it is held.
        let mut above = base;
        let mut result = None;
        while let Some((n, mut p)) = stale.pop() {
            let is_dir = n
                .as_ref()
                .map_or(node.decided_as_dir(), |n| n.decided_as_dir());
            match &above {
                Some(pp) => {
                    let path = join(&pp.path, &p.name);
                    p.decision = self.decide(policy, &pp.decision, &path, || is_dir);
                    p.path = Arc::from(path);
                }
                None => {
                    p.decision = self.decide_path(policy, &p.path, is_dir);
                }
            }
            self.recomputed.fetch_add(1, Ordering::Relaxed);
            p.epoch = epoch;
            let target: &Node = n.as_deref().unwrap_or(node);
            {
                let mut st = target.place.lock();
                st.parent = p.parent;
                st.name = p.name.clone();
                st.path = p.path.clone();
                st.decision = p.decision.clone();
                st.epoch = epoch;
                p.links = st.links.clone();
            }
            if n.is_none() {
                result = Some(p.clone());
            }
            above = Some(p);
        }
        result.ok_or_else(eacces)
    }

    /// The parent node and name a node's decision is taken under: its decision name
    /// while that parent is held, else the first of its links whose parent is.
    fn anchor(&self, place: &Place) -> Option<(Arc<Node>, Vec<u8>)> {
        std::iter::once((place.parent, &place.name))
            .chain(place.links.iter().map(|(p, n)| (*p, n)))
            .find_map(|(p, n)| self.inodes.get(p).map(|node| (node, n.clone())))
    }

    /// The decision for a whole workspace-relative path, with the policy-file guard.
    fn decide_path(&self, policy: &Policy, path: &[u8], is_dir: bool) -> Decision {
        if path.is_empty() {
            return Decision::root();
        }
        let d = self.guard_policy_path(path, policy.decide(path, is_dir));
        self.with_outer(path, is_dir, d)
    }

    fn visible(&self, node: &Node) -> io::Result<Place> {
        self.visible_in(&self.snapshot(), node)
    }

    fn visible_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        self.visible_as(s, node, true)
    }

    /// [`VeilFs::visible_in`] for the directory a request works in: in a permissive
    /// mount the request logs its own path, not this one as well.
    fn dir_visible_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        self.visible_as(s, node, false)
    }

    fn visible_as(&self, s: &Snapshot, node: &Node, log: bool) -> io::Result<Place> {
        let p = self.place(s, node)?;
        self.admit(&s.policy, &p.path, &p.decision, See, log)?;
        Ok(p)
    }

    fn writable(&self, node: &Node) -> io::Result<Place> {
        self.writable_in(&self.snapshot(), node)
    }

    fn writable_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let p = self.place(s, node)?;
        let approved = self.gate(
            s,
            &p.path,
            &p.decision,
            Access::Write,
            node.decided_as_dir(),
        )?;
        let d = approved.as_ref().unwrap_or(&p.decision);
        self.admit(&s.policy, &p.path, d, Change, true)?;
        self.guard_key(node.key, &p.path)?;
        Ok(p)
    }

    /// The node's content may be read (opened for reading, listed): visible, and
    /// approved where the path asks (see [`super::ask`]).
    fn readable(&self, node: &Node) -> io::Result<Place> {
        self.readable_in(&self.snapshot(), node)
    }

    fn readable_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let p = self.visible_in(s, node)?;
        self.gate(s, &p.path, &p.decision, Access::Read, node.decided_as_dir())?;
        Ok(p)
    }

    /// The decision a request for `access` to `path` goes by, when it is not `d`
    /// itself (see [`super::ask::gate`]). A permissive mount asks nothing.
    fn gate(
        &self,
        s: &Snapshot,
        path: &[u8],
        d: &Decision,
        access: Access,
        is_dir: bool,
    ) -> io::Result<Option<Decision>> {
        if d.action != crate::policy::Action::Ask {
            return Ok(None);
        }
        if let Some(d) = self.waived_question(&s.policy, path, d, access) {
            return Ok(Some(d));
        }
        super::ask::gate(self.seat.as_ref(), path, d, access, is_dir).map(Some)
    }

    /// The node's own attributes may be changed (see
    /// [`Decision::for_own_attributes`]).
    fn attributes_writable(&self, node: &Node) -> io::Result<Place> {
        let s = self.snapshot();
        let p = self.writable_in(&s, node)?;
        let d = p.decision.for_own_attributes(s.policy.default_action());
        self.admit(&s.policy, &p.path, &d, Change, true)?;
        Ok(p)
    }

    /// The decision for a name in a directory, asking the disk for the entry's type
    /// only if a directory-only pattern needs it (see [`unseen`] for a name that is
    /// not there).
    fn child(
        &self,
        s: &Snapshot,
        dir: &Node,
        dp: &Place,
        name: &CStr,
        kind: Kind,
    ) -> (Vec<u8>, Decision) {
        let path = join(&dp.path, name.to_bytes());
        let d = match kind {
            Kind::Dir => self.decide(&s.policy, &dp.decision, &path, || true),
            Kind::NotDir => self.decide(&s.policy, &dp.decision, &path, || false),
            Kind::OnDisk => {
                self.decide_on_disk(&s.policy, dir, &dp.decision, &path, name)
                    .0
            }
        };
        (path, d)
    }

    /// Registers the backing entry `name` of `parent` as a node (one lookup): opens it
    /// once (`O_PATH`, not following it) and keys it by what the descriptor stands for.
    fn enter(
        &self,
        at: Entering<'_>,
        name: &CStr,
        path: Vec<u8>,
        decision: Decision,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let dfd = at.dir.dir_fd()?;
        let (fd, st) = if self.inodes.pinned() < self.node_budget {
            match sys::open_path(dfd, name) {
                Ok(fd) => {
                    let st = sys::stat(fd.as_fd())?;
                    (Some(fd), st)
                }
                Err(e) if out_of_descriptors(&e) => {
                    self.relieve();
                    self.beyond_budget(dfd, name)?
                }
                Err(e) => return Err(e),
            }
        } else {
            self.beyond_budget(dfd, name)?
        };
        self.adopt(at, name, fd, st, path, decision)
    }

    /// The entry `name` in `dir` once the descriptor budget is spent: a file is
    /// registered unpinned (see [`super::inode`]), a directory is pinned all the same
    /// (waiting a bounded time for descriptors to free up when there are none).
    fn beyond_budget(
        &self,
        dir: BorrowedFd,
        name: &CStr,
    ) -> io::Result<(Option<OwnedFd>, libc::stat)> {
        let st = sys::statat(dir, name)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Ok((None, st));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let fd = loop {
            match sys::open_path(dir, name) {
                Err(e) if out_of_descriptors(&e) && std::time::Instant::now() < deadline => {
                    self.relieve();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => break r?,
            }
        };
        let st = sys::stat(fd.as_fd())?;
        Ok((Some(fd), st))
    }

    /// Out of descriptors: asks the kernel to drop a batch of the entries it caches
    /// (with everything it caches beneath them). The kernel then forgets the nodes
    /// that nothing uses, and their descriptors close; a name dropped this way is
    /// simply looked up again when next used.
    fn relieve(&self) {
        let batch = (self.node_budget / 4).max(16);
        for (parent, name) in self.inodes.victims(batch) {
            self.inval.queue(super::inval::Inval::Entry(parent, name));
        }
        log::debug!(
            "out of descriptors with {} nodes pinned: asked the kernel to drop {batch}",
            self.inodes.pinned()
        );
    }

    /// A node about to be opened or linked anew must still be reached by a name the
    /// daemon knows, or its decision (taken for that name) means nothing: a file
    /// renamed outside the mount to a name the policy denies, and reopened through
    /// `/proc/self/fd` or linked from a descriptor, would otherwise be decided under
    /// its old, allowed name. Its decision name, else another of its names (which
    /// then takes the decision over); `ESTALE` when none reaches it any more.
    fn still_named(&self, node: &Node) -> io::Result<()> {
        if node.ino == super::inode::ROOT {
            return Ok(());
        }
        let ((), (parent, name)) = self
            .reach(node, |dir, name| sys::statat(dir, name).map(|st| (st, ())))
            // `ESTALE`: the kernel's entry for this name is out of date (the name
            // now holds another file, say, and the watcher has not told it yet); the
            // VFS then looks the name up again (`LOOKUP_REVAL`) and opens what it
            // holds now. Through `/proc/self/fd` there is no name to look up again,
            // and the open fails.
            .map_err(|_| errno(libc::ESTALE))?;
        let mut p = node.place.lock();
        if (p.parent, &p.name) != (parent, &name) {
            p.parent = parent;
            p.name = name;
            p.epoch = u64::MAX;
        }
        Ok(())
    }

    /// Pins a node the kernel is opening (see [`super::inode`]), so that it is read
    /// and written as itself whatever happens to its names, while fewer than
    /// [`VeilFs::pin_cap`] nodes are pinned (past that it stays reached by its names).
    fn pin(&self, node: &Node) {
        if node.fd().is_some() || self.inodes.pinned() >= self.pin_cap {
            return;
        }
        if let Ok(fd) = self.through_links(node, |dir, name| {
            let fd = sys::open_path(dir, name)?;
            Ok((sys::stat(fd.as_fd())?, fd))
        }) {
            self.inodes.pin(node, fd);
        }
    }

    /// Registers the object `st` describes, found as `name` in `at`'s directory (with
    /// `fd`, an `O_PATH` descriptor on it, when one was opened): the node already
    /// standing for it (a hard link, or a name the kernel looks up again), with this
    /// name added and pinned by `fd` if it was not, or a new node that keeps `fd`.
    fn adopt(
        &self,
        at: Entering<'_>,
        name: &CStr,
        mut fd: Option<OwnedFd>,
        st: libc::stat,
        path: Vec<u8>,
        decision: Decision,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let epoch = at.epoch;
        let parent = at.parent;
        let path: Arc<[u8]> = Arc::from(path);
        let place = Place {
            parent,
            name: name.to_bytes().to_vec(),
            links: vec![(parent, name.to_bytes().to_vec())],
            path,
            decision,
            epoch,
        };
        let fresh = place.clone();
        let node = self.inodes.lookup_or_insert(
            super::inode::key_of(&st),
            |id| Node::new(id, fd.take(), &st, place),
            |p| {
                let link = (fresh.parent, fresh.name.clone());
                let mut links = std::mem::take(&mut p.links);
                if !links.contains(&link) {
                    links.push(link);
                }
                // A second name for the same inode (a hard link): keep the more
                // restrictive of the two decisions while both are current.
                if p.epoch != epoch || fresh.decision.action >= p.decision.action {
                    *p = fresh;
                }
                p.links = links;
            },
        );
        if let Some(fd) = fd {
            self.inodes.pin(&node, fd);
        }
        if let Some(w) = &self.watcher
            && node.is_dir()
            && let Some(fd) = node.fd()
        {
            w.watch(node.ino, fd);
        }
        Ok((node, st))
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> io::Result<(Arc<Node>, libc::stat)> {
        let s = self.snapshot();
        let dir = self.node(parent)?;
        let dp = self.dir_visible_in(&s, &dir)?;
        let cname = sys::name(name)?;
        self.seam.run();
        let path = join(&dp.path, cname.to_bytes());
        let (d, as_file) = self.decide_on_disk(&s.policy, &dir, &dp.decision, &path, &cname);
        self.admit(&s.policy, &path, &d, See, true)?;
        let at = Entering {
            parent,
            dir: &dir,
            epoch: s.epoch,
        };
        let recheck = as_file.then(|| path.clone());
        let (node, st) = self.enter(at, &cname, path, d)?;
        if let Some(path) = recheck {
            self.same_kind(&s, &node, &dp, &path)?;
        }
        Ok((node, st))
    }

    pub fn forget(&self, ino: u64, n: u64) {
        let Some(node) = self.inodes.forget(ino, n) else {
            return;
        };
        if node.is_dir() {
            self.listings.lock().remove(&ino);
            if let Some(w) = &self.watcher {
                w.unwatch(ino);
            }
        }
    }

    /// Tells the watcher that `name` in `dir` is being changed through the mount:
    /// hold the result across the change and call `done` on it once the change
    /// succeeded (see [`super::watch::Own`]).
    fn own(&self, dir: u64, name: &[u8]) -> super::watch::Own<'_> {
        match (&self.watcher, self.inodes.get(dir)) {
            (Some(w), Some(d)) => w.own_change(d, name),
            _ => super::watch::Own::none(),
        }
    }

    /// [`VeilFs::own`] for node `ino` under the name its decision is for.
    fn own_node(&self, ino: u64) -> super::watch::Own<'_> {
        match (&self.watcher, self.inodes.get(ino)) {
            (Some(_), Some(node)) => {
                let place = node.place();
                self.own(place.parent, &place.name)
            }
            _ => super::watch::Own::none(),
        }
    }

    /// A descriptor on the node's own object: the pinned one, or, for an unpinned
    /// node, an `O_PATH` one opened through one of its names and checked to reach the
    /// same object (`ESTALE` when none does).
    fn fd_of<'a>(&self, node: &'a Node) -> io::Result<NodeFd<'a>> {
        if let Some(fd) = node.fd() {
            return Ok(NodeFd::Kept(fd));
        }
        self.through_links(node, |dir, name| {
            let fd = sys::open_path(dir, name)?;
            Ok((sys::stat(fd.as_fd())?, fd))
        })
        .map(NodeFd::Opened)
    }

    fn stat_of(&self, node: &Node) -> io::Result<libc::stat> {
        match node.fd() {
            Some(fd) => sys::stat(fd),
            None => self.through_links(node, |dir, name| sys::statat(dir, name).map(|st| (st, st))),
        }
    }

    /// Runs `f` on each name an unpinned node is known under (its decision name
    /// first) until one reaches the node's own object; `ESTALE` when none does.
    fn through_links<T>(
        &self,
        node: &Node,
        f: impl Fn(BorrowedFd, &CStr) -> io::Result<(libc::stat, T)>,
    ) -> io::Result<T> {
        self.reach(node, f).map(|(t, _)| t)
    }

    /// [`VeilFs::through_links`], also saying which `(parent, name)` reached the node.
    fn reach<T>(
        &self,
        node: &Node,
        f: impl Fn(BorrowedFd, &CStr) -> io::Result<(libc::stat, T)>,
    ) -> io::Result<(T, (u64, Vec<u8>))> {
        let place = node.place();
        let mut last = errno(libc::ESTALE);
        let names = std::iter::once((place.parent, place.name.clone())).chain(place.links);
        for (parent, name) in names {
            let Some(dir) = self.inodes.get(parent) else {
                continue;
            };
            let (Ok(dfd), Ok(c)) = (dir.dir_fd(), std::ffi::CString::new(name.clone())) else {
                continue;
            };
            match f(dfd, &c) {
                Ok((st, t)) if super::inode::key_of(&st) == node.key => {
                    return Ok((t, (parent, name)));
                }
                Ok(_) => last = errno(libc::ESTALE),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Attributes of a node. Through an open handle (`fstat`, or the kernel's own
    /// refresh during a read) they are served without asking the policy again: a
    /// descriptor the daemon opened (`--strict-open`, or a file created before the
    /// kernel began opening files without asking) keeps working after its path is
    /// denied, as with Unix permissions.
    pub fn getattr(&self, ino: u64, fh: Option<u64>) -> io::Result<libc::stat> {
        if let Some(h) = fh.and_then(|fh| self.file(fh).ok())
            && h.ino == ino
        {
            return sys::stat(h.file.as_fd());
        }
        let node = self.node(ino)?;
        self.visible(&node)?;
        self.stat_of(&node)
    }

    pub fn setattr(&self, ino: u64, a: &SetAttr, fh: Option<u64>) -> io::Result<libc::stat> {
        let node = self.node(ino)?;
        let place = self.attributes_writable(&node)?;
        let own = self.own(place.parent, &place.name);
        let nfd = self.fd_of(&node)?;
        let fd = nfd.as_fd();
        if let Some(mode) = a.mode {
            if node.fmt == libc::S_IFLNK {
                return Err(errno(libc::EOPNOTSUPP));
            }
            sys::chmod(self.proc_fd.as_fd(), fd, mode & 0o7777)?;
        }
        if a.uid.is_some() || a.gid.is_some() {
            sys::chown(fd, a.uid, a.gid)?;
        }
        if let Some(size) = a.size {
            match fh.and_then(|h| self.files.read().get(&h).cloned()) {
                Some(h) => h.file.set_len(size)?,
                None => {
                    let f = File::from(sys::reopen(self.proc_fd.as_fd(), fd, libc::O_WRONLY)?);
                    f.set_len(size)?;
                }
            }
        }
        if a.atime.is_some() || a.mtime.is_some() {
            sys::utimes(
                self.proc_fd.as_fd(),
                fd,
                node.fmt == libc::S_IFLNK,
                a.atime,
                a.mtime,
            )?;
        }
        own.done_if(sys::stat(fd))
    }

    pub fn readlink(&self, ino: u64) -> io::Result<Vec<u8>> {
        let node = self.node(ino)?;
        self.visible(&node)?;
        sys::readlink(self.fd_of(&node)?.as_fd())
    }

    /// A name in a directory that is about to be made, removed or replaced: the
    /// directory is visible and the name's own decision (for `kind`) allows changes.
    fn changeable(
        &self,
        s: &Snapshot,
        parent: u64,
        name: &OsStr,
        kind: Kind,
    ) -> io::Result<Changing> {
        let epoch = s.epoch;
        let dir = self.node(parent)?;
        let dp = self.dir_visible_in(s, &dir)?;
        let cname = sys::name(name)?;
        let (path, d) = self.child(s, &dir, &dp, &cname, kind);
        let approved = self.gate(s, &path, &d, Access::Write, matches!(kind, Kind::Dir))?;
        let may = approved.as_ref().unwrap_or(&d);
        self.admit(&s.policy, &path, may, Change, true)?;
        Ok(Changing {
            parent,
            dir,
            name: cname,
            path,
            decision: d,
            epoch,
        })
    }

    /// The checks shared by every operation that makes a new name (of a directory
    /// when `is_dir`), and the note of its change through the mount (`done` once
    /// the name is made). A name made as a non-directory is decided by what is on
    /// disk (see [`unseen`]: where it is not there yet, a directory-only deny
    /// pattern refuses it, as a lookup of it would).
    fn new_name(
        &self,
        s: &Snapshot,
        parent: u64,
        name: &OsStr,
        is_dir: bool,
    ) -> io::Result<(Changing, super::watch::Own<'_>)> {
        let kind = if is_dir { Kind::Dir } else { Kind::OnDisk };
        let made = self.changeable(s, parent, name, kind)?;
        let own = self.own(parent, made.name.to_bytes());
        Ok((made, own))
    }

    /// Gives a new entry (`fd`, in directory `dir`) to the caller, as the backing
    /// filesystem would have had the caller made it: the caller's uid, and the
    /// caller's gid unless `dir` is set-group-ID (then the entry keeps the
    /// directory's group, and a new directory its `S_ISGID`, as the backing
    /// filesystem gave them).
    fn give(&self, dir: BorrowedFd, fd: BorrowedFd, caller: Caller) -> io::Result<()> {
        if self.chown_new && caller.uid != 0 {
            let setgid = sys::stat(dir)?.st_mode & libc::S_ISGID != 0;
            let gid = if setgid { None } else { Some(caller.gid) };
            sys::chown(fd, Some(caller.uid), gid)?;
        }
        Ok(())
    }

    /// Registers the entry `c` just made (found by its name) and gives it to the caller.
    fn made(&self, c: Changing, caller: Caller) -> io::Result<(Arc<Node>, libc::stat)> {
        let (node, _) = self.enter(c.at(), &c.name, c.path.clone(), c.decision.clone())?;
        let fd = self.fd_of(&node)?;
        self.give(c.dir.dir_fd()?, fd.as_fd(), caller)?;
        let st = sys::stat(fd.as_fd())?;
        drop(fd);
        Ok((node, st))
    }

    pub fn mknod(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(), parent, name, false)?;
        self.guard_config_way(&c.path)?;
        sys::mknodat(c.dir.dir_fd()?, &c.name, mode & !umask, rdev as u64)?;
        own.done_if(self.made(c, caller))
    }

    pub fn mkdir(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(), parent, name, true)?;
        if !self.git_guard.may_make_dir(&c.path) || !self.git_guard.may_make_head(&c.path) {
            return Err(refuse(&c.path, &crate::policy::Decision::git_control()));
        }
        sys::mkdirat(c.dir.dir_fd()?, &c.name, mode & !umask)?;
        self.git_guard.made_dir(&c.path);
        own.done_if(self.made(c, caller))
    }

    pub fn symlink(
        &self,
        parent: u64,
        name: &OsStr,
        target: &OsStr,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let _names = self.names.read();
        // A link is decided as a directory would be (see `decided_as_dir`).
        let (c, own) = self.new_name(&self.snapshot(), parent, name, true)?;
        self.guard_config_way(&c.path)?;
        sys::symlinkat(target, c.dir.dir_fd()?, &c.name)?;
        own.done_if(self.made(c, caller))
    }

    pub fn link(
        &self,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let _names = self.names.read();
        let node = self.node(ino)?;
        // A new name for an inode changes it (its link count) and could give a
        // read-only inode a writable alias: the source must be writable too, under
        // a name that still reaches it.
        self.still_named(&node)?;
        let s = self.snapshot();
        self.writable_in(&s, &node)?;
        let (c, own) = self.new_name(&s, newparent, newname, node.decided_as_dir())?;
        self.guard_config_way(&c.path)?;
        sys::linkat(
            self.proc_fd.as_fd(),
            self.fd_of(&node)?.as_fd(),
            c.dir.dir_fd()?,
            &c.name,
        )?;
        own.done_if(self.enter(c.at(), &c.name, c.path.clone(), c.decision.clone()))
    }

    fn remove(&self, parent: u64, name: &OsStr, is_dir: bool) -> io::Result<()> {
        let kind = if is_dir { Kind::Dir } else { Kind::OnDisk };
        let c = self.changeable(&self.snapshot(), parent, name, kind)?;
        let st = sys::statat(c.dir.dir_fd()?, &c.name)?;
        self.guard_key(super::inode::key_of(&st), &c.path)?;
        self.guard_holder(&c.path)?;
        let own = self.own(parent, c.name.to_bytes());
        sys::unlinkat(c.dir.dir_fd()?, &c.name, is_dir)?;
        if is_dir {
            self.git_guard.vacated(&c.path);
        }
        own.done();
        self.unlinked(parent, c.name.to_bytes(), super::inode::key_of(&st));
        Ok(())
    }

    /// The name `parent/name` of the backing object `key` is gone. The node (if the
    /// kernel holds it) keeps its descriptor, so a process that still has the file
    /// open goes on reading and writing it, as POSIX allows.
    fn unlinked(&self, parent: u64, name: &[u8], key: Key) {
        if let Some(n) = self.inodes.find(key) {
            let mut p = n.place.lock();
            let gone = (parent, name.to_vec());
            p.links.retain(|l| *l != gone);
            if (p.parent, p.name.clone()) == gone
                && let Some((np, nn)) = p.links.first().cloned()
            {
                // The decision was for the removed name: recompute it for another.
                p.parent = np;
                p.name = nn;
                p.epoch = u64::MAX;
            }
            let last = p.links.is_empty();
            drop(p);
            if last {
                self.inodes.detach(&n);
            }
        }
    }

    pub fn unlink(&self, parent: u64, name: &OsStr) -> io::Result<()> {
        self.remove(parent, name, false)
    }

    pub fn rmdir(&self, parent: u64, name: &OsStr) -> io::Result<()> {
        self.remove(parent, name, true)
    }

    /// Renames; `Ok(true)` when a directory moved (the kernel's cached subtree under
    /// it should then be dropped: its paths, and so its decisions, changed).
    pub fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<bool> {
        // Checked and made as one step (see `VeilFs::names`).
        let _names = self.names.write();
        let s = self.snapshot();
        let policy = &*s.policy;
        let (from_dir, to_dir) = (self.node(parent)?, self.node(newparent)?);
        let (fp, tp) = (
            self.dir_visible_in(&s, &from_dir)?,
            self.dir_visible_in(&s, &to_dir)?,
        );
        let (from, to) = (sys::name(name)?, sys::name(newname)?);
        let from_st = sys::statat(from_dir.dir_fd()?, &from)?;
        let from_is_dir = from_st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let from_as_dir = decided_as_dir(from_st.st_mode);
        let exchange = flags & libc::RENAME_EXCHANGE != 0;

        // The source as it is, and as it would be at the destination.
        let (from_path, from_now) = self.child(&s, &from_dir, &fp, &from, kind_of(from_as_dir));
        let (to_path, from_then) = self.child(&s, &to_dir, &tp, &to, kind_of(from_as_dir));
        let may = |path: &[u8], d: &Decision, is_dir: bool| -> io::Result<()> {
            let approved = self.gate(&s, path, d, Access::Write, is_dir)?;
            let d = approved.as_ref().unwrap_or(d);
            self.admit(&s.policy, path, d, Change, true)
        };
        may(&from_path, &from_now, from_as_dir)?;
        may(&to_path, &from_then, from_as_dir)?;
        // Neither the policy file (by any name) nor a directory holding it moves.
        self.guard_key(super::inode::key_of(&from_st), &from_path)?;
        self.guard_holder(&from_path)?;
        self.guard_holder(&to_path)?;
        self.guard_head(&to_path)?;
        self.guard_way_rename(&from_path, &to_path)?;
        if from_is_dir && self.git_guard.everywhere() {
            let dfd = from_dir.dir_fd()?;
            let holds_git = {
                let mut inner = from.to_bytes().to_vec();
                inner.extend_from_slice(b"/.git");
                std::ffi::CString::new(inner)
                    .ok()
                    .is_some_and(|n| sys::statat(dfd, &n).is_ok())
            };
            self.guard_git_move(&from_path, &to_path, holds_git)?;
        }
        // Whatever sits at the destination is replaced (or, for an exchange, moved
        // to the source's place): its own decision must allow that too.
        let to_st = sys::statat(to_dir.dir_fd()?, &to).ok();
        if let Some(st) = &to_st {
            self.guard_key(super::inode::key_of(st), &to_path)?;
            let to_is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let to_as_dir = decided_as_dir(st.st_mode);
            let (_, to_now) = self.child(&s, &to_dir, &tp, &to, kind_of(to_as_dir));
            may(&to_path, &to_now, to_as_dir)?;
            if exchange {
                let (_, to_then) = self.child(&s, &from_dir, &fp, &from, kind_of(to_as_dir));
                may(&from_path, &to_then, to_as_dir)?;
                if to_is_dir {
                    let fd =
                        sys::openat(to_dir.dir_fd()?, &to, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                    self.no_exposure(policy, fd, &to_path, &to_now, &from_path, &to_then)?;
                }
            }
        }
        if from_is_dir {
            let fd = sys::openat(
                from_dir.dir_fd()?,
                &from,
                libc::O_RDONLY | libc::O_DIRECTORY,
                0,
            )?;
            self.no_exposure(policy, fd, &from_path, &from_now, &to_path, &from_then)?;
        }

        // A moved directory takes its kernel-cached subtree along under a new path
        // whose decisions may differ: let the watcher's echo drop those dentries
        // (their attributes would otherwise stay visible until the TTL).
        let moves_dir = from_is_dir
            || to_st
                .as_ref()
                .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        let own = (!moves_dir).then(|| {
            (
                self.own(parent, from.to_bytes()),
                self.own(newparent, to.to_bytes()),
            )
        });
        sys::renameat2(from_dir.dir_fd()?, &from, to_dir.dir_fd()?, &to, flags)?;
        // What a person approved for the session was what sat at those names.
        if let Some(seat) = &self.seat {
            seat.broker
                .forget_grants_at(seat.root, &[from_path.as_slice(), to_path.as_slice()]);
        }
        if from_is_dir {
            self.git_guard.vacated(&from_path);
        }
        if to_st
            .as_ref()
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        {
            self.git_guard.vacated(&to_path);
        }
        if let Some((from_own, to_own)) = own {
            from_own.done();
            to_own.done();
        }

        // Keep the moved nodes' places in step (each is decided again under its new
        // name); a moved directory takes descendants along under another path, so
        // then every cached decision is invalidated. A file's rename (an editor's
        // save: write a temporary, rename it over the file) changes no other path.
        self.moved(
            parent,
            from.to_bytes(),
            newparent,
            to.to_bytes(),
            super::inode::key_of(&from_st),
        );
        match to_st {
            Some(st) if exchange => {
                let key = super::inode::key_of(&st);
                self.moved(newparent, to.to_bytes(), parent, from.to_bytes(), key);
            }
            Some(st) => self.unlinked(newparent, to.to_bytes(), super::inode::key_of(&st)),
            None => {}
        }
        if moves_dir {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        Ok(moves_dir)
    }

    /// The entry `old_parent/old` (backing object `key`) is now `new_parent/new`: its
    /// cached decision (taken for the old name) is stale.
    fn moved(&self, old_parent: u64, old: &[u8], new_parent: u64, new: &[u8], key: Key) {
        if let Some(n) = self.inodes.find(key) {
            let mut p = n.place.lock();
            let (from, to) = ((old_parent, old.to_vec()), (new_parent, new.to_vec()));
            p.links.retain(|l| *l != from && *l != to);
            p.links.insert(0, to);
            p.parent = new_parent;
            p.name = new.to_vec();
            p.epoch = u64::MAX;
        }
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps `fd`, opened on node `ino` (for writing when `writes` names its object),
    /// as a new handle.
    fn register(&self, fd: OwnedFd, ino: u64, writes: Option<super::inode::Key>) -> u64 {
        if let Some(key) = writes {
            self.protected.writing(key, true);
        }
        let fh = self.new_fh();
        self.files.write().insert(
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
        self.files
            .read()
            .get(&fh)
            .cloned()
            .ok_or_else(|| errno(libc::EBADF))
    }

    /// An open for reading answered without a handle (see
    /// [`VeilFs::set_light_open`]): only the policy check.
    pub fn open_for_reading(&self, ino: u64) -> io::Result<()> {
        let node = self.node(ino)?;
        self.still_named(&node)?;
        self.readable(&node)?;
        self.pin(&node);
        Ok(())
    }

    /// Counts an open for reading about to be answered without a handle, and says
    /// whether it may be: not while files are open on the inode in passthrough
    /// mode (see [`super::inode::IoMode`]).
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

    pub fn open(&self, ino: u64, flags: i32) -> io::Result<u64> {
        let node = self.node(ino)?;
        self.still_named(&node)?;
        self.pin(&node);
        let writes = opens_for_writing(flags);
        let own = if writes {
            let place = self.writable(&node)?;
            self.protected.written(node.key);
            self.own(place.parent, &place.name)
        } else {
            self.readable(&node)?;
            super::watch::Own::none()
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
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat, u64)> {
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(), parent, name, false)?;
        self.guard_config_way(&c.path)?;
        let (dfd, mode) = (c.dir.dir_fd()?, mode & !umask);
        // Without `O_EXCL` an existing name is opened (and maybe truncated): never
        // the policy file's (see `protect`).
        if let Ok(st) = sys::statat(dfd, &c.name) {
            self.guard_key(super::inode::key_of(&st), &c.path)?;
        }
        // `O_DIRECT` stays on the FUSE side (see `open`); never block on the open.
        let flags = (flags & !libc::O_DIRECT) | libc::O_CREAT | libc::O_NONBLOCK;
        let fd = if self.passthrough.load(Ordering::Relaxed) {
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
        let path_fd = (self.inodes.pinned() < self.pin_cap).then_some(path_fd);
        let (node, _) = self.adopt(c.at(), &c.name, path_fd, st, path, c.decision.clone())?;
        self.protected.written(node.key);
        let nfd = self.fd_of(&node)?;
        self.give(dfd, nfd.as_fd(), caller)?;
        let st = sys::stat(nfd.as_fd())?;
        drop(nfd);
        own.done();
        let fh = self.register(fd, node.ino, Some(node.key));
        Ok((node, st, fh))
    }

    /// Whether a handle opened now on `node` could register the inode's passthrough
    /// backing file: passthrough is on, no other handle is open, and the file will be
    /// written or is large (see [`super::PASSTHROUGH_MIN_SIZE`]).
    fn may_register_backing(&self, node: &Node, writes: bool, fd: BorrowedFd) -> bool {
        node.fmt == libc::S_IFREG
            && self.passthrough.load(Ordering::Relaxed)
            && node.io.lock().is_free()
            && (writes
                || sys::stat(fd).is_ok_and(|st| st.st_size as u64 >= super::PASSTHROUGH_MIN_SIZE))
    }

    /// Opens the node's own object with `flags`, by reopening its `O_PATH` descriptor
    /// (an unpinned node through one of its names, checked to reach its object). Never blocks: `O_NONBLOCK` is added (a regular file ignores
    /// it, and a lease or a special file cannot hold the request thread).
    fn open_node(&self, node: &Node, flags: i32) -> io::Result<OwnedFd> {
        let flags = flags | libc::O_NONBLOCK;
        match node.fd() {
            Some(fd) => sys::reopen(self.proc_fd.as_fd(), fd, flags),
            None => self.through_links(node, |dir, name| {
                let fd = sys::openat(dir, name, flags, 0)?;
                Ok((sys::stat(fd.as_fd())?, fd))
            }),
        }
    }

    /// What an I/O request works on: the handle it names, or, for handle 0 (a file
    /// opened for reading without a handle, see [`VeilFs::set_light_open`]), the
    /// node reopened for this one request after the check an open would have made.
    fn io(&self, ino: u64, fh: u64, write: bool) -> io::Result<Io> {
        if fh != NO_HANDLE {
            let h = self.file(fh)?;
            if write
                && let Some(node) = self.inodes.get(h.ino)
                && self.protected.contains(node.key)
            {
                // A handle opened before its file became the policy file.
                self.guard_key(node.key, &node.place().path)?;
            }
            return Ok(Io::Handle(h));
        }
        let node = self.node(ino)?;
        if node.fmt != libc::S_IFREG {
            return Err(errno(libc::EINVAL));
        }
        let access = if write {
            self.writable(&node)?;
            libc::O_WRONLY
        } else {
            self.visible(&node)?;
            libc::O_RDONLY
        };
        Ok(Io::Node(File::from(self.open_node(&node, access)?)))
    }

    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let io = self.io(ino, fh, false)?;
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

    pub fn write(&self, ino: u64, fh: u64, offset: u64, data: &[u8]) -> io::Result<u32> {
        let io = self.io(ino, fh, true)?;
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
        let Some(h) = self.files.write().remove(&fh) else {
            return;
        };
        if let Some(key) = h.writes {
            self.protected.writing(key, false);
        }
        if h.counted.load(Ordering::Relaxed)
            && let Some(node) = self.inodes.get(h.ino)
        {
            let mut io = node.io.lock();
            io.open = io.open.saturating_sub(1);
        }
    }

    pub fn fsync(&self, ino: u64, fh: u64, datasync: bool) -> io::Result<()> {
        sys::fsync(self.io(ino, fh, false)?.file().as_fd(), datasync)
    }

    /// `opendir`: only the policy check. Listings are kept per directory (see
    /// [`VeilFs::listing_at`]), not per handle.
    pub fn opendir(&self, ino: u64) -> io::Result<()> {
        let node = self.node(ino)?;
        self.readable(&node)?;
        Ok(())
    }

    /// The listing a `readdir` at `offset` continues, and the position in it.
    ///
    /// Offsets handed to the kernel carry the listing's generation in their high 32
    /// bits and a position in the low ones (1 = `.`, 2 = `..`, 3.. = entries), so a
    /// reader that pauses and comes back continues the very listing it started
    /// while the directory changes: the last few listings of each directory are
    /// kept until the kernel forgets the directory. A listing is taken anew when the
    /// directory's mtime or the policy epoch has changed since the newest one.
    ///
    /// In a directory that asks, every new reading is approved first, and only the
    /// process (`pid`) a listing was approved for continues it at a later offset
    /// (an offset is only a number: another process could seek to it).
    pub fn listing_at(&self, ino: u64, offset: u64, pid: u32) -> io::Result<(Arc<Listing>, u64)> {
        let s = self.snapshot();
        let node = self.node(ino)?;
        let place = self.visible_in(&s, &node)?;
        let (generation, pos) = ((offset >> 32) as u32, offset & 0xffff_ffff);
        let found = if offset != 0 {
            self.listings
                .lock()
                .get(&ino)
                .and_then(|v| v.iter().find(|l| l.generation == generation).cloned())
        } else {
            None
        };
        let asks = place.decision.action == crate::policy::Action::Ask;
        if asks && !found.as_ref().is_some_and(|l| l.approved_for(pid)) {
            self.gate(&s, &place.path, &place.decision, Access::Read, true)?;
        }
        if let Some(l) = found {
            if asks {
                l.approve_for(pid);
            }
            if l.stamp.2 == s.epoch {
                return Ok((l, pos));
            }
            // Taken under an older policy: a reader continuing it (or seeking back
            // into it) sees only what the policy in force admits now.
            return Ok((Arc::new(self.refiltered(&s, &place, &l)), pos));
        }
        let st = sys::stat(node.dir_fd()?)?;
        let stamp = (st.st_mtime, st.st_mtime_nsec, s.epoch);
        if let Some(l) = self
            .listings
            .lock()
            .get(&ino)
            .and_then(|v| v.back().filter(|l| l.stamp == stamp).cloned())
        {
            if asks {
                l.approve_for(pid);
            }
            return Ok((l, pos));
        }
        let listing = Listing {
            generation: self.next_listing.fetch_add(1, Ordering::Relaxed),
            stamp,
            entries: self.read_listing(&s.policy, &node, &place)?,
            readers: Mutex::new(if asks { vec![pid] } else { Vec::new() }),
        };
        Ok((self.keep(ino, listing), pos))
    }

    /// Keeps `listing` of directory `ino` as its newest (with the last few before
    /// it).
    fn keep(&self, ino: u64, listing: Listing) -> Arc<Listing> {
        let listing = Arc::new(listing);
        let mut all = self.listings.lock();
        let kept = all.entry(ino).or_default();
        kept.push_back(listing.clone());
        while kept.len() > 4 {
            kept.pop_front();
        }
        listing
    }

    /// After serving (part of) a listing of directory `ino`: a listing of a
    /// directory that asks, unless the session approved reading it, must not be
    /// served again from the kernel's cache (to another process, or at an offset
    /// sought to), so drop it there. Every part of it: the reader's own
    /// continuations refill the cache too.
    pub fn after_listing(&self, ino: u64) {
        let Some(node) = self.inodes.get(ino) else {
            return;
        };
        let place = node.place();
        if place.decision.action != crate::policy::Action::Ask {
            return;
        }
        if let Some(seat) = &self.seat
            && seat
                .broker
                .session_covers(seat.root, &place.path, Access::Read)
        {
            return;
        }
        self.inval.queue(super::inval::Inval::Inode(ino));
    }

    /// `listing` (taken under an older policy) as the policy of `s` admits it: the
    /// same positions, with each entry it refuses blanked (an empty name, skipped
    /// when served). An entry of unknown type is decided as a directory.
    fn refiltered(&self, s: &Snapshot, place: &Place, listing: &Listing) -> Listing {
        let entries = listing
            .entries
            .iter()
            .map(|e| {
                let path = join(&place.path, &e.name);
                let as_dir = matches!(e.kind, libc::DT_DIR | libc::DT_LNK | libc::DT_UNKNOWN);
                let d = self.decide(&s.policy, &place.decision, &path, || as_dir);
                // A permissive mount lists everything (a name is logged when it is
                // used, not when it is listed).
                if d.action.visible() || self.permissive {
                    e.clone()
                } else {
                    Listed {
                        ino: 0,
                        kind: libc::DT_UNKNOWN,
                        name: Vec::new(),
                    }
                }
            })
            .collect();
        Listing {
            generation: listing.generation,
            stamp: (listing.stamp.0, listing.stamp.1, s.epoch),
            entries,
            readers: Mutex::new(Vec::new()),
        }
    }

    /// The admitted entries of a directory, read now under one policy.
    fn read_listing(&self, policy: &Policy, node: &Node, place: &Place) -> io::Result<Vec<Listed>> {
        let reader = sys::reopen(
            self.proc_fd.as_fd(),
            node.dir_fd()?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        let dev = node.key.0;
        self.seam.run();
        let mut entries = Vec::new();
        for e in sys::read_dir(reader)? {
            let path = join(&place.path, &e.name);
            let d = self.decide(policy, &place.decision, &path, || match e.kind {
                libc::DT_DIR | libc::DT_LNK => true,
                // Not known, or gone: read as a directory (see `unseen`).
                libc::DT_UNKNOWN => std::ffi::CString::new(e.name.clone())
                    .ok()
                    .and_then(|c| sys::statat(node.dir_fd().ok()?, &c).ok())
                    .is_none_or(|st| decided_as_dir(st.st_mode)),
                _ => false,
            });
            if d.action.visible() || self.permissive {
                entries.push(Listed {
                    ino: self.inodes.listed_ino(dev, e.ino),
                    kind: e.kind,
                    name: e.name,
                });
            }
        }
        Ok(entries)
    }

    pub fn fsyncdir(&self, ino: u64, datasync: bool) -> io::Result<()> {
        let node = self.node(ino)?;
        self.visible(&node)?;
        let fd = sys::reopen(
            self.proc_fd.as_fd(),
            node.dir_fd()?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        sys::fsync(fd.as_fd(), datasync)
    }

    pub fn statfs(&self, ino: u64) -> io::Result<libc::statvfs> {
        let node = self.node(ino)?;
        sys::statvfs(self.fd_of(&node)?.as_fd())
    }

    fn xattr_target(&self, ino: u64, write: bool) -> io::Result<Arc<Node>> {
        let node = self.node(ino)?;
        if write {
            self.attributes_writable(&node)?;
        } else {
            self.visible(&node)?;
        }
        if node.fmt == libc::S_IFLNK {
            // `/proc/self/fd/N` of a link would reach its target: not supported.
            return Err(errno(libc::EOPNOTSUPP));
        }
        Ok(node)
    }

    pub fn getxattr(&self, ino: u64, name: &OsStr, size: u32) -> io::Result<(usize, Vec<u8>)> {
        let node = self.xattr_target(ino, false)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::getxattr(self.fd_of(&node)?.as_fd(), &c, size as usize)
    }

    pub fn listxattr(&self, ino: u64, size: u32) -> io::Result<(usize, Vec<u8>)> {
        let node = self.xattr_target(ino, false)?;
        sys::listxattr(self.fd_of(&node)?.as_fd(), size as usize)
    }

    pub fn setxattr(&self, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        let node = self.xattr_target(ino, true)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::setxattr(self.fd_of(&node)?.as_fd(), &c, value, flags)
    }

    pub fn removexattr(&self, ino: u64, name: &OsStr) -> io::Result<()> {
        let node = self.xattr_target(ino, true)?;
        let c = std::ffi::CString::new(name.as_bytes()).map_err(|_| errno(libc::EINVAL))?;
        sys::removexattr(self.fd_of(&node)?.as_fd(), &c)
    }

    /// `access(2)`: never asks. A path that asks answers as it would once
    /// approved (a question comes when the content is used).
    pub fn access(&self, ino: u64, mask: i32) -> io::Result<()> {
        let node = self.node(ino)?;
        let s = self.snapshot();
        let p = self.visible_in(&s, &node)?;
        if mask & libc::W_OK != 0 {
            let d = p.decision.once_approved();
            self.admit(&s.policy, &p.path, &d, Change, true)?;
            self.guard_key(node.key, &p.path)?;
        }
        Ok(())
    }

    pub fn fallocate(&self, ino: u64, fh: u64, mode: i32, offset: u64, len: u64) -> io::Result<()> {
        let io = self.io(ino, fh, true)?;
        sys::fallocate(io.file().as_fd(), mode, offset as i64, len as i64)
    }

    pub fn lseek(&self, ino: u64, fh: u64, offset: i64, whence: i32) -> io::Result<i64> {
        sys::lseek(self.io(ino, fh, false)?.file().as_fd(), offset, whence)
    }

    /// `(ino, fh, offset)` in and out. Copies at most [`MAX_COPY`] bytes (the
    /// reply counts them in a `u32`); the caller asks again for the rest.
    pub fn copy_file_range(
        &self,
        from: (u64, u64, u64),
        to: (u64, u64, u64),
        len: u64,
    ) -> io::Result<usize> {
        let (a, b) = (self.io(from.0, from.1, false)?, self.io(to.0, to.1, true)?);
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

#[derive(Clone, Copy)]
enum Kind {
    Dir,
    NotDir,
    /// Ask the backing directory, only if the decision depends on it.
    OnDisk,
}

fn kind_of(is_dir: bool) -> Kind {
    if is_dir { Kind::Dir } else { Kind::NotDir }
}

/// The most one `copy_file_range` copies: the reply's count is a `u32`, and the
/// largest page-aligned amount below that keeps the next request aligned.
pub const MAX_COPY: u64 = (u32::MAX as u64) & !0xfff;

/// The handle number of a file opened for reading without a handle (see
/// [`VeilFs::set_light_open`]).
pub const NO_HANDLE: u64 = 0;

/// Whether a directory-only pattern applies to an object of type `mode`: a
/// directory, or a symbolic link. A link named `.aws` or `secrets` (as dotfile
/// managers make them) leads to a directory, and following it must meet the rule
/// that names it; deciding it as a file would serve the link and let the kernel walk
/// through it to what the rule hides.
pub fn decided_as_dir(mode: u32) -> bool {
    matches!(mode & libc::S_IFMT, libc::S_IFDIR | libc::S_IFLNK)
}

/// Whether an open with `flags` may change the file: it writes, or truncates.
pub fn opens_for_writing(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0
}

/// The descriptor an I/O request works on (see [`VeilFs::io`]).
enum Io {
    Handle(Arc<FileHandle>),
    Node(File),
}

impl Io {
    fn file(&self) -> &File {
        match self {
            Io::Handle(h) => &h.file,
            Io::Node(f) => f,
        }
    }
}

/// Where a new node is being registered: its parent, the parent's node, and the
/// epoch of the snapshot its decision was taken under (see [`super::snapshot`]: a
/// policy reloaded meanwhile makes the cached decision stale, never current).
#[derive(Clone, Copy)]
struct Entering<'a> {
    parent: u64,
    dir: &'a Node,
    epoch: u64,
}

/// A name about to be made, removed or replaced, as [`VeilFs::changeable`] admitted it.
struct Changing {
    parent: u64,
    dir: Arc<Node>,
    name: std::ffi::CString,
    path: Vec<u8>,
    decision: Decision,
    epoch: u64,
}

impl Changing {
    fn at(&self) -> Entering<'_> {
        Entering {
            parent: self.parent,
            dir: &self.dir,
            epoch: self.epoch,
        }
    }
}

/// Whether `e` says the process is out of descriptors.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// A descriptor on a node's object, the pinned one or one opened for an operation.
enum NodeFd<'a> {
    Kept(BorrowedFd<'a>),
    Opened(OwnedFd),
}

impl AsFd for NodeFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            NodeFd::Kept(fd) => *fd,
            NodeFd::Opened(fd) => fd.as_fd(),
        }
    }
}
