//! Lasting answers of `veilfs prompt`: `a` always allow, `x` always deny. The
//! question is answered as `p`/`d` or `n` would answer it, and a rule saying the
//! same is appended to the policy file of the mount that asked (the file the
//! session says it loaded, in the question's `policy_file`), by the person running
//! the prompt, outside any confinement. The session reloads the file within about
//! a second (see [`crate::fs::reload`]), and the next session starts with the rule.
//!
//! What is appended: a comment saying when (UTC), which answer and for which
//! process (its `comm`, escaped, pid and uid as the question says), and one rule:
//!
//! ```toml
//! # veilfs prompt, 2026-12-03T10:11:12.000042Z: always allow, asked by python3 (pid 4242, uid 1000)
//! [[rules]]
//! action = "allow"
//! paths = ["/migrations/"]
//! ```
//!
//! What stays true:
//! * **The rule names exactly what the prompt showed.** One place, written as a
//!   literal ([`crate::policy::exact_entry`]: each glob metacharacter in a class of
//!   its own, a directory with a trailing `/`): for `x` the path asked about; for
//!   `a` the place the asking rule applies to ([`crate::policy::Decision::decided_at`]):
//!   the path itself, or the directory it inherits its question from, named on the
//!   prompt's line (`a always allow migrations/ and what is in it`), since a rule
//!   for a path beneath an asking directory would not lift the question. A name
//!   shown escaped (a control or invisible character, not UTF-8) gets no rule.
//! * **No more access than approved.** An `a` rule is `allow` only for a question
//!   to write a path that is writable once approved; otherwise it is `read-only`
//!   (an approval to read never lets the command write, and a path beneath a
//!   read-only rule stays read-only), and the prompt's line says `allow reading`.
//! * **Only a rule that does what it says.** Before anything is written, the file
//!   with the rule must parse; for `a`, the file's own rules must ask about the path
//!   and, with the rule, no longer ask. Otherwise nothing is written and the prompt
//!   says why (the answer stands for the session alone).
//! * **Only that file, only as its owner.** Opened by the path the session gave
//!   without following a symbolic link anywhere on it, a regular file owned by the
//!   user running the prompt; the text is appended in one `write` to a descriptor
//!   opened `O_APPEND`, so an edit made meanwhile is not overwritten. The file is
//!   read again afterwards: said when it no longer parses, or was replaced at its
//!   path meanwhile.
//! * **Never by the confined command.** The command cannot reach the prompt (it
//!   answers only through the control socket, refused to it), and the policy file
//!   is read-only to it (through the mount, or bind-mounted read-only).
//! * A question under the root `net` (a destination of `veilfs run --net`) gets no
//!   rule here: its rules are the `[network]` table's. Neither does a mount on a
//!   built-in policy (no file): the prompt says how to make one.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::policy::{Action, Policy};

/// A lasting answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lasting {
    /// `a`: always allow the place the asking rule applies to.
    Allow,
    /// `x`: always deny the path asked about.
    Deny,
}

/// What a question says that a lasting answer needs (from its JSON line).
#[derive(Clone, Debug, Default)]
pub struct Asked {
    pub root: String,
    /// Relative to the mount, as the question says it (a name that is not UTF-8
    /// holds U+FFFD there).
    pub path: String,
    pub is_dir: bool,
    /// Where the rule that asks applies: `path`, or an ancestor directory.
    pub decided_at: String,
    /// The access asked for: `read` or `write`.
    pub access: String,
    /// What an approval grants: `allow` or `read-only`.
    pub grants: String,
    pub policy_file: Option<PathBuf>,
    pub comm: String,
    pub pid: u64,
    pub uid: u64,
}

impl Asked {
    /// The fields of a question line.
    pub fn of(q: &serde_json::Value) -> Asked {
        let s = |k: &str| q[k].as_str().unwrap_or("").to_string();
        let path = s("path");
        let decided_at = q["decided_at"]
            .as_str()
            .map_or_else(|| path.clone(), str::to_string);
        Asked {
            root: s("root"),
            is_dir: q["is_dir"].as_bool().unwrap_or(false),
            decided_at,
            access: s("access"),
            grants: s("grants"),
            policy_file: q["policy_file"].as_str().map(PathBuf::from),
            comm: s("comm"),
            pid: q["pid"].as_u64().unwrap_or(0),
            uid: q["uid"].as_u64().unwrap_or(0),
            path,
        }
    }

