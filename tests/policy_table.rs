//! The matching semantics as a table: one named test per (policy, path, kind) row.
//! A failure names the row and prints the decision's reason.

use veilfs::{Action, Policy};

fn check(policy: &str, path: &[u8], is_dir: bool, want: Action) {
    let p = Policy::parse("table.toml", policy).unwrap_or_else(|e| panic!("policy: {e}"));
    let d = p.decide(path, is_dir);
    assert_eq!(
        d.action,
        want,
        "path {:?} ({}) decided {} because {}",
        String::from_utf8_lossy(path),
        if is_dir { "dir" } else { "file" },
        d.action,
        d.why()
    );
}

macro_rules! table {
    ($($name:ident: $policy:ident, $path:expr, $kind:ident => $action:ident;)*) => {
        $(
            #[test]
            fn $name() {
                check($policy, $path, stringify!($kind) == "dir", Action::$action);
            }
        )*
    };
}

/// The everyday secrets policy, with anchored, dir-only, brace, class and backslash
/// patterns.
const BASIC: &str = r#"
default = "allow"

[[rules]]
action = "deny"
paths = [".env", ".env.*", "secrets/", "*.pem", "credentials", "id_rsa"]

[[rules]]
action = "allow"
paths = [".env.example"]

[[rules]]
action = "read-only"
paths = [".git/", "/LICENSE", "config/prod.toml"]

[[rules]]
action = "deny"
paths = ["/build", "**/node_modules/", "*.{key,p12}", "tmp[0-9]", 'a\\b', "x?y",
         "docs/*.md", "logs/**", "a/**/z.txt", "/*.txt", "cache*/"]
"#;

/// Rule order: the last matching rule decides; an allow cannot loosen a read-only or
/// denied ancestor.
const ORDER: &str = r#"
[[rules]]
action = "deny"
paths = ["*.log"]

[[rules]]
action = "allow"
paths = ["important.log"]

[[rules]]
action = "read-only"
paths = ["audit/"]

[[rules]]
action = "allow"
paths = ["audit/open.txt"]

[[rules]]
action = "deny"
paths = ["audit/closed.txt"]
"#;

/// The same two patterns in the other order.
const ORDER_REVERSED: &str = r#"
[[rules]]
action = "allow"
paths = ["important.log"]

[[rules]]
action = "deny"
paths = ["*.log"]
"#;

/// A nested allow below a denied directory.
const NESTED_ALLOW: &str = r#"
[[rules]]
action = "deny"
paths = ["secrets/"]

[[rules]]
action = "allow"
paths = ["secrets/public/**", "public.txt", "secrets/readme.md"]
"#;

/// An allow-list with a literal prefix, a directory pattern and a read-only subtree.
const ALLOW_LIST: &str = r#"
default = "deny"

[[rules]]
action = "allow"
paths = ["src/lib/**", "Cargo.toml", "tests/"]

[[rules]]
action = "read-only"
paths = ["docs/api/**"]

[[rules]]
action = "deny"
paths = [".env"]
"#;

/// A read-only workspace with editable sources.
const READ_ONLY_DEFAULT: &str = r#"
default = "read-only"

[[rules]]
action = "allow"
paths = ["src/**", "notes.md"]
"#;

const DENY_ALL: &str = r#"default = "deny""#;
const READ_ONLY_ALL: &str = r#"default = "read-only""#;
const ALLOW_ALL: &str = r#"default = "allow""#;

const STAR: &str = r#"
[[rules]]
action = "deny"
paths = ["*"]
"#;

