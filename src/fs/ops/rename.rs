//! `rename`: both names checked, and what the move would expose beneath a
//! directory (see [`crate::fs::exposure`]).

use std::ffi::OsStr;
use std::io;
use std::sync::atomic::Ordering;

use super::decided_as_dir;
use super::kind_of;
use crate::fs::VeilFs;
use crate::fs::gate::Event;
use crate::fs::gate::Intent;
use crate::fs::gate::Target;
use crate::fs::grant::Access;
use crate::fs::inode::Key;
use crate::fs::inode::key_of;
use crate::fs::permissive::Need::Change;
use crate::fs::request::Req;
use crate::policy::Decision;
use crate::sys;

impl VeilFs {
    /// Renames; `Ok(true)` when a directory moved (the kernel's cached subtree under
    /// it should then be dropped: its paths, and so its decisions, changed).
    pub fn rename(
        &self,
        cx: &Req,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> io::Result<bool> {
        // Checked and made as one step (see `VeilFs::names`).
        let _names = self.names.write();
        let s = self.snapshot(cx);
        let (from_dir, to_dir) = (self.node(parent)?, self.node(newparent)?);
        let (fp, tp) = (
            self.dir_visible_in(&s, &from_dir)?,
            self.dir_visible_in(&s, &to_dir)?,
        );
        let (from, to) = (sys::name(name)?, sys::name(newname)?);
        let from_st = sys::statat(from_dir.dir_fd()?, &from)?;
        let from_is_dir = from_st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        let from_as_dir = decided_as_dir(from_st.st_mode);
        let exchange = flags & libc::RENAME_EXCHANGE != 0;

        // The source as it is, and as it would be at the destination.
        let (from_path, from_now) = self.child(&s, &from_dir, &fp, &from, kind_of(from_as_dir))?;
        let (to_path, from_then) = self.child(&s, &to_dir, &tp, &to, kind_of(from_as_dir))?;
        let may = |path: &[u8], d: &Decision, is_dir: bool| -> io::Result<()> {
            let approved = self.gate(&s, path, d, Access::Write, is_dir)?;
            let d = approved.as_ref().unwrap_or(d);
            self.admit(&s, path, d, Change, true)
        };
        may(&from_path, &from_now, from_as_dir)?;
        may(&to_path, &from_then, from_as_dir)?;
        // What the guards keep neither moves nor is replaced (see `gate`).
        let to_st = sys::statat(to_dir.dir_fd()?, &to).ok();
        let to_key = to_st.as_ref().map(key_of);
        let source = Target::at(&from_path, from_st.st_mode)
            .holding(Some(key_of(&from_st)))
            .entry(from_dir.dir_fd()?, &from);
        let replaces = to_st.is_some();
        self.guarded(
            &source,
            Intent::MoveFrom {
                to: &to_path,
                replaces,
            },
        )?;
        let arriving = Target::at(&to_path, from_st.st_mode).holding(to_key);
        self.guarded(&arriving, Intent::MoveTo)?;
        // Whatever sits at the destination is replaced (or, for an exchange, moved
        // to the source's place): its own decision must allow that too.
        if let Some(st) = &to_st {
            let to_is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let to_as_dir = decided_as_dir(st.st_mode);
            let (_, to_now) = self.child(&s, &to_dir, &tp, &to, kind_of(to_as_dir))?;
            may(&to_path, &to_now, to_as_dir)?;
            if exchange {
                // What sat at the destination moves to the source's place.
                let back = Target::at(&to_path, st.st_mode)
                    .holding(to_key)
                    .entry(to_dir.dir_fd()?, &to);
                let back_to = Intent::MoveFrom {
                    to: &from_path,
                    replaces: true,
                };
                self.guarded(&back, back_to)?;
                self.guarded(&Target::at(&from_path, st.st_mode), Intent::MoveTo)?;
                let (_, to_then) = self.child(&s, &from_dir, &fp, &from, kind_of(to_as_dir))?;
                may(&from_path, &to_then, to_as_dir)?;
                if to_is_dir {
                    let fd =
                        sys::openat(to_dir.dir_fd()?, &to, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
                    self.no_exposure(&s, fd, &to_path, &to_now, &from_path, &to_then)?;
                }
            }
        }
        let to_is_dir = to_st
            .as_ref()
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if from_is_dir {
            let fd = sys::openat(
                from_dir.dir_fd()?,
                &from,
                libc::O_RDONLY | libc::O_DIRECTORY,
                0,
            )?;
            self.no_exposure(&s, fd, &from_path, &from_now, &to_path, &from_then)?;
        }

        // A moved directory takes its kernel-cached subtree along under a new path
        // whose decisions may differ: let the watcher's echo drop those dentries
        // (their attributes would otherwise stay visible until the TTL).
        let moves_dir = from_is_dir || to_is_dir;
        let own = (!moves_dir).then(|| {
            (
                self.own(parent, from.to_bytes()),
                self.own(newparent, to.to_bytes()),
            )
        });
        sys::renameat2(from_dir.dir_fd()?, &from, to_dir.dir_fd()?, &to, flags)?;
        // What a person approved for the session was what sat at those names.
        if let Some(approvals) = &self.approvals {
            approvals
                .broker
                .forget_grants_at(approvals.root, &[from_path.as_slice(), to_path.as_slice()]);
        }
        if from_is_dir {
            self.gate.note(Event::Vacated(&from_path));
        }
        if to_is_dir {
            self.gate.note(Event::Vacated(&to_path));
        }
        if let Some((from_own, to_own)) = own {
            from_own.done();
            to_own.done();
        }

        // Keep the moved nodes' places in step (each is decided again under its new
        // name); a moved directory takes descendants along under another path, so
        // then every cached decision is invalidated. A file's rename (an editor's
        // save: write a temporary, rename it over the file) changes no other path.
        self.moved(
            parent,
            from.to_bytes(),
            newparent,
            to.to_bytes(),
            key_of(&from_st),
        );
        match to_st {
            Some(st) if exchange => {
                let key = key_of(&st);
                self.moved(newparent, to.to_bytes(), parent, from.to_bytes(), key);
            }
            Some(st) => self.unlinked(newparent, to.to_bytes(), key_of(&st)),
            None => {}
        }
        if moves_dir {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        Ok(moves_dir)
    }

    /// The entry `old_parent/old` (backing object `key`) is now `new_parent/new`: its
    /// cached decision (taken for the old name) is stale.
    pub(super) fn moved(&self, old_parent: u64, old: &[u8], new_parent: u64, new: &[u8], key: Key) {
        if let Some(n) = self.inodes.find(key) {
            let mut p = n.place.lock();
            let (from, to) = ((old_parent, old.to_vec()), (new_parent, new.to_vec()));
            p.links.retain(|l| *l != from && *l != to);
            p.links.insert(0, to);
            p.parent = new_parent;
            p.name = new.to_vec();
            p.epoch = u64::MAX;
        }
    }
}
