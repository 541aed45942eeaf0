//! The `ask` action under `veilfs run`: the person outside approves the
//! command's requests, in the workspace and in the home directory, and the
//! confined command can never answer its own questions.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::daemon::{Approver, Prompt};
use common::wait_until;

const SECRET: &str = "run-ask-secret-77\n";

struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            tmp: common::temp_tree("veilfs-ask-run", &["ws/mig", "home/.config/tool", "rt"]),
        };
        std::fs::write(t.p("ws/mig/001.sql"), SECRET).unwrap();
        std::fs::write(t.p("home/.config/tool/token"), SECRET).unwrap();
        std::fs::write(
            t.p("pol.toml"),
            "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n",
        )
        .unwrap();
        std::fs::write(
            t.p("home.toml"),
            "extends = \"home-default\"\n[[rules]]\naction = \"ask\"\npaths = [\"/.config/tool/\"]\n",
        )
        .unwrap();
        t
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `veilfs run` of `sh -c script` in the workspace, with the home directory
    /// `home/` under `home.toml`. The script should wait for the file `go` before
    /// it uses an `ask` path (so that the approver is subscribed by then).
    fn run(&self, script: &str) -> Child {
        self.run_with(&[], script)
    }

    /// As [`Tree::run`], with more arguments for `run`.
    fn run_with(&self, args: &[&str], script: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env("HOME", self.p("home"))
            .env_remove("XDG_CONFIG_HOME")
            .args(["run", "--quiet", "--ask-timeout", "600"])
            .args(args)
            .arg("--policy")
            .arg(self.p("pol.toml"))
            .arg("--home-policy")
            .arg(self.p("home.toml"))
            .arg("--workspace")
            .arg(self.p("ws"))
            .args(["--", "sh", "-c", script])
            .current_dir(self.p("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Lets the command go on past its wait for `go`.
    fn go(&self) {
        std::fs::write(self.p("ws/go"), "").unwrap();
    }
}

const WAIT_FOR_GO: &str = "while [ ! -e go ]; do sleep 0.05; done; ";

#[track_caller]
fn finish(child: Child) -> (i32, String, String) {
    common::finish(child, Duration::from_secs(60))
}

#[test]
fn the_person_outside_answers_for_the_workspace_and_the_home_directory() {
    let t = Tree::new();
    let run = t.run(&format!(
        "{WAIT_FOR_GO} cat mig/001.sql; echo rc=$?; cat \"$HOME\"/.config/tool/token; echo rc=$?"
    ));
    let mut a = Approver::subscribe(&t.p("rt"));
    t.go();
    let q = a.question(Duration::from_secs(30));
    assert_eq!(
        (q["root"].as_str(), q["path"].as_str()),
        (Some("workspace"), Some("mig/001.sql")),
        "{q}"
    );
    assert!(
        q["session"]
            .as_str()
            .unwrap()
            .starts_with("veilfs run (pid "),
        "{q}"
    );
    assert_eq!(q["comm"], "cat");
    a.answer(&q["id"], "allow-once", None);
    let q = a.question(Duration::from_secs(30));
    assert_eq!(
        (q["root"].as_str(), q["path"].as_str()),
        (Some("home"), Some(".config/tool/token")),
        "{q}"
    );
    a.answer(&q["id"], "deny", Some("not the token"));
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("{SECRET}rc=0\n")), "{out}");
    assert!(
        out.ends_with("rc=1\n") && !out[SECRET.len()..].contains("run-ask"),
        "{out}"
    );
}

#[test]
fn the_confined_command_cannot_answer_its_own_questions() {
    let t = Tree::new();
    // Inside: find the session's socket, subscribe, and answer whatever comes;
    // meanwhile a second process reads the ask path.
    let script = format!(
        "{WAIT_FOR_GO} (sleep 1; cat mig/001.sql; echo cat-rc=$?) & \
         python3 - <<'EOF'
import glob, json, os, socket
for path in glob.glob(os.environ['VEILFS_RUNTIME_DIR'] + '/*.sock'):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        s.sendall(b'subscribe\\n')
        first = s.makefile().readline().strip()
        print('GOT', first)
        if first.startswith('{{'):
            s.sendall(json.dumps({{'type': 'answer', 'id': 1, 'answer': 'allow-dir'}}).encode() + b'\\n')
    except OSError as e:
        print('REFUSED', e)
EOF
wait"
    );
    // The sessions' sockets are out of the command's reach (a private /tmp);
    // passed on purpose here, the daemons refuse all the same.
    let rt = t.p("rt").display().to_string();
    let run = t.run_with(&["--allow-socket", &rt], &script);
    // Outside, an approver is connected, so a question is asked (not refused for
    // want of an approver); it denies.
    let mut a = Approver::subscribe(&t.p("rt"));
    t.go();
    let q = a.question(Duration::from_secs(30));
    a.answer(&q["id"], "deny", None);
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("GOT {"), "the command subscribed:\n{out}");
    assert!(
        out.contains("GOT error refused") || out.contains("REFUSED"),
        "{out}"
    );
    assert!(out.contains("cat-rc=1"), "{out}");
    assert!(!out.contains("run-ask"), "{out}");
}

