//! Rules whose patterns are the lines of ignore files the workspace already has.
//!
//! ```toml
//! [[rules]]
//! action = "deny"
//! import = [".cursorignore", ".aiexclude"]   # or one name: import = ".cursorignore"
//! why    = "what the editor's agent must not read"
//! ```
//!
//! A rule takes `import` instead of `paths`. Its files are found in the workspace
//! (by the caller: this module does no I/O) and handed over with
//! [`Policy::attach_imports`]; each is parsed by [`IgnoreFile::parse`], with git's
//! exact `.gitignore` semantics (see [`super::ignore`]).
//!
//! # Deciding
//!
//! An import rule takes its place in rule order like any other: of the rules that
//! match a path, the last one decides. An import rule matches a path when its files
//! say the path is ignored: of the rule's files whose directory holds the path, the
//! deepest one with a line matching it decides (a subdirectory's file overrides its
//! parent's, as in git; in one directory, a name later in the `import` list overrides
//! an earlier one), and a `!` line that decides means the rule does not match:
//! the rules before it decide the path as if the import rule were not there, so a
//! `!` line never re-opens what another rule denies or makes read-only; it can only
//! narrow what its own rule does. Ancestors are decided first (see
//! [`Policy::decide`]), so a path beneath a directory the rule denies is never
//! re-included, as git never re-includes one.
//!
//! Files of different names in one rule override each other as files of one name
//! do; the built-in default gives each name a rule of its own, so that one tool's
//! `!` line never re-includes what another tool's file hides.
//!
//! A decision by an import rule names the line: `rule 4 ".env*" (.cursorignore:3)`,
//! or `(sub/.cursorignore:2)` for a file in a subdirectory;
//! [`Policy::re_included_by`] names the `!` lines that take a path out of their
//! rules.
//!
//! # The files' names
//!
//! Every name a policy imports is at least read-only at every depth, whether or not
//! a file by that name exists ([`super::Reason::ImportedFile`]), as the policy file's
//! own name is: the confined command cannot rewrite the rules that confine it.
//!
//! # Cost
//!
//! A policy without import rules does no extra work per path. With them, each import
//! rule later than the glob rule that matched costs one hash lookup per directory on
//! the path's way (for the directories holding one of its files).

use std::collections::HashMap;
use std::sync::Arc;

use super::claude;
use super::ignore::{IgnoreFile, Syntax, syntax_of};
use super::{Action, Location, Pattern, Policy, PolicyError, RawRule};

/// One ignore file found in the workspace, to give to [`Policy::attach_imports`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The workspace-relative directory holding it (`""` for the root, no trailing
    /// `/`).
    pub dir: Vec<u8>,
    /// Its name, one of those [`super::ignore::syntax_of`] knows.
    pub name: String,
    /// Its content.
    pub text: String,
}

/// One ignore file as an import rule holds it: parsed once, with the
/// [`Pattern`] each of its lines decides with (built once, not per request).
#[derive(Debug)]
struct Attached {
    file: Arc<IgnoreFile>,
    /// The position of its name in the rule's `import` list.
    order: usize,
    /// The pattern of each line, by line number (ascending).
    lines: Vec<(u32, Arc<Pattern>)>,
}

/// A rule with `import`, compiled.
#[derive(Debug)]
pub(super) struct ImportRule {
    /// 1-based rule number, counted with the glob rules.
    pub(super) rule: usize,
    pub(super) action: Action,
    why: Option<Arc<str>>,
    /// The names it imports, in the order written.
    names: Vec<String>,
    /// Its files, by the directory holding them; in one directory, by `order`.
    files: HashMap<Vec<u8>, Vec<Attached>>,
    /// The directories on the way to the Claude Code settings files attached
    /// (`.claude`): not renamed or removed, like those in `files`.
    held: Vec<Vec<u8>>,
    /// `negation = false`: its files are read without their `!` lines.
    no_negation: bool,
    /// It imports Claude Code's settings: its lines carry their own actions, and
    /// only ever tighten (see `Policy::decide_by_rules`).
    pub(super) claude: bool,
}

