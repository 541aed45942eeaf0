//! `veilfs init`: writes a starting `.veilfs.toml` for a workspace.
//!
//! The file extends the built-in default (`extends = "default"`), imports the ignore
//! files found anywhere in the tree and Claude Code's settings found at its root,
//! and lists, commented, the files whose names look like secrets: those the rules
//! hide already, and a ready rule for those they do not. Files are found by name
//! in one walk that opens directories only (never a file's content, but for the
//! ignore files and settings that the policy will read anyway), follows no link and
//! never enters `.git`. Then it prints what the mount will hide at the top of the
//! tree and among those files.
//!
//! With `--from-audit LOG` it writes instead the allow-list learned from the audit
//! log of a `veilfs run --learn LOG` session ([`crate::policy::learn`]).
//!
//! An existing policy file is never replaced without `--force`; the new file is
//! written beside it and renamed over it, so a reader sees the old or the new one.

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::policy::{Action, Decision, Policy, claude, ignore, learn};
use crate::workspace::imports;
use crate::workspace::load::{self, WORKSPACE_POLICY};

/// Names that look like secrets (matched against a file's name, never its
/// content). Example files (`.env.example`) are left out below.
const SECRET_NAMES: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.gpg",
    "*.ovpn",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "credentials",
    "credentials.*",
    "*credentials*.json",
    "*secret*",
    "*password*",
    "*token*.json",
    "service-account*.json",
    "*.tfstate",
    "*.tfstate.*",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".htpasswd",
    ".git-credentials",
];

/// Names matching [`SECRET_NAMES`] that are templates, not secrets.
const EXAMPLES: &[&str] = &[
    "*.example",
    "*.sample",
    "*.template",
    "*.dist",
    "*.tmpl",
    "*.pub",
];

/// At most this many secret-looking files are listed.
const MAX_LISTED: usize = 200;

/// What the walk found.
#[derive(Debug, Default)]
pub struct Survey {
    /// Ignore file names found (each once, in [`ignore::NAMES`] order).
    pub ignore_files: Vec<&'static str>,
    /// Where they are, workspace-relative, sorted.
    pub ignore_paths: Vec<String>,
    /// Claude Code settings files at the root.
    pub settings: Vec<&'static str>,
    /// Workspace-relative paths of files whose names look like secrets, sorted.
    pub secrets: Vec<String>,
    /// The walk stopped before the end, or the list was cut.
    pub partial: bool,
}

fn globset(globs: &[&str]) -> globset::GlobSet {
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        if let Ok(g) = globset::GlobBuilder::new(g).literal_separator(true).build() {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| globset::GlobSet::empty())
}

/// Walks the workspace whose root is `root` for [`Survey`].
pub fn survey(root: &Path) -> Result<Survey> {
    let fd = crate::sys::open_dir_path(root)
        .with_context(|| format!("cannot open the workspace {}", root.display()))?;
    let secret = globset(SECRET_NAMES);
    let example = globset(EXAMPLES);
    let mut s = Survey::default();
    let mut ignores = std::collections::BTreeSet::new();
    let complete = imports::walk(
        fd.as_fd(),
        imports::MAX_DIRS,
        (),
        |_, _| Some(()),
        |_, e| {
            let name = std::ffi::OsStr::from_bytes(e.name);
            let path = || String::from_utf8_lossy(&e.path()).into_owned();
            if let Some(known) = ignore::NAMES.iter().position(|n| n.as_bytes() == e.name) {
                ignores.insert(known);
                s.ignore_paths.push(path());
            } else if e.kind == libc::DT_REG
                && secret.is_match(name)
                && !example.is_match(name)
                && s.secrets.len() < MAX_LISTED
            {
                s.secrets.push(path());
            }
            Ok(())
        },
    )?;
    s.partial = !complete || s.secrets.len() >= MAX_LISTED;
    s.ignore_files = ignores.into_iter().map(|i| ignore::NAMES[i]).collect();
    s.settings = imports::present_at(fd.as_fd())
        .into_iter()
        .filter(|n| claude::is_name(n))
        .collect();
    s.secrets.sort();
    s.ignore_paths.sort();
    Ok(s)
}

