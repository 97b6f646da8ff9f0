//! Session rooms: the members (sockets, as `RoomMember` trait objects) that
//! follow a session's turns besides whoever asked. Every turn's sink is tapped
//! into its session's room, whichever door started it, skipping the member
//! that sent the request (it reads its own stream): each gets an event once.
//!
//! Delivery never waits: a member takes each event into its bounded queue or
//! refuses it, and then leaves the room, cut off from the rest of the turn
//! while the others go on. A member joins from the next event on: no replay.
//!
//! Most turns have nobody to tell: a tap looks its room up (under the shard's
//! lock) only while the shard has a room or after a join into the shard, and
//! makes none, so a turn with no room costs two atomic loads an event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use super::caller::Caller;
use crate::events::{EventTap, TurnEvent};
use crate::ids::SessionId;

const N_SHARDS: usize = 64;

/// Members one room may hold (each a connection that may ask for every turn).
pub const MAX_MEMBERS_PER_ROOM: usize = 256;

/// Names a member (one per socket) across rooms, so its own turns skip it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberId(u64);

impl MemberId {
    pub fn next() -> MemberId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        MemberId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Why a member was put out of a room other than by its own refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The session was handed to an owner whose session it may not read.
    OwnerChanged,
    Deleted,
}

/// One follower of a session's turns (a socket, at the edge).
pub trait RoomMember: Send + Sync {
    /// Takes one event without waiting; false when it cannot (gone, or its
    /// queue full): it has left the room and must tell its reader so.
    fn deliver(&self, session_id: &SessionId, event: &TurnEvent) -> bool;
    fn removed(&self, session_id: &SessionId, why: Removal);
}

/// Every session's room, sharded by session id as the registry is.
pub struct Rooms {
    shards: [Shard; N_SHARDS],
}

#[derive(Default)]
struct Shard {
    /// A room is kept while it has a member or a turn's tap holds it.
    rooms: Mutex<HashMap<SessionId, Arc<Room>>>,
    /// `rooms.len()`, and the joins so far (both set under the lock): a tap
    /// that found no room looks again only after a join.
    n_rooms: AtomicUsize,
    joins: AtomicU64,
}

#[derive(Default)]
struct Room {
    members: Mutex<Vec<Seat>>,
    /// `members.len()`, read without the lock at every event.
    n_members: AtomicUsize,
}

struct Seat {
    id: MemberId,
    caller: Caller,
    member: Arc<dyn RoomMember>,
}

/// A turn's view of its session's room (`EventSink::with_tap`).
struct RoomTap {
    rooms: Arc<Rooms>,
    session_id: SessionId,
    shard: usize,
    /// The shard's `joins` when the tap last found no room.
    looked_at: AtomicU64,
    /// The room once found, held (and so kept in `Rooms`) until the turn ends.
    room: OnceLock<Arc<Room>>,
    skip: Option<MemberId>,
}

/// `looked_at` of a tap that must look at its next event.
const NEVER_LOOKED: u64 = u64::MAX;

impl Default for Rooms {
    fn default() -> Self {
        Rooms {
            shards: std::array::from_fn(|_| Shard::default()),
        }
    }
}

impl Rooms {
    /// Seats `member` in the session's room (once: joining again only
    /// replaces its caller). False when the room is full.
    pub fn join(
        &self,
        session_id: &SessionId,
        id: MemberId,
        caller: Caller,
        member: Arc<dyn RoomMember>,
    ) -> bool {
        let shard = self.shard_of(session_id);
        let mut rooms = lock(&shard.rooms);
        let room = rooms.entry(session_id.clone()).or_default();
        let joined = room.seats(|members| {
            members.retain(|seat| seat.id != id);
            let joined = members.len() < MAX_MEMBERS_PER_ROOM;
            if joined {
                members.push(Seat { id, caller, member });
            }
            joined
        });
        // Counted before the join: a tap that reads this join sees the room.
        shard.n_rooms.store(rooms.len(), Ordering::Release);
        shard.joins.fetch_add(1, Ordering::Release);
        joined
    }

    /// Takes the member out of the session's room, if it is there.
    pub fn leave(&self, session_id: &SessionId, id: MemberId) {
        self.change_room(session_id, |members| members.retain(|seat| seat.id != id));
    }

    /// Puts out every member whose caller `keeps` refuses, telling each why
    /// (after an owner change, or with `|_| false` after a delete).
    pub fn evict(&self, session_id: &SessionId, keeps: impl Fn(&Caller) -> bool, why: Removal) {
        let mut evicted = Vec::new();
        self.change_room(session_id, |members| {
            evicted.extend(members.extract_if(.., |seat| !keeps(&seat.caller)));
        });
        // Told outside the locks: a member's own work never holds a room.
        for seat in evicted {
            seat.member.removed(session_id, why);
        }
    }