impl ImportRule {
    /// The import rules of parsed rules (numbered from 1 in that order).
    pub(super) fn of(rules: &[RawRule]) -> Vec<ImportRule> {
        rules
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.imports.is_empty())
            .map(|(i, r)| ImportRule {
                rule: i + 1,
                action: r.action,
                why: r.why.clone(),
                names: r.imports.iter().map(|(n, _)| n.clone()).collect(),
                files: HashMap::new(),
                held: Vec::new(),
                no_negation: r.no_negation,
                claude: r.imports.iter().any(|(n, _)| claude::is_name(n)),
            })
            .collect()
    }

    /// The pattern of the line that says `path` is ignored, or `None`: no file of
    /// this rule has a line matching it, or a `!` line decides (the rule then does
    /// not match: the rules before it decide, as if it were not there). `is_dir` is
    /// asked only when a directory-only line matches.
    pub(super) fn matching(
        &self,
        path: &[u8],
        is_dir: &mut dyn FnMut() -> bool,
    ) -> Option<&Arc<Pattern>> {
        match self.deciding(path, is_dir) {
            Some((true, p)) => Some(p),
            _ => None,
        }
    }

    /// The line that decides `path` in this rule's files, and whether it says
    /// the path is ignored (`false`: a `!` line re-includes it). Of the files whose
    /// directory holds the path, the deepest with a matching line decides; in one
    /// directory, the latest name in the `import` list.
    fn deciding(
        &self,
        path: &[u8],
        is_dir: &mut dyn FnMut() -> bool,
    ) -> Option<(bool, &Arc<Pattern>)> {
        if self.files.is_empty() {
            return None;
        }
        // The directories holding the path, deepest first: its parent, ..., "".
        let mut end = path.iter().rposition(|&b| b == b'/');
        loop {
            let dir = end.map_or(&[][..], |i| &path[..i]);
            if let Some(files) = self.files.get(dir) {
                for f in files.iter().rev() {
                    if let Some(m) = f.file.decide(path, &mut *is_dir) {
                        let i = f.lines.binary_search_by_key(&m.line, |(l, _)| *l).ok()?;
                        return Some((m.ignored, &f.lines[i].1));
                    }
                }
            }
            match end {
                None => return None,
                Some(i) => end = path[..i].iter().rposition(|&b| b == b'/'),
            }
        }
    }
}

/// What a file's lines print as in `explain`: `DIR/NAME` (`NAME` at the root).
fn shown(dir: &[u8], name: &str) -> Arc<str> {
    if dir.is_empty() {
        Arc::from(name)
    } else {
        Arc::from(format!("{}/{name}", String::from_utf8_lossy(dir)))
    }
}

/// Whether `dir` is a workspace-relative directory as [`Found::dir`] wants it.
fn well_formed(dir: &[u8]) -> bool {
    dir.is_empty()
        || dir
            .split(|&b| b == b'/')
            .all(|seg| !seg.is_empty() && seg != b"." && seg != b"..")
}

