//! Why `veilfs mount` did not serve to the end, in two kinds, each said its own
//! way by [`super::mount`]:
//!
//! * a **refusal** (the policy, an imported ignore file, the audit log's place, the
//!   source, the mount point, FUSE, the mount itself) is said as `veilfs: WHY`,
//!   the message whole, and `mount` exits 2 with nothing mounted;
//! * a **failure** of a system call where nothing is for the person to change
//!   (blocking signals, starting a thread, unmounting, the request loop) is
//!   returned to `main`, which says it as `veilfs: WHAT: CAUSE` and exits 2.

use std::io;
use std::path::PathBuf;

/// Why `mount` stopped short of serving to the end.
#[derive(Debug, thiserror::Error)]
pub enum MountCommandError {
    /// The policy file could not be found, read or compiled.
    #[error("{0}")]
    Policy(crate::workspace::load::ConfigError),
    /// An ignore file the policy imports could not be read.
    #[error("{0}")]
    Imports(crate::workspace::imports::ImportError),
    /// The audit log lies inside the workspace.
    #[error("{0}")]
    AuditInside(crate::session::audit::AuditError),
    /// The source, the mount point, FUSE, or mounting (nothing is left mounted).
    #[error("{0}")]
    Mount(#[from] crate::session::mount::MountError),
    /// A system call failed.
    #[error(transparent)]
    Failed(#[from] Failure),
}

/// A system call that failed while the mount was set up, served or ended; said
/// with its cause (`unmounting /mnt: Device or resource busy (os error 16)`).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The signals taken on a thread of their own.
    #[error(transparent)]
    Signals(io::Error),
    /// The thread that takes the signals.
    #[error("starting the signal thread")]
    SignalThread(#[source] io::Error),
    #[error("starting the request loop")]
    Start(#[source] io::Error),
    #[error("unmounting {}", mnt.display())]
    Unmount {
        mnt: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("serving the mount")]
    Serve(#[source] io::Error),
    #[error("the request loop panicked")]
    Panicked,
    /// A step found nothing of an earlier step it needs: the plan lists its steps
    /// out of order (a bug in the plan, which a unit test there guards).
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
