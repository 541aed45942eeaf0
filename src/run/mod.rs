//! `veilfs run`: a command in a private mount namespace where the workspace is
//! veilfs, mounted over the workspace path itself.
//!
//! Three processes:
//! * the **daemon** (the `veilfs run` process): opens the real workspace, enters a
//!   private mount namespace (inside a user namespace when not root), starts the
//!   **init** process, then mounts veilfs over the workspace path, serving from the
//!   descriptor it opened before, and waits;
//! * **init**: PID 1 of a new PID namespace, forked before any thread exists. It
//!   waits until the mount is live, mounts a fresh `/proc` in a mount namespace of
//!   its own (so the daemon's `/proc/<pid>/fd` is not there to be found), makes the
//!   system outside the workspace read-only there but for the writable places the
//!   daemon passes (`confine::system_read_only`), starts the command, forwards
//!   signals to it, reaps orphans, and exits with the command's status;
//! * the **command**, in the original working directory (now reached through the
//!   mount), with the dangerous capabilities dropped for good and `no_new_privs` set
//!   (or as `--user`), so it cannot unmount, bind-mount around, or open by handle;
//!   in a session of its own, on a pty the daemon relays when the caller has a
//!   terminal (`pty`), so it cannot type into the caller's terminal.
//!
//! `run` always ends (`ending`): with the command's status, or 128+N on signal N.
//!
//! When the daemon exits, its mount namespace (and so the mount) disappears; outside
//! it nothing was ever mounted.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::sys;
use crate::workspace::load;

mod confine;
mod ending;
pub mod home;
pub use home::{config_dirs_under, home_of};
pub mod env;
mod init;
mod plan;
mod private;
mod pty;
mod serve;
mod sockets;
mod startup;
mod supervise;
pub use sockets::SCOPE_ABI;

/// Capabilities the command never gets back: each one could undo or bypass the
/// overlay (unmount or bind-mount, open by handle, read another process's
/// descriptors, raw devices, kernel modules and BPF), or reach past the session
/// into the machine (its network configuration, clock, reboot and `kexec`,
/// immutable flags, file capabilities, the kernel log, audit and MAC policy, the
/// console's keyboard and font).
pub const DROPPED_CAPS: [caps::Capability; 19] = {
    use caps::Capability::*;
    [
        CAP_DAC_READ_SEARCH, // open_by_handle_at
        CAP_LINUX_IMMUTABLE, // chattr +i
        CAP_NET_ADMIN,       // interfaces, routes, firewall of the machine
        CAP_SYS_MODULE,
        CAP_SYS_RAWIO,
        CAP_SYS_PTRACE,
        CAP_SYS_PACCT,
        CAP_SYS_ADMIN, // mount, umount, setns
        CAP_SYS_BOOT,  // reboot, kexec_load
        CAP_SYS_TIME,
        CAP_MKNOD, // raw block devices
        CAP_AUDIT_CONTROL,
        CAP_SETFCAP, // file capabilities on binaries others run
        CAP_MAC_OVERRIDE,
        CAP_MAC_ADMIN,
        CAP_SYSLOG,
        CAP_PERFMON,
        CAP_BPF,
        CAP_SYS_TTY_CONFIG, // the console's keymap: a key bound to a command (attacker pass 11)
    ]
};

/// What `veilfs run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub policy: Option<PathBuf>,
    /// `None`: found from the current directory ([`load::find_workspace`]).
    pub workspace: Option<PathBuf>,
    pub quiet: bool,
    /// `-v`: the start-up lines in full, one per thing set up.
    pub verbose: bool,
    /// `--dry-run`: say what the session would be, and stop before anything starts.
    pub dry_run: bool,
    pub user: Option<(u32, u32)>,
    /// The home policy file (`None`: `~/.config/veilfs/home.toml`, else the
    /// built-in default home policy).
    pub home_policy: Option<PathBuf>,
    /// Do not mount over the home directory.
    pub no_home: bool,
    /// `--writable`: directories outside the workspace the command may write
    /// below, besides the scratch places; the rest of the system is read-only.
    pub writable: Vec<PathBuf>,
    /// `--system-writable`: leave the system outside the workspace as it is.
    pub system_writable: bool,
    /// `--keep-env` and `--drop-env`: names or globs (see [`mod@env`]).
    pub keep_env: Vec<String>,
    pub drop_env: Vec<String>,
    /// `--allow-socket`: sockets (or directories of them) outside that stay
    /// reachable (see the `sockets` module).
    pub allow_socket: Vec<PathBuf>,
    /// `--share-tmp`: `/tmp`, `/var/tmp` and `/dev/shm` are not made private.
    pub share_tmp: bool,
    /// `--without-landlock`: run without Landlock's scopes where the kernel
    /// lacks them.
    pub without_landlock: bool,
    /// `--notices FILE`: where refusal notices go while the command runs.
    pub notices: Option<PathBuf>,
    pub command: Vec<OsString>,
    /// Caching and passthrough (the other fields are not used by `run`).
    pub mount: crate::session::mount::MountOptions,
}

