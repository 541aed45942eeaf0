//! Mounting: the checks made before anything is mounted, the fuser session, and the
//! [`Mount`] guard that test harnesses use (mounted on `new`, unmounted on drop).
//!
//! ```no_run
//! // In another crate's test: a fixture tree seen through a policy.
//! use veilfs::{Mount, MountOptions, Policy};
//!
//! let policy = Policy::parse("test", "[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n").unwrap();
//! let mnt = Mount::new("fixtures/ws".as_ref(), "/tmp/ws-mnt".as_ref(), policy, None,
//!                      &MountOptions::default()).unwrap();
//! assert!(std::fs::read("/tmp/ws-mnt/.env").is_err());   // EACCES
//! drop(mnt);                                              // unmounted here
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, SessionACL};

use crate::fs::Inodes;
use crate::fs::VeilFs;
use crate::fs::ask::Broker;
use crate::fs::reload::{self, Reloader};
use crate::fs::watch::Watcher;
use crate::policy::Policy;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Let other users (an agent under its own uid) use the mount.
    pub allow_other: bool,
    /// Refuse every change at the kernel (`EROFS`), whatever the policy.
    pub read_only: bool,
    /// Request threads.
    pub threads: usize,
    /// How requests travel between the kernel and veilfs.
    pub transport: Transport,
    /// FUSE passthrough where the kernel allows it: for files opened for writing
    /// (and, with `strict_open`, large files opened for reading).
    pub passthrough: bool,
    /// Entry and attribute cache time in the kernel.
    pub ttl: std::time::Duration,
    /// Give every open of a file a handle and a backing descriptor in the daemon
    /// (by default an open for reading is checked and gets neither, see
    /// [`crate::fs::config::FsConfig::light_open`]): a descriptor then keeps reading
    /// after a policy reload denies its path, as with Unix permissions, and FUSE
    /// passthrough serves files opened for writing and large files.
    pub strict_open: bool,
    /// Watch the source with inotify and invalidate the kernel's caches on outside
    /// edits.
    pub watch: bool,
    /// Write an audit log there (`-` for stderr).
    pub audit: Option<PathBuf>,
    /// Log allowed operations too, not only refusals.
    pub audit_all: bool,
    /// Enforce none of the policy's rules; log what they would refuse (see
    /// [`crate::fs::config::FsConfig::permissive`]).
    pub permissive: bool,
    /// Learning a policy (`--learn`): permissive, with every allowed access logged
    /// too, for `veilfs init --from-audit`; said so in the start-up line.
    pub learn: bool,
    /// Where the daemon says what its policy reloads did.
    pub reports: Reports,
    /// How long a question about an `ask` path waits for a person (see
    /// [`crate::fs::ask`]).
    pub ask_timeout: std::time::Duration,
}

impl MountOptions {
    /// What the start-up line says of the modes that change what is refused: in
    /// permissive mode, that nothing is (in the workspace, when a `home` mount
    /// beside it enforces its own policy); else, when `asks`, how to answer (with
    /// `veilfs prompt` for `served`, the path the session's control socket serves).
    pub fn mode_note(&self, asks: bool, home: bool, served: &Path) -> String {
        match self.permissive_note(home) {
            Some(note) => format!("; {note}"),
            None if asks => format!("; {}", ask_note(served)),
            None => String::new(),
        }
    }

    /// In permissive mode (with its audit log), that nothing is refused (in the
    /// workspace, when `home`: a home mount beside it enforces its own policy).
    pub fn permissive_note(&self, home: bool) -> Option<String> {
        let log = self.audit.as_ref().filter(|_| self.permissive)?;
        if self.learn {
            return Some(format!(
                "LEARNING: nothing {}is refused, every access is logged to {} (write \
                 the policy it learned with `veilfs init --from-audit {}`)",
                if home {
                    "in the workspace (the home policy is enforced) "
                } else {
                    ""
                },
                log.display(),
                log.display()
            ));
        }
        Some(format!(
            "PERMISSIVE: nothing {}is refused, what the policy would refuse is logged to {} \
             (read it with `veilfs explain --audit {}`)",
            if home {
                "in the workspace (the home policy is enforced) "
            } else {
                ""
            },
            log.display(),
            log.display()
        ))
    }
}

/// How to answer the questions of the session serving `served` (the path to give
/// `veilfs prompt`).
pub fn ask_note(served: &Path) -> String {
    format!(
        "some paths ask: answer with `veilfs prompt {}` in another terminal",
        served.display()
    )
}

