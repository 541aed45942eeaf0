//! Finding and loading the policy for a workspace: the only place that reads a policy
//! file from disk.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::policy::{LoadError, Policy};

/// The name of the policy file looked for at the workspace root.
pub const WORKSPACE_POLICY: &str = crate::policy::POLICY_FILE_NAME;

/// A compiled policy and the file it came from (`None` for the built-in one).
#[derive(Debug)]
pub struct LoadedPolicy {
    pub policy: Policy,
    pub path: Option<PathBuf>,
}

impl LoadedPolicy {
    /// Says where the policy came from, for start-up lines and `explain`.
    pub fn source(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => "built-in default policy".to_string(),
        }
    }
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read policy {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(#[from] LoadError),
}

/// Loads `explicit` if given, else `.veilfs.toml` at the workspace root if it exists,
/// else the built-in default policy.
pub fn load_policy(explicit: Option<&Path>, workspace: &Path) -> Result<LoadedPolicy, ConfigError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let candidate = workspace.join(WORKSPACE_POLICY);
            if candidate.symlink_metadata().is_err() {
                return Ok(LoadedPolicy {
                    policy: Policy::builtin(),
                    path: None,
                });
            }
            candidate
        }
    };
    load_file(&path)
}

/// Loads and compiles one policy file.
pub fn load_file(path: &Path) -> Result<LoadedPolicy, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let policy = Policy::parse(&path.display().to_string(), &text)?;
    Ok(LoadedPolicy {
        policy,
        path: Some(path.to_path_buf()),
    })
}

/// A workspace-relative path as the policy sees it, from a path given on the command
/// line (relative to the workspace, or absolute inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath {
    pub bytes: Vec<u8>,
    /// Written with a trailing `/`.
    pub trailing_slash: bool,
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.bytes))
    }
}

/// Normalises `arg` lexically (`.`, `//`, `..`) into a workspace-relative path.
pub fn relative_path(arg: &Path, workspace: &Path) -> Result<RelPath, String> {
    use std::os::unix::ffi::OsStrExt;
    let raw = arg.as_os_str().as_bytes();
    let trailing_slash = raw.len() > 1 && raw.ends_with(b"/");
    let inner: &Path = if arg.is_absolute() {
        let ws = std::path::absolute(workspace).map_err(|e| e.to_string())?;
        match arg.strip_prefix(&ws) {
            Ok(rest) => rest,
            Err(_) => {
                return Err(format!(
                    "{} is outside the workspace {}",
                    arg.display(),
                    ws.display()
                ));
            }
        }
    } else {
        arg
    };
    let mut segs: Vec<&[u8]> = Vec::new();
    for seg in inner.as_os_str().as_bytes().split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                if segs.pop().is_none() {
                    return Err(format!("{} leaves the workspace", arg.display()));
                }
            }
            s => segs.push(s),
        }
    }
    Ok(RelPath {
        bytes: segs.join(&b'/'),
        trailing_slash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        let ws = Path::new("/ws");
        let r = |s: &str| relative_path(Path::new(s), ws);
        assert_eq!(r("a//b/./c").unwrap().bytes, b"a/b/c");
        assert_eq!(r("/ws/a/b/").unwrap().bytes, b"a/b");
        assert!(r("/ws/a/b/").unwrap().trailing_slash);
        assert_eq!(r("a/../b").unwrap().bytes, b"b");
        assert!(r("../x").is_err());
        assert!(r("/elsewhere/x").is_err());
    }
}
