//! A decision ([`Decision`]): the action a policy takes on one path, and why
//! ([`Reason`]), as `explain`, the audit log and refusal notices say it.

use std::sync::Arc;

use super::{Action, Pattern};

/// Why a path got its action.
#[derive(Clone, Debug)]
pub enum Reason {
    /// The workspace root: always visible and listable.
    Root,
    /// No rule matches the path or any ancestor: the policy's `default`.
    Default,
    /// A pattern of this rule matches the path itself.
    Rule(Arc<Pattern>),
    /// The path is a directory on the literal prefix of this pattern (an allow-list
    /// admits the directories that lead to what it allows).
    Admitted(Arc<Pattern>),
    /// An ancestor's action was at least as restrictive, or no rule matches the path
    /// and it inherits its nearest matched ancestor's action.
    Ancestor {
        /// The ancestor's workspace-relative path.
        path: Arc<[u8]>,
        /// Why the ancestor has its action (never itself `Ancestor`).
        cause: Arc<Reason>,
    },
    /// The policy file of this mount lies in the workspace: it is read-only whatever
    /// the rules say, so the rules cannot be rewritten through the mount.
    PolicyFile,
    /// The path's name is [`super::POLICY_FILE_NAME`]: read-only whether or not it exists,
    /// so that no policy can be planted for a later mount.
    PolicyName,
    /// The path's name is one the policy imports rules from (`.cursorignore`, ...):
    /// read-only whether or not it exists, so that the command cannot rewrite its
    /// own rules.
    ImportedFile,
    /// The directory holds the mount's policy file (an ancestor of it): it cannot
    /// be renamed or removed, so the file stays where the daemon reads it.
    HoldsPolicyFile,
    /// Under `veilfs run`, a file git runs or obeys in a repository that is not the
    /// command's own (in a git directory anything but what everyday git writes:
    /// `.git/config`, `.git/hooks/`, `.git/rebase-merge/`, a submodule's; a `.git`
    /// file): read-only, so the command cannot plant code the person's own git runs
    /// later (see `crate::fs::git_guard`).
    GitControl,
    /// Under `veilfs run`, in the home mount: veilfs's own configuration directory
    /// (`~/.config/veilfs`, where the home policy lives), read-only so that the
    /// command cannot choose the policy of a later run.
    VeilfsConfig,
    /// Under `veilfs run`: a directory on the way to a path the policy hides or
    /// makes read-only by name; only a directory is made there, and it is not
    /// renamed, so no symbolic link in its place leads the name past the policy.
    Way,
    /// Under `veilfs run`: the audit log of this run, in the home directory: read-only,
    /// and the directories that hold it are not renamed or removed, so the command
    /// cannot rewrite, move or replace its own log.
    AuditLog,
    /// A directory moved or removed outside the mount to a place the daemon has not
    /// seen: its path is unknown, so it and everything beneath it are refused until
    /// a lookup finds it again (see `VeilFs::place`).
    Lost,
    /// What the session's agent runs later as the person (its profile's read-only
    /// entries, see [`crate::policy::agents`]): read-only whatever the policy
    /// says (the profile's own rule, said).
    AgentFile(Arc<str>),
    /// A path veilfs keeps read-only whatever the policy says, for the reason
    /// given (a learning session's log).
    Kept(Arc<str>),
    /// Not a path: a destination of `veilfs run --net` that an `ask` SPEC names,
    /// asked about as an `ask` path is (the SPEC, as [`crate::policy::net`] says
    /// it).
    Network(Arc<str>),
}

/// The effective action for one path, and why.
#[derive(Clone, Debug)]
pub struct Decision {
    pub action: Action,
    pub reason: Reason,
    /// Some rule matched this path or an ancestor: unmatched children inherit the
    /// action instead of taking the default.
    pub(super) ruled: bool,
    /// For [`Action::Ask`]: what the path is once a person approves (`allow`, or
    /// `read-only` where a read-only rule or guard also holds it). Otherwise the
    /// action itself.
    pub(super) approved: Action,
}

impl Decision {
    /// A destination an `ask` SPEC of the network lists names (`why`: the SPEC).
    pub fn network_ask(why: &str) -> Decision {
        Decision {
            action: Action::Ask,
            reason: Reason::Network(Arc::from(why)),
            ruled: true,
            approved: Action::Allow,
        }
    }

