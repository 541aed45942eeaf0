//! What git runs or obeys, kept read-only under `veilfs run` (see [`GitGuard`]):
//! code planted there would run later, outside any confinement, the next time the
//! person runs git.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use parking_lot::RwLock;

use super::VeilFs;

/// What git runs or obeys in the workspace's own repository, kept read-only under
/// `veilfs run` ([`VeilFs::guard_git`]): code planted there runs later, outside any
/// confinement, the next time the person runs `git status` in the real directory
/// (`core.fsmonitor`, `core.hooksPath`, `core.pager`, aliases, filters and hooks).
///
/// Set once, before mounting, from what the workspace root holds:
/// * a `.git` **directory**: `.git/config`, `.git/config.worktree`, `.git/commondir`,
///   `.git/hooks/`
///   and everything in it, and the same in each submodule's repository under
///   `.git/modules/` and each linked worktree's `config.worktree`, are read-only; the
///   `.git` directory itself is not renamed or removed (a new `.git`, or a `.git`
///   file pointing elsewhere, cannot take its place). Objects, refs, the index and
///   logs stay writable: `git commit`, `checkout`, `fetch` work; `git config` and
///   `git remote add` are refused.
/// * a `.git` **file** (a linked worktree or a submodule's checkout): the file is
///   read-only (it names the repository git uses).
/// * no `.git`: nothing (a repository the command creates is its own).
///
/// In the home mount of `veilfs run` ([`VeilFs::guard_git_everywhere`]) the same
/// files are read-only in **every** repository at any depth (the person's other
/// projects, dotfiles), but for the command's own: a repository made in a directory
/// the command made during the session (`git clone URL dir`, `mkdir d && git init
/// d`). A `.git` is made only there (`git init` in a directory that was there
/// before, the home directory itself included, would have the person's git obey it
/// in every directory below), only as a directory (a `.git` file pointing elsewhere
/// would choose the configuration the person's git reads), and no `.git` but the
/// command's own is renamed or removed. A directory the command made at a path it
/// emptied first (renamed or removed a directory there) is not its own: a
/// repository moved away and cloned back at its path stays guarded.
#[derive(Debug, Default)]
pub struct GitGuard {
    kind: AtomicU8,
    /// Under `veilfs run` (either mode): directories made and emptied are noted, so
    /// that a repository that was there before is told from the command's own.
    tracking: AtomicBool,
    /// The directories made through the mount, and the paths where a directory
    /// was renamed away or removed.
    made: RwLock<std::collections::HashSet<Vec<u8>>>,
    vacated: RwLock<std::collections::HashSet<Vec<u8>>>,
}

const GIT_NONE: u8 = 0;
const GIT_DIR: u8 = 1;
const GIT_FILE: u8 = 2;
const GIT_EVERYWHERE: u8 = 3;

/// The last name of a mount-relative path.
pub(crate) fn name_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The parent of a mount-relative path (empty for a top-level name).
pub(crate) fn parent_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

/// The repository (its `.git` path) and the rest from `.git` on, for each `.git`
/// component of `path`, innermost first.
fn git_components(path: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for (i, part) in path.split(|&b| b == b'/').enumerate() {
        let _ = i;
        if part == b".git" {
            starts.push(at);
        }
        at += part.len() + 1;
    }
    starts.into_iter().rev().map(move |s| {
        let end = (s + 4).min(path.len());
        (&path[..end], &path[s..])
    })
}

impl GitGuard {
    fn kind(&self) -> u8 {
        self.kind.load(Ordering::Relaxed)
    }

    /// Whether git runs or obeys the workspace-relative `path`.
    pub fn controls(&self, path: &[u8]) -> bool {
        match self.kind() {
            GIT_DIR => git_control_path(path),
            GIT_FILE => path == b".git",
            GIT_EVERYWHERE => git_components(path)
                .any(|(repo, rest)| git_control_path(rest) && !self.made_here(repo)),
            _ => false,
        }
    }

    /// Whether `path` is a `.git` guarded against rename and removal.
    pub fn holds(&self, path: &[u8]) -> bool {
        match self.kind() {
            GIT_DIR => path == b".git",
            GIT_EVERYWHERE => {
                (path == b".git" || path.ends_with(b"/.git")) && !self.made_here(path)
            }
            _ => false,
        }
    }

    /// Whether only a directory may be made at `path` (a `.git` name in everywhere
    /// mode).
    pub fn only_dir(&self, path: &[u8]) -> bool {
        self.kind() == GIT_EVERYWHERE && (path == b".git" || path.ends_with(b"/.git"))
    }

    /// Whether every repository is guarded (the home mount).
    pub fn everywhere(&self) -> bool {
        self.kind() == GIT_EVERYWHERE
    }

    /// Whether `path` or a directory above it was emptied (renamed away or removed)
    /// through the mount.
    pub fn emptied(&self, path: &[u8]) -> bool {
        let vacated = self.vacated.read();
        let mut p = path;
        loop {
            if vacated.contains(p) {
                return true;
            }
            if p.is_empty() {
                return false;
            }
            p = parent_of(p);
        }
    }