    /// Whether `a` names a directory: the asking rule's is an ancestor, or the
    /// path asked about is a directory.
    fn allows_a_directory(&self) -> bool {
        self.decided_at != self.path || self.is_dir
    }

    /// The action an `a` rule takes: never more than the approval gives, which
    /// is for the access asked (reading does not let the command write) and never
    /// beyond what the path is once approved.
    fn allow_action(&self) -> Action {
        if self.access == "write" && self.grants == "allow" {
            Action::Allow
        } else {
            Action::ReadOnly
        }
    }
}

impl Lasting {
    /// The lasting answer of key `k` (either case).
    pub fn of_key(k: u8) -> Option<Lasting> {
        match k.to_ascii_lowercase() {
            b'a' => Some(Lasting::Allow),
            b'x' => Some(Lasting::Deny),
            _ => None,
        }
    }

    /// The answer sent to the session now: what the rule will say, for the session.
    pub fn answer(self, q: &Asked) -> &'static str {
        match self {
            Lasting::Allow if q.allows_a_directory() => "allow-dir",
            Lasting::Allow => "allow-path",
            Lasting::Deny => "deny",
        }
    }

    /// The key and what it does, for the prompt's line of lasting answers.
    pub fn option(self, q: &Asked) -> String {
        let reading = if q.allow_action() == Action::ReadOnly {
            "reading "
        } else {
            ""
        };
        match self {
            Lasting::Allow if q.allows_a_directory() => format!(
                "a always allow {reading}{}/ and what is in it",
                crate::escape::escape(&q.decided_at)
            ),
            Lasting::Allow => format!("a always allow {reading}this path"),
            Lasting::Deny => "x always deny this path".to_string(),
        }
    }

    /// What the answer sent is when no rule is written.
    pub fn only_now(self) -> &'static str {
        match self {
            Lasting::Allow => "allowed for the session only",
            Lasting::Deny => "denied this time only",
        }
    }
}

/// The rule a lasting answer writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    /// The `paths` entry, a TOML string naming exactly one place.
    pub entry: String,
}

/// Why no rule is written (the question is answered all the same).
#[derive(Debug, thiserror::Error)]
pub enum NoRule {
    #[error(
        "a network destination's rule belongs in the [network] table of the policy \
         file; add it there yourself"
    )]
    Network,
    #[error(
        "the home directory runs on the built-in home policy, so there is no file for \
         the rule: write ~/.config/veilfs/home.toml starting with `extends = \
         \"home-default\"` (the next session reads it)"
    )]
    NoHomeFile,
    #[error(
        "this mount runs on the built-in policy, so there is no file for the rule: \
         `veilfs init` in the workspace writes one (the next session reads it)"
    )]
    NoFile,
    #[error("{0} cannot be written as a rule exactly as it is shown")]
    NotExact(String),
    #[error("{}: {}", file.display(), open_error(source))]
    Open {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a regular file", file.display())]
    NotRegular { file: PathBuf },
    #[error("{}: owned by uid {uid}, not by you", file.display())]
    NotOwned { file: PathBuf, uid: u32 },
    #[error("{}: larger than a policy file may be", file.display())]
    TooBig { file: PathBuf },
    #[error("{}: not UTF-8 text", file.display())]
    NotText { file: PathBuf },
    #[error("{} does not parse now, fix it first:\n{why}", file.display())]
    Unparsable { file: PathBuf, why: String },
    #[error("{} would not parse with the rule added:\n{why}", file.display())]
    WouldNotParse { file: PathBuf, why: String },
    #[error(
        "the rules of {} do not ask about this path (it asks because {why}), so a \
         rule there would not change it",
        file.display()
    )]
    NotAsked { file: PathBuf, why: String },
    #[error(
        "with the rule added, {} would still ask about this path ({why})",
        file.display()
    )]
    WouldStillAsk { file: PathBuf, why: String },
    #[error("{}: {source}", file.display())]
    Write {
        file: PathBuf,
        source: std::io::Error,
    },
}

