//! Invariant 4: renaming a directory may never expose a descendant.
//!
//! The check walks the backing subtree of the directory being moved and decides
//! every entry under its old path and under its new one; an entry whose new decision
//! is more permissive than its old one refuses the rename, and so does one that
//! could be changed where it is and would arrive where no name may be made (a
//! read-only or denied path): moving it there would make that name.
//!
//! The subtree may be as deep as the backing filesystem allows (far deeper than
//! `PATH_MAX`, or than a request thread's stack could recurse), so the walk is a loop
//! over an explicit stack of [`Level`]s, and it holds few descriptors:
//! * a directory is listed, and each of its entries decided, as soon as it is opened;
//!   afterwards its descriptor is needed only to open the subdirectories still to
//!   walk, and is closed as soon as the last of them is open (a bare chain of
//!   directories, however long, is walked holding three at a time);
//! * beyond [`HELD`] descriptors, the shallowest level's is closed; when the walk
//!   comes back to that level it reopens it one name at a time from the nearest level
//!   that still holds one (the first level always does), checking that each name
//!   still holds the directory it held.
//!
//! The two paths are kept in one growing buffer each (a level records where its own
//! path ends), so memory grows with the depth, not with its square.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::{errno, refuse};
use crate::fs::VeilFs;
use crate::fs::gate::{Intent, Target};
use crate::fs::snapshot::Snapshot;
use crate::policy::{Action, Decision, Policy, Reason};
use crate::sys;

/// At most this many directory descriptors are held by one walk.
const HELD: usize = 64;

/// One directory on the walk's stack.
struct Level {
    /// `None` once closed to respect [`HELD`], or when no subdirectory is left.
    fd: Option<OwnedFd>,
    /// `(st_dev, st_ino)`, to check a reopened descriptor.
    id: (u64, u64),
    /// Its name in the level above (unused for the first level).
    name: CString,
    /// Where its old and new paths end in the walk's buffers.
    old_end: usize,
    new_end: usize,
    /// Subdirectories still to walk, with their old and new decisions.
    todo: Vec<(CString, Decision, Decision)>,
}

/// One walk: the stack and the two path buffers.
struct Walk<'a> {
    fs: &'a VeilFs,
    policy: &'a Policy,
    levels: Vec<Level>,
    old_path: Vec<u8>,
    new_path: Vec<u8>,
    /// Levels holding a descriptor.
    held: usize,
    /// No level below this index (but the first) holds a descriptor.
    low: usize,
    /// The most descriptors held at once, and how many levels were reopened.
    peak: usize,
    reopened: usize,
}

fn push_name(path: &mut Vec<u8>, name: &[u8]) {
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
}

/// The type bits (`S_IFMT`) of the entry `name` in `dir` listed as `kind`.
fn entry_mode(dir: std::os::fd::BorrowedFd, name: &CString, kind: u8) -> u32 {
    match kind {
        libc::DT_DIR => libc::S_IFDIR,
        libc::DT_REG => libc::S_IFREG,
        libc::DT_LNK => libc::S_IFLNK,
        _ => sys::statat(dir, name).map_or(0, |st| st.st_mode & libc::S_IFMT),
    }
}

fn identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    sys::stat(fd.as_fd()).map(|st| (st.st_dev, st.st_ino))
}

fn open_dir(dir: &OwnedFd, name: &CString) -> io::Result<OwnedFd> {
    sys::openat(dir.as_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0)
}

impl VeilFs {
    /// Invariant 4: moving the directory `dir` from `old_path` to `new_path` (with
    /// the decisions `old` and `new`) must not make anything beneath it more
    /// permissive. `EACCES` names the first descendant that would be exposed.
    pub(super) fn no_exposure(
        &self,
        s: &Snapshot,
        dir: OwnedFd,
        old_path: &[u8],
        old: &Decision,
        new_path: &[u8],
        new: &Decision,
    ) -> io::Result<()> {
        if old.action == Action::Deny && new.action == Action::Deny {
            return Ok(());
        }
        // In a permissive mount nothing is hidden to expose: the rename it would
        // have refused is logged. What git would obey is refused there too.
        Walk::new(self, &s.policy, old_path, new_path)
            .check(dir, old, new)
            .or_else(|e| match super::refusal_of(&e) {
                Some(r) if matches!(r.decision.reason, Reason::GitControl) => Err(e),
                _ => self.admit_refusal(s, e),
            })
    }
}

