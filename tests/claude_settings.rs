//! Claude Code's settings (`.claude/settings.json`, `.claude/settings.local.json`)
//! as a source of rules: each documented rule form as a table, what is reported
//! rather than applied, the errors, and through a real mount (a policy importing
//! them, and the built-in default honouring them) with the files guarded.

mod common;

use std::process::Command;

use common::{Fixture, Tree, assert_errno};
use veilfs::policy::claude::{self, Context};
use veilfs::policy::{Found, Reason};
use veilfs::{Action, Policy};

const IMPORT: &str =
    "[[rules]]\nimport = [\".claude/settings.json\", \".claude/settings.local.json\"]\n";

fn cx() -> Context {
    Context {
        workspace: Some(b"/home/me/proj".to_vec()),
        home: Some(b"/home/me".to_vec()),
    }
}

fn settings(deny: &[&str], ask: &[&str], allow: &[&str]) -> String {
    serde_json::json!({"permissions": {"deny": deny, "ask": ask, "allow": allow}}).to_string()
}

/// A policy (`text`) with the settings files attached as found at the root.
fn policy_with(text: &str, files: &[(&str, String)]) -> (Policy, Vec<String>) {
    let mut p = Policy::parse("p.toml", text).unwrap_or_else(|e| panic!("policy: {e}"));
    let found = files
        .iter()
        .map(|(name, text)| Found {
            dir: Vec::new(),
            name: name.to_string(),
            text: text.clone(),
        })
        .collect();
    let notes = p
        .attach_imports_in(found, &cx())
        .into_iter()
        .map(|e| e.message)
        .collect();
    (p, notes)
}

fn action(p: &Policy, path: &str, is_dir: bool) -> Action {
    p.decide(path.as_bytes(), is_dir).action
}

/// Each documented rule form, with the paths it must and must not reach.
#[test]
fn each_rule_form_maps_as_documented() {
    use Action::*;
    // (list, entry, path, is_dir, expected action)
    let rows: &[(&str, &str, &str, bool, Action)] = &[
        // `./path` and `path`: relative to the workspace root; without an inner `/`
        // the name at any depth (as a .gitignore line), with one anchored.
        ("deny", "Read(./.env)", ".env", false, Deny),
        ("deny", "Read(./.env)", "app/.env", false, Deny),
        ("deny", "Read(./.env)", ".env.local", false, Allow),
        ("deny", "Read(./.env.*)", ".env.local", false, Deny),
        ("deny", "Read(.env)", "x/.env", false, Deny),
        ("deny", "Read(./secrets/**)", "secrets/a/b.txt", false, Deny),
        ("deny", "Read(./secrets/**)", "app/secrets/a", false, Allow),
        ("deny", "Read(*.pem)", "deep/dir/k.pem", false, Deny),
        ("deny", "Read(**/*.key)", "a/b/c.key", false, Deny),
        (
            "deny",
            "Read(config/*.yaml)",
            "config/prod.yaml",
            false,
            Deny,
        ),
        (
            "deny",
            "Read(config/*.yaml)",
            "config/sub/prod.yaml",
            false,
            Allow,
        ),
        ("deny", "Read(build/)", "build", true, Deny),
        ("deny", "Read(build/)", "build", false, Allow),
        // `/path`: relative to the project root (the directory holding .claude).
        ("deny", "Read(/private.txt)", "private.txt", false, Deny),
        (
            "deny",
            "Read(/private.txt)",
            "sub/private.txt",
            false,
            Allow,
        ),
        // `//abs` and `~/path`: kept where they lead into the workspace.
        (
            "deny",
            "Read(//home/me/proj/db/*.sql)",
            "db/dump.sql",
            false,
            Deny,
        ),
        ("deny", "Read(~/proj/.npmrc)", ".npmrc", false, Deny),
        ("deny", "Read(~/proj/.npmrc)", "sub/.npmrc", false, Allow),
        // Edit deny (and the other editing tools): read-only.
        (
            "deny",
            "Edit(./config/**)",
            "config/a.toml",
            false,
            ReadOnly,
        ),
        ("deny", "Write(./docs/**)", "docs/x.md", false, ReadOnly),
        (
            "deny",
            "MultiEdit(src/main.rs)",
            "src/main.rs",
            false,
            ReadOnly,
        ),
        (
            "deny",
            "NotebookEdit(*.ipynb)",
            "n/a.ipynb",
            false,
            ReadOnly,
        ),
        // ask: a question.
        ("ask", "Read(./prod/**)", "prod/db.sql", false, Ask),
        ("ask", "Edit(./prod/**)", "prod/db.sql", false, Ask),
        // A bare tool name: every path.
        ("deny", "Edit", "any/file.rs", false, ReadOnly),
        ("deny", "Read", "any/file.rs", false, Deny),
        // `.` and empty segments are normalised away, never left to match nothing.
        ("deny", "Read(./a/./b/p10)", "a/b/p10", false, Deny),
        ("deny", "Read(cfg//token.txt)", "cfg/token.txt", false, Deny),
        ("deny", "Read(//home/me//proj/./p4)", "p4", false, Deny),
        ("deny", "Read(/)", "any/file.rs", false, Deny),
        // Escapes: a leading `#` is a name, not a comment.
        ("deny", "Read(#notes)", "#notes", false, Deny),
    ];
    for &(list, entry, path, is_dir, want) in rows {
        let text = match list {
            "deny" => settings(&[entry], &[], &[]),
            _ => settings(&[], &[entry], &[]),
        };
        let (p, _) = policy_with(IMPORT, &[(".claude/settings.json", text)]);
        assert_eq!(
            action(&p, path, is_dir),
            want,
            "{list} {entry}: {path} (is_dir {is_dir}): {}",
            p.decide(path.as_bytes(), is_dir).why()
        );
    }
}

