//! The proxy of `veilfs run --net allow=...`: the command's only way out of its
//! network namespace. It runs in the daemon, outside the namespace, and serves the
//! listener init made on the namespace's loopback ([`super::PROXY_PORT`]), handed
//! over through a Unix socket: HTTP `CONNECT`, plain HTTP and SOCKS5 on the one
//! port (told apart by the first byte).
//!
//! For each connection: the destination as the client names it
//! ([`super::http`], [`super::socks`]) is decided by the network lists
//! ([`crate::policy::net`]) **before** any name is resolved, so a name no SPEC
//! names never reaches a DNS server; an allowed name is resolved here, and the
//! proxy connects to what it resolved to (never to an address the client
//! suggests), less any address a `deny` SPEC names. A refusal is answered
//! (`403`, SOCKS reply 2), counted for the end of the session, said in the audit
//! log (`"net": "host:port"`, the process, the rule). Under `--permissive` nothing
//! is refused and what would have been is logged.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections at once (more are closed at
//! once); a request's head must come within [`HEAD_TIMEOUT`].

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use super::{http, socks};
use crate::policy::net::{Dest, Host, NetAction, NetRules, Spec};
use crate::session::audit::{Audit, NetEvent};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to say where it goes.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to a destination may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Asks a person whether the command may reach a destination an `ask` SPEC names
/// (`true`: allowed, for this connection).
pub type AskNet = Box<dyn Fn(&Dest, &str, Option<(u32, String)>) -> bool + Send + Sync>;

/// What the proxy decides by.
pub struct Setup {
    pub rules: NetRules,
    /// `--permissive`: refuse nothing, log what would have been refused.
    pub permissive: bool,
    pub audit: Option<Audit>,
    /// A process in the command's network namespace (init), to tell which process
    /// made a connection.
    pub inside: i32,
    /// Asks a person about `ask` destinations; without it they are refused.
    pub ask: Option<AskNet>,
    /// Where the first refusal of each destination is said while the command
    /// runs (the session's notices file, or the log).
    pub notices: crate::fs::notice::Destination,
}

/// The proxy, running; [`Proxy::stop`] (or dropping it) ends it.
pub struct Proxy {
    listener: Arc<TcpListener>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// What the proxy's threads share.
struct Shared {
    setup: Setup,
    /// The audit log, taken out at the end so that its writer can finish.
    audit: Mutex<Option<Audit>>,
    /// Live connections, shut down at the end: the client's and the destination's.
    live: Mutex<HashMap<u64, Vec<TcpStream>>>,
    next: AtomicU64,
    busy: AtomicUsize,
    /// `host:port` → (count, why): refused, and what permissive would have.
    refused: Mutex<HashMap<String, (u64, String)>>,
    would: Mutex<HashMap<String, (u64, String)>>,
}

impl Proxy {
    /// Serves `listener` (a listening TCP socket, made in the command's network
    /// namespace) on a thread of its own.
    pub fn start(listener: OwnedFd, mut setup: Setup) -> io::Result<Proxy> {
        let listener = Arc::new(TcpListener::from(listener));
        let audit = setup.audit.take();
        let shared = Arc::new(Shared {
            setup,
            audit: Mutex::new(audit),
            live: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            busy: AtomicUsize::new(0),
            refused: Mutex::new(HashMap::new()),
            would: Mutex::new(HashMap::new()),
        });
        let (l, s) = (listener.clone(), shared.clone());
        let thread = std::thread::Builder::new()
            .name("veilfs-proxy".into())
            .spawn(move || accept_loop(&l, &s))?;
        Ok(Proxy {
            listener,
            thread: Some(thread),
            shared,
        })
    }

