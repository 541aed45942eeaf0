//! The filesystem: a read-write mirror of a source directory that enforces a policy.
//!
//! How one request flows from fuser to the backing file:
//! 1. fuser reads it from `/dev/fuse` or a ring queue and calls [`fuse`]'s handler.
//! 2. The handler makes the request's [`request::Req`] (who asks, which operation,
//!    the grants it holds) and runs the operation in [`ops`] under a panic guard;
//!    one that may ask a person runs through the one dispatcher (`parked`).
//! 3. The operation takes one [`snapshot::Snapshot`] and, for each place it touches
//!    (a node of the policy-free [`inode`] table, or a name in one), decides the
//!    policy's rule as the [`gate`] marks it, asks ([`ask`]) or waives
//!    (`permissive`) where the decision says so, then asks [`gate::Gatekeeper::check`]
//!    whether any guard refuses what it intends (make, remove, move, change).
//! 4. Allowed: one system call relative to a parent's descriptor ([`crate::sys`]).
//!    A question: the dispatcher parks the reply until an answer runs the operation
//!    again with a new `Req` holding the grant. Refused: `reply` sets `EACCES`.
//!
//! [`ops`] is the only place the policy is enforced, and [`gate`] the only place a
//! guard is added.

pub mod ask;
mod broker;
pub mod config;
#[cfg(feature = "fault-injection")]
mod fault;
pub mod fuse;
pub mod gate;
pub mod git_guard;
pub mod grant;
pub mod inode;
pub mod inval;
pub mod notice;
pub mod ops;
mod parked;
mod permissive;
pub mod protect;
pub mod refusal;
pub mod reload;
mod reply;
pub mod request;
pub mod snapshot;
pub mod watch;

use parking_lot::RwLock;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::policy::{Decision, Policy};
use crate::sys;

/// The node table as the filesystem keeps it: each node caches the decision for
/// its place (the table itself knows nothing of policy, see [`inode`]).
pub type Inodes = inode::Inodes<Decision>;
/// A node of [`Inodes`].
pub type Node = inode::Node<Decision>;
/// A node's place, with the decision taken for it.
pub type Place = inode::Place<Decision>;

/// How long the kernel may cache an entry and its attributes when an edit made
/// outside the mount could go unseen (no watcher, or its directory could not be
/// watched): such an edit shows through the mount within this time.
pub const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the kernel may cache an entry in a watched directory: the watcher
/// invalidates it as soon as anything changes outside the mount.
pub const WATCHED_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// Files at least this large are served by FUSE passthrough; smaller ones through
/// the page cache (kept across opens), which saves two round trips to the kernel's
/// backing-file table per open of a small source file.
pub const PASSTHROUGH_MIN_SIZE: u64 = 1 << 20;

/// An open file: the descriptor reopened from the node with the access asked for.
#[derive(Debug)]
pub struct FileHandle {
    pub file: File,
    /// The node it was opened on.
    pub ino: u64,
    /// Held while the kernel reads and writes the backing file directly.
    pub backing: parking_lot::Mutex<Option<Arc<fuser::BackingId>>>,
    /// Counted in the node's [`inode::IoMode`] (released in `release`).
    pub counted: std::sync::atomic::AtomicBool,
    /// Open for writing: the object counted in [`protect::ProtectedFiles::writing`]
    /// until the handle is released.
    pub writes: Option<inode::Key>,
}

/// What the reloader is made of, taken once by [`VeilFs::reloader`].
#[derive(Debug, Default)]
struct ForReload {
    /// The policy file, held by its directory (opened when the filesystem is built,
    /// before anything is mounted; `None`: the built-in policy).
    file: Option<crate::workspace::load::PolicyFile>,
    /// Rules every reload puts before the policy file's (see
    /// [`config::FsConfig::policy_base`]).
    base: Option<crate::policy::RawPolicy>,
    /// Rules every reload puts after the policy file's.
    after: Vec<crate::policy::RawRule>,
}

/// The open files, by handle number.
#[derive(Debug)]
pub(crate) struct Handles {
    pub(crate) files: RwLock<HashMap<u64, Arc<FileHandle>>>,
    pub(crate) next: AtomicU64,
}

