//! `veilfs explain --all`: every path the policy denies or holds, with the rule,
//! from one walk that opens no file; a summary line; `--json`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn veilfs(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A walk that opened the FIFO below would wait for a writer for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut child = child;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("veilfs {args:?} did not end: it opened a file it should only list");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_held_path_is_listed_with_its_rule_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    for d in ["secrets/db", "docs", "src"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    for (rel, body) in [
        ("secrets/a.txt", "a"),
        ("secrets/db/b.txt", "b"),
        ("docs/guide.md", "g"),
        ("src/main.rs", "m"),
        ("src/dev.key", "k"),
    ] {
        std::fs::write(ws.join(rel), body).unwrap();
    }
    // A FIFO by a denied name: listing it must not open it.
    assert!(
        Command::new("mkfifo")
            .arg(ws.join(".env"))
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(
        ws.join(".veilfs.toml"),
        "extends = \"default\"\n[[rules]]\naction = \"read-only\"\npaths = [\"docs/\"]\n",
    )
    .unwrap();
    let o = veilfs(ws, &["explain", "--all"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with("# ")).collect();
    assert_eq!(
        rows,
        [
            "deny      .env  (rule 1 \".env\" (<built-in>:20:3): where people keep secrets and credentials)",
            "read-only .veilfs.toml  (the policy file's name, read-only at every depth: veilfs never lets a policy be planted)",
            format!(
                "read-only docs/  (rule 6 \"docs/\" ({}/.veilfs.toml:4:10))",
                ws.canonicalize().unwrap().display()
            )
            .as_str(),
            "deny      secrets/  (rule 1 \"secrets/\" (<built-in>:43:3): where people keep secrets and credentials)",
            "deny      src/dev.key  (rule 1 \"*.key\" (<built-in>:25:3): where people keep secrets and credentials)",
        ],
        "{out}"
    );
    // secrets/ counts with the three paths inside it; docs/guide.md inherits.
    assert!(
        out.ends_with(
            "# hiding 6 paths in 3 places; 3 more read-only or asked for (.git not walked)\n"
        ),
        "{out}"
    );
    let o = veilfs(ws, &["explain", "--all", "--json"]);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(lines[3]["path"], "secrets");
    assert_eq!(lines[3]["dir"], true);
    assert_eq!(lines[3]["action"], "deny");
    assert_eq!(lines[5]["hidden"], 6);
    assert_eq!(lines[5]["places"], 3);
}
