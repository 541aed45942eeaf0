//! The directories on the way to what a policy names by an anchored path: kept from
//! being renamed, replaced or made as anything but a directory (see
//! [`crate::fs::config::FsConfig::ways`]), so that no link or moved directory put
//! on the way makes the named path lead somewhere the command chose.

use std::path::{Path, PathBuf};

use crate::policy::Policy;

/// Whether a segment of a glob holds a glob metacharacter.
pub(crate) fn is_wild(seg: &str) -> bool {
    seg.contains(['*', '?', '[', '{', '\\'])
}

/// The directories on the way to the paths `policy` (of the mount of `root`) hides
/// or makes read-only by name, as absolute paths: for each such anchored pattern, the
/// directories above its literal part (`root/.cargo` for `/.cargo/config.toml`), for
/// each of its brace alternatives (`/.config/{Code,Cursor}/User/tasks.json` leads
/// through `.config/Code/User` and `.config/Cursor/User`).
/// See [`crate::fs::config::FsConfig::ways`].
pub fn guarded_ways(root: &Path, policy: &Policy) -> Vec<PathBuf> {
    use crate::policy::Action;
    let mut out: Vec<PathBuf> = Vec::new();
    for p in policy.patterns() {
        if p.action == Action::Allow || !p.anchored {
            continue;
        }
        for glob in p.alternatives() {
            let segs: Vec<&str> = glob.split('/').collect();
            let literal = segs.iter().take_while(|seg| !is_wild(seg)).count();
            // The directories above the named path (the path itself is held by the
            // rule); above a wildcard, those above it.
            let n = if literal == segs.len() {
                literal.saturating_sub(1)
            } else {
                literal
            };
            let mut way = root.to_path_buf();
            for seg in &segs[..n] {
                way.push(seg);
                if !out.contains(&way) {
                    out.push(way.clone());
                }
            }
        }
    }
    out
}

/// `ways` (absolute) that lie in `root`, relative to it.
pub fn ways_under(root: &Path, ways: &[PathBuf]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    ways.iter()
        .filter_map(|w| w.strip_prefix(root).ok())
        .map(|r| r.as_os_str().as_bytes().to_vec())
        .filter(|r| !r.is_empty())
        .collect()
}
