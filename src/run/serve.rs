//! The session's filesystems: the workspace's and the home directory's, made from
//! the descriptors opened before anything covered them, guarded, and mounted (the
//! outer first, so that the inner one is mounted through it).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::home;
use crate::config::LoadedPolicy;
use crate::fs::VeilFs;
use crate::fs::notice::{Destination, Root};

/// The workspace's filesystem over `root_fd` (the real `ws`), with its policy:
/// git guarded; when the workspace is the home directory (`home_base`), every
/// repository, the home policy's ways and veilfs's configuration directories too.
pub(super) fn workspace(
    root_fd: OwnedFd,
    ws: &Path,
    loaded: LoadedPolicy,
    home_base: Option<crate::policy::RawPolicy>,
    after: Vec<crate::policy::RawRule>,
    notices: &Destination,
) -> Result<VeilFs, String> {
    let mut fs = VeilFs::from_fd(root_fd, ws, loaded.policy, loaded.path.as_deref())
        .map_err(|e| format!("cannot serve {}: {e}", ws.display()))?;
    fs.set_notices(notices.clone());
    fs.guard_git();
    if let Some(base) = home_base {
        fs.guard_git_everywhere();
        fs.set_policy_base(base);
        fs.set_policy_after(after);
        let ways = home::guarded_ways(ws, &fs.policy_handle().read().clone());
        fs.guard_ways(home::ways_under(ws, &ways));
        for dir in home::config_dirs_under(ws) {
            fs.guard_config_dir(&dir);
        }
    }
    Ok(fs)
}

/// The home directory's filesystem and its root, when the layout gives the home
/// directory a mount of its own (`home`: the layout, the descriptor of the real
/// home directory, its policy and the rules after it); see [`home_of`].
pub(super) fn home(
    (layout, fd, hp, after): (
        &home::Layout,
        Option<OwnedFd>,
        Option<LoadedPolicy>,
        Vec<crate::policy::RawRule>,
    ),
    fs: &mut VeilFs,
    ws: &Path,
    notices: &Destination,
) -> Result<Option<(PathBuf, VeilFs)>, String> {
    match (layout, fd, hp) {
        (home::Layout::Separate(h), Some(fd), Some(hp)) => Ok(Some((
            h.clone(),
            home_of(fd, h, hp, after, fs, ws, notices)?,
        ))),
        _ => Ok(None),
    }
}

/// The home directory `h`'s filesystem over `fd`, with the home policy `hp`:
/// every repository, the ways to what the policy names and veilfs's configuration
/// directories guarded. The workspace's filesystem `fs` (of `ws`) learns of it: a
/// workspace inside the home directory is held by the home policy too (the
/// stricter decision wins); a home directory inside the workspace keeps the way
/// down to it.
fn home_of(
    fd: OwnedFd,
    h: &Path,
    hp: LoadedPolicy,
    after: Vec<crate::policy::RawRule>,
    fs: &mut VeilFs,
    ws: &Path,
    notices: &Destination,
) -> Result<VeilFs, String> {
    let mut hfs = VeilFs::from_fd(fd, h, hp.policy, hp.path.as_deref())
        .map_err(|e| format!("cannot serve {}: {e}", h.display()))?;
    hfs.set_notices(notices.for_root(Root::Home));
    hfs.guard_git_everywhere();
    hfs.set_policy_after(after);
    let ways = home::guarded_ways(h, &hfs.policy_handle().read().clone());
    let mut hways = home::ways_under(h, &ways);
    // The way down to the workspace mount when it lies inside: never renamed,
    // never invalidated by name (see `nested`).
    hways.extend(home::nested(h, ws, &hfs.inodes()));
    hfs.guard_ways(hways);
    if let Ok(prefix) = ws.strip_prefix(h) {
        use std::os::unix::ffi::OsStrExt;
        fs.set_outer(crate::fs::protect::Outer {
            prefix: prefix.as_os_str().as_bytes().to_vec(),
            policy: hfs.policy_handle(),
        });
        fs.guard_ways(home::ways_under(ws, &ways));
        for dir in home::config_dirs_under(ws) {
            fs.guard_config_dir(&dir);
        }
    }
    for dir in home::config_dirs_under(h) {
        hfs.guard_config_dir(&dir);
    }
    if h.starts_with(ws) {
        fs.guard_ways(home::nested(ws, h, &fs.inodes()));
    }
    Ok(hfs)
}

/// What mounting gave.
pub(super) struct Mounted {
    /// The workspace mount's reloader (for `veilfs reload` and the control socket).
    pub reloader: std::sync::Arc<crate::fs::reload::Reloader>,
    /// Some path of a mount asks a person.
    pub asks: bool,
    /// Every mount's reloader, held as long as the session: its watching threads
    /// hold it weakly.
    pub reloaders: Vec<std::sync::Arc<crate::fs::reload::Reloader>>,
    /// The requests each mount served, for `veilfs stats`.
    pub stats: crate::control::Stats,
    /// Every mount got FUSE over io_uring from the kernel.
    pub uring: bool,
}

