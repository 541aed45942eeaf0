//! The session's filesystems: the workspace's and the home directory's, made from
//! the descriptors opened before anything covered them, guarded, and mounted (the
//! outer first, so that the inner one is mounted through it).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::home;
use crate::fs::VeilFs;
use crate::fs::ask::Approvals;
use crate::fs::config::{FsConfig, Git};
use crate::fs::notice::{Destination, Root};
use crate::workspace::load::LoadedPolicy;

/// Why the session's filesystems could not be made or mounted.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The audit log could not be started.
    #[error("audit log {}: {cause}", log.display())]
    Audit { log: PathBuf, cause: std::io::Error },
    /// The filesystem of a root could not be made from its descriptor.
    #[error("cannot serve {}: {cause}", root.display())]
    Filesystem {
        root: PathBuf,
        cause: std::io::Error,
    },
    /// Mounting over a root failed.
    #[error("mounting over {} failed: {cause}", root.display())]
    Mount {
        root: PathBuf,
        cause: std::io::Error,
    },
    /// The session of a mount could not be started.
    #[error("serving {} failed: {cause}", root.display())]
    Serve {
        root: PathBuf,
        cause: std::io::Error,
    },
    /// None of the roots mounted was the workspace.
    #[error("the workspace was not mounted")]
    NoWorkspace,
}

/// The real workspace and home directory (when it gets a mount of its own),
/// opened before anything covered them.
pub(super) struct Roots {
    pub ws: OwnedFd,
    pub home: Option<OwnedFd>,
}

/// The policies the session's filesystems serve, loaded before anything started.
#[derive(Debug)]
pub(super) struct Policies {
    /// The session's agent, whose profile's read-only entries both mounts guard.
    pub agent: Option<&'static crate::policy::agents::Profile>,
    /// The workspace's policy, its imports attached.
    pub workspace: LoadedPolicy,
    /// The workspace is the home directory: the home policy's rules, under the
    /// workspace's.
    pub home_base: Option<crate::policy::RawPolicy>,
    /// Rules for the targets of links the home policy hides by name, after each
    /// mount's own rules.
    pub workspace_after: Vec<crate::policy::RawRule>,
    /// The home policy (`None`: no home mount).
    pub home: Option<LoadedPolicy>,
    pub home_after: Vec<crate::policy::RawRule>,
}

/// Where the session's filesystems come from: the roots' descriptors, the
/// workspace, the home directory's layout, and the policies.
pub(super) struct Sources<'a> {
    pub roots: Roots,
    pub ws: &'a Path,
    pub layout: &'a home::Layout,
    pub policies: Policies,
}

/// The session's filesystems, built and not yet mounted: the workspace's, and the
/// home directory's with its root when it has a mount of its own.
pub(super) struct Filesystems {
    pub workspace: VeilFs,
    pub home: Option<(PathBuf, VeilFs)>,
}

/// What both filesystems share: where refusals are said and logged, the run's own
/// logs, the broker and the mount options.
pub(super) struct Shared<'a> {
    pub notices: &'a Destination,
    /// The run's own logs (the home mount guards those inside it).
    pub logs: &'a [RunLog],
    /// The audit log; given to the filesystems (and dropped with them).
    pub audit: Option<crate::session::audit::Audit>,
    pub broker: &'a std::sync::Arc<crate::fs::ask::Broker>,
    pub opts: &'a crate::session::mount::MountOptions,
}

