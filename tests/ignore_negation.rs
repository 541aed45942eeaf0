//! `!` lines in imported ignore files, as a table: one named test per (workspace
//! files, policy, path, kind) row. Without a policy file the built-in default reads
//! `.cursorignore`, `.geminiignore` and kin as their tools do, `!` included; a `!`
//! line only takes a path out of its own import rule, so it never re-opens what
//! another rule hides (the built-in secrets, another tool's file, Claude Code's deny
//! entries, a person's own rule), and never re-includes beneath a hidden directory.
//! A failure names the row and prints the decision's reason.

use veilfs::policy::{BUILTIN_NAME, Found};
use veilfs::{Action, Policy};

/// `(directory, name, text)` of each file the workspace holds.
type Files = &'static [(&'static str, &'static str, &'static str)];

fn found(files: Files) -> Vec<Found> {
    files
        .iter()
        .map(|(dir, name, text)| Found {
            dir: dir.as_bytes().to_vec(),
            name: name.to_string(),
            text: text.to_string(),
        })
        .collect()
}

/// The built-in default for a workspace holding `files`, as `veilfs mount` builds
/// it: the names present at the root decide which names are imported.
fn builtin(files: Files) -> Policy {
    let mut names: Vec<&str> = files
        .iter()
        .filter(|(dir, _, _)| dir.is_empty())
        .map(|(_, name, _)| *name)
        .collect();
    names.dedup();
    let text = veilfs::workspace::imports::builtin_text(&names);
    attached(Policy::parse(BUILTIN_NAME, &text), files)
}

