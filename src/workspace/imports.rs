//! Finding the ignore files a policy imports (`import = ".cursorignore"`) in a
//! workspace, and attaching them to the policy (see [`crate::policy::Found`]).
//!
//! The walk starts at a descriptor on the real workspace root (never through a
//! veilfs mount), opens each directory from its parent's descriptor without
//! following symbolic links, never enters `.git`, never enters a directory the
//! policy denies by its other rules (nothing in it can be seen anyway), and stops
//! with an error (the load stops, as for a bad policy) after [`MAX_DIRS`]
//! directories. An ignore file must be a regular
//! file of at most [`crate::policy::MAX_POLICY_BYTES`] in UTF-8: one that is a
//! symbolic link, unreadable or too big stops the load, as a bad policy does, since
//! the rules it holds could not be honoured.

use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use crate::policy::MAX_POLICY_BYTES;
use crate::policy::{Action, Decision, Found, Policy, claude};
use crate::sys;

/// An ignore file the policy imports (or a directory on the way to it) could not be
/// read: its rules could not be honoured.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}, which the policy imports rules from: {source}")]
pub struct ImportError {
    /// Workspace-relative (`.` for the root).
    pub path: String,
    pub source: std::io::Error,
}

/// The most directories one walk enters.
pub const MAX_DIRS: usize = 1_000_000;

/// The built-in default policy's text for a workspace whose root holds the files
/// `names` (see [`present_at`]): the default's rules, then every ignore file name
/// read-only at every depth (whatever the root holds), then one rule per ignore
/// file name held, denying what the files of that name list wherever they are in
/// the workspace; then, when some are Claude Code's settings, one rule taking
/// their `Read`/`Edit` deny and ask entries.
///
/// The files are read as the tools that read them do, `!` lines included (see
/// [`crate::policy::ignore`]): a `!` line takes a path out of its own rule, so it
/// can only narrow what files of its own name hide, never what another rule hides
/// (the default's secrets, another tool's file, Claude Code's deny entries).
pub fn builtin_text(names: &[&str]) -> String {
    let mut text = crate::policy::DEFAULT_POLICY.to_string();
    let (settings, ignores): (Vec<&str>, Vec<&str>) =
        names.iter().copied().partition(|n| claude::is_name(n));
    // Every ignore file name is read-only at every depth, whether or not the root
    // holds one: a `!` line planted where none was (in a subdirectory, say, before
    // the person adds a file of that name at the root) would re-include what the
    // person's file hides from the next start on. So the command can plant none.
    let all = crate::policy::ignore::NAMES;
    let guard = "an ignore file name: the built-in default reads rules from these, so \
                 the command can neither plant nor change one";
    text.push_str(&format!(
        "\n[[rules]]\naction = \"read-only\"\npaths = {all:?}\nwhy = {guard:?}\n"
    ));
    // One rule per name: in one rule, a later name's `!` line would re-include what
    // an earlier name's file hides (see `crate::policy` imports), and no tool reads
    // another tool's file.
    let why = "listed in an ignore file of this workspace: what you told your tools not to read";
    for name in &ignores {
        text.push_str(&format!(
            "\n[[rules]]\naction = \"deny\"\nimport = {name:?}\nwhy = {why:?}\n"
        ));
    }
    if !settings.is_empty() {
        // A settings file made later can only add deny and ask entries (allow
        // entries grant nothing), so only the ones present are guarded (read-only):
        // Claude Code keeps writing the local one where it is not imported.
        let why = "denied (or asked for) in Claude Code's settings of this workspace";
        text.push_str(&format!(
            "\n[[rules]]\nimport = {settings:?}\nwhy = {why:?}\n"
        ));
    }
    text
}

/// The ignore files (of [`crate::policy::ignore::NAMES`]) and Claude Code settings
/// files (of [`claude::NAMES`]) at the root of the workspace whose descriptor is
/// `root`: the built-in default honours those. In the home directory,
/// `.claude/settings.json` is Claude Code's own user settings, which it writes and
/// whose paths mean something else: not honoured there.
pub fn present_at(root: BorrowedFd) -> Vec<&'static str> {
    let settings: &[&str] = if is_home(root) { &[] } else { &claude::NAMES };
    crate::policy::ignore::NAMES
        .iter()
        .chain(settings.iter())
        .copied()
        .filter(|n| {
            std::ffi::CString::new(*n)
                .ok()
                .is_some_and(|c| sys::statat(root, &c).is_ok())
        })
        .collect()
}

/// Whether `root` is the home directory (`$HOME`, by identity).
fn is_home(root: BorrowedFd) -> bool {
    let Some(home) = std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute()) else {
        return false;
    };
    match (std::fs::metadata(&home), sys::stat(root)) {
        (Ok(h), Ok(r)) => {
            use std::os::unix::fs::MetadataExt;
            h.dev() == r.st_dev && h.ino() == r.st_ino
        }
        _ => false,
    }
}