/// Where a daemon says what a policy reload did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reports {
    /// On stderr (`veilfs mount`: its stderr is its own).
    #[default]
    Stderr,
    /// Through the `log` crate only, info for success and warn for failure
    /// (`veilfs run`: once the command runs, stderr is the command's).
    Log,
}

impl Reports {
    /// The function that reports one outcome.
    pub fn reporter(self) -> fn(reload::Outcome) {
        match self {
            Reports::Stderr => report_reload,
            Reports::Log => log_reload,
        }
    }
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            allow_other: false,
            read_only: false,
            threads: default_threads(),
            transport: Transport::Auto,
            passthrough: true,
            ttl: crate::fs::DEFAULT_TTL,
            strict_open: false,
            watch: true,
            audit: None,
            audit_all: false,
            permissive: false,
            learn: false,
            reports: Reports::Stderr,
            ask_timeout: crate::fs::ask::DEFAULT_TIMEOUT,
        }
    }
}

/// How requests travel between the kernel and veilfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// `uring` where the kernel grants it, `dev` elsewhere (said with `-v` only).
    Auto,
    /// `read` and `writev` on `/dev/fuse`, by [`MountOptions::threads`] threads.
    Dev,
    /// FUSE over io_uring: one queue of [`RING_DEPTH`] entries per CPU, served by a
    /// thread bound to that CPU; `/dev/fuse` keeps forgets, interrupts and
    /// notifications. Granted by the kernel at `INIT` or not at all; when it is
    /// not, veilfs says so in one line and uses `dev`.
    Uring,
}

impl Transport {
    /// What to say of the transport a mount got: one line when `uring` was asked
    /// for by name and the kernel did not grant it, else nothing.
    /// How a mount's requests travel, said in full (`run -v`).
    pub fn said(granted: bool) -> &'static str {
        if granted {
            "requests: through FUSE over io_uring, one queue per CPU"
        } else {
            "requests: through /dev/fuse (`veilfs doctor` says whether FUSE over io_uring can be had)"
        }
    }

    pub fn note(self, granted: bool) -> Option<String> {
        (self == Transport::Uring && !granted).then(|| {
            "--transport uring: the kernel did not grant FUSE over io_uring (the fuse module's enable_uring is off, or Linux is older than 6.14: see `veilfs doctor`); requests travel through /dev/fuse".to_string()
        })
    }
}

/// Entries in each io_uring queue: the requests of one CPU that can be in veilfs at
/// once, parked questions included (which may hold three quarters of them).
pub const RING_DEPTH: u16 = 32;

/// How many threads serve requests unless told: one per core, at least 2 (a request
/// that takes long, such as an `fsync`, leaves another thread serving) and at most
/// 8. More threads than cores cost every request more: each request wakes a thread
/// asleep on the device, and a thread woken on the other core than the one that
/// asked costs a cross-core wake-up both ways (measured on 2 cores: `rg` over 62,000
/// files, 7.1 µs of daemon CPU per request with 4 threads, 3.9 µs with 2).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// Why veilfs will not mount. Nothing is mounted when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("source {0} is not a directory")]
    SourceNotDir(PathBuf),
    #[error("mount point {0} does not exist")]
    MountPointMissing(PathBuf),
    #[error("mount point {0} is not a directory")]
    MountPointNotDir(PathBuf),
    #[error("mount point {0} is already a mount point (unmount it first)")]
    AlreadyMounted(PathBuf),
    #[error("mount point {mnt} is inside the source {src}: the mount would contain itself")]
    InsideSource { mnt: PathBuf, src: PathBuf },
    #[error(
        "FUSE is unavailable: /dev/fuse does not exist (install fuse3 and load the fuse \
         module: `apt-get install fuse3 && modprobe fuse`; in a container, pass the \
         device /dev/fuse)"
    )]
    NoFuseDevice,
    #[error(
        "FUSE is unavailable: cannot open /dev/fuse: {0} (run as root, or make /dev/fuse readable and writable for this user as the fuse3 package does)"
    )]
    FuseDevice(io::Error),
    #[error("mounting {mnt} failed: {source}")]
    Mount { mnt: PathBuf, source: io::Error },
    #[error("cannot open the source {src}: {source}")]
    Source { src: PathBuf, source: io::Error },
}