    /// Stops accepting, ends every connection, and lets go of the audit log.
    pub fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // A listening socket shut down wakes `accept` (with EINVAL).
        let _ = nix::sys::socket::shutdown(
            std::os::fd::AsRawFd::as_raw_fd(&*self.listener),
            nix::sys::socket::Shutdown::Both,
        );
        let _ = thread.join();
        for (_, streams) in self.shared.live.lock().drain() {
            for s in streams {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        drop(self.shared.audit.lock().take());
    }

    /// What the person is told at the end: the refused destinations, counted.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (map, title) in [
            (&self.shared.refused, "refused"),
            (&self.shared.would, "would have refused (permissive)"),
        ] {
            let map = map.lock();
            if map.is_empty() {
                continue;
            }
            let total: u64 = map.values().map(|v| v.0).sum();
            let mut rows: Vec<_> = map.iter().collect();
            rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            out.push(format!(
                "veilfs: {title} {total} connection{}:",
                if total == 1 { "" } else { "s" }
            ));
            for (dest, (n, why)) in rows.into_iter().take(20) {
                out.push(format!("veilfs:   {n:>5}× {dest} ({why})"));
            }
        }
        out
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("proxy: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.busy.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            shared.busy.fetch_sub(1, Ordering::AcqRel);
            let why = format!("more than {MAX_CONNECTIONS} connections at once: closed");
            shared.refuse_request(TOO_MANY, why, &client);
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("veilfs-proxy-conn".into())
            .spawn(move || {
                let id = s.next.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = serve(&s, id, client) {
                    log::debug!("proxy: connection {id}: {e}");
                }
                s.live.lock().remove(&id);
                s.busy.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            log::warn!("proxy: no thread for a connection: {e}");
            shared.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What the audit log and the summary call a request that names no destination
/// the proxy can read.
const MALFORMED: &str = "(a malformed request)";

/// What they call a connection past [`MAX_CONNECTIONS`].
const TOO_MANY: &str = "(too many connections)";

/// Serves one client: reads where it goes, decides, connects, relays.
fn serve(s: &Shared, id: u64, client: TcpStream) -> io::Result<()> {
    s.live.lock().insert(id, vec![client.try_clone()?]);
    let mut first = [0u8; 1];
    let mut head = Within::new(&client);
    if head.peek(&mut first)? == 0 {
        return Ok(());
    }
    if first[0] == socks::VERSION {
        serve_socks(s, id, client)
    } else {
        serve_http(s, id, client)
    }
}

/// A SOCKS5 client.
fn serve_socks(s: &Shared, id: u64, mut client: TcpStream) -> io::Result<()> {
    let dest = match socks::handshake(&mut Within::new(&client)) {
        Ok(d) => d,
        Err(e) => {
            // Whatever it was, it named no destination that went through: on the
            // record (a probe that stops halfway too).
            s.refuse_request(MALFORMED, format!("SOCKS5: {e}"), &client);
            if let Some(r) = e.reply() {
                socks::answer(&mut client, r)?;
            }
            return Err(io::Error::other(e));
        }
    };
    let Some(by) = s.admit(&dest, &client) else {
        return socks::answer(&mut client, socks::Reply::NotAllowed);
    };
    match s.connect(&dest, by, &client) {
        Ok(up) => {
            socks::answer(&mut client, socks::Reply::Succeeded)?;
            s.relay(id, client, up, &[])
        }
        Err(Reach::Refused) => socks::answer(&mut client, socks::Reply::NotAllowed),
        Err(Reach::Failed(e)) => {
            socks::answer(&mut client, socks::Reply::HostUnreachable)?;
            Err(e)
        }
    }
}

/// An HTTP client: `CONNECT`, or plain HTTP with an absolute URI.
fn serve_http(s: &Shared, id: u64, mut client: TcpStream) -> io::Result<()> {
    let (req, rest) = match http::read_request(&mut Within::new(&client)) {
        Ok(r) => r,
        Err(e) => {
            // A head cut short, or never finished in time, as much as one that
            // names nothing readable: on the record.
            s.refuse_request(MALFORMED, format!("HTTP: {e}"), &client);
            client.write_all(&http::refusal("400 Bad Request", &e.to_string()))?;
            return Err(io::Error::other(e));
        }
    };
    let dest = req.dest().clone();
    let refused = format!("{dest} is not in this session's network allow-list (veilfs run --net)");
    let Some(by) = s.admit(&dest, &client) else {
        return client.write_all(&http::refusal("403 Forbidden", &refused));
    };
    let mut up = match s.connect(&dest, by, &client) {
        Ok(up) => up,
        Err(Reach::Refused) => {
            let why = format!("{dest} leads to an address this session refuses");
            return client.write_all(&http::refusal("403 Forbidden", &why));
        }
        Err(Reach::Failed(e)) => {
            let why = format!("cannot reach {dest}: {e}");
            client.write_all(&http::refusal("502 Bad Gateway", &why))?;
            return Err(e);
        }
    };
    match req {
        http::Request::Connect(_) => client.write_all(http::ESTABLISHED)?,
        http::Request::Forward { head, .. } => up.write_all(&head)?,
    }
    s.relay(id, client, up, &rest)
}

/// A client read and written while it says where it goes: the whole of that must
/// come within [`HEAD_TIMEOUT`] of the start, however slowly it trickles in.
struct Within<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl<'a> Within<'a> {
    fn new(stream: &'a TcpStream) -> Within<'a> {
        Within {
            stream,
            until: Instant::now() + HEAD_TIMEOUT,
        }
    }

    /// Sets the read timeout to what is left; none left is `TimedOut`.
    fn left(&self) -> io::Result<()> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))
    }

    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.left()?;
        self.stream.peek(buf)
    }
}

impl io::Read for Within<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.left()?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for Within<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&mut &*self.stream).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What kind of SPEC let a destination through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllowedBy {
    /// A name or an address, as written (or a person's answer to one).
    Exactly,
    /// A glob below a name: what it resolves to must not be this host's own
    /// addresses (see [`Shared::connect`]).
    Glob,
    /// Nothing (`--permissive`).
    Nothing,
}

/// Why no connection was made to an admitted destination.
enum Reach {
    /// Every address it resolved to was refused (counted and logged).
    Refused,
    Failed(io::Error),
}

/// Addresses a name allowed by a glob never leads to: this host's own (loopback,
/// unspecified, and the addresses of its interfaces, where a service bound to
/// every address answers) and link-local ones (a cloud's metadata service), where
/// a name whose DNS someone else controls could otherwise point (DNS rebinding).
fn own_or_link_local(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    let special = match ip {
        IpAddr::V4(a) => a.is_loopback() || a.is_unspecified() || a.is_link_local(),
        IpAddr::V6(a) => {
            a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80
        }
    };
    special
        || crate::sys::own_addresses()
            .into_iter()
            .any(|own| own.to_canonical() == ip)
}

impl Shared {
    /// Whether `client` may reach `dest`, and by what kind of SPEC; a refusal (or,
    /// permissive, what would have been one) is counted and logged.
    fn admit(&self, dest: &Dest, client: &TcpStream) -> Option<AllowedBy> {
        let d = self.setup.rules.decide(dest);
        let why = d.why();
        let allowed = match d.action {
            NetAction::Allow => true,
            NetAction::Deny => false,
            NetAction::Ask => match &self.setup.ask {
                Some(ask) => ask(dest, &why, self.who(client)),
                None => false,
            },
        };
        if allowed {
            if self.audit.lock().as_ref().is_some_and(Audit::all) {
                self.log(&dest.to_string(), "allowed", why, client);
            }
            let glob = d.rule.is_some_and(|r| matches!(r.spec, Spec::Below { .. }));
            return Some(if glob && d.action == NetAction::Allow {
                AllowedBy::Glob
            } else {
                AllowedBy::Exactly
            });
        }
        self.refuse(dest, why, client).then_some(AllowedBy::Nothing)
    }

