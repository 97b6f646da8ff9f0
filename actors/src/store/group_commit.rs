//! Group commit for `PgStore`: the session writes of many actors, queued
//! here, are committed together, one statement and one commit flush per
//! batch instead of one transaction of several round trips per write. Every write keeps its own condition (the version its writer
//! loaded), so a stale write in a batch changes nothing while the others
//! commit. A writer is answered only after its batch committed: grouping
//! never weakens durability, it shares the flush.
//!
//! The writers run on a thread of their own, so they keep going whatever the
//! HTTP workers do, and stop when the last `PgStore` clone is dropped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot, Mutex, OwnedMutexGuard};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::postgres::{settle, MessageRow, SessionRow, Shared, OPERATION_TIMEOUT};
use super::{StoreError, StoreResult, Version, Written};
use crate::ids::SessionId;

/// The most writes one transaction carries; more wait for the next batch.
/// Also the most advisory locks a batch holds (`batch_head!`).
const MAX_BATCH: usize = 256;
/// How many batches a process has in flight at most (`PgStore::in_schema`).
pub(super) const WRITERS: usize = 2;
/// How many times a batch that lost a deadlock (or serialization) race is run again.
const MAX_BATCH_ATTEMPTS: usize = 3;

/// One session write: its row, the version it expects, its new or changed messages.
pub(super) struct SessionWrite {
    pub row: SessionRow,
    pub expected: Version,
    pub messages: Vec<MessageRow>,
    /// Inbox items this write takes (marked surfaced only if it commits).
    pub taken: Vec<String>,
}

struct Queued {
    write: SessionWrite,
    answer: oneshot::Sender<StoreResult<Written>>,
    /// When it was submitted: a write that waited `OPERATION_TIMEOUT` for
    /// a batch is answered instead of batched (`submit`).
    submitted: Instant,
}

/// What waits for a batch: the queue, and the writes a batch left for the
/// next one (`write_batches`). Shared by the writers; holding it is the
/// turn to run a batch.
struct Waiting {
    receiver: mpsc::UnboundedReceiver<Queued>,
    carried: Vec<Queued>,
}

type Queue = Arc<Mutex<Waiting>>;

/// The queue writes go in; dropping it stops the writer thread.
pub(super) struct GroupCommit {
    sender: mpsc::UnboundedSender<Queued>,
}

impl GroupCommit {
    /// Starts `n_writers` batch writers on a thread of their own. Several
    /// writers let one batch fill while another commits.
    pub fn start(shared: Arc<Shared>, n_writers: usize) -> Result<GroupCommit, String> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let queue: Queue = Arc::new(Mutex::new(Waiting {
            receiver,
            carried: Vec::new(),
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("cannot start the database writer: {error}"))?;
        std::thread::Builder::new()
            .name("pg-group-commit".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let writers: Vec<_> = (0..n_writers.max(1))
                        .map(|_| tokio::spawn(write_batches(queue.clone(), shared.clone())))
                        .collect();
                    for writer in writers {
                        let _ = writer.await;
                    }
                });
            })
            .map_err(|error| format!("cannot start the database writer: {error}"))?;
        Ok(GroupCommit { sender })
    }

    /// Queues `write`; the answer comes once its batch committed (or failed).
    ///
    /// It always comes within twice `OPERATION_TIMEOUT`, with no timer of
    /// the caller's: the queue is unbounded (sending never waits), and a
    /// writer answers every write it takes. A write waits for a writer to
    /// take it while other batches hold the turn, each bounded, and is
    /// answered `Unavailable` when taken after `OPERATION_TIMEOUT` (those
    /// ahead of it in the queue are older, so a write is never left behind
    /// by a full batch of them); once in a batch, everything that can wait
    /// (the pool's checkout, a migration, the statement, the commit) runs
    /// under the batch's `OPERATION_TIMEOUT`, and a batch that fails or
    /// times out answers all of its writes. A writer that stopped (a
    /// panic) drops its answers, and `submit` reads that as a failure.
    pub async fn submit(&self, write: SessionWrite) -> StoreResult<Written> {
        let (answer, answered) = oneshot::channel();
        self.sender
            .send(Queued {
                write,
                answer,
                submitted: Instant::now(),
            })
            .map_err(|_| StoreError::Failed("the database writer has stopped".into()))?;
        answered
            .await
            .unwrap_or_else(|_| Err(StoreError::Failed("the database writer has stopped".into())))
    }
}

