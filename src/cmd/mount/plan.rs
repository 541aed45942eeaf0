//! What a `veilfs mount` is made of, decided before anything is taken: the policy
//! (loaded, its imports attached), what it hides, the audit log's place, the source
//! and the mount point (checked, canonical), and the ordered steps that mount,
//! serve and release ([`Plan`]; the steps are [`super::step::Step`]s, taken by
//! [`super::execute`]). Nothing here blocks a signal, starts a thread or mounts; a
//! refusal is a message for the person.

use std::path::{Path, PathBuf};

use super::MountArgs;
use super::error::MountCommandError;
use super::step::Step;
use crate::session::mount::{MountOptions, Sources};
use crate::workspace::load::{self, LoadedPolicy};

/// A mount, planned: what every step reads, and the steps in order.
#[derive(Debug)]
pub(super) struct Plan {
    pub settings: Settings,
    /// Some path of the policy asks a person (what `--dry-run` says; the mount
    /// itself learns it from its reloader).
    pub asks: bool,
    pub steps: Vec<Step>,
}

/// What the steps of a mount read, decided with its plan.
#[derive(Debug)]
pub(super) struct Settings {
    /// The source as given (named in errors).
    pub src: PathBuf,
    /// The mount point as given (named in errors, and the control socket's name).
    pub mnt: PathBuf,
    /// The source, canonical.
    pub src_c: PathBuf,
    /// The mount point, canonical.
    pub mnt_c: PathBuf,
    pub opts: MountOptions,
    /// Where the policy came from (a file's path absolute: the start-up line is
    /// read later, in a log, from elsewhere).
    pub source: String,
    /// What the policy hides, read before mounting, for the start-up line.
    pub hiding: String,
}

/// Plans the mount `args` asks for, or says why `mount` refuses it: every check
/// made before anything is taken (as `--dry-run` shows them).
pub(super) fn plan(args: MountArgs) -> Result<Plan, MountCommandError> {
    let MountArgs {
        policy, src, mnt, ..
    } = args;
    let mut loaded = load::load_policy(policy, src).map_err(MountCommandError::Policy)?;
    let warnings = crate::workspace::imports::attach(&mut loaded.policy, src)
        .map_err(MountCommandError::Imports)?;
    warnings.iter().for_each(|w| eprintln!("veilfs: {w}"));
    let source = match &loaded.path {
        Some(p) => absolute(p).display().to_string(),
        None => loaded.source(),
    };
    let hiding = crate::workspace::walk::startup_note(&loaded.policy, src);
    if let Some(log) = &args.opts.audit {
        let ws = src.canonicalize().unwrap_or_else(|_| src.to_path_buf());
        crate::session::audit::check_outside(log, &ws).map_err(MountCommandError::AuditInside)?;
    }
    let (src_c, mnt_c) = crate::session::mount::preflight(src, mnt)?;
    let asks = loaded.policy.asks();
    let steps = steps(args.opts, loaded);
    Ok(Plan {
        settings: Settings {
            src: src.to_path_buf(),
            mnt: mnt.to_path_buf(),
            src_c,
            mnt_c,
            opts: args.opts.clone(),
            source,
            hiding,
        },
        asks,
        steps,
    })
}

/// The steps of a mount with `opts` serving under `loaded`, in order (see
/// [`super::step`] for what stays true of it).
fn steps(opts: &MountOptions, loaded: LoadedPolicy) -> Vec<Step> {
    let mut steps = vec![Step::BlockSignals];
    if let Some(log) = &opts.audit {
        steps.push(Step::StartAudit(log.clone()));
    }
    steps.extend([
        Step::BuildFilesystem(Box::new(loaded)),
        Step::Mount,
        Step::ServeControl,
        Step::SayMounted,
        Step::Serve,
        Step::Wait,
        Step::Release,
    ]);
    steps
}

/// `p` made absolute (as given when it cannot be).
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Settings {
    /// The start-up line (`verb`: `mounted`, or `would mount`), with the note on
    /// `ask` paths when the policy `asks`; escaped (paths from the command line and
    /// the tree: never a control character raw).
    pub fn line(&self, verb: &str, asks: bool) -> String {
        let mnt = absolute(&self.mnt);
        let asks = self.opts.mode_note(asks, false, &mnt);
        let line = format!(
            "veilfs: {verb} {} at {} with policy {}{}{asks}",
            absolute(&self.src).display(),
            mnt.display(),
            self.source,
            self.hiding,
        );
        crate::escape::escape(&line)
    }

    /// Where the filesystem serves from and is mounted.
    pub fn sources(&self) -> Sources<'_> {
        Sources {
            src: &self.src,
            src_c: &self.src_c,
            mnt_c: &self.mnt_c,
        }
    }
}

impl Plan {
    /// `--dry-run`: the start-up line of the mount that would be made, then its
    /// steps, one line each; nothing was taken.
    pub fn say(&self) {
        eprintln!("{}", self.settings.line("would mount", self.asks));
        eprintln!("veilfs: the steps it would take:");
        for (n, step) in self.steps.iter().enumerate() {
            eprintln!("veilfs:   {}. {}", n + 1, step.describe(&self.settings));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn names(opts: &MountOptions) -> Vec<&'static str> {
        let loaded = LoadedPolicy {
            policy: Policy::parse("test", "default = \"allow\"\n").unwrap(),
            path: None,
        };
        steps(opts, loaded).iter().map(Step::name).collect()
    }

    #[test]
    fn signals_are_blocked_first_and_the_release_comes_last() {
        let audit = MountOptions {
            audit: Some("/var/log/veilfs.log".into()),
            ..MountOptions::default()
        };
        assert_eq!(
            names(&audit),
            [
                "block-signals",
                "start-audit",
                "build-filesystem",
                "mount",
                "serve-control",
                "say-mounted",
                "serve",
                "wait",
                "release"
            ]
        );
        assert!(!names(&MountOptions::default()).contains(&"start-audit"));
    }

    #[test]
    fn no_two_steps_have_one_name() {
        let audit = MountOptions {
            audit: Some("-".into()),
            ..MountOptions::default()
        };
        let mut n = names(&audit);
        n.sort_unstable();
        let before = n.len();
        n.dedup();
        assert_eq!(n.len(), before);
    }
}
