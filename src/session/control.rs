//! The control socket of a running session (`veilfs mount` or `veilfs run`):
//! `veilfs reload PATH` asks every daemon serving PATH to reload its policy and
//! prints each outcome.
//!
//! What stays true:
//! * **The runtime directory is ours or unused.** It is `/run/veilfs` for root, else
//!   `$XDG_RUNTIME_DIR/veilfs`, else `/tmp/veilfs-UID` (`VEILFS_RUNTIME_DIR`, for
//!   tests, names it directly). It is created with mode 0700 in one `mkdir`, and
//!   used only when it is a real directory (not a symlink) owned by the running uid
//!   with no group or other permission; the client also accepts one owned by root.
//!   Once checked it is held open and every socket is reached through that
//!   descriptor, so the directory checked is the directory used.
//! * **One socket per session.** Under a name derived from the canonical path served
//!   (the mount point, or the workspace under `run`): `HASH.sock` for `veilfs mount`,
//!   `HASH-run-PID.sock` for `veilfs run` (PID: the `run` process). `veilfs reload`
//!   asks every live one and removes the stale ones (connection refused).
//! * **Only the owner, and only from outside.** A request is answered only for a peer
//!   (`SO_PEERCRED`) of the daemon's uid or root in the daemon's own PID namespace
//!   (so never a command confined by any `veilfs run`: it runs in a PID namespace
//!   of its own), and under `run` never for a process of the session itself (a
//!   descendant of its init process): the confined command cannot change its own
//!   policy, nor another session's, nor answer their questions.
//!   The peer is judged right after `accept`, before anything is read from it: a
//!   refused one is told why without waiting on it (on the accept thread, which
//!   never blocks on a client) and closed, holding no slot and no thread; a flood
//!   of refusals is logged at most once a second.
//! * **A deadline per request, not per read.** The whole request line must be in
//!   within [`REQUEST_TIMEOUT`] of `accept`, however it trickles (each read waits
//!   only for the time left); the reply must be taken within as long again from
//!   when it is ready. A connection past its deadline is closed unanswered.
//! * **No uid's clients deny another's, nor the newest request.** Each admitted
//!   connection has a thread and a slot of its uid (module `slots`): at most
//!   [`REQUESTS_PER_UID`] requests per uid, [`MAX_CLIENTS`] in all. When a
//!   uid's slots are full, its newest connection takes the slot of its oldest
//!   request whose line is not yet in, which is shut down: slow or idle clients
//!   cannot keep the person's `veilfs reload`, which sends its line at once, from
//!   being served. A request whose line is in is never evicted (it ends by itself).
//! * **Approvers hold slots of their own.** A `subscribe` moves its connection from
//!   the request slots to the approver slots ([`APPROVERS_PER_UID`] per uid,
//!   [`MAX_APPROVERS`] in all): approvers never take a request's slot and
//!   the eviction of requests never touches them. When a uid's approver slots are
//!   full, its newest approver displaces its oldest (shut down; the questions stay
//!   open for the others), so that the person's newest `veilfs prompt` is served; a client that can evict approvers this way is of the
//!   person's own uid (or root) and outside every session, so it could stop
//!   `veilfs prompt` by other means anyway.
//!
//! Protocol: one request per connection. The line `reload` is answered by
//! `ok MESSAGE` or `error MESSAGE` (MESSAGE may span lines). The line `stats` is
//! answered by `ok JSON` on one line (see [`Stats`]). The line `subscribe`
//! makes the connection an approver of the session's questions about `ask` paths,
//! in JSON lines both ways (see [`crate::session::ask_socket`]).

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::socket::{UnixCredentials, getsockopt, sockopt::PeerCredentials};
use nix::sys::stat::Mode;

use crate::fs::ask::Broker;
use crate::fs::reload::{self, Reloader};

mod slots;

pub use slots::{APPROVERS_PER_UID, MAX_APPROVERS, REQUESTS_PER_UID};
use slots::{Slot, Slots};

