//! Listings: a directory's entries as the policy admits them, kept per directory so
//! that a reader that pauses continues the listing it started (see
//! [`VeilFs::listing_at`]).

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::decided_as_dir;
use super::join;
use crate::fs::Node;
use crate::fs::Place;
use crate::fs::VeilFs;
use crate::fs::grant::Access;
use crate::fs::request::Req;
use crate::fs::snapshot::Snapshot;
use crate::policy::Policy;
use crate::sys;

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

    pub(super) fn approved_for(&self, pid: u32) -> bool {
        self.readers.lock().contains(&pid)
    }

    pub(super) fn approve_for(&self, pid: u32) {
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

impl VeilFs {
    /// `opendir`: only the policy check. Listings are kept per directory (see
    /// [`VeilFs::listing_at`]), not per handle.
    pub fn opendir(&self, cx: &Req, ino: u64) -> io::Result<()> {
        let node = self.node(ino)?;
        self.readable(cx, &node)?;
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
    /// process (`cx`'s) a listing was approved for continues it at a later offset
    /// (an offset is only a number: another process could seek to it).
    pub fn listing_at(&self, cx: &Req, ino: u64, offset: u64) -> io::Result<(Arc<Listing>, u64)> {
        let s = self.snapshot(cx);
        let pid = cx.who.pid;
        let node = self.node(ino)?;
        let place = self.visible_in(&s, &node)?;
        let (generation, pos) = ((offset >> 32) as u32, offset & 0xffff_ffff);
        let found = if offset != 0 {
            self.listings
                .by_dir
                .lock()
                .get(&ino)
                .and_then(|v| v.iter().find(|l| l.generation == generation).cloned())
        } else {
            None
        };
        let asks = place.decision.action == crate::policy::Action::Ask;
        if asks && !found.as_ref().is_some_and(|l| l.approved_for(pid)) {
            self.gate_node(&s, &node, &place, Access::Read)?;
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
            let path = self.path_of(&s, &node, &place)?;
            return Ok((Arc::new(self.refiltered(&s, &place, &path, &l)), pos));
        }
        let st = sys::stat(node.dir_fd()?)?;
        let stamp = (st.st_mtime, st.st_mtime_nsec, s.epoch);
        if let Some(l) = self
            .listings
            .by_dir
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
            generation: self.listings.next.fetch_add(1, Ordering::Relaxed),
            stamp,
            entries: self.read_listing(
                &s.policy,
                &node,
                &place,
                &self.path_of(&s, &node, &place)?,
            )?,
            readers: Mutex::new(if asks { vec![pid] } else { Vec::new() }),
        };
        Ok((self.keep(ino, listing), pos))
    }

    /// Keeps `listing` of directory `ino` as its newest (with the last few before
    /// it).
    pub(super) fn keep(&self, ino: u64, listing: Listing) -> Arc<Listing> {
        let listing = Arc::new(listing);
        let mut all = self.listings.by_dir.lock();
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
    pub fn after_listing(&self, cx: &Req, ino: u64) {
        let Some(node) = self.inodes.get(ino) else {
            return;
        };
        let place = node.place();
        if place.decision.action != crate::policy::Action::Ask {
            return;
        }
        if let Some(approvals) = &self.approvals
            && let Ok(path) = self.path_of(&self.snapshot(cx), &node, &place)
            && approvals
                .broker
                .session_covers(approvals.root, &path, Access::Read)
        {
            return;
        }
        self.inval.queue(crate::fs::inval::Inval::Inode(ino));
    }

    /// `listing` (taken under an older policy) as the policy of `s` admits it: the
    /// same positions, with each entry it refuses blanked (an empty name, skipped
    /// when served). An entry of unknown type is decided as a directory. `path` is
    /// the directory's.
    pub(super) fn refiltered(
        &self,
        s: &Snapshot,
        place: &Place,
        path: &[u8],
        listing: &Listing,
    ) -> Listing {
        let dir = path;
        let entries = listing
            .entries
            .iter()
            .map(|e| {
                let path = join(dir, &e.name);
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

    /// The admitted entries of a directory (at its place `place`, its path
    /// `path`), read now under one policy.
    pub(super) fn read_listing(
        &self,
        policy: &Policy,
        node: &Node,
        place: &Place,
        path: &[u8],
    ) -> io::Result<Vec<Listed>> {
        let dir = path;
        let reader = sys::reopen(
            self.proc_fd.as_fd(),
            node.dir_fd()?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        let dev = node.key.0;
        #[cfg(feature = "fault-injection")]
        self.mid_request.run();
        let mut entries = Vec::new();
        for e in sys::read_dir(reader)? {
            let path = join(dir, &e.name);
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

    pub fn fsyncdir(&self, cx: &Req, ino: u64, datasync: bool) -> io::Result<()> {
        let node = self.node(ino)?;
        self.visible(cx, &node)?;
        let fd = sys::reopen(
            self.proc_fd.as_fd(),
            node.dir_fd()?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        sys::fsync(fd.as_fd(), datasync)
    }
}
