//! No edit made outside the mount is lost, even with a 10-minute kernel cache: not
//! one that follows at once a change made through the mount to the same file (the
//! watcher tells its own echoes by what they left, not by when they came), and not
//! one whose inotify event was lost (a queue overflow drops every kernel cache).
//!
//! The overflow is fed to the watcher here through a test hook; a real one (a
//! lowered `max_queued_events`) is forced in `tests/watch_overflow.rs`.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use common::outside::{allow_all, append, long_ttl, seen, settle, shows, unseen_edit};
use common::{Fixture, wait_until};

/// `change` alters `a.txt` through the mount and names the file it leaves; at once
/// an outside append to that file must show through the mount, and an append
/// through the mount afterwards must land after the outside bytes, not on them.
fn outside_append_right_after(what: &str, change: impl Fn(&Fixture) -> &'static str) {
    for strict_open in [false, true] {
        let mut f = Fixture::new();
        f.file("a.txt", "old\n");
        f.mount_with(allow_all(), None, &long_ttl(strict_open));
        assert!(shows(&f, "a.txt", b"old\n"), "warming the caches");

        let rel = change(&f);
        settle(&f, rel);
        let mut want = fs::read(f.s(rel)).unwrap();
        append(&f.s(rel), b"OUTSIDE\n");
        want.extend_from_slice(b"OUTSIDE\n");
        assert!(
            wait_until(Duration::from_secs(3), || shows(&f, rel, &want)),
            "{what} through the mount (strict_open {strict_open}), then an outside append: \
             the mount still shows {} instead of {:?}",
            seen(&f, rel),
            String::from_utf8_lossy(&want),
        );

        append(&f.m(rel), b"inside\n");
        want.extend_from_slice(b"inside\n");
        assert_eq!(
            String::from_utf8_lossy(&fs::read(f.s(rel)).unwrap()),
            String::from_utf8_lossy(&want),
            "{what} (strict_open {strict_open}): an append through the mount after the \
             outside one must keep the outside bytes on disk"
        );
    }
}

#[test]
fn an_outside_append_right_after_a_chmod_through_the_mount_is_seen() {
    outside_append_right_after("chmod", |f| {
        fs::set_permissions(f.m("a.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        "a.txt"
    });
}

#[test]
fn an_outside_append_right_after_an_append_through_the_mount_is_seen() {
    outside_append_right_after("append", |f| {
        append(&f.m("a.txt"), b"through\n");
        "a.txt"
    });
}

#[test]
fn an_outside_append_right_after_a_touch_through_the_mount_is_seen() {
    outside_append_right_after("touch", |f| {
        let t = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(f.m("a.txt"))
            .and_then(|file| file.set_modified(t))
            .unwrap();
        "a.txt"
    });
}

#[test]
fn an_outside_append_right_after_a_rename_through_the_mount_is_seen() {
    outside_append_right_after("rename", |f| {
        fs::rename(f.m("a.txt"), f.m("b.txt")).unwrap();
        "b.txt"
    });
}

#[test]
fn an_outside_append_right_after_a_create_through_the_mount_is_seen() {
    outside_append_right_after("create", |f| {
        fs::write(f.m("c.txt"), "created\n").unwrap();
        "c.txt"
    });
}

/// Lost events drop the kernel's caches of what changed, not of everything: after
/// an overflow the edit no event told of shows, and what did not change stays
/// cached. (`tests/watch_overflow.rs` checks the entries of a real overflow.)
#[test]
fn an_inotify_overflow_drops_only_what_changed() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n");
    for i in 0..60 {
        f.file(&format!("many/f{i:02}.txt"), "same\n");
    }
    f.mount_with(allow_all(), None, &long_ttl(false));
    for i in 0..60 {
        assert!(shows(&f, &format!("many/f{i:02}.txt"), b"same\n"));
    }
    let want = unseen_edit(&f);
    let m = f.mount.as_ref().unwrap();
    let before = m.watch_overflow_invalidated();
    assert!(m.inject_watch_overflow(), "the mount does not watch");
    assert!(
        wait_until(Duration::from_secs(3), || shows(&f, "a.txt", &want)),
        "after an inotify overflow the mount still shows {} instead of {:?}",
        seen(&f, "a.txt"),
        String::from_utf8_lossy(&want),
    );
    let invalidated = m.watch_overflow_invalidated() - before;
    assert!(
        (1..10).contains(&invalidated),
        "{invalidated} nodes invalidated of more than 60 held, most unchanged"
    );
    for i in 0..60 {
        assert!(shows(&f, &format!("many/f{i:02}.txt"), b"same\n"));
    }
}

#[test]
fn an_inotify_overflow_drops_every_kernel_cache() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n").file("dir/b.txt", "b\n");
    f.mount_with(allow_all(), None, &long_ttl(false));
    let _ = fs::read_dir(f.m("dir")).unwrap().count();
    assert!(shows(&f, "dir/b.txt", b"b\n"));
    settle(&f, "dir/b.txt");
    let want = unseen_edit(&f);

    let m = f.mount.as_ref().unwrap();
    assert!(m.inject_watch_overflow(), "the mount does not watch");
    assert!(
        wait_until(Duration::from_secs(3), || shows(&f, "a.txt", &want)),
        "after an inotify overflow the mount still shows {} instead of {:?}",
        seen(&f, "a.txt"),
        String::from_utf8_lossy(&want),
    );
    assert_eq!(m.watch_overflows(), 1);
    assert!(shows(&f, "dir/b.txt", b"b\n"));
    settle(&f, "dir/b.txt");

    // The watcher goes on after an overflow.
    append(&f.s("dir/b.txt"), b"more\n");
    assert!(
        wait_until(Duration::from_secs(3), || shows(
            &f,
            "dir/b.txt",
            b"b\nmore\n"
        )),
        "after an overflow the watcher no longer reports outside edits: the mount shows {}",
        seen(&f, "dir/b.txt"),
    );
}
