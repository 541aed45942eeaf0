//! The `ask` action on a real `veilfs mount`: a request that uses an `ask` path
//! waits for an approver on the control socket; each answer does what it says, and
//! nobody to ask, no answer, an approver gone or an unmount all refuse (EACCES).
//! Other requests never wait behind a question, even with one request thread.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::{Approver, Daemon, Prompt};
use common::tmux::Tmux;
use common::wait_until;

const SECRET: &str = "ask-secret-0f3a\n";

/// `mig/` asks; `src/` is allowed; `ro/` is read-only, with `ro/q/` asking.
const POLICY: &str = r#"
[[rules]]
action = "ask"
paths = ["mig/"]

[[rules]]
action = "read-only"
paths = ["ro/"]

[[rules]]
action = "ask"
paths = ["ro/q/"]
"#;

struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            tmp: common::temp_tree(
                "veilfs-ask",
                &["ws/mig/sub", "ws/src", "ws/ro/q", "mnt", "rt"],
            ),
        };
        std::fs::write(t.p("ws/mig/001.sql"), SECRET).unwrap();
        std::fs::write(t.p("ws/mig/002.sql"), SECRET).unwrap();
        std::fs::write(t.p("ws/mig/sub/003.sql"), SECRET).unwrap();
        std::fs::write(t.p("ws/src/a.txt"), "plain\n").unwrap();
        std::fs::write(t.p("ws/ro/q/r.txt"), SECRET).unwrap();
        std::fs::write(t.p("pol.toml"), POLICY).unwrap();
        t
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn veilfs(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", self.p("rt"));
        c
    }

    /// `veilfs mount` with the policy, the audit log and `extra` flags.
    fn mount(&self, extra: &[&str]) -> Daemon {
        let mut c = self.veilfs();
        c.arg("mount")
            .arg("--policy")
            .arg(self.p("pol.toml"))
            .arg("--audit")
            .arg(self.p("audit.log"))
            .args(extra)
            .arg(self.p("ws"))
            .arg(self.p("mnt"));
        Daemon::start(c, &self.p("mnt"))
    }

    fn approver(&self) -> Approver {
        Approver::subscribe(&self.p("rt"))
    }

    /// `sh -c script` in the tree's directory, started now.
    fn spawn(&self, script: &str) -> Child {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(self.tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Mounted with a long timeout, an approver subscribed, and `cat` of
    /// `mig/001.sql` waiting on its question (returned).
    fn waiting_read(&self) -> (Daemon, Approver, Child, serde_json::Value) {
        let d = self.mount(&["--ask-timeout", "600"]);
        let mut a = self.approver();
        let c = self.spawn("exec cat mnt/mig/001.sql");
        let q = a.question(Duration::from_secs(20));
        (d, a, c, q)
    }

    /// `veilfs prompt ARGS`, started in `cwd`.
    fn prompt_in(&self, cwd: &Path, args: &[&OsStr]) -> Prompt {
        let mut c = self.veilfs();
        c.arg("prompt").args(args).current_dir(cwd);
        Prompt::start(c)
    }

    /// `veilfs prompt PATHS`, once it answers for a first session.
    fn prompt(&self, paths: &[PathBuf]) -> Prompt {
        let paths: Vec<&OsStr> = paths.iter().map(|p| p.as_os_str()).collect();
        let mut p = self.prompt_in(self.tmp.path(), &paths);
        p.out.expect("answering for veilfs mount");
        p
    }

    /// `veilfs mount` of `ws` at `mnt` (both in the tree) with the policy and a
    /// long timeout for questions.
    fn mount_at(&self, ws: &str, mnt: &str) -> Daemon {
        let mut c = self.veilfs();
        c.arg("mount")
            .arg("--policy")
            .arg(self.p("pol.toml"))
            .args(["--ask-timeout", "600"])
            .arg(self.p(ws))
            .arg(self.p(mnt));
        Daemon::start(c, &self.p(mnt))
    }

    /// A second workspace `ws2` (its `mig/001.sql` holds `second`), mounted at
    /// `mnt2`.
    fn second_mount(&self) -> Daemon {
        std::fs::create_dir_all(self.p("ws2/mig")).unwrap();
        std::fs::create_dir_all(self.p("mnt2")).unwrap();
        std::fs::write(self.p("ws2/mig/001.sql"), "second\n").unwrap();
        self.mount_at("ws2", "mnt2")
    }

    /// The audit log's lines about questions.
    fn asked(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.p("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("ask").is_some())
            .collect()
    }
}

/// Waits (at most 30 s) for `child`: exit code, stdout, stderr.
#[track_caller]
fn finish(child: Child) -> (i32, String, String) {
    common::finish(child, Duration::from_secs(30))
}

fn still_running(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

/// Drops the kernel's clean page cache (so that a new open is not served from it).
fn drop_caches() {
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
}

/// Polls the audit log (written by its own thread) until `f` holds.
#[track_caller]
fn audit_shows(t: &Tree, what: &str, f: impl Fn(&[serde_json::Value]) -> bool) {
    assert!(
        wait_until(Duration::from_secs(10), || f(&t.asked())),
        "the audit log never showed {what}:\n{:#?}",
        t.asked()
    );
}

#[test]
fn a_read_waits_and_allow_once_serves_it_once() {
    let t = Tree::new();
    let (_d, mut a, mut cat, q) = t.waiting_read();
    // The question is open, so the read is waiting: nothing served yet.
    assert!(still_running(&mut cat), "cat ended before the answer");
    assert_eq!(q["path"], "mig/001.sql", "{q}");
    assert_eq!(q["op"], "open");
    assert_eq!(q["access"], "read");
    assert_eq!(q["directory"], "mig");
    assert_eq!(q["pid"], cat.id());
    assert_eq!(q["comm"], "cat");
    assert!(
        q["cmdline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "mnt/mig/001.sql"),
        "{q}"
    );
    assert!(q["rule"].as_str().unwrap().contains("mig/"), "{q}");
    a.answer(&q["id"], "allow-once", None);
    let (code, out, err) = finish(cat);
    assert_eq!((code, out.as_str()), (0, SECRET), "{err}");

    // Once: the next open asks again.
    drop_caches();
    let cat = t.spawn("cat mnt/mig/001.sql");
    let q2 = a.question(Duration::from_secs(20));
    assert_ne!(q2["id"], q["id"]);
    a.answer(&q2["id"], "deny", None);
    let (code, out, err) = finish(cat);
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!out.contains("ask-secret"), "{out}");
    audit_shows(&t, "asked, approved, refused", |v| {
        v.iter().filter(|e| e["result"] == "asked").count() == 2
            && v.iter()
                .any(|e| e["result"] == "approved" && e["ask"]["outcome"] == "allow-once")
            && v.iter()
                .any(|e| e["result"] == "refused" && e["ask"]["outcome"] == "deny")
    });
    // Who answered, and how long the request waited, are in the log.
    let approved = t
        .asked()
        .into_iter()
        .find(|e| e["result"] == "approved")
        .unwrap();
    assert_eq!(
        approved["ask"]["by"]["pid"],
        std::process::id(),
        "{approved}"
    );
    assert!(approved["ask"]["waited_ms"].is_u64(), "{approved}");
}

#[test]
fn allow_for_the_session_stops_asking_for_that_path_or_directory() {
    let t = Tree::new();
    let _d = t.mount(&[]);
    let mut a = t.approver();
    let cat = t.spawn("cat mnt/mig/001.sql");
    a.answer_next("allow-path");
    assert_eq!(finish(cat).0, 0);
    // The same path: served at once, three times (were it asked, nobody answers
    // and the cat would wait).
    for _ in 0..3 {
        drop_caches();
        let (code, out, _) = finish(t.spawn("cat mnt/mig/001.sql"));
        assert_eq!((code, out.as_str()), (0, SECRET));
    }
    // Another file of the directory still asks; `allow-dir` covers the directory.
    let cat = t.spawn("cat mnt/mig/002.sql");
    let q = a.answer_next("allow-dir");
    assert_eq!(q["path"], "mig/002.sql");
    assert_eq!(finish(cat).0, 0);
    let (code, out, _) = finish(t.spawn("cat mnt/mig/sub/003.sql; ls mnt/mig"));
    assert_eq!(code, 0);
    assert!(out.starts_with(SECRET) && out.contains("001.sql"), "{out}");
    // A grant for reading is not one for writing.
    let w = t.spawn("echo changed > mnt/mig/001.sql");
    let q = a.question(Duration::from_secs(20));
    assert_eq!(
        (q["access"].as_str(), q["op"].as_str()),
        (Some("write"), Some("open"))
    );
    a.answer(&q["id"], "deny", Some("no edits to migrations"));
    let (code, _, err) = finish(w);
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(
        std::fs::read_to_string(t.p("ws/mig/001.sql")).unwrap(),
        SECRET
    );
    audit_shows(&t, "the reason", |v| {
        v.iter()
            .any(|e| e["ask"]["reason"] == "no edits to migrations" && e["result"] == "refused")
    });
}

#[test]
fn listing_making_renaming_and_removing_in_an_ask_directory_ask() {
    let t = Tree::new();
    let _d = t.mount(&[]);
    let mut a = t.approver();
    // Metadata needs no approval: the path is listed and stat'ed.
    let (code, out, err) = finish(t.spawn("ls mnt; stat -c %s mnt/mig/001.sql"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("mig") && out.contains(&SECRET.len().to_string()),
        "{out}"
    );

    for (script, op, path, access) in [
        ("ls mnt/mig", "readdirplus", "mig", "read"),
        ("touch mnt/mig/new.sql", "create", "mig/new.sql", "write"),
        ("mkdir mnt/mig/d", "mkdir", "mig/d", "write"),
        ("rm mnt/mig/002.sql", "unlink", "mig/002.sql", "write"),
        (
            "mv mnt/src/a.txt mnt/mig/a.txt",
            "rename",
            "mig/a.txt",
            "write",
        ),
        ("ln -s x mnt/mig/l", "symlink", "mig/l", "write"),
        (
            "chmod 600 mnt/mig/001.sql",
            "setattr",
            "mig/001.sql",
            "write",
        ),
        (
            "truncate -s 0 mnt/mig/001.sql",
            "open",
            "mig/001.sql",
            "write",
        ),
    ] {
        let before = common::snapshot(&t.p("ws"));
        let c = t.spawn(script);
        let q = a.question(Duration::from_secs(20));
        let got = (q["op"].as_str(), q["path"].as_str(), q["access"].as_str());
        // `ls` may list with readdir or readdirplus.
        if op == "readdirplus" {
            assert!(
                matches!(got.0, Some("readdir" | "readdirplus")),
                "{script}: {q}"
            );
            assert_eq!((got.1, got.2), (Some(path), Some(access)), "{script}: {q}");
        } else {
            assert_eq!(got, (Some(op), Some(path), Some(access)), "{script}: {q}");
        }
        a.answer(&q["id"], "deny", None);
        let (code, _, err) = finish(c);
        assert_ne!(code, 0, "{script}");
        assert!(err.contains("Permission denied"), "{script}: {err}");
        assert_eq!(
            common::snapshot(&t.p("ws")),
            before,
            "{script} changed the workspace"
        );
    }
    // Approved, the change is made.
    let c = t.spawn("mv mnt/mig/001.sql mnt/mig/001-old.sql");
    let q = a.answer_next("allow-once");
    assert_eq!(q["path"], "mig/001.sql");
    // The destination asks too (once-grants are per path).
    let q = a.answer_next("allow-once");
    assert_eq!(q["path"], "mig/001-old.sql");
    assert_eq!(finish(c).0, 0);
    assert!(t.p("ws/mig/001-old.sql").exists() && !t.p("ws/mig/001.sql").exists());
}

#[test]
fn a_question_under_a_read_only_rule_grants_reading_only() {
    let t = Tree::new();
    let _d = t.mount(&[]);
    let mut a = t.approver();
    // Writing could never be granted: refused without a question.
    let (code, _, err) = finish(t.spawn("echo x > mnt/ro/q/r.txt"));
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    let c = t.spawn("cat mnt/ro/q/r.txt");
    a.answer_next("allow-dir");
    assert_eq!(finish(c).1, SECRET);
    let (code, _, _) = finish(t.spawn("echo x > mnt/ro/q/r.txt; touch mnt/ro/q/n"));
    assert_ne!(code, 0);
    assert_eq!(
        std::fs::read_to_string(t.p("ws/ro/q/r.txt")).unwrap(),
        SECRET
    );
    assert!(!t.p("ws/ro/q/n").exists());
    let asked = t.asked();
    assert!(
        asked.iter().all(|e| e["ask"]["outcome"] != "deny"),
        "{asked:#?}"
    );
}

#[test]
fn nobody_to_ask_refuses_at_once() {
    let t = Tree::new();
    // A long timeout: the refusal cannot come from it.
    let _d = t.mount(&["--ask-timeout", "600"]);
    let start = Instant::now();
    let (code, out, err) = finish(t.spawn("cat mnt/mig/001.sql"));
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    assert!(out.is_empty());
    assert!(start.elapsed() < Duration::from_secs(30));
    audit_shows(&t, "no-approver", |v| {
        v.iter()
            .any(|e| e["ask"]["outcome"] == "no-approver" && e["ask"]["waited_ms"] == 0)
    });
}

#[test]
fn no_answer_within_the_timeout_refuses() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "1"]);
    let mut a = t.approver();
    let c = t.spawn("cat mnt/mig/001.sql");
    let q = a.question(Duration::from_secs(20));
    let (code, _, err) = finish(c);
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    let closed = a.next(Duration::from_secs(20)).expect("a closed line");
    assert_eq!(closed["type"], "closed");
    assert_eq!(closed["id"], q["id"]);
    assert_eq!(closed["outcome"], "timeout");
    // An answer after the timeout is an error, and changes nothing.
    a.answer(&q["id"], "allow-path", None);
    let e = a.next(Duration::from_secs(20)).expect("an error line");
    assert_eq!(e["type"], "error", "{e}");
    let (code, _, _) = finish(t.spawn("cat mnt/mig/001.sql"));
    assert_ne!(code, 0);
}

#[test]
fn an_approver_going_away_refuses_its_open_questions() {
    let t = Tree::new();
    let (_d, a, c, _) = t.waiting_read();
    drop(a);
    let (code, _, err) = finish(c);
    assert_ne!(code, 0);
    assert!(err.contains("Permission denied"), "{err}");
    audit_shows(&t, "approver-gone", |v| {
        v.iter().any(|e| e["ask"]["outcome"] == "approver-gone")
    });
}

#[test]
fn other_requests_go_on_while_a_question_is_open_even_with_one_thread() {
    let t = Tree::new();
    let _d = t.mount(&["--threads", "1", "--ask-timeout", "600"]);
    let mut a = t.approver();
    let mut waiting = t.spawn("cat mnt/mig/001.sql");
    let q = a.question(Duration::from_secs(20));
    // Other paths, other processes, listings and writes, while the question is
    // open on the only request thread there is.
    let start = Instant::now();
    let (code, out, err) = finish(t.spawn(
        "for i in $(seq 50); do cat mnt/src/a.txt >/dev/null || exit 1; done; \
         ls mnt/src; echo w > mnt/src/w.txt; cat mnt/src/a.txt",
    ));
    let took = start.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("plain\n"), "{out}");
    assert!(
        still_running(&mut waiting),
        "the waiting read ended before its answer"
    );
    eprintln!("50 reads of an allowed file while a question was open: {took:?}");
    a.answer(&q["id"], "allow-once", None);
    assert_eq!(finish(waiting).1, SECRET);
}

