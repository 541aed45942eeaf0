//! A policy that imports `.cursorignore` files, through a real mount: what they list
//! is hidden, and the files themselves cannot be changed through the mount.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use common::{Fixture, assert_errno, names};
use veilfs::Policy;

const POLICY: &str = r#"
[[rules]]
action = "deny"
import = ".cursorignore"
why = "the editor's agent must not read these"
"#;

const ROOT_IGNORE: &str = "# secrets\n.env*\n!.env.example\n/private/\n";
const SUB_IGNORE: &str = "data.csv\n";

/// A workspace with ignore files at the root and in `sub`, mounted with [`POLICY`]
/// and the files attached as `veilfs mount` attaches them.
fn mounted() -> Fixture {
    let mut f = Fixture::new();
    f.file(".cursorignore", ROOT_IGNORE)
        .file(".env", "TOKEN=root-secret\n")
        .file("app/.env.local", "TOKEN=app-secret\n")
        .file(".env.example", "TOKEN=\n")
        .file("private/key.txt", "private-secret\n")
        .file("README.md", "hello\n")
        .file("sub/.cursorignore", SUB_IGNORE)
        .file("sub/data.csv", "sub-secret\n")
        .file("sub/deep/data.csv", "deep-secret\n")
        .file("sub/code.rs", "fn main() {}\n")
        .file("data.csv", "not secret here\n")
        .dir("other");
    let mut p = Policy::parse("import.toml", POLICY).unwrap_or_else(|e| panic!("{e}"));
    let warnings =
        veilfs::workspace::imports::attach(&mut p, &f.src).unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    f.mount_policy(p, None);
    f
}

/// A workspace whose `.cursorignore` lists `.env`, mounted with [`POLICY`] read
/// from a file outside it (so that reloads read it again).
fn mounted_from_file() -> Fixture {
    let mut f = Fixture::new();
    f.file(".cursorignore", ".env\n")
        .file(".env", "TOKEN=secret\n")
        .file("README.md", "hello\n")
        .file("sub/notes.txt", "notes\n");
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, POLICY).unwrap();
    let mut p =
        Policy::parse(&file.display().to_string(), POLICY).unwrap_or_else(|e| panic!("{e}"));
    veilfs::workspace::imports::attach(&mut p, &f.src).unwrap_or_else(|e| panic!("{e}"));
    f.mount_policy(p, Some(&file));
    f
}

#[test]
fn what_the_files_list_is_hidden() {
    let f = mounted();
    for rel in [
        ".env",
        "app/.env.local",
        "private",
        "private/key.txt",
        "sub/data.csv",
        "sub/deep/data.csv",
    ] {
        assert_errno(std::fs::read(f.m(rel)), libc::EACCES, rel);
        assert_errno(std::fs::symlink_metadata(f.m(rel)), libc::EACCES, rel);
    }
    assert_eq!(
        names(&f.mnt),
        [
            ".cursorignore",
            ".env.example",
            "README.md",
            "app",
            "data.csv",
            "other",
            "sub"
        ]
    );
    assert!(names(&f.m("app")).is_empty());
    assert_eq!(names(&f.m("sub")), [".cursorignore", "code.rs", "deep"]);
    assert!(names(&f.m("sub/deep")).is_empty());
    // Outside `sub`, its file does not apply; `!` re-includes.
    assert_eq!(
        std::fs::read_to_string(f.m("data.csv")).unwrap(),
        "not secret here\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.m(".env.example")).unwrap(),
        "TOKEN=\n"
    );
    // A recursive search finds none of the secrets.
    let o = f.sh("grep -r secret . ; true");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("-secret"),
        "{}",
        f.explain("grep -r secret .", &o)
    );
    assert!(out.contains("not secret here"), "{out}");
}

