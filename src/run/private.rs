//! The command's private places, made by init in the command's mount namespace
//! before it starts: an empty tmpfs of the session's own over `/run`, and over
//! `/tmp`, `/var/tmp` and `/dev/shm` unless `--share-tmp` (what the command writes
//! there vanishes with the session; the person's files there are not in view,
//! nor the sockets there: see [`super::sockets`]); and under `--user`, a read-only
//! one over the person's home directories (see [`Private::homes`]), which then
//! show the command the way to the workspace and nothing else.
//!
//! What the session needs in those places stays at its own path, cloned before
//! the cover (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`, so a FUSE mount below
//! comes along) and attached again on top of it, on directories made with the
//! modes and owners they had: the workspace and home mounts, the `--writable`
//! directories, the policy files, the audit log, the current directory, the
//! allowed sockets, the files of `/etc` links that lead into `/run`
//! (`resolv.conf`); and, read-only, the command's `PATH` directories. An empty
//! `/run/lock`, the command's `XDG_RUNTIME_DIR` and `TMPDIR` are made, owned by
//! the command's user. A place the session keeps whole (`--writable /tmp`) stays
//! shared.

use std::fs::{self, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use rustix::mount::{MoveMountFlags, OpenTreeFlags};

use super::confine::SCRATCH;

/// The runtime directories, made private always ([`SCRATCH`]: unless
/// `--share-tmp`).
pub const RUN: &str = "/run";

/// What the command's private places keep, and make.
#[derive(Debug, Clone, Default)]
pub struct Private {
    /// Paths that stay in view at their own path (canonical where they exist).
    pub kept: Vec<PathBuf>,
    /// Paths kept in view read-only: the command's `PATH` directories (a tool
    /// or a virtual environment in `/tmp`).
    pub kept_read_only: Vec<PathBuf>,
    /// `--allow-socket`: sockets, or directories of sockets, left reachable.
    pub sockets: Vec<PathBuf>,
    /// `--share-tmp`: `/tmp`, `/var/tmp` and `/dev/shm` stay shared.
    pub share_tmp: bool,
    /// Directories to make for the command (its `XDG_RUNTIME_DIR`, its
    /// `TMPDIR`) where they lie in a private place, and who owns them.
    pub made: Vec<PathBuf>,
    /// The command's user (uid, gid), as init sees it.
    pub owner: (u32, u32),
    /// Under `--user`: the person's home directories (their `$HOME`, the sudo
    /// user's, and every home directory on the way to the workspace), each covered
    /// by an empty read-only tmpfs with only the kept paths in view: the command
    /// sees the way to the workspace and nothing else of them.
    pub homes: Vec<PathBuf>,
    /// veilfs's own mounts (the workspace, the home directory): a socket bound
    /// through them is the session's (see [`super::supervise`]).
    pub roots: Vec<PathBuf>,
}

/// The private places of this machine: the canonical, distinct directories
/// among [`SCRATCH`] (unless shared) and [`RUN`] (`/var/run` and `/var/tmp` are
/// often links into the others).
pub fn private_places(share_tmp: bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let names = SCRATCH.iter().filter(|_| !share_tmp).chain(Some(&RUN));
    for p in names.filter_map(|s| Path::new(s).canonicalize().ok()) {
        if p.is_dir() && p != Path::new("/") && !out.iter().any(|o| p.starts_with(o)) {
            out.retain(|o| !o.starts_with(&p));
            out.push(p);
        }
    }
    out
}

/// What lives on in `place` once it is covered: the kept paths strictly below it,
/// outermost only (a clone takes what lies below it along).
fn kept_below(place: &Path, kept: &[PathBuf]) -> Vec<PathBuf> {
    let mut below: Vec<PathBuf> = kept
        .iter()
        .filter(|k| k.starts_with(place) && k.as_path() != place)
        .cloned()
        .collect();
    below.sort_by_key(|k| k.components().count());
    let mut out: Vec<PathBuf> = Vec::new();
    for k in below {
        if !out.iter().any(|o| k.starts_with(o)) {
            out.push(k);
        }
    }
    out
}

/// The files that links in `/etc` lead to below `run` (`resolv.conf` into
/// `/run/systemd/resolve`): kept, so that name resolution works as outside.
pub fn etc_links_into(run: &Path) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir("/etc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| e.path().canonicalize().ok())
        .filter(|t| t.starts_with(run) && t.is_file())
        .collect()
}

/// A kept path cloned before its place is covered, and what it takes to attach it
/// again: the directories down to it, with their modes and owners.
struct Clone {
    path: PathBuf,
    tree: std::os::fd::OwnedFd,
    is_dir: bool,
    parents: Vec<(PathBuf, fs::Metadata)>,
}

fn clone_kept(place: &Path, path: &Path) -> io::Result<Clone> {
    let meta = fs::symlink_metadata(path)?;
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    let mut parents = Vec::new();
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| d.starts_with(place) && *d != place) {
        parents.push((d.to_path_buf(), fs::metadata(d)?));
        dir = d.parent();
    }
    parents.reverse();
    Ok(Clone {
        path: path.to_path_buf(),
        tree,
        is_dir: meta.is_dir(),
        parents,
    })
}

/// Makes `dir` on the new tmpfs as it was: its mode and, where this namespace
/// maps them, its owner.
fn make_dir_like(dir: &Path, meta: &fs::Metadata) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    }
    own(dir, (meta.uid(), meta.gid()));
    fs::set_permissions(dir, Permissions::from_mode(meta.mode() & 0o7777))
}

/// Gives `path` to `owner`; an owner this (user) namespace does not map stays
/// the namespace's root.
fn own(path: &Path, (uid, gid): (u32, u32)) {
    if let Err(e) = std::os::unix::fs::lchown(path, Some(uid), Some(gid)) {
        log::debug!("{}: owner {uid}:{gid} not set: {e}", path.display());
    }
}

