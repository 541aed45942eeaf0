//! `veilfs mount`: serve a workspace through the policy in the foreground, until a
//! signal or an outside unmount.
//!
//! A mount is planned, then executed, as `veilfs run` is. `plan` decides
//! everything before anything is taken (the policy loaded and its imports attached,
//! the audit log checked to lie outside the workspace, the source, the mount point
//! and FUSE checked) and lists the steps in order (`step`: block the signals, start
//! the audit log, build the filesystem, mount it, serve the control socket, say the
//! start-up line, serve, wait, release); `execute` takes them in one loop, and
//! whatever a step takes is held by one value (`taken`) that releases it, in one
//! order, on every way out. `--dry-run` prints the plan.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::session::mount::MountOptions;

mod error;
mod execute;
mod plan;
mod step;
mod taken;

use error::MountCommandError;

/// What `veilfs mount` was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct MountArgs<'a> {
    /// `--policy`: the policy file (`None`: SRC/.veilfs.toml, else the built-in
    /// default policy).
    pub policy: Option<&'a Path>,
    /// The workspace to serve.
    pub src: &'a Path,
    /// Where to mount it.
    pub mnt: &'a Path,
    pub opts: &'a MountOptions,
    /// `--dry-run`: say the plan, and stop before anything is taken.
    pub dry_run: bool,
}

/// `veilfs mount`: serve in the foreground until a signal or an outside unmount
/// (exit 0); the mount planned (module `plan`), then its steps taken (module
/// `execute`). With `--dry-run`, the plan is said and nothing is mounted.
pub fn mount(args: MountArgs) -> Result<ExitCode> {
    let plan = match plan::plan(args) {
        Ok(plan) => plan,
        Err(e) => return said(e),
    };
    if args.dry_run {
        plan.say();
        return Ok(ExitCode::SUCCESS);
    }
    execute::execute(plan).or_else(said)
}

/// How `mount` ends short of serving to the end (see [`error`]): a refusal said as
/// `veilfs: WHY` (exit 2); a failure returned, for `main` to say with its causes
/// (exit 2).
fn said(e: MountCommandError) -> Result<ExitCode> {
    match e {
        MountCommandError::Failed(failure) => Err(failure.into()),
        refused => {
            eprintln!("veilfs: {refused}");
            Ok(ExitCode::from(2))
        }
    }
}
