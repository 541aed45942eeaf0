//! The control socket: `veilfs reload` talks only to a daemon in a runtime directory
//! nobody else could have planted, the daemon answers only its own user and never a
//! client that says nothing for long, and a `veilfs run` session is reloaded from
//! outside only, with its reports kept out of the command's stderr.
//!
//! Every test points veilfs at a runtime directory of its own (`VEILFS_RUNTIME_DIR`).
//! Policy edits that only an explicit `veilfs reload` may apply are written through
//! a hard link in another directory: the file watcher of the daemon, which watches
//! the policy file's directory, sees no event for them.

mod common;

use common::run::{show, text};

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::{assert_errno, wait_until};
use veilfs::session::control::Session;

const ALLOW_ALL: &str = "default = \"allow\"\n";
const DENY_A: &str = "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n";

/// A temp tree: `ws/` (the workspace, with `a.txt`), `mnt/`, `pol/p.toml` (the
/// policy, allow-all), `edit/` (for a hard link to it, see [`Tree::edit_policy`]),
/// and `rt` (the runtime directory, not created).
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            tmp: common::temp_tree("veilfs-control", &["ws", "mnt", "pol", "edit"]),
        };
        std::fs::write(t.p("ws/a.txt"), "hello\n").unwrap();
        std::fs::write(t.p("pol/p.toml"), ALLOW_ALL).unwrap();
        t
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn rt(&self) -> PathBuf {
        self.p("rt")
    }

    /// Changes the policy without the daemon's watcher noticing (see the header).
    /// The link is made on first use, once the session has started: `veilfs run`
    /// refuses to start on a policy file with a second name.
    fn edit_policy(&self, text: &str) {
        if !self.p("edit/p.toml").exists() {
            std::fs::hard_link(self.p("pol/p.toml"), self.p("edit/p.toml")).unwrap();
        }
        std::fs::write(self.p("edit/p.toml"), text).unwrap();
    }

    fn veilfs(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.rt());
        c
    }

    fn reload(&self, path: &Path) -> Output {
        run_with_deadline(
            self.veilfs().arg("reload").arg(path),
            Duration::from_secs(20),
        )
    }

    /// The sockets in the runtime directory.
    fn sockets(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.rt()) else {
            return Vec::new();
        };
        let mut v: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sock"))
            .collect();
        v.sort();
        v
    }
}

/// Runs `cmd` to completion; kills it and fails when it takes longer than `limit`.
#[track_caller]
fn run_with_deadline(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{cmd:?} still running after {limit:?}:\n{}", show(&o));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Waits for `child` to exit (killing it after `limit`); its status code.
fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    if !wait_until(limit, || child.try_wait().unwrap().is_some()) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the process did not exit within {limit:?}");
    }
    child.wait().unwrap().code()
}

/// A `veilfs mount` of `ws` at `mnt` (see [`common::daemon::Daemon`]).
fn mount(t: &Tree, policy: Option<&Path>) -> Daemon {
    let mut cmd = t.veilfs();
    cmd.arg("mount");
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    cmd.arg(t.p("ws")).arg(t.p("mnt"));
    Daemon::start(cmd, &t.p("mnt"))
}

/// A `veilfs run --policy pol/p.toml --workspace ws -- sh -c SCRIPT`, its stdin
/// and stdout piped to the test, killed on drop.
struct Run {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Everything the command printed so far.
    out: String,
}

impl Run {
    fn start(t: &Tree, script: &str) -> Run {
        Run::start_with(t, &[], script)
    }

    fn start_with(t: &Tree, args: &[&str], script: &str) -> Run {
        let mut child = t
            .veilfs()
            .args(["run", "--quiet"])
            .args(args)
            .arg("--policy")
            .arg(t.p("pol/p.toml"))
            .arg("--workspace")
            .arg(t.p("ws"))
            .args(["--", "sh", "-c", script])
            .current_dir(t.p("ws"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Run {
            child,
            stdin,
            stdout,
            out: String::new(),
        }
    }

    /// Reads the command's stdout up to the line `want` (the command says it).
    fn expect_line(&mut self, want: &str) {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            self.out += &line;
            if n == 0 {
                panic!("the command ended before saying {want:?}:\n{}", self.out);
            }
            if line.trim_end() == want {
                return;
            }
        }
    }

    fn say(&mut self, line: &str) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(format!("{line}\n").as_bytes()).unwrap();
        w.flush().unwrap();
    }

