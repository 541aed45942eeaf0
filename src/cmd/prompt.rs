//! `veilfs prompt`: a person answers the questions of `ask` paths, one key each.
//!
//! Which sessions it answers for is its [`Scope`]: by default those of the
//! workspace of the current directory (found as `veilfs run` finds it), or those
//! serving the paths named, or (`--all`) every session of this user. It subscribes
//! on the control socket of each such session (see [`crate::session::ask_socket`] for the
//! JSON lines), shows one open question at a time (the oldest first), each named
//! by the workspace or mount point of its session (`[~/project]`), and sends the
//! answer for the key pressed. With a terminal on stdin the keys are read one by
//! one (no Enter); otherwise (a pipe, in tests) one byte at a time all the same,
//! so `printf 'y'` answers "allow once". Two keys answer for good (`a` always
//! allow, `x` always deny): they answer as `p`/`d` and `n` do and append a rule to
//! the policy file of the mount that asked (see the module `lasting`).
//!
//! What stays true:
//! * **Only this user's sessions.** Sessions are found in this user's runtime
//!   directory (checked as [`crate::session::control`] says), and one is subscribed to only
//!   when the daemon behind its socket runs as this user or root.
//! * **It waits and keeps serving.** The runtime directory is looked at again every
//!   [`SCAN_EVERY`]: a session of the scope that starts later (before the first,
//!   or after every earlier one ended, or beside them) is answered too. The prompt
//!   ends only when stdin closes, or on `q`, Ctrl-C or Ctrl-D.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use crate::session::control::{self, ControlError, Known, Session, Wanted};
use crate::workspace::load::WorkspaceError;

mod lasting;

/// How often the runtime directory is looked at for sessions started since.
pub const SCAN_EVERY: Duration = Duration::from_millis(500);

/// Why the scope of `veilfs prompt` could not be told.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The current directory could not be had (or canonicalized).
    #[error("the current directory: {0}")]
    CurrentDir(#[source] io::Error),
    /// No workspace could be found from the current directory.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// Which sessions `veilfs prompt` answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The sessions of the workspace found from the current directory (a `veilfs
    /// run` there, or a `veilfs mount` whose mount point it is).
    Workspace(PathBuf),
    /// The sessions serving each path: the `veilfs mount` at that mount point, the
    /// `veilfs run` sessions of that workspace.
    Paths(Vec<PathBuf>),
    /// Every session of this user.
    All,
}

impl Scope {
    /// The scope of `veilfs prompt [--all] [PATH...]`: without either, the
    /// workspace is found from the current directory as `veilfs run` finds it
    /// (warnings about markers passed over go to stderr).
    pub fn from_args(all: bool, paths: Vec<PathBuf>) -> Result<Scope, PromptError> {
        if all {
            return Ok(Scope::All);
        }
        if !paths.is_empty() {
            return Ok(Scope::Paths(paths));
        }
        let cwd = std::env::current_dir()
            .and_then(|d| d.canonicalize())
            .map_err(PromptError::CurrentDir)?;
        let (ws, _, warnings) = crate::workspace::load::find_workspace(&cwd, None)?;
        for w in warnings {
            eprintln!("veilfs prompt: {w}");
        }
        Ok(Scope::Workspace(ws))
    }

    /// What to look for in the runtime directory: the sessions of each path (with
    /// the path, to name them by until they say what they serve).
    fn targets(&self) -> Result<Vec<Target>, ControlError> {
        let serving = |p: &PathBuf| {
            Ok(Target {
                wanted: Wanted::serving(p)?,
                place: Some(p.clone()),
            })
        };
        match self {
            Scope::Workspace(ws) => serving(ws).map(|t| vec![t]),
            Scope::Paths(ps) => ps.iter().map(serving).collect(),
            Scope::All => Ok(vec![Target {
                wanted: Wanted::any(),
                place: None,
            }]),
        }
    }

