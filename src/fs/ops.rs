//! Every filesystem operation as a plain function returning `io::Result`: the policy
//! check first, then one syscall relative to a parent's descriptor. This is the only
//! place the policy is enforced; every refusal is [`eacces`].

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

mod exposure;
mod files;
mod listing;
mod names;
mod rename;
mod unseen;
mod xattr;

pub use listing::{Listed, Listing};

pub use unseen::shown_nlink;

use super::ask::Access;
use super::gate::{Intent, Target};
use super::permissive::Need::{Change, See};
use super::refusal::errno;
pub use super::refusal::{Refusal, eacces, refusal_of, refuse};
use super::request::Req;
use super::snapshot::Snapshot;
use super::{Node, Place, VeilFs};
use crate::policy::{Decision, Policy};
use crate::sys;

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

impl Caller {
    /// The user and group of the request `cx`.
    pub fn of(cx: &Req) -> Caller {
        Caller {
            uid: cx.who.uid,
            gid: cx.who.gid,
        }
    }
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

    /// The decision for `path` given its parent's, as the gatekeeper marks it (see
    /// [`super::gate::Gatekeeper::mark`]).
    fn decide(
        &self,
        policy: &Policy,
        parent: &Decision,
        path: &[u8],
        is_dir: impl FnOnce() -> bool,
    ) -> Decision {
        if !self.gate.wants_kind() {
            let d = policy.decide_child(parent, path, is_dir);
            return self.gate.mark(path, &mut || false, d);
        }
        let is_dir = is_dir();
        let d = policy.decide_child(parent, path, || is_dir);
        self.gate.mark(path, &mut || is_dir, d)
    }

    /// What the gatekeeper's guards say to `intent` at `at` (see
    /// [`super::gate::Gatekeeper::check`]): never waived, by a permissive mount or
    /// an approval.
    pub(super) fn guarded(&self, at: &Target, intent: Intent) -> io::Result<()> {
        Ok(self.gate.check(at, intent)?)
    }

    /// A node's place with a decision that is current for this epoch.
    ///
    /// A stale place is recomputed from the nearest ancestor whose place is current,
    /// walking up and then down without recursion (any depth). Each step goes through
    /// the node's name in a parent the kernel still holds: its decision name, else
    /// another of its links; a node none of whose parents is held any more (the kernel
    /// forgot them) has no place to be decided at, and is refused (with everything
    /// beneath it) until a lookup finds it again.
    fn place(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let epoch = s.epoch;
        let place = node.place();
        // With a directory left unwatched, an outside move may go unseen: no cached
        // place is trusted, and every directory on the way is checked.
        let unwatched = self.places_unwatched();
        let current = |e: u64| e == epoch && !unwatched;
        if current(place.epoch) || node.ino == super::inode::ROOT {
            return Ok(place);
        }
        // Stale nodes from `node` up, each with the parent it is decided under.
        let mut stale: Vec<(Option<Arc<Node>>, Place)> = vec![(None, place)];
        let mut base: Option<(Arc<Node>, Place)> = None;
        let limit = self.inodes.len() + 1;
        loop {
            let top = stale.len() - 1;
            let Some((parent, name)) = self.inodes.anchor(&stale[top].1) else {
                break;
            };
            let pp = parent.place();
            stale[top].1.parent = parent.ino;
            stale[top].1.name = name;
            if current(pp.epoch) || parent.ino == super::inode::ROOT {
                base = Some((parent, pp));
                break;
            }
            if stale.len() > limit {
                // A cycle in the recorded parents (should not happen): fail closed.
                return Err(eacces());
            }
            stale.push((Some(parent), pp));
        }
        let above = match base {
            Some((n, pp)) => {
                let path = self.path_of(s, &n, &pp)?;
                Some((pp, path))
            }
            None => None,
        };
        self.redecide(s, node, stale, above)
    }

