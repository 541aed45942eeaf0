//! The command's terminal: a pseudo-terminal of its own, in a session of its own,
//! relayed to the caller's terminal by the daemon (as `script` and sudo's `use_pty`
//! do). The command never holds the caller's terminal.
//!
//! Why: a process whose controlling terminal is the caller's can queue input there
//! with `ioctl(fd, TIOCSTI, c)`, and the invoking shell runs that input after
//! `veilfs run` exits, outside the namespace and with the caller's rights
//! (`/proc/sys/dev/tty/legacy_tiocsti` is 1 on many distributions; where the knob
//! does not exist the kernel always allows it). A seccomp filter could refuse
//! `TIOCSTI` and `TIOCLINUX` only; the pty also keeps the terminal's answer-back
//! (replies to escape sequences the command prints) and any input still queued when
//! the command ends away from the invoking shell, and it relies on no
//! `CAP_SYS_ADMIN`-dependent kernel behaviour (`TIOCSTI` on a terminal that is not the
//! caller's controlling one needs `CAP_SYS_ADMIN`, which the command does not have).
//!
//! * Some of fds 0–2 are terminals: the daemon opens a pty with the caller's termios
//!   and window size before forking init. Init calls `setsid()` and makes the slave
//!   the controlling terminal of its new session; the slave takes the place of each
//!   of fds 0–2 that was a terminal (pipes and files stay as they are), and the
//!   command runs in that session, in a process group of its own in the foreground. The daemon puts the
//!   caller's terminal in raw mode when it is in the foreground, relays its input to
//!   the master and the master's output to it, passes on window size changes
//!   (`SIGWINCH`), and always restores the caller's termios. Ctrl-C is the byte
//!   0x03 to the pty, whose line discipline signals the command's foreground process
//!   group: job control works inside.
//! * None is a terminal: the command just calls `setsid()` and has no controlling
//!   terminal at all.
//!
//! When `veilfs run` starts in the background of the caller's terminal, the
//! terminal is left as it is and its input is not relayed.
//!
//! Ctrl-Z, as sudo's `use_pty` does it: the pty is the controlling terminal of
//! init's session and the command runs in a process group of its own in the pty's
//! foreground (so the group is not orphaned, and the terminal's `SIGTSTP` reaches
//! it). When the command stops, init tells the daemon, which gives the caller's
//! terminal back in its own mode and stops its own job; `fg` continues the daemon,
//! which sets raw mode again and continues the command's group.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::termios::{self, SetArg, Termios};

use crate::sys;

/// Which of fds 0–2 are terminals.
type TtyFds = [bool; 3];

/// One of fds 0–2, by number.
enum Std {
    In(io::Stdin),
    Out(io::Stdout),
    Err(io::Stderr),
}

impl AsFd for Std {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Std::In(s) => s.as_fd(),
            Std::Out(s) => s.as_fd(),
            Std::Err(s) => s.as_fd(),
        }
    }
}

fn fd(n: RawFd) -> Std {
    match n {
        0 => Std::In(io::stdin()),
        1 => Std::Out(io::stdout()),
        _ => Std::Err(io::stderr()),
    }
}

/// A pty opened for the command, before init is forked.
pub(super) struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
    ttys: TtyFds,
}

/// The command's side of the pty, handed to init.
pub(super) struct CommandTty {
    slave: OwnedFd,
    ttys: TtyFds,
}

/// Opens a pty shaped like the caller's terminal when any of fds 0–2 is one.
pub(super) fn open() -> io::Result<Option<Pty>> {
    let ttys: TtyFds = [0, 1, 2].map(|n| nix::unistd::isatty(fd(n)).unwrap_or(false));
    let Some(first) = (0..3).find(|&n| ttys[n as usize]) else {
        return Ok(None);
    };
    let outer = fd(first);
    let mode = termios::tcgetattr(&outer).ok();
    let size = sys::window_size(outer.as_fd()).ok();
    let p = nix::pty::openpty(size.as_ref(), mode.as_ref()).map_err(io::Error::from)?;
    Ok(Some(Pty {
        master: p.master,
        slave: p.slave,
        ttys,
    }))
}