/// The last few listings of each directory the kernel holds (see
/// [`VeilFs::listing_at`]).
#[derive(Debug)]
pub(crate) struct Listings {
    pub(crate) by_dir:
        parking_lot::Mutex<HashMap<u64, std::collections::VecDeque<Arc<ops::Listing>>>>,
    pub(crate) next: std::sync::atomic::AtomicU32,
}

/// How the kernel is served: each is wanted at start and kept only if the kernel
/// agrees at `init`.
#[derive(Debug)]
pub(crate) struct Kernel {
    /// FUSE passthrough: kept only if the kernel agrees at `init` and lets us
    /// register backing files.
    pub(crate) passthrough: std::sync::atomic::AtomicBool,
    /// Answer OPENDIR with ENOSYS so that the kernel stops sending OPENDIR and
    /// RELEASEDIR (kernel >= 5.1); kept only if the kernel offers it at `init`.
    pub(crate) no_opendir: std::sync::atomic::AtomicBool,
    /// See [`config::FsConfig::light_open`].
    pub(crate) light_open: std::sync::atomic::AtomicBool,
}

/// How many descriptors the node table may hold.
#[derive(Debug)]
pub(crate) struct Limits {
    /// How many nodes may be pinned by a lookup (see [`inode`]).
    pub(crate) nodes: usize,
    /// How many nodes may be pinned at all: a file opened is pinned beyond
    /// `nodes`, up to this (the rest of the limit is kept for handles, listings
    /// and the descriptors requests open).
    pub(crate) pins: usize,
}

/// The mounted filesystem's state.
#[derive(Debug)]
pub struct VeilFs {
    pub(crate) inodes: Arc<Inodes>,
    pub(crate) policy: Arc<RwLock<Arc<Policy>>>,
    /// Bumped by a directory rename or a policy change: cached decisions older than
    /// this are recomputed before use.
    pub(crate) epoch: Arc<AtomicU64>,
    /// Every refusal veilfs adds to the policy's rules (see [`gate`]).
    pub(crate) gate: gate::Gatekeeper,
    /// What the reloader is made of (see [`VeilFs::reloader`]).
    for_reload: parking_lot::Mutex<ForReload>,
    /// `/proc/self/fd`, for reopening `O_PATH` descriptors.
    pub(crate) proc_fd: OwnedFd,
    /// The open files, by handle.
    pub(crate) handles: Handles,
    /// The last few listings of each directory the kernel holds.
    pub(crate) listings: Listings,
    /// The daemon runs as root: new entries are given to the requesting user.
    pub(crate) chown_new: bool,
    /// How the kernel is served: what was wanted, as `init` settled it.
    pub(crate) kernel: Kernel,
    /// How many descriptors the node table may hold.
    pub(crate) limits: Limits,
    /// Held (shared) while a name is made or linked, and (exclusive) for a whole
    /// rename: a rename's exposure walk and the rename itself are one step that no
    /// other change made through the mount can fall between (a subtree moved into a
    /// directory while its move is being checked would otherwise go unchecked).
    pub(crate) names: RwLock<()>,
    /// Kernel cache invalidations made once a request is answered.
    pub(crate) inval: Arc<inval::Invalidator>,
    /// Invalidates kernel caches on edits made outside the mount; `None` when
    /// inotify is unavailable (then only the TTL bounds staleness).
    pub(crate) watcher: Option<Arc<watch::Watcher>>,
    /// Watching was asked for and inotify could not be had: every place is
    /// checked at every request, as once a watch is missed (see `VeilFs::place`).
    pub(crate) unwatched: bool,
    /// Entry and attribute time-to-live handed to the kernel.
    pub(crate) ttl: std::time::Duration,
    /// Where refusals (and, if asked, every operation) are logged.
    pub(crate) audit: Option<crate::session::audit::Audit>,
    /// Refused names said once on stderr.
    pub(crate) notices: notice::Notices,
    /// Stale decisions recomputed (see [`VeilFs::decisions_recomputed`]).
    pub(crate) recomputed: AtomicU64,
    /// A test's hook inside requests (test builds only, see `fault`).
    #[cfg(feature = "fault-injection")]
    pub(crate) mid_request: fault::MidRequest,
    /// Where questions about `ask` paths go (see [`ask`]); `None`: they are
    /// refused.
    pub(crate) approvals: Option<ask::Approvals>,
    /// The policy's rules refuse nothing; what they would refuse is logged (see
    /// [`permissive`]).
    pub(crate) permissive: bool,
}

