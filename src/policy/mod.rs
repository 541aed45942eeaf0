//! The path policy: which workspace paths are visible, readable and changeable.
//!
//! This module is pure: no I/O, no `unsafe`. It turns policy text into a compiled
//! [`Policy`] and answers one question, "what may be done to this path?", with a
//! [`Decision`] that carries both the [`Action`] and the [`Reason`] for it.
//!
//! # The language
//!
//! ```toml
//! default = "allow"            # "allow" | "read-only" | "ask" | "deny"; for paths no rule decides
//!
//! [[rules]]
//! action = "deny"
//! paths  = [".env", ".env.*", "secrets/", "*.pem"]
//!
//! [[rules]]
//! action = "allow"
//! paths  = [".env.example"]
//! why    = "a template: names the variables, holds no values"   # optional
//! ```
//!
//! A rule's optional `why` is said after the rule wherever a decision is explained
//! (`explain`, the audit log, refusal notices).
//!
//! A rule with `paths` may take `backups = true`: each of its patterns then also
//! names the backup copies of what it names, the last name followed by `~`, `.bak`,
//! `.old`, `.orig`, `.save` or vim's `.swp` (`.sw?`), and beside a file vim's swap
//! file and emacs's auto-save file (`.netrc` also names `.netrc.bak` and
//! `#.netrc#`, `/.aws/` names the directory `.aws.bak/`, `credentials` names
//! `.credentials.swp`). The copies are one more glob, made when the policy loads,
//! with the pattern's rule and location (see the module `policy::backups`).
//!
//! A rule may take `routine = true`: the paths it refuses are ones tools try every
//! time they start (shell histories, `.viminfo`), so `veilfs run`'s summary counts
//! those refusals without naming them.
//!
//! A rule may take `import = ".cursorignore"` (or a list of such names) instead of
//! `paths`: the lines of those ignore files, wherever they are in the workspace, are
//! its patterns, and their names are read-only at every depth (see
//! [`Policy::attach_imports`]).
//!
//! | action    | listing | stat / read | any change                   |
//! |-----------|---------|-------------|------------------------------|
//! | allow     | shown   | yes         | yes                          |
//! | read-only | shown   | yes         | `EACCES`                     |
//! | ask       | shown   | stat; read once a person approves | once a person approves |
//! | deny      | hidden  | `EACCES`    | `EACCES`                     |
//!
//! An `ask` path's decision also says what it is once approved
//! ([`Decision::granted`]): `allow`, or `read-only` where a read-only rule or guard
//! holds it too (see [`crate::fs::ask`]).
//!
//! # Matching
//!
//! * A path is workspace-relative, `/`-separated, without a leading `/`; names are
//!   bytes (a name that is not UTF-8, or holds a `\`, is matched literally). The
//!   workspace root itself is never asked about.
//! * Patterns are `globset` globs: `*` and `?` never cross `/` (`?` is one byte),
//!   `**` spans directories, `[ab]`, `[!ab]` and `{a,b}` work, `\` escapes.
//!   Braces may hold `/` and nest, so one pattern names a family of paths
//!   (`/.config/{Code,Cursor}/User/settings.json`); what reads a pattern's literal
//!   parts rather than matching it reads each alternative
//!   ([`Pattern::alternatives`]). An empty alternative is dropped (`a{,b}` is `ab`).
//! * A pattern with no `/` (a trailing one aside) matches a name at any depth:
//!   `.env` means `**/.env`. A leading `/` or an inner `/` anchors it at the root.
//! * A trailing `/` restricts a pattern to directories.
//! * For one path, the last rule with a matching pattern decides.
//! * Decisions are inherited segment-wise, outermost first. A path's action is the
//!   most restrictive (deny > ask > read-only > allow) of its own rule's and its parent's;
//!   a path no rule matches takes its nearest matched ancestor's action, or the
//!   `default` when no ancestor matched either. A deny stops the walk: nothing below a
//!   denied directory can be re-opened.
//! * When the `default` is not `allow`, the literal directory prefix of each `allow`
//!   or `read-only` pattern is *admitted*: `allow src/lib/**` makes the directories
//!   `src` and `src/lib` visible and listable (their action is the pattern's), so an
//!   allow-list needs no extra rules to reach what it allows.
//!
//! | rules                                  | path                     | action    |
//! |----------------------------------------|--------------------------|-----------|
//! | `deny .env`                            | `app/.env`               | deny      |
//! | `deny .env`, `allow .env.example`      | `.env.example`           | allow     |
//! | `deny secrets/`                        | `secrets/a/b.txt`        | deny      |
//! | `deny secrets/`                        | `secrets` (a file)       | allow     |
//! | `deny credentials`                     | `credentials-backup`     | allow     |
//! | `deny /build`                          | `src/build`              | allow     |
//! | `deny secrets/`, `allow secrets/x`     | `secrets/x`              | deny      |
//! | `read-only .git/`                      | `.git/config`            | read-only |
//! | default deny, `allow src/lib/**`       | `src` (a directory)      | allow     |
//! | default deny, `allow src/lib/**`       | `src/main.rs`            | deny      |
//! | `default = "allow"`                    | `src/.veilfs.toml`       | read-only |
//!
//! # The policy file's name
//!
//! A path whose last name is [`POLICY_FILE_NAME`] (`.veilfs.toml`, at any depth) is
//! at least read-only, whatever the rules say and whether or not it exists: a
//! workspace's policy is found by that name, so a process confined by one policy
//! could otherwise plant the next one. A `deny` still hides it. This is part of
//! every decision ([`Policy::decide_child`], so [`Policy::decide`] and `explain`
//! too), not a check a caller may forget.
//!
//! # Creating a denied name
//!
//! A name the policy denies (or makes read-only) cannot be created: creating is a
//! change, refused like any other. Creating it and then hiding it was rejected: a
//! confined command could plant files that a person's own tools trust (`.envrc`,
//! `.npmrc`, `.git-credentials`) where the person cannot see them through the mount,
//! and tools that check what they wrote (`git` `lstat`s each checked-out file) fail
//! anyway. Showing the command what it created itself was rejected too: it would see
//! the person's secret once the person writes into that file. Instead the built-in
//! default (`policy-examples/default.toml`) allows the key and certificate files of
//! dependency trees, CA bundles and test fixtures, each rule with a `why`, and a
//! refusal is said once per path on stderr naming the rule
//! ([`crate::fs::notice`]).
//!
//! # Cost
//!
//! [`Policy::decide_child`] decides a path from its parent's [`Decision`] and one
//! name: one match against the unanchored glob set (the name) and one against the
//! anchored set (the path), whatever the number of rules or the depth.

