//! The git index read by veilfs itself (never by running git on the workspace),
//! against `git ls-files` for every index version and object format; and the
//! attack it stops: a repository whose configuration runs a command.

mod common;

use std::path::Path;
use std::process::Command;

use common::git;

fn ls_files(dir: &Path) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = git(dir, &["ls-files", "-z", "--cached"])
        .as_bytes()
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A repository holding names that exercise the format: nested, sharing long
/// prefixes (version 4 compresses them), a name of 3,000 bytes, unicode, and an
/// intent-to-add entry (an extended flag, version 3).
fn repo(dir: &Path, init: &[&str]) {
    git(dir, &[&["init", "-q"], init].concat());
    let long = format!("d/{}", "x".repeat(250));
    let mut deep = String::from("deep");
    for _ in 0..12 {
        deep.push('/');
        deep.push_str(&"y".repeat(250));
    }
    for rel in [
        "a.txt",
        "config/prod.yaml",
        "config/prod.yaml.bak",
        "config/production/x",
        "ünï/cödé.txt",
        long.as_str(),
        &format!("{deep}/z"),
    ] {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, rel).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "x"]);
    std::fs::write(dir.join("later.txt"), "l").unwrap();
    git(dir, &["add", "-N", "later.txt"]);
}

#[test]
fn every_index_version_and_object_format_reads_as_git_lists_it() {
    let sha256 = Command::new("git")
        .args(["init", "-q", "--object-format=sha256"])
        .arg(tempfile::tempdir().unwrap().path())
        .status()
        .unwrap()
        .success();
    let mut formats: Vec<&[&str]> = vec![&[]];
    if sha256 {
        formats.push(&["--object-format=sha256"]);
    }
    for init in formats {
        for version in ["2", "3", "4"] {
            let t = tempfile::tempdir().unwrap();
            repo(t.path(), init);
            git(t.path(), &["update-index", "--index-version", version]);
            let want = ls_files(t.path());
            assert_eq!(want.len(), 8, "{want:?}");
            let got = veilfs::workspace::git_index::tracked_paths(t.path());
            assert_eq!(
                got.iter().map(|p| p.len()).collect::<Vec<_>>(),
                want.iter().map(|p| p.len()).collect::<Vec<_>>(),
                "{init:?} version {version}"
            );
            assert_eq!(got, want, "{init:?} version {version}");
        }
    }
}

#[test]
fn what_is_no_index_gives_no_paths_and_never_blocks() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    // No repository; a `.git` file; a `.git` link; an index that is a FIFO or a
    // link: nothing, at once.
    assert!(veilfs::workspace::git_index::tracked_paths(ws).is_empty());
    std::fs::write(ws.join(".git"), "gitdir: /elsewhere\n").unwrap();
    assert!(veilfs::workspace::git_index::tracked_paths(ws).is_empty());
    std::fs::remove_file(ws.join(".git")).unwrap();
    let real = tempfile::tempdir().unwrap();
    repo(real.path(), &[]);
    std::os::unix::fs::symlink(real.path().join(".git"), ws.join(".git")).unwrap();
    assert!(veilfs::workspace::git_index::tracked_paths(ws).is_empty());
    std::fs::remove_file(ws.join(".git")).unwrap();
    std::fs::create_dir(ws.join(".git")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(ws.join(".git/index"))
            .status()
            .unwrap()
            .success()
    );
    assert!(veilfs::workspace::git_index::tracked_paths(ws).is_empty());
    std::fs::remove_file(ws.join(".git/index")).unwrap();
    std::os::unix::fs::symlink(real.path().join(".git/index"), ws.join(".git/index")).unwrap();
    assert!(veilfs::workspace::git_index::tracked_paths(ws).is_empty());
    // Cut short anywhere: nothing, never a panic.
    let data = std::fs::read(real.path().join(".git/index")).unwrap();
    for n in 0..data.len() {
        let _ = veilfs::workspace::git_index::parse(&data[..n]);
    }
}

