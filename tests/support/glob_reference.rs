//! The differential reference for the policy engine's glob matching, shared by
//! `tests/glob_differential.rs` (a proptest) and `fuzz/fuzz_targets/glob.rs` (a
//! cargo-fuzz target): policies and paths are built from the same token tables, and
//! the expected decision comes from one `globset::GlobMatcher` per pattern (the
//! README's settings), asked the slow, obvious way, with the documented segment walk.

use globset::{GlobBuilder, GlobMatcher};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use veilfs::{Action, Policy};

pub const ACTIONS: [(&str, Action); 3] = [
    ("allow", Action::Allow),
    ("read-only", Action::ReadOnly),
    ("deny", Action::Deny),
];

/// Pieces a pattern is made of: the whole glob syntax (POSIX and negated classes,
/// `]` first, ranges, alternatives with nested classes and `/`, escapes, `**`,
/// separators), some malformed on purpose (those must be refused, never ignored).
pub const TOKENS: &[&str] = &[
    "a",
    "b",
    "ab",
    ".",
    "-",
    "k",
    "A",
    "5",
    "é",
    ".key",
    ".pem",
    "*",
    "*",
    "?",
    "**",
    "**",
    "/",
    "/",
    "/",
    "[ab]",
    "[!ab]",
    "[^a]",
    "[]a]",
    "[!]a]",
    "[a-c]",
    "[0-9]",
    "[[:digit:]]",
    "[[:upper:]]",
    "[![:alpha:]]",
    "[[:alpha:][:digit:]]",
    "[-a]",
    "[a-]",
    "[/]",
    "[.-0]",
    "[é]",
    "{a,b}",
    "{a*,[0-9]}",
    "{[[:digit:]],x/y}",
    "{,a}",
    "{a,{b,c}}",
    "{**/a,b}",
    r"\*",
    r"\[",
    r"\{",
    r"\\",
    r"\a",
    r"\]",
    "[",
    "]",
    "{",
    "}",
    ",",
    r"\",
];

/// Pieces a path's names are made of: what the tokens can match, and bytes that are
/// not UTF-8.
pub const NAME_PIECES: &[&[u8]] = &[
    b"a",
    b"b",
    b"c",
    b"ab",
    b".",
    b"-",
    b"k",
    b"A",
    b"5",
    b"0",
    b".key",
    b".pem",
    b"]",
    b"[",
    b"{",
    b"}",
    b",",
    b"*",
    b"?",
    b"\\",
    b"x",
    b"y",
    "é".as_bytes(),
    b"\xff",
    b"\xc3",
];

