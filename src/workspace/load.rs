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
            None if self.policy.import_names().is_empty() => "built-in default policy".to_string(),
            None => format!(
                "built-in default policy, with the rules of {}",
                self.policy.import_names().join(", ")
            ),
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
    #[error(
        "refusing the policy {}: it is owned by uid {uid}, neither by you nor by root, so \
         another user may have written it. Check it, then `chown` it, or name a policy \
         with --policy",
        path.display()
    )]
    NotOwned { path: PathBuf, uid: u32 },
    /// An ignore file the policy imports (or a directory on the way to it) could
    /// not be read: its rules could not be honoured.
    #[error(transparent)]
    Import(#[from] crate::workspace::imports::ImportError),
}

/// Why no workspace could be chosen, or a path named could not be placed in it.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The `.veilfs.toml` that chose the workspace is committed in a repository
    /// whose top lies above it: the workspace would be smaller than the project.
    #[error(
        "{} is committed in the repository at {}, so the workspace would be {}, smaller \
         than the project (the rest of it unpoliced): name the workspace (--workspace {})",
        file.display(),
        top.display(),
        root.display(),
        top.display()
    )]
    CommittedBelowTop {
        file: PathBuf,
        top: PathBuf,
        root: PathBuf,
    },
    /// A marker owned by another user was passed over, and the workspace found lies
    /// below the project it marks.
    #[error(
        "{} is owned by uid {uid}, not by you or root, so the workspace would be {}, \
         smaller than the project at {}: name the workspace (--workspace {}), or \
         change the owner of {} to yours",
        marker.display(),
        root.display(),
        project.display(),
        project.display(),
        marker.display()
    )]
    NarrowerThanProject {
        marker: PathBuf,
        uid: u32,
        root: PathBuf,
        project: PathBuf,
    },
    /// The workspace could not be made absolute.
    #[error(transparent)]
    Absolute(std::io::Error),
    /// An absolute path named lies outside the workspace.
    #[error("{} is outside the workspace {}", path.display(), workspace.display())]
    Outside { path: PathBuf, workspace: PathBuf },
    /// A relative path named climbs out of the workspace (`..`).
    #[error("{} leaves the workspace", path.display())]
    Leaves { path: PathBuf },
}

/// How a workspace was chosen, for the start-up line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Given with `--workspace`.
    Given,
    /// The nearest ancestor (or the directory itself) holding a `.veilfs.toml`.
    PolicyFile,
    /// The top of the enclosing git work tree.
    GitTop,
    /// The current directory: neither of the above was found.
    CurrentDir,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Found::Given => "given with --workspace",
            Found::PolicyFile => "nearest directory holding .veilfs.toml",
            Found::GitTop => "top of the git work tree",
            Found::CurrentDir => "the current directory",
        })
    }
}

