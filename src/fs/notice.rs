//! Refusal notices: a refused attempt to make a name says so on the daemon's stderr,
//! once per path, naming the rule.
//!
//! A tool that meets a refusal reports a bare `Permission denied`, often deep in its
//! own output (`git clone`: "unable to checkout working tree"). So the first refusal
//! of each path that would have come into existence is said on stderr, e.g.
//!
//! ```text
//! veilfs: deploy/prod.key: create refused: rule 1 "*.key" (<built-in>:25:3): …
//! ```
//!
//! `veilfs mount` says them on its stderr. Under `veilfs run` the terminal is the
//! command's while it runs (a line there would be drawn over a full-screen agent or
//! editor, or land inside the command's own messages), so they go to the session's
//! notices file ([`Destination::Session`], named in the start-up line), and `run`
//! prints one summary when the command has ended; `run --quiet` sends them to the
//! log instead (`-v`). The audit log (`--audit`) has every refusal; these notices
//! are for the person watching.
//!
//! Which refusals: those of the operations that make a name (create, mknod, mkdir,
//! symlink, link, rename), and refused lookups. The kernel looks every name up before
//! it creates it, so a create of a denied name ends at that lookup, which carries no
//! intent; many tools also look before they make (`git` checking out `.env` first
//! `lstat`s it and stops at the refusal). The caller's thread is blocked in its
//! system call until the lookup is answered, so `/proc/<tid>/syscall` says which call
//! it is: `openat` with `O_CREAT`, `mkdirat`, `symlinkat`, `linkat`, `renameat2`, ...
//! are said as "create", "mkdir", ...; anything else (a `stat`, a plain open, a tool
//! probing for a missing `.npmrc`, a call that cannot be read) as "lookup". The line
//! depends only on what the caller asked for, never on whether the name exists, so a
//! notice discloses no more than the `EACCES` itself.
//!
//! Bounded: at most [`MAX_PATHS`] paths are remembered (by a hash, whatever their
//! length) and said (the last [`SHOWN_BYTES`] bytes of a longer one); after that one
//! line says that further refusals go unsaid. Requests never wait on stderr: lines go
//! through a bounded queue to a thread of their own (a line that does not fit is
//! dropped), which is joined when the filesystem goes away.

use std::collections::HashSet;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use parking_lot::Mutex;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;

use super::VeilFs;
use super::refusal::Refusal;

mod session;
pub use session::{Places, Root, SessionNotices};

use crate::policy::Decision;

/// How many distinct paths are said at most during one mount.
pub const MAX_PATHS: usize = 256;

/// The most bytes of a path a notice shows: its end, after `…`.
pub const SHOWN_BYTES: usize = 1024;

/// The operations whose refusal is noticed: each would make a name.
const MAKING: [&str; 6] = ["create", "mknod", "mkdir", "symlink", "link", "rename"];

/// The paths already said, and the thread that says them.
#[derive(Default)]
pub struct Notices {
    inner: Mutex<Inner>,
    /// Where the lines go (stderr by default).
    to: Mutex<Destination>,
}

/// Where refusal notices go.
#[derive(Clone, Debug, Default)]
pub enum Destination {
    /// The daemon's stderr: `veilfs mount`.
    #[default]
    Stderr,
    /// `log` (info): `veilfs run --quiet`.
    Log,
    /// A session's notices file, and its tally for the summary `run` prints when
    /// the command ends: `veilfs run`, whose terminal is the command's while it
    /// runs (a line there would be drawn over a full-screen program).
    Session(std::sync::Arc<SessionNotices>, Root),
}

impl Destination {
    /// The same destination, for the mount `root` of a session.
    pub fn for_root(&self, root: Root) -> Destination {
        match self {
            Destination::Session(s, _) => Destination::Session(s.clone(), root),
            other => other.clone(),
        }
    }
}

#[derive(Default)]
struct Inner {
    /// The paths said, by [`digest`].
    seen: HashSet<u64>,
    /// The limit was reached and said so.
    full: bool,
    tx: Option<SyncSender<String>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notices")
    }
}

impl Notices {
    /// Where the lines go from now on.
    pub fn send_to(&self, to: Destination) {
        *self.to.lock() = to;
    }

    /// Whether a refusal of `path` would still be said (it was not, and the limit is
    /// not reached).
    pub fn wants(&self, path: &[u8]) -> bool {
        let inner = self.inner.lock();
        !inner.full && !inner.seen.contains(&digest(path))
    }

    /// Says, once per path, that `op` on `path` was refused because of `decision`.
    pub fn refused(&self, op: &str, path: &[u8], decision: &Decision) {
        let mut inner = self.inner.lock();
        if inner.full || inner.seen.contains(&digest(path)) {
            return;
        }
        let (shown, line) = if inner.seen.len() >= MAX_PATHS {
            inner.full = true;
            (
                String::new(),
                format!(
                    "veilfs: more than {MAX_PATHS} refused names; further ones are not said here"
                ),
            )
        } else {
            inner.seen.insert(digest(path));
            let (cut, shown) = match path.len().checked_sub(SHOWN_BYTES) {
                Some(start) if start > 0 => ("…", &path[start..]),
                _ => ("", path),
            };
            let shown = format!("{cut}{}", crate::escape::printable(shown));
            let line = format!(
                "veilfs: {shown}: {op} refused: {}",
                crate::escape::escape(&decision.why())
            );
            (shown, line)
        };
        match &*self.to.lock() {
            Destination::Stderr => {}
            Destination::Log => {
                log::info!("{line}");
                return;
            }
            Destination::Session(s, root) => {
                s.write(&shown, &line, op, (*root, path), decision);
                return;
            }
        }
        if inner.tx.is_none() {
            let (tx, rx) = sync_channel::<String>(64);
            let spawned = std::thread::Builder::new()
                .name("veilfs-notice".into())
                .spawn(move || {
                    while let Ok(line) = rx.recv() {
                        eprintln!("{line}");
                    }
                });
            match spawned {
                Ok(t) => {
                    inner.tx = Some(tx);
                    inner.thread = Some(t);
                }
                Err(e) => {
                    log::warn!("refusal notices: no thread ({e}): {line}");
                    return;
                }
            }
        }
        if let Some(tx) = &inner.tx {
            let _ = tx.try_send(line);
        }
    }
}

