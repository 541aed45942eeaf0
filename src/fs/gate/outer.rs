//! The guard of an enclosing mount's policy: under `veilfs run`, a workspace inside
//! the home directory is decided by the home policy too (the stricter decision
//! wins), so that what the home policy keeps stays kept through the workspace.

use super::{Disk, Guard, Intent, Target};
use crate::fs::refusal::Refusal;
use crate::policy::Decision;

/// The enclosing mount's policy (see [`crate::fs::protect::Outer`]).
#[derive(Debug)]
pub struct Outer(pub crate::fs::protect::Outer);

impl Guard for Outer {
    fn mark(
        &self,
        path: &[u8],
        is_dir: &mut dyn FnMut() -> bool,
        d: Decision,
        _: &Disk,
    ) -> Decision {
        let o = &self.0;
        let mut full = o.prefix.clone();
        if !path.is_empty() {
            if !full.is_empty() {
                full.push(b'/');
            }
            full.extend_from_slice(path);
        }
        let od = o.policy.read().clone().decide(&full, is_dir());
        d.stricter(od)
    }

    fn wants_kind(&self) -> bool {
        true
    }

    fn refuse(&self, _: &Target, _: &Intent, _: &Disk) -> Option<Refusal> {
        None
    }
}
