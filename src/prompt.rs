//! `veilfs prompt`: a person answers the questions of `ask` paths, one key each.
//!
//! It subscribes on the control socket of every session it finds (see
//! [`crate::ask_socket`] for the JSON lines), shows one open question at a time
//! (the oldest first) and sends the answer for the key pressed. With a terminal on
//! stdin the keys are read one by one (no Enter); otherwise (a pipe, in tests) one
//! byte at a time all the same, so `printf 'y'` answers "allow once".

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use crate::control::{self, Session};

/// What the main loop hears about.
enum Event {
    /// A JSON line from session `usize`.
    Line(usize, serde_json::Value),
    /// Session `usize` closed its socket.
    Gone(usize),
    /// A session found since the start.
    New(Session, UnixStream),
    /// A byte typed.
    Key(u8),
    /// Stdin is closed.
    Eof,
}

/// One session subscribed to.
struct Conn {
    session: Session,
    w: UnixStream,
    alive: bool,
}

/// `veilfs prompt [PATH...]`: exit 0 when stdin closes or every session has ended,
/// 2 when no session is found at the start.
pub fn prompt(paths: &[PathBuf]) -> ExitCode {
    let (tx, rx) = mpsc::channel();
    let mut known = HashSet::new();
    let mut found = Vec::new();
    if paths.is_empty() {
        match control::connect_new(None, &mut known) {
            Ok(f) => found.extend(f.into_iter().map(|(s, _, c)| (s, c))),
            Err(e) => {
                eprintln!("veilfs prompt: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        for p in paths {
            match control::connect(Some(p)) {
                Ok(f) if f.is_empty() => {
                    eprintln!("veilfs prompt: no veilfs session serves {}", p.display());
                }
                Ok(f) => found.extend(f),
                Err(e) => eprintln!("veilfs prompt: {}: {e}", p.display()),
            }
        }
    }
    let mut conns: Vec<Conn> = Vec::new();
    for (session, conn) in found {
        match conn {
            Ok(c) => attach(&mut conns, session, c, &tx),
            Err(e) => eprintln!("veilfs prompt: {session}: {e}"),
        }
    }
    if conns.is_empty() {
        eprintln!(
            "veilfs prompt: no veilfs session to answer for (start `veilfs mount` or \
             `veilfs run` first)"
        );
        return ExitCode::from(2);
    }
    let rescan = paths.is_empty();
    if rescan {
        // Sessions started later are answered too.
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name("veilfs-prompt-scan".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                    let Ok(found) = control::connect_new(None, &mut known) else {
                        continue;
                    };
                    for (s, _, c) in found {
                        if let Ok(c) = c
                            && tx.send(Event::New(s, c)).is_err()
                        {
                            return;
                        }
                    }
                }
            });
    }
    let _raw = RawTerminal::enter();
    {
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name("veilfs-prompt-keys".into())
            .spawn(move || {
                let mut stdin = io::stdin().lock();
                let mut b = [0u8; 1];
                loop {
                    match stdin.read(&mut b) {
                        Ok(1) => {
                            if tx.send(Event::Key(b[0])).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {
                            let _ = tx.send(Event::Eof);
                            return;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            let _ = tx.send(Event::Eof);
                            return;
                        }
                    }
                }
            });
    }
    Ui::default().run(conns, rx, tx, rescan)
}

/// Subscribes on `conn` and starts the thread reading its lines.
fn attach(conns: &mut Vec<Conn>, session: Session, conn: UnixStream, tx: &mpsc::Sender<Event>) {
    if let Err(e) = control::trusted_daemon(&conn) {
        eprintln!("veilfs prompt: {session}: not subscribed: {e}");
        return;
    }
    let mut w = match conn.try_clone() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("veilfs prompt: {session}: {e}");
            return;
        }
    };
    if let Err(e) = w.write_all(b"subscribe\n") {
        eprintln!("veilfs prompt: {session}: {e}");
        return;
    }
    let i = conns.len();
    let tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("veilfs-prompt-read".into())
        .spawn(move || {
            for line in BufReader::new(conn).lines() {
                let Ok(line) = line else { break };
                if let Some(v) = line
                    .strip_prefix("error ")
                    .map(|e| serde_json::json!({"type": "error", "message": e}))
                    .or_else(|| serde_json::from_str(&line).ok())
                    && tx.send(Event::Line(i, v)).is_err()
                {
                    return;
                }
            }
            let _ = tx.send(Event::Gone(i));
        });
    if spawned.is_ok() {
        conns.push(Conn {
            session,
            w,
            alive: true,
        });
    }
}

