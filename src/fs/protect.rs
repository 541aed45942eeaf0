//! The policy file the mount reads can never be changed through the mount, however it
//! is named.
//!
//! Three guards, each checked where [`super::ops`] checks a change:
//! * **By identity.** [`ProtectedFiles`] holds the `(st_dev, st_ino)` of the policy
//!   file the daemon read (set at start from the file opened, and by the reloader on
//!   every reload). A node with that key is read-only for every change: an open for
//!   writing or truncating, `setattr`, an extended attribute set or removed, a new
//!   name linked to it, and the removal or rename of any name that reaches it (a hard
//!   link inside the workspace included), or of a name it would replace.
//! * **By path.** The policy file's workspace-relative paths, as given and with every
//!   symbolic link resolved (`--policy link.toml` with `link.toml -> SRC/pol.toml`
//!   protects both `link.toml` and `pol.toml`), are read-only in every decision, so a
//!   new file renamed over one is refused as well.
//! * **Its directories.** A directory on one of those paths (an ancestor of the policy
//!   file) is not renamed or removed through the mount: the daemon keeps reading the
//!   file where the person outside edits it.
//!
//! The name `.veilfs.toml` at every depth is read-only in the policy itself (see
//! [`crate::policy::POLICY_FILE_NAME`]).

use parking_lot::RwLock;
use std::io;
use std::path::Path;

use super::VeilFs;
use super::inode::Key;
use super::ops::refuse;
use crate::policy::Decision;

/// The backing objects no change may reach through the mount: the policy file read
/// (shared between the filesystem and whoever reloads the policy).
#[derive(Debug, Default)]
pub struct ProtectedFiles {
    key: RwLock<Option<Key>>,
    /// The objects opened for writing or created through the mount lately, and when
    /// (see [`ProtectedFiles::written`]).
    written: parking_lot::Mutex<Written>,
}

/// How long a write through the mount disqualifies a file from becoming the policy.
pub const WRITTEN_WINDOW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

#[derive(Debug, Default)]
struct Written {
    at: std::collections::HashMap<Key, std::time::Instant>,
    /// Prune once the map holds this many (doubles with what stays).
    prune_at: usize,
}

impl ProtectedFiles {
    /// Records that `key` was opened for writing or created through the mount. A file
    /// so written in the last [`WRITTEN_WINDOW`] is never loaded as policy: an
    /// editor's temporary file beside the policy (`sed -i`, atomic saves) can be
    /// written by the confined command before the person renames it over the policy.
    /// Kept by key (not on the node, which the kernel may forget as soon as the
    /// command closes the file), and by time, so that no amount of other writes
    /// pushes an entry out early.
    pub fn written(&self, key: Key) {
        let now = std::time::Instant::now();
        let mut w = self.written.lock();
        w.at.insert(key, now);
        if w.at.len() >= w.prune_at.max(4096) {
            w.at.retain(|_, t| now.duration_since(*t) < WRITTEN_WINDOW);
            w.prune_at = w.at.len() * 2;
        }
    }

    /// Whether `key` was opened for writing or created through the mount in the
    /// last [`WRITTEN_WINDOW`].
    pub fn written_lately(&self, key: Key) -> bool {
        self.written
            .lock()
            .at
            .get(&key)
            .is_some_and(|t| t.elapsed() < WRITTEN_WINDOW)
    }

    /// Protects the object `(dev, ino)` (the policy file just read, from `fstat` of
    /// the descriptor it was read through), in place of the one protected before.
    pub fn set(&self, dev: u64, ino: u64) {
        *self.key.write() = Some((dev, ino));
    }

    /// Protects the object `file` stands for (following symbolic links), as
    /// [`ProtectedFiles::set`].
    pub fn set_from_path(&self, file: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(file)?;
        self.set(md.dev(), md.ino());
        Ok(())
    }

    /// No object is protected by identity (the built-in policy).
    pub fn clear(&self) {
        *self.key.write() = None;
    }

    /// The protected object, if any.
    pub fn get(&self) -> Option<Key> {
        *self.key.read()
    }

