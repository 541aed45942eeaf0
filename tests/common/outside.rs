//! Helpers for tests of edits made outside the mount.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::{Fixture, wait_until};
use veilfs::{MountOptions, Policy};

pub fn allow_all() -> Policy {
    Policy::parse("p", "default = \"allow\"\n").unwrap()
}

/// Kernel caches kept for 10 minutes: only the watcher makes an edit show sooner.
pub fn long_ttl(strict_open: bool) -> MountOptions {
    MountOptions {
        ttl: Duration::from_secs(600),
        strict_open,
        ..MountOptions::default()
    }
}

pub fn append(p: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(p)
        .and_then(|mut f| f.write_all(bytes))
        .unwrap_or_else(|e| panic!("append to {}: {e}", p.display()));
}

/// Whether the mount shows exactly `want` for `rel`: its size and its content.
pub fn shows(f: &Fixture, rel: &str, want: &[u8]) -> bool {
    fs::metadata(f.m(rel)).is_ok_and(|m| m.len() == want.len() as u64)
        && fs::read(f.m(rel)).is_ok_and(|b| b == want)
}

/// What the mount shows for `rel`, for failure messages.
pub fn seen(f: &Fixture, rel: &str) -> String {
    format!(
        "{:?} (size {:?})",
        String::from_utf8_lossy(&fs::read(f.m(rel)).unwrap_or_default()),
        fs::metadata(f.m(rel)).map(|m| m.len()),
    )
}

/// Takes `rel`'s attributes into the kernel's cache now. The kernel refetches them
/// by itself at the first `stat` after a read (atime) or a write through the mount
/// (size, mtime): done here, so that afterwards only the watcher can refresh them.
pub fn settle(f: &Fixture, rel: &str) {
    fs::metadata(f.m(rel)).unwrap();
}

/// Warms the caches for `a.txt` ("old\n"), then appends to it outside the mount
/// in a way that raises no event the watcher sees (through a hard link in a
/// directory nobody watches), and checks that the mount indeed still shows the
/// old content once the watcher has caught up. Returns what `a.txt` now holds.
pub fn unseen_edit(f: &Fixture) -> Vec<u8> {
    assert!(shows(f, "a.txt", b"old\n"), "warming the caches");
    settle(f, "a.txt");
    let alias = f.tmp.path().join("alias");
    fs::hard_link(f.s("a.txt"), &alias).unwrap();
    append(&alias, b"unseen\n");
    // The watcher is live and has caught up: an outside create shows.
    fs::write(f.s("marker"), "m").unwrap();
    assert!(
        wait_until(Duration::from_secs(3), || fs::metadata(f.m("marker"))
            .is_ok()),
        "the watcher did not report an outside create within 3 s"
    );
    assert!(
        shows(f, "a.txt", b"old\n"),
        "the edit through a hard link elsewhere was seen without an overflow (the \
         mount shows {}): the test no longer tests anything",
        seen(f, "a.txt"),
    );
    fs::read(f.s("a.txt")).unwrap()
}
