//! The home directory under `veilfs run`: a second veilfs mount over the home
//! directory of the user the command runs as, with a home policy in the same
//! language (paths relative to the home directory), so that the command meets the
//! same rule in `~/.ssh` as in the workspace.
//!
//! The home policy comes from `--home-policy FILE`, else
//! `~/.config/veilfs/home.toml` of the user who runs veilfs (never from the
//! workspace: a cloned repository must not decide what of your home the command
//! sees), else the built-in default home policy. veilfs's configuration directory
//! is read-only through the mount, so the command cannot choose the policy of a
//! later run.
//!
//! Layouts: the workspace inside the home directory (the home is mounted first, the
//! workspace over its place in it), outside it (two mounts side by side), equal to
//! it (one mount: the workspace policy stacked on the home policy, see
//! [`crate::policy::Policy::parse_on`]), the home directory inside the workspace
//! (the workspace first), or no usable home directory (no home mount; the start-up
//! line says why).

use std::path::{Path, PathBuf};

use crate::policy::Policy;
use crate::workspace::load::{self, LoadedPolicy};
use crate::workspace::ways::is_wild;
pub use crate::workspace::ways::{guarded_ways, ways_under};

/// Where the home directory stands to the workspace.
#[derive(Debug)]
pub(super) enum Layout {
    /// No home mount, and why (for the start-up line).
    Uncovered(String),
    /// The workspace is the home directory: one mount, both policies.
    Same(PathBuf),
    /// A mount of its own at this (canonical) path.
    Separate(PathBuf),
}

/// The home directory of the user the command runs as: `--user`'s from the
/// password database, else `$HOME` (absolute), else this user's from the password
/// database.
pub fn home_of(user: Option<(u32, u32)>) -> Option<PathBuf> {
    use nix::unistd::{Uid, User};
    let from_db = |uid: u32| {
        User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.dir)
    };
    match user {
        Some((uid, _)) => from_db(uid),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| from_db(crate::sys::euid())),
    }
}

/// Decides the layout for `home` (as found) and the workspace `ws` (canonical).
pub(super) fn layout(home: Option<PathBuf>, ws: &Path) -> Layout {
    let Some(home) = home else {
        return Layout::Uncovered("no home directory is known ($HOME unset)".into());
    };
    let canon = match home.canonicalize() {
        Ok(c) if c.is_dir() => c,
        Ok(_) => {
            return Layout::Uncovered(format!("home {} is not a directory", home.display()));
        }
        Err(e) => {
            return Layout::Uncovered(format!("home {}: {e}", home.display()));
        }
    };
    if let Err(e) = std::fs::read_dir(&canon) {
        return Layout::Uncovered(format!("home {}: {e}", canon.display()));
    }
    if canon == Path::new("/") {
        return Layout::Uncovered("the home directory is `/`".into());
    }
    if canon == ws {
        Layout::Same(canon)
    } else {
        Layout::Separate(canon)
    }
}

/// Why the home directory's policy, or its place beside the workspace, is refused.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// The home policy could not be found, read or compiled.
    #[error("home policy: {0}")]
    Policy(load::ConfigError),
    /// The home policy file could not be read for its `[env]` table.
    #[error("home policy {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// Its `[env]` table.
    #[error(transparent)]
    Env(#[from] super::env::EnvSectionError),
    /// A policy could not be compiled again with the rules for its links' targets.
    #[error(transparent)]
    Aliases(load::ConfigError),
    /// One mount's point is hidden by the other's policy.
    #[error(
        "{} lies in {}, which the policy of {} hides ({why}): choose another workspace, or \
         change that policy",
        inner.display(),
        hidden.display(),
        outer.display()
    )]
    Unreachable {
        inner: PathBuf,
        hidden: PathBuf,
        outer: PathBuf,
        why: String,
    },
}

/// The home policy and the file it came from.
pub(super) fn load_policy(explicit: Option<&Path>) -> Result<LoadedPolicy, HomeError> {
    load::load_home_policy(explicit).map_err(HomeError::Policy)
}

