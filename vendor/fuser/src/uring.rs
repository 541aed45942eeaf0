//! FUSE over io_uring (a veilfs addition to the vendored fuser).
//!
//! With `Config::uring` set and the kernel willing (`FUSE_OVER_IO_URING` offered at
//! `INIT`, which needs the `fuse` module's `enable_uring`), requests come through one
//! io_uring per CPU instead of `read(2)` on `/dev/fuse`, and replies go back in the
//! same system call that waits for the next request
//! (`FUSE_IO_URING_CMD_COMMIT_AND_FETCH`). The kernel puts a request on the queue of
//! the CPU its caller runs on; each queue is served by one thread bound to that CPU.
//! `/dev/fuse` keeps what the ring does not carry: `FORGET`s, `INTERRUPT`s,
//! notifications, passthrough backing files, and the requests sent before every queue
//! was registered. See the kernel's `Documentation/filesystems/fuse-io-uring.rst`.
//!
//! What stays true:
//! * **One submitter per ring.** Only a queue's own thread submits to its ring, so the
//!   kernel's follow-up work for an entry (copying the next request into its buffers)
//!   always runs in that thread. A reply made on another thread (a request parked
//!   while a person is asked) is written into its entry's buffers there, and the entry
//!   is handed to the queue thread through [`Queue::done`] and an eventfd that the
//!   ring polls.
//! * **An entry belongs to one side at a time.** The kernel writes a request into an
//!   entry's buffers and then completes its command; from then until the entry's
//!   commit is submitted, only the request's reply touches them (under the entry's
//!   lock). Every request gets exactly one commit: fuser's `Reply` answers `EIO` when
//!   it is dropped unanswered, and a request that does not decode is answered `EIO`.
//! * **Long waits leave room.** A request that will wait for a person holds its
//!   entry; at most three quarters of a queue's entries may be held so
//!   ([`RingReply::hold`]), so the queue keeps serving everyone else's requests.
//! * **The buffers outlive the ring.** The thread drops its ring (which cancels the
//!   commands still registered) before the [`Queue`] holding the buffers can go.

use std::io;
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::ThreadId;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::debug;
use log::error;
use log::warn;
use nix::errno::Errno;
use nix::sys::eventfd::EfdFlags;
use nix::sys::eventfd::EventFd;
use parking_lot::Mutex;

use crate::Filesystem;
use crate::channel::ChannelSender;
use crate::ll;
use crate::ll::ResponseErrno;
use crate::passthrough::BackingId;
use crate::read_buf::FuseReadBuf;
use crate::reply::Reply;
use crate::reply::ReplyRaw;
use crate::reply::ReplySender;
use crate::request::RequestWithSender;
use crate::request::Route;
use crate::session::SessionEventLoop;

/// `struct fuse_uring_req_header`: the in/out header (128 bytes), the opcode's own
/// header (128), then `struct fuse_uring_ent_in_out` (32).
const HEADER_BYTES: usize = 288;
const OP_IN: usize = 128;
const OP_IN_BYTES: usize = 128;
const ENT_IN_OUT: usize = 256;
/// `fuse_in_header` and `fuse_out_header`.
const IN_HEADER: usize = 40;
const OUT_HEADER: usize = 16;
/// `enum fuse_uring_cmd`.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// The user data of the eventfd poll; entries use their index.
const WAKE: u64 = u64::MAX;
/// Offset of `len` in `struct io_uring_sqe` (which `UringCmd80` does not set).
const SQE_LEN: usize = 24;

/// One entry's buffers, registered with the kernel.
#[derive(Debug)]
struct Bufs {
    header: Vec<u8>,
    payload: Vec<u8>,
}

/// One queue of the ring, shared by its thread and by replies made elsewhere.
#[derive(Debug)]
pub(crate) struct Queue {
    qid: u16,
    slots: Box<[Mutex<Bufs>]>,
    /// Entries whose reply is written, waiting for their commit.
    done: Mutex<Vec<u16>>,
    wake: EventFd,
    owner: ThreadId,
    stopped: AtomicBool,
    backing: ChannelSender,
    /// Entries held by requests waiting long (see [`RingReply::hold`]).
    held: AtomicUsize,
    /// The most entries that may be held at once: the rest stay for other requests.
    hold_cap: usize,
}