/// Whether process `pid` is blocked in a FUSE request (its kernel wait channel).
fn in_fuse_request(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan"))
        .is_ok_and(|w| w.contains("fuse") || w.contains("request_wait_answer"))
}

/// Where process `pid` is, for a failure message: its state, wait channel and
/// kernel stack.
fn where_it_waits(pid: u32) -> String {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
    let state = read("status")
        .lines()
        .find(|l| l.starts_with("State:"))
        .unwrap_or("State: gone")
        .to_string();
    format!(
        "{pid}: {state}, wchan {:?}, stack:\n{}",
        read("wchan"),
        read("stack")
    )
}

#[test]
fn twenty_readers_of_one_path_raise_one_question() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut a = t.approver();
    let mut readers: Vec<Child> = (0..20)
        .map(|_| t.spawn("exec cat mnt/mig/001.sql"))
        .collect();
    let q = a.question(Duration::from_secs(20));
    // Every reader waits in the kernel on the one question before it is answered.
    assert!(
        wait_until(Duration::from_secs(20), || readers
            .iter()
            .all(|r| in_fuse_request(r.id()))),
        "not every reader is waiting in a FUSE request:\n{}",
        readers
            .iter()
            .map(|r| where_it_waits(r.id()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(readers.iter_mut().all(still_running));
    // No second question came.
    if let Some(v) = a.next(Duration::from_millis(200)) {
        panic!("a second line while one question was open: {v}");
    }
    a.answer(&q["id"], "allow-once", None);
    for r in readers {
        let (code, out, err) = finish(r);
        assert_eq!((code, out.as_str()), (0, SECRET), "{err}");
    }
    let asked = t.asked();
    assert_eq!(
        asked.iter().filter(|e| e["result"] == "asked").count(),
        1,
        "{asked:#?}"
    );
}

#[test]
fn a_policy_reload_forgets_session_decisions() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut a = t.approver();
    let c = t.spawn("cat mnt/mig/001.sql");
    a.answer_next("allow-dir");
    assert_eq!(finish(c).0, 0);
    assert_eq!(finish(t.spawn("cat mnt/mig/002.sql")).0, 0);
    // The same policy, written again: reloaded, and the grant is gone.
    let o = t.veilfs().arg("reload").arg(t.p("mnt")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop_caches();
    let c = t.spawn("cat mnt/mig/002.sql");
    let q = a.question(Duration::from_secs(20));
    assert_eq!(q["path"], "mig/002.sql");
    a.answer(&q["id"], "deny", None);
    assert_ne!(finish(c).0, 0);
}

#[test]
fn nothing_of_an_ask_file_is_read_before_approval_page_cache_included() {
    let t = Tree::new();
    // First allowed: read through the mount, so its pages sit in the page cache.
    std::fs::write(t.p("pol.toml"), "default = \"allow\"\n").unwrap();
    let _d = t.mount(&["--ask-timeout", "600"]);
    assert_eq!(finish(t.spawn("cat mnt/mig/001.sql")).1, SECRET);
    // Now it asks (the daemon's watcher reloads the policy file).
    std::fs::write(t.p("pol.toml"), POLICY).unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || finish(
            t.spawn("cat mnt/mig/001.sql")
        )
        .0 != 0),
        "the policy was not reloaded"
    );
    let mut a = t.approver();
    // Every way of reading the content meets the question; each is denied.
    for script in [
        "cat mnt/mig/001.sql",
        "head -c 4 mnt/mig/001.sql",
        "dd if=mnt/mig/001.sql bs=1 count=4 status=none",
        "python3 -c 'import mmap,os; f=os.open(\"mnt/mig/001.sql\", os.O_RDONLY); \
         print(mmap.mmap(f, 0, prot=mmap.PROT_READ)[:])'",
        "cp mnt/mig/001.sql copy.txt; cat copy.txt",
        "cd mnt/mig && cat ./001.sql",
        "cat mnt/mig/../mig//001.sql",
        "grep -r ask-secret mnt",
    ] {
        let mut c = t.spawn(script);
        // Deny every question the command raises (`grep -r` asks about each
        // directory that asks) until it ends.
        let mut asked = 0;
        let end = Instant::now() + Duration::from_secs(30);
        while still_running(&mut c) {
            assert!(Instant::now() < end, "{script}: still running");
            if let Some(q) = a.next(Duration::from_millis(20))
                && q["type"] == "question"
            {
                a.answer(&q["id"], "deny", None);
                asked += 1;
            }
        }
        assert!(asked > 0, "{script}: no question");
        let (_, out, err) = finish(c);
        assert!(!out.contains("ask-secret"), "{script} read it: {out}");
        assert!(
            err.contains("Permission denied") || script.starts_with("grep"),
            "{script}: {err}"
        );
    }
    // An O_PATH descriptor opens nothing and reads nothing.
    let (_, out, _) = finish(t.spawn(
        "python3 -c 'import os; f=os.open(\"mnt/mig/001.sql\", os.O_PATH)
try:
    print(os.read(f, 100))
except OSError as e:
    print(\"refused\", e.errno)'",
    ));
    assert!(out.starts_with("refused"), "{out}");
}

#[test]
fn the_window_between_an_answer_and_new_readers_never_hangs_nor_leaks() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut a = t.approver();
    let rounds = std::env::var("VEILFS_ASK_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    for round in 0..rounds {
        // Readers start while questions are being answered: each one either joins
        // an open question or raises its own; every one is answered.
        let readers: Vec<Child> = (0..8)
            .map(|i| {
                t.spawn(&format!(
                    "sleep 0.0{i}; exec cat mnt/mig/00{}.sql",
                    1 + i % 2
                ))
            })
            .collect();
        let mut done = 0;
        let end = Instant::now() + Duration::from_secs(30);
        let mut readers: Vec<Option<Child>> = readers.into_iter().map(Some).collect();
        while done < readers.len() {
            assert!(Instant::now() < end, "round {round}: readers still waiting");
            if let Some(q) = a.next(Duration::from_millis(20))
                && q["type"] == "question"
            {
                let answer = if round % 2 == 0 { "allow-once" } else { "deny" };
                a.answer(&q["id"], answer, None);
            }
            for r in readers.iter_mut() {
                if let Some(c) = r
                    && c.try_wait().unwrap().is_some()
                {
                    let (code, out, _) = finish(r.take().unwrap());
                    if round % 2 == 0 {
                        assert_eq!((code, out.as_str()), (0, SECRET), "round {round}");
                    } else {
                        assert_ne!(code, 0, "round {round}");
                        assert!(out.is_empty(), "round {round}: {out}");
                    }
                    done += 1;
                }
            }
        }
    }
}