table! {
    // unanchored names match at any depth
    env_top: BASIC, b".env", file => Deny;
    env_nested: BASIC, b"app/.env", file => Deny;
    env_deep: BASIC, b"a/b/c/d/.env", file => Deny;
    env_as_dir: BASIC, b".env", dir => Deny;
    env_child_of_env_dir: BASIC, b".env/inner", file => Deny;
    env_local: BASIC, b".env.local", file => Deny;
    env_example_allowed: BASIC, b".env.example", file => Allow;
    env_example_nested: BASIC, b"app/.env.example", file => Allow;
    env_suffix_only: BASIC, b"my.env", file => Allow;
    envrc_not_matched: BASIC, b".envrc", file => Allow;
    env_prefix_name: BASIC, b".environment", file => Allow;
    // directory-only patterns
    secrets_dir: BASIC, b"secrets", dir => Deny;
    secrets_file_is_not_dir: BASIC, b"secrets", file => Allow;
    secrets_child: BASIC, b"secrets/token.txt", file => Deny;
    secrets_child_dir: BASIC, b"secrets/sub", dir => Deny;
    secrets_nested_dir: BASIC, b"x/secrets", dir => Deny;
    secrets_grandchild: BASIC, b"x/secrets/a/b", file => Deny;
    secrets_suffix: BASIC, b"secrets-old", dir => Allow;
    secrets_prefix: BASIC, b"old-secrets", dir => Allow;
    // extension-like globs
    pem_top: BASIC, b"cert.pem", file => Deny;
    pem_nested: BASIC, b"a/b/cert.pem", file => Deny;
    pem_dir: BASIC, b"keys.pem", dir => Deny;
    pem_dir_child: BASIC, b"keys.pem/readme", file => Deny;
    pem_not_suffix: BASIC, b"d/cert.pem.txt", file => Allow;
    pem_bare: BASIC, b".pem", file => Deny;
    // segment-wise denial never matches a longer name
    credentials_file: BASIC, b"credentials", file => Deny;
    credentials_dir_child: BASIC, b"credentials/token.txt", file => Deny;
    credentials_backup: BASIC, b"credentials-backup", file => Allow;
    credentials_backup_child: BASIC, b"credentials-backup/token.txt", file => Allow;
    credentials_nested: BASIC, b"a/credentials", file => Deny;
    credentials_case: BASIC, b"Credentials", file => Allow;
    id_rsa_denied: BASIC, b"home/.ssh-copy/id_rsa", file => Deny;
    id_rsa_pub_allowed: BASIC, b"id_rsa.pub", file => Allow;
    // read-only and its inheritance
    git_dir_ro: BASIC, b".git", dir => ReadOnly;
    git_config_ro: BASIC, b".git/config", file => ReadOnly;
    git_objects_ro: BASIC, b".git/objects/ab/cdef", file => ReadOnly;
    git_gitfile_not_dir: BASIC, b".git", file => Allow;
    git_submodule_ro: BASIC, b"vendor/lib/.git", dir => ReadOnly;
    git_ro_child_denied_by_own_rule: BASIC, b".git/.env", file => Deny;
    // anchored patterns
    license_root: BASIC, b"LICENSE", file => ReadOnly;
    license_nested: BASIC, b"docs/LICENSE", file => Allow;
    config_prod: BASIC, b"config/prod.toml", file => ReadOnly;
    config_prod_nested: BASIC, b"x/config/prod.toml", file => Allow;
    config_other: BASIC, b"config/dev.toml", file => Allow;
    build_root_dir: BASIC, b"build", dir => Deny;
    build_root_file: BASIC, b"build", file => Deny;
    build_child: BASIC, b"build/out.o", file => Deny;
    build_nested: BASIC, b"src/build", dir => Allow;
    root_txt: BASIC, b"notes.txt", file => Deny;
    nested_txt: BASIC, b"d/notes.txt", file => Allow;
    // `**`
    node_modules_root: BASIC, b"node_modules", dir => Deny;
    node_modules_deep: BASIC, b"a/b/node_modules/x/y.js", file => Deny;
    node_modules_file: BASIC, b"node_modules", file => Allow;
    logs_child: BASIC, b"logs/a", file => Deny;
    logs_deep: BASIC, b"logs/a/b/c", file => Deny;
    logs_itself: BASIC, b"logs", dir => Allow;
    globstar_middle_zero: BASIC, b"a/z.txt", file => Deny;
    globstar_middle_many: BASIC, b"a/b/c/z.txt", file => Deny;
    globstar_middle_unanchored_miss: BASIC, b"b/a/z.txt", file => Allow;
    // `*` and `?` never cross `/`
    star_one_level: BASIC, b"docs/a.md", file => Deny;
    star_not_two_levels: BASIC, b"docs/sub/a.md", file => Allow;
    question_one_byte: BASIC, b"xay", file => Deny;
    question_not_slash: BASIC, b"x/y", file => Allow;
    question_not_empty: BASIC, b"xy", file => Allow;
    // `{a,b}` and `[...]`
    braces_key: BASIC, b"server.key", file => Deny;
    braces_p12: BASIC, b"a/b.p12", file => Deny;
    braces_miss: BASIC, b"a.p13", file => Allow;
    class_digit: BASIC, b"tmp5", dir => Deny;
    class_letter_miss: BASIC, b"tmpx", dir => Allow;
    class_one_char_only: BASIC, b"tmp55", dir => Allow;
    dir_glob_dir: BASIC, b"cache12", dir => Deny;
    dir_glob_file: BASIC, b"cache12", file => Allow;
    dir_glob_child: BASIC, b"cache12/entry", file => Deny;
    // names are bytes: backslashes and non-UTF-8 are literal
    backslash_name: BASIC, b"a\\b", file => Deny;
    backslash_nested: BASIC, b"q/a\\b", file => Deny;
    backslash_is_not_separator: BASIC, b"a/b", file => Allow;
    backslash_other: BASIC, b"a\\c", file => Allow;
    backslash_env: BASIC, b"dir\\.env", file => Allow;
    non_utf8_pem: BASIC, b"\xff\xfe.pem", file => Deny;
    non_utf8_plain: BASIC, b"\xff\xfe", file => Allow;
    non_utf8_parent_env: BASIC, b"dir\xff/.env", file => Deny;
    non_utf8_under_secrets: BASIC, b"secrets/\xff", file => Deny;
    non_utf8_question: BASIC, b"x\xffy", file => Deny;
    non_utf8_class_miss: BASIC, b"tmp\xff", dir => Allow;
    // rule order
    order_log_denied: ORDER, b"x.log", file => Deny;
    order_later_allow_wins: ORDER, b"important.log", file => Allow;
    order_later_allow_nested: ORDER, b"a/important.log", file => Allow;
    order_ro_dir: ORDER, b"audit", dir => ReadOnly;
    order_allow_under_ro_stays_ro: ORDER, b"audit/open.txt", file => ReadOnly;
    order_deny_under_ro: ORDER, b"audit/closed.txt", file => Deny;
    order_earlier_deny_under_ro: ORDER, b"audit/x.log", file => Deny;
    order_allow_under_ro_unanchored: ORDER, b"audit/important.log", file => ReadOnly;
    order_reversed_deny_wins: ORDER_REVERSED, b"important.log", file => Deny;
    // a nested allow under a denied directory stays denied
    nested_allow_glob: NESTED_ALLOW, b"secrets/public/a.txt", file => Deny;
    nested_allow_name: NESTED_ALLOW, b"secrets/public.txt", file => Deny;
    nested_allow_literal: NESTED_ALLOW, b"secrets/readme.md", file => Deny;
    nested_allow_elsewhere: NESTED_ALLOW, b"public.txt", file => Allow;
    nested_allow_dir: NESTED_ALLOW, b"secrets/public", dir => Deny;
    // allow-lists admit the directories leading to what they allow
    allow_list_src_admitted: ALLOW_LIST, b"src", dir => Allow;
    allow_list_src_file_not_admitted: ALLOW_LIST, b"src", file => Deny;
    allow_list_lib_admitted: ALLOW_LIST, b"src/lib", dir => Allow;
    allow_list_lib_file: ALLOW_LIST, b"src/lib/a.rs", file => Allow;
    allow_list_lib_deep: ALLOW_LIST, b"src/lib/x/y.rs", file => Allow;
    allow_list_sibling_hidden: ALLOW_LIST, b"src/main.rs", file => Deny;
    allow_list_sibling_dir_hidden: ALLOW_LIST, b"src/other", dir => Deny;
    allow_list_manifest: ALLOW_LIST, b"Cargo.toml", file => Allow;
    allow_list_manifest_in_hidden_dir: ALLOW_LIST, b"sub/Cargo.toml", file => Deny;
    allow_list_dir_pattern: ALLOW_LIST, b"tests", dir => Allow;
    allow_list_dir_pattern_child: ALLOW_LIST, b"tests/a/b.rs", file => Allow;
    allow_list_dir_pattern_file: ALLOW_LIST, b"tests", file => Deny;
    allow_list_env_in_allowed: ALLOW_LIST, b"tests/.env", file => Deny;
    allow_list_ro_admitted: ALLOW_LIST, b"docs", dir => ReadOnly;
    allow_list_ro_subtree: ALLOW_LIST, b"docs/api/x.md", file => ReadOnly;
    allow_list_ro_sibling: ALLOW_LIST, b"docs/other.md", file => Deny;
    allow_list_unlisted: ALLOW_LIST, b"README.md", file => Deny;
    // read-only default
    ro_default_file: READ_ONLY_DEFAULT, b"README", file => ReadOnly;
    ro_default_src_admitted: READ_ONLY_DEFAULT, b"src", dir => Allow;
    ro_default_src_file: READ_ONLY_DEFAULT, b"src/a/b.rs", file => Allow;
    ro_default_other_dir: READ_ONLY_DEFAULT, b"docs/a.md", file => ReadOnly;
    ro_default_top_allow: READ_ONLY_DEFAULT, b"notes.md", file => Allow;
    ro_default_allow_under_ro: READ_ONLY_DEFAULT, b"docs/notes.md", file => ReadOnly;
    // defaults alone
    deny_all_top: DENY_ALL, b"anything", file => Deny;
    deny_all_deep: DENY_ALL, b"a/b/c", dir => Deny;
    ro_all_top: READ_ONLY_ALL, b"a", dir => ReadOnly;
    ro_all_deep: READ_ONLY_ALL, b"a/b/c", file => ReadOnly;
    allow_all: ALLOW_ALL, b"a/b/.env", file => Allow;
    star_everything: STAR, b"anything", file => Deny;
    star_dotfile: STAR, b".hidden", file => Deny;
}

