//! FUSE over io_uring (`--transport uring`): the same answers and refusals as
//! `/dev/fuse`, requests on every CPU's queue never crossed nor lost, a question
//! parked on a ring entry answered from another thread, questions never holding
//! more than three quarters of a queue (the rest keeps serving), and an unmount
//! that ends the daemon.
//!
//! The kernel grants the ring only when the fuse module's `enable_uring` is on;
//! these tests turn it on (they need root for that, as for mounting) and fail loudly
//! when they cannot. They leave it on: it only lets a FUSE daemon that asks for the
//! ring have it.

mod common;

use std::fs;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::{Approver, Daemon};
use common::{Fixture, wait_until};
use veilfs::session::mount::Transport;
use veilfs::{MountOptions, Policy};

const ENABLE: &str = "/sys/module/fuse/parameters/enable_uring";

/// Turns FUSE over io_uring on, or fails saying why it cannot.
fn require_uring() {
    let on = |s: &str| s.trim() == "Y" || s.trim() == "1";
    let now = fs::read_to_string(ENABLE).unwrap_or_else(|e| {
        panic!("FUSE over io_uring needs Linux 6.14 or later with {ENABLE}: {e}")
    });
    if !on(&now) {
        fs::write(ENABLE, "Y").unwrap_or_else(|e| {
            panic!("these tests turn on FUSE over io_uring and need root to write {ENABLE}: {e}")
        });
    }
}

const POLICY: &str = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/"]

[[rules]]
action = "read-only"
paths = ["ro/"]
"#;

fn opts(t: Transport) -> MountOptions {
    MountOptions {
        transport: t,
        ..MountOptions::default()
    }
}

fn mounted(t: Transport) -> Fixture {
    let mut f = Fixture::new();
    f.file("a.txt", "alpha\n")
        .file(".env", "TOKEN=1\n")
        .file("secrets/key", "k\n")
        .file("ro/r.txt", "read me\n")
        .dir("d");
    let p = Policy::parse("test-policy.toml", POLICY).unwrap();
    f.mount_with(p, None, &opts(t));
    f
}

fn errno<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
    }
}

/// What a hostile and an ordinary process see through the mount, operation by
/// operation (each as `name: outcome`).
fn battery(f: &Fixture) -> Vec<String> {
    let m = |r: &str| f.m(r);
    let mut seen = Vec::new();
    let mut say = |what: &str, outcome: String| seen.push(format!("{what}: {outcome}"));
    say(
        "read a.txt",
        format!("{:?}", fs::read_to_string(m("a.txt")).ok()),
    );
    say("read .env", errno(fs::read(m(".env"))));
    say("stat .env", errno(fs::metadata(m(".env"))));
    say("read secrets/key", errno(fs::read(m("secrets/key"))));
    say("list secrets", errno(fs::read_dir(m("secrets"))));
    let mut names: Vec<String> = fs::read_dir(m("."))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    say("list top", names.join(","));
    say(
        "create .env.local... as .env",
        errno(fs::write(m(".env"), "x")),
    );
    say(
        "create secrets/new",
        errno(fs::write(m("secrets/new"), "x")),
    );
    say(
        "rename a.txt to .env",
        errno(fs::rename(m("a.txt"), m(".env"))),
    );
    say(
        "link a.txt to secrets/l",
        errno(fs::hard_link(m("a.txt"), m("secrets/l"))),
    );
    say(
        "symlink .env as d/s",
        errno(std::os::unix::fs::symlink(".env", m("d/s"))),
    );
    say("read through d/s", errno(fs::read(m("d/s"))));
    say("write ro/r.txt", errno(fs::write(m("ro/r.txt"), "x")));
    say(
        "chmod ro/r.txt",
        errno(fs::set_permissions(
            m("ro/r.txt"),
            fs::Permissions::from_mode(0o777),
        )),
    );
    say(
        "read ro/r.txt",
        format!("{:?}", fs::read_to_string(m("ro/r.txt")).ok()),
    );
    say("write d/new", errno(fs::write(m("d/new"), "made\n")));
    say(
        "read d/new",
        format!("{:?}", fs::read_to_string(m("d/new")).ok()),
    );
    say(
        "rename d/new d/moved",
        errno(fs::rename(m("d/new"), m("d/moved"))),
    );
    say("unlink d/moved", errno(fs::remove_file(m("d/moved"))));
    say("mkdir d/sub", errno(fs::create_dir(m("d/sub"))));
    say("rmdir d/sub", errno(fs::remove_dir(m("d/sub"))));
    // A large read and write, through the daemon's buffers (or passthrough).
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    say("write big", errno(fs::write(m("d/big"), &big)));
    say(
        "big equal",
        (fs::read(m("d/big")).ok() == Some(big)).to_string(),
    );
    say("unlink big", errno(fs::remove_file(m("d/big"))));
    seen
}