/// One writer: waits for its turn (the queue), takes what is queued (at
/// least one write, at most `MAX_BATCH`, one write per session), runs the
/// batch's statement, hands the turn on, commits, answers, repeats.
async fn write_batches(queue: Queue, shared: Arc<Shared>) {
    loop {
        // The turn: held from taking a batch until its statement has run,
        // so batches never run side by side (they contended for the same
        // pages and cut each other small) and the next one fills meanwhile.
        let mut turn = queue.clone().lock_owned().await;
        let waiting = &mut *turn;
        // A write of a session already in the batch waits for the next one
        // (whichever writer takes it), so a batch never holds two conditions
        // on one row. Carried writes are shared, never kept by a writer:
        // one waiting for new writes (below) would otherwise hold the turn
        // while another writer's carried writes wait for it.
        let mut filling = Filling {
            batch: Vec::new(),
            sessions: HashSet::new(),
            now: Instant::now(),
        };
        for queued in std::mem::take(&mut waiting.carried) {
            filling.offer(queued, &mut waiting.carried);
        }
        while filling.batch.is_empty() {
            match waiting.receiver.recv().await {
                Some(queued) => filling.offer(queued, &mut waiting.carried),
                None => return,
            }
        }
        while filling.batch.len() < MAX_BATCH {
            let Ok(queued) = waiting.receiver.try_recv() else {
                break;
            };
            filling.offer(queued, &mut waiting.carried);
        }
        let batch = filling.batch;
        let writes: Vec<&SessionWrite> = batch.iter().map(|queued| &queued.write).collect();
        let outcome = match tokio::time::timeout(
            OPERATION_TIMEOUT,
            run_batch(&shared, &writes, turn),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(StoreError::Unavailable(
                format!("no answer from the database within {OPERATION_TIMEOUT:?}").into(),
            )),
        };
        match outcome {
            Ok(written) => {
                for (queued, written) in batch.into_iter().zip(written) {
                    let _ = queued.answer.send(Ok(written));
                }
            }
            Err(error) => {
                for queued in batch {
                    let _ = queued.answer.send(Err(error.clone()));
                }
            }
        }
    }
}

/// `queued`, unless it has waited `OPERATION_TIMEOUT` for a batch by
/// `now`: then it is answered `Unavailable` (`GroupCommit::submit`).
fn unless_expired(queued: Queued, now: Instant) -> Option<Queued> {
    if now.saturating_duration_since(queued.submitted) < OPERATION_TIMEOUT {
        return Some(queued);
    }
    let _ = queued.answer.send(Err(StoreError::Unavailable(
        format!("no batch took the write within {OPERATION_TIMEOUT:?}").into(),
    )));
    None
}

/// A batch being taken: one write per session, none that waited too long.
struct Filling {
    batch: Vec<Queued>,
    sessions: HashSet<SessionId>,
    /// When the batch began to be taken (`unless_expired`).
    now: Instant,
}

impl Filling {
    /// Takes `queued` into the batch, or leaves it in `carried` for the
    /// next batch when its session has a write here already (or answers it
    /// `Unavailable`, expired).
    fn offer(&mut self, queued: Queued, carried: &mut Vec<Queued>) {
        let Some(queued) = unless_expired(queued, self.now) else {
            return;
        };
        if self.sessions.insert(queued.write.row.id.clone()) {
            self.batch.push(queued);
        } else {
            carried.push(queued);
        }
    }
}

/// The turn to run a batch: the queue, held from taking a batch until its
/// statement has run (`write_batches`).
type Turn = OwnedMutexGuard<Waiting>;

/// How a batch stores its messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Messages {
    /// A plain `INSERT`: every message is new, as a turn's are. Cheaper
    /// than an upsert (no probe of the key before the insert, no
    /// speculative insertion and its confirm record in the WAL).
    Append,
    /// `INSERT ... ON CONFLICT DO UPDATE`: some message may be stored
    /// already and is replaced (a repair, a recovered interrupted call).
    Replace,
}

