//! The steps of a `veilfs run` session, as values: each says what it does and
//! carries what it needs of the plan (in the spirit of bubblewrap's `SetupOp`
//! list). [`super::plan`] lists them in order, `--dry-run` prints them, and
//! [`super::execute`] takes them one by one; what a step takes from the system is
//! held by [`super::taken::Taken`], which releases it on every way out.
//!
//! | step | takes | released |
//! |---|---|---|
//! | `open-roots` | descriptors of the real workspace and home directory | given to the filesystems, or closed |
//! | `bind-control` | the control socket, in the runtime directory | its file removed |
//! | `notices` | the notices file | removed when it holds no notice and the person did not name it |
//! | `enter-namespaces` | the daemon's own mount (and user) namespace | with the daemon |
//! | `fork-init` | init, PID 1 of the command's PID namespace; its pipes; the pty | init killed and reaped unless waited for |
//! | `block-signals` | the daemon's signal mask | with the daemon |
//! | `start-logs` | the audit log's writer | finished once the mounts are gone |
//! | `build-filesystems` | the filesystems and the broker | the broker closed, the filesystems dropped |
//! | `start-proxy` | the proxy's listener (from init) and threads | stopped, its connections ended |
//! | `mount` | the mounts and their sessions | unmounted, inner first |
//! | `protect-*` | read-only bind mounts, in the daemon's namespace | unmounted, the last first |
//! | `serve-control` | the control socket's server | its file removed |
//! | `start-command` | the terminal's relay | the terminal restored |
//! | `wait` | init's end (it is reaped) | |
//! | `release` | releases all of the above, in [`super::taken::Taken`]'s order | |
//!
//! What stays true of a plan's steps (checked by the tests of [`super::plan`]):
//! * `fork-init` comes before any step that starts a thread (from
//!   `block-signals` on), so that init is forked from a process of one thread;
//! * `block-signals` comes before any step that starts a thread, so that every
//!   thread inherits the mask;
//! * every step comes after the steps whose resources it uses (a step that finds
//!   one missing fails with [`super::error::Failure::OutOfOrder`]);
//! * no two steps have the same name (a name picks one step, see
//!   `crate::session::fault`).

use std::ffi::OsString;
use std::path::PathBuf;

use super::plan::Settings;
use crate::escape::escape;

/// One step of a session.
#[derive(Debug)]
pub(super) enum Step {
    /// Opens the real workspace, and the real home directory when it gets a mount
    /// of its own (`home`), before anything covers them.
    OpenRoots { home: Option<PathBuf> },
    /// Binds the control socket `veilfs reload` and `veilfs prompt` reach from
    /// outside, while this process still sees the caller's runtime directory as
    /// the caller does.
    BindControl,
    /// Decides where refusal notices go while the command runs (never its
    /// terminal), making the notices file.
    Notices(NoticesTo),
    /// Enters a private mount namespace, inside a new user namespace mapping
    /// `user` (uid, gid) to root when it is `Some` (the caller is not root).
    EnterNamespaces { user: Option<(u32, u32)> },
    /// Forks init, PID 1 of the command's new PID namespace, which waits for the
    /// mounts before it starts the command.
    ForkInit(Box<InitPlan>),
    /// Blocks the signals the daemon takes on a thread of its own.
    BlockSignals,
    /// Starts the audit log's writer, and notes the identities of the run's logs
    /// before anything is mounted over them.
    StartLogs,
    /// Builds the filesystems from the roots' descriptors and the policies, and the
    /// broker that asks a person for `ask` paths.
    BuildFilesystems(Box<super::serve::Policies>),
    /// Starts the proxy that is the command's only way out of its network
    /// namespace, on the listener init made there, deciding by these lists.
    StartProxy(Box<crate::policy::net::NetRules>),
    /// Mounts the filesystems (the outer first) and serves them.
    Mount,
    /// Binds a policy file outside its own mount read-only onto itself, in the
    /// command's view.
    ProtectPolicyFile {
        of: PolicyOf,
        file: PathBuf,
        /// The root of the mount whose policy it is (inside it, the mount guards it).
        root: PathBuf,
    },
    /// Binds the run's logs read-only onto themselves.
    ProtectLogs,
    /// Binds veilfs's configuration directories read-only where no home mount
    /// guards them (making one the command could otherwise make).
    ProtectConfigDirs {
        /// `--writable` directories, canonical.
        writable: Vec<PathBuf>,
        /// `--system-writable`: the system outside is not read-only.
        system_writable: bool,
    },
    /// Says the start-up lines.
    SayRunning,
    /// Answers `veilfs reload`, `veilfs stats` and `veilfs prompt` on the control
    /// socket.
    ServeControl,
    /// Starts relaying the terminal, then lets init start the command.
    StartCommand,
    /// Waits for the command, passing signals on, and notes its status.
    Wait,
    /// Releases everything the steps took (see [`super::taken::Taken::release`]).
    Release,
    /// Says what was refused and what nobody answered, and whether the run's logs
    /// are still the files it wrote.
    Report,
}

/// Where refusal notices go.
#[derive(Debug)]
pub(super) enum NoticesTo {
    /// `--quiet`: to the log.
    Log,
    /// To a file: the one named with `--notices` (`named`), else one in the runtime
    /// directory; on the terminal when it cannot be made.
    File {
        path: PathBuf,
        named: bool,
        places: crate::fs::notice::Places,
    },
}

/// Whose policy file a [`Step::ProtectPolicyFile`] protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PolicyOf {
    Workspace,
    Home,
}

