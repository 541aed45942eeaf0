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
//!
//! Under `veilfs run` also: veilfs's configuration directory, the directories on the
//! way to paths the policy names, and the enclosing home policy of a workspace
//! inside the home directory ([`Outer`]). What git obeys is in
//! [`super::git_guard`].

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
    /// The files the policy imports rules from, as last read (see
    /// [`crate::policy::Policy::source_ids`]).
    imported: RwLock<Vec<Key>>,
    /// The run's own logs (its audit log, its notices file), by identity (see
    /// [`super::config::FsConfig::run_logs`]).
    logs: RwLock<Vec<Key>>,
    /// The objects opened for writing or created through the mount lately, and when
    /// (see [`ProtectedFiles::written`]).
    written: parking_lot::Mutex<Written>,
    /// The objects with a handle open for writing now, and how many (see
    /// [`ProtectedFiles::writing`]).
    writers: parking_lot::Mutex<std::collections::HashMap<Key, u32>>,
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
    /// last [`WRITTEN_WINDOW`], or has a handle open for writing now (however long
    /// ago it was opened: a passthrough handle writes without asking the daemon).
    pub fn written_lately(&self, key: Key) -> bool {
        self.writers.lock().contains_key(&key)
            || self
                .written
                .lock()
                .at
                .get(&key)
                .is_some_and(|t| t.elapsed() < WRITTEN_WINDOW)
    }

    /// A handle open for writing on `key` opened (`true`) or was released.
    pub fn writing(&self, key: Key, open: bool) {
        let mut w = self.writers.lock();
        if open {
            *w.entry(key).or_default() += 1;
        } else if let Some(n) = w.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                w.remove(&key);
            }
        }
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

    /// Protects the imported files `keys` (in place of those protected before).
    pub fn set_imported(&self, keys: &[Key]) {
        let mut k = self.imported.write();
        k.clear();
        k.extend_from_slice(keys);
    }

    /// Whether `key` is the protected policy file.
    pub fn contains(&self, key: Key) -> bool {
        self.get() == Some(key)
    }

    /// Whether `key` is one of the run's own logs.
    pub fn is_log(&self, key: Key) -> bool {
        self.logs.read().contains(&key)
    }

    /// Whether `key` is a file the policy imports rules from.
    pub fn is_imported(&self, key: Key) -> bool {
        let k = self.imported.read();
        !k.is_empty() && k.contains(&key)
    }

    /// Whether changes to `key` are refused (it is the policy file, a file the
    /// policy imports, or one of the run's own logs).
    pub fn guards(&self, key: Key) -> bool {
        self.contains(key) || self.is_imported(key) || self.is_log(key)
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
        } else if self.log_paths.iter().any(|p| p.as_slice() == path) {
            d.guard_audit_log()
        } else if self
            .git_guard
            .controls(path, &mut |dir| self.is_repository(dir))
        {
            d.guard_git_control()
        } else if self.config_dirs.iter().any(|c| at_or_under(path, c)) {
            d.guard_veilfs_config()
        } else if self.in_found_repository(path) || self.found_git_link(path) {
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
        } else if self.protected.is_imported(key) {
            Err(refuse(path, &Decision::imported_file()))
        } else if self.protected.is_log(key) {
            Err(refuse(path, &Decision::audit_log()))
        } else {
            Ok(())
        }
    }

    /// Whether git obeys `path` in a repository that was there before the command
    /// (a directory holding `HEAD` on disk, bare or `.git`): see
    /// [`super::git_guard::GitGuard::repository_of`].
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
        self.stat_in_workspace(&head).is_ok_and(|st| st.is_some())
    }

    /// What the workspace-relative `path` is on disk, looked up from the real root
    /// (`Ok(None)`: nothing there); `Err` when the root cannot be reached. For the
    /// git guards, which only ever refuse: a lookup through links the command made
    /// can do no more than refuse a change.
    fn stat_in_workspace(&self, path: &[u8]) -> Result<Option<libc::stat>, ()> {
        let root = self.inodes.get(super::inode::ROOT).ok_or(())?;
        let fd = root.dir_fd().map_err(|_| ())?;
        Ok(std::ffi::CString::new(path.to_vec())
            .ok()
            .and_then(|n| crate::sys::statat(fd, &n).ok()))
    }

    /// Whether the workspace-relative directory `dir` holds a `HEAD` or a `config`
    /// on disk (looked up without following any link): where a submodule's
    /// repository begins under a `.git/modules/` (see
    /// [`super::git_guard::in_git_dir`]). Either one is enough, so that a
    /// repository missing its `HEAD` keeps its `config` read-only.
    fn is_repository(&self, dir: &[u8]) -> bool {
        let Some(root) = self.inodes.get(super::inode::ROOT) else {
            return false;
        };
        let Ok(fd) = root.dir_fd() else {
            return false;
        };
        [&b"/HEAD"[..], b"/config"].iter().any(|name| {
            std::ffi::CString::new([dir, name].concat())
                .is_ok_and(|p| crate::sys::stat_beneath(fd, &p).is_ok())
        })
    }

    /// Refuses to make `path` (an entry of type `mode`, `st_mode`'s type bits) when
    /// it is a `HEAD` or a `.git` where the command may not make a repository (see
    /// [`super::git_guard::GitGuard::may_make_head`] and
    /// [`super::git_guard::GitGuard::may_make_git`]), or a name in a git directory
    /// where the command may not make one ([`VeilFs::guard_git_arrival`]).
    pub(crate) fn guard_head(&self, path: &[u8], mode: u32) -> io::Result<()> {
        if self.git_guard.may_make_head(path)
            && self.git_guard.may_make_git(path)
            && !self.git_inside_a_repository(path)
        {
            self.guard_git_arrival(path, mode)
        } else {
            Err(refuse(path, &Decision::git_control()))
        }
    }

    /// What the workspace-relative `path` is in the git directories along it that
    /// are not the command's own (see [`super::git_guard::GitGuard::class`]).
    fn git_class(&self, path: &[u8]) -> Option<super::git_guard::InGitDir> {
        self.git_guard
            .class(path, &mut |dir| self.is_repository(dir))
    }

    /// Refuses to bring an entry of type `mode` to `path` (made, renamed, linked or
    /// exchanged there) in a git directory that is not the command's own, unless
    /// everyday git writes there and it is a regular file or a directory (see
    /// [`super::git_guard`]).
    pub(crate) fn guard_git_arrival(&self, path: &[u8], mode: u32) -> io::Result<()> {
        let plain = matches!(mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFDIR);
        match self.git_class(path) {
            None => Ok(()),
            Some(super::git_guard::InGitDir::Written) if plain => Ok(()),
            Some(_) => Err(refuse(path, &Decision::git_control())),
        }
    }

    /// [`VeilFs::guard_git_arrival`] for an entry beneath a directory being moved,
    /// from `old` to `new`: one that stays what it was in a git directory (a whole
    /// repository moved along with a directory above it) is not arriving.
    pub(crate) fn guard_git_carried(&self, old: &[u8], new: &[u8], mode: u32) -> io::Result<()> {
        let then = self.git_class(new);
        if then.is_none() || then == self.git_class(old) {
            return Ok(());
        }
        self.guard_git_arrival(new, mode)
    }

    /// Whether `path` is a `.git` that is no directory (a submodule's or a
    /// separate git directory's `.git` file, or a link), under `veilfs run`, not
    /// the command's own: it names the repository git uses there, and the person's
    /// `git status` enters a submodule. Read-only, like the root's.
    fn found_git_link(&self, path: &[u8]) -> bool {
        if !self.git_guard.tracking()
            || super::git_guard::name_of(path) != b".git"
            || self.git_guard.made_here(path)
        {
            return false;
        }
        match self.stat_in_workspace(path) {
            Ok(st) => st.is_some_and(|st| st.st_mode & libc::S_IFMT != libc::S_IFDIR),
            Err(()) => true,
        }
    }

    /// Whether `path` is a `.git` to be made inside a repository that is not the
    /// command's own (a directory above holds a `.git`): the person's git enters a
    /// repository registered in its index (a gitlink: `git update-index --add
    /// --cacheinfo 160000,...`) at every `git status`, and obeys its config there.
    /// The same for a `HEAD` outside any `.git` (a bare-looking repository, which
    /// git obeys when run in or below it).
    fn git_inside_a_repository(&self, path: &[u8]) -> bool {
        let name = super::git_guard::name_of(path);
        // Within a git directory (`.git/HEAD`, a bare `x.git`'s): git's own.
        let in_git_dir = path
            .split(|&b| b == b'/')
            .rev()
            .skip(1)
            .any(|part| part.ends_with(b".git"));
        if !self.git_guard.tracking() || !(name == b".git" || name == b"HEAD" && !in_git_dir) {
            return false;
        }
        let mut dir = super::git_guard::parent_of(path);
        loop {
            let mut repo = dir.to_vec();
            if !repo.is_empty() {
                repo.push(b'/');
            }
            repo.extend_from_slice(b".git");
            let holds = match self.stat_in_workspace(&repo) {
                Ok(st) => st.is_some(),
                Err(()) => return true,
            };
            if holds && !self.git_guard.made_here(&repo) {
                return true;
            }
            if dir.is_empty() {
                return false;
            }
            dir = super::git_guard::parent_of(dir);
        }
    }

    /// Refuses to move a directory that holds a repository (a `.git`, or a `HEAD`
    /// as a bare one has) to `to_path` unless a `.git` could be made there: into a
    /// path that was there (replaced, or emptied first) it would be a repository
    /// the person's git finds in a directory it knew.
    pub(crate) fn guard_repository_move(
        &self,
        dir: std::os::fd::BorrowedFd,
        name: &std::ffi::CStr,
        to_path: &[u8],
        replaces: bool,
    ) -> io::Result<()> {
        if !self.git_guard.tracking() {
            return Ok(());
        }
        let holds_repository = [&b"/.git"[..], b"/HEAD"].iter().any(|inner| {
            let mut n = name.to_bytes().to_vec();
            n.extend_from_slice(inner);
            std::ffi::CString::new(n).is_ok_and(|n| crate::sys::statat(dir, &n).is_ok())
        });
        if !holds_repository {
            return Ok(());
        }
        let mut git = to_path.to_vec();
        git.extend_from_slice(b"/.git");
        if replaces || self.git_guard.emptied(to_path) || self.git_inside_a_repository(&git) {
            return Err(refuse(to_path, &Decision::git_control()));
        }
        Ok(())
    }

    /// Refuses to make anything but a directory at `path` when it leads to a guarded
    /// configuration directory (see [`crate::fs::config::FsConfig::config_dirs`]): a symbolic link
    /// made at `~/.config` would send the next run's search for its home policy to a
    /// directory the command chose. With [`VeilFs::guard_head`] for the new entry's
    /// type `mode`.
    pub(crate) fn guard_config_way(&self, path: &[u8], mode: u32) -> io::Result<()> {
        self.guard_head(path, mode)?;
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
    /// command emptied (one moved away and a copy put back, see [`super::git_guard::GitGuard`]).
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
        } else if !path.is_empty() && self.log_paths.iter().any(holds) {
            Err(refuse(path, &Decision::audit_log()))
        } else if self.git_guard.holds(path) {
            Err(refuse(path, &Decision::git_control()))
        } else if self.config_dirs.iter().any(|c| at_or_under(c, path)) {
            Err(refuse(path, &Decision::veilfs_config()))
        } else if self.holds_imported(path) {
            Err(refuse(path, &Decision::imported_file()))
        } else {
            Ok(())
        }
    }
}

