//! The control socket holds: however many clients of one uid trickle or idle, and
//! however many refused peers try, the person's `veilfs reload` is answered and
//! `veilfs prompt` subscribes.
//!
//! The daemon is this test binary started again ([`serve_child`]): it serves the
//! control socket of a session (no mount) in a runtime directory of its own
//! (`VEILFS_RUNTIME_DIR`, set on the child only). The attacks come from this
//! process, or from this binary started again in another PID namespace or as
//! another uid ([`trickle_child`]); the person's requests are the `veilfs` binary
//! and a raw `subscribe`. No wait here is a threshold on speed: the person's
//! requests are given longer than `veilfs reload` itself waits (60 s).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::wait_until;

/// Set for [`serve_child`]: the tree it serves (`ws`, `p.toml`).
const SERVE_IN: &str = "VEILFS_TEST_SERVE_IN";
/// Set for [`trickle_child`]: the socket it attacks.
const TRICKLE_TO: &str = "VEILFS_TEST_TRICKLE_TO";
/// Slow clients in each attack (more than the daemon ever served at once).
const TRICKLERS: usize = 24;
/// Clients that connect and say nothing.
const IDLE: usize = 200;
/// A trickler sends a byte this often (the old daemon's two-second timeout per read
/// never ends such a client).
const TRICKLE_EVERY: Duration = Duration::from_millis(1500);
/// Longer than `veilfs reload` waits for an answer: a failure is no answer at all.
const NO_ANSWER: Duration = Duration::from_secs(90);
const DENY_A: &str = "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [\"a.txt\"]\n";

/// A session's control socket, served by a child process until dropped.
struct Daemon {
    tree: common::Tree,
    child: Child,
    sock: PathBuf,
}

