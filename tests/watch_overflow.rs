//! A real inotify queue overflow loses no outside edit: the watcher drops every
//! kernel cache of the mount. (`tests/outside_edits.rs` feeds it a synthetic one.)
//!
//! The queue length is global (`/proc/sys/fs/inotify/max_queued_events`, read when
//! an inotify instance is made), so this test lowers it only while its mount starts
//! and restores it at once, even on panic. It lives in a test binary of its own so
//! that no other test of this suite makes an inotify instance meanwhile. Needs root.

mod common;

use std::fs;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::outside::{allow_all, long_ttl, seen, shows, unseen_edit};
use common::{Fixture, wait_until};

const MAX_QUEUED: &str = "/proc/sys/fs/inotify/max_queued_events";

/// The mount's inotify queue length: more than the few events before the flood.
const QUEUE: u32 = 32;

/// `max_queued_events` lowered; the old value is written back on drop.
struct QueueLimit {
    old: String,
}

impl QueueLimit {
    fn lower_to(n: u32) -> QueueLimit {
        let old = fs::read_to_string(MAX_QUEUED).unwrap_or_else(|e| panic!("{MAX_QUEUED}: {e}"));
        fs::write(MAX_QUEUED, n.to_string()).unwrap_or_else(|e| {
            panic!("this test forces an inotify overflow and needs root to lower {MAX_QUEUED}: {e}")
        });
        QueueLimit { old }
    }
}

impl Drop for QueueLimit {
    fn drop(&mut self) {
        if let Err(e) = fs::write(MAX_QUEUED, self.old.trim()) {
            eprintln!("could not restore {MAX_QUEUED} to {}: {e}", self.old.trim());
        }
    }
}

#[test]
fn a_real_inotify_overflow_loses_no_outside_edit() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n");
    {
        let _limit = QueueLimit::lower_to(QUEUE);
        f.mount_with(allow_all(), None, &long_ttl(false));
    }
    let want = unseen_edit(&f);

    // Outside writes to two files in turn (so that inotify cannot merge their
    // events), faster than the watcher reads them, until the queue overflows.
    let m = f.mount.as_ref().unwrap();
    assert_eq!(m.watch_overflows(), 0, "an overflow before the flood");
    let (a, b) = (
        fs::File::create(f.s("flood-a")).unwrap(),
        fs::File::create(f.s("flood-b")).unwrap(),
    );
    let start = Instant::now();
    let mut writes = 0u64;
    while m.watch_overflows() == 0 && start.elapsed() < Duration::from_secs(20) {
        for _ in 0..500 {
            a.write_all_at(b"a", writes).unwrap();
            b.write_all_at(b"b", writes).unwrap();
            writes += 1;
        }
    }
    assert!(
        wait_until(Duration::from_secs(1), || m.watch_overflows() > 0),
        "{} outside writes did not overflow an inotify queue of {QUEUE} events",
        2 * writes
    );
    eprintln!(
        "overflow after {} outside writes in {:?}",
        2 * writes,
        start.elapsed()
    );
    assert!(
        wait_until(Duration::from_secs(3), || shows(&f, "a.txt", &want)),
        "after {} inotify overflow(s) the mount still shows {} instead of {:?}",
        m.watch_overflows(),
        seen(&f, "a.txt"),
        String::from_utf8_lossy(&want),
    );
    let mut names: Vec<String> = fs::read_dir(f.m(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["a.txt", "flood-a", "flood-b", "marker"],
        "the listing after the overflow"
    );
}