    /// Whether `key` is the protected object.
    pub fn contains(&self, key: Key) -> bool {
        self.get() == Some(key)
    }
}

impl VeilFs {
    /// The set of protected objects: the run and mount code and the reloader set the
    /// policy file's key in it each time they read the file.
    pub fn protected(&self) -> std::sync::Arc<ProtectedFiles> {
        self.protected.clone()
    }

    /// `d`, made at least read-only when `path` is one of the policy file's paths.
    pub(crate) fn guard_policy_path(&self, path: &[u8], d: Decision) -> Decision {
        if self.policy_paths.iter().any(|p| p.as_slice() == path) {
            d.guard_policy_file()
        } else if self.git_guard.controls(path) {
            d.guard_git_control()
        } else if self.config_dirs.iter().any(|c| at_or_under(path, c)) {
            d.guard_veilfs_config()
        } else if self.in_found_repository(path) {
            d.guard_git_control()
        } else {
            d
        }
    }

    /// Refuses a change to the backing object `key` (reached as `path`) when it is
    /// the protected policy file.
    pub(crate) fn guard_key(&self, key: Key, path: &[u8]) -> io::Result<()> {
        if self.protected.contains(key) {
            Err(refuse(path, &Decision::policy_file()))
        } else {
            Ok(())
        }
    }

    /// Whether git obeys `path` in a repository that was there before the command
    /// (a directory holding `HEAD` on disk, bare or `.git`): see
    /// [`GitGuard::repository_of`].
    fn in_found_repository(&self, path: &[u8]) -> bool {
        let Some(dir) = self.git_guard.repository_of(path) else {
            return false;
        };
        let mut head = dir.to_vec();
        if !head.is_empty() {
            head.push(b'/');
        }
        head.extend_from_slice(b"HEAD");
        // Only ever makes a path stricter: a lookup through links an attacker made
        // can do no more than refuse a change.
        self.inodes
            .get(super::inode::ROOT)
            .and_then(|root| {
                let fd = root.dir_fd().ok()?;
                let name = std::ffi::CString::new(head).ok()?;
                crate::sys::statat(fd, &name).ok()
            })
            .is_some()
    }

    /// Refuses to make `path` when it is a `HEAD` where the command may not make a
    /// repository (see [`GitGuard::may_make_head`]).
    pub(crate) fn guard_head(&self, path: &[u8]) -> io::Result<()> {
        if self.git_guard.may_make_head(path) {
            Ok(())
        } else {
            Err(refuse(path, &Decision::git_control()))
        }
    }

    /// Refuses to make anything but a directory at `path` when it leads to a guarded
    /// configuration directory (see [`VeilFs::guard_config_dir`]): a symbolic link
    /// made at `~/.config` would send the next run's search for its home policy to a
    /// directory the command chose.
    pub(crate) fn guard_config_way(&self, path: &[u8]) -> io::Result<()> {
        self.guard_head(path)?;
        if self.ways.iter().any(|w| w.as_slice() == path) {
            return Err(refuse(path, &Decision::way()));
        }
        if self.config_dirs.iter().any(|c| at_or_under(c, path)) {
            Err(refuse(path, &Decision::veilfs_config()))
        } else if self.git_guard.only_dir(path) {
            Err(refuse(path, &Decision::git_control()))
        } else {
            Ok(())
        }
    }

    /// Refuses, in a home mount, to move the directory `from` (holding a `.git` when
    /// `holds_git`) to `to`: a repository that was there before the command stays
    /// where the person's git finds it, and no repository is moved into a place the
    /// command emptied (one moved away and a copy put back, see [`GitGuard`]).
    pub(crate) fn guard_git_move(&self, from: &[u8], to: &[u8], holds_git: bool) -> io::Result<()> {
        if !holds_git {
            return Ok(());
        }
        let mut repo = from.to_vec();
        repo.extend_from_slice(b"/.git");
        if !self.git_guard.made_here(&repo) || self.git_guard.emptied(to) {
            return Err(refuse(from, &Decision::git_control()));
        }
        Ok(())
    }