#[test]
fn unmounting_refuses_what_waits() {
    let t = Tree::new();
    let (d, _a, c, _) = t.waiting_read();
    drop(d);
    let (code, out, _) = finish(c);
    assert_ne!(code, 0);
    assert!(out.is_empty());
    assert!(!veilfs::session::mount::is_mount_point(
        &t.p("mnt").canonicalize().unwrap()
    ));
}

/// The approver's pid is recorded: `veilfs prompt` answers with one key.
#[test]
fn veilfs_prompt_shows_the_question_and_answers_with_one_key() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut prompt = t.prompt(&[t.p("mnt")]);
    let c = t.spawn("exec cat mnt/mig/001.sql");
    let shown = prompt.out.expect("deny with a reason");
    assert!(shown.contains("wants to read"), "{shown}");
    assert!(
        shown.contains(&format!("{}/mig/001.sql", t.p("mnt").display())),
        "{shown}"
    );
    assert!(shown.contains(&format!("pid {}", c.id())), "{shown}");
    assert!(shown.contains("cat mnt/mig/001.sql"), "{shown}");
    assert!(shown.contains("rule 1 \"mig/\""), "{shown}");
    prompt.type_keys(b"y");
    assert_eq!(finish(c).1, SECRET);
    let c = t.spawn("cat mnt/mig/002.sql");
    prompt.out.expect("deny with a reason");
    prompt.type_keys(b"rnot today\n");
    assert_ne!(finish(c).0, 0);
    audit_shows(&t, "the prompt's reason", |v| {
        v.iter().any(|e| e["ask"]["reason"] == "not today")
    });
    assert_eq!(prompt.close(), 0);
}