/// `backups = true`: each pattern names its backup copies too, with its own
/// anchoring and type; a rule without it names only what it says.
const BACKUPS: &str = r#"extends = "none"
[[rules]]
action = "deny"
backups = true
paths = ["/.netrc", "/.aws/", ".*_history", "/.config/gh/hosts.yml", "/.cache/**"]

[[rules]]
action = "deny"
paths = ["/.pgpass"]
"#;

table! {
    backups_the_file: BACKUPS, b".netrc", file => Deny;
    backups_tilde: BACKUPS, b".netrc~", file => Deny;
    backups_bak: BACKUPS, b".netrc.bak", file => Deny;
    backups_old: BACKUPS, b".netrc.old", file => Deny;
    backups_orig: BACKUPS, b".netrc.orig", file => Deny;
    backups_save: BACKUPS, b".netrc.save", file => Deny;
    backups_swp: BACKUPS, b".netrc.swp", file => Deny;
    backups_second_swap: BACKUPS, b".netrc.swo", file => Deny;
    backups_emacs_auto_save: BACKUPS, b"#.netrc#", file => Deny;
    backups_anchored_as_the_pattern: BACKUPS, b"x/.netrc.bak", file => Allow;
    backups_not_any_suffix: BACKUPS, b".netrc.bak2", file => Allow;
    backups_not_a_prefix: BACKUPS, b"old.netrc", file => Allow;
    backups_directory_copy: BACKUPS, b".aws.bak", dir => Deny;
    backups_directory_copy_contents: BACKUPS, b".aws.bak/credentials", file => Deny;
    backups_directory_tilde_contents: BACKUPS, b".aws~/config", file => Deny;
    backups_directory_copy_is_a_directory: BACKUPS, b".aws.bak", file => Allow;
    backups_directory_no_swap_beside: BACKUPS, b".aws.swp", dir => Deny;
    backups_name_at_any_depth: BACKUPS, b"old/.bash_history.bak", file => Deny;
    backups_name_swap: BACKUPS, b"old/.zsh_history.swp", file => Deny;
    backups_swap_beside_a_plain_name: BACKUPS, b".config/gh/.hosts.yml.swp", file => Deny;
    backups_auto_save_beside_a_plain_name: BACKUPS, b".config/gh/#hosts.yml#", file => Deny;
    backups_plain_name_copy: BACKUPS, b".config/gh/hosts.yml.orig", file => Deny;
    backups_recursive_pattern_has_none: BACKUPS, b".cache~", dir => Allow;
    backups_rule_without_the_key: BACKUPS, b".pgpass.bak", file => Allow;
    backups_rule_without_the_key_itself: BACKUPS, b".pgpass", file => Deny;
}