/// The checks made before mounting; each failure names the problem.
pub fn preflight(src: &Path, mnt: &Path) -> Result<(PathBuf, PathBuf), MountError> {
    let src_c = src
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| MountError::SourceNotDir(src.to_path_buf()))?;
    let meta =
        std::fs::metadata(mnt).map_err(|_| MountError::MountPointMissing(mnt.to_path_buf()))?;
    if !meta.is_dir() {
        return Err(MountError::MountPointNotDir(mnt.to_path_buf()));
    }
    let mnt_c = mnt
        .canonicalize()
        .map_err(|_| MountError::MountPointMissing(mnt.to_path_buf()))?;
    if mnt_c.starts_with(&src_c) {
        return Err(MountError::InsideSource {
            mnt: mnt.to_path_buf(),
            src: src.to_path_buf(),
        });
    }
    if is_mount_point(&mnt_c) {
        return Err(MountError::AlreadyMounted(mnt.to_path_buf()));
    }
    check_fuse_device()?;
    Ok((src_c, mnt_c))
}

/// `/dev/fuse` exists and can be opened read-write by this process.
pub fn check_fuse_device() -> Result<(), MountError> {
    let dev = Path::new("/dev/fuse");
    if !dev.exists() {
        return Err(MountError::NoFuseDevice);
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dev)
        .map(drop)
        .map_err(MountError::FuseDevice)
}