impl Pty {
    /// Splits into the command's side (for init) and the daemon's (the master).
    pub(super) fn split(self) -> (CommandTty, Master) {
        (
            CommandTty {
                slave: self.slave,
                ttys: self.ttys,
            },
            Master {
                fd: self.master,
                ttys: self.ttys,
            },
        )
    }
}

impl CommandTty {
    /// The descriptor init keeps open for the command.
    pub(super) fn raw(&self) -> RawFd {
        self.slave.as_raw_fd()
    }

    /// In init: the slave replaces each of fds 0–2 that was a terminal, so that
    /// neither init nor the command holds the caller's terminal.
    pub(super) fn install(&self) -> io::Result<()> {
        let s = self.slave.as_fd();
        let dups = [
            nix::unistd::dup2_stdin,
            nix::unistd::dup2_stdout,
            nix::unistd::dup2_stderr,
        ];
        for (on, dup) in self.ttys.iter().zip(dups) {
            if *on {
                dup(s)?;
            }
        }
        Ok(())
    }

    /// In init, after `setsid()`: the slave becomes the controlling terminal of
    /// init's session, the session the command runs in.
    pub(super) fn attach(&self) -> io::Result<()> {
        sys::set_controlling_tty(self.slave.as_fd())
    }

    /// In the command, before `exec`: a process group of its own, in the terminal's
    /// foreground. Its parent (init) is in the same session but another group, so the
    /// group is not orphaned and the terminal's Ctrl-Z stops it (the kernel discards
    /// `SIGTSTP` from the terminal to an orphaned group); init sees the stop and
    /// `run` stops as a job of the caller's shell.
    pub(super) fn take_foreground(self) -> io::Result<()> {
        use nix::unistd::{Pid, getpid, setpgid, tcsetpgrp};
        setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
        // From a background group, `tcsetpgrp` raises SIGTTOU: blocked here.
        sys::block_signals(&[libc::SIGTTOU])?;
        tcsetpgrp(self.slave.as_fd(), getpid())?;
        Ok(())
    }
}

/// The daemon's side of the pty.
pub(super) struct Master {
    fd: OwnedFd,
    ttys: TtyFds,
}

impl Master {
    /// Starts relaying: the caller's terminal goes raw (when in the foreground), its
    /// input goes to the command and the command's output comes back.
    pub(super) fn relay(self) -> io::Result<Relay> {
        let master = Arc::new(self.fd);
        // Where the command's output goes: the caller's terminal, as an output fd.
        let out = [1, 2, 0]
            .into_iter()
            .find(|&n| self.ttys[n as usize])
            .unwrap_or(1);
        let size_from = (0..3).find(|&n| self.ttys[n as usize]).unwrap_or(0);
        let foreground =
            self.ttys[0] && nix::unistd::tcgetpgrp(fd(0)).ok() == Some(nix::unistd::getpgrp());
        // Built first, so that the terminal is restored on every way out below.
        let mut relay = Relay {
            master: master.clone(),
            size_from,
            restore: None,
            raw: None,
            output: None,
        };
        if foreground {
            let saved = termios::tcgetattr(fd(0))?;
            let mut raw = saved.clone();
            termios::cfmakeraw(&mut raw);
            termios::tcsetattr(fd(0), SetArg::TCSADRAIN, &raw)?;
            relay.restore = Some(saved);
            relay.raw = Some(raw);
            let m = master.clone();
            std::thread::Builder::new()
                .name("veilfs-tty-in".into())
                .spawn(move || copy_input(&m))?;
        }
        relay.output = Some(
            std::thread::Builder::new()
                .name("veilfs-tty-out".into())
                .spawn(move || copy(&*master, fd(out)))?,
        );
        Ok(relay)
    }
}

