//! Who holds the control socket's connections: slots counted per uid, so that no
//! uid's clients, however many and however slow, leave another uid (or the
//! person's newest request) without one.
//!
//! What stays true:
//! * **Only an admitted peer holds a slot.** The accept loop reads the peer's
//!   credentials and turns away a refused peer before it asks for one.
//! * **Requests.** A uid holds at most [`REQUESTS_PER_UID`] request slots, all uids
//!   together [`super::MAX_CLIENTS`]. A request is *reading* from accept until its
//!   line is in, then *working* until its reply is written. A newcomer that finds
//!   its uid's slots full takes the slot of that uid's oldest reading request, which
//!   is shut down; one that finds every slot taken takes the oldest reading request
//!   of the uid holding the most. A working request is never evicted (it ends by
//!   itself: one reload, then a reply bounded by its deadline; evicting it would
//!   let threads pile up behind the reload lock); when nothing may be evicted, the
//!   newcomer is turned away as busy.
//! * **Approvers.** A `subscribe` leaves the request slots for the approver slots,
//!   at most [`APPROVERS_PER_UID`] per uid and [`MAX_APPROVERS`] in all, which the
//!   eviction of requests never touches. A newcomer that finds them full takes the
//!   slot of the oldest approver of its uid (or, when all are taken, of the uid
//!   holding the most): long-lived approvers cannot hold every slot, and the
//!   person's newest `veilfs prompt` is the one served.
//! * **A slot is freed once:** at eviction, or when its [`Slot`] is dropped (which
//!   then finds it gone).

use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use parking_lot::Mutex;

/// Request slots one uid may hold.
pub const REQUESTS_PER_UID: usize = 8;
/// Approver slots one uid may hold.
pub const APPROVERS_PER_UID: usize = 8;
/// Approver slots of all uids together: as many as two uids may hold (only the
/// daemon's uid and root are ever admitted).
pub const MAX_APPROVERS: usize = 2 * APPROVERS_PER_UID;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Its request line is not in yet: it may be evicted.
    Reading,
    /// Its request is being answered: it ends by itself.
    Working,
    /// A subscribed approver (in the approver slots).
    Approving,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    Requests,
    Approvers,
}

impl Pool {
    fn per_uid(self) -> usize {
        match self {
            Pool::Requests => REQUESTS_PER_UID,
            Pool::Approvers => APPROVERS_PER_UID,
        }
    }

    fn in_all(self) -> usize {
        match self {
            Pool::Requests => super::MAX_CLIENTS,
            Pool::Approvers => MAX_APPROVERS,
        }
    }
}

impl Stage {
    fn pool(self) -> Pool {
        match self {
            Stage::Reading | Stage::Working => Pool::Requests,
            Stage::Approving => Pool::Approvers,
        }
    }

    fn evictable(self) -> bool {
        self != Stage::Working
    }
}

/// One held slot: whose, at which stage, and a handle to shut its connection down.
#[derive(Debug)]
struct Held {
    id: u64,
    uid: u32,
    stage: Stage,
    conn: UnixStream,
}

/// Every slot held, oldest first (by admission; an approver by when it subscribed).
#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    held: Vec<Held>,
}

impl Table {
    fn count(&self, pool: Pool, uid: Option<u32>) -> usize {
        self.held
            .iter()
            .filter(|h| h.stage.pool() == pool && uid.is_none_or(|u| h.uid == u))
            .count()
    }

    /// The uid holding the most slots of `pool`.
    fn largest_holder(&self, pool: Pool) -> Option<u32> {
        let uids = self.held.iter().filter(|h| h.stage.pool() == pool);
        uids.map(|h| h.uid)
            .max_by_key(|&u| self.count(pool, Some(u)))
    }