    /// What is waited for while no session of this scope is found.
    fn awaited(&self, place: Option<&Path>) -> String {
        match (self, place) {
            (Scope::Workspace(_), Some(p)) => format!(
                "a session of {} (start `veilfs run` there)",
                show_path(p, false)
            ),
            (_, Some(p)) => format!(
                "a session of {} (a `veilfs run` of that workspace, or a `veilfs mount` \
                 on that mount point)",
                show_path(p, false)
            ),
            (_, None) => {
                "a session of this user (start `veilfs run` or `veilfs mount`)".to_string()
            }
        }
    }

    /// What is waited for when every session served has ended.
    fn awaited_again(&self) -> String {
        match self {
            Scope::Workspace(p) => self.awaited(Some(p)),
            Scope::Paths(ps) if ps.len() == 1 => self.awaited(Some(&ps[0])),
            Scope::Paths(ps) => {
                let ps: Vec<String> = ps.iter().map(|p| show_path(p, false)).collect();
                format!("a session of {}", ps.join(", "))
            }
            Scope::All => self.awaited(None),
        }
    }
}

/// Sessions to look for, and the path they serve when it is known beforehand.
#[derive(Debug, Clone)]
struct Target {
    wanted: Wanted,
    place: Option<PathBuf>,
}

/// A session found: what it is, the path it was looked for by, its connection.
struct Found {
    session: Session,
    place: Option<PathBuf>,
    conn: control::Reached,
}

/// Looks for new sessions of each target: those found (each once), or why the
/// runtime directory could not be read.
fn scan(targets: &[Target], known: &mut Known) -> Result<Vec<Found>, ControlError> {
    let mut out = Vec::new();
    for t in targets {
        for (session, _, conn) in control::connect_new(&t.wanted, known)? {
            out.push(Found {
                session,
                place: t.place.clone(),
                conn,
            });
        }
    }
    Ok(out)
}

/// What the main loop hears about.
enum Event {
    /// A JSON line from session `usize`.
    Line(usize, serde_json::Value),
    /// Session `usize` closed its socket.
    Gone(usize),
    /// A session found since the start.
    New(Found),
    /// A byte typed, and when it was read.
    Key(u8, std::time::Instant),
    /// Stdin is closed.
    Eof,
}

/// One session subscribed to.
struct Conn {
    session: Session,
    /// The path it serves, as shown (`~/project`): the one it says in its hello,
    /// else the one it was looked for by.
    place: String,
    /// Where answers go; `None` once the session has ended (its descriptor is
    /// closed then: a prompt left running for days holds none of ended sessions).
    w: Option<UnixStream>,
    /// Its hello came: it answers.
    greeted: bool,
}

impl Conn {
    /// How each line about this session names it: `[~/project] veilfs run (pid 7)`.
    fn tag(&self) -> String {
        format!("[{}] {}", self.place, self.session)
    }
}

/// `veilfs prompt`: answers for the sessions of `scope`, waiting for them when
/// none has started yet. Exit 0 when stdin closes (or `q`, Ctrl-C, Ctrl-D); 2
/// when the scope cannot be looked for (a path that does not exist, a runtime
/// directory refused).
pub fn prompt(scope: &Scope) -> ExitCode {
    let targets = match scope.targets() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("veilfs prompt: {e}");
            return ExitCode::from(2);
        }
    };
    let mut known = Known::new();
    let (tx, rx) = mpsc::channel();
    for t in &targets {
        match scan(std::slice::from_ref(t), &mut known) {
            Ok(found) if found.is_empty() => eprintln!(
                "veilfs prompt: waiting for {}",
                scope.awaited(t.place.as_deref())
            ),
            Ok(found) => {
                for f in found {
                    let _ = tx.send(Event::New(f));
                }
            }
            Err(e) => {
                eprintln!("veilfs prompt: {e}");
                return ExitCode::from(2);
            }
        }
    }
    start_scanning(targets, known, tx.clone());
    let _raw = RawTerminal::enter();
    read_keys(tx.clone());
    let ui = Ui {
        typed_ahead_dropped: io::IsTerminal::is_terminal(&io::stdin()),
        ..Ui::default()
    };
    ui.run(rx, tx, scope.awaited_again())
}

