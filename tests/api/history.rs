//! Long conversations: history compaction and working memory.
//! The turns run on the fake OpenAI provider, so every request the model
//! would receive is recorded; the summarizer and memory extractor are
//! `builtin:echo`, whose answers are deterministic, unless a test says otherwise.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};
use tokio_postgres::NoTls;

use crate::fake_provider::FakeProvider;
use crate::helpers::{openai_settings, spawn_app_owned, TestApp};

/// The smallest budget the settings allow; a few long messages cross it.
const BUDGET: &str = "5000";
/// About 540 estimated tokens per exchange: the budget is crossed near turn 9.
fn long_message(turn: usize) -> String {
    format!("message {turn}: {}", "lorem ipsum ".repeat(180))
}

fn compacting_settings(fake: &FakeProvider) -> Vec<(&'static str, String)> {
    let mut settings = openai_settings(&fake.base_url_openai());
    settings.push(("HISTORY__TOKEN_BUDGET", BUDGET.to_string()));
    settings.push(("HISTORY__RETAIN_RECENT", "2".to_string()));
    settings.push(("LLM__SUMMARIZATION_MODEL", "builtin:echo".to_string()));
    settings
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().expect("messages").clone()
}

/// The text parts of an OpenAI user message, in order.
fn text_parts(message: &Value) -> Vec<String> {
    match &message["content"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str().map(str::to_string))
            .collect(),
        other => panic!("user content {other}"),
    }
}

fn user_messages(body: &Value) -> Vec<Vec<String>> {
    messages(body)
        .iter()
        .filter(|message| message["role"] == "user")
        .map(text_parts)
        .collect()
}

fn summaries(tree: &Value) -> Vec<Value> {
    tree.as_array()
        .expect("a tree is an array")
        .iter()
        .filter(|message| message["role"] == "summary")
        .cloned()
        .collect()
}

/// Sends long messages until a summary node appears; returns the turn
/// (1-based) whose request was the first to read a summary.
async fn run_until_compacted(app: &TestApp, fake: &FakeProvider, session: &str) -> usize {
    for turn in 1..=20 {
        let (status, reply) = app
            .say(session, &format!("m{turn}"), &long_message(turn), None)
            .await;
        assert_eq!(status, 200, "{reply}");
        if !summaries(&app.tree(session).await).is_empty() {
            assert_eq!(fake.requests().len(), turn, "one provider request per turn");
            let auxiliary = &reply["usage"]["auxiliary"]["summarization"];
            assert_eq!(auxiliary["requests"], 1, "{reply}");
            return turn;
        }
        assert!(reply["usage"]["auxiliary"].is_null(), "{reply}");
    }
    panic!("twenty long turns never crossed the budget");
}

#[actix_web::test]
async fn a_session_over_the_budget_sends_the_summary_and_the_retained_messages() {
    let fake = FakeProvider::start();
    let app = spawn_app_owned(&compacting_settings(&fake)).await;
    let turn = run_until_compacted(&app, &fake, "long").await;
    assert!(turn > 3, "compaction waited for the budget (turn {turn})");
    let requests = fake.requests();

    // The turn before: the whole path, no summary.
    let before = user_messages(&requests[turn - 2].body);
    assert_eq!(before.len(), turn - 1);
    assert!(!before[0][0].starts_with("<conversation_summary>"));

    // The compacting turn: summary, then the two retained exchanges verbatim.
    let after = user_messages(&requests[turn - 1].body);
    assert_eq!(after.len(), 2, "{after:?}");
    let folded = turn - 2;
    assert_eq!(
        after[0][0],
        format!(
            "<conversation_summary>\nSummary (builtin:echo): the user sent {folded} messages before these; the newest folded one began {:?}.\n</conversation_summary>",
            long_message(folded).chars().take(40).collect::<String>()
        )
    );
    assert_eq!(after[0][1..], [long_message(turn - 1)]);
    assert_eq!(after[1], [long_message(turn)]);
    let all = messages(&requests[turn - 1].body);
    assert_eq!(all[0]["role"], "system");
    assert_eq!(
        all.len(),
        4,
        "system, summary with the previous message, its reply, this turn's message"
    );

    // The tree keeps every original message and shows the summary as a node
    // hanging from the last folded message.
    let tree = app.tree("long").await;
    let summary = &summaries(&tree)[0];
    assert_eq!(summary["parent_id"], format!("m{folded}:reply"));
    assert!(summary["content"]
        .as_str()
        .unwrap()
        .starts_with("Summary (builtin:echo)"));
    let users = tree
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .count();
    assert_eq!(users, turn);
    // The displayed path is the conversation itself, without the summary.
    let (_, path) = app.get("/api/sessions/long/messages").await;
    assert!(summaries(&path).is_empty(), "{path}");
    // A summary is not a place to continue from.
    let (status, error) = app
        .post_chat(
            &json!({"id": "branch", "session_id": "long", "content": "hi",
                           "parent_id": summary["id"]}),
        )
        .await;
    assert_eq!(status, 409, "{error}");
}