/// Why `--user` names nobody.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("{0:?}: no such user (give a name or a number)")]
    NoSuchUser(String),
    #[error("{0:?}: no such group (give a name or a number)")]
    NoSuchGroup(String),
}

/// Parses `USER[:GROUP]`: each a name or a number. Without a group, a user given
/// by name runs with its primary group from the password database, a number with
/// the group of the same number (or its primary group when the uid has an entry).
pub fn parse_user(s: &str) -> Result<(u32, u32), UserError> {
    use nix::unistd::{Group, User};
    let (u, g) = match s.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (s, None),
    };
    let (uid, primary) = match u.parse::<u32>() {
        Ok(uid) => {
            let entry = User::from_uid(uid.into()).ok().flatten();
            (uid, entry.map(|e| e.gid.as_raw()))
        }
        Err(_) => match User::from_name(u) {
            Ok(Some(e)) => (e.uid.as_raw(), Some(e.gid.as_raw())),
            _ => return Err(UserError::NoSuchUser(u.to_string())),
        },
    };
    let gid = match g {
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => match Group::from_name(g) {
                Ok(Some(e)) => e.gid.as_raw(),
                _ => return Err(UserError::NoSuchGroup(g.to_string())),
            },
        },
        None => primary.unwrap_or(uid),
    };
    Ok((uid, gid))
}

fn refuse(msg: impl std::fmt::Display) -> Result<ExitCode> {
    eprintln!("veilfs run: {}", crate::escape::escape(&msg.to_string()));
    Ok(ExitCode::from(2))
}

