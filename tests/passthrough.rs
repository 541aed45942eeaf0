//! Files opened for writing are served by FUSE passthrough, files opened for
//! reading by the page cache without a handle, and the kernel keeps one of the two
//! modes per inode while any file is open on it: an open in the other mode fails
//! with EIO. The daemon counts both kinds of open, so every mix of readers and
//! writers, in any order and at once, opens, reads and writes as natively, while
//! the policy still refuses each open it must.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Fixture, assert_errno};

const POLICY: &str = "[[rules]]\naction = \"read-only\"\npaths = [\"ro/\"]\n";

#[test]
fn readers_and_writers_open_in_either_order() {
    let mut fx = Fixture::new();
    fx.file("f.txt", "0123456789").file("ro/f.txt", "fixed");
    fx.mount(POLICY);
    let f = fx.m("f.txt");

    // A reader first (cached, no handle), then a writer: the writer joins the cache.
    let r = std::fs::File::open(&f).unwrap();
    let w = OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all_at(b"AB", 0).unwrap();
    let mut buf = [0u8; 10];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"AB23456789");
    drop((r, w));

    // A writer first (passthrough), then readers: each gets the same backing file.
    let w = OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all_at(b"CD", 2).unwrap();
    let r = std::fs::File::open(&f).unwrap();
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"ABCD456789");
    w.write_all_at(b"EF", 4).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"ABCDEF6789");
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"ABCDEF6789");
    let w2 = OpenOptions::new().append(true).open(&f).unwrap();
    w2.write_all_at(b"GH", 0).unwrap();
    drop((w, r, w2));
    assert_eq!(std::fs::read(fx.s("f.txt")).unwrap(), b"ABCDEF6789GH");
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 12);

    // A file created and written is read back at once, by name and by size.
    let c = fx.m("new.bin");
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&c, &body).unwrap();
    assert_eq!(std::fs::metadata(&c).unwrap().len(), body.len() as u64);
    assert_eq!(std::fs::read(&c).unwrap(), body);
    assert_eq!(std::fs::read(fx.s("new.bin")).unwrap(), body);

    // What the policy refuses stays refused, whatever mode the inode is in: the
    // read-only file opened for writing, beside a reader holding it open, and
    // through a hard link to a writable name held open by a writer.
    let ro = fx.m("ro/f.txt");
    let reader = std::fs::File::open(&ro).unwrap();
    assert_errno(
        OpenOptions::new().write(true).open(&ro),
        libc::EACCES,
        "open for writing of a read-only file",
    );
    drop(reader);
    std::fs::hard_link(fx.s("f.txt"), fx.s("ro/link.txt")).unwrap();
    let w = OpenOptions::new().write(true).open(&f).unwrap();
    assert_errno(
        OpenOptions::new().write(true).open(fx.m("ro/link.txt")),
        libc::EACCES,
        "open for writing of a read-only name of a file a writer holds",
    );
    let mut all = Vec::new();
    std::io::Read::read_to_end(
        &mut std::fs::File::open(fx.m("ro/link.txt")).unwrap(),
        &mut all,
    )
    .unwrap();
    assert_eq!(all, b"ABCDEF6789GH");
    drop(w);
    assert_eq!(std::fs::read(fx.s("ro/f.txt")).unwrap(), b"fixed");
}

/// A file written and closed, then opened for reading and held, then opened for
/// writing again (an editor's log, an agent appending while a viewer keeps the
/// file open): the second writer joins the reader's cached mode, whatever mode the
/// first writer had. Each round waits a little longer between the first writer's
/// close and the reader's open, so that the first writer's release has reached the
/// daemon in the later rounds however busy the machine is.
#[test]
fn a_writer_joins_a_reader_after_an_earlier_writer_left() {
    let mut fx = Fixture::new();
    fx.mount(POLICY);
    let f = fx.m("app.log");
    std::fs::write(&f, "").unwrap();
    let mut expect = Vec::new();
    for (round, delay_ms) in [0u64, 1, 2, 5, 10, 20, 50, 100, 200].iter().enumerate() {
        let line = format!("first {round}\n");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .and_then(|mut w| std::io::Write::write_all(&mut w, line.as_bytes()))
            .unwrap_or_else(|e| panic!("round {round}: first writer: {e}"));
        expect.extend_from_slice(line.as_bytes());
        std::thread::sleep(Duration::from_millis(*delay_ms));
        let reader =
            std::fs::File::open(&f).unwrap_or_else(|e| panic!("round {round}: reader: {e}"));
        let line = format!("second {round}\n");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .and_then(|mut w| std::io::Write::write_all(&mut w, line.as_bytes()))
            .unwrap_or_else(|e| {
                panic!("round {round} ({delay_ms} ms): a writer beside a reader: {e}")
            });
        expect.extend_from_slice(line.as_bytes());
        let mut seen = Vec::new();
        std::io::Read::read_to_end(&mut &reader, &mut seen).unwrap();
        assert_eq!(seen, expect, "round {round}: what the reader reads");
        drop(reader);
    }
    assert_eq!(std::fs::read(fx.s("app.log")).unwrap(), expect);
}

/// Readers and writers open, use and close one file in a tight loop, in several
/// threads at once, so that opens of one mode land while releases of the other are
/// still on their way: not one open, read or write may fail.
#[test]
fn concurrent_readers_and_writers_never_fail() {
    let mut fx = Fixture::new();
    fx.file("f.txt", &"x".repeat(4096));
    fx.mount(POLICY);
    let f = Arc::new(fx.m("f.txt"));
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, writes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut threads = Vec::new();
    for i in 0..6 {
        let (f, stop, reads, writes) = (f.clone(), stop.clone(), reads.clone(), writes.clone());
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                if i % 2 == 0 {
                    let r = std::fs::File::open(&*f).map_err(|e| format!("open: {e}"))?;
                    r.read_exact_at(&mut buf, 0)
                        .map_err(|e| format!("read: {e}"))?;
                    reads.fetch_add(1, Ordering::Relaxed);
                } else {
                    let w = OpenOptions::new()
                        .write(true)
                        .open(&*f)
                        .map_err(|e| format!("open for writing: {e}"))?;
                    w.write_all_at(&[b'a' + i as u8; 64], 64 * i as u64)
                        .map_err(|e| format!("write: {e}"))?;
                    writes.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        }));
    }
    // Long enough for thousands of each (the test says so below).
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && (reads.load(Ordering::Relaxed) < 5_000 || writes.load(Ordering::Relaxed) < 5_000)
        && !threads.iter().any(|t| t.is_finished())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        if let Err(e) = t.join().unwrap() {
            panic!(
                "{e} after {} reads and {} writes",
                reads.load(Ordering::Relaxed),
                writes.load(Ordering::Relaxed)
            );
        }
    }
    let (r, w) = (
        reads.load(Ordering::Relaxed),
        writes.load(Ordering::Relaxed),
    );
    assert!(
        r >= 5_000 && w >= 5_000,
        "too few to say anything: {r} reads, {w} writes"
    );
    let body = std::fs::read(fx.s("f.txt")).unwrap();
    for i in [1usize, 3, 5] {
        assert_eq!(body[64 * i..64 * (i + 1)], [b'a' + i as u8; 64]);
    }
}
