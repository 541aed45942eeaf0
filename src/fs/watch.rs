//! Keeping long kernel caches coherent with edits made outside the mount.
//!
//! Every directory the kernel holds (every directory node) is watched with inotify.
//! When a name in it is created, removed or renamed, its kernel dentry and the
//! directory's attributes are invalidated; when a file in it is written or its
//! attributes change, that file's attributes and cached pages are invalidated. The
//! kernel can only have cached what lies in a directory it holds, so these watches
//! cover everything it caches. Changes made through the mount itself are recorded for
//! a moment and not echoed back, so they do not throw away fresh cache entries.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::inode::Inodes;
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

/// How long a change made through the mount suppresses the watcher's echo of it.
const OWN_CHANGE: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub struct Watcher {
    fd: OwnedFd,
    /// watch descriptor → directory node, and back.
    wds: Mutex<(HashMap<i32, u64>, HashMap<u64, i32>)>,
    /// (directory node, name) changed through the mount, and when.
    own: Mutex<HashMap<(u64, Vec<u8>), Instant>>,
}

impl Watcher {
    pub fn new() -> io::Result<Watcher> {
        Ok(Watcher {
            fd: sys::inotify_init()?,
            wds: Mutex::new((HashMap::new(), HashMap::new())),
            own: Mutex::new(HashMap::new()),
        })
    }

    /// Watches the directory node `ino` (idempotent).
    pub fn watch(&self, ino: u64, dir: BorrowedFd) {
        let mut w = self.wds.lock();
        if w.1.contains_key(&ino) {
            return;
        }
        // A full watch table only costs coherence for this directory until the TTL.
        if let Ok(wd) = sys::inotify_add_watch(self.fd.as_fd(), dir, MASK) {
            w.0.insert(wd, ino);
            w.1.insert(ino, wd);
        }
    }

    /// Whether directory node `ino` is watched (its entries may be cached long).
    pub fn is_watched(&self, ino: u64) -> bool {
        self.wds.lock().1.contains_key(&ino)
    }

    pub fn unwatch(&self, ino: u64) {
        let mut w = self.wds.lock();
        if let Some(wd) = w.1.remove(&ino) {
            w.0.remove(&wd);
            let _ = sys::inotify_rm_watch(self.fd.as_fd(), wd);
        }
    }

    /// Notes a change to `name` in directory `dir` made through the mount.
    pub fn own_change(&self, dir: u64, name: &[u8]) {
        let mut own = self.own.lock();
        let now = Instant::now();
        if own.len() > 4096 {
            own.retain(|_, t| now.duration_since(*t) < OWN_CHANGE);
        }
        own.insert((dir, name.to_vec()), now);
    }

    fn is_own(&self, dir: u64, name: &[u8]) -> bool {
        self.own
            .lock()
            .get(&(dir, name.to_vec()))
            .is_some_and(|t| t.elapsed() < OWN_CHANGE)
    }

    /// Reads events until the filesystem is gone (its node table dropped),
    /// invalidating through `notifier`.
    pub fn run(self: Arc<Self>, inodes: Weak<Inodes>, notifier: fuser::Notifier) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match sys::poll_readable(self.fd.as_fd(), 500) {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    if inodes.strong_count() == 0 {
                        return;
                    }
                    continue;
                }
            }
            let Some(inodes) = inodes.upgrade() else {
                return;
            };
            let n = match sys::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            // Coalesce one batch: each (dir, name) is invalidated once.
            let mut entries: HashSet<(u64, Vec<u8>)> = HashSet::new();
            let mut files: HashSet<(u64, Vec<u8>)> = HashSet::new();
            let mut dirs: HashSet<u64> = HashSet::new();
            for (wd, mask, name) in events(&buf[..n]) {
                if mask & libc::IN_IGNORED != 0 {
                    let mut w = self.wds.lock();
                    if let Some(ino) = w.0.remove(&wd) {
                        w.1.remove(&ino);
                    }
                    continue;
                }
                let Some(dir) = self.wds.lock().0.get(&wd).copied() else {
                    continue;
                };
                if name.is_empty() {
                    dirs.insert(dir);
                } else if self.is_own(dir, name) {
                    continue;
                } else if mask
                    & (libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO)
                    != 0
                {
                    entries.insert((dir, name.to_vec()));
                    dirs.insert(dir);
                } else {
                    files.insert((dir, name.to_vec()));
                }
            }
            for (dir, name) in &entries {
                let _ = notifier.inval_entry(fuser::INodeNo(*dir), OsStr::from_bytes(name));
            }
            for (dir, name) in &files {
                if let Some(ino) = child_ino(&inodes, *dir, name) {
                    let _ = notifier.inval_inode(fuser::INodeNo(ino), 0, 0);
                }
            }
            for dir in dirs {
                let _ = notifier.inval_inode(fuser::INodeNo(dir), 0, 0);
            }
        }
    }
}

/// The events in a buffer read from an inotify descriptor: (watch descriptor,
/// mask, name — empty for an event on the watched directory itself).
pub(crate) fn events(buf: &[u8]) -> impl Iterator<Item = (i32, u32, &[u8])> {
    let mut off = 0;
    std::iter::from_fn(move || {
        if off + 16 > buf.len() {
            return None;
        }
        let wd = i32::from_ne_bytes(buf[off..off + 4].try_into().unwrap());
        let mask = u32::from_ne_bytes(buf[off + 4..off + 8].try_into().unwrap());
        let len = u32::from_ne_bytes(buf[off + 12..off + 16].try_into().unwrap()) as usize;
        let raw = &buf[off + 16..(off + 16 + len).min(buf.len())];
        off += 16 + len;
        Some((
            wd,
            mask,
            &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())],
        ))
    })
}

/// The node id of `name` in directory node `dir`, if the kernel holds it.
fn child_ino(inodes: &Inodes, dir: u64, name: &[u8]) -> Option<u64> {
    let d = inodes.get(dir)?;
    let c = CString::new(name).ok()?;
    let st = sys::statat(d.dir_fd().ok()?, &c).ok()?;
    let ino = inodes.id_of(st.st_ino);
    inodes.get(ino).map(|_| ino)
}
