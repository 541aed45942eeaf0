//! The guard of what git runs or obeys under `veilfs run` (the rule itself, and
//! what it remembers, is [`crate::fs::git_guard`]): git's control files are marked
//! read-only, and a name git would obey is neither made, moved in nor carried in
//! along with a directory; a repository that was there before the command is not
//! moved or removed.

use std::ffi::CString;

use super::{Disk, Event, Guard, Intent, Target, refusal};
use crate::fs::config;
use crate::fs::git_guard::{GitGuard, InGitDir, name_of, parent_of};
use crate::fs::refusal::Refusal;
use crate::policy::Decision;

/// Git's guard on one mount.
#[derive(Debug)]
pub struct Git {
    guard: GitGuard,
}

impl Git {
    /// The guard `git` asks for, decided from what the root holds now.
    pub fn new(git: config::Git, disk: &Disk) -> Git {
        Git {
            guard: GitGuard::new(git, disk.stat(b".git")),
        }
    }

    /// Whether the workspace-relative directory `dir` holds a `HEAD` or a `config`
    /// on disk (looked up without following any link): where a submodule's
    /// repository begins under a `.git/modules/` (see
    /// [`crate::fs::git_guard::in_git_dir`]). Either one is enough, so that a
    /// repository missing its `HEAD` keeps its `config` read-only.
    fn is_repository(disk: &Disk, dir: &[u8]) -> bool {
        [&b"/HEAD"[..], b"/config"]
            .iter()
            .any(|name| disk.holds_beneath(&[dir, name].concat()))
    }

    /// Whether git obeys `path` in a repository that was there before the command
    /// (a directory holding `HEAD` on disk, bare or `.git`): see
    /// [`GitGuard::repository_of`]. Only ever makes a path stricter: a lookup
    /// through links an attacker made can do no more than refuse a change.
    fn in_found_repository(&self, disk: &Disk, path: &[u8]) -> bool {
        let Some(dir) = self.guard.repository_of(path) else {
            return false;
        };
        let mut head = dir.to_vec();
        if !head.is_empty() {
            head.push(b'/');
        }
        head.extend_from_slice(b"HEAD");
        disk.stat(&head).is_some()
    }

    /// Whether `path` is a `.git` that is no directory (a submodule's or a
    /// separate git directory's `.git` file, or a link), not the command's own: it
    /// names the repository git uses there, and the person's `git status` enters a
    /// submodule. Read-only, like the root's.
    fn found_git_link(&self, disk: &Disk, path: &[u8]) -> bool {
        if !self.guard.tracking() || name_of(path) != b".git" || self.guard.made_here(path) {
            return false;
        }
        disk.stat(path)
            .is_some_and(|st| st.st_mode & libc::S_IFMT != libc::S_IFDIR)
    }

    /// Whether `path` is a `.git` to be made inside a repository that is not the
    /// command's own (a directory above holds a `.git`): the person's git enters a
    /// repository registered in its index (a gitlink: `git update-index --add
    /// --cacheinfo 160000,...`) at every `git status`, and obeys its config there.
    /// The same for a `HEAD` outside any `.git` (a bare-looking repository, which
    /// git obeys when run in or below it).
    fn inside_a_repository(&self, disk: &Disk, path: &[u8]) -> bool {
        let name = name_of(path);
        // Within a git directory (`.git/HEAD`, a bare `x.git`'s): git's own.
        let in_git_dir = path
            .split(|&b| b == b'/')
            .rev()
            .skip(1)
            .any(|part| part.ends_with(b".git"));
        if !self.guard.tracking() || !(name == b".git" || name == b"HEAD" && !in_git_dir) {
            return false;
        }
        let mut dir = parent_of(path);
        loop {
            let mut repo = dir.to_vec();
            if !repo.is_empty() {
                repo.push(b'/');
            }
            repo.extend_from_slice(b".git");
            if disk.stat(&repo).is_some() && !self.guard.made_here(&repo) {
                return true;
            }
            if dir.is_empty() {
                return false;
            }
            dir = parent_of(dir);
        }
    }

    /// Whether `path` is the `HEAD` of a repository that is not the command's own.
    /// Without it git no longer takes the directory for a repository: a bare one
    /// would then move like any directory, and git run in a nested one would walk
    /// up to a repository above it (one the command made). So it is not removed or
    /// renamed away; git replaces it by renaming a lock file over it, which stays
    /// allowed.
    fn found_head(&self, disk: &Disk, path: &[u8]) -> bool {
        if !self.guard.tracking() || name_of(path) != b"HEAD" {
            return false;
        }
        let repo = parent_of(path);
        !repo.is_empty() && Self::is_repository(disk, repo) && !self.guard.own(repo)
    }

    /// What `path` is in the git directories along it that are not the command's
    /// own (see [`GitGuard::class`]).
    fn class(&self, disk: &Disk, path: &[u8]) -> Option<InGitDir> {
        self.guard
            .class(path, &mut |dir| Self::is_repository(disk, dir))
    }

    /// Whether an entry of type `mode` may come to `path` (made, renamed, linked or
    /// exchanged there) in a git directory that is not the command's own: only
    /// where everyday git writes, and only a regular file or a directory.
    fn may_arrive(&self, disk: &Disk, path: &[u8], mode: u32) -> bool {
        let plain = matches!(mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR);
        match self.class(disk, path) {
            None => true,
            Some(InGitDir::Written) => plain,
            Some(_) => false,
        }
    }

