//! The audit log: every refusal with who asked, written off the request path.

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use common::Fixture;
use veilfs::{MountOptions, Policy};

const POLICY: &str = "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"secrets/\"]\n";

fn lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn mount_audited(f: &mut Fixture, log: &std::path::Path, all: bool) {
    let opts = MountOptions {
        audit: Some(log.to_path_buf()),
        audit_all: all,
        ..MountOptions::default()
    };
    f.mount_with(Policy::parse("p.toml", POLICY).unwrap(), None, &opts);
}

#[test]
fn a_refused_cat_is_logged_with_pid_uid_and_comm() {
    let mut f = Fixture::new();
    f.file(".env", "TOPSECRET").file("ok.txt", "ok");
    let log = f.tmp.path().join("audit.log");
    mount_audited(&mut f, &log, false);
    let child = Command::new("cat").arg(f.m(".env")).output().unwrap();
    assert!(!child.status.success());
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("cat {} & echo $!; wait", f.m(".env").display()))
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(fs::read_to_string(f.m("ok.txt")).unwrap(), "ok");
    f.mount.take().unwrap().unmount().unwrap();

    let entries = lines(&fs::read_to_string(&log).unwrap());
    let e = entries
        .iter()
        .find(|e| e["pid"] == pid)
        .unwrap_or_else(|| panic!("no line for pid {pid}: {entries:#?}"));
    assert_eq!(e["comm"], "cat");
    assert_eq!(e["uid"], 0);
    assert_eq!(e["gid"], 0);
    assert_eq!(e["op"], "lookup");
    assert_eq!(e["path"], ".env");
    assert_eq!(e["action"], "deny");
    assert_eq!(e["result"], "refused");
    assert_eq!(e["pattern"], ".env");
    assert_eq!(e["location"], "p.toml:3:10");
    assert!(e["time"].as_str().unwrap().ends_with('Z'));
    // Allowed operations are not logged without --audit-all.
    assert!(
        entries.iter().all(|e| e["result"] == "refused"),
        "{entries:#?}"
    );
}

#[test]
fn audit_all_logs_allowed_operations_too() {
    let mut f = Fixture::new();
    f.file("ok.txt", "ok");
    let log = f.tmp.path().join("audit.log");
    mount_audited(&mut f, &log, true);
    assert_eq!(fs::read_to_string(f.m("ok.txt")).unwrap(), "ok");
    f.mount.take().unwrap().unmount().unwrap();
    let entries = lines(&fs::read_to_string(&log).unwrap());
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "ok.txt" && e["result"] == "allowed" && e["op"] == "lookup"),
        "{entries:#?}"
    );
}

#[test]
fn audit_all_says_changes_absent_names_and_directories() {
    let mut f = Fixture::new();
    f.file("ok.txt", "ok").file("d/in.txt", "in");
    let log = f.tmp.path().join("audit.log");
    mount_audited(&mut f, &log, true);
    assert_eq!(fs::read_to_string(f.m("ok.txt")).unwrap(), "ok");
    fs::write(f.m("new.txt"), "x").unwrap();
    fs::rename(f.m("new.txt"), f.m("moved.txt")).unwrap();
    fs::remove_file(f.m("moved.txt")).unwrap();
    fs::create_dir(f.m("made")).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(f.m("d/in.txt"))
        .unwrap();
    assert!(fs::metadata(f.m("missing.cfg")).is_err());
    assert_eq!(fs::read_dir(f.m("d")).unwrap().count(), 1);
    f.mount.take().unwrap().unmount().unwrap();
    let entries = lines(&fs::read_to_string(&log).unwrap());
    let has = |op: &str, path: &str, key: &str| {
        entries.iter().any(|e| {
            e["op"] == op && e["path"] == path && e["result"] == "allowed" && e[key] == true
        })
    };
    for (op, path) in [
        ("create", "new.txt"),
        ("rename", "new.txt"),
        ("rename", "moved.txt"),
        ("unlink", "moved.txt"),
        ("mkdir", "made"),
        ("open", "d/in.txt"),
    ] {
        assert!(has(op, path, "change"), "{op} {path}: {entries:#?}");
    }
    assert!(has("lookup", "missing.cfg", "absent"), "{entries:#?}");
    assert!(has("lookup", "d", "dir"), "{entries:#?}");
    assert!(
        entries
            .iter()
            .any(|e| e["path"] == "d" && e["op"].as_str().unwrap_or("").starts_with("readdir")),
        "{entries:#?}"
    );
    // A read is not a change, and each change is said once per request.
    assert!(
        !entries
            .iter()
            .any(|e| e["path"] == "ok.txt" && e["change"] == true),
        "{entries:#?}"
    );
    let creates = entries
        .iter()
        .filter(|e| e["op"] == "create" && e["path"] == "new.txt")
        .count();
    assert_eq!(creates, 1, "{entries:#?}");
}

