//! What git runs or obeys, kept read-only under `veilfs run` (see [`GitGuard`]):
//! code planted there would run later, outside any confinement, the next time the
//! person runs git.
//!
//! By rule, not by list: a git directory is read-only for the command but for what
//! everyday git writes ([`in_git_dir`]). Everything git reads as instructions
//! (`config`, `hooks/`, a stopped rebase's or the sequencer's todo list with its
//! `exec` lines, `rebase-apply/`, `info/attributes` (filters), `info/exclude`,
//! `info/sparse-checkout`, `objects/info/alternates`, `shallow`, `commondir`,
//! `remotes/`, `branches/`, and whatever a later git adds) is then read-only
//! without being named.
//!
//! | path in a git directory | what it is |
//! |---|---|
//! | `objects/**` but `objects/info/{alternates,http-alternates}` | written |
//! | `refs/**`, `logs/**`, `reftable/**`, `lost-found/**` | written |
//! | `HEAD`, `ORIG_HEAD`, `FETCH_HEAD`, `MERGE_HEAD`, `MERGE_MODE`, `MERGE_MSG`, `AUTO_MERGE`, `CHERRY_PICK_HEAD`, `REVERT_HEAD`, `COMMIT_EDITMSG`, `TAG_EDITMSG`, `SQUASH_MSG`, `index`, `packed-refs`, `gc.pid`, `gc.log`, each `NAME.lock` | written |
//! | `index.stash.*`, `next-index-*`, `sharedindex.*`, `packed-refs.new` | written |
//! | `info/refs`, `info/refs_*` (`git gc`'s list of refs for dumb HTTP clients) | written |
//! | `modules/NAME/…` (a submodule's repository: the outermost directory there holding a `HEAD` or a `config`) | the same rule inside |
//! | `worktrees/ID/…` (a linked worktree's) | the files above, `refs/**`, `logs/**` |
//! | `info`, `modules`, `worktrees`, `worktrees/ID`, a submodule's own directory and those on the way to it | passage: kept, nothing made or moved in |
//! | anything else (`config`, `hooks/`, `rebase-merge/`, `sequencer/`, `info/`, …) | read-only |
//!
//! A name is made in a git directory (created, renamed, linked or exchanged there,
//! or a directory moved there with everything in it) only where the rule writes,
//! and only as a regular file or a directory: a symbolic link (`objects/info`
//! pointing elsewhere, `logs/HEAD` pointing at a file the person's git would then
//! append to) or a special file is refused.
//!
//! ## What the guard remembers, and for how long
//!
//! To tell a repository that was there before from the command's own, the guard
//! marks paths as the command changes them through the mount: *made* (a directory
//! it made) and *vacated* (a directory that was not its own, renamed away or
//! removed). A directory is the command's own ("fresh") while it is marked made and
//! nothing at or above its path is marked vacated. The marks are a tree of names
//! (`marks::Marks`), never a whole path per mark, and they last only while what
//! they describe does:
//! * a made mark lasts while the directory stays where it was made: renaming it
//!   away or removing it through the mount clears the mark, and every mark below
//!   it (one removed from outside leaves its mark until the path is emptied
//!   through the mount, or the bound below is met);
//! * a vacated mark is set only where the directory that went was not the
//!   command's own, and where no mark above already says so: the command's own
//!   directories made and removed by the thousand leave nothing behind. Marks below a
//!   directory that goes go with it: below one of the command's own no path was
//!   there before the command, and below any other the new vacated mark covers them.
//!
//! The marks are bounded (`marks::MAX_ENTRIES` names, `marks::MAX_NAME_BYTES`
//! bytes of them). What does not fit is answered the way that refuses: a made mark
//! that does not fit is not made, so that directory is not the command's own (no
//! repository is made in it, as in a directory that was there); a vacated mark
//! goes on the nearest directory above that is marked, up to the root, so more
//! paths count as emptied, never fewer.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use parking_lot::RwLock;

mod marks;

