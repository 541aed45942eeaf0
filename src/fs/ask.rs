//! The `ask` action: a path whose content is used only once a person approves.
//!
//! A request that would use the content of an `ask` path (open a file, list a
//! directory, make, remove or rename a name there, change its attributes) stops
//! with a [`NeedsApproval`] error instead of a refusal. [`super::fuse`] then parks
//! the request: the reply (fuser's replies are `Send`) and a closure that runs the
//! request again go to the [`Broker`], and the worker thread goes on with other
//! requests. The broker sends one question per path to the approvers subscribed on
//! the session's control socket (`veilfs prompt`, or an editor speaking the JSON
//! lines of [`crate::session::control`]), and when the answer comes:
//!
//! * `allow once`: the parked requests run again with a grant for this path that
//!   lives only while they run (held by their [`super::request::Req`]);
//! * `allow this path` / `allow this directory` for the session: a session grant,
//!   kept until unmount or the next policy reload, then the requests run again;
//! * `deny` (with an optional reason, written to the audit log): `EACCES`.
//!
//! Nobody to ask (no approver subscribed), an approver gone, no answer within the
//! timeout, or an unmount: `EACCES`. Fail closed.
//!
//! Grants are for an access: one for reading covers opening for reading and
//! listing; one for writing covers both reading and changing. A grant never goes
//! beyond what the path is once approved (see [`crate::Decision::granted`]): a
//! question beneath a read-only rule grants reading only, and a request to change
//! such a path is refused without a question.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::request::Req;
use crate::policy::{Action, Decision};

pub use super::broker::{APPROVER_QUEUE, Broker, BrokerError};
pub use super::grant::{Access, Grant};

/// How long a question waits for an answer by default (`--ask-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most questions open at once in one session; more are refused at once
/// (a flood of distinct paths must not grow the daemon without bound).
pub const MAX_OPEN: usize = 1024;

/// How far an approval reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The requests waiting on this question, and nothing after them.
    Once,
    /// This path, until unmount or the next policy reload.
    Path,
    /// This directory and everything beneath it, until unmount or reload.
    Dir,
}

/// A person's answer to one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Allow(Scope),
    /// Refused, with the person's reason if they gave one.
    Deny(Option<String>),
}

impl Answer {
    /// The answer's name in the control protocol.
    pub fn as_str(&self) -> &'static str {
        match self {
            Answer::Allow(Scope::Once) => "allow-once",
            Answer::Allow(Scope::Path) => "allow-path",
            Answer::Allow(Scope::Dir) => "allow-dir",
            Answer::Deny(_) => "deny",
        }
    }

    /// Parses a protocol answer (`reason` is kept for `deny`).
    pub fn parse(s: &str, reason: Option<String>) -> Option<Answer> {
        Some(match s {
            "allow-once" => Answer::Allow(Scope::Once),
            "allow-path" => Answer::Allow(Scope::Path),
            "allow-dir" => Answer::Allow(Scope::Dir),
            "deny" => Answer::Deny(reason.filter(|r| !r.trim().is_empty())),
            _ => return None,
        })
    }
}

/// A request that waits for a person: carried in an `io::Error` (as a refusal is)
/// up to [`super::fuse`], which parks it. Anywhere else it is `EACCES`.
#[derive(Debug)]
pub struct NeedsApproval {
    pub path: Vec<u8>,
    pub decision: Decision,
    pub access: Access,
    /// The path is a directory (its own directory is then itself).
    pub is_dir: bool,
}

impl std::fmt::Display for NeedsApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} waits for approval ({})",
            String::from_utf8_lossy(&self.path),
            self.access.as_str(),
            self.decision.why()
        )
    }
}

impl std::error::Error for NeedsApproval {}

/// The question an error carries, if it is one.
pub fn question_of(e: &io::Error) -> Option<&NeedsApproval> {
    e.get_ref().and_then(|x| x.downcast_ref::<NeedsApproval>())
}

/// Who asked, as the kernel said and `/proc` tells.
#[derive(Clone, Debug)]
pub struct Asker {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
    /// `/proc/PID/cmdline`, split at NULs (empty when the process is gone).
    pub cmdline: Vec<String>,
}

impl Asker {
    pub fn of(pid: u32, uid: u32, gid: u32) -> Asker {
        // At most 4 KiB of it: a question is shown, not archived.
        let read = |p: String| -> io::Result<Vec<u8>> {
            use std::io::Read;
            let mut b = Vec::new();
            std::fs::File::open(p)?.take(4096).read_to_end(&mut b)?;
            Ok(b)
        };
        let cmdline = read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|a| !a.is_empty())
                    .take(64)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        Asker {
            pid,
            uid,
            gid,
            comm: crate::session::audit::comm(pid),
            cmdline,
        }
    }
}

