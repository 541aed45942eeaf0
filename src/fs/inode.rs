//! The node table: one entry per backing object the kernel holds. It knows nothing
//! of policy: it keeps identities, pins and names, reaches a node's own object
//! (`Inodes::fd_of`, `Inodes::through_links`), and caches, in each node's [`Place`],
//! a value `D` the layer above decides for that place (the filesystem keeps its
//! policy decision there, see [`crate::fs::Place`]).
//!
//! Invariants:
//! * A node is one backing object for its whole life, never a name. A pinned node
//!   keeps `pin`, an `O_PATH | O_NOFOLLOW` descriptor on that object, opened once
//!   (relative to its parent's descriptor with one name, or reopened from a
//!   descriptor the daemon just made) and reached only through it from then on:
//!   attributes with `fstat`, data by reopening it through `/proc/self/fd`, never by a
//!   name lookup. The descriptor pins the inode, so its number cannot be reused while
//!   the node lives, and a file renamed, hard-linked, unlinked or replaced under its
//!   name stays the same node. Directories are always pinned, and so is every file
//!   the kernel has opened (or mapped) since it met the node. A file that was only
//!   looked up once the descriptor budget is spent (the kernel can cache more inodes
//!   than a process may hold descriptors) stays unpinned: it is reached through one
//!   of its names, and each access is checked to reach the same `(st_dev, st_ino)`.
//! * Nodes are keyed by the backing `(st_dev, st_ino)`: a second name for the same object
//!   (a hard link) finds the same node, and a filesystem mounted inside the source
//!   (whose inode numbers overlap the source's) gets nodes of its own.
//! * The FUSE node id is issued by the daemon (see `Inodes::id_for`): the backing
//!   inode number for an object on the source's own filesystem (so `stat` shows the
//!   same number as the backing file, and tools that remember inode numbers, such as
//!   git's index, see no change), a number from a counter above 2^63 for anything
//!   else (an object of a filesystem mounted inside the source, whose numbers overlap
//!   the source's, or numbered 1, which is the root's id). The source root is node 1
//!   (`FUSE_ROOT_ID`). An id names one object while the kernel holds it: a backing
//!   inode number cannot be reused while our descriptor pins it, and a node is
//!   dropped only after the kernel's last `FORGET` (after which the kernel holds
//!   nothing under that id), so every reply can carry generation 0.
//! * `lookups` counts the entries replied to the kernel for this node; `forget`
//!   subtracts. A node at zero is dropped with its descriptor (the root never is), so
//!   descriptors and memory are bounded by what the kernel caches, not by what was
//!   ever walked (the soft `RLIMIT_NOFILE` is raised to the hard limit at start).
//! * A node is named by its parent and its name (its [`Place`]), never by a whole
//!   path, so the table grows with the number of nodes, not with their depth times
//!   the length of their names. Its workspace-relative path is spelled when a
//!   request needs one, from the names on the way up (`VeilFs::path_of`); a
//!   directory whose path is short ([`CACHED_PATH_MAX`]) keeps it as well, so a
//!   lookup or a listing beneath it costs no walk. A rename changes the place of the
//!   renamed node only.
//! * A node's cached value `D` (and a directory's cached path) are derived from its
//!   parent's and its name, and cached with the filesystem's `epoch`; a directory
//!   rename or a change of what `D` depends on (a policy reload) bumps the epoch (a
//!   file's rename marks only the moved nodes stale), and a stale place is
//!   recomputed from the parent chain before it is used. Only one node's `place` lock is held at a time.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

pub const ROOT: u64 = 1;

/// Ids from here on are issued from a counter (see `Inodes::id_for`).
const FOREIGN: u64 = 1 << 63;

/// A node id never issued: listed for a name that has no node (see `readdirplus`).
pub const PHANTOM: u64 = u64::MAX - 1;

/// A backing object's identity: `(st_dev, st_ino)`.
pub type Key = (u64, u64);

/// The key of the object `st` describes.
pub fn key_of(st: &libc::stat) -> Key {
    (st.st_dev, st.st_ino)
}

