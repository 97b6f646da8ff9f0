//! The session actor over a store that fails on demand: a failed write answers
//! 503 and changes nothing in memory, the actor keeps working afterwards, and
//! a failed load leaves no actor registered.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actors::conversation::{Message, SessionRecord};
use actors::ids::SessionId;
use actors::store::memory::MemoryStore;
use actors::store::{
    SessionSnapshot, SessionSummary, Store, StoreError, StoreResult, Version, Written,
};
use assistant_runtime::settings::Settings;
use assistant_runtime::startup::Application;
use futures_util::future::{self, BoxFuture, FutureExt};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{tasks_context, TestApp};

/// A `MemoryStore` whose writes fail after `n_writes_left` more successes, and
/// whose loads fail while `fail_loads` is set.
#[derive(Default)]
struct FlakyStore {
    inner: MemoryStore,
    n_writes_left: AtomicUsize,
    fail_loads: AtomicBool,
}

impl FlakyStore {
    fn new() -> Arc<FlakyStore> {
        let store = Arc::new(FlakyStore::default());
        store.heal();
        store
    }

    fn fail_writes_after(&self, n_writes: usize) {
        self.n_writes_left.store(n_writes, Ordering::SeqCst);
    }

    fn heal(&self) {
        self.n_writes_left.store(usize::MAX, Ordering::SeqCst);
        self.fail_loads.store(false, Ordering::SeqCst);
    }

    /// Whether the next write may go through (counting it down).
    fn allow_write(&self) -> bool {
        self.n_writes_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| match left {
                0 => None,
                usize::MAX => Some(usize::MAX),
                left => Some(left - 1),
            })
            .is_ok()
    }
}

fn refused<T: Send + 'static>() -> BoxFuture<'static, StoreResult<T>> {
    future::ready(Err(StoreError::Unavailable("injected".into()))).boxed()
}

impl Store for FlakyStore {
    fn load(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<Option<SessionSnapshot>>> {
        if self.fail_loads.load(Ordering::SeqCst) {
            return refused();
        }
        self.inner.load(id)
    }

    fn save_messages(
        &self,
        expected: Version,
        record: &SessionRecord,
        messages: &[Arc<Message>],
    ) -> BoxFuture<'static, StoreResult<Written>> {
        if !self.allow_write() {
            return refused();
        }
        self.inner.save_messages(expected, record, messages)
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
        self.inner.list(owner, limit, offset)
    }

    fn delete(&self, id: &SessionId) -> BoxFuture<'static, StoreResult<bool>> {
        if !self.allow_write() {
            return refused();
        }
        self.inner.delete(id)
    }

    fn purge_expired(&self, ttl: Duration) -> BoxFuture<'static, StoreResult<u64>> {
        self.inner.purge_expired(ttl)
    }

    fn ping(&self) -> BoxFuture<'static, StoreResult<()>> {
        self.inner.ping()
    }

    fn kind(&self) -> &'static str {
        "flaky"
    }
}

async fn spawn_flaky() -> (TestApp, Arc<FlakyStore>) {
    let mut values = BTreeMap::new();
    values.insert("SERVER__PORT".to_string(), "0".to_string());
    values.insert("SERVER__WORKERS".to_string(), "2".to_string());
    let settings = Settings::from_map(&values).expect("test settings are valid");
    let store = FlakyStore::new();
    let application = Application::build_with_store(settings, store.clone())
        .await
        .expect("the test server starts");
    let port = application.port();
    actix_web::rt::spawn(application.run_until_stopped());
    let app = TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client: crate::helpers::http_client(),
    };
    (app, store)
}

fn assert_database_error(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["type"], "DatabaseError", "{body}");
    assert_eq!(body["error"], "Database not reachable", "{body}");
}

#[actix_web::test]
async fn a_failed_message_write_changes_nothing_and_the_session_keeps_working() {
    let (app, store) = spawn_flaky().await;
    let (status, body) = app.say("flaky", "m1", "hello", None).await;
    assert_eq!(status, 200, "{body}");
    store.fail_writes_after(0);
    let (status, body) = app.say("flaky", "m2", "again", None).await;
    assert_database_error(status, &body);
    assert_eq!(
        body,
        json!({"error": "Database not reachable", "type": "DatabaseError"})
    );
    assert_eq!(app.session("flaky").await["turn_number"], 1);
    assert_eq!(app.tree("flaky").await.as_array().unwrap().len(), 2);
    store.heal();
    // m2 was never stored, so it is not a duplicate now.
    let (status, body) = app.say("flaky", "m2", "again", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.session("flaky").await["turn_number"], 2);
}

#[actix_web::test]
async fn a_failed_acceptance_keeps_the_call_pending() {
    let (app, store) = spawn_flaky().await;
    let (status, first) = app
        .say(
            "flaky_call",
            "m1",
            "call select_issue {\"number\": 42}",
            Some(tasks_context()),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = first["pending_tool_call"]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    store.fail_writes_after(0);
    let (status, body) = app
        .continue_call("flaky_call", "m2", &call_id, json!({"ok": true}))
        .await;
    assert_database_error(status, &body);
    assert_eq!(
        app.session("flaky_call").await["pending_action"]["tool_call_id"],
        call_id.as_str()
    );
    store.heal();
    let (status, body) = app
        .continue_call("flaky_call", "m2", &call_id, json!({"ok": true}))
        .await;
    assert_eq!(status, 200, "{body}");
}

#[actix_web::test]
async fn a_turn_whose_result_cannot_be_stored_answers_503_and_keeps_only_what_was_stored() {
    let (app, store) = spawn_flaky().await;
    // The user message is stored; the turn's result is not.
    store.fail_writes_after(1);
    let (status, body) = app.say("flaky_turn", "m1", "hello", None).await;
    assert_database_error(status, &body);
    store.heal();
    let tree = app.tree("flaky_turn").await;
    let ids: Vec<&str> = tree
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m1"]);
    let (status, body) = app.say("flaky_turn", "m2", "hello again", None).await;
    assert_eq!(status, 200, "{body}");
}

#[actix_web::test]
async fn a_failed_load_answers_503_and_leaves_no_actor_behind() {
    let (app, store) = spawn_flaky().await;
    store.fail_loads.store(true, Ordering::SeqCst);
    let (status, body) = app.get("/api/sessions/unloadable").await;
    assert_database_error(status, &body);
    let (status, body) = app.say("unloadable", "m1", "hello", None).await;
    assert_database_error(status, &body);
    assert_eq!(
        app.get("/health").await.1["components"]["sessions"]["live"],
        0
    );
    store.heal();
    let (status, body) = app.say("unloadable", "m1", "hello", None).await;
    assert_eq!(status, 200, "{body}");
}
