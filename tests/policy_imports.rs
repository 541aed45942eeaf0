//! Rules that import ignore files (`import = ".cursorignore"`): where they apply,
//! how they rank against glob rules, what `explain` says, the name guard, and the
//! errors.

use veilfs::policy::{Found, Reason};
use veilfs::{Action, Policy};

fn found(dir: &str, name: &str, text: &str) -> Found {
    Found {
        dir: dir.as_bytes().to_vec(),
        name: name.to_string(),
        text: text.to_string(),
    }
}

/// A policy with its files attached; panics on any error.
fn policy(text: &str, files: Vec<Found>) -> Policy {
    let mut p = Policy::parse("p.toml", text).unwrap_or_else(|e| panic!("policy: {e}"));
    let errors = p.attach_imports(files);
    assert!(errors.is_empty(), "{errors:?}");
    p
}

fn action(p: &Policy, path: &str, is_dir: bool) -> Action {
    p.decide(path.as_bytes(), is_dir).action
}

fn why(p: &Policy, path: &str, is_dir: bool) -> String {
    p.decide(path.as_bytes(), is_dir).why()
}

const DENY_CURSOR: &str = r#"
[[rules]]
action = "deny"
paths = ["*.pem"]

[[rules]]
action = "allow"
paths = ["public/"]

[[rules]]
action = "read-only"
paths = ["docs/"]

[[rules]]
action = "deny"
import = ".cursorignore"
why = "the editor's agent must not read these"
"#;

fn cursor_policy() -> Policy {
    policy(
        DENY_CURSOR,
        vec![
            found(
                "",
                ".cursorignore",
                "# secrets\n/config.json\n.env*\n!.env.example\nlogs/\n",
            ),
            found("sub", ".cursorignore", "data.csv\n!keep.env\n"),
        ],
    )
}

#[test]
fn root_file_denies_what_it_lists_at_any_depth() {
    let p = cursor_policy();
    assert_eq!(action(&p, ".env", false), Action::Deny);
    assert_eq!(action(&p, "app/.env.local", false), Action::Deny);
    assert_eq!(action(&p, "config.json", false), Action::Deny);
    // Anchored to the file's directory.
    assert_eq!(action(&p, "app/config.json", false), Action::Allow);
    assert_eq!(action(&p, "README.md", false), Action::Allow);
}

#[test]
fn negation_re_includes() {
    let p = cursor_policy();
    assert_eq!(action(&p, ".env.example", false), Action::Allow);
    assert_eq!(action(&p, "app/.env.example", false), Action::Allow);
}

#[test]
fn subdirectory_file_applies_only_below_it() {
    let p = cursor_policy();
    assert_eq!(action(&p, "sub/data.csv", false), Action::Deny);
    assert_eq!(action(&p, "sub/deep/data.csv", false), Action::Deny);
    assert_eq!(action(&p, "data.csv", false), Action::Allow);
    assert_eq!(action(&p, "other/data.csv", false), Action::Allow);
}

#[test]
fn subdirectory_file_overrides_its_parents() {
    let p = cursor_policy();
    let p2 = policy(
        DENY_CURSOR,
        vec![
            found("", ".cursorignore", "*.env\n"),
            found("sub", ".cursorignore", "!keep.env\n"),
        ],
    );
    assert_eq!(action(&p2, "keep.env", false), Action::Deny);
    assert_eq!(action(&p2, "sub/keep.env", false), Action::Allow);
    assert_eq!(action(&p2, "sub/other.env", false), Action::Deny);
    assert_eq!(action(&p, "sub/.env", false), Action::Deny);
}

#[test]
fn nothing_is_re_included_below_an_ignored_directory() {
    let p = policy(
        DENY_CURSOR,
        vec![found("", ".cursorignore", "build/\n!build/keep.txt\n")],
    );
    assert_eq!(action(&p, "build", true), Action::Deny);
    assert_eq!(action(&p, "build/keep.txt", false), Action::Deny);
}

