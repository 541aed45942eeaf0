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
}

impl ProtectedFiles {
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

    /// Refuses to rename or remove `path` when the policy file lies beneath it.
    pub(crate) fn guard_holder(&self, path: &[u8]) -> io::Result<()> {
        let holds =
            |p: &Vec<u8>| p.len() > path.len() && p.starts_with(path) && p[path.len()] == b'/';
        if !path.is_empty() && self.policy_paths.iter().any(holds) {
            Err(refuse(path, &Decision::holds_policy_file()))
        } else {
            Ok(())
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