/// Runs the command; the exit code is the command's (128+N for signal N).
pub fn run(opts: RunOptions) -> Result<ExitCode> {
    if let Err(e) = confine::check_inherited_fds() {
        return refuse(e);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let (ws, found) = match plan::workspace(&opts, &cwd) {
        Ok(w) => w,
        Err(e) => return refuse(e),
    };
    let plan::Policies {
        layout,
        home: home_loaded,
        home_base,
        workspace: loaded,
        workspace_after: ws_after,
        home_after,
        walk,
    } = match plan::policies(&opts, &ws) {
        Ok(p) => p,
        Err(e) => return refuse(e),
    };
    let conf = match plan::confinement(&opts, &ws, &layout, &cwd) {
        Ok(c) => c,
        Err(e) => return refuse(e),
    };
    let facts = Facts {
        command: &conf.command,
        ws: &ws,
        found: &found,
        source: loaded.source(),
        home_source: home_loaded.as_ref().map(load::home_source),
        layout: &layout,
        walk: &walk,
        notes: conf.notes,
        // Said before a user namespace makes us root inside it.
        as_root: startup::as_root_note(opts.user.is_none() && sys::euid() == 0),
    };
    if opts.dry_run {
        let asks = loaded.policy.asks() || home_loaded.as_ref().is_some_and(|h| h.policy.asks());
        say_dry_run(&opts, facts, asks);
        return Ok(ExitCode::SUCCESS);
    }
    let real_root = sys::euid() == 0;
    let (root_fd, home_fd) = open_roots(&ws, &layout)?;
    // `veilfs reload WS` from outside: bound while this process still sees the
    // caller's runtime directory as the caller does.
    let control = crate::session::control::bind_for_run(&ws);
    // Where refusal notices go while the command runs (never its terminal).
    let places = notice_places(&ws, &layout, &loaded, home_loaded.as_ref());
    let (notices, notices_note) = notice_destination(&opts, places);

    if let Err(e) = enter_namespaces() {
        return refuse(e);
    }

    let Forked {
        init,
        ready: ready_w,
        stops: stops_r,
        master,
        fds: (root_fd, home_fd),
    } = fork_init(
        (root_fd, home_fd),
        &cwd,
        init::Program {
            argv: &conf.command,
            env: &conf.command_env,
        },
        opts.user,
        real_root,
        init::Confinement {
            system: conf.system.as_ref(),
            private: &conf.private,
            scope: !opts.without_landlock,
        },
    )?;
    // From here on every way out kills init and unmounts what was mounted.
    let mut started = ending::Started::new(init);

    let ws_policy_file = loaded.path.clone();
    let home_policy_file = home_loaded.as_ref().and_then(|h| h.path.clone());
    // Taken by the waiting loop (see `ending`); blocked before any thread starts,
    // so that every thread inherits the mask.
    ending::block_signals()?;
    let sources = serve::Sources {
        root_fd,
        ws: &ws,
        loaded,
        home_base,
        after: ws_after,
        home: (&layout, home_fd, home_loaded, home_after),
    };
    let built = match serve::build(&opts, &notices, sources, &mut started.audit) {
        Ok(b) => b,
        Err(e) => return refuse(e),
    };
    let (broker, run_logs) = (built.broker, built.logs);
    let serve::Mounted {
        reloader,
        asks,
        reloaders: _held,
        stats,
        uring,
    } = match serve::mount_all(
        built.fs,
        built.home,
        &ws,
        &opts.mount,
        &mut started.sessions,
    ) {
        Ok(m) => m,
        Err(e) => return refuse(e),
    };
    let protected = protect(
        [
            (ws_policy_file.as_deref(), Some(ws.as_path())),
            (home_policy_file.as_deref(), home_root(&layout)),
        ],
        &run_logs,
        (&layout, &conf.writable, &ws),
        opts.system_writable,
    );
    if let Err(e) = protected {
        return refuse(e);
    }
    say_running(&opts, facts, (asks, uring), notices_note);

    let _control = control.and_then(|c| {
        c.with_stats(stats)
            .serve_run(reloader, broker.clone(), init)
    });
    let relay = start_command(master, ready_w)?;

    let status = wait_with(init, stops_r, relay.as_ref());
    if status.is_ok() {
        started.reaped();
    }
    if let Some(r) = relay {
        r.finish(ending::TEARDOWN);
    }
    // Nothing waits on a person any more.
    broker.close();
    drop(started);
    say_at_end(&opts, &ws, &broker, &notices);
    check_logs(&run_logs);
    let status = status.context("waiting for the command")?;
    Ok(ExitCode::from(status.clamp(0, 255) as u8))
}

/// The real workspace `ws`, and the real home directory when it gets a mount of
/// its own, opened before anything covers them.
fn open_roots(
    ws: &std::path::Path,
    layout: &home::Layout,
) -> Result<(std::os::fd::OwnedFd, Option<std::os::fd::OwnedFd>)> {
    let open = |d: &std::path::Path| {
        sys::open_dir_path(d).with_context(|| format!("opening {}", d.display()))
    };
    let home = match layout {
        home::Layout::Separate(h) => Some(open(h)?),
        _ => None,
    };
    Ok((open(ws)?, home))
}

/// Starts the command: its terminal relayed to `run`'s (when it has one), then
/// the byte on `ready` that init waits for.
fn start_command(
    master: Option<pty::Master>,
    ready: std::os::fd::OwnedFd,
) -> Result<Option<pty::Relay>> {
    let relay = match master {
        Some(m) => Some(m.relay().context("relaying the terminal")?),
        None => None,
    };
    sys::write_byte(ready.as_fd(), 1).context("starting the command")?;
    Ok(relay)
}

/// Says the start-up lines (unless `-q`): the session's facts, the `ask` note
/// (`asks`: some path asks), and how requests travel (`uring`: the kernel granted
/// FUSE over io_uring): one line when `--transport uring` was not granted, else in
/// full with `-v`.
fn say_running(
    opts: &RunOptions,
    facts: Facts<'_>,
    (asks, uring): (bool, bool),
    notices: startup::Note,
) {
    if opts.quiet {
        return;
    }
    let ask = startup::ask_note(asks, &opts.mount, facts.ws);
    facts.say(opts, "running", ask, notices, opts.verbose);
    if let Some(note) = opts.mount.transport.note(uring) {
        eprintln!("veilfs: {note}");
    } else if opts.verbose {
        eprintln!(
            "veilfs:   {}",
            crate::session::mount::Transport::said(uring)
        );
    }
}

/// Warns of each of the run's logs that is no longer the file this run wrote (the
/// command could write the directory holding it, and moved it away).
fn check_logs(logs: &[serve::RunLog]) {
    for log in logs {
        if !confine::log_still_there(&log.path, log.id) {
            eprintln!(
                "veilfs run: warning: the {} {} is not the file this run wrote: its \
                 directory was changed during the run (keep it where the command cannot \
                 write)",
                log.what,
                log.path.display()
            );
        }
    }
}

/// What [`fork_init`] leaves `run`: init's pid, the ends of the pipes it reads and
/// writes, the pty's master (when the command has a terminal), and the
/// descriptors given to it back.
struct Forked {
    init: i32,
    /// A byte written here starts the command.
    ready: std::os::fd::OwnedFd,
    /// Init writes a byte here each time the command stops.
    stops: std::os::fd::OwnedFd,
    master: Option<pty::Master>,
    fds: (std::os::fd::OwnedFd, Option<std::os::fd::OwnedFd>),
}

/// Forks init, PID 1 of the command's new PID namespace ([`init::init_main`]),
/// with the pipes it waits on and signals through and a pty for the command when
/// `run` has a terminal. `fds` (the real workspace and home, opened before
/// anything covered them) are closed in init and given back.
fn fork_init(
    fds: (std::os::fd::OwnedFd, Option<std::os::fd::OwnedFd>),
    cwd: &std::path::Path,
    program: init::Program<'_>,
    user: Option<(u32, u32)>,
    real_root: bool,
    confinement: init::Confinement<'_>,
) -> Result<Forked> {
    let (ready_r, ready_w) = sys::pipe()?;
    let (stops_r, stops_w) = sys::pipe()?;
    let (tty, master) = match pty::open().context("opening a pty for the command")? {
        Some(p) => {
            let (t, m) = p.split();
            (Some(t), Some(m))
        }
        None => (None, None),
    };
    // SAFETY: no thread exists yet (the mounts, watchers and servers start after),
    // so forking here is sound.
    #[allow(unsafe_code)]
    let init = unsafe { sys::fork_new_pid_ns() }.context("creating the PID namespace")?;
    if init == 0 {
        drop((ready_w, fds, master, stops_r));
        init::init_main(
            ready_r,
            cwd,
            program,
            user,
            tty,
            real_root,
            confinement,
            stops_w,
        );
    }
    drop((ready_r, stops_w, tty));
    Ok(Forked {
        init,
        ready: ready_w,
        stops: stops_r,
        master,
        fds,
    })
}

/// `--dry-run`: the start-up lines in full, of the session that would run (`asks`:
/// some path of its policies asks a person); nothing was started.
fn say_dry_run(opts: &RunOptions, facts: Facts<'_>, asks: bool) {
    let notices = match &opts.notices {
        Some(n) => format!("refusal notices in {}", n.display()),
        None => format!(
            "refusal notices in a file of {}",
            crate::session::control::runtime_dir_path().display()
        ),
    };
    let ask = startup::ask_note(asks, &opts.mount, facts.ws);
    facts.say(opts, "would run", ask, startup::Note::same(notices), true);
}

/// What the start-up lines say of a session, gathered before anything starts
/// (the policies go into the filesystems later).
struct Facts<'a> {
    command: &'a [OsString],
    ws: &'a std::path::Path,
    found: &'a load::Found,
    /// Where the workspace policy came from, and what its walk found.
    source: String,
    walk: &'a crate::workspace::walk::StartupWalk,
    /// The home directory: its layout and where its policy came from.
    layout: &'a home::Layout,
    home_source: Option<String>,
    /// The confinement's notes (see [`plan::Confinement`]).
    notes: [startup::Note; 4],
    as_root: startup::Note,
}

