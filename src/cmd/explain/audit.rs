//! `veilfs explain --audit FILE`: what an audit log says was refused, or would have
//! been (a `--permissive` run), counted by the rule that made the decision, then
//! path by path with what the policy in force decides now, so that a person tuning
//! a policy sees which of the logged accesses the edited policy still refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::policy::{Action, Decision, Policy};

/// What the log says of one path.
#[derive(Default)]
struct Seen {
    /// `refused`, `would-refuse`, `would-ask` → how many events.
    results: BTreeMap<String, u64>,
    ops: BTreeSet<String>,
    comms: BTreeSet<String>,
    /// The rule of the first event, as the log names it.
    rule: String,
}

impl Seen {
    fn count(&self) -> u64 {
        self.results.values().sum()
    }
}

/// The events counted: refusals and what a permissive mount would have refused.
fn counted(result: &str) -> bool {
    result == "refused" || result.starts_with("would-")
}

/// The rule an event names, as one line.
fn rule_of(v: &serde_json::Value) -> String {
    match (v.get("rule"), v.get("pattern"), v.get("location")) {
        (Some(r), Some(p), Some(l)) => format!("rule {r} {p} ({})", l.as_str().unwrap_or("")),
        _ => v["why"].as_str().unwrap_or("?").to_string(),
    }
}

/// The largest audit log read.
pub const MAX_LOG: u64 = 1 << 30;

/// The text of the log `log`: a regular file (a link is followed, as the person
/// named it, but a device or a FIFO put in its place is refused, and nothing waits
/// for a writer) of at most [`MAX_LOG`] bytes.
pub(crate) fn read_bounded(log: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(log)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_LOG {
        return Err(std::io::Error::other(format!(
            "{} bytes: more than the {MAX_LOG} read",
            meta.len()
        )));
    }
    let mut text = String::new();
    f.take(MAX_LOG).read_to_string(&mut text)?;
    Ok(text)
}

/// The log's paths (the home mount's with `~/` before them), and the events dropped.
fn read_log(log: &Path) -> Result<(BTreeMap<String, Seen>, u64)> {
    let text = read_bounded(log).with_context(|| format!("reading {}", log.display()))?;
    let mut paths: BTreeMap<String, Seen> = BTreeMap::new();
    let mut dropped = 0u64;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| {
            let shown: String = line.chars().take(200).collect();
            format!(
                "{}: not an audit line: {}{}",
                log.display(),
                crate::escape::escape(&shown),
                if shown.len() < line.len() { "…" } else { "" }
            )
        })?;
        if let Some(n) = v.get("dropped").and_then(|n| n.as_u64()) {
            dropped += n;
            continue;
        }
        let result = v["result"].as_str().unwrap_or("");
        if !counted(result) {
            continue;
        }
        let path = v["path"].as_str().unwrap_or("");
        let key = match v["root"].as_str() {
            Some("home") => format!("~/{path}"),
            _ => path.to_string(),
        };
        let seen = paths.entry(key).or_default();
        if seen.rule.is_empty() {
            seen.rule = rule_of(&v);
        }
        *seen.results.entry(result.to_string()).or_default() += 1;
        if let Some(op) = v["op"].as_str() {
            seen.ops.insert(op.to_string());
        }
        if let Some(c) = v["comm"].as_str().filter(|c| !c.is_empty()) {
            seen.comms.insert(c.to_string());
        }
    }
    Ok((paths, dropped))
}

/// The policies in force now, as `veilfs run` takes them.
pub struct Now<'a> {
    /// The workspace's policy, and the workspace.
    pub policy: &'a Policy,
    pub workspace: &'a Path,
    /// The home policy around a workspace inside the home directory, and where the
    /// workspace lies in it: the stricter decision wins there.
    pub outer: Option<(&'a Policy, &'a [u8])>,
    /// The home policy and the home directory, for the home mount's paths (`~/`).
    pub home: Option<(&'a Policy, &'a Path)>,
}

/// Whether the mount decides `bytes` (a path under `root`) as a directory: a
/// directory or a symbolic link is, and a name that is not there is where that
/// denies it (so that an answer never says whether a hidden directory exists).
pub(crate) fn decided_as_dir(policy: &Policy, root: &Path, bytes: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    match root
        .join(std::ffi::OsStr::from_bytes(bytes))
        .symlink_metadata()
    {
        Ok(m) => m.is_dir() || m.file_type().is_symlink(),
        Err(_) => {
            !bytes.is_empty()
                && policy.decide(bytes, true).action == Action::Deny
                && policy.decide(bytes, false).action != Action::Deny
        }
    }
}

