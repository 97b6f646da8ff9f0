//! `PgStore`: the durable `Store` on PostgreSQL (tokio-postgres through a
//! deadpool pool). Every session write is conditional on the version its
//! writer loaded (`sessions.version`), so two processes on one database never
//! both change one session from the same copy; writes go through group commit
//! (`group_commit`), many sessions per transaction. It owns all the SQL of the
//! runtime (with `migrations`), and knows nothing of actors or HTTP.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use futures_util::future::{BoxFuture, FutureExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use super::group_commit::{GroupCommit, SessionWrite, WRITERS};
use super::inbox::InboxItem;
use super::{inbox_pg, migrations};
use super::{
    SessionSnapshot, SessionSummary, Store, StoreCause, StoreError, StoreResult, StoredTrace,
    TraceBounds, Version, Written,
};
use crate::conversation::{Message, PendingAction, Role, SessionRecord};
use crate::ids::{MessageId, SessionId};

/// The schema of the runtime's tables unless `DATABASE__SCHEMA` names another.
pub const DEFAULT_SCHEMA: &str = "assistant_runtime";

/// How long opening a connection may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for a free pooled connection.
const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on one store operation, so a stalled network answers 503, never a hang.
pub(super) const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the database could not be used, as a word for startup errors and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatabaseCause {
    /// No connection: refused, timed out, reset, shut down.
    Unreachable,
    /// The server refused the credentials.
    AuthRefused,
    /// The server is up but the named database does not exist.
    DatabaseMissing,
    /// Connected, but a migration failed.
    MigrationFailed,
    /// The database is not one this binary may serve: migrated by a newer
    /// binary, or an applied migration was edited. Not transient.
    SchemaRefused,
}

impl DatabaseCause {
    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseCause::Unreachable => "unreachable",
            DatabaseCause::AuthRefused => "auth_refused",
            DatabaseCause::DatabaseMissing => "database_missing",
            DatabaseCause::MigrationFailed => "migration_failed",
            DatabaseCause::SchemaRefused => "schema_refused",
        }
    }
}

/// The database could not be opened or migrated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseError {
    pub cause: DatabaseCause,
    pub detail: String,
}

impl std::fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.cause.as_str(), self.detail)
    }
}

impl std::error::Error for DatabaseError {}

/// Cheap to clone: every clone shares one pool and one group-commit queue.
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
    writes: Arc<GroupCommit>,
}

pub(super) struct Shared {
    pool: Pool,
    /// The group-commit writers' connections, used only on their thread.
    /// A pooled connection's I/O runs as a task on the runtime that opened
    /// it: a writer on a connection an HTTP worker opened (for a load)
    /// waited for that worker, busy with requests, to send its statement
    /// and to read each answer, two cross-thread wake-ups more a round
    /// trip. Opened only by the writers, these stay on their thread.
    /// The same pool as `pool` when there are too few connections to part.
    writer_pool: Pool,
    /// `DATABASE__SCHEMA`: every connection's `search_path`, so the SQL
    /// stays unqualified; created by the migrations.
    schema: String,
    /// Whether this process has applied (or found) every migration. False after
    /// a start without a reachable database: the first connection that works
    /// migrates, so the runtime recovers without a restart.
    schema_ready: AtomicBool,
    /// Held while migrating, so concurrent first requests migrate once.
    migrating: tokio::sync::Mutex<()>,
}

impl PgStore {
    /// A store for `url` with at most `pool_size` connections, its tables
    /// in the default schema (`DEFAULT_SCHEMA`). Connects lazily: only a
    /// malformed URL fails here.
    pub fn new(url: &str, pool_size: usize) -> Result<PgStore, String> {
        PgStore::in_schema(url, pool_size, DEFAULT_SCHEMA)
    }

