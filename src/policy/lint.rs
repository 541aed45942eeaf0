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

pub(super) fn lint(policy: &Policy) -> Vec<Warning> {
    let mut out = Vec::new();
    let pats = &policy.patterns;

    // Duplicates within a rule, and the last occurrence of each glob for shadowing.
    let mut last: HashMap<(&str, bool), usize> = HashMap::new();
    for (i, p) in pats.iter().enumerate() {
        last.insert((p.glob.as_str(), p.anchored), i);
    }

    for (i, p) in pats.iter().enumerate() {
        if let Some(w) = beneath_restriction(policy, p) {
            out.push(w);
        }
        if let Some(j) = overridden_by(policy, i, &last) {
            let q = &pats[j];
            let message = if q.rule == p.rule {
                format!("rule {}: pattern {:?} is listed twice", p.rule, p.text)
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
