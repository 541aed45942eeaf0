//! Why `veilfs run` did not run its command to the end, in two kinds, each said
//! its own way by [`super::run`]:
//!
//! * a **refusal** (the plan's, or a step's: the workspace, a policy, the home
//!   directory, a namespace, a mount, a file to protect) is said as
//!   `veilfs run: WHY`, the message whole, and `run` exits 2;
//! * a **failure** of a system call where nothing is for the person to change
//!   (opening a root, a pipe, forking, the terminal, waiting) is returned to `main`,
//!   which says it as `veilfs: WHAT: CAUSE`, its causes in a chain, and exits 2.

use std::io;
use std::path::PathBuf;

use super::confine::ConfineError;
use super::execute::NamespaceError;
use super::plan::PlanError;
use super::serve::ServeError;

/// Why `run` stopped short of the command's end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Refused before anything started.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A descriptor handed over, or a file to keep from the command.
    #[error(transparent)]
    Confine(#[from] ConfineError),
    /// The daemon's namespaces.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// The filesystems, their logs and their mounts.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// A system call failed.
    #[error(transparent)]
    Failed(#[from] Failure),
}

/// A system call that failed while the session was set up or ended; said with its
/// cause (`opening /w: Permission denied (os error 13)`).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("reading the current directory")]
    CurrentDir(#[source] io::Error),
    /// A root of the session (the workspace, the home directory).
    #[error("opening {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// One of init's pipes.
    #[error(transparent)]
    Pipe(io::Error),
    /// The proxy: its listener from init (init said why it could not make one),
    /// or its thread.
    #[error("starting the network proxy")]
    Proxy(#[source] io::Error),
    #[error("opening a pty for the command")]
    Pty(#[source] io::Error),
    #[error("creating the PID namespace")]
    Fork(#[source] io::Error),
    /// The signals the daemon takes on a thread of its own.
    #[error(transparent)]
    Signals(io::Error),
    #[error("relaying the terminal")]
    Relay(#[source] io::Error),
    #[error("starting the command")]
    Start(#[source] io::Error),
    #[error("waiting for the command")]
    Wait(#[source] io::Error),
    /// A step found nothing of an earlier step it needs: the plan lists its steps
    /// out of order (a bug in [`super::plan`], which a unit test there guards).
    #[error("step {step}: no {needs} before it (the plan is out of order)")]
    OutOfOrder {
        step: &'static str,
        needs: &'static str,
    },
    /// A test asked for a failure at this step (see [`crate::session::fault`]).
    #[cfg(feature = "fault-injection")]
    #[error("injected failure at step {0} ({var})", var = crate::session::fault::FAIL_AT)]
    Injected(&'static str),
}