    /// `new` with the tables in `schema` (a plain identifier,
    /// `migrations::valid_schema_name`).
    pub fn in_schema(url: &str, pool_size: usize, schema: &str) -> Result<PgStore, String> {
        if !migrations::valid_schema_name(schema) {
            return Err(format!(
                "{schema:?} is not a plain schema name (lower-case letters, digits, _)"
            ));
        }
        let mut pg_config: tokio_postgres::Config = url
            .parse()
            .map_err(|error| format!("not a PostgreSQL URL: {error}"))?;
        // Set by the server at connect time: no extra round trip, and no
        // pooled connection can miss it. Later `-c` options win, so this
        // comes after any the URL carries.
        let options = match pg_config.get_options() {
            Some(options) => format!("{options} -c search_path={schema}"),
            None => format!("-c search_path={schema}"),
        };
        pg_config.options(&options);
        pg_config.connect_timeout(CONNECT_TIMEOUT);
        if pg_config.get_application_name().is_none() {
            pg_config.application_name("assistant-runtime");
        }
        // Fast recycling checks `is_closed`, which a connection the server
        // ended (restart, admin shutdown) reports; a connection that failed a
        // query for connection reasons is also dropped instead of returned
        // (`settle`). Verified would add a round trip to every checkout.
        let build_pool = |max_size: usize| {
            let manager = Manager::from_config(
                pg_config.clone(),
                NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(max_size)
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(POOL_WAIT_TIMEOUT))
                .create_timeout(Some(CONNECT_TIMEOUT))
                .recycle_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|error| format!("cannot build the connection pool: {error}"))
        };
        // Two writers: one runs its batch while the other's commit flushes
        // (`group_commit`: they take turns, never running side by side).
        // More only cut the batches smaller: at 200 busy sessions, 8
        // writers committed 16 writes a batch and 2 commit 57 or more, and
        // the statement's fixed cost made PostgreSQL's CPU a turn 1.8 times
        // as large (BENCHMARKS.md, "PostgreSQL"). Each holds one connection
        // of its own while it commits, half the pool at most.
        let pool_size = pool_size.max(1);
        let n_writers = (pool_size / 2).clamp(1, WRITERS);
        let writer_pool = build_pool(n_writers)?;
        let pool = if pool_size > n_writers {
            build_pool(pool_size - n_writers)?
        } else {
            writer_pool.clone()
        };
        let shared = Arc::new(Shared {
            pool,
            writer_pool,
            schema: schema.to_string(),
            schema_ready: AtomicBool::new(false),
            migrating: tokio::sync::Mutex::new(()),
        });
        let writes = Arc::new(GroupCommit::start(shared.clone(), n_writers)?);
        Ok(PgStore { shared, writes })
    }

    /// Connects and applies pending migrations; returns the versions applied now.
    pub async fn migrate(&self) -> Result<Vec<i32>, DatabaseError> {
        let mut client = self.shared.pool.get().await.map_err(|error| match error {
            PoolError::Backend(error) => startup_error(&error, false),
            other => DatabaseError {
                cause: DatabaseCause::Unreachable,
                detail: other.to_string(),
            },
        })?;
        let _migrating = self.shared.migrating.lock().await;
        let applied = migrations::apply(&mut client, &self.shared.schema)
            .await
            .map_err(|error| match error {
                migrations::MigrationError::Database(error) => startup_error(&error, true),
                migrations::MigrationError::Refused(detail) => DatabaseError {
                    cause: DatabaseCause::SchemaRefused,
                    detail,
                },
            })?;
        self.shared.schema_ready.store(true, Ordering::Release);
        Ok(applied)
    }

    /// The migration state, read only (`assistant-runtime doctor`).
    pub async fn migration_status(&self) -> Result<migrations::MigrationStatus, DatabaseError> {
        let client = self.shared.pool.get().await.map_err(|error| match error {
            PoolError::Backend(error) => startup_error(&error, false),
            other => DatabaseError {
                cause: DatabaseCause::Unreachable,
                detail: other.to_string(),
            },
        })?;
        migrations::status(&client)
            .await
            .map_err(|error| startup_error(&error, false))
    }

    /// Runs `operation` under the operation timeout.
    fn run<T: Send + 'static>(
        &self,
        operation: impl std::future::Future<Output = StoreResult<T>> + Send + 'static,
    ) -> BoxFuture<'static, StoreResult<T>> {
        async move {
            match tokio::time::timeout(OPERATION_TIMEOUT, operation).await {
                Ok(result) => result,
                Err(_) => Err(StoreError::Unavailable(
                    format!("no answer from the database within {OPERATION_TIMEOUT:?}").into(),
                )),
            }
        }
        .boxed()
    }
}

