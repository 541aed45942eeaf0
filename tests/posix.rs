//! POSIX details through a real mount: times before 1970, set-group-ID
//! directories under `--allow-other`, `copy_file_range`, and a truncation while a
//! file created through the mount is still open (pjdfstest
//! `ftruncate::shrink_not_empty`).

mod common;

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use common::Fixture;
use veilfs::{MountOptions, Policy};

const ALLOW: &str = "default = \"allow\"\n";

/// 1960-06-15T00:00:00Z.
const JUNE_1960: i64 = -301_276_800;

fn set_times(p: &Path, atime: (i64, i64), mtime: (i64, i64)) -> std::io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let ts = [
        libc::timespec {
            tv_sec: atime.0,
            tv_nsec: atime.1,
        },
        libc::timespec {
            tv_sec: mtime.0,
            tv_nsec: mtime.1,
        },
    ];
    // SAFETY: valid C string and a two-element timespec array.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), ts.as_ptr(), 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `(atime, mtime)` as `(seconds, nanoseconds)` pairs.
fn times(p: &Path) -> ((i64, i64), (i64, i64)) {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    ((m.atime(), m.atime_nsec()), (m.mtime(), m.mtime_nsec()))
}

#[test]
fn times_before_1970_keep_their_seconds_and_nanoseconds() {
    let mut f = Fixture::new();
    f.file("set.txt", "a\n").file("old.txt", "b\n");
    // Set on the backing file before mounting: served through a fresh lookup.
    let half_before = (-1, 500_000_000);
    set_times(&f.s("old.txt"), half_before, (JUNE_1960, 1)).unwrap();
    f.mount(ALLOW);

    assert_eq!(
        times(&f.m("old.txt")),
        (half_before, (JUNE_1960, 1)),
        "times set on the backing file, seen through the mount"
    );

    // `touch -d 1960-06-15`, with nanoseconds: through the mount, then seen on both sides.
    let (at, mt) = ((JUNE_1960, 123_456_789), (JUNE_1960 + 3600, 987_654_321));
    set_times(&f.m("set.txt"), at, mt).unwrap();
    assert_eq!(times(&f.s("set.txt")), (at, mt), "on the backing file");
    assert_eq!(times(&f.m("set.txt")), (at, mt), "through the mount");

    // The second before the epoch, and a whole negative second.
    set_times(&f.m("set.txt"), (-1, 0), (-1, 999_999_999)).unwrap();
    assert_eq!(times(&f.s("set.txt")), ((-1, 0), (-1, 999_999_999)));
    assert_eq!(times(&f.m("set.txt")), ((-1, 0), (-1, 999_999_999)));
}

fn allow_other(f: &mut Fixture) {
    // The temp dir is private to root; let the other user walk to the mount.
    for p in [f.tmp.path(), &f.src] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let opts = MountOptions {
        allow_other: true,
        ..MountOptions::default()
    };
    f.mount_with(Policy::parse("allow", ALLOW).unwrap(), None, &opts);
}

#[test]
fn a_setgid_directory_gives_what_another_user_makes_in_it_its_group() {
    let mut f = Fixture::new();
    f.dir("shared").dir("plain");
    let shared = f.s("shared");
    std::os::unix::fs::chown(&shared, Some(0), Some(4242)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o2777)).unwrap();
    std::fs::set_permissions(f.s("plain"), std::fs::Permissions::from_mode(0o777)).unwrap();
    allow_other(&mut f);

    let script = "touch shared/f && mkdir shared/d && mkdir shared/d/e && touch plain/g";
    let o = common::as_nobody(&f.mnt, script);
    assert!(o.status.success(), "{}", f.explain(script, &o));

    let md = |rel: &str| std::fs::symlink_metadata(f.s(rel)).unwrap();
    for rel in ["shared/f", "shared/d", "shared/d/e"] {
        let m = md(rel);
        assert_eq!(
            (m.uid(), m.gid()),
            (65534, 4242),
            "{rel}: the caller's uid and the set-group-ID directory's gid\n{}",
            common::listing(&f.src)
        );
    }
    for rel in ["shared/d", "shared/d/e"] {
        assert_ne!(
            md(rel).mode() & libc::S_ISGID,
            0,
            "{rel}: a directory made in a set-group-ID directory inherits S_ISGID"
        );
    }
    let g = md("plain/g");
    assert_eq!(
        (g.uid(), g.gid()),
        (65534, 65534),
        "plain/g: the caller's own"
    );
}

#[test]
fn copy_file_range_through_the_mount_copies_and_counts_exactly() {
    let mut f = Fixture::new();
    let body: Vec<u8> = (0..(3 << 20) + 12345u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    std::fs::write(f.s("from.bin"), &body).unwrap();
    f.mount(ALLOW);

    let from = std::fs::File::open(f.m("from.bin")).unwrap();
    let to = std::fs::File::create(f.m("to.bin")).unwrap();
    let (mut off_in, mut off_out) = (100i64, 0i64);
    let mut total = 0usize;
    loop {
        // Ask for more than a `u32` can count: the reply must still be exact.
        // SAFETY: open descriptors and valid offset pointers.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                &mut off_out,
                (u32::MAX as usize) + 4096,
                0,
            )
        };
        assert!(
            n >= 0,
            "copy_file_range: {}",
            std::io::Error::last_os_error()
        );
        if n == 0 {
            break;
        }
        total += n as usize;
        assert_eq!((off_in, off_out), (100 + total as i64, total as i64));
    }
    drop(to);
    assert_eq!(total, body.len() - 100);
    let copied = std::fs::read(f.s("to.bin")).unwrap();
    assert!(copied == body[100..], "the copy differs from its source");
}

#[test]
fn ftruncate_shrinks_a_file_created_here_and_rewritten_by_another_open() {
    // pjdfstest ftruncate::shrink_not_empty: create (and keep open), rewrite through
    // a second open, shrink through the first, then through a third.
    let mut f = Fixture::new();
    f.mount(ALLOW);
    let p = f.m("f");
    let first = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&p)
        .unwrap();
    let data = vec![7u8; 12345];
    std::fs::File::create(&p)
        .and_then(|mut w| w.write_all(&data))
        .unwrap_or_else(|e| panic!("second open of a file still open from its creation: {e}"));
    first.set_len(23456).unwrap();
    assert_eq!(std::fs::symlink_metadata(&p).unwrap().len(), 23456);
    let third = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    third.set_len(1).unwrap();
    assert_eq!(std::fs::symlink_metadata(&p).unwrap().len(), 1);
    let mut back = Vec::new();
    std::fs::File::open(&p)
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, [7u8]);
    assert_eq!(std::fs::read(f.s("f")).unwrap(), [7u8]);
}