/// The rules of the home policy, to stack the workspace policy on when the
/// workspace is the home directory.
pub(super) fn raw_policy(home: &LoadedPolicy) -> Result<crate::policy::RawPolicy, HomeError> {
    load::raw_of(
        home,
        (
            crate::policy::BUILTIN_HOME_NAME,
            crate::policy::HOME_DEFAULT_POLICY,
        ),
    )
    .map_err(HomeError::Policy)
}

/// The paths, relative to `root` (canonical), at which veilfs's configuration
/// directories ([`load::config_dirs`]: the one in use and `~/.config/veilfs`) are
/// reached through a mount of `root`: as named, and with their links
/// resolved (a `~/.config` that is a link to a dotfiles repository). Empty when it
/// lies outside `root`.
pub fn config_dirs_under(root: &Path) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for dir in load::config_dirs() {
        let resolved = load::resolve_existing(&dir);
        for c in std::iter::once(dir).chain(resolved) {
            if let Ok(rel) = c.strip_prefix(root) {
                let rel = rel.as_os_str().as_bytes().to_vec();
                if !rel.is_empty() && !out.contains(&rel) {
                    out.push(rel);
                }
            }
        }
    }
    out
}

/// Refuses a layout where one mount's point is hidden by the other's policy: the
/// daemon mounts the inner root through the outer mount.
pub(super) fn check_reachable(
    outer: &Path,
    outer_policy: &Policy,
    inner: &Path,
) -> Result<(), HomeError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(rel) = inner.strip_prefix(outer) else {
        return Ok(());
    };
    let mut prefix = PathBuf::new();
    for c in rel.components() {
        prefix.push(c);
        let d = outer_policy.decide(prefix.as_os_str().as_bytes(), true);
        if !d.action.visible() {
            return Err(HomeError::Unreachable {
                inner: inner.to_path_buf(),
                hidden: outer.join(&prefix),
                outer: outer.to_path_buf(),
                why: d.why(),
            });
        }
    }
    Ok(())
}

/// The `[env]` table of the home policy file (see [`super::env`]): the file
/// `--home-policy` names, else `~/.config/veilfs/home.toml` when it exists (and
/// this user or root owns it); none with the built-in default. Read whether or not
/// the home directory is mounted.
pub(super) fn env_rules(explicit: Option<&Path>) -> Result<super::env::EnvRules, HomeError> {
    let path = match load::home_policy_file(explicit) {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(Default::default()),
        Err(e) => return Err(HomeError::Policy(e)),
    };
    let text = load::read_text(&path).map_err(|cause| HomeError::Read {
        path: path.clone(),
        cause,
    })?;
    Ok(super::env::parse_env_section(
        &path.display().to_string(),
        &text,
    )?)
}