impl Shared {
    /// A pooled connection to a migrated database.
    pub(super) async fn client(&self) -> StoreResult<Object> {
        self.checkout(&self.pool).await
    }

    /// `client` for a group-commit writer, on the writers' thread.
    pub(super) async fn writer_client(&self) -> StoreResult<Object> {
        self.checkout(&self.writer_pool).await
    }

    async fn checkout(&self, pool: &Pool) -> StoreResult<Object> {
        let mut client = pool.get().await.map_err(pool_error)?;
        if !self.schema_ready.load(Ordering::Acquire) {
            let _migrating = self.migrating.lock().await;
            if !self.schema_ready.load(Ordering::Acquire) {
                match migrations::apply(&mut client, &self.schema).await {
                    Ok(applied) => {
                        if !applied.is_empty() {
                            log::info!("database reachable again: applied migrations {applied:?}");
                        }
                        self.schema_ready.store(true, Ordering::Release);
                    }
                    Err(migrations::MigrationError::Database(error)) => {
                        return Err(settle_error(client, error))
                    }
                    Err(migrations::MigrationError::Refused(why)) => {
                        return Err(StoreError::Failed(why.into()))
                    }
                }
            }
        }
        Ok(client)
    }
}

/// Passes a result through; on a connection-class error the connection is
/// taken out of the pool, so the next request opens a fresh one.
pub(super) fn settle<T>(
    client: Object,
    result: Result<T, tokio_postgres::Error>,
) -> StoreResult<T> {
    match result {
        Ok(value) => Ok(value),
        Err(error) => Err(settle_error(client, error)),
    }
}

fn settle_error(client: Object, error: tokio_postgres::Error) -> StoreError {
    let mapped = store_error(error);
    if matches!(mapped, StoreError::Unavailable(_)) {
        drop(Object::take(client));
    }
    mapped
}

fn pool_error(error: PoolError) -> StoreError {
    match error {
        PoolError::Backend(error) => store_error(error),
        PoolError::Timeout(_) | PoolError::Closed => {
            StoreError::Unavailable(StoreCause::caused_by(error.to_string(), error))
        }
        other => StoreError::Failed(StoreCause::caused_by(other.to_string(), other)),
    }
}

/// Unavailable for anything that says "no usable connection"; Failed for
/// the rest. The driver's error stays the cause's source.
fn store_error(error: tokio_postgres::Error) -> StoreError {
    let unavailable = match error.code() {
        Some(code) => connection_class(code),
        None => is_connection_failure(&error),
    };
    let cause = StoreCause::caused_by(describe(&error), error);
    if unavailable {
        StoreError::Unavailable(cause)
    } else {
        StoreError::Failed(cause)
    }
}

fn startup_error(error: &tokio_postgres::Error, migrating: bool) -> DatabaseError {
    let cause = match error.code() {
        Some(code) if code.code().starts_with("28") => DatabaseCause::AuthRefused,
        Some(code) if *code == SqlState::INVALID_CATALOG_NAME => DatabaseCause::DatabaseMissing,
        Some(code) if connection_class(code) => DatabaseCause::Unreachable,
        None if is_connection_failure(error) => DatabaseCause::Unreachable,
        _ if migrating => DatabaseCause::MigrationFailed,
        _ => DatabaseCause::Unreachable,
    };
    DatabaseError {
        cause,
        detail: describe(error),
    }
}

/// Server codes meaning the connection cannot be used now: connection
/// exceptions (08), shutdown or not yet accepting (57P01..57P03), too many
/// connections, and a refused login or missing database (which an operator
/// fixes without restarting the runtime).
fn connection_class(code: &SqlState) -> bool {
    let code = code.code();
    code.starts_with("08")
        || code.starts_with("28")
        || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "3D000")
}

