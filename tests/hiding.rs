//! Discovery hides: every tool that walks the mount meets the same policy.

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use common::{Fixture, assert_errno, os};

const POLICY: &str = r#"
[[rules]]
action = "deny"
paths = [".env", "secrets/", "*.pem", 'a\\b', "bad?name"]
"#;

/// A workspace where each denied file holds the marker `TOPSECRET`.
fn fixture() -> Fixture {
    let mut f = Fixture::new();
    f.file(".env", "TOPSECRET env\n")
        .file("secrets/token.txt", "TOPSECRET token\n")
        .file("deep/er/.env", "TOPSECRET deep\n")
        .file("deep/er/key.pem", "TOPSECRET pem\n")
        .file("deep/er/code.rs", "fn main() {}\n")
        .file("secrets-backup/notes.txt", "fine\n")
        .file("src/main.rs", "fn main() {}\n")
        .file("a\\b", "TOPSECRET backslash\n");
    fs::write(
        f.s(std::str::from_utf8(b"src").unwrap())
            .join(os(b"bad\xffname")),
        "TOPSECRET non-utf8\n",
    )
    .unwrap();
    fs::write(f.s("src").join(os(b"plain\xff.txt")), "visible\n").unwrap();
    f.mount(POLICY);
    f
}

fn no_secret(f: &Fixture, script: &str) -> String {
    let out = f.sh_ok(script);
    assert!(
        !out.contains("TOPSECRET"),
        "{script} revealed a secret:\n{out}"
    );
    for hidden in [".env", "token.txt", "key.pem", "a\\b"] {
        assert!(
            !out.lines().any(|l| l.ends_with(hidden)),
            "{script} listed {hidden}:\n{out}"
        );
    }
    out
}

#[test]
fn find_lists_only_admitted_entries() {
    let f = fixture();
    let out = no_secret(&f, "find . | sort");
    assert!(out.contains("./deep/er/code.rs"), "{out}");
    assert!(out.contains("./secrets-backup/notes.txt"), "{out}");
    assert!(!out.contains("./secrets\n"), "{out}");
}

#[test]
fn grep_recursive_never_reads_denied_files() {
    let f = fixture();
    let o = f.sh("grep -r TOPSECRET . ; echo status=$?");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.trim_end().ends_with("status=1"),
        "{}",
        f.explain("grep -r", &o)
    );
    assert!(!out.contains("TOPSECRET"), "{out}");
}

#[test]
fn tar_and_cp_copy_only_what_is_visible() {
    let f = fixture();
    let out = no_secret(&f, "tar cf - . | tar tf - | sort");
    assert!(out.contains("./src/main.rs"), "{out}");
    let dest = f.tmp.path().join("copy");
    f.sh_ok(&format!("cp -r . {}", dest.display()));
    let copied = common::snapshot(&dest);
    assert!(
        copied
            .keys()
            .all(|k| !k.ends_with(b".env") && !k.ends_with(b".pem") && !k.starts_with(b"secrets/")),
        "{:?}",
        copied.keys()
    );
    assert!(copied.contains_key(&b"deep/er/code.rs"[..]));
}

#[test]
fn python_os_walk_sees_the_same() {
    let f = fixture();
    let out = no_secret(
        &f,
        "python3 -c 'import os\nfor d, ds, fs in os.walk(\".\"):\n    for n in ds + fs: print(os.path.join(d, n))'",
    );
    assert!(out.contains("./deep/er/code.rs"), "{out}");
}

#[test]
fn git_ls_files_after_add_all() {
    let f = fixture();
    let out = no_secret(
        &f,
        "git init -q . && git -c user.email=t@t -c user.name=t add -A && git ls-files",
    );
    assert!(out.contains("src/main.rs"), "{out}");
    assert!(!out.contains(".env"), "{out}");
}

