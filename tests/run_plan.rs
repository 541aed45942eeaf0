//! `veilfs run` is a plan of steps, and whichever step it fails at, it leaves
//! nothing behind: for every step `--dry-run` lists (so a new step is covered
//! without a change here), `veilfs run -- true` is made to fail just before it
//! (`VEILFS_FAIL_AT`, in test builds only), and then there is no new mount, no
//! process of the session, nothing new in its runtime directory (control socket,
//! notices file) nor anywhere in its tree, and the error is one clean line: no
//! panic, and no warning of veilfs's that a release went wrong (`-q -v` shows the
//! log's warnings, such as a mount that did not end in time).
//!
//! The session is set up so that every kind of step is taken: policy files
//! outside their mounts, a home directory of its own, an audit log, a
//! configuration directory outside the home directory, and (without `-q`) a
//! notices file.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::leftovers::{files, processes};
use common::{finish, require_fuse, wait_until};

/// The tests here count processes and mounts: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a failing run may take, and how long what it left may take to go.
const LIMIT: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(10);

/// A session's tree: the workspace, a home directory, the runtime directory, the
/// policy files, the audit log and a configuration directory, all under one
/// temporary directory whose path names this session alone. It is made outside
/// `/tmp`, where veilfs would not use a configuration directory (anyone may write
/// there), so that it is protected too.
struct Session {
    tmp: tempfile::TempDir,
}