/// Finds the files `policy` imports under the workspace `root` (an absolute path
/// to the real directory) and attaches them. Returns warnings to print: lines that
/// could not be compiled (as `DIR/NAME:LINE:1: warning: ...`) and a walk cut short.
/// A policy without import rules is not walked for.
pub fn attach(policy: &mut Policy, root: &Path) -> Result<Vec<String>, ImportError> {
    if policy.import_names().is_empty() {
        return Ok(Vec::new());
    }
    let fd = sys::open_dir_path(root).map_err(|source| ImportError {
        path: root.display().to_string(),
        source,
    })?;
    attach_at(policy, fd.as_fd())
}

/// [`attach`] from a descriptor on the workspace root.
pub fn attach_at(policy: &mut Policy, root: BorrowedFd) -> Result<Vec<String>, ImportError> {
    attach_checked(policy, root, &|_| false)
}

/// [`attach_at`], refusing (with an error naming the file) an imported file whose
/// `(st_dev, st_ino)` `written` says was written through the mount lately: the
/// confined command may have written it before the person renamed it into place
/// (the reloader asks, as it does of the policy file).
pub fn attach_checked(
    policy: &mut Policy,
    root: BorrowedFd,
    written: &dyn Fn((u64, u64)) -> bool,
) -> Result<Vec<String>, ImportError> {
    if policy.import_names().is_empty() {
        return Ok(Vec::new());
    }
    let Finding { found, ids } = find(root, policy)?;
    if let Some((f, _)) = found.iter().zip(&ids).find(|(_, id)| written(**id)) {
        return Err(ImportError {
            path: shown(&f.dir, f.name.as_bytes()),
            source: std::io::Error::other(
                "this file was opened for writing through the mount lately, so the \
                 confined command may have written it; keeping the old policy. Write it \
                 anew outside the mount, then reload",
            ),
        });
    }
    policy.set_source_ids(ids);
    let errors = policy.attach_imports_in(found, &context(root));
    Ok(
        // The files' text is the workspace's: shown escaped, never sent raw to a
        // terminal (see `crate::escape`).
        errors
            .into_iter()
            .map(|e| {
                let message = crate::escape::escape(&e.message);
                if e.at.line == 0 {
                    format!("{}: warning: {message}", e.at.file)
                } else {
                    format!("{}: warning: {message}", e.at)
                }
            })
            .collect(),
    )
}

/// Where the workspace whose root is `root` is, for the absolute paths of Claude
/// Code's settings: its path (as the kernel names the descriptor) and `$HOME`.
fn context(root: BorrowedFd) -> claude::Context {
    use std::os::unix::ffi::OsStrExt;
    let trim = |mut p: Vec<u8>| {
        while p.len() > 1 && p.ends_with(b"/") {
            p.pop();
        }
        p
    };
    let workspace = std::fs::read_link(format!("/proc/self/fd/{}", root.as_raw_fd()))
        .ok()
        .filter(|p| p.is_absolute())
        .map(|p| trim(p.as_os_str().as_bytes().to_vec()));
    let home = std::env::var_os("HOME")
        .filter(|h| Path::new(h).is_absolute())
        .map(|h| trim(h.as_bytes().to_vec()));
    claude::Context { workspace, home }
}

/// Reads the Claude Code settings files `policy` imports, at their one place
/// below the workspace root: the directory on the way (`.claude`) is opened
/// without following a link, and a file that is not JSON of the documented shape
/// stops the load as a bad policy does.
fn find_claude(
    root: BorrowedFd,
    policy: &Policy,
    ids: &mut Vec<(u64, u64)>,
) -> Result<Vec<Found>, ImportError> {
    let mut found = Vec::new();
    for name in policy.import_names().iter().filter(|n| claude::is_name(n)) {
        let Some((dir, file)) = name.rsplit_once('/') else {
            continue;
        };
        let err = |source| ImportError {
            path: name.clone(),
            source,
        };
        let (Ok(cdir), Ok(cfile)) = (CString::new(dir), CString::new(file)) else {
            continue;
        };
        let dir_fd = match sys::openat(root, &cdir, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e)
                if e.raw_os_error() == Some(libc::ELOOP)
                    || (e.raw_os_error() == Some(libc::ENOTDIR)
                        && sys::statat(root, &cdir)
                            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)) =>
            {
                return Err(err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{dir} is a symbolic link: veilfs reads an imported file only where \
                         it is"
                    ),
                )));
            }
            // A file, not a directory: no settings there.
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
            Err(e) => return Err(err(e)),
        };
        let text = match read_file(dir_fd.as_fd(), &cfile) {
            Ok((t, id)) => {
                ids.push(id);
                t
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(err(e)),
        };
        claude::translate(&text, &claude::Context::default())
            .map_err(|why| err(std::io::Error::new(std::io::ErrorKind::InvalidData, why)))?;
        found.push(Found {
            dir: Vec::new(),
            name: name.clone(),
            text,
        });
    }
    Ok(found)
}

