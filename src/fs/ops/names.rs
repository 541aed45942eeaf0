//! Making and removing names: create-like operations (`mknod`, `mkdir`,
//! `symlink`, `link`) and `unlink`/`rmdir`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use super::Caller;
use super::Changing;
use super::Kind;
use crate::fs::Node;
use crate::fs::VeilFs;
use crate::fs::gate::Event;
use crate::fs::gate::Intent;
use crate::fs::gate::Target;
use crate::fs::grant::Access;
use crate::fs::inode::Key;
use crate::fs::inode::key_of;
use crate::fs::permissive::Need::Change;
use crate::fs::request::Req;
use crate::fs::snapshot::Snapshot;
use crate::sys;

impl VeilFs {
    /// A name in a directory that is about to be made, removed or replaced: the
    /// directory is visible and the name's own decision (for `kind`) allows changes.
    pub(super) fn changeable(
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
        let (path, d) = self.child(s, &dir, &dp, &cname, kind)?;
        let approved = self.gate(s, &path, &d, Access::Write, matches!(kind, Kind::Dir))?;
        let may = approved.as_ref().unwrap_or(&d);
        self.admit(s, &path, may, Change, true)?;
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
    pub(super) fn new_name(
        &self,
        s: &Snapshot,
        parent: u64,
        name: &OsStr,
        is_dir: bool,
    ) -> io::Result<(Changing, crate::fs::watch::Own<'_>)> {
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
    pub(super) fn give(&self, dir: BorrowedFd, fd: BorrowedFd, caller: Caller) -> io::Result<()> {
        if self.chown_new && caller.uid != 0 {
            let setgid = sys::stat(dir)?.st_mode & libc::S_ISGID != 0;
            let gid = if setgid { None } else { Some(caller.gid) };
            sys::chown(fd, Some(caller.uid), gid)?;
        }
        Ok(())
    }

    /// Registers the entry `c` just made (found by its name) and gives it to the caller.
    pub(super) fn made(&self, c: Changing, caller: Caller) -> io::Result<(Arc<Node>, libc::stat)> {
        let (node, _) = self.enter(c.at(), &c.name, c.path.clone(), c.decision.clone())?;
        let fd = self.inodes.fd_of(&node)?;
        self.give(c.dir.dir_fd()?, fd.as_fd(), caller)?;
        let st = sys::stat(fd.as_fd())?;
        drop(fd);
        Ok((node, st))
    }

    pub fn mknod(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let caller = Caller::of(cx);
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(cx), parent, name, false)?;
        // A type of 0 makes a regular file.
        let kind = if mode & libc::S_IFMT == 0 {
            libc::S_IFREG
        } else {
            mode
        };
        self.guarded(&Target::at(&c.path, kind), Intent::Make)?;
        sys::mknodat(c.dir.dir_fd()?, &c.name, mode & !umask, rdev as u64)?;
        own.done_if(self.made(c, caller))
    }

    pub fn mkdir(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let caller = Caller::of(cx);
        let _names = self.names.read();
        let (c, own) = self.new_name(&self.snapshot(cx), parent, name, true)?;
        self.guarded(&Target::at(&c.path, libc::S_IFDIR), Intent::Make)?;
        sys::mkdirat(c.dir.dir_fd()?, &c.name, mode & !umask)?;
        self.gate.note(Event::MadeDir(&c.path));
        own.done_if(self.made(c, caller))
    }

    pub fn symlink(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        target: &OsStr,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let caller = Caller::of(cx);
        let _names = self.names.read();
        // A link is decided as a directory would be (see `decided_as_dir`).
        let (c, own) = self.new_name(&self.snapshot(cx), parent, name, true)?;
        self.guarded(&Target::at(&c.path, libc::S_IFLNK), Intent::Make)?;
        sys::symlinkat(target, c.dir.dir_fd()?, &c.name)?;
        own.done_if(self.made(c, caller))
    }

    pub fn link(
        &self,
        cx: &Req,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
    ) -> io::Result<(Arc<Node>, libc::stat)> {
        let _names = self.names.read();
        let node = self.node(ino)?;
        // A new name for an inode changes it (its link count) and could give a
        // read-only inode a writable alias: the source must be writable too, under
        // a name that still reaches it (never an orphan: see `still_named`).
        self.named(&node)?;
        let s = self.snapshot(cx);
        self.writable_in(&s, &node)?;
        let (c, own) = self.new_name(&s, newparent, newname, node.decided_as_dir())?;
        let mode = sys::stat(self.inodes.fd_of(&node)?.as_fd())?.st_mode;
        self.guarded(&Target::at(&c.path, mode), Intent::Make)?;
        sys::linkat(
            self.proc_fd.as_fd(),
            self.inodes.fd_of(&node)?.as_fd(),
            c.dir.dir_fd()?,
            &c.name,
        )?;
        own.done_if(self.enter(c.at(), &c.name, c.path.clone(), c.decision.clone()))
    }

    pub(super) fn remove(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        is_dir: bool,
    ) -> io::Result<()> {
        let kind = if is_dir { Kind::Dir } else { Kind::OnDisk };
        let c = self.changeable(&self.snapshot(cx), parent, name, kind)?;
        let st = sys::statat(c.dir.dir_fd()?, &c.name)?;
        let at = Target::at(&c.path, st.st_mode).holding(Some(key_of(&st)));
        self.guarded(&at, Intent::Remove)?;
        let own = self.own(parent, c.name.to_bytes());
        sys::unlinkat(c.dir.dir_fd()?, &c.name, is_dir)?;
        if is_dir {
            self.gate.note(Event::Vacated(&c.path));
        }
        own.done();
        self.unlinked(parent, c.name.to_bytes(), crate::fs::inode::key_of(&st));
        Ok(())
    }

    /// The name `parent/name` of the backing object `key` is gone. The node (if the
    /// kernel holds it) keeps its descriptor, so a process that still has the file
    /// open goes on reading and writing it, as POSIX allows.
    pub(super) fn unlinked(&self, parent: u64, name: &[u8], key: Key) {
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

    pub fn unlink(&self, cx: &Req, parent: u64, name: &OsStr) -> io::Result<()> {
        self.remove(cx, parent, name, false)
    }

    pub fn rmdir(&self, cx: &Req, parent: u64, name: &OsStr) -> io::Result<()> {
        self.remove(cx, parent, name, true)
    }
}
