//! The request an operation serves, passed to it explicitly: who asks, which
//! operation it is, the grants approvals gave it (see [`super::ask`]), and, on a
//! permissive mount, the paths whose would-be refusal it has already logged (see
//! `permissive`).
//!
//! What stays true:
//! * A grant lives exactly as long as the request it was given to: a parked request
//!   is run again with a new [`Req`] holding every grant it was given, and nothing of
//!   it outlives that run or reaches another request (there is no per-thread state;
//!   a request may be served on any thread, and a parked one is run again on the
//!   thread that got the answer).
//! * Each path's would-be refusal is logged once per request, and so is each
//!   change of a path the policy allowed (`--audit-all`).

use parking_lot::Mutex;

use super::grant::{Access, Grant};

/// One request, as the operations see it.
#[derive(Debug)]
pub struct Req {
    pub(crate) who: Who,
    pub(crate) op: &'static str,
    grants: Vec<Grant>,
    logged: Mutex<Vec<Vec<u8>>>,
    /// The paths whose allowed change this request has logged.
    changed: Mutex<Vec<Vec<u8>>>,
}

impl Req {
    /// The request `op` of the process `pid`, run by `uid`:`gid`, with no grant.
    pub fn new(op: &'static str, pid: u32, uid: u32, gid: u32) -> Req {
        Req::of(Who { pid, uid, gid }, op)
    }

    pub(crate) fn of(who: Who, op: &'static str) -> Req {
        Req {
            who,
            op,
            grants: Vec::new(),
            logged: Mutex::new(Vec::new()),
            changed: Mutex::new(Vec::new()),
        }
    }

    /// The same request run again after approvals, with every grant it was given.
    pub fn with_grants(mut self, grants: Vec<Grant>) -> Req {
        self.grants = grants;
        self
    }

    /// Whether a grant this request holds lets it use `path` of the mount of `root`
    /// for `access`.
    pub(crate) fn granted(&self, root: &str, path: &[u8], access: Access) -> bool {
        self.grants.iter().any(|g| g.covers(root, path, access))
    }

    /// True the first time this request asks about `path` (it is then remembered).
    pub(crate) fn first_mention(&self, path: &[u8]) -> bool {
        first(&self.logged, path)
    }

    /// True the first time this request is allowed to change `path` (it is then
    /// remembered).
    pub(crate) fn first_change(&self, path: &[u8]) -> bool {
        first(&self.changed, path)
    }
}

/// True when `path` is not in `seen` yet (it is then added).
fn first(seen: &Mutex<Vec<Vec<u8>>>, path: &[u8]) -> bool {
    let mut seen = seen.lock();
    if seen.iter().any(|p| p.as_slice() == path) {
        return false;
    }
    seen.push(path.to_vec());
    true
}

/// Who made a request (kept past the request, for one answered after a question).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl From<&Req> for Who {
    fn from(req: &Req) -> Who {
        req.who
    }
}

impl From<&fuser::Request> for Who {
    fn from(req: &fuser::Request) -> Who {
        Who {
            pid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_belong_to_their_request() {
        let g = Grant {
            root: "",
            path: b"mig".to_vec(),
            beneath: true,
            access: Access::Read,
        };
        let first = Req::new("open", 1, 0, 0).with_grants(vec![g]);
        let other = Req::new("open", 1, 0, 0);
        assert!(first.granted("", b"mig/001.sql", Access::Read));
        assert!(!first.granted("", b"mig/001.sql", Access::Write));
        assert!(!first.granted("home", b"mig/001.sql", Access::Read));
        assert!(!other.granted("", b"mig/001.sql", Access::Read));
    }

    #[test]
    fn a_path_is_mentioned_once_per_request() {
        let r = Req::new("rename", 1, 0, 0);
        assert!(r.first_mention(b"a"));
        assert!(!r.first_mention(b"a"));
        assert!(r.first_mention(b"b"));
        assert!(Req::new("rename", 1, 0, 0).first_mention(b"a"));
        // Changes are counted apart.
        assert!(r.first_change(b"a"));
        assert!(!r.first_change(b"a"));
    }
}