    /// The tap a turn of this session sends its events through; `skip` is the
    /// member that sent the request.
    pub fn tap(
        self: &Arc<Self>,
        session_id: &SessionId,
        skip: Option<MemberId>,
    ) -> Arc<dyn EventTap> {
        let shard = shard_index(session_id);
        let joins = self.shards[shard].joins.load(Ordering::Acquire);
        let looked_at = match self.shards[shard].n_rooms.load(Ordering::Acquire) {
            0 => joins,
            _ => NEVER_LOOKED,
        };
        Arc::new(RoomTap {
            rooms: self.clone(),
            session_id: session_id.clone(),
            shard,
            looked_at: AtomicU64::new(looked_at),
            room: OnceLock::new(),
            skip,
        })
    }

    fn shard_of(&self, session_id: &SessionId) -> &Shard {
        &self.shards[shard_index(session_id)]
    }

    /// Changes the seats of the session's room, if it has one.
    fn change_room(&self, session_id: &SessionId, change: impl FnOnce(&mut Vec<Seat>)) {
        let shard = self.shard_of(session_id);
        let mut rooms = lock(&shard.rooms);
        if let Some(room) = rooms.get(session_id) {
            room.seats(change);
        }
        shard.release(&mut rooms, session_id);
    }
}

impl Shard {
    /// Forgets the session's room when nobody is in it and no turn holds it.
    fn release(&self, rooms: &mut HashMap<SessionId, Arc<Room>>, session_id: &SessionId) {
        let unused = |room: &Arc<Room>| {
            Arc::strong_count(room) == 1 && room.n_members.load(Ordering::Acquire) == 0
        };
        if rooms.get(session_id).is_some_and(unused) {
            rooms.remove(session_id);
            self.n_rooms.store(rooms.len(), Ordering::Release);
        }
    }
}

impl Room {
    /// Changes the seats under the room's lock, keeping `n_members` true.
    fn seats<R>(&self, change: impl FnOnce(&mut Vec<Seat>) -> R) -> R {
        let mut members = lock(&self.members);
        let result = change(&mut members);
        self.n_members.store(members.len(), Ordering::Release);
        result
    }
}

fn shard_index(session_id: &SessionId) -> usize {
    (session_id.shard_hash() as usize) % N_SHARDS
}

/// Only plain list and map operations run under these locks; a poisoned one
/// still holds a usable value.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RoomTap {
    /// The session's room while anyone is in it. Looked up at the first event
    /// after a join into the shard, then held.
    fn room(&self) -> Option<&Arc<Room>> {
        let room = match self.room.get() {
            Some(room) => room,
            None => {
                let shard = &self.rooms.shards[self.shard];
                if shard.joins.load(Ordering::Acquire) == self.looked_at.load(Ordering::Acquire) {
                    return None;
                }
                let rooms = lock(&shard.rooms);
                let Some(room) = rooms.get(&self.session_id) else {
                    let joins = shard.joins.load(Ordering::Acquire);
                    self.looked_at.store(joins, Ordering::Release);
                    return None;
                };
                // Cloned under the shard's lock: held, it stays in `Rooms`.
                self.room.get_or_init(|| room.clone())
            }
        };
        (room.n_members.load(Ordering::Acquire) > 0).then_some(room)
    }
}

impl EventTap for RoomTap {
    fn listening(&self) -> bool {
        self.room().is_some()
    }

    fn deliver(&self, event: &TurnEvent) {
        let deliver = |seat: &Seat| {
            Some(seat.id) == self.skip || seat.member.deliver(&self.session_id, event)
        };
        if let Some(room) = self.room() {
            room.seats(|members| members.retain(deliver));
        }
    }
}

impl Drop for RoomTap {
    fn drop(&mut self) {
        // The room is let go (at the end of the condition) before `release`.
        if self.room.take().is_some() {
            let shard = &self.rooms.shards[self.shard];
            shard.release(&mut lock(&shard.rooms), &self.session_id);
        }
    }
}