    /// The decision for the workspace root, the parent of every top-level entry.
    pub fn root() -> Decision {
        Decision {
            action: Action::Allow,
            reason: Reason::Root,
            ruled: false,
            approved: Action::Allow,
        }
    }

    /// Allowed, with no rule behind it (what a permissive mount starts from before
    /// veilfs's own guards, see [`crate::fs::config::FsConfig::permissive`]).
    pub fn allowed() -> Decision {
        Decision {
            action: Action::Allow,
            reason: Reason::Default,
            ruled: false,
            approved: Action::Allow,
        }
    }

    /// What the path is once a person approves its use: for [`Action::Ask`],
    /// `allow` or `read-only`; otherwise the action itself.
    pub fn granted(&self) -> Action {
        if self.action == Action::Ask {
            self.approved
        } else {
            self.action
        }
    }

    /// Where the rule that decided `path` (this decision's path) applies: the
    /// ancestor it inherits its action from, else `path` itself. A rule naming
    /// exactly that place (and nothing else) changes this decision; one naming
    /// `path` beneath an ancestor's action cannot, since a path is never less
    /// restrictive than its parent.
    pub fn decided_at<'a>(&'a self, path: &'a [u8]) -> &'a [u8] {
        match &self.reason {
            Reason::Ancestor { path: at, .. } => at,
            _ => path,
        }
    }

    /// This decision as a person's approval leaves it (see [`Decision::granted`]).
    pub fn once_approved(&self) -> Decision {
        Decision {
            action: self.granted(),
            ..self.clone()
        }
    }

    /// The stricter of two decisions for one path (the workspace's and the home
    /// directory's around it): the more restrictive action wins; when one asks, the
    /// other still bounds what an approval grants.
    pub fn stricter(self, other: Decision) -> Decision {
        let (mut hi, lo) = if other.action > self.action {
            (other, self)
        } else {
            (self, other)
        };
        if hi.action == Action::Ask {
            hi.approved = hi.approved.max(lo.granted());
        }
        hi
    }

    /// At least read-only, by `guard` (a decision that refuses changes for its own
    /// reason): a denied path stays denied, and one that asks stays asking but is
    /// read-only once approved.
    fn at_least_read_only(mut self, guard: fn() -> Decision) -> Decision {
        match self.action {
            Action::Allow => guard(),
            Action::Ask => {
                self.approved = self.approved.max(Action::ReadOnly);
                self
            }
            _ => self,
        }
    }

    /// The decision for changing this path's own attributes (mode, owner, times,
    /// extended attributes). The workspace root and a directory admitted only as the
    /// way to what an allow-list allows are passed through, not granted: their own
    /// attributes follow the policy's `default` (names made in them are decided as
    /// their own paths).
    pub fn for_own_attributes(&self, default: Action) -> Decision {
        match self.reason {
            Reason::Root | Reason::Admitted(_) if default > self.action => Decision {
                action: default,
                ..self.clone()
            },
            _ => self.clone(),
        }
    }

    /// This decision made at least read-only because the path is the mount's own
    /// policy file.
    pub fn guard_policy_file(self) -> Decision {
        self.at_least_read_only(Decision::policy_file)
    }

    /// The decision refusing a change to the policy file the mount reads, whatever
    /// name reaches it (see [`Reason::PolicyFile`]).
    pub fn policy_file() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::PolicyFile,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// The decision for a directory whose place is unknown (see [`Reason::Lost`]).
    pub fn lost() -> Decision {
        Decision {
            action: Action::Deny,
            reason: Reason::Lost,
            ruled: true,
            approved: Action::Deny,
        }
    }

    /// The decision refusing to rename or remove a directory that holds the mount's
    /// policy file (see [`Reason::HoldsPolicyFile`]).
    pub fn holds_policy_file() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::HoldsPolicyFile,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// This decision made at least read-only because git runs or obeys the file
    /// (see [`Reason::GitControl`]); a denied path stays denied.
    pub fn guard_git_control(self) -> Decision {
        self.at_least_read_only(Decision::git_control)
    }

