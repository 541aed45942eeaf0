//! Changing the policy of a live mount.
//!
//! A reload parses the policy file again; if it does not load, the old policy stays
//! in force and the error (with `file:line:col`) is returned. Otherwise the new
//! policy replaces the old one in one store, with the epoch bumped under the same
//! lock (each request decides under exactly one of them, never a mix: see
//! [`super::snapshot`]), so every cached decision is stale, and the kernel is told
//! to forget every entry, attribute and listing it cached, so a newly denied path
//! answers `EACCES` and leaves listings at once, and a newly allowed one appears.
//! Descriptors already open keep working, as with Unix permissions.

use inotify::WatchDescriptor;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Inodes;
use crate::policy::{LoadError, Policy};
use crate::sys;
use crate::workspace::imports::ImportError;
use crate::workspace::load;

/// The policy file's device, inode and text.
type Stamp = (u64, u64, String);

/// What a reload did: `Ok` says what is now in force, `Err` why the old policy stays.
pub type Outcome = Result<String, ReloadError>;

/// Why a reload keeps the old policy in force.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The policy file could not be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// The policy file was opened for writing through the mount lately: the
    /// confined command may have written it.
    #[error(
        "{}: this file was opened for writing through the mount, so the confined \
         command may have written it; keeping the old policy. Write the policy \
         file anew outside the mount (e.g. `cp` it to a new name outside the \
         workspace, edit, and `mv` it back), then reload",
        path.display()
    )]
    WrittenThroughMount { path: PathBuf },
    /// The policy file is empty, perhaps on its way to being rewritten.
    #[error(
        "{}: the policy file is empty (being rewritten?); keeping the old policy",
        path.display()
    )]
    Empty { path: PathBuf },
    /// The policy does not parse or compile (each error with `file:line:col`).
    #[error(transparent)]
    Invalid(#[from] LoadError),
    /// The node of the workspace root is no longer in the node table.
    #[error("the workspace root is gone")]
    RootGone,
    /// The workspace root's descriptor could not be had.
    #[error("the workspace root: {0}")]
    Root(#[source] io::Error),
    /// An ignore file the policy imports could not be honoured.
    #[error(transparent)]
    Import(#[from] ImportError),
}

#[derive(Debug)]
pub struct Reloader {
    policy: Arc<RwLock<Arc<Policy>>>,
    epoch: Arc<AtomicU64>,
    inodes: Arc<Inodes>,
    file: Option<load::PolicyFile>,
    /// The policy file by identity (as last read), kept read-only through the mount.
    protected: Arc<super::protect::ProtectedFiles>,
    notifier: Mutex<Option<fuser::Notifier>>,
    /// One reload at a time.
    busy: Mutex<()>,
    /// Rules put before the file's on every reload.
    base: Option<crate::policy::RawPolicy>,
    /// Rules put after the file's on every reload.
    after: Vec<crate::policy::RawRule>,
    /// Its session grants (see [`super::ask`]) last until the next reload.
    broker: Option<Arc<super::ask::Broker>>,
    /// A reload is already on its way (see [`Reloader::reload_soon`]).
    soon: std::sync::atomic::AtomicBool,
    /// Calls of [`Reloader::reload_soon`], to wait for a burst to end.
    calls: AtomicU64,
}

impl Reloader {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        policy: Arc<RwLock<Arc<Policy>>>,
        epoch: Arc<AtomicU64>,
        inodes: Arc<Inodes>,
        file: Option<load::PolicyFile>,
        protected: Arc<super::protect::ProtectedFiles>,
        base: Option<crate::policy::RawPolicy>,
        after: Vec<crate::policy::RawRule>,
        broker: Option<Arc<super::ask::Broker>>,
    ) -> Reloader {
        Reloader {
            policy,
            epoch,
            inodes,
            file,
            protected,
            notifier: Mutex::new(None),
            busy: Mutex::new(()),
            base,
            after,
            broker,
            soon: std::sync::atomic::AtomicBool::new(false),
            calls: AtomicU64::new(0),
        }
    }

    /// Gives the reloader the session's notifier (once mounted).
    pub fn set_notifier(&self, n: fuser::Notifier) {
        *self.notifier.lock() = Some(n);
    }

    /// Whether `name` is one the policy in force imports rules from.
    pub fn is_source(&self, name: &[u8]) -> bool {
        let p = self.policy.read();
        !p.import_names().is_empty() && p.is_source_name(name)
    }

    /// Reloads soon, on a thread of its own, once for a burst of calls (an editor's
    /// save is several events: the reload waits until 100 ms pass without another
    /// call, at most a second, so that it reads the file whole), and reports the
    /// outcome with `report`.
    pub fn reload_soon(self: &Arc<Self>, report: fn(Outcome)) {
        self.calls.fetch_add(1, Ordering::AcqRel);
        if self.soon.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("veilfs-reload".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                loop {
                    let seen = me.calls.load(Ordering::Acquire);
                    std::thread::sleep(Duration::from_millis(100));
                    if me.calls.load(Ordering::Acquire) == seen
                        || start.elapsed() > Duration::from_secs(1)
                    {
                        break;
                    }
                }
                me.soon.store(false, Ordering::Release);
                report(me.reload());
            });
        if let Err(e) = spawned {
            self.soon.store(false, Ordering::Release);
            log::warn!("cannot start a thread to reload the policy: {e}");
        }
    }

    /// Whether the policy in force has paths that ask.
    pub fn policy_asks(&self) -> bool {
        self.policy.read().asks()
    }

    /// The policy file reloads read (`None` for the built-in policy).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path())
    }

    /// The identity (`st_dev`, `st_ino`) of the policy file as last read.
    pub fn identity(&self) -> Option<(u64, u64)> {
        self.protected.get()
    }

    /// Reloads the policy file. `Ok` says what is now in force; `Err` says why the
    /// old policy stays.
    pub fn reload(&self) -> Outcome {
        let _one = self.busy.lock();
        let Some(source) = &self.file else {
            // The built-in default is derived anew (it honours the ignore files
            // present now); a policy given without a file (the home policy's
            // built-in, a test harness's) keeps its rules, with its imports read
            // again.
            if self.policy.read().name() == crate::policy::BUILTIN_NAME {
                return self.reload_builtin();
            }
            return self.reload_given();
        };
        let file = source.path();
        // Read through the directory descriptor taken before mounting: the file as
        // the person outside sees it, never through this mount.
        let read = source.read().map_err(|source| ReloadError::Read {
            path: file.to_path_buf(),
            source,
        })?;
        // Whatever the name holds now is what the next reload reads: protect it
        // (the file an editor renamed over the old one, say), loaded or not.
        self.protected.set(read.dev, read.ino);
        // A file opened for writing through the mount is never loaded: an editor's
        // temporary file in the workspace (`sed -i`, atomic saves) is writable by the
        // confined command until it is renamed over the policy, and a descriptor it
        // held could still write into it afterwards.
        if self.protected.written_lately((read.dev, read.ino)) {
            return Err(ReloadError::WrittenThroughMount {
                path: file.to_path_buf(),
            });
        }
        // A file truncated on its way to being rewritten (`echo ... > policy.toml`)
        // would parse as "allow everything": never take an empty one on reload.
        if read.text.trim().is_empty() {
            return Err(ReloadError::Empty {
                path: file.to_path_buf(),
            });
        }
        let agent = self.policy.read().implied_agent();
        let mut policy = Policy::parse_for_agent(
            self.base.as_ref(),
            agent,
            &self.after,
            &file.display().to_string(),
            &read.text,
        )?;
        let import_warnings = self.attach_imports(&mut policy)?;
        let mut summary = format!(
            "{}: reloaded: {} rules, {} patterns, default \"{}\"",
            file.display(),
            policy.rule_count(),
            policy.patterns().len(),
            policy.default_action()
        );
        for w in import_warnings {
            summary.push('\n');
            summary.push_str(&w);
        }
        self.put(policy, summary)
    }

    /// The policy in force, its rules compiled again and its imported files read
    /// again.
    fn reload_given(&self) -> Outcome {
        let current = self.policy.read().clone();
        if current.import_names().is_empty() {
            return Ok(format!("{}: nothing to reload", current.name()));
        }
        let mut policy = current.recompiled()?;
        let mut summary = format!("{}: imported files read again", current.name());
        for w in self.attach_imports(&mut policy)? {
            summary.push('\n');
            summary.push_str(&w);
        }
        self.put(policy, summary)
    }

    /// The built-in default again, honouring the ignore files the workspace root
    /// holds now (see [`crate::workspace::imports::builtin_text`]).
    fn reload_builtin(&self) -> Outcome {
        let root = self.inodes.get(super::inode::ROOT);
        let present = match root.as_ref().map(|r| r.dir_fd()) {
            Some(Ok(fd)) => crate::workspace::imports::present_at(fd),
            _ => Vec::new(),
        };
        if present.is_empty() && self.policy.read().import_names().is_empty() {
            return Ok("built-in default policy: nothing to reload".into());
        }
        let text = crate::workspace::imports::builtin_text(&present);
        let agent = self.policy.read().implied_agent();
        let mut policy = Policy::parse_for_agent(
            self.base.as_ref(),
            agent,
            &self.after,
            crate::policy::BUILTIN_NAME,
            &text,
        )?;
        // The ignore files gone: the default with its guards alone.
        let mut summary = if present.is_empty() {
            "built-in default policy: reloaded".to_string()
        } else {
            format!(
                "built-in default policy, with the rules of {}: reloaded",
                present.join(", ")
            )
        };
        for w in self.attach_imports(&mut policy)? {
            summary.push('\n');
            summary.push_str(&w);
        }
        self.put(policy, summary)
    }

    /// Puts `policy` in force (see the module documentation) and returns `summary`.
    fn put(&self, policy: Policy, summary: String) -> Outcome {
        self.protected.set_imported(policy.source_ids());
        {
            // Both under the write lock, so a request's snapshot reads the policy
            // with the epoch it is in force at (see `super::snapshot`).
            let mut p = self.policy.write();
            *p = Arc::new(policy);
            self.epoch.fetch_add(1, Ordering::AcqRel);
            // What a person approved was approved under the old policy.
            if let Some(b) = &self.broker {
                b.forget_grants();
            }
        }
        self.invalidate_kernel_caches();
        Ok(summary)
    }

    /// Finds and attaches the ignore files `policy` imports, read through the
    /// descriptor on the real workspace root (never through this mount): the
    /// warnings to say, or why the old policy stays.
    fn attach_imports(&self, policy: &mut Policy) -> Result<Vec<String>, ReloadError> {
        if policy.import_names().is_empty() {
            return Ok(Vec::new());
        }
        let root = self
            .inodes
            .get(super::inode::ROOT)
            .ok_or(ReloadError::RootGone)?;
        let fd = root.dir_fd().map_err(ReloadError::Root)?;
        let warnings = crate::workspace::imports::attach_checked(policy, fd, &|k| {
            self.protected.written_lately(k)
        })?;
        Ok(warnings)
    }

    /// Tells the kernel to drop every entry and attribute it cached for this mount.
    fn invalidate_kernel_caches(&self) {
        let guard = self.notifier.lock();
        let Some(n) = guard.as_ref() else { return };
        super::inval::invalidate_all(&self.inodes, n);
    }

    /// Reloads whenever a file the policy imports is changed, made, moved or removed
    /// outside the mount in a directory holding one (inotify on each, kept in step
    /// with every reload), whether or not the kernel holds that directory. Holds
    /// the reloader (and through it the node table) only while it looks: returns
    /// once the reloader is gone.
    ///
    /// The watches are in place when this returns; the returned loop, run on a
    /// thread of its own, reads them. (Set up on that thread, an edit made before
    /// the thread first ran would be missed.)
    pub fn watch_sources(
        me: std::sync::Weak<Self>,
        report: fn(Outcome),
    ) -> impl FnOnce() + Send + 'static {
        let ino = sys::inotify_init();
        let mut watched: HashMap<Vec<u8>, WatchDescriptor> = HashMap::new();
        let mut seen = u64::MAX;
        if let (Ok(ino), Some(r)) = (&ino, me.upgrade()) {
            seen = r.epoch.load(Ordering::Acquire);
            r.sync_source_watches(&mut ino.watches(), &mut watched);
        }
        move || {
            let Ok(ino) = ino else {
                log::warn!("no inotify: outside edits of imported files wait for a reload");
                return;
            };
            Self::source_loop(me, report, ino, watched, seen)
        }
    }

    /// The loop of [`Reloader::watch_sources`].
    fn source_loop(
        me: std::sync::Weak<Self>,
        report: fn(Outcome),
        mut ino: inotify::Inotify,
        mut watched: HashMap<Vec<u8>, WatchDescriptor>,
        mut seen: u64,
    ) {
        let mut watches = ino.watches();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            {
                let Some(r) = me.upgrade() else { return };
                let epoch = r.epoch.load(Ordering::Acquire);
                if epoch != seen {
                    seen = epoch;
                    r.sync_source_watches(&mut watches, &mut watched);
                }
            }
            let Ok(Some(mut batch)) = sys::inotify_read(&mut ino, &mut buf, 500) else {
                continue;
            };
            let Some(r) = me.upgrade() else { return };
            let p = r.policy.read().clone();
            if batch.any(|(_, _, name)| p.is_source_name(name)) {
                r.reload_soon(report);
            }
        }
    }

    /// Watches the directories holding the files the policy in force imports, and
    /// no others.
    fn sync_source_watches(
        &self,
        watches: &mut inotify::Watches,
        watched: &mut HashMap<Vec<u8>, WatchDescriptor>,
    ) {
        let dirs = self.policy.read().import_dirs();
        watched.retain(|dir, wd| {
            let keep = dirs.contains(dir);
            if !keep {
                let _ = watches.remove(wd.clone());
            }
            keep
        });
        let Some(root) = self.inodes.get(super::inode::ROOT) else {
            return;
        };
        let Ok(root) = root.dir_fd() else { return };
        for dir in dirs {
            if watched.contains_key(&dir) {
                continue;
            }
            let fd = match crate::workspace::imports::open_dir_at(root, &dir) {
                Ok(fd) => fd,
                Err(e) => {
                    log::debug!("not watching {}: {e}", String::from_utf8_lossy(&dir));
                    continue;
                }
            };
            let mask = libc::IN_CLOSE_WRITE
                | libc::IN_MOVED_TO
                | libc::IN_MOVED_FROM
                | libc::IN_CREATE
                | libc::IN_DELETE
                | libc::IN_MODIFY;
            match sys::inotify_add_watch(watches, fd.as_fd(), mask) {
                Ok(wd) => {
                    watched.insert(dir, wd);
                }
                Err(e) => log::warn!(
                    "cannot watch {} for edits of imported files: {e}",
                    String::from_utf8_lossy(&dir)
                ),
            }
        }
    }

    /// Reloads whenever the policy file changes (inotify on its directory, or a
    /// one-second poll of its modification time when inotify is unavailable), and
    /// reports each outcome with `report`. Holds the reloader (and through it the
    /// node table) only while it looks: returns once the reloader is gone.
    ///
    /// The watch is in place (and the file's first stamp taken) when this returns;
    /// the returned loop, run on a thread of its own, reads it. (Set up on that
    /// thread, an edit made before the thread first ran would be missed.)
    pub fn watch_file(
        me: std::sync::Weak<Self>,
        report: impl Fn(Outcome) + Send + 'static,
    ) -> impl FnOnce() + Send + 'static {
        let setup = me.upgrade().and_then(|r| {
            let source = r.file.as_ref()?;
            let ino = sys::inotify_init().ok();
            let watched = ino.as_ref().is_some_and(|i| {
                sys::inotify_add_watch(
                    &mut i.watches(),
                    source.dir(),
                    libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_CREATE | libc::IN_MODIFY,
                )
                .is_ok()
            });
            let name = std::os::unix::ffi::OsStrExt::as_bytes(source.name()).to_vec();
            Some((name, r.stamp(), ino, watched))
        });
        move || {
            if let Some((name, last, ino, watched)) = setup {
                Self::file_loop(me, report, name, last, ino, watched)
            }
        }
    }

    /// What the policy file's name holds now, to compare when inotify is missing.
    fn stamp(&self) -> Option<Stamp> {
        self.file
            .as_ref()
            .and_then(|f| f.read().ok())
            .map(|t| (t.dev, t.ino, t.text))
    }

    /// The loop of [`Reloader::watch_file`].
    fn file_loop(
        me: std::sync::Weak<Self>,
        report: impl Fn(Outcome),
        name: Vec<u8>,
        mut last: Option<Stamp>,
        mut ino: Option<inotify::Inotify>,
        watched: bool,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let changed = match (&mut ino, watched) {
                (Some(i), true) => match sys::inotify_read(i, &mut buf, 500) {
                    Ok(Some(mut batch)) => batch.any(|(_, _, n)| n == name),
                    _ => false,
                },
                _ => {
                    std::thread::sleep(Duration::from_secs(1));
                    let Some(r) = me.upgrade() else { return };
                    let now = r.stamp();
                    let c = now != last;
                    last = now;
                    c
                }
            };
            if changed {
                // Let the writer finish: wait for 100 ms without further events
                // (at most a second), so a save in several steps loads once, whole.
                if let Some(i) = &mut ino {
                    let start = std::time::Instant::now();
                    while sys::inotify_read(i, &mut buf, 100).is_ok_and(|b| b.is_some())
                        && start.elapsed() < Duration::from_secs(1)
                    {}
                }
                let Some(r) = me.upgrade() else { return };
                report(r.reload());
            } else if me.strong_count() == 0 {
                return;
            }
        }
    }
}
