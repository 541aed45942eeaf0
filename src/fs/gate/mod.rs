//! The gatekeeper: every refusal veilfs adds to the policy's own rules is decided
//! here, by one ordered table of guards.
//!
//! An operation in [`super::ops`] meets it twice for each place it touches:
//! * [`Gatekeeper::mark`]: the policy's decision for a path, made stricter by every
//!   guard that keeps the path (the policy file's paths read-only, git's control
//!   files, veilfs's configuration, an enclosing mount's policy). Marks are what a
//!   lookup, a listing and `explain` see; permissive mode keeps them
//!   ([`Gatekeeper::alone`]).
//! * [`Gatekeeper::check`]: what the operation wants ([`Intent`]: change an object,
//!   make a name, remove one, move one away or into place, carry one along with a
//!   directory) at a [`Target`] (its path, the object there, its type), refused by
//!   the first guard that refuses it. Permissive mode never waives these.
//!
//! The table, in order (a guard is left out where it has nothing to keep):
//!
//! | guard | keeps |
//! |---|---|
//! | [`files::PolicyFile`] | the policy file, by its paths and by identity, and the directories holding it |
//! | [`files::RunLogs`] | the run's audit log and notices file, by path and identity, and their directories |
//! | [`git::Git`] | what git runs or obeys (see [`super::git_guard`]) |
//! | [`places::VeilfsConfig`] | veilfs's configuration directory and the directories leading to it |
//! | [`files::Imported`] | the files the policy imports rules from, by identity, and their directories |
//! | [`places::Ways`] | the directories on the way to what the policy names |
//! | [`outer::Outer`] | the enclosing mount's policy (a workspace inside the home directory) |
//!
//! The name `.veilfs.toml` and the imported files' names are kept by the policy
//! itself ([`crate::policy::Policy::guard_names`]).
//!
//! Adding a guard is one value implementing [`Guard`] and one entry in
//! [`Gatekeeper::new`]'s table.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::inode::Key;
use super::protect::ProtectedFiles;
use super::refusal::Refusal;
use crate::policy::{Decision, Policy};

pub mod files;
pub mod git;
pub mod outer;
pub mod places;

/// Where an operation acts: a path of the mount, and what is there.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// Relative to the mount's root.
    pub path: &'a [u8],
    /// The backing object at `path` now, when the guards are to look at it (`None`:
    /// nothing there, or not looked at).
    pub key: Option<Key>,
    /// The type (`st_mode`'s type bits) of what is there, or of what arrives.
    pub mode: u32,
    /// The entry itself, as a name in its directory, for a guard that looks inside
    /// it (a directory that holds a repository).
    pub entry: Option<(BorrowedFd<'a>, &'a CStr)>,
}

impl<'a> Target<'a> {
    /// `path`, of type `mode`, looked at by path alone.
    pub fn at(path: &'a [u8], mode: u32) -> Target<'a> {
        Target {
            path,
            key: None,
            mode,
            entry: None,
        }
    }

    /// With the object `key` there.
    pub fn holding(self, key: Option<Key>) -> Target<'a> {
        Target { key, ..self }
    }

    /// With the entry reachable as `name` in `dir`.
    pub fn entry(self, dir: BorrowedFd<'a>, name: &'a CStr) -> Target<'a> {
        Target {
            entry: Some((dir, name)),
            ..self
        }
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
}

/// What an operation wants at a [`Target`].
#[derive(Clone, Copy, Debug)]
pub enum Intent<'a> {
    /// Change the object there (write or truncate it, its attributes or extended
    /// attributes, or link a new name to it).
    Change,
    /// Make a new entry of the target's type there (`key`: what the name holds now,
    /// which `create` without `O_EXCL` opens).
    Make,
    /// Remove the entry there.
    Remove,
    /// Move the entry to `to` (`replaces`: something is at `to` now).
    MoveFrom { to: &'a [u8], replaces: bool },
    /// An entry of the target's type arrives there by a rename (`key`: what it
    /// replaces, or what an exchange moves away).
    MoveTo,
    /// An entry of the target's type beneath a directory being moved arrives there
    /// from `from`.
    Carry { from: &'a [u8] },
}

impl Intent<'_> {
    /// Whether the intent touches the object at the target by identity.
    pub fn touches_object(&self) -> bool {
        matches!(
            self,
            Intent::Change
                | Intent::Make
                | Intent::Remove
                | Intent::MoveFrom { .. }
                | Intent::MoveTo
        )
    }

    /// Whether the entry at the target goes away or is replaced (so a directory
    /// holding what a guard keeps may not be it).
    pub fn vacates(&self) -> bool {
        matches!(
            self,
            Intent::Remove | Intent::MoveFrom { .. } | Intent::MoveTo
        )
    }
}