/// One directory still to read: its parent's descriptor, its name there, its
/// workspace-relative path and what the walker keeps for it.
struct Todo<S> {
    parent: Arc<OwnedFd>,
    name: Vec<u8>,
    rel: Vec<u8>,
    state: S,
}

/// One entry that is not a directory, met by [`walk`].
pub struct Entry<'a> {
    /// The directory holding it.
    pub dir: BorrowedFd<'a>,
    /// That directory, workspace-relative (`""` for the root).
    pub rel_dir: &'a [u8],
    pub name: &'a [u8],
    /// `libc::DT_REG`, `DT_LNK`, ... (`DT_UNKNOWN` for other kinds).
    pub kind: u8,
}

impl Entry<'_> {
    /// Its workspace-relative path.
    pub fn path(&self) -> Vec<u8> {
        let mut p = self.rel_dir.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(self.name);
        p
    }
}

/// Walks the workspace under `root` depth first: never follows a link, never enters
/// `.git`, enters a directory only when `enter` (given its parent's state and its
/// workspace-relative path) returns its state, and calls `file` for every other
/// entry (with its directory's state). Stops after `limit` directories and says so (`Ok(false)`). Nothing
/// is opened but directories: `file` decides what to read.
pub fn walk<S>(
    root: BorrowedFd,
    limit: usize,
    start: S,
    mut enter: impl FnMut(&S, &[u8]) -> Option<S>,
    mut file: impl FnMut(&S, Entry) -> Result<(), ImportError>,
) -> Result<bool, ImportError> {
    let err = |path: String| move |source| ImportError { path, source };
    let root_dir =
        sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(err(".".into()))?;
    // Depth first (`todo` is a stack): the descriptors held are those of the
    // directories whose subdirectories are still to be read, about the depth.
    let mut todo: Vec<Todo<S>> = Vec::new();
    let mut first = Some((root_dir, Vec::new(), start));
    let mut dirs = 0usize;
    loop {
        let (dir, rel, state) = match first.take() {
            Some(d) => d,
            None => match todo.pop() {
                None => return Ok(true),
                Some(t) => {
                    let Ok(cname) = CString::new(t.name.clone()) else {
                        continue;
                    };
                    match sys::openat(
                        t.parent.as_fd(),
                        &cname,
                        libc::O_RDONLY | libc::O_DIRECTORY,
                        0,
                    ) {
                        Ok(fd) => (fd, t.rel, t.state),
                        // Gone, or replaced by a link or a file since it was listed.
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                            ) =>
                        {
                            log::debug!("walk: skipping {}: {e}", dir_shown(&t.rel));
                            continue;
                        }
                        Err(e) => return Err(err(dir_shown(&t.rel))(e)),
                    }
                }
            },
        };
        dirs += 1;
        if dirs > limit {
            return Ok(false);
        }
        let dir = Arc::new(dir);
        let listing = dir
            .try_clone()
            .and_then(sys::read_dir)
            .map_err(err(dir_shown(&rel)))?;
        for e in listing {
            if e.name == b".git" {
                continue;
            }
            let Ok(cname) = CString::new(e.name.clone()) else {
                continue;
            };
            let kind = match e.kind {
                libc::DT_UNKNOWN => match sys::statat(dir.as_fd(), &cname) {
                    Ok(st) => match st.st_mode & libc::S_IFMT {
                        libc::S_IFDIR => libc::DT_DIR,
                        libc::S_IFREG => libc::DT_REG,
                        libc::S_IFLNK => libc::DT_LNK,
                        _ => libc::DT_UNKNOWN,
                    },
                    Err(_) => continue,
                },
                k => k,
            };
            if kind == libc::DT_DIR {
                let mut child = rel.clone();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(&e.name);
                if let Some(state) = enter(&state, &child) {
                    todo.push(Todo {
                        parent: dir.clone(),
                        name: e.name,
                        rel: child,
                        state,
                    });
                }
                continue;
            }
            file(
                &state,
                Entry {
                    dir: dir.as_fd(),
                    rel_dir: &rel,
                    name: &e.name,
                    kind,
                },
            )?;
        }
    }
}

/// Every path under `root` as [`walk`] meets it: `f(path, kind)` for each entry,
/// directories (`DT_DIR`, given after the rest) included. `Ok(false)`: the walk
/// was cut short at [`MAX_DIRS`].
pub fn each_path(root: BorrowedFd, f: impl FnMut(&[u8], u8)) -> Result<bool, ImportError> {
    each_path_within(root, MAX_DIRS, f)
}