/// Copies the caller's terminal to the pty until either fails or ends. While `run`
/// is a stopped or background job, reading the terminal fails with `EIO` (`SIGTTIN`
/// is blocked): wait and read again, so input flows once it is back in front.
fn copy_input(master: &OwnedFd) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match nix::unistd::read(fd(0).as_fd(), &mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EIO) => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(_) => return,
        };
        if !write_all(master.as_fd(), &buf[..n]) {
            return;
        }
    }
}

/// Copies `from` to `to` until either end fails or ends (a pty master reads `EIO`
/// once no process holds the slave).
fn copy(from: impl AsFd, to: impl AsFd) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match nix::unistd::read(from.as_fd(), &mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        };
        if !write_all(to.as_fd(), &buf[..n]) {
            return;
        }
    }
}

/// Writes all of `bytes` to `to`; `false` when it fails or takes no more.
fn write_all(to: BorrowedFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        match nix::unistd::write(to, bytes) {
            Ok(0) => return false,
            Ok(w) => bytes = &bytes[w..],
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
    true
}

/// The relay between the caller's terminal and the pty; the caller's termios is
/// restored when it is dropped, however `run` ends.
pub(super) struct Relay {
    master: Arc<OwnedFd>,
    size_from: RawFd,
    restore: Option<Termios>,
    /// The raw mode set while relaying (to set again when `run` is resumed).
    raw: Option<Termios>,
    output: Option<JoinHandle<()>>,
}

impl Relay {
    /// Passes the caller's window size on to the pty (on `SIGWINCH`).
    pub(super) fn resize(&self) {
        if let Ok(ws) = sys::window_size(fd(self.size_from).as_fd()) {
            let _ = sys::set_window_size(self.master.as_fd(), &ws);
        }
    }

    /// The command stopped (Ctrl-Z, or `SIGSTOP`): gives the caller's terminal back in
    /// its own mode and stops this job as the terminal's Ctrl-Z would, so the
    /// caller's shell takes over. Returns when the job is continued (`fg`/`bg`); the
    /// terminal goes raw again if `run` is then in the foreground.
    pub(super) fn suspend(&self) {
        // What the command wrote before it stopped reaches the terminal first: wait
        // (a little) until the output relay has read everything the pty holds.
        for _ in 0..50 {
            if !sys::poll_readable(self.master.as_fd(), 0).unwrap_or(false) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Some(saved) = &self.restore
            && let Err(e) = termios::tcsetattr(fd(0), SetArg::TCSADRAIN, saved)
        {
            log::warn!("cannot restore the terminal: {e}");
        }
        let _ = std::io::stdout().flush();
        // SIGTSTP to our own process group: the whole job stops (init and the
        // command are in a session of their own).
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), nix::sys::signal::SIGTSTP);
        // Continued.
        let foreground = nix::unistd::tcgetpgrp(fd(0)).ok() == Some(nix::unistd::getpgrp());
        if foreground && let Some(raw) = &self.raw {
            let _ = termios::tcsetattr(fd(0), SetArg::TCSADRAIN, raw);
        }
        self.resize();
    }

    /// Once the command's namespace is gone: writes out what the command left in the
    /// pty (waiting at most `limit`), then restores the caller's terminal.
    pub(super) fn finish(mut self, limit: Duration) {
        if let Some(t) = self.output.take() {
            let start = Instant::now();
            while !t.is_finished() && start.elapsed() < limit {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                log::warn!("the command's terminal output did not end; not waiting for it");
            }
        }
        let _ = io::stdout().flush();
        self.restore_terminal();
    }

    fn restore_terminal(&mut self) {
        if let Some(saved) = self.restore.take() {
            // SIGTTOU is blocked in the daemon, so this works from the background too.
            if let Err(e) = termios::tcsetattr(fd(0), SetArg::TCSADRAIN, &saved) {
                log::error!("cannot restore the terminal: {e}");
            }
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.restore_terminal();
    }
}