impl Session {
    fn new() -> Session {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-plan")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let s = Session { tmp };
        for dir in ["ws", "home/.config", "rt", "cfg/veilfs"] {
            std::fs::create_dir_all(s.p(dir)).unwrap();
        }
        std::fs::set_permissions(
            s.p("rt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        std::fs::write(s.p("ws/a.txt"), "hello\n").unwrap();
        std::fs::write(s.p("ws.toml"), "default = \"allow\"\n").unwrap();
        std::fs::write(s.p("home.toml"), "extends = \"home-default\"\n").unwrap();
        // Made before, so that its name is there whichever step fails.
        std::fs::write(s.p("audit.log"), "").unwrap();
        s
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `veilfs run [-q -v] ARGS` in this session (`quiet`: no start-up lines, the
    /// log's warnings shown), failing at `fail_at`.
    fn veilfs(&self, quiet: bool, args: &[&str], fail_at: Option<&str>) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env("HOME", self.p("home"))
            .env("XDG_CONFIG_HOME", self.p("cfg"))
            .env_remove("VEILFS_FAIL_AT")
            .arg("run")
            .args(if quiet { &["-q", "-v"][..] } else { &[] })
            .arg("--workspace")
            .arg(self.p("ws"))
            .arg("--policy")
            .arg(self.p("ws.toml"))
            .arg("--home-policy")
            .arg(self.p("home.toml"))
            .arg("--audit")
            .arg(self.p("audit.log"))
            // An allow-list: the command's own network namespace, and the proxy.
            .args(["--net", "allow=localhost:1"])
            .args(args)
            .current_dir(self.p("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(step) = fail_at {
            c.env("VEILFS_FAIL_AT", step);
        }
        c
    }

    /// The names of the steps `--dry-run` lists, in order.
    fn steps(&self, quiet: bool) -> Vec<String> {
        let o = self
            .veilfs(quiet, &["--dry-run", "--", "true"], None)
            .output()
            .unwrap();
        let err = common::run::text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}", common::run::show(&o));
        let listed = err
            .split_once("veilfs: the steps it would take:\n")
            .unwrap_or_else(|| panic!("--dry-run lists no steps:\n{err}"))
            .1;
        let names: Vec<String> = listed
            .lines()
            .map(|l| {
                let (_, step) = l
                    .split_once(". ")
                    .unwrap_or_else(|| panic!("not a step: {l:?}\n{err}"));
                step.split(':').next().unwrap().to_string()
            })
            .collect();
        for taken in [
            "fork-init",
            "start-proxy",
            "mount",
            "protect-workspace-policy",
            "protect-home-policy",
            "protect-logs",
            "protect-config-dirs",
            "start-command",
            "release",
        ] {
            assert!(
                names.iter().any(|n| n == taken),
                "no {taken} among {names:?}"
            );
        }
        names
    }

    /// What of this session can be seen from here: mounts, processes, files.
    fn seen(&self) -> Seen {
        let root = self.tmp.path().to_string_lossy().into_owned();
        let naming = |text: String| -> BTreeSet<String> {
            text.lines()
                .filter(|l| l.contains(&root))
                .map(str::to_string)
                .collect()
        };
        Seen {
            mountinfo: naming(std::fs::read_to_string("/proc/self/mountinfo").unwrap()),
            veilfs_mounts: naming(std::fs::read_to_string("/proc/mounts").unwrap())
                .into_iter()
                .filter(|l| l.contains("veilfs"))
                .collect(),
            processes: processes(&root),
            files: files(self.tmp.path()),
        }
    }
}

/// What [`Session::seen`] found.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// Lines of this process's mount table naming the session's tree.
    mountinfo: BTreeSet<String>,
    /// veilfs's mounts in `/proc/mounts` naming the session's tree.
    veilfs_mounts: BTreeSet<String>,
    /// Children of this test, and processes whose command line names the session's
    /// tree (the daemon, init and the supervisor all carry `--workspace`).
    processes: BTreeSet<String>,
    /// Every name in the session's tree (the runtime directory's sockets and
    /// notices files, the configuration directory, ...).
    files: BTreeSet<PathBuf>,
}

/// Runs `veilfs run [-q -v] -- COMMAND` failing at `step`, and checks that it
/// ends with one clean error line and leaves nothing of the session behind
/// (waiting for that at most [`SETTLE`]).
fn fails_cleanly_at(s: &Session, step: &str, quiet: bool, command: &[&str]) {
    let before = s.seen();
    let mut args = vec!["--"];
    args.extend(command);
    let child = s.veilfs(quiet, &args, Some(step)).spawn().unwrap();
    let (code, out, err) = finish(child, LIMIT);
    let said = format!(
        "failing at {step} ({}): exit {code}\nstdout:\n{out}\nstderr:\n{err}",
        if quiet { "-q -v" } else { "neither -q nor -v" }
    );
    let error = format!("veilfs: injected failure at step {step} (VEILFS_FAIL_AT)");
    assert_eq!(code, 2, "{said}");
    assert!(!err.contains("panicked"), "{said}");
    // veilfs's own warnings (fuser may warn of a ring queue the unmount overtook).
    assert!(
        !err.lines()
            .any(|l| l.starts_with("[WARN  veilfs") || l.starts_with("[ERROR veilfs")),
        "a warning: {said}"
    );
    // The log's lines aside (`-v`), the error comes last, after the start-up lines
    // (at most three, when the failure is after them) and nothing else.
    let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(lines.last(), Some(&error.as_str()), "{said}");
    let others = &lines[..lines.len() - 1];
    assert!(
        (quiet && others.is_empty())
            || (!quiet && others.len() <= 3 && others.iter().all(|l| l.starts_with("veilfs: "))),
        "more than one error line: {said}"
    );
    let mut after = s.seen();
    wait_until(SETTLE, || {
        after = s.seen();
        after == before
    });
    assert_eq!(
        after, before,
        "left behind (right: before the run, left: {SETTLE:?} after it ended): {said}"
    );
}

/// Failing at each step, `veilfs run -- true` leaves nothing behind, with and
/// without `-q` (which sends the notices to the log: no notices file; with `-v`,
/// the log's warnings are shown).
#[test]
fn failing_at_any_step_leaves_nothing_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Session::new();
    for quiet in [false, true] {
        for step in s.steps(quiet) {
            fails_cleanly_at(&s, &step, quiet, &["true"]);
        }
    }
}

/// Failing once the command runs (just before `run` waits for it), the command
/// does not outlive `run`: killing init ends the command's whole PID namespace.
#[test]
fn failing_after_the_command_started_ends_the_command() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Session::new();
    // `sh` loops with its $0 naming the session's tree, so that it is seen as
    // long as it lives.
    let marker = s.p("still-running");
    let marker = marker.to_str().unwrap();
    fails_cleanly_at(
        &s,
        "wait",
        true,
        &["sh", "-c", "while :; do sleep 0.1; done", marker],
    );
}

/// Without `VEILFS_FAIL_AT`, the same session runs its command and exits with its
/// status: the failures above are the injected ones.
#[test]
fn the_same_session_runs_when_nothing_is_injected() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Session::new();
    let before = s.seen();
    let child = s
        .veilfs(true, &["--", "sh", "-c", "cat a.txt; exit 3"], None)
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, LIMIT);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!((code, out.as_str(), lines), (3, "hello\n", vec![]));
    let mut after = s.seen();
    wait_until(SETTLE, || {
        after = s.seen();
        after == before
    });
    assert_eq!(after, before, "left behind by a run that ended well");
}
