//! `veilfs explain --all`: every path of the workspace that the policy denies,
//! asks for or makes read-only, with the rule that decided it, as `git check-ignore
//! -v` lists what git ignores. One walk of the tree (no link followed, `.git` not
//! entered, no file opened). A path that only inherits its directory's decision is
//! counted, not listed; a summary line ends the text.

use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::policy::{Action, Decision, Policy, Reason};
use crate::policy_imports;
use crate::printable::{escape, printable};

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
    let (held, complete) = walk_within(policy, root, policy_imports::MAX_DIRS, None)?;
    if !complete {
        anyhow::bail!(
            "more than {} directories: not walked whole",
            policy_imports::MAX_DIRS
        );
    }
    Ok(held)
}

/// [`walk`] of at most `limit` directories, entering none after `deadline`; says
/// whether it saw them all. Each path is decided from its directory's decision, as
/// the mount decides it.
pub fn walk_within(
    policy: &Policy,
    root: &Path,
    limit: usize,
    deadline: Option<Instant>,
) -> Result<(Held, bool)> {
    let fd = crate::sys::open_dir_path(root)?;
    let mut late = false;
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
    let complete = policy_imports::walk(
        fd.as_fd(),
        limit,
        Decision::root(),
        |parent, child| {
            if deadline.is_some_and(|t| Instant::now() > t) {
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

/// Prints [`walk`]'s findings as `explain` lines (or JSON objects), then a summary.
pub fn explain_all(
    policy: &Policy,
    workspace: &Path,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let held = walk(policy, workspace)?;
    for (path, is_dir, action, why) in &held.listed {
        if json {
            let v = serde_json::json!({
                "path": String::from_utf8_lossy(path),
                "dir": is_dir,
                "action": action.as_str(),
                "why": why,
            });
            writeln!(out, "{}", crate::printable::json(&v))?;
        } else {
            writeln!(
                out,
                "{:<9} {}{}  ({})",
                action.as_str(),
                printable(path),
                if *is_dir { "/" } else { "" },
                escape(why)
            )?;
        }
    }
    if json {
        let v = serde_json::json!({
            "summary": true,
            "hidden": held.hidden,
            "held": held.held,
            "places": held.places(),
        });
        writeln!(out, "{}", crate::printable::json(&v))?;
    } else {
        writeln!(out, "{}", summary(&held))?;
    }
    Ok(())
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
            crate::check_workspace::tracked_denied_within(policy, root, STARTUP_TIME);
        if let Some(first) = tracked.first() {
            let mut w = crate::check_workspace::tracked_message(first);
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