impl Facts<'_> {
    /// Says the start-up lines (`verbose`: in full): `VERB CMD in WS (how it was
    /// found)`, the policies and the confinement, then what the person may need to
    /// do (`ask`) and where refusals go (`notices`).
    fn say(
        self,
        opts: &RunOptions,
        verb: &str,
        ask: startup::Note,
        notices: startup::Note,
        verbose: bool,
    ) {
        let said = startup::Startup {
            running: format!(
                "{verb} {} in {} ({})",
                self.command[0].to_string_lossy(),
                self.ws.display(),
                self.found
            ),
            policy: startup::policy_note(&self.source, self.walk),
            mode: startup::mode_note(&opts.mount, self.layout),
            confined: std::iter::once(startup::home_note(self.layout, self.home_source.as_deref()))
                .chain(self.notes)
                .collect(),
            person: vec![ask, self.as_root, notices],
        };
        said.say(self.walk.warning.as_deref(), verbose);
    }
}

/// The files the command must not change where no mount of its session guards
/// them, read-only onto themselves in the command's namespace (bound through
/// whichever mount now covers them): the policy files outside their own mount
/// (each with the root of that mount), the run's own logs, and veilfs's
/// configuration directory where no home mount guards it (`(layout, writable, ws)`
/// say where; `system_writable`: the system is not read-only).
fn protect(
    policy_files: [(Option<&std::path::Path>, Option<&std::path::Path>); 2],
    logs: &[serve::RunLog],
    (layout, writable, ws): (&home::Layout, &[PathBuf], &std::path::Path),
    system_writable: bool,
) -> Result<(), confine::ConfineError> {
    for (file, root) in policy_files {
        if let (Some(file), Some(root)) = (file, root) {
            confine::protect_policy_file(file, root)?;
        }
    }
    for log in logs {
        confine::protect_log(log.what, &log.path)?;
    }
    protect_config_dir(layout, system_writable, writable, ws)
}

