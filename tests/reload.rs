//! A live policy: reloaded when its file changes, on `veilfs reload` and on SIGHUP;
//! a broken file keeps the old policy; the kernel forgets what it cached.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Fixture, assert_errno, wait_until};
use veilfs::{MountOptions, Policy};

const ALLOW_ALL: &str = "default = \"allow\"\n";
const DENY_SECRET: &str = "[[rules]]\naction = \"deny\"\npaths = [\"secret.txt\"]\n";

/// A workspace mounted with a policy file that lives outside it.
fn mounted(policy: &str) -> (Fixture, PathBuf) {
    mounted_with(policy, MountOptions::default())
}

/// Like [`mounted`], with the given mount options, always with a long TTL: the
/// reload itself must clear the kernel's caches.
fn mounted_with(policy: &str, opts: MountOptions) -> (Fixture, PathBuf) {
    let mut f = Fixture::new();
    f.file("secret.txt", "s\n")
        .file("plain.txt", "p\n")
        .dir("d");
    let file = f.tmp.path().join("policy.toml");
    fs::write(&file, policy).unwrap();
    let p = Policy::parse("policy.toml", policy).unwrap();
    let opts = MountOptions {
        ttl: Duration::from_secs(600),
        ..opts
    };
    f.mount_with(p, Some(&file), &opts);
    (f, file)
}

/// Denies `secret.txt` by a reload and checks that a new open of it is refused.
fn deny_secret(f: &Fixture, file: &Path) {
    rewrite(file, DENY_SECRET);
    f.mount.as_ref().unwrap().reload().unwrap();
    assert_errno(
        fs::File::open(f.m("secret.txt")),
        libc::EACCES,
        "a new open",
    );
}

