//! A workspace served by the filesystem object itself, without a mount, called the
//! way the FUSE adapter calls it (`tests/ops.rs`, `tests/matrix.rs`). Node ids are
//! whatever `lookup` returns (never assumed to be `st_ino`).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io;
use std::path::PathBuf;

use veilfs::Policy;
use veilfs::fs::VeilFs;
use veilfs::fs::config::FsConfig;
use veilfs::fs::inode::ROOT;
use veilfs::fs::request::Req;

/// The request each call stands for: this process, as root.
pub fn cx() -> Req {
    Req::new("test", std::process::id(), 0, 0)
}

/// A workspace on a temp directory and the filesystem serving it.
pub struct Ws {
    pub tmp: tempfile::TempDir,
    /// The backing workspace.
    pub src: PathBuf,
    /// The policy's file, outside the workspace (so that it is not itself guarded).
    pub policy_file: PathBuf,
    pub fs: VeilFs,
}

impl Ws {
    /// `files` are `(path, body)`; a path ending in `/` is a directory.
    pub fn new(policy: &str, files: &[(&str, &str)]) -> Ws {
        Ws::with_config(policy, files, FsConfig::default())
    }

    /// [`Ws::new`] with the filesystem built by `config`.
    pub fn with_config(policy: &str, files: &[(&str, &str)], config: FsConfig) -> Ws {
        Ws::build(policy, files, None, |_| config)
    }

    /// A workspace holding `files`, served by `policy` read from `policy_at` (a path
    /// relative to the workspace; `None`: a file outside it), with the filesystem
    /// built by what `config` makes of the backing workspace once its files are
    /// written.
    pub fn build(
        policy: &str,
        files: &[(&str, &str)],
        policy_at: Option<&str>,
        config: impl FnOnce(&std::path::Path) -> FsConfig,
    ) -> Ws {
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-inproc")
            .tempdir()
            .unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        for (rel, body) in files {
            let p = src.join(rel);
            if rel.ends_with('/') {
                std::fs::create_dir_all(&p).unwrap();
            } else {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, body).unwrap();
            }
        }
        let policy_file = match policy_at {
            Some(rel) => src.join(rel),
            None => tmp.path().join("policy.toml"),
        };
        std::fs::create_dir_all(policy_file.parent().unwrap()).unwrap();
        std::fs::write(&policy_file, policy).unwrap();
        let p = Policy::parse("policy.toml", policy).unwrap_or_else(|e| panic!("{e}"));
        let config = config(&src);
        let fs = VeilFs::new(&src, p, Some(&policy_file), config).unwrap();
        Ws {
            tmp,
            src,
            policy_file,
            fs,
        }
    }

    /// Looks `rel` up one name at a time, as the kernel would; the node id (the
    /// root's for "").
    pub fn walk(&self, rel: &str) -> io::Result<u64> {
        let mut ino = ROOT;
        for name in rel.split('/').filter(|n| !n.is_empty()) {
            ino = self.fs.lookup(&cx(), ino, OsStr::new(name))?.0.ino;
        }
        Ok(ino)
    }

    /// The names a listing of `rel` shows, sorted.
    pub fn names(&self, rel: &str) -> Vec<String> {
        let (listing, _) = self
            .fs
            .listing_at(&cx(), self.walk(rel).unwrap(), 0)
            .unwrap();
        let mut v: Vec<String> = listing
            .entries
            .iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect();
        v.sort();
        v
    }

    /// `rel` in the backing workspace.
    pub fn s(&self, rel: &str) -> PathBuf {
        self.src.join(rel)
    }
}