#[test]
fn an_answer_for_an_unknown_question_or_a_bad_answer_is_an_error() {
    let t = Tree::new();
    let _d = t.mount(&[]);
    let mut a = t.approver();
    a.answer(&serde_json::json!(999), "allow-once", None);
    let e = a.next(Duration::from_secs(10)).unwrap();
    assert_eq!(e["type"], "error", "{e}");
    let c = t.spawn("cat mnt/mig/001.sql");
    let q = a.question(Duration::from_secs(20));
    a.answer(&q["id"], "yes please", None);
    let e = a.next(Duration::from_secs(10)).unwrap();
    assert_eq!(e["type"], "error", "{e}");
    a.answer(&q["id"], "deny", None);
    assert_ne!(finish(c).0, 0);
}

/// With `--all` (without it, the prompt would answer only for the workspace of
/// its current directory), one prompt answers every session of the user, also
/// those started later, and each question names the session's mount point.
#[test]
fn one_prompt_answers_several_sessions_also_those_started_later() {
    let t = Tree::new();
    let _d1 = t.mount(&["--ask-timeout", "600"]);
    let mut prompt = t.prompt_in(t.tmp.path(), &[OsStr::new("--all")]);
    prompt.out.expect("answering for veilfs mount");
    // A second mount, started after the prompt.
    let _d2 = t.second_mount();
    prompt
        .out
        .expect(&format!("-- [{}] answering for", t.p("mnt2").display()));
    // Both ask at once: each question is named by its own mount point.
    let c2 = t.spawn("exec cat mnt2/mig/001.sql");
    let c1 = t.spawn("exec cat mnt/mig/001.sql");
    let mut tags = Vec::new();
    for _ in 0..2 {
        let shown = prompt.out.expect("deny with a reason");
        let head = shown.lines().find(|l| l.starts_with("? [")).unwrap_or("");
        let tag = head
            .strip_prefix("? [")
            .and_then(|h| h.split_once("] question "))
            .map(|(tag, _)| tag.to_string())
            .unwrap_or_else(|| panic!("no question line: {shown}"));
        let wants = format!("wants to read {tag}/mig/001.sql");
        assert!(shown.contains(&wants), "{wants}\n{shown}");
        tags.push(tag);
        prompt.type_keys(b"y");
    }
    tags.sort();
    let want: Vec<String> = ["mnt", "mnt2"].map(|m| t.p(m).display().to_string()).into();
    assert_eq!(tags, want);
    assert_eq!(finish(c2).1, "second\n");
    assert_eq!(finish(c1).1, SECRET);
    assert_eq!(prompt.close(), 0);
}

