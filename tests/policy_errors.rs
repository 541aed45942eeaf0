//! Every bad input is refused with `file:line:col` and what was expected.

use veilfs::Policy;

fn errors(text: &str) -> String {
    match Policy::parse("bad.toml", text) {
        Ok(_) => panic!("policy was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn rule(paths: &str) -> String {
    format!("[[rules]]\naction = \"deny\"\npaths = [{paths}]\n")
}

#[test]
fn toml_syntax_error() {
    let e = errors("default = \"allow\n");
    assert!(e.starts_with("bad.toml:1:"), "{e}");
    assert!(e.contains("error:"), "{e}");
}

#[test]
fn unknown_top_level_key() {
    assert_eq!(
        errors("default = \"allow\"\nmode = \"x\"\n"),
        "bad.toml:2:1: error: unknown key `mode`, expected one of `extends`, `default`, `rules`, `env`, `network`"
    );
}

/// `[env]` (the environment policy of `veilfs run`) may share the file; the path
/// policy ignores it.
#[test]
fn an_env_table_is_accepted_and_ignored() {
    let p = veilfs::Policy::parse(
        "both.toml",
        "default = \"allow\"\n[env]\nkeep = [\"A\"]\n[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.rule_count(), 1);
}

/// `[network]` (the network lists of `veilfs run`) may share the file too.
#[test]
fn a_network_table_is_accepted_and_ignored() {
    let p = veilfs::Policy::parse(
        "both.toml",
        "[network]\nallow = [\"a.test\"]\n[[rules]]\naction = \"deny\"\npaths = [\".env\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.rule_count(), 1);
}

#[test]
fn unknown_rule_key() {
    assert_eq!(
        errors("[[rules]]\naction = \"deny\"\npaths = [\"a\"]\ncomment = \"x\"\n"),
        "bad.toml:4:1: error: unknown key `comment`, expected one of `action`, `paths`, `import`, `why`, `negation`, `backups`, `routine`"
    );
}

#[test]
fn backups_with_import() {
    let e = errors("[[rules]]\naction = \"deny\"\nimport = \".cursorignore\"\nbackups = true\n");
    assert!(
        e.starts_with("bad.toml:4:11: error: rule 1: `backups` goes with `paths` only"),
        "{e}"
    );
}

#[test]
fn missing_paths() {
    let e = errors("[[rules]]\naction = \"deny\"\n");
    assert!(
        e.starts_with("bad.toml:1:1: error: rule 1: missing key `paths` (or `import`)"),
        "{e}"
    );
}

#[test]
fn missing_action() {
    let e = errors("[[rules]]\npaths = [\"a\"]\n");
    assert!(
        e.starts_with("bad.toml:1:1: error: missing key `action`"),
        "{e}"
    );
}

#[test]
fn unknown_action() {
    assert_eq!(
        errors("[[rules]]\naction = \"hide\"\npaths = [\"a\"]\n"),
        r#"bad.toml:2:10: error: rule 1: unknown action "hide" (did you mean "deny"?): expected "allow", "read-only", "ask" or "deny""#
    );
}

#[test]
fn unknown_default() {
    assert_eq!(
        errors("default = \"readonly\"\n"),
        r#"bad.toml:1:11: error: unknown default action "readonly" (did you mean "read-only"?): expected "allow", "read-only", "ask" or "deny""#
    );
}

#[test]
fn paths_of_wrong_type() {
    let e = errors("[[rules]]\naction = \"deny\"\npaths = \".env\"\n");
    assert_eq!(
        e,
        "bad.toml:3:9: error: `paths` must be a list: `paths = [\".env\"]`"
    );
}

#[test]
fn empty_paths() {
    assert_eq!(
        errors(&rule("")),
        "bad.toml:3:9: error: rule 1: `paths` is empty: expected at least one pattern"
    );
}

#[test]
fn empty_pattern() {
    assert_eq!(
        errors(&rule("\"\"")),
        r#"bad.toml:3:10: error: rule 1: pattern "": empty pattern: expected a glob such as ".env" or "secrets/""#
    );
}

#[test]
fn slash_only_pattern() {
    assert_eq!(
        errors(&rule("\"/\"")),
        r#"bad.toml:3:10: error: rule 1: pattern "/": names no path: expected a glob after the slashes"#
    );
}

#[test]
fn double_slash_pattern() {
    assert_eq!(
        errors(&rule("\"a//b\"")),
        r#"bad.toml:3:10: error: rule 1: pattern "a//b": empty path segment (`//`): expected one `/` between names"#
    );
}

#[test]
fn dot_segment_pattern() {
    assert_eq!(
        errors(&rule("\"a/../b\"")),
        r#"bad.toml:3:10: error: rule 1: pattern "a/../b": `..` segment: paths are matched after normalisation, so it can never match"#
    );
}

#[test]
fn unclosed_class() {
    assert_eq!(
        errors(&rule("\"tmp[0-9\"")),
        r#"bad.toml:3:10: error: rule 1: pattern "tmp[0-9": invalid glob: unclosed character class; missing ']'"#
    );
}

#[test]
fn invalid_range() {
    let e = errors(&rule("\"[z-a]\""));
    assert!(
        e.starts_with(
            "bad.toml:3:10: error: rule 1: pattern \"[z-a]\": invalid glob: invalid range"
        ),
        "{e}"
    );
}

#[test]
fn unopened_alternates() {
    let e = errors(&rule("\"a}\""));
    assert!(
        e.starts_with(
            "bad.toml:3:10: error: rule 1: pattern \"a}\": invalid glob: unopened alternate"
        ),
        "{e}"
    );
}

#[test]
fn dangling_escape() {
    let e = errors(&rule("'a\\'"));
    assert!(
        e.starts_with("bad.toml:3:10: error: rule 1: pattern \"a\\\\\": invalid glob: dangling"),
        "{e}"
    );
}

#[test]
fn unclosed_alternates() {
    let e = errors(&rule("\"*.{a,b\""));
    assert!(
        e.starts_with("bad.toml:3:10: error: rule 1: pattern \"*.{a,b\": invalid glob:"),
        "{e}"
    );
}

#[test]
fn every_error_is_reported_at_once() {
    let text = "[[rules]]\naction = \"deny\"\npaths = [\"ok\", \"a[\", \"\"]\n\n[[rules]]\naction = \"hid\"\npaths = [\"b\"]\n";
    let e = errors(text);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(lines[0].starts_with("bad.toml:3:16:"), "{e}");
    assert!(lines[1].starts_with("bad.toml:3:22:"), "{e}");
    assert!(lines[2].starts_with("bad.toml:6:10:"), "{e}");
}

#[test]
fn column_counts_characters_not_bytes() {
    // "é" is two bytes; the column of the bad pattern is still counted in characters.
    let e = errors("[[rules]]\naction = \"deny\"\npaths = [\"é\", \"a[\"]\n");
    assert!(e.starts_with("bad.toml:3:15:"), "{e}");
}

#[test]
fn a_rules_why_is_said_with_it() {
    let p = veilfs::Policy::parse(
        "why.toml",
        "[[rules]]\naction = \"deny\"\npaths = [\"*.pem\"]\nwhy = \"keys live here\"\n",
    )
    .unwrap();
    let d = p.decide(b"a/b.pem", false);
    assert_eq!(d.why(), "rule 1 \"*.pem\" (why.toml:3:10): keys live here");
    assert_eq!(d.to_json(b"a/b.pem")["rule_why"], "keys live here");
    let e = errors("[[rules]]\naction = \"deny\"\npaths = [\"a\"]\nwhy = 3\n");
    assert!(e.starts_with("bad.toml:4:7: error: invalid type"), "{e}");
}

#[test]
fn unknown_built_in_to_extend() {
    assert_eq!(
        errors("extends = \"defaults\"\n"),
        "bad.toml:1:11: error: unknown built-in policy \"defaults\" in `extends`: expected \"default\" (the built-in workspace policy), \"home-default\" (the built-in home policy of `veilfs run`), \"agent:NAME\" (an agent's profile, after the built-in default) or \"none\" (no built-in rules), or a list of them (`[\"home-default\", \"agent:claude\"]`)"
    );
}

#[test]
fn extends_puts_the_built_in_rules_first() {
    use veilfs::Action;
    // The file's rules come after the built-in ones: they win where both match, and
    // the built-in ones still decide the rest.
    let p = Policy::parse(
        "mine.toml",
        "extends = \"default\"\n[[rules]]\naction = \"allow\"\npaths = [\".env\"]\n\
         [[rules]]\naction = \"deny\"\npaths = [\"notes.txt\"]\n",
    )
    .unwrap();
    assert_eq!(p.decide(b".env", false).action, Action::Allow);
    assert_eq!(p.decide(b"notes.txt", false).action, Action::Deny);
    let d = p.decide(b"server.pem", false);
    assert_eq!(d.action, Action::Deny);
    assert!(d.why().contains("<built-in>:"), "{}", d.why());
    assert_eq!(p.default_action(), Action::Allow);
    // A default given in the file wins over the base's.
    let p = Policy::parse(
        "mine.toml",
        "extends = \"home-default\"\ndefault = \"read-only\"\n",
    )
    .unwrap();
    assert_eq!(p.default_action(), Action::ReadOnly);
    assert_eq!(p.decide(b".aws/credentials", false).action, Action::Deny);
    assert!(p.decide(b".aws", true).why().contains("<built-in home>:"));
}