/// A repository whose `core.fsmonitor` runs a command (as a command under `veilfs
/// run` can set in a repository it makes): `check`, `explain`, `mount` and the
/// start-up line read which denied paths git tracks without running it.
#[test]
fn a_repository_that_runs_a_command_through_git_runs_nothing() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(".env"), "SECRET=x\n").unwrap();
    std::fs::write(ws.join(".veilfs.toml"), "extends = \"default\"\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-f", ".env"]);
    git(&ws, &["commit", "-qm", "x"]);
    let ran = t.path().join("ran");
    let hook = format!("touch {}; false", ran.display());
    git(&ws, &["config", "core.fsmonitor", &hook]);
    // The hook works: git runs it.
    git(&ws, &["ls-files"]);
    assert!(
        ran.exists(),
        "git did not run the hook: the test proves nothing"
    );
    std::fs::remove_file(&ran).unwrap();
    for args in [
        &["check", ""][..],
        &["explain", ".env"],
        &["explain", "--all"],
    ] {
        let args: Vec<&str> = args.iter().copied().filter(|a| !a.is_empty()).collect();
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(&args)
            .current_dir(&ws)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if args.get(1) != Some(&"--all") {
            assert!(
                err.contains(".env is denied but tracked in git"),
                "{args:?}: {err}"
            );
        }
        assert!(!ran.exists(), "veilfs {args:?} ran the repository's hook");
    }
}

/// An index entry, version 2, SHA-1: `path` as a regular file.
fn entry(path: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; 40];
    e[24..28].copy_from_slice(&0o100644u32.to_be_bytes());
    e.extend_from_slice(&[0u8; 20]);
    e.extend_from_slice(&(path.len().min(0xfff) as u16).to_be_bytes());
    e.extend_from_slice(path);
    let padded = (e.len() + 8) & !7;
    e.resize(padded, 0);
    e
}

fn index(paths: &[Vec<u8>]) -> Vec<u8> {
    let mut d = b"DIRC\0\0\0\x02".to_vec();
    d.extend_from_slice(&(paths.len() as u32).to_be_bytes());
    for p in paths {
        d.extend(entry(p));
    }
    d.extend_from_slice(&[0u8; 20]);
    d
}

/// A planted index (the command can write `.git/index`) holding a path of 100,000
/// segments, whose decision from scratch costs the square of its depth: it is not
/// decided (no working tree holds it), and `check` ends at once. The paths that
/// can be decided are.
#[test]
fn a_planted_index_with_a_deep_path_holds_nothing_up() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    std::fs::create_dir(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".veilfs.toml"), "extends = \"default\"\n").unwrap();
    let deep = [b"d/".repeat(100_000), b".env".to_vec()].concat();
    let odd = [
        b"a//.env".to_vec(),
        b"./.env".to_vec(),
        b"x/../.env".to_vec(),
    ];
    let mut paths = vec![deep, b"config/.env".to_vec()];
    paths.extend(odd);
    std::fs::write(ws.join(".git/index"), index(&paths)).unwrap();
    assert_eq!(veilfs::workspace::git_index::tracked_paths(ws).len(), 5);
    let child = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("check")
        .current_dir(ws)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ends at once; on the code before it decided the deep path for minutes.
    let (_, _, err) = common::finish(child, std::time::Duration::from_secs(120));
    assert!(
        err.contains("config/.env is denied but tracked in git"),
        "{err}"
    );
    assert_eq!(
        err.matches("is denied but tracked in git").count(),
        1,
        "{err}"
    );
    // A budget spent stops the check, and says so.
    let policy = veilfs::workspace::load::load_policy(None, ws)
        .unwrap()
        .policy;
    let (found, complete) =
        veilfs::workspace::tracked::tracked_denied_within(&policy, ws, std::time::Duration::ZERO);
    assert!(found.is_empty() && !complete);
}