/// The workspace's filesystem and, when the layout gives the home directory a mount
/// of its own, the home directory's, each built whole (see [`FsConfig`]).
///
/// The workspace is guarded for git; when it is the home directory, every
/// repository, the home policy's ways and veilfs's configuration directories too.
/// The home directory: every repository, the ways to what its policy names,
/// veilfs's configuration directories and the run's logs inside it. A workspace
/// inside the home directory is held by the home policy too (the stricter decision
/// wins); a home directory inside the workspace keeps the way down to it.
pub(super) fn build(src: Sources<'_>, shared: Shared<'_>) -> Result<Filesystems, ServeError> {
    let Sources {
        roots: Roots {
            ws: root_fd,
            home: hfd,
        },
        ws,
        layout,
        policies:
            Policies {
                agent,
                workspace: loaded,
                home_base,
                workspace_after: after,
                home: hp,
                home_after: hafter,
            },
    } = src;
    let mut wcfg = FsConfig {
        notices: Some(shared.notices.clone()),
        git: Git::Root,
        audit: shared.audit.as_ref().map(|a| a.for_root("workspace")),
        approvals: Some(Approvals::new(
            shared.broker.clone(),
            "workspace",
            ws,
            loaded.path.as_deref(),
        )),
        agent_files: agent.and_then(agent_files),
        ..FsConfig::of(shared.opts)
    };
    // No link or moved directory on the way to what the workspace policy names.
    wcfg.ways = home::ways_under(ws, &home::guarded_ways(ws, &loaded.policy));
    if let Some(base) = home_base {
        wcfg.git = Git::Everywhere;
        wcfg.policy_base = Some(base);
        wcfg.policy_after = after;
        wcfg.config_dirs = home::config_dirs_under(ws);
    }
    let home = match (layout, hfd, hp) {
        (home::Layout::Separate(h), Some(fd), Some(hp)) => {
            let hcfg = home_config(h, &hp, hafter, &mut wcfg, ws, &shared);
            // Each mount keeps the other's policy file where it holds it.
            let hcfg = FsConfig {
                other_policy_files: policy_paths_in(h, loaded.path.as_deref()),
                agent_files: wcfg.agent_files.clone(),
                ..hcfg
            };
            wcfg.other_policy_files = policy_paths_in(ws, hp.path.as_deref());
            let hfs =
                VeilFs::from_fd(fd, h, hp.policy, hp.path.as_deref(), hcfg).map_err(|cause| {
                    ServeError::Filesystem {
                        root: h.clone(),
                        cause,
                    }
                })?;
            if let Ok(prefix) = ws.strip_prefix(h) {
                use std::os::unix::ffi::OsStrExt;
                wcfg.outer = Some(crate::fs::protect::Outer {
                    prefix: prefix.as_os_str().as_bytes().to_vec(),
                    policy: hfs.policy_handle(),
                });
            }
            Some((h.clone(), hfs))
        }
        _ => None,
    };
    let fs = VeilFs::from_fd(root_fd, ws, loaded.policy, loaded.path.as_deref(), wcfg).map_err(
        |cause| ServeError::Filesystem {
            root: ws.to_path_buf(),
            cause,
        },
    )?;
    Ok(Filesystems {
        workspace: fs,
        home,
    })
}

/// The agent profile `p`, compiled for its guard
/// ([`crate::fs::gate::places::AgentFiles`]).
fn agent_files(
    p: &crate::policy::agents::Profile,
) -> Option<std::sync::Arc<crate::policy::Policy>> {
    match crate::policy::agents::compiled(p) {
        Ok(policy) => Some(std::sync::Arc::new(policy)),
        Err(e) => {
            log::error!("agent profile {}: {e}", p.name);
            None
        }
    }
}

/// The paths of the policy file `file` inside the mount of `root` (see
/// [`crate::fs::protect::policy_paths`]).
fn policy_paths_in(root: &Path, file: Option<&Path>) -> Vec<Vec<u8>> {
    file.map_or_else(Vec::new, |f| crate::fs::protect::policy_paths(root, f))
}

/// The home directory `h`'s configuration (its policy `hp`, the rules `after` it),
/// and what the workspace's (`wcfg`, of `ws`) learns of it: the home policy's ways
/// and veilfs's configuration directories inside the workspace, and the way down to
/// a home directory inside the workspace. The workspace's outer policy is set once
/// the home filesystem exists (see [`filesystems`]).
fn home_config(
    h: &Path,
    hp: &LoadedPolicy,
    after: Vec<crate::policy::RawRule>,
    wcfg: &mut FsConfig,
    ws: &Path,
    shared: &Shared<'_>,
) -> FsConfig {
    let ways = home::guarded_ways(h, &hp.policy);
    let mut hways = home::ways_under(h, &ways);
    // The way down to the workspace mount when it lies inside: never renamed,
    // never invalidated by name (see `nested`).
    let (down, kept) = home::nested(h, ws);
    hways.extend(down);
    if ws.starts_with(h) {
        wcfg.ways.extend(home::ways_under(ws, &ways));
        wcfg.config_dirs.extend(home::config_dirs_under(ws));
    }
    if h.starts_with(ws) {
        let (down, kept) = home::nested(ws, h);
        wcfg.ways.extend(down);
        wcfg.kept_entries.extend(kept);
    }
    let run_logs = shared
        .logs
        .iter()
        .filter_map(|log| Some((super::within(&log.path, h)?, log.id)))
        .collect();
    FsConfig {
        notices: Some(shared.notices.for_root(Root::Home)),
        git: Git::Everywhere,
        policy_after: after,
        ways: hways,
        config_dirs: home::config_dirs_under(h),
        run_logs,
        kept_entries: kept,
        audit: shared.audit.as_ref().map(|a| a.for_root("home")),
        approvals: Some(Approvals::new(
            shared.broker.clone(),
            "home",
            h,
            hp.path.as_deref(),
        )),
        // `--permissive` tunes the workspace's policy; the home policy is enforced.
        permissive: false,
        ..FsConfig::of(shared.opts)
    }
}