/// What init is forked with: the command, where and as whom it runs, and how it is
/// confined beyond the mounts.
#[derive(Debug)]
pub(super) struct InitPlan {
    /// The command's working directory (reached through the mount once it is up).
    pub cwd: PathBuf,
    /// The command and its arguments.
    pub argv: Vec<OsString>,
    /// Exactly the environment the command gets.
    pub env: Vec<(OsString, OsString)>,
    /// `--user`: the uid and gid the command runs as.
    pub user: Option<(u32, u32)>,
    /// `run` was started by root (not merely root in a user namespace).
    pub real_root: bool,
    /// The system outside the workspace read-only but for these (`None`:
    /// `--system-writable`).
    pub system: Option<super::confine::ReadOnlySystem>,
    /// The command's private places.
    pub private: super::private::Private,
    /// Landlock's scopes on the command (not `--without-landlock`).
    pub scope: bool,
    /// The command's network (a namespace of its own unless the host's).
    pub net: super::net::Network,
}

impl Step {
    /// The step's name: what `--dry-run` shows, and what a test names to fail at.
    pub fn name(&self) -> &'static str {
        match self {
            Step::OpenRoots { .. } => "open-roots",
            Step::BindControl => "bind-control",
            Step::Notices(_) => "notices",
            Step::EnterNamespaces { .. } => "enter-namespaces",
            Step::ForkInit(_) => "fork-init",
            Step::BlockSignals => "block-signals",
            Step::StartLogs => "start-logs",
            Step::BuildFilesystems(_) => "build-filesystems",
            Step::StartProxy(_) => "start-proxy",
            Step::Mount => "mount",
            Step::ProtectPolicyFile {
                of: PolicyOf::Workspace,
                ..
            } => "protect-workspace-policy",
            Step::ProtectPolicyFile {
                of: PolicyOf::Home, ..
            } => "protect-home-policy",
            Step::ProtectLogs => "protect-logs",
            Step::ProtectConfigDirs { .. } => "protect-config-dirs",
            Step::SayRunning => "say-running",
            Step::ServeControl => "serve-control",
            Step::StartCommand => "start-command",
            Step::Wait => "wait",
            Step::Release => "release",
            Step::Report => "report",
        }
    }

    /// What the step does, in a few words, for `--dry-run` (paths and names
    /// escaped).
    pub fn describe(&self, s: &Settings) -> String {
        let what = match self {
            Step::OpenRoots { home } => format!(
                "open {}{} before anything covers {}",
                s.ws.display(),
                home.as_ref()
                    .map_or(String::new(), |h| format!(" and {}", h.display())),
                if home.is_some() { "them" } else { "it" }
            ),
            Step::BindControl => format!(
                "bind the control socket in {}",
                crate::session::control::runtime_dir_path().display()
            ),
            Step::Notices(NoticesTo::Log) => "refusal notices to the log (--quiet)".into(),
            Step::Notices(NoticesTo::File { path, .. }) => {
                format!("make the notices file {}", path.display())
            }
            Step::EnterNamespaces { user: None } => "a private mount namespace".into(),
            Step::EnterNamespaces {
                user: Some((uid, _)),
            } => {
                format!("a private mount namespace, in a user namespace mapping uid {uid} to root")
            }
            Step::ForkInit(init) => format!(
                "fork init, PID 1 of the command's PID namespace{}, to start {} once the \
                 mounts are up",
                if init.net.own() {
                    " and network namespace"
                } else {
                    ""
                },
                init.argv
                    .first()
                    .map_or(String::new(), |c| c.to_string_lossy().into_owned())
            ),
            Step::StartLogs => match &s.opts.mount.audit {
                Some(log) => format!("start the audit log {}, note the run's logs", log.display()),
                None => "note the run's logs".into(),
            },
            Step::BuildFilesystems(p) => format!(
                "build the filesystems, under {}{}",
                p.workspace.source(),
                p.home.as_ref().map_or(String::new(), |h| format!(
                    " and {}",
                    crate::workspace::load::home_source(h)
                ))
            ),
            Step::Mount => format!("mount veilfs over {}", mounted(s)),
            Step::StartProxy(rules) => format!(
                "serve the proxy on 127.0.0.1:{} in the command's network namespace, to {}",
                super::net::PROXY_PORT,
                rules
                    .rules()
                    .iter()
                    .map(|r| format!("{} {}", r.action.as_str(), r.text))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Step::ProtectPolicyFile { file, .. } => {
                format!("keep {} read-only for the command", file.display())
            }
            other => other.fixed().to_string(),
        };
        escape(&format!("{}: {what}", self.name()))
    }

    /// What the steps that carry nothing to show do.
    fn fixed(&self) -> &'static str {
        match self {
            Step::BlockSignals => "block the signals the daemon takes on a thread of its own",
            Step::ProtectLogs => "keep the run's logs read-only for the command",
            Step::ProtectConfigDirs { .. } => {
                "keep veilfs's configuration read-only for the command"
            }
            Step::SayRunning => "say the start-up lines",
            Step::ServeControl => "answer `veilfs reload`, `veilfs stats` and `veilfs prompt`",
            Step::StartCommand => "start the command",
            Step::Wait => "wait for the command, passing signals on",
            Step::Release => "end the command's namespace, unmount, finish the audit log",
            Step::Report => "say what was refused and what nobody answered",
            _ => "",
        }
    }
}

/// The roots `mount` mounts over, the outer first (as [`super::serve::mount_all`]
/// does).
fn mounted(s: &Settings) -> String {
    let ws = s.ws.display().to_string();
    match &s.layout {
        super::home::Layout::Separate(h) if s.ws.starts_with(h) => {
            format!("{}, then {ws}", h.display())
        }
        super::home::Layout::Separate(h) => format!("{ws}, then {}", h.display()),
        _ => ws,
    }
}