    /// The downward half of [`VeilFs::place`]: decides the `stale` places (the
    /// innermost first, `node`'s own) under `above` (the place and path of the
    /// outermost one's parent; `None` when no parent of it is held), stores them,
    /// and returns `node`'s.
    fn redecide(
        &self,
        s: &Snapshot,
        node: &Node,
        mut stale: Vec<(Option<Arc<Node>>, Place)>,
        mut above: Option<(Place, Arc<[u8]>)>,
    ) -> io::Result<Place> {
        let mut result = None;
        while let Some((n, mut p)) = stale.pop() {
            let target: &Node = n.as_deref().unwrap_or(node);
            let is_dir = target.decided_as_dir();
            let path: Arc<[u8]> = match &above {
                // A directory moved or removed outside the mount to a place not
                // seen (see `watch`): its old path means nothing now, so it is
                // refused, and everything beneath it, until a lookup finds it again.
                Some((_, pp_path))
                    if target.is_dir() && !self.inodes.holds(p.parent, &p.name, target) =>
                {
                    p.decision = Decision::lost();
                    Arc::from(join(pp_path, &p.name))
                }
                Some((pp, pp_path)) => {
                    let path = join(pp_path, &p.name);
                    p.decision = self.decide(&s.policy, &pp.decision, &path, || is_dir);
                    Arc::from(path)
                }
                // No parent held: named by its last name alone, in refusals.
                None => {
                    p.decision = Decision::lost();
                    Arc::from(&p.name[..])
                }
            };
            self.recomputed.fetch_add(1, Ordering::Relaxed);
            p.epoch = s.epoch;
            p.path = Place::keeps(target.fmt, path.len()).then(|| path.clone());
            if target.is_dir() && p.path.is_none() && !self.places_unwatched() {
                self.inodes.remember_path(target, s.epoch, &path);
            }
            {
                let mut st = target.place.lock();
                st.parent = p.parent;
                st.name = p.name.clone();
                st.path = p.path.clone();
                st.decision = p.decision.clone();
                st.epoch = s.epoch;
                p.links = st.links.clone();
            }
            if n.is_none() {
                result = Some(p.clone());
            }
            above = Some((p, path));
        }
        result.ok_or_else(eacces)
    }

    /// The workspace-relative path of `node`, whose place is `place`: the one the
    /// place keeps while current for `s`, else spelled from the names on the way
    /// up to the nearest directory whose path is known for `s` (kept in its place,
    /// or spelled recently: see [`super::inode::Inodes::recent_path`]) or the root.
    /// A walk of one lock at a time, without recursion; `EACCES` when the way up is
    /// broken (a parent the kernel no longer holds, or a cycle in the recorded
    /// parents).
    pub(super) fn path_of(
        &self,
        s: &Snapshot,
        node: &Node,
        place: &Place,
    ) -> io::Result<Arc<[u8]>> {
        let root = node.ino == super::inode::ROOT;
        if let Some(path) = &place.path
            && (place.epoch == s.epoch || root)
        {
            return Ok(path.clone());
        }
        if root {
            return Ok(Arc::from(&b""[..]));
        }
        // Paths spelled earlier are used only while no outside move can go unseen.
        let recent = !self.places_unwatched();
        if recent
            && node.is_dir()
            && let Some(path) = self.inodes.recent_path(node, s.epoch)
        {
            return Ok(path);
        }
        let (mut dir, name) = self.inodes.anchor(place).ok_or_else(eacces)?;
        // Spelled backwards (each name reversed, the whole reversed at the end), so
        // that no step allocates.
        let mut rev: Vec<u8> = name.iter().rev().copied().collect();
        let mut whole = false;
        for _ in 0..=self.inodes.len() {
            if dir.ino == super::inode::ROOT {
                whole = true;
                break;
            }
            rev.push(b'/');
            let mark = rev.len();
            let up = {
                let p = dir.place.lock();
                match &p.path {
                    Some(path) if p.epoch == s.epoch => {
                        rev.extend(path.iter().rev());
                        None
                    }
                    _ => {
                        rev.extend(p.name.iter().rev());
                        Some(p.parent)
                    }
                }
            };
            let Some(up) = up else {
                whole = true;
                break;
            };
            if recent && let Some(path) = self.inodes.recent_path(&dir, s.epoch) {
                rev.truncate(mark);
                rev.extend(path.iter().rev());
                whole = true;
                break;
            }
            dir = self.inodes.get(up).ok_or_else(eacces)?;
        }
        if !whole {
            // A cycle in the recorded parents (should not happen): fail closed.
            return Err(eacces());
        }
        rev.reverse();
        let path: Arc<[u8]> = Arc::from(rev);
        if recent && node.is_dir() {
            self.inodes.remember_path(node, s.epoch, &path);
        }
        Ok(path)
    }

