//! What `veilfs run` checks and sets up, before the command starts, so that nothing
//! the command is handed reaches past the mount: descriptors inherited from the
//! caller, and the policy file.

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use nix::sys::stat::SFlag;

use crate::workspace::load;

/// Why `run` will not hand the command what it was given, or cannot keep one of its
/// files from it.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// A standard descriptor is open on a directory of the caller's namespace.
    #[error(
        "{name} (descriptor {fd}) is open on the directory {target}: through it the \
         command could reach the real workspace, around the mount. Start `veilfs run` \
         with {name} on a terminal, a file or a pipe."
    )]
    DirectoryInherited {
        name: &'static str,
        fd: usize,
        target: String,
    },
    /// The policy file could not be found or examined.
    #[error("policy file {}: {cause}", file.display())]
    PolicyFile {
        file: PathBuf,
        cause: std::io::Error,
    },
    /// The policy file has other names the command could write through.
    #[error(
        "the policy file {} has {links} hard links: the command could rewrite it through \
         another name. Give `veilfs run` a policy file with a single link (copy it).",
        file.display()
    )]
    PolicyFileLinks { file: PathBuf, links: u64 },
    /// The policy file could not be bound read-only onto itself.
    #[error("cannot protect the policy file {}: {cause}", file.display())]
    PolicyFileBind {
        file: PathBuf,
        cause: std::io::Error,
    },
    /// One of the run's logs (`what`: the audit log, the notices file) could not be
    /// found or examined.
    #[error("{what} {}: {cause}", log.display())]
    Log {
        what: &'static str,
        log: PathBuf,
        cause: std::io::Error,
    },
    /// A log has other names the command could write through.
    #[error(
        "the {what} {} has {links} hard links: the command could rewrite it through \
         another name. Give `veilfs run` a file with a single link.",
        log.display()
    )]
    LogLinks {
        what: &'static str,
        log: PathBuf,
        links: u64,
    },
    /// A log could not be bound read-only onto itself.
    #[error("cannot protect the {what} {}: {cause}", log.display())]
    LogBind {
        what: &'static str,
        log: PathBuf,
        cause: std::io::Error,
    },
    /// veilfs's configuration directory could not be made, where the command could
    /// have made it.
    #[error("cannot make {}: {cause}", dir.display())]
    ConfigDirMake { dir: PathBuf, cause: std::io::Error },
    /// veilfs's configuration directory could not be bound read-only onto itself.
    #[error("cannot protect {}: {cause}", dir.display())]
    ConfigDirBind { dir: PathBuf, cause: std::io::Error },
}

/// Refuses a descriptor 0–2 that is a directory: it was opened in the caller's mount
/// namespace, where the workspace is not covered, so `openat(fd, "…/.env")` or
/// `/proc/self/fd/N/.env` would reach the real files (from any directory, `..` leads
/// there). Descriptors from 3 up are closed before the command starts.
pub fn check_inherited_fds() -> Result<(), ConfineError> {
    use std::os::fd::AsFd;
    let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let fds: [BorrowedFd; 3] = [i.as_fd(), o.as_fd(), e.as_fd()];
    for (fd, borrowed) in fds.into_iter().enumerate() {
        // A closed descriptor is simply `EBADF`.
        let Ok(st) = nix::sys::stat::fstat(borrowed) else {
            continue;
        };
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            let name = ["stdin", "stdout", "stderr"][fd];
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "a directory".into());
            return Err(ConfineError::DirectoryInherited { name, fd, target });
        }
    }
    Ok(())
}

/// Under `run`, no file the command can change is a source of policy.
///
/// The daemon reads the policy file through a descriptor on its real directory
/// (taken before mounting), so what counts is the file, not its spelling. Inside the
/// workspace the filesystem keeps it read-only by identity. Outside it, the file is
/// bind-mounted read-only onto itself in the command's mount namespace: writes,
/// truncation, `chmod`, and an `unlink` or `rename` onto its name all fail there
/// (`EROFS`/`EBUSY`), while the person outside still edits it at will. A file with
/// other hard links is refused: another name could rewrite it.
pub(super) fn protect_policy_file(
    file: &Path,
    ws: &Path,
    binds: &mut Binds,
) -> Result<(), ConfineError> {
    use std::os::unix::fs::MetadataExt;
    let unseen = |cause| ConfineError::PolicyFile {
        file: file.to_path_buf(),
        cause,
    };
    let canon = file.canonicalize().map_err(unseen)?;
    let meta = std::fs::metadata(&canon).map_err(unseen)?;
    if meta.nlink() > 1 {
        return Err(ConfineError::PolicyFileLinks {
            file: file.to_path_buf(),
            links: meta.nlink(),
        });
    }
    if canon.starts_with(ws) {
        // Served by the mount, which keeps it read-only.
        return Ok(());
    }
    binds
        .bind(&canon)
        .map_err(|cause| ConfineError::PolicyFileBind { file: canon, cause })
}

