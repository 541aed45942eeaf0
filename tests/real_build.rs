//! The real workload: `cargo build` of a real crate with dependencies (this one),
//! from scratch, through a mount with the built-in default policy. rustc and its
//! linker hard-link object files between directories, rename and delete temporaries
//! and mmap their inputs while ext4 reuses freed inode numbers: this once died of
//! SIGBUS and `EACCES`. CI runs it once, in the default mode; `scripts/conformance`
//! runs it five times in a row in each mode and under `veilfs run`
//! (`VEILFS_BUILD_ROUNDS`, `VEILFS_BUILD_STRICT`).

mod common;

use std::path::Path;
use std::process::Command;

use common::Fixture;
use veilfs::{MountOptions, Policy};

/// Copies what `cargo build` needs of this crate into `to`.
fn copy_crate(to: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["Cargo.toml", "Cargo.lock"] {
        std::fs::copy(root.join(f), to.join(f)).unwrap();
    }
    for d in ["src", "benches", "policy-examples", "vendor"] {
        let ok = Command::new("cp")
            .arg("-r")
            .arg(root.join(d))
            .arg(to.join(d))
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -r {d}");
    }
}

#[test]
fn cargo_build_of_a_real_crate_through_the_mount() {
    let rounds: usize = std::env::var("VEILFS_BUILD_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let strict = std::env::var_os("VEILFS_BUILD_STRICT").is_some_and(|v| v == "1");
    let mut f = Fixture::new();
    copy_crate(&f.src);
    let opts = MountOptions {
        strict_open: strict,
        ..MountOptions::default()
    };
    f.mount_with(Policy::builtin(), None, &opts);
    for round in 1..=rounds {
        let _ = std::fs::remove_dir_all(f.m("target"));
        let out = Command::new("cargo")
            .args(["build", "--offline", "--quiet"])
            .current_dir(&f.mnt)
            .env("CARGO_TARGET_DIR", f.m("target"))
            .env_remove("RUSTFLAGS")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            f.explain(
                &format!("cargo build through the mount (round {round}, strict open: {strict})"),
                &out
            )
        );
        let version = Command::new(f.m("target/debug/veilfs"))
            .arg("--version")
            .output()
            .unwrap();
        assert!(
            version.status.success() && String::from_utf8_lossy(&version.stdout).contains("veilfs"),
            "the built binary runs: {version:?}"
        );
    }
}
