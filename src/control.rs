//! The control socket of a running `veilfs mount`: `veilfs reload MNT` asks the
//! daemon serving MNT to reload its policy and prints the outcome.
//!
//! The socket lives in a private runtime directory (`/run/veilfs` for root, else
//! `$XDG_RUNTIME_DIR/veilfs` or `/tmp/veilfs-UID`, mode 0700) under a name derived
//! from the canonical mount point. One request per connection: the line `reload`,
//! answered by `ok MESSAGE` or `error MESSAGE` (MESSAGE may span lines).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fs::reload::Reloader;

fn runtime_dir() -> PathBuf {
    let uid = crate::sys::euid();
    if uid == 0 {
        PathBuf::from("/run/veilfs")
    } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(d).join("veilfs")
    } else {
        PathBuf::from(format!("/tmp/veilfs-{uid}"))
    }
}

/// The socket of the mount at `mnt`.
pub fn socket_path(mnt: &Path) -> io::Result<PathBuf> {
    let canon = mnt.canonicalize()?;
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in canon.as_os_str().as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    Ok(runtime_dir().join(format!("{h:016x}.sock")))
}

/// Removes the socket file when dropped.
pub struct Control {
    path: PathBuf,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts answering `veilfs reload` for the mount at `mnt`.
pub fn serve(mnt: &Path, reloader: Arc<Reloader>) -> io::Result<Control> {
    let path = socket_path(mnt)?;
    let dir = path.parent().expect("socket has a directory");
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::thread::Builder::new()
        .name("veilfs-control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = answer(conn, &reloader);
            }
        })?;
    Ok(Control { path })
}

fn answer(conn: UnixStream, reloader: &Reloader) -> io::Result<()> {
    let mut line = String::new();
    BufReader::new(&conn).take(256).read_line(&mut line)?;
    let reply = match line.trim() {
        "reload" => match reloader.reload() {
            Ok(msg) => {
                crate::mount::report_reload(Ok(msg.clone()));
                format!("ok {msg}\n")
            }
            Err(e) => {
                crate::mount::report_reload(Err(e.clone()));
                format!("error {e}\n")
            }
        },
        other => format!("error unknown request {other:?}: expected \"reload\"\n"),
    };
    (&conn).write_all(reply.as_bytes())
}

/// Asks the daemon serving `mnt` to reload: `Ok(message)` when the new policy is in
/// force, `Err(message)` when the old one stays (or no daemon answers).
pub fn request_reload(mnt: &Path) -> Result<String, ReloadError> {
    let path =
        socket_path(mnt).map_err(|e| ReloadError::NoDaemon(format!("{}: {e}", mnt.display())))?;
    let mut conn = UnixStream::connect(&path).map_err(|e| {
        ReloadError::NoDaemon(format!(
            "no veilfs daemon answers for {} ({}: {e}); is it mounted with `veilfs mount`?",
            mnt.display(),
            path.display()
        ))
    })?;
    conn.write_all(b"reload\n")
        .map_err(|e| ReloadError::NoDaemon(e.to_string()))?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply)
        .map_err(|e| ReloadError::NoDaemon(e.to_string()))?;
    let reply = reply.trim_end();
    if let Some(msg) = reply.strip_prefix("ok ") {
        Ok(msg.to_string())
    } else {
        Err(ReloadError::Refused(
            reply.strip_prefix("error ").unwrap_or(reply).to_string(),
        ))
    }
}

#[derive(Debug)]
pub enum ReloadError {
    /// Nothing answered at the mount's socket.
    NoDaemon(String),
    /// The daemon kept its old policy; the message says why.
    Refused(String),
}
