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
use std::sync::atomic::{AtomicU64, Ordering};

use super::inode::{Node, Place};
use super::{FileHandle, VeilFs};
use crate::policy::{Action, Decision, Policy};
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
    fn policy(&self) -> Arc<Policy> {
        self.policy.read().clone()
    }

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
        let d = policy.decide_child(parent, path, is_dir);
        match &self.policy_file {
            Some(p) if p.as_slice() == path => d.guard_policy_file(),
            _ => d,
        }
    }

    /// A node's place with a decision that is current for this epoch.
    fn place(&self, node: &Node) -> io::Result<Place> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let place = node.place();
        if place.epoch == epoch || node.ino == super::inode::ROOT {
            return Ok(place);
        }
        // Stale: recompute from the parent chain (each parent refreshes itself).
        let parent = self.node(place.parent).map_err(|_| eacces())?;
        let pp = self.place(&parent)?;
        let path = join(&pp.path, &place.name);
        let decision = self.decide(&self.policy(), &pp.decision, &path, || node.is_dir());
        let mut st = node.place.lock();
        st.path = Arc::from(path);
        st.decision = decision;
        st.epoch = epoch;
        Ok(st.clone())
    }

    fn visible(&self, node: &Node) -> io::Result<Place> {
        let p = self.place(node)?;
        if p.decision.action.visible() {
            Ok(p)
        } else {
            Err(refuse(&p.path, &p.decision))
        }
    }

    fn writable(&self, node: &Node) -> io::Result<Place> {
        let p = self.place(node)?;
        if p.decision.action.writable() {
            Ok(p)
        } else {
            Err(refuse(&p.path, &p.decision))
        }
    }

    /// The decision for a name in a directory, asking the disk for the entry's type
    /// only if a directory-only pattern needs it.
    fn child(&self, dir: &Node, dp: &Place, name: &CStr, kind: Kind) -> (Vec<u8>, Decision) {
        let path = join(&dp.path, name.to_bytes());
        let d = self.decide(&self.policy(), &dp.decision, &path, || match kind {
            Kind::Dir => true,
            Kind::NotDir => false,
            Kind::OnDisk => dir
                .dir_fd()
                .and_then(|fd| sys::statat(fd, name))
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
        });
        (path, d)
    }

    /// Registers the backing entry `name` of `parent` as a node (one lookup).
    fn enter(
        &self,
        parent: u64,
        name: &CStr,
        dir: &Node,
        path: Vec<u8>,
        decision: Decision,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let dfd = dir.dir_fd()?;
        let mut st = sys::statat(dfd, name)?;
        let fd = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            let fd = sys::open_path(dfd, name)?;
            st = sys::stat(fd.as_fd())?;
            Some(fd)
        } else {
            None
        };
        let ino = self.inodes.id_of(st.st_ino);
        let epoch = self.epoch.load(Ordering::Acquire);
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
            ino,
            || Node {
                ino,
                fd,
                fmt: st.st_mode & libc::S_IFMT,
                place: Mutex::new(place),
                lookups: AtomicU64::new(0),
                io: Mutex::new(super::inode::IoMode::default()),
            },
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
        if let (Some(w), Some(fd)) = (&self.watcher, &node.fd) {
            w.watch(node.ino, fd.as_fd());
        }
        Ok((node, st))
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> io::Result<(Arc<Node>, libc::stat)> {
        let dir = self.node(parent)?;
        let dp = self.visible(&dir)?;
        let cname = sys::name(name)?;
        let (path, d) = self.child(&dir, &dp, &cname, Kind::OnDisk);
        if !d.action.visible() {
            return Err(refuse(&path, &d));
        }
        self.enter(parent, &cname, &dir, path, d)
    }

    pub fn forget(&self, ino: u64, n: u64) {
        let Some(node) = self.inodes.forget(ino, n) else {
            return;
        };
        self.orphans.lock().remove(&ino);
        if node.is_dir() {
            self.listings.lock().remove(&ino);
            if let Some(w) = &self.watcher {
                w.unwatch(ino);
            }
        }
    }

    /// Tells the watcher that `name` in `dir` is being changed through the mount.
    fn own(&self, dir: u64, name: &[u8]) {
        if let Some(w) = &self.watcher {
            w.own_change(dir, name);
        }
    }

    /// A descriptor on the node's inode: the kept one for a directory, else an
    /// `O_PATH` one reopened from the parent and the name, checked to be the same
    /// inode (`ESTALE` if the name now holds another).
    fn fd_of<'a>(&self, node: &'a Node) -> io::Result<NodeFd<'a>> {
        if let Some(fd) = &node.fd {
            return Ok(NodeFd::Kept(fd.as_fd()));
        }
        self.open_node(node, libc::O_PATH).map(NodeFd::Opened)
    }

    fn stat_of(&self, node: &Node) -> io::Result<libc::stat> {
        if let Some(fd) = &node.fd {
            return sys::stat(fd.as_fd());
        }
        self.through_links(node, |dir, name| sys::statat(dir, name).map(|st| (st, st)))
            .or_else(|e| self.through_held(node.ino, sys::stat).unwrap_or(Err(e)))
    }

    /// Runs `f` on each known `(parent, name)` of a descriptor-less node until one
    /// still names the node's inode; `ESTALE` when none does.
    fn through_links<T>(
        &self,
        node: &Node,
        f: impl Fn(BorrowedFd, &CStr) -> io::Result<(libc::stat, T)>,
    ) -> io::Result<T> {
        let place = node.place();
        let mut last = errno(libc::ESTALE);
        for (parent, name) in &place.links {
            let Ok(dir) = self.node(*parent) else {
                continue;
            };
            let Ok(dfd) = dir.dir_fd() else { continue };
            let name = std::ffi::CString::new(name.clone()).map_err(|_| errno(libc::EINVAL))?;
            match f(dfd, &name) {
                Ok((st, t)) if self.inodes.id_of(st.st_ino) == node.ino => return Ok(t),
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
        let place = self.writable(&node)?;
        self.own(place.parent, &place.name);
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
        sys::stat(fd)
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
        parent: u64,
        name: &OsStr,
        kind: Kind,
    ) -> io::Result<(Arc<Node>, std::ffi::CString, Vec<u8>, Decision)> {
        let dir = self.node(parent)?;
        let dp = self.visible(&dir)?;
        let cname = sys::name(name)?;
        let (path, d) = self.child(&dir, &dp, &cname, kind);
        if !d.action.writable() {
            return Err(refuse(&path, &d));
        }
        Ok((dir, cname, path, d))
    }

    /// The checks shared by every operation that makes a new name (of a directory
    /// when `is_dir`), which is then noted as changed through the mount.
    fn new_name(
        &self,
        parent: u64,
        name: &OsStr,
        is_dir: bool,
    ) -> io::Result<(Arc<Node>, std::ffi::CString, Vec<u8>, Decision)> {
        let made = self.changeable(parent, name, kind_of(is_dir))?;
        self.own(parent, made.1.to_bytes());
        Ok(made)
    }

    fn give(&self, fd: BorrowedFd, caller: Caller) -> io::Result<()> {
        if self.chown_new && caller.uid != 0 {
            sys::chown(fd, Some(caller.uid), Some(caller.gid))?;
        }
        Ok(())
    }

    fn made(
        &self,
        parent: u64,
        dir: &Node,
        name: &CStr,
        path: Vec<u8>,
        d: Decision,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let (node, _) = self.enter(parent, name, dir, path, d)?;
        let fd = self.fd_of(&node)?;
        self.give(fd.as_fd(), caller)?;
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
        let (dir, cname, path, d) = self.new_name(parent, name, false)?;
        sys::mknodat(dir.dir_fd()?, &cname, mode & !umask, rdev as u64)?;
        self.made(parent, &dir, &cname, path, d, caller)
    }

    pub fn mkdir(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let (dir, cname, path, d) = self.new_name(parent, name, true)?;
        sys::mkdirat(dir.dir_fd()?, &cname, mode & !umask)?;
        self.made(parent, &dir, &cname, path, d, caller)
    }

    pub fn symlink(
        &self,
        parent: u64,
        name: &OsStr,
        target: &OsStr,
        caller: Caller,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let (dir, cname, path, d) = self.new_name(parent, name, false)?;
        sys::symlinkat(target, dir.dir_fd()?, &cname)?;
        self.made(parent, &dir, &cname, path, d, caller)
    }

    pub fn link(
        &self,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let node = self.node(ino)?;
        // A new name for an inode changes it (its link count) and could give a
        // read-only inode a writable alias: the source must be writable too.
        self.writable(&node)?;
        let (dir, cname, path, d) = self.new_name(newparent, newname, node.is_dir())?;
        sys::linkat(
            self.proc_fd.as_fd(),
            self.fd_of(&node)?.as_fd(),
            dir.dir_fd()?,
            &cname,
        )?;
        self.enter(newparent, &cname, &dir, path, d)
    }

    fn remove(&self, parent: u64, name: &OsStr, is_dir: bool) -> io::Result<()> {
        let kind = if is_dir { Kind::Dir } else { Kind::OnDisk };
        let (dir, cname, _, _) = self.changeable(parent, name, kind)?;
        let st = sys::statat(dir.dir_fd()?, &cname)?;
        self.own(parent, cname.to_bytes());
        self.keep_orphan(&dir, &cname, &st);
        sys::unlinkat(dir.dir_fd()?, &cname, is_dir)?;
        if let Some(n) = self.inodes.get(self.inodes.id_of(st.st_ino)) {
            let mut p = n.place.lock();
            let gone = (parent, cname.to_bytes().to_vec());
            p.links.retain(|l| *l != gone);
            if (p.parent, p.name.clone()) == gone
                && let Some((np, nn)) = p.links.first().cloned()
            {
                // The decision was for the removed name: recompute it for another.
                p.parent = np;
                p.name = nn;
                p.epoch = u64::MAX;
            }
        }
        Ok(())
    }

    /// Before the last name of a file the kernel holds goes away: keeps an `O_PATH`
    /// descriptor on it, so that a process that opened it without a handle (see
    /// [`VeilFs::set_light_open`]) can go on reading it, as POSIX allows.
    /// Dropped when the kernel forgets the node.
    fn keep_orphan(&self, dir: &Node, name: &CStr, st: &libc::stat) {
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink != 1 {
            return;
        }
        let ino = self.inodes.id_of(st.st_ino);
        if self.inodes.get(ino).is_none() {
            return;
        }
        if let Ok(fd) = dir.dir_fd().and_then(|d| sys::open_path(d, name))
            && sys::stat(fd.as_fd()).is_ok_and(|now| now.st_ino == st.st_ino)
        {
            self.orphans.lock().insert(ino, fd);
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
        let policy = self.policy();
        let (from_dir, to_dir) = (self.node(parent)?, self.node(newparent)?);
        let (fp, tp) = (self.visible(&from_dir)?, self.visible(&to_dir)?);
        let (from, to) = (sys::name(name)?, sys::name(newname)?);
        let from_st = sys::statat(from_dir.dir_fd()?, &from)?;
        let from_is_dir = from_st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;

        // The source as it is, and as it would be at the destination.
        let (from_path, from_now) = self.child(&from_dir, &fp, &from, kind_of(from_is_dir));
        let (to_path, from_then) = self.child(&to_dir, &tp, &to, kind_of(from_is_dir));
        if !from_now.action.writable() {
            return Err(refuse(&from_path, &from_now));
        }
        if !from_then.action.writable() {
            return Err(refuse(&to_path, &from_then));
        }
        // Whatever sits at the destination is replaced (or, for an exchange, moved
        // to the source's place): its own decision must allow that too.
        let to_st = sys::statat(to_dir.dir_fd()?, &to).ok();
        if let Some(st) = &to_st {
            let to_is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let (_, to_now) = self.child(&to_dir, &tp, &to, kind_of(to_is_dir));
            if !to_now.action.writable() {
                return Err(refuse(&to_path, &to_now));
            }
            if exchange {
                let (_, to_then) = self.child(&from_dir, &fp, &from, kind_of(to_is_dir));
                if !to_then.action.writable() {
                    return Err(refuse(&from_path, &to_then));
                }
                if to_is_dir {
                    let fd =
                        sys::openat(to_dir.dir_fd()?, &to, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                    self.no_exposure(&policy, fd, &to_path, &to_now, &from_path, &to_then)?;
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
            self.no_exposure(&policy, fd, &from_path, &from_now, &to_path, &from_then)?;
        }

        // A moved directory takes its kernel-cached subtree along under a new path
        // whose decisions may differ: let the watcher's echo drop those dentries
        // (their attributes would otherwise stay visible until the TTL).
        let moves_dir = from_is_dir
            || to_st
                .as_ref()
                .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if !moves_dir {
            self.own(parent, from.to_bytes());
            self.own(newparent, to.to_bytes());
        }
        if !exchange && let Some(st) = &to_st {
            self.keep_orphan(&to_dir, &to, st);
        }
        sys::renameat2(from_dir.dir_fd()?, &from, to_dir.dir_fd()?, &to, flags)?;

        // Keep the moved nodes' places in step, then invalidate every cached decision
        // (descendants of a moved directory now live under another path).
        self.moved(
            parent,
            from.to_bytes(),
            newparent,
            to.to_bytes(),
            from_st.st_ino,
        );
        if exchange && let Some(st) = to_st {
            self.moved(newparent, to.to_bytes(), parent, from.to_bytes(), st.st_ino);
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(moves_dir)
    }

    /// The entry `old_parent/old` (backing inode `backing`) is now `new_parent/new`.
    fn moved(&self, old_parent: u64, old: &[u8], new_parent: u64, new: &[u8], backing: u64) {
        if let Some(n) = self.inodes.get(self.inodes.id_of(backing)) {
            let mut p = n.place.lock();
            let (from, to) = ((old_parent, old.to_vec()), (new_parent, new.to_vec()));
            p.links.retain(|l| *l != from && *l != to);
            p.links.insert(0, to);
            p.parent = new_parent;
            p.name = new.to_vec();
        }
    }

    /// Invariant 4: moving the directory `dir` from `old_path` to `new_path` must not
    /// make anything beneath it more permissive. Walks the backing subtree.
    fn no_exposure(
        &self,
        policy: &Policy,
        dir: OwnedFd,
        old_path: &[u8],
        old: &Decision,
        new_path: &[u8],
        new: &Decision,
    ) -> io::Result<()> {
        if old.action == Action::Deny && new.action == Action::Deny {
            return Ok(());
        }
        let reader = sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        for e in sys::read_dir(reader)? {
            let cname = std::ffi::CString::new(e.name.clone()).map_err(|_| errno(libc::EINVAL))?;
            let is_dir = match e.kind {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => sys::statat(dir.as_fd(), &cname)
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            let op = join(old_path, &e.name);
            let np = join(new_path, &e.name);
            let od = self.decide(policy, old, &op, || is_dir);
            let nd = self.decide(policy, new, &np, || is_dir);
            if nd.action < od.action {
                // Report the descendant that would be exposed, as it is now.
                return Err(refuse(&op, &od));
            }
            if is_dir {
                let sub = sys::openat(dir.as_fd(), &cname, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                self.no_exposure(policy, sub, &op, &od, &np, &nd)?;
            }
        }
        Ok(())
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    fn register(&self, fd: OwnedFd, ino: u64) -> u64 {
        let fh = self.new_fh();
        self.files.write().insert(
            fh,
            Arc::new(FileHandle {
                file: File::from(fd),
                ino,
                backing: Mutex::new(None),
                counted: std::sync::atomic::AtomicBool::new(false),
            }),
        );
        fh
    }

    /// Runs `f` on a descriptor the daemon still holds on inode `ino`, for an inode
    /// that no name reaches any more (a file unlinked while open keeps working): an
    /// open handle's, else the `O_PATH` one kept by `keep_orphan`. `None` when
    /// there is neither.
    fn through_held<T>(
        &self,
        ino: u64,
        f: impl FnOnce(BorrowedFd) -> io::Result<T>,
    ) -> Option<io::Result<T>> {
        let handle = self.files.read().values().find(|h| h.ino == ino).cloned();
        match handle {
            Some(h) => Some(f(h.file.as_fd())),
            None => self.orphans.lock().get(&ino).map(|fd| f(fd.as_fd())),
        }
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
        self.visible(&node).map(drop)
    }

    pub fn open(&self, ino: u64, flags: i32) -> io::Result<u64> {
        let node = self.node(ino)?;
        let writes = opens_for_writing(flags);
        if writes {
            let place = self.writable(&node)?;
            self.own(place.parent, &place.name);
        } else {
            self.visible(&node)?;
        }
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY);
        let mut fd = self.open_node(&node, flags)?;
        if self.may_register_backing(&node, writes, fd.as_fd()) {
            // This descriptor may become the passthrough backing file that every
            // handle on the inode shares, writers included: open it read-write (the
            // kernel still enforces each opener's own access mode).
            if let Ok(rw) = self.open_node(&node, (flags & !libc::O_ACCMODE) | libc::O_RDWR) {
                fd = rw;
            }
        }
        Ok(self.register(fd, ino))
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
        let (dir, cname, path, d) = self.new_name(parent, name, false)?;
        let flags = if self.passthrough.load(Ordering::Relaxed) {
            (flags & !libc::O_ACCMODE) | libc::O_RDWR
        } else {
            flags
        };
        let fd = sys::openat(dir.dir_fd()?, &cname, flags | libc::O_CREAT, mode & !umask)?;
        let (node, st) = self.made(parent, &dir, &cname, path, d, caller)?;
        let fh = self.register(fd, node.ino);
        Ok((node, st, fh))
    }

    /// Whether a handle opened now on `node` could register the inode's passthrough
    /// backing file: passthrough is on, no other handle is open, and the file will be
    /// written or is large (see [`super::PASSTHROUGH_MIN_SIZE`]).
    fn may_register_backing(&self, node: &Node, writes: bool, fd: BorrowedFd) -> bool {
        node.fmt == libc::S_IFREG
            && self.passthrough.load(Ordering::Relaxed)
            && node.io.lock().open == 0
            && (writes
                || sys::stat(fd).is_ok_and(|st| st.st_size as u64 >= super::PASSTHROUGH_MIN_SIZE))
    }

    /// Opens the node's inode with `flags`: one name relative to its parent's
    /// descriptor (checked to be the same inode), or, for an inode no name reaches
    /// any more, through a descriptor the daemon holds on it.
    fn open_node(&self, node: &Node, flags: i32) -> io::Result<OwnedFd> {
        if let Some(fd) = &node.fd {
            return sys::reopen(self.proc_fd.as_fd(), fd.as_fd(), flags);
        }
        self.through_links(node, |dir, name| {
            let fd = sys::openat(dir, name, flags, 0)?;
            Ok((sys::stat(fd.as_fd())?, fd))
        })
        .or_else(|e| {
            self.through_held(node.ino, |fd| sys::reopen(self.proc_fd.as_fd(), fd, flags))
                .unwrap_or(Err(e))
        })
    }

    /// What an I/O request works on: the handle it names, or, for handle 0 (a file
    /// opened for reading without a handle, see [`VeilFs::set_light_open`]), the
    /// node reopened for this one request after the check an open would have made.
    fn io(&self, ino: u64, fh: u64, write: bool) -> io::Result<Io> {
        if fh != NO_HANDLE {
            return self.file(fh).map(Io::Handle);
        }
        let node = self.node(ino)?;
        let access = if write {
            let place = self.writable(&node)?;
            self.own(place.parent, &place.name);
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
        if let Io::Handle(h) = &io
            && self.watcher.is_some()
            && let Some(node) = self.inodes.get(h.ino)
        {
            let place = node.place();
            self.own(place.parent, &place.name);
        }
        io.file().write_all_at(data, offset)?;
        Ok(data.len() as u32)
    }

    pub fn release(&self, fh: u64) {
        let Some(h) = self.files.write().remove(&fh) else {
            return;
        };
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
        self.visible(&node)?;
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
    pub fn listing_at(&self, ino: u64, offset: u64) -> io::Result<(Arc<Listing>, u64)> {
        let node = self.node(ino)?;
        let place = self.visible(&node)?;
        let (generation, pos) = ((offset >> 32) as u32, offset & 0xffff_ffff);
        if offset != 0
            && let Some(l) = self
                .listings
                .lock()
                .get(&ino)
                .and_then(|v| v.iter().find(|l| l.generation == generation).cloned())
        {
            return Ok((l, pos));
        }
        let st = sys::stat(node.dir_fd()?)?;
        let stamp = (
            st.st_mtime,
            st.st_mtime_nsec,
            self.epoch.load(Ordering::Acquire),
        );
        if let Some(l) = self
            .listings
            .lock()
            .get(&ino)
            .and_then(|v| v.back().filter(|l| l.stamp == stamp).cloned())
        {
            return Ok((l, pos));
        }
        let listing = Arc::new(Listing {
            generation: self.next_listing.fetch_add(1, Ordering::Relaxed),
            stamp,
            entries: self.read_listing(&node, &place)?,
        });
        let mut all = self.listings.lock();
        let kept = all.entry(ino).or_default();
        kept.push_back(listing.clone());
        while kept.len() > 4 {
            kept.pop_front();
        }
        Ok((listing, pos))
    }

    /// The admitted entries of a directory, read now under one policy.
    fn read_listing(&self, node: &Node, place: &Place) -> io::Result<Vec<Listed>> {
        let reader = sys::reopen(
            self.proc_fd.as_fd(),
            node.dir_fd()?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        let policy = self.policy();
        let mut entries = Vec::new();
        for e in sys::read_dir(reader)? {
            let path = join(&place.path, &e.name);
            let d = self.decide(&policy, &place.decision, &path, || match e.kind {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => std::ffi::CString::new(e.name.clone())
                    .ok()
                    .and_then(|c| sys::statat(node.dir_fd().ok()?, &c).ok())
                    .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            });
            if d.action.visible() {
                entries.push(Listed {
                    ino: self.inodes.id_of(e.ino),
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
            self.writable(&node)?;
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

    pub fn access(&self, ino: u64, mask: i32) -> io::Result<()> {
        let node = self.node(ino)?;
        if mask & libc::W_OK != 0 {
            self.writable(&node)?;
        } else {
            self.visible(&node)?;
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

    /// `(ino, fh, offset)` in and out.
    pub fn copy_file_range(
        &self,
        from: (u64, u64, u64),
        to: (u64, u64, u64),
        len: u64,
    ) -> io::Result<usize> {
        let (a, b) = (self.io(from.0, from.1, false)?, self.io(to.0, to.1, true)?);
        let (off_in, off_out) = (from.2, to.2);
        sys::copy_file_range(
            a.file().as_fd(),
            off_in as i64,
            b.file().as_fd(),
            off_out as i64,
            len as usize,
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

/// The handle number of a file opened for reading without a handle (see
/// [`VeilFs::set_light_open`]).
pub const NO_HANDLE: u64 = 0;

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

/// A descriptor on a node's inode, kept by the node or opened for one operation.
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
