//! How `veilfs run` ends, whatever happens: with the command's status when the
//! command ends, or 128+N when `run` gets signal N and the command does not end.
//!
//! * `SIGTERM`, `SIGINT`, `SIGHUP` and `SIGQUIT` to `run`: the first goes on to the
//!   command (through init). If the command has not ended [`GRACE`] later, or on a
//!   second such signal, init gets `SIGKILL`, which ends the whole PID namespace,
//!   and `run` exits 128+N.
//! * `SIGWINCH` resizes the command's pty.
//! * Teardown (by [`super::taken::Taken`]): once the command is gone, the mount is
//!   unmounted and its session joined, then the audit writer finishes. If something in the daemon still holds
//!   the mount, the FUSE connection is aborted (`MNT_FORCE`) and the mount detached,
//!   so the request threads end; and the teardown gets [`TEARDOWN`] at most, after
//!   which `run` exits anyway (the mount lives only in this process's namespace and
//!   goes with it).

use std::io;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::sys;

/// How long the command has to end after the first signal is passed on.
pub const GRACE: Duration = Duration::from_secs(3);

/// How long unmounting and finishing the audit log may take.
pub const TEARDOWN: Duration = Duration::from_secs(5);

/// Signals that end `run`.
const ENDING: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Signals the daemon takes synchronously, on its signal thread.
const TAKEN: [i32; 5] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGWINCH,
];

/// Blocks the signals the daemon handles, and the terminal's `SIGTTIN`/`SIGTTOU` (so
/// that restoring the caller's terminal never stops it). Call before any thread
/// starts: threads inherit the mask.
pub(super) fn block_signals() -> io::Result<()> {
    sys::block_signals(&TAKEN)?;
    sys::block_signals(&[libc::SIGTTIN, libc::SIGTTOU])
}

enum Event {
    Signal(i32),
    Ended(io::Result<sys::Exit>),
    /// Init says the command stopped.
    Stopped,
}

/// Waits for init (and so the command) to end, handling signals as described above.
/// Returns the status `run` exits with.
/// `stops`: init writes a byte there each time the command stops; `on_stop` then
/// suspends `run` (returning once it is continued), and when it says so the command
/// gets `SIGCONT`.
pub(super) fn wait(
    init: i32,
    stops: std::os::fd::OwnedFd,
    on_winch: impl Fn(),
    on_stop: impl Fn() -> bool,
) -> io::Result<i32> {
    let (tx, rx) = mpsc::channel();
    let signals = tx.clone();
    let stopped = tx.clone();
    std::thread::Builder::new()
        .name("veilfs-stops".into())
        .spawn(move || {
            use std::os::fd::AsFd;
            while let Ok(Some(_)) = sys::read_byte(stops.as_fd()) {
                if stopped.send(Event::Stopped).is_err() {
                    return;
                }
            }
        })?;
    std::thread::Builder::new()
        .name("veilfs-signals".into())
        .spawn(move || {
            while let Ok(sig) = sys::wait_signal(&TAKEN) {
                if signals.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        })?;
    std::thread::Builder::new()
        .name("veilfs-wait".into())
        .spawn(move || {
            let r = loop {
                match sys::wait(init, 0) {
                    Ok(Some((_, exit))) => break Ok(exit),
                    Ok(None) => continue,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Err(e),
                }
            };
            let _ = tx.send(Event::Ended(r));
        })?;

    // The first ending signal and when it came; the signal `run` was killed for.
    let mut first: Option<(i32, Instant)> = None;
    let mut killed: Option<i32> = None;
    let kill_init = |sig: i32, killed: &mut Option<i32>| {
        log::info!("ending the command's namespace (signal {sig})");
        let _ = sys::kill(init, libc::SIGKILL);
        *killed = Some(sig);
    };
    loop {
        let ev = match (first, killed) {
            (Some((sig, at)), None) => match rx.recv_timeout(GRACE.saturating_sub(at.elapsed())) {
                Ok(ev) => ev,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    kill_init(sig, &mut killed);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(io::Error::other("the wait for the command ended"));
                }
            },
            _ => rx
                .recv()
                .map_err(|_| io::Error::other("the wait for the command ended"))?,
        };
        match ev {
            Event::Signal(libc::SIGWINCH) => on_winch(),
            Event::Stopped => {
                if on_stop() {
                    let _ = sys::kill(init, libc::SIGCONT);
                }
            }
            Event::Signal(sig) if ENDING.contains(&sig) => match (first, killed) {
                (None, None) => {
                    let _ = sys::kill(init, sig);
                    first = Some((sig, Instant::now()));
                }
                (Some((s, _)), None) => kill_init(s, &mut killed),
                _ => {}
            },
            Event::Signal(_) => {}
            Event::Ended(r) => {
                let exit = r?;
                return Ok(match killed {
                    Some(sig) => 128 + sig,
                    None => exit.status(),
                });
            }
        }
    }
}

