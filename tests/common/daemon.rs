//! A `veilfs mount` daemon run as a child process (stopped and unmounted on drop),
//! and an approver speaking the control socket's JSON lines (see
//! `veilfs::session::ask_socket`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use veilfs::session::mount::is_mount_point;

use super::wait_until;

/// Sends `sig` to our own child.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// A `veilfs mount` child, stopped (and unmounted) on drop.
pub struct Daemon {
    pub child: Child,
    pub mnt: PathBuf,
    /// stderr up to and including the ready line.
    pub said: String,
}

impl Daemon {
    /// Starts `cmd` (a `veilfs mount ... SRC MNT`) and returns once it says the
    /// mount is live.
    pub fn start(mut cmd: Command, mnt: &Path) -> Daemon {
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        loop {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                panic!("veilfs mount ended before it was ready:\n{said}");
            }
            said += &line;
            if line.starts_with("veilfs: mounted ") {
                break;
            }
        }
        // Keep draining stderr so the daemon never blocks on it.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        });
        Daemon {
            child,
            mnt: mnt.to_path_buf(),
            said,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            signal(&self.child, libc::SIGTERM);
            if !wait_until(Duration::from_secs(5), || {
                self.child.try_wait().unwrap().is_some()
            }) {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        if self.mnt.canonicalize().is_ok_and(|m| is_mount_point(&m)) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

/// An approver subscribed on a control socket.
pub struct Approver {
    w: UnixStream,
    r: BufReader<UnixStream>,
    /// Every line read, for failure messages.
    pub log: Vec<String>,
}

impl Approver {
    /// Subscribes on the only socket in the runtime directory `rt` (waiting for it
    /// to appear); fails when there are several.
    pub fn subscribe(rt: &Path) -> Approver {
        let mut sock = None;
        assert!(
            wait_until(Duration::from_secs(10), || {
                let v: Vec<PathBuf> = std::fs::read_dir(rt)
                    .map(|d| {
                        d.flatten()
                            .map(|e| e.path())
                            .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                            .collect()
                    })
                    .unwrap_or_default();
                assert!(v.len() <= 1, "several sockets in {}: {v:?}", rt.display());
                sock = v.into_iter().next();
                sock.is_some()
            }),
            "no control socket in {}",
            rt.display()
        );
        Approver::on(&sock.unwrap())
    }

    /// Subscribes on the socket at `sock`.
    pub fn on(sock: &Path) -> Approver {
        let mut w = UnixStream::connect(sock).unwrap();
        w.write_all(b"subscribe\n").unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        let mut a = Approver {
            w,
            r,
            log: Vec::new(),
        };
        let hello = a.next(Duration::from_secs(10)).expect("a hello line");
        assert_eq!(hello["type"], "hello", "{hello}");
        a
    }

    /// The next line, or `None` when none comes within `limit` (or the socket
    /// closed).
    pub fn next(&mut self, limit: Duration) -> Option<serde_json::Value> {
        self.r
            .get_ref()
            .set_read_timeout(Some(limit.max(Duration::from_millis(1))))
            .unwrap();
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                self.log.push(line.trim_end().to_string());
                Some(
                    serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("not JSON from the daemon ({e}): {line}")),
                )
            }
        }
    }

    /// Reads on until the daemon closes the connection (`true`), or nothing comes
    /// for `quiet` while it is still open (`false`).
    pub fn closed_by_daemon(&mut self, quiet: Duration) -> bool {
        self.r.get_ref().set_read_timeout(Some(quiet)).unwrap();
        loop {
            let mut line = String::new();
            match self.r.read_line(&mut line) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// The next question (skipping `closed` lines), within `limit`.
    #[track_caller]
    pub fn question(&mut self, limit: Duration) -> serde_json::Value {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(v) if v["type"] == "question" => return v,
                Some(_) => {}
                None => panic!("no question within {limit:?}; read: {:#?}", self.log),
            }
        }
    }

    /// Answers question `id`.
    pub fn answer(&mut self, id: &serde_json::Value, answer: &str, reason: Option<&str>) {
        let mut v = serde_json::json!({"type": "answer", "id": id, "answer": answer});
        if let Some(r) = reason {
            v["reason"] = r.into();
        }
        self.w.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    /// Answers the next question with `answer` and returns it.
    #[track_caller]
    pub fn answer_next(&mut self, answer: &str) -> serde_json::Value {
        let q = self.question(Duration::from_secs(20));
        self.answer(&q["id"], answer, None);
        q
    }
}

/// What a child prints on one stream, read line by line on a thread of its own.
pub struct Said {
    rx: std::sync::mpsc::Receiver<String>,
    /// What was read and not yet returned by [`Said::expect`].
    pub seen: String,
}

impl Said {
    pub fn new(out: impl std::io::Read + Send + 'static) -> Said {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Said {
            rx,
            seen: String::new(),
        }
    }

    /// Everything said since the last call, up to `want` (within 20 s).
    #[track_caller]
    pub fn expect(&mut self, want: &str) -> String {
        let end = Instant::now() + Duration::from_secs(20);
        while !self.seen.contains(want) {
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => {
                    self.seen += &l;
                    self.seen += "\n";
                }
                Err(_) => panic!("never said {want:?}; said:\n{}", self.seen),
            }
        }
        std::mem::take(&mut self.seen)
    }

    /// Reads what comes within `quiet` into [`Said::seen`].
    pub fn take_for(&mut self, quiet: Duration) {
        while let Ok(l) = self.rx.recv_timeout(quiet) {
            self.seen += &l;
            self.seen += "\n";
        }
    }
}

/// A `veilfs prompt` child: its keys (stdin) and what it says on stdout and
/// stderr. Killed on drop if it still runs.
pub struct Prompt {
    pub child: Child,
    keys: Option<std::process::ChildStdin>,
    pub out: Said,
    pub err: Said,
}

impl Prompt {
    /// Starts `cmd` (a `veilfs prompt ...`), with its three streams piped.
    pub fn start(mut cmd: Command) -> Prompt {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let keys = child.stdin.take();
        let out = Said::new(child.stdout.take().unwrap());
        let err = Said::new(child.stderr.take().unwrap());
        Prompt {
            child,
            keys,
            out,
            err,
        }
    }

    /// Types `keys`.
    pub fn type_keys(&mut self, keys: &[u8]) {
        let k = self.keys.as_mut().expect("stdin is open");
        k.write_all(keys).unwrap();
        k.flush().unwrap();
    }

    /// Closes stdin; the exit code once it ended (within 10 s).
    #[track_caller]
    pub fn close(&mut self) -> i32 {
        drop(self.keys.take());
        assert!(
            wait_until(Duration::from_secs(10), || self
                .child
                .try_wait()
                .unwrap()
                .is_some()),
            "the prompt did not end when its stdin closed"
        );
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for Prompt {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
