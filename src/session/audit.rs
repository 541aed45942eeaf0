//! The audit log: one JSON object per line for every refusal (and, with `all`, every
//! allowed operation), written by its own thread so that a slow disk never holds up
//! a request.
//!
//! Requests hand events to a bounded queue and never wait: when it is full the event
//! is dropped and counted, and the next line written says how many were dropped
//! (`{"dropped": N}`). When the mount ends, a summary of the refused paths (with
//! counts and the rule that refused them) goes to stderr.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::SystemTime;

use crate::policy::Decision;

/// How many events may wait for the writer.
pub const QUEUE: usize = 4096;

/// How many events may wait for the writer of a log of every operation (`all`,
/// `--learn`): an event dropped there is a path a learned policy would miss.
pub const QUEUE_ALL: usize = 1 << 16;

/// The queue for a log that holds allowed operations too (`all`) or not.
pub fn queue(all: bool) -> usize {
    if all { QUEUE_ALL } else { QUEUE }
}

/// One operation, as the kernel asked for it.
#[derive(Debug)]
pub struct Event {
    pub time: SystemTime,
    pub op: &'static str,
    pub path: Vec<u8>,
    pub decision: Decision,
    pub refused: bool,
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// `/proc/<pid>/comm`, read when the request came in (the process may be gone by
    /// the time the line is written).
    pub comm: String,
    /// The event's `result` when it is not plainly `refused` or `allowed` (a
    /// question: `asked`, `approved`).
    pub result: Option<&'static str>,
    /// About a question (see [`crate::fs::ask`]): its id, outcome, how long it
    /// waited, who answered and why.
    pub ask: Option<serde_json::Value>,
    /// The access changes the path (writes, makes, removes, renames it or changes
    /// its attributes), as the policy was asked: written `"change": true`. Said of
    /// allowed changes (`all`) and of what a permissive mount would refuse.
    pub change: bool,
    /// An allowed lookup of a name that is not there (`ENOENT`): written
    /// `"absent": true` (`all` only).
    pub absent: bool,
    /// The path is a directory: written `"dir": true` (said of allowed operations
    /// on a node, `all` only).
    pub dir: bool,
}

/// A connection the proxy of `veilfs run --net allow=...` refused, asked about or
/// (with `all`) made: written with `"net": "host:port"` in place of a path.
#[derive(Debug)]
pub struct NetEvent {
    pub time: SystemTime,
    /// `host:port`, as the client named it.
    pub dest: String,
    /// `refused`, `would-refuse` (permissive), `allowed`, `asked`, `approved`.
    pub result: &'static str,
    /// The SPEC that decided, or why none did.
    pub rule: String,
    /// The process that connected, when it could be told (host pid).
    pub pid: Option<u32>,
    pub comm: String,
}

/// What the writer is handed.
#[derive(Debug)]
enum Entry {
    Path(Option<&'static str>, Event),
    Net(NetEvent),
}

/// The request side of the log.
#[derive(Debug, Clone)]
pub struct Audit {
    tx: SyncSender<Entry>,
    dropped: Arc<AtomicU64>,
    all: bool,
    /// Which root the events are about (`veilfs run`'s `"workspace"` or `"home"`),
    /// written as the event's `root`.
    root: Option<&'static str>,
}

/// The writer thread; join it after the filesystem is gone to flush the log and
/// print the summary.
pub struct Writer {
    thread: JoinHandle<()>,
}

impl Writer {
    pub fn finish(self) {
        let _ = self.thread.join();
    }
}

/// Opens the log file for appending: never through a symbolic link (someone who
/// could plant one would have the daemon append to any file it can write), and only
/// a regular file or a FIFO (a log collector's) of this user's.
fn open_log(target: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(target)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other(format!(
                "{} is a symbolic link: the audit log is never written through one",
                target.display()
            )),
            _ => e,
        })?;
    let meta = f.metadata()?;
    use std::os::unix::fs::FileTypeExt;
    if !meta.is_file() && !meta.file_type().is_fifo() {
        return Err(io::Error::other(format!(
            "{} is neither a regular file nor a FIFO",
            target.display()
        )));
    }
    if meta.uid() != crate::sys::euid() {
        return Err(io::Error::other(format!(
            "{} is owned by uid {}, not by this user",
            target.display(),
            meta.uid()
        )));
    }
    Ok(f)
}

/// Why an audit log may not be written where it is asked for.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log's path could not be made absolute.
    #[error(transparent)]
    Absolute(io::Error),
    /// The log would lie in the workspace, where the command could rewrite it.
    #[error(
        "the audit log {} is inside the workspace {}: the command could rewrite it; \
         write it outside",
        log.display(),
        workspace.display()
    )]
    InsideWorkspace { log: PathBuf, workspace: PathBuf },
}

/// Refuses an audit log inside the workspace `ws` (canonical): what the mount serves
/// can be changed by whoever uses the mount, so a confined command could rewrite its
/// own log (or have it replaced by a link beforehand).
pub fn check_outside(target: &Path, ws: &Path) -> Result<(), AuditError> {
    if target == Path::new("-") {
        return Ok(());
    }
    let abs = std::path::absolute(target).map_err(AuditError::Absolute)?;
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if dir.starts_with(ws) {
        return Err(AuditError::InsideWorkspace {
            log: target.to_path_buf(),
            workspace: ws.to_path_buf(),
        });
    }
    Ok(())
}

impl Audit {
    /// Opens `target` (`-` for stderr) for appending and starts the writer.
    pub fn start(target: &Path, all: bool, queue: usize) -> io::Result<(Audit, Writer)> {
        let out: Box<dyn Write + Send> = if target == Path::new("-") {
            Box::new(io::stderr())
        } else {
            Box::new(open_log(target)?)
        };
        let (tx, rx) = sync_channel(queue);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        let thread = std::thread::Builder::new()
            .name("veilfs-audit".into())
            .spawn(move || write_loop(rx, BufWriter::new(out), d))?;
        Ok((
            Audit {
                tx,
                dropped,
                all,
                root: None,
            },
            Writer { thread },
        ))
    }

