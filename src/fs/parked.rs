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

    /// Runs the body of a request that may wait for a person: on this thread,
    /// and, when it hands back its reply with a question, again once the question
    /// is answered (see [`park`]).
    pub(super) fn asking<R: Refuse>(
        &self,
        req: &Request,
        op: &'static str,
        reply: R,
        body: impl Fn(&VeilFs, &Req, R) -> Parked<R> + Send + Sync + 'static,
    ) {
        let who = Who::from(req);
        guard(op, || {
            if let Err((e, reply)) = body(&self.0, &Req::of(who, op), reply) {
                park(
                    self.0.clone(),
                    who,
                    op,
                    e,
                    reply,
                    Arc::new(body),
                    Vec::new(),
                );
            }
        })
    }
}

impl std::ops::Deref for Served {
    type Target = VeilFs;
    fn deref(&self) -> &VeilFs {
        &self.0
    }
}

/// What the body of a request that may wait returns: answered, or its reply handed
/// back with the question it waits on.
pub(super) type Parked<R> = Result<(), (io::Error, R)>;

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

/// Hands the reply back with the error when the error is a question; otherwise
/// answers with `done`.
pub(super) fn settle<T, R>(
    r: io::Result<T>,
    reply: R,
    done: impl FnOnce(io::Result<T>, R),
) -> Parked<R> {
    match r {
        Err(e) if super::ask::question_of(&e).is_some() => Err((e, reply)),
        r => {
            done(r, reply);
            Ok(())
        }
    }
}

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
    let seat = fs.seat.clone();
    let (Some(seat), Some(q)) = (seat, super::ask::question_of(&e)) else {
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
    seat.broker.ask(&seat, op, q, &asker, waiter);
}
