//! A policy learned from a session: the audit log of `veilfs run --learn LOG` in,
//! the text of an allow-list policy out (`veilfs init --from-audit LOG` writes it).
//! Pure: the log's text is read by the caller.
//!
//! # What counts as used
//!
//! Every path event of the workspace (`"root": "workspace"`, or none, as `veilfs
//! mount` writes them) whose `result` is `allowed`, `would-refuse`, `would-ask` or
//! `approved`: what the session did, whatever the policy of the learning run said.
//! Refusals (`refused`: veilfs's own guards still refuse under `--learn`) and
//! questions still waiting (`asked`) are not uses; nor are the workspace root, the
//! home directory's paths (`"root": "home"`: counted in a comment, the home policy
//! is not learned here), connections (`"net"`) and the `{"dropped": N}` lines
//! (counted: the file then warns that it may miss paths).
//!
//! * A **change** is an event with `"change": true` (the policy was asked to let
//!   the path be written, made, removed, renamed or its attributes changed) or an
//!   operation that is one ([`CHANGE_OPS`]).
//! * A **listing** is `readdir` or `readdirplus` of a directory. A listing's
//!   would-be refusals (the entries it would have hidden) are not uses: the
//!   listing is, by its own event.
//! * Anything else is a **read**: a lookup (of a name that is there, or of one
//!   that is not: `"absent": true`, a probe the policy must keep answering), an
//!   open for reading, a listing.
//!
//! # The rules written
//!
//! `extends = "none"`, `default = "deny"`. A path is a directory when an event says
//! so (`"dir": true`, a listing, `mkdir`, `rmdir`) or when a used path lies below
//! it.
//!
//! * A directory is learned **whole**, as `/dir` (a rule on a directory decides
//!   for all it holds; never `/dir/`, which would not match a directory the
//!   session made and that is not there at the next start), when the
//!   session listed it (a listing must show the same names again), changed it
//!   (made, removed, renamed it), or used at least [`GROUP`] names directly in it
//!   (a file, a directory learned whole or looked at; not a directory it only
//!   went through). The outermost such directory wins; nothing below it gets a
//!   rule of its own.
//! * A directory the session only went through gets no rule: an allow-list
//!   admits the directories on the way to what it allows (visible, listing only
//!   what is allowed).
//! * A directory the session only looked at (a lookup, `test -d`) is `read-only
//!   "/dir"` with its content denied (`deny "/dir/*"`): there, not open.
//! * The workspace's policy file, `/.veilfs.toml`, is `read-only` (`veilfs run`
//!   reads it through the mount when it starts; it stays read-only whatever the
//!   rules say).
//! * Any other path is named alone, `/path`: a file, a link, or a name probed
//!   that was not there.
//!
//! Each rule is `allow` when anything it covers was changed, else `read-only`
//! (a read-only directory could not hold a changed file: denial is recursive),
//! and says how many logged operations it covers, how many changed, and by
//! which processes.
//!
//! # Secrets
//!
//! After the learned rules come the built-in default's `deny` rules, copied: the
//! last matching rule decides, so what the default hides stays hidden inside a
//! learned directory. A used path the default denies is not learned (listed in a
//! comment). A used path the default's deny rules match but its exceptions allow
//! (`.env.example`, `id_ed25519.pub`, a key file in `node_modules`) is named in a
//! last block, after the deny rules, so that it stays usable; the exceptions
//! themselves are not copied (they would open paths the session never used).
//!
//! # Names are the command's
//!
//! A path in the log is a name the confined command chose. It becomes a pattern
//! that matches exactly it ([`super::literal_glob`]: `*`, `?`, `[`, `]`, `{`, `}`
//! and `\` each in a class of its own) inside a TOML string
//! ([`super::toml_string`]), so no name widens a rule or breaks the file. A path
//! that cannot be written exactly is not learned (listed, escaped, in a comment):
//! one that was not UTF-8 (the log holds it with U+FFFD), holds a control or
//! invisible character, has an empty, `.` or `..` segment, or has a directory on
//! its way whose name holds a glob character (an allow-list admits the directories
//! on the way to a pattern only up to its first glob character).
//!
//! | the session                                   | the rule                                      |
//! |-----------------------------------------------|-----------------------------------------------|
//! | `cat src/a.txt`                               | `read-only "/src/a.txt"`                      |
//! | `cat src/a.txt src/b.txt src/c.txt`           | `read-only "/src"` (the directory)            |
//! | `ls src`                                      | `read-only "/src"` (the directory)            |
//! | `echo x > out/log.txt`                        | `allow "/out/log.txt"`                        |
//! | `mkdir build; echo x > build/a`               | `allow "/build"` (the directory)              |
//! | `test -d cache`                               | `read-only "/cache"`, `deny "/cache/*"`       |
//! | `cat src/.env`                                | none (the default denies it)                  |
//! | `cat .env.example`                            | `read-only "/.env.example"`, after the denies |
//! | `cat 'x*'`                                    | `read-only "/x[*]"`                           |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::{Action, POLICY_FILE_NAME, Policy, literal_glob, toml_string};