impl std::fmt::Debug for RoomTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RoomTap({}, skip {:?})", self.session_id, self.skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{StatusEvent, TurnStatus};

    impl Rooms {
        fn n_members(&self, session_id: &SessionId) -> usize {
            lock(&self.shard_of(session_id).rooms)
                .get(session_id)
                .map_or(0, |room| room.n_members.load(Ordering::Acquire))
        }

        /// Rooms kept (with members, or held by a live turn).
        fn n_rooms(&self) -> usize {
            self.shards
                .iter()
                .map(|shard| lock(&shard.rooms).len())
                .sum()
        }
    }

    /// A member that records what it was given, refusing past `capacity`.
    struct Recorder {
        got: Mutex<Vec<String>>,
        capacity: usize,
        removed: Mutex<Vec<Removal>>,
    }

    impl Recorder {
        fn new(capacity: usize) -> Arc<Recorder> {
            Arc::new(Recorder {
                got: Mutex::new(Vec::new()),
                capacity,
                removed: Mutex::new(Vec::new()),
            })
        }

        fn n_got(&self) -> usize {
            lock(&self.got).len()
        }
    }

    impl RoomMember for Recorder {
        fn deliver(&self, _session_id: &SessionId, event: &TurnEvent) -> bool {
            let mut got = lock(&self.got);
            if got.len() >= self.capacity {
                return false;
            }
            got.push(event.name().to_string());
            true
        }

        fn removed(&self, _session_id: &SessionId, why: Removal) {
            lock(&self.removed).push(why);
        }
    }

    fn started() -> TurnEvent {
        TurnEvent::Status(StatusEvent {
            status: TurnStatus::Started,
            session_id: "s".into(),
        })
    }

    fn session() -> SessionId {
        SessionId::new("s")
    }

    #[test]
    fn every_member_but_the_sender_gets_each_event_once() {
        let rooms = Arc::new(Rooms::default());
        let (sender, other) = (Recorder::new(10), Recorder::new(10));
        let (sender_id, other_id) = (MemberId::next(), MemberId::next());
        let alice = Caller::new("alice", false);
        assert!(rooms.join(&session(), sender_id, alice.clone(), sender.clone()));
        assert!(rooms.join(&session(), other_id, alice.clone(), other.clone()));
        // Joining again keeps one seat.
        assert!(rooms.join(&session(), other_id, alice, other.clone()));
        let tap = rooms.tap(&session(), Some(sender_id));
        assert!(tap.listening());
        tap.deliver(&started());
        tap.deliver(&started());
        assert_eq!((sender.n_got(), other.n_got()), (0, 2));
    }

    #[test]
    fn a_member_that_refuses_is_cut_off_and_the_others_go_on() {
        let rooms = Arc::new(Rooms::default());
        let (slow, fast) = (Recorder::new(1), Recorder::new(10));
        let caller = Caller::new("alice", false);
        rooms.join(&session(), MemberId::next(), caller.clone(), slow.clone());
        rooms.join(&session(), MemberId::next(), caller, fast.clone());
        let tap = rooms.tap(&session(), None);
        for _ in 0..3 {
            tap.deliver(&started());
        }
        assert_eq!((slow.n_got(), fast.n_got()), (1, 3));
        assert_eq!(rooms.n_members(&session()), 1);
    }

    #[test]
    fn a_member_joining_during_a_turn_gets_the_rest_of_it() {
        let rooms = Arc::new(Rooms::default());
        let tap = rooms.tap(&session(), None);
        assert!(!tap.listening());
        tap.deliver(&started());
        let late = Recorder::new(10);
        rooms.join(
            &session(),
            MemberId::next(),
            Caller::operator(),
            late.clone(),
        );
        assert!(tap.listening());
        tap.deliver(&started());
        assert_eq!(late.n_got(), 1);
    }

    #[test]
    fn a_room_is_forgotten_once_empty_and_untapped() {
        let rooms = Arc::new(Rooms::default());
        let id = MemberId::next();
        rooms.join(&session(), id, Caller::operator(), Recorder::new(1));
        let tap = rooms.tap(&session(), None);
        tap.deliver(&started());
        rooms.leave(&session(), id);
        assert_eq!(rooms.n_rooms(), 1, "the live turn found it and holds it");
        drop(tap);
        assert_eq!(rooms.n_rooms(), 0);
    }

    #[test]
    fn a_turn_with_nobody_to_tell_makes_no_room_and_finds_a_later_one() {
        let rooms = Arc::new(Rooms::default());
        let elsewhere = Recorder::new(10);
        let other_session = SessionId::new("other");
        let (caller, id) = (Caller::operator(), MemberId::next());
        rooms.join(&other_session, MemberId::next(), caller.clone(), elsewhere);
        let tap = rooms.tap(&session(), None);
        tap.deliver(&started());
        assert_eq!(rooms.n_rooms(), 1, "only the other session's");
        // Left and joined again while the turn runs: the tap finds the room.
        let late = Recorder::new(10);
        rooms.join(&session(), id, caller.clone(), late.clone());
        rooms.leave(&session(), id);
        rooms.join(&session(), id, caller, late.clone());
        tap.deliver(&started());
        assert_eq!(late.n_got(), 1);
        drop(tap);
        rooms.leave(&session(), id);
        assert_eq!(rooms.n_rooms(), 1);
    }

    #[test]
    fn an_owner_change_puts_out_the_members_who_may_no_longer_read() {
        let rooms = Arc::new(Rooms::default());
        let (alice, bob) = (Recorder::new(10), Recorder::new(10));
        rooms.join(
            &session(),
            MemberId::next(),
            Caller::new("alice", false),
            alice.clone(),
        );
        rooms.join(
            &session(),
            MemberId::next(),
            Caller::new("bob", false),
            bob.clone(),
        );
        rooms.evict(
            &session(),
            |caller| caller.may_touch(Some("bob")),
            Removal::OwnerChanged,
        );
        assert_eq!(*lock(&alice.removed), vec![Removal::OwnerChanged]);
        assert!(lock(&bob.removed).is_empty());
        assert_eq!(rooms.n_members(&session()), 1);
    }
}
