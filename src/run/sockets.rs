//! No host socket by default: what init does in the command's mount namespace so
//! that the command reaches no socket it did not make itself, unless the person
//! passed it by name (`--allow-socket PATH`).
//!
//! A read-only mount does not stop `connect()`, so sockets are kept out of reach
//! by three means, each closing a class:
//!
//! 1. **Private places** ([`make_private`]): an empty tmpfs of the session's own
//!    over `/run` (the runtime directories: `/run/user/UID` with D-Bus, Wayland,
//!    gpg-agent and editor IPC, `/run/veilfs` with the sessions' control sockets,
//!    the Docker, containerd and system bus sockets, `/run/screen`), and over
//!    `/tmp`, `/var/tmp` and `/dev/shm` (tmux's, X11's, ssh-agent's and screen's
//!    sockets, other people's files) unless `--share-tmp`. What the session needs
//!    in those places stays at its own path, cloned before the cover and attached
//!    again on top of it: the workspace and home mounts, the `--writable`
//!    directories, the policy files, the audit log, the current directory, the
//!    allowed sockets, the files of `/etc` links that lead into `/run`
//!    (`resolv.conf`); and, read-only, the command's `PATH` directories. An empty
//!    `/run/lock`, the command's `XDG_RUNTIME_DIR` and
//!    `TMPDIR` are made, owned by the command's user.
//! 2. **The sockets elsewhere** ([`cover_listed_sockets`]): every path socket this
//!    network namespace lists in `/proc/net/unix` that is still in view (outside
//!    the private places and veilfs's own mounts, where the kernel never reaches
//!    the socket behind a name) gets `/dev/null` bound over it: `connect()` then
//!    answers `ECONNREFUSED`. A socket bound after the start, outside the private
//!    places, is not covered.
//! 3. **Abstract sockets and signals** ([`scope_self`]): Landlock's scopes (ABI 6,
//!    Linux 6.12) confine the command to abstract sockets made inside the session,
//!    and to signalling its own processes. Abstract sockets belong to a network
//!    namespace, so without this the host's (X11's `@/tmp/.X11-unix/X0`, D-Bus's)
//!    were reachable even under `--user`.
//!
//! And the IPC namespace of the command's own (SysV shared memory, semaphores,
//! message queues; POSIX queues on a fresh `/dev/mqueue`).
//!
//! Every step fails the start when it fails: a session that would run open does
//! not run.

use std::fs::{self, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use rustix::mount::{MoveMountFlags, OpenTreeFlags};

use super::confine::SCRATCH;

/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` and `LANDLOCK_SCOPE_SIGNAL`.
const SCOPES: u64 = 1 | 2;
/// The first Landlock ABI with both scopes.
pub const SCOPE_ABI: u32 = 6;

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

fn at(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
}

/// Makes the private places (see the module's documentation), in init's mount
/// namespace, before the command starts.
pub fn make_private(p: &Private) -> io::Result<()> {
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
    for r in read_only
        .iter()
        .filter(|r| places.iter().any(|pl| r.starts_with(pl)))
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
    Ok(())
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

/// The path sockets `/proc/net/unix` lists (absolute names only: an abstract or
/// relative name has no place in the tree).
pub fn listed_sockets(table: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // Num RefCount Protocol Flags Type St Inode [Path], the path may hold
            // spaces.
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(' ')?;
                rest = rest[end..].trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Binds `/dev/null` over every socket this network namespace lists that the
/// command would still reach by its path (see the module's documentation).
pub fn cover_listed_sockets(allowed: &[PathBuf]) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let table = fs::read_to_string("/proc/net/unix")?;
    // Never looked up through veilfs's mounts (a refused name would be a notice).
    let fuse = super::confine::fuse_mount_points()?;
    for sock in listed_sockets(&table) {
        if allowed.iter().chain(&fuse).any(|a| sock.starts_with(a)) {
            continue;
        }
        // Gone, or hidden under a private place.
        let Ok(meta) = fs::symlink_metadata(&sock) else {
            continue;
        };
        if !meta.file_type().is_socket() {
            continue;
        }
        let none: Option<&str> = None;
        nix::mount::mount(Some("/dev/null"), &sock, none, MsFlags::MS_BIND, none)
            .map_err(|e| at(&sock, "cannot cover this socket", e.into()))?;
        log::debug!("{}: covered", sock.display());
    }
    Ok(())
}

/// An IPC namespace of the command's own, with a fresh `/dev/mqueue` where the
/// system has one.
pub fn private_ipc() -> io::Result<()> {
    crate::sys::unshare(libc::CLONE_NEWIPC)?;
    let mq = Path::new("/dev/mqueue");
    if mq.is_dir() {
        let none: Option<&str> = None;
        nix::mount::mount(
            Some("mqueue"),
            mq,
            Some("mqueue"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            none,
        )?;
    }
    Ok(())
}

/// Whether this kernel can scope abstract sockets and signals.
pub fn can_scope() -> bool {
    crate::sys::landlock_abi() >= SCOPE_ABI
}

/// Confines the calling process (the command, before `exec`) to the abstract
/// sockets and the processes of its own Landlock domain.
pub fn scope_self() -> io::Result<()> {
    crate::sys::landlock_scope_self(SCOPES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sockets_takes_absolute_paths_with_spaces() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1234 /run/a b.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1235 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03  5044\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1236 rel.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1237 /tmp/tmux-0/default\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1238 /tmp/tmux-0/default\n";
        assert_eq!(
            listed_sockets(table),
            vec![
                PathBuf::from("/run/a b.sock"),
                PathBuf::from("/tmp/tmux-0/default")
            ]
        );
    }

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
