//! The steps of a `veilfs mount`, as values: each says what it does and carries
//! what it needs of the plan. [`super::plan`] lists them in order, `--dry-run`
//! prints them, and [`super::execute`] takes them one by one; what a step takes
//! from the system is held by [`super::taken::Taken`], which releases it on every
//! way out.
//!
//! | step | takes | released |
//! |---|---|---|
//! | `block-signals` | the process's signal mask | with the process |
//! | `start-audit` | the audit log's writer and its sender | the writer finished once every sender is gone |
//! | `build-filesystem` | the filesystem and its broker | the broker closed, the filesystem dropped |
//! | `mount` | the mount and its session, the watcher's threads | unmounted |
//! | `serve-control` | the control socket, served | its file removed |
//! | `say-mounted` | | |
//! | `serve` | the request loop's thread, the signal thread | the loop ended by the unmount and joined |
//! | `wait` | | |
//! | `release` | releases all of the above, in [`super::taken::Taken`]'s order | |
//!
//! What stays true of a plan's steps (checked by the tests of [`super::plan`]):
//! * `block-signals` comes first, before any step that starts a thread, so that
//!   every thread inherits the mask and the signals reach the signal thread only;
//! * every step comes after the steps whose resources it uses (a step that finds
//!   one missing fails with [`super::error::Failure::OutOfOrder`]);
//! * no two steps have the same name (a name picks one step, see `crate::session::fault`).

use std::path::PathBuf;

use super::plan::Settings;
use crate::escape::escape;
use crate::workspace::load::LoadedPolicy;

/// The signals `mount` takes on a thread of its own: SIGINT and SIGTERM unmount,
/// SIGHUP reloads the policy.
pub(super) const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// One step of a mount.
#[derive(Debug)]
pub(super) enum Step {
    /// Blocks [`SIGNALS`] before any thread starts, so that they reach the signal
    /// thread only.
    BlockSignals,
    /// Starts the audit log's writer (`--audit`: a file, or `-` for stderr).
    StartAudit(PathBuf),
    /// Builds the filesystem over the source under the policy, and the broker that
    /// asks a person for `ask` paths.
    BuildFilesystem(Box<LoadedPolicy>),
    /// Mounts the filesystem (live when the step ends), and starts the threads
    /// that keep it current (the watcher, the policy's reloaders).
    Mount,
    /// Answers `veilfs reload`, `veilfs stats` and `veilfs prompt` on the control
    /// socket (said, and done without, when it cannot be bound).
    ServeControl,
    /// Says the start-up line.
    SayMounted,
    /// Starts the request loop, and the thread that takes the signals.
    Serve,
    /// Waits for SIGINT, SIGTERM or an outside unmount.
    Wait,
    /// Releases everything the steps took (see [`super::taken::Taken::release`]).
    Release,
}

impl Step {
    /// The step's name: what `--dry-run` shows, and what a test names to fail at.
    pub fn name(&self) -> &'static str {
        match self {
            Step::BlockSignals => "block-signals",
            Step::StartAudit(_) => "start-audit",
            Step::BuildFilesystem(_) => "build-filesystem",
            Step::Mount => "mount",
            Step::ServeControl => "serve-control",
            Step::SayMounted => "say-mounted",
            Step::Serve => "serve",
            Step::Wait => "wait",
            Step::Release => "release",
        }
    }

    /// What the step does, in a few words, for `--dry-run` (paths escaped).
    pub fn describe(&self, s: &Settings) -> String {
        let what = match self {
            Step::BlockSignals => {
                "block SIGINT, SIGTERM and SIGHUP, taken on a thread of their own".into()
            }
            Step::StartAudit(log) => format!("start the audit log {}", log.display()),
            Step::BuildFilesystem(_) => format!(
                "build the filesystem over {} with policy {}",
                s.src_c.display(),
                s.source
            ),
            Step::Mount => format!("mount veilfs at {}", s.mnt_c.display()),
            Step::ServeControl => format!(
                "answer `veilfs reload`, `veilfs stats` and `veilfs prompt` on a socket in {}",
                crate::session::control::runtime_dir_path().display()
            ),
            Step::SayMounted => "say the start-up line".into(),
            Step::Serve => "serve requests; SIGHUP reloads the policy".into(),
            Step::Wait => "wait for SIGINT, SIGTERM or an outside unmount".into(),
            Step::Release => {
                "close the broker, unmount, remove the control socket, finish the audit log".into()
            }
        };
        escape(&format!("{}: {what}", self.name()))
    }
}
