//! `veilfs explain --net HOST:PORT`: what `veilfs run` would do with a connection
//! to each destination, under the `[network]` table of the workspace policy, and
//! why (the SPEC and where it was written).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::policy::net::{Dest, NetRules};
use crate::workspace::load;

/// Explains each of `dests` (`host:port`) under the policy `policy` of the
/// workspace `given` (found as `run` finds it when `None`).
pub fn explain_net(
    dests: &[String],
    policy: Option<&Path>,
    given: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let workspace = super::workspace_or_found(given)?;
    let loaded = load::load_policy(policy, &workspace)?;
    let table = load::network_table(loaded.path.as_deref())?;
    let out = std::io::stdout();
    let mut out = out.lock();
    let esc = crate::escape::escape;
    if !json {
        writeln!(out, "# policy: {}", esc(&loaded.source()))?;
    }
    let mut bad = false;
    for text in dests {
        match Dest::parse(text) {
            Ok(dest) => say(&mut out, table.as_ref(), &dest, json)?,
            Err(e) => {
                bad = true;
                eprintln!("veilfs explain: {}: {e}", esc(text));
            }
        }
    }
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Says what becomes of a connection to `dest` under `rules` (`None`: the policy
/// has no `[network]` table).
fn say(
    out: &mut impl Write,
    rules: Option<&NetRules>,
    dest: &Dest,
    json: bool,
) -> std::io::Result<()> {
    let (action, why) = match rules {
        Some(rules) => {
            let d = rules.decide(dest);
            (d.action.as_str(), d.why())
        }
        None => (
            "allow",
            "no [network] table: `veilfs run` gives the host's network unless `--net` \
             confines it"
                .to_string(),
        ),
    };
    if json {
        let v = serde_json::json!({
            "net": dest.to_string(),
            "action": action,
            "why": why,
        });
        writeln!(out, "{}", crate::escape::json(&v))
    } else {
        writeln!(out, "{dest}: {action}  ({})", crate::escape::escape(&why))
    }
}
