//! The questions of one session and their answers (see [`super::ask`]): the
//! [`Broker`] parks requests on questions, sends the questions to the approvers
//! subscribed on the control socket, takes their answers, keeps the session's
//! grants, and refuses what nobody answers in time.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex};

use super::ask::{
    Access, Answer, Approvals, Approver, Asker, Grant, MAX_OPEN, NeedsApproval, Scope, Verdict,
    Waiter,
};
use crate::policy::Decision;

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// No question of that id is open: it was answered, it expired, or it was
    /// withdrawn (or it never was).
    #[error("no open question {id} (answered, expired or withdrawn)")]
    NoOpenQuestion { id: u64 },
}

/// What one question is about, for the audit log.
struct Subject {
    root: &'static str,
    path: Vec<u8>,
    decision: Decision,
    op: &'static str,
    who: Asker,
}

/// One open question.
struct Pending {
    id: u64,
    about: Subject,
    access: Access,
    /// Its JSON, as sent to approvers.
    json: serde_json::Value,
    /// The directory an `allow-dir` answer grants.
    dir: Vec<u8>,
    asked: Instant,
    deadline: Instant,
    waiters: Vec<Waiter>,
}

/// An approver connected to the control socket.
struct Subscriber {
    id: u64,
    tx: mpsc::SyncSender<String>,
}

/// How many lines may wait for one approver; one that falls this far behind is
/// dropped (its open questions stay open for the others).
pub const APPROVER_QUEUE: usize = 256;

/// Sends `line` to every subscriber, dropping those that are gone or too far
/// behind.
fn broadcast(subscribers: &mut Vec<Subscriber>, line: &str) {
    subscribers.retain(|s| match s.tx.try_send(line.to_string()) {
        Ok(()) => true,
        Err(mpsc::TrySendError::Full(_)) => {
            log::warn!("ask: an approver fell {APPROVER_QUEUE} lines behind; dropped");
            false
        }
        Err(mpsc::TrySendError::Disconnected(_)) => false,
    });
}

/// The open questions, when no approver is left to answer them (taken out: the
/// caller refuses them once the lock is released).
fn orphaned(st: &mut State) -> Vec<Pending> {
    if st.subscribers.is_empty() {
        st.pending.drain(..).collect()
    } else {
        Vec::new()
    }
}

#[derive(Default)]
struct State {
    next_id: u64,
    pending: VecDeque<Pending>,
    subscribers: Vec<Subscriber>,
    session: Vec<Grant>,
    closed: bool,
}

/// The questions of one session (`veilfs mount`, or both mounts of `veilfs run`),
/// their approvers, and the session's grants.
pub struct Broker {
    /// Says which session asks (`veilfs mount`, `veilfs run (pid N)`).
    label: String,
    timeout: Duration,
    /// Dropped at [`Broker::close`], so that the audit writer can finish.
    audit: Mutex<Option<crate::session::audit::Audit>>,
    state: Mutex<State>,
    wake: Condvar,
    /// Questions refused because no approver was connected (said once, when the
    /// session ends: see [`Broker::unheard`]).
    unheard: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("label", &self.label)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker whose questions wait at most `timeout`; its timer thread ends
    /// with it.
    pub fn new(
        label: String,
        timeout: Duration,
        audit: Option<crate::session::audit::Audit>,
    ) -> Arc<Broker> {
        let b = Arc::new(Broker {
            label,
            timeout,
            audit: Mutex::new(audit),
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            wake: Condvar::new(),
            unheard: std::sync::atomic::AtomicUsize::new(0),
        });
        let weak = Arc::downgrade(&b);
        let spawned = std::thread::Builder::new()
            .name("veilfs-ask".into())
            .spawn(move || timer(weak));
        if let Err(e) = spawned {
            // Without the timer no question could expire: ask nobody.
            log::warn!("ask: cannot start the timer thread ({e}); every question is refused");
            b.state.lock().closed = true;
        }
        b
    }