/// Without PATH, `veilfs prompt` answers for the sessions of the workspace of its
/// current directory: here the mount point `mnt` (a `veilfs mount` is known by
/// its mount point). Another session's question, asked at the same time, is not
/// its to answer: it stays open for a prompt of that session (without one, it
/// would be refused at once).
#[test]
fn a_prompt_answers_only_the_sessions_of_its_workspace() {
    let t = Tree::new();
    let _a = t.mount(&["--ask-timeout", "600"]);
    let _b = t.second_mount();
    let mnt = t.p("mnt").display().to_string();
    let mut pa = t.prompt_in(&t.p("mnt"), &[]);
    let hello = pa.out.expect("answering for veilfs mount");
    assert!(hello.contains(&format!("-- [{mnt}] answering")), "{hello}");
    let mut pb = t.prompt(&[t.p("mnt2")]);
    // Both ask at once.
    let mut cb = t.spawn("exec cat mnt2/mig/001.sql");
    let ca = t.spawn("exec cat mnt/mig/001.sql");
    let shown_b = pb.out.expect("deny with a reason");
    assert!(shown_b.contains("/mnt2/mig/001.sql"), "{shown_b}");
    let shown = pa.out.expect("deny with a reason");
    assert!(shown.contains(&format!("? [{mnt}] question ")), "{shown}");
    assert!(shown.contains("/mnt/mig/001.sql"), "{shown}");
    pa.type_keys(b"y");
    assert_eq!(finish(ca).1, SECRET);
    // B's question is still open, and A's prompt goes on to A's next question,
    // never B's.
    assert!(
        still_running(&mut cb),
        "B's read ended before B's prompt answered"
    );
    let ca = t.spawn("exec cat mnt/mig/002.sql");
    let shown = pa.out.expect("deny with a reason");
    assert!(shown.contains("/mnt/mig/002.sql"), "{shown}");
    assert!(!shown.contains("mnt2"), "{shown}");
    pa.type_keys(b"n");
    assert_ne!(finish(ca).0, 0);
    assert!(
        still_running(&mut cb),
        "B's read ended before B's prompt answered"
    );
    pb.type_keys(b"n");
    let (code, out, err) = finish(cb);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(pa.close(), 0);
    assert_eq!(pb.close(), 0);
    pa.out.take_for(Duration::from_millis(100));
    assert!(!pa.out.seen.contains("mnt2"), "{}", pa.out.seen);
}