/// An open error, with what `ELOOP` means here.
fn open_error(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::ELOOP) {
        "a symbolic link on its path, not followed".to_string()
    } else {
        e.to_string()
    }
}

/// The rule `kind` writes for question `q`, or why none can be.
pub fn rule(kind: Lasting, q: &Asked) -> Result<Rule, NoRule> {
    let (place, is_dir, action) = match kind {
        Lasting::Allow => (&q.decided_at, q.allows_a_directory(), q.allow_action()),
        Lasting::Deny => (&q.path, q.is_dir, Action::Deny),
    };
    let not_exact = || NoRule::NotExact(crate::escape::escape(place));
    // U+FFFD: the name was not UTF-8 and the question could only approximate it.
    if place.contains('\u{FFFD}') {
        return Err(not_exact());
    }
    let entry = crate::policy::exact_entry(place.as_bytes(), is_dir).ok_or_else(not_exact)?;
    Ok(Rule { action, entry })
}

/// The text appended to a file that holds `existing`: a blank line (after a
/// newline if the file lacks a last one), the comment, the rule.
pub fn text(existing: &str, rule: &Rule, kind: Lasting, q: &Asked, when: SystemTime) -> String {
    let sep = match existing {
        "" => "",
        e if e.ends_with('\n') => "\n",
        _ => "\n\n",
    };
    let answer = match kind {
        Lasting::Allow => "always allow",
        Lasting::Deny => "always deny",
    };
    format!(
        "{sep}# veilfs prompt, {}: {answer}, asked by {} (pid {}, uid {})\n\
         [[rules]]\naction = \"{}\"\npaths = [{}]\n",
        crate::session::audit::rfc3339(when),
        crate::escape::escape(&q.comm),
        q.pid,
        q.uid,
        rule.action,
        rule.entry
    )
}

/// Checks, before anything is written, that `existing` with `added` parses and
/// that the rule does what `kind` says for `q` (see the module documentation).
pub fn check(
    kind: Lasting,
    q: &Asked,
    file: &Path,
    existing: &str,
    added: &str,
) -> Result<(), NoRule> {
    let name = file.display().to_string();
    let before = Policy::parse(&name, existing).map_err(|e| NoRule::Unparsable {
        file: file.into(),
        why: e.to_string(),
    })?;
    let after =
        Policy::parse(&name, &format!("{existing}{added}")).map_err(|e| NoRule::WouldNotParse {
            file: file.into(),
            why: e.to_string(),
        })?;
    if kind == Lasting::Deny {
        return Ok(());
    }
    let path = q.path.as_bytes();
    let was = before.decide(path, q.is_dir);
    if was.action != Action::Ask {
        return Err(NoRule::NotAsked {
            file: file.into(),
            why: was.why(),
        });
    }
    let now = after.decide(path, q.is_dir);
    if now.action == Action::Ask || now.action == Action::Deny {
        return Err(NoRule::WouldStillAsk {
            file: file.into(),
            why: now.why(),
        });
    }
    Ok(())
}

/// A rule appended: where, and what the file said when read again.
#[derive(Debug)]
pub struct Appended {
    pub file: PathBuf,
    /// The line of its `[[rules]]`.
    pub line: usize,
    pub rule: Rule,
    /// What went wrong after (the file no longer parses, or was replaced).
    pub warnings: Vec<String>,
}

impl Appended {
    /// What the prompt says of it, the file named by `shown`.
    pub fn said(&self, shown: &str) -> String {
        format!(
            "added to {shown}:{}: {} {} (the session takes it within a second)",
            self.line,
            self.rule.action,
            crate::escape::escape(&self.rule.entry)
        )
    }
}

