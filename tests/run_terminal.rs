//! `veilfs run` and terminals, and how `run` ends: the command can never type into
//! the invoking terminal (TIOCSTI), an interactive shell inside keeps Ctrl-C, window
//! size and colours, and `run` always ends (every option, SIGTERM/SIGINT).

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{require_fuse, wait_until};

const SECRET: &str = "TOPSECRET-term";
const VEILFS: &str = env!("CARGO_BIN_EXE_veilfs");

/// A workspace with a denied `.env`.
struct Ws {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-term")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".env"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.join("a.txt"), "hello\n").unwrap();
        Ws { tmp, dir }
    }

    /// The policy as `WS/.veilfs.toml` (the daemon then watches it).
    fn with_policy_file(self) -> Ws {
        std::fs::write(
            self.dir.join(".veilfs.toml"),
            "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n",
        )
        .unwrap();
        self
    }

    /// Lets uid 65534 reach the workspace.
    fn open_to_nobody(&self) {
        for p in [self.tmp.path(), &self.dir] {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
    }
}

/// Output collected from a child while it runs.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<u8>>>);

impl Collected {
    fn from(mut r: impl Read + Send + 'static) -> Collected {
        let c = Collected::default();
        let sink = c.0.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        c
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A child with its output collected as it comes.
struct Running {
    child: Child,
    out: Collected,
    err: Collected,
    stdin: Option<std::process::ChildStdin>,
}

impl Running {
    fn spawn(mut c: Command) -> Running {
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Collected::from(child.stdout.take().unwrap());
        let err = Collected::from(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        Running {
            child,
            out,
            err,
            stdin,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    fn show(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.out.text(), self.err.text())
    }

    /// Waits until `f(stdout)` holds, at most `limit`.
    fn wait_for_output(&self, limit: Duration, f: impl Fn(&str) -> bool) -> bool {
        wait_until(limit, || f(&self.out.text()))
    }

    /// The exit status within `limit`; past it the child is killed (by pid) and the
    /// test fails: a hang is a failure, never a stuck suite.
    fn finish(mut self, limit: Duration, what: &str) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let mut status = None;
        let ended = wait_until(limit, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        if !ended {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(self.pid(), libc::SIGKILL) };
            let _ = self.child.wait();
            panic!(
                "{what}: still running after {limit:?}; killed\n{}",
                self.show()
            );
        }
        // Let the reader threads take the last bytes (the pipes close with the child).
        std::thread::sleep(Duration::from_millis(50));
        (status.unwrap(), self.show())
    }
}

/// `script -qec CMD /dev/null` in `dir`: CMD on a real terminal, under a shell that
/// reads that terminal after `veilfs run` has exited.
fn script(dir: &Path, cmd: &str) -> Running {
    let mut c = Command::new("script");
    c.args(["-qec", cmd, "/dev/null"]).current_dir(dir);
    Running::spawn(c)
}

/// `/proc/sys/dev/tty/legacy_tiocsti` held at 1 while any test needs it (restored
/// afterwards); where the knob does not exist the kernel always allows TIOCSTI.
struct LegacyTiocsti;

static TIOCSTI_USERS: Mutex<(usize, Option<String>)> = Mutex::new((0, None));
const KNOB: &str = "/proc/sys/dev/tty/legacy_tiocsti";

impl LegacyTiocsti {
    fn on() -> LegacyTiocsti {
        let mut g = TIOCSTI_USERS.lock().unwrap();
        if g.0 == 0
            && let Ok(old) = std::fs::read_to_string(KNOB)
        {
            if old.trim() != "1" {
                std::fs::write(KNOB, "1").expect("cannot turn legacy_tiocsti on");
            }
            g.1 = Some(old);
        }
        g.0 += 1;
        LegacyTiocsti
    }
}

impl Drop for LegacyTiocsti {
    fn drop(&mut self) {
        let mut g = TIOCSTI_USERS.lock().unwrap_or_else(|e| e.into_inner());
        g.0 -= 1;
        if g.0 == 0
            && let Some(old) = g.1.take()
            && old.trim() != "1"
        {
            let _ = std::fs::write(KNOB, old.trim());
        }
    }
}

fn python() -> &'static str {
    // Reachable by uid 65534 too (a pyenv shim under /root is not).
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Python pushing `echo INJECTED-$((6*7))` and a newline into terminal `target`
/// (`0` for fd 0, `/dev/tty` to open the controlling terminal) with TIOCSTI.
fn injector(target: &str) -> String {
    format!(
        r#"
import fcntl, os, termios
try:
    fd = 0 if "{target}" == "0" else os.open("{target}", os.O_RDWR)
    n = 0
    for b in b"echo INJECTED-$((6*7))\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        n += 1
    print("tried: injected", n)
except OSError as e:
    print("tried:", e)
"#
    )
}

/// Runs `veilfs run RUN_ARGS -- python3 -c INJECTOR REDIRECT` in `script`, then has
/// the outer shell read one line from the terminal and run it, as an interactive
/// shell would. The injected line must never run there.
fn assert_no_injection(ws: &Ws, run_args: &str, target: &str, redirect: &str) {
    let _knob = LegacyTiocsti::on();
    let py = injector(target).replace('\'', r"'\''");
    let cmd = format!(
        "{VEILFS} run -q {run_args} -- {} -c '{py}' {redirect}; \
         echo run-ended-$?; read -t 2 -r line; eval \"$line\"; echo outer-shell-done",
        python()
    );
    let r = script(&ws.dir, &cmd);
    let ok = r.wait_for_output(Duration::from_secs(30), |o| o.contains("outer-shell-done"));
    let (_, shown) = r.finish(Duration::from_secs(10), "script");
    assert!(ok, "the outer shell did not finish:\n{shown}");
    assert!(
        shown.contains("tried"),
        "the injector did not run:\n{shown}"
    );
    assert!(shown.contains("run-ended-0"), "{shown}");
    assert!(
        !shown.contains("INJECTED-42"),
        "the command typed into the invoking shell:\n{shown}"
    );
}

#[test]
fn tiocsti_on_the_commands_terminal_never_reaches_the_invoking_shell() {
    let ws = Ws::new();
    assert_no_injection(&ws, "", "0", "");
}

#[test]
fn tiocsti_as_another_user_never_reaches_the_invoking_shell() {
    let ws = Ws::new();
    ws.open_to_nobody();
    assert_no_injection(&ws, "--user 65534:65534", "0", "");
}

/// No fd is a terminal, but the command looks for its controlling terminal.
#[test]
fn tiocsti_on_dev_tty_without_a_terminal_never_reaches_the_invoking_shell() {
    let ws = Ws::new();
    let out = ws.tmp.path().join("out.txt");
    let redirect = format!("</dev/null >{} 2>&1; cat {}", out.display(), out.display());
    assert_no_injection(&ws, "", "/dev/tty", &redirect);
}

/// Whether a process of ours with exactly these arguments is running.
fn running(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
}

#[test]
fn an_interactive_shell_keeps_ctrl_c_window_size_and_colours() {
    let ws = Ws::new();
    let mut r = script(
        &ws.dir,
        &format!(
            "stty rows 33 cols 101; TERM=xterm-256color {VEILFS} run -q -- bash --norc -i; echo outer-$?"
        ),
    );
    r.send(
        b"stty size; tput colors; test -t 0 && test -t 1 && echo both-ttys; cat .env\n\
          sleep 4711\n",
    );
    // Ctrl-C only once `sleep` runs, so that it is what gets interrupted.
    assert!(
        wait_until(Duration::from_secs(20), || running(&["sleep", "4711"])),
        "sleep did not start\n{}",
        r.show()
    );
    r.send(b"\x03");
    r.send(b"echo after-$((1+1))\n");
    assert!(
        r.wait_for_output(Duration::from_secs(20), |o| o.contains("after-2")),
        "Ctrl-C did not interrupt sleep, or the shell did not go on\n{}",
        r.show()
    );
    r.send(b"exit 3\n");
    let ok = r.wait_for_output(Duration::from_secs(20), |o| o.contains("outer-3"));
    let (_, shown) = r.finish(Duration::from_secs(10), "interactive bash");
    assert!(ok, "{shown}");
    assert!(shown.contains("33 101"), "window size: {shown}");
    assert!(shown.contains("\n256"), "colours: {shown}");
    assert!(shown.contains("both-ttys"), "{shown}");
    assert!(shown.contains("Permission denied"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!running(&["sleep", "4711"]));
}

/// The outer terminal's settings are the same after `run`, also when `run` is ended
/// by signals while the command ignores them.
#[test]
fn the_terminal_is_restored_after_run_is_killed() {
    let ws = Ws::new();
    let r = script(
        &ws.dir,
        &format!(
            "stty -a > before.txt; {VEILFS} run -q -- sh -c 'trap \"\" TERM INT; echo cmd-started; sleep 4712'; \
             echo run-ended-$?; stty -a > after.txt; echo outer-done"
        ),
    );
    assert!(
        wait_until(Duration::from_secs(20), || running(&["sleep", "4712"])),
        "{}",
        r.show()
    );
    let daemon = pid_of(VEILFS, "sleep 4712").expect("veilfs run's pid");
    // SAFETY: signalling a process this test started, by pid.
    unsafe { libc::kill(daemon, libc::SIGTERM) };
    let ok = r.wait_for_output(Duration::from_secs(20), |o| o.contains("outer-done"));
    let (_, shown) = r.finish(Duration::from_secs(10), "script");
    assert!(ok, "{shown}");
    assert!(shown.contains("run-ended-143"), "{shown}");
    let before = std::fs::read_to_string(ws.dir.join("before.txt")).unwrap();
    let after = std::fs::read_to_string(ws.dir.join("after.txt")).unwrap();
    assert_eq!(before, after, "terminal settings changed");
    assert!(
        before.contains(" icanon") && before.contains(" echo"),
        "{before}"
    );
}

/// The pid of the process running `program` with an argument containing `needle`.
fn pid_of(program: &str, needle: &str) -> Option<i32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let c = std::fs::read(e.path().join("cmdline")).ok()?;
        let mut args = c.split(|&b| b == 0);
        let first = args.next()?;
        (first == program.as_bytes()
            && args.any(|a| a.windows(needle.len()).any(|w| w == needle.as_bytes())))
        .then_some(pid)
    })
}

// ---- `run` always ends ----

/// `veilfs run OPTS -- sh -c SCRIPT` in the workspace, with nothing on a terminal.
fn run(ws: &Ws, opts: &[&str], script: &str) -> Running {
    let mut c = Command::new(VEILFS);
    c.arg("run")
        .arg("-q")
        .args(opts)
        .args(["--", "sh", "-c", script])
        .current_dir(&ws.dir);
    Running::spawn(c)
}

/// With the policy in the workspace and an audit log, `run` must end with the
/// command's status under each option.
fn ends_with_status(opts: &[&str]) {
    let ws = Ws::new().with_policy_file();
    let log = ws.tmp.path().join("audit.log");
    let log = log.to_str().unwrap();
    let mut all: Vec<&str> = opts
        .iter()
        .map(|o| if *o == "LOG" { log } else { o })
        .collect();
    if !all.contains(&"--audit") {
        all.extend(["--audit", log]);
    }
    let r = run(&ws, &all, "cat a.txt; cat .env; exit 6");
    let (st, shown) = r.finish(Duration::from_secs(20), &format!("veilfs run {all:?}"));
    assert_eq!(st.code(), Some(6), "{shown}");
    assert!(shown.contains("hello"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
    if all.contains(&log) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        assert!(text.contains("\"path\":\".env\""), "audit log:\n{text}");
    }
}

#[test]
fn run_ends_with_audit_to_a_file() {
    ends_with_status(&["--audit", "LOG"]);
}

#[test]
fn run_ends_with_audit_to_stderr() {
    ends_with_status(&["--audit", "-"]);
}

#[test]
fn run_ends_with_audit_all() {
    ends_with_status(&["--audit-all", "--audit", "LOG"]);
}

#[test]
fn run_ends_with_no_watch() {
    ends_with_status(&["--no-watch"]);
}

#[test]
fn run_ends_with_strict_open() {
    ends_with_status(&["--strict-open"]);
}

/// A broken policy written from outside while the command runs.
#[test]
fn run_ends_after_a_policy_error_at_reload() {
    let ws = Ws::new().with_policy_file();
    let go = ws.tmp.path().join("go");
    let log = ws.tmp.path().join("audit.log");
    // The flag is a file beside the workspace, in the shared /tmp.
    let signals = ws.tmp.path().to_str().unwrap();
    let r = run(
        &ws,
        &["--audit", log.to_str().unwrap(), "--writable", signals],
        &format!(
            "echo started; cat .env; while [ ! -e {} ]; do sleep 0.05; done; exit 6",
            go.display()
        ),
    );
    assert!(
        r.wait_for_output(Duration::from_secs(20), |o| o.contains("started")),
        "{}",
        r.show()
    );
    std::fs::write(ws.dir.join(".veilfs.toml"), "default = nope\n").unwrap();
    std::fs::write(&go, "").unwrap();
    let (st, shown) = r.finish(Duration::from_secs(20), "veilfs run");
    assert_eq!(st.code(), Some(6), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}

/// `veilfs run` gets `sig` while its command ignores it: `run` ends with 128+sig
/// (after a grace period, or at once on a second signal).
fn ends_on_signal(sig: i32, twice: bool) {
    let ws = Ws::new().with_policy_file();
    let log = ws.tmp.path().join("audit.log");
    let r = run(
        &ws,
        &["--audit", log.to_str().unwrap()],
        "trap '' TERM INT HUP QUIT; echo started; sleep 4713 & wait; wait; exit 9",
    );
    assert!(
        r.wait_for_output(Duration::from_secs(20), |o| o.contains("started")),
        "{}",
        r.show()
    );
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(r.pid(), sig) };
    let start = Instant::now();
    if twice {
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: as above.
        unsafe { libc::kill(r.pid(), sig) };
    }
    let (st, shown) = r.finish(
        Duration::from_secs(20),
        &format!("veilfs run after signal {sig}"),
    );
    assert_eq!(st.code(), Some(128 + sig), "{shown}");
    if twice {
        // The grace period after one signal is 3 s; the second ends it at once.
        assert!(
            start.elapsed() < Duration::from_millis(2500),
            "took {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn sigterm_ends_run_even_when_the_command_ignores_it() {
    ends_on_signal(libc::SIGTERM, false);
}

#[test]
fn sigint_ends_run_even_when_the_command_ignores_it() {
    ends_on_signal(libc::SIGINT, false);
}

#[test]
fn a_second_signal_ends_run_at_once() {
    ends_on_signal(libc::SIGTERM, true);
}

/// A command that ends on the forwarded signal gives its own status.
#[test]
fn sigint_is_passed_on_to_the_command() {
    let ws = Ws::new();
    let r = run(&ws, &[], "echo started; exec sleep 4714");
    assert!(
        r.wait_for_output(Duration::from_secs(20), |o| o.contains("started")),
        "{}",
        r.show()
    );
    assert!(wait_until(Duration::from_secs(10), || running(&[
        "sleep", "4714"
    ])));
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(r.pid(), libc::SIGINT) };
    let (st, shown) = r.finish(Duration::from_secs(20), "veilfs run after SIGINT");
    assert_eq!(st.code(), Some(130), "{shown}");
}

/// The driver for [`ctrl_z_stops_run_as_a_job_and_fg_resumes_it`]: an interactive
/// bash with job control on a pty of its own.
const JOB_DRIVER: &str = r#"
import os, pty, select, sys, time
veilfs, ws = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.chdir(ws)
    os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], dict(os.environ, PS1="PROMPT> "))
out, mark = b"", 0
def wait_for(s, t=20):
    global out, mark
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: break
        i = out.find(s.encode(), mark)
        if i >= 0:
            mark = i + len(s)
            return True
    return False
def step(name, ok):
    print(name, "ok" if ok else "MISSING", flush=True)
os.write(fd, f"{veilfs} run -q -- sh -c 'echo started-$((5*5)); kill -STOP $$; echo resumed-$((6*7))'\n".encode())
step("started", wait_for("started-25"))
step("self-stop", wait_for("Stopped"))
os.write(fd, b"echo outer-$((2*21))\n")
step("outer shell", wait_for("outer-42"))
os.write(fd, b"fg\n")
step("fg", wait_for("resumed-42"))
step("prompt", wait_for("PROMPT> "))
os.write(fd, f"{veilfs} run -q -- sh -c 'echo sleeping-$((4*4)); exec sleep 100'\n".encode())
step("sleeping", wait_for("sleeping-16"))
time.sleep(0.3)
os.write(fd, b"\x1a")
step("ctrl-z", wait_for("Stopped"))
step("prompt after stop", wait_for("PROMPT> "))
os.write(fd, b"fg\n")
time.sleep(0.5)
os.write(fd, b"\x03")
step("interrupted", wait_for("^C"))
step("prompt after ctrl-c", wait_for("PROMPT> "))
os.write(fd, b"echo after-$((3*3))\n")
step("ctrl-c after fg", wait_for("after-9"))
os.write(fd, b"exit\n")
time.sleep(0.3)
os.kill(pid, 9)
sys.stdout.write(out.decode(errors="replace"))
"#;

/// A command that stops (`kill -STOP $$`, or Ctrl-Z in its terminal) stops `run` as
/// a job of the caller's shell, which takes the terminal back; `fg` resumes both.
#[test]
fn ctrl_z_stops_run_as_a_job_and_fg_resumes_it() {
    let ws = Ws::new();
    let o = Command::new(python())
        .args(["-c", JOB_DRIVER, VEILFS])
        .arg(&ws.dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !out.contains("MISSING"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("ctrl-c after fg ok"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
