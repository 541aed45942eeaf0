//! What a mount's steps took from the system, held by one value, [`Taken`], that
//! releases it on every way out of the executor: a signal, an outside unmount, a
//! refusal, a failed system call, a panic. No step releases what another took,
//! and there is no teardown written anywhere else.
//!
//! What stays true:
//! * **One order of release** ([`Taken::release`]): the broker closed first
//!   (parked requests are refused: nothing waits on a person while unmounting, and
//!   its end of the audit log goes); then the mount unmounted (by the request
//!   loop's unmounter when it serves, else by dropping its session); then the
//!   control socket's file removed; then the request loop joined; then the rest of
//!   the filesystem dropped, and with it every sender of the audit log, whose
//!   writer is then finished (flushed, its summary said).
//! * **Release is idempotent:** each resource is taken out of its place as it is
//!   released, so the `release` step and the drop that follows it release each
//!   thing once.
//! * **An unmount that fails** leaves the request loop running: it is not joined,
//!   nor the audit log's writer finished (both would wait for it); the failure is
//!   `mount`'s error.
//! * The signal thread is not released: it holds nothing but a way to the
//!   reloader and the wait, and ends with the process.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

use super::error::Failure;
use crate::fs::ask::Broker;
use crate::session::audit::{Audit, Writer};

/// Everything a mount's steps took, released in one order (see the module).
#[derive(Default)]
pub(super) struct Taken {
    /// The audit log's sender, until the filesystem takes it.
    pub audit: Option<Audit>,
    /// The audit log's writer, finished once every sender is gone.
    pub audit_writer: Option<Writer>,
    /// The filesystem, built and not yet mounted.
    pub built: Option<crate::fs::VeilFs>,
    pub broker: Option<Arc<Broker>>,
    /// The mount's session, until its request loop starts (dropping it unmounts).
    pub session: Option<fuser::Session<crate::fs::fuse::Served>>,
    /// The mount's policy reloader (the node table and the watcher are held by
    /// it and the watcher's thread).
    pub reloader: Option<Arc<crate::fs::reload::Reloader>>,
    /// The control socket, served (its file removed when dropped).
    pub control: Option<crate::session::control::Control>,
    /// The request loop, once it runs.
    pub serving: Option<Serving>,
}

/// The request loop, running on a thread of its own.
pub(super) struct Serving {
    pub server: JoinHandle<io::Result<()>>,
    pub unmounter: fuser::SessionUnmounter,
    /// Says how serving ended: `Some(signal)`, or `None` when the loop ended (an
    /// outside unmount).
    pub ended: Receiver<Option<i32>>,
    /// The mount point as given (named in errors).
    pub mnt: PathBuf,
}

impl Serving {
    /// Waits for a signal or the loop's end.
    pub fn wait(&self) {
        let _ = self.ended.recv();
    }

    /// Unmounts (nothing to do when it was unmounted from outside).
    fn unmount(&mut self) -> Result<(), Failure> {
        self.unmounter.unmount().map_err(|source| Failure::Unmount {
            mnt: self.mnt.clone(),
            source,
        })
    }

    /// Waits for the loop, once unmounted, and says how it ended.
    fn join(self) -> Result<(), Failure> {
        match self.server.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Failure::Serve(e)),
            Err(_) => Err(Failure::Panicked),
        }
    }
}

impl Taken {
    /// Releases the mount, in the order the module states: the broker, the mount,
    /// the control socket, the request loop, the audit log. What is already
    /// released is left. `Err`: the unmount failed, or the loop ended with an
    /// error or a panic.
    pub fn release(&mut self) -> Result<(), Failure> {
        if let Some(broker) = &self.broker {
            broker.close();
        }
        let mut serving = self.serving.take();
        let unmounted = match serving.as_mut() {
            Some(s) => s.unmount(),
            None => Ok(()),
        };
        drop(self.session.take());
        drop(self.control.take());
        let ended = match (unmounted, serving) {
            (Ok(()), Some(s)) => s.join(),
            (unmounted, _) => unmounted,
        };
        drop((self.reloader.take(), self.built.take(), self.audit.take()));
        if let Some(writer) = self.audit_writer.take()
            && !matches!(ended, Err(Failure::Unmount { .. }))
        {
            writer.finish();
        }
        ended
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("releasing the mount: {e}");
        }
    }
}
