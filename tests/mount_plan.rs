//! `veilfs mount` is a plan of steps, and whichever step it fails at, it leaves
//! nothing behind: for every step `--dry-run` lists (so a new step is covered
//! without a change here), `veilfs mount` is made to fail just before it
//! (`VEILFS_FAIL_AT`, in test builds only; once it says it is mounted, it is sent
//! SIGTERM, so that the steps after the wait are reached too), and then there is
//! no mount in the mount table, no process of the mount, nothing new in its tree
//! (its control socket in the runtime directory), and the error is one clean line:
//! exit 2, no panic, and (with `-v`, which shows the log's warnings) no warning of
//! veilfs's that a release went wrong.
//!
//! The mount is made with an audit log, so that every kind of step is taken.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::leftovers::{files, processes};
use common::{require_fuse, wait_until};

/// The tests here count processes and mounts: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a failing mount may take, and how long what it left may take to go.
const LIMIT: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(10);

/// A mount's tree: the source, the mount point, the runtime directory (where its
/// control socket goes) and the audit log, all under one temporary directory whose
/// path names this mount alone.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-mount-plan")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let t = Tree { tmp };
        for dir in ["src", "mnt", "rt"] {
            std::fs::create_dir_all(t.p(dir)).unwrap();
        }
        std::fs::set_permissions(
            t.p("rt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        std::fs::write(t.p("src/a.txt"), "hello\n").unwrap();
        // Made before, so that its name is there whichever step fails.
        std::fs::write(t.p("audit.log"), "").unwrap();
        t
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `veilfs [-v] mount --audit LOG ARGS SRC MNT` in this tree, failing at
    /// `fail_at`.
    fn veilfs(&self, verbose: bool, args: &[&str], fail_at: Option<&str>) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env_remove("VEILFS_FAIL_AT")
            .env_remove("RUST_LOG")
            .args(if verbose { &["-v"][..] } else { &[] })
            .arg("mount")
            .arg("--audit")
            .arg(self.p("audit.log"))
            .args(args)
            .arg(self.p("src"))
            .arg(self.p("mnt"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(step) = fail_at {
            c.env("VEILFS_FAIL_AT", step);
        }
        c
    }

    /// The names of the steps `--dry-run` lists, in order.
    fn steps(&self) -> Vec<String> {
        let o = self.veilfs(false, &["--dry-run"], None).output().unwrap();
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
        for taken in ["start-audit", "mount", "serve-control", "serve", "release"] {
            assert!(
                names.iter().any(|n| n == taken),
                "no {taken} among {names:?}"
            );
        }
        names
    }

    /// What of this mount can be seen from here: mounts, processes, files.
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
            processes: processes(&root),
            files: files(self.tmp.path()),
        }
    }
}

impl Drop for Tree {
    /// A failed test leaves no mount of its own behind.
    fn drop(&mut self) {
        let mnt = self.p("mnt");
        if mnt
            .canonicalize()
            .is_ok_and(|m| veilfs::session::mount::is_mount_point(&m))
        {
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
        }
    }
}

/// What [`Tree::seen`] found.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// Lines of this process's mount table naming the tree (the mount point, the
    /// source in veilfs's file system name).
    mountinfo: BTreeSet<String>,
    /// Children of this test, and processes whose command line names the tree.
    processes: BTreeSet<String>,
    /// Every name in the tree (the runtime directory's control socket, ...).
    files: BTreeSet<PathBuf>,
}

/// Runs `cmd` (a `veilfs mount`) to its end, within [`LIMIT`]: sends it SIGTERM
/// once it says it is mounted; returns its exit code (-1 for a signal) and stderr.
fn run_to_end(mut cmd: Command) -> (i32, String) {
    let mut child = cmd.spawn().unwrap();
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (start, mut lines, mut signalled) = (Instant::now(), Vec::new(), false);
    let status = loop {
        lines.extend(rx.try_iter());
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if !signalled && lines.iter().any(|l| l.starts_with("veilfs: mounted ")) {
            // Not reaped yet (try_wait said so): the pid is still our child's.
            common::daemon::signal(&child, libc::SIGTERM);
            signalled = true;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "veilfs mount did not end within {LIMIT:?}:\n{}",
                lines.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    (status.code().unwrap_or(-1), lines.join("\n"))
}

/// Runs `veilfs [-v] mount` failing at `step`, and checks that it ends with one
/// clean error line and leaves nothing of the mount behind (waiting for that at
/// most [`SETTLE`]).
fn fails_cleanly_at(t: &Tree, step: &str, verbose: bool) {
    let before = t.seen();
    let (code, err) = run_to_end(t.veilfs(verbose, &[], Some(step)));
    let said = format!(
        "failing at {step} ({}): exit {code}\nstderr:\n{err}",
        if verbose { "-v" } else { "without -v" }
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
    // The log's lines aside, the error comes last, after the start-up line (when
    // the failure is after it) and nothing else.
    let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(lines.last(), Some(&error.as_str()), "{said}");
    let others = &lines[..lines.len() - 1];
    assert!(
        others.len() <= 1 && others.iter().all(|l| l.starts_with("veilfs: mounted ")),
        "more than one error line: {said}"
    );
    let mut after = t.seen();
    wait_until(SETTLE, || {
        after = t.seen();
        after == before
    });
    assert_eq!(
        after, before,
        "left behind (right: before the mount, left: {SETTLE:?} after it ended): {said}"
    );
}

/// Failing at each step, `veilfs mount` leaves nothing behind, with and without
/// `-v` (which shows the log's warnings).
#[test]
fn failing_at_any_step_leaves_nothing_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = Tree::new();
    for verbose in [false, true] {
        for step in t.steps() {
            fails_cleanly_at(&t, &step, verbose);
        }
    }
}

/// Without `VEILFS_FAIL_AT`, the same mount serves, ends with 0 on SIGTERM and
/// leaves nothing behind: the failures above are the injected ones.
#[test]
fn the_same_mount_serves_when_nothing_is_injected() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = Tree::new();
    let before = t.seen();
    let (code, err) = run_to_end(t.veilfs(false, &[], None));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(code, 0, "{err}");
    assert!(
        lines.len() == 1 && lines[0].starts_with("veilfs: mounted "),
        "{err}"
    );
    let mut after = t.seen();
    wait_until(SETTLE, || {
        after = t.seen();
        after == before
    });
    assert_eq!(after, before, "left behind by a mount that ended well");
}