/// Keeps a log of the run, `what` at `log` (the audit log, the notices file;
/// outside the workspace, as checked at start), from the command: bind-mounted read-only onto itself in the command's mount namespace, so
/// that it cannot be written, truncated, removed or replaced there (the daemon
/// writes through the descriptor it opened before). A log with other hard links is
/// refused (another name could rewrite it).
pub(super) fn protect_log(
    what: &'static str,
    log: &Path,
    binds: &mut Binds,
) -> Result<(), ConfineError> {
    use std::os::unix::fs::MetadataExt;
    let unseen = |cause| ConfineError::Log {
        what,
        log: log.to_path_buf(),
        cause,
    };
    let canon = log.canonicalize().map_err(unseen)?;
    let meta = std::fs::metadata(&canon).map_err(unseen)?;
    if meta.is_file() && meta.nlink() > 1 {
        return Err(ConfineError::LogLinks {
            what,
            log: log.to_path_buf(),
            links: meta.nlink(),
        });
    }
    binds.bind(&canon).map_err(|cause| ConfineError::LogBind {
        what,
        log: canon,
        cause,
    })
}

/// The read-only bind mounts the daemon made in its own mount namespace to keep
/// files from the command (the policy files, the logs, veilfs's configuration), in
/// the order made. [`Binds::undo`] unmounts them, the last first, once the command
/// is gone: a bind of a file inside a veilfs mount would keep that mount busy, and
/// a bound file cannot be removed in this namespace (the notices file that holds
/// no notice).
#[derive(Debug, Default)]
pub(super) struct Binds(Vec<PathBuf>);

impl Binds {
    /// Keeps `path` read-only (see [`bind_read_only`]), noting the bind mount if
    /// one was made.
    fn bind(&mut self, path: &Path) -> std::io::Result<()> {
        if bind_read_only(path)? {
            self.0.push(path.to_path_buf());
        }
        Ok(())
    }

    /// Unmounts the bind mounts made, the last first.
    pub fn undo(&mut self) {
        for path in self.0.drain(..).rev() {
            if let Err(e) = nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH) {
                log::info!("unmounting the bind mount on {}: {e}", path.display());
            }
        }
    }
}