/// The longest workspace-relative path a directory's [`Place`] keeps (most paths
/// are far shorter): longer ones are spelled from the names on the way up when a
/// request needs them, so no node holds more than this of its ancestors' names.
pub const CACHED_PATH_MAX: usize = 1024;

/// How many paths [`Inodes::recent_path`] keeps at most, and how many bytes of them.
const RECENT_PATHS: usize = 64;
const RECENT_BYTES: usize = 2 << 20;

/// A node's place in the workspace, and the value `D` cached for it.
#[derive(Clone, Debug)]
pub struct Place<D> {
    /// The name the place (and `decision`) is for: `(parent, name)` is one of `links` while that
    /// name exists.
    pub parent: u64,
    pub name: Vec<u8>,
    /// Every `(parent, name)` the node is known under (more than one for a hard-linked
    /// file); none once its last name is removed through the mount.
    pub links: Vec<(u64, Vec<u8>)>,
    /// The workspace-relative path the place is for (empty for the root), kept
    /// by a directory whose path is at most [`CACHED_PATH_MAX`] bytes, and valid
    /// while `epoch` is current (see [`Place::keeps`]); `None` for any other node.
    pub path: Option<Arc<[u8]>>,
    /// What the layer above decided for this place, current while `epoch` is.
    pub decision: D,
    pub epoch: u64,
}

impl<D> Place<D> {
    /// Whether the place of a node of type `fmt` keeps its workspace-relative path
    /// of `len` bytes (see [`Place::path`]).
    pub fn keeps(fmt: u32, len: usize) -> bool {
        fmt == libc::S_IFDIR && len <= CACHED_PATH_MAX
    }
}

#[derive(Debug)]
pub struct Node<D> {
    /// The FUSE node id (daemon-issued, see the invariants above).
    pub ino: u64,
    /// The backing object's `(st_dev, st_ino)`.
    pub key: Key,
    /// `O_PATH | O_NOFOLLOW` on the backing object, once pinned (see the invariants
    /// above); never unset.
    pin: std::sync::OnceLock<OwnedFd>,
    /// `st_mode & S_IFMT` of the backing object (a type never changes).
    pub fmt: u32,
    pub place: Mutex<Place<D>>,
    pub lookups: AtomicU64,
    /// How the kernel does I/O on this inode while handles are open.
    pub io: Mutex<IoMode>,
    /// A fingerprint of the attributes last handed to the kernel ([`fingerprint`];
    /// 0: none yet): after lost inotify events, only the nodes whose backing object
    /// no longer matches it are invalidated (see [`super::inval::invalidate_changed`]).
    pub attrs_sent: AtomicU64,
}

/// The attributes of `st` that any change to the object moves (its ctime above all:
/// content, attributes, and a directory's entries), as one nonzero number.
pub fn fingerprint(st: &libc::stat) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [
        st.st_ctime as u64,
        st.st_ctime_nsec as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as u64,
        st.st_size as u64,
        u64::from(st.st_mode),
        st.st_nlink,
        u64::from(st.st_uid),
        u64::from(st.st_gid),
        st.st_ino,
    ] {
        h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1
}

/// The kernel keeps one I/O mode per inode while any file is open on it: cached
/// (the page cache, reads and writes through the daemon) or passthrough (one
/// backing file). Opening a file in the other mode fails with EIO, so the mode is
/// chosen when the first file opens and kept until the last one is released.
///
/// The daemon's counts are taken when it answers an `OPEN` and dropped when the
/// `RELEASE` arrives, which the kernel sends after it has let the file go itself:
/// they are never below the kernel's, so a mode the daemon picks from them is one
/// the kernel accepts.
#[derive(Debug, Default)]
pub struct IoMode {
    /// Handles open on the inode (as far as the daemon has been told).
    pub open: u32,
    /// Files open for reading without a handle (see
    /// [`super::config::FsConfig::light_open`]): always in cached mode, so while any is
    /// open no handle may start passthrough.
    pub light: u32,
    /// Meaningful while `open > 0`.
    pub passthrough: bool,
    pub backing: std::sync::Weak<fuser::BackingId>,
}