#[test]
fn a_flood_of_refusals_never_blocks_requests_and_drops_are_counted() {
    let mut f = Fixture::new();
    f.file(".env", "TOPSECRET").file("ok.txt", "ok");
    // The log is a pipe nobody reads yet: the writer blocks once it is full, and
    // requests must go on regardless.
    let fifo = f.tmp.path().join("audit.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    mount_audited(&mut f, &fifo, false);
    for _ in 0..20_000 {
        assert!(fs::metadata(f.m(".env")).is_err());
    }
    // Allowed reads still complete while the log is stuck.
    for _ in 0..100 {
        assert_eq!(fs::read_to_string(f.m("ok.txt")).unwrap(), "ok");
    }
    // Drain the pipe while the mount ends.
    let drain = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        all
    });
    f.mount.take().unwrap().unmount().unwrap();
    let text = String::from_utf8(drain.join().unwrap()).unwrap();
    let entries = lines(&text);
    let logged = entries.iter().filter(|e| e["result"] == "refused").count() as u64;
    let dropped: u64 = entries.iter().filter_map(|e| e["dropped"].as_u64()).sum();
    assert!(dropped > 0, "nothing was dropped ({logged} logged)");
    assert!(logged > 0);
    assert_eq!(
        logged + dropped,
        20_000,
        "every refusal is logged or counted as dropped"
    );
}

