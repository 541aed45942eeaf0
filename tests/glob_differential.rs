//! One parser, one meaning (issue 13): for every policy `check` accepts, the engine's
//! decision equals what globset's own matcher says (README settings: `*` and `?`
//! never cross `/`, `\` escapes), and `check` refuses exactly the patterns globset
//! refuses or that can never name a path.
//!
//! The cases cover the whole glob syntax (see `support/glob_reference.rs`). CI runs
//! 2,000 cases; a long run: `PROPTEST_CASES=1000000 cargo test --release --test
//! glob_differential`. The same check is a cargo-fuzz target in `fuzz/`.

#[path = "support/glob_reference.rs"]
mod reference;

use proptest::prelude::*;
use reference::{NAME_PIECES, Rule, Spec, TOKENS};
use veilfs::{Action, Policy};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn pattern() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(0..TOKENS.len(), 1..6),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(lead, toks, trail)| reference::pattern(lead, &toks, trail))
}

fn spec() -> impl Strategy<Value = Spec> {
    let rule = (0..3usize, prop::collection::vec(pattern(), 1..4))
        .prop_map(|(action, patterns)| Rule { action, patterns });
    (0..3usize, prop::collection::vec(rule, 1..5))
        .prop_map(|(default, rules)| Spec { default, rules })
}

fn path() -> impl Strategy<Value = (Vec<Vec<u8>>, bool)> {
    let name = prop::collection::vec(0..NAME_PIECES.len(), 1..4);
    (prop::collection::vec(name, 1..5), any::<bool>())
        .prop_map(|(names, is_dir)| (reference::path(&names), is_dir))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn decisions_equal_globsets((spec, (segs, is_dir)) in (spec(), path())) {
        if let Err(e) = reference::check(&spec, &segs, is_dir) {
            prop_assert!(false, "{}", e);
        }
    }

    /// Paths made from a pattern's own literal pieces match far more often than
    /// random names: the same check, with the path written from the tokens.
    #[test]
    fn decisions_equal_globsets_on_paths_from_the_pattern(
        spec in spec(),
        picks in prop::collection::vec(prop::collection::vec(0..TOKENS.len(), 1..4), 1..4),
        is_dir in any::<bool>(),
    ) {
        let segs: Vec<Vec<u8>> = picks
            .iter()
            .map(|toks| {
                let n: String = toks
                    .iter()
                    .map(|&t| TOKENS[t].replace(['/', '\\'], ""))
                    .collect();
                if n.is_empty() || n == "." || n == ".." { b"a".to_vec() } else { n.into_bytes() }
            })
            .collect();
        if let Err(e) = reference::check(&spec, &segs, is_dir) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The issue's reproducer: the old prefilter ended `[[:digit:]]` at its inner `]` and
/// filed the glob under the literal `].key`, so these paths were allowed.
#[test]
fn posix_classes_deny_what_globset_matches() {
    let p = Policy::parse(
        "p.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\"*[[:digit:]].key\", \"[[:upper:]]*.pem\"]\n",
    )
    .unwrap();
    for path in ["5.key", "x/a5.key", "A.pem", "d/Zed.pem"] {
        let d = p.decide(path.as_bytes(), false);
        assert_eq!(d.action, Action::Deny, "{path}: {}", d.why());
    }
    for path in ["a.key", "5.keys", "a.pem", "].key"] {
        let d = p.decide(path.as_bytes(), false);
        assert_eq!(d.action, Action::Allow, "{path}: {}", d.why());
    }
}

/// Cases the old scanner got wrong besides POSIX classes, each checked against globset.
#[test]
fn class_and_brace_edge_cases_equal_globset() {
    let cases: &[(&str, &[&str])] = &[
        ("[]a]x", &["]x", "ax", "bx"]),
        ("[!]a]x", &["]x", "bx"]),
        ("{a,[[:digit:]]}.key", &["a.key", "7.key", "].key"]),
        ("**/b[!a]c", &["b/c", "x/b/c", "bxc"]),
        (r"a\[b].txt", &["a[b].txt", "ab.txt"]),
        ("/x/**", &["x/a", "x/a/b", "y/x/a"]),
        ("*.{pem,[[:alpha:]]ey}", &["a.pem", "a.key", "a.5ey"]),
    ];
    for (pat, paths) in cases {
        let spec = Spec {
            default: 0,
            rules: vec![Rule {
                action: 2,
                patterns: vec![pat.to_string()],
            }],
        };
        for path in *paths {
            let segs: Vec<Vec<u8>> = path.split('/').map(|s| s.as_bytes().to_vec()).collect();
            for is_dir in [false, true] {
                if let Err(e) = reference::check(&spec, &segs, is_dir) {
                    panic!("{e}");
                }
            }
        }
    }
}

/// A glob globset parses but cannot compile (its regex is past globset's size limit)
/// is refused when the policy loads, with its location. The old index compiled it on
/// the first request that met it, where globset's own `expect` panicked.
#[test]
fn a_glob_too_large_to_compile_is_refused_at_load() {
    let pattern = "*".to_string() + &"[[:alpha:]]?".repeat(200_000);
    let text = format!("\n[[rules]]\naction = \"deny\"\npaths = [\"{pattern}\"]\n");
    let e = Policy::parse("big.toml", &text).expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.starts_with("big.toml:4:10: error: rule 1: pattern") && msg.contains("invalid glob"),
        "{}",
        &msg[..msg.len().min(300)]
    );
}
