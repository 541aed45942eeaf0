//! The executor of a mount's plan: one loop that takes the plan's steps in order
//! ([`execute`]), each step a function of what the plan gave it, what every step
//! reads ([`Settings`]) and what the steps before it took ([`Taken`]). A step that
//! fails ends the loop; whatever it ends with, [`Taken`] releases what was taken
//! (see [`super::taken`] for the order).

use std::process::ExitCode;

use super::error::{Failure, MountCommandError};
use super::plan::{Plan, Settings};
use super::step::{SIGNALS, Step};
use super::taken::{Serving, Taken};
use crate::session::mount::{self as session, mount_failed};
use crate::sys;
use crate::workspace::load::LoadedPolicy;

/// Takes the steps of `plan` in order: exit 0 once the mount was served to its end
/// (a signal or an outside unmount) and released, or why a step failed once
/// everything taken is released.
pub(super) fn execute(plan: Plan) -> Result<ExitCode, MountCommandError> {
    let Plan {
        settings, steps, ..
    } = plan;
    let mut taken = Taken::default();
    for step in steps {
        #[cfg(feature = "fault-injection")]
        if crate::session::fault::fails_at(step.name()) {
            return Err(Failure::Injected(step.name()).into());
        }
        log::debug!("step {}", step.name());
        step.run(&settings, &mut taken)?;
    }
    Ok(ExitCode::SUCCESS)
}

impl Step {
    /// Takes this step: what it takes from the system goes to `t`.
    fn run(self, s: &Settings, t: &mut Taken) -> Result<(), MountCommandError> {
        let step = self.name();
        match self {
            Step::BlockSignals => sys::block_signals(&SIGNALS).map_err(Failure::Signals)?,
            Step::StartAudit(log) => {
                let (audit, writer) =
                    session::start_audit(&log, &s.opts).map_err(|e| mount_failed(&s.mnt, e))?;
                t.audit_writer = Some(writer);
                t.audit = Some(audit);
            }
            Step::BuildFilesystem(loaded) => {
                let LoadedPolicy { policy, path } = *loaded;
                let fs = session::build(
                    s.sources(),
                    policy,
                    path.as_deref(),
                    &s.opts,
                    t.audit.take(),
                )?;
                t.broker = fs.broker();
                t.built = Some(fs);
            }
            Step::Mount => mount(s, t, step)?,
            Step::ServeControl => serve_control(s, t, step)?,
            Step::SayMounted => say_mounted(s, t, step)?,
            Step::Serve => serve(s, t, step)?,
            Step::Wait => need(t.serving.as_ref(), step, "request loop")?.wait(),
            Step::Release => t.release()?,
        }
        Ok(())
    }
}

/// What an earlier step took, for `step`; missing, the plan is out of order.
fn need<T>(v: Option<T>, step: &'static str, needs: &'static str) -> Result<T, Failure> {
    v.ok_or(Failure::OutOfOrder { step, needs })
}

/// Mounts the filesystem built (live when this returns) and starts the threads
/// that keep it current.
fn mount(s: &Settings, t: &mut Taken, step: &'static str) -> Result<(), MountCommandError> {
    let fs = need(t.built.take(), step, "filesystem")?;
    let config = session::config(&s.src_c, &s.opts);
    let live =
        session::start(fs, &s.mnt_c, &config, &s.opts).map_err(|e| mount_failed(&s.mnt, e))?;
    t.session = Some(live.session);
    t.reloader = Some(live.reloader);
    Ok(())
}

/// Answers `veilfs reload`, `veilfs stats` and `veilfs prompt` on the mount's
/// control socket; when it cannot be bound, says so and goes on without it.
fn serve_control(s: &Settings, t: &mut Taken, step: &'static str) -> Result<(), Failure> {
    let session = need(t.session.as_ref(), step, "mount")?;
    let reloader = need(t.reloader.as_ref(), step, "mount")?;
    let broker = need(t.broker.clone(), step, "broker")?;
    let stats = crate::session::control::Stats::default().mount(&s.mnt, session.request_counts());
    match crate::session::control::serve(&s.mnt, reloader.clone(), broker, stats) {
        Ok(control) => t.control = Some(control),
        Err(e) => {
            eprintln!("veilfs: no control socket (`veilfs reload` will not reach this mount): {e}")
        }
    }
    Ok(())
}

/// Says the start-up line, and one more when `--transport uring` was not granted.
fn say_mounted(s: &Settings, t: &Taken, step: &'static str) -> Result<(), Failure> {
    let session = need(t.session.as_ref(), step, "mount")?;
    let reloader = need(t.reloader.as_ref(), step, "mount")?;
    eprintln!("{}", s.line("mounted", reloader.policy_asks()));
    if let Some(note) = s.opts.transport.note(session.uring()) {
        eprintln!("veilfs: {note}");
    }
    Ok(())
}

/// Starts the request loop on a thread of its own (held by `t` at once, so that
/// the release unmounts and joins it), then the thread that takes the signals:
/// SIGHUP reloads the policy, SIGINT and SIGTERM end the wait.
fn serve(s: &Settings, t: &mut Taken, step: &'static str) -> Result<(), Failure> {
    let mut session = need(t.session.take(), step, "mount")?;
    let reloader = need(t.reloader.clone(), step, "mount")?;
    let unmounter = session.unmount_callable();
    let (tx, ended) = std::sync::mpsc::channel::<Option<i32>>();
    let done = tx.clone();
    // A thread that cannot start drops the session: unmounted.
    let server = std::thread::Builder::new()
        .name("veilfs-serve".into())
        .spawn(move || {
            let r = session.run();
            let _ = done.send(None);
            r
        })
        .map_err(Failure::Start)?;
    t.serving = Some(Serving {
        server,
        unmounter,
        ended,
        mnt: s.mnt.clone(),
    });
    std::thread::Builder::new()
        .name("veilfs-signals".into())
        .spawn(move || {
            while let Ok(sig) = sys::wait_signal(&SIGNALS) {
                if sig == libc::SIGHUP {
                    session::report_reload(reloader.reload());
                } else {
                    let _ = tx.send(Some(sig));
                    return;
                }
            }
        })
        .map_err(Failure::SignalThread)?;
    Ok(())
}
