//! Permissive mode (`--permissive`, as SELinux has it): the policy's rules refuse
//! nothing, and every access they *would* refuse is written to the audit log
//! (`"result": "would-refuse"`, or `"would-ask"` for a path that asks), so that a
//! person can run a command once, read `veilfs explain --audit`, and then enforce.
//!
//! Under `veilfs run` it is the workspace's policy that is tuned: the home policy
//! is enforced in full, by the home mount and by the workspace mount where the
//! home policy reaches into the workspace (a workspace in `~/.config` holds what it
//! guards), so that a tuning run reads no credential of the home directory and
//! leaves no code behind in `~/.bashrc` or `~/.config/git/config`. A workspace that
//! is the home directory is refused.
//!
//! What still holds is veilfs's own guards, which are not the policy but what keeps
//! the policy (and what the person runs later) from being rewritten by the command:
//! the policy file and the files the policy imports (by name and by identity), the
//! directories that hold them, and, under `veilfs run`, git's control files and
//! veilfs's configuration directory. A tuning run that could plant the policy of
//! the enforcing run after it would tune nothing.
//!
//! Every check in [`super::ops`] goes through [`VeilFs::admit`], which looks at the
//! mode only on the way to a refusal, so a mount that is not permissive pays
//! nothing. (It is also where a change the policy allows is logged, with
//! `--audit-all`: `"change": true`, once per request and path.) Each would-be
//! refusal (a change's with `"change": true`) is logged once per request and
//! path, with the path the request named in full (a path under a denied directory
//! is looked up, so `cat certs/dev.key` logs `certs/dev.key`, where an enforcing
//! mount can only log `certs`: the lookup stops there). The checks of a request's
//! parent directories log nothing of their own.

use std::io;

use super::VeilFs;
use super::refusal::refuse;
use super::request::Req;
use super::snapshot::Snapshot;
use crate::policy::{Decision, Policy};

/// What a check needs of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Need {
    /// To be seen: looked up, listed, stat'ed, read.
    See,
    /// To be changed: written, made, removed, renamed, its attributes changed.
    Change,
}

impl Need {
    pub(super) fn met_by(self, d: &Decision) -> bool {
        match self {
            Need::See => d.action.visible(),
            Need::Change => d.action.writable(),
        }
    }
}

impl VeilFs {
    /// A check that `d` meets `need` on `path`: `EACCES` when it does not, unless the
    /// mount is permissive and veilfs's own guards alone meet it; the refusal it
    /// would have been is then logged (`log`: a check of the request's own path, not
    /// of a directory above it). A guard that refuses is named as the reason.
    pub(super) fn admit(
        &self,
        s: &Snapshot,
        path: &[u8],
        d: &Decision,
        need: Need,
        log: bool,
    ) -> io::Result<()> {
        if need.met_by(d) {
            if need == Need::Change && log {
                self.allowed_change(s.req, path, d);
            }
            return Ok(());
        }
        if !self.permissive {
            return Err(refuse(path, d));
        }
        let g = self.guards_alone(&s.policy, path);
        if !need.met_by(&g) {
            return Err(refuse(path, &g));
        }
        if log {
            self.would_refuse(s.req, path, d, "would-refuse", need == Need::Change);
        }
        Ok(())
    }

    /// [`VeilFs::admit`] for the refusal `e` (of a check made elsewhere): `Ok` where
    /// a permissive mount waives it.
    pub(super) fn admit_refusal(&self, s: &Snapshot, e: io::Error) -> io::Result<()> {
        match super::refusal::refusal_of(&e) {
            Some(r) if self.permissive => {
                let (path, d) = (r.path.clone(), r.decision.clone());
                self.admit(s, &path, &d, Need::Change, true)
            }
            _ => Err(e),
        }
    }

    /// The decision a permissive mount goes by for `path`: allowed, but for veilfs's
    /// own guards (the names the policy keeps, the policy file, git's control files
    /// and veilfs's configuration under `veilfs run`), and the home policy around
    /// the workspace (`veilfs run`), enforced where it reaches in (a workspace in
    /// `~/.config` holds what it guards). See [`super::gate::Gatekeeper::alone`].
    pub(super) fn guards_alone(&self, policy: &Policy, path: &[u8]) -> Decision {
        self.gate.alone(policy, path)
    }

    /// In a permissive mount, the decision a request for `access` to a path that asks
    /// goes by instead of a question: the guards alone, the question it would have
    /// been logged (`"would-ask"`, or `"would-refuse"` for a change that even an
    /// approval would not allow).
    pub(super) fn waived_question(
        &self,
        s: &Snapshot,
        path: &[u8],
        d: &Decision,
        access: super::grant::Access,
    ) -> Option<Decision> {
        if !self.permissive {
            return None;
        }
        let writes = access == super::grant::Access::Write;
        let result = if writes && !d.granted().writable() {
            "would-refuse"
        } else {
            "would-ask"
        };
        self.would_refuse(s.req, path, d, result, writes);
        Some(self.guards_alone(&s.policy, path))
    }

    /// Logs that `req` would have been refused `path` by `d` (for a change, when
    /// `change`), once per request and path.
    fn would_refuse(
        &self,
        req: &Req,
        path: &[u8],
        d: &Decision,
        result: &'static str,
        change: bool,
    ) {
        if self.audit.is_none() || !req.first_mention(path) {
            return;
        }
        let mut e = self.event(req.who, req.op, path.to_vec(), d.clone());
        e.result = Some(result);
        e.change = change;
        self.record(e);
    }
}
