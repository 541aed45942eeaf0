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

/// The two queues' receiving ends, until the threads take them.
type Receivers = (Receiver<(u64, Vec<u8>)>, Receiver<u64>);

/// The queues of invalidations; nothing is done until [`Invalidator::start`].
///
/// Two queues, each with a thread of its own: an entry's invalidation takes its
/// directory's lock and may wait as long as a request holding that lock does (a
/// rename waiting for a person's answer holds it for up to the question's
/// timeout), while a node's (its attributes and pages) takes no directory lock. So
/// a stalled entry never holds up a file's pages going stale, and nothing that
/// queues here (a request handler, the watcher) ever waits for the kernel.
#[derive(Debug)]
pub struct Invalidator {
    entries: Sender<(u64, Vec<u8>)>,
    nodes: Sender<u64>,
    receivers: Mutex<Option<Receivers>>,
}

impl Default for Invalidator {
    fn default() -> Self {
        let (entries, er) = channel();
        let (nodes, nr) = channel();
        Invalidator {
            entries,
            nodes,
            receivers: Mutex::new(Some((er, nr))),
        }
    }
}

impl Invalidator {
    /// Queues `job` (dropped if the mount is going away).
    pub fn queue(&self, job: Inval) {
        let _ = match job {
            Inval::Entry(dir, name) => self.entries.send((dir, name)).map_err(drop),
            Inval::Inode(ino) => self.nodes.send(ino).map_err(drop),
        };
    }

    /// Starts the threads that make the queued invalidations through `notifier`;
    /// they end when the filesystem (and so the queues' senders) is dropped.
    pub fn start(
        &self,
        notifier: fuser::Notifier,
        inodes: std::sync::Weak<super::inode::Inodes>,
    ) -> std::io::Result<()> {
        let Some((entries, nodes)) = self.receivers.lock().take() else {
            return Ok(());
        };
        let kept =
            move |dir: u64, name: &[u8]| inodes.upgrade().is_some_and(|i| i.entry_kept(dir, name));
        let n = notifier.clone();
        std::thread::Builder::new()
            .name("veilfs-inval".into())
            .spawn(move || {
                for (dir, name) in entries {
                    if !kept(dir, &name) {
                        // ENOENT (nothing cached) and the like need no handling.
                        let _ = n.inval_entry(fuser::INodeNo(dir), OsStr::from_bytes(&name));
                    }
                }
            })?;
        std::thread::Builder::new()
            .name("veilfs-inval-n".into())
            .spawn(move || {
                for ino in nodes {
                    let _ = notifier.inval_inode(fuser::INodeNo(ino), 0, 0);
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
/// the kernel was told ([`super::inode::Node::told`]); a node that differs, is
/// gone, or cannot be read is invalidated (attributes and pages), and for a
/// directory that differs, each name the kernel knows in it that no longer leads
/// to the same object is invalidated too. Returns how many nodes were invalidated.
pub fn invalidate_changed(inodes: &super::inode::Inodes, n: &Invalidator) -> usize {
    use super::inode::fingerprint;
    use std::sync::atomic::Ordering;
    let nodes = inodes.nodes();
    let now = |node: &super::inode::Node| -> Option<libc::stat> {
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
                && fingerprint(&st) == node.told.load(Ordering::Relaxed)
        });
        if !same {
            count += 1;
            n.queue(Inval::Inode(node.ino));
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
                n.queue(Inval::Entry(parent, name));
            }
        }
    }
    count
}

pub(crate) fn invalidate_all(inodes: &super::inode::Inodes, n: &fuser::Notifier) {
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