impl IoMode {
    /// No file is open on the inode (as far as the daemon knows): the next one to
    /// open chooses the mode.
    pub fn is_free(&self) -> bool {
        self.open == 0 && self.light == 0
    }

    /// Files open on the inode in passthrough mode.
    pub fn in_passthrough(&self) -> bool {
        self.open > 0 && self.passthrough
    }
}

impl<D: Clone> Node<D> {
    /// A node for the object `st` describes, pinned by `fd` when there is one.
    pub fn new(ino: u64, fd: Option<OwnedFd>, st: &libc::stat, place: Place<D>) -> Node<D> {
        let pin = std::sync::OnceLock::new();
        if let Some(fd) = fd {
            let _ = pin.set(fd);
        }
        Node {
            ino,
            key: key_of(st),
            pin,
            fmt: st.st_mode & libc::S_IFMT,
            place: Mutex::new(place),
            lookups: AtomicU64::new(0),
            io: Mutex::new(IoMode::default()),
            attrs_sent: AtomicU64::new(0),
        }
    }

    /// Whether a directory-only pattern applies to this node: a directory, or a
    /// symbolic link (see [`super::ops::decided_as_dir`]).
    pub fn decided_as_dir(&self) -> bool {
        self.fmt == libc::S_IFDIR || self.fmt == libc::S_IFLNK
    }

    pub fn is_dir(&self) -> bool {
        self.fmt == libc::S_IFDIR
    }