#[test]
fn the_confined_command_cannot_answer_nor_reload_another_session() {
    let t = Tree::new();
    // A `veilfs mount` of another tree, started outside and reachable from inside.
    for d in ["ws2/mig", "mnt2"] {
        std::fs::create_dir_all(t.p(d)).unwrap();
    }
    std::fs::write(t.p("ws2/mig/001.sql"), SECRET).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_veilfs"));
    cmd.env("VEILFS_RUNTIME_DIR", t.p("rt"))
        .args(["mount", "--ask-timeout", "600", "--policy"])
        .arg(t.p("pol.toml"))
        .arg(t.p("ws2"))
        .arg(t.p("mnt2"));
    let _mount = common::daemon::Daemon::start(cmd, &t.p("mnt2"));
    let mnt2 = t.p("mnt2");
    // Inside: subscribe on every socket and approve everything, while a second
    // process reads the other mount's ask path; then reload that mount.
    let script = format!(
        "{WAIT_FOR_GO} (sleep 1; cat {m}/mig/001.sql; echo cat-rc=$?) & \
         python3 - <<'PY'
import glob, json, os, socket, threading
def approve(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(path)
        s.sendall(b'subscribe\n')
        f = s.makefile()
        first = f.readline().strip()
        print('GOT', first, flush=True)
        for line in f:
            q = json.loads(line)
            if q.get('type') == 'question':
                s.sendall(json.dumps({{'type': 'answer', 'id': q['id'], 'answer': 'allow-dir'}}).encode() + b'\n')
    except OSError as e:
        print('REFUSED', e, flush=True)
ts = [threading.Thread(target=approve, args=(p,), daemon=True)
      for p in glob.glob(os.environ['VEILFS_RUNTIME_DIR'] + '/*.sock')]
for x in ts: x.start()
for x in ts: x.join(4)
PY
wait; {bin} reload {m} 2>&1; echo reload-rc=$?",
        m = mnt2.display(),
        bin = env!("CARGO_BIN_EXE_veilfs"),
    );
    // The sessions' sockets are out of the command's reach (a private /tmp);
    // passed on purpose here, the daemons refuse all the same.
    let rt = t.p("rt").display().to_string();
    // The other mount lies in the shared /tmp.
    let run = t.run_with(&["--allow-socket", &rt, "--share-tmp"], &script);
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::read_dir(t.p("rt"))
            .map(|d| d.count() >= 2)
            .unwrap_or(false)),
        "the run's socket did not appear"
    );
    t.go();
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("GOT {"), "the command subscribed:\n{out}");
    assert!(out.contains("cat-rc=1"), "{out}");
    assert!(!out.contains("run-ask"), "{out}");
    assert!(
        out.contains("reload-rc=") && !out.contains("reload-rc=0"),
        "{out}"
    );
    assert!(out.contains("another PID namespace"), "{out}");
}

/// `veilfs prompt` started in the workspace before `veilfs run` there waits for
/// the session, then answers its questions, each named by the workspace (under
/// the home directory, as `~/...`).
#[test]
fn a_prompt_started_in_the_workspace_first_answers_the_run_there() {
    let t = Tree::new();
    let mut prompt = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", t.p("rt"))
            .env("HOME", t.tmp.path())
            .arg("prompt")
            .current_dir(t.p("ws"));
        Prompt::start(c)
    };
    prompt.err.expect(&format!(
        "veilfs prompt: waiting for a session of {} (start `veilfs run` there)",
        t.p("ws").display()
    ));
    let run = t.run(&format!("{WAIT_FOR_GO} cat mig/001.sql; echo rc=$?"));
    prompt
        .out
        .expect("-- [~/ws] answering for veilfs run (pid ");
    t.go();
    let shown = prompt.out.expect("deny with a reason");
    assert!(
        shown.contains("? [~/ws] question ") && shown.contains("from veilfs run (pid "),
        "{shown}"
    );
    prompt.type_keys(b"y");
    let (code, out, err) = finish(run);
    assert_eq!(
        (code, out.as_str()),
        (0, format!("{SECRET}rc=0\n").as_str()),
        "{err}"
    );
    prompt.out.expect("-- waiting for a session of ");
    assert_eq!(prompt.close(), 0);
}

/// A question asked while nobody answers is refused at once; when the command has
/// ended, `run` says so once, and what to start next time (never on the
/// command's terminal while it runs).
#[test]
fn questions_nobody_answered_are_said_once_at_the_end() {
    let t = Tree::new();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .env("VEILFS_RUNTIME_DIR", t.p("rt"))
        .env("HOME", t.p("home"))
        .args(["run", "--notices"])
        .arg(t.p("notices.log"))
        .arg("--policy")
        .arg(t.p("pol.toml"))
        .arg("--workspace")
        .arg(t.p("ws"))
        .args([
            "--",
            "sh",
            "-c",
            "cat mig/001.sql; cat mig/001.sql; echo rc=$?",
        ])
        .current_dir(t.p("ws"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        out.contains("rc=1") && !out.contains(SECRET.trim()),
        "{out}{err}"
    );
    let hint = format!("start `veilfs prompt {}`", t.p("ws").display());
    assert_eq!(err.matches(&hint).count(), 1, "{err}");
    assert!(
        err.contains("2 questions of `ask` paths were refused"),
        "{err}"
    );
}