#[test]
fn directory_only_lines() {
    let p = cursor_policy();
    assert_eq!(action(&p, "logs", true), Action::Deny);
    assert_eq!(action(&p, "logs", false), Action::Allow);
    assert_eq!(action(&p, "app/logs/x.txt", false), Action::Deny);
}

#[test]
fn a_glob_rule_after_the_import_rule_wins() {
    let text = format!("{DENY_CURSOR}\n[[rules]]\naction = \"allow\"\npaths = [\".env.local\"]\n");
    let p = policy(&text, vec![found("", ".cursorignore", ".env*\n")]);
    assert_eq!(action(&p, ".env.local", false), Action::Allow);
    assert_eq!(action(&p, ".env", false), Action::Deny);
}

#[test]
fn the_import_rule_wins_over_an_earlier_glob_rule() {
    // `public/` (rule 2) allows; the import rule (rule 4) comes later.
    let p = policy(
        DENY_CURSOR,
        vec![found("", ".cursorignore", "public/key.txt\n")],
    );
    assert_eq!(action(&p, "public/index.html", false), Action::Allow);
    assert_eq!(action(&p, "public/key.txt", false), Action::Deny);
    // A `!` line is "no match": the earlier glob rule still decides.
    let p = policy(DENY_CURSOR, vec![found("", ".cursorignore", "!x.pem\n")]);
    assert_eq!(action(&p, "x.pem", false), Action::Deny);
}

#[test]
fn an_earlier_import_rule_loses_to_a_later_glob_rule() {
    let text = r#"
[[rules]]
action = "deny"
import = ".aiexclude"

[[rules]]
action = "read-only"
paths = ["notes/"]
"#;
    let p = policy(text, vec![found("", ".aiexclude", "notes/\n")]);
    assert_eq!(action(&p, "notes", true), Action::ReadOnly);
}

#[test]
fn any_action_and_a_list_of_names() {
    let text = r#"
[[rules]]
action = "read-only"
import = [".geminiignore", ".aiexclude"]
"#;
    let p = policy(
        text,
        vec![
            found("", ".geminiignore", "gen/\n"),
            found("lib", ".aiexclude", ""),
        ],
    );
    assert_eq!(action(&p, "gen/x.rs", false), Action::ReadOnly);
    // An empty `.aiexclude` covers its whole directory.
    assert_eq!(action(&p, "lib/a.rs", false), Action::ReadOnly);
    assert_eq!(action(&p, "src/a.rs", false), Action::Allow);
    assert!(why(&p, "lib/a.rs", false).contains("(lib/.aiexclude)"));
}

#[test]
fn explain_names_the_file_and_line() {
    let p = cursor_policy();
    assert_eq!(
        why(&p, "app/.env.local", false),
        "rule 4 \".env*\" (.cursorignore:3): the editor's agent must not read these"
    );
    assert_eq!(
        why(&p, "sub/data.csv", false),
        "rule 4 \"data.csv\" (sub/.cursorignore:1): the editor's agent must not read these"
    );
    let d = p.decide(b"sub/deep/data.csv", false);
    let j = d.to_json(b"sub/deep/data.csv");
    assert_eq!(j["rule"], 4);
    assert_eq!(j["pattern"], "data.csv");
    assert_eq!(j["location"], "sub/.cursorignore:1");
    match d.reason {
        Reason::Rule(p) => {
            assert_eq!(p.at.file.as_ref(), "sub/.cursorignore");
            assert_eq!((p.at.line, p.at.col), (1, 1));
        }
        other => panic!("{other:?}"),
    }
    // Beneath a directory the file denies.
    assert!(why(&p, "logs/a.txt", false).contains("(.cursorignore:5)"));
}

