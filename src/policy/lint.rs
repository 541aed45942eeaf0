//! Lint: patterns that can never take effect as written.
//!
//! * An `allow` or `read-only` pattern beneath a directory that the policy makes more
//!   restrictive (denial is recursive: `deny secrets/` then `allow secrets/x`), and an
//!   `allow` beneath an `ask` directory (it cannot skip the question).
//! * A pattern that a later rule's pattern always overrides (the later one matches
//!   everything it matches), so the earlier rule never decides for it.
//! * The same pattern twice in one rule.
//!
//! Warnings never make a policy unusable; `veilfs check` prints them and exits 0.

use std::collections::HashMap;
use std::fmt;

use super::{Action, Location, Pattern, Policy, Reason, literal_dir_prefixes};

/// One lint finding, located at the pattern it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub at: Location,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: warning: {}", self.at, self.message)
    }
}

fn has_meta(glob: &str) -> bool {
    glob.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

pub(super) fn lint(policy: &Policy, workspace: Option<&[u8]>) -> Vec<Warning> {
    let mut out = file_warnings(policy);
    for i in policy.own_patterns() {
        out.extend(shape_warning(&policy.patterns[i], workspace));
    }
    let pats = &policy.patterns;

    // Duplicates within a rule, and the last occurrence of each glob for shadowing.
    let mut last: HashMap<(&str, bool), usize> = HashMap::new();
    for (i, p) in pats.iter().enumerate() {
        last.insert((p.glob.as_str(), p.anchored), i);
    }

    for (i, p) in pats.iter().enumerate() {
        // A backup copies' pattern is made, not written: what is said of the
        // pattern as written is said of it once.
        if p.backup {
            continue;
        }
        if let Some(w) = beneath_restriction(policy, p) {
            out.push(w);
        }
        if let Some(j) = overridden_by(policy, i, &last) {
            let q = &pats[j];
            let message = if q.rule == p.rule && q.glob == p.glob {
                format!("rule {}: pattern {:?} is listed twice", p.rule, p.text)
            } else if q.rule == p.rule {
                format!(
                    "rule {} pattern {:?} is redundant: {:?} in the same rule matches \
                     every path it matches",
                    p.rule, p.text, q.text
                )
            } else if q.action == p.action {
                format!(
                    "rule {} pattern {:?} is redundant: {q} also matches every path it matches",
                    p.rule, p.text
                )
            } else {
                format!(
                    "rule {} pattern {:?} never takes effect: {q} matches every path it \
                     matches and, coming later, decides instead ({})",
                    p.rule, p.text, q.action
                )
            };
            out.push(Warning {
                at: p.at.clone(),
                message,
            });
        }
    }
    out
}

/// An allow/read-only pattern whose literal directory prefix is already more
/// restrictive than the pattern: the pattern cannot loosen what lies beneath.
fn beneath_restriction(policy: &Policy, p: &Pattern) -> Option<Warning> {
    if p.action == Action::Deny || !p.anchored {
        return None;
    }
    for dir in literal_dir_prefixes(&p.glob) {
        let d = policy.decide(dir.as_bytes(), true);
        if d.action == Action::Ask && p.action == Action::Allow {
            return Some(Warning {
                at: p.at.clone(),
                message: format!(
                    "rule {} pattern {:?} cannot skip the question: `{dir}` asks ({}), \
                     and an `allow` beneath an `ask` directory still asks",
                    p.rule,
                    p.text,
                    d.why()
                ),
            });
        }
        // A read-only rule beneath a question holds once the question is approved.
        if d.action > p.action && !(d.action == Action::Ask && p.action == Action::ReadOnly) {
            let cause = match &d.reason {
                Reason::Ancestor { .. } => d.why(),
                _ => format!("`{dir}` is {} by {}", d.action.past_tense(), d.why()),
            };
            return Some(Warning {
                at: p.at.clone(),
                message: format!(
                    "rule {} pattern {:?} can never take effect: {cause}, and nothing \
                     beneath it can be more permissive",
                    p.rule, p.text
                ),
            });
        }
    }
    None
}

/// A later pattern that matches everything pattern `i` matches, if any.
fn overridden_by(policy: &Policy, i: usize, last: &HashMap<(&str, bool), usize>) -> Option<usize> {
    let pats = &policy.patterns;
    let p = &pats[i];
    // A later pattern that covers `p` must also cover its types: a directory-only
    // pattern covers only a directory-only one.
    let covers = |j: usize| j > i && (!pats[j].dir_only || p.dir_only);

    if let Some(&j) = last.get(&(p.glob.as_str(), p.anchored))
        && covers(j)
    {
        return Some(j);
    }
    if let Some(j) = (i + 1..pats.len()).rev().find(|&j| {
        covers(j)
            && matches!(pats[j].glob.as_str(), "*" | "**")
            && (!pats[j].anchored || pats[j].glob == "**")
    }) {
        return Some(j);
    }
    if has_meta(&p.glob) {
        return None;
    }
    // A literal pattern: ask the compiled index which later patterns match its text.
    // An unanchored literal names any entry with that name, so only unanchored
    // patterns (matched by name) can cover it.
    policy
        .matching_patterns(p.glob.as_bytes())
        .into_iter()
        .filter(|&j| covers(j) && (p.anchored || !pats[j].anchored))
        .max()
}

/// A policy file that keeps nothing of the built-in default without saying so, or
/// that is empty.
fn file_warnings(policy: &Policy) -> Vec<Warning> {
    if policy.name.starts_with('<') || policy.raw.extends.is_some() {
        return Vec::new();
    }
    let at = Location {
        file: policy.name.clone(),
        line: 1,
        col: 1,
    };
    let message = if policy.raw.rules.is_empty() && policy.default == Action::Allow {
        "the policy is empty: it allows everything (nothing is hidden, not even .env); \
         start from the built-in default with `extends = \"default\"` (`veilfs init` \
         writes one)"
            .to_string()
    } else {
        "the policy does not extend the built-in default, so .env, *.pem, *.key, \
         secrets/, .ssh/ and the other credential files are hidden only where its own \
         rules say so; add `extends = \"default\"` at the top (its rules first, yours \
         win), or `extends = \"none\"` to say you mean it"
            .to_string()
    };
    vec![Warning { at, message }]
}

/// The first directories of absolute paths: an anchored pattern starting with one
/// of them was likely written as an absolute path.
const ROOT_DIRS: [&str; 11] = [
    "home", "Users", "root", "tmp", "var", "etc", "opt", "mnt", "srv", "usr", "media",
];

/// A pattern that can never do what its shape says it was meant to.
fn shape_warning(p: &Pattern, workspace: Option<&[u8]>) -> Option<Warning> {
    let warn = |message: String| {
        Some(Warning {
            at: p.at.clone(),
            message: format!("rule {} pattern {:?} {message}", p.rule, p.text),
        })
    };
    let segs: Vec<&str> = p.glob.split('/').collect();
    if let Some(seg) = segs.iter().find(|s| s.contains("***")) {
        return warn(format!(
            "matches every path: in {seg:?}, `***` is not a glob of its own (a `*` \
             matches within a name, `**` as a whole segment spans directories); write \
             `**` for everything below, or `*` for one name"
        ));
    }
    if let Some(seg) = segs.iter().find(|s| s.contains("**") && **s != "**") {
        let fix = if let Some(rest) = seg.strip_prefix("**") {
            format!("**/*{rest}")
        } else if let Some(rest) = seg.strip_suffix("**") {
            format!("{rest}*/**")
        } else {
            seg.replace("**", "*/**/*")
        };
        let fixed = p.text.replacen(seg, &fix, 1);
        return warn(format!(
            "does not span directories: `**` does only as a whole segment, so {seg:?} \
             is {:?} (one name); write {fixed:?}",
            seg.replace("**", "*")
        ));
    }
    if p.anchored && p.text.starts_with('/') {
        if let Some(ws) = workspace {
            let ws = String::from_utf8_lossy(ws);
            let ws = ws.trim_start_matches('/');
            if let Some(rest) = p.glob.strip_prefix(ws).and_then(|r| r.strip_prefix('/')) {
                return warn(format!(
                    "is an absolute path, but patterns are relative to the workspace root \
                     (it names `/{ws}/{}` inside the workspace); write {:?}",
                    p.glob,
                    format!("/{rest}{}", if p.dir_only { "/" } else { "" })
                ));
            }
        }
        if segs.len() >= 3 && ROOT_DIRS.contains(&segs[0]) {
            return warn(
                "looks like an absolute path, but patterns are relative to the workspace \
                 root (a leading `/` anchors there): write the path below the workspace, \
                 e.g. \"/.env\" for its top-level .env"
                    .to_string(),
            );
        }
    }
    None
}