#[test]
fn the_ignore_files_are_read_only_through_the_mount() {
    let f = mounted();
    let before = f.snapshot();
    for rel in [".cursorignore", "sub/.cursorignore"] {
        let m = f.m(rel);
        // Read: yes.
        assert!(std::fs::read(&m).is_ok(), "{rel}");
        // Write, append, truncate.
        assert_errno(
            std::fs::OpenOptions::new().write(true).open(&m),
            libc::EACCES,
            "open for writing",
        );
        assert_errno(
            std::fs::OpenOptions::new().append(true).open(&m),
            libc::EACCES,
            "open for appending",
        );
        assert_errno(
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_TRUNC)
                .open(&m),
            libc::EACCES,
            "O_TRUNC",
        );
        // The kernel refuses this one itself (EINVAL: not open for writing).
        assert!(
            std::fs::File::open(&m)
                .and_then(|file| file.set_len(0))
                .is_err(),
            "ftruncate on a read descriptor"
        );
        let c = CString::new(m.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        let r = unsafe { libc::truncate(c.as_ptr(), 0) };
        assert_eq!(r, -1, "truncate({rel})");
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EACCES)
        );
        // Unlink, rename away, rename onto, hard link, chmod.
        assert_errno(std::fs::remove_file(&m), libc::EACCES, "unlink");
        assert_errno(
            std::fs::rename(&m, f.m("moved-away")),
            libc::EACCES,
            "rename away",
        );
        assert_errno(
            std::fs::rename(f.m("README.md"), &m),
            libc::EACCES,
            "rename onto",
        );
        assert_errno(
            std::fs::hard_link(&m, f.m("other/alias")),
            libc::EACCES,
            "hard link to it",
        );
        assert_errno(
            std::fs::set_permissions(&m, std::os::unix::fs::PermissionsExt::from_mode(0o666)),
            libc::EACCES,
            "chmod",
        );
    }
    // Planting one where none is: create, mkdir, symlink, hard link, rename onto.
    let plant = f.m("other/.cursorignore");
    assert_errno(std::fs::write(&plant, "*\n"), libc::EACCES, "create");
    assert_errno(std::fs::create_dir(&plant), libc::EACCES, "mkdir");
    assert_errno(
        std::os::unix::fs::symlink("../README.md", &plant),
        libc::EACCES,
        "symlink named .cursorignore",
    );
    assert_errno(
        std::fs::hard_link(f.m("README.md"), &plant),
        libc::EACCES,
        "hard link named .cursorignore",
    );
    assert_errno(
        std::fs::rename(f.m("README.md"), &plant),
        libc::EACCES,
        "rename onto a new .cursorignore",
    );
    // The shell's spellings.
    for script in [
        "echo '!*' >> .cursorignore",
        "echo x > sub/.cursorignore",
        ": > .cursorignore",
        "mv .cursorignore other/",
        "cp README.md other/.cursorignore",
        "ln -s ../.cursorignore other/.cursorignore",
    ] {
        let o = f.sh(script);
        assert!(!o.status.success(), "{}", f.explain(script, &o));
    }
    assert_eq!(f.snapshot(), before, "the backing tree changed");
    assert_eq!(
        std::fs::read_to_string(f.s(".cursorignore")).unwrap(),
        ROOT_IGNORE
    );
    assert_eq!(
        std::fs::read_to_string(f.s("sub/.cursorignore")).unwrap(),
        SUB_IGNORE
    );
}

/// Renaming a directory that holds an ignore file would move what it hides out
/// from under its lines: refused, as any rename that would expose a path is.
#[test]
fn renaming_a_directory_with_an_ignore_file_exposes_nothing() {
    let f = mounted();
    let before = f.snapshot();
    assert_errno(
        std::fs::rename(f.m("sub"), f.m("other/sub2")),
        libc::EACCES,
        "rename the directory",
    );
    assert_errno(
        std::fs::rename(f.m("sub/deep"), f.m("deep2")),
        libc::EACCES,
        "rename a directory below it",
    );
    assert_eq!(f.snapshot(), before, "the backing tree changed");
}

/// `veilfs explain` finds and names the lines (no mount).
#[test]
fn explain_names_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::write(ws.join(".veilfs.toml"), POLICY).unwrap();
    std::fs::write(ws.join(".cursorignore"), ROOT_IGNORE).unwrap();
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/.cursorignore"), SUB_IGNORE).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", "--no-home", "--workspace"])
        .arg(ws)
        .args([
            "app/.env.local",
            "sub/x/data.csv",
            "sub/.cursorignore",
            "README.md",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains(
            "app/.env.local  (rule 1 \".env*\" (.cursorignore:2): the editor's agent must \
             not read these)"
        ),
        "{out}"
    );
    assert!(
        out.contains("(rule 1 \"data.csv\" (sub/.cursorignore:1)"),
        "{out}"
    );
    assert!(
        out.contains("a file the policy imports rules from"),
        "{out}"
    );
    // `check` in the workspace reads the files too: a bad line is a warning.
    std::fs::write(ws.join("sub/.cursorignore"), "data.csv\n[[:nope:]]\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("check")
        .current_dir(ws)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("sub/.cursorignore:2:1: warning:"), "{err}");
}

