//! Persistence against a real PostgreSQL (127.0.0.1:5432, user `postgres`):
//! restarts with a pending action, crash windows, two processes racing one
//! continuation, a database lost and regained, required-database startup and
//! migrations. Every test makes its own `ar_test_<unique>` database and drops
//! it when done; the "database lost" test runs a private server of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actors::conversation::{Message, Role, SessionRecord};
use actors::ids::{MessageId, SessionId, ToolCallId};
use actors::store::migrations::MIGRATIONS;
use actors::store::postgres::PgStore;
use actors::store::{Store, StoreError, Written};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio_postgres::NoTls;

use crate::helpers::{spawn_app_with, tasks_context, TestApp};
use crate::process::{free_port, scratch_dir, ServerProcess};

const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const SERVER_BINARY: &str = env!("CARGO_BIN_EXE_assistant-runtime");
/// How long a server process or database may take to come up.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);
const SELECT_ISSUE: &str = "call select_issue {\"number\": 42}";

// ---- harness ---------------------------------------------------------------

/// A name no other test or run uses: pid, clock and a counter.
fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{nanos:x}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|error| panic!("connect to {url}: {error}"));
    actix_web::rt::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A fresh database on the shared server, dropped (forcibly) on drop.
pub(crate) struct TestDb {
    name: String,
    pub(crate) url: String,
}

impl TestDb {
    pub(crate) async fn create() -> TestDb {
        let name = unique("ar_test");
        connect(ADMIN_URL)
            .await
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create the test database");
        let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
        TestDb { name, url }
    }

    /// A connection that sees the runtime's tables (in `assistant_runtime`,
    /// the default `DATABASE__SCHEMA`).
    pub(crate) async fn client(&self) -> tokio_postgres::Client {
        let client = connect(&self.url).await;
        client
            .batch_execute("SET search_path TO assistant_runtime")
            .await
            .expect("set the search path");
        client
    }
}

