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

use crate::config;
use crate::fs::VeilFs;
use crate::sys;

mod confine;
mod ending;
pub mod home;
pub use home::{config_dirs_under, home_of};
pub mod env;
mod init;
mod private;
mod pty;
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
    /// `None`: found from the current directory ([`config::find_workspace`]).
    pub workspace: Option<PathBuf>,
    pub quiet: bool,
    /// `-v`: the start-up lines in full, one per thing set up.
    pub verbose: bool,
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
    pub mount: crate::mount::MountOptions,
}

/// Parses `USER[:GROUP]`: each a name or a number. Without a group, a user given
/// by name runs with its primary group from the password database, a number with
/// the group of the same number (or its primary group when the uid has an entry).
pub fn parse_user(s: &str) -> Result<(u32, u32), String> {
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
            _ => return Err(format!("{u:?}: no such user (give a name or a number)")),
        },
    };
    let gid = match g {
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => match Group::from_name(g) {
                Ok(Some(e)) => e.gid.as_raw(),
                _ => return Err(format!("{g:?}: no such group (give a name or a number)")),
            },
        },
        None => primary.unwrap_or(uid),
    };
    Ok((uid, gid))
}

fn refuse(msg: impl std::fmt::Display) -> Result<ExitCode> {
    eprintln!("veilfs run: {}", crate::printable::escape(&msg.to_string()));
    Ok(ExitCode::from(2))
}

