//! The policy file: TOML text in, a list of rules with their source locations out.
//!
//! This module only parses and validates the *shape* of the file (keys, actions,
//! pattern syntax that does not need the glob compiler). Every error carries the
//! `file:line:col` of the offending token and says what was expected. It does no I/O:
//! the caller reads the file and passes its text and the name to print.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::Action;

/// Where something was written: the policy's name (a path or `<built-in>`), 1-based
/// line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: Arc<str>,
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// One problem with a policy file, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    pub at: Location,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error: {}", self.at, self.message)
    }
}

/// Every problem found in one policy file (at least one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    pub errors: Vec<PolicyError>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A rule as written: its action and its patterns, each with its location.
#[derive(Clone, Debug)]
pub struct RawRule {
    pub action: Action,
    pub at: Location,
    pub patterns: Vec<(String, Location)>,
    /// The ignore files whose lines are this rule's patterns (`import = ...`), each
    /// with its location; empty for a rule with `paths`. A rule has one or the other.
    pub imports: Vec<(String, Location)>,
    /// The rule's optional `why`: a person's reason for it, shown by `explain`.
    pub why: Option<Arc<str>>,
    /// `negation = false`: the imported files' `!` lines are not applied, so that
    /// no file re-includes what another one hides.
    pub no_negation: bool,
    /// `backups = true`: each pattern also names the backup copies of what it
    /// names (`.netrc~`, `.aws.bak/`, vim's swap file; the module `policy::backups`).
    pub backups: bool,
    /// `routine = true`: tools try these paths every time they start (histories,
    /// `.viminfo`), so `veilfs run` counts their refusals without naming them.
    pub routine: bool,
}

/// A parsed policy file, before glob compilation.
#[derive(Clone, Debug)]
pub struct RawPolicy {
    pub name: Arc<str>,
    pub default: Action,
    pub default_at: Option<Location>,
    pub rules: Vec<RawRule>,
    /// `extends` as written (`"default"`, `"home-default"`, `"none"`,
    /// `"agent:NAME"`, or a list of them, joined with `, `), if given.
    pub extends: Option<String>,
    /// The agent profiles its rules hold (`extends = "agent:NAME"`, or the agent
    /// of the session, see `parse_with_agent`).
    pub agents: Vec<&'static str>,
    /// Where the file's own rules start in `rules` (those before come from
    /// `extends`).
    pub own_from: usize,
    /// The session's agent, whose profile `parse_with_agent` put in (kept, so
    /// that the policy is compiled again with it: a reload).
    pub implied: Option<&'static super::agents::Profile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    /// Built-in policies whose rules come first (see [`parse`]).
    extends: Option<Spanned<OneOrMany>>,
    default: Option<Spanned<String>>,
    #[serde(default)]
    rules: Vec<Spanned<RuleShape>>,
    /// The environment policy of `veilfs run` (`crate::run::env::parse_env_section`
    /// reads it), so that one file holds both; not part of the path policy.
    #[serde(default, rename = "env")]
    _env: Option<serde::de::IgnoredAny>,
    /// The network lists of `veilfs run` (`crate::policy::net::parse_network_section`
    /// reads them); not part of the path policy.
    #[serde(default, rename = "network")]
    _network: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleShape {
    /// Required, but for a rule importing Claude Code's settings (whose entries
    /// carry their own actions).
    action: Option<Spanned<String>>,
    paths: Option<Spanned<Vec<Spanned<String>>>>,
    import: Option<Spanned<OneOrMany>>,
    why: Option<String>,
    /// With `import`: `false` leaves the files' `!` lines unapplied.
    negation: Option<Spanned<bool>>,
    /// With `paths`: `true` names each pattern's backup copies too.
    backups: Option<Spanned<bool>>,
    /// `true`: refusals by this rule are expected, counted but not named by `run`.
    routine: Option<bool>,
}

/// `import = ".cursorignore"` or `import = [".cursorignore", ".aiexclude"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    /// The names, as written.
    fn written(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }

    /// The names, each with its byte offset in `text` (searched for inside `span`,
    /// where the value was written: serde cannot carry spans through an untagged
    /// enum).
    fn names(&self, text: &str, span: std::ops::Range<usize>) -> Vec<(String, usize)> {
        let names = match self {
            OneOrMany::One(s) => std::slice::from_ref(s),
            OneOrMany::Many(v) => v.as_slice(),
        };
        let mut from = span.start;
        names
            .iter()
            .map(|n| {
                let at = text
                    .get(from..span.end)
                    .and_then(|t| t.find(n.as_str()))
                    .map_or(from, |i| from + i);
                // The quote before the name, as for a pattern in `paths`.
                let start = if at > span.start { at - 1 } else { at };
                from = (at + n.len()).min(span.end);
                (n.clone(), start)
            })
            .collect()
    }
}

/// Maps byte offsets of one text to 1-based line and column (columns count chars).
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    name: Arc<str>,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(name: Arc<str>, text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, name, starts }
    }

    pub(crate) fn at(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset);
        let col = self.text[self.starts[line - 1]..offset].chars().count() + 1;
        Location {
            file: self.name.clone(),
            line: line as u32,
            col: col as u32,
        }
    }
}

const ACTIONS: &str = r#""allow", "read-only", "ask" or "deny""#;

/// The ignore files a rule may `import`, as error messages list them.
fn importable() -> String {
    let names: Vec<String> = super::ignore::NAMES
        .iter()
        .chain(super::claude::NAMES.iter())
        .map(|n| format!("{n:?}"))
        .collect();
    names.join(", ")
}

const EXTENDS: &str = r#""default" (the built-in workspace policy), "home-default" (the built-in home policy of `veilfs run`), "agent:NAME" (an agent's profile, after the built-in default) or "none" (no built-in rules), or a list of them (`["home-default", "agent:claude"]`)"#;

/// The text of a built-in policy a file may extend, and the name its locations
/// print as.
fn builtin_text(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "default" => Some((super::BUILTIN_NAME, super::DEFAULT_POLICY)),
        "home-default" => Some((super::BUILTIN_HOME_NAME, super::HOME_DEFAULT_POLICY)),
        _ => None,
    }
}

/// What an unknown action may have been meant as: ` (did you mean "read-only"?)`.
fn did_you_mean(s: &str) -> String {
    let k: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let meant = match k.as_str() {
        "readonly" | "ro" | "read" | "readable" | "protect" | "protected" | "nowrite"
        | "immutable" => "read-only",
        "denied" | "block" | "blocked" | "hide" | "hidden" | "ignore" | "exclude" | "forbid"
        | "reject" | "none" | "deny" => "deny",
        "allowed" | "permit" | "rw" | "readwrite" | "show" | "visible" | "allow" => "allow",
        "asks" | "prompt" | "confirm" | "approve" | "question" | "ask" => "ask",
        _ => return String::new(),
    };
    format!(" (did you mean {meant:?}?)")
}

fn parse_action(s: &str) -> Option<Action> {
    match s {
        "allow" => Some(Action::Allow),
        "read-only" => Some(Action::ReadOnly),
        "ask" => Some(Action::Ask),
        "deny" => Some(Action::Deny),
        _ => None,
    }
}

/// Parses policy text. `name` is what error messages print as the file.
///
/// A file that is not TOML of the right shape is an `Err`. Otherwise the rules that
/// could be read come back with the errors found in the others (unknown actions,
/// malformed patterns), so that one run reports every problem.
pub fn parse(name: &str, text: &str) -> Result<(RawPolicy, Vec<PolicyError>), LoadError> {
    let name: Arc<str> = Arc::from(name);
    let index = LineIndex::new(name.clone(), text);
    let shape: FileShape = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        LoadError {
            errors: vec![PolicyError {
                at: index.at(at),
                message: shape_message(e.message(), text, at),
            }],
        }
    })?;

    let mut errors = Vec::new();
    let (bases, agents) = bases(shape.extends.as_ref(), &index, &mut errors)?;
    // The default of the last built-in policy.
    let base_default = bases.last().map(|b| (b.default, b.default_at.clone()));
    let (default, default_at) = match &shape.default {
        None => base_default.unwrap_or((Action::Allow, None)),
        Some(d) => {
            let at = index.at(d.span().start);
            match parse_action(d.get_ref()) {
                Some(a) => (a, Some(at)),
                None => {
                    errors.push(PolicyError {
                        at: at.clone(),
                        message: format!(
                            "unknown default action {:?}{}: expected {ACTIONS}",
                            d.get_ref(),
                            did_you_mean(d.get_ref())
                        ),
                    });
                    (Action::Deny, Some(at))
                }
            }
        }
    };

    // The base's rules first: the file's own rules come later, so they win where
    // both match (last match wins), and `explain` names the base's by its location.
    let mut rules: Vec<RawRule> = bases.into_iter().flat_map(|b| b.rules).collect();
    let own_from = rules.len();
    for (i, rule) in shape.rules.iter().enumerate() {
        if let Some(r) = parse_rule(i, rule, (&index, text), &mut errors) {
            rules.push(r);
        }
    }

    Ok((
        RawPolicy {
            name,
            default,
            default_at,
            rules,
            extends: shape.extends.map(|e| e.into_inner().written().join(", ")),
            agents,
            own_from,
            implied: None,
        },
        errors,
    ))
}

