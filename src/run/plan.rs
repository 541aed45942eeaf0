//! What a `veilfs run` session is made of, decided before anything starts: the
//! workspace, the policies of the workspace and home mounts (loaded, their link
//! aliases and imports attached, checked to reach each other), the confinement,
//! and the ordered steps that set the session up, run the command and end it
//! ([`Plan`]; the steps are [`super::step::Step`]s, taken by [`super::execute`]).
//! Nothing here mounts, forks or changes the system; a refusal is a message for
//! the person.

use std::path::{Path, PathBuf};

use super::error::{Failure, RunError};
use super::step::{InitPlan, NoticesTo, PolicyOf, Step};
use super::{RunOptions, home, startup};
use crate::policy::agents::Profile;
use crate::sys;
use crate::workspace::load;

/// A session, planned: what every step reads, and the steps in order.
#[derive(Debug)]
pub(super) struct Plan {
    pub settings: Settings,
    /// Some path of the session's policies asks a person (what `--dry-run` says;
    /// the session itself learns it from its mounts).
    pub asks: bool,
    pub steps: Vec<Step>,
}

/// What the steps of a session read, decided with its plan.
#[derive(Debug)]
pub(super) struct Settings {
    pub opts: RunOptions,
    /// The workspace, canonical.
    pub ws: PathBuf,
    /// Where the home directory lies, and whether it gets a mount of its own.
    pub layout: home::Layout,
    /// What the start-up lines say of the session.
    pub facts: startup::Facts,
}

/// Plans the session `opts` asks for, or says why `run` refuses it: every check
/// and decision made before anything starts (as `--dry-run` shows them).
pub(super) fn plan(opts: RunOptions) -> Result<Plan, RunError> {
    super::confine::check_inherited_fds()?;
    let cwd = std::env::current_dir().map_err(Failure::CurrentDir)?;
    let (ws, found) = workspace(&opts, &cwd)?;
    let Policies {
        layout,
        agent,
        walk,
        served,
    } = policies(&opts, &ws)?;
    let mut conf = confinement(&opts, &ws, &layout, &cwd)?;
    let network = network(&opts, served.workspace.path.as_deref())?;
    if let super::net::Network::Proxied(_) = &network {
        conf.command_env = super::net::with_proxy_env(std::mem::take(&mut conf.command_env));
    }
    let facts = startup::Facts {
        command: conf.command[0].clone(),
        ws: ws.clone(),
        found,
        policy: startup::policy_note(&served.workspace.source(), &walk),
        mode: startup::mode_note(&opts.mount, &layout),
        confined: std::iter::once(startup::home_note(
            &layout,
            served.home.as_ref().map(load::home_source).as_deref(),
        ))
        .chain(conf.notes.iter().cloned())
        .chain(std::iter::once(network.note(opts.mount.permissive)))
        .chain(agent.map(|(p, from)| startup::agent_note(p, from)))
        .collect(),
        // Said before a user namespace makes us root inside it.
        as_root: startup::as_root_note(opts.user.is_none() && sys::euid() == 0),
        warning: walk.warning.clone(),
    };
    let asks =
        served.workspace.policy.asks() || served.home.as_ref().is_some_and(|h| h.policy.asks());
    let settings = Settings {
        opts,
        ws,
        layout,
        facts,
    };
    let steps = steps(&settings, cwd, served, conf, network);
    Ok(Plan {
        settings,
        asks,
        steps,
    })
}