    /// Waits (with a deadline) for the run to end: status, stdout, stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        drop(self.stdin.take());
        let code = wait_exit(&mut self.child, Duration::from_secs(20));
        self.stdout.read_to_string(&mut self.out).unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (code, std::mem::take(&mut self.out), err)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The attacker (uid 65534) prepares the runtime directory before veilfs runs and
/// listens where `veilfs reload` would connect: neither the daemon nor the client
/// may use that directory, and nothing ever connects to the planted socket.
#[test]
fn a_runtime_directory_someone_else_could_have_planted_is_never_used() {
    for case in ["owned by uid 65534", "mode 0755", "a symbolic link"] {
        let t = Tree::new();
        let rt = t.rt();
        // Where the attacker's socket lives: in rt, or where rt points.
        let dir = if case == "a symbolic link" {
            let theirs = t.p("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::symlink(&theirs, &rt).unwrap();
            theirs
        } else {
            std::fs::create_dir(&rt).unwrap();
            rt.clone()
        };
        let mode = if case == "mode 0755" { 0o755 } else { 0o700 };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let owner = if case == "mode 0755" { 0 } else { 65534 };
        std::os::unix::fs::chown(&dir, Some(owner), Some(owner)).unwrap();
        let planted_name = veilfs::session::control::socket_path(&t.p("mnt"), Session::Mount)
            .unwrap()
            .file_name()
            .unwrap()
            .to_owned();
        let planted = UnixListener::bind(dir.join(&planted_name)).unwrap();
        planted.set_nonblocking(true).unwrap();
        let before = std::fs::read_dir(&dir).unwrap().count();

        let d = mount(&t, None);
        assert!(
            d.said.contains("refusing the runtime directory") && d.said.contains(case),
            "{case}: the daemon must refuse the directory and say why:\n{}",
            d.said
        );
        let o = t.reload(&t.p("mnt"));
        assert_eq!(o.status.code(), Some(2), "{case}: {}", show(&o));
        assert!(
            text(&o.stderr).contains("refusing the runtime directory"),
            "{case}: {}",
            show(&o)
        );
        assert!(
            matches!(planted.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{case}: something connected to the planted socket"
        );
        let after = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(before, after, "{case}: the daemon created a file there");
        let md = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(
            (md.uid(), md.mode() & 0o777),
            (owner, mode),
            "{case}: the directory was changed"
        );
        drop(d);
    }
}

/// A fresh runtime directory is made private in one step.
#[test]
fn the_runtime_directory_is_created_private() {
    let t = Tree::new();
    let _d = mount(&t, None);
    let md = std::fs::symlink_metadata(t.rt()).unwrap();
    assert!(md.is_dir());
    assert_eq!(md.mode() & 0o777, 0o700);
    assert_eq!(md.uid(), veilfs::sys::euid());
    assert_eq!(t.sockets().len(), 1, "{:?}", t.sockets());
}

/// Clients that connect and say nothing neither block a real reload nor delay it
/// beyond a moment.
#[test]
fn a_silent_client_does_not_hold_up_a_reload() {
    let t = Tree::new();
    let d = mount(&t, Some(&t.p("pol/p.toml")));
    let sock = t.rt().join(&t.sockets()[0]);
    let silent: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    t.edit_policy(DENY_A);
    let start = Instant::now();
    let o = t.reload(&d.mnt);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        took < Duration::from_millis(1500),
        "the reload waited {took:?} behind silent clients"
    );
    assert_errno(
        std::fs::read(d.mnt.join("a.txt")),
        libc::EACCES,
        "a.txt after the reload",
    );
    drop(silent);
}

/// A process of another uid that can reach the socket (here: with
/// CAP_DAC_OVERRIDE, as if the directory had been left open) is refused by its
/// credentials, and the policy stays.
#[test]
fn a_peer_of_another_uid_is_refused() {
    let t = Tree::new();
    let d = mount(&t, Some(&t.p("pol/p.toml")));
    t.edit_policy(DENY_A);
    let o = run_with_deadline(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=+dac_override",
                "--ambient-caps=+dac_override",
            ])
            .arg(env!("CARGO_BIN_EXE_veilfs"))
            .arg("reload")
            .arg(&d.mnt)
            .env("VEILFS_RUNTIME_DIR", t.rt()),
        Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("uid 65534 may not reload"),
        "{}",
        show(&o)
    );
    assert_eq!(
        std::fs::read_to_string(d.mnt.join("a.txt")).unwrap(),
        "hello\n",
        "the refused request must not have changed the policy"
    );
    // The owner may.
    let o = t.reload(&d.mnt);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_errno(
        std::fs::read(d.mnt.join("a.txt")),
        libc::EACCES,
        "a.txt after the owner's reload",
    );
}

