//! Under `veilfs run`, refusal notices never reach the terminal while the command
//! runs (it is the command's: a line drawn there lands over a full-screen agent or
//! editor): they go to the session's notices file, named in the start-up line, and
//! `run` prints one summary when the command has ended.

mod common;

use common::run::{show, text};

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::require_fuse;

const SECRET: &str = "notices-secret-5150";

fn tmux(sock: &Path, args: &[&str]) -> Output {
    Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .env_remove("TMUX")
        .output()
        .expect("tmux is installed (scripts/test installs it)")
}

/// Polls the pane until `want` shows, at most ten seconds; its text.
fn screen_with(sock: &Path, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = tmux(sock, &["capture-pane", "-p", "-t", "t"]);
        let screen = text(&o.stdout);
        if screen.contains(want) || Instant::now() > deadline {
            return screen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn notices_never_reach_the_commands_screen() {
    require_fuse();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(".env"), SECRET).unwrap();
    let notices = tmp.path().join("notices.log");
    let sock = tmp.path().join("tmux.sock");
    // A full-screen program's view: the command reads .env (refused) and waits.
    let cmd = format!(
        "cd {ws} && {bin} run --notices {n} -- sh -c 'clear; cat .env 2>/dev/null; touch .env 2>/dev/null; \
         echo READY; read x; echo BYE'; sleep 30",
        ws = ws.display(),
        bin = env!("CARGO_BIN_EXE_veilfs"),
        n = notices.display(),
    );
    let o = tmux(
        &sock,
        &[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "40",
            &cmd,
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    struct Server<'a>(&'a Path);
    impl Drop for Server<'_> {
        fn drop(&mut self) {
            tmux(self.0, &["kill-server"]);
        }
    }
    let _server = Server(&sock);
    let screen = screen_with(&sock, "READY");
    assert!(screen.contains("READY"), "{screen}");
    assert!(
        !screen.contains("refused") && !screen.contains("veilfs:"),
        "{screen}"
    );
    assert!(!screen.contains(SECRET), "{screen}");
    // The refusal is in the file, with its rule.
    let logged = std::fs::read_to_string(&notices).unwrap();
    assert!(
        logged.contains("veilfs: .env: lookup refused: rule 1"),
        "{logged}"
    );
    // When the command ends, one summary line says how many and where.
    tmux(&sock, &["send-keys", "-t", "t", "Enter"]);
    let screen = screen_with(&sock, "veilfs: refused");
    assert!(screen.contains("BYE"), "{screen}");
    assert!(
        screen.contains(&format!(
            "veilfs: refused 1 name (.env); each with its rule in {}",
            notices.display()
        )),
        "{screen}"
    );
}