/// Whether `log` still names the file of identity `id` (taken before anything was
/// mounted): a
/// command that can write the directory holding it could move the directory away
/// and put another log in its place.
pub fn log_still_there(log: &Path, id: (u64, u64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(log).is_ok_and(|m| (m.dev(), m.ino()) == id)
}

/// Keeps veilfs's configuration directories ([`load::config_dirs`]) read-only for
/// the command where the home mount (of `home_root`) does not guard them (it lies
/// outside the home directory, say `XDG_CONFIG_HOME=/tmp/cfg`, or there is no home
/// mount): bound read-only onto itself. Where it does not exist yet but the command
/// could make it (a scratch place, a `writable` directory, the workspace `ws`, or
/// with `system_writable`), it is made first (mode 0700), so that no home policy
/// can be planted there for the next run.
pub(super) fn protect_config_dirs(
    home_root: Option<&Path>,
    (system_writable, writable): (bool, &[PathBuf]),
    ws: &Path,
    binds: &mut Binds,
) -> Result<(), ConfineError> {
    for dir in load::config_dirs() {
        let abs = std::path::absolute(&dir).unwrap_or(dir.clone());
        // Guarded by the home mount when it lies in the home directory.
        let real = load::resolve_existing(&abs).unwrap_or_else(|| abs.clone());
        if let Some(root) = home_root
            && let Ok(root) = root.canonicalize()
            && (abs.starts_with(&root) || real.starts_with(&root))
        {
            continue;
        }
        if made_where_writable(&abs, system_writable, writable, ws)? {
            binds
                .bind(&abs)
                .map_err(|cause| ConfineError::ConfigDirBind { dir: abs, cause })?;
        }
    }
    Ok(())
}

/// For [`protect_config_dirs`]: whether the directory `abs` exists, made first
/// (mode 0700) where it does not but the command could make it (a scratch place, a
/// `writable` directory, the workspace `ws`, or anywhere with `system_writable`).
fn made_where_writable(
    abs: &Path,
    system_writable: bool,
    writable: &[PathBuf],
    ws: &Path,
) -> Result<bool, ConfineError> {
    if !abs.exists() {
        let mut places: Vec<PathBuf> = SCRATCH
            .iter()
            .filter_map(|s| Path::new(s).canonicalize().ok())
            .collect();
        places.extend(writable.iter().cloned());
        places.push(ws.to_path_buf());
        // Where it would be made: its nearest existing ancestor, resolved.
        let existing = abs
            .ancestors()
            .find_map(|a| a.canonicalize().ok())
            .unwrap_or_default();
        if !system_writable && !places.iter().any(|p| existing.starts_with(p)) {
            // The read-only system keeps it from being made.
            return Ok(false);
        }
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(abs)
            .map_err(|cause| ConfineError::ConfigDirMake {
                dir: abs.to_path_buf(),
                cause,
            })?;
    }
    Ok(true)
}

/// The kernel's knobs the command must not turn, even as root: `kernel.core_pattern`
/// and `kernel.modprobe` name programs the kernel runs as full root in the first
/// namespaces (where the workspace is not covered), cgroup v1's `release_agent` and
/// `uevent_helper` likewise, and `/sys/fs/fuse/connections` aborts mounts. In the
/// command's mount namespace `/proc/sys`, `/proc/sysrq-trigger` and every mount
/// under `/sys` are read-only; without `CAP_SYS_ADMIN` it cannot remount them.
///
/// Called by init in the command's own mount namespace, after its `/proc` is
/// mounted. `strict`: fail when a remount fails (a real root); in a user namespace
/// the command is no real root and cannot write these anyway.
pub fn kernel_knobs_read_only(strict: bool) -> std::io::Result<()> {
    let mut targets: Vec<std::path::PathBuf> = vec![
        "/proc/sys".into(),
        "/proc/sysrq-trigger".into(),
        // IRQ affinities, PCI configuration space, filesystem knobs.
        "/proc/irq".into(),
        "/proc/bus".into(),
        "/proc/fs".into(),
    ];
    targets.extend(mounts_under(Path::new("/sys")));
    for t in targets {
        if !t.exists() {
            continue;
        }
        if let Err(e) = bind_read_only(&t) {
            if strict {
                return Err(std::io::Error::other(format!("{}: {e}", t.display())));
            }
            log::info!("{}: not made read-only: {e}", t.display());
        }
    }
    Ok(())
}

/// The scratch places that stay writable outside the workspace (when they exist):
/// `/var/tmp` is often a link to `/tmp`; `/dev/shm` lies under `/dev`, which stays
/// as it is anyway.
pub const SCRATCH: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// What stays writable outside the command's mount namespace's read-only system.
#[derive(Debug, Clone)]
pub struct ReadOnlySystem {
    /// Canonical directories the command may write below (the workspace, the
    /// `--writable` directories), besides [`SCRATCH`]. veilfs's own FUSE mounts are
    /// among them, and mount points already: nothing is mounted inside them.
    pub writable: Vec<PathBuf>,
    /// veilfs's runtime directory as the caller sees it (other sessions' control
    /// sockets): read-only even where it lies in a writable place.
    pub runtime_dir: Option<PathBuf>,
}

/// The trees that stay as they are: `/proc` and `/sys`, whose knobs
/// [`kernel_knobs_read_only`] covers, and the mounts below `/dev` (`/dev/pts`,
/// `/dev/shm`, `/dev/mqueue`). The mount at `/dev` itself turns read-only like the
/// rest: no entry can be made or removed in the host's devices, while the device
/// nodes there stay usable (a read-only mount does not stop writing to a device).
const KEPT: [&str; 3] = ["/proc", "/dev/", "/sys"];

/// Makes the system read-only for the command: in init's mount namespace, every
/// mount outside `/proc`, `/dev`, `/sys` and the writable places answers `EROFS`,
/// for root too (without `CAP_SYS_ADMIN` the command cannot remount it).
///
/// 1. Each writable place (given, and [`SCRATCH`]) that lies in no other and is not
///    a mount point is bind-mounted onto itself with its submounts (`MS_REC`, so a
///    FUSE mount below it stays in view): a mount of its own, which stays writable
///    when the mount it lies in turns read-only. A place that is a mount point
///    already (veilfs's FUSE mounts) or lies in another place is left alone.
/// 2. Every other mount of `/proc/self/mountinfo` reached at its mount point is
///    remounted read-only with its other flags (a remount in a user namespace must
///    keep those that lock it). A mount hidden under another (mountinfo lists them,
///    and their path then leads into the covering mount, perhaps a FUSE mount) is
///    out of the command's reach and left alone.
/// 3. The runtime directory, when it lies in a writable place, is bind-mounted
///    read-only onto itself: another session's control socket cannot be removed
///    or replaced. (In `/run` or a private `/tmp` it is out of view anyway, and
///    elsewhere its sockets are covered: see [`super::sockets`].)
///
/// `strict` (a real root): the first failure is returned. Else (a user namespace,
/// where the command could not write the system anyway) failures are logged.
pub fn system_read_only(sys: &ReadOnlySystem, strict: bool) -> std::io::Result<()> {
    let fail = |what: String| -> std::io::Result<()> {
        if strict {
            return Err(std::io::Error::other(what));
        }
        log::info!("{what}");
        Ok(())
    };
    let mut places = sys.writable.clone();
    places.extend(
        SCRATCH
            .iter()
            .filter_map(|s| Path::new(s).canonicalize().ok()),
    );
    places.sort_by(|a, b| {
        (a.components().count(), a.as_os_str()).cmp(&(b.components().count(), b.as_os_str()))
    });
    places.dedup();

    // 1. The writable places become mounts of their own.
    for (i, place) in places.iter().enumerate() {
        if places[..i].iter().any(|p| place.starts_with(p)) {
            continue;
        }
        if let Err(e) = own_mount(place) {
            fail(format!("{}: not kept writable: {e}", place.display()))?;
        }
    }

    // 2. Everything else turns read-only.
    let skip = |point: &Path| {
        KEPT.iter().any(|k| match k.strip_suffix('/') {
            // Below it only.
            Some(top) => point.starts_with(top) && point != Path::new(top),
            None => point.starts_with(k),
        }) || places.iter().any(|p| point.starts_with(p))
    };
    let table = mount_table()?;
    for m in table.iter().filter(|m| !m.read_only && !skip(&m.point)) {
        match open_mount_root(m) {
            Ok(Some(fd)) => {
                if let Err(e) = remount_read_only(&fd, m) {
                    fail(format!("{}: not made read-only: {e}", m.point.display()))?;
                }
            }
            Ok(None) => log::debug!("{}: hidden under another mount", m.point.display()),
            Err(e) => fail(format!("{}: not made read-only: {e}", m.point.display()))?,
        }
    }

    // 3. The runtime directory too.
    if let Some(dir) = sys
        .runtime_dir
        .as_deref()
        .and_then(|d| d.canonicalize().ok())
        && places.iter().any(|p| dir.starts_with(p))
    {
        if in_fuse_mount(&dir, &table) {
            log::info!(
                "{}: the runtime directory lies in a veilfs mount: left as it is",
                dir.display()
            );
        } else if let Err(e) = bind_read_only(&dir) {
            fail(format!("{}: not made read-only: {e}", dir.display()))?;
        }
    }
    Ok(())
}

/// Bind-mounts the directory `place` onto itself with its submounts, unless it is
/// a mount point already.
fn own_mount(place: &Path) -> std::io::Result<()> {
    let fd = open_exact(place)?;
    if is_mount_root(&fd, place)? {
        return Ok(());
    }
    let at = fd_path(&fd);
    let none: Option<&str> = None;
    nix::mount::mount(
        Some(&at),
        &at,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )?;
    Ok(())
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug)]
struct MountEntry {
    id: u64,
    point: PathBuf,
    fstype: Vec<u8>,
    read_only: bool,
    /// The per-mount flags other than `ro`, as `mount(2)` takes them.
    flags: MsFlags,
}