/// The text of the starting policy for a workspace surveyed as `s`; `decide` says
/// what the rules written before the secrets' block do with a path.
pub fn policy_text(s: &Survey, decide: impl Fn(&str) -> Decision) -> String {
    let mut t = String::new();
    t.push_str(
        "# The veilfs policy of this workspace, written by `veilfs init`.\n\
         # `veilfs check` checks it; `veilfs explain PATH` says which rule decides a path;\n\
         # `veilfs check --print-default` shows the built-in rules extended here.\n\
         # Of the rules that match a path, the last one decides; actions: \"allow\",\n\
         # \"read-only\", \"ask\", \"deny\". A denied directory hides everything in it.\n\n\
         # The built-in default's rules first (they hide .env*, *.pem, *.key, secrets/,\n\
         # .ssh/, credential files, ...), then the rules below.\n\
         extends = \"default\"\n",
    );
    if !s.ignore_files.is_empty() {
        t.push_str(
            "\n# Ignore files found in this workspace: what they list is hidden, in the\n\
             # directory of each file and below, with gitignore syntax. Found:\n",
        );
        for p in &s.ignore_paths {
            let _ = writeln!(t, "#   {}", crate::escape::escape(p));
        }
        // Every name, not only those found: an imported name is read-only at every
        // depth whether or not such a file exists, so the command can plant none,
        // and one the person adds later counts.
        let _ = writeln!(
            t,
            "# Every ignore file name is imported, found or not: each is read-only at\n\
             # every depth (the confined command can neither change nor plant one), and\n\
             # one you add later counts. Each is read as its tool reads it, `!` lines\n\
             # included; a rule of its own per name, so that a `!` line only narrows\n\
             # what files of its name hide (add `negation = false` to a rule to leave\n\
             # its `!` lines unapplied)."
        );
        for name in ignore::NAMES {
            let _ = write!(
                t,
                "\n[[rules]]\n\
                 action = \"deny\"\n\
                 import = {name:?}\n\
                 why = \"listed in an ignore file of this workspace\"\n"
            );
        }
    }
    if !s.settings.is_empty() {
        let _ = write!(
            t,
            "\n# Claude Code's settings: their Read(...) deny entries are hidden, Edit(...)\n\
             # deny entries read-only, ask entries asked for (allow entries grant nothing).\n\
             [[rules]]\n\
             import = {:?}\n",
            s.settings
        );
    }
    if s.secrets.is_empty() {
        return t;
    }
    let (hidden, shown): (Vec<&String>, Vec<&String>) = s
        .secrets
        .iter()
        .partition(|p| decide(p).action != Action::Allow);
    t.push_str("\n# Files whose names look like secrets (found by name, never opened)");
    t.push_str(if s.partial {
        ", the first ones found:\n"
    } else {
        ":\n"
    });
    if !hidden.is_empty() {
        t.push_str("#\n# Held by the rules above already:\n");
        for p in &hidden {
            let d = decide(p);
            // Escaped: a name is the command's to choose, and a newline in it
            // would end the comment and write policy.
            let _ = writeln!(
                t,
                "#   {:<9} {}",
                d.action.as_str(),
                crate::escape::escape(p)
            );
        }
    }
    if !shown.is_empty() {
        t.push_str(
            "#\n# Not hidden by the rules above: uncomment the rule to hide them.\n\
             # [[rules]]\n\
             # action = \"deny\"\n\
             # paths = [\n",
        );
        for p in &shown {
            let pattern = format!("/{}", crate::policy::literal_glob(p));
            let _ = writeln!(t, "#   {},", crate::policy::toml_string(&pattern));
        }
        t.push_str("# ]\n");
    }
    t
}