/// Waits for init (and so the command), the terminal relayed by `relay` resized
/// and handed back as the command is resized, stopped and continued (see
/// [`ending::wait`]).
fn wait_with(
    init: i32,
    stops: std::os::fd::OwnedFd,
    relay: Option<&pty::Relay>,
) -> std::io::Result<i32> {
    ending::wait(
        init,
        stops,
        || {
            if let Some(r) = relay {
                r.resize();
            }
        },
        || match relay {
            Some(r) => {
                r.suspend();
                true
            }
            // No terminal: nobody to hand control to; whoever stopped the command
            // continues it.
            None => false,
        },
    )
}

/// Where the file `file` lies under the directory `root` (both resolved), relative
/// to it.
fn within(file: &std::path::Path, root: &std::path::Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let (file, root) = (file.canonicalize().ok()?, root.canonicalize().ok()?);
    let rel = file
        .strip_prefix(&root)
        .ok()?
        .as_os_str()
        .as_bytes()
        .to_vec();
    (!rel.is_empty()).then_some(rel)
}

/// Keeps veilfs's configuration directories ([`load::config_dirs`]) read-only for
/// the command where the home mount does not guard them (it lies outside the home
/// directory, say `XDG_CONFIG_HOME=/tmp/cfg`, or there is no home mount): bound
/// read-only onto itself. Where it does not exist yet but the command could make
/// it (a scratch place, a `--writable` directory, the workspace, or with
/// `--system-writable`), it is made first (mode 0700), so that no home policy can be
/// planted there for the next run.
fn protect_config_dir(
    layout: &home::Layout,
    system_writable: bool,
    writable: &[PathBuf],
    ws: &std::path::Path,
) -> Result<(), confine::ConfineError> {
    for dir in load::config_dirs() {
        let abs = std::path::absolute(&dir).unwrap_or(dir.clone());
        // Guarded by the home mount when it lies in the home directory.
        let real = load::resolve_existing(&abs).unwrap_or_else(|| abs.clone());
        if let Some(root) = home_root(layout)
            && let Ok(root) = root.canonicalize()
            && (abs.starts_with(&root) || real.starts_with(&root))
        {
            continue;
        }
        protect_one_config_dir(&abs, system_writable, writable, ws)?;
    }
    Ok(())
}

/// [`protect_config_dir`] for the one directory `abs`.
fn protect_one_config_dir(
    abs: &std::path::Path,
    system_writable: bool,
    writable: &[PathBuf],
    ws: &std::path::Path,
) -> Result<(), confine::ConfineError> {
    let abs = abs.to_path_buf();
    if !abs.exists() {
        let mut places: Vec<PathBuf> = confine::SCRATCH
            .iter()
            .filter_map(|s| std::path::Path::new(s).canonicalize().ok())
            .collect();
        places.extend(writable.iter().cloned());
        places.push(ws.to_path_buf());
        // Where it would be made: its nearest existing ancestor, resolved.
        let existing = abs
            .ancestors()
            .find_map(|a| a.canonicalize().ok())
            .unwrap_or_default();
        if !system_writable && !places.iter().any(|p| existing.starts_with(p)) {
            // The read-only system keeps it from being made.
            return Ok(());
        }
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&abs)
            .map_err(|cause| confine::ConfineError::ConfigDirMake {
                dir: abs.clone(),
                cause,
            })?;
    }
    confine::protect_dir(&abs)
        .map_err(|cause| confine::ConfineError::ConfigDirBind { dir: abs, cause })
}

