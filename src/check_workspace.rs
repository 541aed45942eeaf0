//! What `veilfs check` says of a policy against the workspace it is for: patterns
//! that match nothing there (a typo such as `config/prod.yml`, or a rule meant for
//! files to come), and directory-only patterns naming a file. One walk of the tree
//! (no link followed, `.git` not entered, no file opened); only the patterns of the
//! policy's own file are looked at.

use std::collections::HashMap;
use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::policy::{Decision, Policy};
use crate::policy_imports;

/// The warnings, as `FILE:LINE:COL: warning: ...` lines (nothing when the tree
/// cannot be read or is too big to walk whole).
pub fn warnings(policy: &Policy, workspace: &Path) -> Vec<String> {
    let own = policy.own_patterns();
    if own.is_empty() {
        return Vec::new();
    }
    let Ok(root) = crate::sys::open_dir_path(workspace) else {
        return Vec::new();
    };
    let pats = policy.patterns();
    let mut matched: HashSet<usize> = HashSet::new();
    let mut files: HashSet<Vec<u8>> = HashSet::new();
    let complete = policy_imports::each_path(root.as_fd(), |path, kind| {
        let is_dir = kind == libc::DT_DIR;
        for id in policy.matching_patterns(path) {
            if is_dir || !pats[id].dir_only {
                matched.insert(id);
            }
        }
        if !is_dir {
            files.insert(path.to_vec());
        }
    });
    if !matches!(complete, Ok(true)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for id in own {
        let p = &pats[id];
        let head = format!("{}: warning: rule {} pattern {:?}", p.at, p.rule, p.text);
        let literal = !p.glob().contains(['*', '?', '[', ']', '{', '}', '\\']);
        if p.dir_only && p.anchored && literal && files.contains(p.glob().as_bytes()) {
            out.push(format!(
                "{head} ends in `/`, so it matches directories only, but {} is a file: \
                 write {:?}",
                crate::printable::escape(p.glob()),
                p.text.trim_end_matches('/')
            ));
        } else if !matched.contains(&id) {
            out.push(format!(
                "{head} matches nothing in the workspace now (a typo? it may be meant for \
                 files to come)"
            ));
        }
    }
    out
}

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
    let paths = crate::git_index::tracked_paths(workspace);
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
            out.push(crate::printable::printable(p));
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

/// Names the built-in default hides, one of each kind, that a policy which hides
/// the usual secrets hides too.
const USUAL_SECRETS: [(&str, bool); 4] = [
    (".env", false),
    ("id_rsa", false),
    ("server.pem", false),
    ("secrets", true),
];

/// A warning when the workspace's policy file `file` is tracked by the git
/// repository at the top of `workspace` (so it may have come with a clone, from
/// whoever wrote the repository) and leaves open what the built-in default hides:
/// a path of the tree the default denies (from a walk as bounded as the start-up
/// line's), else one of the usual secrets' names (`.env`, keys, `secrets/`) should
/// such a file appear. The first such path is named.
pub fn committed_policy_warning(policy: &Policy, workspace: &Path, file: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let rel = file.strip_prefix(workspace).ok()?.as_os_str().as_bytes();
    if !crate::git_index::tracked_paths(workspace)
        .iter()
        .any(|p| p == rel)
    {
        return None;
    }
    let open =
        |path: &[u8], dir: bool| policy.decide(path, dir).action != crate::policy::Action::Deny;
    let deadline = std::time::Instant::now() + crate::explain_all::STARTUP_TIME;
    let in_tree = crate::explain_all::walk_within(
        &Policy::builtin(),
        workspace,
        crate::explain_all::STARTUP_DIRS,
        Some(deadline),
    )
    .ok()
    .and_then(|(held, _)| {
        held.listed
            .into_iter()
            .find(|(path, dir, action, _)| {
                *action == crate::policy::Action::Deny && open(path, *dir)
            })
            .map(|(path, dir, _, _)| (path, dir))
    });
    let (path, dir) = in_tree.or_else(|| {
        USUAL_SECRETS
            .iter()
            .find(|(name, dir)| open(name.as_bytes(), *dir))
            .map(|(name, dir)| (name.as_bytes().to_vec(), *dir))
    })?;
    Some(format!(
        "the policy {} is tracked by git, so it may have come with the repository, and it \
         does not hide {}{}, which the built-in default hides: read it before you trust it \
         (`veilfs explain --all`)",
        crate::printable::printable(rel),
        crate::printable::printable(&path),
        if dir { "/" } else { "" }
    ))
}
