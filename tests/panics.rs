//! A panic in a request handler is one failed request (`EIO`), not a dying mount:
//! with a fault injected into lookups of one name, that name answers `EIO` again and
//! again, more times than there are worker threads, and the same mount goes on
//! serving everything else.

mod common;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use common::{Fixture, assert_errno};
use veilfs::{MountOptions, Policy};

/// The name whose lookup panics (unique to this test binary: the fault is
/// process-wide).
const POISONED: &str = "poisoned-name";
const THREADS: usize = 2;

/// Runs `op` on a thread of its own and returns its result, failing the test if the
/// mount has not answered within a deadline (a mount whose workers all died never
/// answers).
fn answered<T: Send + 'static>(what: &str, op: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(op());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: no answer within 20 s: the mount stopped serving"))
}

/// Mounts `f` allowing everything, with only [`THREADS`] workers (so that a dead
/// worker shows at once).
fn mount_all_allowed(f: &mut Fixture) {
    let opts = MountOptions {
        threads: THREADS,
        ..MountOptions::default()
    };
    f.mount_with(
        Policy::parse("p.toml", "default = \"allow\"\n").unwrap(),
        None,
        &opts,
    );
}

#[test]
fn a_panicking_lookup_answers_eio_and_the_mount_keeps_serving() {
    let mut f = Fixture::new();
    f.file("ok.txt", "ok\n").dir("d");
    veilfs::fs::fuse::inject_lookup_panic(Some(OsStr::new(POISONED)));
    mount_all_allowed(&mut f);

    for round in 0..3 * THREADS {
        let (top, inner): (PathBuf, PathBuf) = (f.m(POISONED), f.m("d").join(POISONED));
        let r = answered("stat of the poisoned name", move || {
            (std::fs::metadata(top), std::fs::metadata(inner))
        });
        assert_errno(r.0, libc::EIO, &format!("stat {POISONED} (round {round})"));
        assert_errno(
            r.1,
            libc::EIO,
            &format!("stat d/{POISONED} (round {round})"),
        );
    }

    // Many more requests than there are workers, in the directory whose node lock
    // the panics held.
    for i in 0..20 * THREADS {
        let (ok, new, d) = (f.m("ok.txt"), f.m(&format!("new{i}.txt")), f.m("d"));
        let (read, wrote, listed) = answered(&format!("request round {i}"), move || {
            let read = std::fs::read_to_string(&ok);
            let wrote =
                std::fs::write(&new, format!("{i}\n")).and_then(|()| std::fs::read_to_string(&new));
            let listed = std::fs::write(d.join(format!("f{i}")), "x")
                .and_then(|()| std::fs::read_dir(&d))
                .map(|rd| rd.count());
            (read, wrote, listed)
        });
        assert_eq!(read.unwrap(), "ok\n");
        assert_eq!(wrote.unwrap(), format!("{i}\n"));
        assert_eq!(listed.unwrap(), i + 1);
    }
    assert!(
        veilfs::session::mount::is_mount_point(&f.mnt.canonicalize().unwrap()),
        "the mount is gone"
    );
    veilfs::fs::fuse::inject_lookup_panic(None);
    f.mount.take().unwrap().unmount().unwrap();
}

/// A time the kernel passes through unchanged (`tv_sec = i64::MIN`) once panicked
/// inside fuser while it decoded the `setattr`, before any handler ran, and ended the
/// session: now the request is answered and the mount goes on serving.
#[test]
fn extreme_times_set_through_the_mount_take_nothing_down() {
    let mut f = Fixture::new();
    f.file("t.txt", "t\n");
    mount_all_allowed(&mut f);
    for (sec, nsec) in [
        (i64::MIN, 0),
        (i64::MIN, 999_999_999),
        (i64::MAX, 999_999_999),
    ] {
        let path = f.m("t.txt");
        answered("utimensat with an extreme time", move || {
            let t = nix::sys::time::TimeSpec::new(sec, nsec);
            // Whatever the answer, only that there is one matters here.
            let _ = nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &path,
                &t,
                &t,
                nix::sys::stat::UtimensatFlags::FollowSymlink,
            );
        });
        for _ in 0..2 * THREADS {
            let path = f.m("t.txt");
            let got = answered("a read after the extreme time", move || {
                std::fs::read_to_string(path)
            });
            assert_eq!(
                got.unwrap(),
                "t\n",
                "({sec}, {nsec}): the mount stopped serving"
            );
        }
    }
}