/// The mounts of this mount namespace, in the order of `/proc/self/mountinfo`
/// (a mount after the one it lies in).
fn mount_table() -> std::io::Result<Vec<MountEntry>> {
    use std::os::unix::ffi::OsStrExt;
    let info = std::fs::read("/proc/self/mountinfo")?;
    let mut out = Vec::new();
    for line in info.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let dash = fields
            .iter()
            .skip(6)
            .position(|f| *f == b"-")
            .map(|d| d + 6);
        let (Some(id), Some(point), Some(opts), Some(fstype)) = (
            fields
                .first()
                .and_then(|f| std::str::from_utf8(f).ok()?.parse().ok()),
            fields.get(4),
            fields.get(5),
            dash.and_then(|d| fields.get(d + 1)),
        ) else {
            continue;
        };
        let (read_only, flags) = mount_flags(opts);
        out.push(MountEntry {
            id,
            point: PathBuf::from(std::ffi::OsStr::from_bytes(
                &crate::session::mount::unescape_mountinfo(point),
            )),
            fstype: fstype.to_vec(),
            read_only,
            flags,
        });
    }
    Ok(out)
}

/// Per-mount options of mountinfo (`rw,nosuid,relatime`) as `mount(2)` flags, and
/// whether `ro` is among them. Neither `relatime` nor `noatime` means strict atime.
fn mount_flags(opts: &[u8]) -> (bool, MsFlags) {
    let mut read_only = false;
    let mut flags = MsFlags::empty();
    for o in opts.split(|&b| b == b',') {
        flags |= match o {
            b"ro" => {
                read_only = true;
                continue;
            }
            b"nosuid" => MsFlags::MS_NOSUID,
            b"nodev" => MsFlags::MS_NODEV,
            b"noexec" => MsFlags::MS_NOEXEC,
            b"noatime" => MsFlags::MS_NOATIME,
            b"nodiratime" => MsFlags::MS_NODIRATIME,
            b"relatime" => MsFlags::MS_RELATIME,
            b"nosymfollow" => MsFlags::from_bits_retain(libc::MS_NOSYMFOLLOW),
            _ => continue,
        };
    }
    if !flags.intersects(MsFlags::MS_NOATIME | MsFlags::MS_RELATIME) {
        flags |= MsFlags::MS_STRICTATIME;
    }
    (read_only, flags)
}

