//! What a session may leave behind, as the failure-injection tests of `run` and
//! `mount` look for it (`tests/run_plan.rs`, `tests/mount_plan.rs`).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The processes that are this test's children or whose command line holds
/// `root`, as `pid: cmdline`.
pub fn processes(root: &str) -> BTreeSet<String> {
    let me = std::process::id().to_string();
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Field 4, after the command name in parentheses.
        let parent = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(1))
            .unwrap_or("");
        if parent == me || cmdline.contains(root) {
            out.insert(format!("{pid}: {cmdline}"));
        }
    }
    out
}

/// Every path under `root`, relative to it (links not followed).
pub fn files(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p.clone());
            }
            out.insert(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    out
}
