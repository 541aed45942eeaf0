//! `veilfs explain`: why the policy decides a path as it does, for one path, for the
//! whole workspace ([`all`]) or for what an audit log recorded ([`audit`]); and
//! what `veilfs run` does with a connection ([`net`]).

pub mod all;
pub mod audit;
pub mod net;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::policy::Policy;
use crate::workspace::load;

pub fn explain(
    policy: Option<&Path>,
    given: Option<&Path>,
    json: bool,
    // `None`: every path of the workspace the policy holds (`--all`).
    paths: Option<&[std::path::PathBuf]>,
    // `Some(file)`: paths in the home directory are decided by the home policy.
    home: Option<Option<&Path>>,
) -> Result<ExitCode> {
    // With `--workspace`, relative paths are relative to it; else the workspace is
    // found as `run` finds it and relative paths are relative to where we are.
    let (workspace, base, found) = match given {
        Some(w) => (w.to_path_buf(), None, None),
        None => {
            let cwd = std::env::current_dir()?.canonicalize()?;
            let (ws, found, warnings) =
                load::find_workspace(&cwd, None).map_err(anyhow::Error::msg)?;
            for w in warnings {
                eprintln!("veilfs explain: {w}");
            }
            let base = cwd.strip_prefix(&ws).map(Path::to_path_buf).ok();
            (ws, base, Some(found))
        }
    };
    let workspace = workspace.as_path();
    let explaining = load_for_explain(policy, workspace, home)?;
    // Where the workspace lies in the home directory: the home policy holds there too.
    let inside = home_around(&explaining, workspace);
    let Explaining {
        loaded,
        home_loaded,
        home_dir,
        same,
    } = &explaining;
    let same = *same;
    let out = std::io::stdout();
    let mut out = out.lock();
    if !json {
        let esc = crate::escape::escape;
        writeln!(out, "# policy: {}", esc(&loaded.source()))?;
        if let Some(found) = found {
            writeln!(
                out,
                "# workspace: {} ({found})",
                esc(&workspace.display().to_string())
            )?;
        }
        if let (Some(h), Some(dir)) = (&home_loaded, &home_dir) {
            let how = if same {
                " (the workspace: stacked)"
            } else {
                ""
            };
            writeln!(
                out,
                "# home: {}{how}, policy: {}",
                esc(&dir.display().to_string()),
                esc(&load::home_source(h))
            )?;
        }
    }
    let Some(paths) = paths else {
        crate::cmd::explain::all::explain_all(&loaded.policy, workspace, json, &mut out)?;
        return Ok(ExitCode::SUCCESS);
    };
    // Denied paths the workspace's git repository tracks: readable through history.
    let mut tracked: Option<Vec<String>> = None;
    for arg in paths {
        let arg = match &base {
            Some(b) if arg.is_relative() => b.join(arg),
            _ => arg.clone(),
        };
        let line = match load::relative_path(&arg, workspace) {
            Ok(rel) => {
                if loaded.policy.decide(&rel.bytes, false).action == crate::policy::Action::Deny {
                    let t = tracked.get_or_insert_with(|| {
                        crate::workspace::tracked::tracked_denied(&loaded.policy, workspace)
                    });
                    let shown = crate::escape::printable(&rel.bytes);
                    if t.contains(&shown) {
                        eprintln!(
                            "veilfs explain: warning: {}",
                            crate::workspace::tracked::tracked_message(&shown)
                        );
                    }
                }
                // A workspace inside the home directory: the home policy holds
                // there too.
                let guarded = if same || inside.is_some() {
                    crate::run::config_dirs_under(workspace)
                } else {
                    Vec::new()
                };
                explain_one(
                    &loaded.policy,
                    workspace,
                    &rel,
                    json,
                    "",
                    &guarded,
                    same,
                    inside.as_ref().map(|(p, pre)| (*p, pre.as_slice())),
                )
            }
            Err(e) => {
                // Outside the workspace: in the home directory (as named, or with its
                // links resolved), the home policy decides.
                let in_home = match (&home_loaded, &home_dir) {
                    (Some(h), Some(dir)) if !same => [Some(dir.clone()), dir.canonicalize().ok()]
                        .into_iter()
                        .flatten()
                        .find_map(|d| {
                            let rel = load::relative_path(&arg, &d).ok()?;
                            Some((h, d, rel))
                        }),
                    _ => None,
                };
                match in_home {
                    Some((h, d, rel)) => {
                        let guarded = crate::run::config_dirs_under(&d);
                        explain_one(&h.policy, &d, &rel, json, "~/", &guarded, true, None)
                    }
                    None => return Err(anyhow::Error::msg(e)),
                }
            }
        }
        .with_context(|| format!("explaining {}", arg.display()))?;
        writeln!(out, "{}", crate::escape::escape(&line))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The policies `explain` decides by, as `veilfs run` would take them in
/// `workspace`: the workspace's, and (unless `home` is `None`) the home
/// directory's with its path; `same` when the workspace is the home directory
/// (its policy stacked on the home's).
struct Explaining {
    loaded: load::LoadedPolicy,
    home_loaded: Option<load::LoadedPolicy>,
    home_dir: Option<std::path::PathBuf>,
    same: bool,
}

fn load_for_explain(
    policy: Option<&Path>,
    workspace: &Path,
    home: Option<Option<&Path>>,
) -> Result<Explaining> {
    // As `veilfs run` sees it: the home directory of this user, with its policy; a
    // workspace that is the home directory takes its policy stacked on the home's.
    let home_dir = home
        .and_then(|_| crate::run::home_of(None))
        .and_then(|h| std::path::absolute(&h).ok());
    let mut home_loaded = match (home, &home_dir) {
        (Some(file), Some(_)) => Some(load::load_home_policy(file)?),
        _ => None,
    };
    let same = home_dir.as_ref().is_some_and(|h| {
        h.canonicalize().ok().as_deref() == workspace.canonicalize().ok().as_deref()
    });
    // As `veilfs run` decides them: the targets of links the home policy hides by
    // name are hidden too.
    use crate::run::home::{HOME_BUILTIN, WS_BUILTIN, with_aliases};
    let mut loaded = match (&mut home_loaded, same) {
        (Some(h), true) => {
            let raw = load::raw_of(h, HOME_BUILTIN)?;
            let mut l = load::load_policy_on(&raw, policy, workspace)?;
            with_aliases(workspace, &mut l, Some(&raw), WS_BUILTIN).map_err(anyhow::Error::msg)?;
            l
        }
        (Some(h), false) => {
            if let Some(dir) = &home_dir {
                with_aliases(dir, h, None, HOME_BUILTIN).map_err(anyhow::Error::msg)?;
                for w in crate::workspace::imports::attach(&mut h.policy, dir)? {
                    eprintln!("veilfs explain: ~/{w}");
                }
            }
            load::load_policy(policy, workspace)?
        }
        _ => load::load_policy(policy, workspace)?,
    };
    for w in crate::workspace::imports::attach(&mut loaded.policy, workspace)? {
        eprintln!("veilfs explain: {w}");
    }
    Ok(Explaining {
        loaded,
        home_loaded,
        home_dir,
        same,
    })
}

/// Where the workspace lies in the home directory (not the home directory itself),
/// with the home policy: the stricter decision wins there, as `veilfs run` decides.
fn home_around<'a>(e: &'a Explaining, workspace: &Path) -> Option<(&'a Policy, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let (Some(h), Some(dir)) = (&e.home_loaded, &e.home_dir) else {
        return None;
    };
    if e.same {
        return None;
    }
    let ws_real = workspace.canonicalize().ok()?;
    [Some(dir.clone()), dir.canonicalize().ok()]
        .into_iter()
        .flatten()
        .find_map(|d| {
            let pre = ws_real.strip_prefix(&d).ok()?;
            Some(pre.as_os_str().as_bytes().to_vec())
        })
        .filter(|p| !p.is_empty())
        .map(|p| (&h.policy, p))
}

