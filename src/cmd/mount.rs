//! `veilfs mount`: serve a workspace through the policy in the foreground, until a
//! signal or an outside unmount.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::workspace::load;

/// `veilfs mount`: serve in the foreground until a signal or an outside unmount.
pub fn mount(
    policy: Option<&Path>,
    src: &Path,
    mnt: &Path,
    opts: &crate::session::mount::MountOptions,
) -> Result<ExitCode> {
    const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let mut loaded = match load::load_policy(policy, src) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    match crate::workspace::imports::attach(&mut loaded.policy, src) {
        Ok(warnings) => warnings.iter().for_each(|w| eprintln!("veilfs: {w}")),
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(2));
        }
    }
    // Absolute paths on the start-up line: it is read later, in a log, from elsewhere.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let source = match &loaded.path {
        Some(p) => absolute(p).display().to_string(),
        None => loaded.source(),
    };
    // Said on the start-up line: what the policy hides, read before mounting.
    let hiding = crate::workspace::walk::startup_note(&loaded.policy, src);
    if let Some(log) = &opts.audit
        && let Err(e) = crate::session::audit::check_outside(
            log,
            &src.canonicalize().unwrap_or_else(|_| src.to_path_buf()),
        )
    {
        eprintln!("veilfs: {e}");
        return Ok(ExitCode::from(2));
    }
    // Block the signals before any thread starts, so they reach `wait_signal` only.
    crate::sys::block_signals(&SIGNALS)?;
    let live =
        match crate::session::mount::session(src, mnt, loaded.policy, loaded.path.as_deref(), opts)
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("veilfs: {e}");
                return Ok(ExitCode::from(2));
            }
        };
    let mut session = live.session;
    let reloader = live.reloader;
    let audit = live.audit;
    let broker = live.broker;
    let stats = crate::session::control::Stats::default().mount(mnt, session.request_counts());
    let control = crate::session::control::serve(mnt, reloader.clone(), broker.clone(), stats);
    if let Err(e) = &control {
        eprintln!("veilfs: no control socket (`veilfs reload` will not reach this mount): {e}");
    }
    let asks = opts.mode_note(reloader.policy_asks(), false, &absolute(mnt));
    // Paths from the command line and the tree: never a control character raw.
    let line = format!(
        "veilfs: mounted {} at {} with policy {source}{hiding}{asks}",
        absolute(src).display(),
        absolute(mnt).display()
    );
    eprintln!("{}", crate::escape::escape(&line));
    if let Some(note) = opts.transport.note(session.uring()) {
        eprintln!("veilfs: {note}");
    }
    let mut unmounter = session.unmount_callable();
    let (tx, rx) = std::sync::mpsc::channel::<Option<i32>>();
    let done = tx.clone();
    let server = std::thread::spawn(move || {
        let r = session.run();
        let _ = done.send(None);
        r
    });
    std::thread::spawn(move || {
        while let Ok(sig) = crate::sys::wait_signal(&SIGNALS) {
            if sig == libc::SIGHUP {
                crate::session::mount::report_reload(reloader.reload());
            } else {
                let _ = tx.send(Some(sig));
                return;
            }
        }
    });
    let ended = rx.recv();
    // Parked requests are refused: nothing waits on a person while unmounting.
    broker.close();
    if let Ok(Some(_signal)) = ended {
        unmounter
            .unmount()
            .with_context(|| format!("unmounting {}", mnt.display()))?;
    }
    drop(control);
    let served = server.join();
    if let Some(w) = audit {
        w.finish();
    }
    match served {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(e)) => Err(anyhow::Error::new(e).context("serving the mount")),
        Err(_) => anyhow::bail!("the request loop panicked"),
    }
}