fn attach(c: Clone) -> io::Result<()> {
    for (d, meta) in &c.parents {
        make_dir_like(d, meta)?;
    }
    if c.is_dir {
        fs::create_dir(&c.path)?;
    } else {
        fs::File::create(&c.path)?;
    }
    rustix::mount::move_mount(
        &c.tree,
        "",
        rustix::fs::CWD,
        &c.path,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?;
    Ok(())
}

/// Covers `place` with an empty tmpfs of its mode and owner, the kept paths below
/// it attached again.
fn cover(place: &Path, kept: &[PathBuf]) -> io::Result<()> {
    let meta = fs::metadata(place)?;
    let clones = kept_below(place, kept)
        .iter()
        .filter(|k| fs::symlink_metadata(k).is_ok())
        .map(|k| clone_kept(place, k).map_err(|e| at(k, "cannot keep it in view", e)))
        .collect::<io::Result<Vec<Clone>>>()?;
    let data = format!("mode={:o}", meta.mode() & 0o7777);
    nix::mount::mount(
        Some("tmpfs"),
        place,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(data.as_str()),
    )
    .map_err(|e| at(place, "cannot cover it", e.into()))?;
    own(place, (meta.uid(), meta.gid()));
    for c in clones {
        let path = c.path.clone();
        attach(c).map_err(|e| at(&path, "cannot keep it in view", e))?;
    }
    Ok(())
}

/// `e`, saying which path and what was being done.
pub(super) fn at(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
}

/// Makes the private places (see the module's documentation), in init's mount
/// namespace, before the command starts; returns those covered.
pub fn make_private(p: &Private) -> io::Result<Vec<PathBuf>> {
    let mut kept = p.kept.clone();
    kept.extend(p.sockets.iter().cloned());
    // Read-only where no writable kept path holds them.
    let read_only: Vec<&PathBuf> = p
        .kept_read_only
        .iter()
        .filter(|r| !kept.iter().any(|k| r.starts_with(k)))
        .collect();
    kept.extend(read_only.iter().map(|r| r.to_path_buf()));
    // A place the session keeps whole (`--writable /tmp`, a workspace at `/tmp`)
    // stays shared.
    let places: Vec<PathBuf> = private_places(p.share_tmp)
        .into_iter()
        .filter(|pl| !kept.iter().any(|k| pl.starts_with(k)))
        .collect();
    for place in &places {
        let run = place.as_path() == Path::new(RUN);
        let mut kept = kept.clone();
        let mut links = Vec::new();
        if run {
            kept.extend(etc_links_into(place));
            links = top_links(place);
        }
        cover(place, &kept)?;
        if run {
            populate_run(place, &links)?;
        }
    }
    let homes = cover_homes(&p.homes, &kept)?;
    for r in read_only
        .iter()
        .filter(|r| places.iter().chain(&homes).any(|pl| r.starts_with(pl)))
    {
        super::confine::bind_read_only(r).map_err(|e| at(r, "cannot make it read-only", e))?;
    }
    for dir in p
        .made
        .iter()
        .filter(|d| places.iter().any(|pl| d.starts_with(pl)))
    {
        fs::create_dir_all(dir).map_err(|e| at(dir, "cannot make it", e))?;
        own(dir, p.owner);
        fs::set_permissions(dir, Permissions::from_mode(0o700))?;
    }
    Ok(places.into_iter().chain(homes).collect())
}

/// Covers each of `homes` that is still in view and that no kept path holds whole
/// with a read-only tmpfs, the kept paths in it attached again; returns those
/// covered.
fn cover_homes(homes: &[PathBuf], kept: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut covered = Vec::new();
    for home in homes {
        if !home.is_dir() || kept.iter().any(|k| home.starts_with(k)) {
            continue;
        }
        cover(home, kept)?;
        let none: Option<&str> = None;
        nix::mount::mount(
            none,
            home,
            none,
            MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            none,
        )
        .map_err(|e| at(home, "cannot make it read-only", e.into()))?;
        covered.push(home.clone());
    }
    Ok(covered)
}

/// The links at the top of `dir` (`/run/shm` to `/dev/shm`), and where they lead.
fn top_links(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| Some((e.path(), fs::read_link(e.path()).ok()?)))
        .collect()
}

/// What programs expect of `/run`: `lock` (1777), `user` (0755), and its links
/// as they were.
fn populate_run(run: &Path, links: &[(PathBuf, PathBuf)]) -> io::Result<()> {
    for (name, mode) in [("lock", 0o1777), ("user", 0o755)] {
        let d = run.join(name);
        if !d.exists() {
            fs::create_dir(&d)?;
        }
        fs::set_permissions(&d, Permissions::from_mode(mode))?;
    }
    for (link, target) in links {
        if fs::symlink_metadata(link).is_err() {
            std::os::unix::fs::symlink(target, link)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_kept_paths_are_cloned() {
        let kept: Vec<PathBuf> = [
            "/tmp/a", "/tmp/a/b", "/tmp", "/tmpx/c", "/tmp/d/e", "/run/x",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(
            kept_below(Path::new("/tmp"), &kept),
            vec![PathBuf::from("/tmp/a"), PathBuf::from("/tmp/d/e")]
        );
    }

    #[test]
    fn places_are_distinct_directories() {
        let all = private_places(false);
        assert!(all.iter().any(|p| p == Path::new("/run")), "{all:?}");
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert!(!a.starts_with(b) && !b.starts_with(a), "{all:?}");
            }
        }
        assert!(private_places(true).iter().all(|p| p.starts_with("/run")));
    }
}
