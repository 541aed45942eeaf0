//! The executor of a session's plan: one loop that takes the plan's steps in order
//! ([`execute`]), each step a function of what the plan gave it, what every step
//! reads ([`Settings`]) and what the steps before it took ([`Taken`]). A step that
//! fails ends the loop; whatever it ends with, [`Taken`] releases what was taken
//! (see [`super::taken`] for the order).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use super::error::{Failure, RunError};
use super::plan::{Plan, Settings};
use super::step::{InitPlan, NoticesTo, Step};
use super::taken::{Init, Notices, Taken};
use super::{confine, ending, init, pty, serve, startup};
use crate::fs::notice::{Destination, Root, SessionNotices};
use crate::sys;

/// Takes the steps of `plan` in order, and returns the command's status (128+N
/// for signal N), or why a step failed once everything taken is released.
pub(super) fn execute(plan: Plan) -> Result<ExitCode, RunError> {
    let Plan {
        settings, steps, ..
    } = plan;
    let mut taken = Taken::default();
    for step in steps {
        #[cfg(feature = "fault-injection")]
        if crate::session::fault::fails_at(step.name()) {
            return Err(Failure::Injected(step.name()).into());
        }
        log::debug!("step {}", step.name());
        step.run(&settings, &mut taken)?;
    }
    Ok(exit_code(&mut taken)?)
}

impl Step {
    /// Takes this step: what it takes from the system goes to `t`.
    fn run(self, s: &Settings, t: &mut Taken) -> Result<(), RunError> {
        let step = self.name();
        match self {
            Step::OpenRoots { home } => t.roots = Some(open_roots(&s.ws, home.as_deref())?),
            Step::BindControl => t.control = crate::session::control::bind_for_run(&s.ws),
            Step::Notices(to) => t.notices = Some(notices(to)),
            Step::EnterNamespaces { user } => enter_namespaces(user)?,
            Step::ForkInit(plan) => fork_init(*plan, t)?,
            Step::BlockSignals => ending::block_signals().map_err(Failure::Signals)?,
            Step::StartLogs => start_logs(s, t, step)?,
            Step::BuildFilesystems(policies) => build(s, t, *policies, step)?,
            Step::StartProxy(rules) => start_proxy(s, t, *rules, step)?,
            Step::Mount => {
                let built = need(t.built.take(), step, "filesystems")?;
                t.mounted = Some(serve::mount_all(
                    built,
                    &s.ws,
                    &s.opts.mount,
                    &mut t.sessions,
                )?);
            }
            Step::ProtectPolicyFile { file, root, .. } => {
                confine::protect_policy_file(&file, &root, &mut t.binds)?
            }
            Step::ProtectLogs => {
                for log in &t.logs {
                    confine::protect_log(log.what, &log.path, &mut t.binds)?;
                }
            }
            Step::ProtectConfigDirs {
                writable,
                system_writable,
            } => confine::protect_config_dirs(
                super::home_root(&s.layout),
                (system_writable, &writable),
                &s.ws,
                &mut t.binds,
            )?,
            Step::SayRunning => say_running(s, t, step)?,
            Step::ServeControl => serve_control(t, step)?,
            Step::StartCommand => start_command(t, step)?,
            Step::Wait => wait(t, step)?,
            Step::Release => t.release(),
            Step::Report => {
                if let (Some(broker), Some(notices)) = (&t.broker, &t.notices) {
                    let net = t.proxy.as_ref().map(|p| p.summary()).unwrap_or_default();
                    ending::say_at_end(&s.opts, &s.ws, broker, &notices.destination, net);
                }
                ending::check_logs(&t.logs);
            }
        }
        Ok(())
    }
}

/// What an earlier step took, for `step`; missing, the plan is out of order.
fn need<T>(v: Option<T>, step: &'static str, needs: &'static str) -> Result<T, Failure> {
    v.ok_or(Failure::OutOfOrder { step, needs })
}

/// The status `run` exits with: the command's, as [`wait`] noted it.
fn exit_code(t: &mut Taken) -> Result<ExitCode, Failure> {
    match t.status.take() {
        Some(Ok(status)) => Ok(ExitCode::from(status.clamp(0, 255) as u8)),
        Some(Err(e)) => Err(Failure::Wait(e)),
        None => Err(Failure::OutOfOrder {
            step: "the end",
            needs: "wait",
        }),
    }
}

/// The real workspace `ws`, and the real home directory `home` when it gets a mount
/// of its own, opened before anything covers them.
fn open_roots(ws: &Path, home: Option<&Path>) -> Result<serve::Roots, Failure> {
    let open = |d: &Path| {
        sys::open_dir_path(d).map_err(|source| Failure::Open {
            path: d.to_path_buf(),
            source,
        })
    };
    let home = home.map(open).transpose()?;
    Ok(serve::Roots {
        ws: open(ws)?,
        home,
    })
}