/// Requests answered at once, all uids together: as many as two uids may hold
/// (only the daemon's uid and root are ever admitted), so that neither can take
/// the other's.
pub const MAX_CLIENTS: usize = 2 * slots::REQUESTS_PER_UID;
/// How long the daemon waits for a whole request line, from accept, however it
/// trickles in (and, from when it is ready, for its reply to be taken).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request line read.
const MAX_REQUEST: usize = 256;
/// How long `veilfs reload` waits for a daemon's answer (a reload of a large tree
/// invalidates every cached entry).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a client could not ask a session, or what a session answered instead of `ok`.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The path named could not be canonicalized (the socket names are made from
    /// the canonical path).
    #[error("{}: {source}", path.display())]
    Path { path: PathBuf, source: io::Error },
    /// The runtime directory could not be opened, or was refused (the error says
    /// which directory, and why).
    #[error(transparent)]
    RuntimeDir(io::Error),
    /// The runtime directory could not be listed.
    #[error("{}: {source}", path.display())]
    ListRuntimeDir { path: PathBuf, source: io::Error },
    /// No live session serves the path.
    #[error(
        "no veilfs daemon answers for {} (in {}); is it served by `veilfs mount` or \
         `veilfs run`?",
        path.display(),
        dir.display()
    )]
    NoDaemon { path: PathBuf, dir: PathBuf },
    /// A session's socket is there, but connecting to it failed.
    #[error("cannot reach it: {0}")]
    Unreachable(#[source] io::Error),
    /// The daemon behind the socket runs as another user (not root).
    #[error("the socket is served by uid {0}")]
    ServedByUid(u32),
    /// Who serves the socket could not be told.
    #[error("cannot tell who serves it: {0}")]
    PeerUnknown(#[source] nix::Error),
    /// The daemon was not asked, for the reason held: [`ControlError::ServedByUid`]
    /// or [`ControlError::PeerUnknown`].
    #[error("not asked: {0}")]
    NotAsked(#[source] Box<ControlError>),
    /// Sending the request or reading the answer failed.
    #[error("no answer: {0}")]
    NoAnswer(#[source] io::Error),
    /// The daemon closed the connection without a word.
    #[error("no answer (the daemon closed the connection)")]
    Closed,
    /// The daemon answered `error MESSAGE` (a reload that kept the old policy, a
    /// request it refused): its message, as it said it.
    #[error("{0}")]
    Daemon(String),
}

/// Which kind of session serves a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session {
    /// `veilfs mount`: one per mount point.
    Mount,
    /// `veilfs run`, by the pid of the `run` process.
    Run { pid: u32 },
}

impl Session {
    fn socket_name(self, hash: &str) -> String {
        match self {
            Session::Mount => format!("{hash}.sock"),
            Session::Run { pid } => format!("{hash}-run-{pid}.sock"),
        }
    }

    /// The session a socket name in the runtime directory stands for, if it serves
    /// the path whose hash is `hash`.
    fn from_socket_name(name: &str, hash: &str) -> Option<Session> {
        let rest = name.strip_prefix(hash)?.strip_suffix(".sock")?;
        if rest.is_empty() {
            return Some(Session::Mount);
        }
        let pid = rest.strip_prefix("-run-")?;
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        pid.parse().ok().map(|pid| Session::Run { pid })
    }
}

impl std::fmt::Display for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Session::Mount => write!(f, "veilfs mount"),
            Session::Run { pid } => write!(f, "veilfs run (pid {pid})"),
        }
    }
}

/// Where the runtime directory is for this process.
pub(crate) fn runtime_dir_path() -> PathBuf {
    if let Some(d) = std::env::var_os("VEILFS_RUNTIME_DIR") {
        return PathBuf::from(d);
    }
    let uid = crate::sys::euid();
    if uid == 0 {
        PathBuf::from("/run/veilfs")
    } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(d).join("veilfs")
    } else {
        PathBuf::from(format!("/tmp/veilfs-{uid}"))
    }
}