/// What happened through the mount that a guard keeps count of.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A directory was made at this path.
    MadeDir(&'a [u8]),
    /// The directory at this path was renamed away or removed.
    Vacated(&'a [u8]),
}

/// The workspace on disk, as the guards may look at it: every look is relative to
/// the mount's root and can only ever make a guard refuse more.
#[derive(Debug)]
pub struct Disk {
    root: OwnedFd,
}

impl Disk {
    /// What `path` is on disk, looked up from the root (`None`: nothing there).
    pub fn stat(&self, path: &[u8]) -> Option<libc::stat> {
        std::ffi::CString::new(path.to_vec())
            .ok()
            .and_then(|n| crate::sys::statat(self.root.as_fd(), &n).ok())
    }

    /// Whether `path` is on disk, looked up without following any link.
    pub fn holds_beneath(&self, path: &[u8]) -> bool {
        std::ffi::CString::new(path.to_vec())
            .is_ok_and(|p| crate::sys::stat_beneath(self.root.as_fd(), &p).is_ok())
    }

    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }
}

/// One guard: what it keeps, whatever the policy says.
pub trait Guard: Send + Sync + std::fmt::Debug {
    /// `d` (the decision for `path` so far) made as strict as this guard keeps the
    /// path. `is_dir` says whether the path is decided as a directory (asked only
    /// by a guard whose [`Guard::wants_kind`] is true).
    fn mark(
        &self,
        _path: &[u8],
        _is_dir: &mut dyn FnMut() -> bool,
        d: Decision,
        _disk: &Disk,
    ) -> Decision {
        d
    }

    /// Whether [`Guard::mark`] needs to know if the path is a directory.
    fn wants_kind(&self) -> bool {
        false
    }

    /// The refusal of `intent` at `at`, if this guard refuses it.
    fn refuse(&self, at: &Target, intent: &Intent, disk: &Disk) -> Option<Refusal>;

    /// Whether this guard keeps the object `key` by identity (checked first, so
    /// that an operation spells a path only for an object some guard keeps).
    fn keeps_object(&self, _key: Key) -> bool {
        false
    }

    /// Something happened through the mount.
    fn note(&self, _event: &Event) {}
}

/// The refusal of the path `path` by `decision`.
pub(crate) fn refusal(path: &[u8], decision: Decision) -> Option<Refusal> {
    Some(Refusal {
        path: path.to_vec(),
        decision,
    })
}

