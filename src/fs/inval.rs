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
    pub fn start(&self, notifier: fuser::Notifier) -> std::io::Result<()> {
        let Some(rx) = self.rx.lock().take() else {
            return Ok(());
        };
        std::thread::Builder::new()
            .name("veilfs-inval".into())
            .spawn(move || {
                for job in rx {
                    // ENOENT (nothing cached) and the like need no handling.
                    let _ = match job {
                        Inval::Entry(dir, name) => {
                            notifier.inval_entry(fuser::INodeNo(dir), OsStr::from_bytes(&name))
                        }
                        Inval::Inode(ino) => notifier.inval_inode(fuser::INodeNo(ino), 0, 0),
                    };
                }
            })?;
        Ok(())
    }
}
