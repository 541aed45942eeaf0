//! The imported ignore files stay in force as the person changes them outside
//! the mount, wherever they are (not only in directories the kernel holds), and
//! cannot be changed through the mount by any name (a hard link made before
//! mounting included).

mod common;

use std::time::Duration;

use common::{Fixture, assert_errno};
use veilfs::Policy;

const POLICY: &str = "[[rules]]\naction = \"deny\"\nimport = \".cursorignore\"\n";

fn mounted(f: &mut Fixture) {
    let mut p = Policy::parse("import.toml", POLICY).unwrap_or_else(|e| panic!("{e}"));
    veilfs::workspace::imports::attach(&mut p, &f.src).unwrap_or_else(|e| panic!("{e}"));
    f.mount_policy(p, None);
}

fn refused(f: &Fixture, rel: &str) -> bool {
    std::fs::read(f.m(rel)).is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))
}

/// An outside edit of a file in a directory nothing has looked into reloads: no
/// lookup of that directory can have told the mount, so only a watch on the
/// file's own directory can.
#[test]
fn an_edit_where_the_kernel_never_looked_reloads() {
    let mut f = Fixture::new();
    f.file("a/b/c/.cursorignore", "one.txt\n")
        .file("a/b/c/one.txt", "ONE\n")
        .file("a/b/c/two.txt", "TWO\n")
        .file("top.txt", "top\n");
    mounted(&mut f);
    assert_eq!(std::fs::read_to_string(f.m("top.txt")).unwrap(), "top\n");
    // Edited in place (same inode): a first lookup finds nothing new there.
    std::fs::OpenOptions::new()
        .append(true)
        .open(f.s("a/b/c/.cursorignore"))
        .and_then(|mut o| std::io::Write::write_all(&mut o, b"two.txt\n"))
        .unwrap();
    assert!(
        common::wait_until(Duration::from_secs(10), || refused(&f, "a/b/c/two.txt")),
        "two.txt still readable after the person listed it"
    );
    assert!(refused(&f, "a/b/c/one.txt"));
}

/// A hard link to an imported file, made before mounting, reaches the same
/// object: no change through it is let through.
#[test]
fn a_hard_link_to_an_imported_file_is_read_only_too() {
    let mut f = Fixture::new();
    f.file(".cursorignore", "secret.txt\n")
        .file("secret.txt", "SECRET\n")
        .dir("other");
    std::fs::hard_link(f.s(".cursorignore"), f.s("other/rules.txt")).unwrap();
    mounted(&mut f);
    let before = f.snapshot();
    assert_eq!(
        std::fs::read_to_string(f.m("other/rules.txt")).unwrap(),
        "secret.txt\n"
    );
    assert_errno(
        std::fs::write(f.m("other/rules.txt"), "nothing\n"),
        libc::EACCES,
        "write through the link",
    );
    assert_errno(
        std::fs::OpenOptions::new()
            .append(true)
            .open(f.m("other/rules.txt")),
        libc::EACCES,
        "append through the link",
    );
    assert_errno(
        std::fs::File::options()
            .write(true)
            .open(f.m("other/rules.txt"))
            .and_then(|o| o.set_len(0)),
        libc::EACCES,
        "truncate through the link",
    );
    let o = f.sh("truncate -s 0 other/rules.txt");
    assert!(!o.status.success(), "{}", f.explain("truncate", &o));
    let o = f.sh("chmod 777 other/rules.txt");
    assert!(!o.status.success(), "{}", f.explain("chmod", &o));
    assert_eq!(f.snapshot(), before);
    assert_errno(std::fs::read(f.m("secret.txt")), libc::EACCES, "secret.txt");
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The threads that watch the policy file and the imported files end with the
/// mount: an unmounted session leaves no node descriptor behind (they held the
/// reloader, and through it every node's descriptor, for ever).
#[test]
fn the_watching_threads_end_with_the_mount() {
    let before = open_fds();
    for _ in 0..4 {
        let mut f = Fixture::new();
        f.file(".cursorignore", "x\n");
        for i in 0..40 {
            f.dir(&format!("d{i}/e"));
        }
        let file = f.tmp.path().join("policy.toml");
        std::fs::write(&file, POLICY).unwrap();
        let mut p = Policy::parse(&file.display().to_string(), POLICY).unwrap();
        veilfs::workspace::imports::attach(&mut p, &f.src).unwrap();
        f.mount_policy(p, Some(&file));
        for i in 0..40 {
            std::fs::read_dir(f.m(&format!("d{i}/e")))
                .unwrap()
                .for_each(drop);
        }
        drop(f);
    }
    assert!(
        common::wait_until(Duration::from_secs(10), || open_fds() < before + 40),
        "{} descriptors open after four mounts ended, {before} before",
        open_fds()
    );
}

/// More directories than a walk looks into stops the load (fail closed): a
/// command that makes directories enough must not push the person's ignore file
/// out of reach.
#[test]
fn a_walk_cut_short_stops_the_load() {
    let f = Fixture::new();
    f.file("app/x/.cursorignore", "secret.txt\n");
    for i in 0..30 {
        f.dir(&format!("d/{i}"));
    }
    let p = Policy::parse("import.toml", POLICY).unwrap();
    let root = std::fs::File::open(&f.src).unwrap();
    use std::os::fd::AsFd;
    let e = veilfs::workspace::imports::find_within(root.as_fd(), &p, 10)
        .err()
        .expect("a walk of 30 directories within 10 must fail");
    assert!(
        e.to_string()
            .contains("more than 10 directories to look for .cursorignore in"),
        "{e}"
    );
    let found = veilfs::workspace::imports::find_within(root.as_fd(), &p, 100)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.found.len(), 1);
}