impl<'a> Walk<'a> {
    fn new(fs: &'a VeilFs, policy: &'a Policy, old_path: &[u8], new_path: &[u8]) -> Self {
        Walk {
            fs,
            policy,
            levels: Vec::new(),
            old_path: old_path.to_vec(),
            new_path: new_path.to_vec(),
            held: 0,
            low: 1,
            peak: 0,
            reopened: 0,
        }
    }

    /// Walks the directory `dir` (at the buffers' paths, with decisions `old` and
    /// `new`) and everything beneath it.
    fn check(&mut self, dir: OwnedFd, old: &Decision, new: &Decision) -> io::Result<()> {
        self.enter(dir, CString::default(), old, new)?;
        self.run()
    }

    /// Lists the directory `fd` (whose paths are now at the end of the buffers),
    /// checks each entry, and pushes it as a level if subdirectories remain.
    fn enter(
        &mut self,
        fd: OwnedFd,
        name: CString,
        old: &Decision,
        new: &Decision,
    ) -> io::Result<()> {
        let reader = sys::openat(fd.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        let (old_end, new_end) = (self.old_path.len(), self.new_path.len());
        let mut todo = Vec::new();
        for e in sys::read_dir(reader)? {
            let cname = CString::new(e.name.clone()).map_err(|_| errno(libc::EINVAL))?;
            let is_dir = match e.kind {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => sys::statat(fd.as_fd(), &cname)
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            push_name(&mut self.old_path, &e.name);
            push_name(&mut self.new_path, &e.name);
            // Decided as a directory if it is one or a symbolic link (see
            // `decided_as_dir`); walked only if it is one.
            let as_dir = is_dir
                || e.kind == libc::DT_LNK
                || (e.kind == libc::DT_UNKNOWN
                    && sys::statat(fd.as_fd(), &cname)
                        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK));
            let od = self.fs.decide(self.policy, old, &self.old_path, || as_dir);
            let nd = self.fs.decide(self.policy, new, &self.new_path, || as_dir);
            if nd.action < od.action || nd.granted() < od.granted() {
                // Report the descendant that would be exposed, as it is now.
                return Err(refuse(&self.old_path, &od));
            }
            // Nor may a name that could be changed arrive where none may be made
            // (a directory renamed onto `cfg` bringing `prod.yaml` to a read-only
            // `cfg/prod.yaml`): every name that comes into existence is checked.
            if od.action.writable() && !nd.action.writable() {
                return Err(refuse(&self.new_path, &nd));
            }
            // Nor may it bring into a git directory what git would obey there.
            let mode = entry_mode(fd.as_fd(), &cname, e.kind);
            let at = Target::at(&self.new_path, mode);
            self.fs.guarded(
                &at,
                Intent::Carry {
                    from: &self.old_path,
                },
            )?;
            self.old_path.truncate(old_end);
            self.new_path.truncate(new_end);
            // Below a directory denied on both sides nothing can be exposed.
            if is_dir && !(od.action == Action::Deny && nd.action == Action::Deny) {
                todo.push((cname, od, nd));
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        let id = identity(&fd)?;
        self.levels.push(Level {
            fd: Some(fd),
            id,
            name,
            old_end,
            new_end,
            todo,
        });
        self.held += 1;
        self.peak = self.peak.max(self.held);
        self.bound();
        Ok(())
    }

    /// Walks until the stack is empty.
    fn run(&mut self) -> io::Result<()> {
        while let Some(top) = self.levels.last_mut() {
            let Some((name, od, nd)) = top.todo.pop() else {
                self.leave();
                continue;
            };
            let (old_end, new_end) = (top.old_end, top.new_end);
            if top.fd.is_none() {
                self.reopen()?;
            }
            let i = self.levels.len() - 1;
            let top = &mut self.levels[i];
            let sub = open_dir(top.fd.as_ref().ok_or_else(|| errno(libc::EBADF))?, &name)?;
            if top.todo.is_empty() && i > 0 {
                // Nothing left to open from here.
                top.fd = None;
                self.held -= 1;
            }
            self.old_path.truncate(old_end);
            self.new_path.truncate(new_end);
            push_name(&mut self.old_path, name.as_bytes());
            push_name(&mut self.new_path, name.as_bytes());
            self.enter(sub, name, &od, &nd)?;
        }
        Ok(())
    }

    /// Pops the finished top level.
    fn leave(&mut self) {
        if let Some(done) = self.levels.pop()
            && done.fd.is_some()
        {
            self.held -= 1;
        }
        self.low = self.low.min(self.levels.len().max(1));
    }

    /// Closes the shallowest held descriptor (never the first level's) while more
    /// than [`HELD`] are held.
    fn bound(&mut self) {
        let top = self.levels.len() - 1;
        while self.held > HELD && self.low < top {
            if self.levels[self.low].fd.take().is_some() {
                self.held -= 1;
            }
            self.low += 1;
        }
    }

    /// Reopens the top level's descriptor one name at a time from the nearest level
    /// below that holds one; `ESTALE` if a name no longer holds the directory the
    /// walk saw there.
    fn reopen(&mut self) -> io::Result<()> {
        let top = self.levels.len() - 1;
        let from = (0..top)
            .rev()
            .find(|&i| self.levels[i].fd.is_some())
            .ok_or_else(|| errno(libc::EBADF))?;
        let mut fd: Option<OwnedFd> = None;
        for level in &self.levels[from + 1..=top] {
            let base = match &fd {
                Some(f) => f,
                None => self.levels[from]
                    .fd
                    .as_ref()
                    .ok_or_else(|| errno(libc::EBADF))?,
            };
            let next = open_dir(base, &level.name)?;
            if identity(&next)? != level.id {
                return Err(errno(libc::ESTALE));
            }
            fd = Some(next);
        }
        self.levels[top].fd = fd;
        self.held += 1;
        self.peak = self.peak.max(self.held);
        self.reopened += 1;
        self.low = self.low.min(top);
        self.bound();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPTH: usize = 3 * HELD;

    /// `top/…`, `DEPTH` levels deep, where every level has two subdirectories: the
    /// walk goes down one while the other waits (each holds a file), so it must hold
    /// a descriptor per level or close and reopen some. `secret` is at the bottom.
    fn tree(root: &std::path::Path) {
        let mut dir = std::fs::File::open(root).map(OwnedFd::from).unwrap();
        sys::mkdirat(dir.as_fd(), c"top", 0o755).unwrap();
        dir = open_dir(&dir, &CString::from(c"top")).unwrap();
        for _ in 0..DEPTH {
            for name in [c"a", c"b"] {
                sys::mkdirat(dir.as_fd(), name, 0o755).unwrap();
                let sub = open_dir(&dir, &name.into()).unwrap();
                sys::openat(sub.as_fd(), c"f", libc::O_CREAT | libc::O_WRONLY, 0o644).unwrap();
            }
            // The walk takes the last entry of a listing first: go on there.
            let reader =
                sys::openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
            let listing = sys::read_dir(reader).unwrap();
            let first = CString::new(listing.last().unwrap().name.clone()).unwrap();
            dir = open_dir(&dir, &first).unwrap();
        }
        sys::openat(
            dir.as_fd(),
            c"secret",
            libc::O_CREAT | libc::O_WRONLY,
            0o644,
        )
        .unwrap();
    }

    /// Checks moving `top` to `moved` under `rules`; the walk's peak descriptors and
    /// reopened levels.
    fn walk(rules: &str) -> (io::Result<()>, usize, usize) {
        let tmp = tempfile::tempdir().unwrap();
        tree(tmp.path());
        let policy = Policy::parse("test.toml", rules).unwrap();
        let fs = VeilFs::new(
            tmp.path(),
            Policy::parse("test.toml", rules).unwrap(),
            None,
            Default::default(),
        )
        .unwrap();
        let root = std::fs::File::open(tmp.path()).map(OwnedFd::from).unwrap();
        let top = sys::openat(root.as_fd(), c"top", libc::O_PATH | libc::O_DIRECTORY, 0).unwrap();
        let (old, new) = (policy.decide(b"top", true), policy.decide(b"moved", true));
        let mut w = Walk::new(&fs, &policy, b"top", b"moved");
        let r = w.check(top, &old, &new);
        (r, w.peak, w.reopened)
    }

    #[test]
    fn a_deep_tree_with_waiting_siblings_is_walked_with_bounded_descriptors() {
        let (r, peak, reopened) = walk("default = \"allow\"\n");
        r.unwrap();
        assert!(peak <= HELD + 1, "{peak} descriptors held at once");
        assert!(reopened > 0, "no level was closed and reopened");
    }

    #[test]
    fn the_bounded_walk_still_finds_the_file_it_would_expose() {
        let (r, peak, _) = walk("[[rules]]\naction = \"deny\"\npaths = [\"/top/**/secret\"]\n");
        let e = r.expect_err("the rename would expose top/…/secret");
        let refusal = e
            .get_ref()
            .and_then(|x| x.downcast_ref::<super::super::Refusal>());
        assert!(
            refusal.is_some_and(|r| r.path.ends_with(b"/secret")),
            "refused for the wrong reason: {e}"
        );
        assert!(peak <= HELD + 1, "{peak} descriptors held at once");
    }
}
