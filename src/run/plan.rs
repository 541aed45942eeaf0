//! What a `veilfs run` session is made of, decided before anything starts: the
//! workspace, and the policies of the workspace and home mounts (loaded, their
//! link aliases and imports attached, checked to reach each other). Nothing here
//! mounts, forks or changes the system; a refusal is a message for the person.

use std::path::{Path, PathBuf};

use super::{RunOptions, home};
use crate::sys;
use crate::workspace::load;

/// Why `run` refuses the session it was asked for, before anything starts. Each is
/// said as it is to the person (`veilfs run: ...`).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// `--workspace` is not a directory.
    #[error("workspace {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// No workspace could be found from the current directory.
    #[error("{0}")]
    NoWorkspace(load::WorkspaceError),
    /// `--permissive` where the workspace is the home directory.
    #[error(
        "--permissive tunes a workspace's policy, and this workspace is the home \
         directory, whose policy is always enforced: run it in a project directory"
    )]
    PermissiveHome,
    /// The home directory's policy, or its place beside the workspace.
    #[error(transparent)]
    Home(#[from] home::HomeError),
    /// The workspace policy could not be found, read or compiled.
    #[error("{0}")]
    Policy(load::ConfigError),
    /// An ignore file a policy imports could not be read.
    #[error("{0}")]
    Imports(crate::workspace::imports::ImportError),
    /// The audit log lies where the command could rewrite it.
    #[error("{0}")]
    AuditInside(crate::session::audit::AuditError),
    /// The notices file lies where the command could rewrite it.
    #[error(
        "the notices file {} is inside the workspace {}: the command could rewrite \
         it; write it outside",
        notices.display(),
        ws.display()
    )]
    NoticesInside { notices: PathBuf, ws: PathBuf },
    /// FUSE cannot be used here.
    #[error("{0}")]
    Fuse(crate::session::mount::MountError),
    #[error("--user needs root")]
    UserNeedsRoot,
    /// A `--writable` directory that is not one.
    #[error("--writable {}: not a directory", .0.display())]
    WritableNotADirectory(PathBuf),
    /// A `--writable` directory that cannot be found.
    #[error("--writable {}: {cause}", dir.display())]
    Writable { dir: PathBuf, cause: std::io::Error },
    /// An `--allow-socket` path that cannot be found.
    #[error("--allow-socket {}: {cause}", path.display())]
    AllowSocket {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The kernel lacks Landlock's scopes, and `--without-landlock` was not given.
    #[error(
        "this kernel cannot keep the command from the host's abstract sockets and \
         processes (Landlock ABI {abi} here, {needed} needed: Linux 6.12, with landlock in \
         the lsm= list); --without-landlock runs without that"
    )]
    NoLandlock { abi: u32, needed: u32 },
    /// The environment policy.
    #[error(transparent)]
    Env(#[from] super::env::EnvError),
}

/// The workspace `run` polices, and how it was found: `--workspace`, else found
/// from the current directory `cwd` as git finds its repository
/// ([`load::find_workspace`]). Warnings about markers passed over are said here.
pub(super) fn workspace(
    opts: &RunOptions,
    cwd: &Path,
) -> Result<(PathBuf, load::Found), PlanError> {
    if let Some(w) = &opts.workspace {
        return match w.canonicalize() {
            Ok(p) if p.is_dir() => Ok((p, load::Found::Given)),
            _ => Err(PlanError::NotADirectory(w.clone())),
        };
    }
    let start = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    // Root running the command as another user trusts that user's `.git`: the
    // README's recipe gives the project to the user.
    let git_owner = opts.user.filter(|_| sys::euid() == 0).map(|(uid, _)| uid);
    let (ws, found, warnings) =
        load::find_workspace(&start, git_owner).map_err(PlanError::NoWorkspace)?;
    for w in warnings {
        eprintln!("veilfs run: {w}");
    }
    Ok((ws, found))
}

/// The policies of a session, ready to serve.
pub(super) struct Policies {
    /// Where the home directory lies, and whether it gets a mount of its own.
    pub layout: home::Layout,
    /// The home policy (`None`: no home mount).
    pub home: Option<load::LoadedPolicy>,
    /// The workspace is the home directory: the home policy's rules, under the
    /// workspace's.
    pub home_base: Option<crate::policy::RawPolicy>,
    /// The workspace's policy, its imports attached.
    pub workspace: load::LoadedPolicy,
    /// Rules for the targets of links the home policy hides by name, after each
    /// mount's own rules.
    pub workspace_after: Vec<crate::policy::RawRule>,
    pub home_after: Vec<crate::policy::RawRule>,
    /// What the workspace policy hides, for the start-up lines (empty with `-q`).
    pub walk: crate::workspace::walk::StartupWalk,
}