/// The built-in policies `extends` names, each parsed, in order, and the agents
/// it names (whose profiles add no rules here). One `"agent:NAME"` alone stands
/// for `["default", "agent:NAME"]`: naming an agent never drops the built-in
/// rules. An unknown name is an error in `errors`.
fn bases(
    extends: Option<&Spanned<OneOrMany>>,
    index: &LineIndex<'_>,
    errors: &mut Vec<PolicyError>,
) -> Result<(Vec<RawPolicy>, Vec<&'static str>), LoadError> {
    let Some(e) = extends else {
        return Ok((Vec::new(), Vec::new()));
    };
    let at = index.at(e.span().start);
    let mut names = e.get_ref().written();
    if let [one] = names.as_slice()
        && one.starts_with(AGENT)
    {
        names.insert(0, "default".to_string());
    }
    let (mut out, mut agents) = (Vec::new(), Vec::new());
    for name in &names {
        // Said on purpose: no built-in rules (`check` does not warn).
        if name == "none" && names.len() == 1 {
            continue;
        }
        if let Some(agent) = name.strip_prefix(AGENT) {
            // Named, not inserted: `veilfs run` holds what the agent runs later
            // by a guard in both mounts, and its state and login in the home
            // directory's (see `parse_with_agent`).
            match super::agents::profile(agent) {
                Some(p) => agents.push(p.name),
                None => errors.push(PolicyError {
                    at: at.clone(),
                    message: format!(
                        "unknown agent {agent:?} in `extends`: the profiles are {}",
                        super::agents::names()
                    ),
                }),
            }
            continue;
        }
        match builtin_text(name) {
            Some((base_name, text)) => out.push(parse(base_name, text)?.0),
            None => errors.push(PolicyError {
                at: at.clone(),
                message: format!(
                    "unknown built-in policy {name:?} in `extends`: expected {EXTENDS}"
                ),
            }),
        }
    }
    Ok((out, agents))
}

/// What names a profile in `extends`.
const AGENT: &str = "agent:";

/// A profile's rules, parsed.
fn profile_raw(p: &super::agents::Profile) -> Result<RawPolicy, LoadError> {
    Ok(parse(&super::agents::location_name(p), p.text)?.0)
}

/// Parses as [`parse`] does, for a session whose agent is `agent` (`veilfs run
/// --agent`, or found from the command's name): its profile's rules come after the
/// built-in rules (those of `extends`, or all of a built-in policy's own text) and
/// before the file's own, so that the person's rules still win; unless `extends`
/// already names it.
pub fn parse_with_agent(
    name: &str,
    text: &str,
    agent: Option<&'static super::agents::Profile>,
) -> Result<(RawPolicy, Vec<PolicyError>), LoadError> {
    let (mut raw, errors) = parse(name, text)?;
    raw.implied = agent;
    // Only on the built-in rules, which it refines (a login they hide): a policy
    // of the person's own that starts from nothing gets none of its allows.
    let on_built_in = name == super::BUILTIN_NAME
        || name == super::BUILTIN_HOME_NAME
        || raw.extends.as_deref().is_some_and(|e| {
            let names: Vec<&str> = e.split(", ").collect();
            names
                .iter()
                .any(|n| *n == "default" || *n == "home-default")
                || matches!(names.as_slice(), [one] if one.starts_with(AGENT))
        });
    let Some(p) = agent.filter(|_| on_built_in) else {
        return Ok((raw, errors));
    };
    let profile = profile_raw(p)?;
    let at = if name == super::BUILTIN_NAME || name == super::BUILTIN_HOME_NAME {
        raw.rules.len()
    } else {
        raw.own_from
    };
    let n = profile.rules.len();
    raw.rules.splice(at..at, profile.rules);
    raw.own_from = at + n;
    if !raw.agents.contains(&p.name) {
        raw.agents.push(p.name);
    }
    Ok((raw, errors))
}

