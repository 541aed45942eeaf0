//! The paths a policy denies that the workspace's git repository tracks: their
//! content stays readable through git's history (`git show HEAD:PATH`), so `check`,
//! `explain` and the start-up lines warn of them. Read from `.git/index` itself
//! ([`super::git_index`]), bounded in count and time.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::policy::{Decision, Policy};

/// At most this many tracked denied paths are named one by one.
pub const MAX_TRACKED: usize = 20;

/// How long [`tracked_denied`] decides the paths of the index before it stops (the
/// index is the workspace's: one planted there must not hold up `check`).
pub const TRACKED_TIME: Duration = Duration::from_secs(2);

/// Index paths longer than this are not decided (no working tree holds them).
const TRACKED_PATH_MAX: usize = 4096;

/// The denied paths that the workspace's git repository tracks: their content is
/// readable through history (`git show HEAD:PATH`), which veilfs cannot filter.
/// Empty when the workspace is no git work tree's top.
pub fn tracked_denied(policy: &Policy, workspace: &Path) -> Vec<String> {
    tracked_denied_within(policy, workspace, TRACKED_TIME).0
}

/// [`tracked_denied`] within `budget`; says whether every path was decided. Each
/// directory is decided once, from its parent's decision, as the mount decides it.
pub fn tracked_denied_within(
    policy: &Policy,
    workspace: &Path,
    budget: Duration,
) -> (Vec<String>, bool) {
    let deadline = Instant::now() + budget;
    // Read from the index itself: git is never run on the workspace (its
    // configuration could make it run anything, see `git_index`).
    let paths = crate::workspace::git_index::tracked_paths(workspace);
    let mut dirs: HashMap<Vec<u8>, Decision> = HashMap::new();
    let mut out = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        if i % 64 == 0 && Instant::now() > deadline {
            return (out, false);
        }
        // No working tree holds an empty, `.` or `..` segment (git refuses them).
        if p.len() > TRACKED_PATH_MAX
            || p.split(|&b| b == b'/')
                .any(|seg| seg.is_empty() || seg == b"." || seg == b"..")
        {
            continue;
        }
        let mut parent = Decision::root();
        let mut end = 0;
        while let Some(slash) = p[end..].iter().position(|&b| b == b'/') {
            let dir = &p[..end + slash];
            parent = match dirs.get(dir) {
                Some(d) => d.clone(),
                None => {
                    let d = policy.decide_child(&parent, dir, || true);
                    dirs.insert(dir.to_vec(), d.clone());
                    d
                }
            };
            end += slash + 1;
        }
        if policy.decide_child(&parent, p, || false).action == crate::policy::Action::Deny {
            out.push(crate::escape::printable(p));
        }
    }
    (out, true)
}

/// [`tracked_denied`] as warnings: one per path (at most [`MAX_TRACKED`]), then a
/// count of the rest.
pub fn tracked_warnings(policy: &Policy, workspace: &Path) -> Vec<String> {
    let tracked = tracked_denied(policy, workspace);
    let mut out: Vec<String> = tracked
        .iter()
        .take(MAX_TRACKED)
        .map(|p| format!("warning: {}", tracked_message(p)))
        .collect();
    if tracked.len() > MAX_TRACKED {
        out.push(format!(
            "warning: and {} more denied paths tracked in git",
            tracked.len() - MAX_TRACKED
        ));
    }
    out
}

/// What is said of a denied path `p` that git tracks.
pub fn tracked_message(p: &str) -> String {
    format!(
        "{p} is denied but tracked in git: its content is readable through history \
         (`git show HEAD:{p}`); deny `.git/` or remove it from history"
    )
}