impl Queue {
    /// Asks the queue's thread to end (the session is over).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _ = self.wake.write(1);
    }
}

/// Where a request that came through a ring entry is answered.
#[derive(Debug, Clone)]
pub(crate) struct RingReply {
    queue: Arc<Queue>,
    slot: u16,
    /// This request holds its entry while it waits long (see [`RingReply::hold`]).
    held: bool,
}

impl RingReply {
    /// Marks this request as one that will wait long before its reply (a question
    /// to a person), holding its entry meanwhile. `false` when the queue already has
    /// as many held entries as it may: the request should then be answered now, so
    /// that the queue's other entries stay for the requests of everyone else.
    pub(crate) fn hold(&mut self) -> bool {
        if self.held {
            return true;
        }
        let q = &self.queue;
        if q.held.fetch_add(1, Ordering::AcqRel) >= q.hold_cap {
            q.held.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        self.held = true;
        true
    }

    /// Writes the reply into the entry and hands the entry back for its commit.
    pub(crate) fn send(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        if self.held {
            self.queue.held.fetch_sub(1, Ordering::AcqRel);
        }
        let result = {
            let mut bufs = self.queue.slots[usize::from(self.slot)].lock();
            let Bufs { header, payload } = &mut *bufs;
            write_reply(header, payload, data)
        };
        self.queue.done.lock().push(self.slot);
        if std::thread::current().id() != self.queue.owner {
            self.queue.wake.write(1).map_err(io::Error::from)?;
        }
        result
    }

    pub(crate) fn open_backing(&self, fd: BorrowedFd<'_>) -> io::Result<BackingId> {
        self.queue.backing.open_backing(fd)
    }

    pub(crate) unsafe fn wrap_backing(&self, id: u32) -> BackingId {
        unsafe { self.queue.backing.wrap_backing(id) }
    }
}

/// Copies a reply (`fuse_out_header` first) into an entry: the header into its
/// in/out area, the rest into its payload, and the payload's size. A reply too big
/// for the payload is answered `EIO` instead, so that the entry still goes back.
fn write_reply(header: &mut [u8], payload: &mut [u8], data: &[IoSlice<'_>]) -> io::Result<()> {
    let total: usize = data.iter().map(|d| d.len()).sum();
    let body = total.saturating_sub(OUT_HEADER);
    let fits = total >= OUT_HEADER && body <= payload.len();
    // Byte `at` of the reply goes to the header's first 16 bytes, then the payload.
    let mut at = 0;
    for d in data {
        let mut src: &[u8] = d;
        if at < OUT_HEADER {
            let n = src.len().min(OUT_HEADER - at);
            header[at..at + n].copy_from_slice(&src[..n]);
            (at, src) = (at + n, &src[n..]);
        }
        if !fits {
            break;
        }
        if at < OUT_HEADER {
            // This slice was all header; the next one goes on with it.
            continue;
        }
        let off = at - OUT_HEADER;
        payload[off..off + src.len()].copy_from_slice(src);
        at += src.len();
    }
    if !fits {
        header[0..4].copy_from_slice(&(OUT_HEADER as u32).to_ne_bytes());
        header[4..8].copy_from_slice(&(-libc::EIO).to_ne_bytes());
    }
    let sz = if fits { body as u32 } else { 0 };
    header[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&sz.to_ne_bytes());
    if fits {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "reply of {total} bytes does not fit a ring entry"
        )))
    }
}