/// Rules for the targets of symbolic links the policy of the mount of `root` hides
/// or makes read-only: with `~/.aws -> dotfiles/aws` or `~/.bashrc ->
/// dotfiles/bashrc` (as dotfile managers set up), the policy names `~/.aws` and
/// `~/.bashrc`, and these rules hold `~/dotfiles/aws` and `~/dotfiles/bashrc` the
/// same. Taken for each read-only pattern that names one path (no wildcard) and
/// each deny pattern whose leading directories are named (`hosts.yml*` below them
/// is kept): anchored, or a bare name at the root; when a link on its way leads
/// elsewhere inside `root`, and a read-only one only where the target is held less
/// tightly. A pattern with braces is read as its alternatives
/// ([`crate::policy::Pattern::alternatives`]): `/.config/{Code,Cursor}/User/tasks.json`
/// names two paths.
/// Computed once, at start.
pub fn alias_rules(root: &Path, policy: &Policy) -> Vec<crate::policy::RawRule> {
    use crate::policy::Action;
    let Ok(real_root) = root.canonicalize() else {
        return Vec::new();
    };
    let mut out: Vec<crate::policy::RawRule> = Vec::new();
    for p in policy.patterns() {
        if p.action == Action::Allow || (!p.anchored && p.glob().contains('/')) {
            continue;
        }
        for glob in p.alternatives() {
            // The literal directories and name in front, and the rest (a wildcard
            // part, kept as it is below the resolved place: `hosts.yml*`).
            let segs: Vec<&str> = glob.split('/').collect();
            let n = segs.iter().take_while(|s| !is_wild(s)).count();
            let (literal, rest) = (segs[..n].join("/"), segs[n..].join("/"));
            // A read-only alias only for a whole literal path, which can be checked
            // not to loosen what another rule holds there.
            if literal.is_empty() || (!rest.is_empty() && p.action != Action::Deny) {
                continue;
            }
            for (real, by_xdg) in alias_places(root, &real_root, &literal) {
                let Ok(rel) = real.strip_prefix(&real_root) else {
                    continue;
                };
                let Some(rel) = rel.to_str().filter(|r| !r.is_empty()) else {
                    continue;
                };
                let pattern = alias_pattern(&real, rel, &rest, p.dir_only);
                if out.iter().any(|r| r.patterns[0].0 == pattern) {
                    continue;
                }
                // Never loosen: a target another rule already holds at least as
                // tightly keeps that rule (the alias comes last, and the last match
                // wins).
                let is_dir = pattern.ends_with('/');
                if rest.is_empty() && policy.decide(rel.as_bytes(), is_dir).action >= p.action {
                    continue;
                }
                out.push(alias_rule(p, &glob, pattern, by_xdg));
            }
        }
    }
    out
}

/// Where the literal path `literal` (relative to `root`) leads elsewhere: resolved
/// through its nearest existing ancestor (a link on the way to a name that does not
/// exist yet, `~/.config -> dotfiles/config` with no `systemd/` in it, leads where
/// it would be made), and, where the XDG variables move `~/.config` or
/// `~/.local/share`, the same path there (marked `true`).
fn alias_places(root: &Path, real_root: &Path, literal: &str) -> Vec<(PathBuf, bool)> {
    let mut places: Vec<(PathBuf, bool)> = Vec::new();
    if let Some(real) = load::resolve_existing(&root.join(literal))
        && real != real_root.join(literal)
    {
        places.push((real, false));
    }
    for (dir, var) in [
        (".config", "XDG_CONFIG_HOME"),
        (".local/share", "XDG_DATA_HOME"),
    ] {
        let Some(under) = literal
            .strip_prefix(dir)
            .and_then(|r| r.strip_prefix('/').or(r.is_empty().then_some("")))
        else {
            continue;
        };
        let Some(moved) = std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|x| x.is_absolute())
        else {
            continue;
        };
        let at = if under.is_empty() {
            moved
        } else {
            moved.join(under)
        };
        if let Some(real) = load::resolve_existing(&at)
            && real != real_root.join(literal)
            && !places.iter().any(|(p, _)| *p == real)
        {
            places.push((real, true));
        }
    }
    places
}

/// The pattern of an alias at `rel` (the resolved place `real`, relative to the
/// root), escaped, with the wildcard `rest` below it and a trailing `/` where it is
/// a directory.
fn alias_pattern(real: &Path, rel: &str, rest: &str, dir_only: bool) -> String {
    let mut escaped = String::from("/");
    for c in rel.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    let is_dir = if rest.is_empty() {
        real.is_dir() || (!real.exists() && dir_only)
    } else {
        escaped.push('/');
        escaped.push_str(rest);
        dir_only
    };
    if is_dir {
        escaped.push('/');
    }
    escaped
}

/// The alias rule holding `pattern` as `p` holds `glob` (one of its alternatives).
fn alias_rule(
    p: &crate::policy::Pattern,
    glob: &str,
    pattern: String,
    by_xdg: bool,
) -> crate::policy::RawRule {
    use crate::policy::Action;
    crate::policy::RawRule {
        action: p.action,
        at: p.at.clone(),
        patterns: vec![(pattern, p.at.clone())],
        imports: Vec::new(),
        no_negation: false,
        backups: false,
        routine: p.routine,
        why: Some(std::sync::Arc::from(format!(
            "{}, which {p} {}",
            if by_xdg {
                format!("where an XDG variable moves `{glob}`")
            } else {
                format!("the target of `{glob}`, a symbolic link")
            },
            if p.action == Action::Deny {
                "hides"
            } else {
                "makes read-only"
            }
        ))),
    }
}

