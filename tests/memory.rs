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