/// An edit to an imported file (outside the mount) takes effect at the next reload,
/// which reads the files through the real workspace, not through the mount.
#[test]
fn a_reload_reads_the_imported_files_again() {
    let f = mounted_from_file();
    assert_eq!(
        std::fs::read_to_string(f.m("README.md")).unwrap(),
        "hello\n"
    );
    assert_errno(std::fs::read(f.m(".env")), libc::EACCES, ".env");

    std::fs::write(f.s(".cursorignore"), ".env\nREADME.md\n").unwrap();
    std::fs::write(f.s("sub/.cursorignore"), "notes.txt\n").unwrap();
    let said = f
        .mount
        .as_ref()
        .unwrap()
        .reload()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(said.contains("reloaded"), "{said}");
    assert_errno(
        std::fs::read(f.m("README.md")),
        libc::EACCES,
        "README.md after reload",
    );
    assert_errno(
        std::fs::read(f.m("sub/notes.txt")),
        libc::EACCES,
        "sub/notes.txt",
    );
    assert!(!names(&f.mnt).contains(&"README.md".to_string()));

    // A file that cannot be honoured keeps the old policy.
    std::fs::remove_file(f.s("sub/.cursorignore")).unwrap();
    std::os::unix::fs::symlink("../.cursorignore", f.s("sub/.cursorignore")).unwrap();
    let e = f.mount.as_ref().unwrap().reload().unwrap_err().to_string();
    assert!(
        e.contains("sub/.cursorignore") && e.contains("symbolic link"),
        "{e}"
    );
    assert_errno(
        std::fs::read(f.m("sub/notes.txt")),
        libc::EACCES,
        "still hidden",
    );
}

/// An edit made outside the mount to an imported file, in a directory the kernel
/// holds, reloads the policy by itself, as an edit of the policy file does.
#[test]
fn an_outside_edit_of_an_imported_file_reloads_the_policy() {
    let f = mounted_from_file();
    // Both readable now (and `sub` looked into, so it is watched).
    assert_eq!(
        std::fs::read_to_string(f.m("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.m("sub/notes.txt")).unwrap(),
        "notes\n"
    );

    std::fs::write(f.s(".cursorignore"), ".env\nREADME.md\n").unwrap();
    assert!(
        common::wait_until(std::time::Duration::from_secs(20), || std::fs::read(
            f.m("README.md")
        )
        .is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))),
        "README.md is still readable after the edit of .cursorignore"
    );
    // A new ignore file in a directory the kernel holds counts too (the reload
    // dropped the kernel's caches: look into `sub` again).
    assert_eq!(
        std::fs::read_to_string(f.m("sub/notes.txt")).unwrap(),
        "notes\n"
    );
    std::fs::write(f.s("sub/.cursorignore"), "notes.txt\n").unwrap();
    assert!(
        common::wait_until(std::time::Duration::from_secs(20), || std::fs::read(
            f.m("sub/notes.txt")
        )
        .is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))),
        "sub/notes.txt is still readable after a sub/.cursorignore was made"
    );
    assert!(!names(&f.mnt.join("sub")).contains(&"notes.txt".to_string()));
}

/// A directory holding an ignore file is not moved or removed through the mount,
/// even when nothing it lists exists yet: moved (or moved into `.git`, where no
/// ignore file is looked for), its rules would stay behind, and a file saved there
/// later would be shown.
#[test]
fn a_directory_holding_an_ignore_file_stays_where_its_rules_apply() {
    let mut f = Fixture::new();
    f.file("p/e/.cursorignore", "future.txt\n")
        .file("p/e/code.rs", "fn main() {}\n")
        .dir("elsewhere");
    let mut p = Policy::parse("import.toml", POLICY).unwrap_or_else(|e| panic!("{e}"));
    veilfs::workspace::imports::attach(&mut p, &f.src).unwrap_or_else(|e| panic!("{e}"));
    f.mount_policy(p, None);
    std::fs::create_dir(f.m(".git")).unwrap();
    std::fs::create_dir(f.m("elsewhere/empty")).unwrap();
    let before = common::snapshot(&f.src);
    for (from, to) in [
        ("p/e", "p/e2"),
        ("p", "q"),
        ("p", "elsewhere/p"),
        ("p/e", ".git/e"),
        ("p", ".git/p"),
        // Renamed onto: the directory holding the file would be replaced.
        ("elsewhere/empty", "p/e"),
    ] {
        assert_errno(
            std::fs::rename(f.m(from), f.m(to)),
            libc::EACCES,
            &format!("mv {from} {to}"),
        );
    }
    assert_errno(std::fs::remove_dir(f.m("p/e")), libc::EACCES, "rmdir p/e");
    assert_eq!(common::snapshot(&f.src), before, "the workspace changed");
    // The person saves the file the rules name: it is hidden where it lands.
    std::fs::write(f.s("p/e/future.txt"), "SECRET\n").unwrap();
    assert_errno(
        std::fs::read(f.m("p/e/future.txt")),
        libc::EACCES,
        "future.txt",
    );
}