    /// Counts and logs a refusal of `dest` (`why`); under `--permissive`, what
    /// would have been one, and then `true`: go on.
    fn refuse(&self, dest: &Dest, why: String, client: &TcpStream) -> bool {
        self.count(&dest.to_string(), self.setup.permissive, why, client);
        self.setup.permissive
    }

    /// Counts and logs a request refused whatever the mode: one that names no
    /// destination the proxy can read, or one past [`MAX_CONNECTIONS`] (`what`
    /// says which).
    fn refuse_request(&self, what: &str, why: String, client: &TcpStream) {
        self.count(what, false, why, client);
    }

    /// Counts `what` (a destination, or a kind of request) refused for `why` (or,
    /// `would`, that it would have been), says the first of each where notices go
    /// and logs each.
    fn count(&self, what: &str, would: bool, why: String, client: &TcpStream) {
        let (map, result) = if would {
            (&self.would, "would-refuse")
        } else {
            (&self.refused, "refused")
        };
        let first = {
            let mut map = map.lock();
            let slot = map.entry(what.to_string()).or_insert((0, why.clone()));
            slot.0 += 1;
            slot.0 == 1
        };
        if first {
            self.notice(what, would, &why);
        }
        self.log(what, result, why, client);
    }

    /// Says the first refusal of `what` where notices go.
    fn notice(&self, what: &str, would: bool, why: &str) {
        use crate::fs::notice::Destination;
        let line = format!(
            "veilfs: connect to {} {}: {}",
            crate::escape::escape(what),
            if would {
                "would be refused (permissive)"
            } else {
                "refused"
            },
            crate::escape::escape(why)
        );
        match &self.setup.notices {
            Destination::Session(s, _) => s.write_other(&line),
            Destination::Log => log::info!("{line}"),
            // `run` always has one of the two; never the command's terminal.
            Destination::Stderr => {}
        }
    }

