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
    confinement: Confinement<'_>,
    stops: OwnedFd,
) -> ! {
    let fail = |what: &str, e: std::io::Error| -> ! {
        eprintln!("veilfs run: {what}: {e}");
        sys::exit_now(126)
    };
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
    // SAFETY: init is a single-threaded fork about to exec the command; the
    // descriptors it still uses are in `keep`, and the objects that owned the others
    // are never used again (init leaves by `exec` or `_exit`).
    #[allow(unsafe_code)]
    unsafe {
        sys::close_from(3, &keep)
    };
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
    if let Err(e) = super::private::make_private(private)
        .and_then(|_| super::sockets::cover_listed_sockets(&private.sockets))
    {
        fail("cannot keep the host's sockets from the command", e);
    }
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
        let confined = sys::drop_capabilities(&DROPPED_CAPS).and_then(|_| match user {
            Some((uid, gid)) => sys::become_user(uid, gid),
            None => Ok(()),
        });
        if let Err(e) = confined.and_then(|_| sys::set_no_new_privs()) {
            fail("cannot drop privileges", e);
        }
        if confinement.scope
            && let Err(e) = super::sockets::scope_self()
        {
            fail(
                "cannot scope the command's sockets and signals (Landlock)",
                e,
            );
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
