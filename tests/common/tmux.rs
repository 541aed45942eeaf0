//! A tmux server of the test's own (its socket in the test's directory), running
//! one command in a pane of a fixed size: keys typed, the screen read with a
//! deadline, and the server killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct Tmux {
    sock: PathBuf,
}

impl Tmux {
    /// Starts `cmd` (a shell command line) in a `width`×`height` pane of a new
    /// server whose socket is `sock`.
    pub fn start(sock: &Path, cmd: &str, (width, height): (u16, u16)) -> Tmux {
        let t = Tmux {
            sock: sock.to_path_buf(),
        };
        let (w, h) = (width.to_string(), height.to_string());
        let o = t.run(&["new-session", "-d", "-s", "t", "-x", &w, "-y", &h, cmd]);
        assert!(o.status.success(), "tmux new-session: {o:?}");
        t
    }

    /// `tmux ARGS` on this server.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux is installed (scripts/test installs it)")
    }

    /// Types `keys` into the pane.
    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "t", keys]);
    }

    /// The pane's text (`-e`: with its attributes, as escape sequences).
    pub fn screen(&self, attributes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "t"];
        if attributes {
            args.push("-e");
        }
        String::from_utf8_lossy(&self.run(&args).stdout).into_owned()
    }

    /// Polls the pane until it shows `want`, at most twenty seconds; its text then.
    pub fn screen_with(&self, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen(false);
            if screen.contains(want) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}
