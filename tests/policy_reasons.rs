//! A decision carries where it came from, and deciding a child costs no `stat` unless
//! the answer depends on the entry's type.

use veilfs::{Action, Decision, Policy, Reason};

const POLICY: &str = r#"default = "deny"

[[rules]]
action = "allow"
paths = ["src/lib/**", "docs/"]

[[rules]]
action = "deny"
paths = ["secrets/"]
"#;

fn policy() -> Policy {
    Policy::parse("p.toml", POLICY).unwrap()
}

#[test]
fn rule_reason_names_rule_pattern_and_location() {
    let d = policy().decide(b"secrets", true);
    assert_eq!(d.action, Action::Deny);
    assert_eq!(d.why(), r#"rule 2 "secrets/" (p.toml:9:10)"#);
    let j = d.to_json(b"secrets");
    assert_eq!(j["reason"], "rule");
    assert_eq!(j["rule"], 2);
    assert_eq!(j["pattern"], "secrets/");
    assert_eq!(j["location"], "p.toml:9:10");
}

#[test]
fn ancestor_reason_names_the_outermost_denied_ancestor() {
    let d = policy().decide(b"secrets/a/b/c", false);
    assert_eq!(d.action, Action::Deny);
    assert_eq!(
        d.why(),
        r#"ancestor `secrets` denied by rule 2 "secrets/" (p.toml:9:10)"#
    );
    assert_eq!(d.to_json(b"secrets/a/b/c")["ancestor"], "secrets");
}

#[test]
fn inherited_allow_names_the_matched_ancestor() {
    let d = policy().decide(b"docs/guide/intro.md", false);
    assert_eq!(d.action, Action::Allow);
    assert_eq!(
        d.why(),
        r#"ancestor `docs` allowed by rule 1 "docs/" (p.toml:5:24)"#
    );
}

#[test]
fn admitted_reason_names_the_rule_it_leads_to() {
    let d = policy().decide(b"src", true);
    assert_eq!(d.action, Action::Allow);
    assert!(matches!(d.reason, Reason::Admitted(_)));
    assert_eq!(
        d.why(),
        r#"admitted as a directory leading to rule 1 "src/lib/**" (p.toml:5:10)"#
    );
}

#[test]
fn default_reason() {
    let d = policy().decide(b"README.md", false);
    assert_eq!(d.action, Action::Deny);
    assert_eq!(d.why(), r#"no rule matches: the policy default is "deny""#);
    let d = policy().decide(b"other/x", false);
    assert_eq!(d.why(), "ancestor `other` denied by the policy default");
}

#[test]
fn policy_file_guard_is_read_only_whatever_the_rules() {
    let d = policy()
        .decide(b"docs/.veilfs.toml", false)
        .guard_policy_file();
    assert_eq!(d.action, Action::ReadOnly);
    assert!(d.why().contains("policy file"));
    // A denied path stays denied.
    let d = policy()
        .decide(b"secrets/.veilfs.toml", false)
        .guard_policy_file();
    assert_eq!(d.action, Action::Deny);
}

#[test]
fn child_decision_does_not_ask_the_type_when_no_pattern_needs_it() {
    let p = Policy::parse(
        "p.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"x/\"]\n",
    )
    .unwrap();
    let root = Decision::root();
    let d = p.decide_child(&root, b".env", || panic!("type asked for .env"));
    assert_eq!(d.action, Action::Deny);
    let d = p.decide_child(&root, b"src", || panic!("type asked for src"));
    assert_eq!(d.action, Action::Allow);
    // `x/` is directory-only: only here is the type needed.
    let mut asked = false;
    let d = p.decide_child(&root, b"x", || {
        asked = true;
        true
    });
    assert!(asked);
    assert_eq!(d.action, Action::Deny);
}

#[test]
fn child_of_denied_parent_is_denied_without_matching() {
    let p = policy();
    let parent = p.decide(b"secrets", true);
    let d = p.decide_child(&parent, b"secrets/src", || panic!("type asked"));
    assert_eq!(d.action, Action::Deny);
}

#[test]
fn root_is_always_visible() {
    assert_eq!(Decision::root().action, Action::Allow);
}