fn listed(f: &Fixture, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(f.m(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Rewrites the policy file the way an editor does (a new file renamed over it).
fn rewrite(file: &Path, text: &str) {
    let tmp = file.with_extension("tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, file).unwrap();
}

#[test]
fn a_newly_denied_path_is_refused_and_unlisted_within_a_second() {
    let (f, file) = mounted(ALLOW_ALL);
    assert_eq!(fs::read_to_string(f.m("secret.txt")).unwrap(), "s\n");
    assert!(listed(&f, ".").contains(&"secret.txt".to_string()));
    rewrite(&file, DENY_SECRET);
    assert!(
        wait_until(Duration::from_secs(1), || {
            fs::read(f.m("secret.txt")).is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))
                && fs::metadata(f.m("secret.txt")).is_err()
                && !listed(&f, ".").contains(&"secret.txt".to_string())
        }),
        "secret.txt still readable or listed a second after it was denied"
    );
    assert_eq!(fs::read_to_string(f.m("plain.txt")).unwrap(), "p\n");
}

#[test]
fn a_newly_allowed_path_appears() {
    let (f, file) = mounted(DENY_SECRET);
    assert_errno(fs::read(f.m("secret.txt")), libc::EACCES, "denied at first");
    assert!(!listed(&f, ".").contains(&"secret.txt".to_string()));
    rewrite(&file, ALLOW_ALL);
    assert!(
        wait_until(Duration::from_secs(5), || fs::read(f.m("secret.txt"))
            .is_ok()
            && listed(&f, ".").contains(&"secret.txt".to_string())),
        "secret.txt did not appear within 5 s of being allowed"
    );
}

/// The watch on the policy file is in place when the mount returns: an edit made
/// at once (before the watching thread first ran) is not missed. Several mounts at
/// a time, so the watching threads wait for a CPU.
#[test]
fn an_edit_made_as_soon_as_the_mount_returns_is_reloaded() {
    let rounds = 12;
    let workers: Vec<_> = (0..3)
        .map(|w| {
            std::thread::spawn(move || {
                for round in 0..rounds {
                    let (f, file) = mounted(DENY_SECRET);
                    rewrite(&file, ALLOW_ALL);
                    assert!(
                        wait_until(Duration::from_secs(5), || fs::read(f.m("secret.txt"))
                            .is_ok()),
                        "worker {w}, round {round}: an edit made as the mount returned \
                         was not reloaded within 5 s"
                    );
                }
            })
        })
        .collect();
    // Every worker joined before any failure is raised: each unmounts its own.
    let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
    for r in results {
        r.unwrap();
    }
}

#[test]
fn a_broken_policy_keeps_the_old_one_and_says_why() {
    let (f, file) = mounted(DENY_SECRET);
    fs::write(&file, "[[rules]]\naction = \"deny\"\npaths = [\"a[\"]\n").unwrap();
    let err = f.mount.as_ref().unwrap().reload().unwrap_err().to_string();
    assert!(err.contains("policy.toml:3:10: error:"), "{err}");
    assert!(err.contains("invalid glob"), "{err}");
    assert_errno(
        fs::read(f.m("secret.txt")),
        libc::EACCES,
        "old policy still denies",
    );
    assert_eq!(fs::read_to_string(f.m("plain.txt")).unwrap(), "p\n");
    // A good file afterwards is taken.
    fs::write(&file, ALLOW_ALL).unwrap();
    let ok = f.mount.as_ref().unwrap().reload().unwrap();
    assert!(ok.contains("reloaded"), "{ok}");
    assert!(fs::read(f.m("secret.txt")).is_ok());
}

#[test]
fn with_strict_open_a_descriptor_keeps_working_after_its_path_is_denied() {
    let opts = MountOptions {
        strict_open: true,
        ..MountOptions::default()
    };
    let (f, file) = mounted_with(ALLOW_ALL, opts);
    let mut open = fs::File::open(f.m("secret.txt")).unwrap();
    deny_secret(&f, &file);
    let mut s = String::new();
    open.rewind().unwrap();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(
        s, "s\n",
        "the descriptor opened (by the daemon) before the reload still reads"
    );
}

#[test]
fn a_descriptor_opened_without_asking_is_revoked_when_its_path_is_denied() {
    let (f, file) = mounted(ALLOW_ALL);
    let mut open = fs::File::open(f.m("secret.txt")).unwrap();
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "s\n");
    deny_secret(&f, &file);
    // The reload dropped the pages the kernel kept: the next read asks the daemon,
    // which no handle tells that this descriptor predates the denial.
    open.rewind().unwrap();
    assert_errno(
        open.read_to_string(&mut s),
        libc::EACCES,
        "a read through the old descriptor",
    );
}

#[test]
fn listings_never_mix_two_policies() {
    // Under A only `xyz` is visible in d/, under B only `xab`; a listing made from
    // parts of both would show both or neither.
    let a = "[[rules]]\naction = \"deny\"\npaths = [\"/d/x*\"]\n\n[[rules]]\naction = \"allow\"\npaths = [\"/d/xy*\"]\n";
    let b = "[[rules]]\naction = \"allow\"\npaths = [\"/d/x*\"]\n\n[[rules]]\naction = \"deny\"\npaths = [\"/d/xy*\"]\n";
    let (f, file) = mounted(a);
    fs::write(f.s("d/xyz"), "1").unwrap();
    fs::write(f.s("d/xab"), "2").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let mut seen = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let l = listed(&f, "d");
                        assert!(
                            l == ["xyz"] || l == ["xab"],
                            "a listing mixed two policies: {l:?}"
                        );
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for i in 0..30 {
            // Written in place (truncate, then write), as `echo > file` does: the
            // watcher must never load the momentarily empty file.
            fs::write(&file, if i % 2 == 0 { b } else { a }).unwrap();
            f.mount.as_ref().unwrap().reload().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
}

#[test]
fn veilfs_reload_and_sighup_reach_a_running_mount() {
    let f = Fixture::new();
    f.file("secret.txt", "s\n");
    let file = f.tmp.path().join("policy.toml");
    fs::write(&file, ALLOW_ALL).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["mount", "--policy"])
        .arg(&file)
        .arg(&f.src)
        .arg(&f.mnt)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("veilfs: mounted"), "{line}");

    // A broken file: `veilfs reload` exits 1 with the located error.
    fs::write(&file, "default = \"nope\"\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("reload")
        .arg(&f.mnt)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("policy.toml:1:11: error: unknown default action")
    );
    assert!(fs::read(f.m("secret.txt")).is_ok(), "the old policy stays");

    // A good file: exit 0, in force at once.
    fs::write(&file, DENY_SECRET).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("reload")
        .arg(&f.mnt)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("reloaded"));
    assert_errno(
        fs::read(f.m("secret.txt")),
        libc::EACCES,
        "denied after veilfs reload",
    );

    // SIGHUP.
    fs::write(&file, ALLOW_ALL).unwrap();
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert!(wait_until(Duration::from_secs(2), || fs::read(
        f.m("secret.txt")
    )
    .is_ok()));

    // No daemon: exit 2.
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("reload")
        .arg(f.tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));

    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("keeping the old policy"), "{rest}");
}

