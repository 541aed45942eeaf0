//! Terminals, for the pty that `veilfs run` puts between the command and the
//! caller's terminal (never on a request path).

use std::io;
use std::os::fd::BorrowedFd;

/// `ioctl(fd, TIOCSCTTY, 0)`: the terminal `fd` becomes the controlling terminal of
/// the calling session leader (which must have none).
pub fn set_controlling_tty(fd: BorrowedFd) -> io::Result<()> {
    Ok(rustix::process::ioctl_tiocsctty(fd)?)
}

/// `TIOCGWINSZ`: the window size of the terminal `fd`.
pub fn window_size(fd: BorrowedFd) -> io::Result<libc::winsize> {
    let w = rustix::termios::tcgetwinsize(fd)?;
    Ok(libc::winsize {
        ws_row: w.ws_row,
        ws_col: w.ws_col,
        ws_xpixel: w.ws_xpixel,
        ws_ypixel: w.ws_ypixel,
    })
}

/// `TIOCSWINSZ`: sets the window size of the terminal `fd` (its foreground process
/// group gets `SIGWINCH`).
pub fn set_window_size(fd: BorrowedFd, ws: &libc::winsize) -> io::Result<()> {
    let w = rustix::termios::Winsize {
        ws_row: ws.ws_row,
        ws_col: ws.ws_col,
        ws_xpixel: ws.ws_xpixel,
        ws_ypixel: ws.ws_ypixel,
    };
    Ok(rustix::termios::tcsetwinsize(fd, w)?)
}