    /// Whether an entry of type `mode` may come to `path`: not a `HEAD` or a `.git`
    /// where the command may not make a repository (see [`GitGuard::may_make_head`]
    /// and [`GitGuard::may_make_git`]), and [`Git::may_arrive`].
    fn may_put(&self, disk: &Disk, path: &[u8], mode: u32) -> bool {
        self.guard.may_make_head(path)
            && self.guard.may_make_git(path)
            && !self.inside_a_repository(disk, path)
            && self.may_arrive(disk, path, mode)
    }

    /// Whether `git` (a path ending in `.git`) is a repository that was there before
    /// the command, not its own, which stays where the person's git finds it: in
    /// the home mount, every one; in a workspace, one the command could replace
    /// with its own once moved (none is made inside a repository, so one within the
    /// workspace's own repository may move along with a directory above it).
    fn kept_in_place(&self, disk: &Disk, git: &[u8]) -> bool {
        self.guard.tracking()
            && name_of(git) == b".git"
            && !self.guard.made_here(git)
            && (self.guard.everywhere() || !self.inside_a_repository(disk, &git_above(git)))
    }

    /// An entry of type `mode` beneath a directory being moved, from `old` to
    /// `new`: never a repository that was there before the command (moved with a
    /// directory above it, at any depth: the command could put its own at the old
    /// path in a later session, where the person's git would obey it); else one
    /// that stays what it was in a git directory (a whole repository moved along
    /// with a directory above it) is not arriving.
    fn may_carry(&self, disk: &Disk, old: &[u8], new: &[u8], mode: u32) -> bool {
        if self.kept_in_place(disk, old) {
            return false;
        }
        let then = self.class(disk, new);
        then.is_none() || then == self.class(disk, old) || self.may_arrive(disk, new, mode)
    }

    /// The refusal of moving the directory `at` (entry in hand) to `to`:
    /// * a repository that was there before the command stays where the person's
    ///   git finds it (the command could put its own at the old path, in a later
    ///   session if not in this one), and no repository is moved into a place the
    ///   command emptied (one moved away and a copy put back);
    /// * a directory that holds a repository (a `.git`, or a `HEAD` as a bare one
    ///   has) goes only where a `.git` could be made: into a path that was there
    ///   (replaced, or emptied first) it would be a repository the person's git
    ///   finds in a directory it knew.
    fn refuse_move(&self, disk: &Disk, at: &Target, to: &[u8], replaces: bool) -> Option<Refusal> {
        let (Some((dir, name)), true) = (at.entry, self.guard.tracking()) else {
            return None;
        };
        let holds = |inner: &[u8]| {
            CString::new([name.to_bytes(), inner].concat())
                .is_ok_and(|n| crate::sys::statat(dir, &n).is_ok())
        };
        let holds_git = holds(b"/.git");
        if holds_git {
            let repo = [at.path, b"/.git"].concat();
            if self.kept_in_place(disk, &repo) || self.guard.emptied(to) {
                return refusal(at.path, Decision::git_control());
            }
        }
        if !(holds_git || holds(b"/HEAD")) {
            return None;
        }
        let git = [to, b"/.git"].concat();
        if replaces || self.guard.emptied(to) || self.inside_a_repository(disk, &git) {
            return refusal(to, Decision::git_control());
        }
        None
    }
}

/// The `.git` of the directory above the repository whose `.git` is `git` (where
/// [`Git::inside_a_repository`] begins looking for a repository around it).
fn git_above(git: &[u8]) -> Vec<u8> {
    let up = parent_of(parent_of(git));
    if up.is_empty() {
        b".git".to_vec()
    } else {
        [up, b"/.git"].concat()
    }
}

impl Guard for Git {
    fn mark(&self, path: &[u8], _: &mut dyn FnMut() -> bool, d: Decision, disk: &Disk) -> Decision {
        if self
            .guard
            .controls(path, &mut |dir| Self::is_repository(disk, dir))
            || self.in_found_repository(disk, path)
            || self.found_git_link(disk, path)
        {
            d.guard_git_control()
        } else {
            d
        }
    }

    fn refuse(&self, at: &Target, intent: &Intent, disk: &Disk) -> Option<Refusal> {
        let (path, mode) = (at.path, at.mode);
        let refused = match intent {
            Intent::Change => false,
            Intent::Make if at.is_dir() => {
                !self.guard.may_make_dir(path) || !self.may_put(disk, path, mode)
            }
            Intent::Make => !self.may_put(disk, path, mode) || self.guard.only_dir(path),
            Intent::Remove => self.guard.holds(path) || self.found_head(disk, path),
            Intent::MoveFrom { to, replaces } => {
                if self.guard.holds(path) || self.found_head(disk, path) {
                    return refusal(path, Decision::git_control());
                }
                return if at.is_dir() {
                    self.refuse_move(disk, at, to, *replaces)
                } else {
                    None
                };
            }
            Intent::MoveTo => self.guard.holds(path) || !self.may_put(disk, path, mode),
            Intent::Carry { from } => !self.may_carry(disk, from, path, mode),
        };
        refused
            .then(Decision::git_control)
            .and_then(|d| refusal(path, d))
    }

    fn note(&self, event: &Event) {
        match event {
            Event::MadeDir(path) => self.guard.made_dir(path),
            Event::Vacated(path) => self.guard.vacated(path),
        }
    }
}
