//! A refusal, as the operations make it and the reply reads it: one errno
//! (`EACCES`), carrying the path and the decision for the audit log and the
//! notices. A leaf: it depends on the policy's [`Decision`] only.

use std::io;

use crate::policy::Decision;

/// The one refusal errno, without a decision to report (a node whose parent is
/// gone).
pub fn eacces() -> io::Error {
    io::Error::from_raw_os_error(libc::EACCES)
}

/// A policy refusal: `EACCES` at the kernel, carrying the path and the decision for
/// the audit log. Only `reply` turns it into an errno.
#[derive(Debug)]
pub struct Refusal {
    pub path: Vec<u8>,
    pub decision: Decision,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            String::from_utf8_lossy(&self.path),
            self.decision.action,
            self.decision.why()
        )
    }
}

impl std::error::Error for Refusal {}

impl From<Refusal> for io::Error {
    fn from(r: Refusal) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, r)
    }
}

/// Refuses an operation on `path` because of `decision`.
pub fn refuse(path: &[u8], decision: &Decision) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        Refusal {
            path: path.to_vec(),
            decision: decision.clone(),
        },
    )
}

/// The policy refusal `e` carries, if it is one.
pub fn refusal_of(e: &io::Error) -> Option<&Refusal> {
    e.get_ref().and_then(|x| x.downcast_ref::<Refusal>())
}

/// The `io::Error` of the raw errno `e`.
pub(crate) fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}
