//! One walk of the workspace deciding every path by a policy (no link followed,
//! `.git` not entered, no file opened): what `veilfs explain --all` lists, what the
//! start-up lines of `mount` and `run` say the policy hides, and whether a policy
//! tracked by git leaves open what the built-in default hides. A path that only
//! inherits its directory's decision is counted, not listed.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::policy::{Action, Decision, Policy, Reason};
use crate::workspace::imports;

/// What the walk found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The paths a rule decides for itself (not by inheritance), with the
    /// decision, sorted, each with whether it is a directory.
    pub listed: Vec<(Vec<u8>, bool, Action, String)>,
    /// Every path denied, those inside a denied directory included.
    pub hidden: usize,
    /// Every path read-only (or asking), inherited or not.
    pub held: usize,
}

/// Walks the workspace under `root` and decides every path with `policy`.
pub fn walk(policy: &Policy, root: &Path) -> Result<Held> {
    let (held, complete) = walk_within(policy, root, imports::MAX_DIRS, None)?;
    if !complete {
        anyhow::bail!(
            "more than {} directories: not walked whole",
            imports::MAX_DIRS
        );
    }
    Ok(held)
}

/// [`walk`] of at most `limit` directories, entering none after `deadline` once
/// [`ALWAYS_ENTERED`] are entered (so a small tree is seen whole however loaded the
/// machine is); says whether it saw them all. Each path is decided from its
/// directory's decision, as the mount decides it.
pub fn walk_within(
    policy: &Policy,
    root: &Path,
    limit: usize,
    deadline: Option<Instant>,
) -> Result<(Held, bool)> {
    let fd = crate::sys::open_dir_path(root)?;
    let mut late = false;
    let mut entered = 0;
    let mut out = Held::default();
    let mut dirs: Vec<(Vec<u8>, Decision)> = Vec::new();
    let count = |out: &mut Held, path: &[u8], is_dir: bool, d: &Decision| {
        match d.action {
            Action::Allow => return,
            Action::Deny => out.hidden += 1,
            _ => out.held += 1,
        }
        if !matches!(d.reason, Reason::Ancestor { .. }) {
            out.listed.push((path.to_vec(), is_dir, d.action, d.why()));
        }
    };
    let complete = imports::walk(
        fd.as_fd(),
        limit,
        Decision::root(),
        |parent, child| {
            entered += 1;
            if entered > ALWAYS_ENTERED && deadline.is_some_and(|t| Instant::now() > t) {
                late = true;
                return None;
            }
            let d = policy.decide_child(parent, child, || true);
            dirs.push((child.to_vec(), d.clone()));
            Some(d)
        },
        |parent, e| {
            // As the mount decides: a symbolic link as a directory.
            let is_dir = e.kind == libc::DT_DIR || e.kind == libc::DT_LNK;
            let path = e.path();
            let d = policy.decide_child(parent, &path, || is_dir);
            count(&mut out, &path, is_dir, &d);
            Ok(())
        },
    )?;
    for (path, d) in &dirs {
        count(&mut out, path, true, d);
    }
    out.listed.sort();
    Ok((out, complete && !late))
}

impl Held {
    /// The listed paths that are denied: the places a rule hides something.
    pub fn places(&self) -> usize {
        self.listed
            .iter()
            .filter(|(_, _, a, _)| *a == Action::Deny)
            .count()
    }
}

/// `41 paths in 7 places`.
fn hiding(h: &Held) -> String {
    let places = h.places();
    format!(
        "{} path{} in {} place{}",
        h.hidden,
        if h.hidden == 1 { "" } else { "s" },
        places,
        if places == 1 { "" } else { "s" },
    )
}

/// `# hiding 41 paths in 7 places; 12 more read-only or asked for (.git not walked)`.
pub fn summary(h: &Held) -> String {
    format!(
        "# hiding {}; {} more read-only or asked for (.git not walked)",
        hiding(h),
        h.held
    )
}

/// How many directories a walk with a deadline enters whatever the time.
pub const ALWAYS_ENTERED: usize = 64;

/// The most directories the start-up line's walk reads: past it, or past
/// [`STARTUP_TIME`], the line says "at least".
pub const STARTUP_DIRS: usize = 5_000;

/// How long the start-up line's walk may take before it enters no more
/// directories (a tree of 30,000 files takes about twice this on a warm cache).
pub const STARTUP_TIME: Duration = Duration::from_millis(60);

/// What the start-up lines of `mount` and `run` say about the workspace `root`
/// under `policy`, from a walk of at most [`STARTUP_DIRS`] directories.
#[derive(Debug, Default)]
pub struct StartupWalk {
    /// `hiding 41 paths in 7 places` (`hiding at least …` when the walk stopped
    /// early); `None` when the walk failed.
    pub hiding: Option<String>,
    /// The walk stopped early: the count is a floor.
    pub partial: bool,
    /// Denied paths its git repository tracks (readable through history).
    pub warning: Option<String>,
}

impl StartupWalk {
    /// The walk of `root` under `policy`, and the tracked denied paths.
    pub fn of(policy: &Policy, root: &Path) -> StartupWalk {
        let deadline = Instant::now() + STARTUP_TIME;
        let mut walk = StartupWalk::default();
        match walk_within(policy, root, STARTUP_DIRS, Some(deadline)) {
            Ok((held, complete)) => {
                walk.partial = !complete;
                walk.hiding = Some(format!(
                    "hiding {}{}",
                    if complete { "" } else { "at least " },
                    hiding(&held)
                ));
            }
            Err(e) => log::info!("start-up walk of {}: {e}", root.display()),
        }
        let (tracked, _) =
            crate::workspace::tracked::tracked_denied_within(policy, root, STARTUP_TIME);
        if let Some(first) = tracked.first() {
            let mut w = crate::workspace::tracked::tracked_message(first);
            if tracked.len() > 1 {
                w.push_str(&format!(
                    " ({} more denied paths are tracked: `veilfs check` names them)",
                    tracked.len() - 1
                ));
            }
            walk.warning = Some(w);
        }
        walk
    }

    /// The hiding count with where to see the list: `hiding 4 paths in 4 places
    /// (`veilfs explain --all` lists them)`.
    pub fn hiding_in_full(&self) -> Option<String> {
        self.hiding.as_ref().map(|h| {
            format!(
                "{h} (`veilfs explain --all` lists {})",
                if self.partial {
                    "them all: this count stopped early"
                } else {
                    "them"
                }
            )
        })
    }
}

/// What the start-up line of `mount` adds about the workspace `root` under
/// `policy`: how much it hides, and the denied paths its git repository tracks.
/// Each part begins with `; `.
pub fn startup_note(policy: &Policy, root: &Path) -> String {
    let walk = StartupWalk::of(policy, root);
    let mut note = String::new();
    if let Some(h) = walk.hiding_in_full() {
        note.push_str("; ");
        note.push_str(&h);
    }
    if let Some(w) = &walk.warning {
        note.push_str("; warning: ");
        note.push_str(w);
    }
    note
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
    if !crate::workspace::git_index::tracked_paths(workspace)
        .iter()
        .any(|p| p == rel)
    {
        return None;
    }
    let open =
        |path: &[u8], dir: bool| policy.decide(path, dir).action != crate::policy::Action::Deny;
    let deadline = std::time::Instant::now() + STARTUP_TIME;
    let in_tree = walk_within(&Policy::builtin(), workspace, STARTUP_DIRS, Some(deadline))
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
        crate::escape::printable(rel),
        crate::escape::printable(&path),
        if dir { "/" } else { "" }
    ))
}