/// The names used directly in a directory that make it learned whole.
pub const GROUP: usize = 3;

/// Operations that change their path, whether or not the event says
/// `"change": true`.
pub const CHANGE_OPS: &[&str] = &[
    "create",
    "mknod",
    "mkdir",
    "symlink",
    "link",
    "unlink",
    "rmdir",
    "rename",
    "setattr",
    "setxattr",
    "removexattr",
    "write",
    "fallocate",
    "copy_file_range",
];

/// The results of events that are uses.
const USES: &[&str] = &["allowed", "would-refuse", "would-ask", "approved"];

/// The most paths listed in one comment (the rest are counted).
const MAX_LISTED: usize = 20;

/// The most process names said after a rule.
const MAX_COMMS: usize = 4;

/// A line of the log that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: not an audit line: {shown}")]
pub struct LogError {
    /// 1-based.
    pub line: usize,
    /// The line's start, escaped.
    pub shown: String,
}

/// What the log says of one path.
#[derive(Clone, Debug, Default)]
struct Use {
    reads: u64,
    changes: u64,
    listed: bool,
    dir: bool,
    /// Some event found it there (not only a lookup of a name that was absent).
    found: bool,
    comms: BTreeSet<String>,
}

impl Use {
    fn add(&mut self, other: &Use) {
        self.reads += other.reads;
        self.changes += other.changes;
        self.comms.extend(other.comms.iter().cloned());
    }

    fn count(&self) -> u64 {
        self.reads + self.changes
    }
}

/// What a log says the session used.
#[derive(Debug, Default)]
pub struct Uses {
    /// Workspace paths that can be written as patterns.
    paths: BTreeMap<String, Use>,
    /// Paths that cannot (see the module documentation), with their uses.
    unwritable: BTreeMap<String, u64>,
    /// Events of the home directory's mount.
    pub home: u64,
    /// Events the log dropped (its queue was full).
    pub dropped: u64,
    /// Names the session made as hard links (their uses).
    linked: BTreeMap<String, u64>,
}

impl Uses {
    /// Reads the log's text: one JSON object a line (blank lines aside).
    pub fn from_log(text: &str) -> Result<Uses, LogError> {
        let mut uses = Uses::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line).map_err(|_| LogError {
                line: i + 1,
                shown: crate::escape::escape(&line.chars().take(120).collect::<String>()),
            })?;
            uses.add(&v);
        }
        Ok(uses)
    }

    /// Counts one event.
    fn add(&mut self, v: &serde_json::Value) {
        if let Some(n) = v.get("dropped").and_then(|n| n.as_u64()) {
            self.dropped += n;
            return;
        }
        let result = v["result"].as_str().unwrap_or("");
        let (Some(path), true) = (v["path"].as_str(), USES.contains(&result)) else {
            return;
        };
        match v["root"].as_str() {
            None | Some("workspace") => {}
            Some("home") => {
                self.home += 1;
                return;
            }
            Some(_) => return,
        }
        let op = v["op"].as_str().unwrap_or("");
        let listing = matches!(op, "readdir" | "readdirplus" | "opendir");
        if path.is_empty() || (listing && result != "allowed" && result != "approved") {
            return;
        }
        if !writable(path) {
            *self.unwritable.entry(path.to_string()).or_default() += 1;
            return;
        }
        // The directories on the way, used or not (the kernel may have had them
        // cached): so that one of them can be learned whole.
        let mut at = path;
        while let Some((dir, _)) = at.rsplit_once('/') {
            self.paths.entry(dir.to_string()).or_default().dir = true;
            at = dir;
        }
        if op == "link" {
            *self.linked.entry(path.to_string()).or_default() += 1;
        }
        let u = self.paths.entry(path.to_string()).or_default();
        u.found |= v["absent"] != true;
        if v["change"] == true || CHANGE_OPS.contains(&op) {
            u.changes += 1;
        } else {
            u.reads += 1;
        }
        u.listed |= op == "readdir" || op == "readdirplus";
        u.dir |= v["dir"] == true || listing || op == "mkdir" || op == "rmdir";
        if let Some(c) = v["comm"].as_str().filter(|c| !c.is_empty()) {
            u.comms.insert(c.to_string());
        }
    }
}

/// Whether `path` (workspace-relative) can be written as a pattern matching
/// exactly it.
fn writable(path: &str) -> bool {
    !path.contains('\u{FFFD}')
        && crate::escape::escape(path) == path
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// Whether a directory on the way to `path` has a glob character in its name
/// (it would not be admitted: see the module documentation).
fn glob_on_the_way(path: &str) -> bool {
    path.rsplit_once('/')
        .is_some_and(|(dirs, _)| dirs.contains(['*', '?', '[', ']', '{', '}', '\\']))
}

/// How the built-in default takes a used path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// The default denies it: not learned.
    Secret,
    /// The default's deny rules match it, its exceptions allow it: named after
    /// the deny rules.
    Exception,
    Normal,
}

