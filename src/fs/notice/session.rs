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
//!   the `allow` rule that lets the command make that path, in the policy file the
//!   rule came from (or, for a built-in rule, a new one that extends the built-in).

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::policy::{Action, Decision, Pattern, Reason};

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
    tally: Mutex<Tally>,
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
    pub fn create(path: &Path) -> io::Result<SessionNotices> {
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
        path: &[u8],
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
                && let Some((kind, text)) = hint(op, path, shown, decision)
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

/// What to do about the refusal of `op` on `path` (shown as `shown`), if the
/// summary has a word for it: only for an attempt to make a name.
fn hint(op: &str, path: &[u8], shown: &str, decision: &Decision) -> Option<(Hint, String)> {
    if !super::makes_a_name(op) {
        return None;
    }
    match &decision.reason {
        Reason::GitControl if path.ends_with(b".git") && op != "rename" => Some((
            Hint::NestedRepository,
            format!(
                "veilfs: {shown}: no repository is made inside the workspace's own under \
                 `veilfs run` (git would later run its hooks and config as you): clone it \
                 outside the workspace, in a shell outside `veilfs run`"
            ),
        )),
        Reason::Rule(p) if p.action == Action::Deny => {
            allow_hint(op, shown, path, p).map(|h| (Hint::AllowRule, h))
        }
        Reason::Ancestor { path: dir, cause } if decision.action == Action::Deny => {
            match &**cause {
                Reason::Rule(p) if p.action == Action::Deny => {
                    let shown_dir = crate::printable::printable(dir);
                    allow_hint(op, &format!("{shown_dir}/"), dir, p)
                        .map(|h| (Hint::AllowRule, format!("veilfs: {shown}: in {h}")))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// "`shown`: `op` refused by rule N "PAT" (FILE:LINE); to let the command make
/// it: …", with the rule to add. `None` for a path that cannot be written as a
/// pattern in a policy file (not UTF-8, or holding a control character).
fn allow_hint(op: &str, shown: &str, path: &[u8], p: &Pattern) -> Option<String> {
    let path = std::str::from_utf8(path).ok()?;
    if path.chars().any(char::is_control) {
        return None;
    }
    let dir = shown.ends_with('/');
    let pattern = format!("/{}{}", literal_glob(path), if dir { "/" } else { "" });
    let quoted = toml::Value::String(pattern).to_string();
    let file: &str = &p.at.file;
    let (where_, extends) = match file {
        "<built-in>" => (
            "a .veilfs.toml at the workspace's root (outside `veilfs run`)".to_string(),
            "extends = \"default\"\n",
        ),
        "<built-in home>" => (
            "~/.config/veilfs/home.toml (outside `veilfs run`)".to_string(),
            "extends = \"home-default\"\n",
        ),
        f => (format!("{f} (outside `veilfs run`)"), ""),
    };
    let mut rule = String::new();
    for l in format!("{extends}[[rules]]\naction = \"allow\"\npaths = [{quoted}]").lines() {
        rule.push_str("\n    ");
        rule.push_str(l);
    }
    Some(format!(
        "{}{op} refused by rule {} {:?} ({}:{}); to let the command have it, put in \
         {where_}:{rule}",
        if dir {
            format!("{shown}: ")
        } else {
            format!("veilfs: {shown}: ")
        },
        p.rule,
        p.text,
        p.at.file,
        p.at.line
    ))
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

    fn notices() -> (SessionNotices, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "veilfs-notice-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("n.log");
        (SessionNotices::create(&path).unwrap(), dir)
    }

    #[test]
    fn routine_refusals_are_counted_not_named() {
        let (n, dir) = notices();
        let policy = "[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n\n\
                      [[rules]]\naction = \"deny\"\nroutine = true\npaths = [\".*_history\"]\n";
        let h = decide(policy, ".bash_history");
        let e = decide(policy, ".env");
        n.write(".bash_history", "l1", "lookup", b".bash_history", &h);
        n.write(".env", "l2", "lookup", b".env", &e);
        let s = n.summary().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            s.starts_with("veilfs: refused 2 names (.env; 1 routine"),
            "{s}"
        );
        assert!(!s.contains("bash_history"), "{s}");
    }

    #[test]
    fn a_refused_create_says_the_allow_rule_to_add() {
        let (n, dir) = notices();
        let policy = "[[rules]]\naction = \"deny\"\npaths = [\"*.pem\"]\n";
        let d = decide(policy, "c2/certs/s[1].pem");
        n.write("c2/certs/s[1].pem", "l", "create", b"c2/certs/s[1].pem", &d);
        // A lookup says nothing of what to do.
        let e = decide(policy, "x.pem");
        n.write("x.pem", "l", "lookup", b"x.pem", &e);
        let s = n.summary().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            s.contains("create refused by rule 1 \"*.pem\" (p.toml:3)"),
            "{s}"
        );
        assert!(s.contains("put in p.toml (outside `veilfs run`)"), "{s}");
        assert!(s.contains("paths = [\"/c2/certs/s[[]1[]].pem\"]"), "{s}");
        assert_eq!(s.matches("refused by rule").count(), 1, "{s}");
        // The rule given lets exactly that path be made.
        let fixed = format!(
            "{policy}\n[[rules]]\naction = \"allow\"\npaths = [\"/c2/certs/s[[]1[]].pem\"]\n"
        );
        assert_eq!(decide(&fixed, "c2/certs/s[1].pem").action, Action::Allow);
        assert_eq!(decide(&fixed, "c2/certs/s1.pem").action, Action::Deny);
    }

    #[test]
    fn a_built_in_rule_is_answered_with_a_policy_that_extends_it() {
        let (n, dir) = notices();
        let p = Policy::builtin();
        let d = p.decide(b"certs/server.pem", false);
        n.write("certs/server.pem", "l", "create", b"certs/server.pem", &d);
        let s = n.summary().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(s.contains("a .veilfs.toml at the workspace's root"), "{s}");
        assert!(
            s.contains("\n    extends = \"default\"\n    [[rules]]"),
            "{s}"
        );
    }

    #[test]
    fn a_denied_directory_is_the_one_to_allow() {
        let (n, dir) = notices();
        let policy = "[[rules]]\naction = \"deny\"\npaths = [\"secrets/\"]\n";
        let p = Policy::parse("p.toml", policy).unwrap();
        let d = p.decide(b"a/secrets/x", false);
        n.write("a/secrets/x", "l", "mkdir", b"a/secrets/x", &d);
        let s = n.summary().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            s.contains("veilfs: a/secrets/x: in a/secrets/: mkdir refused"),
            "{s}"
        );
        assert!(s.contains("paths = [\"/a/secrets/\"]"), "{s}");
    }
}
