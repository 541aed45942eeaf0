//! The guards of places that matter to the next run: veilfs's own configuration
//! directory (where the next run finds its home policy) and the directories on the
//! way to what the policy names (a directory renamed away and replaced would move
//! what a rule names out from under it).

use super::{Disk, Guard, Intent, Target, at_or_under, refusal};
use crate::fs::refusal::Refusal;
use crate::policy::Decision;

/// veilfs's configuration directory in the home mount of `veilfs run` (see
/// [`crate::policy::Reason::VeilfsConfig`]): it and everything beneath it are
/// read-only whatever the policy says; the directories that lead to it are not
/// renamed or removed, and nothing but a directory is made where one of them
/// belongs (a symbolic link made at `~/.config` would send the next run's search
/// for its home policy to a directory the command chose).
#[derive(Debug)]
pub struct VeilfsConfig {
    /// Relative to the mount's root; need not exist.
    pub dirs: Vec<Vec<u8>>,
}

impl Guard for VeilfsConfig {
    fn mark(&self, path: &[u8], _: &mut dyn FnMut() -> bool, d: Decision, _: &Disk) -> Decision {
        if self.dirs.iter().any(|c| at_or_under(path, c)) {
            d.guard_veilfs_config()
        } else {
            d
        }
    }

    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        let makes = matches!(intent, Intent::Make) && !at.is_dir();
        let leads = self.dirs.iter().any(|c| at_or_under(c, at.path));
        ((makes || intent.vacates()) && leads)
            .then(Decision::veilfs_config)
            .and_then(|d| refusal(at.path, d))
    }
}

/// The directories on the way to paths the policy names (see
/// [`crate::fs::config::FsConfig::ways`]): not renamed, replaced or made as
/// anything but a directory.
#[derive(Debug)]
pub struct Ways {
    /// Relative to the mount's root.
    pub ways: Vec<Vec<u8>>,
}

impl Guard for Ways {
    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        let concerned = match intent {
            Intent::Make => !at.is_dir(),
            Intent::MoveFrom { .. } | Intent::MoveTo => true,
            _ => false,
        };
        (concerned && self.ways.iter().any(|w| w.as_slice() == at.path))
            .then(Decision::way)
            .and_then(|d| refusal(at.path, d))
    }
}

/// What the session's agent runs later as the person (its profile's read-only
/// entries: hooks, MCP servers, plugins, ...; see [`crate::policy::agents`]):
/// read-only whatever the policy says. A guard, not rules in the policy: it only
/// ever restricts (a profile's entry never shows what the policy hides), and the
/// policy's own rules cannot loosen it (`--agent none` runs without it).
#[derive(Debug)]
pub struct AgentFiles {
    /// The profile, compiled (its allow entries are ignored here).
    pub profile: std::sync::Arc<crate::policy::Policy>,
    /// The names of the directories a held path lies in at any depth (`.claude`
    /// for `**/.claude/settings.json`): only ever made as directories, so that no
    /// link leads a project's settings to a place nothing holds.
    pub ways: Vec<Vec<u8>>,
}

impl AgentFiles {
    /// The guard of `profile`.
    pub fn new(profile: std::sync::Arc<crate::policy::Policy>) -> AgentFiles {
        let mut ways: Vec<Vec<u8>> = Vec::new();
        for p in profile.patterns() {
            if p.action != crate::policy::Action::ReadOnly {
                continue;
            }
            let glob = p.glob().trim_start_matches('/');
            let segs: Vec<&str> = glob.split('/').filter(|s| !s.is_empty()).collect();
            // `**/NAME/...` and `/NAME/...`: NAME is on the way.
            let first = match segs.as_slice() {
                ["**", name, _, ..] => Some(*name),
                [name, _, ..] if *name != "**" => Some(*name),
                _ => None,
            };
            if let Some(name) = first.filter(|n| !n.contains(['*', '?', '[', '{']))
                && !ways.iter().any(|w| w == name.as_bytes())
            {
                ways.push(name.as_bytes().to_vec());
            }
        }
        AgentFiles { profile, ways }
    }
}

impl Guard for AgentFiles {
    fn wants_kind(&self) -> bool {
        true
    }

    fn refuse(&self, at: &Target, intent: &Intent, _: &Disk) -> Option<Refusal> {
        let arrives = matches!(intent, Intent::Make | Intent::MoveTo | Intent::Carry { .. });
        let name = at.path.rsplit(|&b| b == b'/').next().unwrap_or(at.path);
        if !arrives || at.is_dir() || !self.ways.iter().any(|w| w.as_slice() == name) {
            return None;
        }
        let why = format!(
            "`{}` is where the agent finds files it runs later: only a directory is made there",
            String::from_utf8_lossy(name)
        );
        refusal(at.path, Decision::allowed().guard_agent_file(&why))
    }

    fn mark(
        &self,
        path: &[u8],
        is_dir: &mut dyn FnMut() -> bool,
        d: Decision,
        _: &Disk,
    ) -> Decision {
        let p = self.profile.decide(path, is_dir());
        if p.action == crate::policy::Action::ReadOnly {
            d.guard_agent_file(&p.why())
        } else {
            d
        }
    }
}

/// The logs of `veilfs run --learn` (names ending in `.learn.log`), which `veilfs
/// init --from-audit` turns into a policy: read-only wherever they lie, so that no
/// session plants or extends one, whatever its policy says.
#[derive(Debug)]
pub struct LearnLogs;

/// What names a learning log.
pub const LEARN_LOG: &[u8] = b".learn.log";

impl Guard for LearnLogs {
    fn refuse(&self, _: &Target, _: &Intent, _: &Disk) -> Option<Refusal> {
        None
    }

    fn mark(&self, path: &[u8], _: &mut dyn FnMut() -> bool, d: Decision, _: &Disk) -> Decision {
        let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
        if name.len() > LEARN_LOG.len() && name.ends_with(LEARN_LOG) {
            d.guard_kept(
                "a learning session's log (`veilfs init --from-audit` writes a policy from it): \
                 no session plants or extends one",
            )
        } else {
            d
        }
    }
}
