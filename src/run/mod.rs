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
//!   its own (so the daemon's `/proc/<pid>/fd` is not there to be found), starts the
//!   command, forwards signals to it, reaps orphans, and exits with the command's
//!   status;
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
pub mod env;
mod init;
mod pty;

/// Capabilities the command never gets back: each one could undo or bypass the
/// overlay (unmount or bind-mount, open by handle, read another process's
/// descriptors, raw devices, kernel modules and BPF).
pub const DROPPED_CAPS: [u32; 8] = [
    2,  // CAP_DAC_READ_SEARCH: open_by_handle_at
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    19, // CAP_SYS_PTRACE
    21, // CAP_SYS_ADMIN: mount, umount, setns
    27, // CAP_MKNOD: raw block devices
    38, // CAP_PERFMON
    39, // CAP_BPF
];

/// What `veilfs run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub policy: Option<PathBuf>,
    /// `None`: found from the current directory ([`config::find_workspace`]).
    pub workspace: Option<PathBuf>,
    pub quiet: bool,
    pub user: Option<(u32, u32)>,
    /// `--keep-env` and `--drop-env`: names or globs (see [`mod@env`]).
    pub keep_env: Vec<String>,
    pub drop_env: Vec<String>,
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
    eprintln!("veilfs run: {msg}");
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
            let (ws, found, warnings) = config::find_workspace(&start);
            for w in warnings {
                eprintln!("veilfs run: {w}");
            }
            (ws, found)
        }
    };
    let loaded = match config::load_policy(opts.policy.as_deref(), &ws) {
        Ok(l) => l,
        Err(e) => return refuse(e),
    };
    if let Some(log) = &opts.mount.audit
        && let Err(e) = crate::audit::check_outside(log, &ws)
    {
        return refuse(e);
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
    // The command's environment: the caller's, less what the environment policy
    // drops (names only are ever said). Still a plain list here, to be adjusted
    // before init is forked.
    let env_policy = match env::EnvPolicy::new(
        env::EnvRules::default(), // the home policy's `[env]` table goes here
        &opts.keep_env,
        &opts.drop_env,
    ) {
        Ok(p) => p,
        Err(e) => return refuse(e),
    };
    let filtered = env_policy.apply(std::env::vars_os());
    let env_note = env::startup_note(&filtered.dropped);
    let command_env: Vec<(OsString, OsString)> = filtered.vars;

    // Said before a user namespace makes us root inside it.
    let as_root = if opts.user.is_none() && sys::euid() == 0 {
        "; as root: `--user NAME` confines it better"
    } else {
        ""
    };
    let real_root = sys::euid() == 0;
    // The real workspace, opened before anything covers it.
    let root_fd = sys::open_dir_path(&ws).with_context(|| format!("opening {}", ws.display()))?;

    // `veilfs reload WS` from outside: bound while this process still sees the
    // caller's runtime directory as the caller does.
    let control = crate::control::bind_for_run(&ws);

    if let Err(e) = enter_namespaces() {
        return refuse(e);
    }
    if let Some(file) = &loaded.path
        && let Err(e) = confine::protect_policy_file(file, &ws)
    {
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
    // No thread exists yet: forking here is safe.
    let init = sys::fork_new_pid_ns().context("creating the PID namespace")?;
    if init == 0 {
        drop(ready_w);
        drop(root_fd);
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
            stops_w,
        );
    }
    drop(ready_r);
    drop(stops_w);
    drop(tty);

    let source = loaded.source();
    let fs = match VeilFs::from_fd(root_fd, &ws, loaded.policy, loaded.path.as_deref()) {
        Ok(fs) => fs,
        Err(e) => {
            let _ = sys::kill(init, libc::SIGKILL);
            return refuse(format!("cannot serve {}: {e}", ws.display()));
        }
    };
    fs.set_quiet_notices(opts.quiet);
    fs.guard_git();
    // Taken by the waiting loop (see `ending`); blocked before any thread starts,
    // so that every thread inherits the mask.
    ending::block_signals()?;
    // Only processes in this private namespace can reach the mount; the command may
    // run under another uid (`--user`).
    let mount_opts = crate::mount::MountOptions {
        allow_other: true,
        reports: crate::mount::Reports::Log,
        ..opts.mount.clone()
    };
    let cfg = crate::mount::config(&ws, &mount_opts);
    let (session, audit, reloader) = match crate::mount::start(fs, &ws, &cfg, &mount_opts) {
        Ok(live) => (live.session, live.audit, live.reloader),
        Err(e) => {
            let _ = sys::kill(init, libc::SIGKILL);
            let _ = sys::wait(init, 0);
            return refuse(format!("mounting over {} failed: {e}", ws.display()));
        }
    };
    if !opts.quiet {
        eprintln!(
            "veilfs: running {} in {} ({found}) with policy {}{as_root}{env_note}",
            command[0].to_string_lossy(),
            ws.display(),
            source
        );
    }

    let bg = session.spawn().context("starting the request loop")?;
    let _control = control.and_then(|c| c.serve_run(reloader, init));
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
    ending::unmount(bg, audit, &ws);
    let status = status.context("waiting for the command")?;
    Ok(ExitCode::from(status.clamp(0, 255) as u8))
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