#[test]
fn imported_names_are_read_only_at_every_depth() {
    let p = cursor_policy();
    for path in [
        ".cursorignore",
        "sub/.cursorignore",
        "not/there/.cursorignore",
    ] {
        let d = p.decide(path.as_bytes(), false);
        assert_eq!(d.action, Action::ReadOnly, "{path}");
        assert!(matches!(d.reason, Reason::ImportedFile), "{path}");
        assert_eq!(
            d.why(),
            "a file the policy imports rules from: read-only, so the command cannot rewrite \
             its own rules"
        );
        assert_eq!(d.to_json(path.as_bytes())["reason"], "imported-file");
    }
    assert_eq!(p.import_names(), [".cursorignore".to_string()]);
    // A name it does not import is not guarded.
    assert_eq!(action(&p, ".aiexclude", false), Action::Allow);
    // A deny still hides it.
    let p = policy(
        r#"
[[rules]]
action = "deny"
import = ".cursorignore"

[[rules]]
action = "deny"
paths = ["hidden/"]
"#,
        vec![],
    );
    assert_eq!(action(&p, "hidden/.cursorignore", false), Action::Deny);
    assert_eq!(action(&p, ".cursorignore", false), Action::ReadOnly);
}

#[test]
fn a_policy_without_imports_guards_no_ignore_file() {
    let p = Policy::parse(
        "p.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(p.import_names().is_empty());
    assert_eq!(action(&p, ".cursorignore", false), Action::Allow);
}

#[test]
fn files_no_rule_imports_are_skipped() {
    let p = policy(
        DENY_CURSOR,
        vec![
            found("", ".aiexclude", "*\n"),
            found("", ".cursorignore", "a\n"),
        ],
    );
    assert_eq!(action(&p, "b", false), Action::Allow);
    assert_eq!(action(&p, "a", false), Action::Deny);
}

#[test]
fn lines_that_cannot_compile_are_located_and_the_rest_applies() {
    let mut p = Policy::parse("p.toml", DENY_CURSOR).unwrap_or_else(|e| panic!("{e}"));
    let errors = p.attach_imports(vec![
        found("a/b", ".cursorignore", "ok.txt\n[[:nope:]]\n"),
        found("", ".cursorignore", "x\n"),
    ]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].at.to_string(), "a/b/.cursorignore:2:1");
    assert_eq!(action(&p, "a/b/ok.txt", false), Action::Deny);
    // `.aiexclude` has no negation: the line is reported, what it names stays out.
    let mut p = Policy::parse(
        "p.toml",
        "[[rules]]\naction = \"deny\"\nimport = \".aiexclude\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let errors = p.attach_imports(vec![found("", ".aiexclude", "*.key\n!pub.key\n")]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].at.to_string(), ".aiexclude:2:1");
    assert_eq!(action(&p, "pub.key", false), Action::Deny);
}

fn errors(text: &str) -> String {
    match Policy::parse("bad.toml", text) {
        Ok(_) => panic!("policy was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn paths_and_import_together_are_refused() {
    let e =
        errors("[[rules]]\naction = \"deny\"\npaths = [\".env\"]\nimport = \".cursorignore\"\n");
    assert_eq!(
        e,
        "bad.toml:4:10: error: rule 1: both `paths` and `import`: a rule takes exactly one \
         of them"
    );
}

#[test]
fn a_rule_with_neither_is_refused() {
    let e = errors("[[rules]]\naction = \"deny\"\n");
    assert!(
        e.starts_with("bad.toml:") && e.contains("rule 1: missing key `paths` (or `import`)"),
        "{e}"
    );
}

#[test]
fn unknown_names_are_refused_with_the_supported_ones() {
    let e = errors("[[rules]]\naction = \"deny\"\nimport = [\".cursorignore\", \".gitignore\"]\n");
    assert!(
        e.starts_with("bad.toml:3:28: error: rule 1: cannot import \".gitignore\""),
        "{e}"
    );
    for name in veilfs::policy::ignore::NAMES {
        assert!(e.contains(&format!("{name:?}")), "{e}");
    }
    let e = errors("[[rules]]\naction = \"deny\"\nimport = []\n");
    assert!(e.contains("rule 1: `import` is empty"), "{e}");
}

#[test]
fn rule_numbers_count_import_rules() {
    let p = cursor_policy();
    assert_eq!(p.rule_count(), 4);
    assert!(why(&p, "x.pem", false).starts_with("rule 1 \"*.pem\""));
}