/// Appends the rule of `kind` for `q` to the question's policy file (see the
/// module documentation), or says why not.
pub fn append(kind: Lasting, q: &Asked, when: SystemTime) -> Result<Appended, NoRule> {
    if q.root == crate::run::net::ask::ROOT {
        return Err(NoRule::Network);
    }
    let Some(file) = q.policy_file.as_deref() else {
        return Err(if q.root == "home" {
            NoRule::NoHomeFile
        } else {
            NoRule::NoFile
        });
    };
    let rule = rule(kind, q)?;
    let mut f = crate::sys::open_append(file).map_err(|source| NoRule::Open {
        file: file.into(),
        source,
    })?;
    let existing = read_owned(&mut f, file)?;
    let added = text(&existing, &rule, kind, q, when);
    check(kind, q, file, &existing, &added)?;
    let wrote = f.write(added.as_bytes()).map_err(|source| NoRule::Write {
        file: file.into(),
        source,
    })?;
    if wrote != added.len() {
        let short = std::io::Error::other(format!(
            "only {wrote} of {} bytes written: look at the end of the file",
            added.len()
        ));
        return Err(NoRule::Write {
            file: file.into(),
            source: short,
        });
    }
    let before = format!("{existing}{}", &added[..added.find('#').unwrap_or(0)]);
    Ok(Appended {
        file: file.to_path_buf(),
        line: before.matches('\n').count() + 2,
        warnings: read_again(&mut f, file),
        rule,
    })
}

/// The text of the file open as `f`: a regular file, owned by this user, of at
/// most [`crate::policy::MAX_POLICY_BYTES`], UTF-8.
fn read_owned(f: &mut std::fs::File, file: &Path) -> Result<String, NoRule> {
    use std::os::unix::fs::MetadataExt;
    let meta = f.metadata().map_err(|source| NoRule::Open {
        file: file.into(),
        source,
    })?;
    if !meta.is_file() {
        return Err(NoRule::NotRegular { file: file.into() });
    }
    if meta.uid() != crate::sys::euid() {
        return Err(NoRule::NotOwned {
            file: file.into(),
            uid: meta.uid(),
        });
    }
    let max = crate::policy::MAX_POLICY_BYTES;
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| NoRule::Open {
            file: file.into(),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(NoRule::TooBig { file: file.into() });
    }
    String::from_utf8(bytes).map_err(|_| NoRule::NotText { file: file.into() })
}