#[test]
fn an_empty_policy_file_is_not_loaded_by_a_reload() {
    let (f, file) = mounted(DENY_SECRET);
    fs::write(&file, "").unwrap();
    let err = f.mount.as_ref().unwrap().reload().unwrap_err().to_string();
    assert!(err.contains("is empty"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert_errno(
        fs::read(f.m("secret.txt")),
        libc::EACCES,
        "the old policy stays",
    );
}

/// Every entry of a directory listing with its `d_off`, read with `getdents64` from
/// the descriptor's current position.
fn getdents(fd: i32) -> Vec<(i64, Vec<u8>)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        // SAFETY: `buf` is writable for its length; `fd` is an open directory.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        assert!(n >= 0, "getdents64: {}", std::io::Error::last_os_error());
        if n == 0 {
            return out;
        }
        let mut i = 0usize;
        while i < n as usize {
            let off = i64::from_ne_bytes(buf[i + 8..i + 16].try_into().unwrap());
            let reclen = u16::from_ne_bytes(buf[i + 16..i + 18].try_into().unwrap()) as usize;
            let name = &buf[i + 19..i + reclen];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            out.push((off, name[..end].to_vec()));
            i += reclen;
        }
    }
}

/// A listing taken before a reload cannot be read back afterwards by seeking to its
/// offsets (attacker finding: `lseek` to an old listing's cookie listed the names a
/// reload had just denied); a reader paused mid-listing continues under the new
/// policy too.
#[test]
fn a_listing_taken_before_a_reload_shows_only_what_the_new_policy_admits() {
    let (f, file) = mounted(ALLOW_ALL);
    for i in 0..50 {
        fs::write(f.s(&format!("d/secret.{i}")), "s").unwrap();
    }
    fs::write(f.s("d/keep"), "k").unwrap();
    let dir = fs::File::open(f.m("d")).unwrap();
    use std::os::fd::AsRawFd;
    let fd = dir.as_raw_fd();
    // Paused after the first few entries of a listing of the old policy.
    let mut first = Vec::new();
    {
        let mut buf = vec![0u8; 256];
        // SAFETY: as in `getdents`.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        assert!(n > 0);
        let mut i = 0usize;
        while i < n as usize {
            let off = i64::from_ne_bytes(buf[i + 8..i + 16].try_into().unwrap());
            let reclen = u16::from_ne_bytes(buf[i + 16..i + 18].try_into().unwrap()) as usize;
            first.push(off);
            i += reclen;
        }
    }
    let old_cookie = *first.last().unwrap();
    fs::write(
        &file,
        "[[rules]]\naction = \"deny\"\npaths = [\"d/secret.*\"]\n",
    )
    .unwrap();
    f.mount.as_ref().unwrap().reload().unwrap();
    // The paused reader goes on.
    let rest = getdents(fd);
    // Seeking back into the old listing from the start.
    // SAFETY: lseek on an open directory descriptor.
    assert!(unsafe { libc::lseek(fd, old_cookie, libc::SEEK_SET) } >= 0);
    let again = getdents(fd);
    // A fresh listing, and every older listing id near it.
    let fresh = getdents(fs::File::open(f.m("d")).unwrap().as_raw_fd());
    let generation = fresh.iter().map(|(o, _)| o >> 32).max().unwrap();
    let mut seeked = Vec::new();
    for g in generation.saturating_sub(8)..=generation {
        // SAFETY: as above.
        unsafe { libc::lseek(fd, (g << 32) | 2, libc::SEEK_SET) };
        seeked.extend(getdents(fd));
    }
    for (what, entries) in [
        ("paused", &rest),
        ("seeked back", &again),
        ("fresh", &fresh),
        ("old ids", &seeked),
    ] {
        let leaked: Vec<String> = entries
            .iter()
            .map(|(_, n)| String::from_utf8_lossy(n).into_owned())
            .filter(|n| n.starts_with("secret."))
            .collect();
        assert!(leaked.is_empty(), "{what}: {leaked:?}");
    }
    assert!(fresh.iter().any(|(_, n)| n == b"keep"));
}