    /// Which session asks (`veilfs mount`, `veilfs run (pid N)`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// How long a question waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a session grant covers `path` for `access`.
    pub fn session_covers(&self, root: &str, path: &[u8], access: Access) -> bool {
        let st = self.state.lock();
        st.session.iter().any(|g| g.covers(root, path, access))
    }

    /// Forgets the session's grants (a policy reload).
    pub fn forget_grants(&self) {
        self.state.lock().session.clear();
    }

    /// Forgets the session grants at or beneath `paths` of the mount of `root`: a
    /// rename put something else there (or took what was approved away), and an
    /// approval is for what the person was shown, not for whatever later sits at
    /// its name. A grant above them (a directory and everything beneath it) keeps
    /// its meaning and stays.
    pub fn forget_grants_at(&self, root: &str, paths: &[&[u8]]) {
        let mut st = self.state.lock();
        if st.session.is_empty() {
            return;
        }
        st.session.retain(|g| {
            g.root != root
                || !paths.iter().any(|p| {
                    p.is_empty()
                        || g.path == *p
                        || (g.path.starts_with(p) && g.path.get(p.len()) == Some(&b'/'))
                })
        });
    }

    /// Asks about `q` for the request of `who`, on `approvals`'s mount, for the
    /// operation `op`; `waiter` is called once with the verdict. A request for a
    /// path whose question is already open (for at least this access) waits on
    /// that question.
    pub fn ask(
        &self,
        approvals: &Approvals,
        op: &'static str,
        q: &NeedsApproval,
        who: &Asker,
        waiter: Waiter,
    ) {
        let mut st = self.state.lock();
        if let Some(p) = st.pending.iter_mut().find(|p| {
            p.about.root == approvals.root && p.about.path == q.path && p.access >= q.access
        }) {
            p.waiters.push(waiter);
            return;
        }
        let refused = if st.closed {
            Some("unmounted")
        } else if st.subscribers.is_empty() {
            self.unheard
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some("no-approver")
        } else if st.pending.len() >= MAX_OPEN {
            Some("too-many-questions")
        } else {
            None
        };
        let id = st.next_id;
        st.next_id += 1;
        let dir = if q.is_dir {
            q.path.clone()
        } else {
            q.path[..q.path.iter().rposition(|&b| b == b'/').unwrap_or(0)].to_vec()
        };
        let json = serde_json::json!({
            "type": "question",
            "id": id,
            "session": self.label,
            "root": approvals.root,
            "mount": approvals.mount,
            "path": String::from_utf8_lossy(&q.path),
            "directory": String::from_utf8_lossy(&dir),
            "is_dir": q.is_dir,
            "op": op,
            "access": q.access.as_str(),
            "pid": who.pid,
            "uid": who.uid,
            "comm": who.comm,
            "cmdline": who.cmdline,
            "rule": q.decision.why(),
            // What a lasting answer writes (see `veilfs prompt`): where the rule
            // that asks applies, what an approval grants, and the file.
            "decided_at": String::from_utf8_lossy(q.decision.decided_at(&q.path)),
            "grants": q.decision.granted().as_str(),
            "policy_file": approvals.policy_file.as_ref().map(|f| f.display().to_string()),
            "timeout_ms": self.timeout.as_millis() as u64,
        });
        let about = Subject {
            root: approvals.root,
            path: q.path.clone(),
            decision: q.decision.clone(),
            op,
            who: who.clone(),
        };
        self.record(&about, "asked", serde_json::json!({"id": id}));
        let mut refused = refused;
        let mut orphans = Vec::new();
        if refused.is_none() {
            broadcast(&mut st.subscribers, &json.to_string());
            if st.subscribers.is_empty() {
                // Every approver fell behind: nobody is left to ask, about this
                // question or the ones still open.
                refused = Some("approver-gone");
                orphans = orphaned(&mut st);
            }
        }
        if let Some(why) = refused {
            drop(st);
            self.refuse_all(orphans, "approver-gone");
            let ask = serde_json::json!({"id": id, "outcome": why, "waited_ms": 0});
            self.record(&about, "refused", ask);
            waiter(Verdict::Refused(why));
            return;
        }
        let now = Instant::now();
        st.pending.push_back(Pending {
            id,
            about,
            access: q.access,
            json,
            dir,
            asked: now,
            deadline: now + self.timeout,
            waiters: vec![waiter],
        });
        drop(st);
        self.wake.notify_all();
    }