#[actix_web::test]
async fn after_compaction_the_prefix_is_byte_identical_across_the_following_turns() {
    let fake = FakeProvider::start();
    let app = spawn_app_owned(&compacting_settings(&fake)).await;
    let turn = run_until_compacted(&app, &fake, "stable").await;
    for next in turn + 1..=turn + 3 {
        let (status, reply) = app
            .say("stable", &format!("m{next}"), &long_message(next), None)
            .await;
        assert_eq!(status, 200, "{reply}");
    }
    assert_eq!(
        summaries(&app.tree("stable").await).len(),
        1,
        "no second compaction yet"
    );
    let requests: Vec<Vec<String>> = fake.requests()[turn - 1..]
        .iter()
        .map(|request| {
            messages(&request.body)
                .iter()
                .map(|message| serde_json::to_string(message).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(requests.len(), 4);
    for pair in requests.windows(2) {
        let (earlier, later) = (&pair[0], &pair[1]);
        assert_eq!(
            &later[..earlier.len()],
            &earlier[..],
            "each request begins with the previous one, byte for byte"
        );
        assert_eq!(
            later.len(),
            earlier.len() + 2,
            "plus the reply and the new message"
        );
    }
}

// ---- PostgreSQL ------------------------------------------------------------

const ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A fresh database, dropped (forcibly) on drop.
struct TestDb {
    name: String,
    url: String,
}

impl TestDb {
    async fn create() -> TestDb {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "ar_history_{}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let (client, connection) = tokio_postgres::connect(ADMIN_URL, NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        actix_web::rt::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create the test database");
        let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
        TestDb { name, url }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
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

#[actix_web::test]
async fn the_summary_survives_a_restart_with_postgres() {
    let db = TestDb::create().await;
    let fake = FakeProvider::start();
    let mut settings = compacting_settings(&fake);
    settings.push(("DATABASE_URL", db.url.clone()));
    let first = spawn_app_owned(&settings).await;
    let turn = run_until_compacted(&first, &fake, "durable").await;
    let stored = summaries(&first.tree("durable").await);

    // A second server on the same database: a restart, as far as the session knows.
    let second = spawn_app_owned(&settings).await;
    let reloaded = summaries(&second.tree("durable").await);
    assert_eq!(
        reloaded, stored,
        "the summary node is stored as it was made"
    );
    let next = turn + 1;
    let (status, reply) = second
        .say("durable", &format!("m{next}"), &long_message(next), None)
        .await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply["usage"]["auxiliary"].is_null(),
        "no second summarization: {reply}"
    );
    let requests = fake.requests();
    let (before, after) = (&requests[turn - 1].body, &requests[turn].body);
    let before = messages(before);
    assert_eq!(
        &messages(after)[..before.len()],
        &before[..],
        "after the restart the request begins with the stored summary and the same prefix"
    );
}

// ---- working memory and silent decisions -----------------------------------

#[actix_web::test]
async fn working_memory_opens_the_next_user_message_and_stays_in_its_replay() {
    let fake = FakeProvider::start();
    let mut settings = openai_settings(&fake.base_url_openai());
    settings.push(("ASSISTANT__ENABLE_WORKING_MEMORY", "true".to_string()));
    settings.push(("LLM__WORKING_MEMORY_MODEL", "builtin:echo".to_string()));
    let app = spawn_app_owned(&settings).await;
    let (status, first) = app
        .say("memory", "m1", "remember my name is Ada\nhi", None)
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        first["usage"]["auxiliary"]["working_memory"]["requests"], 1,
        "{first}"
    );
    let (status, _) = app.say("memory", "m2", "remember I prefer tea", None).await;
    assert_eq!(status, 200);
    let (status, _) = app.say("memory", "m3", "what do you know?", None).await;
    assert_eq!(status, 200);

    let tree = app.tree("memory").await;
    let reply = tree
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["id"] == "m2:reply")
        .unwrap();
    assert_eq!(
        reply["working_memory"],
        json!(["my name is Ada", "I prefer tea"])
    );

    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        3,
        "the extractor ran on echo, not the provider"
    );
    let third = user_messages(&requests[2].body);
    assert_eq!(
        third[2][0],
        "<working_memory>\n- my name is Ada\n- I prefer tea\n</working_memory>"
    );
    assert_eq!(third[2][1], "what do you know?");
    // The second message is replayed with the block it was sent with.
    let second = user_messages(&requests[1].body);
    assert_eq!(third[1], second[1]);
    assert_eq!(
        second[1][0],
        "<working_memory>\n- my name is Ada\n</working_memory>"
    );
    assert_eq!(third[0], ["remember my name is Ada\nhi"]);
    let system = &messages(&requests[2].body)[0];
    assert!(
        !system.to_string().contains("working_memory"),
        "never in the system prompt"
    );
}