    /// Whether a place may have moved unseen: a directory was left unwatched (see
    /// [`VeilFs::place`]).
    fn places_unwatched(&self) -> bool {
        self.unwatched || self.watcher.as_ref().is_some_and(|w| w.missed())
    }

    fn visible(&self, cx: &Req, node: &Node) -> io::Result<Place> {
        self.visible_in(&self.snapshot(cx), node)
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
        self.admit_node(s, node, &p, &p.decision, See, log)?;
        Ok(p)
    }

    /// [`VeilFs::admit`] for `node` at its place `p`: its path is spelled only for
    /// a check that `d` does not meet outright (a refusal, or what a permissive
    /// mount logs), or for an allowed change the audit log wants.
    fn admit_node(
        &self,
        s: &Snapshot,
        node: &Node,
        p: &Place,
        d: &Decision,
        need: super::permissive::Need,
        log: bool,
    ) -> io::Result<()> {
        let logged = log && need == Change && self.logs_allowed();
        if need.met_by(d) && !logged {
            return Ok(());
        }
        self.admit(s, &self.path_of(s, node, p)?, d, need, log)
    }

    /// [`VeilFs::gate`] for `node` at its place `p` (its path spelled only for a
    /// path that asks).
    fn gate_node(
        &self,
        s: &Snapshot,
        node: &Node,
        p: &Place,
        access: Access,
    ) -> io::Result<Option<Decision>> {
        if p.decision.action != crate::policy::Action::Ask {
            return Ok(None);
        }
        let path = self.path_of(s, node, p)?;
        self.gate(s, &path, &p.decision, access, node.decided_as_dir())
    }

    /// [`VeilFs::guarded`] for a change to `node`'s object at its place `p` (its path
    /// spelled only for an object a guard keeps).
    fn guard_node(&self, s: &Snapshot, node: &Node, p: &Place) -> io::Result<()> {
        if !self.gate.keeps_object(node.key) {
            return Ok(());
        }
        let path = self.path_of(s, node, p)?;
        let at = Target::at(&path, node.fmt).holding(Some(node.key));
        self.guarded(&at, Intent::Change)
    }

    fn writable(&self, cx: &Req, node: &Node) -> io::Result<Place> {
        self.writable_in(&self.snapshot(cx), node)
    }