    /// Whether the `.git` at `repo` is the command's own.
    pub(crate) fn made_here(&self, repo: &[u8]) -> bool {
        self.made.read().contains(repo) && self.fresh(parent_of(repo))
    }

    /// Whether `dir` was made through the mount at a path nothing was emptied at
    /// (see [`GitGuard`]).
    pub fn fresh(&self, dir: &[u8]) -> bool {
        !dir.is_empty() && self.made.read().contains(dir) && !self.emptied(dir)
    }

    /// Whether a `.git` directory may be made at `path` (everywhere mode: only in a
    /// fresh directory).
    pub fn may_make_dir(&self, path: &[u8]) -> bool {
        !self.only_dir(path) || self.fresh(parent_of(path))
    }

    /// Whether the guard is on (under `veilfs run`).
    pub(crate) fn tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// Notes that the directory `path` was made through the mount.
    pub fn made_dir(&self, path: &[u8]) {
        if self.tracking() {
            self.made.write().insert(path.to_vec());
        }
    }

    /// Notes that the directory at `path` was renamed away or removed: what is made
    /// there later is not the command's own.
    pub fn vacated(&self, path: &[u8]) {
        if self.tracking() {
            self.vacated.write().insert(path.to_vec());
        }
    }

    /// Whether a `HEAD` may be made at `path`: git takes any directory holding
    /// `HEAD`, `objects/` and `refs/` for a repository and obeys its `config` (with
    /// `core.worktree`, for the directories below it too), so a `HEAD` is made only
    /// in a `.git` directory or in a directory the command made.
    pub fn may_make_head(&self, path: &[u8]) -> bool {
        if !self.tracking() || name_of(path) != b"HEAD" {
            return true;
        }
        let dir = parent_of(path);
        name_of(dir) == b".git" || self.fresh(dir)
    }

    /// Whether a `.git` (a directory, a file or a link) may be made at `path`:
    /// under `veilfs run`, only in a directory the command made (or, when the
    /// workspace was no repository at start, at its root). A `.git` in a directory
    /// that was there (`cd src && git init`) would be the repository the person's
    /// own git finds first in that directory and below, and obeys.
    pub fn may_make_git(&self, path: &[u8]) -> bool {
        if !self.tracking() || name_of(path) != b".git" {
            return true;
        }
        let dir = parent_of(path);
        self.fresh(dir) || (dir.is_empty() && self.kind() == GIT_NONE)
    }

    /// The directory whose `HEAD` decides whether git obeys `path` (its `config`,
    /// `commondir`, `config.worktree`, or anything under its `hooks/`), if `path` is
    /// such a name in a directory that is not the command's own.
    pub fn repository_of<'p>(&self, path: &'p [u8]) -> Option<&'p [u8]> {
        if !self.tracking() {
            return None;
        }
        let last = name_of(path);
        let dir = if matches!(last, b"config" | b"commondir" | b"config.worktree") {
            parent_of(path)
        } else {
            let mut at = 0;
            let mut found = None;
            for part in path.split(|&b| b == b'/') {
                if part == b"hooks" {
                    found = Some(if at == 0 { &path[..0] } else { &path[..at - 1] });
                    break;
                }
                at += part.len() + 1;
            }
            found?
        };
        (!self.fresh(dir)).then_some(dir)
    }
}

/// Whether git runs or obeys `path` in some repository along it (as the home mount
/// guards every repository that existed before the command made it; `veilfs
/// explain` of a home path).
pub fn git_controls_anywhere(path: &[u8]) -> bool {
    git_components(path).any(|(_, rest)| git_control_path(rest))
}

/// `.git/config`, `.git/config.worktree`, `.git/commondir` (it names the directory
/// whose `config` git reads), `.git/hooks[/…]`, and under `.git/modules/…/` a
/// submodule's `config`, `config.worktree`, `commondir` and `hooks[/…]`, and
/// `.git/worktrees/*/{config.worktree,commondir}`.
fn git_control_path(path: &[u8]) -> bool {
    let Some(rest) = path.strip_prefix(b".git/") else {
        return false;
    };
    let hooks = |p: &[u8]| p == b"hooks" || p.starts_with(b"hooks/");
    // `commondir` names the directory whose `config` git reads.
    let config = |p: &[u8]| p == b"config" || p == b"config.worktree" || p == b"commondir";
    if config(rest) || hooks(rest) {
        return true;
    }
    if let Some(sub) = rest.strip_prefix(b"modules/") {
        // Any repository below: `modules/a/config`, `modules/a/modules/b/hooks/x`.
        let parts: Vec<&[u8]> = sub.split(|&b| b == b'/').collect();
        return parts.iter().enumerate().any(|(i, part)| {
            i > 0 && (part == b"hooks" || (i + 1 == parts.len() && config(part)))
        });
    }
    if let Some(wt) = rest.strip_prefix(b"worktrees/") {
        return wt.ends_with(b"/config.worktree") || wt.ends_with(b"/commondir");
    }
    false
}