    /// Refuses to rename or remove `path` when the policy file lies beneath it.
    pub(crate) fn guard_holder(&self, path: &[u8]) -> io::Result<()> {
        let holds =
            |p: &Vec<u8>| p.len() > path.len() && p.starts_with(path) && p[path.len()] == b'/';
        if !path.is_empty() && self.policy_paths.iter().any(holds) {
            Err(refuse(path, &Decision::holds_policy_file()))
        } else if self.git_guard.holds(path) {
            Err(refuse(path, &Decision::git_control()))
        } else if self.config_dirs.iter().any(|c| at_or_under(c, path)) {
            Err(refuse(path, &Decision::veilfs_config()))
        } else {
            Ok(())
        }
    }
}

/// The policy of a mount that encloses this one (the home directory's, for a
/// workspace inside it) and where this mount's root lies in it.
#[derive(Debug)]
pub struct Outer {
    /// This mount's root, relative to the enclosing mount's.
    pub prefix: Vec<u8>,
    pub policy: std::sync::Arc<RwLock<std::sync::Arc<crate::policy::Policy>>>,
}

impl VeilFs {
    /// Decides every path of this mount by the enclosing mount's policy too, the
    /// stricter of the two winning: a workspace inside the home directory (say
    /// `~/.config` or a dotfiles repository) keeps what the home policy hides
    /// hidden and what it makes read-only read-only. Set before mounting.
    pub fn set_outer(&mut self, outer: Outer) {
        self.outer = Some(outer);
    }

    /// `d`, or the enclosing mount's decision for `path` when that is stricter.
    pub(crate) fn with_outer(&self, path: &[u8], is_dir: bool, d: Decision) -> Decision {
        let Some(o) = &self.outer else {
            return d;
        };
        let mut full = o.prefix.clone();
        if !path.is_empty() {
            if !full.is_empty() {
                full.push(b'/');
            }
            full.extend_from_slice(path);
        }
        let od = o.policy.read().clone().decide(&full, is_dir);
        if od.action > d.action { od } else { d }
    }

    /// Keeps the directories on the way to the paths the policy hides or makes
    /// read-only by name (`.cargo` for `/.cargo/config.toml`, `.local` and
    /// `.local/share` for `/.local/share/systemd/`) from being replaced: nothing but
    /// a directory is made there, and they are not renamed (a symbolic link put in
    /// their place would send the name elsewhere, past the policy). Relative to the
    /// mount's root. Set before mounting.
    pub fn guard_ways(&mut self, ways: Vec<Vec<u8>>) {
        self.ways = ways;
    }

    /// Refuses to rename `from` to `to` when either is a guarded way (see
    /// [`VeilFs::guard_ways`]).
    pub(crate) fn guard_way_rename(&self, from: &[u8], to: &[u8]) -> io::Result<()> {
        for p in [from, to] {
            if self.ways.iter().any(|w| w.as_slice() == p) {
                return Err(refuse(p, &Decision::way()));
            }
        }
        Ok(())
    }
}

/// Whether `path` is `dir` or lies beneath it (both relative to the mount's root;
/// the root itself, empty, holds everything).
fn at_or_under(path: &[u8], dir: &[u8]) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/')
}

impl VeilFs {
    /// Keeps `dir` (relative to the mount's root; need not exist) and everything
    /// beneath it read-only whatever the policy says, and the directories that lead
    /// to it from being renamed or removed: veilfs's own configuration directory in
    /// the home mount of `veilfs run` (see [`crate::policy::Reason::VeilfsConfig`]).
    /// Set before mounting.
    pub fn guard_config_dir(&mut self, dir: &[u8]) {
        if !dir.is_empty() && !self.config_dirs.iter().any(|d| d.as_slice() == dir) {
            self.config_dirs.push(dir.to_vec());
        }
    }
}