/// The steps of the session of `s`, in order (see [`super::step`] for what stays
/// true of it): its command started from `cwd`, served under the `policies`,
/// confined by `conf`.
fn steps(
    s: &Settings,
    cwd: PathBuf,
    policies: super::serve::Policies,
    conf: Confinement,
    network: super::net::Network,
) -> Vec<Step> {
    let opts = &s.opts;
    let home_root = super::home_root(&s.layout).map(Path::to_path_buf);
    let policy_files = [
        (
            PolicyOf::Workspace,
            policies.workspace.path.clone(),
            Some(s.ws.clone()),
        ),
        (
            PolicyOf::Home,
            policies.home.as_ref().and_then(|h| h.path.clone()),
            home_root,
        ),
    ];
    let notices = notices_to(
        opts,
        super::notice_places(
            &s.ws,
            &s.layout,
            &policies.workspace,
            policies.home.as_ref(),
        ),
    );
    let mut steps = vec![
        Step::OpenRoots {
            home: match &s.layout {
                home::Layout::Separate(h) => Some(h.clone()),
                _ => None,
            },
        },
        Step::BindControl,
        Step::Notices(notices),
        Step::EnterNamespaces {
            user: (sys::euid() != 0).then(|| (sys::getuid(), sys::getgid())),
        },
        Step::ForkInit(Box::new(InitPlan {
            cwd,
            argv: conf.command,
            env: conf.command_env,
            user: opts.user,
            real_root: sys::euid() == 0,
            system: conf.system,
            private: conf.private,
            scope: !opts.without_landlock,
            net: network.clone(),
        })),
        Step::BlockSignals,
        Step::StartLogs,
        Step::BuildFilesystems(Box::new(policies)),
    ];
    if let super::net::Network::Proxied(rules) = network {
        steps.push(Step::StartProxy(Box::new(rules)));
    }
    steps.push(Step::Mount);
    for (of, file, root) in policy_files {
        if let (Some(file), Some(root)) = (file, root) {
            steps.push(Step::ProtectPolicyFile { of, file, root });
        }
    }
    steps.extend([
        Step::ProtectLogs,
        Step::ProtectConfigDirs {
            writable: conf.writable,
            system_writable: opts.system_writable,
        },
        Step::SayRunning,
        Step::ServeControl,
        Step::StartCommand,
        Step::Wait,
        Step::Release,
        Step::Report,
    ]);
    steps
}

/// Where refusal notices go under `run`: `--quiet`, the log; else the file
/// `--notices FILE`, or one in the runtime directory (the person's, out of the
/// command's view).
fn notices_to(opts: &RunOptions, places: crate::fs::notice::Places) -> NoticesTo {
    if opts.quiet {
        return NoticesTo::Log;
    }
    let path = opts.notices.clone().unwrap_or_else(|| {
        crate::session::control::runtime_dir_path()
            .join(format!("notices-run-{}.log", std::process::id()))
    });
    NoticesTo::File {
        path,
        named: opts.notices.is_some(),
        places,
    }
}

impl Plan {
    /// `--dry-run`: the start-up lines in full, of the session that would run,
    /// then its steps, one line each; nothing was started.
    pub fn say(&self) {
        let Settings { opts, facts, .. } = &self.settings;
        let notices = match &opts.notices {
            Some(n) => format!("refusal notices in {}", n.display()),
            None => format!(
                "refusal notices in a file of {}",
                crate::session::control::runtime_dir_path().display()
            ),
        };
        let ask = startup::ask_note(self.asks, &opts.mount, &facts.ws);
        facts.say("would run", (ask, startup::Note::same(notices)), true);
        eprintln!("veilfs: the steps it would take:");
        for (n, step) in self.steps.iter().enumerate() {
            eprintln!("veilfs:   {}. {}", n + 1, step.describe(&self.settings));
        }
    }
}

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
    /// The `[network]` table of the workspace policy cannot be read.
    #[error(transparent)]
    NetworkTable(load::NetworkTableError),
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
fn workspace(opts: &RunOptions, cwd: &Path) -> Result<(PathBuf, load::Found), PlanError> {
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
struct Policies {
    /// Where the home directory lies, and whether it gets a mount of its own.
    layout: home::Layout,
    /// The agent whose profile both mounts hold, and how it was chosen.
    agent: Option<(&'static Profile, AgentFrom)>,
    /// What the workspace policy hides, for the start-up lines (empty with `-q`).
    walk: crate::workspace::walk::StartupWalk,
    /// The policies the filesystems serve.
    served: super::serve::Policies,
}

/// Loads the policies of the session of workspace `ws`, in the order the mounts
/// need them: the home policy, the workspace's (stacked on the home policy when
/// the workspace is the home directory), the aliases of links, then the imported
/// ignore files, read before anything covers them.
fn policies(opts: &RunOptions, ws: &Path) -> Result<Policies, PlanError> {
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
    // The agent's profile, in both mounts, before anything compiles them again.
    let home_dir = match &layout {
        home::Layout::Separate(h) | home::Layout::Same(h) => Some(h.as_path()),
        home::Layout::Uncovered(_) => None,
    };
    let agent = agent_of(
        opts,
        &loaded.policy,
        home_loaded.as_ref().map(|h| &h.policy),
    )
    .map(|(p, from)| (moved(p, home_dir), from));
    // Its state and login in the home directory's policy (what it runs later is
    // held by a guard in both mounts, see `serve`).
    if let Some((p, _)) = agent {
        match (&layout, &mut home_loaded) {
            (home::Layout::Separate(_), Some(hp)) => {
                load::with_agent(hp, None, home::HOME_BUILTIN, p).map_err(PlanError::Policy)?
            }
            (home::Layout::Same(_), _) => {
                load::with_agent(&mut loaded, home_base.as_ref(), home::WS_BUILTIN, p)
                    .map_err(PlanError::Policy)?
            }
            _ => {}
        }
    }
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
        agent,
        walk,
        served: super::serve::Policies {
            agent: agent.map(|(p, _)| p),
            workspace: loaded,
            home_base,
            workspace_after,
            home: home_loaded,
            home_after,
        },
    })
}