/// Where refusal notices go (see [`NoticesTo`]), and what the start-up line says
/// of it: a file that cannot be made leaves them on the terminal.
fn notices(to: NoticesTo) -> Notices {
    let (path, named, places) = match to {
        NoticesTo::Log => {
            return Notices {
                destination: Destination::Log,
                note: startup::Note::default(),
                named: false,
            };
        }
        NoticesTo::File {
            path,
            named,
            places,
        } => (path, named, places),
    };
    match SessionNotices::create(&path, places) {
        Ok(s) => Notices {
            destination: Destination::Session(Arc::new(s), Root::Workspace),
            note: startup::Note::new(
                format!("refusals noted in {}", path.display()),
                format!("refusal notices in {}", path.display()),
            ),
            named,
        },
        Err(e) => {
            log::warn!(
                "{}: refusal notices stay on the terminal: {e}",
                path.display()
            );
            Notices {
                destination: Destination::Stderr,
                note: startup::Note::default(),
                named,
            }
        }
    }
}

/// Why the daemon's namespaces could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("cannot create a mount namespace: {0}")]
    Mount(std::io::Error),
    #[error(
        "cannot create a user namespace as uid {uid}: {cause} (unprivileged user \
         namespaces must be enabled: sysctl user.max_user_namespaces > 0, \
         kernel.unprivileged_userns_clone=1 where it exists, and no AppArmor \
         restriction such as kernel.apparmor_restrict_unprivileged_userns=1)"
    )]
    User { uid: u32, cause: std::io::Error },
    /// One of the user namespace's maps.
    #[error("cannot write {file}: {cause}")]
    Map {
        file: &'static str,
        cause: std::io::Error,
    },
    #[error("cannot make mounts private: {0}")]
    Private(std::io::Error),
}

/// A private mount namespace, inside a new user namespace mapping `user` (uid,
/// gid) to root when there is one (the caller is not root).
fn enter_namespaces(user: Option<(u32, u32)>) -> Result<(), NamespaceError> {
    match user {
        None => sys::unshare(libc::CLONE_NEWNS).map_err(NamespaceError::Mount)?,
        Some((uid, gid)) => {
            sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
                .map_err(|cause| NamespaceError::User { uid, cause })?;
            let write = |file: &'static str, text: String| {
                std::fs::write(file, text).map_err(|cause| NamespaceError::Map { file, cause })
            };
            write("/proc/self/setgroups", "deny".into())?;
            write("/proc/self/uid_map", format!("0 {uid} 1"))?;
            write("/proc/self/gid_map", format!("0 {gid} 1"))?;
        }
    }
    sys::make_mounts_private().map_err(NamespaceError::Private)
}

/// Forks init, PID 1 of the command's new PID namespace ([`init::init_main`]),
/// with the pipes it waits on and signals through and a pty for the command when
/// `run` has a terminal. Init is held by `t` from the moment it exists.
fn fork_init(plan: InitPlan, t: &mut Taken) -> Result<(), Failure> {
    let (ready_r, ready_w) = sys::pipe().map_err(Failure::Pipe)?;
    let (stops_r, stops_w) = sys::pipe().map_err(Failure::Pipe)?;
    // The socket init hands the proxy's listener through.
    let (proxy_ours, proxy_init) = match &plan.net {
        super::net::Network::Proxied(_) => {
            let (a, b) = std::os::unix::net::UnixStream::pair().map_err(Failure::Pipe)?;
            (Some(OwnedFd::from(a)), Some(OwnedFd::from(b)))
        }
        _ => (None, None),
    };
    let (tty, master) = match pty::open().map_err(Failure::Pty)? {
        Some(p) => {
            let (t, m) = p.split();
            (Some(t), Some(m))
        }
        None => (None, None),
    };
    // SAFETY: no thread exists yet (the plan forks init before any step that
    // starts one, see `step`), so forking here is sound.
    #[allow(unsafe_code)]
    let pid = unsafe { sys::fork_new_pid_ns() }.map_err(Failure::Fork)?;
    if pid == 0 {
        // Init: the daemon's ends of the pipes and the real roots are closed here
        // (init leaves by `exec` or `_exit`: nothing else of `t` is dropped here).
        drop((ready_w, t.roots.take(), master, stops_r, proxy_ours));
        let net = match plan.net.own() {
            true => super::net::InitNet::Own(proxy_init),
            false => super::net::InitNet::Host,
        };
        init::init_main(
            ready_r,
            &plan.cwd,
            init::Program {
                argv: &plan.argv,
                env: &plan.env,
            },
            plan.user,
            tty,
            plan.real_root,
            init::Confinement {
                system: plan.system.as_ref(),
                private: &plan.private,
                scope: plan.scope,
                net,
            },
            stops_w,
        );
    }
    t.init = Some(Init::new(pid));
    drop((ready_r, stops_w, tty, proxy_init));
    t.proxy_listener = proxy_ours;
    t.ready = Some(ready_w);
    t.stops = Some(stops_r);
    t.master = master;
    Ok(())
}

/// Starts the audit log (its writer held by `t` at once, so that the release
/// finishes it) and notes the run's logs.
fn start_logs(s: &Settings, t: &mut Taken, step: &'static str) -> Result<(), RunError> {
    let notices = need(t.notices.as_ref(), step, "notices")?;
    let logs = serve::logs(&s.opts.mount, &notices.destination)?;
    t.audit_writer = logs.writer;
    t.audit = logs.audit;
    t.logs = logs.files;
    Ok(())
}

