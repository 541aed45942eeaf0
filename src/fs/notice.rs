//! Refusal notices: a refused attempt to make a name says so on the daemon's stderr,
//! once per path, naming the rule.
//!
//! A tool that meets a refusal reports a bare `Permission denied`, often deep in its
//! own output (`git clone`: "unable to checkout working tree"). So the first refusal
//! of each path that would have come into existence is said on stderr, e.g.
//!
//! ```text
//! veilfs: deploy/prod.key: create or lookup refused: rule 1 "*.key" (<built-in>:25:3): …
//! ```
//!
//! Under `veilfs run` the daemon's stderr is the invoking stderr. The audit log
//! (`--audit`) has every refusal; these notices are for the person watching.
//!
//! Which refusals: those of the operations that make a name (create, mknod, mkdir,
//! symlink, link, rename), and a refused lookup of a denied name that does not exist
//! in the backing directory. The kernel looks every name up before it creates it, so
//! a create of a denied name ends at that lookup; the daemon cannot tell it from a
//! probe of a missing name, hence "create or lookup". A refused lookup of a name that
//! exists is not noticed here (reading a hidden secret is what the policy is for).
//!
//! Bounded: at most [`MAX_PATHS`] paths are remembered and said; after that one line
//! says that further refusals go unsaid. Requests never wait on stderr: lines go
//! through a bounded queue to a thread of their own (a line that does not fit is
//! dropped), which is joined when the filesystem goes away.

use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::VeilFs;
use super::inode::Node;
use crate::policy::Decision;
use crate::sys;

/// How many distinct paths are said at most during one mount.
pub const MAX_PATHS: usize = 256;

/// The operations whose refusal is noticed: each would make a name.
const MAKING: [&str; 6] = ["create", "mknod", "mkdir", "symlink", "link", "rename"];

/// The paths already said, and the thread that says them.
#[derive(Default)]
pub struct Notices {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    seen: HashSet<Vec<u8>>,
    /// The limit was reached and said so.
    full: bool,
    tx: Option<SyncSender<String>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notices")
    }
}

impl Notices {
    /// Whether a refusal of `path` would still be said (it was not, and the limit is
    /// not reached).
    pub fn wants(&self, path: &[u8]) -> bool {
        let inner = self.inner.lock();
        !inner.full && !inner.seen.contains(path)
    }

    /// Says, once per path, that `op` on `path` was refused because of `decision`.
    pub fn refused(&self, op: &str, path: &[u8], decision: &Decision) {
        let mut inner = self.inner.lock();
        if inner.full || inner.seen.contains(path) {
            return;
        }
        let line = if inner.seen.len() >= MAX_PATHS {
            inner.full = true;
            format!("veilfs: more than {MAX_PATHS} refused names; further ones are not said here")
        } else {
            inner.seen.insert(path.to_vec());
            format!(
                "veilfs: {}: {op} refused: {}",
                String::from_utf8_lossy(path),
                decision.why()
            )
        };
        if inner.tx.is_none() {
            let (tx, rx) = sync_channel::<String>(64);
            let spawned = std::thread::Builder::new()
                .name("veilfs-notice".into())
                .spawn(move || {
                    while let Ok(line) = rx.recv() {
                        eprintln!("{line}");
                    }
                });
            match spawned {
                Ok(t) => {
                    inner.tx = Some(tx);
                    inner.thread = Some(t);
                }
                Err(e) => {
                    log::warn!("refusal notices: no thread ({e}): {line}");
                    return;
                }
            }
        }
        if let Some(tx) = &inner.tx {
            let _ = tx.try_send(line);
        }
    }
}

impl Drop for Notices {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        inner.tx = None;
        if let Some(t) = inner.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether a refusal of `op` is noticed whatever the disk holds.
pub fn makes_a_name(op: &str) -> bool {
    MAKING.contains(&op)
}

impl VeilFs {
    /// A lookup of `name` in `dir` (at `path`) was refused by `decision`: notice it if
    /// no such entry exists (it may be the kernel's first step of a create).
    pub(crate) fn notice_refused_lookup(
        &self,
        dir: &Node,
        name: &CStr,
        path: &[u8],
        decision: &Decision,
    ) {
        if !self.notices.wants(path) {
            return;
        }
        let absent = dir
            .dir_fd()
            .and_then(|fd| sys::statat(fd, name))
            .is_err_and(|e| e.raw_os_error() == Some(libc::ENOENT));
        if absent {
            self.notices.refused("create or lookup", path, decision);
        }
    }
}