#[test]
fn explain_groups_an_audit_log_by_rule() {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("a.log");
    fs::write(
        &log,
        concat!(
            r#"{"result":"refused","path":".env","rule":1,"pattern":".env","location":"p.toml:3:10","why":"x"}"#, "\n",
            r#"{"result":"refused","path":"a/.env","rule":1,"pattern":".env","location":"p.toml:3:10","why":"x"}"#, "\n",
            r#"{"result":"refused","path":"secrets","rule":1,"pattern":"secrets/","location":"p.toml:3:18","why":"y"}"#, "\n",
            r#"{"result":"allowed","path":"ok","why":"z"}"#, "\n",
            r#"{"dropped":7}"#, "\n",
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", "--audit"])
        .arg(&log)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Counted by rule, after the two header lines (the policy, the totals) and
    // before the lines by path.
    let rows: Vec<&str> = out
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("# by path"))
        .collect();
    assert_eq!(
        out.lines().nth(1).unwrap().split_once(": ").unwrap().1,
        "3 refused; 0 would have been refused and 0 asked about (--permissive); in 3 paths"
    );
    assert_eq!(
        rows[0].trim(),
        r#"2  rule 1 ".env" (p.toml:3:10): .env, a/.env"#
    );
    assert_eq!(
        rows[1].trim(),
        r#"1  rule 1 "secrets/" (p.toml:3:18): secrets"#
    );
    assert_eq!(rows[2].trim(), "7  events dropped by the log (queue full)");
}

#[test]
fn every_kind_of_refusal_is_logged_with_its_operation() {
    let mut f = Fixture::new();
    f.file("ro/a.txt", "a");
    let log = f.tmp.path().join("audit.log");
    let opts = MountOptions {
        audit: Some(log.clone()),
        ..MountOptions::default()
    };
    let policy = "[[rules]]\naction = \"read-only\"\npaths = [\"ro/\"]\n";
    f.mount_with(Policy::parse("p.toml", policy).unwrap(), None, &opts);
    assert!(fs::create_dir(f.m("ro/new")).is_err());
    assert!(fs::write(f.m("ro/a.txt"), "b").is_err());
    assert!(fs::remove_file(f.m("ro/a.txt")).is_err());
    assert!(std::os::unix::fs::symlink("x", f.m("ro/l")).is_err());
    f.mount.take().unwrap().unmount().unwrap();
    let entries = lines(&fs::read_to_string(&log).unwrap());
    for (op, path) in [
        ("mkdir", "ro/new"),
        // Refused at the open for writing, before the truncation is asked.
        ("open", "ro/a.txt"),
        ("unlink", "ro/a.txt"),
        ("symlink", "ro/l"),
    ] {
        assert!(
            entries
                .iter()
                .any(|e| e["op"] == op && e["path"] == path && e["action"] == "read-only"),
            "no {op} refusal of {path}: {entries:#?}"
        );
    }
}

/// Under `veilfs run`, the command cannot rewrite, truncate, remove or replace its
/// own audit log (here in a directory it can write), and a log whose directory it
/// moved away is said to be another file when the run ends.
#[test]
fn the_command_cannot_rewrite_its_own_audit_log() {
    common::require_fuse();
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let logs = t.path().join("logs");
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&logs).unwrap();
    fs::write(ws.join(".env"), "TOPSECRET").unwrap();
    let log = logs.join("agent.log");
    let run_with = |args: &[&str], script: &str| {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["run", "--quiet", "--no-home"])
            .args(args)
            .arg("--audit")
            .arg(&log)
            .args(["--", "sh", "-c", script])
            .current_dir(&ws)
            .output()
            .unwrap()
    };
    let run = |script: &str| run_with(&[], script);
    let script = format!(
        "cat .env 2>/dev/null; export L={log}; \
         for how in ': > $L' 'echo {{}} >> $L' 'rm -f $L' 'mv $L $L.x' 'echo x > $L.new && mv $L.new $L' \
                    'ln $L $L.l' 'chmod 666 $L' 'truncate -s 0 $L'; do \
           if sh -c \"$how\" 2>/dev/null; then echo \"DONE $how\"; fi; \
         done",
        log = log.display()
    );
    let o = run(&script);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    assert!(!out.contains("DONE"), "the command changed its log:\n{out}");
    let events = lines(&fs::read_to_string(&log).unwrap());
    assert!(
        events
            .iter()
            .any(|e| e["path"] == ".env" && e["result"] == "refused"),
        "{events:#?}"
    );
    // Its directory moved away and a forged log put in its place: in the
    // command's private /tmp, where the log outside saw nothing of it.
    let moved = t.path().join("moved");
    let forge = format!(
        "cat .env 2>/dev/null; mv {logs} {moved} && mkdir {logs} && echo '{{}}' > {logs}/agent.log",
        logs = logs.display(),
        moved = moved.display()
    );
    let before = fs::read_to_string(&log).unwrap();
    let o = run(&forge);
    assert!(!moved.exists(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(fs::read_to_string(&log).unwrap().starts_with(&before));
    // With /tmp shared, the move happens outside: said.
    let o = run_with(&["--share-tmp"], &forge);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(moved.join("agent.log").exists(), "{err}");
    assert!(
        err.contains(&format!(
            "veilfs run: warning: the audit log {} is not the file this run wrote",
            log.display()
        )),
        "{err}"
    );
}

/// `explain --audit` of what a command could put in the log's place: a link to a
/// device or a FIFO is refused at once (nothing read without end, nothing waited
/// for), and a line that is no audit line is quoted short and escaped.
#[test]
fn explain_audit_refuses_what_is_no_log() {
    let t = tempfile::tempdir().unwrap();
    let explain = |p: &std::path::Path| {
        let child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["explain", "--audit"])
            .arg(p)
            .current_dir(t.path())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let (code, _, err) = common::finish(child, std::time::Duration::from_secs(30));
        (Some(code), err)
    };
    let zero = t.path().join("zero.log");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let (code, err) = explain(&zero);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    let fifo = t.path().join("fifo.log");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (code, err) = explain(&fifo);
    assert_eq!(code, Some(2), "{err}");
    let long = t.path().join("long.log");
    fs::write(&long, format!("\x1b[31m{}\n", "x".repeat(100_000))).unwrap();
    let (code, err) = explain(&long);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.len() < 1_000, "{} bytes of error", err.len());
    assert!(err.contains("not an audit line: \\x1b[31mxxx"), "{err}");
}
