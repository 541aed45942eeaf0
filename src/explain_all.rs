//! `veilfs explain --all`: every path of the workspace that the policy denies,
//! asks for or makes read-only, with the rule that decided it, as `git check-ignore
//! -v` lists what git ignores. One walk of the tree (no link followed, `.git` not
//! entered, no file opened). A path that only inherits its directory's decision is
//! counted, not listed; a summary line ends the text.

use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use anyhow::Result;

use crate::policy::{Action, Policy, Reason};
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
    let fd = crate::sys::open_dir_path(root)?;
    let mut out = Held::default();
    let complete = policy_imports::each_path(fd.as_fd(), |path, kind| {
        // As the mount decides: a symbolic link as a directory.
        let is_dir = kind == libc::DT_DIR || kind == libc::DT_LNK;
        let d = policy.decide(path, is_dir);
        match d.action {
            Action::Allow => return,
            Action::Deny => out.hidden += 1,
            _ => out.held += 1,
        }
        if !matches!(d.reason, Reason::Ancestor { .. }) {
            out.listed.push((path.to_vec(), is_dir, d.action, d.why()));
        }
    })?;
    if !complete {
        anyhow::bail!(
            "more than {} directories: not walked whole",
            policy_imports::MAX_DIRS
        );
    }
    out.listed.sort();
    Ok(out)
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
            writeln!(out, "{v}")?;
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
        writeln!(out, "{v}")?;
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

/// `# hiding 41 paths in 7 places; 12 more read-only or asked for (.git not walked)`.
pub fn summary(h: &Held) -> String {
    let places = h.places();
    format!(
        "# hiding {} path{} in {} place{}; {} more read-only or asked for (.git not walked)",
        h.hidden,
        if h.hidden == 1 { "" } else { "s" },
        places,
        if places == 1 { "" } else { "s" },
        h.held
    )
}
