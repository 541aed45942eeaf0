//! A write the policy refuses is never observable: not on disk, not in the mount's
//! page cache, not to another reader, not for a moment.
//!
//! A writer process (root, or an unprivileged uid) hammers a read-only file, with
//! `pwrite` on a descriptor opened for writing or through a shared writable mapping,
//! while reader threads `pread` the file and `cat` it over and over. Every attempt
//! must fail with `EACCES`, no reader may ever see the writer's bytes (or an error),
//! and the backing file must stay as it was. Each test first proves that the readers
//! ran many reads while the writer was at work.
//!
//! The writer is this test binary run again (`writer_process` below, which does
//! nothing unless `VEILFS_TEST_WRITER` is set), so that it can run under another uid.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::Fixture;

const POLICY: &str = "[[rules]]\naction = \"read-only\"\npaths = [\"ro/\"]\n";

/// The file's content: what every reader must see, always.
const BODY: &[u8] = b"GOOD: this file is read-only through the mount\n";

/// What the writer tries to put at offset 0.
const EVIL: &[u8] = b"EVIL";

/// How long the writer keeps at it.
const WRITER_TIME: Duration = Duration::from_secs(2);

/// Reads that must have happened while the writer was at work for the test to say
/// anything (a few hundred thousand happen on a 2-core machine).
const MIN_PREADS: u64 = 2_000;
const MIN_CATS: u64 = 5;

const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug)]
enum Attack {
    /// `pwrite(fd, "EVIL", 0)` in a loop on a descriptor opened `O_WRONLY`.
    Pwrite,
    /// `mmap(MAP_SHARED, PROT_WRITE)` of a descriptor opened `O_RDWR`, "EVIL"
    /// stored into it again and again, `msync` after each store.
    SharedMap,
}

#[test]
fn refused_pwrite_by_root_is_never_read() {
    attack(Attack::Pwrite, None);
}

#[test]
fn refused_pwrite_by_another_user_is_never_read() {
    attack(Attack::Pwrite, Some(NOBODY));
}

#[test]
fn refused_shared_mapping_by_root_is_never_read() {
    attack(Attack::SharedMap, None);
}

#[test]
fn refused_shared_mapping_by_another_user_is_never_read() {
    attack(Attack::SharedMap, Some(NOBODY));
}

/// What the readers saw.
#[derive(Default)]
struct Seen {
    preads: AtomicU64,
    cats: AtomicU64,
    /// Reads that saw anything but [`BODY`], and the first few of them.
    bad: AtomicU64,
    wrong: parking_lot::Mutex<Vec<String>>,
}

impl Seen {
    fn bad(&self, what: String) {
        self.bad.fetch_add(1, Ordering::Relaxed);
        let mut w = self.wrong.lock();
        if w.len() < 10 {
            w.push(what);
        }
    }
}

fn attack(how: Attack, uid: Option<u32>) {
    let mut f = Fixture::new();
    f.file("ro/file.txt", std::str::from_utf8(BODY).unwrap());
    // Unix permissions let anyone write it: only the policy refuses.
    std::fs::set_permissions(f.s("ro/file.txt"), std::fs::Permissions::from_mode(0o666)).unwrap();
    // The other user must reach the mount point.
    std::fs::set_permissions(f.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = veilfs::MountOptions {
        allow_other: true,
        ..veilfs::MountOptions::default()
    };
    f.mount_with(veilfs::Policy::parse("p", POLICY).unwrap(), None, &opts);
    let before = f.snapshot();
    let target = f.m("ro/file.txt");
    assert_eq!(std::fs::read(&target).unwrap(), BODY, "the mount's view");

    let seen = Seen::default();
    let stop = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        // However this closure ends (a failed assertion too), the readers stop.
        let _stop = StopOnDrop(&stop);
        for _ in 0..2 {
            s.spawn(|| {
                let file = std::fs::File::open(&target).unwrap();
                let mut buf = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    match file.read_at(&mut buf, 0) {
                        Ok(n) if &buf[..n] == BODY => {}
                        Ok(n) => seen.bad(format!(
                            "pread saw {:?}",
                            String::from_utf8_lossy(&buf[..n])
                        )),
                        Err(e) => seen.bad(format!("pread failed: {e}")),
                    }
                    seen.preads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let o = Command::new("cat").arg(&target).output().unwrap();
                if !o.status.success() || o.stdout != BODY {
                    seen.bad(format!(
                        "cat: {} printed {:?}, stderr {:?}",
                        o.status,
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ));
                }
                seen.cats.fetch_add(1, Ordering::Relaxed);
            }
        });
        // The readers are going (and the file's pages are cached) before the writer.
        assert!(
            common::wait_until(Duration::from_secs(10), || seen
                .cats
                .load(Ordering::Relaxed)
                >= 2),
            "the readers did not start"
        );
        run_writer(how, uid, &target, &seen)
    });

    let (preads, cats) = report.concurrent;
    assert!(
        preads >= MIN_PREADS && cats >= MIN_CATS,
        "the readers made only {preads} preads and {cats} cats while the writer worked: \
         the test proves nothing"
    );
    let wrong = seen.wrong.lock().clone();
    assert!(
        wrong.is_empty(),
        "{how:?} as {uid:?}: {} reads saw what the policy refused ({preads} preads and \
         {cats} cats during the attack; writer: {}):\n  {}",
        seen.bad.load(Ordering::Relaxed),
        report.summary,
        wrong.join("\n  ")
    );
    assert_eq!(
        std::fs::read(f.s("ro/file.txt")).unwrap(),
        BODY,
        "the backing file changed"
    );
    assert_eq!(before, f.snapshot(), "the backing directory changed");
    assert_eq!(std::fs::read(&target).unwrap(), BODY, "the mount's view");
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