/// One pattern of the learned policy, with what it covers.
#[derive(Debug)]
struct Learned {
    /// The path (its pattern is made when written).
    path: String,
    /// `/path/` rather than `/path`.
    whole_dir: bool,
    uses: Use,
}

impl Learned {
    fn action(&self) -> Action {
        if self.uses.changes > 0 {
            Action::Allow
        } else {
            Action::ReadOnly
        }
    }

    /// `/path`: never `/path/`, which would not match a directory the session
    /// made and that is not there yet (a name that is not there is decided as a
    /// file); a rule on a directory decides for all it holds.
    fn pattern(&self) -> String {
        toml_string(&format!("/{}", literal_glob(&self.path)))
    }
}

/// What [`learn`] made of a log.
#[derive(Debug)]
pub struct Outcome {
    /// The policy file's text.
    pub text: String,
    /// Patterns learned (the looked-at directories' denials aside).
    pub patterns: usize,
    /// Used paths the built-in default denies, not learned.
    pub secrets: usize,
    /// Used paths that could not be written as patterns, not learned.
    pub unwritable: usize,
    /// Events of the home directory, not learned.
    pub home: u64,
    /// Events the log dropped.
    pub dropped: u64,
}

/// The learning itself: which path gets which rule.
struct Learner<'a> {
    uses: &'a BTreeMap<String, Use>,
    class: BTreeMap<&'a str, Class>,
    /// Directories learned whole.
    whole: BTreeSet<&'a str>,
}