    /// The decision refusing a change to what git runs or obeys, or to the `.git`
    /// directory that holds it (see [`Reason::GitControl`]).
    pub fn git_control() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::GitControl,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// This decision made at least read-only because the path is veilfs's own
    /// configuration (see [`Reason::VeilfsConfig`]); a denied path stays denied.
    pub fn guard_veilfs_config(self) -> Decision {
        self.at_least_read_only(Decision::veilfs_config)
    }

    /// This decision made read-only at least, for what the session's agent runs
    /// later (`why`: the profile's rule that says so).
    pub fn guard_agent_file(self, why: &str) -> Decision {
        self.read_only_for(Reason::AgentFile(Arc::from(why)))
    }

    /// This decision made read-only at least, for a reason veilfs keeps whatever
    /// the policy says (`why`, said as it is).
    pub fn guard_kept(self, why: &str) -> Decision {
        self.read_only_for(Reason::Kept(Arc::from(why)))
    }

    fn read_only_for(mut self, reason: Reason) -> Decision {
        match self.action {
            Action::Allow => Decision {
                action: Action::ReadOnly,
                reason,
                ruled: true,
                approved: Action::ReadOnly,
            },
            Action::Ask => {
                self.approved = self.approved.max(Action::ReadOnly);
                self
            }
            _ => self,
        }
    }

    /// The decision refusing to replace a directory on the way to a named path
    /// (see [`Reason::Way`]).
    pub fn way() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::Way,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// The decision refusing a change to veilfs's configuration directory, or to a
    /// directory that holds it (see [`Reason::VeilfsConfig`]).
    pub fn veilfs_config() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::VeilfsConfig,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// The decision refusing a change to the run's audit log, or the rename or
    /// removal of a directory holding it (see [`Reason::AuditLog`]).
    pub fn audit_log() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::AuditLog,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// This decision made at least read-only because the path is the run's audit
    /// log (see [`Reason::AuditLog`]); a denied path stays denied.
    pub fn guard_audit_log(self) -> Decision {
        self.at_least_read_only(Decision::audit_log)
    }

    /// This decision made at least read-only because the path's name is
    /// [`super::POLICY_FILE_NAME`].
    pub(super) fn guard_policy_name(self) -> Decision {
        self.at_least_read_only(|| Decision {
            action: Action::ReadOnly,
            reason: Reason::PolicyName,
            ruled: true,
            approved: Action::ReadOnly,
        })
    }

    /// The decision refusing a change to a file the policy imports (by identity),
    /// or the rename or removal of a directory holding one (see
    /// [`Reason::ImportedFile`]).
    pub fn imported_file() -> Decision {
        Decision {
            action: Action::ReadOnly,
            reason: Reason::ImportedFile,
            ruled: true,
            approved: Action::ReadOnly,
        }
    }

    /// This decision made at least read-only because the path's name is one the
    /// policy imports rules from (see [`Reason::ImportedFile`]).
    pub(super) fn guard_imported_name(self) -> Decision {
        self.at_least_read_only(|| Decision {
            action: Action::ReadOnly,
            reason: Reason::ImportedFile,
            ruled: true,
            approved: Action::ReadOnly,
        })
    }

    /// The reason as one line of text, e.g. ``ancestor `secrets` denied by rule 1
    /// "secrets/" (policy.toml:4:12)``.
    pub fn why(&self) -> String {
        let mut s = String::new();
        write_reason(&mut s, self.action, &self.reason);
        if self.action == Action::Ask && self.approved != Action::Allow {
            s.push_str("; read-only once approved");
        }
        s
    }