/// An error with no server code is a connection failure when the client is
/// closed or the cause is I/O (refused, reset, timed out).
fn is_connection_failure(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    let text = error.to_string();
    text.contains("connect") || text.contains("timeout") || text.contains("communicating")
}

/// The error with its server message, if any (tokio-postgres' own `Display`
/// for a server error is only "db error").
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db_error) => format!("{} ({})", db_error.message(), db_error.code().code()),
        None => match std::error::Error::source(error) {
            Some(cause) => format!("{error}: {cause}"),
            None => error.to_string(),
        },
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(serialize_failed)
}

fn serialize_failed(error: serde_json::Error) -> StoreError {
    StoreError::Failed(StoreCause::caused_by(error.to_string(), error))
}

fn optional_json<T: serde::Serialize>(value: Option<&T>) -> StoreResult<Option<String>> {
    value.map(to_json).transpose()
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> StoreResult<T> {
    super::readback::decode_capped(text.as_bytes())
        .map(super::readback::warn_if_capped)
        .map_err(|error| {
            StoreError::Failed(StoreCause::caused_by(
                format!("stored {what} is not readable: {error}"),
                error,
            ))
        })
}

/// The session row's columns, serialized once before the future is built.
/// Text the record shares (ids, owner, title) is shared here too, not copied.
pub(super) struct SessionRow {
    pub id: SessionId,
    pub owner_id: Option<Arc<str>>,
    pub title: Option<Arc<str>>,
    pub created_at: i64,
    pub turn_number: i32,
    pub active_leaf: Option<MessageId>,
    pub host_context: Option<String>,
    pub pending_action: Option<String>,
}

impl SessionRow {
    fn from_record(record: &SessionRecord) -> StoreResult<SessionRow> {
        Ok(SessionRow {
            id: record.id.clone(),
            owner_id: record.owner_id.clone(),
            title: record.title.clone(),
            created_at: record.created_at as i64,
            turn_number: record.turn_number as i32,
            active_leaf: record.active_leaf.clone(),
            host_context: optional_json(record.host_context.as_ref())?,
            pending_action: optional_json(record.pending_action.as_ref())?,
        })
    }
}

pub(super) struct MessageRow {
    pub id: MessageId,
    pub parent_id: Option<MessageId>,
    pub role: &'static str,
    pub body: String,
    pub created_at: i64,
}

impl MessageRow {
    fn from_message(message: &Message) -> StoreResult<MessageRow> {
        Ok(MessageRow {
            id: message.id.clone(),
            parent_id: message.parent_id.clone(),
            role: match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Summary => "summary",
            },
            body: super::message_json::message_json(message).map_err(serialize_failed)?,
            created_at: message.created_at as i64,
        })
    }
}

/// A session's row and the JSON of its messages in tree order, read in one
/// snapshot.
type LoadedRows = Option<(tokio_postgres::Row, Vec<String>)>;

/// One statement (one snapshot, one round trip): the session row with its
/// messages' bodies as an array, sorted by `seq` through the primary key.
const LOAD_SESSION: &str = "
    SELECT owner_id, title, created_at, turn_number, active_leaf,
           host_context::text, pending_action::text, version,
           ARRAY(SELECT m.body::text FROM messages m WHERE m.session_id = s.id ORDER BY m.seq)
    FROM sessions s WHERE s.id = $1";

async fn load_rows(client: &Object, id: &str) -> Result<LoadedRows, tokio_postgres::Error> {
    let statement = client.prepare_cached(LOAD_SESSION).await?;
    let Some(row) = client.query_opt(&statement, &[&id]).await? else {
        return Ok(None);
    };
    let messages: Vec<String> = row.try_get(8)?;
    Ok(Some((row, messages)))
}

/// The JSON text in a session's rows.
fn n_bytes(rows: &LoadedRows) -> usize {
    let Some((session, messages)) = rows else {
        return 0;
    };
    let text_len = |column: usize| session.get::<_, Option<&str>>(column).map_or(0, str::len);
    text_len(5) + text_len(6) + messages.iter().map(String::len).sum::<usize>()
}

