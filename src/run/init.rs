//! PID 1 of the command's PID namespace: waits for the mount, gives the command a
//! fresh `/proc` and a read-only system outside its writable places, starts it
//! confined in a session of its own (on its own pty, see [`super::pty`]), forwards
//! signals and reaps orphans.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use super::DROPPED_CAPS;
use super::pty::CommandTty;
use crate::sys;

/// What init starts: the command's arguments and exactly the environment it gets.
pub(super) struct Program<'a> {
    pub argv: &'a [OsString],
    pub env: &'a [(OsString, OsString)],
}

/// What init confines the command by, besides its namespaces.
pub(super) struct Confinement<'a> {
    /// What stays writable outside the workspace (`None`: all of it,
    /// `--system-writable`).
    pub system: Option<&'a super::confine::ReadOnlySystem>,
    /// The private places and the sockets left in reach.
    pub private: &'a super::private::Private,
    /// Landlock's scopes (abstract sockets, signals) on the command.
    pub scope: bool,
    /// The command's network (see [`super::net`]).
    pub net: super::net::InitNet,
}

/// PID 1 of the command's PID namespace. Never returns.
#[allow(clippy::too_many_arguments)]
pub(super) fn init_main(
    ready: OwnedFd,
    cwd: &Path,
    program: Program<'_>,
    user: Option<(u32, u32)>,
    tty: Option<CommandTty>,
    real_root: bool,
    mut confinement: Confinement<'_>,
    stops: OwnedFd,
) -> ! {
    let _ = sys::die_with_parent(libc::SIGKILL);
    // This process is a fork of `veilfs run`: its memory still holds the caller's
    // whole environment (the command gets only `env`). The strings `/proc/1/environ`
    // shows are overwritten with zeros; not dumpable, the rest of the memory
    // (`/proc/1/mem`, where freed copies may linger) needs CAP_SYS_PTRACE, which the
    // command never holds. (Not dumpable alone does not hide `environ`: the kernel
    // lets a process of the same uid and capabilities read it.) The command is
    // dumpable again: exec resets it.
    if let Err(e) = super::env::wipe_initial_environment() {
        fail("cannot clear the environment of init", e);
    }
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        fail("cannot hide the memory of init", e.into());
    }
    let mut keep = vec![ready.as_raw_fd(), stops.as_raw_fd()];
    keep.extend(tty.as_ref().map(CommandTty::raw));
    if let super::net::InitNet::Own(Some(to)) = &confinement.net {
        keep.push(to.as_raw_fd());
    }
    // SAFETY: init is a single-threaded fork about to exec the command; the
    // descriptors it still uses are in `keep`, and the objects that owned the others
    // are never used again (init leaves by `exec` or `_exit`).
    #[allow(unsafe_code)]
    unsafe {
        sys::close_from(3, &keep)
    };
    // The network first: the daemon waits for the proxy's listener.
    let own_net = network(&mut confinement.net);
    // Leave the caller's session (and controlling terminal); the pty's slave takes
    // the place of the caller's terminal on fds 0-2.
    if let Err(e) = nix::unistd::setsid() {
        fail("cannot start a session", e.into());
    }
    if let Some(t) = &tty
        && let Err(e) = t.install().and_then(|_| t.attach())
    {
        fail("cannot set up the terminal", e);
    }
    // Wait for the mount; end of file means the daemon gave up.
    match sys::read_byte(ready.as_fd()) {
        Ok(Some(_)) => {}
        _ => sys::exit_now(1),
    }
    drop(ready);
    let handover = command_namespace(real_root, &confinement, user);
    const FORWARD: [i32; 6] = [
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGCONT,
        libc::SIGCHLD,
    ];
    for s in FORWARD {
        let _ = sys::catch_signal(s);
    }
    let _ = sys::block_signals(&FORWARD);

    // SAFETY: init has one thread (it is a fork of `veilfs run` made before any
    // thread started, and starts none).
    #[allow(unsafe_code)]
    let child = match unsafe { sys::fork() } {
        Ok(pid) => pid,
        Err(e) => fail("cannot start the command", e),
    };
    if child == 0 {
        let scope = (confinement.scope, own_net);
        start_command(cwd, program, user, tty, scope, handover);
    }

    loop {
        let Ok(sig) = sys::wait_signal(&FORWARD) else {
            continue;
        };
        if sig == libc::SIGCONT {
            // `run` was continued after the command stopped: its whole group goes on.
            let _ = sys::kill(-child, sig);
            continue;
        }
        if sig != libc::SIGCHLD {
            let _ = sys::kill(child, sig);
            continue;
        }
        // The command stopped (Ctrl-Z in its pty, SIGSTOP): tell the daemon, which
        // stops `run` as a job of the caller's shell.
        {
            use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
            match waitpid(
                nix::unistd::Pid::from_raw(child),
                Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED),
            ) {
                Ok(WaitStatus::Stopped(..)) => {
                    let _ = sys::write_byte(stops.as_fd(), 1);
                }
                // Reaped here: leave with its status, as the loop below would.
                Ok(WaitStatus::Exited(_, code)) => sys::exit_now(code),
                Ok(WaitStatus::Signaled(_, sig, _)) => sys::exit_now(128 + sig as i32),
                _ => {}
            }
        }
        // Reap everything; leave when the command itself is gone.
        while let Ok(Some((pid, exit))) = sys::wait(-1, libc::WNOHANG) {
            if pid == child {
                sys::exit_now(exit.status());
            }
        }
    }
}