/// The prompt's state: the open questions, oldest first, and what is typed.
#[derive(Default)]
struct Ui {
    queue: VecDeque<(usize, serde_json::Value)>,
    /// The question shown: (session, id).
    shown: Option<(usize, u64)>,
    /// Typing a reason for a denial.
    reason: Option<String>,
}

impl Ui {
    /// Runs until stdin closes, `q`, or (for named sessions) every session ended.
    /// `tx` is for the readers of sessions found later.
    fn run(
        mut self,
        mut conns: Vec<Conn>,
        rx: mpsc::Receiver<Event>,
        tx: mpsc::Sender<Event>,
        rescan: bool,
    ) -> ExitCode {
        while let Ok(ev) = rx.recv() {
            match ev {
                Event::Line(i, v) => self.line(&conns, i, v),
                Event::Gone(i) => {
                    if let Some(c) = conns.get_mut(i) {
                        c.alive = false;
                        say(&format!("-- {} ended", c.session));
                    }
                    self.queue.retain(|(s, _)| *s != i);
                    if self.shown.is_some_and(|(s, _)| s == i) {
                        self.shown = None;
                        self.reason = None;
                    }
                    if !rescan && conns.iter().all(|c| !c.alive) {
                        return ExitCode::SUCCESS;
                    }
                }
                Event::New(s, c) => attach(&mut conns, s, c, &tx),
                Event::Key(k) => {
                    if !self.key(&mut conns, k) {
                        return ExitCode::SUCCESS;
                    }
                }
                Event::Eof => return ExitCode::SUCCESS,
            }
            if self.shown.is_none()
                && let Some((i, q)) = self.queue.front()
            {
                self.shown = Some((*i, q["id"].as_u64().unwrap_or(0)));
                show(&conns[*i].session, q, self.queue.len());
            }
        }
        ExitCode::SUCCESS
    }

    fn line(&mut self, conns: &[Conn], i: usize, v: serde_json::Value) {
        let session = &conns[i].session;
        match v["type"].as_str() {
            Some("hello") => say(&format!("-- answering for {session}")),
            Some("question") => self.queue.push_back((i, v)),
            Some("closed") => {
                let id = v["id"].as_u64();
                self.queue
                    .retain(|(s, q)| !(*s == i && q["id"].as_u64() == id));
                if let Some(id) = id
                    && self.shown == Some((i, id))
                {
                    self.shown = None;
                    self.reason = None;
                    say(&format!(
                        "-- question {id} closed: {}",
                        v["outcome"].as_str().unwrap_or("?")
                    ));
                }
            }
            Some("error") => say(&format!(
                "-- {session}: {}",
                v["message"].as_str().unwrap_or("error")
            )),
            _ => {}
        }
    }

    /// Handles one key; `false` to quit.
    fn key(&mut self, conns: &mut [Conn], k: u8) -> bool {
        // Ctrl-C, Ctrl-D (the terminal is raw, so they arrive as bytes).
        if k == 3 || k == 4 {
            return false;
        }
        let Some((i, id)) = self.shown else {
            return true;
        };
        if let Some(reason) = &mut self.reason {
            match k {
                b'\r' | b'\n' => {
                    let r = std::mem::take(reason);
                    self.reason = None;
                    println!();
                    self.send(conns, i, id, "deny", Some(r));
                }
                0x7f | 8 if reason.pop().is_some() => print!("\u{8} \u{8}"),
                0x7f | 8 => {}
                k if k >= 0x20 => {
                    reason.push(k as char);
                    print!("{}", k as char);
                }
                _ => {}
            }
            let _ = io::stdout().flush();
            return true;
        }
        let answer = match k.to_ascii_lowercase() {
            b'y' => "allow-once",
            b'p' => "allow-path",
            b'd' => "allow-dir",
            b'n' => "deny",
            b'r' => {
                print!("reason: ");
                let _ = io::stdout().flush();
                self.reason = Some(String::new());
                return true;
            }
            b'q' => return false,
            _ => return true,
        };
        self.send(conns, i, id, answer, None);
        true
    }