/// The root the home policy file is protected under: the home mount's, or the
/// workspace's when the workspace is the home directory.
fn home_root(layout: &home::Layout) -> Option<&std::path::Path> {
    match layout {
        home::Layout::Same(h) | home::Layout::Separate(h) => Some(h),
        home::Layout::Uncovered(_) => None,
    }
}

/// The session's roots and policy files, for the hints of the notices' summary.
fn notice_places(
    ws: &std::path::Path,
    layout: &home::Layout,
    loaded: &load::LoadedPolicy,
    home: Option<&load::LoadedPolicy>,
) -> crate::fs::notice::Places {
    crate::fs::notice::Places {
        workspace: ws.to_path_buf(),
        workspace_policy: loaded.path.clone(),
        home: home_root(layout).filter(|h| *h != ws).map(PathBuf::from),
        home_policy: home.and_then(|h| h.path.clone()),
        home_policy_place: load::config_dir().map(|d| d.join(load::HOME_POLICY)),
    }
}

/// Where refusal notices go under `run`: `--quiet`, the log; else the file
/// `--notices FILE`, or one in the runtime directory (the person's, out of the
/// command's view); on the terminal only when no file can be made. And what the
/// start-up line says of it.
fn notice_destination(
    opts: &RunOptions,
    places: crate::fs::notice::Places,
) -> (crate::fs::notice::Destination, startup::Note) {
    use crate::fs::notice::{Destination, Root, SessionNotices};
    if opts.quiet {
        return (Destination::Log, startup::Note::default());
    }
    let path = opts.notices.clone().unwrap_or_else(|| {
        crate::session::control::runtime_dir_path()
            .join(format!("notices-run-{}.log", std::process::id()))
    });
    match SessionNotices::create(&path, places) {
        Ok(s) => (
            Destination::Session(std::sync::Arc::new(s), Root::Workspace),
            startup::Note::new(
                format!("refusals noted in {}", path.display()),
                format!("refusal notices in {}", path.display()),
            ),
        ),
        Err(e) => {
            log::warn!(
                "{}: refusal notices stay on the terminal: {e}",
                path.display()
            );
            (Destination::Stderr, startup::Note::default())
        }
    }
}

/// What `run` says once the command has ended and the terminal is the person's
/// again: the questions nobody answered, and the summary of the refusal notices
/// (whose file goes when it holds none, unless the person named it).
fn say_at_end(
    opts: &RunOptions,
    ws: &std::path::Path,
    broker: &crate::fs::ask::Broker,
    notices: &crate::fs::notice::Destination,
) {
    let mut lines = Vec::new();
    let unheard = broker.unheard();
    if unheard > 0 && !opts.quiet {
        lines.push(format!(
            "veilfs: {unheard} question{} of `ask` paths {} refused: nobody was \
             answering; start `veilfs prompt {}` in another terminal before the command asks",
            if unheard == 1 { "" } else { "s" },
            if unheard == 1 { "was" } else { "were" },
            ws.display()
        ));
    }
    if let crate::fs::notice::Destination::Session(s, _) = notices {
        match s.summary() {
            Some(said) => lines.extend(said.lines().map(str::to_string)),
            None if opts.notices.is_none() => {
                let _ = std::fs::remove_file(&s.path);
            }
            None => {}
        }
    }
    if lines.is_empty() {
        return;
    }
    // The command's last words may have left colours or hidden text on: reset
    // before veilfs's own lines, so that they are seen as they are.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if tty {
        eprint!("{RESET}");
    }
    // Names the command chose: never a control character raw. On a terminal, each
    // line also erases what the command left after it on the screen.
    let erase = if tty { "\x1b[K" } else { "" };
    for l in lines {
        eprintln!("{}{erase}", crate::escape::escape(&l));
    }
}

/// What the command may have left set on the person's terminal that would hide or
/// bend veilfs's own lines: the character attributes (colours, hidden text) and
/// set (line drawing) are reset; the scrolling region is made the whole screen
/// again, keeping the cursor where it is (DECSTBM moves it home, so it is saved and
/// restored around); the cursor is shown; and what the command left on the
/// cursor's line is erased.
const RESET: &str = "\x1b[0m\x1b(B\x1b7\x1b[r\x1b8\x1b[?25h\r\x1b[K";