impl Policy {
    /// The `!` lines that take `path` itself out of an import rule (one per rule
    /// at most, in rule order): what `explain` says of a re-included path. Such a
    /// line only makes its own rule not match; the path's decision is the
    /// [`Policy::decide`] of the other rules (and of its ancestors, so nothing
    /// beneath a directory an import rule hides is re-included).
    pub fn re_included_by(&self, path: &[u8], is_dir: bool) -> Vec<Arc<Pattern>> {
        let mut dir = || is_dir;
        self.imports
            .iter()
            .filter(|r| !r.claude)
            .filter_map(|r| match r.deciding(path, &mut dir) {
                Some((false, p)) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    /// The names of the ignore files this policy imports (each once, in rule order).
    pub fn import_names(&self) -> &[String] {
        &self.import_names
    }

    /// The identities of the imported files attached (see
    /// [`Policy::set_source_ids`]).
    pub fn source_ids(&self) -> &[(u64, u64)] {
        &self.source_ids
    }

    /// Records the `(st_dev, st_ino)` of the imported files as they were read: the
    /// mount refuses every change to those objects, by whatever name (a hard link
    /// made before mounting included).
    pub fn set_source_ids(&mut self, ids: Vec<(u64, u64)>) {
        self.source_ids = ids;
    }

    /// The workspace-relative directories holding the imported files attached, and
    /// those on the way to Claude Code's settings (`.claude`): where an edit made
    /// outside the mount is watched for.
    pub fn import_dirs(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for r in &self.imports {
            for d in r.files.keys().chain(r.held.iter()) {
                if !out.contains(d) {
                    out.push(d.clone());
                }
            }
        }
        out
    }

    /// Whether the directory `path` holds (at any depth) an ignore file this policy
    /// imports: it is then not renamed or removed through the mount, so the file's
    /// rules stay where they apply (moved elsewhere, or into `.git`, where no file
    /// is looked for, they would leave what they hide behind).
    pub fn holds_imported(&self, path: &[u8]) -> bool {
        self.imports.iter().any(|r| {
            r.files.keys().chain(r.held.iter()).any(|dir| {
                path.is_empty()
                    || dir.as_slice() == path
                    || (dir.starts_with(path) && dir.get(path.len()) == Some(&b'/'))
            })
        })
    }

    /// Gives the import rules the files found in the workspace: each file is parsed
    /// once and held by every import rule naming it; a file no rule imports, or
    /// whose directory is not workspace-relative, is skipped. Files attached before
    /// are kept (attach each file once). Claude Code's settings are placed with the
    /// default [`claude::Context`]: see [`Policy::attach_imports_in`].
    ///
    /// Every error returned is a warning for `veilfs check`, located `DIR/NAME:LINE`:
    /// a line that could not be compiled (the rest of its file applies), or an entry
    /// of Claude Code's settings not applied as written.
    pub fn attach_imports(&mut self, found: Vec<Found>) -> Vec<PolicyError> {
        self.attach_imports_in(found, &claude::Context::default())
    }

    /// [`Policy::attach_imports`], placing the absolute paths of Claude Code's
    /// settings (`//abs`, `~/p`) with `cx`.
    pub fn attach_imports_in(
        &mut self,
        found: Vec<Found>,
        cx: &claude::Context,
    ) -> Vec<PolicyError> {
        let mut errors = Vec::new();
        for f in found {
            if !self.import_names.contains(&f.name) {
                continue;
            }
            if claude::is_name(&f.name) {
                self.attach_claude(&f, cx, &mut errors);
                continue;
            }
            let Some(syntax) = syntax_of(&f.name) else {
                log::warn!("not an ignore file veilfs reads: {:?}", f.name);
                continue;
            };
            if !well_formed(&f.dir) {
                log::warn!(
                    "ignore file {:?} in {:?}: not a workspace-relative directory",
                    f.name,
                    String::from_utf8_lossy(&f.dir)
                );
                continue;
            }
            let file_name = shown(&f.dir, &f.name);
            let at = |line: u32| Location {
                file: file_name.clone(),
                line,
                col: 1,
            };
            // Parsed once per way of reading it (with or without `!` lines).
            let mut parsed: [Option<Arc<IgnoreFile>>; 2] = [None, None];
            for r in &mut self.imports {
                let Some(order) = r.names.iter().position(|n| *n == f.name) else {
                    continue;
                };
                let syntax = if r.no_negation && syntax == Syntax::Gitignore {
                    Syntax::NoNegation
                } else {
                    syntax
                };
                let slot = &mut parsed[usize::from(syntax == Syntax::NoNegation)];
                let file = match slot {
                    Some(f) => f.clone(),
                    None => {
                        let (file, line_errors) =
                            IgnoreFile::parse(&f.name, &f.dir, &f.text, syntax);
                        errors.extend(line_errors.into_iter().map(|(line, message)| PolicyError {
                            at: at(line),
                            message: format!("{message} (the line is not applied)"),
                        }));
                        slot.insert(Arc::new(file)).clone()
                    }
                };
                let lines = file
                    .rules()
                    .iter()
                    .map(|l| r.pattern(r.action, l.text().to_string(), at(l.line()), l))
                    .collect();
                r.attach(f.dir.clone(), file, order, lines);
            }
        }
        errors
    }

    /// Attaches one Claude Code settings file (at the workspace root) to the rules
    /// importing it: one gitignore file per action, checked strictest first.
    fn attach_claude(&mut self, f: &Found, cx: &claude::Context, errors: &mut Vec<PolicyError>) {
        let file_name: Arc<str> = Arc::from(f.name.as_str());
        let at = |line: u32| Location {
            file: file_name.clone(),
            line,
            col: 1,
        };
        let t = match claude::translate(&f.text, cx) {
            Ok(t) => t,
            Err(message) => {
                // The reader refuses such a file before it gets here.
                errors.push(PolicyError { at: at(0), message });
                return;
            }
        };
        errors.extend(t.notes.iter().map(|n| PolicyError {
            at: at(n.at),
            message: n.message.clone(),
        }));
        for (rank, action) in [Action::ReadOnly, Action::Ask, Action::Deny]
            .into_iter()
            .enumerate()
        {
            let mapped: Vec<&claude::Mapped> =
                t.mapped.iter().filter(|m| m.action == action).collect();
            if mapped.is_empty() {
                continue;
            }
            // Line k of this text is the k-th entry: the lines decide, the entries
            // are what `explain` shows.
            let text: String = mapped.iter().map(|m| format!("{}\n", m.line)).collect();
            let (file, line_errors) = IgnoreFile::parse(&f.name, b"", &text, Syntax::Gitignore);
            for (line, message) in line_errors {
                let m = mapped[line as usize - 1];
                errors.push(PolicyError {
                    at: at(m.at),
                    message: format!("{:?}: {message} (not applied)", m.entry),
                });
            }
            let file = Arc::new(file);
            for r in &mut self.imports {
                let Some(pos) = r.names.iter().position(|n| *n == f.name) else {
                    continue;
                };
                let lines = file
                    .rules()
                    .iter()
                    .map(|l| {
                        let m = mapped[l.line() as usize - 1];
                        r.pattern(action, m.entry.clone(), at(m.at), l)
                    })
                    .collect();
                // Deny before ask before read-only, whichever file: the order.
                let order = rank * claude::NAMES.len() + pos;
                r.attach(Vec::new(), file.clone(), order, lines);
                if let Some((dir, _)) = f.name.rsplit_once('/') {
                    let dir = dir.as_bytes().to_vec();
                    if !r.held.contains(&dir) {
                        r.held.push(dir);
                    }
                }
            }
        }
    }
}

impl ImportRule {
    /// The pattern of the imported `line`, keyed by its line number: `text` and
    /// `at` are what `explain` shows (the line, or the settings entry it came from).
    fn pattern(
        &self,
        action: Action,
        text: String,
        at: Location,
        line: &super::ignore::Rule,
    ) -> (u32, Arc<Pattern>) {
        let p = Pattern {
            rule: self.rule,
            action,
            text,
            at,
            dir_only: line.dir_only(),
            anchored: false,
            glob: line.text().to_string(),
            why: self.why.clone(),
            imported: true,
            backup: false,
            routine: false,
        };
        (line.line(), Arc::new(p))
    }

    /// Holds `file`, found in `dir`, as the file at `order` of this rule.
    fn attach(
        &mut self,
        dir: Vec<u8>,
        file: Arc<IgnoreFile>,
        order: usize,
        mut lines: Vec<(u32, Arc<Pattern>)>,
    ) {
        lines.sort_by_key(|(l, _)| *l);
        let slot = self.files.entry(dir).or_default();
        let at = slot.partition_point(|a| a.order <= order);
        slot.insert(at, Attached { file, order, lines });
    }

    /// Whether some path may ask through this rule.
    pub(super) fn asks(&self) -> bool {
        if self.claude {
            self.files
                .values()
                .flatten()
                .any(|a| a.lines.iter().any(|(_, p)| p.action == Action::Ask))
        } else {
            self.action == Action::Ask
        }
    }
}

/// Each name the rules import, once, in rule order.
pub(super) fn names_of(rules: &[ImportRule]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rules {
        for n in &r.names {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories() {
        assert!(well_formed(b""));
        assert!(well_formed(b"a/b"));
        assert!(!well_formed(b"/a"));
        assert!(!well_formed(b"a/"));
        assert!(!well_formed(b"a/../b"));
        assert!(!well_formed(b"."));
    }
}
