//! The guards of the files that make the policy and record the session: the policy
//! file, the run's own logs and the files the policy imports rules from. Each is kept
//! read-only by identity (every name that reaches the object, a hard link included)
//! and, where it has one inside the mount, by path (so that a new file renamed over
//! it is refused as well); no directory holding one is renamed or removed, so that
//! the daemon keeps reading the file where the person outside edits it.

use std::sync::Arc;

use super::{Disk, Guard, Intent, Target, refusal, strictly_under};
use crate::fs::inode::Key;
use crate::fs::protect::ProtectedFiles;
use crate::fs::refusal::Refusal;
use crate::policy::{Decision, Policy};

/// The policy file the mount reads.
#[derive(Debug)]
pub struct PolicyFile {
    /// Its workspace-relative paths, as given and resolved (see
    /// `protect::policy_paths`).
    pub paths: Vec<Vec<u8>>,
    /// Its identity, set at start and by every reload.
    pub protected: Arc<ProtectedFiles>,
}

impl Guard for PolicyFile {
    fn mark(&self, path: &[u8], _: &mut dyn FnMut() -> bool, d: Decision, _: &Disk) -> Decision {
        if self.paths.iter().any(|p| p.as_slice() == path) {
            d.guard_policy_file()
        } else {
            d
        }
    }

    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        if intent.touches_object() && at.key.is_some_and(|k| self.protected.contains(k)) {
            return refusal(at.path, Decision::policy_file());
        }
        if intent.vacates() && self.paths.iter().any(|p| strictly_under(p, at.path)) {
            return refusal(at.path, Decision::holds_policy_file());
        }
        None
    }

    fn keeps_object(&self, key: Key) -> bool {
        self.protected.contains(key)
    }
}

/// The run's own logs (its audit log, its notices file) this mount serves.
#[derive(Debug)]
pub struct RunLogs {
    /// Their paths, relative to the mount's root.
    pub paths: Vec<Vec<u8>>,
    pub protected: Arc<ProtectedFiles>,
}

impl Guard for RunLogs {
    fn mark(&self, path: &[u8], _: &mut dyn FnMut() -> bool, d: Decision, _: &Disk) -> Decision {
        if self.paths.iter().any(|p| p.as_slice() == path) {
            d.guard_audit_log()
        } else {
            d
        }
    }

    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        let kept = intent.touches_object() && at.key.is_some_and(|k| self.protected.is_log(k));
        let holds = intent.vacates() && self.paths.iter().any(|p| strictly_under(p, at.path));
        (kept || holds)
            .then(Decision::audit_log)
            .and_then(|d| refusal(at.path, d))
    }

    fn keeps_object(&self, key: Key) -> bool {
        self.protected.is_log(key)
    }
}

/// The files the policy imports rules from (`.gitignore` and the like): kept by
/// identity here, by name in the policy itself.
#[derive(Debug)]
pub struct Imported {
    pub protected: Arc<ProtectedFiles>,
    /// The policy in force, whose imports change with each reload.
    pub policy: Arc<parking_lot::RwLock<Arc<Policy>>>,
}

impl Imported {
    /// Whether the directory `path` holds an ignore file the policy in force
    /// imports (see [`Policy::holds_imported`]).
    fn holds_imported(&self, path: &[u8]) -> bool {
        let p = self.policy.read();
        !p.import_names().is_empty() && p.holds_imported(path)
    }
}

impl Guard for Imported {
    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        let kept = intent.touches_object() && at.key.is_some_and(|k| self.protected.is_imported(k));
        let holds = intent.vacates() && self.holds_imported(at.path);
        (kept || holds)
            .then(Decision::imported_file)
            .and_then(|d| refusal(at.path, d))
    }

    fn keeps_object(&self, key: Key) -> bool {
        self.protected.is_imported(key)
    }
}