/// Commits one batch. A batch whose plain insert met a message stored
/// already runs again replacing; one Postgres aborted to break a deadlock
/// with another process's batch runs again as it was. Either way nothing
/// of the failed attempt was applied. Attempts after the first run without
/// the turn: rare, and a batch of them alongside another costs only time.
async fn run_batch(
    shared: &Shared,
    writes: &[&SessionWrite],
    turn: Turn,
) -> StoreResult<Vec<Written>> {
    let mut turn = Some(turn);
    let mut messages = Messages::Append;
    let mut attempt = 1;
    loop {
        let client = shared.writer_client().await?;
        let committed = commit_batch(&client, writes, messages, turn.take()).await;
        if messages == Messages::Append && matches!(&committed, Err(error) if is_duplicate(error)) {
            messages = Messages::Replace;
            continue;
        }
        let retry = matches!(&committed, Err(error) if is_lost_race(error));
        if retry && attempt < MAX_BATCH_ATTEMPTS {
            attempt += 1;
            continue;
        }
        return settle(client, committed);
    }
}

fn is_lost_race(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

/// A message's key was taken: in `Messages::Append`, a message stored
/// already (only `stored` can violate a unique index: `created` skips
/// conflicts).
fn is_duplicate(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// The batch statement up to its message insert: its parameters, the
/// locks, the session rows. A whole batch is one statement, so it costs one
/// round trip however many sessions it carries:
/// - `locked` takes a transaction-scoped advisory lock per session, in the
///   order of their keys, before any row lock: two processes' batches that
///   share sessions are serialized there and cannot deadlock on the rows
///   (nor on the keys: equal keys of different ids are locked in one order).
///   Unlike `SELECT ... FOR UPDATE`, it writes no WAL and scans no table;
///   the `UPDATE` then locks each row it changes;
/// - `updated` changes a row only while it still has the version its writer
///   loaded (under READ COMMITTED, a row another transaction changed first is
///   re-checked against its new version, and skipped); it moves `updated_at`
///   (indexed, for the TTL purge) only when that is over a minute old, so
///   most updates change no indexed column and are HOT: no index entries;
///   a host context or pending action equal to the stored text keeps the
///   stored value: not parsed again, nor, when large enough to be kept out
///   of line, copied again into the TOAST table and the WAL (most writes
///   carry their session's context unchanged);
/// - `created` inserts a new session once: a second creator finds the row;
/// - `stored` (`stored!`) appends (in array order, which keeps `seq` in tree
///   order) or replaces the messages of the sessions that were written, and
///   only those. Appending needs no check that a message is new: only the
///   writer that changed its session's version stores messages for it,
///   holding that session's lock to the commit.
macro_rules! batch_head {
    () => {
        "
    WITH v AS MATERIALIZED (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int4[],
                             $6::text[], $7::text[], $8::text[], $9::int8[])
            AS v(id, owner_id, title, created_at, turn_number, active_leaf, host_context,
                 pending_action, expected)
    ),
    locked AS MATERIALIZED (
        -- 1634890611 is 0x61727373, 'arss': the runtime's class of advisory locks.
        SELECT count(pg_advisory_xact_lock(1634890611, k.key)) AS n
        FROM (SELECT hashtext(v.id) AS key FROM v ORDER BY 1) k
    ),
    updated AS (
        UPDATE sessions AS s SET
            owner_id = v.owner_id, title = v.title,
            updated_at = CASE WHEN s.updated_at >= now() - interval '1 minute'
                              THEN s.updated_at ELSE now() END,
            turn_number = v.turn_number, active_leaf = v.active_leaf,
            host_context = CASE WHEN v.host_context IS NOT DISTINCT FROM s.host_context::text
                                THEN s.host_context ELSE v.host_context::json END,
            pending_action = CASE WHEN v.pending_action IS NOT DISTINCT FROM s.pending_action::text
                                  THEN s.pending_action ELSE v.pending_action::json END,
            version = nextval('session_versions')
        FROM v
        WHERE (SELECT n FROM locked) >= 0
          AND s.id = v.id AND v.expected <> 0 AND s.version = v.expected
        RETURNING s.id, s.version
    ),
    created AS (
        INSERT INTO sessions (id, owner_id, title, created_at, updated_at, turn_number,
                              active_leaf, host_context, pending_action, version)
        SELECT v.id, v.owner_id, v.title, v.created_at, now(), v.turn_number, v.active_leaf,
               v.host_context::json, v.pending_action::json, nextval('session_versions')
        FROM v WHERE v.expected = 0 ORDER BY v.id
        ON CONFLICT (id) DO NOTHING
        RETURNING id, version
    ),
    written AS (
        SELECT id, version FROM updated UNION ALL SELECT id, version FROM created
    ),"
    };
}

/// `stored`, with what follows the insert (`Messages`).
macro_rules! stored {
    ($($on_conflict:tt)*) => {
        concat!(
            "
    stored AS (
        INSERT INTO messages (session_id, id, parent_id, role, body, created_at)
        SELECT m.session_id, m.id, m.parent_id, m.role, m.body::json, m.created_at
        FROM unnest($10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                    $15::int8[])
             WITH ORDINALITY AS m(session_id, id, parent_id, role, body, created_at, n)
        WHERE m.session_id IN (SELECT id FROM written)
        ORDER BY m.n",
            $($on_conflict)*,
            "
        RETURNING 1
    )"
        )
    };
}

/// The statement's end when no write takes inbox items (most batches).
macro_rules! no_inbox {
    () => {
        "
    SELECT id, version, (SELECT count(*) FROM stored) FROM written"
    };
}

/// The statement's end when some write takes inbox items: `taken` marks
/// them, only for sessions that were written (sql/0005_inbox.sql).
macro_rules! taking_inbox {
    () => {
        ",
    taken AS (
        UPDATE inbox SET surfaced = true, taken_by = t.session_id
        FROM unnest($16::text[], $17::text[]) AS t(session_id, id)
        WHERE inbox.id = t.id AND NOT inbox.surfaced
          AND t.session_id IN (SELECT id FROM written)
        RETURNING 1
    )
    SELECT id, version, (SELECT count(*) FROM stored), (SELECT count(*) FROM taken)
    FROM written"
    };
}

/// What `Messages::Replace` adds to the insert.
macro_rules! replacing {
    () => {
        "
        ON CONFLICT (session_id, id) DO UPDATE SET
            parent_id = excluded.parent_id, role = excluded.role, body = excluded.body"
    };
}

/// The batch statements, by how they store messages and whether they take
/// inbox items. Each returns the id and new version of every session
/// written. A statement is planned per connection once and kept
/// (`prepare_cached`), so the four cost nothing each batch.
const APPEND: &str = concat!(batch_head!(), stored!(""), no_inbox!());
const APPEND_TAKING: &str = concat!(batch_head!(), stored!(""), taking_inbox!());
const REPLACE: &str = concat!(batch_head!(), stored!(replacing!()), no_inbox!());
const REPLACE_TAKING: &str = concat!(batch_head!(), stored!(replacing!()), taking_inbox!());

/// Runs the batch's statement in a transaction of its own, hands the turn
/// on once it has run, then commits: the next batch runs while this one's
/// commit flushes.
async fn commit_batch(
    client: &deadpool_postgres::Object,
    writes: &[&SessionWrite],
    messages: Messages,
    turn: Option<Turn>,
) -> Result<Vec<Written>, tokio_postgres::Error> {
    let mut sorted: Vec<&SessionWrite> = writes.to_vec();
    sorted.sort_by(|a, b| a.row.id.cmp(&b.row.id));
    let sessions = SessionColumns::of(&sorted);
    let expected: Vec<i64> = sorted.iter().map(|write| write.expected as i64).collect();
    let message_columns = MessageColumns::of(sorted.iter().copied());
    let (taken_sessions, taken_ids): (Vec<&str>, Vec<&str>) = sorted
        .iter()
        .flat_map(|write| {
            let session = write.row.id.as_str();
            write.taken.iter().map(move |id| (session, id.as_str()))
        })
        .unzip();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &sessions.ids,
        &sessions.owner_ids,
        &sessions.titles,
        &sessions.created_ats,
        &sessions.turn_numbers,
        &sessions.active_leaves,
        &sessions.host_contexts,
        &sessions.pending_actions,
        &expected,
        &message_columns.session_ids,
        &message_columns.ids,
        &message_columns.parent_ids,
        &message_columns.roles,
        &message_columns.bodies,
        &message_columns.created_ats,
    ];
    let taking = !taken_ids.is_empty();
    if taking {
        params.push(&taken_sessions);
        params.push(&taken_ids);
    }
    let sql = match (messages, taking) {
        (Messages::Append, false) => APPEND,
        (Messages::Append, true) => APPEND_TAKING,
        (Messages::Replace, false) => REPLACE,
        (Messages::Replace, true) => REPLACE_TAKING,
    };
    let statement = client.prepare_cached(sql).await?;
    // `BEGIN` goes in the statement's round trip: under load each round
    // trip waits for two wake-ups, and this one holds the turn.
    let mut transaction = OpenTransaction { client, open: true };
    let (begun, ran) = futures_util::join!(
        client.batch_execute("BEGIN"),
        client.query(&statement, &params)
    );
    drop(turn);
    let done = match (begun, ran) {
        (Ok(()), Ok(rows)) => client.batch_execute("COMMIT").await.map(|()| rows),
        (Ok(()), Err(error)) => client.batch_execute("ROLLBACK").await.and(Err(error)),
        (Err(error), _) => Err(error),
    };
    // After an error it may still be open (a failed `ROLLBACK`): one more,
    // queued on drop, costs nothing where it is not.
    transaction.open = done.is_err();
    let rows = done?;
    let versions: HashMap<&str, Version> = rows
        .iter()
        .map(|row| (row.get::<_, &str>(0), row.get::<_, i64>(1) as Version))
        .collect();
    Ok(writes
        .iter()
        .map(|write| match versions.get(write.row.id.as_str()) {
            Some(&version) => Written::Committed(version),
            None => Written::Stale,
        })
        .collect())
}