#[test]
fn deny_wins_over_ask_and_read_only_in_either_file() {
    let (p, _) = policy_with(
        IMPORT,
        &[
            (
                ".claude/settings.json",
                settings(&["Edit(data/**)"], &["Read(data/**)"], &[]),
            ),
            (
                ".claude/settings.local.json",
                settings(&["Read(data/secret.csv)"], &[], &[]),
            ),
        ],
    );
    assert_eq!(action(&p, "data/secret.csv", false), Action::Deny);
    assert_eq!(action(&p, "data/other.csv", false), Action::Ask);
    let d = p.decide(b"data/secret.csv", false);
    assert!(
        d.why()
            .contains(r#""Read(data/secret.csv)" (.claude/settings.local.json:1)"#),
        "{}",
        d.why()
    );
}

#[test]
fn allow_entries_never_loosen_a_veilfs_rule() {
    let text = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/"]

[[rules]]
import = ".claude/settings.json"
"#;
    let (p, notes) = policy_with(
        text,
        &[(
            ".claude/settings.json",
            settings(&[], &[], &["Read(./.env)", "Read(**)", "Edit(secrets/**)"]),
        )],
    );
    assert_eq!(action(&p, ".env", false), Action::Deny);
    assert_eq!(action(&p, "secrets/x", false), Action::Deny);
    assert_eq!(
        notes,
        [
            "3 permissions.allow rules are not applied: an allow cannot loosen a veilfs rule \
          (in Claude Code, too, deny wins over allow)"
        ]
    );
}

#[test]
fn what_cannot_be_mapped_is_reported_never_dropped_silently() {
    let text = settings(
        &[
            "Bash(curl *)",
            "WebFetch(domain:example.com)",
            "Read(~/.ssh/**)",
            "Read(//etc/passwd)",
            "Read(../other/x)",
            "Read(!keep)",
            "Read()",
            "Read(a\nb)",
            "Read(./.env",
        ],
        &["Edit(src/**)"],
        &[],
    );
    let t = claude::translate(&text, &cx()).unwrap();
    let notes: Vec<&str> = t.notes.iter().map(|n| n.message.as_str()).collect();
    let expect = [
        r#""Bash(curl *)" in permissions.deny: not applied: not a rule for reading or editing files (Bash): veilfs polices files, not what a tool does"#,
        r#""WebFetch(domain:example.com)" in permissions.deny: not applied: not a rule for reading or editing files (WebFetch): veilfs polices files, not what a tool does"#,
        r#""Read(~/.ssh/**)" in permissions.deny: not applied: /home/me/.ssh/** is outside the workspace (veilfs polices the workspace; under `veilfs run` the home policy decides the home directory)"#,
        r#""Read(//etc/passwd)" in permissions.deny: not applied: /etc/passwd is outside the workspace (veilfs polices the workspace; under `veilfs run` the home policy decides the home directory)"#,
        r#""Read(../other/x)" in permissions.deny: not applied: a `..` segment: veilfs does not resolve it"#,
        r#""Read(!keep)" in permissions.deny: not applied: a leading `!`: Claude Code's rules have no exceptions"#,
        r#""Read()" in permissions.deny: not applied: an empty path"#,
        "\"Read(a\\nb)\" in permissions.deny: not applied: the path holds a control character",
        r#""Read(./.env" in permissions.deny: not applied: not of the form Tool or Tool(specifier)"#,
        r#""Edit(src/**)" in permissions.ask: veilfs asks before reading these paths too (its question covers every use)"#,
    ];
    assert_eq!(notes, expect);
    // Only the ask entry is applied.
    assert_eq!(t.mapped.len(), 1, "{:?}", t.mapped);
    // Every note of an entry names its line in the file.
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(&text).unwrap())
            .unwrap();
    let t = claude::translate(&pretty, &cx()).unwrap();
    assert!(t.notes.iter().all(|n| n.at > 0), "{:?}", t.notes);
}