    /// The node's own descriptor, if it is pinned.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.pin.get().map(|f| f.as_fd())
    }

    /// The directory descriptor (directories are always pinned); `ENOTDIR` for
    /// other nodes.
    pub fn dir_fd(&self) -> std::io::Result<BorrowedFd<'_>> {
        match self.fd() {
            Some(fd) if self.is_dir() => Ok(fd),
            _ => Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
    }

    pub fn place(&self) -> Place<D> {
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
struct Table<D> {
    by_id: HashMap<u64, Arc<Node<D>>>,
    by_key: HashMap<Key, u64>,
}

/// The paths last spelled for directories whose own are too long for their place
/// to keep (see [`Inodes::recent_path`]), newest last. A bounded cache: at most
/// [`RECENT_PATHS`] paths and [`RECENT_BYTES`] bytes.
#[derive(Debug)]
struct Recent<D> {
    paths: std::collections::VecDeque<RecentPath<D>>,
    bytes: usize,
}

#[derive(Debug)]
struct RecentPath<D> {
    /// The directory, by identity: the allocation a `Weak` holds is never reused
    /// by another node while the entry lives.
    node: Weak<Node<D>>,
    /// The epoch the path is current for.
    epoch: u64,
    path: Arc<[u8]>,
}

#[derive(Debug)]
pub struct Inodes<D> {
    map: RwLock<Table<D>>,
    recent: Mutex<Recent<D>>,
    /// Nodes holding a descriptor.
    pinned: std::sync::atomic::AtomicUsize,
    /// The next id for an object not numbered by the source's filesystem.
    next: AtomicU64,
    /// The source root's `st_dev`: inode numbers of that filesystem are shown as they
    /// are.
    root_dev: u64,
    /// Entries (parent's backing object, name) never invalidated by name: the way
    /// to another mount beneath this one (see [`Inodes::keep_entry`]).
    kept: RwLock<std::collections::HashSet<(Key, Vec<u8>)>>,
}

impl<D: Clone> Inodes<D> {
    pub fn new(root: Node<D>) -> Inodes<D> {
        let root_dev = root.key.0;
        let mut t = Table {
            by_id: HashMap::new(),
            by_key: HashMap::new(),
        };
        t.by_key.insert(root.key, ROOT);
        t.by_id.insert(ROOT, Arc::new(root));
        Inodes {
            map: RwLock::new(t),
            recent: Mutex::new(Recent {
                paths: Default::default(),
                bytes: 0,
            }),
            pinned: std::sync::atomic::AtomicUsize::new(1),
            kept: RwLock::new(Default::default()),
            next: AtomicU64::new(FOREIGN),
            root_dev,
        }
    }

    /// Whether the object `(dev, ino)` may take its backing inode number as its id:
    /// it lies on the source's own filesystem, and the number is neither the root's
    /// id nor in the counter's range.
    fn numbered_as_is(&self, dev: u64, ino: u64) -> bool {
        dev == self.root_dev && ino != ROOT && ino < FOREIGN
    }

    /// The node id for a new node standing for `key` (see the invariants above).
    fn id_for(&self, t: &Table<D>, key: Key) -> u64 {
        let (dev, ino) = key;
        // A node detached from its key (see `detach`) may still hold the number.
        if self.numbered_as_is(dev, ino) && !t.by_id.contains_key(&ino) {
            ino
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        }
    }

    /// The inode number to list for the entry `ino` of a directory on device `dev`:
    /// the id its node has or would have (see `Inodes::id_for`), or, for an object
    /// of another filesystem that the kernel does not hold, a number mixed from the
    /// device and the inode above 2^63, so that listed numbers rarely collide.
    pub fn listed_ino(&self, dev: u64, ino: u64) -> u64 {
        if self.numbered_as_is(dev, ino) {
            return ino;
        }
        match self.find((dev, ino)) {
            Some(n) => n.ino,
            None => FOREIGN | (ino ^ dev.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }

    /// How many nodes hold a descriptor.
    pub fn pinned(&self) -> usize {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Pins `node` with `fd` (a descriptor on its own object), unless it is pinned
    /// already (then `fd` is closed).
    pub fn pin(&self, node: &Node<D>, fd: OwnedFd) {
        if node.pin.set(fd).is_ok() {
            self.pinned.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Node<D>>> {
        self.map.read().by_id.get(&ino).cloned()
    }

    /// The node standing for the backing object `key`, if the kernel holds it.
    pub fn find(&self, key: Key) -> Option<Arc<Node<D>>> {
        let t = self.map.read();
        t.by_key.get(&key).and_then(|id| t.by_id.get(id)).cloned()
    }

    /// Returns the node for the backing object `key`, creating it with `make` (given
    /// its new id) if the kernel does not hold it yet, and counts one lookup. `update`
    /// runs on an existing node's place.
    pub fn lookup_or_insert(
        &self,
        key: Key,
        make: impl FnOnce(u64) -> Node<D>,
        update: impl FnOnce(&mut Place<D>),
    ) -> Arc<Node<D>> {
        {
            // Counted under the read lock, so a concurrent `forget` (write lock)
            // cannot drop a node the kernel is being told about.
            let t = self.map.read();
            if let Some(n) = t.by_key.get(&key).and_then(|id| t.by_id.get(id)) {
                n.lookups.fetch_add(1, Ordering::Relaxed);
                update(&mut n.place.lock());
                return n.clone();
            }
        }
        let mut t = self.map.write();
        if let Some(n) = t.by_key.get(&key).and_then(|id| t.by_id.get(id)).cloned() {
            n.lookups.fetch_add(1, Ordering::Relaxed);
            update(&mut n.place.lock());
            return n;
        }
        let id = self.id_for(&t, key);
        let n = Arc::new(make(id));
        if n.fd().is_some() {
            self.pinned.fetch_add(1, Ordering::Relaxed);
        }
        n.lookups.fetch_add(1, Ordering::Relaxed);
        t.by_key.insert(key, id);
        t.by_id.insert(id, n.clone());
        n
    }

    /// The last name of the unpinned `node` is gone: its inode number may be reused by
    /// another object, which must get a node of its own, so the key no longer leads
    /// to it (a pinned node keeps its object alive, and its key).
    pub fn detach(&self, node: &Node<D>) {
        if node.fd().is_some() {
            return;
        }
        let mut t = self.map.write();
        if t.by_key.get(&node.key) == Some(&node.ino) {
            t.by_key.remove(&node.key);
        }
    }

    /// The kernel forgot `n` lookups of `ino`; returns the node if that was the last.
    pub fn forget(&self, ino: u64, n: u64) -> Option<Arc<Node<D>>> {
        if ino == ROOT {
            return None;
        }
        let mut t = self.map.write();
        let node = t.by_id.get(&ino)?;
        let left = node.lookups.load(Ordering::Relaxed).saturating_sub(n);
        node.lookups.store(left, Ordering::Relaxed);
        if left != 0 {
            return None;
        }
        let node = t.by_id.remove(&ino)?;
        if t.by_key.get(&node.key) == Some(&ino) {
            t.by_key.remove(&node.key);
        }
        if node.fd().is_some() {
            self.pinned.fetch_sub(1, Ordering::Relaxed);
        }
        Some(node)
    }

    /// The path last spelled for the directory `node` while `epoch` was current
    /// (see [`Inodes::remember_path`]).
    pub fn recent_path(&self, node: &Node<D>, epoch: u64) -> Option<Arc<[u8]>> {
        let recent = self.recent.lock();
        recent
            .paths
            .iter()
            .rev()
            .find(|r| r.epoch == epoch && std::ptr::eq(r.node.as_ptr(), node))
            .map(|r| r.path.clone())
    }

    /// Remembers `path` as the directory `node`'s while `epoch` is current, for a
    /// directory whose place cannot keep it ([`CACHED_PATH_MAX`]): a walk down a
    /// chain deeper than that spells each level from the one above. The oldest
    /// paths go first; one larger than half the budget is not kept.
    pub fn remember_path(&self, node: &Node<D>, epoch: u64, path: &Arc<[u8]>) {
        if path.len() <= CACHED_PATH_MAX || path.len() > RECENT_BYTES / 2 {
            return;
        }
        let Some(arc) = self.get(node.ino).filter(|n| std::ptr::eq(&**n, node)) else {
            return;
        };
        let mut recent = self.recent.lock();
        let r = &mut *recent;
        let bytes = &mut r.bytes;
        r.paths.retain(|p| {
            let keep = !std::ptr::eq(p.node.as_ptr(), node);
            if !keep {
                *bytes -= p.path.len();
            }
            keep
        });
        r.bytes += path.len();
        r.paths.push_back(RecentPath {
            node: Arc::downgrade(&arc),
            epoch,
            path: path.clone(),
        });
        while r.paths.len() > RECENT_PATHS || r.bytes > RECENT_BYTES {
            match r.paths.pop_front() {
                Some(p) => r.bytes -= p.path.len(),
                None => break,
            }
        }
    }

    /// Up to `n` `(parent, name)` entries whose nodes the kernel could be asked to let
    /// go: files and links before directories (dropping a directory's entry drops
    /// everything beneath it), never the root.
    pub fn victims(&self, n: usize) -> Vec<(u64, Vec<u8>)> {
        let t = self.map.read();
        let pick = |dirs: bool| {
            t.by_id
                .values()
                .filter(move |node| node.ino != ROOT && node.is_dir() == dirs)
                .filter_map(|node| {
                    let p = node.place.lock();
                    p.links.first().cloned()
                })
        };
        pick(false).chain(pick(true)).take(n).collect()
    }

    /// Every node with the names it is known under.
    /// Every node the kernel holds.
    pub fn nodes(&self) -> Vec<Arc<Node<D>>> {
        self.map.read().by_id.values().cloned().collect()
    }

    pub fn snapshot(&self) -> Vec<Known> {
        self.map
            .read()
            .by_id
            .values()
            .map(|n| Known {
                ino: n.ino,
                links: n.place().links,
            })
            .collect()
    }

    /// Never invalidates the entry `name` in the directory `parent` (a backing
    /// object) by name: the kernel detaches every mount beneath an entry it is told
    /// to invalidate, in every namespace, and `veilfs run` mounts the workspace
    /// beneath the home mount. Its attributes are still refreshed.
    pub fn keep_entry(&self, parent: Key, name: &[u8]) {
        self.kept.write().insert((parent, name.to_vec()));
    }

    /// Whether the entry `name` in the directory numbered `parent` is kept (see
    /// [`Inodes::keep_entry`]).
    pub fn entry_kept(&self, parent: u64, name: &[u8]) -> bool {
        let kept = self.kept.read();
        if kept.is_empty() {
            return false;
        }
        self.get(parent)
            .is_some_and(|n| kept.contains(&(n.key, name.to_vec())))
    }

    pub fn len(&self) -> usize {
        self.map.read().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reaching a node's own object.
impl<D: Clone> Inodes<D> {
    /// Whether the name `name` in directory node `parent` holds `node`'s object.
    pub fn holds(&self, parent: u64, name: &[u8], node: &Node<D>) -> bool {
        let (Some(dir), Ok(c)) = (self.get(parent), std::ffi::CString::new(name)) else {
            return false;
        };
        dir.dir_fd()
            .and_then(|fd| crate::sys::statat(fd, &c))
            .is_ok_and(|st| key_of(&st) == node.key)
    }

    /// The parent node and name a node's place is taken under: its place's name
    /// while that parent is held, else the first of its links whose parent is.
    pub fn anchor(&self, place: &Place<D>) -> Option<(Arc<Node<D>>, Vec<u8>)> {
        std::iter::once((place.parent, &place.name))
            .chain(place.links.iter().map(|(p, n)| (*p, n)))
            .find_map(|(p, n)| self.get(p).map(|node| (node, n.clone())))
    }

    /// A descriptor on the node's own object: the pinned one, or, for an unpinned
    /// node, an `O_PATH` one opened through one of its names and checked to reach the
    /// same object (`ESTALE` when none does).
    pub fn fd_of<'a>(&self, node: &'a Node<D>) -> std::io::Result<NodeFd<'a>> {
        if let Some(fd) = node.fd() {
            return Ok(NodeFd::Kept(fd));
        }
        self.through_links(node, |dir, name| {
            let fd = crate::sys::open_path(dir, name)?;
            Ok((crate::sys::stat(fd.as_fd())?, fd))
        })
        .map(NodeFd::Opened)
    }

    pub fn stat_of(&self, node: &Node<D>) -> std::io::Result<libc::stat> {
        match node.fd() {
            Some(fd) => crate::sys::stat(fd),
            None => self.through_links(node, |dir, name| {
                crate::sys::statat(dir, name).map(|st| (st, st))
            }),
        }
    }

    /// Runs `f` on each name an unpinned node is known under (its place's name
    /// first) until one reaches the node's own object; `ESTALE` when none does.
    pub fn through_links<T>(
        &self,
        node: &Node<D>,
        f: impl Fn(BorrowedFd, &std::ffi::CStr) -> std::io::Result<(libc::stat, T)>,
    ) -> std::io::Result<T> {
        self.reach(node, f).map(|(t, _)| t)
    }

    /// [`Inodes::through_links`], also saying which `(parent, name)` reached the node.
    pub fn reach<T>(
        &self,
        node: &Node<D>,
        f: impl Fn(BorrowedFd, &std::ffi::CStr) -> std::io::Result<(libc::stat, T)>,
    ) -> std::io::Result<(T, (u64, Vec<u8>))> {
        let place = node.place();
        let mut last = std::io::Error::from_raw_os_error(libc::ESTALE);
        let names = std::iter::once((place.parent, place.name.clone())).chain(place.links);
        for (parent, name) in names {
            let Some(dir) = self.get(parent) else {
                continue;
            };
            let (Ok(dfd), Ok(c)) = (dir.dir_fd(), std::ffi::CString::new(name.clone())) else {
                continue;
            };
            match f(dfd, &c) {
                Ok((st, t)) if key_of(&st) == node.key => {
                    return Ok((t, (parent, name)));
                }
                Ok(_) => last = std::io::Error::from_raw_os_error(libc::ESTALE),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

/// A descriptor on a node's object, the pinned one or one opened for an operation.
pub enum NodeFd<'a> {
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
