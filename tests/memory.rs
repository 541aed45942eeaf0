//! Lookup/forget counts are honoured: after a walk of 100,000 files, once the kernel
//! lets its caches go, the daemon holds (almost) no nodes.

mod common;

use std::time::Duration;

use common::{Fixture, wait_until};

#[test]
fn a_walk_of_100k_files_leaves_the_node_table_bounded() {
    let mut f = Fixture::new();
    for d in 0..200 {
        let dir = f.s(&format!("d{d:03}"));
        std::fs::create_dir(&dir).unwrap();
        for i in 0..500 {
            std::fs::File::create(dir.join(format!("f{i:03}"))).unwrap();
        }
    }
    f.mount("default = \"allow\"\n");
    // `-printf %s` stats every entry, so each one is looked up.
    let out = f.sh_ok("find . -type f -printf '%s\\n' | wc -l");
    assert_eq!(out.trim(), "100000");
    let m = f.mount.as_ref().unwrap();
    let after_walk = m.node_count();
    assert!(
        after_walk > 10_000,
        "the walk did not look entries up ({after_walk} nodes)"
    );
    // Ask the kernel to drop unused dentries and inodes: it sends FORGET for each.
    std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || m.node_count() < 1_000),
        "{} nodes still held after the kernel dropped its caches (walk peak {after_walk})",
        m.node_count()
    );
}

/// Regular files under `src` this process (the daemon runs in it) holds open for
/// reading or writing. The `O_PATH` descriptor each node keeps on its object (which
/// reads and writes nothing, and goes with the kernel's `FORGET`) is not counted.
fn open_files_under(src: &std::path::Path) -> Vec<std::path::PathBuf> {
    const O_PATH: u32 = 0o10000000;
    let is_o_path = |fd: &std::ffi::OsStr| {
        std::fs::read_to_string(std::path::Path::new("/proc/self/fdinfo").join(fd))
            .ok()
            .and_then(|info| {
                let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
                u32::from_str_radix(flags.trim(), 8).ok()
            })
            .is_some_and(|flags| flags & O_PATH != 0)
    };
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            (!is_o_path(&e.file_name())).then_some(target)
        })
        .filter(|p| p.starts_with(src) && p.is_file())
        .collect()
}

#[test]
fn files_opened_and_created_through_the_mount_hold_no_descriptor_after_close() {
    let mut f = Fixture::new();
    f.file("seed.txt", "seed\n");
    f.mount("default = \"allow\"\n");
    // A first open makes the kernel open files without asking from then on.
    assert_eq!(std::fs::read_to_string(f.m("seed.txt")).unwrap(), "seed\n");
    for i in 0..200 {
        std::fs::write(f.m(&format!("new{i}.txt")), "x").unwrap();
        assert_eq!(std::fs::read(f.m(&format!("new{i}.txt"))).unwrap(), b"x");
    }
    let src = f.src.canonicalize().unwrap();
    wait_until(Duration::from_secs(5), || open_files_under(&src).is_empty());
    let held = open_files_under(&src);
    assert!(
        held.is_empty(),
        "the daemon still holds {} files open: {:?}",
        held.len(),
        &held[..held.len().min(5)]
    );
}