impl VeilFs {
    /// Opens the source root (a directory descriptor taken now, before anything is
    /// mounted; every later access is relative to it).
    ///
    /// `policy_file` is the file the policy was read from: it is protected by its
    /// paths inside the source (as given and with links resolved) and by identity
    /// (the object it names now; a caller holding the descriptor it read through
    /// sets that one's key with [`VeilFs::protected`]).
    pub fn new(
        src: &Path,
        policy: Policy,
        policy_file: Option<&Path>,
        config: config::FsConfig,
    ) -> io::Result<VeilFs> {
        let root_fd = sys::open_dir_path(src)?;
        Self::from_fd(root_fd, src, policy, policy_file, config)
    }

    /// Like [`VeilFs::new`] with the root descriptor already open (`veilfs run` opens
    /// the workspace before mounting over it).
    pub fn from_fd(
        root_fd: OwnedFd,
        src: &Path,
        policy: Policy,
        policy_file: Option<&Path>,
        config: config::FsConfig,
    ) -> io::Result<VeilFs> {
        let st = sys::stat(root_fd.as_fd())?;
        // Each node keeps a descriptor: keep a quarter of the limit for everything
        // else (handles, listings, the reopened descriptors of requests).
        let limit = sys::raise_nofile_limit().unwrap_or(1024);
        let node_budget = (limit as usize / 4 * 3).max(64);
        let pin_cap = (limit as usize).saturating_sub(4096).max(node_budget);
        let proc_fd = sys::open_dir_path(Path::new("/proc/self/fd"))?;
        let policy_source = match policy_file {
            Some(p) => Some(crate::workspace::load::PolicyFile::open(p)?),
            None => None,
        };
        let mut policy_paths = policy_file.map_or_else(Vec::new, |p| protect::policy_paths(src, p));
        let protected = Arc::new(protect::ProtectedFiles::default());
        protected.set_imported(policy.source_ids());
        // The file as read through its directory's descriptor, by identity.
        if let Some(f) = &policy_source {
            match f.read() {
                Ok(t) => protected.set(t.dev, t.ino),
                Err(e) => log::warn!("policy file {}: {e}", f.path().display()),
            }
        }
        let root = Node::new(
            inode::ROOT,
            Some(root_fd),
            &st,
            Place {
                parent: inode::ROOT,
                name: Vec::new(),
                links: Vec::new(),
                path: Some(Arc::from(&b""[..])),
                decision: Decision::root(),
                epoch: u64::MAX,
            },
        );
        root.lookups.store(1, std::sync::atomic::Ordering::Relaxed);
        let config::FsConfig {
            ttl,
            passthrough,
            light_open,
            permissive,
            watch,
            audit,
            approvals,
            notices,
            policy_base,
            policy_after,
            outer,
            ways,
            config_dirs,
            run_logs,
            other_policy_files,
            git,
            kept_entries,
            agent_files,
        } = config;
        policy_paths.extend(other_policy_files);
        let policy = Arc::new(RwLock::new(Arc::new(policy)));
        let keeps = gate::Keeps {
            policy_paths,
            run_logs,
            git,
            config_dirs,
            ways,
            outer,
            policy: policy.clone(),
            agent: agent_files,
        };
        let gate = gate::Gatekeeper::new(root.dir_fd()?, keeps, protected)?;
        let mut fs = VeilFs {
            inodes: Arc::new(Inodes::new(root)),
            policy,
            epoch: Arc::new(AtomicU64::new(0)),
            for_reload: parking_lot::Mutex::new(ForReload {
                file: policy_source,
                base: policy_base,
                after: policy_after,
            }),
            gate,
            proc_fd,
            handles: Handles {
                files: RwLock::new(HashMap::new()),
                next: AtomicU64::new(1),
            },
            listings: Listings {
                by_dir: parking_lot::Mutex::new(HashMap::new()),
                next: std::sync::atomic::AtomicU32::new(1),
            },
            chown_new: sys::euid() == 0,
            kernel: Kernel {
                passthrough: std::sync::atomic::AtomicBool::new(passthrough),
                no_opendir: std::sync::atomic::AtomicBool::new(true),
                light_open: std::sync::atomic::AtomicBool::new(light_open),
            },
            limits: Limits {
                nodes: node_budget,
                pins: pin_cap,
            },
            names: RwLock::new(()),
            inval: Arc::default(),
            watcher: None,
            unwatched: false,
            ttl,
            audit,
            notices: notice::Notices::default(),
            recomputed: AtomicU64::new(0),
            #[cfg(feature = "fault-injection")]
            mid_request: fault::MidRequest::default(),
            approvals,
            permissive,
        };
        if let Some(to) = notices {
            fs.notices.send_to(to);
        }
        for (dir, name) in kept_entries {
            fs.inodes.keep_entry(dir, &name);
        }
        if watch {
            // Without inotify the filesystem checks every place at every request
            // instead (see `enable_watcher`).
            let _ = fs.enable_watcher();
        }
        Ok(fs)
    }