    /// Makes room in `pool` for one more slot of `uid`, evicting if it must;
    /// `false` when no room can be made.
    fn make_room(&mut self, pool: Pool, uid: u32) -> bool {
        let loser = if self.count(pool, Some(uid)) >= pool.per_uid() {
            uid
        } else if self.count(pool, None) >= pool.in_all() {
            match self.largest_holder(pool) {
                Some(u) => u,
                None => return false,
            }
        } else {
            return true;
        };
        let oldest = self
            .held
            .iter()
            .position(|h| h.uid == loser && h.stage.pool() == pool && h.stage.evictable());
        let Some(i) = oldest else {
            return false;
        };
        let gone = self.held.remove(i);
        let _ = gone.conn.shutdown(Shutdown::Both);
        log::debug!(
            "control socket: evicted the oldest {:?} connection of uid {} for a newer one of uid {uid}",
            gone.stage,
            gone.uid
        );
        true
    }
}

/// The slots of one control socket.
#[derive(Debug, Default)]
pub struct Slots {
    table: Mutex<Table>,
}

/// A request slot, or after [`Slot::approve`] an approver slot; freed when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
}

impl Slots {
    pub fn new() -> Arc<Slots> {
        Arc::new(Slots::default())
    }

    /// A reading request slot for a connection of `uid` (`conn`: a handle to shut
    /// it down by, should it be evicted), or `None` when none can be made.
    pub fn admit(self: &Arc<Self>, uid: u32, conn: UnixStream) -> Option<Slot> {
        let mut t = self.table.lock();
        if !t.make_room(Pool::Requests, uid) {
            return None;
        }
        let id = t.next_id;
        t.next_id += 1;
        t.held.push(Held {
            id,
            uid,
            stage: Stage::Reading,
            conn,
        });
        Some(Slot {
            slots: self.clone(),
            id,
        })
    }

    /// How many slots of each stage `uid` holds (reading, working, approving).
    #[cfg(test)]
    fn held_by(&self, uid: u32) -> [usize; 3] {
        let t = self.table.lock();
        let n = |s: Stage| {
            t.held
                .iter()
                .filter(|h| h.uid == uid && h.stage == s)
                .count()
        };
        [n(Stage::Reading), n(Stage::Working), n(Stage::Approving)]
    }
}

impl Slot {
    /// The request line is in: from now on the request is not evicted. `false`
    /// when it was evicted before (its connection is shut down: stop).
    pub fn start_work(&self) -> bool {
        let mut t = self.slots.table.lock();
        match t.held.iter_mut().find(|h| h.id == self.id) {
            Some(h) => {
                h.stage = Stage::Working;
                true
            }
            None => false,
        }
    }

