//! A failure injected by tests at one step of a session's plan, in test builds only
//! (the `fault-injection` feature, which the test suite turns on through its
//! dev-dependency on this package; never in a build of the binary): with
//! `VEILFS_FAIL_AT=STEP` in its environment, `veilfs run` or `veilfs mount` fails
//! just before the step named STEP (as `--dry-run` lists them), so that a test can
//! check that whatever the steps before it took is released (`tests/run_plan.rs`,
//! `tests/mount_plan.rs`). Each command's executor asks [`fails_at`] before each
//! step.

/// The variable naming the step to fail at.
pub const FAIL_AT: &str = "VEILFS_FAIL_AT";

/// Whether the test asks for a failure just before the step `name` (see the module).
pub fn fails_at(name: &str) -> bool {
    std::env::var_os(FAIL_AT).is_some_and(|n| n == name)
}