/// A file written through the mount, then renamed over an imported file by the
/// person outside (an editor's save), is not loaded on reload: the command may have
/// written it, and could go on writing through a descriptor it kept.
#[test]
fn an_imported_file_written_through_the_mount_is_not_loaded() {
    let mut f = Fixture::new();
    f.file(".cursorignore", "secret.txt\n")
        .file("secret.txt", "SECRET\n");
    let file = f.tmp.path().join("policy.toml");
    std::fs::write(&file, POLICY).unwrap();
    let mut p = Policy::parse(&file.display().to_string(), POLICY).unwrap();
    veilfs::workspace::imports::attach(&mut p, &f.src).unwrap();
    f.mount_policy(p, Some(&file));
    assert!(refused(&f, "secret.txt"));
    std::fs::write(f.m("draft.txt"), "# nothing\n").unwrap();
    std::fs::rename(f.s("draft.txt"), f.s(".cursorignore")).unwrap();
    let e = f.mount.as_ref().unwrap().reload().unwrap_err().to_string();
    assert!(
        e.contains(".cursorignore") && e.contains("opened for writing through the mount"),
        "{e}"
    );
    assert!(refused(&f, "secret.txt"));
}

/// Warnings quote the imported files' text escaped: a line holding a carriage
/// return and an escape sequence cannot forge a line of veilfs's own.
#[test]
fn warnings_about_imported_lines_are_escaped() {
    let f = Fixture::new();
    f.file(".cursorignore", "[\rveilfs: FORGED LINE\x1b[K\n");
    let mut p = Policy::parse("import.toml", POLICY).unwrap();
    let w = veilfs::workspace::imports::attach(&mut p, &f.src).unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(!w[0].contains('\r') && !w[0].contains('\x1b'), "{:?}", w[0]);
    assert!(
        w[0].contains("\\x0d") && w[0].contains("\\x1b"),
        "{:?}",
        w[0]
    );
    let json = r#"{"permissions":{"deny":["Bash\nveilfs: mounted FORGED\r\u001b[2K(y)"]}}"#;
    let g = Fixture::new();
    g.file(".claude/settings.json", json);
    let mut p = Policy::parse("c.toml", "[[rules]]\nimport = \".claude/settings.json\"\n").unwrap();
    let w = veilfs::workspace::imports::attach(&mut p, &g.src).unwrap();
    assert!(
        w.iter()
            .all(|l| !l.contains('\n') && !l.contains('\r') && !l.contains('\x1b')),
        "{w:?}"
    );
}