/// Rebuilds, in `out`, the bytes `/dev/fuse` would have given for the request in an
/// entry: the `fuse_in_header`, the opcode's header, then the payload (the other
/// arguments and any extensions). Returns their length and the commit id, or `None`
/// when the entry's sizes do not add up.
fn request_bytes(header: &[u8], payload: &[u8], out: &mut [u8]) -> Option<(usize, u64)> {
    let len = usize::try_from(read_u32(header, 0)?).ok()?;
    let commit_id = u64::from_ne_bytes(
        header
            .get(ENT_IN_OUT + 8..ENT_IN_OUT + 16)?
            .try_into()
            .ok()?,
    );
    let payload_sz = usize::try_from(read_u32(header, ENT_IN_OUT + 16)?).ok()?;
    let op_in = len.checked_sub(IN_HEADER)?.checked_sub(payload_sz)?;
    if op_in > OP_IN_BYTES || payload_sz > payload.len() || len > out.len() {
        return None;
    }
    out[..IN_HEADER].copy_from_slice(&header[..IN_HEADER]);
    out[IN_HEADER..IN_HEADER + op_in].copy_from_slice(&header[OP_IN..OP_IN + op_in]);
    out[IN_HEADER + op_in..len].copy_from_slice(&payload[..payload_sz]);
    Some((len, commit_id))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The 80-byte command of an SQE: `struct fuse_uring_cmd_req`.
fn cmd_req(qid: u16, commit_id: u64) -> [u8; 80] {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    cmd
}

/// A `FUSE_IO_URING_CMD_REGISTER` of an entry's two buffers (`iov`).
fn register_sqe(dev: i32, qid: u16, slot: u16, iov: &[libc::iovec; 2]) -> squeue::Entry128 {
    let sqe = opcode::UringCmd80::new(types::Fd(dev), CMD_REGISTER)
        .cmd(cmd_req(qid, 0))
        .addr(Some(iov.as_ptr() as u64))
        .build()
        .user_data(u64::from(slot));
    // The kernel wants the iovec count in the SQE's `len`, which the builder leaves
    // at 0. Both types are `repr(C)`, 128 bytes.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    raw[SQE_LEN..SQE_LEN + 4].copy_from_slice(&2u32.to_ne_bytes());
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

fn commit_sqe(dev: i32, qid: u16, slot: u16, commit_id: u64) -> squeue::Entry128 {
    opcode::UringCmd80::new(types::Fd(dev), CMD_COMMIT_AND_FETCH)
        .cmd(cmd_req(qid, commit_id))
        .build()
        .user_data(u64::from(slot))
}

fn wake_sqe(fd: i32) -> squeue::Entry128 {
    squeue::Entry128::from(
        opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(WAKE),
    )
}

/// The size of the queues' entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) depth: u16,
    pub(crate) payload: usize,
}

/// A queue's thread: registers `shape.depth` entries for queue `qid` on the device
/// `dev`, says on `ready` whether that worked, then serves requests until the
/// connection ends or [`Queue::stop`].
pub(crate) fn serve<FS: Filesystem>(
    qid: u16,
    shape: Shape,
    dev: ChannelSender,
    se: SessionEventLoop<FS>,
    ready: mpsc::Sender<io::Result<Arc<Queue>>>,
) -> io::Result<()> {
    bind_to_cpu(qid);
    let started = start(qid, shape, dev);
    let (mut ring, queue, iovs) = match started {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
    };
    let _ = ready.send(Ok(queue.clone()));
    let result = serve_loop(&mut ring, &queue, &se, shape);
    // The ring goes first: closing it cancels the commands still registered, so the
    // kernel no longer holds the entries' buffers.
    drop(ring);
    drop(iovs);
    result
}

/// One core, one queue: the kernel picks the queue of the caller's CPU.
fn bind_to_cpu(qid: u16) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(usize::from(qid)).is_ok() {
        if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
            debug!("ring queue {qid}: not bound to its CPU: {e}");
        }
    }
}

type Started = (
    IoUring<squeue::Entry128, cqueue::Entry>,
    Arc<Queue>,
    Box<[[libc::iovec; 2]]>,
);

