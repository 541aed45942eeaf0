//! Kernel cache invalidations that a request handler asks for and a thread of their
//! own makes once the request is answered.
//!
//! A handler must not invalidate a kernel entry itself: the kernel takes the
//! directory's lock to do it, and the request being answered (or another one waiting
//! for this very thread) may hold that lock. So handlers queue the invalidation here
//! and reply; the invalidation follows within moments, blocking only this thread
//! while the kernel finishes the request.

use parking_lot::Mutex;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc::{Receiver, Sender, channel};

#[derive(Debug)]
pub enum Inval {
    /// The kernel's entry `name` in directory node `dir` (with, for a directory,
    /// everything it cached beneath it).
    Entry(u64, Vec<u8>),
    /// A node's cached attributes and pages.
    Inode(u64),
}

/// The queue of invalidations; nothing is done until [`Invalidator::start`].
#[derive(Debug)]
pub struct Invalidator {
    tx: Sender<Inval>,
    rx: Mutex<Option<Receiver<Inval>>>,
}

impl Default for Invalidator {
    fn default() -> Self {
        let (tx, rx) = channel();
        Invalidator {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

impl Invalidator {
    /// Queues `job` (dropped if the mount is going away).
    pub fn queue(&self, job: Inval) {
        let _ = self.tx.send(job);
    }

    /// Starts the thread that makes the queued invalidations through `notifier`; it
    /// ends when the filesystem (and so the queue's sender) is dropped.
    pub fn start(
        &self,
        notifier: fuser::Notifier,
        inodes: std::sync::Weak<super::Inodes>,
    ) -> std::io::Result<()> {
        let Some(rx) = self.rx.lock().take() else {
            return Ok(());
        };
        let kept =
            move |dir: u64, name: &[u8]| inodes.upgrade().is_some_and(|i| i.entry_kept(dir, name));
        std::thread::Builder::new()
            .name("veilfs-inval".into())
            .spawn(move || {
                for job in rx {
                    // ENOENT (nothing cached) and the like need no handling.
                    let _ = match job {
                        Inval::Entry(dir, name) if !kept(dir, &name) => {
                            notifier.inval_entry(fuser::INodeNo(dir), OsStr::from_bytes(&name))
                        }
                        Inval::Entry(..) => Ok(()),
                        Inval::Inode(ino) => notifier.inval_inode(fuser::INodeNo(ino), 0, 0),
                    };
                }
            })?;
        Ok(())
    }
}

/// Tells the kernel to drop every entry, attribute, page and listing it cached for
/// the mount: each name of each node it holds, and each node itself (a directory's
/// listing with it). The kernel caches no negative entries (a lookup that finds
/// nothing answers `ENOENT`), so nothing else can be stale. Blocks while the kernel
/// takes directory locks: never call it from a request handler.
/// After inotify lost events (a queue overflow): invalidates in the kernel only
/// what changed on disk since its attributes were last handed over, instead of
/// every cache of the mount. Each node held is `fstat`ed (through its descriptor,
/// else by a name in a directory held) and compared with the fingerprint of what
/// the kernel was told ([`super::inode::Node::attrs_sent`]); a node that differs, is
/// gone, or cannot be read is invalidated (attributes and pages), and for a
/// directory that differs, each name the kernel knows in it that no longer leads
/// to the same object is invalidated too. Returns how many nodes were invalidated.
pub fn invalidate_changed(inodes: &super::Inodes, n: &fuser::Notifier) -> usize {
    use super::inode::fingerprint;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::Ordering;
    let nodes = inodes.nodes();
    let now = |node: &super::Node| -> Option<libc::stat> {
        if let Some(fd) = node.fd() {
            return crate::sys::stat(fd).ok();
        }
        let place = node.place();
        place.links.iter().find_map(|(p, name)| {
            let dir = inodes.get(*p)?;
            let c = std::ffi::CString::new(name.clone()).ok()?;
            crate::sys::statat(dir.dir_fd().ok()?, &c).ok()
        })
    };
    let mut changed_dirs = std::collections::HashSet::new();
    let mut count = 0;
    for node in &nodes {
        let same = now(node).is_some_and(|st| {
            super::inode::key_of(&st) == node.key
                && fingerprint(&st) == node.attrs_sent.load(Ordering::Relaxed)
        });
        if !same {
            count += 1;
            let _ = n.inval_inode(fuser::INodeNo(node.ino), 0, 0);
            if node.is_dir() {
                changed_dirs.insert(node.ino);
            }
        }
    }
    if changed_dirs.is_empty() {
        return count;
    }
    // The names the kernel knows in a changed directory: kept where they still lead
    // to the same object.
    for node in &nodes {
        for (parent, name) in node.place().links {
            if !changed_dirs.contains(&parent) || inodes.entry_kept(parent, &name) {
                continue;
            }
            let there = inodes.get(parent).and_then(|dir| {
                let c = std::ffi::CString::new(name.clone()).ok()?;
                crate::sys::statat(dir.dir_fd().ok()?, &c).ok()
            });
            if there.is_none_or(|st| super::inode::key_of(&st) != node.key) {
                let _ = n.inval_entry(fuser::INodeNo(parent), OsStr::from_bytes(&name));
            }
        }
    }
    count
}

pub(crate) fn invalidate_all(inodes: &super::Inodes, n: &fuser::Notifier) {
    for known in inodes.snapshot() {
        for (parent, name) in &known.links {
            if !inodes.entry_kept(*parent, name) {
                let _ = n.inval_entry(fuser::INodeNo(*parent), OsStr::from_bytes(name));
            }
        }
        let _ = n.inval_inode(fuser::INodeNo(known.ino), 0, 0);
    }
    let _ = n.inval_inode(fuser::INodeNo(super::inode::ROOT), 0, 0);
}