/// Rule `i` (0-based) of the file whose `text` `index` locates, as written; `None`
/// (with the errors said in `errors`) when it cannot be read.
fn parse_rule(
    i: usize,
    rule: &Spanned<RuleShape>,
    (index, text): (&LineIndex, &str),
    errors: &mut Vec<PolicyError>,
) -> Option<RawRule> {
    let r = rule.get_ref();
    let rule_at = index.at(rule.span().start);
    let claude = claude_import(r, text);
    let (action, action_at) = match (&r.action, claude) {
        (None, true) => (Action::Deny, rule_at.clone()),
        (None, false) => {
            errors.push(PolicyError {
                at: rule_at.clone(),
                message: "missing key `action`".into(),
            });
            return None;
        }
        (Some(a), true) => {
            errors.push(PolicyError {
                at: index.at(a.span().start),
                message: format!(
                    "rule {}: a rule importing Claude Code's settings takes no `action`: \
                     each entry says its own (Read deny: deny, Edit deny: read-only, \
                     ask: ask)",
                    i + 1
                ),
            });
            return None;
        }
        (Some(a), false) => {
            let action_at = index.at(a.span().start);
            match parse_action(a.get_ref()) {
                Some(act) => (act, action_at),
                None => {
                    errors.push(PolicyError {
                        at: action_at.clone(),
                        message: format!(
                            "rule {}: unknown action {:?}{}: expected {ACTIONS}",
                            i + 1,
                            a.get_ref(),
                            did_you_mean(a.get_ref())
                        ),
                    });
                    return None;
                }
            }
        }
    };
    let (patterns, imports) = rule_sources(i, r, (&rule_at, claude), (index, text), errors);
    let no_negation = match &r.negation {
        Some(n) if r.import.is_none() || claude => {
            errors.push(PolicyError {
                at: index.at(n.span().start),
                message: format!(
                    "rule {}: `negation` goes with `import` of ignore files only",
                    i + 1
                ),
            });
            false
        }
        Some(n) => !*n.get_ref(),
        None => false,
    };
    let backups = match &r.backups {
        Some(b) if r.paths.is_none() => {
            errors.push(PolicyError {
                at: index.at(b.span().start),
                message: format!(
                    "rule {}: `backups` goes with `paths` only (an imported file's \
                     lines are matched as they are written)",
                    i + 1
                ),
            });
            false
        }
        Some(b) => *b.get_ref(),
        None => false,
    };
    Some(RawRule {
        action,
        at: action_at,
        patterns,
        imports,
        why: r.why.as_deref().map(Arc::from),
        no_negation,
        backups,
        routine: r.routine.unwrap_or(false),
    })
}

