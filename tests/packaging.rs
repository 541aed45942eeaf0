//! What a packaged veilfs ships beside the binary: manual pages and shell
//! completions, both generated from the command-line definitions.

use std::path::Path;
use std::process::Command;

const MAN_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/doc/man");

/// The manual pages in `doc/man` are the ones the binary generates now (`veilfs man
/// doc/man` regenerates them; so does this test with `VEILFS_WRITE_MAN=1`).
#[test]
fn the_manual_pages_in_the_repository_are_current() {
    let pages = veilfs::cli::man_pages().unwrap();
    assert!(pages.len() > 5, "a page for veilfs and one per subcommand");
    if std::env::var_os("VEILFS_WRITE_MAN").is_some() {
        std::fs::create_dir_all(MAN_DIR).unwrap();
        for (name, page) in &pages {
            std::fs::write(Path::new(MAN_DIR).join(name), page).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, page) in &pages {
        if std::fs::read(Path::new(MAN_DIR).join(name)).ok().as_ref() != Some(page) {
            stale.push(name.clone());
        }
    }
    let mut kept: Vec<String> = std::fs::read_dir(MAN_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    kept.retain(|k| !pages.iter().any(|(n, _)| n == k));
    assert!(
        stale.is_empty() && kept.is_empty(),
        "doc/man is not what `veilfs man doc/man` writes now: stale or missing {stale:?}, \
         no longer generated {kept:?}; regenerate with `cargo run -- man doc/man`"
    );
    let top = String::from_utf8_lossy(&pages[0].1).into_owned();
    assert_eq!(pages[0].0, "veilfs.1");
    for sub in ["mount", "run", "check", "explain", "completions"] {
        assert!(top.contains(sub), "veilfs.1 names `{sub}`");
    }
}

#[test]
fn the_man_command_writes_the_pages() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .arg("man")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    for (name, page) in veilfs::cli::man_pages().unwrap() {
        assert_eq!(
            std::fs::read(dir.path().join(&name)).unwrap(),
            page,
            "{name}"
        );
    }
    let run = std::fs::read_to_string(dir.path().join("veilfs-run.1")).unwrap();
    assert!(run.contains(".TH veilfs-run"), "{run}");
    assert!(run.contains("home"), "the options of `run` are described");
}

/// Each shell's script is produced, and bash's completes the subcommands and the
/// options (it is loaded by bash itself, when bash is installed).
#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["completions", shell])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("veilfs"),
            "{shell}: {o:?}"
        );
        assert!(
            out.contains("explain") && out.contains("strict-open"),
            "{shell}"
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["completions", "nosuchshell"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    if Path::new("/bin/bash").exists() {
        let script = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(["completions", "bash"])
            .output()
            .unwrap()
            .stdout;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("veilfs.bash");
        std::fs::write(&file, script).unwrap();
        // Complete `veilfs mo` and `veilfs mount --str` with the loaded script.
        let probe = format!(
            "source '{}'\n\
             COMP_WORDS=(veilfs mo); COMP_CWORD=1; _veilfs veilfs mo veilfs; echo \"${{COMPREPLY[@]}}\"\n\
             COMP_WORDS=(veilfs mount --str); COMP_CWORD=2; _veilfs veilfs --str mount; echo \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let o = Command::new("/bin/bash")
            .args(["--norc", "-c", &probe])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first().copied(), Some("mount"), "{o:?}");
        assert!(
            lines.get(1).is_some_and(|l| l.contains("--strict-open")),
            "{o:?}"
        );
    }
}