/// The checked runtime directory, held open: sockets are reached through
/// `/proc/self/fd/N/NAME`, so a directory swapped in after the check is never used.
#[derive(Debug)]
struct RuntimeDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl RuntimeDir {
    /// Opens (and, for a server, creates) the runtime directory, refusing one that
    /// someone else could have planted or can write.
    fn open(create: bool) -> io::Result<RuntimeDir> {
        let path = runtime_dir_path();
        if create {
            // One mkdir with the mode: there is no moment when it is more open.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(annotate(&path, e)),
            }
        }
        let refuse = |why: String| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing the runtime directory {}: {why} (remove it, or let veilfs \
                     create it: a directory of mode 0700 owned by uid {})",
                    path.display(),
                    crate::sys::euid()
                ),
            )
        };
        let fd = match nix::fcntl::open(
            &path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOTDIR | nix::errno::Errno::ELOOP) => {
                let what = match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.file_type().is_symlink() => "a symbolic link",
                    _ => "not a directory",
                };
                return Err(refuse(what.into()));
            }
            Err(e) => return Err(annotate(&path, e.into())),
        };
        let st = nix::sys::stat::fstat(&fd).map_err(|e| annotate(&path, e.into()))?;
        let me = crate::sys::euid();
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(refuse("not a directory".into()));
        }
        // A client may also trust a directory of root's: root could impersonate
        // anyone anyway.
        let trusted = st.st_uid == me || (st.st_uid == 0 && !create);
        if !trusted {
            return Err(refuse(format!("owned by uid {}", st.st_uid)));
        }
        if st.st_mode & 0o077 != 0 {
            return Err(refuse(format!(
                "mode {:04o} lets others in",
                st.st_mode & 0o7777
            )));
        }
        Ok(RuntimeDir { fd, path })
    }

    /// A path that reaches `name` in this very directory.
    fn entry(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    fn remove(&self, name: &str) {
        let _ = nix::unistd::unlinkat(&self.fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
}

fn annotate(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A stable name for a path, canonicalized first (see [`canonical_hash`]).
fn path_hash(path: &Path) -> io::Result<String> {
    let canon = path.canonicalize().map_err(|e| annotate(path, e))?;
    Ok(canonical_hash(&canon))
}

/// A stable name for a canonical path (FNV-1a: stable across builds, unlike std's
/// hasher).
fn canonical_hash(canon: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in canon.as_os_str().as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The socket `session` would use for `path`, in the runtime directory as named
/// (for diagnostics and tests; it is not checked here).
pub fn socket_path(path: &Path, session: Session) -> io::Result<PathBuf> {
    Ok(runtime_dir_path().join(session.socket_name(&path_hash(path)?)))
}

/// Who may ask, and how the daemon reports the reloads it makes.
#[derive(Clone, Copy, Debug)]
pub struct Guard {
    /// The session's init process (`veilfs run`): requests from it or from any
    /// process below it, or from its PID namespace, are refused.
    pub inside: Option<i32>,
    /// Says what a requested reload did, in the daemon.
    pub report: fn(reload::Outcome),
}

/// A bound socket not yet answering (bound before `run` enters its namespaces).
#[derive(Debug)]
pub struct Listener {
    sock: UnixListener,
    control: Control,
    /// The canonical path the session serves (the socket is named after it): told
    /// to each approver, so that it can say which session asks.
    served: Arc<Path>,
    /// What a `stats` request is answered with.
    stats: Stats,
}

/// What `veilfs stats` is told of a session: the requests each of its mounts has
/// received, by opcode, and the daemon's own CPU time and peak RSS so far, as one
/// JSON object: `{"cpu_seconds": 1.25, "max_rss_kib": 20480, "mounts": [{"path":
/// "/mnt", "requests": {"LOOKUP": 12, "OPEN": 30080}, "through": {"io_uring": 0,
/// "dev_fuse": 30092}}]}` (`through`: by which transport they came). Counting costs the
/// request path one add per request (see `fuser::RequestCounts`).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    mounts: Vec<(PathBuf, Arc<fuser::RequestCounts>)>,
}

impl Stats {
    /// Reports the requests of the mount at `path` as well.
    pub fn mount(mut self, path: &Path, counts: Arc<fuser::RequestCounts>) -> Stats {
        self.mounts.push((path.to_path_buf(), counts));
        self
    }

    /// The JSON object, on one line.
    pub fn json(&self) -> String {
        let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
        let (cpu, rss) = match usage {
            Ok(u) => {
                let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
                (s(u.user_time()) + s(u.system_time()), u.max_rss())
            }
            Err(_) => (f64::NAN, 0),
        };
        let mounts: Vec<serde_json::Value> = self
            .mounts
            .iter()
            .map(|(path, counts)| {
                let requests: serde_json::Map<String, serde_json::Value> = counts
                    .by_opcode()
                    .into_iter()
                    .map(|(op, n)| (op.to_string(), n.into()))
                    .collect();
                let (ring, dev) = counts.by_transport();
                serde_json::json!({
                    "path": path.to_string_lossy(),
                    "requests": requests,
                    "through": {"io_uring": ring, "dev_fuse": dev},
                })
            })
            .collect();
        serde_json::json!({
            "cpu_seconds": cpu,
            "max_rss_kib": rss,
            "mounts": mounts,
        })
        .to_string()
    }
}

/// Removes the socket file when dropped.
#[derive(Debug)]
pub struct Control {
    dir: Arc<RuntimeDir>,
    name: String,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.dir.remove(&self.name);
    }
}

/// Binds the socket of `session` serving `path`; nothing is answered until
/// [`Listener::serve`].
pub fn bind(path: &Path, session: Session) -> io::Result<Listener> {
    let dir = RuntimeDir::open(true)?;
    let served: Arc<Path> = path.canonicalize().map_err(|e| annotate(path, e))?.into();
    let name = session.socket_name(&canonical_hash(&served));
    let at = dir.entry(&name);
    match UnixStream::connect(&at) {
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{}: another live daemon answers there",
                    dir.path.join(&name).display()
                ),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // A stale socket (its daemon gone): replace it.
        Err(_) => dir.remove(&name),
    }
    let sock = UnixListener::bind(&at).map_err(|e| annotate(&dir.path.join(&name), e))?;
    Ok(Listener {
        stats: Stats::default(),
        sock,
        control: Control {
            dir: Arc::new(dir),
            name,
        },
        served,
    })
}

/// Starts answering `veilfs reload` (and `veilfs stats`, with `stats`) for the
/// `veilfs mount` at `mnt`; reloads are reported on stderr.
pub fn serve(
    mnt: &Path,
    reloader: Arc<Reloader>,
    broker: Arc<Broker>,
    stats: Stats,
) -> io::Result<Control> {
    bind(mnt, Session::Mount)?.with_stats(stats).serve(
        reloader,
        broker,
        Guard {
            inside: None,
            report: crate::session::mount::report_reload,
        },
    )
}

/// `veilfs run` for the workspace `ws`: binds this run's socket (before the run
/// enters its namespaces, so that it is reachable from outside). When that fails the
/// session runs without one and says so on stderr (the command has not started).
pub fn bind_for_run(ws: &Path) -> Option<Listener> {
    match bind(
        ws,
        Session::Run {
            pid: std::process::id(),
        },
    ) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!(
                "veilfs run: no control socket (`veilfs reload` will not reach this session): {e}"
            );
            None
        }
    }
}