pub mod agents;
mod backups;
mod braces;
pub mod claude;
mod decision;
mod file;
pub mod ignore;
mod imports;
mod index;
pub mod learn;
mod lint;
pub mod net;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use index::{GlobIndex, GlobIndexBuilder};

pub use decision::{Decision, Reason};
pub(crate) use file::{LineIndex, toml_message};
pub use file::{LoadError, Location, PolicyError, RawPolicy, RawRule};
pub use imports::Found;
pub use lint::Warning;

/// The name a workspace's policy file has (looked for by `veilfs run`, `mount` and
/// `explain`). Read-only at every depth (see the module documentation).
pub const POLICY_FILE_NAME: &str = ".veilfs.toml";

/// The most patterns a policy may hold (see [`Policy::parse`]).
pub const MAX_PATTERNS: usize = 50_000;

/// The built-in default policy, shipped as `policy-examples/default.toml`.
pub const DEFAULT_POLICY: &str = include_str!("../../policy-examples/default.toml");

/// The built-in default home policy of `veilfs run` (paths relative to the home
/// directory), shipped as `policy-examples/home-default.toml`.
pub const HOME_DEFAULT_POLICY: &str = include_str!("../../policy-examples/home-default.toml");

/// The name locations in the built-in default policy print as.
pub const BUILTIN_NAME: &str = "<built-in>";

/// The name locations in the built-in default home policy print as.
pub const BUILTIN_HOME_NAME: &str = "<built-in home>";

/// What may be done to a path. Ordered from most permissive to most restrictive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Allow,
    ReadOnly,
    /// Visible, and its content used only once a person approves (see
    /// [`crate::fs::ask`]); between read-only and deny in precedence.
    Ask,
    Deny,
}

impl Action {
    /// The spelling used in policy files and in `explain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::ReadOnly => "read-only",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }

    /// Whether the path is shown in listings and may be looked up, stat'ed and read.
    pub fn visible(self) -> bool {
        self != Action::Deny
    }

