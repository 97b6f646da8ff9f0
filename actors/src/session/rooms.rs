//! Session rooms: who follows a session's turns besides whoever asked for
//! them. `Runtime::send_message` taps every turn's `EventSink` into the
//! session's room, so each member gets the turn's events whichever door
//! started it (a socket, HTTP, AG-UI, a background turn with no requester),
//! except the member that sent the request, which reads its own stream: each
//! event reaches a member once. Members are trait objects (`RoomMember`): the
//! core never names a transport.
//!
//! Delivery never waits. A member takes each event into its own bounded
//! queue (a socket's is its connection's outgoing limit) or refuses it; one
//! that refuses leaves the room and is cut off from the rest of the turn,
//! which goes on for the others. A member joins from the next event on:
//! nothing it missed is replayed (the stored conversation is readable).
//!
//! Most turns have nobody to tell: a turn's tap finds its room lazily. It
//! looks the room up when it starts only if the room's shard has a member at
//! all, and later only after a join into that shard (each shard counts its
//! joins), so a turn with no room costs two atomic loads an event; once it
//! found its room it holds it, and a member joining later sits in that room.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::caller::Caller;
use crate::events::{EventTap, TurnEvent};
use crate::ids::SessionId;

const N_SHARDS: usize = 64;

/// Members one room may hold; a join past it is refused (each member is a
/// connection that may ask for every turn of the session in full).
pub const MAX_MEMBERS_PER_ROOM: usize = 256;

/// Names a member across rooms (one per socket), so that the member that sent
/// a request is skipped in the fan-out of its own turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemberId(u64);

impl MemberId {
    /// A process-wide unique id.
    pub fn next() -> MemberId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        MemberId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Why a member was put out of a room other than by its own refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The session was handed to another owner this member may not read.
    OwnerChanged,
    /// The session was deleted.
    Deleted,
}

/// One follower of a session's turns (a socket, at the edge).
pub trait RoomMember: Send + Sync {
    /// Takes one event of the session's turn, without waiting; false when it
    /// cannot (gone, or its queue is past its bound): it then leaves the room
    /// and must tell its reader it was cut off (a socket's connection is closed).
    fn deliver(&self, session_id: &SessionId, event: &TurnEvent) -> bool;
    /// The member was put out of the room (`Removal`).
    fn removed(&self, session_id: &SessionId, why: Removal);
}

/// Every session's room, sharded by session id as the registry is.
pub struct Rooms {
    shards: Vec<Shard>,
}

struct Shard {
    rooms: Mutex<HashMap<SessionId, Arc<Room>>>,
    /// Joins into this shard so far, bumped under the lock: a tap that found
    /// no room looks again only once this moved.
    joins: AtomicU64,
    /// Members of this shard's rooms, never fewer than there are: none, and
    /// a new turn's tap need not look.
    n_members: AtomicUsize,
}

/// One session's members. Kept in `Rooms` while it has a member or a turn's
/// tap holds it, so a member that joins during a turn is seen by that turn.
struct Room {
    session_id: SessionId,
    members: Mutex<Vec<Seat>>,
    /// `members.len()`, read without the lock on every event.
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
    /// The room, once found; held until the tap is dropped.
    room: OnceLock<Arc<Room>>,
    /// The member that sent the request, which reads its own stream.
    skip: Option<MemberId>,
}

/// `looked_at` of a tap that must look at its next event.
const NEVER_LOOKED: u64 = u64::MAX;

impl Default for Rooms {
    fn default() -> Self {
        let shard = || Shard {
            rooms: Mutex::new(HashMap::new()),
            joins: AtomicU64::new(0),
            n_members: AtomicUsize::new(0),
        };
        Rooms {
            shards: (0..N_SHARDS).map(|_| shard()).collect(),
        }
    }
}

impl Room {
    /// Sets the member count after `members` changed, from `before` members.
    fn counted(&self, shard: &Shard, before: usize, members: &[Seat]) {
        self.n_members.store(members.len(), Ordering::Release);
        // Added to before a join takes its seat: the shard's count is never short.
        if members.len() < before {
            shard
                .n_members
                .fetch_sub(before - members.len(), Ordering::AcqRel);
        }
    }
}

impl Rooms {
    /// Puts `member` in the session's room (again: a member already in it
    /// keeps one seat, with this caller). False when the room is full.
    pub fn join(
        &self,
        session_id: &SessionId,
        id: MemberId,
        caller: Caller,
        member: Arc<dyn RoomMember>,
    ) -> bool {
        let shard = self.shard_of(session_id);
        let mut rooms = lock(&shard.rooms);
        let room = rooms.entry(session_id.clone()).or_insert_with(|| {
            Arc::new(Room {
                session_id: session_id.clone(),
                members: Mutex::new(Vec::new()),
                n_members: AtomicUsize::new(0),
            })
        });
        let mut members = lock(&room.members);
        shard.n_members.fetch_add(1, Ordering::AcqRel);
        let before = members.len() + 1;
        members.retain(|seat| seat.id != id);
        let joined = members.len() < MAX_MEMBERS_PER_ROOM;
        if joined {
            members.push(Seat { id, caller, member });
        }
        room.counted(shard, before, &members);
        drop(members);
        shard.joins.fetch_add(1, Ordering::Release);
        if !joined {
            Rooms::release(&mut rooms, session_id);
        }
        joined
    }