impl Daemon {
    fn start() -> Daemon {
        let tree = common::Tree::new("veilfs-hold", &["ws", "rt"]);
        std::fs::write(tree.p("ws/a.txt"), "hello\n").unwrap();
        std::fs::write(tree.p("p.toml"), "default = \"allow\"\n").unwrap();
        let log = std::fs::File::create(tree.p("daemon.log")).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "serve_child", "--nocapture", "--test-threads=1"])
            .env(SERVE_IN, tree.tmp.path())
            .env("VEILFS_RUNTIME_DIR", tree.p("rt"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut d = Daemon {
            tree,
            child,
            sock: PathBuf::new(),
        };
        let rt = d.tree.p("rt");
        let found = wait_until(Duration::from_secs(30), || {
            let socks = common::names(&rt);
            match socks.iter().find(|n| n.ends_with(".sock")) {
                Some(n) => d.sock = rt.join(n),
                None => return false,
            }
            true
        });
        assert!(found, "no control socket in {}:\n{}", rt.display(), d.log());
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tree.p("daemon.log")).unwrap_or_default()
    }

    /// `veilfs reload WS` after a change of the policy: it must say the new policy
    /// is in force.
    #[track_caller]
    fn reload_is_answered(&self, during: &str) {
        std::fs::write(self.tree.p("p.toml"), DENY_A).unwrap();
        let child = self
            .tree
            .veilfs()
            .arg("reload")
            .arg(self.tree.p("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (code, out, err) = common::finish(child, NO_ANSWER);
        assert_eq!(
            code,
            0,
            "`veilfs reload` during {during}:\nstdout:\n{out}\nstderr:\n{err}\ndaemon:\n{}",
            self.log()
        );
        std::fs::write(self.tree.p("p.toml"), "default = \"allow\"\n").unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon of [`Daemon`]; does nothing unless started by it. Serves until its
/// stdin closes.
#[test]
fn serve_child() {
    let Some(dir) = std::env::var_os(SERVE_IN) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (ws, file) = (dir.join("ws"), dir.join("p.toml"));
    let text = std::fs::read_to_string(&file).unwrap();
    let policy = veilfs::Policy::parse("p.toml", &text).unwrap();
    let fs = veilfs::fs::VeilFs::new(&ws, policy, Some(&file), Default::default()).unwrap();
    let broker = veilfs::fs::ask::Broker::new("veilfs mount".into(), Duration::from_secs(60), None);
    let guard = veilfs::session::control::Guard {
        inside: None,
        report: |_| {},
    };
    let _control = veilfs::session::control::bind(&ws, veilfs::session::control::Session::Mount)
        .unwrap()
        .serve(fs.reloader(), broker, guard)
        .unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// What the tricklers of one attack saw.
#[derive(Default)]
struct Seen {
    /// Connections made.
    connected: AtomicUsize,
    /// Connections the daemon closed with a refusal.
    refused: AtomicUsize,
    /// The first refusal, as said.
    why: std::sync::Mutex<String>,
}

/// One slow client, until `stop`: connects, sends a byte (never a newline) every
/// [`TRICKLE_EVERY`], and when the daemon closes the connection, connects again
/// after the same pause.
fn trickle(sock: &Path, stop: &AtomicBool, seen: &Seen) {
    while !stop.load(Ordering::Acquire) {
        if let Ok(c) = UnixStream::connect(sock) {
            seen.connected.fetch_add(1, Ordering::AcqRel);
            let said = trickle_on(c, stop);
            if said.starts_with("error refused") {
                seen.refused.fetch_add(1, Ordering::AcqRel);
                let mut why = seen.why.lock().unwrap();
                if why.is_empty() {
                    *why = said;
                }
            }
        }
        if !stop.load(Ordering::Acquire) {
            std::thread::sleep(TRICKLE_EVERY);
        }
    }
}

/// Trickles on `c` until the daemon closes it (what it said then) or `stop`.
fn trickle_on(mut c: UnixStream, stop: &AtomicBool) -> String {
    c.set_read_timeout(Some(TRICKLE_EVERY)).unwrap();
    let mut said = Vec::new();
    loop {
        let sent = c.write_all(b"r").is_ok();
        // The pause before the next byte, cut short when the daemon closes (what
        // it said is read even when the byte could not be sent).
        match c.read_to_end(&mut said) {
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    && sent
                    && !stop.load(Ordering::Acquire) => {}
            _ => return String::from_utf8_lossy(&said).into_owned(),
        }
    }
}

/// [`TRICKLERS`] tricklers of this process, stopped and joined on drop.
struct Attack {
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Attack {
    fn start(sock: &Path) -> Attack {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let threads = (0..TRICKLERS)
            .map(|_| {
                let (sock, stop, seen) = (sock.to_owned(), stop.clone(), seen.clone());
                std::thread::spawn(move || trickle(&sock, &stop, &seen))
            })
            .collect();
        let a = Attack {
            stop,
            seen,
            threads,
        };
        let all = wait_until(Duration::from_secs(30), || {
            a.seen.connected.load(Ordering::Acquire) >= TRICKLERS
        });
        assert!(all, "the tricklers could not connect");
        a
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// [`IDLE`] connections that say nothing (kept open by the caller).
fn idle(sock: &Path) -> Vec<UnixStream> {
    (0..IDLE)
        .map(|_| UnixStream::connect(sock).unwrap())
        .collect()
}

/// An approver, as `veilfs prompt` subscribes: `None` when no hello comes.
fn subscribe(sock: &Path) -> Option<BufReader<UnixStream>> {
    let mut w = UnixStream::connect(sock).ok()?;
    w.write_all(b"subscribe\n").ok()?;
    w.set_read_timeout(Some(NO_ANSWER)).unwrap();
    let mut r = BufReader::new(w);
    let mut hello = String::new();
    r.read_line(&mut hello).ok()?;
    hello.contains("\"type\":\"hello\"").then_some(r)
}

/// Whether the approver `r` is still served: an answer to no question gets an error.
fn still_served(r: &mut BufReader<UnixStream>) -> bool {
    let answer = b"{\"type\":\"answer\",\"id\":424242,\"answer\":\"deny\"}\n";
    if r.get_mut().write_all(answer).is_err() {
        return false;
    }
    let mut line = String::new();
    matches!(r.read_line(&mut line), Ok(n) if n > 0) && line.contains("\"type\":\"error\"")
}

/// Twenty-four clients that trickle a byte every 1.5 s (and connect again when cut
/// off) and two hundred idle ones, all of the person's uid: the person's reload is
/// answered, an approver subscribes and stays subscribed through more of them.
#[test]
fn slow_and_idle_clients_of_one_uid_do_not_deny_the_reload_or_the_prompt() {
    if std::env::var_os(SERVE_IN).is_some() || std::env::var_os(TRICKLE_TO).is_some() {
        return;
    }
    let d = Daemon::start();
    let attack = Attack::start(&d.sock);
    let idle_first = idle(&d.sock);
    d.reload_is_answered("the trickle and 200 idle clients");
    let mut approver = subscribe(&d.sock).unwrap_or_else(|| {
        panic!(
            "`subscribe` got no hello during the attack; daemon:\n{}",
            d.log()
        )
    });
    let idle_more = idle(&d.sock);
    assert!(
        still_served(&mut approver),
        "the approver was cut off by the clients that came after it"
    );
    d.reload_is_answered("the trickle and 400 idle clients");
    drop((attack, idle_first, idle_more));
}

/// A request that trickles in, alone (no newer client to evict it), is closed
/// once its time from accept is up, although no read ever waits two seconds.
#[test]
fn a_trickling_request_is_closed_at_its_deadline() {
    if std::env::var_os(SERVE_IN).is_some() || std::env::var_os(TRICKLE_TO).is_some() {
        return;
    }
    let d = Daemon::start();
    let stop = Arc::new(AtomicBool::new(false));
    let c = UnixStream::connect(&d.sock).unwrap();
    let trickler = {
        let stop = stop.clone();
        std::thread::spawn(move || trickle_on(c, &stop))
    };
    let closed = wait_until(NO_ANSWER, || trickler.is_finished());
    stop.store(true, Ordering::Release);
    let said = trickler.join().unwrap();
    assert!(
        closed,
        "the daemon still reads a request begun {NO_ANSWER:?} ago"
    );
    assert_eq!(said, "", "a request cut off is not answered");
}

/// More approvers of one uid than it has slots for: the reload is still answered,
/// and the newest approver is served.
#[test]
fn approvers_of_one_uid_do_not_take_the_request_slots() {
    if std::env::var_os(SERVE_IN).is_some() || std::env::var_os(TRICKLE_TO).is_some() {
        return;
    }
    let d = Daemon::start();
    let mut approvers: Vec<_> = (0..40).filter_map(|_| subscribe(&d.sock)).collect();
    assert_eq!(approvers.len(), 40, "every new approver is served");
    d.reload_is_answered("40 approvers");
    assert!(still_served(approvers.last_mut().unwrap()));
}

/// The attacker of the tests below: [`TRICKLERS`] tricklers at the socket named by
/// [`TRICKLE_TO`] until stdin closes, then one line `refused N of M: FIRST REFUSAL`.
#[test]
fn trickle_child() {
    let Some(sock) = std::env::var_os(TRICKLE_TO) else {
        return;
    };
    let attack = Attack::start(Path::new(&sock));
    println!("attacking");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    let seen = attack.seen.clone();
    drop(attack);
    println!(
        "refused {} of {}: {}",
        seen.refused.load(Ordering::Acquire),
        seen.connected.load(Ordering::Acquire),
        seen.why.lock().unwrap().trim_end()
    );
}

/// [`trickle_child`] started through `wrap` (a command that runs the rest of its
/// arguments), attacking `d`'s socket while the person reloads: the reload is
/// answered, and every connection of the attacker was refused (with `why`), none
/// held.
fn refused_attacker_takes_no_slot(wrap: &[&str], why: &str) {
    let d = Daemon::start();
    let mut child = Command::new(wrap[0])
        .args(&wrap[1..])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "trickle_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TRICKLE_TO, &d.sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut said = String::new();
    while !said.contains("attacking\n") {
        if out.read_line(&mut said).unwrap() == 0 {
            let _ = child.kill();
            let (_, _, err) = common::finish(child, NO_ANSWER);
            panic!("the attacker {wrap:?} ended:\n{said}\n{err}");
        }
    }
    d.reload_is_answered(&format!("the attack of {wrap:?}"));
    drop(stdin);
    out.read_to_string(&mut said).unwrap();
    let (code, _, err) = common::finish(child, NO_ANSWER);
    assert_eq!(code, 0, "the attacker {wrap:?}:\n{said}\n{err}");
    let line = said.lines().find_map(|l| l.strip_prefix("refused "));
    let counts = line.and_then(|l| {
        let (refused, rest) = l.split_once(" of ")?;
        let (made, first) = rest.split_once(": ")?;
        Some((
            refused.parse::<usize>().ok()?,
            made.parse::<usize>().ok()?,
            first,
        ))
    });
    let (refused, made, first) =
        counts.unwrap_or_else(|| panic!("no count from the attacker:\n{said}"));
    assert!(
        made >= TRICKLERS && refused == made,
        "{refused} of the attacker's {made} connections refused at once; the others \
         held a slot"
    );
    assert!(first.contains(why), "the refusal: {first:?}");
}

/// A root process in another PID namespace (as the command of a `veilfs run`
/// without `--user` is) trickles: turned away at once, every time.
#[test]
fn peers_in_another_pid_namespace_are_refused_without_a_slot() {
    if std::env::var_os(SERVE_IN).is_some() || std::env::var_os(TRICKLE_TO).is_some() {
        return;
    }
    refused_attacker_takes_no_slot(
        &["unshare", "--pid", "--fork", "--kill-child"],
        "another PID namespace",
    );
}

/// A process of another uid that can reach the socket (with CAP_DAC_OVERRIDE, as if
/// the directory had been left open) trickles: turned away at once, every time.
#[test]
fn peers_of_another_uid_are_refused_without_a_slot() {
    if std::env::var_os(SERVE_IN).is_some() || std::env::var_os(TRICKLE_TO).is_some() {
        return;
    }
    refused_attacker_takes_no_slot(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+dac_override",
            "--ambient-caps=+dac_override",
        ],
        "may not reload",
    );
}