fn snapshot(id: &SessionId, rows: LoadedRows) -> StoreResult<Option<SessionSnapshot>> {
    let Some((session, messages)) = rows else {
        return Ok(None);
    };
    let host_context: Option<String> = session.get(5);
    let pending_action: Option<String> = session.get(6);
    let record = SessionRecord {
        id: id.clone(),
        owner_id: session.get::<_, Option<String>>(0).map(Arc::from),
        title: session.get::<_, Option<String>>(1).map(Arc::from),
        created_at: session.get::<_, i64>(2) as u64,
        turn_number: session.get::<_, i32>(3) as u32,
        active_leaf: session
            .get::<_, Option<String>>(4)
            .map(crate::ids::MessageId::new),
        host_context: host_context
            .map(|text| from_json("host_context", &text))
            .transpose()?,
        pending_action: pending_action
            .map(|text| from_json::<PendingAction>("pending_action", &text).map(Arc::new))
            .transpose()?,
    };
    let messages = messages
        .iter()
        .map(|body| from_json::<Message>("message", body).map(Arc::new))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some(SessionSnapshot {
        record,
        messages,
        version: session.get::<_, i64>(7) as Version,
    }))
}

/// The sessions a delete removes.
enum DeleteWhich<'a> {
    One(&'a str),
    /// Not written for this many milliseconds.
    IdleFor(i64),
}

/// Deletes sessions and then their messages, in one transaction. The
/// second statement runs once the session rows are deleted (and so locked
/// until commit): it sees every message a write committed before, and no
/// later write can add one, since a write stores messages only for a
/// session row it has just updated or created.
async fn delete_sessions(
    client: &mut Object,
    which: DeleteWhich<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    let ids: Vec<String> = match which {
        DeleteWhich::One(id) => {
            let statement = transaction
                .prepare_cached("DELETE FROM sessions WHERE id = $1 RETURNING id")
                .await?;
            transaction.query(&statement, &[&id]).await?
        }
        // A write moves `updated_at` only once it is a minute old
        // (`group_commit`), so a session counts as idle for a minute
        // longer: never deleted sooner than the TTL after its last write.
        DeleteWhich::IdleFor(millis) => {
            let statement = transaction
                .prepare_cached(
                    "DELETE FROM sessions
                     WHERE updated_at < now() - interval '1 minute'
                                        - $1::bigint * interval '1 millisecond'
                     RETURNING id",
                )
                .await?;
            transaction.query(&statement, &[&millis]).await?
        }
    }
    .iter()
    .map(|row| row.get(0))
    .collect();
    if !ids.is_empty() {
        let statement = transaction
            .prepare_cached("DELETE FROM messages WHERE session_id = ANY($1)")
            .await?;
        transaction.execute(&statement, &[&ids]).await?;
        let statement = transaction
            .prepare_cached("DELETE FROM traces WHERE session_id = ANY($1)")
            .await?;
        transaction.execute(&statement, &[&ids]).await?;
    }
    transaction.commit().await?;
    Ok(ids.len() as u64)
}