/// Finds the workspace for a command started in `start` (canonical), the way git
/// finds its repository: the nearest directory, from `start` up, that holds a
/// `.veilfs.toml`; else the top of the outermost enclosing git work tree (the
/// outermost directory holding `.git`: nested repositories and submodules belong to
/// the project around them, and a planted `src/.git` cannot shrink the workspace);
/// else `start`.
///
/// A marker (`.veilfs.toml` or `.git`) that is owned neither by this user nor by
/// root is passed over (with a warning in the third value), as git passes over a
/// repository another user owns: another user must not choose the policy, nor move
/// the workspace, by dropping a file in a shared parent such as `/tmp`. A `.git`
/// owned by `git_owner` (the `--user` a root session runs the command as, who owns
/// the project after `chown -R`) is trusted as well; a `.veilfs.toml` never is.
///
/// **Never narrower:** passing over a marker must not leave a workspace smaller
/// than the project it marks. When the workspace found lies strictly below a
/// directory whose marker was passed over, the answer is an error that says how to
/// name the workspace.
pub fn find_workspace(
    start: &Path,
    git_owner: Option<u32>,
) -> Result<(PathBuf, Found, Vec<String>), WorkspaceError> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::sys::euid();
    let mut warnings = Vec::new();
    let mut git_top = None;
    // The outermost directory whose marker was passed over, and that marker.
    let mut passed: Option<(PathBuf, u32)> = None;
    let mut found = None;
    for dir in start.ancestors() {
        if let Ok(m) = dir.join(WORKSPACE_POLICY).symlink_metadata() {
            if m.uid() == me || m.uid() == 0 {
                // The person's own word on where the workspace is.
                found = Some((dir.to_path_buf(), Found::PolicyFile));
                break;
            } else {
                warnings.push(passed_over(&dir.join(WORKSPACE_POLICY), m.uid()));
                passed = Some((dir.join(WORKSPACE_POLICY), m.uid()));
            }
        }
        // The outermost one: a `.git` made inside a project (by a command confined
        // in it, say) must not narrow what a later run started below it covers.
        if let Ok(m) = dir.join(".git").symlink_metadata() {
            if m.uid() == me || m.uid() == 0 || Some(m.uid()) == git_owner {
                git_top = Some(dir.to_path_buf());
            } else {
                warnings.push(passed_over(&dir.join(".git"), m.uid()));
                passed = Some((dir.join(".git"), m.uid()));
            }
        }
    }
    let (root, how) = found.unwrap_or_else(|| match git_top {
        Some(top) => (top, Found::GitTop),
        None => (start.to_path_buf(), Found::CurrentDir),
    });
    if matches!(how, Found::PolicyFile) {
        committed_below_top(&root, me, git_owner)?;
    }
    if let Some((marker, uid)) = passed
        && let Some(project) = marker.parent()
        && root.starts_with(project)
        && root != project
    {
        return Err(WorkspaceError::NarrowerThanProject {
            project: project.to_path_buf(),
            marker,
            uid,
            root,
        });
    }
    Ok((root, how, warnings))
}

/// Refuses a workspace `root` chosen by its `.veilfs.toml` when that file is
/// committed in an enclosing repository whose top lies above `root`: the
/// repository's authors, not the person, would then have made the workspace
/// smaller than the project, leaving the rest of it (`../.env`) unpoliced.
fn committed_below_top(root: &Path, me: u32, git_owner: Option<u32>) -> Result<(), WorkspaceError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let trusted = |uid: u32| uid == me || uid == 0 || Some(uid) == git_owner;
    let Some(top) = root
        .ancestors()
        .skip(1)
        .filter(|d| {
            d.join(".git")
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir() && trusted(m.uid()))
        })
        .last()
    else {
        return Ok(());
    };
    let file = root.join(WORKSPACE_POLICY);
    let Ok(rel) = file.strip_prefix(top) else {
        return Ok(());
    };
    let rel = rel.as_os_str().as_bytes();
    if !crate::workspace::git_index::tracked_paths(top)
        .iter()
        .any(|p| p == rel)
    {
        return Ok(());
    }
    Err(WorkspaceError::CommittedBelowTop {
        top: top.to_path_buf(),
        root: root.to_path_buf(),
        file,
    })
}

fn passed_over(marker: &Path, uid: u32) -> String {
    format!(
        "ignoring {} (owned by uid {uid}, not by you or root)",
        marker.display()
    )
}

/// Loads `explicit` if given, else `.veilfs.toml` at the workspace root if it exists
/// (refused unless this user or root owns it), else the built-in default policy.
pub fn load_policy(explicit: Option<&Path>, workspace: &Path) -> Result<LoadedPolicy, ConfigError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match found_file(workspace.join(WORKSPACE_POLICY))? {
            Some(p) => p,
            None => {
                return Ok(LoadedPolicy {
                    policy: builtin_for(workspace)?,
                    path: None,
                });
            }
        },
    };
    load_file(&path)
}

/// The built-in default policy for `workspace`: honouring the ignore files its
/// root holds (`.cursorignore`, ...; see [`crate::workspace::imports::builtin_text`]).
fn builtin_for(workspace: &Path) -> Result<Policy, ConfigError> {
    let present = match crate::sys::open_dir_path(workspace) {
        Ok(fd) => crate::workspace::imports::present_at(std::os::fd::AsFd::as_fd(&fd)),
        Err(_) => Vec::new(),
    };
    let text = crate::workspace::imports::builtin_text(&present);
    Ok(Policy::parse(crate::policy::BUILTIN_NAME, &text)?)
}

