//! A policy file must be a regular file of at most 4 MiB (issue 13, part 4): a FIFO,
//! `/dev/zero`, a directory or a huge file is refused at once with a clear error by
//! `check`, `explain`, `mount --policy`, `run --policy` and a reload, which keeps the
//! old policy. Nothing waits for a writer or reads until killed.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Fixture, assert_errno, require_fuse};
use veilfs::Policy;

/// How long a refusal may take; the old code waited forever.
const PROMPT: Duration = Duration::from_secs(20);

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// Waits for `child` with a deadline; kills it (by its own handle) if it is still
/// running then, and fails.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > PROMPT {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {PROMPT:?}; stderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs veilfs with `args` in `cwd` under a 1 GiB address-space limit (so that code
/// reading `/dev/zero` to the end fails instead of filling the machine's memory),
/// and expects a prompt refusal naming `policy` and `want`.
fn refused(cwd: &Path, args: &[&str], policy: &Path, want: &str) -> String {
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let what = format!("veilfs {}", args.join(" "));
    let o = finish(child, &what);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{what} succeeded: {err}");
    assert!(
        err.contains(&format!("cannot read policy {}", policy.display())) && err.contains(want),
        "{what}: expected the policy's name and {want:?} in: {err}"
    );
    err
}

struct Inputs {
    tmp: tempfile::TempDir,
    fifo: PathBuf,
    huge: PathBuf,
    dir: PathBuf,
}

fn inputs() -> Inputs {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.toml");
    mkfifo(&fifo);
    let huge = tmp.path().join("huge.toml");
    // Valid TOML all the way: only its size is wrong.
    fs::write(&huge, "#".repeat(4 << 20) + "\n").unwrap();
    let dir = tmp.path().join("dir.toml");
    fs::create_dir(&dir).unwrap();
    Inputs {
        tmp,
        fifo,
        huge,
        dir,
    }
}

#[test]
fn check_refuses_a_fifo_a_device_a_directory_and_a_huge_file() {
    let i = inputs();
    let cwd = i.tmp.path();
    let zero = Path::new("/dev/zero");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    refused(cwd, &["check", &s(&i.fifo)], &i.fifo, "a FIFO");
    refused(cwd, &["check", &s(zero)], zero, "a character device");
    refused(cwd, &["check", &s(&i.dir)], &i.dir, "a directory");
    refused(cwd, &["check", &s(&i.huge)], &i.huge, "larger than 4 MiB");
    // Just under the cap is read.
    let big = cwd.join("big.toml");
    fs::write(&big, "#".repeat((4 << 20) - 1) + "\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["check", big.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn explain_refuses_a_fifo_and_a_device() {
    let i = inputs();
    let cwd = i.tmp.path();
    let fifo = i.fifo.to_str().unwrap();
    refused(cwd, &["explain", "--policy", fifo, "x"], &i.fifo, "a FIFO");
    let zero = Path::new("/dev/zero");
    refused(
        cwd,
        &["explain", "--policy", "/dev/zero", "x"],
        zero,
        "a character device",
    );
}

#[test]
fn mount_refuses_a_fifo_and_a_device_and_mounts_nothing() {
    require_fuse();
    let f = Fixture::new();
    let i = inputs();
    for (p, want) in [
        (i.fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
    ] {
        let args = [
            "mount",
            "--policy",
            p.to_str().unwrap(),
            f.src.to_str().unwrap(),
            f.mnt.to_str().unwrap(),
        ];
        refused(i.tmp.path(), &args, p, want);
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mnt = f.mnt.canonicalize().unwrap();
        assert!(
            !info.contains(&format!(" {} ", mnt.display())),
            "something was mounted at {}",
            mnt.display()
        );
    }
}

#[test]
fn run_refuses_a_fifo_and_a_device_and_runs_nothing() {
    require_fuse();
    let i = inputs();
    let ws = i.tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let marker = i.tmp.path().join("ran");
    for (p, want) in [
        (i.fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
    ] {
        let script = format!("touch {}", marker.display());
        let args = [
            "run",
            "--policy",
            p.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ];
        refused(&ws, &args, p, want);
        assert!(!marker.exists(), "the command ran");
    }
}

/// A reload that meets a FIFO, a directory or a huge file where the policy was
/// answers at once, keeps the old policy, and the mount goes on enforcing it.
#[test]
fn a_reload_refuses_a_fifo_and_a_huge_file_and_keeps_the_old_policy() {
    let mut f = Fixture::new();
    f.file("secret.txt", "s\n").file("plain.txt", "p\n");
    let file = f.tmp.path().join("policy.toml");
    let text = "[[rules]]\naction = \"deny\"\npaths = [\"secret.txt\"]\n";
    fs::write(&file, text).unwrap();
    f.mount_policy(Policy::parse("policy.toml", text).unwrap(), Some(&file));
    let i = inputs();

    // Put what `with` is (a FIFO, a copy of a file, a directory) where the policy was.
    let replace = |with: &Path| {
        match fs::symlink_metadata(&file) {
            Ok(m) if m.is_dir() => fs::remove_dir(&file).unwrap(),
            Ok(_) => fs::remove_file(&file).unwrap(),
            Err(_) => {}
        }
        match fs::symlink_metadata(with) {
            Ok(m) if m.is_dir() => fs::create_dir(&file).unwrap(),
            Ok(m) if m.is_file() => {
                fs::copy(with, &file).unwrap();
            }
            _ => mkfifo(&file),
        }
    };
    for (with, want) in [
        (i.fifo.as_path(), "a FIFO"),
        (i.huge.as_path(), "larger than 4 MiB"),
        (i.dir.as_path(), "a directory"),
    ] {
        replace(with);
        let m = f.mount.as_ref().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let r = std::thread::scope(|s| {
            s.spawn(move || tx.send(m.reload()));
            let r = rx.recv_timeout(PROMPT);
            if r.is_err() {
                // Release a reader waiting for a writer (the old code), then fail.
                let _ = fs::OpenOptions::new().write(true).open(&file);
                panic!("the reload still waits on {want}");
            }
            r.unwrap()
        });
        let e = r.expect_err("a reload of a bad file fails").to_string();
        assert!(e.contains(want), "expected {want:?} in: {e}");
        assert_errno(fs::read(f.m("secret.txt")), libc::EACCES, "the old policy");
        assert_eq!(fs::read(f.m("plain.txt")).unwrap(), b"p\n");
    }
}

/// A policy with more patterns than anyone writes by hand is refused before it is
/// compiled, with where (attacker finding: 380,000 patterns in 3.7 MB took
/// 29 s and gigabytes to check, and stalled the mount for half a minute on reload).
#[test]
fn a_policy_with_too_many_patterns_is_refused_before_compiling() {
    let t = tempfile::tempdir().unwrap();
    let pats: Vec<String> = (0..60_000).map(|i| format!("'*{i:x}?'")).collect();
    let text = format!(
        "default = \"allow\"\n[[rules]]\naction = \"deny\"\npaths = [{}]\n",
        pats.join(",")
    );
    let p = t.path().join("p.toml");
    std::fs::write(&p, text).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("check")
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("at most 50000"), "{err}");
    assert!(err.contains("p.toml:4:"), "{err}");
}