impl Listener {
    /// Answers `stats` requests with `stats` (by default: no mount, the daemon's
    /// CPU time and RSS only).
    pub fn with_stats(mut self, stats: Stats) -> Listener {
        self.stats = stats;
        self
    }

    /// `veilfs run`: answers requests from outside the session whose init process
    /// is `init`, and reports reloads through the `log` crate only (the command's
    /// stderr is not the daemon's to write on).
    pub fn serve_run(
        self,
        reloader: Arc<Reloader>,
        broker: Arc<Broker>,
        init: i32,
    ) -> Option<Control> {
        let guard = Guard {
            inside: Some(init),
            report: crate::session::mount::log_reload,
        };
        self.serve(reloader, broker, guard)
            .map_err(|e| log::warn!("control socket: not served: {e}"))
            .ok()
    }

    /// Answers requests on a thread of its own until the returned [`Control`] is
    /// dropped (the socket file is then removed and nothing new reaches it).
    pub fn serve(
        self,
        reloader: Arc<Reloader>,
        broker: Arc<Broker>,
        guard: Guard,
    ) -> io::Result<Control> {
        let Listener {
            sock,
            control,
            served,
            stats,
        } = self;
        let stats = Arc::new(stats);
        std::thread::Builder::new()
            .name("veilfs-control".into())
            .spawn(move || {
                let slots = Slots::new();
                let mut refusals = RefusalLog::default();
                for conn in sock.incoming().flatten() {
                    let accepted = Instant::now();
                    let Some((cred, slot)) = admit(&conn, &slots, guard, &mut refusals) else {
                        continue;
                    };
                    let (reloader, broker, served, stats) = (
                        reloader.clone(),
                        broker.clone(),
                        served.clone(),
                        stats.clone(),
                    );
                    let spawned = std::thread::Builder::new()
                        .name("veilfs-control-client".into())
                        .spawn(move || {
                            let asked = Asked {
                                conn: &conn,
                                slot: &slot,
                                cred,
                                deadline: accepted + REQUEST_TIMEOUT,
                                served: &served,
                            };
                            let with = Answering {
                                reloader: &reloader,
                                broker: &broker,
                                stats: &stats,
                            };
                            if let Err(e) = answer(asked, with, guard) {
                                log::info!("control socket: {e}");
                            }
                        });
                    if let Err(e) = spawned {
                        log::warn!("control socket: cannot start a thread: {e}");
                    }
                }
            })?;
        Ok(control)
    }
}