    fn log(&self, dest: &str, result: &'static str, rule: String, client: &TcpStream) {
        let Some(audit) = self.audit.lock().clone() else {
            return;
        };
        let who = self.who(client);
        audit.record_net(NetEvent {
            time: SystemTime::now(),
            dest: dest.to_string(),
            result,
            rule,
            pid: who.as_ref().map(|w| w.0),
            comm: who.map(|w| w.1).unwrap_or_default(),
        });
    }

    /// The process (host pid, name) that holds the other end of `client`.
    fn who(&self, client: &TcpStream) -> Option<(u32, String)> {
        let peer = client.peer_addr().ok()?;
        super::who::connected_from(self.setup.inside, peer)
    }

    /// Connects to `dest`, allowed `by`: an address as given; a name as it
    /// resolves here, less the addresses a `deny` SPEC names and, for a name a glob
    /// allowed, this host's own and link-local addresses. When every address is
    /// refused so, the refusal is counted and logged.
    fn connect(&self, dest: &Dest, by: AllowedBy, client: &TcpStream) -> Result<TcpStream, Reach> {
        let addrs: Vec<SocketAddr> = match &dest.host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, dest.port)],
            Host::Name(n) => (n.as_str(), dest.port)
                .to_socket_addrs()
                .map_err(Reach::Failed)?
                .collect(),
        };
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
        let mut refused = false;
        for a in addrs {
            let why = match self.setup.rules.denies_address(a.ip(), a.port()) {
                Some(rule) => Some(format!("resolves to {a}: {}", rule.why())),
                None if by == AllowedBy::Glob && own_or_link_local(a.ip()) => Some(format!(
                    "resolves to {a}, this host's own or link-local: a name a glob allows \
                     never leads there (name it exactly)"
                )),
                None => None,
            };
            if let Some(why) = why
                && !self.refuse(dest, why, client)
            {
                refused = true;
                continue;
            }
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(if refused {
            Reach::Refused
        } else {
            Reach::Failed(last)
        })
    }

    /// Copies both ways between `client` and `up` (after sending `pending`, what
    /// the client sent after its head), until both sides end.
    fn relay(&self, id: u64, client: TcpStream, up: TcpStream, pending: &[u8]) -> io::Result<()> {
        client.set_read_timeout(None)?;
        self.live
            .lock()
            .entry(id)
            .or_default()
            .push(up.try_clone()?);
        (&up).write_all(pending)?;
        let (c, u) = (client.try_clone()?, up.try_clone()?);
        let out = std::thread::Builder::new()
            .name("veilfs-proxy-out".into())
            .spawn(move || {
                let _ = io::copy(&mut &c, &mut &u);
                let _ = u.shutdown(Shutdown::Write);
            })?;
        let _ = io::copy(&mut &up, &mut &client);
        let _ = client.shutdown(Shutdown::Write);
        let _ = out.join();
        Ok(())
    }
}
