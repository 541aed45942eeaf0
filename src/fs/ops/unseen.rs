//! Answers that do not depend on what is hidden.
//!
//! A directory-only pattern (`secrets/`, the default's `.ssh/`) decides a name by
//! the entry's type, which only the disk knows. Asking it must not turn the answer
//! into a probe of what exists: a name that matches a directory-only **deny**
//! pattern answers `EACCES` unless it exists as a non-directory. A directory of that
//! name and no entry at all look the same (`EACCES`, on lookup, stat, open, create,
//! mknod, symlink, link and unlink alike), a file of that name is served as the
//! rules say, and `mkdir` of it is refused. An entry whose type cannot be read
//! (`fstatat` fails for any reason) counts as not there.
//!
//! Only a name some directory-only pattern matches costs the `fstatat`; for every
//! other name the policy answers before the disk is touched, so a denied name that
//! exists and one that does not cost the same.
//!
//! Directory link counts would count hidden subdirectories, so directories are shown
//! with a link count of 1 (as btrfs and many network filesystems do: "not counted";
//! `find` and `fts` then read every directory instead of skipping ones that the
//! count says hold no subdirectory).

use std::ffi::CStr;
use std::io;

use super::{Node, Place, Snapshot, VeilFs};
use crate::policy::{Decision, Policy};
use crate::sys;

/// The link count shown for an object of type `mode` whose backing count is `nlink`.
pub fn shown_nlink(mode: u32, nlink: libc::nlink_t) -> libc::nlink_t {
    if mode & libc::S_IFMT == libc::S_IFDIR {
        1
    } else {
        nlink
    }
}

impl VeilFs {
    /// The decision for `path` (the name `name` in `dir`, whose decision is
    /// `parent`), reading the entry's type from the disk only if a directory-only
    /// pattern makes the decision depend on it; a name that is not there is decided
    /// as a directory where that denies it (see the module documentation). Also
    /// says whether the decision was taken for a non-directory the disk was asked
    /// about (see [`VeilFs::same_kind`]).
    pub(super) fn decide_on_disk(
        &self,
        policy: &Policy,
        dir: &Node,
        parent: &Decision,
        path: &[u8],
        name: &CStr,
    ) -> (Decision, bool) {
        // `Some(None)`: the type was asked for and there is no entry to read it from.
        let mut seen: Option<Option<bool>> = None;
        let d = self.decide(policy, parent, path, || {
            let t = dir
                .dir_fd()
                .and_then(|fd| sys::statat(fd, name))
                .ok()
                .map(|st| super::decided_as_dir(st.st_mode));
            seen = Some(t);
            t.unwrap_or(false)
        });
        if seen == Some(None) && d.action.visible() {
            let as_dir = self.decide(policy, parent, path, || true);
            if !as_dir.action.visible() {
                return (as_dir, false);
            }
        }
        (d, matches!(seen, Some(Some(false) | None)))
    }

    /// After a lookup decided `path` as a non-directory the disk was asked about and
    /// then registered the entry as `node`: if the entry turned into a directory in
    /// between (changed outside the mount), it is decided again as a directory, and
    /// a refusal undoes the lookup.
    pub(super) fn same_kind(
        &self,
        s: &Snapshot,
        node: &Node,
        dp: &Place,
        path: &[u8],
    ) -> io::Result<()> {
        if !node.is_dir() {
            return Ok(());
        }
        let d = self.decide(&s.policy, &dp.decision, path, || true);
        let r = self.admit(s, path, &d, super::See, true);
        if r.is_err() {
            node.place.lock().epoch = u64::MAX;
            self.forget(node.ino, 1);
        }
        r
    }
}