/// Looks for new sessions every [`SCAN_EVERY`], on a thread of its own, until the
/// prompt ends.
fn start_scanning(targets: Vec<Target>, mut known: Known, tx: mpsc::Sender<Event>) {
    let spawned = std::thread::Builder::new()
        .name("veilfs-prompt-scan".into())
        .spawn(move || {
            let mut said: Option<String> = None;
            loop {
                std::thread::sleep(SCAN_EVERY);
                match scan(&targets, &mut known) {
                    Ok(found) => {
                        for f in found {
                            if tx.send(Event::New(f)).is_err() {
                                return;
                            }
                        }
                    }
                    // Once per new reason: the directory may come right again.
                    Err(e) => {
                        let why = e.to_string();
                        if said.as_ref() != Some(&why) {
                            log::warn!("prompt: looking for sessions: {why}");
                            said = Some(why);
                        }
                    }
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("prompt: sessions started later will not be answered: {e}");
    }
}

/// Sends each byte typed, then [`Event::Eof`], from a thread of its own.
fn read_keys(tx: mpsc::Sender<Event>) {
    let _ = std::thread::Builder::new()
        .name("veilfs-prompt-keys".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut b = [0u8; 1];
            loop {
                match stdin.read(&mut b) {
                    Ok(1) => {
                        if tx
                            .send(Event::Key(b[0], std::time::Instant::now()))
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(_) | Err(_) => {
                        let _ = tx.send(Event::Eof);
                        return;
                    }
                }
            }
        });
}

/// Subscribes on the connection of `found` and starts the thread reading its
/// lines; says why when it cannot.
fn attach(conns: &mut Vec<Conn>, found: Found, tx: &mpsc::Sender<Event>) {
    let Found {
        session,
        place,
        conn,
    } = found;
    let place = place.map_or_else(|| "?".to_string(), |p| show_path(&p, true));
    let tag = format!("[{place}] {session}");
    let conn = match conn {
        Ok(c) => c,
        Err(e) => {
            say(&format!("-- {tag}: {e}"));
            return;
        }
    };
    if let Err(e) = control::trusted_daemon(&conn) {
        say(&format!("-- {tag}: not subscribed: {e}"));
        return;
    }
    let mut w = match conn.try_clone() {
        Ok(w) => w,
        Err(e) => {
            say(&format!("-- {tag}: {e}"));
            return;
        }
    };
    if let Err(e) = w.write_all(b"subscribe\n") {
        say(&format!("-- {tag}: {e}"));
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
            place,
            w: Some(w),
            greeted: false,
        });
    }
}

/// `path` as the prompt shows it: escaped, and (when `home`) under the home
/// directory (`$HOME`) as `~/...`.
fn show_path(path: &Path, home: bool) -> String {
    let home_dir = std::env::var_os("HOME").map(PathBuf::from);
    short_path(path, home_dir.as_deref().filter(|_| home))
}

/// `path`, escaped, as `~/...` when it lies in `home` (an absolute path other
/// than `/`).
fn short_path(path: &Path, home: Option<&Path>) -> String {
    let home = home.filter(|h| h.is_absolute() && h.parent().is_some());
    let short = match home.map(|h| path.strip_prefix(h)) {
        Some(Ok(rest)) if rest.as_os_str().is_empty() => PathBuf::from("~"),
        Some(Ok(rest)) => Path::new("~").join(rest),
        _ => path.to_path_buf(),
    };
    crate::escape::printable(short.as_os_str().as_bytes())
}

/// The prompt's state: the open questions, oldest first, and what is typed.
#[derive(Default)]
struct Ui {
    queue: VecDeque<(usize, serde_json::Value)>,
    /// The question shown: (session, id).
    shown: Option<(usize, u64)>,
    /// Typing a reason for a denial.
    reason: Option<String>,
    /// When the question shown was shown.
    shown_at: Option<std::time::Instant>,
    /// A key typed before the question it would answer was shown is dropped (a
    /// person at a terminal pressing `y` twice answers one question, not the next,
    /// unseen): stdin is a terminal.
    typed_ahead_dropped: bool,
}

impl Ui {
    /// Runs until stdin closes, `q`, Ctrl-C or Ctrl-D. `tx` is for the readers of
    /// sessions found later; `awaited` says what is waited for when every session
    /// has ended.
    fn run(
        mut self,
        rx: mpsc::Receiver<Event>,
        tx: mpsc::Sender<Event>,
        awaited: String,
    ) -> ExitCode {
        let mut conns: Vec<Conn> = Vec::new();
        while let Ok(ev) = rx.recv() {
            match ev {
                Event::Line(i, v) => self.line(&mut conns, i, v),
                Event::Gone(i) => self.gone(&mut conns, i, &awaited),
                Event::New(f) => attach(&mut conns, f, &tx),
                Event::Key(k, at) => {
                    let ahead = self.typed_ahead_dropped
                        && self.shown_at.is_some_and(|shown| at < shown)
                        && !matches!(k, 3 | 4);
                    if !ahead && !self.key(&mut conns, k) {
                        return ExitCode::SUCCESS;
                    }
                }
                Event::Eof => return ExitCode::SUCCESS,
            }
            if self.shown.is_none()
                && let Some((i, q)) = self.queue.front()
            {
                self.shown = Some((*i, q["id"].as_u64().unwrap_or(0)));
                show(&conns[*i], q, self.queue.len());
                self.shown_at = Some(std::time::Instant::now());
            }
        }
        ExitCode::SUCCESS
    }

    /// Session `i` closed its socket: its questions go, and when it was the last
    /// one, the person is told that the prompt waits for the next.
    fn gone(&mut self, conns: &mut [Conn], i: usize, awaited: &str) {
        let Some(c) = conns.get_mut(i) else { return };
        c.w = None;
        // One that never answered (its daemon ending as it was reached) was
        // never said to be answered for either.
        if !c.greeted {
            return;
        }
        say(&format!("-- {} ended", c.tag()));
        self.queue.retain(|(s, _)| *s != i);
        if self.shown.is_some_and(|(s, _)| s == i) {
            self.shown = None;
            self.reason = None;
        }
        if conns.iter().all(|c| c.w.is_none()) {
            say(&format!("-- waiting for {awaited}"));
        }
    }

    fn line(&mut self, conns: &mut [Conn], i: usize, v: serde_json::Value) {
        let Some(conn) = conns.get_mut(i) else { return };
        match v["type"].as_str() {
            Some("hello") => {
                if let Some(p) = v["path"].as_str() {
                    conn.place = show_path(Path::new(p), true);
                }
                conn.greeted = true;
                say(&format!(
                    "-- [{}] answering for {}",
                    conn.place, conn.session
                ));
            }
            Some("question") => {
                // Said when another is on screen: the person knows one more waits.
                if self.shown.is_some() {
                    say(&format!(
                        "-- [{}] question {} waits its turn",
                        conn.place, v["id"]
                    ));
                }
                self.queue.push_back((i, v));
            }
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
                        "-- [{}] question {id} closed: {}",
                        conn.place,
                        crate::escape::escape(v["outcome"].as_str().unwrap_or("?"))
                    ));
                }
            }
            Some("error") => say(&format!(
                "-- {}: {}",
                conn.tag(),
                crate::escape::escape(v["message"].as_str().unwrap_or("error"))
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
        if let Some(kind) = lasting::Lasting::of_key(k) {
            self.lasting(conns, i, id, kind);
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

    /// Answers question `id` of session `i` as `kind` does for the session, then
    /// adds its rule to the policy file, saying what was written or why nothing.
    fn lasting(&mut self, conns: &mut [Conn], i: usize, id: u64, kind: lasting::Lasting) {
        let Some(q) = self
            .queue
            .iter()
            .find(|(s, q)| *s == i && q["id"].as_u64() == Some(id))
            .map(|(_, q)| lasting::Asked::of(q))
        else {
            return;
        };
        self.send(conns, i, id, kind.answer(&q), None);
        match lasting::append(kind, &q, std::time::SystemTime::now()) {
            Ok(done) => {
                say(&format!("-- {}", done.said(&show_path(&done.file, true))));
                for w in &done.warnings {
                    say(&format!("-- {w}"));
                }
            }
            Err(e) => say(&format!("-- no rule written ({}): {e}", kind.only_now())),
        }
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
        let sent = match &mut conns[i].w {
            Some(w) => w.write_all(line.as_bytes()),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "it has ended")),
        };
        if let Err(e) = sent {
            say(&format!("-- {}: answer not sent: {e}", conns[i].tag()));
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

/// Shows one question of the session `conn`.
fn show(conn: &Conn, q: &serde_json::Value, open: usize) {
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
    let mut cmd = crate::escape::escape(&cmdline.join(" "));
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
    say(&format!(
        "? [{}] question {} from {}{more}",
        conn.place, q["id"], conn.session
    ));
    say(&format!(
        "  {} (pid {}, uid {}): {cmd}",
        crate::escape::escape(&s("comm")),
        q["pid"],
        q["uid"]
    ));
    if s("root") == crate::run::net::ask::ROOT {
        // A destination of `veilfs run --net`: `path` is `host:port`.
        say(&format!(
            "  wants to connect to {}",
            crate::escape::escape(&path)
        ));
        say(&format!("  because {}", crate::escape::escape(&s("rule"))));
        say(&format!(
            "  y allow once | p allow {} for the session | n deny | r deny with a reason   (refused in {} s)",
            crate::escape::escape(&path),
            q["timeout_ms"].as_u64().unwrap_or(0) / 1000
        ));
        return;
    }
    say(&format!(
        "  wants to {} {} ({})",
        s("access"),
        crate::escape::escape(&full),
        s("op")
    ));
    say(&format!("  because {}", crate::escape::escape(&s("rule"))));
    say(&format!(
        "  y allow once | p allow this path for the session | d allow {} for the session | n deny | r deny with a reason   (refused in {} s)",
        crate::escape::escape(&dir),
        q["timeout_ms"].as_u64().unwrap_or(0) / 1000
    ));
    show_lasting(&lasting::Asked::of(q));
}

/// The line of the keys that answer question `q` for good, and where they write.
fn show_lasting(q: &lasting::Asked) {
    let file = match &q.policy_file {
        Some(f) => format!("a rule in {}", show_path(f, true)),
        None => "no policy file: for the session only".to_string(),
    };
    say(&format!(
        "  {} | {}   ({file})",
        lasting::Lasting::Allow.option(q),
        lasting::Lasting::Deny.option(q)
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

#[cfg(test)]
mod tests {
    use super::short_path;
    use std::path::Path;

    #[test]
    fn a_session_is_named_by_its_path_short_under_home() {
        let home = Some(Path::new("/home/ann"));
        for (path, home, want) in [
            ("/home/ann/project", home, "~/project"),
            ("/home/ann", home, "~"),
            ("/home/annex/p", home, "/home/annex/p"),
            ("/srv/ws", home, "/srv/ws"),
            ("/home/ann/p", None, "/home/ann/p"),
            ("/p", Some(Path::new("/")), "/p"),
            ("/home/ann/a\x1b]0;x", home, "~/a\\x1b]0;x"),
        ] {
            assert_eq!(short_path(Path::new(path), home), want, "{path}");
        }
    }
}