/// The process that answered (from the control socket's peer credentials).
#[derive(Clone, Debug)]
pub struct Approver {
    pub pid: i32,
    pub uid: u32,
    pub comm: String,
}

impl Approver {
    pub(super) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"pid": self.pid, "uid": self.uid, "comm": self.comm})
    }
}

/// What becomes of a parked request.
pub enum Verdict {
    /// Run it again with these grants in force.
    Granted(Grant),
    /// Answer `EACCES`; the string says why (for the audit log).
    Refused(&'static str),
}

/// A parked request: called once with the verdict, on a thread of the broker's.
pub type Waiter = Box<dyn FnOnce(Verdict) + Send>;

/// Where one mount gets approvals for its `ask` paths: the broker that asks a
/// person, which root its paths are relative to, where it is mounted, and the
/// policy file it was loaded from (both shown in questions: a lasting answer of
/// `veilfs prompt` adds its rule to that file).
#[derive(Clone, Debug)]
pub struct Approvals {
    pub broker: Arc<Broker>,
    pub root: &'static str,
    pub mount: String,
    /// The mount's policy file, canonical (links resolved, as its reloader reads
    /// it); `None` for a built-in policy.
    pub policy_file: Option<PathBuf>,
}

impl Approvals {
    /// The approvals of the mount of `root` at `mount`, asking `broker`, its
    /// policy loaded from `policy_file` (`None`: a built-in policy).
    pub fn new(
        broker: Arc<Broker>,
        root: &'static str,
        mount: &Path,
        policy_file: Option<&Path>,
    ) -> Approvals {
        Approvals {
            broker,
            root,
            mount: mount.display().to_string(),
            // The file as the reloader finds it (`PolicyFile::open` resolves its
            // links too); one that cannot be resolved fails the mount there.
            policy_file: policy_file.map(|f| f.canonicalize().unwrap_or_else(|_| f.to_path_buf())),
        }
    }

    /// Whether a grant in force (the request's own, or one for the session) lets
    /// `req` use `path` for `access` now.
    pub fn granted(&self, req: &Req, path: &[u8], access: Access) -> bool {
        req.granted(self.root, path, access) || self.broker.session_covers(self.root, path, access)
    }
}

/// The decision a request for `access` uses: `d` itself when it does not ask; when
/// it asks, `d` as approved if a grant covers it, a refusal if what it grants once
/// approved is not enough, else a [`NeedsApproval`].
pub fn gate(
    approvals: Option<&Approvals>,
    req: &Req,
    path: &[u8],
    d: &Decision,
    access: Access,
    is_dir: bool,
) -> io::Result<Decision> {
    if d.action != Action::Ask {
        return Ok(d.clone());
    }
    if access == Access::Write && !d.granted().writable() {
        return Err(super::refusal::refuse(path, &d.once_approved()));
    }
    if approvals.is_some_and(|s| s.granted(req, path, access)) {
        return Ok(d.once_approved());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        NeedsApproval {
            path: path.to_vec(),
            decision: d.clone(),
            access,
            is_dir,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(path: &str, beneath: bool, access: Access) -> Grant {
        Grant {
            root: "",
            path: path.as_bytes().to_vec(),
            beneath,
            access,
        }
    }

    #[test]
    fn grants_cover_their_path_their_directory_and_lesser_access() {
        let once = g("m/a.sql", false, Access::Read);
        assert!(once.covers("", b"m/a.sql", Access::Read));
        assert!(!once.covers("", b"m/a.sql", Access::Write));
        assert!(!once.covers("", b"m/a.sqlx", Access::Read));
        assert!(!once.covers("home", b"m/a.sql", Access::Read));
        let dir = g("m", true, Access::Write);
        assert!(dir.covers("", b"m", Access::Read));
        assert!(dir.covers("", b"m/x/y", Access::Write));
        assert!(!dir.covers("", b"mx/y", Access::Read));
        let top = g("", true, Access::Read);
        assert!(top.covers("", b"anything/below", Access::Read));
    }

    #[test]
    fn answers_round_trip() {
        for a in ["allow-once", "allow-path", "allow-dir", "deny"] {
            assert_eq!(Answer::parse(a, None).map(|x| x.as_str()), Some(a));
        }
        assert_eq!(Answer::parse("yes", None), None);
        assert_eq!(
            Answer::parse("deny", Some("not now".into())),
            Some(Answer::Deny(Some("not now".into())))
        );
    }
}
