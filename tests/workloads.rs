//! Real programs on a real mount: an edit workflow, git, sqlite, mmap, big files and
//! concurrent writers. Everything they write lands in the backing directory.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::Fixture;

const POLICY: &str = "[[rules]]\naction = \"deny\"\npaths = [\".env\", \"secrets/\"]\n";

fn fixture() -> Fixture {
    let mut f = Fixture::new();
    f.file("README.md", "# project\n")
        .file(".env", "TOPSECRET\n");
    f.mount(POLICY);
    f
}

#[test]
fn an_edit_workflow_lands_in_the_backing_directory() {
    let f = fixture();
    f.sh_ok(
        "set -e
         echo one > notes.txt
         echo two >> notes.txt
         mkdir -p src/lib
         mv notes.txt src/lib/notes.txt
         ln -s lib/notes.txt src/link
         ln src/lib/notes.txt src/hard
         printf 'abcdef' > t.txt && truncate -s 3 t.txt
         chmod 600 src/lib/notes.txt
         touch -d '2001-02-03 04:05:06' README.md
         rm src/hard",
    );
    assert_eq!(
        fs::read_to_string(f.s("src/lib/notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        fs::read_link(f.s("src/link")).unwrap().to_str().unwrap(),
        "lib/notes.txt"
    );
    assert!(!f.s("src/hard").exists());
    assert_eq!(fs::read(f.s("t.txt")).unwrap(), b"abc");
    assert_eq!(
        fs::metadata(f.s("src/lib/notes.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(fs::metadata(f.s("README.md")).unwrap().mtime(), 981173106);
    // The mount reports the backing inode numbers.
    assert_eq!(
        fs::metadata(f.m("src/lib/notes.txt")).unwrap().ino(),
        fs::metadata(f.s("src/lib/notes.txt")).unwrap().ino()
    );
}

#[test]
fn git_init_add_commit_inside_the_mount() {
    let f = fixture();
    let out = f.sh_ok(
        "set -e
         git init -q .
         git config user.email t@example.com && git config user.name t
         echo 'fn main() {}' > main.rs
         git add -A && git commit -qm first
         echo more >> main.rs && git commit -qam second
         git log --oneline | wc -l
         git status --porcelain
         git fsck --no-progress 2>&1 | head -3",
    );
    assert_eq!(out.lines().next().unwrap().trim(), "2", "{out}");
    let files = f.sh_ok("git ls-files");
    assert!(!files.contains(".env"), "{files}");
    assert!(f.s(".git/HEAD").exists());
}

#[test]
fn sqlite_in_wal_mode() {
    let f = fixture();
    let out = f.sh_ok(
        "set -e
         sqlite3 db.sqlite 'PRAGMA journal_mode=WAL; CREATE TABLE t(x); BEGIN; INSERT INTO t VALUES (1),(2),(3); COMMIT;'
         sqlite3 db.sqlite 'INSERT INTO t SELECT x+10 FROM t; SELECT count(*), sum(x) FROM t; PRAGMA integrity_check;'",
    );
    assert!(out.contains("6|42"), "{out}");
    assert!(out.contains("ok"), "{out}");
    assert!(f.s("db.sqlite").exists());
}

#[test]
fn a_shared_mmap_write_reaches_the_file() {
    let f = fixture();
    fs::write(f.m("mapped.bin"), vec![0u8; 8192]).unwrap();
    f.sh_ok(
        "python3 -c '
import mmap
with open(\"mapped.bin\", \"r+b\") as fh:
    m = mmap.mmap(fh.fileno(), 8192, mmap.MAP_SHARED)
    m[4096:4101] = b\"hello\"
    m.flush()
    m.close()
'",
    );
    let data = fs::read(f.s("mapped.bin")).unwrap();
    assert_eq!(&data[4096..4101], b"hello");
}

#[test]
fn a_multi_mib_round_trip() {
    let f = fixture();
    let data: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    fs::File::create(f.m("big.bin"))
        .unwrap()
        .write_all(&data)
        .unwrap();
    let mut back = Vec::new();
    fs::File::open(f.m("big.bin"))
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert!(back == data, "read back differs");
    assert!(
        fs::read(f.s("big.bin")).unwrap() == data,
        "backing file differs"
    );
}

#[test]
fn several_concurrent_writers() {
    let f = fixture();
    std::thread::scope(|s| {
        for t in 0..6 {
            let path = f.m(&format!("w{t}.txt"));
            s.spawn(move || {
                let mut fh = fs::File::create(path).unwrap();
                for i in 0..500 {
                    writeln!(fh, "writer {t} line {i}").unwrap();
                }
            });
        }
    });
    for t in 0..6 {
        let text = fs::read_to_string(f.s(&format!("w{t}.txt"))).unwrap();
        assert_eq!(text.lines().count(), 500);
        assert!(text.lines().all(|l| l.starts_with(&format!("writer {t} "))));
    }
}