/// Loads the policies of the session of workspace `ws`, in the order the mounts
/// need them: the home policy, the workspace's (stacked on the home policy when
/// the workspace is the home directory), the aliases of links, then the imported
/// ignore files, read before anything covers them.
pub(super) fn policies(opts: &RunOptions, ws: &Path) -> Result<Policies, PlanError> {
    let layout = if opts.no_home {
        home::Layout::Uncovered("--no-home".into())
    } else {
        home::layout(home::home_of(opts.user), ws)
    };
    if opts.mount.permissive && matches!(layout, home::Layout::Same(_)) {
        return Err(PlanError::PermissiveHome);
    }
    let mut home_loaded = match &layout {
        home::Layout::Uncovered(_) => None,
        _ => Some(home::load_policy(opts.home_policy.as_deref())?),
    };
    // The workspace is the home directory: one mount, the workspace policy stacked
    // on the home policy.
    let home_base = match (&layout, &home_loaded) {
        (home::Layout::Same(_), Some(h)) => Some(home::raw_policy(h)?),
        _ => None,
    };
    let mut loaded = match &home_base {
        Some(base) => load::load_policy_on(base, opts.policy.as_deref(), ws),
        None => load::load_policy(opts.policy.as_deref(), ws),
    }
    .map_err(PlanError::Policy)?;
    // The targets of links the home policy hides by name are hidden too.
    let (workspace_after, home_after) = match (&layout, &mut home_loaded) {
        (home::Layout::Same(h), Some(_)) => (
            home::with_aliases(h, &mut loaded, home_base.as_ref(), home::WS_BUILTIN)?,
            Vec::new(),
        ),
        (home::Layout::Separate(h), Some(hp)) => (
            Vec::new(),
            home::with_aliases(h, hp, None, home::HOME_BUILTIN)?,
        ),
        _ => (Vec::new(), Vec::new()),
    };
    // The ignore files the workspace policy imports, read before anything covers
    // them (after every recompilation above).
    let warnings =
        crate::workspace::imports::attach(&mut loaded.policy, ws).map_err(PlanError::Imports)?;
    warnings.iter().for_each(|w| eprintln!("veilfs run: {w}"));
    let walk = said_of(opts, &loaded, ws);
    // And those the home policy imports, in the home directory.
    if let (home::Layout::Separate(h), Some(hp)) = (&layout, &mut home_loaded) {
        let warnings =
            crate::workspace::imports::attach(&mut hp.policy, h).map_err(PlanError::Imports)?;
        warnings.iter().for_each(|w| eprintln!("veilfs run: ~/{w}"));
    }
    if let (home::Layout::Separate(h), Some(hp)) = (&layout, &home_loaded) {
        if ws.starts_with(h) {
            home::check_reachable(h, &hp.policy, ws)?;
        } else {
            home::check_reachable(ws, &loaded.policy, h)?;
        }
    }
    Ok(Policies {
        layout,
        home: home_loaded,
        home_base,
        workspace: loaded,
        workspace_after,
        home_after,
        walk,
    })
}

/// What is said of the workspace policy before mounting: what it hides (for the
/// start-up lines, unless `-q`), and, whatever `-q` says, a warning when it came
/// with the repository and leaves the usual secrets open.
fn said_of(
    opts: &RunOptions,
    loaded: &load::LoadedPolicy,
    ws: &Path,
) -> crate::workspace::walk::StartupWalk {
    let walk = if opts.quiet {
        crate::workspace::walk::StartupWalk::default()
    } else {
        crate::workspace::walk::StartupWalk::of(&loaded.policy, ws)
    };
    if let Some(w) = loaded
        .path
        .as_deref()
        .and_then(|f| crate::workspace::walk::committed_policy_warning(&loaded.policy, ws, f))
    {
        eprintln!("veilfs run: warning: {w}");
    }
    walk
}