/// Reads the file again after the rule went in: what is wrong with it now.
fn read_again(f: &mut std::fs::File, file: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut warnings = Vec::new();
    let at_path = std::fs::symlink_metadata(file)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let ours = f.metadata().ok().map(|m| (m.dev(), m.ino()));
    if at_path != ours {
        warnings.push(format!(
            "{} was replaced while the rule was added: the file there now lacks it",
            file.display()
        ));
    }
    let mut text = String::new();
    let read = f.rewind().and_then(|()| {
        f.take(crate::policy::MAX_POLICY_BYTES)
            .read_to_string(&mut text)
    });
    match read.map(|_| Policy::parse(&file.display().to_string(), &text)) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => warnings.push(format!(
            "{} no longer parses (edited meanwhile?), and the session keeps its old \
             policy until it does:\n{e}",
            file.display()
        )),
        Err(e) => warnings.push(format!("{}: reading it again: {e}", file.display())),
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(path: &str, is_dir: bool, decided_at: &str, grants: &str) -> Asked {
        let access = if grants == "allow" { "write" } else { "read" };
        Asked {
            root: "workspace".into(),
            path: path.into(),
            is_dir,
            decided_at: decided_at.into(),
            access: access.into(),
            grants: grants.into(),
            policy_file: Some(PathBuf::from("/ws/.veilfs.toml")),
            comm: "cat".into(),
            pid: 4242,
            uid: 1000,
        }
    }

    const WHEN: std::time::Duration = std::time::Duration::from_secs(1_796_000_000);

    fn text_of(kind: Lasting, q: &Asked, existing: &str) -> String {
        let r = rule(kind, q).unwrap();
        text(existing, &r, kind, q, SystemTime::UNIX_EPOCH + WHEN)
    }

    #[test]
    fn the_text_is_a_dated_comment_and_one_exact_rule() {
        let q = asked("mig/001.sql", false, "mig", "allow");
        assert_eq!(
            text_of(Lasting::Allow, &q, "default = \"allow\"\n"),
            "\n# veilfs prompt, 2026-11-30T00:53:20.000000Z: always allow, asked by cat \
             (pid 4242, uid 1000)\n[[rules]]\naction = \"allow\"\npaths = [\"/mig/\"]\n"
        );
        assert_eq!(
            text_of(Lasting::Deny, &q, "x = 1"),
            "\n\n# veilfs prompt, 2026-11-30T00:53:20.000000Z: always deny, asked by cat \
             (pid 4242, uid 1000)\n[[rules]]\naction = \"deny\"\npaths = [\"/mig/001.sql\"]\n"
        );
        let own = asked("a.sql", false, "a.sql", "read-only");
        assert!(
            text_of(Lasting::Allow, &own, "")
                .ends_with("action = \"read-only\"\npaths = [\"/a.sql\"]\n")
        );
    }

    #[test]
    fn the_keys_answer_for_the_session_what_the_rule_says() {
        let in_dir = asked("mig/001.sql", false, "mig", "allow");
        let own = asked("a.sql", false, "a.sql", "read-only");
        let dir = asked("mig", true, "mig", "allow");
        assert_eq!(Lasting::Allow.answer(&in_dir), "allow-dir");
        assert_eq!(Lasting::Allow.answer(&own), "allow-path");
        assert_eq!(Lasting::Allow.answer(&dir), "allow-dir");
        assert_eq!(Lasting::Deny.answer(&own), "deny");
        assert_eq!(
            Lasting::Allow.option(&in_dir),
            "a always allow mig/ and what is in it"
        );
        assert_eq!(
            Lasting::Allow.option(&own),
            "a always allow reading this path"
        );
        // Reading approved, writable once approved: the rule still only reads.
        let mut read = asked("mig/001.sql", false, "mig", "allow");
        read.access = "read".into();
        assert_eq!(
            rule(Lasting::Allow, &read).unwrap().action,
            Action::ReadOnly
        );
        assert_eq!(
            Lasting::Allow.option(&read),
            "a always allow reading mig/ and what is in it"
        );
        let write = asked("mig/001.sql", false, "mig", "allow");
        assert_eq!(rule(Lasting::Allow, &write).unwrap().action, Action::Allow);
        assert_eq!(Lasting::of_key(b'A'), Some(Lasting::Allow));
        assert_eq!(Lasting::of_key(b'x'), Some(Lasting::Deny));
        for k in *b"ypdnrq" {
            assert_eq!(Lasting::of_key(k), None, "{}", k as char);
        }
    }

    /// A name the confined command chose: glob metacharacters are written as
    /// literals (the rule names that one path and no other); a control or
    /// invisible character, or a name that was not UTF-8, gets no rule.
    #[test]
    fn a_hostile_name_gets_an_exact_rule_or_none() {
        for name in ["*", "a]b", "[!x]*.sql", "{a,b}", "x\\y", "q\"uote", "s?!"] {
            let q = asked(
                &format!("mig/{name}"),
                false,
                &format!("mig/{name}"),
                "allow",
            );
            let added = text_of(Lasting::Allow, &q, "");
            let ask = "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n";
            let p = Policy::parse("t", &format!("{ask}{added}"))
                .unwrap_or_else(|e| panic!("{name:?}: {e}\n{added}"));
            let of = |path: &str| p.decide(path.as_bytes(), false).action;
            assert_eq!(of(&format!("mig/{name}")), Action::Ask, "{name:?}");
            let q = asked(&format!("mig/{name}"), false, "mig", "allow");
            let denied = format!("{ask}{}", text_of(Lasting::Deny, &q, ask));
            let p = Policy::parse("t", &denied).unwrap_or_else(|e| panic!("{name:?}: {e}"));
            let of = |path: &str| p.decide(path.as_bytes(), false).action;
            assert_eq!(of(&format!("mig/{name}")), Action::Deny, "{name:?}");
            for other in ["mig/other", "mig/a", "mig/x", "mig/ab"] {
                if other != format!("mig/{name}") {
                    assert_eq!(of(other), Action::Ask, "{name:?} reached {other}");
                }
            }
        }
        for name in [
            "a\nb",
            "a\u{1b}]0;x",
            "\u{202e}lmth.exe",
            "bad\u{FFFD}",
            "tab\t",
        ] {
            let q = asked(&format!("mig/{name}"), false, "mig", "allow");
            assert!(
                matches!(rule(Lasting::Deny, &q), Err(NoRule::NotExact(_))),
                "{name:?}"
            );
        }
        // A process name is the command's to choose too: escaped, on one line.
        let mut q = asked("mig/a", false, "mig", "allow");
        q.comm = "x\n[[rules]]".into();
        let added = text_of(Lasting::Allow, &q, "");
        assert_eq!(added.matches("[[rules]]\n").count(), 1, "{added}");
        assert!(added.contains("asked by x\\x0a[[rules]] (pid"), "{added}");
    }

    #[test]
    fn only_a_rule_that_lifts_the_question_is_written() {
        let file = Path::new("/ws/.veilfs.toml");
        let ask_dir = "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n";
        let ask_sql = "[[rules]]\naction = \"ask\"\npaths = [\"*.sql\"]\n";
        let check_of = |kind, q: &Asked, existing: &str| {
            let added = text_of(kind, q, existing);
            check(kind, q, file, existing, &added)
        };
        // The directory's rule asks: `a` names the directory, and lifts it.
        let q = asked("mig/001.sql", false, "mig", "allow");
        assert!(check_of(Lasting::Allow, &q, ask_dir).is_ok());
        // Named the path alone beneath the asking directory, it would not.
        let q = asked("mig/001.sql", false, "mig/001.sql", "allow");
        assert!(matches!(
            check_of(Lasting::Allow, &q, ask_dir),
            Err(NoRule::WouldStillAsk { .. })
        ));
        // The file's own rule asks: its path lifts it.
        assert!(check_of(Lasting::Allow, &q, ask_sql).is_ok());
        // The question came from elsewhere (another policy around this one).
        assert!(matches!(
            check_of(Lasting::Allow, &q, "default = \"allow\"\n"),
            Err(NoRule::NotAsked { .. })
        ));
        // A file that does not parse is left alone; so is one the rule would break.
        assert!(matches!(
            check_of(Lasting::Deny, &q, "[[rules]\n"),
            Err(NoRule::Unparsable { .. })
        ));
        let inline = "rules = [{ action = \"ask\", paths = [\"*.sql\"] }]\n";
        assert!(matches!(
            check_of(Lasting::Deny, &q, inline),
            Err(NoRule::WouldNotParse { .. })
        ));
    }

    /// The file is written only as itself: a regular file of this user's, by a
    /// path with no symbolic link on it; and what was there stays.
    #[test]
    fn only_the_persons_own_regular_file_is_appended_to() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let file = dir.join("p.toml");
        let ask = "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]";
        std::fs::write(&file, ask).unwrap();
        let mut q = asked("mig/001.sql", false, "mig", "allow");
        let at = |q: &mut Asked, f: &Path| q.policy_file = Some(f.to_path_buf());
        at(&mut q, &file);
        let done = append(Lasting::Allow, &q, SystemTime::now()).unwrap();
        assert_eq!((done.line, done.warnings.len()), (6, 0), "{done:?}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with(&format!("{ask}\n\n# veilfs prompt, ")),
            "{text}"
        );
        assert!(text.ends_with("paths = [\"/mig/\"]\n"), "{text}");
        // A link to it, or a directory link on the way: not followed.
        symlink(&file, dir.join("link.toml")).unwrap();
        symlink(&dir, dir.join("d")).unwrap();
        for f in [dir.join("link.toml"), dir.join("d/p.toml")] {
            at(&mut q, &f);
            let e = append(Lasting::Deny, &q, SystemTime::now()).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        // Not a regular file; not this user's.
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        at(&mut q, &fifo);
        let e = append(Lasting::Deny, &q, SystemTime::now()).unwrap_err();
        assert!(matches!(e, NoRule::NotRegular { .. }), "{e}");
        if crate::sys::euid() == 0 {
            let other = dir.join("other.toml");
            std::fs::write(&other, ask).unwrap();
            std::os::unix::fs::chown(&other, Some(4321), None).unwrap();
            at(&mut q, &other);
            let e = append(Lasting::Deny, &q, SystemTime::now()).unwrap_err();
            assert!(matches!(e, NoRule::NotOwned { uid: 4321, .. }), "{e}");
            assert_eq!(std::fs::read_to_string(&other).unwrap(), ask);
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}
