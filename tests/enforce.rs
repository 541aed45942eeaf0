//! The action × operation matrix through a real mount: every change to a read-only or
//! denied path, and every access to a denied one, fails with EACCES and leaves the
//! backing directory exactly as it was.

mod common;

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::{Fixture, assert_errno};

fn fixture() -> Fixture {
    let mut f = Fixture::new();
    for (rel, body) in common::MATRIX_FILES {
        f.file(rel, body);
    }
    f.mount(common::MATRIX_POLICY);
    f
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn ret(r: i32) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

type Op = fn(&Fixture, &Path) -> io::Result<()>;

fn read(_: &Fixture, p: &Path) -> io::Result<()> {
    if p.is_dir() {
        fs::read_dir(p).map(drop)
    } else {
        fs::read(p).map(drop)
    }
}
fn stat(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::symlink_metadata(p).map(drop)
}
// Writing to a read-only file is refused at the open.
fn write(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new().write(true).open(p)?.write_all(b"x")
}
fn append(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::OpenOptions::new().append(true).open(p)?.write_all(b"x")
}
fn truncate(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string.
    ret(unsafe { libc::truncate(c(p).as_ptr(), 0) })
}
fn chmod(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string.
    ret(unsafe { libc::chmod(c(p).as_ptr(), 0o777) })
}
fn chown(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string.
    ret(unsafe { libc::lchown(c(p).as_ptr(), 1, 1) })
}
fn utimes(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string; NULL times means now.
    ret(unsafe { libc::utimensat(libc::AT_FDCWD, c(p).as_ptr(), std::ptr::null(), 0) })
}
fn setxattr(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C strings and value.
    ret(unsafe {
        libc::setxattr(
            c(p).as_ptr(),
            c"user.veilfs".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        )
    })
}
fn remove(_: &Fixture, p: &Path) -> io::Result<()> {
    if p.is_dir() {
        fs::remove_dir(p)
    } else {
        fs::remove_file(p)
    }
}
fn rename_out(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::rename(p, f.m("moved"))
}
fn rename_in(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::rename(f.m("ok.txt"), p)
}
fn link_from(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::hard_link(p, f.m("alias"))
}
fn link_onto(f: &Fixture, p: &Path) -> io::Result<()> {
    fs::hard_link(f.m("ok.txt"), p.with_extension("new"))
}
fn create_inside(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::File::create(p.join("new.txt")).map(drop)
}
fn mkdir_inside(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::create_dir(p.join("newdir"))
}
fn symlink_inside(_: &Fixture, p: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink("target", p.join("link"))
}
fn mknod_inside(_: &Fixture, p: &Path) -> io::Result<()> {
    // SAFETY: valid C string.
    ret(unsafe { libc::mknod(c(&p.join("fifo")).as_ptr(), libc::S_IFIFO | 0o644, 0) })
}

/// Runs `op` on `target` in the mount: must fail with EACCES, backing unchanged.
fn refused(target: &str, op: Op, what: &str) {
    let f = fixture();
    let before = f.snapshot();
    let r = op(&f, &f.m(target));
    assert_errno(r, libc::EACCES, &format!("{what} on {target}"));
    let after = f.snapshot();
    assert_eq!(
        before,
        after,
        "{what} on {target} changed the backing directory:\n{}",
        common::listing(&f.src)
    );
}

/// Runs `op` on `target` in the mount: must succeed.
fn allowed(target: &str, op: Op, what: &str) {
    let f = fixture();
    op(&f, &f.m(target))
        .unwrap_or_else(|e| panic!("{what} on {target}: {e}\n{}", common::listing(&f.src)));
}

macro_rules! matrix {
    ($($name:ident: $target:expr, $op:ident => $outcome:ident;)*) => {
        $(
            #[test]
            fn $name() {
                $outcome($target, $op, stringify!($op));
            }
        )*
    };
}

matrix! {
    // denied file: nothing at all
    deny_file_read: ".env", read => refused;
    deny_file_stat: ".env", stat => refused;
    deny_file_write: ".env", write => refused;
    deny_file_append: ".env", append => refused;
    deny_file_truncate: ".env", truncate => refused;
    deny_file_chmod: ".env", chmod => refused;
    deny_file_chown: ".env", chown => refused;
    deny_file_utimes: ".env", utimes => refused;
    deny_file_setxattr: ".env", setxattr => refused;
    deny_file_unlink: ".env", remove => refused;
    deny_file_rename_out: ".env", rename_out => refused;
    deny_file_rename_in: ".env", rename_in => refused;
    deny_file_link_from: ".env", link_from => refused;
    deny_file_nested_glob: "app/key.pem", read => refused;
    deny_missing_name_stat: "app/missing.pem", stat => refused;
    deny_missing_name_create: "other.pem", write_new => refused;
    // denied directory
    deny_dir_list: "secrets", read => refused;
    deny_dir_stat: "secrets", stat => refused;
    deny_dir_child_read: "secrets/token", read => refused;
    deny_dir_rmdir: "secrets", remove => refused;
    deny_dir_rename_out: "secrets", rename_out => refused;
    deny_dir_create_inside: "secrets", create_inside => refused;
    deny_dir_mkdir_inside: "secrets", mkdir_inside => refused;
    deny_dir_chmod: "secrets", chmod => refused;
    // read-only file: readable, unchangeable
    ro_file_read: "README.md", read => allowed;
    ro_file_stat: "README.md", stat => allowed;
    ro_file_write: "README.md", write => refused;
    ro_file_append: "README.md", append => refused;
    ro_file_truncate: "README.md", truncate => refused;
    ro_file_chmod: "README.md", chmod => refused;
    ro_file_chown: "README.md", chown => refused;
    ro_file_utimes: "README.md", utimes => refused;
    ro_file_setxattr: "README.md", setxattr => refused;
    ro_file_unlink: "README.md", remove => refused;
    ro_file_rename_out: "README.md", rename_out => refused;
    ro_file_rename_in: "README.md", rename_in => refused;
    ro_file_link_from: "README.md", link_from => refused;
    // read-only directory
    ro_dir_list: "ro", read => allowed;
    ro_dir_child_read: "ro/a.txt", read => allowed;
    ro_dir_child_write: "ro/a.txt", write => refused;
    ro_dir_child_unlink: "ro/a.txt", remove => refused;
    ro_dir_child_rename_out: "ro/a.txt", rename_out => refused;
    ro_dir_rename_in: "ro/b.txt", rename_in => refused;
    ro_dir_link_onto: "ro/a.txt", link_onto => refused;
    ro_dir_create_inside: "ro", create_inside => refused;
    ro_dir_mkdir_inside: "ro", mkdir_inside => refused;
    ro_dir_symlink_inside: "ro", symlink_inside => refused;
    ro_dir_mknod_inside: "ro", mknod_inside => refused;
    ro_dir_rmdir: "ro", remove => refused;
    ro_dir_rename_out: "ro", rename_out => refused;
    ro_dir_chmod: "ro", chmod => refused;
    // allowed paths work
    allow_file_write: "ok.txt", write => allowed;
    allow_file_chmod: "ok.txt", chmod => allowed;
    allow_file_setxattr: "ok.txt", setxattr => allowed;
    allow_dir_mknod_inside: "app", mknod_inside => allowed;
}

fn write_new(_: &Fixture, p: &Path) -> io::Result<()> {
    fs::File::create(p).map(drop)
}

#[test]
fn denied_names_answer_eacces_whether_or_not_they_exist() {
    let f = fixture();
    assert_errno(fs::metadata(f.m(".env")), libc::EACCES, "existing .env");
    assert_errno(
        fs::metadata(f.m("app/.env")),
        libc::EACCES,
        "missing app/.env",
    );
    assert_errno(
        fs::metadata(f.m("nope/.env")),
        libc::ENOENT,
        "parent missing",
    );
    assert_errno(
        fs::metadata(f.m("missing.txt")),
        libc::ENOENT,
        "missing allowed name",
    );
}

#[test]
fn other_errors_pass_through_untouched() {
    let f = fixture();
    assert_errno(
        fs::remove_dir(f.m("app")),
        libc::ENOTEMPTY,
        "rmdir non-empty",
    );
    assert_errno(fs::create_dir(f.m("app")), libc::EEXIST, "mkdir existing");
    assert_errno(fs::read_dir(f.m("ok.txt")), libc::ENOTDIR, "list a file");
    assert_errno(
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(f.m("ok.txt")),
        libc::EEXIST,
        "O_EXCL on existing",
    );
}

#[test]
fn the_policy_file_inside_the_workspace_is_read_only() {
    let mut f = Fixture::new();
    f.file(
        ".veilfs.toml",
        "[[rules]]\naction = \"allow\"\npaths = [\"*\"]\n",
    )
    .file("x.txt", "x");
    let file = f.s(".veilfs.toml");
    let p = veilfs::Policy::parse("p", &fs::read_to_string(&file).unwrap()).unwrap();
    f.mount_policy(p, Some(&file));
    let before = f.snapshot();
    assert_eq!(
        fs::read_to_string(f.m(".veilfs.toml"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    assert_errno(
        fs::write(f.m(".veilfs.toml"), "default = \"allow\"\n"),
        libc::EACCES,
        "rewrite policy",
    );
    assert_errno(
        fs::remove_file(f.m(".veilfs.toml")),
        libc::EACCES,
        "unlink policy",
    );
    assert_errno(
        fs::rename(f.m("x.txt"), f.m(".veilfs.toml")),
        libc::EACCES,
        "replace policy",
    );
    assert_errno(
        fs::rename(f.m(".veilfs.toml"), f.m("old.toml")),
        libc::EACCES,
        "move policy",
    );
    assert_eq!(before, f.snapshot());
}

// An open that could change a read-only file is refused before the kernel can put
// one byte of it in the page cache, in the default mode and with --strict-open
// (tests/refused_writes.rs races writers against readers).

#[test]
fn an_open_for_writing_of_a_read_only_file_is_refused() {
    for strict_open in [false, true] {
        let mut f = Fixture::new();
        f.file("ro/a.txt", "read me\n").file("ok.txt", "ok\n");
        let opts = veilfs::MountOptions {
            strict_open,
            ..veilfs::MountOptions::default()
        };
        f.mount_with(
            veilfs::Policy::parse("p", common::MATRIX_POLICY).unwrap(),
            None,
            &opts,
        );
        let before = f.snapshot();
        // Read first, so that the file's pages are cached.
        assert_eq!(fs::read_to_string(f.m("ro/a.txt")).unwrap(), "read me\n");
        for (what, o) in [
            ("write", fs::OpenOptions::new().write(true).clone()),
            ("append", fs::OpenOptions::new().append(true).clone()),
            (
                "read-write",
                fs::OpenOptions::new().read(true).write(true).clone(),
            ),
            (
                "truncate",
                fs::OpenOptions::new().write(true).truncate(true).clone(),
            ),
        ] {
            assert_errno(o.open(f.m("ro/a.txt")), libc::EACCES, what);
        }
        // Nor can a descriptor opened for reading be mapped shared and writable.
        let r = fs::File::open(f.m("ro/a.txt")).unwrap();
        // SAFETY: maps nothing when it fails (as it must); unmapped if it succeeds.
        let p = unsafe {
            use std::os::fd::AsRawFd;
            libc::mmap(
                std::ptr::null_mut(),
                8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                r.as_raw_fd(),
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // SAFETY: the mapping just made.
            unsafe { libc::munmap(p, 8) };
            panic!("strict_open {strict_open}: a writable shared mapping of a read-only file");
        }
        assert_eq!(before, f.snapshot(), "the backing directory changed");
        assert_eq!(fs::read_to_string(f.m("ro/a.txt")).unwrap(), "read me\n");
        // Reading and writing what the policy allows still works.
        let mut s = String::new();
        fs::File::open(f.m("ro/a.txt"))
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "read me\n");
        fs::write(f.m("ok.txt"), "changed\n").unwrap();
        assert_eq!(fs::read_to_string(f.s("ok.txt")).unwrap(), "changed\n");
    }
}

#[test]
fn a_file_removed_while_open_is_still_read_and_written() {
    let f = fixture();
    f.file("tmp.txt", &"0123456789".repeat(1000));
    // Opened for reading (without a handle) and for writing (with one), nothing
    // read yet: every read below reaches the daemon after the name is gone.
    let mut reader = fs::File::open(f.m("tmp.txt")).unwrap();
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(f.m("tmp.txt"))
        .unwrap();
    fs::remove_file(f.m("tmp.txt")).unwrap();
    assert!(!f.s("tmp.txt").exists());
    let mut s = String::new();
    reader.read_to_string(&mut s).unwrap();
    assert_eq!(s.len(), 10_000);
    s.clear();
    file.read_to_string(&mut s).unwrap();
    assert_eq!(s.len(), 10_000);
    use std::os::unix::fs::FileExt;
    file.write_all_at(b"abc", 0).unwrap();
    let mut head = [0u8; 3];
    file.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(&head, b"abc");
}

/// The workspace root and the directories an allow-list admits only as the way to
/// what it allows are passed through, not granted: changing their own attributes
/// follows the default action (they were changed on disk, whatever the default).
#[test]
fn the_root_and_admitted_directories_keep_their_attributes() {
    use std::os::unix::fs::MetadataExt;
    let cases: [(&str, &[&str]); 2] = [
        ("default = \"read-only\"\n", &[""]),
        (
            "default = \"deny\"\n\n[[rules]]\naction = \"allow\"\npaths = [\"src/lib/**\"]\n",
            &["", "src", "src/lib"],
        ),
    ];
    for (policy, targets) in cases {
        let mut f = Fixture::new();
        f.file("src/lib/f.txt", "f\n");
        f.mount(policy);
        for target in targets {
            let meta = |p: &Path| {
                let m = fs::metadata(p).unwrap();
                (m.mode(), m.uid(), m.gid(), m.mtime(), m.mtime_nsec())
            };
            let before = meta(&f.s(target));
            for (what, op) in [
                ("chmod", chmod as Op),
                ("chown", chown),
                ("utimes", utimes),
                ("setxattr", setxattr),
            ] {
                assert_errno(
                    op(&f, &f.m(target)),
                    libc::EACCES,
                    &format!("{what} on {target:?} under {policy:?}"),
                );
            }
            assert_eq!(
                meta(&f.s(target)),
                before,
                "{target:?} changed on disk under {policy:?}"
            );
        }
        if policy.contains("src/lib/**") {
            chmod(&f, &f.m("src/lib/f.txt")).expect("an allowed file's own mode changes");
        }
    }
}

/// No link is made on the way to what the policy names (an attacker's finding): with
/// `/cfg/prod.yaml` read-only and `/d/secret.yaml` denied, neither there yet, a
/// symbolic link `cfg -> staged` would make `cfg/prod.yaml` lead to a file the
/// command wrote, on disk too. Refused, as a file or a renamed one at `cfg` is; a
/// directory may be made there.
#[test]
fn no_link_is_made_on_the_way_to_a_named_path() {
    let mut f = Fixture::new();
    f.file("staged/prod.yaml", "evil: true\n")
        .file("staged/secret.yaml", "evil\n")
        .file("other", "x\n");
    f.mount(
        "[[rules]]\naction = \"read-only\"\npaths = [\"/cfg/prod.yaml\"]\n\n\
         [[rules]]\naction = \"deny\"\npaths = [\"/d/secret.yaml\"]\n",
    );
    let before = common::snapshot(&f.src);
    for way in ["cfg", "d"] {
        let e = std::os::unix::fs::symlink("staged", f.m(way)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "link at {way}: {e}");
        let e = std::fs::write(f.m(way), "x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "file at {way}: {e}");
        let e = std::fs::rename(f.m("other"), f.m(way)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "rename to {way}: {e}");
    }
    assert_eq!(
        before,
        common::snapshot(&f.src),
        "a refusal changed the tree"
    );
    std::fs::create_dir(f.m("cfg")).unwrap();
    assert_eq!(
        std::fs::write(f.m("cfg/prod.yaml"), "x")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EACCES)
    );
}