/// A batch's transaction while it may be open: dropped half done (the
/// operation timeout), it queues a `ROLLBACK` on the connection (sent on
/// the future's first poll, as `tokio_postgres::Transaction` does), so the
/// connection's next user does not run inside it.
struct OpenTransaction<'a> {
    client: &'a deadpool_postgres::Object,
    open: bool,
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.client.batch_execute("ROLLBACK").now_or_never();
        }
    }
}

/// Session rows as one array per column (the parameters of `unnest`).
struct SessionColumns<'a> {
    ids: Vec<&'a str>,
    owner_ids: Vec<Option<&'a str>>,
    titles: Vec<Option<&'a str>>,
    created_ats: Vec<i64>,
    turn_numbers: Vec<i32>,
    active_leaves: Vec<Option<&'a str>>,
    host_contexts: Vec<Option<&'a str>>,
    pending_actions: Vec<Option<&'a str>>,
}

impl<'a> SessionColumns<'a> {
    fn of(writes: &[&'a SessionWrite]) -> SessionColumns<'a> {
        let rows = writes.iter().map(|write| &write.row);
        SessionColumns {
            ids: rows.clone().map(|row| row.id.as_str()).collect(),
            owner_ids: rows.clone().map(|row| row.owner_id.as_deref()).collect(),
            titles: rows.clone().map(|row| row.title.as_deref()).collect(),
            created_ats: rows.clone().map(|row| row.created_at).collect(),
            turn_numbers: rows.clone().map(|row| row.turn_number).collect(),
            active_leaves: rows
                .clone()
                .map(|row| row.active_leaf.as_ref().map(|id| id.as_str()))
                .collect(),
            host_contexts: rows
                .clone()
                .map(|row| row.host_context.as_deref())
                .collect(),
            pending_actions: rows.map(|row| row.pending_action.as_deref()).collect(),
        }
    }
}

/// Message rows as one array per column, in the order they were given.
#[derive(Default)]
struct MessageColumns<'a> {
    session_ids: Vec<&'a str>,
    ids: Vec<&'a str>,
    parent_ids: Vec<Option<&'a str>>,
    roles: Vec<&'a str>,
    bodies: Vec<&'a str>,
    created_ats: Vec<i64>,
}

impl<'a> MessageColumns<'a> {
    fn of(writes: impl Iterator<Item = &'a SessionWrite>) -> MessageColumns<'a> {
        let mut columns = MessageColumns::default();
        for write in writes {
            // One row per message id (the last wins): a multi-row upsert may
            // not touch one row twice. Most writes carry one message.
            if let [message] = write.messages.as_slice() {
                columns.push(write, message);
                continue;
            }
            let mut seen = HashSet::new();
            let unique: Vec<&MessageRow> = write
                .messages
                .iter()
                .rev()
                .filter(|message| seen.insert(message.id.as_str()))
                .collect();
            for message in unique.into_iter().rev() {
                columns.push(write, message);
            }
        }
        columns
    }

    fn push(&mut self, write: &'a SessionWrite, message: &'a MessageRow) {
        self.session_ids.push(write.row.id.as_str());
        self.ids.push(message.id.as_str());
        self.parent_ids
            .push(message.parent_id.as_ref().map(|id| id.as_str()));
        self.roles.push(message.role);
        self.bodies.push(message.body.as_str());
        self.created_ats.push(message.created_at);
    }
}
