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
//! A session is planned, then executed. `plan` decides everything before anything
//! starts (the workspace, the policies, the confinement) and lists the session's
//! steps in order (`step`: open the roots, bind the control socket, enter the
//! namespaces, fork init, build and mount the filesystems, protect the files the
//! command must not change, start the command, wait, release, report); `execute`
//! takes them in one loop, and whatever a step takes is held by one value
//! (`taken`) that releases it, in one order, on every way out. `--dry-run` prints
//! the plan.
//!
//! `run` always ends (`ending`): with the command's status, or 128+N on signal N.
//!
//! When the daemon exits, its mount namespace (and so the mount) disappears; outside
//! it nothing was ever mounted.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::sys;
use crate::workspace::load;

mod confine;
mod ending;
pub mod home;
pub use home::{config_dirs_under, home_of};
pub mod env;
mod error;
mod execute;
mod init;
pub mod net;
mod plan;
mod private;
mod pty;
mod serve;
mod sockets;
mod startup;
mod step;
mod supervise;
mod taken;
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
    /// `--net`: what the command may reach on the network (`None`: not given).
    pub net: Option<net::NetArg>,
    /// `--agent NAME` (`none`: no profile; `None`: found from the policy or the
    /// command's name).
    pub agent: Option<String>,
    pub command: Vec<OsString>,
    /// Caching and passthrough (the other fields are not used by `run`).
    pub mount: crate::session::mount::MountOptions,
}

/// The command and its arguments: as given, else `$SHELL` (else `/bin/sh`).
pub(crate) fn command_of(opts: &RunOptions) -> Vec<OsString> {
    if opts.command.is_empty() {
        vec![std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into())]
    } else {
        opts.command.clone()
    }
}

/// `--agent`: a profile's name, or `none`.
pub fn parse_agent(text: &str) -> Result<String, AgentError> {
    match text {
        "none" => Ok(text.into()),
        _ if crate::policy::agents::profile(text).is_some() => Ok(text.into()),
        _ => Err(AgentError(crate::policy::agents::names())),
    }
}

/// Why `--agent` names no profile.
#[derive(Debug, thiserror::Error)]
#[error("no such agent profile: the profiles are {0}, or `none`")]
pub struct AgentError(String);

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

/// Runs the command; the exit code is the command's (128+N for signal N): the
/// session planned (module `plan`), then its steps taken (module `execute`). With
/// `--dry-run`, the plan is said and nothing starts.
pub fn run(opts: RunOptions) -> Result<ExitCode> {
    let plan = match plan::plan(opts) {
        Ok(plan) => plan,
        Err(e) => return said(e),
    };
    if plan.settings.opts.dry_run {
        plan.say();
        return Ok(ExitCode::SUCCESS);
    }
    execute::execute(plan).or_else(said)
}

/// How `run` ends short of the command's end (see [`error`]): a refusal said as
/// `veilfs run: WHY` (exit 2); a failure returned, for `main` to say with its
/// causes (exit 2).
fn said(e: error::RunError) -> Result<ExitCode> {
    match e {
        error::RunError::Failed(failure) => Err(failure.into()),
        refused => {
            eprintln!(
                "veilfs run: {}",
                crate::escape::escape(&refused.to_string())
            );
            Ok(ExitCode::from(2))
        }
    }
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