/// What `policy` decides for `path` under `root`, as the mount decides it (see
/// [`decided_as_dir`]), and whether as a directory.
fn decide_in(policy: &Policy, root: &Path, bytes: &[u8]) -> (Decision, bool) {
    let is_dir = decided_as_dir(policy, root, bytes);
    (policy.decide(bytes, is_dir), is_dir)
}

/// What the policies in force decide now for `path` (`~/...`: of the home mount).
/// `None` for a home path without a home policy.
fn decide_now(now: &Now, path: &str) -> Option<Decision> {
    if let Some(rel) = path.strip_prefix("~/") {
        let (policy, home) = now.home?;
        return Some(decide_in(policy, home, rel.as_bytes()).0);
    }
    if path.is_empty() {
        return Some(Decision::root());
    }
    let (d, is_dir) = decide_in(now.policy, now.workspace, path.as_bytes());
    Some(match now.outer {
        Some((outer, prefix)) => {
            let full = [prefix, b"/", path.as_bytes()].concat();
            d.stricter(outer.decide(&full, is_dir))
        }
        None => d,
    })
}

/// Writes the report of `log`, with the decisions the policies `now` take.
pub fn explain_audit(log: &Path, now: &Now, json: bool, out: &mut impl Write) -> Result<()> {
    let (paths, dropped) = read_log(log)?;
    let p = crate::escape::escape;
    if json {
        for (path, seen) in &paths {
            let mut v = serde_json::json!({
                "path": path,
                "count": seen.count(),
                "results": seen.results,
                "ops": seen.ops,
                "comms": seen.comms,
                "logged_rule": seen.rule,
            });
            if let Some(d) = decide_now(now, path) {
                v["now"] = d.to_json(path.as_bytes());
            }
            writeln!(out, "{}", crate::escape::json(&v))?;
        }
        if dropped > 0 {
            writeln!(out, "{}", serde_json::json!({ "dropped": dropped }))?;
        }
        return Ok(());
    }
    let total = |r: &str| -> u64 { paths.values().filter_map(|s| s.results.get(r)).sum() };
    let (refused, would, asked) = (total("refused"), total("would-refuse"), total("would-ask"));
    writeln!(
        out,
        "# {}: {refused} refused; {would} would have been refused and {asked} asked about \
         (--permissive); in {} path{}",
        p(&log.display().to_string()),
        paths.len(),
        if paths.len() == 1 { "" } else { "s" }
    )?;
    // By rule: how many events, and a few of the paths.
    let mut by_rule: BTreeMap<&str, (u64, Vec<&str>)> = BTreeMap::new();
    for (path, seen) in &paths {
        let slot = by_rule.entry(&seen.rule).or_default();
        slot.0 += seen.count();
        slot.1.push(path);
    }
    let mut rows: Vec<_> = by_rule.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.0));
    for (rule, (n, paths)) in rows {
        let sample: Vec<String> = paths.iter().take(5).map(|s| p(s)).collect();
        let more = if paths.len() > 5 {
            format!(", … {} paths", paths.len())
        } else {
            String::new()
        };
        writeln!(out, "{n:>6}  {}: {}{more}", p(rule), sample.join(", "))?;
    }
    if dropped > 0 {
        writeln!(out, "{dropped:>6}  events dropped by the log (queue full)")?;
    }
    if paths.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "# by path; now: what the policy in force decides (workspace {})",
        p(&now.workspace.display().to_string())
    )?;
    let mut rows: Vec<_> = paths.iter().collect();
    rows.sort_by(|a, b| b.1.count().cmp(&a.1.count()).then(a.0.cmp(b.0)));
    for (path, seen) in rows {
        let results: Vec<String> = seen
            .results
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        let by: Vec<String> = seen.ops.iter().map(|s| p(s)).collect();
        let who: Vec<String> = seen.comms.iter().map(|s| p(s)).collect();
        let now = match decide_now(now, path) {
            Some(d) => format!("now {} ({})", d.action.as_str(), p(&d.why())),
            None => "now: no home policy (`--no-home`)".into(),
        };
        writeln!(
            out,
            "{:>6}  {}  {} by {}; {}; {now}",
            seen.count(),
            p(path),
            results.join(", "),
            who.join(", "),
            by.join(", "),
        )?;
    }
    Ok(())
}