/// What the command's private places keep and make (see [`private`]), from what
/// the session was given.
fn private_places_for(
    opts: &RunOptions,
    ws: &std::path::Path,
    layout: &home::Layout,
    writable: &[PathBuf],
    cwd: &std::path::Path,
    command_env: &[(OsString, OsString)],
    allowed_sockets: Vec<PathBuf>,
) -> private::Private {
    let homes = match opts.user {
        Some((uid, _)) => person_homes(ws, uid),
        None => Vec::new(),
    };
    private::Private {
        kept: kept_in_view(ws, layout, opts, writable, &homes),
        kept_read_only: path_dirs(command_env, opts.share_tmp)
            .into_iter()
            .chain(cwd_in_view(cwd, ws, opts.share_tmp, &homes))
            .collect(),
        sockets: allowed_sockets,
        share_tmp: opts.share_tmp,
        made: ["XDG_RUNTIME_DIR", "TMPDIR"]
            .iter()
            .filter_map(|name| command_env.iter().find(|(k, _)| k == name))
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
            .collect(),
        owner: opts.user.unwrap_or((0, 0)),
        homes,
        roots: std::iter::once(ws.to_path_buf())
            .chain(home_root(layout).map(|h| h.to_path_buf()))
            .collect(),
    }
}

/// `--allow-socket` paths: each must exist; canonical.
fn allowed_sockets(given: &[PathBuf]) -> Result<Vec<PathBuf>, plan::PlanError> {
    given
        .iter()
        .map(|p| {
            p.canonicalize()
                .map_err(|cause| plan::PlanError::AllowSocket {
                    path: p.clone(),
                    cause,
                })
        })
        .collect()
}

/// What stays at its own path when the private places cover `/tmp` and `/run`
/// (see [`sockets`]): everything the session was given or made there.
fn kept_in_view(
    ws: &std::path::Path,
    layout: &home::Layout,
    opts: &RunOptions,
    writable: &[PathBuf],
    homes: &[PathBuf],
) -> Vec<PathBuf> {
    let mut kept = vec![ws.to_path_buf()];
    kept.extend(home_root(layout).map(|h| h.to_path_buf()));
    kept.extend(home::home_of(opts.user));
    kept.extend(writable.iter().cloned());
    kept.extend(opts.policy.iter().cloned());
    kept.extend(opts.home_policy.iter().cloned());
    kept.extend(
        opts.mount
            .audit
            .iter()
            .filter(|a| a.as_path() != std::path::Path::new("-"))
            .cloned(),
    );
    // veilfs's configuration directories, bound read-only: in view, so that the
    // command meets that rather than a place to plant one; but none of a home
    // covered under `--user`, which shows the way to the workspace only.
    kept.extend(
        load::config_dirs()
            .into_iter()
            .filter(|d| !homes.iter().any(|h| d.starts_with(h))),
    );
    let kept: Vec<PathBuf> = kept
        .into_iter()
        .filter_map(|k| std::path::absolute(&k).ok())
        .map(|k| k.canonicalize().unwrap_or(k))
        .collect();
    kept
}

/// The current directory when it lies in a covered place (the private `/tmp`,
/// `/run`, a home covered under `--user`) and outside the workspace: kept in view
/// read-only, as the rest of the system is (attacker pass 2: kept writable, the
/// command planted `core.fsmonitor` in a repository there).
fn cwd_in_view(
    cwd: &std::path::Path,
    ws: &std::path::Path,
    share_tmp: bool,
    homes: &[PathBuf],
) -> Vec<PathBuf> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let covered = private::private_places(share_tmp)
        .iter()
        .chain(homes)
        .any(|p| cwd.starts_with(p) && cwd != *p);
    if covered && !cwd.starts_with(ws) {
        vec![cwd]
    } else {
        Vec::new()
    }
}

/// The command's `PATH` directories that lie in a private place (see
/// [`sockets`]), canonical.
fn path_dirs(env: &[(OsString, OsString)], share_tmp: bool) -> Vec<PathBuf> {
    let places = private::private_places(share_tmp);
    let Some((_, path)) = env.iter().find(|(k, _)| k == "PATH") else {
        return Vec::new();
    };
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .filter_map(|d| d.canonicalize().ok())
        .filter(|d| d.is_dir() && places.iter().any(|p| d.starts_with(p) && d != p))
        .collect()
}

