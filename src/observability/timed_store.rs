//! A `Store` that times every operation of the store it wraps into
//! `assistant_store_operation_seconds`, so store latency is visible for the
//! memory and Postgres stores alike without either knowing about metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actors::conversation::{Message, SessionRecord};
use actors::ids::SessionId;
use actors::store::{
    InboxItem, SessionSnapshot, SessionSummary, SharedStore, Store, StoreResult, StoredTrace,
    TraceBounds, Version, WriteOutcome, Written,
};
use futures_util::future::{self, BoxFuture, FutureExt};

use super::Metrics;

pub struct TimedStore {
    inner: SharedStore,
    metrics: Arc<Metrics>,
}

impl TimedStore {
    pub fn wrap(inner: SharedStore, metrics: Arc<Metrics>) -> SharedStore {
        Arc::new(TimedStore { inner, metrics })
    }

    fn timed<T: Send + 'static>(
        &self,
        operation: &'static str,
        mut future: BoxFuture<'static, StoreResult<T>>,
    ) -> BoxFuture<'static, StoreResult<T>> {
        // Read before the first poll, which may already do part of a
        // waiting operation's work (the Postgres store's takes a connection
        // and sends its query).
        let started = Instant::now();
        // The memory store answers at once (two writes a turn): counted
        // here, without a second future wrapped around the first and a count
        // on the metrics handle every worker shares, and as taking no time,
        // in the lowest bucket where its microseconds belong: a second clock
        // read cost more than the write. Polling a future early is allowed;
        // one that is not done is polled again when awaited.
        if let Some(result) = (&mut future).now_or_never() {
            self.metrics
                .observe_store(operation, Duration::ZERO, result.is_ok());
            return future::ready(result).boxed();
        }
        let metrics = self.metrics.clone();
        async move {
            let result = future.await;
            metrics.observe_store(operation, started.elapsed(), result.is_ok());
            result
        }
        .boxed()
    }
}

impl Store for TimedStore {
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>> {
        self.timed("load", self.inner.load(id))
    }

    fn save_session(
        &self,
        expected: Version,
        record: &SessionRecord,
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.timed("save_session", self.inner.save_session(expected, record))
    }

    fn save_messages(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.timed(
            "save_messages",
            self.inner.save_messages(expected, record, messages),
        )
    }

    fn save_messages_taking(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
        taken: &[String],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        self.timed(
            "save_messages",
            self.inner
                .save_messages_taking(expected, record, messages, taken),
        )
    }

    fn write(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: Option<&[Arc<Message>]>,
        taken: &[String],
    ) -> WriteOutcome {
        let operation = match messages {
            None => "save_session",
            Some(_) => "save_messages",
        };
        match self.inner.write(expected, record, messages, taken) {
            // As `timed` counts a future that is done at once.
            WriteOutcome::Now(result) => {
                (self.metrics).observe_store(operation, Duration::ZERO, result.is_ok());
                WriteOutcome::Now(result)
            }
            WriteOutcome::Later(future) => WriteOutcome::Later(self.timed(operation, future)),
        }
    }

    fn inbox_add(&self, item: &InboxItem) -> BoxFuture<'static, StoreResult<()>> {
        self.timed("inbox_add", self.inner.inbox_add(item))
    }

    fn inbox_list(
        &self,
        surfaced: Option<bool>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Option<Vec<InboxItem>>>> {
        self.timed("inbox_list", self.inner.inbox_list(surfaced, limit, offset))
    }

    fn inbox_mark_surfaced(&self, id: &str) -> BoxFuture<'static, StoreResult<Option<InboxItem>>> {
        self.timed("inbox_mark_surfaced", self.inner.inbox_mark_surfaced(id))
    }

    fn inbox_waiting(&self) -> BoxFuture<'static, StoreResult<Vec<InboxItem>>> {
        self.timed("inbox_waiting", self.inner.inbox_waiting())
    }

    fn most_recent(&self) -> BoxFuture<'static, StoreResult<Option<SessionId>>> {
        self.timed("most_recent", self.inner.most_recent())
    }

    fn settle(&self, id: &SessionId) {
        self.inner.settle(id);
    }

    fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<SessionSummary>>> {
        self.timed("list", self.inner.list(owner, limit, offset))
    }

    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>> {
        self.timed("delete", self.inner.delete(id))
    }

    fn purge_expired(&self, ttl: Duration) -> BoxFuture<'static, StoreResult<u64>> {
        self.timed("purge_expired", self.inner.purge_expired(ttl))
    }

    fn save_trace(
        &self,
        trace: StoredTrace,
        bounds: TraceBounds,
    ) -> BoxFuture<'static, StoreResult<()>> {
        self.timed("save_trace", self.inner.save_trace(trace, bounds))
    }

    fn traces(
        &self,
        id: &SessionId,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, StoreResult<Vec<Arc<StoredTrace>>>> {
        self.timed("traces", self.inner.traces(id, limit, offset))
    }

    fn ping(&self) -> BoxFuture<'static, StoreResult<()>> {
        self.timed("ping", self.inner.ping())
    }

    fn count(&self) -> BoxFuture<'static, StoreResult<u64>> {
        self.timed("count", self.inner.count())
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}
