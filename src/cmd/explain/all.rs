//! `veilfs explain --all`: every path of the workspace that the policy denies,
//! asks for or makes read-only, with the rule that decided it, as `git check-ignore
//! -v` lists what git ignores (from [`crate::workspace::walk`]); a summary line ends
//! the text.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use crate::escape::{escape, printable};
use crate::policy::Policy;
use crate::workspace::walk::{summary, walk};

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
            writeln!(out, "{}", crate::escape::json(&v))?;
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
        writeln!(out, "{}", crate::escape::json(&v))?;
    } else {
        writeln!(out, "{}", summary(&held))?;
    }
    Ok(())
}