/// Decides on a connection just accepted, before anything is read from it: its
/// peer's credentials and a slot, or `None` when it was turned away (told why, and
/// closed) without taking one.
fn admit(
    conn: &UnixStream,
    slots: &Arc<Slots>,
    guard: Guard,
    refusals: &mut RefusalLog,
) -> Option<(UnixCredentials, Slot)> {
    let cred = match getsockopt(&conn.as_fd(), PeerCredentials) {
        Ok(c) => c,
        Err(e) => {
            turn_away(conn, &format!("refused: cannot tell who is asking: {e}"));
            return None;
        }
    };
    if let Some(why) = refusal(&cred, guard) {
        refusals.note(&cred, &why);
        turn_away(conn, &why);
        return None;
    }
    let handle = match conn.try_clone() {
        Ok(h) => h,
        Err(e) => {
            log::warn!("control socket: {e}");
            return None;
        }
    };
    let Some(slot) = slots.admit(cred.uid(), handle) else {
        log::info!(
            "control socket: uid {}: every slot is answering a request; one turned away",
            cred.uid()
        );
        turn_away(
            conn,
            "busy: every slot of this uid is answering a request; try again",
        );
        return None;
    };
    Some((cred, slot))
}

/// Tells a peer that is not served why, without ever waiting on it (on the accept
/// thread), and closes the connection.
fn turn_away(conn: &UnixStream, why: &str) {
    if conn.set_nonblocking(true).is_err() {
        return;
    }
    // What it already sent is taken first (closing on unread data would reset the
    // connection before the client reads the answer), but no more than a request's
    // worth: a peer that keeps sending must not keep the accept thread.
    let mut sink = [0u8; MAX_REQUEST];
    let _ = (&*conn).read(&mut sink);
    let _ = (&*conn).write(format!("error {why}\n").as_bytes());
    let _ = conn.shutdown(std::net::Shutdown::Both);
}

/// Says at most one line a second about refused peers (a process that may not ask
/// must not fill the daemon's log either), and how many went unsaid meanwhile.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<Instant>,
    unsaid: u64,
}

impl RefusalLog {
    fn note(&mut self, cred: &UnixCredentials, why: &str) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            self.unsaid += 1;
            return;
        }
        let also = match std::mem::take(&mut self.unsaid) {
            0 => String::new(),
            n => format!(" ({n} more refused since the last such line)"),
        };
        log::warn!(
            "control socket: pid {} (uid {}) {why}{also}",
            cred.pid(),
            cred.uid()
        );
        self.last = Some(Instant::now());
    }
}

/// One admitted connection, as its thread answers it.
struct Asked<'a> {
    conn: &'a UnixStream,
    slot: &'a Slot,
    cred: UnixCredentials,
    /// When its request line must be in by (counted from accept).
    deadline: Instant,
    /// The path the session serves.
    served: &'a Path,
}

/// What a session's control socket answers with.
struct Answering<'a> {
    reloader: &'a Reloader,
    broker: &'a Arc<Broker>,
    stats: &'a Stats,
}

fn answer(asked: Asked, with: Answering, guard: Guard) -> io::Result<()> {
    let Answering {
        reloader,
        broker,
        stats,
    } = with;
    let Asked {
        conn,
        slot,
        cred,
        deadline,
        served,
    } = asked;
    // The request is read before any answer, so that the client sees the answer
    // (closing on unread data would reset the connection).
    let line = read_request(conn, deadline)?;
    if line.trim() == "subscribe" {
        if !slot.approve() {
            return Ok(());
        }
        return crate::session::ask_socket::subscribe(conn, broker, &cred, served);
    }
    if !slot.start_work() {
        // Evicted for a newer request of its uid.
        return Ok(());
    }
    let reply = match line.trim() {
        "reload" => {
            let outcome = reloader.reload();
            let reply = match &outcome {
                Ok(msg) => format!("ok {msg}\n"),
                Err(e) => format!("error {e}\n"),
            };
            (guard.report)(outcome);
            reply
        }
        "stats" => format!("ok {}\n", stats.json()),
        other => format!(
            "error unknown request {other:?}: expected \"reload\", \"stats\" or \"subscribe\"\n"
        ),
    };
    write_reply(conn, reply.as_bytes(), Instant::now() + REQUEST_TIMEOUT)
}

/// The request line: up to its newline (included; nothing after it is read), the
/// end of the stream, or [`MAX_REQUEST`] bytes, whichever comes first, all before
/// `deadline`, however it trickles in.
fn read_request(conn: &UnixStream, deadline: Instant) -> io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < MAX_REQUEST {
        conn.set_read_timeout(Some(time_left(deadline, "its request")?))?;
        match (&*conn).read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                time_left(deadline, "its request")?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Writes all of `reply` before `deadline`, however slowly the client reads.
fn write_reply(conn: &UnixStream, mut reply: &[u8], deadline: Instant) -> io::Result<()> {
    while !reply.is_empty() {
        conn.set_write_timeout(Some(time_left(deadline, "its reply to be taken")?))?;
        match (&*conn).write(reply) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => reply = &reply[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                time_left(deadline, "its reply to be taken")?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The time left before `deadline`; an error (the connection is given up) when
/// none is.
fn time_left(deadline: Instant, waiting_for: &str) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("a client closed: {waiting_for} took longer than {REQUEST_TIMEOUT:?}"),
        ));
    }
    Ok(left)
}