/// Runs the command; the exit code is the command's (128+N for signal N).
pub fn run(opts: RunOptions) -> Result<ExitCode> {
    if let Err(e) = confine::check_inherited_fds() {
        return refuse(e);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let (ws, found) = match &opts.workspace {
        Some(w) => match w.canonicalize() {
            Ok(p) if p.is_dir() => (p, config::Found::Given),
            _ => return refuse(format!("workspace {} is not a directory", w.display())),
        },
        None => {
            let start = cwd.canonicalize().unwrap_or_else(|_| cwd.clone());
            // Root running the command as another user trusts that user's `.git`:
            // the README's recipe gives the project to the user.
            let git_owner = opts.user.filter(|_| sys::euid() == 0).map(|(uid, _)| uid);
            let (ws, found, warnings) = match config::find_workspace(&start, git_owner) {
                Ok(w) => w,
                Err(e) => return refuse(e),
            };
            for w in warnings {
                eprintln!("veilfs run: {w}");
            }
            (ws, found)
        }
    };
    let layout = if opts.no_home {
        home::Layout::Uncovered("--no-home".into())
    } else {
        home::layout(home::home_of(opts.user), &ws)
    };
    if opts.mount.permissive && matches!(layout, home::Layout::Same(_)) {
        return refuse(
            "--permissive tunes a workspace's policy, and this workspace is the home \
             directory, whose policy is always enforced: run it in a project directory",
        );
    }
    let mut home_loaded = match &layout {
        home::Layout::Uncovered(_) => None,
        _ => match home::load_policy(opts.home_policy.as_deref()) {
            Ok(l) => Some(l),
            Err(e) => return refuse(e),
        },
    };
    // The workspace is the home directory: one mount, the workspace policy stacked
    // on the home policy.
    let home_base = match (&layout, &home_loaded) {
        (home::Layout::Same(_), Some(h)) => match home::raw_policy(h) {
            Ok(raw) => Some(raw),
            Err(e) => return refuse(e),
        },
        _ => None,
    };
    let loaded = match &home_base {
        Some(base) => config::load_policy_on(base, opts.policy.as_deref(), &ws),
        None => config::load_policy(opts.policy.as_deref(), &ws),
    };
    let mut loaded = match loaded {
        Ok(l) => l,
        Err(e) => return refuse(e),
    };
    // The targets of links the home policy hides by name are hidden too.
    let (ws_after, home_after) = match (&layout, &mut home_loaded) {
        (home::Layout::Same(h), Some(_)) => {
            match home::with_aliases(h, &mut loaded, home_base.as_ref(), home::WS_BUILTIN) {
                Ok(a) => (a, Vec::new()),
                Err(e) => return refuse(e),
            }
        }
        (home::Layout::Separate(h), Some(hp)) => {
            match home::with_aliases(h, hp, None, home::HOME_BUILTIN) {
                Ok(a) => (Vec::new(), a),
                Err(e) => return refuse(e),
            }
        }
        _ => (Vec::new(), Vec::new()),
    };
    // The ignore files the workspace policy imports, read before anything covers
    // them (after every recompilation above).
    match crate::policy_imports::attach(&mut loaded.policy, &ws) {
        Ok(warnings) => warnings.iter().for_each(|w| eprintln!("veilfs run: {w}")),
        Err(e) => return refuse(e),
    }
    // Said on the start-up line: what the policy hides, read before mounting.
    let walk = if opts.quiet {
        crate::explain_all::StartupWalk::default()
    } else {
        crate::explain_all::StartupWalk::of(&loaded.policy, &ws)
    };
    // And those the home policy imports, in the home directory.
    if let (home::Layout::Separate(h), Some(hp)) = (&layout, &mut home_loaded) {
        match crate::policy_imports::attach(&mut hp.policy, h) {
            Ok(warnings) => warnings.iter().for_each(|w| eprintln!("veilfs run: ~/{w}")),
            Err(e) => return refuse(e),
        }
    }
    if let (home::Layout::Separate(h), Some(hp)) = (&layout, &home_loaded) {
        let reach = if ws.starts_with(h) {
            home::check_reachable(h, &hp.policy, &ws)
        } else {
            home::check_reachable(&ws, &loaded.policy, h)
        };
        if let Err(e) = reach {
            return refuse(e);
        }
    }
    if let Some(log) = &opts.mount.audit
        && let Err(e) = crate::audit::check_outside(log, &ws)
    {
        return refuse(e);
    }
    // The notices file likewise: the person reads it, the command must not write it.
    if let Some(n) = &opts.notices
        && crate::audit::check_outside(n, &ws).is_err()
    {
        return refuse(format!(
            "the notices file {} is inside the workspace {}: the command could rewrite \
             it; write it outside",
            n.display(),
            ws.display()
        ));
    }
    if let Err(e) = crate::mount::check_fuse_device() {
        return refuse(e);
    }
    let command = if opts.command.is_empty() {
        vec![std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into())]
    } else {
        opts.command.clone()
    };
    if opts.user.is_some() && sys::euid() != 0 {
        return refuse("--user needs root");
    }
    let writable = match writable_dirs(&opts.writable) {
        Ok(w) => w,
        Err(e) => return refuse(e),
    };
    // Said now: in a user namespace this process would find root's runtime directory.
    let system = (!opts.system_writable).then(|| confine::ReadOnlySystem {
        writable: std::iter::once(ws.clone())
            .chain(match &layout {
                home::Layout::Separate(h) => Some(h.clone()),
                _ => None,
            })
            .chain(writable.iter().cloned())
            .collect(),
        runtime_dir: Some(crate::control::runtime_dir_path()),
    });
    let system_note = startup::system_note(system.is_some(), &writable);
    if !opts.without_landlock && !sockets::can_scope() {
        return refuse(format!(
            "this kernel cannot keep the command from the host's abstract sockets and \
             processes (Landlock ABI {} here, {} needed: Linux 6.12, with landlock in \
             the lsm= list); --without-landlock runs without that",
            sys::landlock_abi(),
            sockets::SCOPE_ABI
        ));
    }
    let allowed_sockets = match allowed_sockets(&opts.allow_socket) {
        Ok(a) => a,
        Err(e) => return refuse(e),
    };
    // The command's environment: the caller's, less what the environment policy
    // drops (names only are ever said). Still a plain list here, to be adjusted
    // before init is forked.
    let env_rules = match home::env_rules(opts.home_policy.as_deref()) {
        Ok(r) => r,
        Err(e) => return refuse(e),
    };
    let env_policy = match env::EnvPolicy::new(env_rules, &opts.keep_env, &opts.drop_env) {
        Ok(p) => p,
        Err(e) => return refuse(e),
    };
    let filtered = env_policy.apply_allowing(std::env::vars_os(), &allowed_sockets);
    let env_note = startup::env_note(&filtered.dropped);
    let mut command_env: Vec<(OsString, OsString)> = filtered.vars;
    // As another user, the command's `HOME` is that user's: the home directory the
    // home mount covers (or would).
    if opts.user.is_some()
        && let Some(h) = home::home_of(opts.user)
    {
        command_env.retain(|(k, _)| k != "HOME");
        command_env.push(("HOME".into(), h.into_os_string()));
    }
    // As another user, its own runtime directory (made in the private /run).
    if let Some((uid, _)) = opts.user
        && command_env.iter().any(|(k, _)| k == "XDG_RUNTIME_DIR")
    {
        command_env.retain(|(k, _)| k != "XDG_RUNTIME_DIR");
        command_env.push(("XDG_RUNTIME_DIR".into(), format!("/run/user/{uid}").into()));
    }
    let private = private_places_for(
        &opts,
        &ws,
        &layout,
        &writable,
        &cwd,
        &command_env,
        allowed_sockets,
    );
    let homes_note = startup::homes_note(&private.homes, &ws);
    let sockets_note = startup::sockets_note(&private, opts.without_landlock);

    // Said before a user namespace makes us root inside it.
    let as_root = if opts.user.is_none() && sys::euid() == 0 {
        startup::Note::new(
            "as root: `--user NAME` confines better",
            "as root: `--user NAME` confines it better",
        )
    } else {
        startup::Note::default()
    };
    let real_root = sys::euid() == 0;
    // The real workspace, opened before anything covers it.
    let root_fd = sys::open_dir_path(&ws).with_context(|| format!("opening {}", ws.display()))?;
    let home_fd = match &layout {
        home::Layout::Separate(h) => {
            Some(sys::open_dir_path(h).with_context(|| format!("opening {}", h.display()))?)
        }
        _ => None,
    };

    // `veilfs reload WS` from outside: bound while this process still sees the
    // caller's runtime directory as the caller does.
    let control = crate::control::bind_for_run(&ws);
    // Where refusal notices go while the command runs (never its terminal).
    let (notices, notices_note) = notice_destination(&opts);

    if let Err(e) = enter_namespaces() {
        return refuse(e);
    }

    let (ready_r, ready_w) = sys::pipe()?;
    // Init says there when the command stops (see `ending::wait`).
    let (stops_r, stops_w) = sys::pipe()?;
    let (tty, master) = match pty::open().context("opening a pty for the command")? {
        Some(p) => {
            let (t, m) = p.split();
            (Some(t), Some(m))
        }
        None => (None, None),
    };
    // SAFETY: no thread exists yet (the mounts, watchers and servers start below),
    // so forking here is sound.
    #[allow(unsafe_code)]
    let init = unsafe { sys::fork_new_pid_ns() }.context("creating the PID namespace")?;
    if init == 0 {
        drop(ready_w);
        drop(root_fd);
        drop(home_fd);
        drop(master);
        drop(stops_r);
        init::init_main(
            ready_r,
            &cwd,
            init::Program {
                argv: &command,
                env: &command_env,
            },
            opts.user,
            tty,
            real_root,
            init::Confinement {
                system: system.as_ref(),
                private: &private,
                scope: !opts.without_landlock,
            },
            stops_w,
        );
    }
    drop(ready_r);
    drop(stops_w);
    drop(tty);

    let source = loaded.source();
    let ws_policy_file = loaded.path.clone();
    let mut fs = match VeilFs::from_fd(root_fd, &ws, loaded.policy, loaded.path.as_deref()) {
        Ok(fs) => fs,
        Err(e) => {
            let _ = sys::kill(init, libc::SIGKILL);
            return refuse(format!("cannot serve {}: {e}", ws.display()));
        }
    };
    fs.set_notices(notices.clone());
    fs.guard_git();
    if let Some(base) = home_base {
        // The workspace is the home directory: every repository in it is guarded,
        // as in a home mount.
        fs.guard_git_everywhere();
        fs.set_policy_base(base);
        fs.set_policy_after(ws_after);
        let ways = home::guarded_ways(&ws, &fs.policy_handle().read().clone());
        fs.guard_ways(home::ways_under(&ws, &ways));
        for dir in home::config_dirs_under(&ws) {
            fs.guard_config_dir(&dir);
        }
    }
    let home_source = home_loaded.as_ref().map(config::home_source);
    let home_policy_file = home_loaded.as_ref().and_then(|h| h.path.clone());
    let mut home_fs = match (&layout, home_fd, home_loaded) {
        (home::Layout::Separate(h), Some(fd), Some(hp)) => {
            match VeilFs::from_fd(fd, h, hp.policy, hp.path.as_deref()) {
                Ok(mut hfs) => {
                    hfs.set_notices(notices.clone());
                    hfs.guard_git_everywhere();
                    hfs.set_policy_after(home_after);
                    let ways = home::guarded_ways(h, &hfs.policy_handle().read().clone());
                    let mut hways = home::ways_under(h, &ways);
                    // The way down to the workspace mount when it lies inside:
                    // never renamed, never invalidated by name (see `nested`).
                    hways.extend(home::nested(h, &ws, &hfs.inodes()));
                    hfs.guard_ways(hways);
                    // A workspace inside the home directory: the home policy holds
                    // there too (the stricter decision wins), with its ways and
                    // veilfs's configuration directory.
                    if let Ok(prefix) = ws.strip_prefix(h) {
                        use std::os::unix::ffi::OsStrExt;
                        fs.set_outer(crate::fs::protect::Outer {
                            prefix: prefix.as_os_str().as_bytes().to_vec(),
                            policy: hfs.policy_handle(),
                        });
                        fs.guard_ways(home::ways_under(&ws, &ways));
                        for dir in home::config_dirs_under(&ws) {
                            fs.guard_config_dir(&dir);
                        }
                    }
                    for dir in home::config_dirs_under(h) {
                        hfs.guard_config_dir(&dir);
                    }
                    // The home directory inside the workspace: the way down to it.
                    if h.starts_with(&ws) {
                        fs.guard_ways(home::nested(&ws, h, &fs.inodes()));
                    }
                    Some((h.clone(), hfs))
                }
                Err(e) => {
                    let _ = sys::kill(init, libc::SIGKILL);
                    return refuse(format!("cannot serve {}: {e}", h.display()));
                }
            }
        }
        _ => None,
    };
    // Taken by the waiting loop (see `ending`); blocked before any thread starts,
    // so that every thread inherits the mask.
    ending::block_signals()?;
    // Only processes in this private namespace can reach the mount; the command may
    // run under another uid (`--user`).
    // One audit log for both mounts, each event naming its root.
    let mount_opts = crate::mount::MountOptions {
        allow_other: true,
        reports: crate::mount::Reports::Log,
        audit: None,
        ..opts.mount.clone()
    };
    let mut audit_log = None;
    // The log's identity before anything is mounted over it, for the check at the end.
    let mut log_real: Option<(u64, u64)> = None;
    let audit = match &opts.mount.audit {
        Some(target) => {
            match crate::audit::Audit::start(target, opts.mount.audit_all, crate::audit::QUEUE) {
                Ok((a, w)) => {
                    fs.set_audit(a.for_root("workspace"));
                    if target.as_path() != std::path::Path::new("-") {
                        use std::os::unix::fs::MetadataExt;
                        log_real = std::fs::metadata(target).ok().map(|m| (m.dev(), m.ino()));
                    }
                    if let Some((h, hfs)) = &mut home_fs {
                        hfs.set_audit(a.for_root("home"));
                        // A log in the home directory: guarded by the home mount
                        // (a rename through it would drop the bind mount below).
                        if let (Some(rel), Some(key)) = (within(target, h), log_real) {
                            hfs.guard_audit_log(rel, key);
                        }
                    }
                    audit_log = Some(a);
                    Some(w)
                }
                Err(e) => {
                    let _ = sys::kill(init, libc::SIGKILL);
                    let _ = sys::wait(init, 0);
                    return refuse(format!("audit log {}: {e}", target.display()));
                }
            }
        }
        None => None,
    };
    // One broker for both mounts: `veilfs prompt` answers the session's questions
    // on its control socket.
    let broker = crate::fs::ask::Broker::new(
        format!("veilfs run (pid {})", std::process::id()),
        opts.mount.ask_timeout,
        audit_log,
    );
    fs.set_broker(broker.clone(), "workspace", &ws);
    if let Some((h, hfs)) = &mut home_fs {
        hfs.set_broker(broker.clone(), "home", h);
    }
    // The outer root first: the inner one is mounted through it.
    let mut roots = vec![(ws.clone(), fs)];
    if let Some(h) = home_fs {
        if ws.starts_with(&h.0) {
            roots.insert(0, h);
        } else {
            roots.push(h);
        }
    }
    // Inner first when unmounting.
    let mut sessions: Vec<(fuser::BackgroundSession, PathBuf)> = Vec::new();
    let mut stats = crate::control::Stats::default();
    let mut reloader = None;
    let mut asks = false;
    let mut held = Vec::new();
    for (root, fs) in roots {
        // `--permissive` tunes the workspace's policy; the home policy is enforced.
        let mut mount_opts = mount_opts.clone();
        mount_opts.permissive &= root == ws;
        let cfg = crate::mount::config(&root, &mount_opts);
        let live = match crate::mount::start(fs, &root, &cfg, &mount_opts) {
            Ok(live) => live,
            Err(e) => {
                let _ = sys::kill(init, libc::SIGKILL);
                let _ = sys::wait(init, 0);
                ending::unmount(sessions, audit);
                return refuse(format!("mounting over {} failed: {e}", root.display()));
            }
        };
        asks |= live.reloader.policy_asks();
        // Every mount's reloader lives as long as the session: its watching threads
        // hold it weakly.
        held.push(live.reloader.clone());
        if root == ws {
            reloader = Some(live.reloader);
        }
        stats = stats.mount(&root, live.session.request_counts());
        match live.session.spawn() {
            Ok(bg) => sessions.insert(0, (bg, root)),
            Err(e) => {
                let _ = sys::kill(init, libc::SIGKILL);
                let _ = sys::wait(init, 0);
                ending::unmount(sessions, audit);
                return refuse(format!("serving {} failed: {e}", root.display()));
            }
        }
    }
    let Some(reloader) = reloader else {
        anyhow::bail!("the workspace was not mounted");
    };
    // The policy files outside their own mount: read-only onto themselves in the
    // command's namespace (bound through whichever mount now covers them).
    for (file, root) in [
        (ws_policy_file.as_deref(), Some(ws.as_path())),
        (home_policy_file.as_deref(), home_root(&layout)),
    ] {
        if let (Some(file), Some(root)) = (file, root)
            && let Err(e) = confine::protect_policy_file(file, root)
        {
            let _ = sys::kill(init, libc::SIGKILL);
            let _ = sys::wait(init, 0);
            ending::unmount(sessions, audit);
            return refuse(e);
        }
    }
    // The audit log (outside the workspace, checked at start): read-only onto
    // itself in the command's namespace.
    let log_id = match &opts.mount.audit {
        Some(log) if log.as_path() != std::path::Path::new("-") => {
            match confine::protect_log(log) {
                Ok(()) => log_real.map(|id| (log.clone(), id)),
                Err(e) => {
                    let _ = sys::kill(init, libc::SIGKILL);
                    let _ = sys::wait(init, 0);
                    ending::unmount(sessions, audit);
                    return refuse(e);
                }
            }
        }
        _ => None,
    };
    // veilfs's configuration directory (where the next run's home policy comes
    // from) where no home mount guards it: read-only in the command's namespace.
    if let Err(e) = protect_config_dir(&layout, opts.system_writable, &writable, &ws) {
        let _ = sys::kill(init, libc::SIGKILL);
        let _ = sys::wait(init, 0);
        ending::unmount(sessions, audit);
        return refuse(e);
    }
    if !opts.quiet {
        let said = startup::Startup {
            running: format!(
                "running {} in {} ({found})",
                command[0].to_string_lossy(),
                ws.display()
            ),
            policy: startup::policy_note(&source, &walk),
            mode: startup::mode_note(&opts.mount, &layout),
            confined: vec![
                startup::home_note(&layout, home_source.as_deref()),
                homes_note,
                system_note,
                sockets_note,
                env_note,
            ],
            person: vec![
                startup::ask_note(asks, &opts.mount, &ws),
                as_root,
                notices_note,
            ],
        };
        if let Some(w) = &walk.warning {
            eprintln!("veilfs: warning: {}", crate::printable::escape(w));
        }
        // Paths and names from the command line and the tree: never a control
        // character raw.
        for line in said.lines(opts.verbose) {
            eprintln!("{}", crate::printable::escape(&line));
        }
    }

    let _control = control.and_then(|c| {
        c.with_stats(stats)
            .serve_run(reloader, broker.clone(), init)
    });
    let relay = match master {
        Some(m) => Some(m.relay().context("relaying the terminal")?),
        None => None,
    };
    sys::write_byte(ready_w.as_fd(), 1).context("starting the command")?;
    drop(ready_w);

    let status = ending::wait(
        init,
        stops_r,
        || {
            if let Some(r) = &relay {
                r.resize();
            }
        },
        || match &relay {
            Some(r) => {
                r.suspend();
                true
            }
            // No terminal: nobody to hand control to; whoever stopped the command
            // continues it.
            None => false,
        },
    );
    if let Some(r) = relay {
        r.finish(ending::TEARDOWN);
    }
    // Nothing waits on a person any more.
    broker.close();
    ending::unmount(sessions, audit);
    say_at_end(&opts, &ws, &broker, &notices);
    if let Some((log, id)) = log_id
        && !confine::log_still_there(&log, id)
    {
        eprintln!(
            "veilfs run: warning: the audit log {} is not the file this run wrote: its \
             directory was changed during the run (keep the log where the command cannot \
             write)",
            log.display()
        );
    }
    let status = status.context("waiting for the command")?;
    Ok(ExitCode::from(status.clamp(0, 255) as u8))
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

/// Keeps veilfs's configuration directories ([`config::config_dirs`]) read-only for
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
) -> Result<(), String> {
    for dir in config::config_dirs() {
        let abs = std::path::absolute(&dir).unwrap_or(dir.clone());
        // Guarded by the home mount when it lies in the home directory.
        let real = config::resolve_existing(&abs).unwrap_or_else(|| abs.clone());
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
) -> Result<(), String> {
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
            .map_err(|e| format!("cannot make {}: {e}", abs.display()))?;
    }
    confine::protect_dir(&abs).map_err(|e| format!("cannot protect {}: {e}", abs.display()))
}

