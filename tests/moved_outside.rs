//! A directory moved outside the mount while a process holds it (a descriptor, or
//! its working directory) is judged where it is now, not by the path it had: moved
//! into a denied place, nothing in it is read, listed or made through the held
//! descriptor; moved back where the policy allows, it works again.

mod common;

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use common::{Fixture, wait_until};
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

const POLICY: &str = "[[rules]]\naction = \"deny\"\npaths = [\"private/\"]\n";

fn open_dir(p: &Path) -> OwnedFd {
    nix::fcntl::open(p, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap()
}

/// Reads `name` in the directory `dir` is open on.
fn read_at(dir: &OwnedFd, name: &str) -> nix::Result<String> {
    let fd = openat(dir, name, OFlag::O_RDONLY, Mode::empty())?;
    Ok(fs::read_to_string(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default())
}

/// Makes `name` in the directory `dir` is open on.
fn make_at(dir: &OwnedFd, name: &str) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
        Mode::from_bits_truncate(0o644),
    )
}

fn names_in(dir: &OwnedFd) -> nix::Result<Vec<String>> {
    let fd = openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        Mode::empty(),
    )?;
    let mut d = nix::dir::Dir::from_fd(fd)?;
    // The first error ends the listing (an iterator that keeps failing would
    // otherwise never end).
    let entries = d.iter().collect::<nix::Result<Vec<_>>>()?;
    Ok(entries
        .iter()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "." && n != "..")
        .collect())
}

fn moved_into_a_denied_place_is_refused(reload: bool) {
    let mut f = Fixture::new();
    f.file("open/dirB/a.txt", "a\n").dir("private");
    f.mount(POLICY);
    let held = open_dir(&f.m("open/dirB"));
    assert_eq!(read_at(&held, "a.txt").unwrap(), "a\n");
    // The person, outside: the directory goes into the denied place, and a secret
    // is written there.
    fs::rename(f.s("open/dirB"), f.s("private/dirB")).unwrap();
    fs::write(f.s("private/dirB/new.txt"), "SECRET\n").unwrap();
    if reload {
        f.mount.as_ref().unwrap().reload().unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(5), || read_at(&held, "new.txt")
            == Err(nix::errno::Errno::EACCES)),
        "a file in the moved directory was still opened through the held descriptor: {:?}",
        read_at(&held, "new.txt")
    );
    assert_eq!(read_at(&held, "a.txt"), Err(nix::errno::Errno::EACCES));
    assert_eq!(
        make_at(&held, "planted.txt").err(),
        Some(nix::errno::Errno::EACCES),
        "a file was made in the denied place"
    );
    assert!(!f.s("private/dirB/planted.txt").exists());
    assert!(
        names_in(&held).is_err_and(|e| e == nix::errno::Errno::EACCES),
        "the denied place was listed: {:?}",
        names_in(&held)
    );
    // Moved back outside where the policy allows: found again, and served.
    fs::rename(f.s("private/dirB"), f.s("open/dirC")).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || read_at(&held, "new.txt").is_ok()
            || fs::read_to_string(f.m("open/dirC/new.txt")).is_ok()
                && read_at(&held, "new.txt").is_ok()),
        "the directory moved back to an allowed place stayed refused: {:?}",
        read_at(&held, "new.txt")
    );
    assert_eq!(read_at(&held, "a.txt").unwrap(), "a\n");
}

#[test]
fn a_held_directory_moved_outside_into_a_denied_place_is_refused() {
    moved_into_a_denied_place_is_refused(false);
}

#[test]
fn a_held_directory_moved_outside_into_a_denied_place_is_refused_after_a_reload() {
    moved_into_a_denied_place_is_refused(true);
}

/// The working directory of a process: moved outside into the denied place, a
/// second process reading there by relative names meets the refusal too.
#[test]
fn a_working_directory_moved_outside_into_a_denied_place_is_refused() {
    let mut f = Fixture::new();
    f.file("notes/a.txt", "a\n").dir("private");
    f.mount(POLICY);
    let go = f.tmp.path().join("go");
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; \
             cat a.txt; cat new.txt; echo x > planted.txt; ls",
            go.display()
        ))
        .current_dir(f.m("notes"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    fs::rename(f.s("notes"), f.s("private/notes")).unwrap();
    fs::write(f.s("private/notes/new.txt"), "SECRET\n").unwrap();
    // The move is seen (the mount refuses the directory at its old name's place).
    let probe = open_dir(&f.m("."));
    assert!(wait_until(Duration::from_secs(5), || {
        read_at(&probe, "private/notes/new.txt") == Err(nix::errno::Errno::EACCES)
            && fs::read_dir(f.m("."))
                .is_ok_and(|d| d.filter_map(Result::ok).all(|e| e.file_name() != "notes"))
    }));
    fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !stdout.contains("SECRET"),
        "read in the denied place: {stdout}"
    );
    assert!(
        !stdout.contains("a\n"),
        "read in the denied place: {stdout}"
    );
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!f.s("private/notes/planted.txt").exists());
}

/// With the user's inotify watch limit reached (attacker pass 13 used it up
/// first), a directory met afterwards is not watched, so its outside move raises
/// no event: every directory on the way is then checked at every request, and
/// the moved one is refused all the same.
#[test]
fn a_held_directory_moved_out_of_an_unwatched_directory_is_refused() {
    let mut f = Fixture::new();
    f.file("p/q/d1/a.txt", "a\n").dir("private");
    f.mount(POLICY);
    assert!(f.mount.as_ref().unwrap().inject_watch_limit());
    // Met after the limit: `p` and `q` are not watched.
    let held = open_dir(&f.m("p/q/d1"));
    assert_eq!(read_at(&held, "a.txt").unwrap(), "a\n");
    fs::rename(f.s("p/q/d1"), f.s("private/d1")).unwrap();
    fs::write(f.s("private/d1/token"), "SECRET\n").unwrap();
    assert_eq!(read_at(&held, "token"), Err(nix::errno::Errno::EACCES));
    assert_eq!(read_at(&held, "a.txt"), Err(nix::errno::Errno::EACCES));
    assert_eq!(
        make_at(&held, "planted").err(),
        Some(nix::errno::Errno::EACCES)
    );
    assert!(!f.s("private/d1/planted").exists());
    // Served again once it is back where the policy allows.
    fs::rename(f.s("private/d1"), f.s("p/q/d2")).unwrap();
    assert_eq!(fs::read_to_string(f.m("p/q/d2/token")).unwrap(), "SECRET\n");
    assert_eq!(read_at(&held, "a.txt").unwrap(), "a\n");
}