/// Why the peer `cred` may not ask (`None`: it may).
fn refusal(cred: &UnixCredentials, guard: Guard) -> Option<String> {
    let me = crate::sys::euid();
    if cred.uid() != me && cred.uid() != 0 {
        let who = if me == 0 {
            "only root".to_string()
        } else {
            format!("only uid {me} or root")
        };
        return Some(format!(
            "refused: uid {} may not reload this session ({who})",
            cred.uid()
        ));
    }
    if let Some(init) = guard.inside
        && is_inside(cred.pid(), init)
    {
        return Some(
            "refused: the request comes from inside the `veilfs run` session; only \
             the person outside it can change its policy"
                .into(),
        );
    }
    if !same_pid_namespace(cred.pid()) {
        return Some(
            "refused: the request comes from another PID namespace (inside a `veilfs run` \
             session, or a container); only a process beside this daemon may reload or \
             answer it"
                .into(),
        );
    }
    None
}

/// Whether process `pid` (as this process sees it) is in this process's PID
/// namespace. A command confined by `veilfs run` is in one of its own: it must not
/// reload or answer any session, its own or another one it can reach. When that
/// cannot be told, the answer is no.
fn same_pid_namespace(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    if let (Some(a), Some(b)) = (ns(&pid.to_string()), ns("self")) {
        return a == b;
    }
    // Unreadable: the daemon of a `run` without root lives in the session's user
    // namespace, and may not read the links of the person's processes outside
    // it. A process this namespace sees (`SO_PEERCRED` gave it a pid here) is in
    // it or in one below; at the same depth of nesting, in it.
    match (pid_depth(&pid.to_string()), pid_depth("self")) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// How many PID namespaces process `p` is nested in (the `NSpid` line of its
/// `status`, which anyone may read).
fn pid_depth(p: &str) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| v.split_whitespace().count())
}

/// Whether process `pid` (as this process sees it) belongs to the session whose init
/// process is `init`: `init` itself, a process below it, or one in its PID
/// namespace. When that cannot be told (the process is gone, `/proc` unreadable,
/// a pid this namespace cannot see), the answer is yes.
pub fn is_inside(pid: i32, init: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    let ns = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    if let (Some(a), Some(b)) = (ns(pid), ns(init))
        && a == b
    {
        return true;
    }
    let mut p = pid;
    // The chain of parents is finite; the bound only guards against a /proc that lies.
    for _ in 0..100_000 {
        if p == init {
            return true;
        }
        if p <= 1 {
            return false;
        }
        match parent_pid(p) {
            Some(pp) => p = pp,
            None => return true,
        }
    }
    true
}

/// The parent of `pid`, from `/proc/PID/stat` (`pid (comm) state ppid …`; comm may
/// hold spaces and parentheses, so parse after the last `)`).
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// What one session answered.
#[derive(Debug)]
pub struct Answer {
    pub session: Session,
    /// `Ok`: the new policy is in force (what it is); `Err`: the old one stays (why:
    /// [`ControlError::Daemon`] with the daemon's words), or the session was not
    /// asked.
    pub outcome: Result<String, ControlError>,
}

/// Asks every live session serving `path` to reload. `Err` when none answers (why).
pub fn request_reload(path: &Path) -> Result<Vec<Answer>, ControlError> {
    let answers: Vec<Answer> = connect(Some(path))?
        .into_iter()
        .map(|(session, conn)| Answer {
            session,
            outcome: conn.and_then(|c| ask(&c, "reload")),
        })
        .collect();
    if answers.is_empty() {
        return Err(no_daemon(path));
    }
    Ok(answers)
}

/// A session's socket, connected, or why it could not be.
pub(crate) type Reached = Result<UnixStream, ControlError>;

/// Which sessions a client is after: those serving one path, or every session in
/// this user's runtime directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The hash the socket names of the sessions serving the path start with;
    /// `None`: any.
    hash: Option<String>,
}