/// The patterns (`paths`) or imported files (`import`) of rule `i` as written,
/// each with its location; the errors said in `errors`. `rule_at`: where the rule
/// starts; `claude`: the rule imports Claude Code's settings.
fn rule_sources(
    i: usize,
    r: &RuleShape,
    (rule_at, claude): (&Location, bool),
    (index, text): (&LineIndex, &str),
    errors: &mut Vec<PolicyError>,
) -> Patterns {
    let mut patterns = Vec::new();
    let mut imports = Vec::new();
    match (&r.paths, &r.import) {
        (Some(_), Some(imp)) => errors.push(PolicyError {
            at: index.at(imp.span().start),
            message: format!(
                "rule {}: both `paths` and `import`: a rule takes exactly one of them",
                i + 1
            ),
        }),
        (None, None) => errors.push(PolicyError {
            at: rule_at.clone(),
            message: format!(
                "rule {}: missing key `paths` (or `import`): a rule takes exactly one of them",
                i + 1
            ),
        }),
        (Some(paths), None) => {
            if paths.get_ref().is_empty() {
                errors.push(PolicyError {
                    at: index.at(paths.span().start),
                    message: format!(
                        "rule {}: `paths` is empty: expected at least one pattern",
                        i + 1
                    ),
                });
            }
            for p in paths.get_ref() {
                let at = index.at(p.span().start);
                match check_pattern_shape(p.get_ref()) {
                    Ok(()) => patterns.push((p.get_ref().clone(), at)),
                    Err(why) => errors.push(PolicyError {
                        at,
                        message: format!("rule {}: pattern {:?}: {why}", i + 1, p.get_ref()),
                    }),
                }
            }
        }
        (None, Some(imp)) => {
            let names = imp.get_ref().names(text, imp.span());
            if names.is_empty() {
                errors.push(PolicyError {
                    at: index.at(imp.span().start),
                    message: format!(
                        "rule {}: `import` is empty: expected at least one file name ({})",
                        i + 1,
                        importable()
                    ),
                });
            }
            let mixed = claude && names.iter().any(|(n, _)| !super::claude::is_name(n));
            for (n, offset) in names {
                let at = index.at(offset);
                if mixed && !super::claude::is_name(&n) {
                    errors.push(PolicyError {
                        at,
                        message: format!(
                            "rule {}: cannot import {:?} beside Claude Code's settings: \
                             import the settings in a rule of their own, without `action`",
                            i + 1,
                            n
                        ),
                    });
                } else if super::ignore::syntax_of(&n).is_some() || super::claude::is_name(&n) {
                    imports.push((n, at));
                } else {
                    errors.push(PolicyError {
                        at,
                        message: format!(
                            "rule {}: cannot import {:?}: expected one of the ignore \
                             files veilfs reads: {}",
                            i + 1,
                            n,
                            importable()
                        ),
                    });
                }
            }
        }
    }
    (patterns, imports)
}

/// Patterns and imported file names, each with its location.
type Patterns = (Vec<(String, Location)>, Vec<(String, Location)>);

/// Whether a rule imports a Claude Code settings file (then it takes no `action`).
fn claude_import(r: &RuleShape, text: &str) -> bool {
    r.import.as_ref().is_some_and(|imp| {
        imp.get_ref()
            .names(text, imp.span())
            .iter()
            .any(|(n, _)| super::claude::is_name(n))
    })
}

/// [`toml_message`], with the fix for the mistakes people make most: a string
/// where a list is wanted (`paths = ".env"`).
fn shape_message(m: &str, text: &str, at: usize) -> String {
    if let Some(rest) = m.trim_end().strip_prefix("invalid type: string ")
        && rest.ends_with("expected a sequence")
    {
        // The key the value was given to: the last `key =` before it on its line.
        let line_start = text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
        let key = text[line_start..at.min(text.len())]
            .split('=')
            .next()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .unwrap_or("paths");
        let value = rest
            .trim_end_matches("expected a sequence")
            .trim_end_matches([',', ' ']);
        return format!("`{key}` must be a list: `{key} = [{value}]`");
    }
    toml_message(m)
}

/// serde's messages name Rust-side things; keep them but make the common ones read
/// like the policy language.
pub(crate) fn toml_message(m: &str) -> String {
    let m = m.trim_end();
    if let Some(rest) = m.strip_prefix("unknown field ") {
        return format!("unknown key {rest}");
    }
    if let Some(rest) = m.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    m.to_string()
}

/// The checks a pattern must pass before it reaches the glob compiler: the ones that
/// would otherwise produce a pattern that can never match a workspace path.
fn check_pattern_shape(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("empty pattern: expected a glob such as \".env\" or \"secrets/\"".into());
    }
    if p.contains('\0') {
        return Err("contains a NUL byte, which no file name can hold".into());
    }
    let body = p.strip_prefix('/').unwrap_or(p);
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Err("names no path: expected a glob after the slashes".into());
    }
    for seg in body.split('/') {
        match seg {
            "" => return Err("empty path segment (`//`): expected one `/` between names".into()),
            "." | ".." => {
                return Err(format!(
                    "`{seg}` segment: paths are matched after normalisation, so it can never match"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