    /// Whether the path may be changed (written, created, removed, renamed, ...)
    /// without asking.
    pub fn writable(self) -> bool {
        self == Action::Allow
    }

    pub(crate) fn past_tense(self) -> &'static str {
        match self {
            Action::Allow => "allowed",
            Action::ReadOnly => "made read-only",
            Action::Ask => "put behind a question",
            Action::Deny => "denied",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pattern of one rule, as written, and what it was compiled to.
#[derive(Debug)]
pub struct Pattern {
    /// 1-based rule number, top to bottom.
    pub rule: usize,
    pub action: Action,
    /// The pattern exactly as written in the file.
    pub text: String,
    pub at: Location,
    /// Trailing `/`: matches directories only.
    pub dir_only: bool,
    /// Leading or inner `/`: matched against the whole path, else against the name.
    pub anchored: bool,
    /// The glob handed to `globset` (anchors and trailing `/` removed).
    glob: String,
    /// The rule's `why`, if it has one: said after the pattern by `explain`.
    pub why: Option<Arc<str>>,
    /// A line of an imported ignore file (`at` is `DIR/NAME:LINE`).
    imported: bool,
    /// Made for a rule with `backups = true`: `glob` names the backup copies of
    /// what the pattern `text` names (the module `policy::backups`); the pattern
    /// itself comes just before it.
    pub backup: bool,
    /// Its rule has `routine = true`: a refusal it decides is expected (a tool
    /// trying its history file), counted but not named in `run`'s summary.
    pub routine: bool,
}

impl Pattern {
    /// A line of an imported ignore file (its location is `DIR/NAME:LINE`).
    pub fn is_imported(&self) -> bool {
        self.imported
    }

    /// The glob the pattern was compiled from (its anchors and trailing `/`
    /// removed).
    pub fn glob(&self) -> &str {
        &self.glob
    }

    /// The globs without braces that the pattern's glob stands for: one per brace
    /// alternative (`.config/{Code,Cursor}/User` is `.config/Code/User` and
    /// `.config/Cursor/User`), else the glob itself. For what reads a pattern's
    /// literal parts (the module `policy::braces`); matching uses the glob as written.
    pub fn alternatives(&self) -> Vec<String> {
        braces::alternatives(&self.glob)
    }

    /// Where the pattern was written: `file:line:col` in a policy, `DIR/NAME:LINE`
    /// in an imported ignore file (`DIR/NAME` alone for an empty `.aiexclude`).
    pub fn location(&self) -> String {
        match (self.imported, self.at.line) {
            (false, _) => self.at.to_string(),
            (true, 0) => self.at.file.to_string(),
            (true, line) => format!("{}:{line}", self.at.file),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {} {:?} ", self.rule, self.text)?;
        if self.backup {
            f.write_str("(a backup copy) ")?;
        }
        write!(f, "({})", self.location())
    }
}

/// A compiled policy: decides paths with a constant number of glob-set matches.
#[derive(Debug)]
pub struct Policy {
    name: Arc<str>,
    default: Action,
    patterns: Vec<Arc<Pattern>>,
    /// Patterns matched against a path's last name: the unanchored ones, and
    /// anchored ones of the form `**/NAME`. Ids are indexes into `patterns`.
    names: GlobIndex,
    /// The other anchored patterns, matched against the whole path.
    paths: GlobIndex,
    /// Directories admitted by the literal prefix of an allow or read-only pattern
    /// (only filled when `default` is not `allow`), with the most permissive pattern
    /// that admits each.
    admitted: HashMap<Vec<u8>, Arc<Pattern>>,
    rule_count: usize,
    /// The rules with `import`, in rule order (empty: no extra work per path).
    imports: Vec<imports::ImportRule>,
    /// Every name they import: read-only at every depth.
    import_names: Vec<String>,
    /// The `(st_dev, st_ino)` of each imported file attached (as read): a change to
    /// that object by any name is refused (see `crate::fs::protect`).
    source_ids: Vec<(u64, u64)>,
    /// The rules it was compiled from, to compile again with the imported files
    /// read anew ([`Policy::recompiled`]).
    raw: RawPolicy,
}

impl Policy {
    /// Parses and compiles policy text; `name` is what locations print as the file.
    pub fn parse(name: &str, text: &str) -> Result<Policy, LoadError> {
        Policy::parse_on(None, name, text)
    }

    /// Parses and compiles policy text on top of `base`: the base's rules come
    /// first, so the text's rules win where both match (last match wins); the
    /// default is the text's. `veilfs run` stacks the workspace policy on the home
    /// policy this way when the workspace is the home directory.
    pub fn parse_on(base: Option<&RawPolicy>, name: &str, text: &str) -> Result<Policy, LoadError> {
        Policy::parse_between(base, &[], name, text)
    }

    /// Parses and compiles policy text between `base`'s rules (first) and `after`
    /// (last, so they win where they match: `veilfs run`'s rules for the targets of
    /// symbolic links the home policy hides).
    pub fn parse_between(
        base: Option<&RawPolicy>,
        after: &[RawRule],
        name: &str,
        text: &str,
    ) -> Result<Policy, LoadError> {
        Policy::parse_for_agent(base, None, after, name, text)
    }

    /// As [`Policy::parse_between`], for a session whose agent is `agent`: its
    /// profile's rules come after the built-in ones and before the text's own
    /// (its place is after `extends` and, for a built-in text, after all of it).
    pub fn parse_for_agent(
        base: Option<&RawPolicy>,
        agent: Option<&'static agents::Profile>,
        after: &[RawRule],
        name: &str,
        text: &str,
    ) -> Result<Policy, LoadError> {
        let (mut raw, mut errors) = file::parse_with_agent(name, text, agent)?;
        if let Some(b) = base {
            let mut rules = b.rules.clone();
            rules.append(&mut raw.rules);
            raw.rules = rules;
        }
        raw.rules.extend_from_slice(after);
        // Compiling costs time and memory per pattern: refuse, before compiling, a
        // policy far beyond anything written by hand (the bench measures 10,000).
        let count: usize = raw.rules.iter().map(|r| r.patterns.len()).sum();
        if count > MAX_PATTERNS {
            let at = raw
                .rules
                .iter()
                .flat_map(|r| r.patterns.iter())
                .nth(MAX_PATTERNS)
                .map(|(_, at)| at.clone());
            if let Some(at) = at {
                errors.push(file::PolicyError {
                    at,
                    message: format!(
                        "{count} patterns: a policy holds at most {MAX_PATTERNS} (this is \
                         pattern {})",
                        MAX_PATTERNS + 1
                    ),
                });
                return Err(LoadError { errors });
            }
        }
        match Policy::compile(raw) {
            Ok(p) if errors.is_empty() => Ok(p),
            Ok(_) => Err(LoadError { errors }),
            Err(e) => {
                errors.extend(e.errors);
                errors.sort_by_key(|e| (e.at.line, e.at.col));
                Err(LoadError { errors })
            }
        }
    }

    /// Parses policy text without compiling it (for [`Policy::parse_on`]'s base).
    pub fn raw(name: &str, text: &str) -> Result<RawPolicy, LoadError> {
        match file::parse(name, text)? {
            (raw, errors) if errors.is_empty() => Ok(raw),
            (_, errors) => Err(LoadError { errors }),
        }
    }

    /// The built-in default policy.
    pub fn builtin() -> Policy {
        Policy::parse(BUILTIN_NAME, DEFAULT_POLICY).expect("the built-in policy compiles")
    }

    /// The built-in default home policy of `veilfs run`.
    pub fn builtin_home() -> Policy {
        Policy::parse(BUILTIN_HOME_NAME, HOME_DEFAULT_POLICY)
            .expect("the built-in home policy compiles")
    }

    /// Compiles parsed rules into glob sets.
    pub fn compile(raw: RawPolicy) -> Result<Policy, LoadError> {
        let mut errors = Vec::new();
        let mut patterns = Vec::new();
        let mut names = GlobIndexBuilder::default();
        let mut paths = GlobIndexBuilder::default();
        for (i, rule) in raw.rules.iter().enumerate() {
            for (text, at) in &rule.patterns {
                let (body, dir_only) = match text.strip_suffix('/') {
                    Some(b) => (b, true),
                    None => (text.as_str(), false),
                };
                let (body, anchored) = match body.strip_prefix('/') {
                    Some(b) => (b, true),
                    None => (body, body.contains('/')),
                };
                // The pattern, then (`backups = true`) the one naming its copies,
                // with the same rule, anchoring and type.
                let copies = rule
                    .backups
                    .then(|| backups::copies(body, dir_only))
                    .flatten();
                let globs =
                    std::iter::once((body.to_string(), false)).chain(copies.map(|c| (c, true)));
                for (glob_text, backup) in globs {
                    let id = patterns.len();
                    // Compiled now, by globset: a request never compiles a glob.
                    match index::compile(&glob_text) {
                        Ok((glob, matcher)) if anchored => paths.add(&glob, matcher, id),
                        Ok((glob, matcher)) => names.add(&glob, matcher, id),
                        Err(e) => {
                            errors.push(PolicyError {
                                at: at.clone(),
                                message: format!(
                                    "rule {}: pattern {text:?}{}: invalid glob: {}",
                                    i + 1,
                                    if backup { " (its backup copies)" } else { "" },
                                    e.kind()
                                ),
                            });
                            break;
                        }
                    }
                    patterns.push(Arc::new(Pattern {
                        rule: i + 1,
                        action: rule.action,
                        text: text.clone(),
                        at: at.clone(),
                        dir_only,
                        anchored,
                        glob: glob_text,
                        why: rule.why.clone(),
                        imported: false,
                        backup,
                        routine: rule.routine,
                    }));
                }
            }
        }
        if !errors.is_empty() {
            return Err(LoadError { errors });
        }
        let names = names.build();
        let paths = paths.build();

        let mut admitted: HashMap<Vec<u8>, Arc<Pattern>> = HashMap::new();
        if raw.default != Action::Allow {
            for p in &patterns {
                if p.action == Action::Deny || !p.anchored {
                    continue;
                }
                for dir in literal_dir_prefixes(&p.glob) {
                    let slot = admitted.entry(dir.as_bytes().to_vec());
                    slot.and_modify(|q| {
                        if p.action < q.action {
                            *q = p.clone();
                        }
                    })
                    .or_insert_with(|| p.clone());
                }
            }
        }

        let imports = imports::ImportRule::of(&raw.rules);
        let import_names = imports::names_of(&imports);
        Ok(Policy {
            name: raw.name.clone(),
            default: raw.default,
            patterns,
            names,
            paths,
            admitted,
            rule_count: raw.rules.len(),
            imports,
            import_names,
            source_ids: Vec::new(),
            raw,
        })
    }

    /// The same rules compiled again, without the imported files attached (to
    /// attach them as they are now).
    pub fn recompiled(&self) -> Result<Policy, LoadError> {
        Policy::compile(self.raw.clone())
    }

    /// The session's agent whose profile the policy was compiled with (see
    /// [`Policy::parse_for_agent`]).
    pub fn implied_agent(&self) -> Option<&'static agents::Profile> {
        self.raw.implied
    }

    /// The agent profiles the policy holds: its `extends`, and the session's.
    pub fn agents(&self) -> &[&'static str] {
        &self.raw.agents
    }

    /// The name the policy was loaded under (a path, or `<built-in>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The action for paths that no rule decides.
    pub fn default_action(&self) -> Action {
        self.default
    }

    /// Every pattern, in rule order.
    pub fn patterns(&self) -> &[Arc<Pattern>] {
        &self.patterns
    }

    /// Whether some path may ask (an `ask` rule, or the default): then an approver
    /// (`veilfs prompt`) is worth starting.
    pub fn asks(&self) -> bool {
        self.default == Action::Ask
            || self.patterns.iter().any(|p| p.action == Action::Ask)
            || self.imports.iter().any(|r| r.asks())
    }

    /// The number of `[[rules]]` tables.
    pub fn rule_count(&self) -> usize {
        self.rule_count
    }

    /// Lint warnings: rules that can never take effect or never do what their
    /// shape says. Empty for a clean policy.
    pub fn lint(&self) -> Vec<Warning> {
        lint::lint(self, None)
    }

    /// [`Policy::lint`] for the workspace at the absolute path `workspace`: also
    /// says which absolute path a pattern written with it means.
    pub fn lint_in(&self, workspace: &[u8]) -> Vec<Warning> {
        lint::lint(self, Some(workspace))
    }

    /// The patterns written in the policy's own file (not the extended policy's,
    /// nor imported lines, nor those made for backup copies), as indexes into
    /// [`Policy::patterns`].
    pub fn own_patterns(&self) -> Vec<usize> {
        self.patterns
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.imported && !p.backup && *p.at.file == *self.name)
            .map(|(i, _)| i)
            .collect()
    }

    /// Decides a workspace-relative path from scratch, walking it outermost first.
    /// `is_dir` says whether the last segment is a directory (all others are).
    pub fn decide(&self, path: &[u8], is_dir: bool) -> Decision {
        let mut d = Decision::root();
        if path.is_empty() {
            return d;
        }
        let mut end = 0;
        loop {
            let next = path[end..].iter().position(|&b| b == b'/').map(|i| end + i);
            let last = next.is_none();
            let upto = next.unwrap_or(path.len());
            d = self.decide_child(&d, &path[..upto], || !last || is_dir);
            if last {
                return d;
            }
            end = upto + 1;
        }
    }

    /// Decides `path` (whose last segment is the name being asked about) from its
    /// parent's decision. `is_dir` is called only when the answer depends on whether
    /// the entry is a directory (a directory-only pattern matched, or an allow-list
    /// admits a directory at this path), so a caller can avoid a `stat`.
    ///
    /// A path named [`POLICY_FILE_NAME`] is at least read-only (see the module
    /// documentation).
    pub fn decide_child(
        &self,
        parent: &Decision,
        path: &[u8],
        is_dir: impl FnOnce() -> bool,
    ) -> Decision {
        let d = self.decide_by_rules(parent, path, is_dir);
        self.guard_names(path, d)
    }

    /// `d` for `path` with the guards on the names this policy keeps: at least
    /// read-only where the name is [`POLICY_FILE_NAME`] or a file this policy imports
    /// rules from.
    pub fn guard_names(&self, path: &[u8], d: Decision) -> Decision {
        let name_start = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let name = &path[name_start..];
        if name == POLICY_FILE_NAME.as_bytes() {
            d.guard_policy_name()
        } else if !self.import_names.is_empty() && self.is_import_name(path, name) {
            d.guard_imported_name()
        } else {
            d
        }
    }

    /// [`Policy::guard_names`], and the ignore file names this policy's rules keep
    /// from changes (the built-in default keeps all seven, present or not): the
    /// next start reads rules from any of them that is there, so they hold where
    /// the rules themselves do not (`--permissive`).
    pub fn guard_sources(&self, path: &[u8], d: Decision) -> Decision {
        let d = self.guard_names(path, d);
        let name_start = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let name = &path[name_start..];
        let ignore_name = ignore::NAMES.iter().any(|n| n.as_bytes() == name);
        if ignore_name && !self.decide(path, false).action.writable() {
            d.guard_imported_name()
        } else {
            d
        }
    }

    /// Whether `path` (whose last segment is `name`) is a file this policy imports
    /// rules from: an ignore file's name at any depth, a Claude Code settings file
    /// at its one path.
    fn is_import_name(&self, path: &[u8], name: &[u8]) -> bool {
        self.import_names.iter().any(|n| {
            if n.contains('/') {
                n.as_bytes() == path
            } else {
                n.as_bytes() == name
            }
        })
    }

    /// Whether a change to an entry called `name` may change a source of this
    /// policy (an imported file's name, or the last segment of a Claude Code
    /// settings file's path): the watcher reloads on such outside changes.
    pub fn is_source_name(&self, name: &[u8]) -> bool {
        self.import_names.iter().any(|n| {
            n.rsplit('/')
                .next()
                .is_some_and(|last| last.as_bytes() == name)
        })
    }

    /// [`Policy::decide_child`] by the rules alone.
    fn decide_by_rules(
        &self,
        parent: &Decision,
        path: &[u8],
        is_dir: impl FnOnce() -> bool,
    ) -> Decision {
        debug_assert!(!path.is_empty() && !path.starts_with(b"/") && !path.ends_with(b"/"));
        let name_start = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        if parent.action == Action::Deny {
            return inherit(parent, &path[..name_start.saturating_sub(1)]);
        }
        let (any, dir) = self.matches(path, &path[name_start..]);
        let mut is_dir = Some(is_dir);
        let mut dir_known: Option<bool> = None;
        let mut ask_dir = || *dir_known.get_or_insert_with(|| (is_dir.take().unwrap())());

        let own = match (any, dir) {
            (a, Some(d)) if a.is_none_or(|a| d > a) => {
                if ask_dir() {
                    Some(d)
                } else {
                    a
                }
            }
            (a, _) => a,
        };
        let mut own = own.map(|id| &self.patterns[id]);
        if !self.imports.is_empty() {
            // An import rule after the glob rule that matched (if any) decides
            // instead where its files match: the last matching rule wins.
            let floor = own.map_or(0, |p| p.rule);
            for r in self.imports.iter().rev().filter(|r| !r.claude) {
                if r.rule <= floor {
                    break;
                }
                if let Some(p) = r.matching(path, &mut ask_dir) {
                    own = Some(p);
                    break;
                }
            }
            // Claude Code's settings only ever tighten: an entry after the rule
            // that decided decides instead where it is stricter than that rule (or
            // the default), never where it would loosen it (an `Edit` deny is
            // read-only, which must not show what a deny rule hides).
            let floor = own.map_or(0, |p| p.rule);
            for r in self.imports.iter().filter(|r| r.claude && r.rule > floor) {
                let base = own.map_or(self.default, |p| p.action);
                if let Some(p) = r.matching(path, &mut ask_dir)
                    && p.action > base
                {
                    own = Some(p);
                }
            }
        }
        let parent_path = &path[..name_start.saturating_sub(1)];
        match own {
            Some(p) => {
                if parent.action >= p.action && parent.action != Action::Allow {
                    // The ancestor is at least as restrictive and named first; the
                    // match still puts this subtree under the rules (and a
                    // read-only rule still holds beneath a question).
                    let mut d = Decision {
                        ruled: true,
                        ..inherit(parent, parent_path)
                    };
                    d.approved = d.approved.max(approved_by(p.action));
                    d
                } else {
                    Decision {
                        action: p.action,
                        reason: Reason::Rule(p.clone()),
                        ruled: true,
                        approved: asked_under(parent, p.action),
                    }
                }
            }
            None if parent.ruled => inherit(parent, parent_path),
            None => {
                let action = parent.action.max(self.default);
                if action != Action::Allow
                    && let Some(p) = self.admitted.get(path)
                    && ask_dir()
                {
                    let action = parent.action.max(admits(p.action));
                    return Decision {
                        action,
                        reason: Reason::Admitted(p.clone()),
                        ruled: false,
                        approved: asked_under(parent, action),
                    };
                }
                // No rule covers the parent either, so its action is at most the
                // default (by induction from the root): the default decides.
                Decision {
                    action,
                    reason: Reason::Default,
                    ruled: false,
                    approved: asked_under(parent, action).max(approved_by(self.default)),
                }
            }
        }
    }

    /// The last-rule pattern matching the path regardless of type, and the last-rule
    /// directory-only pattern matching it (both as indexes into `patterns`, whose
    /// order is rule order, so the largest index is the last rule).
    fn matches(&self, path: &[u8], name: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut any = None;
        let mut dir = None;
        let mut take = |id: usize| {
            let slot = if self.patterns[id].dir_only {
                &mut dir
            } else {
                &mut any
            };
            *slot = (*slot).max(Some(id));
        };
        if !self.names.is_empty() {
            self.names.for_each_match(name, &mut take);
        }
        if !self.paths.is_empty() {
            self.paths.for_each_match(path, &mut take);
        }
        (any, dir)
    }

    /// Every pattern matching the path (or, for unanchored ones, its name), in rule
    /// order, whatever the entry's type, as indexes into [`Policy::patterns`].
    pub fn matching_patterns(&self, path: &[u8]) -> Vec<usize> {
        let name_start = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let mut out = Vec::new();
        self.names
            .for_each_match(&path[name_start..], |id| out.push(id));
        self.paths.for_each_match(path, |id| out.push(id));
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// What a path whose own action is `own` grants once approved, as far as `own`
/// says (`ask` itself grants everything).
fn approved_by(own: Action) -> Action {
    if own == Action::Ask {
        Action::Allow
    } else {
        own
    }
}

/// The `approved` of a path whose action is `action`, beneath `parent`: what the
/// parent grants (a question beneath a read-only directory grants only reading).
fn asked_under(parent: &Decision, action: Action) -> Action {
    if action == Action::Ask {
        parent.granted()
    } else {
        action
    }
}

/// The action with which an allow-list's pattern admits the directories leading
/// to it: an `ask` pattern's are listable without asking, never changeable.
fn admits(pattern: Action) -> Action {
    if pattern == Action::Ask {
        Action::ReadOnly
    } else {
        pattern
    }
}

/// The decision of a child that inherits its parent's action.
fn inherit(parent: &Decision, parent_path: &[u8]) -> Decision {
    let reason = match &parent.reason {
        Reason::Ancestor { .. } => parent.reason.clone(),
        other => Reason::Ancestor {
            path: Arc::from(parent_path),
            cause: Arc::new(other.clone()),
        },
    };
    Decision {
        action: parent.action,
        reason,
        ruled: parent.ruled,
        approved: parent.approved,
    }
}

/// The largest policy file read, and the largest imported ignore file: a policy is
/// text a person writes, so anything bigger is refused rather than read until
/// memory runs out.
pub const MAX_POLICY_BYTES: u64 = 4 << 20;

/// `text` as a TOML basic string on one line: in quotes, with `"`, `\` and every
/// control character escaped (a newline in a name cannot end the line it is
/// written on, a comment included).
pub fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `path` as a glob that matches exactly it: each character special to a glob
/// (`*`, `?`, `[`, `]`, `{`, `}`, `\`) in a class of its own (`[*]`). A `!` or a `,`
/// is special only inside a class or braces, which never remain open here.
pub fn literal_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// The `paths` entry, as a TOML string, naming exactly the mount-relative `path`
/// and nothing else: anchored at the mount's root, each glob metacharacter in a
/// class of its own ([`literal_glob`]), with a trailing `/` for a directory
/// (`"/src/a[*].txt"`, `"/migrations/"`). `None` for a path that cannot be
/// written as a person is shown it: empty, not UTF-8, or holding a control or
/// invisible character (which [`crate::escape`] shows escaped).
pub fn exact_entry(path: &[u8], is_dir: bool) -> Option<String> {
    let path = std::str::from_utf8(path).ok()?;
    if path.is_empty() || crate::escape::escape(path) != path {
        return None;
    }
    let slash = if is_dir { "/" } else { "" };
    Some(toml_string(&format!("/{}{slash}", literal_glob(path))))
}

/// The directories an anchored glob must pass through: its leading segments up to
/// (not including) the first one with a glob metacharacter, and never the last.
fn literal_dir_prefixes(glob: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let segs: Vec<&str> = glob.split('/').collect();
    let mut end = 0;
    for seg in &segs[..segs.len() - 1] {
        if seg.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            break;
        }
        end += seg.len() + usize::from(end > 0);
        out.push(&glob[..end]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_glob_in_a_toml_string_names_exactly_its_path() {
        let names = [
            "credentials\n.json",
            "a\"b'c\\d",
            "tab\there\r",
            "x\u{7f}\u{1b}]0;t\u{7}",
            "[!x].key",
            "s[1]*{a,b}?!.pem",
            "\u{202e}mep.x",
            "é/ü.txt",
        ];
        for name in names {
            let quoted = toml_string(&format!("/{}", literal_glob(name)));
            assert!(!quoted.contains('\n'), "{quoted}");
            let text = format!("[[rules]]\naction = \"deny\"\npaths = [{quoted}]\n");
            let p = Policy::parse("t.toml", &text).unwrap_or_else(|e| panic!("{name:?}: {e}"));
            assert_eq!(
                p.decide(name.as_bytes(), false).action,
                Action::Deny,
                "{name:?}"
            );
            let mut near = name.to_string();
            near.push('x');
            assert_eq!(
                p.decide(near.as_bytes(), false).action,
                Action::Allow,
                "{near:?}"
            );
            let first = name.chars().next().unwrap();
            let other = name.replacen(first, if first == 'a' { "b" } else { "a" }, 1);
            assert_eq!(
                p.decide(other.as_bytes(), false).action,
                Action::Allow,
                "{other:?}"
            );
        }
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_dir_prefixes("src/lib/**"), vec!["src", "src/lib"]);
        assert_eq!(literal_dir_prefixes("src/*/x"), vec!["src"]);
        assert_eq!(literal_dir_prefixes("**/x"), Vec::<&str>::new());
        assert_eq!(literal_dir_prefixes("Cargo.toml"), Vec::<&str>::new());
    }

    #[test]
    fn builtin_compiles_without_warnings() {
        let p = Policy::builtin();
        assert!(p.lint().is_empty(), "{:?}", p.lint());
    }
}