/// A policy file found, not named: `None` when `candidate` does not exist;
/// refused unless this user or root owns it (as [`find_workspace`] demands of the
/// files it stops at).
pub fn found_file(candidate: PathBuf) -> Result<Option<PathBuf>, ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = candidate.symlink_metadata() else {
        return Ok(None);
    };
    if meta.uid() != crate::sys::euid() && meta.uid() != 0 {
        return Err(ConfigError::NotOwned {
            path: candidate,
            uid: meta.uid(),
        });
    }
    Ok(Some(candidate))
}

/// Loads and compiles one policy file.
pub fn load_file(path: &Path) -> Result<LoadedPolicy, ConfigError> {
    let (text, _) = read_policy_text(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_file(path, &text)
}

pub use crate::policy::MAX_POLICY_BYTES;

/// Reads a policy file's text: only a regular file (a FIFO, a device such as
/// `/dev/zero`, a socket or a directory is refused without reading, and opening never
/// waits for a writer), of at most [`MAX_POLICY_BYTES`], in UTF-8.
fn read_policy_text(path: &Path) -> std::io::Result<(String, std::fs::Metadata)> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It
    // changes nothing for a regular file.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO (named pipe)"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("it is {what}: a policy must be a regular file"),
        ));
    }
    let too_big = || {
        Error::new(
            ErrorKind::InvalidInput,
            format!(
                "larger than {} MiB: a policy file is at most that",
                MAX_POLICY_BYTES >> 20
            ),
        )
    };
    if meta.len() > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    // The cap holds even if the file grows while being read.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_POLICY_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))?;
    Ok((text, meta))
}

/// Reads a policy file's text with the checks [`load_file`] makes (a regular file of
/// at most [`MAX_POLICY_BYTES`], UTF-8, opening never waits).
pub fn read_text(path: &Path) -> std::io::Result<String> {
    read_policy_text(path).map(|(t, _)| t)
}

/// Compiles the text of the policy file `path` (named in error messages).
pub fn parse_file(path: &Path, text: &str) -> Result<LoadedPolicy, ConfigError> {
    let policy = Policy::parse(&path.display().to_string(), text)?;
    Ok(LoadedPolicy {
        policy,
        path: Some(path.to_path_buf()),
    })
}

/// The policy file a running mount reloads, held by its directory: a descriptor on
/// the real directory, opened before anything is mounted, and the file's name in it.
///
/// Reading through the descriptor sees the file as the person outside sees it, even
/// when the daemon has since mounted veilfs over the workspace that contains it (as
/// `veilfs run` does), and even if the directory is later renamed or another
/// directory is put at its path.
#[derive(Debug)]
pub struct PolicyFile {
    /// The path as given, for messages.
    shown: PathBuf,
    /// The canonical path (symlinks resolved) when it was opened.
    canonical: PathBuf,
    dir: std::os::fd::OwnedFd,
    name: std::ffi::OsString,
}

/// What one read of the policy file found.
#[derive(Debug)]
pub struct PolicyText {
    pub text: String,
    /// The file's identity and link count at the time of reading.
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
}

