//! Opens of names that other processes rename over, through the mount: each open
//! gets a file the name held (natively it cannot fail, the name always exists),
//! never `ESTALE`; and a file whose last name was removed is opened, as natively,
//! only under the policy its last name meets.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Fixture, assert_errno};

const NAMES: usize = 4;

/// One whole record: a header naming its writer and round, padded to a length
/// derived from both, so a torn or mixed read shows.
fn record(writer: usize, round: u64) -> Vec<u8> {
    let mut v = format!("{writer} {round}\n").into_bytes();
    v.resize(64 + (writer * 7919 + round as usize * 104_729) % 4096, b'.');
    v
}

fn check(body: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(body).map_err(|_| "not text".to_string())?;
    let (head, _) = text.split_once('\n').ok_or("no header")?;
    let mut it = head.split(' ').map(|n| n.parse::<u64>());
    let (Some(Ok(w)), Some(Ok(r))) = (it.next(), it.next()) else {
        return Err(format!("bad header {head:?}"));
    };
    if body != record(w as usize, r).as_slice() {
        return Err(format!(
            "record {head:?} is not whole ({} bytes)",
            body.len()
        ));
    }
    Ok(())
}

/// Two writers rename fresh files over four names while three readers open and
/// read those names, until every reader has opened 3,000 times (or 60 s passed).
/// On the code before, a reader met `ESTALE` within a few hundred opens: the name
/// it had looked up was renamed over before its `OPEN` came, and again before the
/// kernel's second try.
#[test]
fn opens_of_names_renamed_over_never_fail() {
    let mut f = Fixture::new();
    for i in 0..NAMES {
        f.file(&format!("shared/s{i}"), "");
    }
    f.mount("default = \"allow\"\n");
    let dir = f.m("shared");
    for i in 0..NAMES {
        fs::write(dir.join(format!("s{i}")), record(9, i as u64)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let renames = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (dir, stop, renames) = (dir.clone(), stop.clone(), renames.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let tmp = dir.join(format!("t{w}"));
                    let to = dir.join(format!("s{}", round as usize % NAMES));
                    fs::File::create(&tmp)
                        .and_then(|mut t| t.write_all(&record(w, round)))
                        .and_then(|()| fs::rename(&tmp, &to))
                        .map_err(|e| format!("writer {w}, round {round}: {e}"))?;
                    renames.fetch_add(1, Ordering::Relaxed);
                    round += 1;
                }
                Ok(())
            })
        })
        .collect();
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let dir = dir.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let start = Instant::now();
                let mut opens = 0u64;
                let mut body = Vec::new();
                while opens < 3000 && start.elapsed() < Duration::from_secs(60) {
                    let name = format!("s{}", (opens as usize + r) % NAMES);
                    let mut file = fs::File::open(dir.join(&name))
                        .map_err(|e| format!("reader {r}: open {name} after {opens} opens: {e}"))?;
                    body.clear();
                    file.read_to_end(&mut body)
                        .map_err(|e| format!("reader {r}: read {name}: {e}"))?;
                    check(&body).map_err(|e| format!("reader {r}: {name}: {e}"))?;
                    opens += 1;
                }
                Ok(opens)
            })
        })
        .collect();
    let read: Vec<Result<u64, String>> = readers.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap().unwrap();
    }
    let renames = renames.load(Ordering::Relaxed);
    for r in &read {
        if let Err(e) = r {
            panic!("{e} ({renames} renames over the names meanwhile)");
        }
    }
    let opens: u64 = read.iter().map(|r| *r.as_ref().unwrap()).sum();
    eprintln!("{opens} opens, {renames} renames over the names meanwhile");
    assert!(
        renames >= 100,
        "only {renames} renames ran beside the readers: the race was not run"
    );
}

/// A file whose last name was removed through the mount is opened through a
/// descriptor held from before only under the policy its last name meets now: a
/// reload that denies that name refuses the reopen.
#[test]
fn a_removed_file_is_reopened_only_under_its_last_names_decision() {
    let mut f = Fixture::new();
    f.file("notes.txt", "n\n").file("keep.txt", "k\n");
    let policy = f.tmp.path().join("policy.toml");
    fs::write(&policy, "default = \"allow\"\n").unwrap();
    let p = veilfs::Policy::parse("policy.toml", "default = \"allow\"\n").unwrap();
    f.mount_with(p, Some(&policy), &veilfs::MountOptions::default());
    let held = fs::File::open(f.m("notes.txt")).unwrap();
    let held_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held));
    fs::remove_file(f.m("notes.txt")).unwrap();
    assert!(!f.s("notes.txt").exists());
    // Natively a deleted file is reopened through /proc/self/fd; so here, under
    // the name it was removed as.
    assert_eq!(fs::read_to_string(&held_path).unwrap(), "n\n");
    // Denied now: refused, and nothing of it is read.
    fs::write(
        f.tmp.path().join("policy.tmp"),
        "[[rules]]\naction = \"deny\"\npaths = [\"notes.txt\"]\n",
    )
    .unwrap();
    fs::rename(f.tmp.path().join("policy.tmp"), &policy).unwrap();
    f.mount.as_ref().unwrap().reload().unwrap();
    assert_errno(
        fs::read_to_string(&held_path),
        libc::EACCES,
        "reopening a removed file whose last name is denied",
    );
    assert_eq!(fs::read_to_string(f.m("keep.txt")).unwrap(), "k\n");
}

/// A file renamed outside the mount to a denied name and then removed there is
/// not an orphan of the mount: the daemon never saw its last name, so a
/// descriptor held from before cannot reopen it (`ESTALE`), whatever it held
/// while it had the denied name.
#[test]
fn a_file_renamed_to_a_denied_name_and_removed_outside_is_not_reopened() {
    let mut f = Fixture::new();
    f.file("n", "notes\n");
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\".env*\"]\n");
    let held = fs::File::open(f.m("n")).unwrap();
    let held_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held));
    fs::rename(f.s("n"), f.s(".env")).unwrap();
    let mut outside = fs::OpenOptions::new()
        .append(true)
        .open(f.s(".env"))
        .unwrap();
    outside.write_all(b"SECRET\n").unwrap();
    fs::remove_file(f.s(".env")).unwrap();
    assert_errno(
        fs::read_to_string(&held_path),
        libc::ESTALE,
        "reopening a file renamed to a denied name and removed outside",
    );
}