impl Drop for Notices {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        inner.tx = None;
        if let Some(t) = inner.thread.take() {
            let _ = t.join();
        }
    }
}

/// A path as [`Notices`] remembers it: two paths alike here (one chance in 2^64)
/// share one notice.
fn digest(path: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    h.finish()
}

/// Whether a refusal of `op` is noticed whatever the disk holds.
pub fn makes_a_name(op: &str) -> bool {
    MAKING.contains(&op)
}

impl VeilFs {
    /// The lookup of `name`, by thread `tid`, failed with `e`: says so once if it is
    /// a refusal of that name, as the operation the caller's system call makes.
    pub(crate) fn notice_refused_lookup(&self, tid: u32, name: &OsStr, e: &io::Error) {
        let Some(r) = e.get_ref().and_then(|x| x.downcast_ref::<Refusal>()) else {
            return;
        };
        // The refusal is of this name (not of the directory it is looked up in).
        let of_name = r
            .path
            .strip_suffix(name.as_bytes())
            .is_some_and(|dir| dir.is_empty() || dir.ends_with(b"/"));
        if !of_name || !self.notices.wants(&r.path) {
            return;
        }
        let op = making_syscall(tid).unwrap_or("lookup");
        self.notices.refused(op, &r.path, &r.decision);
    }
}

/// The name-making operation of the system call thread `tid` is blocked in, if it
/// is one: `"create"` for an open with `O_CREAT`, `"mkdir"`, ... `None` for any
/// other call, or when it cannot be read.
pub fn making_syscall(tid: u32) -> Option<&'static str> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/syscall")).ok()?;
    making(&text)
}

/// [`making_syscall`] from the text of `/proc/<tid>/syscall`: the call number, then
/// its arguments in hex.
fn making(text: &str) -> Option<&'static str> {
    let mut words = text.split_whitespace();
    let nr: libc::c_long = words.next()?.parse().ok()?;
    let args: Vec<u64> = words
        .take(6)
        .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let arg = |i: usize| args.get(i).copied();
    let creates = |flags: Option<u64>| (flags? & libc::O_CREAT as u64 != 0).then_some("create");
    match nr {
        libc::SYS_openat => creates(arg(2)),
        libc::SYS_mkdirat => Some("mkdir"),
        libc::SYS_mknodat => Some("mknod"),
        libc::SYS_symlinkat => Some("symlink"),
        libc::SYS_linkat => Some("link"),
        libc::SYS_renameat | libc::SYS_renameat2 => Some("rename"),
        _ => legacy(nr, arg(1)),
    }
}

/// The calls that only some architectures have (`open`, `creat`, `mkdir`, ...).
#[cfg(target_arch = "x86_64")]
fn legacy(nr: libc::c_long, arg1: Option<u64>) -> Option<&'static str> {
    match nr {
        libc::SYS_open => (arg1? & libc::O_CREAT as u64 != 0).then_some("create"),
        libc::SYS_creat => Some("create"),
        libc::SYS_mkdir => Some("mkdir"),
        libc::SYS_mknod => Some("mknod"),
        libc::SYS_symlink => Some("symlink"),
        libc::SYS_link => Some("link"),
        libc::SYS_rename => Some("rename"),
        _ => None,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy(_nr: libc::c_long, _arg1: Option<u64>) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::making;

    #[test]
    fn a_long_path_is_remembered_by_its_digest() {
        let n = super::Notices::default();
        n.send_to(super::Destination::Log);
        let long = vec![b'x'; 250 * 1024];
        assert!(n.wants(&long));
        n.refused("mkdir", &long, &crate::policy::Decision::lost());
        assert!(!n.wants(&long));
        assert!(n.wants(&long[1..]));
        assert_eq!(n.inner.lock().seen.len(), 1);
    }

    fn line(nr: libc::c_long, args: &[u64]) -> String {
        let mut s = nr.to_string();
        for a in args {
            s += &format!(" {a:#x}");
        }
        s + " 0x7ffe3efda4e8 0x7f9b9f00b2ad"
    }

    #[test]
    fn reads_the_intent_of_a_blocked_call() {
        let creat = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let at = |flags: i32| {
            line(
                libc::SYS_openat,
                &[0xffffff9c, 0x1000, flags as u64, 0o644, 0, 0],
            )
        };
        assert_eq!(making(&at(creat)), Some("create"));
        assert_eq!(making(&at(libc::O_RDONLY)), None);
        assert_eq!(
            making(&line(libc::SYS_mkdirat, &[3, 0x1000, 0o755, 0, 0, 0])),
            Some("mkdir")
        );
        assert_eq!(
            making(&line(libc::SYS_renameat2, &[3, 1, 3, 2, 0, 0])),
            Some("rename")
        );
        assert_eq!(
            making(&line(libc::SYS_newfstatat, &[3, 1, 2, 0, 0, 0])),
            None
        );
        assert_eq!(making("running\n"), None);
        assert_eq!(making("-1 0x7ffe3efda4e8 0x7f9b9f00b2ad\n"), None);
    }
}