/// How the session's agent was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AgentFrom {
    /// `--agent NAME`.
    Given,
    /// `extends = "agent:NAME"` in the workspace policy.
    Policy,
    /// The command's name.
    Command,
}

/// The session's agent: `--agent` (`none`: no profile), else the one the workspace
/// policy (or the home policy) extends, else the one the command's name starts.
fn agent_of(
    opts: &RunOptions,
    ws_policy: &crate::policy::Policy,
    home_policy: Option<&crate::policy::Policy>,
) -> Option<(&'static Profile, AgentFrom)> {
    use crate::policy::agents;
    let named = ws_policy
        .agents()
        .first()
        .or_else(|| home_policy.and_then(|h| h.agents().first()));
    match opts.agent.as_deref() {
        Some("none") => None,
        Some(name) => agents::profile(name).map(|p| (p, AgentFrom::Given)),
        None => match named {
            Some(name) => agents::profile(name).map(|p| (p, AgentFrom::Policy)),
            None => agents::detect(&super::command_of(opts)[0]).map(|p| (p, AgentFrom::Command)),
        },
    }
}

/// The profile `p` held where the variable that moves its directory puts it too,
/// when that lies in the home directory `home` (elsewhere it is read-only with the
/// rest of the system, or a `--writable` place the person chose).
fn moved(p: &'static Profile, home: Option<&Path>) -> &'static Profile {
    let (Some((var, _, _)), Some(home)) = (p.moved_by, home) else {
        return p;
    };
    let Some(value) = std::env::var_os(var).map(PathBuf::from) else {
        return p;
    };
    let value = std::path::absolute(&value).unwrap_or(value);
    let value = load::resolve_existing(&value).unwrap_or(value);
    let Some(rel) = value
        .strip_prefix(home)
        .ok()
        .and_then(Path::to_str)
        .filter(|r| !r.is_empty())
    else {
        return p;
    };
    let text = crate::policy::agents::relocated_text(p, rel);
    // Made once per session, and kept as long as its policies (reloads included).
    Box::leak(Box::new(Profile {
        text: Box::leak(text.into_boxed_str()),
        ..*p
    }))
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
fn confinement(
    opts: &RunOptions,
    ws: &Path,
    layout: &home::Layout,
    cwd: &Path,
) -> Result<Confinement, PlanError> {
    use super::{env, sockets, startup};
    outputs_outside(opts, ws)?;
    crate::session::mount::check_fuse_device().map_err(PlanError::Fuse)?;
    let command = super::command_of(opts);
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

/// The command's network: `--net`, and the `[network]` table of the workspace
/// policy file `file` (see [`super::net::Network::decide`]).
fn network(opts: &RunOptions, file: Option<&Path>) -> Result<super::net::Network, PlanError> {
    let table = load::network_table(file).map_err(PlanError::NetworkTable)?;
    Ok(super::net::Network::decide(opts.net.as_ref(), table))
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

#[cfg(test)]
mod tests {
    use super::super::net::Network;
    use super::*;

    /// The options of a plain `veilfs run -- true`, with `policy` and
    /// `home_policy` files.
    fn options(policy: Option<PathBuf>, home_policy: Option<PathBuf>) -> RunOptions {
        RunOptions {
            policy,
            workspace: None,
            quiet: false,
            verbose: false,
            dry_run: false,
            user: None,
            home_policy,
            no_home: false,
            writable: Vec::new(),
            system_writable: false,
            keep_env: Vec::new(),
            drop_env: Vec::new(),
            allow_socket: Vec::new(),
            share_tmp: false,
            without_landlock: false,
            notices: None,
            net: None,
            agent: None,
            command: vec!["true".into()],
            mount: crate::session::mount::MountOptions::default(),
        }
    }

    /// The steps of a session of the workspace `ws` beside the home directory
    /// `home` (or without one), each policy from a file when given, with the
    /// network `net`.
    fn steps_of(
        ws: &Path,
        home: Option<&Path>,
        files: Option<(&Path, &Path)>,
        net: Network,
    ) -> Vec<Step> {
        let loaded = |path: Option<&Path>| load::LoadedPolicy {
            policy: crate::policy::Policy::builtin(),
            path: path.map(Path::to_path_buf),
        };
        let opts = options(
            files.map(|f| f.0.to_path_buf()),
            files.map(|f| f.1.to_path_buf()),
        );
        let layout = match home {
            Some(h) => home::Layout::Separate(h.to_path_buf()),
            None => home::Layout::Uncovered("--no-home".into()),
        };
        let settings = Settings {
            opts,
            ws: ws.to_path_buf(),
            layout,
            facts: startup::Facts {
                command: "true".into(),
                ws: ws.to_path_buf(),
                found: load::Found::Given,
                policy: startup::Note::default(),
                mode: startup::Note::default(),
                confined: Vec::new(),
                as_root: startup::Note::default(),
                warning: None,
            },
        };
        let policies = super::super::serve::Policies {
            agent: None,
            workspace: loaded(files.map(|f| f.0)),
            home_base: None,
            workspace_after: Vec::new(),
            home: home.map(|_| loaded(files.map(|f| f.1))),
            home_after: Vec::new(),
        };
        let conf = Confinement {
            command: vec!["true".into()],
            writable: Vec::new(),
            system: None,
            command_env: Vec::new(),
            private: Default::default(),
            notes: Default::default(),
        };
        steps(&settings, ws.to_path_buf(), policies, conf, net)
    }

    fn names(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(Step::name).collect()
    }

    /// Every kind of plan, with and without a home mount and policy files, and
    /// each network.
    fn plans() -> Vec<Vec<Step>> {
        let (ws, home) = (Path::new("/w"), Path::new("/h"));
        let files = (Path::new("/p/ws.toml"), Path::new("/p/home.toml"));
        let host = || Network::Host {
            table_unused: false,
        };
        let proxied =
            || Network::Proxied(crate::policy::net::NetRules::from_command_line("a.test").unwrap());
        vec![
            steps_of(ws, None, None, host()),
            steps_of(ws, Some(home), None, host()),
            steps_of(ws, Some(home), Some(files), proxied()),
            steps_of(ws, None, Some(files), host()),
            steps_of(ws, None, None, Network::Loopback),
            steps_of(ws, Some(home), None, proxied()),
        ]
    }

    /// The order every plan keeps (see [`super::super::step`]): init forked before
    /// any thread starts, the signals blocked before any thread starts, and each
    /// step after those whose resources it uses.
    const ORDER: [&str; 20] = [
        "open-roots",
        "bind-control",
        "notices",
        "enter-namespaces",
        "fork-init",
        "block-signals",
        "start-logs",
        "build-filesystems",
        "start-proxy",
        "mount",
        "protect-workspace-policy",
        "protect-home-policy",
        "protect-logs",
        "protect-config-dirs",
        "say-running",
        "serve-control",
        "start-command",
        "wait",
        "release",
        "report",
    ];

    #[test]
    fn every_plan_keeps_the_order_of_the_steps() {
        for plan in plans() {
            let got = names(&plan);
            let want: Vec<&str> = ORDER.iter().copied().filter(|n| got.contains(n)).collect();
            assert_eq!(got, want, "a plan out of order");
        }
    }

    #[test]
    fn no_two_steps_of_a_plan_have_one_name() {
        for plan in plans() {
            let mut got = names(&plan);
            got.sort();
            let n = got.len();
            got.dedup();
            assert_eq!(got.len(), n, "{:?}", names(&plan));
        }
    }

    #[test]
    fn a_policy_file_outside_its_mount_is_protected_and_every_session_ends_the_same() {
        let all = names(&plans()[2]);
        assert_eq!(
            all, ORDER,
            "with both policy files and an allow-list every step is taken"
        );
        let none = names(&plans()[0]);
        assert!(!none.iter().any(|n| n.ends_with("-policy")), "{none:?}");
        // The proxy is started for an allow-list only.
        for plan in plans() {
            let proxied = plan
                .iter()
                .any(|s| matches!(s, Step::ForkInit(i) if matches!(i.net, Network::Proxied(_))));
            assert_eq!(names(&plan).contains(&"start-proxy"), proxied);
        }
        for plan in plans() {
            assert_eq!(
                names(&plan)[plan.len() - 3..],
                ["wait", "release", "report"]
            );
        }
    }
}