    /// Moves a reading request to the approver slots (the newest approver of its
    /// uid). `false` when it was evicted before, or no approver slot can be made.
    pub fn approve(&self) -> bool {
        let mut t = self.slots.table.lock();
        let Some(i) = t.held.iter().position(|h| h.id == self.id) else {
            return false;
        };
        let mut held = t.held.remove(i);
        if !t.make_room(Pool::Approvers, held.uid) {
            return false;
        }
        held.stage = Stage::Approving;
        t.held.push(held);
        true
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.table.lock().held.retain(|h| h.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection: the client's end (kept by the test, to see whether the
    /// daemon's end was shut down) and the handle its slot holds.
    fn conn() -> (UnixStream, UnixStream) {
        let (client, daemon) = UnixStream::pair().unwrap();
        client.set_nonblocking(true).unwrap();
        (client, daemon)
    }

    /// Whether the daemon's end of `client` was shut down (the client reads its end).
    fn shut_down(client: &UnixStream) -> bool {
        use std::io::Read;
        matches!((&*client).read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn a_full_uid_loses_its_oldest_reading_request_to_its_newest() {
        let s = Slots::new();
        let mut kept = Vec::new();
        for _ in 0..REQUESTS_PER_UID {
            let (c, h) = conn();
            kept.push((c, s.admit(7, h).unwrap()));
        }
        let (c, h) = conn();
        let newest = s.admit(7, h).expect("the newest request gets a slot");
        assert!(shut_down(&kept[0].0), "the oldest was shut down");
        assert!(!kept[0].1.start_work(), "the oldest learns it was evicted");
        assert!(kept[1..].iter().all(|(c, _)| !shut_down(c)));
        assert!(newest.start_work() && !shut_down(&c));
        assert_eq!(s.held_by(7), [REQUESTS_PER_UID - 1, 1, 0]);
    }

    #[test]
    fn a_working_request_is_never_evicted_and_the_newcomer_is_busy() {
        let s = Slots::new();
        let working: Vec<Slot> = (0..REQUESTS_PER_UID)
            .map(|_| s.admit(7, conn().1).unwrap())
            .collect();
        assert!(working.iter().all(Slot::start_work));
        assert!(s.admit(7, conn().1).is_none());
        drop(working);
        assert_eq!(s.held_by(7), [0, 0, 0], "dropped slots are freed");
        assert!(s.admit(7, conn().1).is_some());
    }

    #[test]
    fn one_uid_never_takes_the_slots_of_another() {
        let s = Slots::new();
        let theirs = s.admit(0, conn().1).unwrap();
        let mine: Vec<Slot> = (0..5 * REQUESTS_PER_UID)
            .filter_map(|_| s.admit(1000, conn().1))
            .collect();
        assert_eq!(
            mine.len(),
            5 * REQUESTS_PER_UID,
            "each newcomer is admitted"
        );
        assert_eq!(s.held_by(1000), [REQUESTS_PER_UID, 0, 0]);
        assert!(theirs.start_work(), "root's request is untouched");
        let roots: Vec<Slot> = (1..REQUESTS_PER_UID)
            .map(|_| s.admit(0, conn().1).unwrap())
            .collect();
        assert_eq!(s.held_by(0), [REQUESTS_PER_UID - 1, 1, 0]);
        assert_eq!(s.held_by(1000), [REQUESTS_PER_UID, 0, 0]);
        drop(roots);
    }

    #[test]
    fn every_slot_taken_the_uid_holding_most_gives_one_up() {
        let s = Slots::new();
        // Three uids (more than are ever admitted) fill the table.
        let a: Vec<Slot> = (0..REQUESTS_PER_UID)
            .map(|_| s.admit(1, conn().1).unwrap())
            .collect();
        let b: Vec<Slot> = (0..super::super::MAX_CLIENTS - REQUESTS_PER_UID)
            .map(|_| s.admit(2, conn().1).unwrap())
            .collect();
        let c = s.admit(3, conn().1).expect("a third uid still gets a slot");
        assert_eq!(s.held_by(3), [1, 0, 0]);
        assert_eq!(
            s.held_by(1)[0] + s.held_by(2)[0],
            super::super::MAX_CLIENTS - 1
        );
        drop((a, b, c));
    }

    #[test]
    fn approvers_leave_the_request_slots_and_are_not_evicted_by_requests() {
        let s = Slots::new();
        let (ac, ah) = conn();
        let approver = s.admit(7, ah).unwrap();
        assert!(approver.approve());
        let requests: Vec<Slot> = (0..3 * REQUESTS_PER_UID)
            .filter_map(|_| s.admit(7, conn().1))
            .collect();
        assert_eq!(requests.len(), 3 * REQUESTS_PER_UID);
        assert!(!shut_down(&ac), "request eviction left the approver alone");
        assert_eq!(s.held_by(7), [REQUESTS_PER_UID, 0, 1]);
    }

    #[test]
    fn the_newest_approver_of_a_full_uid_displaces_its_oldest() {
        let s = Slots::new();
        let mut approvers = Vec::new();
        for _ in 0..APPROVERS_PER_UID + 1 {
            let (c, h) = conn();
            let slot = s.admit(7, h).unwrap();
            assert!(slot.approve(), "an approver always gets a slot");
            approvers.push((c, slot));
        }
        assert!(shut_down(&approvers[0].0), "the oldest approver was let go");
        assert!(approvers[1..].iter().all(|(c, _)| !shut_down(c)));
        assert_eq!(s.held_by(7), [0, 0, APPROVERS_PER_UID]);
        let other = s.admit(0, conn().1).unwrap();
        assert!(other.approve());
        assert_eq!(
            s.held_by(0),
            [0, 0, 1],
            "another uid's approver has its own"
        );
    }
}
