//! The objects the mount keeps by identity, and the enclosing mount's policy: the
//! state the gatekeeper's guards read (see [`super::gate`]), shared with whoever
//! reloads the policy.
//!
//! The policy file the mount reads can never be changed through the mount, however
//! it is named: by identity ([`ProtectedFiles`] holds the `(st_dev, st_ino)` of the
//! policy file the daemon read, set at start from the file opened and by the
//! reloader on every reload), by its workspace-relative paths (`policy_paths`: as
//! given and with every symbolic link resolved, so `--policy link.toml` with
//! `link.toml -> SRC/pol.toml` protects both), and by keeping the directories on
//! those paths from being renamed or removed (see [`super::gate::files`]).

use parking_lot::RwLock;
use std::io;
use std::path::Path;

use super::inode::Key;

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

    /// Keeps the run's own log `key` (its audit log, its notices file).
    pub fn add_log(&self, key: Key) {
        self.logs.write().push(key);
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

/// The policy of a mount that encloses this one (the home directory's, for a
/// workspace inside it) and where this mount's root lies in it.
#[derive(Debug)]
pub struct Outer {
    /// This mount's root, relative to the enclosing mount's.
    pub prefix: Vec<u8>,
    pub policy: std::sync::Arc<RwLock<std::sync::Arc<crate::policy::Policy>>>,
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
    for link in links_on_the_way(&abs) {
        add(&real_src, &link);
    }
    out
}

/// Every symbolic link met resolving the absolute path `file` as the kernel does
/// (a link in the middle of a chain, a directory link inside a link's target), each
/// at its own place (the directories above it resolved): replacing any of them, or
/// moving a directory above one, would make the same name lead to another file.
fn links_on_the_way(file: &Path) -> Vec<std::path::PathBuf> {
    use std::path::Component;
    let mut out = Vec::new();
    let mut todo: std::collections::VecDeque<std::ffi::OsString> = file
        .components()
        .filter(|c| !matches!(c, Component::RootDir))
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut at = std::path::PathBuf::from("/");
    // As the kernel does, at most 40 links.
    let mut hops = 0;
    while let Some(c) = todo.pop_front() {
        if c == "." {
            continue;
        }
        if c == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&c);
        let Ok(target) = std::fs::read_link(&next) else {
            at = next;
            continue;
        };
        hops += 1;
        if hops > 40 {
            break;
        }
        out.push(next);
        if target.is_absolute() {
            at = std::path::PathBuf::from("/");
        }
        for part in target.components().rev() {
            if !matches!(part, Component::RootDir) {
                todo.push_front(part.as_os_str().to_owned());
            }
        }
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
    fn every_link_of_a_chain_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().canonicalize().unwrap().join("home");
        for d in ["pol", "links", "hp"] {
            std::fs::create_dir_all(src.join(d)).unwrap();
        }
        std::fs::write(src.join("pol/ws.toml"), "").unwrap();
        std::os::unix::fs::symlink("links/p.toml", src.join("l1.toml")).unwrap();
        std::os::unix::fs::symlink("../pol/ws.toml", src.join("links/p.toml")).unwrap();
        std::os::unix::fs::symlink("pol", src.join("pdir")).unwrap();
        std::os::unix::fs::symlink("../pdir/ws.toml", src.join("links/q.toml")).unwrap();
        let s = |v: Vec<Vec<u8>>| -> Vec<String> {
            let mut v: Vec<String> = v
                .into_iter()
                .map(|b| String::from_utf8(b).unwrap())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            s(policy_paths(&src, &src.join("l1.toml"))),
            ["l1.toml", "links/p.toml", "pol/ws.toml"]
        );
        assert_eq!(
            s(policy_paths(&src, &src.join("links/q.toml"))),
            ["links/q.toml", "pdir", "pol/ws.toml"]
        );
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