#[test]
fn non_utf8_and_backslash_names_are_matched_literally() {
    let f = fixture();
    assert_errno(fs::read(f.m("a\\b")), libc::EACCES, "a\\b");
    assert_errno(
        fs::read(f.m("src").join(os(b"bad\xffname"))),
        libc::EACCES,
        "bad\\xffname",
    );
    assert_eq!(
        fs::read(f.m("src").join(os(b"plain\xff.txt"))).unwrap(),
        b"visible\n"
    );
    let names: Vec<Vec<u8>> = fs::read_dir(f.m("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    assert!(names.contains(&b"plain\xff.txt".to_vec()), "{names:?}");
    assert!(!names.contains(&b"bad\xffname".to_vec()), "{names:?}");
    // A new non-UTF-8 name is checked as it comes into existence.
    let before = f.snapshot();
    assert_errno(
        fs::write(f.m("src").join(os(b"new\xfe.pem")), "x"),
        libc::EACCES,
        "create \\xfe.pem",
    );
    assert_eq!(before, f.snapshot());
}

#[test]
fn a_paused_listing_keeps_stable_offsets() {
    let f = fixture();
    f.dir("many");
    for i in 0..200 {
        fs::write(f.s(&format!("many/f{i:03}")), "x").unwrap();
    }
    // Read a few entries, change the directory underneath, read the rest: no entry is
    // lost or repeated.
    let mut it = fs::read_dir(f.m("many")).unwrap();
    let mut seen: Vec<String> = (0..50)
        .map(|_| {
            it.next()
                .unwrap()
                .unwrap()
                .file_name()
                .into_string()
                .unwrap()
        })
        .collect();
    fs::remove_file(f.s("many/f199")).unwrap();
    fs::File::create(f.s("many/zzz"))
        .unwrap()
        .write_all(b"x")
        .unwrap();
    seen.extend(it.map(|e| e.unwrap().file_name().into_string().unwrap()));
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "an entry was listed twice");
    assert_eq!(seen.len(), 200, "entries lost or added mid-listing");
}

/// `secrets/` is directory-only: through the mount, no entry and a directory of
/// that name answer the same `EACCES` (stat, open, create, mkdir); a file of that
/// name is served.
#[test]
fn a_directory_only_pattern_never_says_whether_the_directory_exists() {
    let f = fixture();
    f.dir("empty").file("has-file/secrets", "a plain file\n");
    for (rel, what) in [("secrets", "a directory"), ("empty/secrets", "no entry")] {
        assert_errno(fs::metadata(f.m(rel)), libc::EACCES, what);
        assert_errno(fs::symlink_metadata(f.m(rel)), libc::EACCES, what);
        assert_errno(fs::read_dir(f.m(rel)), libc::EACCES, what);
        assert_errno(fs::File::open(f.m(rel)), libc::EACCES, what);
        assert_errno(fs::create_dir(f.m(rel)), libc::EACCES, what);
    }
    let before = f.snapshot();
    assert_errno(
        fs::File::create(f.m("empty/secrets")),
        libc::EACCES,
        "create",
    );
    assert_errno(
        std::os::unix::fs::symlink("x", f.m("empty/secrets")),
        libc::EACCES,
        "symlink",
    );
    assert_eq!(before, f.snapshot(), "nothing was made");
    assert!(!f.s("empty/secrets").exists());
    assert_eq!(
        fs::read_to_string(f.m("has-file/secrets")).unwrap(),
        "a plain file\n"
    );
}

/// A directory's link count would count its hidden subdirectories: every
/// directory shows 1 ("not counted"), and `find` still walks everything.
#[test]
fn directories_show_one_link_and_find_walks_them_all() {
    let f = fixture();
    f.file("deep/er/est/leaf.txt", "x\n").dir("deep/er/secrets");
    for rel in ["", "deep", "deep/er", "deep/er/est"] {
        let m = fs::metadata(f.m(rel)).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&m),
            1,
            "link count of /{rel}"
        );
    }
    let all = no_secret(&f, "find . | sort");
    assert_eq!(all, no_secret(&f, "find . -noleaf | sort"));
    for want in [
        "./deep/er/est/leaf.txt",
        "./deep/er/code.rs",
        "./src/main.rs",
    ] {
        assert!(all.lines().any(|l| l == want), "{want} missing:\n{all}");
    }
    assert!(!all.contains("secrets\n"), "{all}");
    let dirs = f.sh_ok("find . -type d | sort");
    assert!(dirs.lines().any(|l| l == "./deep/er/est"), "{dirs}");
}

/// The documented limit: `rmdir` of a directory whose entries are all hidden
/// answers `ENOTEMPTY` (it says something is hidden there, never what), and the
/// hidden entries stay.
#[test]
fn rmdir_of_a_directory_holding_only_hidden_entries_is_enotempty() {
    let f = fixture();
    f.file("only-hidden/.env", "TOPSECRET\n");
    assert_eq!(fs::read_dir(f.m("only-hidden")).unwrap().count(), 0);
    assert_errno(fs::remove_dir(f.m("only-hidden")), libc::ENOTEMPTY, "rmdir");
    assert_eq!(
        fs::read_to_string(f.s("only-hidden/.env")).unwrap(),
        "TOPSECRET\n"
    );
}

/// A symbolic link named as a directory-only deny pattern (`.aws`, `secrets`, as
/// dotfile managers make them) is denied like the directory it leads to, and none
/// can be made (attacker finding: `ln -s store/creds .aws` served `.aws/credentials`).
#[test]
fn a_link_named_like_a_denied_directory_is_denied() {
    let mut f = Fixture::new();
    f.file("store/creds/credentials", "aws_secret=XYZ\n");
    std::os::unix::fs::symlink("store/creds", f.s(".aws")).unwrap();
    std::os::unix::fs::symlink("store/creds", f.s("secrets")).unwrap();
    f.mount(veilfs::policy::DEFAULT_POLICY);
    for p in [".aws/credentials", "secrets/credentials", ".aws", "secrets"] {
        assert_errno(std::fs::read(f.m(p)), libc::EACCES, p);
    }
    let listed = common::listing(&f.mnt);
    assert!(
        !listed.contains(".aws") && !listed.contains("secrets"),
        "{listed}"
    );
    assert_errno(
        std::os::unix::fs::symlink("store", f.m(".ssh")),
        libc::EACCES,
        "symlink .ssh",
    );
    assert!(f.s(".ssh").symlink_metadata().is_err());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["explain", "--workspace"])
        .arg(&f.src)
        .args([".aws", "nothere/.ssh"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("deny      .aws/"), "{out}");
    assert!(out.contains("deny      nothere/.ssh/"), "{out}");
}
