//! The notices of one `veilfs run`: written to a file while the command runs, and
//! summed up in a few lines once it has ended and the terminal is the person's again.
//!
//! The summary says how many names were refused and names the first few, but not
//! the routine ones (a rule with `routine = true`: shell histories, `.viminfo`,
//! which tools try every time they start), which it only counts. For a refused
//! attempt to make a name it says what to do, once per kind of refusal:
//!
//! * a `.git` that git's guard refused (a repository made inside the workspace's
//!   own, as `git clone` does): clone outside the workspace, outside `veilfs run`;
//! * a name a deny rule refused (a checkout of `certs/server.pem`): the rule, and
//!   the `allow` rule that lets the command make that path, in the policy file of
//!   the mount that refused it (the workspace's, or `veilfs init` first where there
//!   is none; the home policy's, `~/.config/veilfs/home.toml`, for the home
//!   directory), and in the home policy too for a workspace inside the home
//!   directory, whose policy holds there as well;
//! * a name an imported ignore file's line refused: that file and line.

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::policy::{Action, Decision, Reason};

/// How many refused paths the summary names.
const SUMMARY_NAMES: usize = 3;

/// How many "what to do" hints the summary gives at most.
const SUMMARY_HINTS: usize = 3;

/// The notices of one `veilfs run` (both its mounts): the file they are written
/// to, and what the summary says.
#[derive(Debug)]
pub struct SessionNotices {
    file: Mutex<std::fs::File>,
    pub path: PathBuf,
    policies: Policies,
    tally: Mutex<Tally>,
}

/// Where the policies of a `veilfs run` come from, for the rule a hint offers.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    /// The workspace's policy file (`None`: the built-in default).
    pub workspace: Option<PathBuf>,
    /// The home policy file (`None`: the built-in default home policy).
    pub home: Option<PathBuf>,
    /// Where a home policy file would be read from, when there is none
    /// (`~/.config/veilfs/home.toml`, or in `$XDG_CONFIG_HOME`).
    pub home_place: Option<PathBuf>,
    /// The workspace's place in the home directory, when it lies inside it: the
    /// home policy holds there too.
    pub workspace_in_home: Option<Vec<u8>>,
}

/// Which mount of the session a notice comes from: its paths are relative to
/// that mount's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    Workspace,
    Home,
}

/// What the summary says, gathered while the command runs.
#[derive(Debug, Default)]
struct Tally {
    /// Refused names, routine ones included.
    refused: usize,
    /// Of those, the ones a `routine` rule refused.
    routine: usize,
    /// The first few others, as shown.
    named: Vec<String>,
    /// What to do, at most one per kind (its key) and [`SUMMARY_HINTS`] in all.
    hints: Vec<(Hint, String)>,
}

/// The kind of a hint: the summary says each kind once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    /// A repository made inside the workspace's own.
    NestedRepository,
    /// A name a deny rule refused, by the rule's number and file.
    AllowRule,
}

impl SessionNotices {
    /// Notices written to `path` (made, mode 0600, never through a link; an
    /// existing file is appended to).
    pub fn create(path: &Path, policies: Policies) -> io::Result<SessionNotices> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        Ok(SessionNotices {
            file: Mutex::new(file),
            path: path.to_path_buf(),
            policies,
            tally: Mutex::new(Tally::default()),
        })
    }

    /// Writes `line`, the notice of `op` on `path` refused by `decision` (`shown`:
    /// the path as the notice shows it; empty for the line saying that no more are
    /// said), and counts it for the summary.
    pub(super) fn write(
        &self,
        shown: &str,
        line: &str,
        op: &str,
        (root, path): (Root, &[u8]),
        decision: &Decision,
    ) {
        use std::io::Write;
        if !shown.is_empty() {
            let mut t = self.tally.lock();
            t.refused += 1;
            if routine(&decision.reason) {
                t.routine += 1;
            } else if t.named.len() < SUMMARY_NAMES {
                t.named.push(shown.to_string());
            }
            if t.hints.len() < SUMMARY_HINTS
                && let Some((kind, text)) = self.hint(op, (root, path), shown, decision)
                && !t.hints.iter().any(|(k, _)| *k == kind)
            {
                t.hints.push((kind, text));
            }
        }
        let _ = writeln!(self.file.lock(), "{line}");
    }

    /// The lines `run` prints when the command has ended (`None`: nothing was
    /// refused that a notice would say).
    pub fn summary(&self) -> Option<String> {
        let t = self.tally.lock();
        if t.refused == 0 {
            return None;
        }
        let others = t.refused - t.routine;
        let mut listed = t.named.join(", ");
        if others > t.named.len() {
            listed.push_str(", …");
        }
        if t.routine > 0 {
            if !listed.is_empty() {
                listed.push_str("; ");
            }
            listed.push_str(&format!("{} routine: histories and the like", t.routine));
        }
        let mut out = format!(
            "veilfs: refused {} name{} ({listed}); each with its rule in {}",
            t.refused,
            if t.refused == 1 { "" } else { "s" },
            self.path.display()
        );
        for (_, h) in &t.hints {
            out.push('\n');
            out.push_str(h);
        }
        Some(out)
    }
}