fn attached(p: Result<Policy, veilfs::policy::LoadError>, files: Files) -> Policy {
    let mut p = p.unwrap_or_else(|e| panic!("policy: {e}"));
    let errors = p.attach_imports(found(files));
    let errors: Vec<_> = errors
        .iter()
        .filter(|e| !e.message.contains("has no negation"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    p
}

fn check(p: &Policy, path: &str, is_dir: bool, want: Action) {
    let d = p.decide(path.as_bytes(), is_dir);
    assert_eq!(
        d.action,
        want,
        "path {path:?} ({}) decided {} because {}",
        if is_dir { "dir" } else { "file" },
        d.action,
        d.why()
    );
}

macro_rules! table {
    ($($name:ident: $policy:expr, $path:expr, $kind:ident => $action:ident;)*) => {
        $(
            #[test]
            fn $name() {
                check(&$policy, $path, stringify!($kind) == "dir", Action::$action);
            }
        )*
    };
}

const LOGS: Files = &[("", ".cursorignore", "*.log\n!keep.log\n")];
const GEMINI_LOGS: Files = &[("", ".geminiignore", "*.log\n!keep.log\n")];
const NOT_ENV: Files = &[("", ".cursorignore", "*.txt\n!.env\n!.env.local\n")];
const NOT_SECRETS: Files = &[("", ".cursorignore", "*.txt\n!secrets/\n!secrets/**\n")];
const NOT_ANYTHING: Files = &[("", ".cursorignore", "*.txt\n!**\n")];
const NESTED: Files = &[
    ("", ".cursorignore", "*.log\n"),
    ("sub", ".cursorignore", "!keep.log\n!.env\n"),
];
const DIR_EXCLUDED: Files = &[("", ".cursorignore", "logs/\n!logs/keep.log\n")];
const DIR_CONTENT_EXCLUDED: Files = &[("", ".cursorignore", "logs/*\n!logs/keep.log\n")];
const NESTED_IN_EXCLUDED: Files = &[
    ("", ".cursorignore", "logs/\n"),
    ("logs", ".cursorignore", "!keep.log\n"),
];
const OTHER_TOOL: Files = &[
    ("", ".cursorignore", "creds.txt\n"),
    ("", ".geminiignore", "!creds.txt\n"),
    ("sub", ".geminiignore", "!creds.txt\n"),
];
const LAST_LINE_DENIES: Files = &[("", ".cursorignore", "!keep.log\nkeep.log\n")];
const AIEXCLUDE: Files = &[("", ".aiexclude", "foo/*\n!foo/bar.txt\n")];
const WITH_CLAUDE: Files = &[
    ("", ".cursorignore", "*.md\n!notes.md\n!plan.md\n"),
    (
        "",
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Read(./notes.md)", "Edit(./plan.md)"]}}"#,
    ),
];

/// A person's own policy: a deny and a read-only rule before the import rule.
const OWN: &str = r#"
[[rules]]
action = "deny"
paths = ["private.txt"]

[[rules]]
action = "read-only"
paths = ["docs/"]

[[rules]]
action = "deny"
import = ".cursorignore"
"#;
const OWN_FILES: Files = &[(
    "",
    ".cursorignore",
    "*.txt\n*.log\n!private.txt\n!docs/a.log\n!keep.log\n",
)];

fn own() -> Policy {
    attached(Policy::parse("own.toml", OWN), OWN_FILES)
}

fn own_without_negation() -> Policy {
    let text = OWN.replace(
        "import = \".cursorignore\"",
        "import = \".cursorignore\"\nnegation = false",
    );
    let mut p = Policy::parse("own.toml", &text).unwrap();
    let errors = p.attach_imports(found(OWN_FILES));
    assert_eq!(errors.len(), 3, "{errors:?}");
    p
}

table! {
    // A `!` line re-includes what its own file hides, as Cursor and Gemini do.
    root_file_re_includes_keep_log: builtin(LOGS), "keep.log", file => Allow;
    root_file_re_includes_keep_log_at_any_depth: builtin(LOGS), "app/keep.log", file => Allow;
    root_file_still_hides_x_log: builtin(LOGS), "x.log", file => Deny;
    root_file_still_hides_x_log_below: builtin(LOGS), "app/x.log", file => Deny;
    geminiignore_re_includes_keep_log: builtin(GEMINI_LOGS), "keep.log", file => Allow;
    geminiignore_still_hides_x_log: builtin(GEMINI_LOGS), "x.log", file => Deny;
    last_line_decides_within_a_file: builtin(LAST_LINE_DENIES), "keep.log", file => Deny;

    // Never out of the built-in secrets rules.
    not_env_leaves_env_denied: builtin(NOT_ENV), ".env", file => Deny;
    not_env_leaves_env_local_denied: builtin(NOT_ENV), "app/.env.local", file => Deny;
    not_env_still_hides_what_the_file_lists: builtin(NOT_ENV), "a.txt", file => Deny;
    not_secrets_leaves_the_directory_denied: builtin(NOT_SECRETS), "secrets", dir => Deny;
    not_secrets_leaves_its_files_denied: builtin(NOT_SECRETS), "secrets/db.txt", file => Deny;
    not_everything_leaves_env_denied: builtin(NOT_ANYTHING), ".env", file => Deny;
    not_everything_leaves_pem_denied: builtin(NOT_ANYTHING), "tls/server.pem", file => Deny;
    not_everything_leaves_ssh_keys_denied: builtin(NOT_ANYTHING), "id_ed25519", file => Deny;
    not_everything_leaves_secrets_denied: builtin(NOT_ANYTHING), "secrets/x", file => Deny;
    not_everything_re_includes_its_own_txt: builtin(NOT_ANYTHING), "a.txt", file => Allow;
    not_everything_keeps_the_template: builtin(NOT_ANYTHING), ".env.example", file => Allow;

    // A deeper file overrides its parent's, within the import only.
    nested_file_re_includes_below_it: builtin(NESTED), "sub/keep.log", file => Allow;
    nested_file_re_includes_deeper_below_it: builtin(NESTED), "sub/deep/keep.log", file => Allow;
    nested_file_leaves_the_root_hidden: builtin(NESTED), "keep.log", file => Deny;
    nested_file_leaves_siblings_hidden: builtin(NESTED), "other/keep.log", file => Deny;
    nested_file_leaves_other_logs_hidden: builtin(NESTED), "sub/x.log", file => Deny;
    nested_file_cannot_re_open_env: builtin(NESTED), "sub/.env", file => Deny;

    // git: "It is not possible to re-include a file if a parent directory of that
    // file is excluded"; Cursor and Gemini CLI's reader agree (see
    // src/policy/ignore.rs, "Ancestors").
    excluded_directory_stays_hidden: builtin(DIR_EXCLUDED), "logs", dir => Deny;
    nothing_re_included_beneath_an_excluded_directory:
        builtin(DIR_EXCLUDED), "logs/keep.log", file => Deny;
    re_included_when_only_the_content_is_excluded:
        builtin(DIR_CONTENT_EXCLUDED), "logs/keep.log", file => Allow;
    content_still_excluded_beside_it: builtin(DIR_CONTENT_EXCLUDED), "logs/x.txt", file => Deny;
    nested_file_in_an_excluded_directory_re_includes_nothing:
        builtin(NESTED_IN_EXCLUDED), "logs/keep.log", file => Deny;

    // One tool's `!` line never re-includes what another tool's file hides.
    other_tools_negation_leaves_it_hidden: builtin(OTHER_TOOL), "creds.txt", file => Deny;
    other_tools_nested_negation_leaves_it_hidden: builtin(OTHER_TOOL), "sub/creds.txt", file => Deny;

    // `.aiexclude` documents no negation: the line is not applied.
    aiexclude_has_no_negation: builtin(AIEXCLUDE), "foo/bar.txt", file => Deny;

    // Claude Code's deny entries hold.
    claude_read_deny_holds: builtin(WITH_CLAUDE), "notes.md", file => Deny;
    claude_edit_deny_stays_read_only: builtin(WITH_CLAUDE), "plan.md", file => ReadOnly;
    claude_leaves_the_rest_to_the_file: builtin(WITH_CLAUDE), "readme.md", file => Deny;

    // A person's own policy: a `!` line takes the path out of the import rule,
    // and the rules before it decide (last match wins), never an allow.
    own_deny_holds: own(), "private.txt", file => Deny;
    own_read_only_holds: own(), "docs/a.log", file => ReadOnly;
    own_import_re_includes: own(), "keep.log", file => Allow;
    own_import_still_hides: own(), "x.log", file => Deny;
    own_import_without_negation_keeps_it_hidden: own_without_negation(), "keep.log", file => Deny;

    // Every ignore file name is read-only at every depth, a file present or not.
    guard_with_no_ignore_file: builtin(&[]), "sub/.cursorignore", file => ReadOnly;
    guard_of_another_name: builtin(LOGS), "sub/.geminiignore", file => ReadOnly;
    guard_of_the_name_read: builtin(LOGS), ".cursorignore", file => ReadOnly;
}

/// The built-in default and a person's policy importing the same file mean the
/// same thing for every path.
#[test]
fn builtin_and_explicit_import_agree() {
    let files: Files = &[
        (
            "",
            ".cursorignore",
            "*.log\n!keep.log\nlogs/\n!logs/keep.log\n!.env\n",
        ),
        ("sub", ".cursorignore", "!x.log\n"),
    ];
    let b = builtin(files);
    let own = attached(
        Policy::parse(
            "own.toml",
            "extends = \"default\"\n[[rules]]\naction = \"deny\"\nimport = \".cursorignore\"\n",
        ),
        files,
    );
    for path in [
        "keep.log",
        "x.log",
        "logs/keep.log",
        ".env",
        "sub/x.log",
        "sub/y.log",
        "a/keep.log",
    ] {
        assert_eq!(
            b.decide(path.as_bytes(), false).action,
            own.decide(path.as_bytes(), false).action,
            "{path}"
        );
    }
}

/// `explain` can name the `!` line that takes a path out of its rule.
#[test]
fn re_inclusion_names_its_line() {
    let p = builtin(NESTED);
    let lines = p.re_included_by(b"sub/keep.log", false);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].text, "!keep.log");
    assert_eq!(lines[0].location(), "sub/.cursorignore:1");
    assert!(p.re_included_by(b"keep.log", false).is_empty());
    assert!(p.re_included_by(b"sub/x.log", false).is_empty());
}