    /// Answers question `id` for `by`. The requests waiting on it, and on any other
    /// open question a session grant now covers, go on (or fail) on a thread of
    /// their own.
    pub fn answer(&self, id: u64, answer: Answer, by: &Approver) -> Result<(), BrokerError> {
        let mut st = self.state.lock();
        let p = st
            .pending
            .iter()
            .position(|p| p.id == id)
            .and_then(|at| st.pending.remove(at))
            .ok_or(BrokerError::NoOpenQuestion { id })?;
        let mut done = vec![(p, answer.clone())];
        if let Answer::Allow(scope) = answer {
            let p = &done[0].0;
            let grant = Grant {
                root: p.about.root,
                path: if scope == Scope::Dir {
                    p.dir.clone()
                } else {
                    p.about.path.clone()
                },
                beneath: scope == Scope::Dir,
                access: p.access,
            };
            if scope != Scope::Once {
                // Every other open question this grant answers goes too.
                let mut i = 0;
                while i < st.pending.len() {
                    if grant.covers(
                        st.pending[i].about.root,
                        &st.pending[i].about.path,
                        st.pending[i].access,
                    ) {
                        if let Some(q) = st.pending.remove(i) {
                            done.push((q, answer.clone()));
                        }
                    } else {
                        i += 1;
                    }
                }
                st.session.push(grant);
            }
        }
        let mut lines = Vec::new();
        for (p, a) in &done {
            lines.push(
                serde_json::json!({"type": "closed", "id": p.id, "outcome": a.as_str(), "by": by.to_json()})
                    .to_string(),
            );
        }
        for line in &lines {
            broadcast(&mut st.subscribers, line);
        }
        let orphans = orphaned(&mut st);
        drop(st);
        self.refuse_all(orphans, "approver-gone");
        let mut run = Vec::new();
        for (p, a) in done {
            let mut extra = serde_json::json!({
                "id": p.id,
                "outcome": a.as_str(),
                "waited_ms": p.asked.elapsed().as_millis() as u64,
                "by": by.to_json(),
            });
            if let Answer::Deny(Some(r)) = &a {
                extra["reason"] = r.clone().into();
            }
            let result = if matches!(a, Answer::Allow(_)) {
                "approved"
            } else {
                "refused"
            };
            self.record(&p.about, result, extra);
            let verdict = |a: &Answer| match a {
                Answer::Allow(_) => Verdict::Granted(Grant {
                    root: p.about.root,
                    path: p.about.path.clone(),
                    beneath: false,
                    access: p.access,
                }),
                Answer::Deny(_) => Verdict::Refused("denied"),
            };
            for w in p.waiters {
                run.push((w, verdict(&a)));
            }
        }
        release(run);
        Ok(())
    }

    /// How many questions were refused because nobody was answering (no
    /// `veilfs prompt` connected).
    pub fn unheard(&self) -> usize {
        self.unheard.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Subscribes an approver: every open question is sent now, each new one as it
    /// is asked, and a `closed` line when one is answered or expires. Returns the
    /// subscription's id (for [`Broker::unsubscribe`]) and the lines.
    pub fn subscribe(&self) -> (u64, mpsc::Receiver<String>) {
        let mut st = self.state.lock();
        let (tx, rx) = mpsc::sync_channel(APPROVER_QUEUE.max(st.pending.len()));
        let id = st.next_id;
        st.next_id += 1;
        for p in &st.pending {
            let _ = tx.try_send(p.json.to_string());
        }
        st.subscribers.push(Subscriber { id, tx });
        (id, rx)
    }

    /// Ends a subscription. When the last approver goes, every open question is
    /// refused: nobody is left to answer it.
    pub fn unsubscribe(&self, id: u64) {
        let mut st = self.state.lock();
        st.subscribers.retain(|s| s.id != id);
        if st.subscribers.is_empty() {
            let gone: Vec<Pending> = st.pending.drain(..).collect();
            drop(st);
            self.refuse_all(gone, "approver-gone");
        }
    }

    /// Refuses every open question and every later one (the mount is ending).
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.subscribers.clear();
        let gone: Vec<Pending> = st.pending.drain(..).collect();
        drop(st);
        self.wake.notify_all();
        self.refuse_all(gone, "unmounted");
        // The audit log ends with the mount: its writer finishes once every
        // sender is gone.
        self.audit.lock().take();
    }

