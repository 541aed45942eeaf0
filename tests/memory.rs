//! Lookup/forget counts are honoured: after a walk of 100,000 files, once the kernel
//! lets its caches go, the daemon holds (almost) no nodes. And what a command does
//! cannot grow the daemon without bound: directories made and removed by the
//! thousand under `veilfs run`, or a chain of long names a thousand levels deep
//! (under `veilfs mount` and `veilfs run`), keep the daemon's peak resident memory
//! under [`PEAK_LIMIT_KIB`].

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::run::show;
use common::{Fixture, Tree, finish, wait_until};
use veilfs::sys;

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

/// The most resident memory (`VmHWM`) a daemon may have reached in the tests below.
const PEAK_LIMIT_KIB: u64 = 64 * 1024;

/// Levels of the chain of long names.
const CHAIN: usize = 1_000;

/// The directories made and removed one after the other under `veilfs run`.
const MADE_AND_REMOVED: usize = 10_000;

/// A 250-byte name, distinct for each `i`.
fn long_name(i: usize) -> String {
    format!("{i:06}{}", "x".repeat(244))
}

/// The peak resident memory of process `pid` (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM for {pid}:\n{status}"))
}

#[track_caller]
fn assert_peak_bounded(what: &str, pid: u32) {
    let peak = peak_kib(pid);
    // Said whatever the outcome: the figure is the point of the test.
    eprintln!("{what}: the daemon's peak RSS is {} MiB", peak / 1024);
    assert!(
        peak < PEAK_LIMIT_KIB,
        "{what}: the daemon's peak RSS reached {peak} KiB (limit {PEAK_LIMIT_KIB} KiB)"
    );
}

#[test]
fn a_chain_of_long_names_a_thousand_deep_keeps_veilfs_mount_bounded() {
    let t = Tree::new("veilfs-memory", &["ws", "mnt", "rt"]);
    let d = t.mount();
    let mut dir = OwnedFd::from(std::fs::File::open(t.m("")).unwrap());
    for level in 0..CHAIN {
        let name = std::ffi::CString::new(long_name(level)).unwrap();
        sys::mkdirat(dir.as_fd(), &name, 0o755)
            .unwrap_or_else(|e| panic!("mkdir at depth {level}: {e}"));
        dir = sys::openat(dir.as_fd(), &name, libc::O_PATH | libc::O_DIRECTORY, 0)
            .unwrap_or_else(|e| panic!("lookup at depth {level}: {e}"));
    }
    // A request at the bottom, with every directory above held by the kernel.
    let made = sys::openat(dir.as_fd(), c"leaf", libc::O_WRONLY | libc::O_CREAT, 0o644);
    drop(made.expect("create at the bottom"));
    assert_peak_bounded(
        "a chain of 1,000 names of 250 bytes under mount",
        d.child.id(),
    );
}

/// `veilfs run -q -- python3 -c SCRIPT` in a workspace of its own: `SCRIPT` says
/// `ready` on its stdout when done and then waits for its stdin to close, so the
/// daemon (the `veilfs run` process) can be measured while it still serves.
fn run_then_measure(what: &str, script: &str) {
    let t = Tree::new("veilfs-memory-run", &["ws"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--", "python3", "-c", script])
        .current_dir(t.p("ws"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if line.trim() != "ready" {
        fail_run(what, child, stdin, &line);
    }
    assert_peak_bounded(what, child.id());
    drop(stdin);
    let (code, _, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{what}: veilfs run ended with {code}: {err}");
}

/// Ends the run that did not say `ready` (it said `said`) and fails with its output.
fn fail_run(what: &str, child: Child, mut stdin: std::process::ChildStdin, said: &str) -> ! {
    let _ = stdin.write_all(b"\n");
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    panic!("{what}: the command failed (said {said:?}):\n{}", show(&o));
}

/// Python: `fd` becomes a directory descriptor `levels` long names below the
/// working directory, each made on the way.
const CHAIN_PY: &str = "
import os, sys
def name(i):
    return '%06d' % i + 'x' * 244
def chain(levels):
    fd = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
    for i in range(levels):
        os.mkdir(name(i), dir_fd=fd)
        down = os.open(name(i), os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = down
    return fd
";

#[test]
fn a_chain_of_long_names_a_thousand_deep_keeps_veilfs_run_bounded() {
    let script = format!(
        "{CHAIN_PY}
fd = chain({CHAIN})
os.close(os.open('leaf', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
print('ready', flush=True)
sys.stdin.read()
"
    );
    run_then_measure("a chain of 1,000 names of 250 bytes under run", &script);
}

#[test]
fn directories_made_and_removed_by_the_thousand_keep_veilfs_run_bounded() {
    // Each one 16 long names deep, so that a path remembered per directory (4 KiB)
    // would add up to far more than the limit.
    let script = format!(
        "{CHAIN_PY}
fd = chain(16)
for i in range({MADE_AND_REMOVED}):
    n = 'made-' + name(i)[:240]
    os.mkdir(n, dir_fd=fd)
    os.rmdir(n, dir_fd=fd)
print('ready', flush=True)
sys.stdin.read()
"
    );
    run_then_measure("10,000 mkdir+rmdir of distinct names under run", &script);
}