/// Adds [`alias_rules`] for `root` to `loaded` (compiled again, between `base` and
/// them) and returns them, for the mount's reloads.
pub fn with_aliases(
    root: &Path,
    loaded: &mut LoadedPolicy,
    base: Option<&crate::policy::RawPolicy>,
    builtin: (&str, &str),
) -> Result<Vec<crate::policy::RawRule>, HomeError> {
    let after = alias_rules(root, &loaded.policy);
    if !after.is_empty() {
        loaded.policy =
            load::recompile(loaded, base, builtin, &after).map_err(HomeError::Aliases)?;
    }
    Ok(after)
}

/// The built-in home policy's name and text, for [`with_aliases`].
pub const HOME_BUILTIN: (&str, &str) = (
    crate::policy::BUILTIN_HOME_NAME,
    crate::policy::HOME_DEFAULT_POLICY,
);

/// The built-in workspace policy's name and text, for [`with_aliases`].
pub const WS_BUILTIN: (&str, &str) = (crate::policy::BUILTIN_NAME, crate::policy::DEFAULT_POLICY);

/// A directory's identity and a name in it.
pub type KeptEntry = (crate::fs::inode::Key, Vec<u8>);

/// The way from the root `outer` of one mount down to `inner`, where another mount
/// sits (the workspace inside the home directory, or the other way round): its
/// paths relative to `outer`, for [`crate::fs::config::FsConfig::ways`] (so that
/// none is renamed), and its entries, for
/// [`crate::fs::config::FsConfig::kept_entries`] (each is never invalidated by name
/// in `outer`'s mount: the kernel would detach the inner mount, in every namespace,
/// and its paths would then be served by the outer mount under the outer policy
/// alone). Empty when `inner` is not inside `outer`.
pub fn nested(outer: &Path, inner: &Path) -> (Vec<Vec<u8>>, Vec<KeptEntry>) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(rel) = inner.strip_prefix(outer) else {
        return (Vec::new(), Vec::new());
    };
    let (mut out, mut kept) = (Vec::new(), Vec::new());
    let mut dir = outer.to_path_buf();
    let mut path: Vec<u8> = Vec::new();
    for c in rel.components() {
        let name = c.as_os_str().as_bytes();
        if let Ok(md) = std::fs::metadata(&dir) {
            kept.push(((md.dev(), md.ino()), name.to_vec()));
        }
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        out.push(path.clone());
        dir.push(c);
    }
    (out, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A brace pattern leads through the directories of each alternative, as the
    /// same paths written one by one do.
    #[test]
    fn ways_of_a_brace_pattern_are_its_alternatives_ways() {
        let policy = |paths: &str| {
            Policy::parse(
                "t.toml",
                &format!("[[rules]]\naction = \"read-only\"\npaths = [{paths}]\n"),
            )
            .unwrap()
        };
        let root = Path::new("/h");
        let braces = guarded_ways(root, &policy(r#""/.config/{A,B - C}/User/{x.json,d}""#));
        let one_by_one = guarded_ways(
            root,
            &policy(
                r#""/.config/A/User/x.json", "/.config/A/User/d/", "/.config/B - C/User/x.json",
                   "/.config/B - C/User/d/""#,
            ),
        );
        let want: Vec<PathBuf> = [".config", ".config/A", ".config/A/User", ".config/B - C"]
            .iter()
            .chain(&[".config/B - C/User"])
            .map(|w| root.join(w))
            .collect();
        assert_eq!(braces, want);
        assert_eq!(one_by_one, want);
        // Past a wildcard, the directories above it only.
        let wild = guarded_ways(root, &policy(r#""/.{a,b}-server/code-*""#));
        assert_eq!(wild, vec![root.join(".a-server"), root.join(".b-server")]);
    }
}