    fn refuse_all(&self, gone: Vec<Pending>, why: &'static str) {
        let mut run = Vec::new();
        for p in gone {
            let waited = p.asked.elapsed().as_millis() as u64;
            let ask = serde_json::json!({"id": p.id, "outcome": why, "waited_ms": waited});
            self.record(&p.about, "refused", ask);
            for w in p.waiters {
                run.push((w, Verdict::Refused(why)));
            }
        }
        release(run);
    }

    /// Expires the questions past their deadline; returns the next deadline.
    fn expire(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut st = self.state.lock();
        let mut gone = Vec::new();
        let mut i = 0;
        while i < st.pending.len() {
            if st.pending[i].deadline <= now {
                if let Some(p) = st.pending.remove(i) {
                    gone.push(p);
                }
            } else {
                i += 1;
            }
        }
        for p in &gone {
            let line =
                serde_json::json!({"type": "closed", "id": p.id, "outcome": "timeout"}).to_string();
            broadcast(&mut st.subscribers, &line);
        }
        let orphans = if gone.is_empty() {
            Vec::new()
        } else {
            orphaned(&mut st)
        };
        let next = st.pending.iter().map(|p| p.deadline).min();
        drop(st);
        self.refuse_all(gone, "timeout");
        self.refuse_all(orphans, "approver-gone");
        next
    }

    /// One audit event about a question.
    fn record(&self, about: &Subject, result: &'static str, ask: serde_json::Value) {
        let Some(audit) = self.audit.lock().clone() else {
            return;
        };
        let audit = if about.root.is_empty() {
            audit
        } else {
            audit.for_root(about.root)
        };
        audit.record(crate::session::audit::Event {
            time: SystemTime::now(),
            op: about.op,
            path: about.path.clone(),
            decision: about.decision.clone(),
            refused: result == "refused",
            pid: about.who.pid,
            uid: about.who.uid,
            gid: about.who.gid,
            comm: about.who.comm.clone(),
            result: Some(result),
            ask: Some(ask),
            change: false,
            absent: false,
            dir: false,
        });
    }
}

/// Runs parked requests with their verdicts on a thread of their own, so that the
/// thread answering (a control connection, the timer) is never held by them.
fn release(run: Vec<(Waiter, Verdict)>) {
    if run.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("veilfs-ask-run".into())
        .spawn(move || {
            for (w, v) in run {
                w(v);
            }
        });
    if let Err(e) = spawned {
        // The closures (and their replies) were moved into the failed spawn and
        // dropped: a dropped reply answers EIO, so nothing hangs.
        log::warn!("ask: cannot start a thread to answer parked requests: {e}");
    }
}

/// Expires questions at their deadlines while the broker lives.
fn timer(weak: Weak<Broker>) {
    loop {
        let Some(b) = weak.upgrade() else {
            return;
        };
        let next = b.expire();
        let mut st = b.state.lock();
        if st.closed {
            return;
        }
        // Wake at the next deadline, and at least every second to see whether the
        // broker is still wanted.
        let cap = Instant::now() + Duration::from_secs(1);
        let until = next.map_or(cap, |n| n.min(cap));
        b.wake.wait_until(&mut st, until);
    }
}