/// `path` opened `O_PATH`, refused when it leads anywhere else (a link, or a
/// mount over one of its directories that has a link there).
fn open_exact(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    match std::fs::read_link(fd_path(&fd)) {
        Ok(p) if p == path => Ok(fd),
        Ok(p) => Err(std::io::Error::other(format!("leads to {}", p.display()))),
        Err(e) => Err(e),
    }
}

/// The root of the mount `m` opened `O_PATH` through its mount point, or `None`
/// when the mount point leads elsewhere: the mount is hidden under another.
fn open_mount_root(m: &MountEntry) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    use nix::errno::Errno;
    let fd = match open_exact(&m.point) {
        Ok(fd) => fd,
        Err(e)
            if matches!(
                e.raw_os_error().map(Errno::from_raw),
                Some(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EACCES)
            ) || e.raw_os_error().is_none() =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    Ok((mount_id(&fd)? == m.id).then_some(fd))
}

/// The mount points of the FUSE mounts (veilfs's own) of this namespace.
pub(super) fn fuse_mount_points() -> std::io::Result<Vec<PathBuf>> {
    Ok(mount_table()?
        .into_iter()
        .filter(|m| m.fstype.starts_with(b"fuse"))
        .map(|m| m.point)
        .collect())
}

/// Whether `path` lies in a FUSE mount (veilfs's own: the workspace, the home).
fn in_fuse_mount(path: &Path, table: &[MountEntry]) -> bool {
    let Ok(fd) = nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return false;
    };
    let Ok(id) = mount_id(&fd) else {
        return false;
    };
    table
        .iter()
        .any(|m| m.id == id && m.fstype.starts_with(b"fuse"))
}

