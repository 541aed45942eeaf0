//! A failure injected by tests at one step of a mount, in test builds only (the
//! `fault-injection` feature, which the test suite turns on through its
//! dev-dependency on this package; never in a build of the binary): with
//! `VEILFS_FAIL_AT=STEP` in its environment, `veilfs mount` fails just before the
//! step named STEP (as `--dry-run` lists them), so that a test can check that
//! whatever the steps before it took is released (`tests/mount_plan.rs`).

use super::error::Failure;
use super::step::Step;

/// The variable naming the step to fail at.
pub(super) const FAIL_AT: &str = "VEILFS_FAIL_AT";

/// Fails if the test named `step` (see the module).
pub(super) fn before(step: &Step) -> Result<(), Failure> {
    match std::env::var_os(FAIL_AT) {
        Some(name) if name == step.name() => Err(Failure::Injected(step.name())),
        _ => Ok(()),
    }
}
