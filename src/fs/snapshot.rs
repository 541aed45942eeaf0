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

use std::sync::Arc;
use std::sync::atomic::Ordering;

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

    /// How many cached decisions have been recomputed because they were stale (a
    /// reload, a rename): a measure of what an invalidation costs.
    pub fn decisions_recomputed(&self) -> u64 {
        self.recomputed.load(Ordering::Relaxed)
    }
}