impl<'a> Learner<'a> {
    fn new(uses: &'a Uses, default: &Policy, denies: &Policy) -> Learner<'a> {
        let mut l = Learner {
            uses: &uses.paths,
            class: BTreeMap::new(),
            whole: BTreeSet::new(),
        };
        for p in l.uses.keys() {
            let is_dir = l.is_dir(p);
            let c = if default.decide(p.as_bytes(), is_dir).action == Action::Deny {
                Class::Secret
            } else if denies.decide(p.as_bytes(), is_dir).action == Action::Deny {
                Class::Exception
            } else {
                Class::Normal
            };
            l.class.insert(p, c);
        }
        l.find_whole();
        l
    }

    /// The used paths strictly below `p`.
    fn below(&self, p: &'a str) -> impl Iterator<Item = (&'a String, &'a Use)> + use<'a> {
        let prefix = format!("{p}/");
        self.uses
            .range(prefix.clone()..)
            .take_while(move |(k, _)| k.starts_with(&prefix))
    }

    fn has_below(&self, p: &'a str) -> bool {
        self.below(p).next().is_some()
    }

    fn is_dir(&self, p: &'a str) -> bool {
        self.uses[p].dir || self.has_below(p)
    }

    fn normal(&self, p: &str) -> bool {
        self.class.get(p) == Some(&Class::Normal)
    }

    /// Fills [`Learner::whole`], deepest directories first (a directory learned
    /// whole counts as a name used in its parent).
    fn find_whole(&mut self) {
        let mut dirs: Vec<&'a str> = self
            .uses
            .keys()
            .map(String::as_str)
            .filter(|p| self.normal(p) && self.is_dir(p))
            .collect();
        dirs.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        for d in dirs {
            let u = &self.uses[d];
            let named = self
                .below(d)
                .filter(|(c, _)| !c[d.len() + 1..].contains('/') && self.normal(c))
                // A probe of a name that is not there uses nothing in it: three of
                // them do not make a directory learned whole.
                .filter(|(c, u)| {
                    (u.found || self.whole.contains(c.as_str())) && self.used_as_such(c)
                })
                .count();
            if u.listed || u.changes > 0 || named >= GROUP {
                self.whole.insert(d);
            }
        }
    }

    /// A path used for itself, not only gone through: a file, a directory learned
    /// whole, a directory with nothing used below it.
    fn used_as_such(&self, p: &'a str) -> bool {
        !self.is_dir(p) || self.whole.contains(p) || !self.has_below(p)
    }

    /// Whether an ancestor of `p` has class `c` (or, for `None`, is learned whole).
    fn under(&self, p: &str, c: Option<Class>) -> bool {
        let mut at = p;
        while let Some((parent, _)) = at.rsplit_once('/') {
            let hit = match c {
                None => self.whole.contains(parent),
                Some(c) => self.class.get(parent) == Some(&c),
            };
            if hit {
                return true;
            }
            at = parent;
        }
        false
    }

    /// `p` and what lies below it, secrets left out.
    fn covered(&self, p: &'a str) -> Use {
        let mut u = self.uses[p].clone();
        for (k, v) in self.below(p) {
            if self.class.get(k.as_str()) != Some(&Class::Secret) {
                u.add(v);
            }
        }
        u
    }

    /// The learned patterns (before the deny rules), and the directories only
    /// looked at (whose content is denied).
    fn rules(&self) -> (Vec<Learned>, Vec<Learned>) {
        let (mut rules, mut looked) = (Vec::new(), Vec::new());
        for (p, u) in self.uses {
            let p = p.as_str();
            if !self.normal(p) || self.under(p, None) || p == POLICY_FILE_NAME {
                continue;
            }
            let dir = self.is_dir(p);
            if self.whole.contains(p) {
                rules.push(Learned {
                    path: p.to_string(),
                    whole_dir: true,
                    uses: self.covered(p),
                });
            } else if dir && !self.has_below(p) {
                looked.push(Learned {
                    path: p.to_string(),
                    whole_dir: true,
                    uses: u.clone(),
                });
            } else if !dir {
                rules.push(Learned {
                    path: p.to_string(),
                    whole_dir: false,
                    uses: u.clone(),
                });
            }
        }
        (rules, looked)
    }

    /// The paths named after the deny rules: the outermost of those the default's
    /// exceptions allow.
    fn exceptions(&self) -> Vec<Learned> {
        self.uses
            .keys()
            .map(String::as_str)
            .filter(|p| self.class.get(p) == Some(&Class::Exception))
            .filter(|p| !self.under(p, Some(Class::Exception)))
            .map(|p| Learned {
                path: p.to_string(),
                whole_dir: self.is_dir(p) && self.has_below(p),
                uses: self.covered(p),
            })
            .collect()
    }

    fn secrets(&self) -> Vec<(&'a str, u64)> {
        self.uses
            .iter()
            .filter(|(p, _)| self.class.get(p.as_str()) == Some(&Class::Secret))
            .map(|(p, u)| (p.as_str(), u.count()))
            .collect()
    }
}

/// The built-in default's `deny` rules, as policy text (`[[rules]]` blocks).
pub fn default_denies() -> String {
    let mut t = String::new();
    for r in Policy::builtin().raw.rules.iter() {
        if r.action != Action::Deny || !r.imports.is_empty() {
            continue;
        }
        t.push_str("\n[[rules]]\naction = \"deny\"\n");
        if let Some(why) = &r.why {
            let _ = writeln!(t, "why = {}", toml_string(why));
        }
        if r.backups {
            t.push_str("backups = true\n");
        }
        if r.routine {
            t.push_str("routine = true\n");
        }
        t.push_str("paths = [\n");
        for (p, _) in &r.patterns {
            let _ = writeln!(t, "  {},", toml_string(p));
        }
        t.push_str("]\n");
    }
    t
}

/// The policy learned from `uses`, read from the log named `source` (said in the
/// file's header, escaped).
pub fn learn(uses: &Uses, source: &str) -> Outcome {
    let denies_text = default_denies();
    let default = Policy::builtin();
    let denies = Policy::parse(
        "<deny rules>",
        &format!("extends = \"none\"\n{denies_text}"),
    )
    .expect("the built-in default's deny rules compile");
    let l = Learner::new(uses, &default, &denies);
    let (rules, looked) = l.rules();
    let exceptions = l.exceptions();
    let secrets = l.secrets();
    let mut unwritable: Vec<(String, u64)> = uses
        .unwritable
        .iter()
        .map(|(p, n)| (p.clone(), *n))
        .collect();
    let keep = |v: Vec<Learned>, out: &mut Vec<(String, u64)>| -> Vec<Learned> {
        let (bad, good): (Vec<Learned>, Vec<Learned>) =
            v.into_iter().partition(|r| glob_on_the_way(&r.path));
        out.extend(bad.into_iter().map(|r| (r.path, r.uses.count())));
        good
    };
    let rules = keep(rules, &mut unwritable);
    let looked = keep(looked, &mut unwritable);
    let exceptions = keep(exceptions, &mut unwritable);

    let mut t = header(source, uses);
    write_rules(&mut t, &rules, &looked);
    write_linked(&mut t, &uses.linked);
    let _ = write!(
        t,
        "\n# `veilfs run` reads this file through the mount when it starts; it stays\n\
         # read-only whatever the rules say.\n\
         [[rules]]\naction = \"read-only\"\npaths = [{}]\n",
        toml_string(&format!("/{POLICY_FILE_NAME}"))
    );
    t.push_str(
        "\n# The built-in default's deny rules (`veilfs check --print-default`), after the\n\
         # learned ones: the last rule that matches decides, so what they hide stays\n\
         # hidden inside a learned directory.\n",
    );
    t.push_str(&denies_text);
    if !exceptions.is_empty() {
        t.push_str(
            "\n# Used by the session, matched by the deny rules above but allowed by the\n\
             # built-in default's exceptions (templates, public keys, CA bundles, the key\n\
             # files of dependency trees and test suites): named after them.\n",
        );
        write_rules(&mut t, &exceptions, &[]);
    }
    write_listed(
        &mut t,
        "Used by the session but denied by the built-in default: not learned",
        &secrets,
    );
    let unwritable_ref: Vec<(&str, u64)> =
        unwritable.iter().map(|(p, n)| (p.as_str(), *n)).collect();
    write_listed(
        &mut t,
        "Used by the session but not learned: a name that cannot be written as a\n\
         # pattern exactly (not UTF-8, a control character, a glob character in a\n\
         # directory on its way)",
        &unwritable_ref,
    );
    Outcome {
        text: t,
        patterns: rules.len() + looked.len() + exceptions.len(),
        secrets: secrets.len(),
        unwritable: unwritable.len(),
        home: uses.home,
        dropped: uses.dropped,
    }
}

/// A `deny` rule for the names the session made as hard links (after the learned
/// rules, so that a learned directory does not show them): a link keeps its
/// target's content, a secret's included, and whatever is written to the target
/// later.
fn write_linked(t: &mut String, linked: &BTreeMap<String, u64>) {
    if linked.is_empty() {
        return;
    }
    t.push_str(
        "\n# Made as hard links while learning: a link shows its target's content (a\n\
         # secret's too, and what is written to it later), so these stay denied.\n\
         [[rules]]\naction = \"deny\"\npaths = [\n",
    );
    for (p, n) in linked {
        let _ = writeln!(
            t,
            "  {},  # {n} link{}",
            toml_string(&format!("/{}", super::literal_glob(p))),
            if *n == 1 { "" } else { "s" }
        );
    }
    t.push_str("]\n");
}

/// The file's first lines.
fn header(source: &str, uses: &Uses) -> String {
    let mut t = format!(
        "# The veilfs policy of this workspace, learned by `veilfs init --from-audit` from\n\
         # {}, the audit log of a `veilfs run --learn` session.\n\
         # `veilfs check` checks it; `veilfs explain PATH` says which rule decides a path;\n\
         # `veilfs explain --audit LOG` reads what a later run refused.\n\
         #\n\
         # An allow-list: what the session did not use is denied. What it changed\n\
         # (wrote, made, removed, renamed) is \"allow\", what it only read or looked at\n\
         # \"read-only\". A directory is one pattern, \"/dir\" (all it holds), when the\n\
         # session listed it, changed it or used at least {GROUP} names directly in it;\n\
         # other paths are named one by one, and the directories on the way to them are\n\
         # visible (listing only what is allowed). A directory it only looked at is\n\
         # visible, its content denied. Each pattern says how many logged operations\n\
         # it covers (lookups, opens, listings, changes) and by which processes.\n",
        crate::escape::escape(source)
    );
    if uses.dropped > 0 {
        let _ = write!(
            t,
            "#\n# WARNING: the log dropped {} events (its queue was full): this policy may\n\
             # miss paths the session used. Run the session again to learn them.\n",
            uses.dropped
        );
    }
    if uses.home > 0 {
        let _ = write!(
            t,
            "#\n# {} operations in the home directory were logged too; the home policy\n\
             # (`veilfs check --print-default-home`) is not learned here.\n",
            uses.home
        );
    }
    t.push_str("\nextends = \"none\"\ndefault = \"deny\"\n");
    t
}

/// `rules`, an `allow` block then a `read-only` block, and `looked`, the
/// directories only looked at: read-only, their content denied.
fn write_rules(t: &mut String, rules: &[Learned], looked: &[Learned]) {
    for action in [Action::Allow, Action::ReadOnly] {
        let these: Vec<&Learned> = rules.iter().filter(|r| r.action() == action).collect();
        let looked_here: Vec<&Learned> = match action {
            Action::ReadOnly => looked.iter().collect(),
            _ => Vec::new(),
        };
        if these.is_empty() && looked_here.is_empty() {
            continue;
        }
        let _ = write!(
            t,
            "\n[[rules]]\naction = \"{}\"\npaths = [\n",
            action.as_str()
        );
        for r in &these {
            let what = if r.whole_dir {
                "directory, all it holds: "
            } else {
                ""
            };
            let _ = writeln!(t, "  {},  # {what}{}", r.pattern(), said(&r.uses));
        }
        for r in &looked_here {
            let _ = writeln!(
                t,
                "  {},  # directory, looked at: {}",
                r.pattern(),
                said(&r.uses)
            );
        }
        t.push_str("]\n");
    }
    if looked.is_empty() {
        return;
    }
    t.push_str(
        "\n# The directories above that the session only looked at: there, not open.\n\
         [[rules]]\naction = \"deny\"\npaths = [\n",
    );
    for r in looked {
        let inside = format!("/{}/*", literal_glob(&r.path));
        let _ = writeln!(t, "  {},", toml_string(&inside));
    }
    t.push_str("]\n");
}

/// `N uses (M changes) by a, b`, escaped for a comment.
fn said(u: &Use) -> String {
    let n = u.count();
    let mut s = format!("{n} use{}", if n == 1 { "" } else { "s" });
    if u.changes > 0 {
        let _ = write!(
            s,
            " ({} change{})",
            u.changes,
            if u.changes == 1 { "" } else { "s" }
        );
    }
    if !u.comms.is_empty() {
        let names: Vec<String> = u
            .comms
            .iter()
            .take(MAX_COMMS)
            .map(|c| crate::escape::escape(c))
            .collect();
        let more = if u.comms.len() > MAX_COMMS {
            ", …"
        } else {
            ""
        };
        let _ = write!(s, " by {}{more}", names.join(", "));
    }
    s
}

/// A commented list of `paths` (escaped) with their uses, under `title`.
fn write_listed(t: &mut String, title: &str, paths: &[(&str, u64)]) {
    if paths.is_empty() {
        return;
    }
    let _ = writeln!(t, "\n# {title}:");
    for (p, n) in paths.iter().take(MAX_LISTED) {
        let _ = writeln!(
            t,
            "#   {}  ({n} use{})",
            crate::escape::escape(p),
            if *n == 1 { "" } else { "s" }
        );
    }
    if paths.len() > MAX_LISTED {
        let _ = writeln!(t, "#   … and {} more", paths.len() - MAX_LISTED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of a log, as `veilfs run --learn` writes it (the fields read).
    fn event(op: &str, path: &str, result: &str) -> serde_json::Value {
        serde_json::json!({
            "op": op, "path": path, "result": result, "root": "workspace", "comm": "cat",
        })
    }

    /// A file read: looked up, opened.
    fn read(path: &str) -> Vec<serde_json::Value> {
        vec![
            event("lookup", path, "allowed"),
            event("open", path, "allowed"),
        ]
    }

    /// A file made and written.
    fn write(path: &str) -> Vec<serde_json::Value> {
        let mut absent = event("lookup", path, "allowed");
        absent["absent"] = true.into();
        let mut made = event("create", path, "allowed");
        made["change"] = true.into();
        vec![absent, made]
    }

    /// A directory listed.
    fn list(path: &str) -> Vec<serde_json::Value> {
        let mut v = event("readdirplus", path, "allowed");
        v["dir"] = true.into();
        vec![v]
    }

    /// A directory looked up, nothing more.
    fn look(path: &str) -> Vec<serde_json::Value> {
        let mut v = event("lookup", path, "allowed");
        v["dir"] = true.into();
        vec![v]
    }

    fn mkdir(path: &str) -> Vec<serde_json::Value> {
        let mut v = event("mkdir", path, "allowed");
        v["change"] = true.into();
        vec![v]
    }

    fn log(events: &[Vec<serde_json::Value>]) -> String {
        let lines: Vec<String> = events.iter().flatten().map(|v| v.to_string()).collect();
        lines.join("\n")
    }

    /// The policy learned from `events`, its text, and the text as compiled.
    fn learned(events: &[Vec<serde_json::Value>]) -> (Outcome, Policy) {
        let uses = Uses::from_log(&log(events)).unwrap();
        let out = learn(&uses, "/logs/learn.log");
        let policy = Policy::parse(".veilfs.toml", &out.text)
            .unwrap_or_else(|e| panic!("{e}\n{}", out.text));
        (out, policy)
    }

    const DIR: bool = true;
    const FILE: bool = false;

    /// One session, then what the learned policy decides: (path, as a directory,
    /// action).
    macro_rules! learns {
        ($($name:ident: [$($ev:expr),* $(,)?] => [$(($path:expr, $dir:expr, $action:ident)),* $(,)?];)*) => {$(
            #[test]
            fn $name() {
                let (out, policy) = learned(&[$($ev),*]);
                $(
                    let d = policy.decide($path.as_bytes(), $dir);
                    assert_eq!(
                        d.action,
                        Action::$action,
                        "{} ({}): {}\n{}",
                        $path,
                        d.why(),
                        stringify!($name),
                        out.text
                    );
                )*
            }
        )*};
    }

    learns! {
        a_file_read_is_read_only_and_its_neighbours_denied:
            [read("src/a.txt")] => [
                ("src/a.txt", FILE, ReadOnly),
                ("src/b.txt", FILE, Deny),
                ("src", DIR, ReadOnly),
                ("notes.txt", FILE, Deny),
                ("src/a.txt/x", FILE, ReadOnly),
            ];
        three_files_make_their_directory_whole:
            [read("src/a"), read("src/b"), read("src/c")] => [
                ("src/d", FILE, ReadOnly),
                ("src/deep/e", FILE, ReadOnly),
                ("other", FILE, Deny),
            ];
        two_files_do_not:
            [read("src/a"), read("src/b")] => [
                ("src/a", FILE, ReadOnly),
                ("src/c", FILE, Deny),
            ];
        a_listed_directory_is_whole:
            [list("src")] => [
                ("src", DIR, ReadOnly),
                ("src/never-read", FILE, ReadOnly),
                ("srcs", FILE, Deny),
            ];
        a_written_file_is_allowed_and_its_directory_admitted:
            [write("out/log.txt")] => [
                ("out/log.txt", FILE, Allow),
                ("out", DIR, Allow),
                ("out/other.txt", FILE, Deny),
            ];
        a_made_directory_is_whole_even_before_it_is_there_again:
            [mkdir("build"), write("build/a.o")] => [
                // Not there yet: a name that is not there is decided as a file.
                ("build", FILE, Allow),
                ("build", DIR, Allow),
                ("build/b.o", FILE, Allow),
            ];
        a_change_in_a_listed_directory_makes_it_allow:
            [list("src"), write("src/new.rs")] => [
                ("src/old.rs", FILE, Allow),
            ];
        a_directory_gone_through_gets_no_rule:
            [read("a/b/c.txt")] => [
                ("a", DIR, ReadOnly),
                ("a/b", DIR, ReadOnly),
                ("a/x", FILE, Deny),
                ("a/b/d.txt", FILE, Deny),
            ];
        a_directory_only_looked_at_is_there_but_closed:
            [look("cache")] => [
                ("cache", DIR, ReadOnly),
                ("cache/blob", FILE, Deny),
                ("cache/sub", DIR, Deny),
            ];
        a_name_probed_and_absent_is_read_only:
            [vec![{
                let mut v = event("lookup", "src/.gitattributes", "allowed");
                v["absent"] = true.into();
                v
            }]] => [
                ("src/.gitattributes", FILE, ReadOnly),
                ("src/other", FILE, Deny),
            ];
        secrets_stay_denied_in_a_learned_directory:
            [list("src"), vec![event("open", "src/.env", "would-refuse")], read("src/id_rsa")] => [
                ("src/.env", FILE, Deny),
                ("src/id_rsa", FILE, Deny),
                ("src/server.pem", FILE, Deny),
                ("src/secrets", DIR, Deny),
                ("src/main.rs", FILE, ReadOnly),
            ];
        a_template_the_default_allows_is_learned_after_the_denies:
            [read(".env.example"), list("keys"), read("keys/id_ed25519.pub")] => [
                (".env.example", FILE, ReadOnly),
                (".env.sample", FILE, Deny),
                (".env", FILE, Deny),
                ("keys/id_ed25519.pub", FILE, ReadOnly),
                ("keys/id_ed25519", FILE, Deny),
            ];
        glob_characters_in_names_match_only_themselves:
            [read("x*"), read("we[i]rd"), read("a{b,c}"), read("q?"), read("back\\slash"),
             read("!bang"), read("quo\"te"), read("#hash")] => [
                ("x*", FILE, ReadOnly),
                ("xy", FILE, Deny),
                ("we[i]rd", FILE, ReadOnly),
                ("weird", FILE, Deny),
                ("a{b,c}", FILE, ReadOnly),
                ("ab", FILE, Deny),
                ("q?", FILE, ReadOnly),
                ("qx", FILE, Deny),
                ("back\\slash", FILE, ReadOnly),
                ("backslash", FILE, Deny),
                ("!bang", FILE, ReadOnly),
                ("quo\"te", FILE, ReadOnly),
                ("#hash", FILE, ReadOnly),
            ];
        a_glob_directory_learned_whole_matches_only_itself:
            [list("d*")] => [
                ("d*", DIR, ReadOnly),
                ("d*/f", FILE, ReadOnly),
                ("dx", DIR, Deny),
                ("dx/f", FILE, Deny),
            ];
        names_that_cannot_be_written_are_not_learned:
            [read("new\nline"), read("bad\u{FFFD}name"), read("d*r/f"), read("a/../b"),
             read("bidi\u{202e}txt")] => [
                ("new\nline", FILE, Deny),
                ("d*r/f", FILE, Deny),
                ("dxr/f", FILE, Deny),
                ("b", FILE, Deny),
            ];
        the_home_directory_connections_and_refusals_are_not_learned:
            [vec![
                serde_json::json!({"op": "open", "path": "notes", "result": "allowed", "root": "home"}),
                serde_json::json!({"op": "connect", "net": "example.com:443", "result": "allowed"}),
                event("lookup", "guarded", "refused"),
                event("lookup", "waiting", "asked"),
            ]] => [
                ("notes", FILE, Deny),
                ("guarded", FILE, Deny),
                ("waiting", FILE, Deny),
            ];
        a_listings_hidden_entries_are_not_uses:
            [vec![event("readdirplus", "src/hidden.txt", "would-refuse")]] => [
                ("src/hidden.txt", FILE, Deny),
            ];
        an_older_log_without_change_flags_still_tells_changes:
            [vec![event("mkdir", "gen", "allowed"), event("rename", "gen/x", "allowed")]] => [
                ("gen", DIR, Allow),
                ("gen/y", FILE, Allow),
            ];
        the_policy_file_is_readable:
            [read("src/a")] => [
                (".veilfs.toml", FILE, ReadOnly),
            ];
    }

    #[test]
    fn each_pattern_says_how_often_and_by_whom() {
        let mut touched = event("setattr", "out/stamp", "allowed");
        touched["change"] = true.into();
        touched["comm"] = "touch".into();
        let (out, _) = learned(&[write("out/stamp"), vec![touched], read("README")]);
        assert!(
            out.text
                .contains("  \"/out/stamp\",  # 3 uses (2 changes) by cat, touch\n"),
            "{}",
            out.text
        );
        assert!(
            out.text.contains("  \"/README\",  # 2 uses by cat\n"),
            "{}",
            out.text
        );
    }

    #[test]
    fn a_directory_says_it_holds_all() {
        let (out, _) = learned(&[list("src"), read("src/a"), look("cache")]);
        assert!(
            out.text
                .contains("\"/src\",  # directory, all it holds: 3 uses by cat\n"),
            "{}",
            out.text
        );
        assert!(
            out.text
                .contains("\"/cache\",  # directory, looked at: 1 use by cat\n"),
            "{}",
            out.text
        );
    }

    #[test]
    fn probes_of_absent_names_do_not_open_their_directory() {
        let probe = |p: &str| {
            let mut v = event("lookup", p, "allowed");
            v["absent"] = true.into();
            v
        };
        let (out, policy) = learned(&[vec![
            probe("data/nx1"),
            probe("data/nx2"),
            probe("data/nx3"),
        ]]);
        assert_eq!(
            policy.decide(b"data/y.csv", false).action,
            Action::Deny,
            "{}",
            out.text
        );
    }

    #[test]
    fn a_name_made_as_a_hard_link_stays_denied() {
        let (out, policy) = learned(&[vec![
            event("link", "keycopy.txt", "allowed"),
            event("open", "keycopy.txt", "allowed"),
            event("open", "src/a.rs", "allowed"),
            event("open", "src/b.rs", "allowed"),
            event("open", "src/c.rs", "allowed"),
            event("link", "src/d.rs", "allowed"),
        ]]);
        assert_eq!(
            policy.decide(b"keycopy.txt", false).action,
            Action::Deny,
            "{}",
            out.text
        );
        assert_eq!(
            policy.decide(b"src/d.rs", false).action,
            Action::Deny,
            "{}",
            out.text
        );
        assert_ne!(
            policy.decide(b"src/a.rs", false).action,
            Action::Deny,
            "{}",
            out.text
        );
    }

    #[test]
    fn a_hostile_process_name_stays_in_its_comment() {
        let mut v = event("open", "a.txt", "allowed");
        v["comm"] = "x\n[[rules]]\naction = \"allow\"\npaths = [\"/\"]".into();
        let (out, policy) = learned(&[vec![v]]);
        // The learned rule, the policy file's, the default's deny rule.
        assert_eq!(policy.raw.rules.len(), 3, "{}", out.text);
        assert!(
            out.text.contains("by x\\x0a[[rules]]\\x0aaction"),
            "{}",
            out.text
        );
        assert_eq!(policy.decide(b"b.txt", false).action, Action::Deny);
    }

    #[test]
    fn secrets_and_names_left_out_are_listed_escaped() {
        let (out, _) = learned(&[
            vec![event("lookup", "src/.env", "would-refuse")],
            read("new\nline"),
        ]);
        assert_eq!((out.secrets, out.unwritable, out.patterns), (1, 1, 0));
        assert!(out.text.contains("#   src/.env  (1 use)\n"), "{}", out.text);
        assert!(
            out.text.contains("#   new\\x0aline  (2 uses)\n"),
            "{}",
            out.text
        );
    }

    #[test]
    fn the_default_deny_rules_come_after_the_learned_ones() {
        let (out, policy) = learned(&[list("src")]);
        let learned_at = out.text.find("\"/src\"").unwrap();
        let deny_at = out.text.find("\".env\"").unwrap();
        assert!(learned_at < deny_at, "{}", out.text);
        assert_eq!(policy.default_action(), Action::Deny);
        assert!(
            policy.lint().is_empty(),
            "{:?}\n{}",
            policy.lint(),
            out.text
        );
    }

    #[test]
    fn dropped_events_and_home_operations_are_said() {
        let text = [
            r#"{"dropped": 7}"#.to_string(),
            serde_json::json!({"op": "open", "path": "x", "result": "allowed", "root": "home"})
                .to_string(),
            String::new(),
        ]
        .join("\n");
        let uses = Uses::from_log(&text).unwrap();
        let out = learn(&uses, "log\nname");
        assert_eq!((out.dropped, out.home), (7, 1));
        assert!(out.text.contains("dropped 7 events"), "{}", out.text);
        assert!(
            out.text.contains("# log\\x0aname, the audit log"),
            "{}",
            out.text
        );
        Policy::parse("p", &out.text).unwrap();
    }

    #[test]
    fn a_line_that_is_not_json_is_named() {
        let e = Uses::from_log("{\"op\": \"open\"}\nnot json\u{1b}[2J").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.to_string(), "line 2: not an audit line: not json\\x1b[2J");
    }

    #[test]
    fn the_default_deny_rules_are_copied_whole() {
        let text = default_denies();
        let copied = Policy::parse("p", &format!("extends = \"none\"\n{text}")).unwrap();
        let builtin = Policy::builtin();
        let denies = |p: &Policy| -> Vec<String> {
            p.patterns()
                .iter()
                .filter(|p| p.action == Action::Deny)
                .map(|p| p.text.clone())
                .collect()
        };
        assert_eq!(denies(&copied), denies(&builtin));
        assert!(copied.patterns().iter().all(|p| p.action == Action::Deny));
    }
}