/// `veilfs prompt` started before any session of its workspace waits for one
/// (saying so once, on stderr), answers it, and stays when it ends: the next
/// session of the same mount point (a new socket under the same name) is
/// answered too.
#[test]
fn a_prompt_started_first_waits_for_the_session_and_stays_for_the_next() {
    let t = Tree::new();
    let mnt = t.p("mnt").display().to_string();
    let mut p = t.prompt_in(&t.p("mnt"), &[]);
    let waiting = format!("veilfs prompt: waiting for a session of {mnt}");
    p.err.expect(&waiting);
    for round in 1..=2 {
        let d = t.mount(&["--ask-timeout", "600"]);
        let hint = format!("answer with `veilfs prompt {mnt}` in another terminal");
        assert!(d.said.contains(&hint), "{}", d.said);
        p.out
            .expect(&format!("-- [{mnt}] answering for veilfs mount"));
        let c = t.spawn("exec cat mnt/mig/001.sql");
        let shown = p.out.expect("deny with a reason");
        assert!(
            shown.contains(&format!("? [{mnt}] question ")),
            "round {round}: {shown}"
        );
        p.type_keys(b"y");
        assert_eq!(finish(c).1, SECRET, "round {round}");
        drop(d);
        let said = p.out.expect(&format!("-- waiting for a session of {mnt}"));
        assert!(said.contains("veilfs mount ended"), "round {round}: {said}");
    }
    assert_eq!(p.close(), 0);
    p.err.take_for(Duration::from_millis(100));
    assert!(
        !p.err.seen.contains("waiting"),
        "said twice: {}",
        p.err.seen
    );
}

