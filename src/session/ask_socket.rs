//! The approver's side of the control socket: questions about `ask` paths out,
//! answers in, as JSON lines (see [`crate::fs::ask`]).
//!
//! A client connects to a session's control socket (found as `veilfs reload` finds
//! it) and sends the line `subscribe`. Only a peer of the daemon's uid or root is
//! answered, and under `veilfs run` never a process of the session itself: the
//! confined command cannot approve its own requests. The daemon then writes:
//!
//! ```text
//! {"type":"hello","session":"veilfs mount","path":"/mnt/ws","timeout_ms":60000,"version":1}
//! {"type":"question","id":7,"session":"veilfs mount","root":"","mount":"/mnt/ws",
//!  "path":"migrations/001.sql","directory":"migrations","is_dir":false,"op":"open",
//!  "access":"read","pid":4242,"uid":1000,"comm":"cat",
//!  "cmdline":["cat","migrations/001.sql"],
//!  "rule":"rule 2 \"migrations/\" (.veilfs.toml:5:10)","decided_at":"migrations",
//!  "grants":"allow","policy_file":"/mnt/ws/.veilfs.toml","timeout_ms":60000}
//! {"type":"closed","id":7,"outcome":"allow-once","by":{"pid":99,"uid":1000,"comm":"veilfs"}}
//! ```
//!
//! (`path`: the canonical path the session serves, the one its control socket is
//! named after: the mount point of a `veilfs mount`, the workspace of a `veilfs
//! run`), one `question` per open question (those already open when the client
//! subscribes come first; `decided_at`, `grants` and `policy_file` say what an
//! answer that lasts writes, see `veilfs prompt`), and one `closed` when a
//! question is answered (by any approver: `allow-once`, `allow-path`,
//! `allow-dir`, `deny`) or ends unanswered (`timeout`). The client answers with
//!
//! ```text
//! {"type":"answer","id":7,"answer":"allow-once"}
//! {"type":"answer","id":8,"answer":"deny","reason":"not during the migration"}
//! ```
//!
//! and is told `{"type":"error","id":8,"message":"..."}` when an answer cannot be
//! taken (the question was closed meanwhile, an unknown answer). When the last
//! approver of a session disconnects, its open questions are refused.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::UnixCredentials;
use parking_lot::Mutex;

use crate::fs::ask::{Answer, Approver, Broker};

/// The longest answer line taken.
const MAX_LINE: u64 = 64 * 1024;

/// How long a write to an approver may block before it is dropped (an approver
/// that stops reading must not hold the daemon).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one approver on `conn` (whose peer is `cred`) until it disconnects, or
/// until the daemon shuts the connection down (a newer approver of its uid took
/// its slot, see [`crate::session::control`]). `served`: the path the session serves.
pub fn subscribe(
    conn: &UnixStream,
    broker: &Arc<Broker>,
    cred: &UnixCredentials,
    served: &Path,
) -> io::Result<()> {
    let approver = Approver {
        pid: cred.pid(),
        uid: cred.uid(),
        comm: crate::session::audit::comm(cred.pid().max(0) as u32),
    };
    conn.set_read_timeout(None)?;
    conn.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let out = Arc::new(Mutex::new(conn.try_clone()?));
    let send = |out: &Mutex<UnixStream>, line: &str| -> io::Result<()> {
        let mut w = out.lock();
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")
    };
    let hello = serde_json::json!({
        "type": "hello",
        "session": broker.label(),
        "path": served.to_string_lossy(),
        "timeout_ms": broker.timeout().as_millis() as u64,
        "version": 1,
    });
    send(&out, &hello.to_string())?;
    let (id, rx) = broker.subscribe();
    let writer = {
        let out = out.clone();
        std::thread::Builder::new()
            .name("veilfs-approver".into())
            .spawn(move || {
                for line in rx {
                    if send(&out, &line).is_err() {
                        break;
                    }
                }
                // Dropped (it fell behind, or the mount ends) or gone: either way
                // the connection ends, and with it the answers it could send.
                let _ = out.lock().shutdown(std::net::Shutdown::Both);
            })
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            broker.unsubscribe(id);
            return Err(e);
        }
    };
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        match r.by_ref().take(MAX_LINE).read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if !line.ends_with('\n') => {
                let _ = send(&out, &error(None, "answer line too long"));
                break;
            }
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Err((qid, why)) = take_answer(broker, &line, &approver)
            && send(&out, &error(qid, &why)).is_err()
        {
            break;
        }
    }
    broker.unsubscribe(id);
    let _ = conn.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    Ok(())
}

fn error(id: Option<u64>, message: &str) -> String {
    serde_json::json!({"type": "error", "id": id, "message": message}).to_string()
}

/// Hands one answer line to the broker; `Err` says why it was not taken.
fn take_answer(broker: &Broker, line: &str, by: &Approver) -> Result<(), (Option<u64>, String)> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| (None, format!("not JSON: {e}")))?;
    let id = v.get("id").and_then(|i| i.as_u64());
    if v.get("type").and_then(|t| t.as_str()) != Some("answer") {
        return Err((id, "expected {\"type\":\"answer\",...}".into()));
    }
    let id = id.ok_or((None, "an answer needs the question's \"id\"".to_string()))?;
    let reason = v
        .get("reason")
        .and_then(|r| r.as_str())
        .map(|r| r.chars().take(1000).collect::<String>());
    let answer = v
        .get("answer")
        .and_then(|a| a.as_str())
        .and_then(|a| Answer::parse(a, reason))
        .ok_or((
            Some(id),
            "\"answer\" must be \"allow-once\", \"allow-path\", \"allow-dir\" or \"deny\""
                .to_string(),
        ))?;
    broker
        .answer(id, answer, by)
        .map_err(|e| (Some(id), e.to_string()))
}