    /// The decision as a JSON object (for `explain --json` and the audit log).
    pub fn to_json(&self, path: &[u8]) -> serde_json::Value {
        let mut obj = serde_json::json!({
            "path": String::from_utf8_lossy(path),
            "action": self.action.as_str(),
            "why": self.why(),
        });
        let (kind, pattern, ancestor) = match &self.reason {
            Reason::Root => ("root", None, None),
            Reason::Default => ("default", None, None),
            Reason::Rule(p) => ("rule", Some(p), None),
            Reason::Admitted(p) => ("admitted", Some(p), None),
            Reason::PolicyFile => ("policy-file", None, None),
            Reason::PolicyName => ("policy-name", None, None),
            Reason::ImportedFile => ("imported-file", None, None),
            Reason::HoldsPolicyFile => ("holds-policy-file", None, None),
            Reason::GitControl => ("git-control", None, None),
            Reason::VeilfsConfig => ("veilfs-config", None, None),
            Reason::Way => ("way", None, None),
            Reason::AuditLog => ("audit-log", None, None),
            Reason::Lost => ("lost", None, None),
            Reason::Network(_) => ("network", None, None),
            Reason::AgentFile(_) => ("agent-file", None, None),
            Reason::Kept(_) => ("kept", None, None),
            Reason::Ancestor { path, cause } => {
                let p = match &**cause {
                    Reason::Rule(p) | Reason::Admitted(p) => Some(p),
                    _ => None,
                };
                ("ancestor", p, Some(path))
            }
        };
        obj["reason"] = kind.into();
        if let Some(p) = pattern {
            obj["rule"] = p.rule.into();
            obj["pattern"] = p.text.clone().into();
            obj["location"] = p.location().into();
            if p.backup {
                obj["backup"] = true.into();
            }
            if let Some(why) = &p.why {
                obj["rule_why"] = why.to_string().into();
            }
        }
        if let Some(a) = ancestor {
            obj["ancestor"] = String::from_utf8_lossy(a).into();
        }
        if self.action == Action::Ask {
            obj["once_approved"] = self.granted().as_str().into();
        }
        obj
    }
}

fn write_reason(s: &mut String, action: Action, reason: &Reason) {
    use std::fmt::Write;
    match reason {
        Reason::Root => s.push_str("the workspace root is always visible"),
        Reason::Default => {
            let _ = write!(s, "no rule matches: the policy default is \"{action}\"");
        }
        Reason::Rule(p) => {
            let _ = write!(s, "{p}");
            if let Some(why) = &p.why {
                let _ = write!(s, ": {why}");
            }
        }
        Reason::Admitted(p) => {
            let _ = write!(s, "admitted as a directory leading to {p}");
        }
        Reason::PolicyFile => {
            s.push_str("the mount's own policy file is read-only through the mount")
        }
        Reason::PolicyName => s.push_str(
            "the policy file's name, read-only at every depth: \
             veilfs never lets a policy be planted",
        ),
        Reason::ImportedFile => s.push_str(
            "a file the policy imports rules from: read-only, so the command cannot \
             rewrite its own rules",
        ),
        Reason::Network(why) => s.push_str(why),
        Reason::Kept(why) => s.push_str(why),
        Reason::AgentFile(why) => {
            let _ = write!(s, "the session's agent runs it later as you: {why}");
        }
        Reason::Lost => s.push_str(
            "the directory was moved or removed outside the mount to a place veilfs has \
             not seen: refused, with everything beneath it, until it is looked up again \
             where it is now",
        ),
        Reason::HoldsPolicyFile => s.push_str(
            "the directory holds the mount's policy file: it is not renamed or removed \
             through the mount",
        ),
        Reason::GitControl => s.push_str(
            "git runs or obeys this (a git directory is read-only under `veilfs run` but \
             for what everyday git writes: objects, refs, logs, the index, HEAD and \
             merge state; its config, hooks and a rebase's todo list are not), so the \
             command cannot plant code your own git runs later",
        ),
        Reason::Way => s.push_str(
            "on the way to a path the policy names: only a directory is made here, and \
             it is not renamed, so no symbolic link in its place leads past the policy",
        ),
        Reason::AuditLog => s.push_str(
            "a log of this run (its audit log or its notices): read-only, and not moved, \
             so the command cannot rewrite what it is seen to have done",
        ),
        Reason::VeilfsConfig => s.push_str(
            "veilfs's own configuration (the home policy): read-only under `veilfs run`, \
             so the command cannot choose the policy of a later run",
        ),
        Reason::Ancestor { path, cause } => {
            let _ = write!(
                s,
                "ancestor `{}` {} by ",
                String::from_utf8_lossy(path),
                action.past_tense()
            );
            match &**cause {
                Reason::Default => s.push_str("the policy default"),
                Reason::Admitted(p) => {
                    let _ = write!(s, "admission as a directory leading to {p}");
                }
                other => write_reason(s, action, other),
            }
        }
    }
}