/// The workspace-relative paths of the policy file `file` when it lies inside `src`:
/// as given (its directory made absolute, not resolved), with its directory resolved
/// (the name kept, a symbolic link itself), and with every link resolved (the file
/// the daemon reads). Duplicates removed.
pub(crate) fn policy_paths(src: &Path, file: &Path) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut add = |root: &Path, full: &Path| {
        if let Ok(rel) = full.strip_prefix(root) {
            let rel = rel.as_os_str().as_bytes().to_vec();
            if !rel.is_empty() && !out.contains(&rel) {
                out.push(rel);
            }
        }
    };
    let (Ok(abs_src), Ok(abs)) = (std::path::absolute(src), std::path::absolute(file)) else {
        return out;
    };
    add(&abs_src, &lexical(&abs));
    let Ok(real_src) = src.canonicalize() else {
        return out;
    };
    if let (Some(dir), Some(name)) = (abs.parent(), abs.file_name())
        && let Ok(dir) = dir.canonicalize()
    {
        add(&real_src, &dir.join(name));
    }
    if let Ok(real) = file.canonicalize() {
        add(&real_src, &real);
    }
    out
}

/// `p` with `.` and `..` removed lexically (`p` absolute).
fn lexical(p: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_given_and_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("conf")).unwrap();
        std::fs::write(src.join("conf/pol.toml"), "").unwrap();
        std::os::unix::fs::symlink("conf/pol.toml", src.join("link.toml")).unwrap();
        std::os::unix::fs::symlink("src/conf/pol.toml", tmp.path().join("out.toml")).unwrap();
        let s = |v: Vec<Vec<u8>>| -> Vec<String> {
            v.into_iter()
                .map(|b| String::from_utf8(b).unwrap())
                .collect()
        };
        assert_eq!(
            s(policy_paths(&src, &src.join("link.toml"))),
            ["link.toml", "conf/pol.toml"]
        );
        assert_eq!(
            s(policy_paths(&src, &tmp.path().join("out.toml"))),
            ["conf/pol.toml"]
        );
        assert_eq!(
            s(policy_paths(&src, &src.join("conf/../conf/pol.toml"))),
            ["conf/pol.toml"]
        );
        assert!(policy_paths(&src, &tmp.path().join("elsewhere.toml")).is_empty());
    }

    #[test]
    fn key_set_and_replaced() {
        let p = ProtectedFiles::default();
        assert!(!p.contains((1, 2)));
        p.set(1, 2);
        assert!(p.contains((1, 2)));
        p.set(1, 3);
        assert!(!p.contains((1, 2)) && p.contains((1, 3)));
        p.clear();
        assert_eq!(p.get(), None);
    }
}

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
    kind: std::sync::atomic::AtomicU8,
    /// Under `veilfs run` (either mode): directories made and emptied are noted, so
    /// that a repository that was there before is told from the command's own.
    tracking: std::sync::atomic::AtomicBool,
    /// The directories made through the mount, and the paths where a directory
    /// was renamed away or removed.
    made: parking_lot::RwLock<std::collections::HashSet<Vec<u8>>>,
    vacated: parking_lot::RwLock<std::collections::HashSet<Vec<u8>>>,
}

const GIT_NONE: u8 = 0;
const GIT_DIR: u8 = 1;
const GIT_FILE: u8 = 2;
const GIT_EVERYWHERE: u8 = 3;

/// The last name of a mount-relative path.
fn name_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The parent of a mount-relative path (empty for a top-level name).
fn parent_of(path: &[u8]) -> &[u8] {
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
        self.kind.load(std::sync::atomic::Ordering::Relaxed)
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
    fn made_here(&self, repo: &[u8]) -> bool {
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

    fn tracking(&self) -> bool {
        self.tracking.load(std::sync::atomic::Ordering::Relaxed)
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
        self.git_guard
            .kind
            .store(GIT_EVERYWHERE, std::sync::atomic::Ordering::Relaxed);
        self.git_guard
            .tracking
            .store(true, std::sync::atomic::Ordering::Relaxed);
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
        self.git_guard
            .kind
            .store(kind, std::sync::atomic::Ordering::Relaxed);
        self.git_guard
            .tracking
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod git_tests {
    use super::git_control_path as c;

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
        g.kind
            .store(super::GIT_EVERYWHERE, std::sync::atomic::Ordering::Relaxed);
        g.tracking.store(true, std::sync::atomic::Ordering::Relaxed);
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