/// The command's network namespace, when it gets one of its own (see
/// [`super::net::isolate`]): whether it does.
fn network(net: &mut super::net::InitNet) -> bool {
    match net {
        super::net::InitNet::Host => false,
        super::net::InitNet::Own(hand_to) => {
            if let Err(e) = super::net::isolate(hand_to.take()) {
                fail("cannot give the command a network namespace of its own", e);
            }
            true
        }
    }
}

/// The command's end of the way to the supervisor: a pipe to say where its
/// seccomp listener is, and one to hear it was taken.
struct Handover {
    tell: OwnedFd,
    taken: OwnedFd,
}

impl Handover {
    /// In the command, before `exec`: installs the seccomp filter, has the
    /// supervisor take the listener (by `pidfd_getfd`), and closes it here.
    fn give(self, own_net: bool) -> std::io::Result<()> {
        // Init made itself not dumpable, and so is this fork of it until `exec`:
        // the supervisor could not take the listener without a capability of the
        // first user namespace. Only init and the supervisor exist yet.
        nix::sys::prctl::set_dumpable(true)?;
        // In a network namespace of its own, the families no namespace bounds
        // cannot even be made: a socket of them, listening, would be a way in.
        let refused: &[i32] = if own_net { &super::net::UNBOUNDED } else { &[] };
        let listener = sys::seccomp_connect_listener(refused)?;
        let mut msg = std::process::id().to_le_bytes().to_vec();
        msg.extend_from_slice(&(listener.as_raw_fd() as u32).to_le_bytes());
        nix::unistd::write(self.tell.as_fd(), &msg)?;
        match sys::read_byte(self.taken.as_fd())? {
            Some(_) => Ok(()),
            None => Err(std::io::Error::other("the supervisor is gone")),
        }
    }
}

/// Forks the supervisor of the command's connections (see [`super::supervise`]):
/// it waits for the command's listener, then serves it.
fn start_supervisor(rules: super::supervise::Rules) -> std::io::Result<Handover> {
    let (tell_r, tell_w) = sys::pipe()?;
    let (taken_r, taken_w) = sys::pipe()?;
    // SAFETY: init has one thread; the supervisor starts its own threads only
    // after the fork.
    #[allow(unsafe_code)]
    let pid = unsafe { sys::fork() }?;
    if pid != 0 {
        return Ok(Handover {
            tell: tell_w,
            taken: taken_r,
        });
    }
    let _ = sys::die_with_parent(libc::SIGKILL);
    drop((tell_w, taken_r));
    let listener = take_listener(tell_r.as_fd()).unwrap_or_else(|_| sys::exit_now(1));
    let _ = sys::write_byte(taken_w.as_fd(), 1);
    drop((tell_r, taken_w));
    super::supervise::serve(listener, rules)
}

/// Reads the command's pid and listener number, and takes the listener.
fn take_listener(from: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        match nix::unistd::read(from, &mut msg[got..])? {
            0 => return Err(std::io::Error::other("the command is gone")),
            n => got += n,
        }
    }
    let pid = u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]);
    let fd = u32::from_le_bytes([msg[4], msg[5], msg[6], msg[7]]);
    let pid = rustix::process::Pid::from_raw(pid as i32)
        .ok_or_else(|| std::io::Error::other("no pid"))?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
    Ok(rustix::process::pidfd_getfd(
        &pidfd,
        fd as i32,
        rustix::process::PidfdGetfdFlags::empty(),
    )?)
}

/// Never returns: says what failed, and leaves with 126 (the command did not run).
fn fail(what: &str, e: std::io::Error) -> ! {
    eprintln!("veilfs run: {what}: {e}");
    sys::exit_now(126)
}

