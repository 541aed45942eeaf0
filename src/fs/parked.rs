//! Requests that wait for a person (see [`super::ask`]): the filesystem is served
//! shared ([`Served`]), so that a request whose body hands back its reply with a
//! question is parked with the broker, and run again, or refused, from the thread
//! that gets the answer. The worker thread goes on with other requests meanwhile.

use std::io;
use std::sync::Arc;

use fuser::{
    Errno, ReplyAttr, ReplyCreate, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};

use super::VeilFs;
use super::reply::guard;
use super::request::{Req, Who};

/// The filesystem as fuser serves it: shared, so that a request parked on a
/// question (see [`super::ask`]) can be answered from another thread.
pub struct Served(pub Arc<VeilFs>);

impl Served {
    pub fn new(fs: VeilFs) -> Served {
        Served(Arc::new(fs))
    }

    /// The one dispatcher of requests that may wait for a person: runs `body` on
    /// this thread and hands its [`Outcome`] to `answer` once it is done; when it
    /// is a question instead, parks the reply until the person answers, then runs
    /// `body` again with the grant (see [`park`]), or refuses.
    pub(super) fn asking<T, R: Refuse>(
        &self,
        req: &Request,
        op: &'static str,
        reply: R,
        body: impl Fn(&VeilFs, &Req) -> io::Result<T> + Send + Sync + 'static,
        answer: impl Fn(&VeilFs, &Req, io::Result<T>, R) + Send + Sync + 'static,
    ) {
        let who = Who::from(req);
        let step = move |fs: &VeilFs, cx: &Req, reply: R| match Outcome::of(body(fs, cx)) {
            Outcome::Done(r) => {
                answer(fs, cx, r, reply);
                Ok(())
            }
            Outcome::Ask(e) => Err((e, reply)),
        };
        guard(op, || {
            if let Err((e, reply)) = step(&self.0, &Req::of(who, op), reply) {
                park(
                    self.0.clone(),
                    who,
                    op,
                    e,
                    reply,
                    Arc::new(step),
                    Vec::new(),
                );
            }
        })
    }
}

/// What an operation that may wait for a person comes to: done (answered or
/// refused), or a question to ask first (the error carries it, see
/// [`super::ask::question_of`]).
pub(super) enum Outcome<T> {
    Done(io::Result<T>),
    Ask(io::Error),
}

impl<T> Outcome<T> {
    /// The outcome of an operation's result: a question it raised is told from
    /// every other error here, and nowhere else.
    pub(super) fn of(r: io::Result<T>) -> Outcome<T> {
        match r {
            Err(e) if super::ask::question_of(&e).is_some() => Outcome::Ask(e),
            r => Outcome::Done(r),
        }
    }
}

impl std::ops::Deref for Served {
    type Target = VeilFs;
    fn deref(&self) -> &VeilFs {
        &self.0
    }
}

/// What one run of a parked request comes to: answered, or its reply handed back
/// with the question it waits on.
type Parked<R> = Result<(), (io::Error, R)>;

/// The body of a parked request, run again after an approval.
type Body<R> = dyn Fn(&VeilFs, &Req, R) -> Parked<R> + Send + Sync;

/// A reply a parked request can be refused with.
pub(crate) trait Refuse: Send + 'static {
    fn refuse(self, e: Errno);
    /// Says the reply will come late (see `fuser`'s `hold`); `false`: answer now.
    fn hold(&mut self) -> bool;
}

macro_rules! refuse_with_error {
    ($($t:ty),*) => {
        $(impl Refuse for $t {
            fn refuse(self, e: Errno) {
                self.error(e)
            }
            fn hold(&mut self) -> bool {
                <$t>::hold(self)
            }
        })*
    };
}
refuse_with_error!(
    ReplyOpen,
    ReplyEntry,
    ReplyEmpty,
    ReplyAttr,
    ReplyDirectory,
    fuser::ReplyDirectoryPlus,
    ReplyCreate
);

/// The most questions one request may raise one after another (a rename asks
/// about its source and its destination, each of them as it is now and as it
/// would be).
const MAX_QUESTIONS_PER_REQUEST: usize = 8;

/// Parks a request on the question `e` carries: the broker calls back once it is
/// answered, and the body runs again with every grant this request was given (a
/// rename may ask twice), or the reply is refused.
fn park<R: Refuse>(
    fs: Arc<VeilFs>,
    who: Who,
    op: &'static str,
    e: io::Error,
    reply: R,
    body: Arc<Body<R>>,
    grants: Vec<super::ask::Grant>,
) {
    let approvals = fs.approvals.clone();
    let (Some(approvals), Some(q)) = (approvals, super::ask::question_of(&e)) else {
        return reply.refuse(fs.fail(who, op, e));
    };
    if grants.len() >= MAX_QUESTIONS_PER_REQUEST {
        return reply.refuse(fs.fail(who, op, e));
    }
    let mut reply = reply;
    if !reply.hold() {
        // Its FUSE-over-io_uring queue has as many requests waiting for answers as
        // it may hold: waiting here would hold up everyone's requests on that CPU.
        log::warn!(
            "{op} of {}: refused at once, too many requests already wait for answers",
            String::from_utf8_lossy(&q.path)
        );
        return reply.refuse(fs.fail(who, op, e));
    }
    let asker = super::ask::Asker::of(who.pid, who.uid, who.gid);
    let waiter = {
        let fs = fs.clone();
        Box::new(move |verdict| match verdict {
            super::ask::Verdict::Granted(g) => {
                let mut grants = grants;
                grants.push(g);
                guard(op, || {
                    let cx = Req::of(who, op).with_grants(grants.clone());
                    if let Err((e, reply)) = body(&fs, &cx, reply) {
                        park(fs.clone(), who, op, e, reply, body.clone(), grants.clone());
                    }
                })
            }
            super::ask::Verdict::Refused(_) => reply.refuse(Errno::from_i32(libc::EACCES)),
        })
    };
    approvals.broker.ask(&approvals, op, q, &asker, waiter);
}