/// A socket in the runtime directory whose server runs as another user (here a
/// listener that became `nobody` before `listen`) is never subscribed to: the
/// prompt says so and sends it nothing.
#[test]
fn a_prompt_never_subscribes_to_a_session_of_another_user() {
    let t = Tree::new();
    let script = "
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
s.listen(4)
print('listening', flush=True)
s.settimeout(20)
c, _ = s.accept()
c.settimeout(10)
print('got', repr(c.recv(100)), flush=True)
";
    let mut server = Command::new("python3")
        .args(["-c", script])
        .arg(t.p("rt/00000000000000aa.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut heard = common::daemon::Said::new(server.stdout.take().unwrap());
    heard.expect("listening");
    let mut p = t.prompt_in(t.tmp.path(), &[OsStr::new("--all")]);
    let said = p
        .out
        .expect("not subscribed: the socket is served by uid 65534");
    assert!(!said.contains("answering"), "{said}");
    let got = heard.expect("got ");
    assert!(got.contains("got b''"), "{got}");
    let (code, _, err) = finish(server);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p.close(), 0);
}

/// `veilfs prompt PATH` for a path that does not exist ends at once (exit 2),
/// and `--all` with a PATH is refused.
#[test]
fn a_prompt_for_a_missing_path_or_all_and_a_path_is_refused() {
    let t = Tree::new();
    let o = t
        .veilfs()
        .arg("prompt")
        .arg(t.p("nowhere"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nowhere"), "{err}");
    let o = t
        .veilfs()
        .args(["prompt", "--all"])
        .arg(t.p("ws"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// Lists directory descriptors with `getdents64` (offsets included) from Python.
const GETDENTS: &str = r#"
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
NR = {'x86_64': 217, 'aarch64': 61}[os.uname().machine]
def getdents(fd):
    buf = ctypes.create_string_buffer(65536)
    n = libc.syscall(NR, fd, buf, len(buf))
    if n < 0:
        raise OSError(ctypes.get_errno(), 'getdents64')
    out, i = [], 0
    while i < n:
        ino, off, reclen, typ = struct.unpack_from('QqHB', buf.raw, i)
        out.append((buf.raw[i + 19:i + reclen].split(b'\0', 1)[0].decode(), off))
        i += reclen
    return out
"#;

#[test]
fn a_listing_approved_for_one_process_is_not_continued_by_another() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    // Another process learns how offsets look from a directory it may list, then
    // seeks a descriptor of `mig` into each recent listing and reads on (the
    // daemon's kept listings, and the kernel's cache of them).
    let script = format!(
        "{GETDENTS}
src = os.open('mnt/src', os.O_RDONLY | os.O_DIRECTORY)
gen = max(off for _, off in getdents(src)) >> 32
seen, refused = [], 0
for g in range(max(1, gen - 30), gen + 2):
    for pos in (1, 2, 3, 4):
        fd = os.open('mnt/mig', os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.lseek(fd, (g << 32) | pos, 0)
            seen += [n for n, _ in getdents(fd)]
        except OSError:
            refused += 1
        os.close(fd)
print('SEEN', sorted(set(seen)), 'REFUSED', refused)
"
    );
    // Rounds: the window between a listing served and the kernel's cache of it
    // dropped is what is hunted.
    for round in 0..10 {
        let mut a = t.approver();
        // A listing of `mig` is approved once, for `ls`.
        let ls = t.spawn("exec ls mnt/mig");
        a.answer_next("allow-once");
        let (code, out, _) = finish(ls);
        assert_eq!(code, 0);
        assert!(out.contains("001.sql"), "{out}");
        // Nobody answers from now on.
        drop(a);
        let (code, out, err) = finish(t.spawn(&format!("python3 - <<'EOF'\n{script}\nEOF")));
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("SEEN "), "{out}");
        for name in ["001.sql", "002.sql", "sub"] {
            assert!(
                !out.contains(name),
                "round {round}: another process continued the listing: {out}"
            );
        }
    }
}

/// The daemon's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn an_approver_that_stops_reading_costs_the_daemon_bounded_memory() {
    let t = Tree::new();
    let d = t.mount(&["--ask-timeout", "600"]);
    // Subscribes and does not read again.
    let mut stalled = t.approver();
    let mut a = t.approver();
    let before = rss_kib(d.child.id());
    // Questions from commands with 7 arguments of 120 KiB each: what the daemon
    // keeps of a command line, and what it queues for an approver that does not
    // read, are bounded. The other approver answers every question meanwhile.
    let pad = "x".repeat(120 * 1024);
    for _ in 0..200 {
        let c = Command::new("sh")
            .arg("-c")
            .arg("exec cat mnt/mig/001.sql $P $P $P $P $P $P $P 2>/dev/null")
            .env("P", &pad)
            .current_dir(t.tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let q = a.question(Duration::from_secs(20));
        assert!(
            q.to_string().len() < 16 * 1024,
            "a question of {} bytes",
            q.to_string().len()
        );
        a.answer(&q["id"], "deny", None);
        assert_ne!(finish(c).0, 0);
    }
    let grown = rss_kib(d.child.id()).saturating_sub(before);
    assert!(grown < 64 * 1024, "the daemon grew by {grown} KiB");
    // Past the socket's buffer and the daemon's queue for it, the stalled
    // approver is dropped.
    assert!(
        stalled.closed_by_daemon(Duration::from_secs(5)),
        "the daemon still queues lines for an approver that stopped reading"
    );
    let c = t.spawn("exec cat mnt/mig/001.sql");
    a.answer_next("allow-once");
    assert_eq!(finish(c).1, SECRET);
}

#[test]
fn an_approval_does_not_follow_a_name_when_the_directories_above_it_are_swapped() {
    let t = Tree::new();
    for (d, body) in [
        ("svc1/mig/001.sql", "harmless\n"),
        ("svc2/mig/prod.sql", SECRET),
    ] {
        std::fs::create_dir_all(t.p("ws").join(d).parent().unwrap()).unwrap();
        std::fs::write(t.p("ws").join(d), body).unwrap();
    }
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut a = t.approver();
    for (answer, script) in [
        // A file approved by its path, for reading, and the directory for the
        // session, for writing (and reading).
        ("allow-path", "cat mnt/svc1/mig/001.sql"),
        ("allow-dir", "echo new > mnt/svc1/mig/002.sql"),
    ] {
        let c = t.spawn(script);
        a.answer_next(answer);
        assert_eq!(finish(c).0, 0, "{script}");
    }
    // The other service's directory is denied.
    let c = t.spawn("cat mnt/svc2/mig/prod.sql");
    a.answer_next("deny");
    assert_ne!(finish(c).0, 0);
    // Nobody answers from now on: whatever asks is refused at once.
    drop(a);
    // The directories above (not asked about) are swapped: the unapproved directory
    // now sits at the approved names.
    let (code, _, err) = finish(t.spawn(
        "mv mnt/svc1 mnt/svc1_old && mv mnt/svc2 mnt/svc1 && ls mnt/svc1/mig >/dev/null 2>&1; \
         cat mnt/svc1/mig/prod.sql; echo DROP >> mnt/svc1/mig/prod.sql; \
         rm -f mnt/svc1/mig/prod.sql; exit 0",
    ));
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("No such file"),
        "the swap did not happen: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(t.p("ws/svc1/mig/prod.sql")).unwrap(),
        SECRET,
        "the unapproved file was changed"
    );
    let (_, out, _) = finish(t.spawn("cat mnt/svc1/mig/prod.sql"));
    assert!(!out.contains("ask-secret"), "read without approval: {out}");
    // The approved file, at its new place, asks again too.
    let (_, out, _) = finish(t.spawn("cat mnt/svc1_old/mig/001.sql"));
    assert!(out.is_empty(), "{out}");
}

#[test]
fn when_the_only_approver_falls_behind_every_open_question_is_refused_at_once() {
    let t = Tree::new();
    for i in 0..400 {
        std::fs::write(t.p(&format!("ws/mig/f{i}.sql")), SECRET).unwrap();
    }
    // A timeout far beyond the test: only the approver's going can end the waits.
    let _d = t.mount(&["--ask-timeout", "600"]);
    // The only approver subscribes and never reads: once its socket and its queue
    // are full, it is dropped, and nobody is left to answer what is open.
    let _stalled = t.approver();
    let pad = "y".repeat(3000);
    let readers: Vec<Child> = (0..400)
        .map(|i| {
            Command::new("sh")
                .arg("-c")
                .arg(format!("exec cat mnt/mig/f{i}.sql $P"))
                .env("P", &pad)
                .current_dir(t.tmp.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in readers {
        let (code, out, _) = common::finish(r, Duration::from_secs(60));
        assert_ne!(code, 0);
        assert!(!out.contains("ask-secret"), "{out}");
    }
    audit_shows(&t, "approver-gone", |v| {
        v.iter()
            .filter(|e| e["ask"]["outcome"] == "approver-gone")
            .count()
            > 1
    });
}

/// At a terminal, a key typed before a question was shown never answers it: a
/// person pressing `y` twice answers the question they saw, and the next one, which
/// they have not seen, waits for its own key.
#[test]
fn a_key_typed_ahead_never_answers_a_question_not_yet_shown() {
    let t = Tree::new();
    let _d = t.mount(&["--ask-timeout", "600"]);
    // Two questions open at once (an approver connected keeps them waiting);
    // then the prompt starts, shows the first, and the other waits.
    let mut a = t.approver();
    let first = t.spawn("exec cat mnt/mig/001.sql");
    a.question(Duration::from_secs(20));
    let second = t.spawn("exec cat mnt/mig/002.sql");
    a.question(Duration::from_secs(20));
    let cmd = format!(
        "VEILFS_RUNTIME_DIR={} {} prompt {}; sleep 30",
        t.p("rt").display(),
        env!("CARGO_BIN_EXE_veilfs"),
        t.p("mnt").display()
    );
    let tmux = Tmux::start(&t.p("tmux.sock"), &cmd, (200, 50));
    let screen = || tmux.screen(false);
    let shows = |what: &str| wait_until(Duration::from_secs(20), || screen().contains(what));
    assert!(shows("waits its turn"), "{}", screen());
    // `yy`: the first answers the question shown; the second was typed before the
    // next question was shown, and is dropped.
    tmux.keys("yy");
    let (code, out, _) = finish(first);
    assert_eq!((code, out.as_str()), (0, SECRET));
    assert!(shows("mig/002.sql"), "{}", screen());
    tmux.keys("n");
    let (code, out, err) = finish(second);
    assert_ne!(code, 0, "the second y answered the unseen question: {out}");
    assert!(err.contains("Permission denied"), "{err}");
}

/// Attacker finding: a rename into an `ask` directory waits for its answer holding
/// the kernel's lock of the directory it renames from. The watcher, telling the
/// kernel of an outside change there, waits for that lock and reads no outside
/// change meanwhile: a directory then moved outside into a denied one kept its old,
/// visible place in the mount, and its files' new contents were served for the
/// whole of the question. Now, once the watcher has waited for the kernel a moment,
/// every place is checked on disk at every request, as when a watch is missed.
#[test]
fn a_question_holding_a_directory_lock_never_stalls_what_the_watcher_learns() {
    let t = Tree::new();
    std::fs::write(
        t.p("pol.toml"),
        "[[rules]]\naction = \"ask\"\npaths = [\"mig/\"]\n\n[[rules]]\naction = \"deny\"\npaths = [\"secrets/\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(t.p("ws/pub")).unwrap();
    std::fs::create_dir_all(t.p("ws/secrets")).unwrap();
    std::fs::write(t.p("ws/pub/data.txt"), "PUBLIC\n").unwrap();
    std::fs::write(t.p("ws/top.txt"), "lock me\n").unwrap();
    let _d = t.mount(&["--ask-timeout", "600"]);
    let mut a = t.approver();
    // The kernel caches pub/ and pub/data.txt.
    assert_eq!(
        std::fs::read_to_string(t.p("mnt/pub/data.txt")).unwrap(),
        "PUBLIC\n"
    );
    // The rename waits for its answer, holding the root directory's lock.
    let mut mv = t.spawn("exec mv mnt/top.txt mnt/mig/top.txt");
    a.question(Duration::from_secs(20));
    // Outside the mount: a change in the root (the watcher's kernel invalidation of
    // it waits for the lock), then pub/ moved into the denied directory and its
    // files rewritten.
    std::fs::write(t.p("ws/trigger"), "x").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::rename(t.p("ws/pub"), t.p("ws/secrets/pub")).unwrap();
    std::fs::write(t.p("ws/secrets/pub/data.txt"), "TOPSECRET\n").unwrap();
    std::fs::write(t.p("ws/secrets/pub/new.txt"), "NEW-SECRET\n").unwrap();
    // Readers in the mount: each is refused, or waits for the directory lock the
    // rename holds (a lookup the kernel must make again), but none is served what
    // now lies under secrets/ (before, both printed it at once).
    let readers: Vec<Child> = ["pub/data.txt", "pub/new.txt", "secrets/pub/data.txt"]
        .iter()
        .map(|rel| t.spawn(&format!("exec cat mnt/{rel}")))
        .collect();
    let mut readers = readers;
    common::wait_until(Duration::from_secs(5), || {
        readers.iter_mut().all(|r| !still_running(r))
    });
    assert!(
        still_running(&mut mv),
        "the rename stopped waiting: the window was not held"
    );
    drop(a);
    let (code, _, _) = finish(mv);
    for r in readers {
        let (rc, out, err) = finish(r);
        assert!(
            !out.contains("SECRET") && rc != 0,
            "served through the mount from under secrets/: {out:?} {err:?}"
        );
    }
    assert_ne!(code, 0, "the rename was refused once its question was");
}