    fn send(
        &mut self,
        conns: &mut [Conn],
        i: usize,
        id: u64,
        answer: &str,
        reason: Option<String>,
    ) {
        let mut v = serde_json::json!({"type": "answer", "id": id, "answer": answer});
        if let Some(r) = reason {
            v["reason"] = r.into();
        }
        let line = format!("{v}\n");
        if let Err(e) = conns[i].w.write_all(line.as_bytes()) {
            say(&format!("-- {}: answer not sent: {e}", conns[i].session));
        } else {
            say(&format!("-> {answer}"));
        }
        self.queue
            .retain(|(s, q)| !(*s == i && q["id"].as_u64() == Some(id)));
        self.shown = None;
    }
}

fn say(s: &str) {
    // `\r\n`: the terminal may be raw.
    print!("{s}\r\n");
    let _ = io::stdout().flush();
}

/// Shows one question.
fn show(session: &Session, q: &serde_json::Value, open: usize) {
    let s = |k: &str| q[k].as_str().unwrap_or("").to_string();
    let path = s("path");
    let full = match (s("root").as_str(), s("mount")) {
        ("home", _) => format!("~/{path}"),
        (_, m) if m.is_empty() => path.clone(),
        (_, m) => format!("{}/{path}", m.trim_end_matches('/')),
    };
    let cmdline: Vec<String> = q["cmdline"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut cmd = crate::printable::escape(&cmdline.join(" "));
    if cmd.chars().count() > 200 {
        cmd = cmd.chars().take(200).collect::<String>() + "…";
    }
    let dir = s("directory");
    let dir = if dir.is_empty() {
        "the whole mount (every path that asks in it)".to_string()
    } else {
        format!("{dir}/")
    };
    let more = if open > 1 {
        format!(" ({} more waiting)", open - 1)
    } else {
        String::new()
    };
    say("");
    say(&format!("? [{}] {session}{more}", q["id"]));
    say(&format!(
        "  {} (pid {}, uid {}): {cmd}",
        crate::printable::escape(&s("comm")),
        q["pid"],
        q["uid"]
    ));
    say(&format!(
        "  wants to {} {} ({})",
        s("access"),
        crate::printable::escape(&full),
        s("op")
    ));
    say(&format!(
        "  because {}",
        crate::printable::escape(&s("rule"))
    ));
    say(&format!(
        "  y allow once | p allow this path for the session | d allow {} for the session | n deny | r deny with a reason   (refused in {} s)",
        crate::printable::escape(&dir),
        q["timeout_ms"].as_u64().unwrap_or(0) / 1000
    ));
}

/// Stdin in raw mode while the prompt runs (restored when dropped), when it is a
/// terminal.
struct RawTerminal {
    saved: Option<nix::sys::termios::Termios>,
}

impl RawTerminal {
    fn enter() -> RawTerminal {
        use nix::sys::termios::{
            LocalFlags, SetArg, SpecialCharacterIndices, tcgetattr, tcsetattr,
        };
        let stdin = io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else {
            return RawTerminal { saved: None };
        };
        let mut raw = saved.clone();
        raw.local_flags &= !(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        if tcsetattr(&stdin, SetArg::TCSANOW, &raw).is_err() {
            return RawTerminal { saved: None };
        }
        RawTerminal { saved: Some(saved) }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ =
                nix::sys::termios::tcsetattr(io::stdin(), nix::sys::termios::SetArg::TCSANOW, t);
        }
    }
}