/// What mounting gave.
pub(super) struct Mounted {
    /// The workspace mount's reloader (for `veilfs reload` and the control socket).
    pub reloader: std::sync::Arc<crate::fs::reload::Reloader>,
    /// Some path of a mount asks a person.
    pub asks: bool,
    /// Every mount's reloader, held as long as the session: its watching threads
    /// hold it weakly.
    pub _reloaders: Vec<std::sync::Arc<crate::fs::reload::Reloader>>,
    /// The requests each mount served, for `veilfs stats`.
    pub stats: crate::session::control::Stats,
    /// Every mount got FUSE over io_uring from the kernel.
    pub uring: bool,
}

/// Mounts the workspace's filesystem over `ws` and the home directory's over its
/// root, the outer first; each session served is put in `sessions`, inner first,
/// as it starts (so that whoever holds `sessions` unmounts what was mounted,
/// whatever fails after).
pub(super) fn mount_all(
    built: Filesystems,
    ws: &Path,
    opts: &crate::session::mount::MountOptions,
    sessions: &mut Vec<(fuser::BackgroundSession, PathBuf)>,
) -> Result<Mounted, ServeError> {
    let mut roots = vec![(ws.to_path_buf(), built.workspace)];
    if let Some(h) = built.home {
        if ws.starts_with(&h.0) {
            roots.insert(0, h);
        } else {
            roots.push(h);
        }
    }
    // Only processes in this private namespace can reach the mounts, and the
    // command may run under another uid (`--user`); one audit log for both
    // mounts, set on each filesystem (see [`logs`]).
    let opts = crate::session::mount::MountOptions {
        allow_other: true,
        reports: crate::session::mount::Reports::Log,
        audit: None,
        ..opts.clone()
    };
    let mut reloader = None;
    let mut asks = false;
    let mut reloaders = Vec::new();
    let mut stats = crate::session::control::Stats::default();
    let mut uring = true;
    for (root, fs) in roots {
        // (`--permissive` is in each filesystem's configuration, see `home_config`.)
        let cfg = crate::session::mount::config(&root, &opts);
        let live = crate::session::mount::start(fs, &root, &cfg, &opts).map_err(|cause| {
            ServeError::Mount {
                root: root.clone(),
                cause,
            }
        })?;
        asks |= live.reloader.policy_asks();
        reloaders.push(live.reloader.clone());
        if root == ws {
            reloader = Some(live.reloader);
        }
        stats = stats.mount(&root, live.session.request_counts());
        uring &= live.session.uring();
        let bg = live.session.spawn().map_err(|cause| ServeError::Serve {
            root: root.clone(),
            cause,
        })?;
        sessions.insert(0, (bg, root));
    }
    let reloader = reloader.ok_or(ServeError::NoWorkspace)?;
    Ok(Mounted {
        reloader,
        asks,
        _reloaders: reloaders,
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
    pub writer: Option<crate::session::audit::Writer>,
    /// The audit log, for the broker's records.
    pub audit: Option<crate::session::audit::Audit>,
}

/// Starts the audit log (`--audit`, one for both mounts, each event naming its
/// root), and notes the identities of the run's logs before anything is mounted
/// over them; a log in the home directory is guarded by the home mount (a rename
/// through it would drop the bind mount that keeps it read-only).
pub(super) fn logs(
    opts: &crate::session::mount::MountOptions,
    notices: &Destination,
) -> Result<Logs, ServeError> {
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
    if let Some(target) = &opts.audit {
        let (a, w) = crate::session::audit::Audit::start(
            target,
            opts.audit_all,
            crate::session::audit::queue(opts.audit_all),
        )
        .map_err(|cause| ServeError::Audit {
            log: target.clone(),
            cause,
        })?;
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
    Ok(Logs {
        files,
        writer,
        audit,
    })
}

/// One broker for both mounts (`veilfs prompt` answers the session's questions on
/// its control socket).
pub(super) fn broker(
    opts: &crate::session::mount::MountOptions,
    audit: Option<crate::session::audit::Audit>,
) -> std::sync::Arc<crate::fs::ask::Broker> {
    crate::fs::ask::Broker::new(
        format!("veilfs run (pid {})", std::process::id()),
        opts.ask_timeout,
        audit,
    )
}