/// In init, once the mounts are up: the command's mount and IPC namespaces, a
/// fresh `/proc`, the kernel's knobs and the system read-only, the private places
/// and the covered sockets, and the supervisor of the command's connections.
fn command_namespace(
    real_root: bool,
    confinement: &Confinement<'_>,
    user: Option<(u32, u32)>,
) -> Handover {
    if let Err(e) = sys::unshare(libc::CLONE_NEWNS) {
        fail("cannot create the command's mount namespace", e);
    }
    if let Err(e) = sys::make_mounts_private() {
        fail("cannot make mounts private", e);
    }
    if let Err(e) = super::sockets::private_ipc() {
        fail("cannot give the command an IPC namespace", e);
    }
    if let Err(e) = sys::mount_proc() {
        fail("cannot mount /proc for the command", e);
    }
    if let Err(e) = super::confine::kernel_knobs_read_only(real_root) {
        fail(
            "cannot make the kernel's settings read-only for the command",
            e,
        );
    }
    if let Some(system) = confinement.system
        && let Err(e) = super::confine::system_read_only(system, real_root)
    {
        fail("cannot make the system read-only for the command", e);
    }
    let private = confinement.private;
    let covered = match super::private::make_private(private) {
        Ok(c) => c,
        Err(e) => fail("cannot keep the host's sockets from the command", e),
    };
    if let Err(e) = super::sockets::cover_listed_sockets(&private.sockets) {
        fail("cannot keep the host's sockets from the command", e);
    }
    let rules = super::supervise::Rules {
        mounts: super::supervise::mount_ids(
            &covered
                .iter()
                .chain(&private.roots)
                .cloned()
                .collect::<Vec<_>>(),
        ),
        allowed: private.sockets.clone(),
        user,
        own_net: matches!(confinement.net, super::net::InitNet::Own(_)),
    };
    match start_supervisor(rules) {
        Ok(h) => h,
        Err(e) => fail(
            "cannot start the supervisor of the command's connections",
            e,
        ),
    }
}

/// The command's process, forked by init: its session and terminal, its
/// directory, its privileges dropped (`CAP_NET_RAW` too in a network namespace of
/// its own, `own_net`), Landlock's scopes (`scope`), its
/// connections handed to the supervisor; then `exec`. Never returns.
fn start_command(
    cwd: &Path,
    program: Program<'_>,
    user: Option<(u32, u32)>,
    tty: Option<CommandTty>,
    (scope, own_net): (bool, bool),
    handover: Handover,
) -> ! {
    // No controlling terminal but its pty, if any, so no terminal outside can
    // be written into (TIOCSTI): on a pty, init's session (whose terminal the
    // pty is) with a group of its own in the foreground; else a session of its
    // own, without a terminal.
    let session = match tty {
        Some(t) => t.take_foreground(),
        None => nix::unistd::setsid().map(drop).map_err(Into::into),
    };
    if let Err(e) = session {
        fail("cannot start a session", e);
    }
    sys::reset_signals();
    if let Err(e) = sys::chdir(cwd) {
        fail(&format!("cannot enter {}", cwd.display()), e);
    }
    // The bounding set first, while root: then a command run as another user
    // cannot regain them either (a set-user-ID root binary is already stopped
    // by `no_new_privs`).
    // In a network namespace of its own, raw sockets too (they would reach
    // nothing but its loopback).
    let net_raw = [caps::Capability::CAP_NET_RAW];
    let dropped = DROPPED_CAPS
        .iter()
        .chain(if own_net { &net_raw[..] } else { &[] });
    let dropped: Vec<_> = dropped.copied().collect();
    let confined = sys::drop_capabilities(&dropped).and_then(|_| match user {
        Some((uid, gid)) => sys::become_user(uid, gid),
        None => Ok(()),
    });
    if let Err(e) = confined.and_then(|_| sys::set_no_new_privs()) {
        fail("cannot drop privileges", e);
    }
    if scope && let Err(e) = super::sockets::scope_self() {
        fail(
            "cannot scope the command's sockets and signals (Landlock)",
            e,
        );
    }
    if let Err(e) = handover.give(own_net) {
        fail("cannot put the command's connections under supervision", e);
    }
    let (command, env) = (program.argv, program.env);
    // SAFETY: the command's process has one thread and is about to exec.
    #[allow(unsafe_code)]
    let e = unsafe { sys::execvpe(command, env) };
    eprintln!("veilfs run: {}: {e}", command[0].to_string_lossy());
    sys::exit_now(if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    });
}