/// How the command is confined beyond the mounts, decided before anything starts.
pub(super) struct Confinement {
    /// The command and its arguments (`$SHELL` when none was given).
    pub command: Vec<std::ffi::OsString>,
    /// `--writable` directories, canonical.
    pub writable: Vec<PathBuf>,
    /// The system outside the workspace read-only, but for these (`None`:
    /// `--system-writable`).
    pub system: Option<super::confine::ReadOnlySystem>,
    /// The command's environment.
    pub command_env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The command's private places (`/tmp`, `/run`, the person's homes).
    pub private: super::private::Private,
    /// What the start-up lines say of the person's homes, the system, the
    /// sockets and the environment, in that order.
    pub notes: [super::startup::Note; 4],
}

/// Checks what `opts` asks for against the workspace `ws` and this machine, and
/// decides the confinement: the system read-only, the sockets, the environment, the
/// private places.
pub(super) fn confinement(
    opts: &RunOptions,
    ws: &Path,
    layout: &home::Layout,
    cwd: &Path,
) -> Result<Confinement, PlanError> {
    use super::{env, sockets, startup};
    outputs_outside(opts, ws)?;
    crate::session::mount::check_fuse_device().map_err(PlanError::Fuse)?;
    let command = if opts.command.is_empty() {
        vec![std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into())]
    } else {
        opts.command.clone()
    };
    if opts.user.is_some() && sys::euid() != 0 {
        return Err(PlanError::UserNeedsRoot);
    }
    let writable = super::writable_dirs(&opts.writable)?;
    // Said now: in a user namespace this process would find root's runtime directory.
    let system = (!opts.system_writable).then(|| super::confine::ReadOnlySystem {
        writable: std::iter::once(ws.to_path_buf())
            .chain(match layout {
                home::Layout::Separate(h) => Some(h.clone()),
                _ => None,
            })
            .chain(writable.iter().cloned())
            .collect(),
        runtime_dir: Some(crate::session::control::runtime_dir_path()),
    });
    let system_note = startup::system_note(system.is_some(), &writable);
    if !opts.without_landlock && !sockets::can_scope() {
        return Err(PlanError::NoLandlock {
            abi: sys::landlock_abi(),
            needed: sockets::SCOPE_ABI,
        });
    }
    let allowed_sockets = super::allowed_sockets(&opts.allow_socket)?;
    // The command's environment: the caller's, less what the environment policy
    // drops (names only are ever said).
    let env_rules = home::env_rules(opts.home_policy.as_deref())?;
    let env_policy = env::EnvPolicy::new(env_rules, &opts.keep_env, &opts.drop_env)?;
    let filtered = env_policy.apply_allowing(std::env::vars_os(), &allowed_sockets);
    let env_note = startup::env_note(&filtered.dropped);
    let command_env = as_the_user(opts, filtered.vars);
    let private = super::private_places_for(
        opts,
        ws,
        layout,
        &writable,
        cwd,
        &command_env,
        allowed_sockets,
    );
    let homes_note = startup::homes_note(&private.homes, ws);
    let sockets_note = startup::sockets_note(&private, opts.without_landlock);
    Ok(Confinement {
        command,
        writable,
        system,
        command_env,
        private,
        notes: [homes_note, system_note, sockets_note, env_note],
    })
}

/// The audit log and the notices file are read by the person: neither may lie in
/// the workspace, where the command could rewrite it.
fn outputs_outside(opts: &RunOptions, ws: &Path) -> Result<(), PlanError> {
    if let Some(log) = &opts.mount.audit {
        crate::session::audit::check_outside(log, ws).map_err(PlanError::AuditInside)?;
    }
    if let Some(n) = &opts.notices
        && crate::session::audit::check_outside(n, ws).is_err()
    {
        return Err(PlanError::NoticesInside {
            notices: n.clone(),
            ws: ws.to_path_buf(),
        });
    }
    Ok(())
}

/// `vars`, and as another user (`--user`) that user's `HOME` (the home directory
/// the home mount covers, or would) and its own runtime directory (made in the
/// private `/run`).
fn as_the_user(
    opts: &RunOptions,
    mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    if opts.user.is_some()
        && let Some(h) = home::home_of(opts.user)
    {
        vars.retain(|(k, _)| k != "HOME");
        vars.push(("HOME".into(), h.into_os_string()));
    }
    if let Some((uid, _)) = opts.user
        && vars.iter().any(|(k, _)| k == "XDG_RUNTIME_DIR")
    {
        vars.retain(|(k, _)| k != "XDG_RUNTIME_DIR");
        vars.push(("XDG_RUNTIME_DIR".into(), format!("/run/user/{uid}").into()));
    }
    vars
}
