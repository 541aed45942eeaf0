//! The node table: one entry per inode the kernel knows about.
//!
//! Invariants:
//! * A directory node (and the root) keeps `fd`: an `O_PATH | O_NOFOLLOW` descriptor
//!   on the backing directory, opened relative to its parent's `fd` with one name. Its
//!   children are reached only through it. Other nodes keep no descriptor (a walk of
//!   100,000 files must not hold 100,000 of them): they are reopened from their
//!   parent's `fd` and their name, and the inode number is checked against the node.
//! * The FUSE node id is the backing `st_ino`, except that the source root is node 1
//!   (`FUSE_ROOT_ID`) and a backing inode numbered 1 takes the root's number instead
//!   (a bijection, so ids never collide within one backing filesystem).
//! * `lookups` counts the entries replied to the kernel for this node; `forget`
//!   subtracts. A node at zero is dropped (the root never is), so memory is bounded by
//!   what the kernel caches, not by what was ever walked.
//! * A node's policy path and decision are derived from its parent's and its name.
//!   They are cached with the filesystem's `epoch`; a directory rename or a policy
//!   reload bumps the epoch, and a stale cache is recomputed from the parent chain
//!   before it is used. Only one node's `state` lock is held at a time.

use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::policy::Decision;

pub const ROOT: u64 = 1;

/// What the policy knows about a node's place in the workspace.
#[derive(Clone, Debug)]
pub struct Place {
    /// The name the decision is for: `(parent, name)` is one of `links`.
    pub parent: u64,
    pub name: Vec<u8>,
    /// Every `(parent, name)` the node is known under (more than one for a hard-linked
    /// file); a node without a descriptor is reopened through the first that still
    /// names its inode.
    pub links: Vec<(u64, Vec<u8>)>,
    /// Workspace-relative path (empty for the root).
    pub path: Arc<[u8]>,
    pub decision: Decision,
    pub epoch: u64,
}

#[derive(Debug)]
pub struct Node {
    pub ino: u64,
    /// Directories only (see the invariants above).
    pub fd: Option<OwnedFd>,
    /// `st_mode & S_IFMT` of the backing entry (a type never changes).
    pub fmt: u32,
    pub place: Mutex<Place>,
    pub lookups: AtomicU64,
    /// How the kernel does I/O on this inode while handles are open.
    pub io: Mutex<IoMode>,
}

/// The kernel keeps one I/O mode per inode while any handle is open: cached (the
/// page cache, reads and writes through the daemon) or passthrough (one backing
/// file). Opening a handle in the other mode fails with EIO, so the mode is chosen
/// when the first handle opens and kept until the last one is released.
#[derive(Debug, Default)]
pub struct IoMode {
    /// Handles open on the inode (as far as the daemon has been told).
    pub open: u32,
    /// Meaningful while `open > 0`.
    pub passthrough: bool,
    pub backing: std::sync::Weak<fuser::BackingId>,
}

impl Node {
    pub fn is_dir(&self) -> bool {
        self.fmt == libc::S_IFDIR
    }

    /// The directory descriptor; `ENOTDIR` for other nodes.
    pub fn dir_fd(&self) -> std::io::Result<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.fd
            .as_ref()
            .map(|f| f.as_fd())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOTDIR))
    }

    pub fn place(&self) -> Place {
        self.place.lock().clone()
    }
}

/// A node and the `(parent, name)` pairs it is known under.
#[derive(Debug)]
pub struct Known {
    pub ino: u64,
    pub links: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug)]
pub struct Inodes {
    map: RwLock<HashMap<u64, Arc<Node>>>,
    root_backing: u64,
}

impl Inodes {
    pub fn new(root: Node, root_backing: u64) -> Inodes {
        let mut map = HashMap::new();
        map.insert(ROOT, Arc::new(root));
        Inodes {
            map: RwLock::new(map),
            root_backing,
        }
    }

    /// The node id for a backing inode number.
    pub fn id_of(&self, backing: u64) -> u64 {
        if backing == self.root_backing {
            ROOT
        } else if backing == ROOT {
            self.root_backing
        } else {
            backing
        }
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Node>> {
        self.map.read().get(&ino).cloned()
    }

    /// Returns the node for `ino`, creating it with `make` if the kernel does not know
    /// it yet, and counts one lookup. `update` runs on an existing node's place.
    pub fn lookup_or_insert(
        &self,
        ino: u64,
        make: impl FnOnce() -> Node,
        update: impl FnOnce(&mut Place),
    ) -> Arc<Node> {
        {
            // Counted under the read lock, so a concurrent `forget` (write lock)
            // cannot drop a node the kernel is being told about.
            let map = self.map.read();
            if let Some(n) = map.get(&ino) {
                n.lookups.fetch_add(1, Ordering::Relaxed);
                update(&mut n.place.lock());
                return n.clone();
            }
        }
        let mut map = self.map.write();
        let n = map.entry(ino).or_insert_with(|| Arc::new(make()));
        n.lookups.fetch_add(1, Ordering::Relaxed);
        n.clone()
    }

    /// The kernel forgot `n` lookups of `ino`; returns the node if that was the last.
    pub fn forget(&self, ino: u64, n: u64) -> Option<Arc<Node>> {
        if ino == ROOT {
            return None;
        }
        let mut map = self.map.write();
        let node = map.get(&ino)?;
        let left = node.lookups.load(Ordering::Relaxed).saturating_sub(n);
        node.lookups.store(left, Ordering::Relaxed);
        if left == 0 { map.remove(&ino) } else { None }
    }

    /// Every node with the names it is known under.
    pub fn snapshot(&self) -> Vec<Known> {
        self.map
            .read()
            .values()
            .map(|n| Known {
                ino: n.ino,
                links: n.place().links,
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