/// A backup copy's decision names the pattern as written, and says it is a copy.
#[test]
fn a_backup_copy_is_explained_by_the_pattern_as_written() {
    let p = Policy::parse("table.toml", BACKUPS).unwrap();
    let d = p.decide(b".aws.bak/credentials", false);
    assert_eq!(
        d.why(),
        "ancestor `.aws.bak` denied by rule 1 \"/.aws/\" (a backup copy) (table.toml:5:21)"
    );
    let j = p.decide(b".netrc~", false).to_json(b".netrc~");
    assert_eq!(j["pattern"], "/.netrc");
    assert_eq!(j["backup"], true);
    assert!(
        p.decide(b".netrc", false)
            .to_json(b".netrc")
            .get("backup")
            .is_none()
    );
    assert!(p.lint().is_empty(), "{:?}", p.lint());
}

/// `ask` sits between read-only and deny: `deny` > `ask` > `read-only` > `allow`
/// along the path; what a path is once approved never goes beyond its other rules.
const ASK: &str = r#"
[[rules]]
action = "ask"
paths = ["mig/", "one.sql", "ro/q/"]

[[rules]]
action = "allow"
paths = ["mig/open.sql"]

[[rules]]
action = "deny"
paths = ["mig/secret/", "*.key"]

[[rules]]
action = "read-only"
paths = ["ro/", "mig/frozen.sql"]
"#;

