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
//! * a file a deny rule kept from being made (a checkout of `certs/server.pem`):
//!   the rule, and the `allow` rule that lets the command make that one path, in
//!   the policy file of the mount that refused it (the workspace's, or `veilfs init`
//!   first where there is none; the home policy for the home directory), and in the
//!   home policy too for a workspace inside the home directory, whose policy holds
//!   there as well;
//! * a file a line of an imported ignore file kept from being made: that line.
//!
//! The names are the command's choice, so a hint is only ever an offer to let the
//! command make the one file it names: never for a directory (allowing a denied
//! directory opens everything in it), never for a refusal inside a denied directory,
//! and never for a name that exists once the command has ended (a `touch .env`
//! is an open of the secret, not a file to make). Where the name cannot be written
//! as a pattern exactly as shown (control or invisible characters), no rule is
//! offered.

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::policy::{Action, Decision, Pattern, Reason};

/// How many refused paths the summary names.
const SUMMARY_NAMES: usize = 3;

/// How many refusals that could be answered with a rule are kept, of which the
/// summary answers the first whose name is still not there.
const CANDIDATES: usize = 8;

/// The notices of one `veilfs run` (both its mounts): the file they are written
/// to, and what the summary says.
#[derive(Debug)]
pub struct SessionNotices {
    file: Mutex<std::fs::File>,
    pub path: PathBuf,
    places: Places,
    tally: Mutex<Tally>,
}

/// The roots and policies of a `veilfs run`, for the rule a hint offers.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// The workspace.
    pub workspace: PathBuf,
    /// The workspace's policy file (`None`: the built-in default).
    pub workspace_policy: Option<PathBuf>,
    /// The home directory, when it is mounted beside the workspace.
    pub home: Option<PathBuf>,
    /// The home policy file (`None`: the built-in default home policy).
    pub home_policy: Option<PathBuf>,
    /// Where a home policy file would be read from, when there is none
    /// (`~/.config/veilfs/home.toml`, or in `$XDG_CONFIG_HOME`).
    pub home_policy_place: Option<PathBuf>,
}

impl Places {
    fn root(&self, root: Root) -> Option<&Path> {
        match root {
            Root::Workspace => Some(&self.workspace),
            Root::Home => self.home.as_deref(),
        }
    }

    /// The workspace's place in the home directory, when it lies inside it (the
    /// home policy holds there too).
    fn workspace_in_home(&self) -> Option<&Path> {
        self.workspace.strip_prefix(self.home.as_ref()?).ok()
    }
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
    /// A repository refused inside the workspace's own: what to do.
    nested: Option<String>,
    /// Files refused by a rule, each with the hint that answers it, to be said
    /// only if the file is not there when the command has ended.
    candidates: Vec<(Root, Vec<u8>, String)>,
    /// Lines written of other refusals (the network proxy's), summed up by
    /// whoever wrote them.
    others: usize,
}