impl Wanted {
    /// The sessions serving `path` (the mount point of a `veilfs mount`, the
    /// workspace of a `veilfs run`), however it is spelled; `Err` when it cannot be
    /// canonicalized.
    pub(crate) fn serving(path: &Path) -> Result<Wanted, ControlError> {
        let canon = path.canonicalize().map_err(|source| ControlError::Path {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Wanted {
            hash: Some(canonical_hash(&canon)),
        })
    }

    /// Every session of this user.
    pub(crate) fn any() -> Wanted {
        Wanted { hash: None }
    }

    /// The session `name` (a file name in the runtime directory) stands for, if it
    /// is one of these.
    fn session(&self, name: &str) -> Option<Session> {
        let h = match &self.hash {
            Some(h) => h.as_str(),
            None => name.get(..16)?,
        };
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Session::from_socket_name(name, h)
    }
}

/// The sockets a client has reached already, by name and by the identity of the
/// socket file (a session started later under the same name, such as a new
/// `veilfs mount` at the same mount point, binds a new file, and is new).
pub(crate) type Known = std::collections::HashMap<String, SocketFile>;

/// A socket file's identity: its inode and when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SocketFile {
    ino: u64,
    ctime: (i64, i64),
}

/// Connects to every live session serving `path` (every session of this user's
/// runtime directory when `None`), mounts first, then `run` sessions by pid; a
/// session that cannot be reached comes with why. Stale sockets are removed.
pub(crate) fn connect(path: Option<&Path>) -> Result<Vec<(Session, Reached)>, ControlError> {
    let wanted = match path {
        Some(p) => Wanted::serving(p)?,
        None => Wanted::any(),
    };
    Ok(connect_new(&wanted, &mut Known::new())?
        .into_iter()
        .map(|(s, _, c)| (s, c))
        .collect())
}

/// [`connect`] to the sessions `wanted`, skipping the sockets in `known` and
/// adding the ones it reaches (so that a caller looking again finds only new
/// sessions); names no longer in the runtime directory are forgotten. Each comes
/// with its socket's name. No runtime directory yet: no session.
pub(crate) fn connect_new(
    wanted: &Wanted,
    known: &mut Known,
) -> Result<Vec<(Session, String, Reached)>, ControlError> {
    let dir = match RuntimeDir::open(false) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ControlError::RuntimeDir(e)),
    };
    let names: std::collections::HashSet<String> = std::fs::read_dir(dir.entry(""))
        .map_err(|source| ControlError::ListRuntimeDir {
            path: dir.path.clone(),
            source,
        })?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    known.retain(|n, _| names.contains(n));
    // A name whose file is gone meanwhile is left out.
    let identity = |name: &str| {
        nix::sys::stat::fstatat(&dir.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| SocketFile {
                ino: st.st_ino,
                ctime: (st.st_ctime, st.st_ctime_nsec),
            })
    };
    let mut sessions: Vec<(Session, String, SocketFile)> = names
        .into_iter()
        .filter_map(|n| {
            let s = wanted.session(&n)?;
            let id = identity(&n)?;
            (known.get(&n) != Some(&id)).then_some((s, n, id))
        })
        .collect();
    sessions.sort_by_key(|(s, n, _)| {
        (
            match s {
                Session::Mount => 0,
                Session::Run { pid } => u64::from(*pid) + 1,
            },
            n.clone(),
        )
    });
    let mut out = Vec::new();
    for (session, name, id) in sessions {
        let conn = match UnixStream::connect(dir.entry(&name)) {
            Ok(c) => Ok(c),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                // Its daemon is gone.
                dir.remove(&name);
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => Err(ControlError::Unreachable(e)),
        };
        known.insert(name.clone(), id);
        out.push((session, name, conn));
    }
    Ok(out)
}

/// Whether the peer of `conn` (a daemon) runs as this user or root: only then is
/// it asked anything or told anything.
pub(crate) fn trusted_daemon(conn: &UnixStream) -> Result<(), ControlError> {
    let me = crate::sys::euid();
    match getsockopt(&conn.as_fd(), PeerCredentials) {
        Ok(c) if c.uid() == me || c.uid() == 0 => Ok(()),
        Ok(c) => Err(ControlError::ServedByUid(c.uid())),
        Err(e) => Err(ControlError::PeerUnknown(e)),
    }
}

/// No live session serves `path` (in this user's runtime directory).
fn no_daemon(path: &Path) -> ControlError {
    ControlError::NoDaemon {
        path: path.to_path_buf(),
        dir: runtime_dir_path(),
    }
}