/// Inserts a trace and drops the session's oldest past `bounds`, in one
/// statement. A trace of a session deleted meanwhile (the write runs after
/// the turn's final response) is not inserted: there is no foreign key, and
/// nothing else would remove it. The `DELETE` reads the rows as they were
/// before the insert, so it keeps at most `max_traces - 1` of them and leaves
/// room for the new row's bytes (the new row itself is never dropped).
async fn save_trace(
    client: &Object,
    trace: &StoredTrace,
    bounds: TraceBounds,
) -> Result<(), tokio_postgres::Error> {
    let statement = client
        .prepare_cached(
            "WITH inserted AS (
                 INSERT INTO traces (session_id, id, events, n_bytes, user_message,
                                     is_continuation, duration_ms, created_at)
                 SELECT $1, $2, $3::text::json, $4, $5, $6, $7, $8
                 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1)
                 RETURNING seq
             )
             DELETE FROM traces WHERE session_id = $1 AND seq IN (
                 SELECT seq FROM (
                     SELECT seq,
                            row_number() OVER newest_first AS n_newer,
                            sum(n_bytes) OVER newest_first AS n_bytes_newer
                     FROM traces WHERE session_id = $1
                     WINDOW newest_first AS (ORDER BY seq DESC)
                 ) existing
                 WHERE n_newer >= $9::bigint OR n_bytes_newer + $4::bigint > $10::bigint
             )",
        )
        .await?;
    let n_bytes = trace.n_bytes() as i64;
    client
        .execute(
            &statement,
            &[
                &trace.session_id.as_str(),
                &trace.id,
                &trace.events.get(),
                &n_bytes,
                &trace.user_message,
                &trace.is_continuation,
                &trace.duration_ms,
                &(trace.created_at as i64),
                &i64::from(bounds.max_traces.max(1)),
                &(bounds.max_bytes.min(i64::MAX as u64) as i64),
            ],
        )
        .await?;
    Ok(())
}

impl Store for PgStore {
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>> {
        let shared = self.shared.clone();
        let id = id.clone();
        self.run(async move {
            let client = shared.client().await?;
            let rows = load_rows(&client, id.as_str()).await;
            let rows = settle(client, rows)?;
            // Megabytes take milliseconds to decode (`offload`).
            if n_bytes(&rows) <= crate::offload::INLINE_BYTES {
                return snapshot(&id, rows);
            }
            crate::offload::on_blocking_pool(move || snapshot(&id, rows))
                .await
                .unwrap_or_else(|why| {
                    Err(StoreError::Failed(StoreCause::new(format!(
                        "decoding the session failed: {why}"
                    ))))
                })
        })
    }

    fn save_messages(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.save_messages_taking(expected, record, messages, &[])
    }

    fn save_messages_taking(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
        taken: &[String],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        // Serialized here, on the caller's thread, so the writer thread only
        // talks to the database.
        let write = SessionRow::from_record(record).and_then(|row| {
            let messages = messages
                .iter()
                .map(|message| MessageRow::from_message(message))
                .collect::<StoreResult<Vec<_>>>()?;
            Ok(SessionWrite {
                row,
                expected,
                messages,
                taken: taken.to_vec(),
            })
        });
        let writes = self.writes.clone();
        // Not under `run`'s timer: the answer is bounded already
        // (`GroupCommit::submit`), and a timer per write costs as much as
        // the rest of the wait for its answer.
        async move { writes.submit(write?).await }.boxed()
    }

    fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<SessionSummary>>> {
        let shared = self.shared.clone();
        let owner = owner.map(str::to_string);
        self.run(async move {
            let client = shared.client().await?;
            let rows = async {
                let statement = client
                    .prepare_cached(
                        "SELECT s.id, s.owner_id, s.title, s.turn_number, s.created_at,
                                (SELECT count(*) FROM messages m WHERE m.session_id = s.id)
                         FROM sessions s
                         WHERE $3::text IS NULL OR s.owner_id = $3
                         ORDER BY s.created_at DESC, s.id
                         LIMIT $1 OFFSET $2",
                    )
                    .await?;
                client
                    .query(&statement, &[&(limit as i64), &(offset as i64), &owner])
                    .await
            }
            .await;
            let rows = settle(client, rows)?;
            Ok(rows
                .iter()
                .map(|row| SessionSummary {
                    session_id: SessionId::new(row.get::<_, String>(0)),
                    owner_id: row.get(1),
                    title: row.get(2),
                    turn_number: row.get::<_, i32>(3) as u32,
                    created_at: row.get::<_, i64>(4) as u64,
                    message_count: row.get::<_, i64>(5) as u64,
                })
                .collect())
        })
    }

    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>> {
        let shared = self.shared.clone();
        let id = id.to_string();
        self.run(async move {
            let mut client = shared.client().await?;
            let deleted = delete_sessions(&mut client, DeleteWhich::One(&id)).await;
            Ok(settle(client, deleted)? > 0)
        })
    }