#[derive(Clone, Debug)]
pub struct Rule {
    pub action: usize,
    pub patterns: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Spec {
    pub default: usize,
    pub rules: Vec<Rule>,
}

/// A pattern from token indexes, with an optional leading and trailing `/`.
pub fn pattern(lead: bool, tokens: &[usize], trail: bool) -> String {
    let mut p = String::new();
    if lead {
        p.push('/');
    }
    for &t in tokens {
        p += TOKENS[t % TOKENS.len()];
    }
    if trail {
        p.push('/');
    }
    p
}

/// A path's segments from piece indexes: each inner `Vec` is one name.
pub fn path(names: &[Vec<usize>]) -> Vec<Vec<u8>> {
    names
        .iter()
        .map(|pieces| {
            let mut n: Vec<u8> = pieces
                .iter()
                .flat_map(|&i| NAME_PIECES[i % NAME_PIECES.len()].iter().copied())
                .collect();
            if n.is_empty() || n == b"." || n == b".." {
                n.push(b'a');
            }
            n
        })
        .collect()
}

impl Spec {
    pub fn toml(&self) -> String {
        let mut s = format!("default = \"{}\"\n", ACTIONS[self.default % 3].0);
        for r in &self.rules {
            let pats: Vec<String> = r.patterns.iter().map(|p| toml_string(p)).collect();
            s += &format!(
                "\n[[rules]]\naction = \"{}\"\npaths = [{}]\n",
                ACTIONS[r.action % 3].0,
                pats.join(", ")
            );
        }
        s
    }
}

/// A TOML basic string holding `p` exactly.
fn toml_string(p: &str) -> String {
    let mut s = String::from("\"");
    for c in p.chars() {
        match c {
            '\\' => s += "\\\\",
            '"' => s += "\\\"",
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// How the policy language splits a pattern as written (the README's rules).
pub fn split(p: &str) -> (&str, bool, bool) {
    let (body, dir_only) = p.strip_suffix('/').map_or((p, false), |b| (b, true));
    let (body, anchored) = body
        .strip_prefix('/')
        .map_or((body, body.contains('/')), |b| (b, true));
    (body, anchored, dir_only)
}

/// Whether `check` must refuse this pattern: globset refuses it, or its shape can
/// never name a workspace path (empty, `//`, `.` or `..` segments).
pub fn refused(p: &str) -> bool {
    let (body, _, _) = split(p);
    if body.is_empty()
        || body
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return true;
    }
    glob(body).is_none()
}

fn glob(body: &str) -> Option<GlobMatcher> {
    let g = GlobBuilder::new(body)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()?;
    // globset compiles a matcher with an `expect`; a pattern whose regex does not
    // compile counts as refused (none of the token tables' patterns come close).
    std::panic::catch_unwind(|| g.compile_matcher()).ok()
}

/// (rule index, action, anchored, dir_only, matcher, glob text)
pub type RefPattern = (usize, Action, bool, bool, GlobMatcher, String);

/// The semantics of the README, evaluated the slow, obvious way.
pub struct Reference {
    default: Action,
    patterns: Vec<RefPattern>,
}

impl Reference {
    /// The evaluator for patterns already compiled (one matcher each), for tests
    /// that build their own (`tests/policy_props.rs`; unused where the file is
    /// included elsewhere).
    #[allow(dead_code)]
    pub fn from_patterns(default: Action, patterns: Vec<RefPattern>) -> Reference {
        Reference { default, patterns }
    }

    /// `None` when some pattern must be refused.
    pub fn new(spec: &Spec) -> Option<Reference> {
        let mut patterns = Vec::new();
        for (i, r) in spec.rules.iter().enumerate() {
            for p in &r.patterns {
                if refused(p) {
                    return None;
                }
                let (body, anchored, dir_only) = split(p);
                let m = glob(body)?;
                patterns.push((
                    i,
                    ACTIONS[r.action % 3].1,
                    anchored,
                    dir_only,
                    m,
                    body.into(),
                ));
            }
        }
        Some(Reference {
            default: ACTIONS[spec.default % 3].1,
            patterns,
        })
    }

    fn own(&self, path: &[u8], name: &[u8], is_dir: bool) -> Option<Action> {
        let mut best: Option<(usize, Action)> = None;
        for (rule, action, anchored, dir_only, m, _) in &self.patterns {
            if *dir_only && !is_dir {
                continue;
            }
            let subject = if *anchored { path } else { name };
            if m.is_match(OsStr::from_bytes(subject)) && best.is_none_or(|(r, _)| *rule >= r) {
                best = Some((*rule, *action));
            }
        }
        best.map(|(_, a)| a)
    }

    /// The most permissive action of the non-deny anchored patterns whose literal
    /// directory prefix (segments before the first with a glob character) has `dir`.
    fn admitted(&self, dir: &[u8]) -> Option<Action> {
        if self.default == Action::Allow {
            return None;
        }
        let mut out: Option<Action> = None;
        for (_, action, anchored, _, _, glob) in &self.patterns {
            if !anchored || *action == Action::Deny {
                continue;
            }
            let segs: Vec<&str> = glob.split('/').collect();
            let mut prefix = String::new();
            for seg in &segs[..segs.len() - 1] {
                if seg.contains(['*', '?', '[', ']', '{', '}', '\\']) {
                    break;
                }
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix += seg;
                if prefix.as_bytes() == dir {
                    out = Some(out.map_or(*action, |o| o.min(*action)));
                }
            }
        }
        out
    }

    /// The decision for a path, walking it outermost first.
    pub fn decide(&self, segs: &[Vec<u8>], is_dir: bool) -> Action {
        let mut constraint = Action::Allow;
        let mut ruled = false;
        for i in 0..segs.len() {
            if constraint == Action::Deny {
                return Action::Deny;
            }
            let path = segs[..=i].join(&b'/');
            let dir = i + 1 < segs.len() || is_dir;
            match self.own(&path, &segs[i], dir) {
                Some(a) => {
                    constraint = constraint.max(a);
                    ruled = true;
                }
                None if ruled => {}
                None => {
                    let act = constraint.max(self.default);
                    constraint = match self.admitted(&path) {
                        Some(a) if act != Action::Allow && dir => constraint.max(a),
                        _ => act,
                    };
                }
            }
        }
        constraint
    }
}

/// Checks one policy and one path: the policy is refused exactly when a pattern must
/// be, and otherwise decides as the reference does. `Err` says how they differ.
pub fn check(spec: &Spec, segs: &[Vec<u8>], is_dir: bool) -> Result<(), String> {
    let text = spec.toml();
    let parsed = Policy::parse("diff.toml", &text);
    let reference = Reference::new(spec);
    let (policy, reference) = match (parsed, reference) {
        (Ok(p), Some(r)) => (p, r),
        (Err(_), None) => return Ok(()),
        (Ok(_), None) => return Err(format!("accepted a pattern globset refuses:\n{text}")),
        (Err(e), Some(_)) => {
            return Err(format!("refused a pattern globset accepts:\n{text}\n{e}"));
        }
    };
    let full = segs.join(&b'/');
    let got = policy.decide(&full, is_dir);
    // `veilfs.toml` at any depth is at least read-only whatever the rules say.
    let mut want = reference.decide(segs, is_dir);
    if segs.last().is_some_and(|n| n == b".veilfs.toml") {
        want = want.max(Action::ReadOnly);
    }
    if got.action != want {
        return Err(format!(
            "policy:\n{text}\npath {:?} (dir: {is_dir}): engine {} ({}), globset {want}",
            String::from_utf8_lossy(&full),
            got.action,
            got.why()
        ));
    }
    Ok(())
}