    /// The set of protected objects: the run and mount code and the reloader set the
    /// policy file's key in it each time they read the file.
    pub fn protected(&self) -> Arc<protect::ProtectedFiles> {
        self.gate.protected.clone()
    }

    /// The watcher of outside edits, when the filesystem watches.
    pub fn watcher(&self) -> Option<Arc<watch::Watcher>> {
        self.watcher.clone()
    }

    /// The broker questions go to, if any.
    pub fn broker(&self) -> Option<Arc<ask::Broker>> {
        self.approvals.as_ref().map(|s| s.broker.clone())
    }

    /// Starts watching the source for outside edits (for [`config::FsConfig::watch`]);
    /// the watcher must be given the session's notifier with [`watch::Watcher::run`]
    /// once mounted (see [`VeilFs::watcher`]).
    fn enable_watcher(&mut self) -> io::Result<Arc<watch::Watcher>> {
        let w = match watch::Watcher::new(self.epoch.clone()) {
            Ok(w) => Arc::new(w),
            Err(e) => {
                self.unwatched = true;
                log::error!(
                    "no inotify instance ({e}; see fs.inotify.max_user_instances): outside \
                     edits are not watched, so every path is checked against the disk at \
                     every request, and the kernel's caches last until the TTL"
                );
                return Err(e);
            }
        };
        let root = self
            .inodes
            .get(inode::ROOT)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?;
        w.watch(inode::ROOT, root.dir_fd()?);
        self.watcher = Some(w.clone());
        Ok(w)
    }

    /// The policy in force, shared (a mount inside this one decides by it too, see
    /// [`config::FsConfig::outer`]).
    pub fn policy_handle(&self) -> Arc<RwLock<Arc<Policy>>> {
        self.policy.clone()
    }

    /// The handle that reloads the policy of this filesystem while it is mounted.
    /// Call it once: the policy file's descriptor moves into it.
    pub fn reloader(&self) -> Arc<reload::Reloader> {
        let for_reload = std::mem::take(&mut *self.for_reload.lock());
        Arc::new(reload::Reloader::new(
            self.policy.clone(),
            self.epoch.clone(),
            self.inodes.clone(),
            for_reload.file,
            self.gate.protected.clone(),
            for_reload.base,
            for_reload.after,
            self.broker(),
        ))
    }

    /// The queue of kernel cache invalidations; start it once mounted.
    pub fn invalidator(&self) -> Arc<inval::Invalidator> {
        self.inval.clone()
    }

    /// The node table, shared with [`crate::Mount`] so a harness can watch how many
    /// nodes the kernel holds.
    pub fn inodes(&self) -> Arc<Inodes> {
        self.inodes.clone()
    }
}