#[test]
fn the_ring_answers_and_refuses_as_dev_fuse_does() {
    require_uring();
    let dev = mounted(Transport::Dev);
    let ring = mounted(Transport::Uring);
    assert!(!dev.mount.as_ref().unwrap().uring());
    assert!(
        ring.mount.as_ref().unwrap().uring(),
        "the kernel did not grant the ring"
    );
    let (a, b) = (battery(&dev), battery(&ring));
    assert_eq!(a, b, "dev_fuse and io_uring answered differently");
    // The refusals are refusals, and the backing tree saw none of them.
    assert!(a.iter().any(|l| l == "read .env: errno 13"), "{a:#?}");
    assert!(
        a.iter().any(|l| l == "create secrets/new: errno 13"),
        "{a:#?}"
    );
    assert!(a.iter().any(|l| l == "write ro/r.txt: errno 13"), "{a:#?}");
    assert!(
        a.iter()
            .any(|l| l.starts_with("list top: ") && !l.contains(".env")),
        "{a:#?}"
    );
    for f in [&dev, &ring] {
        assert_eq!(fs::read_to_string(f.s(".env")).unwrap(), "TOKEN=1\n");
        assert_eq!(fs::read_to_string(f.s("ro/r.txt")).unwrap(), "read me\n");
        assert!(!f.s("secrets/new").exists() && !f.s("secrets/l").exists());
        assert_eq!(fs::read_to_string(f.s("a.txt")).unwrap(), "alpha\n");
    }
    // Nearly everything came through the ring; /dev/fuse kept the INIT and what the
    // ring does not carry (forgets), and nothing went through a ring on `dev`.
    let (r, d) = ring.mount.as_ref().unwrap().request_counts().by_transport();
    assert!(r > 50 && d < r / 4, "io_uring {r}, /dev/fuse {d}");
    let (r, _) = dev.mount.as_ref().unwrap().request_counts().by_transport();
    assert_eq!(r, 0);
}

/// Pins the calling thread to `cpu`, so that its requests go to that CPU's queue.
fn pin(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).unwrap();
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
}