/// A context with one action, for silent decisions.
fn decision_context() -> Value {
    json!({"actions": [{"name": "set_position", "description": "Move",
                        "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}]})
}

#[actix_web::test]
async fn silent_decisions_make_no_summarization_or_memory_calls() {
    let fake = FakeProvider::start();
    let mut settings = openai_settings(&fake.base_url_openai());
    // Every auxiliary call would go to the (recording) turn model.
    settings.push(("HISTORY__TOKEN_BUDGET", BUDGET.to_string()));
    settings.push(("HISTORY__RETAIN_RECENT", "1".to_string()));
    settings.push(("ASSISTANT__ENABLE_WORKING_MEMORY", "true".to_string()));
    let app = spawn_app_owned(&settings).await;
    let turns = 14;
    for turn in 1..=turns {
        let (status, reply) = app
            .post_chat(&json!({"id": format!("d{turn}"), "session_id": "decisions",
                               "output_mode": "host_tools", "content": long_message(turn),
                               "host_context": decision_context()}))
            .await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["decision"], "hold", "{reply}");
        assert!(reply["usage"]["auxiliary"].is_null(), "{reply}");
    }
    assert_eq!(
        fake.requests().len(),
        turns,
        "one request per decision, nothing else"
    );
    let last = user_messages(&fake.requests()[turns - 1].body);
    assert_eq!(last.len(), turns, "the whole path, never summarized");
    assert!(summaries(&app.tree("decisions").await).is_empty());

    // The same settings in text mode do call the model for memory.
    let (status, reply) = app.say("chat", "c1", "hello", None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        fake.requests().len(),
        turns + 2,
        "the turn and its memory update"
    );
}

#[actix_web::test]
async fn a_failed_summarization_leaves_the_history_and_the_turn_goes_on() {
    let fake = FakeProvider::start();
    let mut settings = compacting_settings(&fake);
    settings.retain(|(key, _)| *key != "LLM__SUMMARIZATION_MODEL");
    // A provider nobody listens on: the summarizer's call fails to connect.
    settings.push((
        "LLM__SUMMARIZATION_MODEL",
        "anthropic:claude-test".to_string(),
    ));
    settings.push(("ANTHROPIC_API_KEY", "sk-test".to_string()));
    settings.push(("ANTHROPIC_BASE_URL", "http://127.0.0.1:9".to_string()));
    settings.push(("LLM__RETRY_BACKOFF_MS", "1".to_string()));
    let app = spawn_app_owned(&settings).await;
    let turns = 12;
    for turn in 1..=turns {
        let (status, reply) = app
            .say("failing", &format!("m{turn}"), &long_message(turn), None)
            .await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(
            reply["content"], "Hello from the fake provider.",
            "the turn went on: {reply}"
        );
    }
    assert!(summaries(&app.tree("failing").await).is_empty());
    let last = user_messages(&fake.requests()[turns - 1].body);
    assert_eq!(last.len(), turns, "the whole path, as it was");
}