/// `/proc/self/fd/N` for `fd`: a system call given it acts on the very object.
fn fd_path(fd: &std::os::fd::OwnedFd) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The id of the mount `path` (its links followed) lies in.
pub(super) fn mount_id_of(path: &Path) -> std::io::Result<u64> {
    let fd = nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    mount_id(&fd)
}

/// The id of the mount `fd` lies in (as mountinfo's first field), from
/// `/proc/self/fdinfo`.
fn mount_id(fd: &std::os::fd::OwnedFd) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no mnt_id in /proc/self/fdinfo"))
}

/// Remounts the mount whose root `fd` is read-only, with its other flags.
fn remount_read_only(fd: &std::os::fd::OwnedFd, m: &MountEntry) -> std::io::Result<()> {
    let none: Option<&str> = None;
    nix::mount::mount(
        none,
        &fd_path(fd),
        none,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | m.flags,
        none,
    )?;
    Ok(())
}

/// The mount points at or under `top`, outermost first.
fn mounts_under(top: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mount_table()
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.point)
        .filter(|mp| mp.starts_with(top))
        .collect();
    out.sort_by_key(|p| p.components().count());
    out.dedup();
    out
}

/// Bind-mounts `path` onto itself (unless it is a mount point already) and makes
/// that mount read-only, with its other flags. Whether a bind mount was made (one
/// made and not made read-only is unmounted again).
pub(super) fn bind_read_only(path: &Path) -> std::io::Result<bool> {
    let fd = open_exact(path)?;
    let made = !is_mount_root(&fd, path)?;
    if !made {
        return remount_path_read_only(fd).map(|()| false);
    }
    let at = fd_path(&fd);
    let none: Option<&str> = None;
    nix::mount::mount(Some(&at), &at, none, MsFlags::MS_BIND, none)?;
    match open_exact(path).and_then(remount_path_read_only) {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
            Err(e)
        }
    }
}

/// Makes the mount whose root `fd` is read-only, with its other flags.
fn remount_path_read_only(fd: std::os::fd::OwnedFd) -> std::io::Result<()> {
    let id = mount_id(&fd)?;
    let table = mount_table()?;
    let Some(m) = table.iter().find(|m| m.id == id) else {
        return Err(std::io::Error::other("not in /proc/self/mountinfo"));
    };
    remount_read_only(&fd, m)
}

/// Whether `fd`, opened at `path`, is the root of a mount (at `path`).
fn is_mount_root(fd: &std::os::fd::OwnedFd, path: &Path) -> std::io::Result<bool> {
    let id = mount_id(fd)?;
    Ok(mount_table()?.iter().any(|m| m.id == id && m.point == path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn flags(opts: &str, read_only: bool, want: MsFlags) {
        assert_eq!(mount_flags(opts.as_bytes()), (read_only, want), "{opts}");
    }

    #[test]
    fn relatime_and_the_locking_flags_are_kept() {
        flags(
            "rw,nosuid,nodev,noexec,relatime",
            false,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RELATIME,
        );
    }

    #[test]
    fn ro_is_reported_not_passed() {
        flags("ro,relatime", true, MsFlags::MS_RELATIME);
    }

    #[test]
    fn no_atime_option_means_strictatime() {
        flags("rw", false, MsFlags::MS_STRICTATIME);
        flags(
            "rw,nodiratime",
            false,
            MsFlags::MS_NODIRATIME | MsFlags::MS_STRICTATIME,
        );
    }

    #[test]
    fn noatime_and_nosymfollow() {
        flags(
            "rw,noatime,nosymfollow",
            false,
            MsFlags::MS_NOATIME | MsFlags::from_bits_retain(libc::MS_NOSYMFOLLOW),
        );
    }

    #[test]
    fn this_namespace_has_a_root_mount() {
        let table = mount_table().unwrap();
        let root = table.iter().find(|m| m.point == Path::new("/"));
        assert!(root.is_some(), "{table:?}");
        let fd = open_exact(Path::new("/")).unwrap();
        assert!(is_mount_root(&fd, Path::new("/")).unwrap());
        // A path through a link is refused.
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(top.join("d")).unwrap();
        std::os::unix::fs::symlink("d", top.join("l")).unwrap();
        assert!(open_exact(&top.join("d")).is_ok());
        let e = open_exact(&top.join("l/.")).unwrap_err();
        assert!(e.to_string().contains("leads to"), "{e}");
    }
}
