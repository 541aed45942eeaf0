//! The system calls veilfs makes, as safe functions over well-kept crates.
//!
//! Every path argument of the file half is ONE name relative to a directory
//! descriptor (never a path string resolved against the source), and nothing
//! follows a symbolic link unless it says so. Errors come back as `io::Error` with
//! the `errno`.
//!
//! Which crate serves which call, and why:
//! * [`nix`] (already compiled in through fuser, and a thin layer over the same libc
//!   calls veilfs made by hand before): the `*at` file calls, `stat` (its result is
//!   `libc::stat`, the type the rest of veilfs and fuser's attributes are built
//!   from), directory reading, `copy_file_range`, `fallocate`, `lseek`, `fsync`,
//!   signals masks and waits, `waitpid`, `kill`, `unshare`, `mount`, ids, `prctl`,
//!   `poll`, pipes and `execvpe`.
//! * [`rustix`]: what nix does not offer: extended attributes, `fstatvfs` as a plain
//!   struct, `TIOCSCTTY` and the terminal window size.
//! * [`caps`]: capability sets, by name.
//! * [`inotify`]: the watchers' instances, watches and events (its event reader
//!   replaced a hand-written parser of the kernel's records).
//! * `raw`: the few calls no crate offers safely, each an `unsafe` block with its
//!   `SAFETY` note: `fork` and `clone(CLONE_NEWPID)` (only sound while the process
//!   has one thread, so they are `unsafe fn`), `close_range`, signal dispositions,
//!   `_exit`, the environment change before `execvpe`, an all-zero `stat`,
//!   Landlock's two calls, bringing a namespace's loopback up, descriptors passed
//!   over a Unix socket (`SCM_RIGHTS`: taking ownership of one received needs
//!   `unsafe`), and seccomp's filter and user notifications (with the connect a
//!   supervisor makes for the process it answers). It is
//!   the only module where `unsafe` is allowed (`#![deny(unsafe_code)]` at the crate
//!   root).

mod file;
mod process;
#[allow(unsafe_code)]
mod raw;
mod term;

pub use file::*;
pub use process::*;
pub use raw::{
    Notification, become_user_this_thread, catch_signal, close_from, connect_bytes, execvpe,
    exit_now, fork, fork_new_pid_ns, ignore_signal_default, landlock_abi, landlock_scope_self,
    loopback_up, recv_fd, reset_signals, seccomp_answer, seccomp_connect_listener, seccomp_receive,
    seccomp_still_waits, send_fd, zeroed_stat,
};
pub use term::*;