#[allow(clippy::too_many_arguments)]
fn explain_one(
    policy: &Policy,
    workspace: &Path,
    rel: &load::RelPath,
    json: bool,
    // Shown before the path: `~/` for the home directory.
    prefix: &str,
    // Kept read-only by the mount whatever the policy says (veilfs's configuration).
    guarded: &[Vec<u8>],
    // A home directory: what git runs or obeys is read-only in every repository.
    git_everywhere: bool,
    // The policy of the home directory the workspace lies in, and where: the
    // stricter decision wins, as `veilfs run` decides.
    outer: Option<(&Policy, &[u8])>,
) -> Result<String> {
    // As the mount decides it.
    let is_dir = rel.trailing_slash
        || crate::cmd::explain::audit::decided_as_dir(policy, workspace, &rel.bytes);
    let mut decision = if rel.bytes.is_empty() {
        crate::Decision::root()
    } else {
        policy.decide(&rel.bytes, is_dir)
    };
    if let Some((outer, prefix)) = outer
        && !rel.bytes.is_empty()
    {
        let full = [prefix, b"/", &rel.bytes].concat();
        decision = decision.stricter(outer.decide(&full, is_dir));
    }
    let p = rel.bytes.as_slice();
    if guarded
        .iter()
        .any(|g| p == g.as_slice() || (p.starts_with(g) && p.get(g.len()) == Some(&b'/')))
    {
        decision = decision.guard_veilfs_config();
    } else if git_everywhere
        && crate::fs::git_guard::git_controls_anywhere(p, |dir| {
            use std::os::unix::ffi::OsStrExt;
            let dir = workspace.join(std::ffi::OsStr::from_bytes(dir));
            ["HEAD", "config"]
                .iter()
                .any(|n| dir.join(n).symlink_metadata().is_ok())
        })
    {
        // Home paths: every repository there is guarded (one the command makes
        // during a run is its own).
        decision = decision.guard_git_control();
    }
    let shown = format!(
        "{rel}{}",
        if is_dir && !rel.bytes.is_empty() {
            "/"
        } else {
            ""
        }
    );
    let re_included = if rel.bytes.is_empty() {
        Vec::new()
    } else {
        policy.re_included_by(&rel.bytes, is_dir)
    };
    Ok(if json {
        let mut v = decision.to_json(&rel.bytes);
        v["dir"] = is_dir.into();
        if !prefix.is_empty() {
            v["root"] = "home".into();
        }
        if !re_included.is_empty() {
            v["re_included_by"] = re_included
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "rule": p.rule,
                        "pattern": p.text,
                        "location": p.location(),
                    })
                })
                .collect();
        }
        crate::escape::json(&v)
    } else {
        format!(
            "{:<9} {prefix}{}  ({}{})",
            decision.action.as_str(),
            if shown.is_empty() { "." } else { &shown },
            decision.why(),
            re_inclusion_note(&decision, &re_included)
        )
    })
}

