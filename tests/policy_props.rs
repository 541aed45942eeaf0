//! Properties of the policy engine over random policies and paths, checked against a
//! naive reference evaluator written straight from the documented semantics (one
//! `GlobMatcher` per pattern, rules scanned top to bottom, no glob sets, no caching).

use globset::GlobBuilder;
use proptest::prelude::*;
use veilfs::{Action, Decision, Policy};

#[path = "support/glob_reference.rs"]
#[allow(dead_code)]
mod glob_reference;
use glob_reference::Reference;

const ACTIONS: [(&str, Action); 3] = [
    ("allow", Action::Allow),
    ("read-only", Action::ReadOnly),
    ("deny", Action::Deny),
];

#[derive(Clone, Debug)]
struct Rule {
    action: usize,
    patterns: Vec<String>,
}

#[derive(Clone, Debug)]
struct Spec {
    default: usize,
    rules: Vec<Rule>,
}

impl Spec {
    fn toml(&self) -> String {
        let mut s = format!("default = \"{}\"\n", ACTIONS[self.default].0);
        for r in &self.rules {
            let pats: Vec<String> = r.patterns.iter().map(|p| format!("'{p}'")).collect();
            s += &format!(
                "\n[[rules]]\naction = \"{}\"\npaths = [{}]\n",
                ACTIONS[r.action].0,
                pats.join(", ")
            );
        }
        s
    }
}

/// A name segment of a pattern: literals from the same small alphabet as the paths,
/// and every glob feature.
fn pattern_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("ab".to_string()),
        Just("a.b".to_string()),
        Just("*".to_string()),
        Just("a*".to_string()),
        Just("*.b".to_string()),
        Just("?".to_string()),
        Just("[ab]".to_string()),
        Just("{a,ab}".to_string()),
        Just("**".to_string()),
        Just(r"a\\b".to_string()),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(pattern_segment(), 1..4),
        any::<bool>(),
    )
        .prop_map(|(lead, segs, trail)| {
            let mut p = String::new();
            if lead {
                p.push('/');
            }
            p += &segs.join("/");
            if trail {
                p.push('/');
            }
            p
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    let rule = (0..3usize, prop::collection::vec(pattern(), 1..4))
        .prop_map(|(action, patterns)| Rule { action, patterns });
    (0..3usize, prop::collection::vec(rule, 0..7))
        .prop_map(|(default, rules)| Spec { default, rules })
}

fn path() -> impl Strategy<Value = (Vec<Vec<u8>>, bool)> {
    let seg = prop_oneof![
        Just(b"a".to_vec()),
        Just(b"b".to_vec()),
        Just(b"ab".to_vec()),
        Just(b"ba".to_vec()),
        Just(b"a.b".to_vec()),
        Just(b"a\\b".to_vec()),
        Just(b"\xff".to_vec()),
        Just(b"a\xffb".to_vec()),
    ];
    (prop::collection::vec(seg, 1..7), any::<bool>())
}

/// The naive evaluator (shared with `tests/glob_differential.rs`) over `spec`'s
/// patterns, one `GlobMatcher` each.
fn reference(spec: &Spec) -> Reference {
    let mut patterns = Vec::new();
    for (i, r) in spec.rules.iter().enumerate() {
        for p in &r.patterns {
            let (body, dir_only) = p
                .strip_suffix('/')
                .map_or((p.as_str(), false), |b| (b, true));
            let (body, anchored) = body
                .strip_prefix('/')
                .map_or((body, body.contains('/')), |b| (b, true));
            let m = GlobBuilder::new(body)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher();
            patterns.push((
                i,
                ACTIONS[r.action].1,
                anchored,
                dir_only,
                m,
                body.to_string(),
            ));
        }
    }
    Reference::from_patterns(ACTIONS[spec.default].1, patterns)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn compiled_policy_agrees_with_reference((spec, (segs, is_dir)) in (spec(), path())) {
        let policy = Policy::parse("prop.toml", &spec.toml()).unwrap();
        let full = segs.join(&b'/');
        let got = policy.decide(&full, is_dir);
        let want = reference(&spec).decide(&segs, is_dir);
        prop_assert_eq!(got.action, want, "policy:\n{}\npath {:?}: {}", spec.toml(), String::from_utf8_lossy(&full), got.why());
    }

    #[test]
    fn under_a_denied_directory_everything_is_denied((spec, (segs, is_dir)) in (spec(), path())) {
        let policy = Policy::parse("prop.toml", &spec.toml()).unwrap();
        let full = segs.join(&b'/');
        for i in 1..segs.len() {
            let prefix = segs[..i].join(&b'/');
            if policy.decide(&prefix, true).action == Action::Deny {
                prop_assert_eq!(policy.decide(&full, is_dir).action, Action::Deny);
            }
        }
    }

    #[test]
    fn never_more_permissive_going_deeper((spec, (segs, is_dir)) in (spec(), path())) {
        let policy = Policy::parse("prop.toml", &spec.toml()).unwrap();
        let mut prev = Action::Allow;
        for i in 1..=segs.len() {
            let prefix = segs[..i].join(&b'/');
            let a = policy.decide(&prefix, i < segs.len() || is_dir).action;
            prop_assert!(a >= prev, "{:?} is {} below a {} ancestor\n{}", String::from_utf8_lossy(&prefix), a, prev, spec.toml());
            prev = a;
        }
    }

    #[test]
    fn deciding_via_the_parent_equals_deciding_from_scratch((spec, (segs, is_dir)) in (spec(), path())) {
        let policy = Policy::parse("prop.toml", &spec.toml()).unwrap();
        let mut d = Decision::root();
        for i in 0..segs.len() {
            let prefix = segs[..=i].join(&b'/');
            let dir = i + 1 < segs.len() || is_dir;
            d = policy.decide_child(&d, &prefix, || dir);
            let scratch = policy.decide(&prefix, dir);
            prop_assert_eq!(d.action, scratch.action);
            prop_assert_eq!(d.why(), scratch.why());
        }
    }
}
