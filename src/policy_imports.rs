//! Finding the ignore files a policy imports (`import = ".cursorignore"`) in a
//! workspace, and attaching them to the policy (see [`crate::policy::Found`]).
//!
//! The walk starts at a descriptor on the real workspace root (never through a
//! veilfs mount), opens each directory from its parent's descriptor without
//! following symbolic links, never enters `.git`, never enters a directory the
//! policy denies by its other rules (nothing in it can be seen anyway), and stops
//! after [`MAX_DIRS`] directories with a warning. An ignore file must be a regular
//! file of at most [`crate::config::MAX_POLICY_BYTES`] in UTF-8: one that is a
//! symbolic link, unreadable or too big stops the load, as a bad policy does, since
//! the rules it holds could not be honoured.

use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use crate::config::{ConfigError, MAX_POLICY_BYTES};
use crate::policy::{Action, Decision, Found, Policy};
use crate::sys;

/// The most directories one walk enters.
pub const MAX_DIRS: usize = 100_000;

/// The built-in default policy's text for a workspace whose root holds the ignore
/// files `names` (see [`present_at`]): the default's rules, then every ignore file
/// name read-only at every depth, then one rule denying what those files list,
/// wherever they are in the workspace. `None` when there are none: the built-in
/// default as it is.
pub fn builtin_text(names: &[&str]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let why = "listed in an ignore file of this workspace: what you told your tools not to read";
    // Every ignore file name, present or not, is read-only at every depth: a name
    // the command could plant (with `!` lines) would be read at the next start or
    // reload, and loosen what the others hide.
    let all = crate::policy::ignore::NAMES;
    let guard = "an ignore file name: the built-in default reads rules from these, so the \
                 command can neither plant nor change one";
    Some(format!(
        "{}\n[[rules]]\naction = \"read-only\"\npaths = {all:?}\nwhy = {guard:?}\n\n\
         [[rules]]\naction = \"deny\"\nimport = {names:?}\nwhy = {why:?}\n",
        crate::policy::DEFAULT_POLICY
    ))
}

/// The ignore files (of [`crate::policy::ignore::NAMES`]) at the root of the
/// workspace whose descriptor is `root`: the built-in default honours those.
pub fn present_at(root: BorrowedFd) -> Vec<&'static str> {
    crate::policy::ignore::NAMES
        .iter()
        .copied()
        .filter(|n| {
            std::ffi::CString::new(*n)
                .ok()
                .is_some_and(|c| sys::statat(root, &c).is_ok())
        })
        .collect()
}

/// Finds the files `policy` imports under the workspace `root` (an absolute path
/// to the real directory) and attaches them. Returns warnings to print: lines that
/// could not be compiled (as `DIR/NAME:LINE:1: warning: ...`) and a walk cut short.
/// A policy without import rules is not walked for.
pub fn attach(policy: &mut Policy, root: &Path) -> Result<Vec<String>, ConfigError> {
    if policy.import_names().is_empty() {
        return Ok(Vec::new());
    }
    let fd = sys::open_dir_path(root).map_err(|source| ConfigError::Import {
        path: root.display().to_string(),
        source,
    })?;
    attach_at(policy, fd.as_fd())
}

/// [`attach`] from a descriptor on the workspace root.
pub fn attach_at(policy: &mut Policy, root: BorrowedFd) -> Result<Vec<String>, ConfigError> {
    if policy.import_names().is_empty() {
        return Ok(Vec::new());
    }
    let (found, mut warnings) = find(root, policy)?;
    let errors = policy.attach_imports(found);
    warnings.splice(
        0..0,
        errors
            .into_iter()
            .map(|e| format!("{}: warning: {} (the line is not applied)", e.at, e.message)),
    );
    Ok(warnings)
}

/// One directory still to read: its parent's descriptor, its name there, its
/// workspace-relative path and its decision.
struct Todo {
    parent: Arc<OwnedFd>,
    name: Vec<u8>,
    rel: Vec<u8>,
    decision: Decision,
}

/// Every file `policy` imports under `root`, and warnings.
pub fn find(root: BorrowedFd, policy: &Policy) -> Result<(Vec<Found>, Vec<String>), ConfigError> {
    let names = policy.import_names();
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    let shown = |rel: &[u8], name: &[u8]| {
        let mut p = rel.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        String::from_utf8_lossy(&p).into_owned()
    };
    let err = |path: String| move |source| ConfigError::Import { path, source };
    let root_dir =
        sys::openat(root, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(err(".".into()))?;
    // Depth first (`todo` is a stack): the descriptors held are those of the
    // directories whose subdirectories are still to be read, about the depth.
    let mut todo: Vec<Todo> = Vec::new();
    let mut first = Some((root_dir, Vec::new(), Decision::root()));
    let mut dirs = 0usize;
    loop {
        let (dir, rel, decision) = match first.take() {
            Some(d) => d,
            None => match todo.pop() {
                None => break,
                Some(t) => {
                    let Ok(cname) = std::ffi::CString::new(t.name.clone()) else {
                        continue;
                    };
                    match sys::openat(
                        t.parent.as_fd(),
                        &cname,
                        libc::O_RDONLY | libc::O_DIRECTORY,
                        0,
                    ) {
                        Ok(fd) => (fd, t.rel, t.decision),
                        // Gone, or replaced by a link or a file since it was listed.
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                            ) =>
                        {
                            log::debug!("import walk: skipping {}: {e}", dir_shown(&t.rel));
                            continue;
                        }
                        Err(e) => return Err(err(dir_shown(&t.rel))(e)),
                    }
                }
            },
        };
        dirs += 1;
        if dirs > MAX_DIRS {
            warnings.push(format!(
                "looked for {} in {MAX_DIRS} directories and stopped: ignore files in \
                 the directories not reached are not applied",
                names.join(", ")
            ));
            break;
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
            let Ok(cname) = std::ffi::CString::new(e.name.clone()) else {
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
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(&e.name);
            if kind == libc::DT_DIR {
                let d = policy.decide_child(&decision, &child, || true);
                if d.action != Action::Deny {
                    todo.push(Todo {
                        parent: dir.clone(),
                        name: e.name,
                        rel: child,
                        decision: d,
                    });
                }
                continue;
            }
            let Some(name) = names.iter().find(|n| n.as_bytes() == e.name) else {
                continue;
            };
            let path = shown(&rel, &e.name);
            let text = read_file(dir.as_fd(), &cname).map_err(err(path))?;
            found.push(Found {
                dir: rel.clone(),
                name: name.clone(),
                text,
            });
        }
    }
    Ok((found, warnings))
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
/// most [`MAX_POLICY_BYTES`], in UTF-8.
fn read_file(dir: BorrowedFd, name: &CStr) -> std::io::Result<String> {
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
    String::from_utf8(bytes)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}
