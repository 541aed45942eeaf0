//! One policy per request.
//!
//! A request takes one [`Snapshot`] (the epoch and the policy in force at that
//! epoch, read together) before it decides anything, and uses it for every decision
//! it makes and every decision it caches: a reload that lands mid-request neither
//! mixes two policies in one answer nor leaves a decision of the old policy cached
//! as current (it is cached under the old epoch, so the next request recomputes it).
//!
//! A reload stores the new policy and bumps the epoch under the policy's write lock,
//! and a snapshot reads both under the read lock, so the pair is exact. A directory
//! rename bumps the epoch alone (the policy is the same; paths changed).

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::VeilFs;
use super::request::Req;
use crate::policy::Policy;

/// The epoch and the policy a request decides under, and the request itself.
#[derive(Clone, Debug)]
pub struct Snapshot<'r> {
    pub epoch: u64,
    pub policy: Arc<Policy>,
    pub req: &'r Req,
}

/// A test seam: something run inside a request between the decision of a
/// directory and the decision of a name in it (where a concurrent reload can land),
/// so a test can make that interleaving happen deterministically.
#[derive(Default)]
pub struct Seam(OnceLock<Box<dyn Fn() + Send + Sync>>);

impl std::fmt::Debug for Seam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Seam(set)"
        } else {
            "Seam"
        })
    }
}

impl Seam {
    pub(crate) fn run(&self) {
        if let Some(f) = self.0.get() {
            f();
        }
    }
}

impl VeilFs {
    /// The epoch and the policy in force at it, read together, for `req`.
    pub(crate) fn snapshot<'r>(&self, req: &'r Req) -> Snapshot<'r> {
        let policy = self.policy.read();
        Snapshot {
            epoch: self.epoch.load(Ordering::Acquire),
            policy: policy.clone(),
            req,
        }
    }

    /// Runs `f` inside each `lookup` and each new listing, after the directory's
    /// decision and before those of the names in it (for tests that land a reload
    /// there). Set once; later calls are ignored.
    #[doc(hidden)]
    pub fn set_mid_request_hook(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.seam.0.set(Box::new(f));
    }

    /// How many cached decisions have been recomputed because they were stale (a
    /// reload, a rename): a measure of what an invalidation costs.
    pub fn decisions_recomputed(&self) -> u64 {
        self.recomputed.load(Ordering::Relaxed)
    }
}
