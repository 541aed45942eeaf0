//! What a session's steps took from the system, held by one value, [`Taken`],
//! that releases it on every way out of the executor: the command's end, a
//! refusal, a failed system call, a panic. No step releases what another took,
//! and there is no teardown written anywhere else.
//!
//! What stays true:
//! * **One order of release** ([`Taken::release`]): init first (killed, which ends
//!   the command's whole PID namespace, and reaped, unless it was waited for), so
//!   that nothing runs on the mounts; then the terminal's relay (what the command
//!   left in the pty written out, the caller's terminal restored); then the broker
//!   closed (nothing waits on a person any more, and its end of the audit log
//!   goes); then the proxy stopped (its connections ended, its end of the audit
//!   log gone); then the read-only bind mounts that kept files from the command
//!   undone, the last first (one inside a veilfs mount would keep it busy); then
//!   every other sender of the audit log dropped and the mounts unmounted, inner
//!   first, and the audit log's writer finished, within
//!   [`super::ending::TEARDOWN`].
//! * **Then the rest, by dropping:** the control socket's file removed, the notices
//!   file removed when it holds no notice and the person did not name it, the
//!   descriptors closed. On the way out after [`super::step::Step::Report`], that is
//!   after the person was told.
//! * **Release is idempotent:** each resource is taken out of its place as it is
//!   released, so the `release` step and the drop that follows it release each
//!   thing once.
//! * **Nothing here runs in init:** init leaves by `exec` or `_exit`, so the
//!   daemon's guards, copied by the fork, are never dropped there.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::{ending, pty, serve, startup};
use crate::fs::notice::Destination;
use crate::sys;

/// Everything a session's steps took, released in one order (see the module).
#[derive(Default)]
pub(super) struct Taken {
    /// Init, until it is waited for.
    pub init: Option<Init>,
    /// The pipe init waits on before it starts the command (closing it makes init
    /// leave).
    pub ready: Option<OwnedFd>,
    /// The pipe on which init says the command stopped.
    pub stops: Option<OwnedFd>,
    /// The pty's master, until its relay starts.
    pub master: Option<pty::Master>,
    pub relay: Option<pty::Relay>,
    /// The real workspace and home directory, until the filesystems take them.
    pub roots: Option<serve::Roots>,
    /// The control socket, bound, until it is served.
    pub control: Option<crate::session::control::Listener>,
    /// The control socket, served.
    pub served: Option<crate::session::control::Control>,
    /// Where refusal notices go.
    pub notices: Option<Notices>,
    /// The run's own logs, to protect and check.
    pub logs: Vec<serve::RunLog>,
    /// The read-only bind mounts that keep files from the command.
    pub binds: super::confine::Binds,
    /// The audit log, until the filesystems and the broker take it.
    pub audit: Option<crate::session::audit::Audit>,
    /// The audit log's writer, finished once the mounts are gone.
    pub audit_writer: Option<crate::session::audit::Writer>,
    pub broker: Option<Arc<crate::fs::ask::Broker>>,
    /// The filesystems, built and not yet mounted.
    pub built: Option<serve::Filesystems>,
    /// The mounts' sessions, inner first.
    pub sessions: Vec<(fuser::BackgroundSession, PathBuf)>,
    /// What mounting gave.
    pub mounted: Option<serve::Mounted>,
    /// The daemon's end of the socket init sends the proxy's listener through.
    pub proxy_listener: Option<OwnedFd>,
    /// The proxy, serving.
    pub proxy: Option<super::net::proxy::Proxy>,
    /// The command's status, once init was waited for.
    pub status: Option<std::io::Result<i32>>,
}

impl Taken {
    /// Releases the session, in the order the module states: init, the terminal,
    /// the broker, the bind mounts, the mounts and the audit log. What is already
    /// released is left.
    pub fn release(&mut self) {
        drop(self.init.take());
        if let Some(relay) = self.relay.take() {
            relay.finish(ending::TEARDOWN);
        }
        if let Some(broker) = &self.broker {
            broker.close();
        }
        // Its connections ended, and its end of the audit log gone.
        if let Some(proxy) = &mut self.proxy {
            proxy.stop();
        }
        self.binds.undo();
        // The audit log's writer ends once every sender is gone: the mounts' go
        // with their sessions.
        drop((self.audit.take(), self.built.take()));
        let sessions = std::mem::take(&mut self.sessions);
        let writer = self.audit_writer.take();
        if !sessions.is_empty() || writer.is_some() {
            ending::unmount(sessions, writer);
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.release();
    }
}

/// Init's pid: killed (and with it the command's whole PID namespace) and reaped
/// when dropped, unless it was waited for.
pub(super) struct Init {
    pid: i32,
    reaped: bool,
}

impl Init {
    pub fn new(pid: i32) -> Init {
        Init { pid, reaped: false }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Init has been waited for: it is not to be killed (its pid may be another
    /// process's by now).
    pub fn reaped(&mut self) {
        self.reaped = true;
    }
}

impl Drop for Init {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = sys::kill(self.pid, libc::SIGKILL);
            let _ = sys::wait(self.pid, 0);
        }
    }
}

/// Where refusal notices go, what the start-up line says of it, and the notices
/// file's fate: removed when dropped if it holds no notice and the person did not
/// name it.
pub(super) struct Notices {
    pub destination: Destination,
    pub note: startup::Note,
    /// Named by the person (`--notices FILE`): it stays.
    pub named: bool,
}

impl Drop for Notices {
    fn drop(&mut self) {
        if let Destination::Session(s, _) = &self.destination
            && !self.named
            && !s.holds_notices()
        {
            let _ = std::fs::remove_file(&s.path);
        }
    }
}