impl VeilFs {
    /// Keeps what git runs or obeys read-only in every repository the mount holds
    /// but those the command makes (see [`GitGuard`]). For the home mount of
    /// `veilfs run`.
    pub fn guard_git_everywhere(&self) {
        self.git_guard.kind.store(GIT_EVERYWHERE, Ordering::Relaxed);
        self.git_guard.tracking.store(true, Ordering::Relaxed);
    }

    /// Keeps what git runs or obeys in the workspace's own repository read-only (see
    /// [`GitGuard`]); decided from what the root holds now. For `veilfs run`.
    pub fn guard_git(&self) {
        let kind = match self.inodes.get(super::inode::ROOT).and_then(|root| {
            let fd = root.dir_fd().ok()?;
            let name = crate::sys::name(std::ffi::OsStr::new(".git")).ok()?;
            crate::sys::statat(fd, &name).ok()
        }) {
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => GIT_DIR,
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => GIT_FILE,
            _ => GIT_NONE,
        };
        self.git_guard.kind.store(kind, Ordering::Relaxed);
        self.git_guard.tracking.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod git_tests {
    use super::git_control_path as c;
    use std::sync::atomic::Ordering;

    #[test]
    fn git_components_innermost_first() {
        let v: Vec<(&[u8], &[u8])> = super::git_components(b"a/.git/modules/s/.git/x").collect();
        assert_eq!(
            v,
            [
                (&b"a/.git/modules/s/.git"[..], &b".git/x"[..]),
                (&b"a/.git"[..], &b".git/modules/s/.git/x"[..]),
            ]
        );
        assert_eq!(super::git_components(b".git").count(), 1);
        assert_eq!(super::git_components(b"a/.gitx/config").count(), 0);
    }

    #[test]
    fn everywhere_guards_all_but_repositories_made_here() {
        let g = super::GitGuard::default();
        g.kind.store(super::GIT_EVERYWHERE, Ordering::Relaxed);
        g.tracking.store(true, Ordering::Relaxed);
        assert!(g.controls(b"p/.git/config"));
        assert!(g.controls(b"p/q/.git/hooks/pre-commit"));
        assert!(g.controls(b".git/config"));
        assert!(!g.controls(b"p/.git/HEAD"));
        assert!(g.holds(b"p/.git") && !g.holds(b"p/.gitx"));
        // A repository in a directory made here is the command's own.
        assert!(!g.may_make_dir(b"new/.git") && !g.may_make_dir(b".git"));
        g.made_dir(b"new");
        assert!(g.may_make_dir(b"new/.git"));
        g.made_dir(b"new/.git");
        assert!(!g.controls(b"new/.git/config"));
        assert!(!g.holds(b"new/.git"));
        assert!(g.controls(b"p/.git/config"));
        assert!(g.only_dir(b"new/.git"));
        // Not in a directory that was there before, nor at a path emptied first.
        g.made_dir(b"p/.git");
        assert!(g.controls(b"p/.git/config"));
        g.vacated(b"old");
        g.made_dir(b"old");
        g.made_dir(b"old/.git");
        assert!(!g.may_make_dir(b"old/x/.git"));
        assert!(g.controls(b"old/.git/config"));
        // A HEAD only in a `.git` or in a directory made here.
        assert!(!g.may_make_head(b"HEAD") && !g.may_make_head(b"p/HEAD"));
        assert!(g.may_make_head(b"p/.git/HEAD") && g.may_make_head(b"new/HEAD"));
        assert!(g.may_make_head(b"p/ORIG_HEAD"));
        // What git obeys in a directory that was there before.
        assert_eq!(g.repository_of(b"p/config"), Some(&b"p"[..]));
        assert_eq!(g.repository_of(b"config"), Some(&b""[..]));
        assert_eq!(g.repository_of(b"p/hooks/pre-commit"), Some(&b"p"[..]));
        assert_eq!(g.repository_of(b"hooks/x"), Some(&b""[..]));
        assert_eq!(g.repository_of(b"new/config"), None);
        assert_eq!(g.repository_of(b"p/readme"), None);
    }

    #[test]
    fn git_control_paths() {
        for p in [
            ".git/config",
            ".git/config.worktree",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/modules/sub/config",
            ".git/modules/sub/hooks/post-checkout",
            ".git/modules/a/modules/b/config",
            ".git/worktrees/w/config.worktree",
            ".git/commondir",
            ".git/worktrees/w/commondir",
            ".git/modules/sub/commondir",
        ] {
            assert!(c(p.as_bytes()), "{p}");
        }
        for p in [
            ".git",
            ".git/HEAD",
            ".git/index",
            ".git/objects/ab/cdef",
            ".git/refs/heads/main",
            ".git/modules/sub/objects/x",
            ".git/modules/config",
            "sub/.git/config",
            ".gitconfig",
            ".git/configx",
        ] {
            assert!(!c(p.as_bytes()), "{p}");
        }
    }
}