/// Mounts `fs` over `ws` and `home` (a root and its filesystem) over its root,
/// the outer first; each session served is put in `sessions`, inner first, as it
/// starts (so that whoever holds `sessions` unmounts what was mounted, whatever
/// fails after).
pub(super) fn mount_all(
    fs: VeilFs,
    home: Option<(PathBuf, VeilFs)>,
    ws: &Path,
    opts: &crate::mount::MountOptions,
    sessions: &mut Vec<(fuser::BackgroundSession, PathBuf)>,
) -> Result<Mounted, String> {
    let mut roots = vec![(ws.to_path_buf(), fs)];
    if let Some(h) = home {
        if ws.starts_with(&h.0) {
            roots.insert(0, h);
        } else {
            roots.push(h);
        }
    }
    // Only processes in this private namespace can reach the mounts, and the
    // command may run under another uid (`--user`); one audit log for both
    // mounts, set on each filesystem (see [`logs`]).
    let opts = crate::mount::MountOptions {
        allow_other: true,
        reports: crate::mount::Reports::Log,
        audit: None,
        ..opts.clone()
    };
    let mut reloader = None;
    let mut asks = false;
    let mut reloaders = Vec::new();
    let mut stats = crate::control::Stats::default();
    let mut uring = true;
    for (root, fs) in roots {
        // `--permissive` tunes the workspace's policy; the home policy is enforced.
        let mut mount_opts = opts.clone();
        mount_opts.permissive &= root == ws;
        let cfg = crate::mount::config(&root, &mount_opts);
        let live = crate::mount::start(fs, &root, &cfg, &mount_opts)
            .map_err(|e| format!("mounting over {} failed: {e}", root.display()))?;
        asks |= live.reloader.policy_asks();
        reloaders.push(live.reloader.clone());
        if root == ws {
            reloader = Some(live.reloader);
        }
        stats = stats.mount(&root, live.session.request_counts());
        uring &= live.session.uring();
        let bg = live
            .session
            .spawn()
            .map_err(|e| format!("serving {} failed: {e}", root.display()))?;
        sessions.insert(0, (bg, root));
    }
    let reloader = reloader.ok_or("the workspace was not mounted")?;
    Ok(Mounted {
        reloader,
        asks,
        reloaders,
        stats,
        uring,
    })
}

/// One of the run's own logs: what it is, where, and its identity before anything
/// was mounted over it.
pub(super) struct RunLog {
    pub what: &'static str,
    pub path: PathBuf,
    pub id: (u64, u64),
}

/// The run's own logs, set up for both filesystems.
pub(super) struct Logs {
    /// The notices file and the audit log, to guard and check.
    pub files: Vec<RunLog>,
    /// The audit log's writer (finished when the mounts are gone).
    pub writer: Option<crate::audit::Writer>,
    /// The audit log, for the broker's records.
    pub audit: Option<crate::audit::Audit>,
}

/// Starts the audit log (`--audit`, one for both mounts, each event naming its
/// root), and notes the identities of the run's logs before anything is mounted
/// over them; a log in the home directory is guarded by the home mount (a rename
/// through it would drop the bind mount that keeps it read-only).
pub(super) fn logs(
    opts: &super::RunOptions,
    notices: &Destination,
    fs: &mut VeilFs,
    mut home: Option<&mut (PathBuf, VeilFs)>,
) -> Result<Logs, String> {
    use std::os::unix::fs::MetadataExt;
    let id_of = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mut files = Vec::new();
    if let Destination::Session(s, _) = notices
        && let Some(id) = id_of(&s.path)
    {
        files.push(RunLog {
            what: "notices file",
            path: s.path.clone(),
            id,
        });
    }
    let (mut writer, mut audit) = (None, None);
    if let Some(target) = &opts.mount.audit {
        let (a, w) = crate::audit::Audit::start(target, opts.mount.audit_all, crate::audit::QUEUE)
            .map_err(|e| format!("audit log {}: {e}", target.display()))?;
        fs.set_audit(a.for_root("workspace"));
        if let Some((_, hfs)) = home.as_deref_mut() {
            hfs.set_audit(a.for_root("home"));
        }
        if target.as_path() != Path::new("-")
            && let Some(id) = id_of(target)
        {
            files.push(RunLog {
                what: "audit log",
                path: target.clone(),
                id,
            });
        }
        (writer, audit) = (Some(w), Some(a));
    }
    if let Some((h, hfs)) = home {
        for log in &files {
            if let Some(rel) = super::within(&log.path, h) {
                hfs.guard_run_log(rel, log.id);
            }
        }
    }
    Ok(Logs {
        files,
        writer,
        audit,
    })
}

/// One broker for both mounts (`veilfs prompt` answers the session's questions on
/// its control socket), set on the workspace's filesystem `fs` (of `ws`) and the
/// home directory's.
pub(super) fn broker(
    opts: &crate::mount::MountOptions,
    audit: Option<crate::audit::Audit>,
    (fs, ws): (&mut VeilFs, &Path),
    home: Option<&mut (PathBuf, VeilFs)>,
) -> std::sync::Arc<crate::fs::ask::Broker> {
    let broker = crate::fs::ask::Broker::new(
        format!("veilfs run (pid {})", std::process::id()),
        opts.ask_timeout,
        audit,
    );
    fs.set_broker(broker.clone(), "workspace", ws);
    if let Some((h, hfs)) = home {
        hfs.set_broker(broker.clone(), "home", h);
    }
    broker
}
