//! What `veilfs check` says of a policy against the workspace it is for: patterns
//! that match nothing there (a typo such as `config/prod.yml`, or a rule meant for
//! files to come), and directory-only patterns naming a file. One walk of the tree
//! (no link followed, `.git` not entered, no file opened); only the patterns of the
//! policy's own file are looked at, and a deny pattern of the built-in default
//! copied into it is never said to match nothing (it is meant for files to come).

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::policy::{Action::Deny, Policy};
use crate::workspace::imports;
use crate::workspace::load::{self, ConfigError};

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
    let complete = imports::each_path(root.as_fd(), |path, kind| {
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
    // The built-in default's deny patterns, copied into a policy (as `veilfs init
    // --from-audit` writes them, after an allow-list), are meant for files to come:
    // none is said to match nothing.
    let builtin = Policy::builtin();
    let to_come: HashSet<&str> = builtin
        .patterns()
        .iter()
        .filter(|p| p.action == Deny)
        .map(|p| p.text.as_str())
        .collect();
    let copied_from_default =
        |p: &crate::policy::Pattern| p.action == Deny && to_come.contains(p.text.as_str());
    let mut out = Vec::new();
    for id in own {
        let p = &pats[id];
        let head = format!("{}: warning: rule {} pattern {:?}", p.at, p.rule, p.text);
        let literal = !p.glob().contains(['*', '?', '[', ']', '{', '}', '\\']);
        if p.dir_only && p.anchored && literal && files.contains(p.glob().as_bytes()) {
            out.push(format!(
                "{head} ends in `/`, so it matches directories only, but {} is a file: \
                 write {:?}",
                crate::escape::escape(p.glob()),
                p.text.trim_end_matches('/')
            ));
        } else if !matched.contains(&id) && !copied_from_default(p) {
            out.push(format!(
                "{head} matches nothing in the workspace now (a typo? it may be meant for \
                 files to come)"
            ));
        }
    }
    out
}

/// `veilfs check [POLICY]`: the policy linted, and checked against the workspace.
pub fn check(path: Option<&Path>) -> Result<ExitCode> {
    let mut loaded = match load::load_policy(path, Path::new(".")) {
        Ok(l) => l,
        Err(ConfigError::Invalid(e)) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    // The workspace is known when the policy is the one found in it: the current
    // directory's, or a `.veilfs.toml` named by its path.
    let workspace = match path {
        None => Some(Path::new(".").to_path_buf()),
        Some(p) if p.file_name() == Some(std::ffi::OsStr::new(load::WORKSPACE_POLICY)) => {
            std::path::absolute(p)
                .ok()
                .and_then(|a| a.parent().map(Path::to_path_buf))
        }
        Some(_) => None,
    };
    let mut import_warnings = Vec::new();
    match &workspace {
        Some(ws) => match crate::workspace::imports::attach(&mut loaded.policy, ws) {
            Ok(w) => import_warnings = w,
            Err(e) => {
                eprintln!("veilfs: {e}");
                return Ok(ExitCode::from(1));
            }
        },
        None if !loaded.policy.import_names().is_empty() => eprintln!(
            "veilfs: note: the imported files ({}) are not checked: the workspace is \
             not known (run `veilfs check` in it, or name its {})",
            loaded.policy.import_names().join(", "),
            load::WORKSPACE_POLICY
        ),
        None => {}
    }
    // Against the workspace when it is known: which absolute path a pattern was
    // written as, what matches nothing there, a `dir/` naming a file.
    let real = workspace.as_ref().and_then(|w| w.canonicalize().ok());
    let lint = match &real {
        Some(ws) => {
            use std::os::unix::ffi::OsStrExt;
            loaded.policy.lint_in(ws.as_os_str().as_bytes())
        }
        None => loaded.policy.lint(),
    };
    let mut warnings: Vec<String> = lint.iter().map(|w| w.to_string()).collect();
    if let Some(ws) = &real {
        warnings.extend(crate::cmd::check::warnings(&loaded.policy, ws));
        warnings.extend(crate::workspace::tracked::tracked_warnings(
            &loaded.policy,
            ws,
        ));
    }
    warnings.extend(import_warnings);
    let network = match load::network_table(loaded.path.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(1));
        }
    };
    for w in &warnings {
        eprintln!("{w}");
    }
    let p = &loaded.policy;
    println!(
        "{}: ok: {} rules, {} patterns, default \"{}\"{}{}",
        loaded.source(),
        p.rule_count(),
        p.patterns().len(),
        p.default_action(),
        network.as_ref().map_or(String::new(), network_said),
        match warnings.len() {
            0 => String::new(),
            n => format!(", {n} warning{}", if n == 1 { "" } else { "s" }),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// What `check` says of a `[network]` table: how many SPECs each list has.
fn network_said(rules: &crate::policy::net::NetRules) -> String {
    use crate::policy::net::NetAction;
    let count = |a: NetAction| rules.rules().iter().filter(|r| r.action == a).count();
    format!(
        "; network: {} allowed, {} asked, {} denied (under `veilfs run`, nothing else)",
        count(NetAction::Allow),
        count(NetAction::Ask),
        count(NetAction::Deny)
    )
}