/// One request (`reload`, `stats`) on an open connection.
fn ask(conn: &UnixStream, request: &str) -> Result<String, ControlError> {
    trusted_daemon(conn).map_err(|e| ControlError::NotAsked(Box::new(e)))?;
    let io = ControlError::NoAnswer;
    conn.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    conn.set_write_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
    let mut w = conn;
    // A daemon that refuses may have answered and closed already: read its answer
    // whatever the write did.
    let sent = w.write_all(format!("{request}\n").as_bytes());
    let mut reply = String::new();
    let mut r = conn;
    let read = r.read_to_string(&mut reply);
    if reply.is_empty() {
        sent.map_err(io)?;
        read.map_err(io)?;
    }
    let reply = reply.trim_end();
    match reply.strip_prefix("ok ") {
        Some(msg) => Ok(msg.to_string()),
        None if reply.is_empty() => Err(ControlError::Closed),
        None => Err(ControlError::Daemon(
            reply.strip_prefix("error ").unwrap_or(reply).to_string(),
        )),
    }
}

/// `veilfs reload PATH`: asks every session, prints each outcome; exit 0 when every
/// one reloaded, 1 when any kept its old policy, 2 when none answered.
pub fn reload_command(path: &Path) -> ExitCode {
    let answers = match request_reload(path) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("veilfs reload: {e}");
            return ExitCode::from(2);
        }
    };
    let several = answers.len() > 1;
    let mut refused = false;
    for a in &answers {
        let who = if several {
            format!("{}: ", a.session)
        } else {
            String::new()
        };
        match &a.outcome {
            Ok(msg) => println!("{who}{msg}"),
            Err(e) => {
                refused = true;
                eprintln!("veilfs reload: {who}the old policy stays in force:\n{e}");
            }
        }
    }
    if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `veilfs stats PATH`: prints, for every session serving PATH, one line of JSON
/// (see [`Stats`]; under `run`, with `"session"` added); exit 0 when every one
/// answered, 1 when any did not (why, on stderr), 2 when none answers for PATH.
pub fn stats_command(path: &Path) -> ExitCode {
    let sessions = match connect(Some(path)) {
        Ok(s) if s.is_empty() => Err(no_daemon(path)),
        r => r,
    };
    let sessions = match sessions {
        Ok(s) => s,
        Err(e) => {
            eprintln!("veilfs stats: {e}");
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for (session, conn) in sessions {
        match conn.and_then(|c| ask(&c, "stats")) {
            Ok(json) => match session {
                Session::Mount => println!("{json}"),
                Session::Run { pid } => match serde_json::from_str(&json) {
                    Ok(serde_json::Value::Object(mut o)) => {
                        o.insert("session".into(), format!("run {pid}").into());
                        println!("{}", serde_json::Value::Object(o));
                    }
                    _ => println!("{json}"),
                },
            },
            Err(e) => {
                failed = true;
                eprintln!("veilfs stats: {session}: {e}");
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_round_trip_and_reject_others() {
        let h = "0123456789abcdef";
        for s in [Session::Mount, Session::Run { pid: 42 }] {
            assert_eq!(Session::from_socket_name(&s.socket_name(h), h), Some(s));
        }
        for other in [
            "0123456789abcdef-run-.sock",
            "0123456789abcdef-run-4x.sock",
            "0123456789abcdef-run-+4.sock",
            "0123456789abcdef.sock.tmp",
            "fedcba9876543210.sock",
            "0123456789abcdef-other.sock",
        ] {
            assert_eq!(Session::from_socket_name(other, h), None, "{other}");
        }
    }

    #[test]
    fn wanted_sessions_are_those_of_the_path_or_any() {
        let h = "0123456789abcdef";
        let of_h = Wanted {
            hash: Some(h.into()),
        };
        let run = format!("{h}-run-7.sock");
        assert_eq!(of_h.session(&run), Some(Session::Run { pid: 7 }));
        assert_eq!(of_h.session("fedcba9876543210.sock"), None);
        assert_eq!(
            Wanted::any().session("fedcba9876543210.sock"),
            Some(Session::Mount)
        );
        for other in [
            "notes.txt",
            "0123456789abcdeg.sock",
            "012.sock",
            "veilfs.log",
        ] {
            assert_eq!(Wanted::any().session(other), None, "{other}");
        }
    }

    #[test]
    fn inside_means_below_init_or_in_its_pid_namespace() {
        let me = std::process::id() as i32;
        let parent = parent_pid(me).unwrap();
        assert!(is_inside(me, parent));
        assert!(is_inside(me, me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let c = child.id() as i32;
        // Same PID namespace: "inside" by namespace, whatever the tree says.
        assert!(is_inside(me, c));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(is_inside(0, 1), "an invisible peer counts as inside");
    }

    #[test]
    fn parent_pid_parses_names_with_parentheses() {
        assert_eq!(
            parent_pid(std::process::id() as i32),
            Some(std::os::unix::process::parent_id() as i32)
        );
    }
}