impl SessionNotices {
    /// Notices written to `path` (made, mode 0600, never through a link; an
    /// existing file is appended to), for the session of `places`.
    pub fn create(path: &Path, places: Places) -> io::Result<SessionNotices> {
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
            places,
            tally: Mutex::new(Tally::default()),
        })
    }

    /// Writes `line`, the notice of `op` on `path` of the mount `root` refused by
    /// `decision` (`shown`: the path as the notice shows it; empty for the line
    /// saying that no more are said), and counts it for the summary.
    pub(super) fn write(
        &self,
        shown: &str,
        line: &str,
        op: &str,
        (root, path): (Root, &[u8]),
        decision: &Decision,
    ) {
        use std::io::Write;
        let mut file = self.file.lock();
        if !shown.is_empty() {
            let mut t = self.tally.lock();
            // A file named with `--notices` may hold earlier sessions' lines (or
            // lines written where the command could write before): this one's
            // begin with a line of their own.
            if t.refused == 0 {
                let _ = writeln!(
                    file,
                    "# veilfs run (pid {}) of {}: its refusals, each with its rule",
                    std::process::id(),
                    crate::escape::printable(self.places.workspace.as_os_str().as_encoded_bytes())
                );
            }
            t.refused += 1;
            if routine(&decision.reason) {
                t.routine += 1;
            } else if t.named.len() < SUMMARY_NAMES {
                t.named.push(shown.to_string());
            }
            if super::makes_a_name(op) {
                if nested_repository(op, path, decision) {
                    t.nested.get_or_insert_with(|| nested_hint(shown));
                } else if t.candidates.len() < CANDIDATES
                    && let Some(text) = self.rule_hint(op, (root, path), shown, decision)
                {
                    t.candidates.push((root, path.to_vec(), text));
                }
            }
        }
        let _ = writeln!(file, "{line}");
    }

    /// Writes `line`, the notice of a refusal that is not a name's (a connection
    /// the network proxy refused), which its writer sums up itself.
    pub fn write_other(&self, line: &str) {
        use std::io::Write;
        let mut file = self.file.lock();
        self.tally.lock().others += 1;
        let _ = writeln!(file, "{line}");
    }

    /// Whether any notice was written (the file is then kept).
    pub fn holds_notices(&self) -> bool {
        let t = self.tally.lock();
        t.refused > 0 || t.others > 0
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
        if let Some(h) = &t.nested {
            out.push('\n');
            out.push_str(h);
        }
        let answered = t
            .candidates
            .iter()
            .find(|(root, path, _)| self.still_absent(*root, path));
        if let Some((_, _, h)) = answered {
            out.push('\n');
            out.push_str(h);
        }
        Some(out)
    }

    /// Whether nothing is at `path` of the mount `root`, now that the command has
    /// ended (and the mounts are gone: the real tree is looked at).
    fn still_absent(&self, root: Root, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Some(r) = self.places.root(root) else {
            return false;
        };
        let at = r.join(std::ffi::OsStr::from_bytes(path));
        matches!(std::fs::symlink_metadata(at), Err(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// What to do about a file a deny rule kept the command from making: the rule
    /// to add, or the ignore file's line. `None` for a directory, a refusal inside
    /// a denied directory, or a name that cannot be written as it is shown.
    fn rule_hint(
        &self,
        op: &str,
        (root, path): (Root, &[u8]),
        shown: &str,
        decision: &Decision,
    ) -> Option<String> {
        let Reason::Rule(rule) = &decision.reason else {
            return None;
        };
        if decision.action != Action::Deny || rule.dir_only || op == "mkdir" {
            return None;
        }
        let pattern = crate::policy::exact_entry(path, false)?;
        if rule.is_imported() {
            return Some(format!(
                "veilfs: {shown}: {op} refused by line {:?} of {}; take it out of that \
                 ignore file (a `!` line re-includes it)",
                rule.text, rule.at
            ));
        }
        let mut text = format!(
            "veilfs: {shown}: {op} refused by {}; to let the command make it,",
            rule_name(rule)
        );
        match root {
            Root::Home => self.home_rule(&mut text, Path::new(""), path),
            Root::Workspace => {
                text.push_str(&match &self.places.workspace_policy {
                    Some(f) => format!(" add to {}:{}", f.display(), block(&pattern, None)),
                    None => format!(
                        " run `veilfs init` in the workspace, then add to the .veilfs.toml it \
                         writes:{}",
                        block(&pattern, None)
                    ),
                });
                if let Some(prefix) = self.places.workspace_in_home() {
                    text.push_str("\nveilfs:   and, as the workspace lies in your home directory,");
                    self.home_rule(&mut text, prefix, path);
                }
            }
        }
        text.push_str("\nveilfs:   (outside `veilfs run`: inside, policy files are read-only)");
        Some(text)
    }

    /// Adds to `text` where the home policy takes the rule allowing `path` (under
    /// `prefix` in the home directory), and the rule.
    fn home_rule(&self, text: &mut String, prefix: &Path, path: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        let in_home = prefix.join(std::ffi::OsStr::from_bytes(path));
        let Some(pattern) = crate::policy::exact_entry(in_home.as_os_str().as_bytes(), false)
        else {
            return;
        };
        text.push_str(
            &match (&self.places.home_policy, &self.places.home_policy_place) {
                (Some(f), _) => format!(" add to {}:{}", f.display(), block(&pattern, None)),
                (None, place) => format!(
                    " put in {}:{}",
                    place
                        .as_ref()
                        .map_or("~/.config/veilfs/home.toml".into(), |p| p
                            .display()
                            .to_string()),
                    block(&pattern, Some("home-default"))
                ),
            },
        );
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

/// Whether the refusal of `op` on `path` is git's guard refusing a repository
/// made inside the workspace's own (a `git clone` there).
fn nested_repository(op: &str, path: &[u8], decision: &Decision) -> bool {
    matches!(decision.reason, Reason::GitControl) && path.ends_with(b".git") && op != "rename"
}

fn nested_hint(shown: &str) -> String {
    format!(
        "veilfs: {shown}: no repository is made inside the workspace's own under `veilfs \
         run` (git would later run its hooks and config as you): clone it outside the \
         workspace, into your home directory (`~/src/NAME`: seen through the home policy \
         under `veilfs run` too)"
    )
}

/// `rule N "PATTERN" (FILE:LINE)`.
fn rule_name(p: &Pattern) -> String {
    format!("rule {} {:?} ({}:{})", p.rule, p.text, p.at.file, p.at.line)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn decide(policy: &str, path: &str) -> Decision {
        let p = Policy::parse("p.toml", policy).unwrap();
        p.decide(path.as_bytes(), false)
    }

    /// Places whose workspace (and home) are new empty directories.
    struct Session {
        _dir: tempfile::TempDir,
        places: Places,
    }

    fn session(policy_file: bool, home_policy: bool, ws_in_home: bool) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let workspace = match ws_in_home {
            true => home.join("src/project"),
            false => dir.path().join("ws"),
        };
        std::fs::create_dir_all(&workspace).unwrap();
        let places = Places {
            workspace_policy: policy_file.then(|| workspace.join(".veilfs.toml")),
            workspace,
            home_policy: home_policy.then(|| PathBuf::from("/h/home.toml")),
            home: Some(home),
            home_policy_place: None,
        };
        Session { _dir: dir, places }
    }

    /// The summary after `refusals` (path, op, root, decision).
    fn summary(s: &Session, refusals: &[(&str, &str, Root, Decision)]) -> String {
        let n = SessionNotices::create(&s._dir.path().join("n.log"), s.places.clone()).unwrap();
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
            &session(false, false, false),
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
        let ses = session(true, false, false);
        let name = "c2/certs/s[1]*{a,b}!.pem";
        let s = summary(
            &ses,
            &[
                // A lookup says nothing of what to do.
                ("x.pem", "lookup", Root::Workspace, decide(PEM, "x.pem")),
                (name, "create", Root::Workspace, decide(PEM, name)),
            ],
        );
        assert!(
            s.contains("create refused by rule 1 \"*.pem\" (p.toml:3)"),
            "{s}"
        );
        let file = ses.places.workspace.join(".veilfs.toml");
        assert!(
            s.contains(&format!("add to {}:\n    [[rules]]", file.display())),
            "{s}"
        );
        let pattern = "/c2/certs/s[[]1[]][*][{]a,b[}]!.pem";
        assert!(s.contains(&format!("paths = [\"{pattern}\"]")), "{s}");
        assert_eq!(s.matches("refused by rule").count(), 1, "{s}");
        // The rule given lets exactly that path be made.
        let fixed = format!("{PEM}\n[[rules]]\naction = \"allow\"\npaths = [\"{pattern}\"]\n");
        assert_eq!(decide(&fixed, name).action, Action::Allow);
        for near in [
            "c2/certs/s1*{a,b}!.pem",
            "c2/certs/s[1]x{a,b}!.pem",
            "c2/certs/s[1]*a!.pem",
        ] {
            assert_eq!(decide(&fixed, near).action, Action::Deny, "{near}");
        }
    }

    #[test]
    fn no_rule_is_offered_for_a_name_that_exists_or_a_directory() {
        let ses = session(true, false, false);
        std::fs::write(ses.places.workspace.join("there.pem"), "secret").unwrap();
        let secrets = "[[rules]]\naction = \"deny\"\npaths = [\"secrets/\", \"*.pem\"]\n";
        let p = Policy::parse("p.toml", secrets).unwrap();
        let s = summary(
            &ses,
            &[
                // `touch there.pem`: an open of the secret.
                (
                    "there.pem",
                    "create",
                    Root::Workspace,
                    decide(PEM, "there.pem"),
                ),
                // `touch secrets/new`: the directory is what is refused.
                (
                    "secrets",
                    "create",
                    Root::Workspace,
                    p.decide(b"secrets", true),
                ),
                (
                    "a/secrets/x",
                    "create",
                    Root::Workspace,
                    p.decide(b"a/secrets/x", false),
                ),
                ("new", "mkdir", Root::Workspace, p.decide(b"new.pem", true)),
            ],
        );
        assert!(!s.contains("allow"), "{s}");
        assert_eq!(s.lines().count(), 1, "{s}");
    }

    #[test]
    fn no_rule_is_offered_for_a_name_shown_escaped() {
        let ses = session(true, false, false);
        let name = "b\u{202e}mep.x.pem";
        let s = summary(
            &ses,
            &[(name, "create", Root::Workspace, decide(PEM, name))],
        );
        assert_eq!(s.lines().count(), 1, "{s}");
    }

    #[test]
    fn without_a_policy_file_init_comes_first() {
        let d = Policy::builtin().decide(b"certs/server.pem", false);
        let s = summary(
            &session(false, false, false),
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
        let s = summary(
            &session(false, false, true),
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
        let s = summary(
            &session(true, true, false),
            &[(".env", "create", Root::Home, d)],
        );
        assert!(s.contains("add to /h/home.toml:\n    [[rules]]"), "{s}");
        assert!(!s.contains(".veilfs.toml"), "{s}");
    }
}