/// Makes the broker, then the filesystems from the roots' descriptors and the
/// `policies`; the audit log goes to them and the broker only.
fn build(
    s: &Settings,
    t: &mut Taken,
    policies: serve::Policies,
    step: &'static str,
) -> Result<(), RunError> {
    let roots = need(t.roots.take(), step, "roots")?;
    let notices = need(t.notices.as_ref(), step, "notices")?;
    // A copy stays for the proxy (the release drops it with the filesystems).
    let audit = t.audit.clone();
    let broker = serve::broker(&s.opts.mount, audit.clone());
    t.broker = Some(broker.clone());
    let shared = serve::Shared {
        notices: &notices.destination,
        logs: &t.logs,
        audit,
        broker: &broker,
        opts: &s.opts.mount,
    };
    let sources = serve::Sources {
        roots,
        ws: &s.ws,
        layout: &s.layout,
        policies,
    };
    t.built = Some(serve::build(sources, shared)?);
    Ok(())
}

/// Starts the proxy on the listener init made in the command's network namespace
/// (init fails, and the socket ends, if it could not make one), deciding by
/// `rules`.
fn start_proxy(
    s: &Settings,
    t: &mut Taken,
    rules: crate::policy::net::NetRules,
    step: &'static str,
) -> Result<(), Failure> {
    let from = need(t.proxy_listener.take(), step, "init")?;
    let inside = need(t.init.as_ref(), step, "init")?.pid();
    let listener = sys::recv_fd(&from).map_err(Failure::Proxy)?;
    let setup = super::net::proxy::Setup {
        rules,
        permissive: s.opts.mount.permissive,
        audit: t.audit.clone(),
        inside,
        ask: t.broker.clone().map(super::net::ask::through),
        notices: need(t.notices.as_ref(), step, "notices")?
            .destination
            .clone(),
    };
    t.proxy = Some(super::net::proxy::Proxy::start(listener, setup).map_err(Failure::Proxy)?);
    Ok(())
}

/// Says the start-up lines (unless `-q`): the session's facts, the `ask` note
/// (some path of the mounts asks), and how requests travel (the kernel granted
/// FUSE over io_uring or not): one line when `--transport uring` was not granted,
/// else in full with `-v`.
fn say_running(s: &Settings, t: &Taken, step: &'static str) -> Result<(), Failure> {
    let mounted = need(t.mounted.as_ref(), step, "mounts")?;
    let notices = need(t.notices.as_ref(), step, "notices")?;
    let opts = &s.opts;
    if opts.quiet {
        return Ok(());
    }
    let ask = startup::ask_note(mounted.asks, &opts.mount, &s.ws);
    s.facts
        .say("running", (ask, notices.note.clone()), opts.verbose);
    if let Some(note) = opts.mount.transport.note(mounted.uring) {
        eprintln!("veilfs: {note}");
    } else if opts.verbose {
        eprintln!(
            "veilfs:   {}",
            crate::session::mount::Transport::said(mounted.uring)
        );
    }
    Ok(())
}

/// Answers `veilfs reload`, `veilfs stats` and `veilfs prompt` from outside the
/// session on the control socket, when it could be bound.
fn serve_control(t: &mut Taken, step: &'static str) -> Result<(), Failure> {
    let mounted = need(t.mounted.as_mut(), step, "mounts")?;
    let broker = need(t.broker.clone(), step, "broker")?;
    let init = need(t.init.as_ref(), step, "init")?.pid();
    let stats = std::mem::take(&mut mounted.stats);
    let reloader = mounted.reloader.clone();
    t.served = t
        .control
        .take()
        .and_then(|c| c.with_stats(stats).serve_run(reloader, broker, init));
    Ok(())
}

/// Starts the command: its terminal relayed to `run`'s (when it has one), then
/// the byte init waits for.
fn start_command(t: &mut Taken, step: &'static str) -> Result<(), Failure> {
    let ready = need(t.ready.take(), step, "init")?;
    if let Some(master) = t.master.take() {
        t.relay = Some(master.relay().map_err(Failure::Relay)?);
    }
    sys::write_byte(ready.as_fd(), 1).map_err(Failure::Start)
}

/// Waits for init (and so the command), the terminal relayed resized and handed
/// back as the command is resized, stopped and continued (see [`ending::wait`]);
/// notes the status, and that init is reaped.
fn wait(t: &mut Taken, step: &'static str) -> Result<(), Failure> {
    let stops = need(t.stops.take(), step, "init")?;
    let init = need(t.init.as_mut(), step, "init")?;
    let relay = t.relay.as_ref();
    let status = ending::wait(
        init.pid(),
        stops,
        || {
            if let Some(r) = relay {
                r.resize();
            }
        },
        || match relay {
            Some(r) => {
                r.suspend();
                true
            }
            // No terminal: nobody to hand control to; whoever stopped the command
            // continues it.
            None => false,
        },
    );
    if status.is_ok() {
        init.reaped();
    }
    t.status = Some(status);
    Ok(())
}