const ASK_DEFAULT: &str = r#"
default = "ask"

[[rules]]
action = "allow"
paths = ["src/**"]

[[rules]]
action = "deny"
paths = [".env"]
"#;

table! {
    ask_dir: ASK, b"mig", dir => Ask;
    ask_beneath_dir: ASK, b"mig/a/b.sql", file => Ask;
    ask_file_by_name: ASK, b"x/one.sql", file => Ask;
    ask_name_as_file_only_dir_pattern: ASK, b"mig", file => Allow;
    ask_allow_beneath_cannot_skip: ASK, b"mig/open.sql", file => Ask;
    ask_deny_beneath_wins: ASK, b"mig/secret/x", file => Deny;
    ask_deny_by_name_beneath: ASK, b"mig/a.key", file => Deny;
    ask_read_only_beneath_still_asks: ASK, b"mig/frozen.sql", file => Ask;
    ask_beneath_read_only_asks: ASK, b"ro/q/r.txt", file => Ask;
    ask_read_only_dir_itself: ASK, b"ro/other.txt", file => ReadOnly;
    ask_elsewhere_allowed: ASK, b"src/main.rs", file => Allow;
    ask_default_unmatched: ASK_DEFAULT, b"docs/a.md", file => Ask;
    ask_default_allow_list: ASK_DEFAULT, b"src/lib.rs", file => Allow;
    ask_default_admits_src: ASK_DEFAULT, b"src", dir => Allow;
    ask_default_deny_wins: ASK_DEFAULT, b".env", file => Deny;
}

/// What an `ask` path is once approved.
#[test]
fn an_approval_grants_no_more_than_the_other_rules() {
    use veilfs::Action::*;
    let p = Policy::parse("table.toml", ASK).unwrap();
    for (path, is_dir, granted) in [
        (&b"mig/a.sql"[..], false, Allow),
        (b"mig/open.sql", false, Allow),
        (b"mig/frozen.sql", false, ReadOnly),
        (b"ro/q/r.txt", false, ReadOnly),
        (b"ro/q", true, ReadOnly),
        (b"x/one.sql", false, Allow),
        (b"mig/secret/x", false, Deny),
        (b"src/a", false, Allow),
        (b"ro/x", false, ReadOnly),
    ] {
        let d = p.decide(path, is_dir);
        assert_eq!(
            d.granted(),
            granted,
            "{}: {} ({})",
            String::from_utf8_lossy(path),
            d.action,
            d.why()
        );
    }
    // The policy file's name stays read-only once approved.
    let d = p.decide(b"mig/.veilfs.toml", false);
    assert_eq!((d.action, d.granted()), (Ask, ReadOnly), "{}", d.why());
    assert!(
        d.why().ends_with("; read-only once approved"),
        "{}",
        d.why()
    );
}

/// The stricter of two decisions (a workspace inside the home directory): one that
/// asks stays asking, bounded by the other.
#[test]
fn the_stricter_of_a_question_and_a_read_only_rule_asks_and_grants_reading() {
    use veilfs::Action::*;
    let ask = Policy::parse("a.toml", "[[rules]]\naction = \"ask\"\npaths = [\"x\"]\n").unwrap();
    let ro = Policy::parse(
        "r.toml",
        "[[rules]]\naction = \"read-only\"\npaths = [\"x\"]\n",
    )
    .unwrap();
    let deny = Policy::parse("d.toml", "[[rules]]\naction = \"deny\"\npaths = [\"x\"]\n").unwrap();
    let (a, r, d) = (
        ask.decide(b"x", false),
        ro.decide(b"x", false),
        deny.decide(b"x", false),
    );
    for s in [a.clone().stricter(r.clone()), r.clone().stricter(a.clone())] {
        assert_eq!((s.action, s.granted()), (Ask, ReadOnly));
    }
    assert_eq!(a.clone().stricter(d.clone()).action, Deny);
    assert_eq!(d.stricter(a.clone()).action, Deny);
    assert_eq!(a.granted(), Allow);
}