/// Unmounts the workspace, joins the session and finishes the audit log, in at most
/// [`TEARDOWN`].
pub(super) fn unmount(
    sessions: Vec<(fuser::BackgroundSession, std::path::PathBuf)>,
    audit: Option<crate::session::audit::Writer>,
) {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("veilfs-unmount".into())
        .spawn(move || {
            // Inner mounts first.
            for (session, root) in sessions {
                if let Err(e) = session.umount_and_join() {
                    // Busy: something in the daemon still holds the mount. Abort the
                    // connection (the request threads then end) and detach the mount.
                    log::info!("unmounting {} failed ({e}); aborting it", root.display());
                    use nix::mount::{MntFlags, umount2};
                    if umount2(&root, MntFlags::MNT_FORCE | MntFlags::MNT_DETACH).is_err() {
                        let _ = umount2(&root, MntFlags::MNT_DETACH);
                    }
                }
            }
            // The filesystem (and its end of the audit queue) is gone with the session.
            if let Some(w) = audit {
                w.finish();
            }
            let _ = tx.send(());
        });
    if spawned.is_err() || rx.recv_timeout(TEARDOWN).is_err() {
        log::warn!(
            "the mount did not end in time; leaving without it (the audit summary may be missing)"
        );
    }
}

/// What `run` says once the command has ended and the terminal is the person's
/// again: the questions nobody answered, the summary of the refusal notices
/// (whose file the release then removes when it holds none, unless the person
/// named it), and that of the connections the proxy refused (`net`).
pub(super) fn say_at_end(
    opts: &super::RunOptions,
    ws: &std::path::Path,
    broker: &crate::fs::ask::Broker,
    notices: &crate::fs::notice::Destination,
    net: Vec<String>,
) {
    let mut lines = Vec::new();
    let unheard = broker.unheard();
    if unheard > 0 && !opts.quiet {
        lines.push(format!(
            "veilfs: {unheard} question{} of `ask` paths {} refused: nobody was \
             answering; start `veilfs prompt {}` in another terminal before the command asks",
            if unheard == 1 { "" } else { "s" },
            if unheard == 1 { "was" } else { "were" },
            ws.display()
        ));
    }
    if let crate::fs::notice::Destination::Session(s, _) = notices
        && let Some(said) = s.summary()
    {
        lines.extend(said.lines().map(str::to_string));
    }
    if !opts.quiet {
        lines.extend(net);
    }
    if lines.is_empty() {
        return;
    }
    // The command's last words may have left colours or hidden text on: reset
    // before veilfs's own lines, so that they are seen as they are.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if tty {
        eprint!("{RESET}");
    }
    // Names the command chose: never a control character raw. On a terminal, each
    // line also erases what the command left after it on the screen.
    let erase = if tty { "\x1b[K" } else { "" };
    for l in lines {
        eprintln!("{}{erase}", crate::escape::escape(&l));
    }
}

/// What the command may have left set on the person's terminal that would hide or
/// bend veilfs's own lines: the character attributes (colours, hidden text) and
/// set (line drawing) are reset; the scrolling region is made the whole screen
/// again, keeping the cursor where it is (DECSTBM moves it home, so it is saved and
/// restored around); the cursor is shown; and what the command left on the
/// cursor's line is erased.
const RESET: &str = "\x1b[0m\x1b(B\x1b7\x1b[r\x1b8\x1b[?25h\r\x1b[K";

/// Warns of each of the run's logs that is no longer the file this run wrote (the
/// command could write the directory holding it, and moved it away).
pub(super) fn check_logs(logs: &[super::serve::RunLog]) {
    for log in logs {
        if !super::confine::log_still_there(&log.path, log.id) {
            eprintln!(
                "veilfs run: warning: the {} {} is not the file this run wrote: its \
                 directory was changed during the run (keep it where the command cannot \
                 write)",
                log.what,
                log.path.display()
            );
        }
    }
}