fn start(qid: u16, shape: Shape, dev: ChannelSender) -> io::Result<Started> {
    let sq = (u32::from(shape.depth) + 1).next_power_of_two();
    let mut ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(sq * 2)
        .build(sq)?;
    let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
    let mut slots = Vec::with_capacity(usize::from(shape.depth));
    let mut iovs = Vec::with_capacity(usize::from(shape.depth));
    for _ in 0..shape.depth {
        // Zeroed allocations: the kernel touches only what it copies.
        let mut header = vec![0u8; HEADER_BYTES];
        let mut payload = vec![0u8; shape.payload];
        iovs.push([
            libc::iovec {
                iov_base: header.as_mut_ptr().cast(),
                iov_len: header.len(),
            },
            libc::iovec {
                iov_base: payload.as_mut_ptr().cast(),
                iov_len: payload.len(),
            },
        ]);
        slots.push(Mutex::new(Bufs { header, payload }));
    }
    let iovs = iovs.into_boxed_slice();
    let dev_fd = dev.as_raw_fd();
    let queue = Arc::new(Queue {
        qid,
        slots: slots.into_boxed_slice(),
        done: Mutex::new(Vec::with_capacity(usize::from(shape.depth))),
        wake,
        owner: std::thread::current().id(),
        stopped: AtomicBool::new(false),
        backing: dev,
        held: AtomicUsize::new(0),
        // A quarter of the entries (at least one) always stays for requests that
        // do not wait.
        hold_cap: usize::from(shape.depth) - (usize::from(shape.depth) / 4).max(1),
    });
    {
        let mut sq = ring.submission();
        for (slot, iov) in (0u16..).zip(iovs.iter()) {
            push(&mut sq, &register_sqe(dev_fd, qid, slot, iov))?;
        }
        push(&mut sq, &wake_sqe(queue.wake.as_raw_fd()))?;
    }
    ring.submit()?;
    // A refused registration completes at once; an accepted one only when a request
    // arrives.
    if let Some(cqe) = ring.completion().find(|c| c.result() < 0) {
        return Err(io::Error::from_raw_os_error(-cqe.result()));
    }
    Ok((ring, queue, iovs))
}

fn push(
    sq: &mut squeue::SubmissionQueue<'_, squeue::Entry128>,
    e: &squeue::Entry128,
) -> io::Result<()> {
    // The queue holds one SQE per entry plus the poll, so this cannot be full.
    unsafe { sq.push(e) }.map_err(|_| io::Error::other("io_uring submission queue full"))
}

fn serve_loop<FS: Filesystem>(
    ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
    queue: &Arc<Queue>,
    se: &SessionEventLoop<FS>,
    shape: Shape,
) -> io::Result<()> {
    let dev = queue.backing.as_raw_fd();
    let mut commit_ids = vec![0u64; usize::from(shape.depth)];
    let mut buf = FuseReadBuf::new();
    let buf = buf.as_mut();
    let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(usize::from(shape.depth) + 1);
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        cqes.clear();
        cqes.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        let mut rearm = false;
        for &(data, res, flags) in &cqes {
            if data == WAKE {
                let _ = queue.wake.read();
                rearm |= !cqueue::more(flags);
                continue;
            }
            let Ok(slot) = u16::try_from(data) else {
                continue;
            };
            if res < 0 {
                return ended(queue.qid, res);
            }
            handle(queue, se, slot, buf, &mut commit_ids);
        }
        if queue.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        let done = std::mem::take(&mut *queue.done.lock());
        let mut sq = ring.submission();
        for slot in done {
            let id = commit_ids[usize::from(slot)];
            push(&mut sq, &commit_sqe(dev, queue.qid, slot, id))?;
        }
        if rearm {
            push(&mut sq, &wake_sqe(queue.wake.as_raw_fd()))?;
        }
    }
}

/// An entry's command failed: the connection is gone (the normal end), or something
/// this transport does not expect.
fn ended(qid: u16, res: i32) -> io::Result<()> {
    match Errno::from_raw(-res) {
        Errno::ENOTCONN | Errno::ECONNABORTED | Errno::ECANCELED | Errno::ENODEV => Ok(()),
        e => {
            error!("ring queue {qid}: an entry's command failed: {e}");
            Err(io::Error::from(e))
        }
    }
}