/// The person outside tightens a running session's policy with `veilfs reload WS`;
/// the command sees it at once, and no report of the daemon lands in its stderr.
#[test]
fn veilfs_reload_from_outside_reaches_a_run_session() {
    let t = Tree::new();
    let mut run = Run::start(
        &t,
        "echo started; i=0; while cat a.txt >/dev/null 2>&1; do \
         i=$((i+1)); [ $i -gt 400 ] && { echo never; exit 3; }; sleep 0.05; done; echo denied",
    );
    run.expect_line("started");
    assert_eq!(t.sockets().len(), 1, "{:?}", t.sockets());
    assert!(
        t.sockets()[0].contains("-run-"),
        "{:?}: a run's own socket name",
        t.sockets()
    );
    t.edit_policy(DENY_A);
    let o = t.reload(&t.p("ws"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(text(&o.stdout).contains("reloaded"), "{}", show(&o));
    let (code, out, err) = run.finish();
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.ends_with("denied\n"), "{out}");
    assert!(
        !err.contains("reloaded"),
        "a reload report in the command's stderr:\n{err}"
    );
    assert!(
        err.is_empty(),
        "--quiet, yet the command's stderr has:\n{err}"
    );
    assert!(t.sockets().is_empty(), "left behind: {:?}", t.sockets());
}

/// The command asks for a reload itself (and from a grandchild): refused, the
/// policy stays; the person outside can still reload the same session. The
/// session's socket is out of the command's reach (a private `/tmp`, `/run`); here
/// it is passed on purpose (`--allow-socket`), and the daemon refuses all the same.
#[test]
fn a_run_session_refuses_a_reload_from_inside() {
    let t = Tree::new();
    let veilfs = env!("CARGO_BIN_EXE_veilfs");
    let ws = t.p("ws");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(t.rt())
        .unwrap();
    let rt = t.rt().display().to_string();
    let script = format!(
        "echo started; read go; \
         '{veilfs}' reload '{ws}'; echo inside=$?; \
         sh -c \"'{veilfs}' reload '{ws}'; echo nested=\\$?\" & wait; \
         cat a.txt; echo tried; read go; \
         i=0; while cat a.txt >/dev/null 2>&1; do \
         i=$((i+1)); [ $i -gt 400 ] && {{ echo never; exit 3; }}; sleep 0.05; done; echo denied",
        ws = ws.display()
    );
    let mut run = Run::start_with(&t, &["--allow-socket", &rt], &script);
    run.expect_line("started");
    t.edit_policy(DENY_A);
    run.say("go");
    run.expect_line("tried");
    assert!(run.out.contains("inside=1\n"), "{}", run.out);
    assert!(run.out.contains("nested=1\n"), "{}", run.out);
    assert!(
        run.out.contains("hello\ntried\n"),
        "a.txt must stay readable after the refused reloads:\n{}",
        run.out
    );
    let o = t.reload(&ws);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    run.say("go");
    let (code, out, err) = run.finish();
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.ends_with("denied\n"), "{out}");
    assert_eq!(
        err.matches("refused: the request comes from inside")
            .count(),
        2,
        "{err}"
    );
    assert!(!err.contains("reloaded"), "{err}");
}