    /// Takes the member out of the session's room, if it is there.
    pub fn leave(&self, session_id: &SessionId, id: MemberId) {
        let shard = self.shard_of(session_id);
        let mut rooms = lock(&shard.rooms);
        if let Some(room) = rooms.get(session_id) {
            let mut members = lock(&room.members);
            let before = members.len();
            members.retain(|seat| seat.id != id);
            room.counted(shard, before, &members);
        }
        Rooms::release(&mut rooms, session_id);
    }

    /// Puts out every member whose caller `keeps` refuses, telling each why
    /// (after an owner change, or with `|_| false` after a delete).
    pub fn evict(&self, session_id: &SessionId, keeps: impl Fn(&Caller) -> bool, why: Removal) {
        let mut evicted = Vec::new();
        {
            let shard = self.shard_of(session_id);
            let mut rooms = lock(&shard.rooms);
            if let Some(room) = rooms.get(session_id) {
                let mut members = lock(&room.members);
                let before = members.len();
                let (kept, out): (Vec<Seat>, Vec<Seat>) =
                    members.drain(..).partition(|seat| keeps(&seat.caller));
                *members = kept;
                room.counted(shard, before, &members);
                evicted = out;
            }
            Rooms::release(&mut rooms, session_id);
        }
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
        let shard = Rooms::shard_index(session_id);
        let joins = self.shards[shard].joins.load(Ordering::Acquire);
        // A join counted in `joins` added to `n_members` first: with no
        // member in the shard, the room is found at a later join if ever.
        let looked_at = match self.shards[shard].n_members.load(Ordering::Acquire) {
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

    /// How many members the session's room has now.
    pub fn n_members(&self, session_id: &SessionId) -> usize {
        lock(&self.shard_of(session_id).rooms)
            .get(session_id)
            .map_or(0, |room| room.n_members.load(Ordering::Acquire))
    }

    /// How many rooms are kept (with members, or held by a live turn).
    pub fn n_rooms(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(&shard.rooms).len())
            .sum()
    }

    fn shard_index(session_id: &SessionId) -> usize {
        (session_id.shard_hash() as usize) % N_SHARDS
    }

    fn shard_of(&self, session_id: &SessionId) -> &Shard {
        &self.shards[Rooms::shard_index(session_id)]
    }

    /// Forgets the room when nobody is in it and no turn holds it.
    fn release(rooms: &mut HashMap<SessionId, Arc<Room>>, session_id: &SessionId) {
        let unused = rooms.get(session_id).is_some_and(|room| {
            Arc::strong_count(room) == 1 && room.n_members.load(Ordering::Acquire) == 0
        });
        if unused {
            rooms.remove(session_id);
        }
    }
}

/// Only plain list and map operations run under these locks; a poisoned one
/// still holds a usable value.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl RoomTap {
    /// The session's room, if it has been made: found at the first event
    /// after a join into the shard, then held.
    fn room(&self) -> Option<&Arc<Room>> {
        if let Some(room) = self.room.get() {
            return Some(room);
        }
        let shard = &self.rooms.shards[self.shard];
        if shard.joins.load(Ordering::Acquire) == self.looked_at.load(Ordering::Acquire) {
            return None;
        }
        let rooms = lock(&shard.rooms);
        match rooms.get(&self.session_id) {
            // Cloned under the shard's lock: held, it stays in `Rooms`.
            Some(room) => Some(self.room.get_or_init(|| room.clone())),
            None => {
                let joins = shard.joins.load(Ordering::Acquire);
                self.looked_at.store(joins, Ordering::Release);
                None
            }
        }
    }
}

impl EventTap for RoomTap {
    fn listening(&self) -> bool {
        self.room()
            .is_some_and(|room| room.n_members.load(Ordering::Acquire) > 0)
    }

    fn deliver(&self, event: &TurnEvent) {
        let Some(room) = self.room() else {
            return;
        };
        if room.n_members.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut members = lock(&room.members);
        let before = members.len();
        let skip = self.skip;
        members
            .retain(|seat| Some(seat.id) == skip || seat.member.deliver(&room.session_id, event));
        room.counted(&self.rooms.shards[self.shard], before, &members);
    }
}

impl Drop for RoomTap {
    fn drop(&mut self) {
        if let Some(room) = self.room.take() {
            drop(room);
            let mut rooms = lock(&self.rooms.shards[self.shard].rooms);
            Rooms::release(&mut rooms, &self.session_id);
        }
    }
}

impl std::fmt::Debug for RoomTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomTap")
            .field("session_id", &self.session_id)
            .field("skip", &self.skip)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{StatusEvent, TurnStatus};

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