/// Whether `reason` is a rule with `routine = true` (or an ancestor's such rule).
fn routine(reason: &Reason) -> bool {
    match reason {
        Reason::Rule(p) => p.routine,
        Reason::Ancestor { cause, .. } => routine(cause),
        _ => false,
    }
}

impl SessionNotices {
    /// What to do about the refusal of `op` on `path` (shown as `shown`) in the
    /// mount `root`, if the summary has a word for it: only for an attempt to make
    /// a name.
    fn hint(
        &self,
        op: &str,
        (root, path): (Root, &[u8]),
        shown: &str,
        decision: &Decision,
    ) -> Option<(Hint, String)> {
        if !super::makes_a_name(op) {
            return None;
        }
        let (target, rule) = match &decision.reason {
            Reason::GitControl if path.ends_with(b".git") && op != "rename" => {
                return Some((
                    Hint::NestedRepository,
                    format!(
                        "veilfs: {shown}: no repository is made inside the workspace's own \
                         under `veilfs run` (git would later run its hooks and config as \
                         you): clone it outside the workspace, in a shell outside `veilfs run`"
                    ),
                ));
            }
            Reason::Rule(p) if decision.action == Action::Deny => (path.to_vec(), p),
            // A denied directory: it is the one to allow.
            Reason::Ancestor { path: dir, cause } if decision.action == Action::Deny => {
                match &**cause {
                    Reason::Rule(p) => (dir.to_vec(), p),
                    _ => return None,
                }
            }
            _ => return None,
        };
        let dir = target.len() < path.len();
        let said = format!(
            "veilfs: {shown}: {op} refused by {}",
            match rule.is_imported() {
                true => format!("line {:?} of {}", rule.text, rule.at),
                false => format!(
                    "rule {} {:?} ({}:{})",
                    rule.rule, rule.text, rule.at.file, rule.at.line
                ),
            }
        );
        if rule.is_imported() {
            let text =
                format!("{said}; take it out of that ignore file (a `!` line re-includes it)");
            return Some((Hint::AllowRule, text));
        }
        let pattern = allow_pattern(&target, dir)?;
        let mut text = format!("{said}; to let the command have it,");
        let home_rule = |text: &mut String, prefix: &[u8]| {
            let mut in_home = prefix.to_vec();
            if !prefix.is_empty() {
                in_home.push(b'/');
            }
            in_home.extend_from_slice(&target);
            if let Some(pattern) = allow_pattern(&in_home, dir) {
                text.push_str(&match &self.policies.home {
                    Some(f) => format!(" add to {}:{}", f.display(), block(&pattern, None)),
                    None => format!(
                        " put in {}:{}",
                        self.policies
                            .home_place
                            .as_ref()
                            .map_or("~/.config/veilfs/home.toml".into(), |p| p
                                .display()
                                .to_string()),
                        block(&pattern, Some("home-default"))
                    ),
                });
            }
        };
        match root {
            Root::Home => home_rule(&mut text, b""),
            Root::Workspace => {
                text.push_str(&match &self.policies.workspace {
                    Some(f) => format!(" add to {}:{}", f.display(), block(&pattern, None)),
                    None => format!(
                        " run `veilfs init` in the workspace, then add to the .veilfs.toml it \
                         writes:{}",
                        block(&pattern, None)
                    ),
                });
                if let Some(prefix) = &self.policies.workspace_in_home {
                    text.push_str("\nveilfs:   and, as the workspace lies in your home directory,");
                    home_rule(&mut text, prefix);
                }
            }
        }
        text.push_str("\nveilfs:   (outside `veilfs run`: inside, policy files are read-only)");
        Some((Hint::AllowRule, text))
    }
}

/// The `paths` entry allowing exactly `path` (a directory: with a trailing `/`),
/// anchored at the mount's root; `None` for a path that cannot be written in a
/// policy file (not UTF-8, or holding a control character).
fn allow_pattern(path: &[u8], dir: bool) -> Option<String> {
    let path = std::str::from_utf8(path).ok()?;
    if path.chars().any(char::is_control) {
        return None;
    }
    let pattern = format!("/{}{}", literal_glob(path), if dir { "/" } else { "" });
    Some(toml::Value::String(pattern).to_string())
}

/// The rule allowing `pattern` (quoted), as lines indented under a hint; after
/// `extends = NAME` when a new file must keep the built-in rules.
fn block(pattern: &str, extends: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(e) = extends {
        text.push_str(&format!("extends = {e:?}\n"));
    }
    text.push_str(&format!(
        "[[rules]]\naction = \"allow\"\npaths = [{pattern}]"
    ));
    text.lines().map(|l| format!("\n    {l}")).collect()
}