/// What `explain` adds for the `!` lines that take a path out of their import
/// rules (see [`Policy::re_included_by`]): each takes it out of its own rule only,
/// and never out from beneath a directory that is hidden.
fn re_inclusion_note(
    decision: &crate::Decision,
    lines: &[std::sync::Arc<crate::policy::Pattern>],
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for p in lines {
        let _ = write!(s, "; {:?} ({}) ", p.text, p.location());
        match &decision.reason {
            crate::Reason::Ancestor { path, .. } if decision.action == crate::Action::Deny => {
                let _ = write!(
                    s,
                    "cannot re-include it beneath `{}`, which is hidden (as in git)",
                    String::from_utf8_lossy(path)
                );
            }
            _ => {
                let _ = write!(s, "takes it out of rule {} only", p.rule);
            }
        }
    }
    s
}

/// The workspace `given`, else the one found from the current directory as `run`
/// finds it (for `--audit` and `--net`, which take no paths).
pub(crate) fn workspace_or_found(given: Option<&Path>) -> Result<std::path::PathBuf> {
    Ok(match given {
        Some(w) => w.to_path_buf(),
        None => {
            let cwd = std::env::current_dir()?.canonicalize()?;
            load::find_workspace(&cwd, None)
                .map_err(anyhow::Error::msg)?
                .0
        }
    })
}

/// `veilfs explain --audit FILE`: refusals (and what a permissive run would have
/// refused) by rule and by path, with what the policy in force decides now.
pub fn explain_audit(
    log: &Path,
    policy: Option<&Path>,
    given: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let workspace = workspace_or_found(given)?;
    let e = load_for_explain(policy, &workspace, Some(None))?;
    let outer = home_around(&e, &workspace);
    let now = crate::cmd::explain::audit::Now {
        policy: &e.loaded.policy,
        workspace: &workspace,
        outer: outer.as_ref().map(|(p, pre)| (*p, pre.as_slice())),
        home: match (&e.home_loaded, &e.home_dir) {
            (Some(h), Some(dir)) if !e.same => Some((&h.policy, dir.as_path())),
            _ => None,
        },
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    if !json {
        writeln!(
            out,
            "# policy: {}",
            crate::escape::escape(&e.loaded.source())
        )?;
    }
    crate::cmd::explain::audit::explain_audit(log, &now, json, &mut out)?;
    Ok(ExitCode::SUCCESS)
}