/// Whether `path` is `dir` or lies beneath it (both relative to the mount's root;
/// the root itself, empty, holds everything).
pub(crate) fn at_or_under(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

/// Whether `inner` lies strictly beneath the non-empty `path`.
pub(crate) fn strictly_under(inner: &[u8], path: &[u8]) -> bool {
    !path.is_empty()
        && inner.len() > path.len()
        && inner.starts_with(path)
        && inner[path.len()] == b'/'
}

/// The guards of one mount, in order (see the module documentation).
#[derive(Debug)]
pub struct Gatekeeper {
    table: Vec<Box<dyn Guard>>,
    wants_kind: bool,
    disk: Disk,
    /// The objects kept by identity, shared with the reloader (see
    /// [`ProtectedFiles`]).
    pub(crate) protected: Arc<ProtectedFiles>,
}

/// What a [`Gatekeeper`] is built from (see [`super::config::FsConfig`]).
pub struct Keeps {
    /// The policy file's paths inside the mount.
    pub policy_paths: Vec<Vec<u8>>,
    /// The run's own logs: their paths and identities.
    pub run_logs: Vec<(Vec<u8>, Key)>,
    pub git: super::config::Git,
    pub config_dirs: Vec<Vec<u8>>,
    pub ways: Vec<Vec<u8>>,
    pub outer: Option<super::protect::Outer>,
    /// The policy in force (its imports change with reloads).
    pub policy: Arc<parking_lot::RwLock<Arc<Policy>>>,
    /// The session's agent's profile, compiled: what it runs later stays
    /// read-only.
    pub agent: Option<Arc<Policy>>,
}

impl Gatekeeper {
    /// The table for a mount whose root is `root`, keeping what `keeps` names.
    pub fn new(
        root: BorrowedFd,
        keeps: Keeps,
        protected: Arc<ProtectedFiles>,
    ) -> std::io::Result<Gatekeeper> {
        let disk = Disk {
            root: root.try_clone_to_owned()?,
        };
        let mut table: Vec<Box<dyn Guard>> = Vec::new();
        table.push(Box::new(files::PolicyFile {
            paths: keeps.policy_paths,
            protected: protected.clone(),
        }));
        if !keeps.run_logs.is_empty() {
            let mut paths = Vec::new();
            for (path, key) in keeps.run_logs {
                protected.add_log(key);
                paths.push(path);
            }
            table.push(Box::new(files::RunLogs {
                paths,
                protected: protected.clone(),
            }));
        }
        if keeps.git != super::config::Git::Off {
            table.push(Box::new(git::Git::new(keeps.git, &disk)));
        }
        let mut config_dirs: Vec<Vec<u8>> = Vec::new();
        for dir in keeps.config_dirs {
            if !dir.is_empty() && !config_dirs.contains(&dir) {
                config_dirs.push(dir);
            }
        }
        if !config_dirs.is_empty() {
            table.push(Box::new(places::VeilfsConfig { dirs: config_dirs }));
        }
        table.push(Box::new(files::Imported {
            protected: protected.clone(),
            policy: keeps.policy,
        }));
        if !keeps.ways.is_empty() {
            table.push(Box::new(places::Ways { ways: keeps.ways }));
        }
        if let Some(o) = keeps.outer {
            table.push(Box::new(outer::Outer(o)));
        }
        if let Some(profile) = keeps.agent {
            table.push(Box::new(places::AgentFiles::new(profile)));
        }
        table.push(Box::new(places::LearnLogs));
        let wants_kind = table.iter().any(|g| g.wants_kind());
        Ok(Gatekeeper {
            table,
            wants_kind,
            disk,
            protected,
        })
    }

    /// The policy's decision `d` for `path` made as strict as every guard keeps it.
    /// `is_dir` is asked at most once, only when a guard needs it.
    pub fn mark(&self, path: &[u8], is_dir: &mut dyn FnMut() -> bool, d: Decision) -> Decision {
        let mut known = None;
        let mut kind = || *known.get_or_insert_with(&mut *is_dir);
        self.table
            .iter()
            .fold(d, |d, g| g.mark(path, &mut kind, d, &self.disk))
    }

    /// Whether [`Gatekeeper::mark`] asks whether the path is a directory.
    pub fn wants_kind(&self) -> bool {
        self.wants_kind
    }

    /// The decision a permissive mount goes by for `path`: allowed, but for what
    /// the guards keep (and the names the policy keeps), the path taken as a
    /// directory and as a file alike.
    pub fn alone(&self, policy: &Policy, path: &[u8]) -> Decision {
        if path.is_empty() {
            return Decision::root();
        }
        let d = policy.guard_sources(path, Decision::allowed());
        let d = self.mark(path, &mut || true, d);
        self.mark(path, &mut || false, d)
    }

    /// `intent` at `at`, refused by the first guard of the table that refuses it.
    pub fn check(&self, at: &Target, intent: Intent) -> Result<(), Refusal> {
        match self
            .table
            .iter()
            .find_map(|g| g.refuse(at, &intent, &self.disk))
        {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }

    /// Whether some guard keeps the object `key` by identity.
    pub fn keeps_object(&self, key: Key) -> bool {
        self.table.iter().any(|g| g.keeps_object(key))
    }

    /// Tells every guard what happened through the mount.
    pub fn note(&self, event: Event) {
        for g in &self.table {
            g.note(&event);
        }
    }
}