/// [`each_path`] of at most `limit` directories.
pub fn each_path_within(
    root: BorrowedFd,
    limit: usize,
    mut f: impl FnMut(&[u8], u8),
) -> Result<bool, ImportError> {
    let mut dirs: Vec<Vec<u8>> = Vec::new();
    let complete = walk(
        root,
        limit,
        (),
        |_, child| {
            dirs.push(child.to_vec());
            Some(())
        },
        |_, e| {
            f(&e.path(), e.kind);
            Ok(())
        },
    )?;
    for d in &dirs {
        f(d, libc::DT_DIR);
    }
    Ok(complete)
}

/// Every file `policy` imports under `root`, and warnings.
pub fn find(root: BorrowedFd, policy: &Policy) -> Result<Finding, ImportError> {
    find_within(root, policy, MAX_DIRS)
}

/// [`find`], refusing a workspace of more than `limit` directories to look in.
pub fn find_within(
    root: BorrowedFd,
    policy: &Policy,
    limit: usize,
) -> Result<Finding, ImportError> {
    let mut ids = Vec::new();
    let mut found = find_claude(root, policy, &mut ids)?;
    let names: Vec<&String> = policy
        .import_names()
        .iter()
        .filter(|n| !claude::is_name(n))
        .collect();
    if names.is_empty() {
        return Ok(Finding { found, ids });
    }
    let complete = walk(
        root,
        limit,
        Decision::root(),
        |parent, child| {
            let d = policy.decide_child(parent, child, || true);
            (d.action != Action::Deny).then_some(d)
        },
        |_, e| {
            let Some(name) = names.iter().find(|n| n.as_bytes() == e.name) else {
                return Ok(());
            };
            let path = shown(e.rel_dir, e.name);
            let cname = CString::new(e.name).map_err(|_| ImportError {
                path: path.clone(),
                source: std::io::ErrorKind::InvalidInput.into(),
            })?;
            let (text, id) =
                read_file(e.dir, &cname).map_err(|source| ImportError { path, source })?;
            ids.push(id);
            found.push(Found {
                dir: e.rel_dir.to_vec(),
                name: (*name).clone(),
                text,
            });
            Ok(())
        },
    )?;
    if !complete {
        // Fail closed: a file in a directory not reached could not be honoured (and
        // a command could make directories enough to push the person's out of
        // reach).
        return Err(ImportError {
            path: ".".into(),
            source: std::io::Error::other(format!(
                "more than {limit} directories to look for {} in: the files in the \
                 directories not reached could not be honoured",
                names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        });
    }
    Ok(Finding { found, ids })
}

/// What [`find`] found: the files, and each one's `(st_dev, st_ino)` as read (in
/// the same order).
pub struct Finding {
    pub found: Vec<Found>,
    pub ids: Vec<(u64, u64)>,
}

/// `DIR/NAME` (`NAME` at the root), as messages show a file.
fn shown(rel: &[u8], name: &[u8]) -> String {
    let mut p = rel.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    String::from_utf8_lossy(&p).into_owned()
}

/// The directory `rel` (workspace-relative, `""` for the root) under `root`, opened
/// one name at a time without following a link.
pub fn open_dir_at(root: BorrowedFd, rel: &[u8]) -> std::io::Result<OwnedFd> {
    let mut fd = sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    for seg in rel.split(|&b| b == b'/').filter(|s| !s.is_empty()) {
        let c = CString::new(seg).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        fd = sys::openat(fd.as_fd(), &c, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    }
    Ok(fd)
}

/// A workspace-relative directory as messages show it (`.` for the root).
fn dir_shown(rel: &[u8]) -> String {
    if rel.is_empty() {
        ".".into()
    } else {
        String::from_utf8_lossy(rel).into_owned()
    }
}

/// Reads an ignore file: a regular file (a link is refused, not followed), of at
/// most [`MAX_POLICY_BYTES`], in UTF-8; with its `(st_dev, st_ino)`.
fn read_file(dir: BorrowedFd, name: &CStr) -> std::io::Result<(String, (u64, u64))> {
    use std::io::{Error, ErrorKind};
    let fd = sys::openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            Error::new(
                ErrorKind::InvalidInput,
                "it is a symbolic link: veilfs reads an imported file only where it is \
                 (its target could be changed through the mount)",
            )
        } else {
            e
        }
    })?;
    let st = sys::stat(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file: an imported file must be one",
        ));
    }
    let too_big = || {
        Error::new(
            ErrorKind::InvalidInput,
            format!("larger than {} MiB", MAX_POLICY_BYTES >> 20),
        )
    };
    if st.st_size as u64 > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_POLICY_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_POLICY_BYTES {
        return Err(too_big());
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))?;
    Ok((text, (st.st_dev, st.st_ino)))
}
