//! `--permissive`: the policy's rules refuse nothing, every access they would
//! refuse is logged with its full path, and veilfs's own guards still hold.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{Fixture, Tree, assert_errno, names};
use veilfs::{MountOptions, Policy};

const POLICY: &str = r#"extends = "none"
[[rules]]
action = "deny"
paths = [".env", "certs/"]
[[rules]]
action = "read-only"
paths = ["ro.txt"]
[[rules]]
action = "ask"
paths = ["asked.txt"]
"#;

fn lines(log: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn fixture() -> Fixture {
    let f = Fixture::new();
    f.file(".env", "TOPSECRET")
        .file("certs/dev.key", "KEY")
        .file("ro.txt", "ro")
        .file("asked.txt", "asked")
        .file("ok.txt", "ok");
    f
}

fn mount(f: &mut Fixture, log: &Path, permissive: bool) {
    let opts = MountOptions {
        audit: Some(log.to_path_buf()),
        permissive,
        ..MountOptions::default()
    };
    f.mount_with(Policy::parse("p.toml", POLICY).unwrap(), None, &opts);
}

/// Every kind of access the policy refuses, through the mount; each must succeed
/// in a permissive mount and fail with `EACCES` in an enforcing one.
fn attempts(f: &Fixture) -> Vec<(&'static str, std::io::Result<()>)> {
    let m = |p: &str| f.m(p);
    vec![
        ("read .env", fs::read(m(".env")).map(|_| ())),
        (
            "read certs/dev.key",
            fs::read(m("certs/dev.key")).map(|_| ()),
        ),
        ("stat certs", fs::metadata(m("certs")).map(|_| ())),
        ("list certs", fs::read_dir(m("certs")).map(|_| ())),
        ("append ro.txt", {
            fs::OpenOptions::new()
                .append(true)
                .open(m("ro.txt"))
                .and_then(|mut w| std::io::Write::write_all(&mut w, b"+more"))
        }),
        ("read asked.txt", fs::read(m("asked.txt")).map(|_| ())),
        ("create certs/new", fs::write(m("certs/new"), "new")),
        ("mkdir certs/sub", fs::create_dir(m("certs/sub"))),
        (
            "chmod .env",
            fs::set_permissions(m(".env"), fs::Permissions::from_mode(0o600)),
        ),
        ("rename ro.txt", fs::rename(m("ro.txt"), m("ro2.txt"))),
        ("link .env", fs::hard_link(m(".env"), m("env-link"))),
        (
            "symlink in certs",
            std::os::unix::fs::symlink("dev.key", m("certs/sym")),
        ),
        ("unlink certs/dev.key", fs::remove_file(m("certs/dev.key"))),
    ]
}

#[test]
fn a_permissive_mount_refuses_nothing_and_logs_each_access_with_its_full_path() {
    let mut f = fixture();
    let log = f.tmp.path().join("audit.log");
    mount(&mut f, &log, true);
    assert_eq!(fs::read_to_string(f.m(".env")).unwrap(), "TOPSECRET");
    for (what, r) in attempts(&f) {
        assert!(r.is_ok(), "{what}: {r:?}");
    }
    let shown = names(&f.mnt);
    assert!(shown.contains(&".env".to_string()), "{shown:?}");
    assert!(shown.contains(&"certs".to_string()), "{shown:?}");
    // The changes reached the backing tree.
    assert_eq!(fs::read_to_string(f.s("ro2.txt")).unwrap(), "ro+more");
    assert_eq!(fs::read_to_string(f.s("certs/new")).unwrap(), "new");
    assert!(f.s("certs/sub").is_dir());
    assert!(!f.s("certs/dev.key").exists());
    assert_eq!(
        fs::metadata(f.s(".env")).unwrap().permissions().mode() & 0o777,
        0o600
    );
    f.mount.take().unwrap().unmount().unwrap();

    let events = lines(&log);
    assert!(
        events.iter().all(|e| e["result"] != "refused"),
        "nothing is refused: {events:#?}"
    );
    let has = |op: &str, path: &str, result: &str| {
        events
            .iter()
            .any(|e| e["op"] == op && e["path"] == path && e["result"] == result)
    };
    for (op, path, result) in [
        ("lookup", ".env", "would-refuse"),
        ("open", ".env", "would-refuse"),
        // The full path below a denied directory, not only the directory.
        ("lookup", "certs/dev.key", "would-refuse"),
        ("open", "certs/dev.key", "would-refuse"),
        ("open", "ro.txt", "would-refuse"),
        ("open", "asked.txt", "would-ask"),
        ("create", "certs/new", "would-refuse"),
        ("mkdir", "certs/sub", "would-refuse"),
        ("setattr", ".env", "would-refuse"),
        ("rename", "ro.txt", "would-refuse"),
        ("link", ".env", "would-refuse"),
        ("symlink", "certs/sym", "would-refuse"),
        ("unlink", "certs/dev.key", "would-refuse"),
    ] {
        assert!(
            has(op, path, result),
            "no {op} {path} {result} in {events:#?}"
        );
    }
    let e = events
        .iter()
        .find(|e| e["path"] == "certs/dev.key")
        .unwrap();
    assert_eq!(e["action"], "deny");
    assert_eq!(e["reason"], "ancestor");
    assert_eq!(e["pattern"], "certs/");
    // Allowed paths are not logged (no --audit-all).
    assert!(events.iter().all(|e| e["path"] != "ok.txt"));
}

#[test]
fn the_same_accesses_are_refused_when_enforcing_and_the_log_names_the_ancestor() {
    let mut f = fixture();
    let log = f.tmp.path().join("audit.log");
    mount(&mut f, &log, false);
    let before = f.snapshot();
    assert!(!names(&f.mnt).contains(&".env".to_string()));
    for (what, r) in attempts(&f) {
        assert_errno(r, libc::EACCES, what);
    }
    assert_eq!(f.snapshot(), before, "the backing tree changed");
    f.mount.take().unwrap().unmount().unwrap();
    let events = lines(&log);
    assert!(events.iter().all(|e| e["result"] != "would-refuse"));
    // An enforcing mount refuses the lookup of `certs`: the path below it is never
    // asked for, so the log names the directory (as the README says).
    assert!(
        events
            .iter()
            .any(|e| e["op"] == "lookup" && e["path"] == "certs" && e["result"] == "refused")
    );
    assert!(events.iter().all(|e| e["path"] != "certs/dev.key"));
}

#[test]
fn veilfs_guards_still_hold_in_a_permissive_mount() {
    let mut f = Fixture::new();
    let policy = concat!(
        "extends = \"none\"\n",
        "[[rules]]\naction = \"deny\"\npaths = [\".veilfs.toml\", \".cursorignore\", \"sub/\"]\n",
        "[[rules]]\nimport = [\".cursorignore\"]\naction = \"deny\"\n",
    );
    f.file(".veilfs.toml", policy)
        .file(".cursorignore", "hidden.txt\n")
        .file("hidden.txt", "h")
        .dir("sub");
    let log = f.tmp.path().join("audit.log");
    let file = f.s(".veilfs.toml");
    let mut loaded = veilfs::workspace::load::load_policy(Some(&file), &f.src).unwrap();
    veilfs::workspace::imports::attach(&mut loaded.policy, &f.src).unwrap();
    let opts = MountOptions {
        audit: Some(log.clone()),
        permissive: true,
        ..MountOptions::default()
    };
    f.mount_with(loaded.policy, Some(&file), &opts);
    let before = f.snapshot();
    // The rules are waived: both files are read, and what they hide is served.
    assert_eq!(fs::read_to_string(f.m(".veilfs.toml")).unwrap(), policy);
    assert_eq!(fs::read_to_string(f.m("hidden.txt")).unwrap(), "h");
    // The guards are not: neither file is changed, moved, removed or replaced.
    for name in [".veilfs.toml", ".cursorignore"] {
        assert_errno(fs::write(f.m(name), "x"), libc::EACCES, name);
        assert_errno(
            fs::OpenOptions::new().append(true).open(f.m(name)),
            libc::EACCES,
            name,
        );
        assert_errno(fs::rename(f.m(name), f.m("moved")), libc::EACCES, name);
        assert_errno(fs::remove_file(f.m(name)), libc::EACCES, name);
        assert_errno(
            fs::set_permissions(f.m(name), fs::Permissions::from_mode(0o666)),
            libc::EACCES,
            name,
        );
        assert_errno(fs::rename(f.m("hidden.txt"), f.m(name)), libc::EACCES, name);
    }
    // No policy is planted for a later mount, in a denied directory or elsewhere.
    assert_errno(
        fs::write(f.m("sub/.veilfs.toml"), "default = \"allow\"\n"),
        libc::EACCES,
        "sub/.veilfs.toml",
    );
    assert_errno(
        fs::write(f.m("sub/.cursorignore"), "!x\n"),
        libc::EACCES,
        "sub/.cursorignore",
    );
    // No new name for the policy file, through which it could be written.
    assert_errno(
        fs::hard_link(f.m(".veilfs.toml"), f.m("alias")),
        libc::EACCES,
        "a link to the policy file",
    );
    assert_eq!(f.snapshot(), before, "the backing tree changed");
    f.mount.take().unwrap().unmount().unwrap();
    let events = lines(&log);
    assert!(
        events.iter().any(|e| e["path"] == "hidden.txt"
            && e["result"] == "would-refuse"
            && e["pattern"] == "hidden.txt"),
        "{events:#?}"
    );
    // Refused by the guard, and logged with it as the reason (not the waived rule).
    for (path, reason) in [
        (".veilfs.toml", "policy-name"),
        (".cursorignore", "imported-file"),
        ("sub/.veilfs.toml", "policy-name"),
    ] {
        assert!(
            events
                .iter()
                .any(|e| e["path"] == path && e["result"] == "refused" && e["reason"] == reason),
            "no refusal of {path} by {reason}: {events:#?}"
        );
    }
    assert!(
        events
            .iter()
            .filter(|e| e["result"] == "refused")
            .all(|e| e["reason"] != "rule" && e["reason"] != "ancestor"),
        "{events:#?}"
    );
}

#[test]
fn permissive_needs_an_audit_log() {
    let t = Tree::new("veilfs-permissive", &["ws", "mnt", "rt"]);
    for args in [
        vec!["mount", "--permissive"],
        vec!["run", "--permissive", "--", "true"],
    ] {
        let mut c = t.veilfs();
        c.args(&args);
        if args[0] == "mount" {
            c.arg(t.p("ws")).arg(t.p("mnt"));
        } else {
            c.current_dir(t.p("ws"));
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--audit <FILE>"), "{args:?}: {err}");
    }
    assert!(!veilfs::session::mount::is_mount_point(&t.p("mnt")));
}

#[test]
fn explain_audit_reads_a_permissive_run_and_says_what_the_edited_policy_decides() {
    let t = Tree::new("veilfs-permissive", &["ws/certs", "mnt", "rt"]);
    fs::write(t.p("ws/.env"), "TOPSECRET").unwrap();
    fs::write(t.p("ws/certs/dev.key"), "KEY").unwrap();
    fs::write(t.p("p.toml"), POLICY).unwrap();
    let log = t.p("audit.log");
    let mut c = t.veilfs();
    c.args(["mount", "--permissive", "--audit"])
        .arg(&log)
        .arg("--policy")
        .arg(t.p("p.toml"))
        .arg(t.p("ws"))
        .arg(t.p("mnt"));
    let d = common::daemon::Daemon::start(c, &t.p("mnt"));
    assert!(
        d.said.contains(
            "; PERMISSIVE: nothing is refused, what the policy would refuse is logged to"
        ),
        "{}",
        d.said
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg("cat .env certs/dev.key")
        .current_dir(t.p("mnt"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "TOPSECRETKEY");
    drop(d);

    let explain = |json: bool| {
        let mut c = t.veilfs();
        c.args(["explain", "--audit"])
            .arg(&log)
            .arg("--policy")
            .arg(t.p("p.toml"))
            .arg("--workspace")
            .arg(t.p("ws"));
        if json {
            c.arg("--json");
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = explain(false);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], format!("# policy: {}", t.p("p.toml").display()));
    assert!(
        rows[1].starts_with(&format!("# {}: 0 refused; ", log.display()))
            && rows[1]
                .ends_with(" would have been refused and 0 asked about (--permissive); in 3 paths"),
        "{text}"
    );
    let p = t.p("p.toml").display().to_string();
    // Each path's line: how often, by whom and how, and what the policy says now.
    let line = |path: &str| {
        rows.iter()
            .find(|r| r.trim_start().split("  ").nth(1) == Some(path))
            .unwrap_or_else(|| panic!("no line for {path}: {text}"))
            .to_string()
    };
    let env = line(".env");
    assert!(env.contains(" would-refuse by cat; lookup, open"), "{env}");
    assert!(
        env.ends_with(&format!("; now deny (rule 1 \".env\" ({p}:4:10))")),
        "{env}"
    );
    let key = line("certs/dev.key");
    assert!(key.contains(" would-refuse by cat; lookup, open"), "{key}");
    assert!(
        key.ends_with(&format!(
            "; now deny (ancestor `certs` denied by rule 1 \"certs/\" ({p}:4:18))"
        )),
        "{key}"
    );
    // Tuned: `.env` is allowed now, `certs/` still denied.
    fs::write(t.p("p.toml"), POLICY.replace("\".env\", ", "")).unwrap();
    let json = explain(true);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |path: &str| rows.iter().find(|r| r["path"] == path).unwrap();
    assert_eq!(row(".env")["now"]["action"], "allow");
    assert!(row(".env")["results"]["would-refuse"].as_u64() >= Some(2));
    assert_eq!(row(".env")["comms"][0], "cat");
    assert_eq!(row("certs/dev.key")["now"]["action"], "deny");
    assert_eq!(row("certs")["now"]["action"], "deny");
}