struct Report {
    /// Reads made between the writer's "start" and "done".
    concurrent: (u64, u64),
    summary: String,
}

/// Runs the writer process to completion and checks what it reports: every attempt
/// refused with `EACCES`, and enough attempts made.
fn run_writer(how: Attack, uid: Option<u32>, target: &std::path::Path, seen: &Seen) -> Report {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "writer_process",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("VEILFS_TEST_WRITER", target)
    .env("VEILFS_TEST_ATTACK", format!("{how:?}"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(uid) = uid {
        cmd.uid(uid).gid(uid);
    }
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (mut start, mut end, mut summary) = (None, None, None);
    let counts = || {
        (
            seen.preads.load(Ordering::Relaxed),
            seen.cats.load(Ordering::Relaxed),
        )
    };
    for line in out.lines() {
        let line = line.unwrap();
        // libtest may print "test writer_process ... " on the same line first.
        if line.ends_with("writer: start") {
            start = Some(counts());
        } else if let Some((_, s)) = line.split_once("writer: done ") {
            end = Some(counts());
            summary = Some(s.to_string());
        }
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    let (Some(start), Some(end), Some(summary)) = (start, end, summary) else {
        panic!("the writer did not run: {status}\n{err}");
    };
    assert!(status.success(), "writer: {status}, {summary}\n{err}");
    // "attempts N refused N other [..]"
    let words: Vec<&str> = summary.split_whitespace().collect();
    let attempts: u64 = words[1].parse().unwrap();
    let refused: u64 = words[3].parse().unwrap();
    assert!(
        attempts >= 20,
        "the writer made only {attempts} attempts: {summary}"
    );
    assert_eq!(
        attempts, refused,
        "{how:?} as {uid:?}: every attempt must fail with EACCES: {summary}"
    );
    Report {
        concurrent: (end.0 - start.0, end.1 - start.1),
        summary,
    }
}

/// The writer: does nothing unless run by `run_writer`. Prints "writer: start",
/// attacks for [`WRITER_TIME`], then "writer: done attempts N refused N other [...]"
/// (refused: failed with EACCES at the open, the write or the mapping).
#[test]
fn writer_process() {
    let Some(target) = std::env::var_os("VEILFS_TEST_WRITER") else {
        return;
    };
    let how = std::env::var("VEILFS_TEST_ATTACK").unwrap();
    let (mut attempts, mut refused, mut other) = (0u64, 0u64, Vec::new());
    let mut tally = |r: std::io::Result<()>, what: &str| {
        attempts += 1;
        let outcome = match r {
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                refused += 1;
                return;
            }
            Err(e) => format!("{what}: {e}"),
            Ok(()) => format!("{what}: succeeded"),
        };
        if !other.contains(&outcome) {
            other.push(outcome);
        }
    };
    println!("writer: start");
    let start = Instant::now();
    while start.elapsed() < WRITER_TIME {
        match how.as_str() {
            "Pwrite" => match std::fs::OpenOptions::new().write(true).open(&target) {
                Err(e) => tally(Err(e), "open O_WRONLY"),
                Ok(file) => {
                    for _ in 0..1000 {
                        let r = file.write_at(EVIL, 0).map(drop);
                        tally(r, "pwrite");
                    }
                }
            },
            "SharedMap" => {
                let rw = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&target);
                match rw {
                    Ok(file) => {
                        for _ in 0..20 {
                            let r = poke_shared_map(&file);
                            tally(r, "store into a shared mapping + msync");
                        }
                    }
                    Err(e) => {
                        tally(Err(e), "open O_RDWR");
                        // Nor may a descriptor opened for reading be mapped writable.
                        let ro = std::fs::File::open(&target).unwrap();
                        tally(poke_shared_map(&ro), "writable shared mapping of O_RDONLY");
                    }
                }
            }
            _ => panic!("unknown attack {how}"),
        }
    }
    println!("writer: done attempts {attempts} refused {refused} other {other:?}");
}

/// Maps `file` shared and writable, stores [`EVIL`] at offset 0, `msync`s, keeps the
/// mapping a moment (for readers to look), unmaps.
fn poke_shared_map(file: &std::fs::File) -> std::io::Result<()> {
    let len = BODY.len();
    // SAFETY: a fresh mapping of `len` bytes of a file at least that long, written
    // only inside it and unmapped before returning; nothing else refers to it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        std::ptr::copy_nonoverlapping(EVIL.as_ptr(), p.cast::<u8>(), EVIL.len());
        std::thread::sleep(Duration::from_millis(20));
        let r = if libc::msync(p, len, libc::MS_SYNC) == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        };
        libc::munmap(p, len);
        r
    }
}
