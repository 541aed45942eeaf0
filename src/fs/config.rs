//! What a filesystem is built with: [`FsConfig`], everything decided before it is
//! mounted, handed to [`super::VeilFs::new`] whole. Nothing of it is set afterwards:
//! what moves while the filesystem is mounted is the policy (reloads), the node
//! table, the open files and the caches.

use std::time::Duration;

use super::ask::Approvals;
use super::inode::Key;
use super::notice::Destination;
use super::protect::Outer;
use crate::policy::{RawPolicy, RawRule};

/// What git runs or obeys that the filesystem keeps read-only (see
/// [`super::git_guard::GitGuard`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Git {
    /// Nothing of git's is guarded (`veilfs mount`).
    #[default]
    Off,
    /// The repository at the root, as it is when the filesystem is built (the
    /// workspace under `veilfs run`).
    Root,
    /// Every repository the mount holds but those the command makes (the home
    /// directory under `veilfs run`, and a workspace that is the home directory).
    Everywhere,
}

/// How a filesystem is built (see the module documentation).
#[derive(Debug)]
pub struct FsConfig {
    /// Entry and attribute time-to-live where an outside edit could go unseen (see
    /// [`super::DEFAULT_TTL`]).
    pub ttl: Duration,
    /// FUSE passthrough wanted (kept only if the kernel agrees at `INIT`).
    pub passthrough: bool,
    /// An open for reading is answered with the policy check alone (on by default):
    /// no handle and no backing descriptor, so it costs one round trip and one system call in the daemon (an
    /// `fstatat` checking that the node's name still holds its object); each read
    /// that misses the cache reopens the file by its name after checking the node's
    /// current decision. Opens for writing (or truncating) are checked and get a
    /// handle either way, so an open for writing of a read-only file fails before
    /// the kernel can put one byte of it in the page cache. A file opened for
    /// writing is served by passthrough while no file is open on it for reading
    /// without a handle (the kernel refuses to mix cached opens and passthrough ones
    /// on an inode, see [`super::inode::IoMode`]); an open for reading while a writer holds
    /// it in passthrough mode gets a handle on the same backing file.
    ///
    /// The kernel could open files without asking at all (answering the first OPEN
    /// with ENOSYS), but then an open for writing of a read-only file succeeds, and
    /// the kernel copies each refused write into cached pages that other readers see
    /// before the WRITE is refused: veilfs never does that.
    pub light_open: bool,
    /// The policy's rules refuse nothing; what they would refuse is logged (see
    /// `permissive`).
    pub permissive: bool,
    /// Watch the source for outside edits (see [`super::watch`]).
    pub watch: bool,
    /// Where refusals (and, if it asks, every operation) are logged.
    pub audit: Option<crate::session::audit::Audit>,
    /// Where questions about `ask` paths go; `None`: they are refused.
    pub approvals: Option<Approvals>,
    /// Where refusal notices go (`None`: stderr).
    pub notices: Option<Destination>,
    /// Rules every reload puts before the policy file's (see
    /// [`crate::policy::Policy::parse_on`]): the home policy under a workspace that
    /// is the home directory.
    pub policy_base: Option<RawPolicy>,
    /// Rules every reload puts after the policy file's.
    pub policy_after: Vec<RawRule>,
    /// The enclosing mount's policy, which decides every path of this one too (the
    /// stricter decision wins).
    pub outer: Option<Outer>,
    /// Directories on the way to what the policy names, kept from being replaced
    /// or renamed (relative to the mount's root).
    pub ways: Vec<Vec<u8>>,
    /// Directories kept read-only whatever the policy says: veilfs's own
    /// configuration (relative to the mount's root; need not exist).
    pub config_dirs: Vec<Vec<u8>>,
    /// The run's own logs this mount serves: their paths (relative to the mount's
    /// root) and identities, kept read-only.
    pub run_logs: Vec<(Vec<u8>, Key)>,
    /// Another mount's policy file, as paths of this one (the workspace's
    /// `--policy` file in the home directory, the home policy file inside the
    /// workspace; as given and resolved): kept as this mount's own policy file is
    /// by path, read-only and its directories neither renamed nor removed.
    pub other_policy_files: Vec<Vec<u8>>,
    /// What of git's is guarded.
    pub git: Git,
    /// The session's agent's profile, compiled (see
    /// [`crate::fs::gate::places::AgentFiles`]): what the agent runs later stays
    /// read-only whatever the policy says.
    pub agent_files: Option<std::sync::Arc<crate::policy::Policy>>,
    /// Entries (a directory's identity and a name in it) the node table keeps
    /// whatever the kernel forgets: the way down to a mount nested inside this one.
    pub kept_entries: Vec<(Key, Vec<u8>)>,
}

impl Default for FsConfig {
    fn default() -> Self {
        FsConfig {
            ttl: super::DEFAULT_TTL,
            passthrough: true,
            light_open: true,
            permissive: false,
            watch: false,
            audit: None,
            approvals: None,
            notices: None,
            policy_base: None,
            policy_after: Vec::new(),
            outer: None,
            ways: Vec::new(),
            config_dirs: Vec::new(),
            run_logs: Vec::new(),
            other_policy_files: Vec::new(),
            git: Git::Off,
            kept_entries: Vec::new(),
            agent_files: None,
        }
    }
}

impl FsConfig {
    /// The caching and data-path choices of `opts` (a mount's command line), with
    /// nothing of `veilfs run`'s.
    pub fn of(opts: &crate::session::mount::MountOptions) -> FsConfig {
        FsConfig {
            ttl: opts.ttl,
            passthrough: opts.passthrough,
            light_open: !opts.strict_open,
            permissive: opts.permissive,
            watch: opts.watch,
            ..FsConfig::default()
        }
    }
}