impl TestDb {
    /// A connection with the server's default `search_path` (`public`).
    pub(crate) async fn public_client(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Sync on purpose: Drop cannot await, and psql is beside the server.
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc"])
            .arg(format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The server binary with a clean environment plus `env`, run in `dir` (so
/// no `config/` or `.env` of the checkout leaks in).
fn server_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(SERVER_BINARY);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .current_dir(dir);
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The runtime's binary as its own process on `database_url`
/// (`process::ServerProcess`: clean environment, scratch folder).
pub(crate) async fn server_on(database_url: &str) -> ServerProcess {
    ServerProcess::runtime(&[("DATABASE_URL", database_url)]).await
}

fn call_id_of(reply: &Value) -> String {
    reply["pending_tool_call"]["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a pending call in {reply}"))
        .to_string()
}

/// Every tool record of a session's tree, by call id.
fn tool_records(tree: &Value) -> Vec<Value> {
    tree.as_array()
        .expect("a tree is a list")
        .iter()
        .flat_map(|message| message["segments"].as_array().cloned().unwrap_or_default())
        .filter(|segment| segment["kind"] == "tool_group")
        .flat_map(|segment| segment["tools"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn assert_database_error(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        body,
        &json!({"error": "Database not reachable", "type": "DatabaseError"})
    );
}

async fn poll_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + STARTUP_DEADLINE;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- restart ---------------------------------------------------------------

#[actix_web::test]
async fn a_pending_action_survives_a_crash_and_unresolved_calls_read_unknown() {
    let db = TestDb::create().await;
    let server = server_on(&db.url).await;
    let (status, first) = server
        .app
        .say("restart", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = call_id_of(&first);
    let batch = format!("{SELECT_ISSUE}\ncall open_tab {{\"tab\": \"bugs\"}}");
    let (status, batch_reply) = server
        .app
        .say("batch", "b1", &batch, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{batch_reply}");
    assert_eq!(
        batch_reply["pending_tool_call"]["queued"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let batch_call = call_id_of(&batch_reply);
    server.crash();

    // The crash window "assistant message stored, pending pointer not": clear
    // it by hand; both calls of the batch then have neither result nor pointer.
    db.client()
        .await
        .execute(
            "UPDATE sessions SET pending_action = NULL WHERE id = 'batch'",
            &[],
        )
        .await
        .unwrap();

    let server = server_on(&db.url).await;
    let info = server.app.session("restart").await;
    assert_eq!(
        info["pending_action"]["tool_call_id"],
        call_id.as_str(),
        "{info}"
    );
    assert_eq!(info["pending_action"]["tool_name"], "select_issue");
    assert_eq!(info["pending_action"]["arguments"], json!({"number": 42}));

    let (status, resumed) = server
        .app
        .continue_call("restart", "m2", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["message_id"], first["message_id"]);
    let (status, duplicate) = server
        .app
        .continue_call("restart", "m3", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, 409, "{duplicate}");
    let sentence = duplicate["error"].as_str().unwrap();
    assert!(
        sentence.contains("already recorded") && sentence.contains("(status: completed)"),
        "{sentence}"
    );
    assert!(!sentence.contains("success"), "{sentence}");

    let batch_info = server.app.session("batch").await;
    assert!(batch_info["pending_action"].is_null(), "{batch_info}");
    let tools = tool_records(&server.app.tree("batch").await);
    assert_eq!(tools.len(), 2);
    for tool in &tools {
        assert_eq!(tool["status"], "unknown", "{tool}");
        assert_eq!(tool["outcome"], "interrupted", "{tool}");
    }
    let (status, late) = server
        .app
        .continue_call("batch", "b2", &batch_call, json!({"selected": 42}))
        .await;
    assert_eq!(status, 409, "{late}");
    assert!(
        late["error"].as_str().unwrap().contains("status: unknown"),
        "{late}"
    );
}

#[actix_web::test]
async fn an_idle_session_stops_and_reloads_with_its_pending_action() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[
        ("DATABASE_URL", db.url.as_str()),
        ("ASSISTANT__SESSION_IDLE_SECONDS", "1"),
    ])
    .await;
    let (status, first) = app
        .say("idle", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = call_id_of(&first);
    poll_until("the idle actor to stop", || async {
        app.get("/health").await.1["components"]["sessions"]["live"] == 0
    })
    .await;
    assert_eq!(
        app.session("idle").await["pending_action"]["tool_call_id"],
        call_id.as_str()
    );
    let (status, resumed) = app
        .continue_call("idle", "m2", &call_id, json!({"ok": true}))
        .await;
    assert_eq!(status, 200, "{resumed}");
}

// ---- crash windows ---------------------------------------------------------

/// A session with one pending `select_issue` call, left by a first process.
async fn session_with_pending_call(db: &TestDb, session_id: &str) -> String {
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let (status, first) = app
        .say(session_id, "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    call_id_of(&first)
}

async fn stored_tool(db: &TestDb, session_id: &str) -> Value {
    let row = db
        .client()
        .await
        .query_one(
            "SELECT body::text FROM messages WHERE session_id = $1 AND role = 'assistant'",
            &[&session_id],
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_str(row.get(0)).unwrap();
    tool_records(&json!([body]))[0].clone()
}

// `save_messages` writes the assistant message and the pending pointer in one
// transaction, and an acceptance the result and the pointer, so neither
// window can open in PgStore itself; these tests make the rows such a crash
// (or an older writer) would leave with SQL, and check what a load makes of them.

#[actix_web::test]
async fn a_call_without_result_or_pending_pointer_is_recovered_as_unknown() {
    let db = TestDb::create().await;
    let call_id = session_with_pending_call(&db, "window_a").await;
    db.client()
        .await
        .execute("UPDATE sessions SET pending_action = NULL", &[])
        .await
        .unwrap();

    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    assert!(app.session("window_a").await["pending_action"].is_null());
    let tool = &tool_records(&app.tree("window_a").await)[0];
    assert_eq!(tool["status"], "unknown", "{tool}");
    // The recovered result is written back, not only shown.
    assert_eq!(stored_tool(&db, "window_a").await["status"], "unknown");
    let (status, late) = app
        .continue_call("window_a", "m2", &call_id, json!({}))
        .await;
    assert_eq!(status, 409, "{late}");
}

#[actix_web::test]
async fn a_pending_pointer_whose_call_has_a_result_is_dropped_on_load() {
    let db = TestDb::create().await;
    let call_id = session_with_pending_call(&db, "window_b").await;
    let client = db.client().await;
    let row = client
        .query_one(
            "SELECT id, body::text FROM messages WHERE role = 'assistant'",
            &[],
        )
        .await
        .unwrap();
    let message_id: String = row.get(0);
    let mut body: Value = serde_json::from_str(row.get(1)).unwrap();
    let tool = &mut body["segments"][0]["tools"][0];
    assert_eq!(tool["id"], call_id.as_str());
    tool["output"] = json!({"selected": 42});
    tool["outcome"] = json!("success");
    // An older row spelled the status of a completed call `success`; it
    // reads as completed.
    tool["status"] = json!("success");
    client
        .execute(
            "UPDATE messages SET body = $1::text::json WHERE id = $2",
            &[&body.to_string(), &message_id],
        )
        .await
        .unwrap();

    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let info = app.session("window_b").await;
    assert!(info["pending_action"].is_null(), "{info}");
    let (status, duplicate) = app
        .continue_call("window_b", "m2", &call_id, json!({}))
        .await;
    assert_eq!(status, 409, "{duplicate}");
    assert!(
        duplicate["error"]
            .as_str()
            .unwrap()
            .contains("(status: completed)"),
        "{duplicate}"
    );
}

// ---- two processes ---------------------------------------------------------

#[actix_web::test]
async fn two_processes_accept_one_continuation_exactly_once() {
    let db = TestDb::create().await;
    let first = server_on(&db.url).await;
    let second = server_on(&db.url).await;
    let (status, reply) = first
        .app
        .say("race", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{reply}");
    let call_id = call_id_of(&reply);
    // The second process must know the call is pending: it loads the session.
    assert_eq!(
        second.app.session("race").await["pending_action"]["tool_call_id"],
        call_id.as_str()
    );

    let body = json!({"id": "m2", "session_id": "race", "content": "", "tool_call_id": call_id,
                      "tool_result": {"selected": 42}});
    let requests = (0..200).map(|index| {
        let app = if index % 2 == 0 {
            &first.app
        } else {
            &second.app
        };
        let body = body.clone();
        async move { app.post_chat(&body).await }
    });
    let replies = futures_util::future::join_all(requests).await;
    let statuses: Vec<u16> = replies.iter().map(|(status, _)| status.as_u16()).collect();
    let n_accepted = statuses.iter().filter(|status| **status == 200).count();
    assert_eq!(n_accepted, 1, "{statuses:?}");
    for (status, body) in &replies {
        assert!(*status == 200 || *status == 409, "{status}: {body}");
    }
    let stored = db
        .client()
        .await
        .query_one(
            "SELECT pending_action IS NULL FROM sessions WHERE id = 'race'",
            &[],
        )
        .await
        .unwrap();
    assert!(stored.get::<_, bool>(0));
}

// ---- database lost and regained --------------------------------------------

/// A PostgreSQL server of the test's own, in a scratch folder on a free port.
/// Run as the `postgres` OS user when the test runs as root (initdb refuses root).
struct PrivatePostgres {
    data: PathBuf,
    port: u16,
    as_postgres_user: bool,
}

impl PrivatePostgres {
    fn init() -> PrivatePostgres {
        let root = scratch_dir("ar_pg");
        let as_postgres_user = Command::new("id")
            .arg("-u")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
            .unwrap_or(false);
        if as_postgres_user {
            let chowned = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&root)
                .status()
                .expect("chown");
            assert!(chowned.success());
        }
        let server = PrivatePostgres {
            data: root.join("data"),
            port: free_port(),
            as_postgres_user,
        };
        let data = server.data.to_string_lossy().to_string();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        server
    }

    fn run(&self, program: &str, args: &[&str]) {
        let binary = ["/usr/local/bin", "/usr/lib/postgresql/15/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(program))
            .find(|path| path.exists())
            .unwrap_or_else(|| PathBuf::from(program));
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(binary);
            command
        } else {
            Command::new(binary)
        };
        let output = command.args(args).output().expect("run a PostgreSQL tool");
        assert!(
            output.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn start(&self) {
        let data = self.data.to_string_lossy().to_string();
        let log = self.data.parent().unwrap().join("postgres.log");
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.data.parent().unwrap().display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-l",
                &log.to_string_lossy(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    fn stop(&self) {
        let data = self.data.to_string_lossy().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]);
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().to_string();
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "pg_ctl"]);
            command
        } else {
            Command::new("pg_ctl")
        };
        let _ = command
            .args(["-D", &data, "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(self.data.parent().unwrap());
    }
}

#[actix_web::test]
async fn a_lost_database_answers_503_and_the_runtime_recovers_without_restart() {
    let postgres = PrivatePostgres::init();
    let url = postgres.url();
    // Not required and not reachable at startup: the server starts anyway.
    let app = spawn_app_with(&[("DATABASE_URL", url.as_str())]).await;
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["components"]["store"]["healthy"], false);
    let (status, body) = app.say("lost", "m0", "hello", None).await;
    assert_database_error(status, &body);

    // Reachable: the first request that connects applies the migrations.
    postgres.start();
    poll_until("/health to recover", || async {
        app.get("/health").await.0 == 200
    })
    .await;
    let (status, body) = app.say("lost", "m1", "hello", None).await;
    assert_eq!(status, 200, "{body}");
    let (status, pending) = app
        .say("lost_call", "c1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{pending}");
    let call_id = call_id_of(&pending);

    // Lost mid-run.
    postgres.stop();
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["components"]["store"]["healthy"], false);
    let (status, body) = app.say("lost", "m2", "second turn", None).await;
    assert_database_error(status, &body);
    let (status, body) = app
        .continue_call("lost_call", "c2", &call_id, json!({"selected": 42}))
        .await;
    assert_database_error(status, &body);
    let (status, body) = app.say("never_stored", "n1", "hello", None).await;
    assert_database_error(status, &body);
    let (status, body) = app.get("/api/sessions").await;
    assert_database_error(status, &body);
    // Memory did not move ahead of the rows: still one turn, still pending.
    let info = app.session("lost").await;
    assert_eq!(info["turn_number"], 1, "{info}");
    assert_eq!(
        app.session("lost_call").await["pending_action"]["tool_call_id"],
        call_id.as_str()
    );

    // Back: the same requests now succeed, on the same server.
    postgres.start();
    poll_until("/health to recover", || async {
        app.get("/health").await.0 == 200
    })
    .await;
    let (status, body) = app.say("lost", "m2", "second turn", None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app
        .continue_call("lost_call", "c2", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, 200, "{body}");

    // A fresh process reads every earlier turn intact, nothing half-written.
    let fresh = spawn_app_with(&[("DATABASE_URL", url.as_str())]).await;
    let path = fresh.get("/api/sessions/lost/messages").await.1;
    let ids: Vec<&str> = path
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m1", "m1:reply", "m2", "m2:reply"]);
    let tools = tool_records(&fresh.tree("lost_call").await);
    assert_eq!(tools[0]["outcome"], "success", "{tools:?}");
    assert_eq!(fresh.session("never_stored").await["type"], "not_found");
}

// ---- startup and migrations ------------------------------------------------

pub(crate) fn run_binary(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let dir = scratch_dir("ar_run");
    let output = server_command(&dir, args, env)
        .output()
        .expect("run the binary");
    let _ = std::fs::remove_dir_all(&dir);
    output
}

#[actix_web::test]
async fn a_required_database_that_cannot_be_used_stops_startup_naming_the_cause() {
    let unreachable = format!("postgres://postgres@127.0.0.1:{}/postgres", free_port());
    let missing = format!(
        "postgres://postgres@127.0.0.1:5432/{}",
        unique("ar_test_missing")
    );
    for (url, cause) in [
        (unreachable.as_str(), "unreachable"),
        (missing.as_str(), "database_missing"),
    ] {
        let output = run_binary(
            &[],
            &[
                ("DATABASE_URL", url),
                ("DATABASE__REQUIRED", "true"),
                ("SERVER__PORT", "0"),
            ],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "{cause}: exited {}",
            output.status
        );
        assert!(stderr.contains(cause), "{cause}: {stderr}");
    }
}

async fn n_applied(db: &TestDb) -> i64 {
    db.client()
        .await
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0)
}

#[actix_web::test]
async fn migrations_apply_once_when_run_twice_or_concurrently() {
    let db = TestDb::create().await;
    for _ in 0..2 {
        let output = run_binary(&["migrate"], &[("DATABASE_URL", db.url.as_str())]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(n_applied(&db).await, MIGRATIONS.len() as i64);

    let fresh = TestDb::create().await;
    let dir = scratch_dir("ar_run");
    let children: Vec<Child> = (0..2)
        .map(|_| {
            server_command(&dir, &["migrate"], &[("DATABASE_URL", fresh.url.as_str())])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start migrate")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(n_applied(&fresh).await, MIGRATIONS.len() as i64);
}

#[actix_web::test]
async fn two_stores_racing_one_acceptance_accept_it_once() {
    let db = TestDb::create().await;
    let call_id = session_with_pending_call(&db, "store_race").await;
    // Two pools stand for two processes; neither has any memory of the session.
    let stores = [
        PgStore::new(&db.url, 4).unwrap(),
        PgStore::new(&db.url, 4).unwrap(),
    ];
    let snapshot = stores[0]
        .load(&SessionId::new("store_race"))
        .await
        .unwrap()
        .unwrap();
    let assistant = snapshot.messages.last().unwrap().clone();
    assert_eq!(
        snapshot
            .record
            .pending_action
            .as_ref()
            .map(|pending| &pending.tool_call_id),
        Some(&ToolCallId::new(call_id))
    );
    // Every attempt accepts from the same loaded copy: same version, same pending call.
    let mut accepted = snapshot.record.clone();
    accepted.pending_action = None;
    let attempts = (0..20).map(|index| {
        stores[index % 2].save_messages(
            snapshot.version,
            &accepted,
            std::slice::from_ref(&assistant),
        )
    });
    let results = futures_util::future::join_all(attempts).await;
    let n_accepted = results
        .iter()
        .filter(|result| matches!(result, Ok(Written::Committed(_))))
        .count();
    assert_eq!(n_accepted, 1, "{results:?}");
    assert!(results.iter().all(|result| result.is_ok()), "{results:?}");
}

#[actix_web::test]
async fn expired_sessions_are_purged_with_their_messages() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    for session in ["old", "recent"] {
        let (status, body) = app.say(session, "m1", "hello", None).await;
        assert_eq!(status, 200, "{body}");
    }
    let client = db.client().await;
    client
        .execute(
            "UPDATE sessions SET updated_at = now() - interval '2 hours' WHERE id = 'old'",
            &[],
        )
        .await
        .unwrap();

    let store = PgStore::new(&db.url, 1).unwrap();
    let n_deleted = store
        .purge_expired(Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(n_deleted, 1);
    let remaining: Vec<String> = client
        .query("SELECT DISTINCT session_id FROM messages", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(remaining, ["recent"]);
    assert!(store.load(&SessionId::new("old")).await.unwrap().is_none());
}

#[actix_web::test]
async fn a_deleted_session_leaves_no_message_behind_and_its_id_starts_afresh() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    for (session, id) in [("gone", "m1"), ("gone", "m2"), ("kept", "m1")] {
        let (status, body) = app.say(session, id, "hello", None).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = app.delete("/api/sessions/gone").await;
    assert_eq!(status, 200, "{body}");
    let client = db.client().await;
    let count = |session: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT count(*) FROM messages WHERE session_id = $1",
                    &[&session],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    assert_eq!(count("gone").await, 0);
    assert_eq!(count("kept").await, 2);
    // The same id again is a new session of one exchange, not the old tree.
    let (status, body) = app.say("gone", "m1", "again", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(count("gone").await, 2);
}

#[actix_web::test]
async fn the_store_round_trips_a_record_and_keeps_json_key_order() {
    let db = TestDb::create().await;
    let store = PgStore::new(&db.url, 2).unwrap();
    store.migrate().await.unwrap();
    let mut record = SessionRecord::new(SessionId::new("plain"), 1_700_000_000_000);
    record.title = Some("title".into());
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    // Keys the host sends in non-alphabetical order must come back in that order.
    let context = json!({"version": 1, "view": {"name": "tasks", "data": {"zeta": 1, "alpha": 2}}});
    let (status, body) = app.say("order", "m1", "hello", Some(context)).await;
    assert_eq!(status, 200, "{body}");
    let snapshot = store.load(&SessionId::new("order")).await.unwrap().unwrap();
    let context = snapshot.record.host_context.expect("a stored context");
    let data = context
        .view
        .as_ref()
        .and_then(|view| view.data.as_ref())
        .expect("view data");
    let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["zeta", "alpha"]);
    assert!(matches!(
        store.save_session(0, &record).await.unwrap(),
        Written::Committed(_)
    ));
    let reloaded = store.load(&record.id).await.unwrap().unwrap();
    assert_eq!(reloaded.record, record);
    assert!(reloaded.messages.is_empty());
}

#[actix_web::test]
async fn a_host_context_written_again_unchanged_is_kept_and_a_changed_one_replaces_it() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let client = db.client().await;
    // Large enough to be kept out of line (TOAST), where keeping the
    // stored value matters most.
    let context = |n: u64| {
        let issues: Vec<Value> = (0..300)
            .map(|i| json!({"number": i, "title": format!("issue {i} of {n}")}))
            .collect();
        json!({"version": 1, "view": {"name": "tasks", "data": {"n": n, "issues": issues}}})
    };
    let stored = || async {
        let row = client
            .query_one(
                "SELECT host_context::text, turn_number FROM sessions WHERE id = 'ctx'",
                &[],
            )
            .await
            .unwrap();
        let text: Option<String> = row.get(0);
        let context: Value = serde_json::from_str(&text.expect("a stored context")).unwrap();
        (context["view"]["data"].clone(), row.get::<_, i32>(1))
    };
    for (id, n, turns) in [("m1", 1, 1), ("m2", 1, 2), ("m3", 2, 3), ("m4", 2, 4)] {
        let (status, body) = app.say("ctx", id, "hello", Some(context(n))).await;
        assert_eq!(status, 200, "{body}");
        let (data, turn_number) = stored().await;
        assert_eq!(data, context(n)["view"]["data"], "after {id}");
        assert_eq!(turn_number, turns, "after {id}");
    }
}

#[actix_web::test]
async fn a_silent_decision_survives_a_restart_and_its_receipt_stays_silent() {
    let db = TestDb::create().await;
    let decision = json!({
        "id": "d1", "session_id": "decide", "output_mode": "host_tools",
        "content": "say thinking out loud\ncall select_issue {\"number\": 7}",
        "host_context": tasks_context(),
    });
    let call_id = {
        let server = server_on(&db.url).await;
        let (status, pending) = server.app.post_chat(&decision).await;
        assert_eq!(status, 200, "{pending}");
        assert_eq!(pending["decision"], "pending", "{pending}");
        pending["pending_tool_call"]["call_id"]
            .as_str()
            .unwrap()
            .to_string()
        // Dropping the server kills it with SIGKILL.
    };
    let server = server_on(&db.url).await;
    let info = server.app.session("decide").await;
    assert_eq!(
        info["pending_action"]["output_mode"], "host_tools",
        "{info}"
    );
    // The receipt names no output_mode: the stored one decides, so no narration.
    let (status, receipt) = server
        .app
        .continue_call("decide", "d2", &call_id, json!({"done": true}))
        .await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["decision"], "completed", "{receipt}");
    assert!(receipt["content"].is_null(), "{receipt}");
    assert_eq!(receipt["usage"]["requests"], 1, "{receipt}");
}

#[actix_web::test]
async fn owners_are_stored_and_lists_are_filtered_by_owner_in_postgres() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[
        ("DATABASE_URL", db.url.as_str()),
        ("ACCESS__MODE", "header"),
    ])
    .await;
    let as_principal = |principal: &str, roles: &str| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            "X-Assistant-Principal",
            principal.parse().expect("header value"),
        );
        headers.insert("X-Assistant-Roles", roles.parse().expect("header value"));
        TestApp {
            address: app.address.clone(),
            port: app.port,
            client: crate::helpers::http_client_builder()
                .default_headers(headers)
                .build()
                .expect("client"),
        }
    };
    let alice = as_principal("alice", "");
    let bob = as_principal("bob", "");
    let admin = as_principal("root", "admin");
    assert_eq!(alice.say("pg-alice", "m1", "hi", None).await.0, 200);
    assert_eq!(bob.say("pg-bob", "m1", "hi", None).await.0, 200);
    let ids = |list: Value| -> Vec<String> {
        let mut ids: Vec<String> = list
            .as_array()
            .expect("a list")
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row["session_id"].as_str().unwrap_or(""),
                    row["owner_id"].as_str().unwrap_or("")
                )
            })
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(alice.get("/api/sessions").await.1),
        vec!["pg-alice:alice"]
    );
    assert_eq!(ids(bob.get("/api/sessions").await.1), vec!["pg-bob:bob"]);
    assert_eq!(
        ids(admin.get("/api/sessions").await.1),
        vec!["pg-alice:alice", "pg-bob:bob"]
    );
    assert_eq!(bob.get("/api/sessions/pg-alice").await.0, 403);
    let owner: Option<String> = db
        .client()
        .await
        .query_one("SELECT owner_id FROM sessions WHERE id = 'pg-alice'", &[])
        .await
        .expect("the row")
        .get(0);
    assert_eq!(owner.as_deref(), Some("alice"));

    // Owner transfer is stored: the row says so, and a second process that
    // loads the session from the database checks the new owner.
    let (status, body) = admin.set_owner("pg-alice", Some("bob")).await;
    assert_eq!(status, 200, "{body}");
    let stored_owner = || async {
        db.client()
            .await
            .query_one("SELECT owner_id FROM sessions WHERE id = 'pg-alice'", &[])
            .await
            .expect("the row")
            .get::<_, Option<String>>(0)
    };
    assert_eq!(stored_owner().await.as_deref(), Some("bob"));
    assert_eq!(alice.get("/api/sessions/pg-alice").await.0, 403);
    assert_eq!(bob.say("pg-alice", "m2", "mine now", None).await.0, 200);
    let second = spawn_app_with(&[
        ("DATABASE_URL", db.url.as_str()),
        ("ACCESS__MODE", "header"),
    ])
    .await;
    let on_second = |who: &TestApp| TestApp {
        address: second.address.clone(),
        port: second.port,
        client: who.client.clone(),
    };
    let (status, info) = on_second(&bob).get("/api/sessions/pg-alice").await;
    assert_eq!(
        (status.as_u16(), &info["owner_id"]),
        (200, &json!("bob")),
        "{info}"
    );
    assert_eq!(info["message_count"], 4, "{info}");
    assert_eq!(on_second(&alice).get("/api/sessions/pg-alice").await.0, 403);
    // The first process writes again (its copy is current), then the second
    // one, whose copy is now stale: its write reloads and is decided again.
    assert_eq!(admin.set_owner("pg-alice", Some("alice")).await.0, 200);
    let (status, body) = on_second(&admin).set_owner("pg-alice", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(stored_owner().await, None);
    assert_eq!(on_second(&alice).get("/api/sessions/pg-alice").await.0, 403);
}

// ---- depth limit ------------------------------------------------------------

/// `{"a": {"a": … leaf …}}` with `depth` objects, built without recursion.
fn nested_objects(depth: usize, leaf: Value) -> Value {
    let mut value = leaf;
    for _ in 0..depth {
        value = json!({ "a": value });
    }
    value
}

/// A tool result at the depth limit is stored in Postgres and read back by a
/// second process; one level more is a 422 and changes nothing.
#[actix_web::test]
async fn a_tool_result_at_the_depth_limit_round_trips_through_postgres() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let (status, first) = app
        .say("deep-pg", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = call_id_of(&first);
    let limit = actors::contract::MAX_JSON_DEPTH;
    let (status, refused) = app
        .continue_call("deep-pg", "m2", &call_id, nested_objects(limit, json!(1)))
        .await;
    assert_eq!(status, 422, "{refused}");
    let at_limit = nested_objects(limit - 1, json!("leaf"));
    let (status, resumed) = app
        .continue_call("deep-pg", "m2", &call_id, at_limit.clone())
        .await;
    assert_eq!(status, 200, "{resumed}");
    let fresh = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    assert_eq!(
        fresh.tool_record("deep-pg", &call_id).await["output"],
        at_limit
    );
    let (status, messages) = fresh.get("/api/sessions/deep-pg/messages").await;
    assert_eq!(status, 200, "{messages}");
}

/// A session stored before the limit existed, nested deeper than serde_json
/// reads back, loads with its too-deep part replaced by a marker: it can be
/// read, continued, repaired (which stores the readable form) and deleted.
#[actix_web::test]
async fn a_session_stored_too_deep_is_readable_repairable_and_deletable() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let (status, first) = app
        .say("bricked", "m1", SELECT_ISSUE, Some(tasks_context()))
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = call_id_of(&first);
    let (status, resumed) = app
        .continue_call("bricked", "m2", &call_id, json!("PLANTED"))
        .await;
    assert_eq!(status, 200, "{resumed}");
    let too_deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
    let n_planted = db
        .client()
        .await
        .execute(
            "UPDATE messages SET body = replace(body::text, '\"PLANTED\"', $1)::json
             WHERE session_id = 'bricked' AND body::text LIKE '%PLANTED%'",
            &[&too_deep],
        )
        .await
        .expect("store a too-deep result the way an older version could");
    assert_eq!(n_planted, 1);

    let fresh = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    for path in [
        "/api/sessions/bricked",
        "/api/sessions/bricked/messages",
        "/api/sessions/bricked/tree",
    ] {
        let (status, body) = fresh.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let output = fresh.tool_record("bricked", &call_id).await["output"].clone();
    let mut inner = &output;
    while let Some(first) = inner.get(0) {
        inner = first;
    }
    assert_eq!(inner, actors::store::readback::REMOVED_MARKER);

    let (status, next) = fresh.say("bricked", "m3", "say still here", None).await;
    assert_eq!(status, 200, "{next}");
    let (status, repaired) = fresh
        .post_json("/api/sessions/bricked/repair", &json!({}))
        .await;
    assert_eq!(status, 200, "{repaired}");
    let stored: String = db
        .client()
        .await
        .query_one(
            "SELECT body::text FROM messages WHERE session_id = 'bricked' AND body::text LIKE '%removed:%'",
            &[],
        )
        .await
        .expect("the repaired row")
        .get(0);
    assert!(
        serde_json::from_str::<Value>(&stored).is_ok(),
        "the repair stored a readable form"
    );

    let (status, body) = fresh.delete("/api/sessions/bricked").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = fresh.get("/api/sessions/bricked").await;
    assert_eq!(status, 404, "{body}");
}

#[actix_web::test]
async fn versioned_writes_commit_in_sequence_and_refuse_an_old_version() {
    let db = TestDb::create().await;
    let stores = [
        PgStore::new(&db.url, 2).unwrap(),
        PgStore::new(&db.url, 2).unwrap(),
    ];
    stores[0].migrate().await.unwrap();
    let record = SessionRecord::new(SessionId::new("seq"), 1);
    let Written::Committed(mut version) = stores[0].save_session(0, &record).await.unwrap() else {
        panic!("a new session is created");
    };
    assert_eq!(
        stores[1].save_session(0, &record).await.unwrap(),
        Written::Stale
    );
    for turn in 1..=5 {
        let mut next = record.clone();
        next.turn_number = turn;
        let old = version;
        version = match stores[turn as usize % 2]
            .save_session(version, &next)
            .await
            .unwrap()
        {
            Written::Committed(version) => version,
            Written::Stale => panic!("turn {turn} from the current version was refused"),
        };
        assert_ne!(version, old);
        assert_eq!(
            stores[0].save_session(old, &record).await.unwrap(),
            Written::Stale
        );
    }
    let loaded = stores[1].load(&record.id).await.unwrap().unwrap();
    assert_eq!((loaded.version, loaded.record.turn_number), (version, 5));
}

/// A turn's messages are appended with a plain insert; a write that names
/// a stored message (a repair, a recovered call) replaces it in place, and
/// the other sessions of its batch are written all the same.
#[actix_web::test]
async fn a_stored_message_written_again_is_replaced_in_place_and_new_ones_append() {
    let db = TestDb::create().await;
    let store = PgStore::new(&db.url, 4).unwrap();
    store.migrate().await.unwrap();
    let message = |id: &str, content: &str| {
        let mut message = Message::empty(MessageId::new(id), None, Role::User, 0);
        message.content = content.into();
        Arc::new(message)
    };
    let record = SessionRecord::new(SessionId::new("replaced"), 1);
    let first = vec![message("a", "a"), message("b", "b"), message("c", "c")];
    let Written::Committed(version) = store.save_messages(0, &record, &first).await.unwrap() else {
        panic!("a new session is created");
    };
    // Sent together, so they may share a batch: one replaces, one appends.
    let other = SessionRecord::new(SessionId::new("appended"), 1);
    let changed = vec![message("b", "b again"), message("d", "d")];
    let (replaced, appended) = futures_util::join!(
        store.save_messages(version, &record, &changed),
        store.save_messages(0, &other, &first),
    );
    assert!(matches!(replaced.unwrap(), Written::Committed(_)));
    assert!(matches!(appended.unwrap(), Written::Committed(_)));
    let loaded = store.load(&record.id).await.unwrap().unwrap();
    let contents: Vec<&str> = loaded.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["a", "b again", "c", "d"]);
    let loaded = store.load(&other.id).await.unwrap().unwrap();
    assert_eq!(loaded.messages, first);
    // A stale write naming a stored message changes nothing.
    let stale = vec![message("a", "stale")];
    assert_eq!(
        store.save_messages(version, &record, &stale).await.unwrap(),
        Written::Stale
    );
    let loaded = store.load(&record.id).await.unwrap().unwrap();
    assert_eq!(loaded.messages[0].content, "a");
}

/// A batch that outlives the operation timeout (its session's row held by
/// another client) is rolled back once it runs, never committed by a later
/// batch on the same connection, and the store goes on. Writes queued
/// behind it (one writer: a pool of 2) are answered `Unavailable` within
/// twice the operation timeout (10 s), with no timer of their own: one
/// runs in the next batch and times out there, one waits for it (same
/// session) and is answered once it has waited the timeout.
#[actix_web::test]
async fn a_batch_that_times_out_is_rolled_back_and_the_store_goes_on() {
    let db = TestDb::create().await;
    let store = PgStore::new(&db.url, 2).unwrap();
    store.migrate().await.unwrap();
    let record = SessionRecord::new(SessionId::new("held"), 1);
    let Written::Committed(version) = store.save_session(0, &record).await.unwrap() else {
        panic!("a new session is created");
    };
    let holder = db.client().await;
    holder
        .batch_execute("BEGIN; SELECT 1 FROM sessions WHERE id = 'held' FOR UPDATE")
        .await
        .unwrap();
    let mut late = record.clone();
    late.turn_number = 1;
    let started = Instant::now();
    let queued_behind = |delay_ms: u64| {
        let write = store.save_session(version, &late);
        async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let answer = write.await;
            (answer, started.elapsed())
        }
    };
    let ((timed_out, _), (second, second_after), (third, third_after)) =
        futures_util::join!(queued_behind(0), queued_behind(200), queued_behind(400));
    for answer in [&timed_out, &second, &third] {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{answer:?}"
        );
    }
    for after in [second_after, third_after] {
        assert!(after < Duration::from_secs(22), "answered after {after:?}");
    }
    holder.batch_execute("COMMIT").await.unwrap();
    let mut next = record.clone();
    next.turn_number = 2;
    let written = store.save_session(version, &next).await.unwrap();
    assert!(matches!(written, Written::Committed(_)), "{written:?}");
    let loaded = store.load(&record.id).await.unwrap().unwrap();
    assert_eq!(loaded.record.turn_number, 2);
}

/// A session of more than 64 KiB is decoded on the blocking pool when a
/// fresh process loads it, and reads back whole.
#[actix_web::test]
async fn a_large_session_reloads_whole_in_a_fresh_process() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let long = format!("say {}", "x".repeat(100_000));
    let (status, first) = app.say("large", "m1", &long, None).await;
    assert_eq!(status, 200, "{first}");
    let fresh = spawn_app_with(&[("DATABASE_URL", db.url.as_str())]).await;
    let (status, messages) = fresh.get("/api/sessions/large/messages").await;
    assert_eq!(status, 200, "{messages}");
    assert!(
        messages.to_string().contains(&long),
        "the long message reads back"
    );
    let (status, next) = fresh.say("large", "m2", "say more", None).await;
    assert_eq!(status, 200, "{next}");
}

/// Point 10: a database that does not exist (`createdb` forgotten) is named
/// with its fix by `/readyz`, `/health` and every 503.
#[actix_web::test]
async fn point_10_a_missing_database_names_its_cause_and_fix_everywhere() {
    let name = unique("ar_missing");
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let server = ServerProcess::runtime(&[("DATABASE_URL", &url)]).await;
    let app = &server.app;
    let fix = format!("createdb {name}");
    let (status, ready) = app.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{ready}");
    assert_eq!(ready["missing"], json!(["store"]), "{ready}");
    assert!(
        ready["reasons"][0]
            .as_str()
            .is_some_and(|reason| reason.contains(&fix)),
        "{ready}"
    );
    let (status, health) = app.get("/health").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    let detail = health["components"]["store"]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(
        detail.contains(&fix) && detail.contains("does not exist"),
        "{health}"
    );
    let (status, body) = app.say("s1", "m1", "hi", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["type"], "DatabaseError", "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|error| error.contains(&fix)),
        "{body}"
    );
    let (status, body) = app.get("/api/sessions").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|error| error.contains(&fix)),
        "{body}"
    );
}