/// What git runs or obeys, kept read-only under `veilfs run`
/// ([`super::config::Git`]): code planted there
/// runs later, outside any confinement, the next time the person runs git in the
/// real directory (`core.fsmonitor`, `core.hooksPath`, aliases, filters, hooks, a
/// rebase's `exec` lines).
///
/// In every repository the mount holds but the command's own (each `.git`
/// directory at any depth, with its submodules' repositories under `modules/` and
/// its linked worktrees' under `worktrees/`), the git directory is read-only but
/// for what everyday git writes (see the module documentation and
/// [`in_git_dir`]): `git commit`, `checkout`, `merge`, `stash`, `fetch`, `tag`,
/// `gc` work; `git config`, `git remote add`, a rebase, `git am` and a
/// multi-commit cherry-pick are refused. Besides, set once before mounting from
/// what the workspace root holds:
/// * a `.git` **directory**: it is not renamed or removed (a new `.git`, or a
///   `.git` file pointing elsewhere, cannot take its place);
/// * a `.git` **file** (a linked worktree or a submodule's checkout): the file is
///   read-only (it names the repository git uses);
/// * no `.git`: a repository the command makes at the root is its own.
///
/// In the home mount of `veilfs run` ([`super::config::Git::Everywhere`]) every
/// repository is guarded the same way (the person's other projects, dotfiles), but
/// for the command's own: a repository made in a directory the command made
/// during the session (`git clone URL dir`, `mkdir d && git init d`). A `.git` is
/// made only there (`git init` in a directory that was there before, the home
/// directory itself included, would have the person's git obey it in every
/// directory below), only as a directory (a `.git` file pointing elsewhere would
/// choose the configuration the person's git reads), and no `.git` but the
/// command's own is renamed or removed. A directory the command made at a path it
/// emptied first (renamed away or removed a directory there that was not its own)
/// is not its own: a repository moved away and cloned back at its path stays
/// guarded.
#[derive(Debug, Default)]
pub struct GitGuard {
    kind: AtomicU8,
    /// Under `veilfs run` (either mode): directories made and emptied are noted, so
    /// that a repository that was there before is told from the command's own.
    tracking: AtomicBool,
    /// The directories made through the mount (while they stay where they were
    /// made), and the paths where a directory that was not the command's own was
    /// renamed away or removed (see the module documentation).
    marks: RwLock<marks::Marks>,
    /// A mark did not fit in [`GitGuard::marks`] (said once).
    overflowed: AtomicBool,
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

/// Whether `dir` was made through the mount at a path nothing was emptied at, by
/// the marks `m`.
fn fresh_in(m: &marks::Marks, dir: &[u8]) -> bool {
    !dir.is_empty() && m.made(dir) && !m.emptied(dir)
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

    /// Whether git runs or obeys the workspace-relative `path`: the `.git` file at
    /// the root (a linked worktree's or a submodule's checkout), or a path the rule
    /// keeps read-only in a git directory that is not the command's own (see
    /// [`in_git_dir`]). `is_repository` says whether a directory (a
    /// workspace-relative path) holds a `HEAD` or a `config`.
    pub fn controls(&self, path: &[u8], is_repository: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        if self.tracking() && self.kind() == GIT_FILE && path == b".git" {
            return true;
        }
        self.class(path, is_repository) == Some(InGitDir::Guarded)
    }

    /// Whether a name may come into existence at `path` (made, or moved or linked
    /// there): anywhere but in a git directory that is not the command's own, only
    /// what everyday git writes ([`InGitDir::Written`]). The `.git` itself is
    /// decided by [`GitGuard::may_make_git`].
    pub fn may_make(&self, path: &[u8], is_repository: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        matches!(
            self.class(path, is_repository),
            None | Some(InGitDir::Written)
        )
    }

    /// What `path` is in the git directories along it that are not the command's
    /// own (the `.git` itself left out), the strictest answer winning: `None` when
    /// no such git directory holds it, or the guard is off.
    pub fn class(
        &self,
        path: &[u8],
        is_repository: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Option<InGitDir> {
        if !self.tracking() {
            return None;
        }
        let rank = |c: InGitDir| match c {
            InGitDir::Written => 0,
            InGitDir::Passage => 1,
            InGitDir::Guarded => 2,
        };
        git_components(path)
            .filter(|(repo, rest)| *rest != b".git" && !self.own(repo))
            .map(|(repo, rest)| {
                in_git_dir(strip_git(rest), &mut |p: &[u8]| {
                    is_repository(&[repo, b"/", p].concat())
                })
            })
            .max_by_key(|c| rank(*c))
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

    /// Whether `path` or a directory above it was emptied through the mount (a
    /// directory that was not the command's own renamed away or removed there).
    pub fn emptied(&self, path: &[u8]) -> bool {
        self.marks.read().emptied(path)
    }

    /// Whether the `.git` at `repo` is the command's own.
    pub(crate) fn made_here(&self, repo: &[u8]) -> bool {
        let m = self.marks.read();
        m.made(repo) && fresh_in(&m, parent_of(repo))
    }

    /// Whether the git directory `repo` (a `.git`) is the command's own: made in a
    /// directory it made ([`GitGuard::made_here`]), or at the root of a workspace
    /// that held no `.git` at start (`git init` there, see
    /// [`GitGuard::may_make_git`]).
    pub(crate) fn own(&self, repo: &[u8]) -> bool {
        self.made_here(repo)
            || (repo == b".git" && self.kind() == GIT_NONE && self.marks.read().made(repo))
    }

    /// Whether `dir` was made through the mount at a path nothing was emptied at
    /// (see [`GitGuard`]).
    pub fn fresh(&self, dir: &[u8]) -> bool {
        fresh_in(&self.marks.read(), dir)
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
        if self.tracking() && !self.marks.write().mark_made(path) {
            self.said_full();
        }
    }

    /// Notes that the directory at `path` was renamed away or removed: what was
    /// noted at and below `path` is forgotten, and, unless the directory was the
    /// command's own, what is made there later is not (see the module
    /// documentation).
    pub fn vacated(&self, path: &[u8]) {
        if !self.tracking() {
            return;
        }
        let mut m = self.marks.write();
        let own = fresh_in(&m, path);
        m.clear(path);
        if !own && !m.emptied(path) && !m.mark_vacated(path) {
            drop(m);
            self.said_full();
        }
    }

    /// Says once that a mark did not fit (see [`marks::Marks`]).
    fn said_full(&self) {
        if !self.overflowed.swap(true, Ordering::Relaxed) {
            log::warn!(
                "git guard: more directories made or emptied than it keeps track of; \
                 from now on some directories the command makes are not its own (no \
                 repository is made in them)"
            );
        }
    }

    /// Whether a `HEAD` may be made at `path`: git takes any directory holding
    /// `HEAD`, `objects/` and `refs/` for a repository and obeys its `config` (with
    /// `core.worktree`, for the directories below it too), so a `HEAD` is made only
    /// in a `.git` directory, in a directory the command made, or inside a git
    /// directory (where [`GitGuard::may_make`] decides: a submodule's or linked
    /// worktree's `HEAD`, `logs/HEAD`, `refs/remotes/origin/HEAD`).
    pub fn may_make_head(&self, path: &[u8]) -> bool {
        if !self.tracking() || name_of(path) != b"HEAD" {
            return true;
        }
        let dir = parent_of(path);
        name_of(dir) == b".git"
            || self.fresh(dir)
            || git_components(path).any(|(_, rest)| rest != b".git")
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
/// explain` of a home path). `is_repository` says whether a directory (as a path
/// like `path`) holds a `HEAD` or a `config` (see [`in_git_dir`]).
pub fn git_controls_anywhere(path: &[u8], mut is_repository: impl FnMut(&[u8]) -> bool) -> bool {
    git_components(path).any(|(repo, rest)| {
        let base = &path[..repo.len()];
        in_git_dir(strip_git(rest), &mut |p: &[u8]| {
            is_repository(&[base, b"/", p].concat())
        }) == InGitDir::Guarded
    })
}

/// `rest` (a path from a `.git` component on: `.git/...`) relative to that `.git`.
fn strip_git(rest: &[u8]) -> &[u8] {
    rest.strip_prefix(b".git/").unwrap_or(b"")
}

/// What the rule makes of a path inside a git directory (see [`in_git_dir`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InGitDir {
    /// Everyday git writes it, and obeys nothing in it: made, changed and removed
    /// freely (only as a regular file or a directory).
    Written,
    /// The git directory itself, a directory holding both kinds (`info`), or a
    /// directory on the way to another git directory inside it (`modules`,
    /// `modules/lib` for the submodule `lib/foo`, a submodule's or linked
    /// worktree's own directory): left as it is (what lies below is decided for
    /// itself), but nothing is made or moved here.
    Passage,
    /// Everything else (config, hooks, the sequencer's and rebases' state,
    /// `info/`, alternates, ...): read-only.
    Guarded,
}

/// Top-level files of a git directory that everyday git writes and that hold no
/// instruction git follows: names of commits and refs (`HEAD`, `ORIG_HEAD`,
/// `FETCH_HEAD`, a merge's, cherry-pick's or revert's `*_HEAD`, `AUTO_MERGE` (a
/// tree), `MERGE_MODE` (only `no-ff`)), messages the next commit offers to edit,
/// the index, `packed-refs`, and `git gc`'s pid file and log.
const WRITTEN_FILES: &[&[u8]] = &[
    b"HEAD",
    b"ORIG_HEAD",
    b"FETCH_HEAD",
    b"MERGE_HEAD",
    b"MERGE_MODE",
    b"MERGE_MSG",
    b"AUTO_MERGE",
    b"CHERRY_PICK_HEAD",
    b"REVERT_HEAD",
    b"COMMIT_EDITMSG",
    b"TAG_EDITMSG",
    b"SQUASH_MSG",
    b"index",
    b"packed-refs",
    b"gc.pid",
    b"gc.log",
];

/// Prefixes of temporary files git writes beside them: `git stash`'s and a
/// partial commit's index (`index.stash.PID`, `next-index-PID.lock`), a split
/// index (`sharedindex.SHA`), `packed-refs.new`.
const WRITTEN_PREFIXES: &[&[u8]] = &[
    b"index.stash.",
    b"next-index-",
    b"sharedindex.",
    b"packed-refs.new",
];

/// Directories everyday git writes anything in: the object store (but for
/// `objects/info/alternates` and `objects/info/http-alternates`, which point git at
/// other object stores), refs and their logs, and `git fsck --lost-found`'s.
const WRITTEN_DIRS: &[&[u8]] = &[b"objects", b"refs", b"logs", b"reftable", b"lost-found"];

/// The first name of `path` and the rest after it (empty when it has one name).
fn first(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().position(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (path, b""),
    }
}

/// Whether `name`, a top-level file of a git directory, is one everyday git writes
/// (or the lock file of one).
fn written_file(name: &[u8]) -> bool {
    let name = name.strip_suffix(b".lock").unwrap_or(name);
    WRITTEN_FILES.contains(&name) || WRITTEN_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What `path`, relative to a git directory (empty: the directory itself), is to
/// the rule "read-only but for what everyday git writes". A submodule's repository
/// (under `modules/`, its name may span several directories) is the outermost
/// directory there for which `is_repository` holds (given its path relative to
/// the same git directory; a `HEAD` or a `config` in it on disk), and decided by
/// the same rule; a linked worktree's (`worktrees/ID/`)
/// holds only the files and `refs/` and `logs/` of one worktree. Pure: the caller
/// looks at the disk.
pub fn in_git_dir(path: &[u8], is_repository: &mut dyn FnMut(&[u8]) -> bool) -> InGitDir {
    // `path[base..]` is relative to the git directory being decided.
    let mut base = 0;
    let mut worktree = false;
    loop {
        let rest = &path[base..];
        if rest.is_empty() {
            return InGitDir::Passage;
        }
        let (name, below) = first(rest);
        let dir = |d: &[u8]| name == d;
        if dir(b"objects") && !worktree {
            let other_stores = [&b"info/alternates"[..], b"info/http-alternates"];
            let points_elsewhere = other_stores.iter().any(|a| {
                below == *a || below.strip_prefix(*a).is_some_and(|r| r.starts_with(b"/"))
            });
            return if points_elsewhere {
                InGitDir::Guarded
            } else {
                InGitDir::Written
            };
        }
        if dir(b"refs") || dir(b"logs") || (!worktree && WRITTEN_DIRS.contains(&name)) {
            return InGitDir::Written;
        }
        if below.is_empty() && written_file(name) {
            return InGitDir::Written;
        }
        if worktree {
            return InGitDir::Guarded;
        }
        if dir(b"info") {
            // `git gc` (`update-server-info`) writes `info/refs` through a
            // temporary `info/refs_XXXXXX`: a list of refs for dumb HTTP clients.
            return match below {
                b"" => InGitDir::Passage,
                b"refs" => InGitDir::Written,
                b if b.starts_with(b"refs_") && !b.contains(&b'/') => InGitDir::Written,
                _ => InGitDir::Guarded,
            };
        }
        let at = base + name.len() + 1;
        if dir(b"worktrees") {
            let (id, inside) = first(below);
            if id.is_empty() || inside.is_empty() {
                return InGitDir::Passage;
            }
            base = at + id.len() + 1;
            worktree = true;
            continue;
        }
        if !dir(b"modules") {
            return InGitDir::Guarded;
        }
        if below.is_empty() {
            return InGitDir::Passage;
        }
        // The outermost directory below `modules/` that is a repository.
        let mut end = at;
        let root = loop {
            let Some(i) = path[end..].iter().position(|&b| b == b'/') else {
                break None;
            };
            end += i;
            if is_repository(&path[..end]) {
                break Some(end + 1);
            }
            end += 1;
        };
        match root {
            Some(r) => base = r,
            None => return InGitDir::Passage,
        }
    }
}

impl GitGuard {
    /// The guard `git` asks for (see [`super::config::Git`]), on a mount whose root
    /// holds `dot_git` now (the root's `.git`, not followed).
    pub(crate) fn new(git: super::config::Git, dot_git: Option<libc::stat>) -> GitGuard {
        use super::config::Git;
        let kind = match (git, dot_git) {
            (Git::Everywhere, _) => GIT_EVERYWHERE,
            (_, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => GIT_DIR,
            (_, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFREG => GIT_FILE,
            _ => GIT_NONE,
        };
        GitGuard {
            kind: AtomicU8::new(kind),
            tracking: AtomicBool::new(git != Git::Off),
            ..GitGuard::default()
        }
    }
}

#[cfg(test)]
mod git_tests {
    use super::InGitDir::{self, Guarded, Passage, Written};
    use std::sync::atomic::Ordering;

    /// A guard in `kind`, on, with no directory holding a `HEAD`.
    fn guard(kind: u8) -> super::GitGuard {
        let g = super::GitGuard::default();
        g.kind.store(kind, Ordering::Relaxed);
        g.tracking.store(true, Ordering::Relaxed);
        g
    }

    fn controls(g: &super::GitGuard, path: &[u8]) -> bool {
        g.controls(path, &mut |_| false)
    }

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
        let g = guard(super::GIT_EVERYWHERE);
        assert!(controls(&g, b"p/.git/config"));
        assert!(controls(&g, b"p/q/.git/hooks/pre-commit"));
        assert!(controls(&g, b".git/config"));
        assert!(controls(&g, b"p/.git/rebase-merge/git-rebase-todo"));
        assert!(!controls(&g, b"p/.git/HEAD"));
        assert!(!controls(&g, b"p/.git"));
        assert!(g.holds(b"p/.git") && !g.holds(b"p/.gitx"));
        // A repository in a directory made here is the command's own.
        assert!(!g.may_make_dir(b"new/.git") && !g.may_make_dir(b".git"));
        g.made_dir(b"new");
        assert!(g.may_make_dir(b"new/.git"));
        g.made_dir(b"new/.git");
        assert!(!controls(&g, b"new/.git/config"));
        assert!(!controls(&g, b"new/.git/rebase-merge/git-rebase-todo"));
        assert!(g.may_make(b"new/.git/rebase-merge", &mut |_| false));
        assert_eq!(g.class(b"new/.git/hooks", &mut |_| false), None);
        assert!(!g.holds(b"new/.git"));
        assert!(controls(&g, b"p/.git/config"));
        assert!(g.only_dir(b"new/.git"));
        // Not in a directory that was there before, nor at a path emptied first.
        g.made_dir(b"p/.git");
        assert!(controls(&g, b"p/.git/config"));
        g.vacated(b"old");
        g.made_dir(b"old");
        g.made_dir(b"old/.git");
        assert!(!g.may_make_dir(b"old/x/.git"));
        assert!(controls(&g, b"old/.git/config"));
        // A HEAD only in a `.git`, in a directory made here, or inside a git
        // directory (where the rule decides).
        assert!(!g.may_make_head(b"HEAD") && !g.may_make_head(b"p/HEAD"));
        assert!(g.may_make_head(b"p/.git/HEAD") && g.may_make_head(b"new/HEAD"));
        assert!(g.may_make_head(b"p/.git/logs/HEAD"));
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
    fn the_commands_own_directories_made_and_removed_leave_nothing_behind() {
        let g = guard(super::GIT_EVERYWHERE);
        for i in 0..10_000 {
            let d = format!("p/made-{i}");
            g.made_dir(d.as_bytes());
            assert!(g.fresh(d.as_bytes()));
            g.vacated(d.as_bytes());
        }
        assert_eq!(g.marks.read().len(), 0);
        // Made again where the command's own was: its own again.
        g.made_dir(b"p/made-0");
        assert!(g.may_make_dir(b"p/made-0/.git"));
    }

    #[test]
    fn a_directory_that_goes_takes_the_marks_below_it() {
        let g = guard(super::GIT_EVERYWHERE);
        g.made_dir(b"new");
        g.made_dir(b"new/sub");
        g.made_dir(b"new/sub/.git");
        assert!(g.made_here(b"new/sub/.git"));
        // Renamed away (the command's own): nothing kept, and nothing fresh where
        // it went (`new` is made again, `sub` arrives by a rename).
        g.vacated(b"new");
        assert_eq!(g.marks.read().len(), 0);
        g.made_dir(b"new");
        assert!(!g.made_here(b"new/sub/.git") && !g.fresh(b"new/sub"));
        assert!(controls(&g, b"new/sub/.git/config"));
        // A directory that was there, removed: what is made at its path, or below
        // it, is not the command's own, however often it comes and goes.
        g.vacated(b"old");
        for _ in 0..3 {
            g.made_dir(b"old");
            g.made_dir(b"old/x");
            assert!(!g.fresh(b"old") && !g.fresh(b"old/x"));
            g.vacated(b"old/x");
            g.vacated(b"old");
        }
        assert!(g.emptied(b"old/x"));
        assert_eq!(g.marks.read().len(), 2, "`new` made and `old` vacated");
        // One below it renamed away first, then the directory above.
        g.vacated(b"top/inner");
        g.vacated(b"top");
        assert!(g.emptied(b"top/inner") && g.emptied(b"top/other"));
        assert_eq!(g.marks.read().len(), 3, "`top/inner` went with `top`");
    }

    #[test]
    fn the_workspace_repository_and_those_below_it_are_guarded() {
        let g = guard(super::GIT_DIR);
        assert!(controls(&g, b".git/config"));
        assert!(controls(&g, b".git/rebase-merge"));
        assert!(controls(&g, b"vendor/lib/.git/info/attributes"));
        assert!(!controls(&g, b".git/objects/ab/cdef"));
        assert!(!controls(&g, b"src/config"));
        assert!(g.may_make(b".git/refs/heads/x", &mut |_| false));
        assert!(!g.may_make(b".git/sequencer", &mut |_| false));
        assert!(!g.may_make(b".git/modules/new", &mut |_| false));
        // The `.git` itself is decided elsewhere (`may_make_git`).
        assert!(g.may_make(b".git", &mut |_| false));
        assert_eq!(g.class(b".git/refs", &mut |_| false), Some(Written));
        assert_eq!(g.class(b".git", &mut |_| false), None);
        assert_eq!(g.class(b"src/a.rs", &mut |_| false), None);
        // The strictest of the repositories along the path.
        assert_eq!(
            g.class(b".git/refs/x/.git/config", &mut |_| false),
            Some(Guarded)
        );
    }

    #[test]
    fn a_git_directory_made_at_the_root_of_a_workspace_that_had_none_is_the_commands() {
        let g = guard(super::GIT_NONE);
        assert!(controls(&g, b".git/config"), "not made: the rule holds");
        g.made_dir(b".git");
        assert!(!controls(&g, b".git/config"));
        assert!(controls(&g, b"sub/.git/config"), "one below that was there");
        let g = guard(super::GIT_DIR);
        g.made_dir(b".git");
        assert!(
            controls(&g, b".git/config"),
            "the root's was there at start"
        );
    }

    #[test]
    fn the_root_git_file_is_read_only() {
        let g = guard(super::GIT_FILE);
        assert!(controls(&g, b".git"));
        assert!(!controls(&g, b"src"));
        let off = super::GitGuard::default();
        assert!(!controls(&off, b".git/config"), "off outside `veilfs run`");
        assert!(off.may_make(b".git/hooks/x", &mut |_| false));
    }

    /// `path` (relative to a git directory) as the rule decides it, with the
    /// submodules' repositories `sub`, `lib/foo`, `a` and `a`'s `b`.
    fn decide(path: &str) -> InGitDir {
        let roots: [&[u8]; 4] = [
            b"modules/sub",
            b"modules/lib/foo",
            b"modules/a",
            b"modules/a/modules/b",
        ];
        super::in_git_dir(path.as_bytes(), &mut |d| roots.contains(&d))
    }

    /// One test per row: `name: "path in a git directory" => what the rule makes of it`.
    macro_rules! in_git_dir_table {
        ($($name:ident: $path:literal => $want:ident,)*) => {
            $(
                #[test]
                fn $name() {
                    assert_eq!(decide($path), $want, "{}", $path);
                }
            )*
        };
    }

    in_git_dir_table! {
        the_git_directory_itself: "" => Passage,
        config: "config" => Guarded,
        config_worktree: "config.worktree" => Guarded,
        config_lock: "config.lock" => Guarded,
        commondir: "commondir" => Guarded,
        hooks: "hooks" => Guarded,
        a_hook: "hooks/pre-commit" => Guarded,
        rebase_merge: "rebase-merge" => Guarded,
        rebase_todo: "rebase-merge/git-rebase-todo" => Guarded,
        rebase_apply: "rebase-apply/next" => Guarded,
        sequencer_todo: "sequencer/todo" => Guarded,
        info_attributes: "info/attributes" => Guarded,
        info_exclude: "info/exclude" => Guarded,
        info_sparse_checkout: "info/sparse-checkout" => Guarded,
        info_grafts: "info/grafts" => Guarded,
        info: "info" => Passage,
        info_refs: "info/refs" => Written,
        info_refs_temporary: "info/refs_a1B2c3" => Written,
        below_info_refs: "info/refs_x/attributes" => Guarded,
        alternates: "objects/info/alternates" => Guarded,
        http_alternates: "objects/info/http-alternates" => Guarded,
        below_alternates: "objects/info/alternates/x" => Guarded,
        shallow: "shallow" => Guarded,
        description: "description" => Guarded,
        old_style_remote: "remotes/origin" => Guarded,
        old_style_branch: "branches/origin" => Guarded,
        rerere_cache: "rr-cache/x/preimage" => Guarded,
        a_new_name: "evil" => Guarded,
        a_written_name_as_a_directory: "HEAD/x" => Guarded,
        head: "HEAD" => Written,
        head_lock: "HEAD.lock" => Written,
        orig_head: "ORIG_HEAD" => Written,
        fetch_head: "FETCH_HEAD" => Written,
        merge_head: "MERGE_HEAD" => Written,
        merge_msg: "MERGE_MSG" => Written,
        merge_mode: "MERGE_MODE" => Written,
        auto_merge_lock: "AUTO_MERGE.lock" => Written,
        cherry_pick_head: "CHERRY_PICK_HEAD" => Written,
        revert_head: "REVERT_HEAD" => Written,
        commit_editmsg: "COMMIT_EDITMSG" => Written,
        index: "index" => Written,
        index_lock: "index.lock" => Written,
        stash_index: "index.stash.1234" => Written,
        partial_commit_index: "next-index-1234.lock" => Written,
        split_index: "sharedindex.0123abcd" => Written,
        packed_refs_new: "packed-refs.new" => Written,
        gc_pid: "gc.pid" => Written,
        objects: "objects" => Written,
        an_object: "objects/ab/cdef" => Written,
        a_pack: "objects/pack/pack-1.pack" => Written,
        commit_graph: "objects/info/commit-graph" => Written,
        objects_info: "objects/info" => Written,
        packs_list: "objects/info/packs" => Written,
        a_ref: "refs/heads/main" => Written,
        a_remote_head: "refs/remotes/origin/HEAD" => Written,
        a_reflog: "logs/refs/heads/main" => Written,
        head_reflog: "logs/HEAD" => Written,
        lost_found: "lost-found/commit/abc" => Written,
        modules: "modules" => Passage,
        a_submodule_repository: "modules/sub" => Passage,
        on_the_way_to_a_submodule: "modules/lib" => Passage,
        a_submodule_named_in_two_directories: "modules/lib/foo" => Passage,
        a_submodule_config: "modules/sub/config" => Guarded,
        a_submodule_hook: "modules/sub/hooks/post-checkout" => Guarded,
        a_submodule_rebase: "modules/lib/foo/rebase-merge/done" => Guarded,
        a_submodule_object: "modules/lib/foo/objects/ab/cd" => Written,
        a_submodule_head: "modules/sub/HEAD" => Written,
        a_nested_submodule_config: "modules/a/modules/b/config" => Guarded,
        a_nested_submodule_ref: "modules/a/modules/b/refs/heads/x" => Written,
        a_new_submodule: "modules/new" => Passage,
        inside_a_new_submodule: "modules/new/objects" => Passage,
        beside_a_submodule_on_the_way: "modules/lib/refs/x/config" => Passage,
        inside_a_submodules_refs: "modules/lib/foo/refs/x/config" => Written,
        worktrees: "worktrees" => Passage,
        a_worktree: "worktrees/wt" => Passage,
        a_worktree_head: "worktrees/wt/HEAD" => Written,
        a_worktree_index_lock: "worktrees/wt/index.lock" => Written,
        a_worktree_ref: "worktrees/wt/refs/bisect/x" => Written,
        a_worktree_reflog: "worktrees/wt/logs/HEAD" => Written,
        a_worktree_gitdir: "worktrees/wt/gitdir" => Guarded,
        a_worktree_commondir: "worktrees/wt/commondir" => Guarded,
        a_worktree_config: "worktrees/wt/config.worktree" => Guarded,
        a_worktree_rebase: "worktrees/wt/rebase-merge/git-rebase-todo" => Guarded,
        a_worktree_objects: "worktrees/wt/objects/info/alternates" => Guarded,
        a_worktree_in_a_worktree: "worktrees/wt/worktrees/x/HEAD" => Guarded,
    }
}