/// `veilfs init`: writes the starting policy of the workspace `given` (else the
/// one found from the current directory), or the one learned from the audit log
/// `learned` when given, then prints what the mount will hide.
pub fn init(
    given: Option<&Path>,
    force: bool,
    learned: Option<&Path>,
) -> Result<std::process::ExitCode> {
    let workspace: PathBuf = match given {
        Some(w) => std::path::absolute(w)?,
        None => {
            let cwd = std::env::current_dir()?.canonicalize()?;
            let (ws, _, warnings) = load::find_workspace(&cwd, None).map_err(anyhow::Error::msg)?;
            for w in warnings {
                eprintln!("veilfs init: {w}");
            }
            ws
        }
    };
    if !workspace.is_dir() {
        bail!("{} is not a directory", workspace.display());
    }
    let target = workspace.join(WORKSPACE_POLICY);
    let exists = target.symlink_metadata().is_ok();
    if exists && !force {
        eprintln!(
            "veilfs init: {} exists: not replaced (--force replaces it; `veilfs explain \
             PATH` says what it decides)",
            target.display()
        );
        return Ok(std::process::ExitCode::from(1));
    }
    if let Some(log) = learned {
        return from_audit(&workspace, &target, exists, log);
    }
    let s = survey(&workspace)?;
    // What the written rules decide, to sort the secrets: the file without the
    // secrets' block, with its imports attached.
    let head = policy_text(
        &Survey {
            ignore_files: s.ignore_files.clone(),
            settings: s.settings.clone(),
            ..Survey::default()
        },
        |_| Decision::root(),
    );
    let mut policy = compiled(&target, &head, &workspace)?;
    let text = policy_text(&s, |p| policy.decide(p.as_bytes(), false));
    // The whole file must load as `mount` will load it.
    policy = compiled(&target, &text, &workspace)?;
    write_policy(&target, &text, exists)?;
    println!(
        "veilfs init: wrote {}{}",
        crate::escape::escape(&target.display().to_string()),
        summary_of(&s)
    );
    report(&policy, &workspace, &s)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `veilfs init --from-audit LOG`: writes at `target` (replacing it when it
/// `exists`) the policy learned from `log`, checked as `mount` will load it, and
/// says what it holds and what the mount will hide at the top of `workspace`.
fn from_audit(
    workspace: &Path,
    target: &Path,
    exists: bool,
    log: &Path,
) -> Result<std::process::ExitCode> {
    let text = crate::cmd::explain::audit::read_bounded(log)
        .with_context(|| format!("reading {}", log.display()))?;
    let uses = learn::Uses::from_log(&text).with_context(|| log.display().to_string())?;
    let learned = learn::learn(&uses, &log.display().to_string());
    let policy = compiled(target, &learned.text, workspace)?;
    write_policy(target, &learned.text, exists)?;
    let mut parts = vec![format!(
        "{} pattern{} learned",
        learned.patterns,
        if learned.patterns == 1 { "" } else { "s" }
    )];
    if learned.secrets > 0 {
        parts.push(format!(
            "{} path{} the built-in default denies left out",
            learned.secrets,
            if learned.secrets == 1 { "" } else { "s" }
        ));
    }
    if learned.unwritable > 0 {
        parts.push(format!(
            "{} name{} that cannot be written as a pattern left out",
            learned.unwritable,
            if learned.unwritable == 1 { "" } else { "s" }
        ));
    }
    if learned.home > 0 {
        parts.push(format!(
            "{} home directory operations not learned",
            learned.home
        ));
    }
    println!(
        "veilfs init: wrote {} (an allow-list learned from {}: {})",
        crate::escape::escape(&target.display().to_string()),
        crate::escape::escape(&log.display().to_string()),
        parts.join("; ")
    );
    if learned.dropped > 0 {
        eprintln!(
            "veilfs init: the log dropped {} events (its queue was full): the policy may \
             miss paths the session used; run the session again with --learn",
            learned.dropped
        );
    }
    report(&policy, workspace, &Survey::default())?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `(extends the built-in default; imports ...)`.
fn summary_of(s: &Survey) -> String {
    let mut parts = vec!["extends the built-in default".to_string()];
    let imported: Vec<&str> = s
        .ignore_files
        .iter()
        .chain(s.settings.iter())
        .copied()
        .collect();
    if !imported.is_empty() {
        parts.push(format!("imports {}", imported.join(", ")));
    }
    if !s.secrets.is_empty() {
        parts.push(format!(
            "{} secret-looking file{} listed",
            s.secrets.len(),
            if s.secrets.len() == 1 { "" } else { "s" }
        ));
    }
    format!(" ({})", parts.join("; "))
}

/// Compiles `text` as the workspace's policy file and attaches its imports.
fn compiled(target: &Path, text: &str, workspace: &Path) -> Result<Policy> {
    let mut p = Policy::parse(&target.display().to_string(), text)
        .map_err(|e| anyhow::anyhow!("the policy written would not load (a bug): {e}"))?;
    for w in imports::attach(&mut p, workspace)? {
        eprintln!("veilfs init: {w}");
    }
    Ok(p)
}

/// Writes `text` at `target`: created new (never through a link), or, replacing,
/// written beside it and renamed over it.
fn write_policy(target: &Path, text: &str, replace: bool) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = if replace {
        let mut name = target.as_os_str().to_owned();
        name.push(format!(".init-{}", std::process::id()));
        PathBuf::from(name)
    } else {
        target.to_path_buf()
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    if replace {
        std::fs::rename(&tmp, target).with_context(|| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot replace {}", target.display())
        })?;
    }
    Ok(())
}

/// Prints what the mount will hide or hold: the top of the tree, then the
/// secret-looking files, as `explain` says them.
fn report(policy: &Policy, workspace: &Path, s: &Survey) -> Result<()> {
    let mut top: Vec<(Vec<u8>, bool)> = std::fs::read_dir(workspace)?
        .filter_map(|e| e.ok())
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().as_bytes().to_vec(), is_dir)
        })
        .collect();
    top.sort();
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(
        out,
        "\nAt the top of {} (`veilfs explain PATH` for any other path):",
        workspace.display()
    )?;
    // Names and rules come from the workspace: shown escaped (`crate::escape`).
    use crate::escape::{escape, printable};
    for (name, is_dir) in &top {
        let d = policy.decide(name, *is_dir);
        let slash = if *is_dir { "/" } else { "" };
        writeln!(
            out,
            "  {:<9} {}{slash}  ({})",
            d.action.as_str(),
            printable(name),
            escape(&d.why())
        )?;
    }
    let below: Vec<&String> = s.secrets.iter().filter(|p| p.contains('/')).collect();
    if !below.is_empty() {
        writeln!(out, "\nFiles below it whose names look like secrets:")?;
        for p in below {
            let d = policy.decide(p.as_bytes(), false);
            writeln!(
                out,
                "  {:<9} {}  ({})",
                d.action.as_str(),
                escape(p),
                escape(&d.why())
            )?;
        }
    }
    Ok(())
}