/// Whether `path` (canonical) is a mount point, from `/proc/self/mountinfo`.
pub fn is_mount_point(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(info) = std::fs::read("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.as_os_str().as_bytes();
    info.split(|&b| b == b'\n').any(|line| {
        line.split(|&b| b == b' ')
            .nth(4)
            .is_some_and(|mp| unescape_mountinfo(mp) == want)
    })
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape_mountinfo(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\'
            && i + 3 < s.len()
            && s[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((s[i + 1] - b'0') * 64 + (s[i + 2] - b'0') * 8 + (s[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// The fuser configuration for mounting `src` with `opts`.
pub(crate) fn config(src: &Path, opts: &MountOptions) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![
        MountOption::FSName(format!("veilfs:{}", src.display())),
        MountOption::Subtype("veilfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if opts.read_only {
        c.mount_options.push(MountOption::RO);
    }
    c.acl = if opts.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    c.n_threads = Some(opts.threads.max(1));
    c.clone_fd = opts.threads > 1;
    c.uring = (opts.transport != Transport::Dev).then_some(RING_DEPTH);
    c
}

/// A mounted session not yet serving, its node table and its policy reloader.
pub struct Live {
    pub session: fuser::Session<crate::fs::fuse::Served>,
    pub inodes: Arc<Inodes>,
    pub reloader: Arc<Reloader>,
    /// Where questions about `ask` paths go.
    pub broker: Arc<Broker>,
    /// The watcher keeping the kernel's caches coherent (`None`: not watching).
    pub watcher: Option<Arc<Watcher>>,
    /// The audit writer: finish it once the session has ended.
    pub audit: Option<crate::session::audit::Writer>,
}

/// Builds the filesystem and mounts it; returns once the mount is live. The
/// pieces, in order: [`preflight`], [`start_audit`], [`build`], [`start`] (`veilfs
/// mount` takes them as steps of its own).
pub fn session(
    src: &Path,
    mnt: &Path,
    policy: Policy,
    policy_file: Option<&Path>,
    opts: &MountOptions,
) -> Result<Live, MountError> {
    let (src_c, mnt_c) = preflight(src, mnt)?;
    let (audit, writer) = match &opts.audit {
        Some(target) => {
            let (a, w) = start_audit(target, opts).map_err(|e| mount_failed(mnt, e))?;
            (Some(a), Some(w))
        }
        None => (None, None),
    };
    let fs = build(
        Sources {
            src,
            src_c: &src_c,
            mnt_c: &mnt_c,
        },
        policy,
        policy_file,
        opts,
        audit,
    )?;
    let mut live =
        start(fs, &mnt_c, &config(&src_c, opts), opts).map_err(|e| mount_failed(mnt, e))?;
    live.audit = writer;
    Ok(live)
}

/// Why mounting at `mnt` (as given) failed.
pub fn mount_failed(mnt: &Path, source: io::Error) -> MountError {
    MountError::Mount {
        mnt: mnt.to_path_buf(),
        source,
    }
}

/// Starts the audit log `target` of a mount with `opts`: the sender the filesystem
/// and its broker record through, and the writer to finish once both are gone.
pub fn start_audit(
    target: &Path,
    opts: &MountOptions,
) -> io::Result<(crate::session::audit::Audit, crate::session::audit::Writer)> {
    crate::session::audit::Audit::start(
        target,
        opts.audit_all,
        crate::session::audit::queue(opts.audit_all),
    )
}

/// Where a filesystem serves from and is mounted, as [`preflight`] found them.
#[derive(Clone, Copy, Debug)]
pub struct Sources<'a> {
    /// The source as given (named in errors).
    pub src: &'a Path,
    /// The source, canonical.
    pub src_c: &'a Path,
    /// The mount point, canonical.
    pub mnt_c: &'a Path,
}

/// Builds the filesystem serving `at` under `policy` (from `policy_file`, when it
/// came from one), with its broker for `ask` paths; both record to `audit`.
pub fn build(
    at: Sources,
    policy: Policy,
    policy_file: Option<&Path>,
    opts: &MountOptions,
    audit: Option<crate::session::audit::Audit>,
) -> Result<VeilFs, MountError> {
    let mut cfg = crate::fs::config::FsConfig::of(opts);
    // No link or moved directory on the way to what the policy names.
    let ways = crate::workspace::ways::guarded_ways(at.src_c, &policy);
    cfg.ways = crate::workspace::ways::ways_under(at.src_c, &ways);
    // `extends = "agent:NAME"`: what that agent runs later stays read-only.
    cfg.agent_files = policy
        .agents()
        .first()
        .and_then(|name| crate::policy::agents::profile(name))
        .and_then(|p| crate::policy::agents::compiled(p).ok())
        .map(std::sync::Arc::new);
    cfg.audit = audit;
    let broker = Broker::new("veilfs mount".into(), opts.ask_timeout, cfg.audit.clone());
    cfg.approvals = Some(crate::fs::ask::Approvals::new(
        broker,
        "",
        at.mnt_c,
        policy_file,
    ));
    VeilFs::new(at.src_c, policy, policy_file, cfg).map_err(|source| MountError::Source {
        src: at.src.to_path_buf(),
        source,
    })
}

/// Mounts `fs` (built with everything it needs, see [`crate::fs::config::FsConfig`])
/// at `mnt` (live when this returns), and starts the threads that keep it current:
/// the watcher that keeps the kernel's caches coherent with outside edits, and the
/// one that reloads the policy file when it changes. `fs` must have a broker.
pub fn start(fs: VeilFs, mnt: &Path, config: &Config, opts: &MountOptions) -> io::Result<Live> {
    let watcher = fs.watcher();
    let broker = fs.broker().ok_or_else(|| {
        io::Error::other("a filesystem to mount needs a broker for its questions")
    })?;
    let inodes = fs.inodes();
    let reloader = fs.reloader();
    let inval = fs.invalidator();
    let session = fuser::Session::new(crate::fs::fuse::Served::new(fs), mnt, config)?;
    reloader.set_notifier(session.notifier());
    inval.start(session.notifier(), Arc::downgrade(&inodes))?;
    if let Some(w) = watcher.clone() {
        // An outside edit of an ignore file the policy imports reloads it. Held
        // weakly: the reloader holds the node table, whose end ends the watcher.
        let (r, s) = (Arc::downgrade(&reloader), Arc::downgrade(&reloader));
        let report = opts.reports.reporter();
        w.on_sources(
            move |name| r.upgrade().is_some_and(|r| r.is_source(name)),
            move || {
                if let Some(s) = s.upgrade() {
                    s.reload_soon(report)
                }
            },
        );
        let notifier = session.notifier();
        let weak = Arc::downgrade(&inodes);
        std::thread::Builder::new()
            .name("veilfs-watch".into())
            .spawn(move || w.run(weak, notifier))?;
    }
    {
        // Edits of the imported files, wherever they are (the reloader held
        // weakly: it holds the node table).
        let watch = crate::fs::reload::Reloader::watch_sources(
            Arc::downgrade(&reloader),
            opts.reports.reporter(),
        );
        std::thread::Builder::new()
            .name("veilfs-sources".into())
            .spawn(watch)?;
    }
    if reloader.file().is_some() {
        let watch = crate::fs::reload::Reloader::watch_file(
            Arc::downgrade(&reloader),
            opts.reports.reporter(),
        );
        std::thread::Builder::new()
            .name("veilfs-policy".into())
            .spawn(watch)?;
    }
    Ok(Live {
        session,
        inodes,
        reloader,
        broker,
        watcher,
        audit: None,
    })
}

/// Says on stderr what a reload did.
pub fn report_reload(outcome: reload::Outcome) {
    match outcome {
        Ok(msg) => eprintln!("veilfs: {msg}"),
        Err(e) => eprintln!("veilfs: policy reload failed, keeping the old policy:\n{e}"),
    }
}

/// Says through the `log` crate what a reload did.
pub fn log_reload(outcome: reload::Outcome) {
    match outcome {
        Ok(msg) => log::info!("{msg}"),
        Err(e) => log::warn!("policy reload failed, keeping the old policy:\n{e}"),
    }
}

/// A live mount in this process, unmounted when dropped.
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    inodes: Arc<Inodes>,
    reloader: Arc<Reloader>,
    broker: Arc<Broker>,
    watcher: Option<Arc<Watcher>>,
    audit: Option<crate::session::audit::Writer>,
    counts: Arc<fuser::RequestCounts>,
    uring: bool,
}

impl Mount {
    /// Mounts `src` at `mnt` with `policy` and returns once the mount is live.
    /// `policy_file`, when the policy came from a file inside `src`, is kept
    /// read-only through the mount.
    pub fn new(
        src: &Path,
        mnt: &Path,
        policy: Policy,
        policy_file: Option<&Path>,
        opts: &MountOptions,
    ) -> Result<Mount, MountError> {
        let mountpoint = mnt
            .canonicalize()
            .map_err(|_| MountError::MountPointMissing(mnt.to_path_buf()))?;
        let Live {
            session: s,
            inodes,
            reloader,
            broker,
            watcher,
            audit,
        } = session(src, mnt, policy, policy_file, opts)?;
        let (counts, uring) = (s.request_counts(), s.uring());
        let bg = s.spawn().map_err(|source| MountError::Mount {
            mnt: mnt.to_path_buf(),
            source,
        })?;
        Ok(Mount {
            session: Some(bg),
            mountpoint,
            inodes,
            reloader,
            broker,
            watcher,
            audit,
            counts,
            uring,
        })
    }

    /// Whether the kernel granted FUSE over io_uring (see [`Transport`]).
    pub fn uring(&self) -> bool {
        self.uring
    }

    /// The requests the mount has received, by opcode and by transport.
    pub fn request_counts(&self) -> &Arc<fuser::RequestCounts> {
        &self.counts
    }

    /// Where questions about the mount's `ask` paths go.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The mount point (canonical).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Reloads the policy file now (it is also reloaded when it changes). `Err`
    /// says why the old policy stays in force (a policy that does not load: its
    /// `file:line:col` errors).
    pub fn reload(&self) -> reload::Outcome {
        self.reloader.reload()
    }

    /// Has the watcher act as if inotify had lost events (`IN_Q_OVERFLOW`), for
    /// tests; `false` when the mount does not watch.
    #[doc(hidden)]
    pub fn inject_watch_overflow(&self) -> bool {
        self.watcher.as_ref().map(|w| w.inject_overflow()).is_some()
    }

    /// Has the watcher act as if the user's inotify watch limit were reached (no
    /// directory met from now on is watched), for tests; `false` when the mount
    /// does not watch.
    #[doc(hidden)]
    pub fn inject_watch_limit(&self) -> bool {
        self.watcher.as_ref().map(|w| w.inject_full()).is_some()
    }

    /// How many nodes the inotify queue overflows handled so far invalidated (those
    /// that changed on disk), for tests.
    #[doc(hidden)]
    pub fn watch_overflow_invalidated(&self) -> u64 {
        self.watcher
            .as_ref()
            .map_or(0, |w| w.overflow_invalidated())
    }

    /// How many inotify queue overflows the watcher has handled (each one dropped
    /// the kernel's caches of what changed on disk), for tests.
    #[doc(hidden)]
    pub fn watch_overflows(&self) -> u64 {
        self.watcher.as_ref().map_or(0, |w| w.overflows())
    }

    /// How many inodes the daemon holds for the kernel right now (the root included).
    pub fn node_count(&self) -> usize {
        self.inodes.len()
    }

    /// Unmounts now and waits for the session to end. If something still uses the
    /// mount (a process with its working directory inside, say), the mount is
    /// detached instead: gone from the mount table at once, released when its last
    /// user lets go.
    pub fn unmount(mut self) -> io::Result<()> {
        self.unmount_now()
    }

    fn unmount_now(&mut self) -> io::Result<()> {
        let Some(s) = self.session.take() else {
            return Ok(());
        };
        // Parked requests are refused, so nothing waits on a person any more.
        self.broker.close();
        let r = match s.umount_and_join() {
            Ok(()) => Ok(()),
            Err(e) if is_mount_point(&self.mountpoint) => {
                crate::sys::umount_detach(&self.mountpoint).map_err(|_| e)
            }
            Err(_) => Ok(()),
        };
        // The filesystem (and its end of the audit queue) is gone once the session
        // is joined; a detached one lets the writer finish when it goes.
        if let Some(w) = self.audit.take()
            && r.is_ok()
            && !is_mount_point(&self.mountpoint)
        {
            w.finish();
        }
        r
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = self.unmount_now();
    }
}