#[test]
fn every_cpus_queue_serves_many_threads_without_crossing_replies() {
    require_uring();
    let mut f = Fixture::new();
    for i in 0..200 {
        f.file(
            &format!("f/{i:03}"),
            &format!("file {i} {}\n", "x".repeat(i * 37)),
        );
    }
    f.file("secrets/key", "k\n");
    let p = Policy::parse("p.toml", POLICY).unwrap();
    f.mount_with(p, None, &opts(Transport::Uring));
    assert!(f.mount.as_ref().unwrap().uring());
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mnt = Arc::new(f.mnt.clone());
    let start = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let mnt = mnt.clone();
            std::thread::spawn(move || {
                pin(w % cpus);
                let mut wrong = Vec::new();
                for round in 0..60 {
                    for i in (w..200).step_by(8) {
                        let want = format!("file {i} {}\n", "x".repeat(i * 37));
                        match fs::read_to_string(mnt.join(format!("f/{i:03}"))) {
                            Ok(s) if s == want => {}
                            other => wrong.push(format!("f/{i:03} round {round}: {other:?}")),
                        }
                    }
                    let denied = fs::read(mnt.join("secrets/key"));
                    if denied.as_ref().map_err(|e| e.kind()).err()
                        != Some(ErrorKind::PermissionDenied)
                    {
                        wrong.push(format!("secrets/key round {round}: {denied:?}"));
                    }
                    // Names made and removed by every thread at once.
                    let own = mnt.join(format!("f/w{w}-{round}"));
                    if fs::write(&own, format!("{w}/{round}")).is_err()
                        || fs::read_to_string(&own).ok() != Some(format!("{w}/{round}"))
                        || fs::remove_file(&own).is_err()
                    {
                        wrong.push(format!("{} round {round}", own.display()));
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong answers, first: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    // A hang would have stopped the joins above; this only says how long it took.
    eprintln!("8 threads x 60 rounds in {:?}", start.elapsed());
    let (r, d) = f.mount.as_ref().unwrap().request_counts().by_transport();
    assert!(r > 8 * 60 * 25 && d < r / 10, "io_uring {r}, /dev/fuse {d}");
}

/// A tree with `n` files under `ask/`, and a policy asking about them.
fn ask_tree(n: usize) -> common::Tree {
    let t = common::Tree::new("veilfs-uring-ask", &["ws/ask", "ws/src", "mnt", "rt"]);
    for i in 0..n {
        fs::write(t.p(&format!("ws/ask/{i:02}")), format!("asked {i}\n")).unwrap();
    }
    fs::write(t.p("ws/src/plain"), "plain\n").unwrap();
    fs::write(
        t.p("pol.toml"),
        "[[rules]]\naction = \"ask\"\npaths = [\"ask/\"]\n",
    )
    .unwrap();
    t
}

fn ask_daemon(t: &common::Tree, timeout: &str) -> Daemon {
    let mut c = t.veilfs();
    c.env("VEILFS_RUNTIME_DIR", t.p("rt"))
        .arg("mount")
        .args(["--transport", "uring", "--ask-timeout", timeout, "--policy"])
        .arg(t.p("pol.toml"))
        .arg(t.p("ws"))
        .arg(t.p("mnt"));
    let d = Daemon::start(c, &t.p("mnt"));
    assert!(!d.said.contains("did not grant"), "{}", d.said);
    d
}

/// `cat PATH` on CPU `cpu`.
fn cat_on(cpu: usize, path: &Path) -> std::process::Child {
    Command::new("taskset")
        .arg("-c")
        .arg(cpu.to_string())
        .arg("cat")
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_parked_question_holds_one_entry_and_its_answer_comes_from_another_thread() {
    require_uring();
    let t = ask_tree(1);
    let _d = ask_daemon(&t, "60");
    let approver = Approver::subscribe(&t.p("rt"));
    let asker = cat_on(0, &t.m("ask/00"));
    let mut approver = approver;
    let q = approver.question(Duration::from_secs(20));
    // While the question is open, the same CPU's queue goes on serving.
    let plain = cat_on(0, &t.m("src/plain"));
    let out = plain.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "plain\n");
    approver.answer(&q["id"], "allow-once", None);
    let out = asker.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "asked 0\n");
}

#[test]
fn questions_hold_at_most_three_quarters_of_a_queue_and_the_rest_keeps_serving() {
    require_uring();
    // 40 questions on CPU 0, whose queue has 32 entries, and nobody answering: 24
    // wait (three quarters of the entries), the other 16 are refused at once, and
    // the queue's last 8 entries keep serving everyone else. When the approver goes,
    // the waiting ones are refused too.
    let t = ask_tree(40);
    let _d = ask_daemon(&t, "300");
    let approver = Approver::subscribe(&t.p("rt"));
    let mut askers: Vec<_> = (0..40)
        .map(|i| cat_on(0, &t.m(&format!("ask/{i:02}"))))
        .collect();
    let ended = |askers: &mut Vec<std::process::Child>| {
        askers
            .iter_mut()
            .map(|c| matches!(c.try_wait(), Ok(Some(_))))
            .filter(|done| *done)
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(60), || ended(&mut askers) >= 16),
        "no question was refused at once"
    );
    // The waiting ones end only by an answer or the 300 s timeout.
    assert_eq!(ended(&mut askers), 16, "refused at once");
    let out = cat_on(0, &t.m("src/plain")).wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "plain\n",
        "served while 24 wait"
    );
    drop(approver);
    let limit = Instant::now() + Duration::from_secs(60);
    for (i, mut c) in askers.into_iter().enumerate() {
        let done = wait_until(limit.saturating_duration_since(Instant::now()), || {
            matches!(c.try_wait(), Ok(Some(_)))
        });
        if !done {
            let _ = c.kill();
            panic!("reader {i} of an unanswered question never ended");
        }
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(err.contains("Permission denied"), "reader {i}: {err}");
    }
    let out = cat_on(0, &t.m("src/plain")).wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "plain\n");
}

#[test]
fn the_daemon_ends_with_its_mount() {
    require_uring();
    let t = ask_tree(1);
    let mut d = ask_daemon(&t, "60");
    assert_eq!(fs::read_to_string(t.m("src/plain")).unwrap(), "plain\n");
    let status = Command::new("umount").arg(t.p("mnt")).status().unwrap();
    assert!(status.success());
    let ended = wait_until(Duration::from_secs(20), || {
        matches!(d.child.try_wait(), Ok(Some(_)))
    });
    assert!(ended, "veilfs mount --transport uring outlived its mount");
}

#[test]
fn uring_asked_for_by_name_and_not_granted_is_said_in_one_line() {
    let note = Transport::Uring.note(false).unwrap();
    assert!(
        note.contains("enable_uring") && note.contains("/dev/fuse"),
        "{note}"
    );
    assert_eq!(Transport::Uring.note(true), None);
    assert_eq!(Transport::Auto.note(false), None);
    assert_eq!(Transport::Dev.note(false), None);
}