impl VeilFs {
    /// Whether the directory `path` holds an ignore file the policy in force
    /// imports (see [`crate::policy::Policy::holds_imported`]).
    fn holds_imported(&self, path: &[u8]) -> bool {
        let p = self.policy.read();
        !p.import_names().is_empty() && p.holds_imported(path)
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
        d.stricter(od)
    }

    /// Keeps one of the run's own logs (its audit log, its notices file), at `path`
    /// (relative to the mount's root) and by identity `key`, read-only, and the
    /// directories that hold it from being renamed or removed (see
    /// [`crate::policy::Reason::AuditLog`]).
    pub(super) fn guard_run_log(&mut self, path: Vec<u8>, key: Key) {
        self.protected.logs.write().push(key);
        self.log_paths.push(path);
    }

    /// Refuses to rename `from` to `to` when either is a guarded way (see
    /// [`super::config::FsConfig::ways`]).
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
    ///
    pub(super) fn guard_config_dir(&mut self, dir: &[u8]) {
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

    #[test]
    fn a_file_open_for_writing_counts_as_written_until_its_last_handle_closes() {
        let p = ProtectedFiles::default();
        assert!(!p.written_lately((1, 2)));
        p.writing((1, 2), true);
        p.writing((1, 2), true);
        assert!(p.written_lately((1, 2)) && !p.written_lately((1, 3)));
        p.writing((1, 2), false);
        assert!(p.written_lately((1, 2)));
        p.writing((1, 2), false);
        assert!(!p.written_lately((1, 2)));
        // A release of a handle never counted changes nothing.
        p.writing((1, 2), false);
        assert!(!p.written_lately((1, 2)));
    }
}