/// Two `run`s and a `mount` of one path: `veilfs reload PATH` asks each live one,
/// says what each did, and removes a stale socket (its daemon gone).
#[test]
fn veilfs_reload_asks_every_session_of_a_path() {
    let t = Tree::new();
    let mut a = Run::start(&t, "echo started; read x");
    let mut b = Run::start(&t, "echo started; read x");
    a.expect_line("started");
    b.expect_line("started");
    // A socket whose daemon died without removing it.
    let hash = veilfs::session::control::socket_path(&t.p("ws"), Session::Mount).unwrap();
    let hash = hash.file_stem().unwrap().to_string_lossy().into_owned();
    let stale = t.rt().join(format!("{hash}-run-999999999.sock"));
    drop(UnixListener::bind(&stale).unwrap());
    assert_eq!(t.sockets().len(), 3, "{:?}", t.sockets());

    let o = t.reload(&t.p("ws"));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = text(&o.stdout);
    for r in [&a, &b] {
        assert!(
            out.contains(&format!("veilfs run (pid {}): ", r.child.id())),
            "{}",
            show(&o)
        );
    }
    assert_eq!(out.matches("reloaded").count(), 2, "{}", show(&o));
    assert!(!stale.exists(), "the stale socket was kept");

    // A broken policy: every session keeps its old one; exit 1.
    std::fs::write(t.p("pol/p.toml"), "default = \"nope\"\n").unwrap();
    let o = t.reload(&t.p("ws"));
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        text(&o.stderr)
            .matches("the old policy stays in force")
            .count(),
        2,
        "{}",
        show(&o)
    );
    for mut r in [a, b] {
        r.say("x");
        assert_eq!(r.finish().0, Some(0));
    }
    let o = t.reload(&t.p("ws"));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// Without root (`run` in a user namespace, whose daemon cannot read the links
/// of the person's processes outside it), the person's own `veilfs reload` is
/// answered (attacker pass: every reload and prompt was refused as "from another
/// PID namespace", so `ask` paths could never be approved).
#[test]
fn a_run_without_root_answers_the_persons_reload() {
    common::require_fuse();
    common::run::fuse_for_everyone();
    let t = tempfile::Builder::new()
        .prefix("veilfs-ctl-nobody")
        .tempdir()
        .unwrap();
    let ws = t.path().join("ws");
    let rt = t.path().join("rt");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&rt)
        .unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    common::run::chown_r("65534", t.path());
    std::fs::set_permissions(
        t.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let nobody = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_veilfs"))
            .args(args)
            .current_dir(&ws)
            .env("HOME", &ws)
            .env("VEILFS_RUNTIME_DIR", &rt);
        c
    };
    let mut run = nobody(&[
        "run",
        "-q",
        "--no-home",
        "--",
        "sh",
        "-c",
        "echo started; read x",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(run.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "started\n");
    let o = nobody(&["reload", &ws.display().to_string()])
        .output()
        .unwrap();
    drop(run.stdin.take());
    let _ = run.wait();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(!show(&o).contains("refused"), "{}", show(&o));
}

/// `veilfs stats` tells the requests the mount served, by opcode, and the daemon's
/// CPU time and peak RSS: an open through the mount shows as one more `OPEN`.
#[test]
fn stats_count_the_requests_served_by_opcode() {
    let t = Tree::new();
    let d = mount(&t, Some(&t.p("pol/p.toml")));
    let stats = || {
        let o = run_with_deadline(t.veilfs().arg("stats").arg(&d.mnt), Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{}", show(&o)));
        v
    };
    let opens = |v: &serde_json::Value| v["mounts"][0]["requests"]["OPEN"].as_u64().unwrap_or(0);
    let before = stats();
    assert_eq!(
        std::fs::read_to_string(d.mnt.join("a.txt")).unwrap(),
        "hello\n"
    );
    let after = stats();
    assert_eq!(
        opens(&after),
        opens(&before) + 1,
        "before: {before}\nafter: {after}"
    );
    assert!(
        after["cpu_seconds"].as_f64().is_some_and(|c| c > 0.0),
        "{after}"
    );
    assert!(
        after["max_rss_kib"].as_u64().is_some_and(|r| r > 0),
        "{after}"
    );
}
