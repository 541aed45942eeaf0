//! A node is one backing object for its whole life, never a name (issue: `cargo build`
//! through the mount died of SIGBUS and `EACCES`). Each test makes the daemon serve a
//! request for a node whose name no longer leads to it, or leads to another object,
//! and checks the answer comes from the node's own object. Reads use `O_DIRECT`, so
//! that they reach the daemon instead of the kernel's page cache.

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use common::Fixture;
use veilfs::{MountOptions, Policy};

const ALLOW: &str = "default = \"allow\"\n";

fn open_direct(p: &Path) -> fs::File {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

fn read_at(f: &fs::File, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = f.read_at(&mut buf, 0)?;
    buf.truncate(n);
    Ok(buf)
}

fn both_modes(test: impl Fn(bool)) {
    for strict in [false, true] {
        test(strict);
    }
}

fn mount(f: &mut Fixture, strict: bool) {
    let opts = MountOptions {
        strict_open: strict,
        ..MountOptions::default()
    };
    f.mount_with(Policy::parse("p", ALLOW).unwrap(), None, &opts);
}

#[test]
fn an_open_file_reads_its_own_bytes_after_another_file_takes_its_name() {
    both_modes(|strict| {
        let mut f = Fixture::new();
        f.file("x", "old contents\n");
        mount(&mut f, strict);
        let held = open_direct(&f.m("x"));
        assert_eq!(read_at(&held, 4096).unwrap(), b"old contents\n");
        // Outside the mount: the name goes away and a new file takes it (ext4
        // reuses a freed inode number at once, so the new file often has the old
        // one's number too).
        for i in 0..20 {
            fs::remove_file(f.s("x")).unwrap();
            fs::write(f.s("x"), format!("new contents {i}\n")).unwrap();
            assert_eq!(
                read_at(&held, 4096).unwrap(),
                b"old contents\n",
                "(strict open: {strict}) a held file read another file's bytes after round {i}"
            );
        }
        // The name itself now reaches the new file.
        assert_eq!(fs::read_to_string(f.m("x")).unwrap(), "new contents 19\n");
    });
}

#[test]
fn an_open_file_reads_after_its_name_is_renamed_away_and_removed() {
    both_modes(|strict| {
        let mut f = Fixture::new();
        f.file("d/x", "kept\n");
        mount(&mut f, strict);
        let held = open_direct(&f.m("d/x"));
        fs::rename(f.s("d/x"), f.s("d/y")).unwrap();
        assert_eq!(
            read_at(&held, 4096).unwrap(),
            b"kept\n",
            "after a rename outside"
        );
        fs::remove_file(f.s("d/y")).unwrap();
        assert_eq!(
            read_at(&held, 4096).unwrap(),
            b"kept\n",
            "after removal outside"
        );
        // Through the mount as well.
        fs::write(f.m("d/z"), "z\n").unwrap();
        let z = open_direct(&f.m("d/z"));
        fs::rename(f.m("d/z"), f.m("d/w")).unwrap();
        fs::remove_file(f.m("d/w")).unwrap();
        assert_eq!(
            read_at(&z, 4096).unwrap(),
            b"z\n",
            "after rename and unlink through the mount"
        );
    });
}

/// What rustc and its linker do: an object file is written in one directory, hard
/// linked into another, and the first directory goes away; meanwhile renames
/// elsewhere make every cached decision stale. The file must stay readable (it was
/// refused with `EACCES` when its decision was recomputed through a directory the
/// kernel had forgotten).
#[test]
fn a_hard_linked_file_stays_readable_when_its_first_directory_is_forgotten() {
    both_modes(|strict| {
        let mut f = Fixture::new();
        f.dir("inc").dir("deps");
        mount(&mut f, strict);
        fs::write(f.m("inc/o.o"), "object\n").unwrap();
        fs::hard_link(f.m("inc/o.o"), f.m("deps/o.o")).unwrap();
        let held = open_direct(&f.m("deps/o.o"));
        // The kernel lets the unused name `inc/o.o` and then `inc` itself go.
        fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
        // A rename bumps the epoch: the next request recomputes the decision.
        fs::write(f.m("t1"), "t").unwrap();
        fs::rename(f.m("t1"), f.m("t2")).unwrap();
        assert_eq!(
            read_at(&held, 4096).unwrap(),
            b"object\n",
            "(strict open: {strict}) read through the held descriptor"
        );
        let mut again = String::new();
        fs::File::open(f.m("deps/o.o"))
            .and_then(|mut o| o.read_to_string(&mut again))
            .unwrap_or_else(|e| panic!("(strict open: {strict}) open again: {e}"));
        assert_eq!(again, "object\n");
    });
}

/// A FIFO swapped in under a name that a held descriptor stands for never blocks
/// a request thread; the mount keeps answering and unmount ends the daemon.
#[test]
fn a_fifo_swapped_in_under_a_held_name_blocks_nothing() {
    let mut f = Fixture::new();
    for i in 0..4 {
        f.file(&format!("x{i}"), &format!("file {i}\n"));
    }
    mount(&mut f, false);
    let held: Vec<fs::File> = (0..4)
        .map(|i| open_direct(&f.m(&format!("x{i}"))))
        .collect();
    for i in 0..4 {
        let fifo = f.m(&format!("f{i}"));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        fs::rename(&fifo, f.m(&format!("x{i}"))).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for (i, h) in held.iter().enumerate() {
            let tx = tx.clone();
            s.spawn(move || {
                let _ = tx.send((i, read_at(h, 4096)));
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut done = 0;
        while done < 4 {
            let left = deadline.saturating_duration_since(Instant::now());
            let (i, r) = rx
                .recv_timeout(left)
                .expect("a read of a held file whose name now holds a FIFO hangs");
            assert_eq!(r.unwrap(), format!("file {i}\n").as_bytes());
            done += 1;
        }
    });
    // The mount still answers.
    let listed = fs::read_dir(&f.mnt).unwrap().count();
    assert_eq!(listed, 4);
}

/// Runs `mount -t tmpfs` (or an ext4 image) at `at`; unmounts lazily on drop.
struct Nested(std::path::PathBuf);

impl Nested {
    fn tmpfs(at: &Path) -> Nested {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "veilfs-nested"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs failed (these tests run as root)");
        Nested(at.to_path_buf())
    }

    fn ext4(image: &Path, at: &Path) -> Nested {
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{cmd:?}: {out:?}");
        };
        fs::File::create(image).unwrap().set_len(16 << 20).unwrap();
        run(std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(image));
        run(std::process::Command::new("mount")
            .args(["-o", "loop"])
            .arg(image)
            .arg(at));
        Nested(at.to_path_buf())
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn nested_is_served_as_itself(make: impl Fn(&Fixture) -> Nested) {
    let mut f = Fixture::new();
    f.file("top.txt", "top\n").dir("sub");
    let nested = make(&f);
    fs::write(f.s("sub/inner.txt"), "inner\n").unwrap();
    fs::create_dir(f.s("sub/dir")).unwrap();
    fs::write(f.s("sub/dir/deep.txt"), "deep\n").unwrap();
    f.mount(ALLOW);
    let mut names: Vec<String> = fs::read_dir(f.m("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "lost+found")
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["dir", "inner.txt"],
        "the nested filesystem's own entries"
    );
    assert_eq!(fs::read_to_string(f.m("sub/inner.txt")).unwrap(), "inner\n");
    assert_eq!(
        fs::read_to_string(f.m("sub/dir/deep.txt")).unwrap(),
        "deep\n"
    );
    assert_eq!(fs::read_to_string(f.m("top.txt")).unwrap(), "top\n");
    fs::write(f.m("sub/dir/new.txt"), "written through\n").unwrap();
    assert_eq!(
        fs::read_to_string(f.s("sub/dir/new.txt")).unwrap(),
        "written through\n"
    );
    // Two objects of one mount never share an inode number.
    let mut seen = std::collections::HashMap::new();
    for p in [
        "",
        "top.txt",
        "sub",
        "sub/inner.txt",
        "sub/dir",
        "sub/dir/deep.txt",
        "sub/dir/new.txt",
    ] {
        let ino = std::os::unix::fs::MetadataExt::ino(&fs::symlink_metadata(f.m(p)).unwrap());
        if let Some(other) = seen.insert(ino, p) {
            panic!("{p:?} and {other:?} share inode number {ino} in the mount");
        }
    }
    drop(f.mount.take());
    drop(nested);
}

#[test]
fn a_nested_tmpfs_is_served_as_itself() {
    nested_is_served_as_itself(|f| Nested::tmpfs(&f.s("sub")));
}

#[test]
fn a_nested_ext4_image_is_served_as_itself() {
    nested_is_served_as_itself(|f| Nested::ext4(&f.tmp.path().join("img.ext4"), &f.s("sub")));
}

/// A file renamed outside the mount to a name the policy denies is no longer
/// reached under its old, allowed name: a descriptor held from before cannot be
/// reopened through `/proc/self/fd` or linked to a new allowed name (a tool that
/// writes a temporary file and renames it to `.env` would otherwise hand the
/// secret to whoever held the temporary).
#[test]
fn a_file_renamed_outside_to_a_denied_name_is_not_reopened_or_linked() {
    use std::os::fd::AsFd;
    let mut f = Fixture::new();
    f.file("n", "notes\n");
    f.mount("[[rules]]\naction = \"deny\"\npaths = [\".env*\"]\n");
    let held = fs::File::open(f.m("n")).unwrap();
    // Outside the mount: renamed to a denied name, and the secret appended.
    fs::rename(f.s("n"), f.s(".env.staging")).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(f.s(".env.staging"))
        .and_then(|mut o| std::io::Write::write_all(&mut o, b"SECRET\n"))
        .unwrap();
    let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held));
    // Refused: `ESTALE` (the node is reached by no name the daemon knows; a name
    // would be looked up again, a descriptor cannot be).
    common::assert_errno(
        fs::read_to_string(&proc_path),
        libc::ESTALE,
        "reopening the renamed file through /proc/self/fd",
    );
    let linked = nix::unistd::linkat(
        held.as_fd(),
        "",
        nix::fcntl::AT_FDCWD,
        &f.m("stolen"),
        nix::fcntl::AtFlags::AT_EMPTY_PATH,
    );
    assert_eq!(
        linked,
        Err(nix::errno::Errno::ESTALE),
        "linking the renamed file to an allowed name"
    );
    assert!(!f.s("stolen").exists(), "a link was made on disk");
    assert!(fs::read_to_string(f.m("stolen")).is_err());
}