    fn purge_expired(&self, ttl: Duration) -> BoxFuture<'static, StoreResult<u64>> {
        let shared = self.shared.clone();
        let ttl_millis = ttl.as_millis().min(i64::MAX as u128) as i64;
        self.run(async move {
            let mut client = shared.client().await?;
            let deleted = delete_sessions(&mut client, DeleteWhich::IdleFor(ttl_millis)).await;
            settle(client, deleted)
        })
    }

    fn save_trace(
        &self,
        trace: StoredTrace,
        bounds: TraceBounds,
    ) -> BoxFuture<'static, StoreResult<()>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let saved = save_trace(&client, &trace, bounds).await;
            settle(client, saved)
        })
    }

    fn traces(
        &self,
        id: &SessionId,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<Arc<StoredTrace>>>> {
        let shared = self.shared.clone();
        let id = id.clone();
        self.run(async move {
            let client = shared.client().await?;
            let rows = async {
                let statement = client
                    .prepare_cached(
                        "SELECT id, events::text, user_message, is_continuation, duration_ms, created_at
                         FROM traces WHERE session_id = $1
                         ORDER BY seq LIMIT $2 OFFSET $3",
                    )
                    .await?;
                client
                    .query(
                        &statement,
                        &[&id.as_str(), &(limit as i64), &(offset as i64)],
                    )
                    .await
            }
            .await;
            let rows = settle(client, rows)?;
            rows.iter()
                .map(|row| {
                    let events: String = row.get(1);
                    Ok(Arc::new(StoredTrace {
                        id: row.get(0),
                        session_id: id.clone(),
                        events: serde_json::value::RawValue::from_string(events).map_err(
                            |error| {
                                StoreError::Failed(StoreCause::new(format!(
                                    "a stored trace is not JSON: {error}"
                                )))
                            },
                        )?,
                        user_message: row.get(2),
                        is_continuation: row.get(3),
                        duration_ms: row.get(4),
                        created_at: row.get::<_, i64>(5).max(0) as u64,
                    }))
                })
                .collect()
        })
    }

    fn inbox_add(&self, item: &InboxItem) -> BoxFuture<'static, StoreResult<()>> {
        let shared = self.shared.clone();
        let item = item.clone();
        self.run(async move {
            let client = shared.client().await?;
            let added = inbox_pg::add(&client, &item).await;
            settle(client, added)
        })
    }

    fn inbox_list(
        &self,
        surfaced: Option<bool>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Option<Vec<InboxItem>>>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let listed = inbox_pg::list(&client, surfaced, limit, offset).await;
            settle(client, listed).map(Some)
        })
    }

    fn inbox_mark_surfaced(&self, id: &str) -> BoxFuture<'static, StoreResult<Option<InboxItem>>> {
        let shared = self.shared.clone();
        let id = id.to_string();
        self.run(async move {
            let client = shared.client().await?;
            let marked = inbox_pg::mark_surfaced(&client, &id).await;
            settle(client, marked)
        })
    }

    fn inbox_waiting(&self) -> BoxFuture<'static, StoreResult<Vec<InboxItem>>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let listed = inbox_pg::list(&client, Some(false), u32::MAX, 0).await;
            settle(client, listed)
        })
    }

    fn most_recent(&self) -> BoxFuture<'static, StoreResult<Option<SessionId>>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let found = inbox_pg::most_recent(&client).await;
            settle(client, found).map(|id| id.map(SessionId::new))
        })
    }

    fn ping(&self) -> BoxFuture<'static, StoreResult<()>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let pinged = client.simple_query("SELECT 1").await.map(|_| ());
            settle(client, pinged)
        })
    }

    fn count(&self) -> BoxFuture<'static, StoreResult<u64>> {
        let shared = self.shared.clone();
        self.run(async move {
            let client = shared.client().await?;
            let counted = async {
                let statement = client
                    .prepare_cached("SELECT count(*) FROM sessions")
                    .await?;
                let row = client.query_one(&statement, &[]).await?;
                Ok(row.get::<_, i64>(0).max(0) as u64)
            }
            .await;
            settle(client, counted)
        })
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }
}