/// The root the home policy file is protected under: the home mount's, or the
/// workspace's when the workspace is the home directory.
fn home_root(layout: &home::Layout) -> Option<&std::path::Path> {
    match layout {
        home::Layout::Same(h) | home::Layout::Separate(h) => Some(h),
        home::Layout::Uncovered(_) => None,
    }
}

/// Where refusal notices go under `run`: `--quiet`, the log; else the file
/// `--notices FILE`, or one in the runtime directory (the person's, out of the
/// command's view); on the terminal only when no file can be made. And what the
/// start-up line says of it.
fn notice_destination(opts: &RunOptions) -> (crate::fs::notice::Destination, startup::Note) {
    use crate::fs::notice::{Destination, SessionNotices};
    if opts.quiet {
        return (Destination::Log, startup::Note::default());
    }
    let path = opts.notices.clone().unwrap_or_else(|| {
        crate::control::runtime_dir_path().join(format!("notices-run-{}.log", std::process::id()))
    });
    match SessionNotices::create(&path) {
        Ok(s) => (
            Destination::Session(std::sync::Arc::new(s)),
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
    let unheard = broker.unheard();
    if unheard > 0 && !opts.quiet {
        eprintln!(
            "veilfs: {unheard} question{} of `ask` paths {} refused: nobody was \
             answering; start `veilfs prompt {}` in another terminal before the command asks",
            if unheard == 1 { "" } else { "s" },
            if unheard == 1 { "was" } else { "were" },
            crate::printable::escape(&ws.display().to_string())
        );
    }
    if let crate::fs::notice::Destination::Session(s) = notices {
        match s.summary() {
            // Names the command chose: never a control character raw.
            Some(said) => said
                .lines()
                .for_each(|l| eprintln!("{}", crate::printable::escape(l))),
            None if opts.notices.is_none() => {
                let _ = std::fs::remove_file(&s.path);
            }
            None => {}
        }
    }
}

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
fn allowed_sockets(given: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    given
        .iter()
        .map(|p| {
            p.canonicalize()
                .map_err(|e| format!("--allow-socket {}: {e}", p.display()))
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
        config::config_dirs()
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
fn writable_dirs(given: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    given
        .iter()
        .map(|d| match d.canonicalize() {
            Ok(c) if c.is_dir() => Ok(c),
            Ok(_) => Err(format!("--writable {}: not a directory", d.display())),
            Err(e) => Err(format!("--writable {}: {e}", d.display())),
        })
        .collect()
}

/// A private mount namespace, inside a new user namespace (mapping the caller to
/// root) when the caller is not root.
fn enter_namespaces() -> Result<(), String> {
    if sys::euid() == 0 {
        sys::unshare(libc::CLONE_NEWNS)
            .map_err(|e| format!("cannot create a mount namespace: {e}"))?;
    } else {
        let (uid, gid) = (sys::getuid(), sys::getgid());
        sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).map_err(|e| {
            format!(
                "cannot create a user namespace as uid {uid}: {e} (unprivileged user \
                 namespaces must be enabled: sysctl user.max_user_namespaces > 0, \
                 kernel.unprivileged_userns_clone=1 where it exists, and no AppArmor \
                 restriction such as kernel.apparmor_restrict_unprivileged_userns=1)"
            )
        })?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("0 {uid} 1"))?;
        write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    }
    sys::make_mounts_private().map_err(|e| format!("cannot make mounts private: {e}"))
}