/// Decodes the request in `slot` and dispatches it; its reply comes back through
/// [`RingReply::send`].
fn handle<FS: Filesystem>(
    queue: &Arc<Queue>,
    se: &SessionEventLoop<FS>,
    slot: u16,
    buf: &mut [u8],
    commit_ids: &mut [u64],
) {
    let (decoded, unique) = {
        let bufs = queue.slots[usize::from(slot)].lock();
        let unique = bufs.header.get(8..16).and_then(|b| b.try_into().ok());
        (
            request_bytes(&bufs.header, &bufs.payload, buf),
            u64::from_ne_bytes(unique.unwrap_or([0; 8])),
        )
    };
    let reply = RingReply {
        queue: queue.clone(),
        slot,
        held: false,
    };
    let Some((len, commit_id)) = decoded else {
        warn!("ring queue {}: an entry's sizes do not add up", queue.qid);
        commit_ids[usize::from(slot)] = unique;
        <ReplyRaw as Reply>::new(ll::RequestId(unique), ReplySender::Ring(reply))
            .send_ll(&ResponseErrno(ll::Errno::EIO));
        return;
    };
    commit_ids[usize::from(slot)] = commit_id;
    se.counts.count(&buf[..len]);
    match RequestWithSender::new(Route::Ring(reply.clone()), &buf[..len]) {
        Some(req) => req.dispatch(se),
        None => <ReplyRaw as Reply>::new(ll::RequestId(commit_id), ReplySender::Ring(reply))
            .send_ll(&ResponseErrno(ll::Errno::EIO)),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn entry(opcode: u32, op_in: &[u8], payload: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut header = vec![0u8; HEADER_BYTES];
        let len = (IN_HEADER + op_in.len() + payload.len()) as u32;
        header[0..4].copy_from_slice(&len.to_ne_bytes());
        header[4..8].copy_from_slice(&opcode.to_ne_bytes());
        header[8..16].copy_from_slice(&77u64.to_ne_bytes());
        header[OP_IN..OP_IN + op_in.len()].copy_from_slice(op_in);
        header[ENT_IN_OUT + 8..ENT_IN_OUT + 16].copy_from_slice(&77u64.to_ne_bytes());
        header[ENT_IN_OUT + 16..ENT_IN_OUT + 20]
            .copy_from_slice(&(payload.len() as u32).to_ne_bytes());
        let mut p = vec![0u8; 64];
        p[..payload.len()].copy_from_slice(payload);
        (header, p)
    }

    #[test]
    fn a_request_is_rebuilt_as_dev_fuse_gives_it() {
        let (h, p) = entry(1, &[], b"name\0");
        let mut out = vec![0u8; 256];
        let (len, id) = request_bytes(&h, &p, &mut out).unwrap();
        assert_eq!((len, id), (IN_HEADER + 5, 77));
        assert_eq!(&out[IN_HEADER..len], b"name\0");

        let (h, p) = entry(15, &[9u8; 40], b"");
        let (len, _) = request_bytes(&h, &p, &mut out).unwrap();
        assert_eq!(len, IN_HEADER + 40);
        assert_eq!(&out[IN_HEADER..len], &[9u8; 40]);
    }

    #[test]
    fn sizes_that_do_not_add_up_are_refused() {
        let (mut h, p) = entry(1, &[], b"name\0");
        // Payload larger than the length says.
        h[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&100u32.to_ne_bytes());
        assert!(request_bytes(&h, &p, &mut [0u8; 256]).is_none());
        // An opcode header larger than its area.
        let (mut h, p) = entry(1, &[], b"");
        h[0..4].copy_from_slice(&((IN_HEADER + 200) as u32).to_ne_bytes());
        assert!(request_bytes(&h, &p, &mut [0u8; 512]).is_none());
    }

    #[test]
    fn a_reply_lands_in_the_header_and_payload() {
        let mut h = vec![0u8; HEADER_BYTES];
        let mut p = vec![0u8; 8];
        let out = [24u32.to_ne_bytes(), 0u32.to_ne_bytes()].concat();
        let unique = 5u64.to_ne_bytes();
        let body = [1u8, 2, 3, 4, 5, 6, 7, 8];
        write_reply(
            &mut h,
            &mut p,
            &[
                IoSlice::new(&out),
                IoSlice::new(&unique),
                IoSlice::new(&body),
            ],
        )
        .unwrap();
        assert_eq!(&h[8..16], &unique);
        assert_eq!(p, body);
        assert_eq!(&h[ENT_IN_OUT + 16..ENT_IN_OUT + 20], &8u32.to_ne_bytes());

        // Too big: answered EIO with no payload.
        let big = [0u8; 9];
        assert!(
            write_reply(
                &mut h,
                &mut p,
                &[
                    IoSlice::new(&out),
                    IoSlice::new(&unique),
                    IoSlice::new(&big)
                ],
            )
            .is_err()
        );
        assert_eq!(&h[4..8], &(-libc::EIO).to_ne_bytes());
        assert_eq!(&h[ENT_IN_OUT + 16..ENT_IN_OUT + 20], &0u32.to_ne_bytes());
    }
}
