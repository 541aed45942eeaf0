//! The `ask` action under `veilfs run`: the person outside approves the
//! command's requests, in the workspace and in the home directory, and the
//! confined command can never answer its own questions.

mod common;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::daemon::Approver;
use common::{require_fuse, wait_until};

const SECRET: &str = "run-ask-secret-77\n";

struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-ask-run")
            .tempdir()
            .unwrap();
        let t = Tree { tmp };
        for d in ["ws/mig", "home/.config/tool", "rt"] {
            std::fs::create_dir_all(t.p(d)).unwrap();
        }
        std::fs::set_permissions(t.p("rt"), std::fs::Permissions::from_mode(0o700)).unwrap();
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
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .env("HOME", self.p("home"))
            .env_remove("XDG_CONFIG_HOME")
            .args(["run", "--quiet", "--ask-timeout", "600", "--policy"])
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
fn finish(mut child: Child) -> (i32, String, String) {
    if !wait_until(Duration::from_secs(60), || {
        child.try_wait().unwrap().is_some()
    }) {
        let _ = child.kill();
        panic!("veilfs run did not end within 60 s");
    }
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code().unwrap_or(-1), out, err)
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
    let run = t.run(&script);
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