impl PolicyFile {
    /// Resolves `path` (symlinks too) and opens its directory.
    pub fn open(path: &Path) -> std::io::Result<PolicyFile> {
        let canonical = path.canonicalize()?;
        let dir = canonical.parent().unwrap_or(Path::new("/"));
        let name = canonical
            .file_name()
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EISDIR))?
            .to_os_string();
        Ok(PolicyFile {
            shown: path.to_path_buf(),
            dir: crate::sys::open_dir_path(dir)?,
            canonical,
            name,
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// The canonical path when it was opened.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// The directory holding the file (an `O_PATH` descriptor).
    pub fn dir(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.dir.as_fd()
    }

    /// The file's name in [`PolicyFile::dir`].
    pub fn name(&self) -> &std::ffi::OsStr {
        &self.name
    }

    /// Reads the file through its directory descriptor, as [`load_file`] reads it:
    /// a regular file of at most [`MAX_POLICY_BYTES`], or an error (never a wait).
    pub fn read(&self) -> std::io::Result<PolicyText> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let mut p = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()));
        p.push(&self.name);
        let (text, meta) = read_policy_text(&p)?;
        Ok(PolicyText {
            text,
            dev: meta.dev(),
            ino: meta.ino(),
            nlink: meta.nlink(),
        })
    }
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
pub fn relative_path(arg: &Path, workspace: &Path) -> Result<RelPath, WorkspaceError> {
    use std::os::unix::ffi::OsStrExt;
    let raw = arg.as_os_str().as_bytes();
    let trailing_slash = raw.len() > 1 && raw.ends_with(b"/");
    let inner: &Path = if arg.is_absolute() {
        let ws = std::path::absolute(workspace).map_err(WorkspaceError::Absolute)?;
        match arg.strip_prefix(&ws) {
            Ok(rest) => rest,
            Err(_) => {
                return Err(WorkspaceError::Outside {
                    path: arg.to_path_buf(),
                    workspace: ws,
                });
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
                    return Err(WorkspaceError::Leaves {
                        path: arg.to_path_buf(),
                    });
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

/// The home policy's name in veilfs's configuration directory ([`config_dir`]).
pub const HOME_POLICY: &str = "home.toml";

/// veilfs's configuration directory for the user running veilfs:
/// `$XDG_CONFIG_HOME/veilfs` when that is an absolute path outside the shared
/// scratch places (`/tmp`, `/var/tmp`, `/dev/shm`: whoever can write there, a
/// command confined by an earlier `veilfs run` included, could move it aside and
/// plant another), else `$HOME/.config/veilfs`; `None` without either.
pub fn config_dir() -> Option<PathBuf> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(x) = absolute(std::env::var_os("XDG_CONFIG_HOME")) {
        let real = resolve_existing(&x).unwrap_or_else(|| x.clone());
        let scratch = ["/tmp", "/var/tmp", "/dev/shm"]
            .iter()
            .filter_map(|s| Path::new(s).canonicalize().ok())
            .any(|s| real.starts_with(s));
        if !scratch {
            return Some(x.join("veilfs"));
        }
        log::warn!(
            "XDG_CONFIG_HOME={} lies in a shared scratch place: its veilfs configuration is \
             not used",
            x.display()
        );
    }
    absolute(std::env::var_os("HOME")).map(|h| h.join(".config").join("veilfs"))
}

/// Every veilfs configuration directory a run may read its home policy from: the
/// one in use ([`config_dir`]) and `~/.config/veilfs`, which a later run without
/// `XDG_CONFIG_HOME` reads. Each is guarded under `veilfs run`.
pub fn config_dirs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = config_dir().into_iter().collect();
    if let Some(h) = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        let d = h.join(".config").join("veilfs");
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Loads the home policy of `veilfs run`: `explicit` if given, else
/// [`HOME_POLICY`] in [`config_dir`] if it exists (refused unless this user or root
/// owns it: it is never taken from the workspace, whose files a cloned repository
/// chooses), else the built-in default home policy.
pub fn load_home_policy(explicit: Option<&Path>) -> Result<LoadedPolicy, ConfigError> {
    match home_policy_file(explicit)? {
        Some(path) => load_file(&path),
        None => Ok(builtin_home()),
    }
}

/// The home policy file `veilfs run` reads: `explicit` if given, else
/// [`HOME_POLICY`] in [`config_dir`] if it exists (see [`found_file`]); `None` for
/// the built-in one.
pub fn home_policy_file(explicit: Option<&Path>) -> Result<Option<PathBuf>, ConfigError> {
    match explicit {
        Some(p) => Ok(Some(p.to_path_buf())),
        None => match config_dir() {
            Some(d) => found_file(d.join(HOME_POLICY)),
            None => Ok(None),
        },
    }
}

/// Says where a home policy came from, as [`LoadedPolicy::source`] does.
pub fn home_source(loaded: &LoadedPolicy) -> String {
    match &loaded.path {
        Some(p) => p.display().to_string(),
        None => "built-in default home policy".to_string(),
    }
}

fn builtin_home() -> LoadedPolicy {
    LoadedPolicy {
        policy: Policy::builtin_home(),
        path: None,
    }
}

/// The name and text `loaded` was compiled from: its file read again, or the
/// built-in `builtin` (name, text).
fn source_text(
    loaded: &LoadedPolicy,
    builtin: (&str, &str),
) -> Result<(String, String), ConfigError> {
    match &loaded.path {
        // The built-in default of a workspace, honouring its ignore files.
        None if builtin.0 == crate::policy::BUILTIN_NAME => {
            let names: Vec<&str> = loaded
                .policy
                .import_names()
                .iter()
                .map(String::as_str)
                .collect();
            let text = crate::workspace::imports::builtin_text(&names);
            Ok((builtin.0.to_string(), text))
        }
        None => Ok((builtin.0.to_string(), builtin.1.to_string())),
        Some(p) => {
            let text = read_text(p).map_err(|source| ConfigError::Read {
                path: p.clone(),
                source,
            })?;
            Ok((p.display().to_string(), text))
        }
    }
}

/// The rules of a loaded policy, uncompiled (to stack another policy on them, see
/// [`Policy::parse_on`]): the file read again, or the built-in text `builtin`
/// (name, text) for a built-in policy.
pub fn raw_of(
    loaded: &LoadedPolicy,
    builtin: (&str, &str),
) -> Result<crate::policy::RawPolicy, ConfigError> {
    let (name, text) = source_text(loaded, builtin)?;
    Ok(Policy::raw(&name, &text)?)
}

/// `loaded` compiled again between `base` and `after` (see
/// [`Policy::parse_between`]): its file read again, or the built-in text `builtin`
/// (name, text).
pub fn recompile(
    loaded: &LoadedPolicy,
    base: Option<&crate::policy::RawPolicy>,
    builtin: (&str, &str),
    after: &[crate::policy::RawRule],
) -> Result<Policy, ConfigError> {
    let (name, text) = source_text(loaded, builtin)?;
    let agent = loaded.policy.implied_agent();
    Ok(Policy::parse_for_agent(base, agent, after, &name, &text)?)
}

/// `loaded` compiled again for a session of the agent `agent` (see
/// [`Policy::parse_for_agent`]), between `base` and nothing.
pub fn with_agent(
    loaded: &mut LoadedPolicy,
    base: Option<&crate::policy::RawPolicy>,
    builtin: (&str, &str),
    agent: &'static crate::policy::agents::Profile,
) -> Result<(), ConfigError> {
    let (name, text) = source_text(loaded, builtin)?;
    loaded.policy = Policy::parse_for_agent(base, Some(agent), &[], &name, &text)?;
    Ok(())
}

/// Loads the workspace policy as [`load_policy`] does, stacked on `base` (see
/// [`Policy::parse_on`]).
pub fn load_policy_on(
    base: &crate::policy::RawPolicy,
    explicit: Option<&Path>,
    workspace: &Path,
) -> Result<LoadedPolicy, ConfigError> {
    let plain = load_policy(explicit, workspace)?;
    let builtin = (crate::policy::BUILTIN_NAME, crate::policy::DEFAULT_POLICY);
    let policy = recompile(&plain, Some(base), builtin, &[])?;
    Ok(LoadedPolicy {
        policy,
        path: plain.path,
    })
}

/// `path` with its nearest existing ancestor's links resolved and the rest as named
/// (where a name that does not exist yet would be made); `None` when no ancestor
/// resolves.
pub fn resolve_existing(path: &Path) -> Option<PathBuf> {
    path.ancestors().find_map(|a| {
        let rest = path.strip_prefix(a).ok()?;
        a.canonicalize().ok().map(|c| c.join(rest))
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

/// Why the `[network]` table of a policy file cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum NetworkTableError {
    #[error("reading {}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// Every problem, located (`file:line:col: error: ...`, one per line).
    #[error(transparent)]
    Invalid(#[from] crate::policy::net::NetSectionError),
}

/// The `[network]` table of the policy file `file` (`None`: the built-in policy,
/// which has none), as `veilfs run`, `check` and `explain --net` read it.
pub fn network_table(
    file: Option<&Path>,
) -> Result<Option<crate::policy::net::NetRules>, NetworkTableError> {
    let Some(file) = file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(file).map_err(|source| NetworkTableError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    Ok(crate::policy::net::parse_network_section(
        &file.display().to_string(),
        &text,
    )?)
}