/// `POST /api/chat` as `principal` (header mode), with an optional key.
async fn chat_as(
    server: &ServerProcess,
    principal: &str,
    roles: &str,
    key: Option<&str>,
    body: &Value,
) -> (StatusCode, Value) {
    let mut request = server
        .app
        .client
        .post(format!("{}/api/chat", server.app.address))
        .header("X-Assistant-Principal", principal)
        .header("X-Assistant-Roles", roles)
        .json(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = request.send().await.expect("a response");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The key is stored with the message: after a restart the resend still
/// gets the first final response (200, not 409) and another body under the
/// key is a 422. Another principal's same key does not see the outcome
/// (its resend is the duplicate id it always was), nor does a resend
/// without the header.
#[actix_web::test]
async fn an_idempotency_key_survives_a_restart_and_stays_its_principals() {
    let db = TestDb::create().await;
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("ACCESS__MODE", "header"),
    ];
    let server = ServerProcess::runtime(&env).await;
    let body = json!({"id": "m1", "session_id": "keyed", "content": "say first answer"});
    let (status, first) = chat_as(&server, "alice", "", Some("\"k1\""), &body).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    server.crash();

    let server = ServerProcess::runtime(&env).await;
    let (status, again) = chat_as(&server, "alice", "", Some("\"k1\""), &body).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, first);

    let other = json!({"id": "m2", "session_id": "keyed", "content": "say other"});
    let (status, refused) = chat_as(&server, "alice", "", Some("\"k1\""), &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let why = refused["error"].as_str().unwrap_or_default();
    assert!(why.starts_with("Idempotency-Key"), "{refused}");
    assert!(why.contains("another request body"), "{refused}");

    let (status, reply) = chat_as(&server, "root", "admin", Some("\"k1\""), &body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");
    let (status, reply) = chat_as(&server, "alice", "", None, &body).await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");

    let (status, reply) = chat_as(&server, "alice", "", Some("\"open"), &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
    let why = reply["error"].as_str().unwrap_or_default();
    assert!(why.starts_with("Idempotency-Key"), "{reply}");
}