/// `path` as a glob that matches exactly it: each character special to a glob
/// in a class of its own (`[*]`).
fn literal_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '*' | '?' | '[' | ']' | '{' | '}' | ',' | '!' | '\\' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn decide(policy: &str, path: &str) -> Decision {
        let p = Policy::parse("p.toml", policy).unwrap();
        p.decide(path.as_bytes(), false)
    }

    /// Notices with `policies`, `write` (path, op, root, decision) each, and the
    /// summary.
    fn summary(policies: Policies, refusals: &[(&str, &str, Root, Decision)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let n = SessionNotices::create(&dir.path().join("n.log"), policies).unwrap();
        for (path, op, root, d) in refusals {
            n.write(path, "line", op, (*root, path.as_bytes()), d);
        }
        n.summary().unwrap()
    }

    const PEM: &str = "[[rules]]\naction = \"deny\"\npaths = [\"*.pem\"]\n";

    #[test]
    fn routine_refusals_are_counted_not_named() {
        let policy = "[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n\n\
                      [[rules]]\naction = \"deny\"\nroutine = true\npaths = [\".*_history\"]\n";
        let s = summary(
            Policies::default(),
            &[
                (
                    ".bash_history",
                    "lookup",
                    Root::Home,
                    decide(policy, ".bash_history"),
                ),
                (".env", "lookup", Root::Workspace, decide(policy, ".env")),
            ],
        );
        assert!(
            s.starts_with("veilfs: refused 2 names (.env; 1 routine"),
            "{s}"
        );
        assert!(!s.contains("bash_history"), "{s}");
    }

    #[test]
    fn a_refused_create_says_the_allow_rule_to_add_to_the_policy_file() {
        let policies = Policies {
            workspace: Some("/p/.veilfs.toml".into()),
            ..Policies::default()
        };
        let s = summary(
            policies,
            &[
                (
                    "c2/certs/s[1].pem",
                    "create",
                    Root::Workspace,
                    decide(PEM, "c2/certs/s[1].pem"),
                ),
                // A lookup says nothing of what to do.
                ("x.pem", "lookup", Root::Workspace, decide(PEM, "x.pem")),
            ],
        );
        assert!(
            s.contains("create refused by rule 1 \"*.pem\" (p.toml:3)"),
            "{s}"
        );
        assert!(s.contains("add to /p/.veilfs.toml:\n    [[rules]]"), "{s}");
        assert!(s.contains("paths = [\"/c2/certs/s[[]1[]].pem\"]"), "{s}");
        assert_eq!(s.matches("refused by rule").count(), 1, "{s}");
        // The rule given lets exactly that path be made.
        let fixed =
            format!("{PEM}\n[[rules]]\naction = \"allow\"\npaths = [\"/c2/certs/s[[]1[]].pem\"]\n");
        assert_eq!(decide(&fixed, "c2/certs/s[1].pem").action, Action::Allow);
        assert_eq!(decide(&fixed, "c2/certs/s1.pem").action, Action::Deny);
    }

    #[test]
    fn without_a_policy_file_init_comes_first() {
        let d = Policy::builtin().decide(b"certs/server.pem", false);
        let s = summary(
            Policies::default(),
            &[("certs/server.pem", "create", Root::Workspace, d)],
        );
        assert!(
            s.contains("run `veilfs init` in the workspace, then add"),
            "{s}"
        );
        assert!(!s.contains("extends"), "{s}");
    }

    #[test]
    fn a_workspace_in_the_home_directory_needs_the_home_policy_too() {
        let d = Policy::builtin().decide(b"certs/server.pem", false);
        let policies = Policies {
            workspace_in_home: Some(b"src/project".to_vec()),
            ..Policies::default()
        };
        let s = summary(
            policies,
            &[("certs/server.pem", "create", Root::Workspace, d)],
        );
        assert!(
            s.contains(
                "as the workspace lies in your home directory, put in \
                 ~/.config/veilfs/home.toml:\n    extends = \"home-default\"\n    [[rules]]\n    \
                 action = \"allow\"\n    paths = [\"/src/project/certs/server.pem\"]"
            ),
            "{s}"
        );
    }

    #[test]
    fn a_refusal_in_the_home_mount_is_answered_in_the_home_policy() {
        let d = Policy::builtin_home().decide(b".env", false);
        let policies = Policies {
            workspace: Some("/p/.veilfs.toml".into()),
            home: Some("/h/home.toml".into()),
            ..Policies::default()
        };
        let s = summary(policies, &[(".env", "create", Root::Home, d)]);
        assert!(s.contains("add to /h/home.toml:\n    [[rules]]"), "{s}");
        assert!(!s.contains(".veilfs.toml"), "{s}");
    }

    #[test]
    fn a_denied_directory_is_the_one_to_allow() {
        let d = decide(
            "[[rules]]\naction = \"deny\"\npaths = [\"secrets/\"]\n",
            "a/secrets/x",
        );
        let policies = Policies {
            workspace: Some("/p/.veilfs.toml".into()),
            ..Policies::default()
        };
        let s = summary(policies, &[("a/secrets/x", "mkdir", Root::Workspace, d)]);
        assert!(
            s.contains("veilfs: a/secrets/x: mkdir refused by rule 1"),
            "{s}"
        );
        assert!(s.contains("paths = [\"/a/secrets/\"]"), "{s}");
    }
}
