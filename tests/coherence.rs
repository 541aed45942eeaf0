//! Long kernel caches stay coherent with edits made outside the mount: with the
//! watcher, at once; without it, within the TTL.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::{Fixture, wait_until};
use veilfs::{MountOptions, Policy};

fn allow_all() -> Policy {
    Policy::parse("p", "default = \"allow\"\n").unwrap()
}

/// Warms every cache for `a.txt` and `dir/`, then edits them from outside.
fn warm_then_edit(f: &Fixture) {
    assert_eq!(fs::read_to_string(f.m("a.txt")).unwrap(), "old\n");
    assert_eq!(fs::metadata(f.m("a.txt")).unwrap().len(), 4);
    assert!(fs::metadata(f.m("dir/gone.txt")).is_ok());
    assert!(fs::metadata(f.m("dir/new.txt")).is_err());
    let _ = fs::read_dir(f.m("dir")).unwrap().count();
    fs::write(f.s("a.txt"), "new content\n").unwrap();
    fs::remove_file(f.s("dir/gone.txt")).unwrap();
    fs::write(f.s("dir/new.txt"), "n").unwrap();
}

fn seen(f: &Fixture) -> bool {
    fs::read_to_string(f.m("a.txt")).is_ok_and(|s| s == "new content\n")
        && fs::metadata(f.m("a.txt")).is_ok_and(|m| m.len() == 12)
        && fs::metadata(f.m("dir/gone.txt")).is_err()
        && fs::metadata(f.m("dir/new.txt")).is_ok()
        && {
            let mut names: Vec<String> = fs::read_dir(f.m("dir"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names == ["new.txt"]
        }
}

#[test]
fn with_the_watcher_outside_edits_show_at_once_despite_a_long_ttl() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n").file("dir/gone.txt", "g");
    let opts = MountOptions {
        ttl: Duration::from_secs(600),
        ..MountOptions::default()
    };
    f.mount_with(allow_all(), None, &opts);
    warm_then_edit(&f);
    let t = Instant::now();
    assert!(
        wait_until(Duration::from_secs(2), || seen(&f)),
        "an outside edit was not visible within 2 s with a 600 s TTL"
    );
    eprintln!("outside edit visible after {:?}", t.elapsed());
}

#[test]
fn without_the_watcher_outside_edits_show_within_the_ttl() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n").file("dir/gone.txt", "g");
    let opts = MountOptions {
        ttl: Duration::from_secs(1),
        watch: false,
        ..MountOptions::default()
    };
    f.mount_with(allow_all(), None, &opts);
    warm_then_edit(&f);
    assert!(
        wait_until(Duration::from_millis(1500), || seen(&f)),
        "an outside edit was not visible within the 1 s TTL"
    );
}

#[test]
fn changes_through_the_mount_are_seen_at_once() {
    let mut f = Fixture::new();
    f.file("a.txt", "old\n");
    let opts = MountOptions {
        ttl: Duration::from_secs(600),
        ..MountOptions::default()
    };
    f.mount_with(allow_all(), None, &opts);
    assert_eq!(fs::read_to_string(f.m("a.txt")).unwrap(), "old\n");
    fs::write(f.m("a.txt"), "through\n").unwrap();
    assert_eq!(fs::read_to_string(f.m("a.txt")).unwrap(), "through\n");
    fs::write(f.m("b.txt"), "b").unwrap();
    assert!(fs::metadata(f.m("b.txt")).is_ok());
    fs::remove_file(f.m("b.txt")).unwrap();
    assert!(fs::metadata(f.m("b.txt")).is_err());
}