    /// The same log, for the mount of another root: its events carry `"root":
    /// root` (`veilfs run` serves the workspace and the home directory into one
    /// log).
    pub fn for_root(&self, root: &'static str) -> Audit {
        Audit {
            root: Some(root),
            ..self.clone()
        }
    }

    /// Whether allowed operations are logged too.
    pub fn all(&self) -> bool {
        self.all
    }

    /// Queues an event without ever waiting.
    pub fn record(&self, e: Event) {
        self.send(Entry::Path(self.root, e));
    }

    /// Queues a connection's event without ever waiting.
    pub fn record_net(&self, e: NetEvent) {
        self.send(Entry::Net(e));
    }

    fn send(&self, e: Entry) {
        match self.tx.try_send(e) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// `t` in UTC as RFC 3339 with microseconds (`2026-12-03T10:11:12.000042Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// The name of process `pid` (empty if it is gone).
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

fn write_loop(
    rx: Receiver<Entry>,
    mut out: BufWriter<Box<dyn Write + Send>>,
    dropped: Arc<AtomicU64>,
) {
    // path → (count, why): refused, and what a permissive mount would have refused
    let mut refused: HashMap<Vec<u8>, (u64, String)> = HashMap::new();
    let mut would: HashMap<Vec<u8>, (u64, String)> = HashMap::new();
    let flush_dropped = |out: &mut BufWriter<Box<dyn Write + Send>>| {
        let n = dropped.swap(0, Ordering::Relaxed);
        if n > 0 {
            let line = serde_json::json!({ "time": rfc3339(SystemTime::now()), "dropped": n });
            let _ = writeln!(out, "{line}");
        }
    };
    // host:port → (count, why), as above
    let mut net_refused: HashMap<Vec<u8>, (u64, String)> = HashMap::new();
    let mut net_would: HashMap<Vec<u8>, (u64, String)> = HashMap::new();
    while let Ok(entry) = rx.recv() {
        flush_dropped(&mut out);
        let (root, e) = match entry {
            Entry::Path(root, e) => (root, e),
            Entry::Net(e) => {
                let counted = match e.result {
                    "refused" => Some(&mut net_refused),
                    "would-refuse" => Some(&mut net_would),
                    _ => None,
                };
                if let Some(counted) = counted {
                    let slot = counted
                        .entry(e.dest.clone().into_bytes())
                        .or_insert((0, e.rule.clone()));
                    slot.0 += 1;
                }
                let _ = writeln!(out, "{}", crate::escape::json(&net_line(e)));
                let _ = out.flush();
                continue;
            }
        };
        let mut v = e.decision.to_json(&e.path);
        if let Some(r) = root {
            v["root"] = r.into();
        }
        v["time"] = rfc3339(e.time).into();
        v["op"] = e.op.into();
        v["result"] = e
            .result
            .unwrap_or(if e.refused { "refused" } else { "allowed" })
            .into();
        if let Some(ask) = e.ask {
            v["ask"] = ask;
        }
        if e.change {
            v["change"] = true.into();
        }
        if e.absent {
            v["absent"] = true.into();
        }
        if e.dir {
            v["dir"] = true.into();
        }
        v["pid"] = e.pid.into();
        v["uid"] = e.uid.into();
        v["gid"] = e.gid.into();
        v["comm"] = e.comm.into();
        let _ = writeln!(out, "{}", crate::escape::json(&v));
        let counted = if e.refused {
            Some(&mut refused)
        } else if e.result.is_some_and(|r| r.starts_with("would-")) {
            Some(&mut would)
        } else {
            None
        };
        if let Some(counted) = counted {
            let shown = match root {
                Some("home") => [b"~/".as_slice(), &e.path].concat(),
                _ => e.path,
            };
            let slot = counted.entry(shown).or_insert((0, e.decision.why()));
            slot.0 += 1;
        }
        // One line at a time, so `tail -f` shows refusals as they happen.
        let _ = out.flush();
    }
    flush_dropped(&mut out);
    let _ = out.flush();
    summary("refused during this mount", refused);
    summary(
        "would have refused during this mount (permissive: nothing was refused)",
        would,
    );
    summary("connections refused during this session", net_refused);
    summary(
        "connections it would have refused (permissive: nothing was refused)",
        net_would,
    );
}

/// The log's line for a connection.
fn net_line(e: NetEvent) -> serde_json::Value {
    let mut v = serde_json::json!({
        "time": rfc3339(e.time),
        "op": "connect",
        "net": e.dest,
        "result": e.result,
        "why": e.rule,
        "comm": e.comm,
    });
    if let Some(pid) = e.pid {
        v["pid"] = pid.into();
    }
    v
}

/// The summary of `counted` paths printed when the mount ends.
fn summary(title: &str, counted: HashMap<Vec<u8>, (u64, String)>) {
    if counted.is_empty() {
        return;
    }
    let mut rows: Vec<_> = counted.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    eprintln!("veilfs: {title}:");
    for (path, (n, why)) in rows {
        eprintln!(
            "  {n:>6}× {}  ({})",
            crate::escape::printable(&path),
            crate::escape::escape(&why)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::rfc3339;
    use std::time::{Duration, SystemTime};

    #[test]
    fn rfc3339_dates() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(981_173_106);
        assert_eq!(rfc3339(t), "2001-02-03T04:05:06.000000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_208_000);
        assert_eq!(rfc3339(t), "2024-02-29T12:00:00.000000Z");
    }
}
