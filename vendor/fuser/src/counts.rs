//! Requests received, by opcode (a veilfs addition to the vendored fuser).
//!
//! What stays true:
//! * Every request a worker reads from the kernel is counted once, by the opcode
//!   in its header, before it is decoded: the requests fuser answers itself
//!   (`INTERRUPT`, an opcode it does not know) are counted too.
//! * Counting shares nothing between workers: each worker owns one [`Slab`] and is
//!   its only writer (a plain load and store, no locked instruction), so the count
//!   costs the request path one add on a cache line no other thread writes.
//!   [`RequestCounts::by_opcode`] sums the slabs; a count read while a worker is
//!   adding may be one short for that worker, never more.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

/// Opcodes below this are counted under their own number; any other under 0.
const SLOTS: usize = 64;

/// One worker's counters, indexed by opcode, and whether the worker serves a ring
/// queue (`uring.rs`) rather than `/dev/fuse`.
#[derive(Debug)]
pub(crate) struct Slab([AtomicU64; SLOTS], bool);

impl Slab {
    /// Counts the request whose bytes (header first) are `request`.
    pub(crate) fn count(&self, request: &[u8]) {
        // `fuse_in_header`: len (u32), then opcode (u32), in native byte order.
        let opcode = request
            .get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_ne_bytes) as usize;
        let c = &self.0[if opcode < SLOTS { opcode } else { 0 }];
        // One writer per slab (see the module header).
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
}

/// The requests a session has received, by opcode, across all its workers.
#[derive(Debug, Default)]
pub struct RequestCounts {
    slabs: Mutex<Vec<Arc<Slab>>>,
}

impl RequestCounts {
    /// A slab for one more worker (`ring`: one serving a ring queue).
    pub(crate) fn slab(&self, ring: bool) -> Arc<Slab> {
        let s = Arc::new(Slab(std::array::from_fn(|_| AtomicU64::new(0)), ring));
        self.slabs.lock().push(s.clone());
        s
    }

    /// How many requests came through a ring queue (FUSE over io_uring), and how
    /// many through `/dev/fuse`.
    pub fn by_transport(&self) -> (u64, u64) {
        let (mut ring, mut dev) = (0, 0);
        for s in self.slabs.lock().iter() {
            let n: u64 = s.0.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            if s.1 {
                ring += n;
            } else {
                dev += n;
            }
        }
        (ring, dev)
    }

    /// Every opcode received at least once, with how many times, in opcode order
    /// (`"OTHER"`: opcodes this table does not name).
    pub fn by_opcode(&self) -> Vec<(&'static str, u64)> {
        let mut sum = [0u64; SLOTS];
        for s in self.slabs.lock().iter() {
            for (t, c) in sum.iter_mut().zip(s.0.iter()) {
                *t += c.load(Ordering::Relaxed);
            }
        }
        sum.iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(op, n)| (opcode_name(op as u32), *n))
            .collect()
    }
}

/// The name of FUSE opcode `op` as the kernel's `fuse.h` spells it, without `FUSE_`.
pub fn opcode_name(op: u32) -> &'static str {
    match op {
        1 => "LOOKUP",
        2 => "FORGET",
        3 => "GETATTR",
        4 => "SETATTR",
        5 => "READLINK",
        6 => "SYMLINK",
        8 => "MKNOD",
        9 => "MKDIR",
        10 => "UNLINK",
        11 => "RMDIR",
        12 => "RENAME",
        13 => "LINK",
        14 => "OPEN",
        15 => "READ",
        16 => "WRITE",
        17 => "STATFS",
        18 => "RELEASE",
        20 => "FSYNC",
        21 => "SETXATTR",
        22 => "GETXATTR",
        23 => "LISTXATTR",
        24 => "REMOVEXATTR",
        25 => "FLUSH",
        26 => "INIT",
        27 => "OPENDIR",
        28 => "READDIR",
        29 => "RELEASEDIR",
        30 => "FSYNCDIR",
        31 => "GETLK",
        32 => "SETLK",
        33 => "SETLKW",
        34 => "ACCESS",
        35 => "CREATE",
        36 => "INTERRUPT",
        37 => "BMAP",
        38 => "DESTROY",
        39 => "IOCTL",
        40 => "POLL",
        41 => "NOTIFY_REPLY",
        42 => "BATCH_FORGET",
        43 => "FALLOCATE",
        44 => "READDIRPLUS",
        45 => "RENAME2",
        46 => "LSEEK",
        47 => "COPY_FILE_RANGE",
        48 => "SETUPMAPPING",
        49 => "REMOVEMAPPING",
        50 => "SYNCFS",
        51 => "TMPFILE",
        52 => "STATX",
        _ => "OTHER",
    }
}