#[test]
fn a_file_of_the_wrong_shape_is_an_error() {
    for (text, want) in [
        ("{", "not valid JSON"),
        ("[]", "not a JSON object"),
        (r#"{"permissions": []}"#, "`permissions` is not an object"),
        (
            r#"{"permissions": {"deny": "Read(.env)"}}"#,
            "`permissions.deny` is not a list",
        ),
    ] {
        let e = claude::translate(text, &cx()).unwrap_err();
        assert!(e.starts_with(want), "{text}: {e}");
    }
    // No permissions: nothing, and no error.
    assert_eq!(
        claude::translate(r#"{"model": "x"}"#, &cx()).unwrap(),
        claude::Translation::default()
    );
}

#[test]
fn the_policy_language_refuses_an_action_or_a_mix() {
    let e = Policy::parse(
        "p.toml",
        "[[rules]]\naction = \"deny\"\nimport = \".claude/settings.json\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rule 1: a rule importing Claude Code's settings takes no `action`"),
        "{e}"
    );
    let e = Policy::parse(
        "p.toml",
        "[[rules]]\nimport = [\".claude/settings.json\", \".cursorignore\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(r#"rule 1: cannot import ".cursorignore" beside Claude Code's settings"#),
        "{e}"
    );
    let e = Policy::parse("p.toml", "[[rules]]\nimport = \".cursorignore\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing key `action`"), "{e}");
    let e = Policy::parse(
        "p.toml",
        "[[rules]]\nimport = \".claude/other.json\"\naction = \"deny\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(r#"".claude/settings.json", ".claude/settings.local.json""#),
        "{e}"
    );
}

#[test]
fn the_settings_files_are_read_only_at_their_path_and_their_directory_is_held() {
    let (p, _) = policy_with(
        IMPORT,
        &[(".claude/settings.json", settings(&["Read(.env)"], &[], &[]))],
    );
    for path in [".claude/settings.json", ".claude/settings.local.json"] {
        let d = p.decide(path.as_bytes(), false);
        assert_eq!(d.action, Action::ReadOnly, "{path}");
        assert!(
            matches!(d.reason, Reason::ImportedFile),
            "{path}: {}",
            d.why()
        );
    }
    // Only at that path: another settings.json is an ordinary file.
    assert_eq!(
        action(&p, "sub/.claude/settings.json", false),
        Action::Allow
    );
    assert_eq!(action(&p, "settings.json", false), Action::Allow);
    assert!(p.holds_imported(b".claude"));
    assert!(p.holds_imported(b""));
    assert!(!p.holds_imported(b"src"));
    assert!(p.is_source_name(b"settings.local.json"));
    assert!(!p.asks());
    let (p, _) = policy_with(
        IMPORT,
        &[(".claude/settings.json", settings(&[], &["Read(x)"], &[]))],
    );
    assert!(p.asks(), "an ask entry makes the policy ask");
}

