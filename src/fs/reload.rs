//! Changing the policy of a live mount.
//!
//! A reload parses the policy file again; if it does not load, the old policy stays
//! in force and the error (with `file:line:col`) is returned. Otherwise the new
//! policy replaces the old one in one store (each decision is made by exactly one of
//! them, never a mix), every cached decision is marked stale (the epoch), and the
//! kernel is told to forget every entry, attribute and listing it cached, so a newly
//! denied path answers `EACCES` and leaves listings at once, and a newly allowed one
//! appears. Descriptors already open keep working, as with Unix permissions.

use parking_lot::{Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::inode::{Inodes, ROOT};
use crate::config;
use crate::policy::Policy;
use crate::sys;

#[derive(Debug)]
pub struct Reloader {
    policy: Arc<RwLock<Arc<Policy>>>,
    epoch: Arc<AtomicU64>,
    inodes: Arc<Inodes>,
    file: Option<PathBuf>,
    notifier: Mutex<Option<fuser::Notifier>>,
    /// One reload at a time.
    busy: Mutex<()>,
}

impl Reloader {
    pub(crate) fn new(
        policy: Arc<RwLock<Arc<Policy>>>,
        epoch: Arc<AtomicU64>,
        inodes: Arc<Inodes>,
        file: Option<PathBuf>,
    ) -> Reloader {
        Reloader {
            policy,
            epoch,
            inodes,
            file,
            notifier: Mutex::new(None),
            busy: Mutex::new(()),
        }
    }

    /// Gives the reloader the session's notifier (once mounted).
    pub fn set_notifier(&self, n: fuser::Notifier) {
        *self.notifier.lock() = Some(n);
    }

    /// The policy file reloads read (`None` for the built-in policy).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Reloads the policy file. `Ok` says what is now in force; `Err` says why the
    /// old policy stays.
    pub fn reload(&self) -> Result<String, String> {
        let _one = self.busy.lock();
        let Some(file) = &self.file else {
            return Ok("built-in default policy: nothing to reload".into());
        };
        // A file truncated on its way to being rewritten (`echo ... > policy.toml`)
        // would parse as "allow everything": never take an empty one on reload.
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if text.trim().is_empty() {
            return Err(format!(
                "{}: the policy file is empty (being rewritten?); keeping the old policy",
                file.display()
            ));
        }
        let loaded = config::load_file(file).map_err(|e| e.to_string())?;
        let p = &loaded.policy;
        let summary = format!(
            "{}: reloaded: {} rules, {} patterns, default \"{}\"",
            file.display(),
            p.rule_count(),
            p.patterns().len(),
            p.default_action()
        );
        *self.policy.write() = Arc::new(loaded.policy);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.invalidate_kernel_caches();
        Ok(summary)
    }

    /// Tells the kernel to drop every entry and attribute it cached for this mount.
    fn invalidate_kernel_caches(&self) {
        let guard = self.notifier.lock();
        let Some(n) = guard.as_ref() else { return };
        for known in self.inodes.snapshot() {
            let ino = known.ino;
            for (parent, name) in known.links {
                let _ = n.inval_entry(
                    fuser::INodeNo(parent),
                    std::os::unix::ffi::OsStrExt::from_bytes(&name),
                );
            }
            let _ = n.inval_inode(fuser::INodeNo(ino), 0, 0);
        }
        let _ = n.inval_inode(fuser::INodeNo(ROOT), 0, 0);
    }

    /// Reloads whenever the policy file changes (inotify on its directory, or a
    /// one-second poll of its modification time when inotify is unavailable), and
    /// reports each outcome with `report`. Returns when `alive` says the mount is
    /// gone.
    pub fn watch_file(
        self: Arc<Self>,
        alive: impl Fn() -> bool,
        report: impl Fn(Result<String, String>),
    ) {
        let Some(file) = self.file.clone() else {
            return;
        };
        let dir = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let name = file
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        let stamp = |f: &Path| std::fs::metadata(f).ok().and_then(|m| m.modified().ok());
        let mut last = stamp(&file);
        let ino = sys::inotify_init().ok();
        let dir_fd = sys::open_dir_path(&dir).ok();
        let watched = match (&ino, &dir_fd) {
            (Some(i), Some(d)) => {
                use std::os::fd::AsFd;
                sys::inotify_add_watch(
                    i.as_fd(),
                    d.as_fd(),
                    libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_CREATE | libc::IN_MODIFY,
                )
                .is_ok()
            }
            _ => false,
        };
        let mut buf = vec![0u8; 16 * 1024];
        while alive() {
            let changed = if watched {
                use std::os::fd::AsFd;
                let i = ino.as_ref().unwrap();
                match sys::poll_readable(i.as_fd(), 500) {
                    Ok(true) => {
                        let n = sys::read(i.as_fd(), &mut buf).unwrap_or(0);
                        let name = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str());
                        super::watch::events(&buf[..n]).any(|(_, _, n)| n == name)
                    }
                    _ => false,
                }
            } else {
                std::thread::sleep(Duration::from_secs(1));
                let now = stamp(&file);
                let c = now != last;
                last = now;
                c
            };
            if changed {
                // Let the writer finish: wait for 100 ms without further events
                // (at most a second), so a save in several steps loads once, whole.
                if let Some(i) = &ino {
                    use std::os::fd::AsFd;
                    let start = std::time::Instant::now();
                    while sys::poll_readable(i.as_fd(), 100).unwrap_or(false)
                        && start.elapsed() < Duration::from_secs(1)
                    {
                        let _ = sys::read(i.as_fd(), &mut buf);
                    }
                }
                report(self.reload());
            }
        }
    }
}