    fn writable_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let p = self.place(s, node)?;
        let approved = self.gate_node(s, node, &p, Access::Write)?;
        let d = approved.as_ref().unwrap_or(&p.decision);
        self.admit_node(s, node, &p, d, Change, true)?;
        self.guard_node(s, node, &p)?;
        Ok(p)
    }

    /// The node's content may be read (opened for reading, listed): visible, and
    /// approved where the path asks (see [`super::ask`]).
    fn readable(&self, cx: &Req, node: &Node) -> io::Result<Place> {
        self.readable_in(&self.snapshot(cx), node)
    }

    fn readable_in(&self, s: &Snapshot, node: &Node) -> io::Result<Place> {
        let p = self.visible_in(s, node)?;
        self.gate_node(s, node, &p, Access::Read)?;
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
        if let Some(d) = self.waived_question(s, path, d, access) {
            return Ok(Some(d));
        }
        super::ask::gate(self.approvals.as_ref(), s.req, path, d, access, is_dir).map(Some)
    }

    /// The node's own attributes may be changed (see
    /// [`Decision::for_own_attributes`]).
    fn attributes_writable(&self, cx: &Req, node: &Node) -> io::Result<Place> {
        let s = self.snapshot(cx);
        let p = self.writable_in(&s, node)?;
        let d = p.decision.for_own_attributes(s.policy.default_action());
        self.admit_node(&s, node, &p, &d, Change, true)?;
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
    ) -> io::Result<(Vec<u8>, Decision)> {
        let path = join(&self.path_of(s, dir, dp)?, name.to_bytes());
        let d = match kind {
            Kind::Dir => self.decide(&s.policy, &dp.decision, &path, || true),
            Kind::NotDir => self.decide(&s.policy, &dp.decision, &path, || false),
            Kind::OnDisk => {
                self.decide_on_disk(&s.policy, dir, &dp.decision, &path, name)
                    .0
            }
        };
        Ok((path, d))
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
        let (fd, st) = if self.inodes.pinned() < self.limits.nodes {
            match sys::open_path(dfd, name) {
                Ok(fd) => {
                    let st = sys::stat(fd.as_fd())?;
                    (Some(fd), st)
                }
                Err(e) if out_of_descriptors(&e) => {
                    self.shed_cached_entries();
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
                    self.shed_cached_entries();
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
    fn shed_cached_entries(&self) {
        let batch = (self.limits.nodes / 4).max(16);
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
    fn named(&self, node: &Node) -> io::Result<()> {
        if node.ino == super::inode::ROOT {
            return Ok(());
        }
        let ((), (parent, name)) = self
            .inodes
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

    /// [`VeilFs::named`] for an open, which may also open a file whose last name
    /// was removed through the mount after the kernel looked it up: a name renamed
    /// over by another process (natively the open gets the file the name held when
    /// it was looked up, and so does it here; an `ESTALE` would make the kernel look
    /// the name up again, and under a stream of renames over it the second try can
    /// meet the same fate, which the opener then sees). Such a file is decided under
    /// that last name, the one its removal went through, checked against the policy
    /// in force. Only while nothing names it any more: link count 0, so no name can
    /// ever be given to it again (the kernel links no such inode), and none was
    /// given outside the mount that the daemon does not know of.
    fn still_named(&self, node: &Node) -> io::Result<()> {
        let Err(e) = self.named(node) else {
            return Ok(());
        };
        // A rename through the mount may be under way: its places are kept in step
        // once it is made (under `names`). Wait for it, then look again.
        drop(self.names.read());
        match self.named(node) {
            Err(_) if self.orphaned(node) => Ok(()),
            Err(_) => Err(e),
            Ok(()) => Ok(()),
        }
    }

    /// Whether `node`'s last name was removed through the mount and nothing names
    /// its object any more (see [`VeilFs::still_named`]).
    fn orphaned(&self, node: &Node) -> bool {
        node.place.lock().links.is_empty()
            && node
                .fd()
                .is_some_and(|fd| sys::stat(fd).is_ok_and(|st| st.st_nlink == 0))
    }

    /// Pins a node the kernel is opening (see [`super::inode`]), so that it is read
    /// and written as itself whatever happens to its names, while fewer than
    /// [`VeilFs::pin_cap`] nodes are pinned (past that it stays reached by its names).
    fn pin(&self, node: &Node) {
        if node.fd().is_some() || self.inodes.pinned() >= self.limits.pins {
            return;
        }
        if let Ok(fd) = self.inodes.through_links(node, |dir, name| {
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
        let place = Place {
            parent,
            name: name.to_bytes().to_vec(),
            links: vec![(parent, name.to_bytes().to_vec())],
            path: Place::keeps(st.st_mode & libc::S_IFMT, path.len()).then(|| Arc::from(&path[..])),
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
                    links.push(link.clone());
                }
                // A second name for the same inode (a hard link): keep the more
                // restrictive of the two decisions while both are current. A lost
                // directory (see `place`) is found again: here, with this name only.
                let lost = matches!(p.decision.reason, crate::policy::Reason::Lost);
                if p.epoch != epoch || lost || fresh.decision.action >= p.decision.action {
                    *p = fresh;
                }
                if lost {
                    links = vec![link];
                }
                p.links = links;
            },
        );
        if let Some(fd) = fd {
            self.inodes.pin(&node, fd);
        }
        if node.is_dir() && path.len() > super::inode::CACHED_PATH_MAX && !self.places_unwatched() {
            self.inodes.remember_path(&node, epoch, &Arc::from(path));
        }
        if let Some(w) = &self.watcher
            && node.is_dir()
            && let Some(fd) = node.fd()
        {
            w.watch(node.ino, fd);
        }
        Ok((node, st))
    }

    pub fn lookup(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let s = self.snapshot(cx);
        let dir = self.node(parent)?;
        let dp = self.dir_visible_in(&s, &dir)?;
        let cname = sys::name(name)?;
        #[cfg(feature = "fault-injection")]
        self.mid_request.run();
        let path = join(&self.path_of(&s, &dir, &dp)?, cname.to_bytes());
        let (d, as_file) = self.decide_on_disk(&s.policy, &dir, &dp.decision, &path, &cname);
        self.admit(&s, &path, &d, See, true)?;
        let at = Entering {
            parent,
            dir: &dir,
            epoch: s.epoch,
        };
        let recheck = as_file.then(|| path.clone());
        // A name the policy lets the caller look up and that is not there is
        // logged too (`--audit-all`): a probe the policy must keep answering.
        let probed = self.logs_allowed().then(|| (path.clone(), d.clone()));
        let (node, st) = self.enter(at, &cname, path, d).inspect_err(|e| {
            if let Some((path, d)) = probed
                && e.raw_os_error() == Some(libc::ENOENT)
            {
                self.allowed_absent(cx, path, d);
            }
        })?;
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
            self.listings.by_dir.lock().remove(&ino);
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

    /// Attributes of a node. Through an open handle (`fstat`, or the kernel's own
    /// refresh during a read) they are served without asking the policy again: a
    /// descriptor the daemon opened (`--strict-open`, or a file created before the
    /// kernel began opening files without asking) keeps working after its path is
    /// denied, as with Unix permissions.
    pub fn getattr(&self, cx: &Req, ino: u64, fh: Option<u64>) -> io::Result<libc::stat> {
        if let Some(h) = fh.and_then(|fh| self.file(fh).ok())
            && h.ino == ino
        {
            return sys::stat(h.file.as_fd());
        }
        let node = self.node(ino)?;
        self.visible(cx, &node)?;
        self.inodes.stat_of(&node)
    }

    pub fn setattr(
        &self,
        cx: &Req,
        ino: u64,
        a: &SetAttr,
        fh: Option<u64>,
    ) -> io::Result<libc::stat> {
        let node = self.node(ino)?;
        let place = self.attributes_writable(cx, &node)?;
        let own = self.own(place.parent, &place.name);
        let nfd = self.inodes.fd_of(&node)?;
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
            match fh.and_then(|h| self.handles.files.read().get(&h).cloned()) {
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

    pub fn readlink(&self, cx: &Req, ino: u64) -> io::Result<Vec<u8>> {
        let node = self.node(ino)?;
        self.visible(cx, &node)?;
        sys::readlink(self.inodes.fd_of(&node)?.as_fd())
    }

    pub fn statfs(&self, ino: u64) -> io::Result<rustix::fs::StatVfs> {
        let node = self.node(ino)?;
        sys::statvfs(self.inodes.fd_of(&node)?.as_fd())
    }

    /// `access(2)`: never asks. A path that asks answers as it would once
    /// approved (a question comes when the content is used).
    pub fn access(&self, cx: &Req, ino: u64, mask: i32) -> io::Result<()> {
        let node = self.node(ino)?;
        let s = self.snapshot(cx);
        let p = self.visible_in(&s, &node)?;
        if mask & libc::W_OK != 0 {
            let d = p.decision.once_approved();
            self.admit_node(&s, &node, &p, &d, Change, true)?;
            self.guard_node(&s, &node, &p)?;
        }
        Ok(())
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
/// [`crate::fs::config::FsConfig::light_open`]).
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