/// Under `--user uid`, the homes of the person running veilfs, which the command
/// must not read: their `$HOME`, the sudo or doas user's, pkexec's caller's, the
/// login user's (`/proc/self/loginuid`, which `su` keeps), this uid's from the
/// password database, and every home directory of the password database on the
/// way to the workspace; canonical, outermost first, without the command user's own (which
/// the home policy covers), `/`, and those in the workspace (which its policy
/// covers).
fn person_homes(ws: &std::path::Path, uid: u32) -> Vec<PathBuf> {
    use nix::unistd::{Uid, User};
    let by_uid = |u: u32| {
        User::from_uid(Uid::from_raw(u))
            .ok()
            .flatten()
            .map(|e| e.dir)
    };
    let mut all: Vec<PathBuf> = Vec::new();
    all.extend(std::env::var_os("HOME").map(PathBuf::from));
    // Who became root: sudo's and doas's user, pkexec's uid, and the uid that
    // logged in (the audit login uid, which `su` keeps).
    for var in ["SUDO_USER", "DOAS_USER"] {
        all.extend(
            std::env::var(var)
                .ok()
                .and_then(|n| User::from_name(&n).ok().flatten())
                .map(|e| e.dir),
        );
    }
    let uid_in = |text: Option<String>| text.and_then(|t| t.trim().parse::<u32>().ok());
    for login in [
        uid_in(std::env::var("PKEXEC_UID").ok()),
        uid_in(std::fs::read_to_string("/proc/self/loginuid").ok()).filter(|u| *u != u32::MAX),
    ] {
        all.extend(login.and_then(by_uid));
    }
    all.extend(by_uid(sys::getuid()));
    all.extend(
        std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').nth(5).map(PathBuf::from))
            .filter(|h| ws.starts_with(h)),
    );
    let own = by_uid(uid).and_then(|h| h.canonicalize().ok());
    let mut out: Vec<PathBuf> = all
        .into_iter()
        .filter(|h| h.is_absolute())
        .filter_map(|h| h.canonicalize().ok())
        .filter(|h| h.is_dir() && h != std::path::Path::new("/") && !h.starts_with(ws))
        .filter(|h| Some(h) != own.as_ref())
        .collect();
    out.sort_by_key(|h| h.components().count());
    out.dedup();
    let mut outermost: Vec<PathBuf> = Vec::new();
    for h in out {
        if !outermost.iter().any(|o| h.starts_with(o)) {
            outermost.push(h);
        }
    }
    outermost
}

/// `--writable` directories: each must exist and be a directory; canonical.
fn writable_dirs(given: &[PathBuf]) -> Result<Vec<PathBuf>, plan::PlanError> {
    given
        .iter()
        .map(|d| match d.canonicalize() {
            Ok(c) if c.is_dir() => Ok(c),
            Ok(_) => Err(plan::PlanError::WritableNotADirectory(d.clone())),
            Err(cause) => Err(plan::PlanError::Writable {
                dir: d.clone(),
                cause,
            }),
        })
        .collect()
}

/// Why the daemon's namespaces could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("cannot create a mount namespace: {0}")]
    Mount(std::io::Error),
    #[error(
        "cannot create a user namespace as uid {uid}: {cause} (unprivileged user \
         namespaces must be enabled: sysctl user.max_user_namespaces > 0, \
         kernel.unprivileged_userns_clone=1 where it exists, and no AppArmor \
         restriction such as kernel.apparmor_restrict_unprivileged_userns=1)"
    )]
    User { uid: u32, cause: std::io::Error },
    /// One of the user namespace's maps.
    #[error("cannot write {file}: {cause}")]
    Map {
        file: &'static str,
        cause: std::io::Error,
    },
    #[error("cannot make mounts private: {0}")]
    Private(std::io::Error),
}

/// A private mount namespace, inside a new user namespace (mapping the caller to
/// root) when the caller is not root.
fn enter_namespaces() -> Result<(), NamespaceError> {
    if sys::euid() == 0 {
        sys::unshare(libc::CLONE_NEWNS).map_err(NamespaceError::Mount)?;
    } else {
        let (uid, gid) = (sys::getuid(), sys::getgid());
        sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
            .map_err(|cause| NamespaceError::User { uid, cause })?;
        let write = |file: &'static str, text: String| {
            std::fs::write(file, text).map_err(|cause| NamespaceError::Map { file, cause })
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("0 {uid} 1"))?;
        write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    }
    sys::make_mounts_private().map_err(NamespaceError::Private)
}