/// A workspace with Claude Code settings; `mnt`, `rt` beside it.
fn claude_tree() -> Tree {
    let t = Tree::new(
        "veilfs-claude",
        &["ws/.claude", "ws/vault", "ws/config", "ws/app", "mnt", "rt"],
    );
    let json = settings(
        &[
            "Read(./.env)",
            "Read(./vault/**)",
            "Edit(./config/**)",
            "Bash(curl *)",
        ],
        &[],
        &["Bash(npm test)"],
    );
    for (rel, body) in [
        ("ws/.claude/settings.json", json.as_str()),
        ("ws/.env", "TOKEN=root-secret\n"),
        ("ws/app/.env", "TOKEN=app-secret\n"),
        ("ws/vault/db.txt", "db-secret\n"),
        ("ws/config/app.toml", "port = 1\n"),
        ("ws/readme.md", "readme\n"),
    ] {
        std::fs::write(t.p(rel), body).unwrap();
    }
    t
}

#[test]
fn the_default_honours_the_settings_through_a_mount() {
    let t = claude_tree();
    let d = t.mount();
    assert!(
        d.said.contains(
            "with policy built-in default policy, with the rules of .claude/settings.json"
        ),
        "{}",
        d.said
    );
    // What the settings deny: hidden, by every name; Edit deny: read-only.
    for rel in [".env", "app/.env", "vault/db.txt"] {
        assert_errno(std::fs::read(t.m(rel)), libc::EACCES, rel);
    }
    assert_eq!(common::names(&t.m("app")), Vec::<String>::new());
    assert!(common::names(&t.m("vault")).is_empty());
    assert_eq!(
        std::fs::read_to_string(t.m("config/app.toml")).unwrap(),
        "port = 1\n"
    );
    let before = common::snapshot(&t.p("ws"));
    assert_errno(
        std::fs::write(t.m("config/app.toml"), "port = 2\n"),
        libc::EACCES,
        "write config/app.toml",
    );
    assert_errno(
        std::fs::write(t.m("config/new.toml"), "x\n"),
        libc::EACCES,
        "create config/new.toml",
    );
    // The settings file cannot be changed, replaced or moved away through the mount.
    assert_errno(
        std::fs::write(t.m(".claude/settings.json"), "{}"),
        libc::EACCES,
        "write settings.json",
    );
    assert_errno(
        std::fs::remove_file(t.m(".claude/settings.json")),
        libc::EACCES,
        "rm settings.json",
    );
    assert_errno(
        std::fs::rename(t.m(".claude"), t.m("claude.old")),
        libc::EACCES,
        "mv .claude",
    );
    assert_errno(
        std::fs::rename(t.m("readme.md"), t.m(".claude/settings.json")),
        libc::EACCES,
        "mv over settings.json",
    );
    assert_eq!(common::snapshot(&t.p("ws")), before);
    // Other files stay writable; grep finds no secret.
    std::fs::write(t.m("readme.md"), "changed\n").unwrap();
    let o = Command::new("grep")
        .args(["-r", "secret", "."])
        .current_dir(t.p("mnt"))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("-secret"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    drop(d);
}

#[test]
fn check_and_explain_report_the_settings() {
    let t = claude_tree();
    let o = t
        .veilfs()
        .args(["explain", ".env", "vault/db.txt", "config/app.toml"])
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    // The default's own rule hides .env already (an equal entry does not take
    // over); what only the settings hide is named by its entry.
    assert!(out.contains(r#"deny      .env  (rule 1 ".env""#), "{out}");
    assert!(
        out.contains(
            r#"deny      vault/db.txt  (rule 7 "Read(./vault/**)" (.claude/settings.json:1)"#
        ),
        "{out}"
    );
    assert!(
        out.contains(r#""Edit(./config/**)" (.claude/settings.json:1)"#),
        "{out}"
    );
    assert!(
        err.contains(
            ".claude/settings.json:1:1: warning: \"Bash(curl *)\" in permissions.deny: not applied"
        ),
        "{err}"
    );
    let o = t
        .veilfs()
        .arg("check")
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains(".claude/settings.json: warning: 1 permissions.allow rule is not applied"),
        "{all}"
    );
    // A settings file that is not JSON stops the load (fail closed).
    std::fs::write(t.p("ws/.claude/settings.json"), "{ \"permissions\": ").unwrap();
    let o = t
        .veilfs()
        .arg("check")
        .current_dir(t.p("ws"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(
            "cannot read .claude/settings.json, which the policy imports rules from: not valid JSON"
        ),
        "{err}"
    );
}

#[test]
fn a_policy_importing_the_settings_through_a_mount_with_a_link_refused() {
    let mut f = Fixture::new();
    f.file(
        ".claude/settings.local.json",
        &settings(&["Read(data/*.csv)"], &[], &[]),
    )
    .file("data/a.csv", "csv-secret\n")
    .file("data/a.txt", "text\n");
    let mut p = Policy::parse("p.toml", IMPORT).unwrap();
    let w = veilfs::workspace::imports::attach(&mut p, &f.src).unwrap_or_else(|e| panic!("{e}"));
    assert!(w.is_empty(), "{w:?}");
    f.mount_policy(p, None);
    assert_errno(std::fs::read(f.m("data/a.csv")), libc::EACCES, "a.csv");
    assert_eq!(
        std::fs::read_to_string(f.m("data/a.txt")).unwrap(),
        "text\n"
    );
    // The settings file absent at start cannot be planted through the mount.
    assert_errno(
        std::fs::write(f.m(".claude/settings.json"), "{}"),
        libc::EACCES,
        "plant settings.json",
    );
    assert!(!f.s(".claude/settings.json").exists());
    // A `.claude` that is a link is refused when the policy is loaded.
    let other = Fixture::new();
    other.file("elsewhere/settings.json", &settings(&["Read(x)"], &[], &[]));
    std::os::unix::fs::symlink(other.s("elsewhere"), other.s(".claude")).unwrap();
    let mut p = Policy::parse("p.toml", IMPORT).unwrap();
    let e = veilfs::workspace::imports::attach(&mut p, &other.src).unwrap_err();
    assert!(e.to_string().contains(".claude is a symbolic link"), "{e}");
}

#[test]
fn an_outside_edit_of_the_settings_reloads() {
    let t = claude_tree();
    let d = t.mount();
    assert_eq!(
        std::fs::read_to_string(t.m("readme.md")).unwrap(),
        "readme\n"
    );
    // The kernel holds `.claude` (as an agent's first look at the tree makes it).
    assert!(common::names(&t.m(".claude")).contains(&"settings.json".to_string()));
    let json = settings(&["Read(./.env)", "Read(readme.md)"], &[], &[]);
    std::fs::write(t.p("ws/.claude/settings.json"), json).unwrap();
    assert!(
        common::wait_until(std::time::Duration::from_secs(10), || {
            std::fs::read(t.m("readme.md")).is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))
        }),
        "readme.md still readable after the settings denied it"
    );
    // And what the edit dropped is shown again (Edit(./config/**) is gone).
    std::fs::write(t.m("config/app.toml"), "port = 3\n").unwrap();
    drop(d);
}

/// The built-in default with Claude Code's settings that the command planted:
/// every entry (a bare `Edit`, an `Edit` deny of a denied path, an `ask` of one)
/// can only tighten, never show what a rule before it hides.
#[test]
fn planted_settings_never_loosen_the_rules_before_them() {
    let text = veilfs::workspace::imports::builtin_text(&[".claude/settings.json"]);
    let planted = [
        settings(&["Edit"], &[], &[]),
        settings(
            &["Edit(./.env)", "Edit(id_rsa)", "Edit(secrets/**)"],
            &[],
            &[],
        ),
        settings(
            &[],
            &["Read(./.envrc)", "Read(.env)", "Edit(secrets/**)"],
            &[],
        ),
        settings(&[], &["Read"], &[]),
    ];
    // As a workspace, and as the home directory (the workspace stacked on the
    // home policy, as `veilfs run` does when they are the same).
    let home = Policy::raw(
        veilfs::policy::BUILTIN_HOME_NAME,
        veilfs::policy::HOME_DEFAULT_POLICY,
    )
    .unwrap();
    for json in &planted {
        for base in [None, Some(&home)] {
            let mut p = Policy::parse_on(base, veilfs::policy::BUILTIN_NAME, &text).unwrap();
            p.attach_imports_in(
                vec![Found {
                    dir: Vec::new(),
                    name: ".claude/settings.json".into(),
                    text: json.clone(),
                }],
                &cx(),
            );
            let mut hidden = vec![
                ".env",
                ".envrc",
                "id_rsa",
                "secrets/db.txt",
                "deploy/prod.key",
            ];
            if base.is_some() {
                hidden.extend([".ssh/id_ed25519", ".aws/credentials", ".bash_history"]);
            }
            for path in hidden {
                let d = p.decide(path.as_bytes(), false);
                assert_eq!(
                    d.action,
                    Action::Deny,
                    "{json} (home base: {}): {path}: {}",
                    base.is_some(),
                    d.why()
                );
            }
        }
    }
    // Where nothing was stricter, the entries do tighten.
    let mut p = Policy::parse(veilfs::policy::BUILTIN_NAME, &text).unwrap();
    p.attach_imports_in(
        vec![Found {
            dir: Vec::new(),
            name: ".claude/settings.json".into(),
            text: settings(&["Edit"], &["Read(docs/**)"], &[]),
        }],
        &cx(),
    );
    assert_eq!(action(&p, "src/main.rs", false), Action::ReadOnly);
    assert_eq!(action(&p, "docs/a.md", false), Action::Ask);
}

/// The same through a mount: a settings file planted through the mount where
/// none was is refused by a reload (it was written through the mount lately), and
/// read at the next start it hides more and shows nothing.
#[test]
fn a_settings_file_planted_through_the_mount_only_tightens() {
    let t = claude_tree();
    // Hidden by the default's own rule, not by the settings.
    std::fs::write(t.p("ws/server.key"), "KEY\n").unwrap();
    let mount = || t.mount();
    let d = mount();
    assert_errno(std::fs::read(t.m(".env")), libc::EACCES, ".env");
    assert_errno(std::fs::read(t.m("server.key")), libc::EACCES, "server.key");
    // settings.local.json is not there: the command may make it.
    let planted = settings(
        &["Edit", "Edit(./.env)", "Read(readme.md)"],
        &["Read(./vault/**)"],
        &[],
    );
    std::fs::write(t.m(".claude/settings.local.json"), planted).unwrap();
    // A reload now refuses it: it was written through the mount.
    let o = t.veilfs().arg("reload").arg(t.p("mnt")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(".claude/settings.local.json")
            && err.contains("opened for writing through the mount"),
        "{err}"
    );
    drop(d);
    // The next start reads it (no record of the write survives the daemon) ...
    let d = mount();
    assert!(
        d.said
            .contains(".claude/settings.json, .claude/settings.local.json"),
        "{}",
        d.said
    );
    assert_errno(std::fs::read(t.m("readme.md")), libc::EACCES, "readme.md");
    // ... and shows nothing that was hidden.
    for rel in [".env", "app/.env", "vault/db.txt", "server.key"] {
        assert_errno(std::fs::read(t.m(rel)), libc::EACCES, rel);
    }
    drop(d);
}

/// In the home directory `.claude/settings.json` is Claude Code's user settings
/// (it writes them; their paths mean something else): the default leaves them be.
#[test]
fn the_default_leaves_claude_codes_user_settings_in_the_home_directory_alone() {
    let t = claude_tree();
    let o = t
        .veilfs()
        .args([
            "explain",
            "--no-home",
            ".claude/settings.json",
            "vault/db.txt",
        ])
        .current_dir(t.p("ws"))
        .env("HOME", t.p("ws"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("# policy: built-in default policy\n"), "{out}");
    assert!(out.contains("allow     .claude/settings.json"), "{out}");
    assert!(out.contains("allow     vault/db.txt"), "{out}");
}
