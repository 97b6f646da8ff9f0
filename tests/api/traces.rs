//! Per-turn traces (`GET /api/sessions/{id}/traces`) in memory and in
//! PostgreSQL, their bounds, and the OpenTelemetry export received by a
//! small OTLP/HTTP collector that decodes the protobuf.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{eventually, pending_call_id, spawn_app_with, tasks_context, TestApp};
use crate::postgres::TestDb;

/// One backend tool and one host action in the same model response.
const TOOL_AND_ACTION: &str = "call get_time {}\ncall select_issue {\"number\": 42}";

/// A turn that runs `get_time` and stops at `select_issue`, then the
/// continuation that answers it.
async fn tool_then_action(app: &TestApp, session: &str) {
    let (status, reply) = app
        .say(session, "m1", TOOL_AND_ACTION, Some(tasks_context()))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let call_id = pending_call_id(&reply);
    let (status, reply) = app
        .continue_call(session, "m2", &call_id, json!({"selected": 42}))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
}

async fn traces(app: &TestApp, session: &str, query: &str) -> Vec<Value> {
    let (status, body) = app
        .get(&format!("/api/sessions/{session}/traces{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().expect("a list").clone()
}

fn event_types(trace: &Value) -> Vec<&str> {
    trace["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| event["type"].as_str().expect("type"))
        .collect()
}

/// Every event's `at_ms` rises, and the trace's duration covers them.
fn assert_timed(trace: &Value) {
    let mut previous = 0.0;
    for event in trace["events"].as_array().expect("events") {
        let at = event["at_ms"].as_f64().expect("at_ms");
        assert!(at >= previous, "events in time order: {trace}");
        previous = at;
        if let Some(duration) = event.get("duration_ms") {
            assert!(duration.as_f64().expect("duration_ms") >= 0.0, "{event}");
        }
    }
    let duration = trace["duration_ms"].as_f64().expect("duration_ms");
    assert!(duration >= previous, "{trace}");
}

/// The two traces of `tool_then_action`, checked field by field.
fn assert_tool_then_action(session: &str, listed: &[Value]) {
    assert_eq!(listed.len(), 2, "{listed:?}");
    let (first, second) = (&listed[0], &listed[1]);
    assert_eq!(first["session_id"], session);
    assert_eq!(first["user_message"], TOOL_AND_ACTION);
    assert_eq!(first["is_continuation"], false);
    assert_eq!(first["id"].as_str().expect("id").len(), 32);
    assert!(
        first["created_at"]
            .as_str()
            .expect("created_at")
            .ends_with('Z'),
        "{first}"
    );
    assert_eq!(
        event_types(first),
        [
            "turn_started",
            "model_request",
            "tool_call",
            "tool_call",
            "turn_ended"
        ]
    );
    let events = &first["events"];
    assert_eq!(events[0]["model"], "builtin:echo");
    let request = &events[1];
    assert_eq!(request["tool_calls"], 2);
    assert!(request["input_tokens"].as_u64().expect("input") > 0);
    assert!(request["output_tokens"].as_u64().is_some());
    let first_token = request["time_to_first_token_ms"]
        .as_f64()
        .expect("time to first token");
    assert!(first_token <= request["duration_ms"].as_f64().expect("duration"));
    assert_eq!(
        (
            &events[2]["tool_name"],
            &events[2]["category"],
            &events[2]["outcome"]
        ),
        (&json!("get_time"), &json!("backend"), &json!("success"))
    );
    assert_eq!(
        (
            &events[3]["tool_name"],
            &events[3]["category"],
            &events[3]["outcome"]
        ),
        (&json!("select_issue"), &json!("host"), &json!("host"))
    );
    assert_eq!(events[4]["outcome"], "host_action");
    assert_eq!(events[4]["error_type"], Value::Null);
    assert_timed(first);

    assert_eq!(second["is_continuation"], true);
    assert_eq!(second["user_message"], Value::Null);
    assert_eq!(
        event_types(second),
        ["turn_started", "model_request", "turn_ended"]
    );
    assert_eq!(second["events"][2]["outcome"], "completed");
    assert_timed(second);
}

#[actix_web::test]
async fn a_turn_with_a_backend_tool_and_a_host_action_is_traced_with_its_timings() {
    let app = spawn_app_with(&[("TRACES__ENABLED", "true")]).await;
    tool_then_action(&app, "traced").await;
    // Stored after the turn's final response.
    eventually("both traces stored", || async {
        traces(&app, "traced", "").await.len() == 2
    })
    .await;
    let listed = traces(&app, "traced", "").await;
    assert_tool_then_action("traced", &listed);

    // Paging: oldest first.
    let page = traces(&app, "traced", "?limit=1&offset=1").await;
    assert_eq!(page, listed[1..]);
    let (status, body) = app.get("/api/sessions/traced/traces?limit=x").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"].as_str().expect("error").contains("limit"));
    let (status, body) = app.get("/api/sessions/traced/traces?limit=501").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // Deleting the session deletes its traces.
    let (status, _) = app.delete("/api/sessions/traced").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.say("traced", "m1", "hello", None).await;
    assert_eq!(status, StatusCode::OK);
    eventually("the new session's one trace", || async {
        traces(&app, "traced", "").await.len() == 1
    })
    .await;
}

#[actix_web::test]
async fn traces_are_off_by_default_and_bounded_oldest_first() {
    let app = spawn_app_with(&[]).await;
    app.say("plain", "m1", "hello", None).await;
    assert!(traces(&app, "plain", "").await.is_empty());

    let app = spawn_app_with(&[
        ("TRACES__ENABLED", "true"),
        ("TRACES__MAX_PER_SESSION", "2"),
    ])
    .await;
    for id in ["m1", "m2", "m3"] {
        let (status, _) = app.say("bounded", id, &format!("say {id}"), None).await;
        assert_eq!(status, StatusCode::OK);
        eventually("the turn's trace", || async {
            traces(&app, "bounded", "")
                .await
                .iter()
                .any(|trace| trace["user_message"] == format!("say {id}"))
        })
        .await;
    }
    let kept: Vec<Value> = traces(&app, "bounded", "")
        .await
        .iter()
        .map(|trace| trace["user_message"].clone())
        .collect();
    assert_eq!(kept, [json!("say m2"), json!("say m3")]);
}

#[actix_web::test]
async fn traces_are_stored_in_postgres_bounded_and_deleted_with_the_session() {
    let db = TestDb::create().await;
    let app = spawn_app_with(&[
        ("DATABASE_URL", db.url.as_str()),
        ("TRACES__ENABLED", "true"),
        ("TRACES__MAX_PER_SESSION", "3"),
    ])
    .await;
    tool_then_action(&app, "pg-traced").await;
    // The database's write runs beside the turn's own.
    eventually("both traces stored", || async {
        traces(&app, "pg-traced", "").await.len() == 2
    })
    .await;
    assert_tool_then_action("pg-traced", &traces(&app, "pg-traced", "").await);

    for id in ["m3", "m4"] {
        let (status, _) = app.say("pg-traced", id, &format!("say {id}"), None).await;
        assert_eq!(status, StatusCode::OK);
    }
    eventually("the oldest trace dropped", || async {
        let listed = traces(&app, "pg-traced", "").await;
        listed.len() == 3 && listed[2]["user_message"] == "say m4"
    })
    .await;
    let listed = traces(&app, "pg-traced", "").await;
    assert_eq!(listed[0]["is_continuation"], true, "{listed:?}");

    let (status, _) = app.delete("/api/sessions/pg-traced").await;
    assert_eq!(status, StatusCode::OK);
    let n_rows: i64 = db
        .client()
        .await
        .query_one("SELECT count(*) FROM traces", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n_rows, 0, "the session's traces went with it");
}

/// A minimal OTLP/HTTP collector: decodes each `POST /v1/traces` body.
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

async fn collector() -> Collector {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::routing::post;

    type Received = Arc<Mutex<Vec<Span>>>;
    async fn receive(State(spans): State<Received>, body: Bytes) -> axum::http::StatusCode {
        let Ok(request) = ExportTraceServiceRequest::decode(body) else {
            return axum::http::StatusCode::BAD_REQUEST;
        };
        let mut spans = spans.lock().expect("spans");
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .any(|attribute| attribute.key == "service.name");
            assert!(service, "the resource names the service");
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        axum::http::StatusCode::OK
    }

    let spans: Received = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("address").port();
    let router = axum::Router::new()
        .route("/v1/traces", post(receive))
        .with_state(spans.clone());
    actix_web::rt::spawn(async move { axum::serve(listener, router).await });
    Collector {
        endpoint: format!("http://127.0.0.1:{port}"),
        spans,
    }
}

fn attributes(span: &Span) -> HashMap<String, Value> {
    span.attributes
        .iter()
        .map(|attribute| {
            let value = match attribute
                .value
                .as_ref()
                .and_then(|value| value.value.as_ref())
            {
                Some(AnyValue::StringValue(text)) => json!(text),
                Some(AnyValue::IntValue(number)) => json!(number),
                Some(AnyValue::DoubleValue(number)) => json!(number),
                Some(AnyValue::BoolValue(flag)) => json!(flag),
                _ => Value::Null,
            };
            (attribute.key.clone(), value)
        })
        .collect()
}

#[actix_web::test]
async fn turns_are_exported_as_genai_spans_over_otlp_http() {
    let collector = collector().await;
    let app = spawn_app_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("TRACES__ENABLED", "true"),
    ])
    .await;
    tool_then_action(&app, "otel").await;
    eventually("both turns' spans exported", || async {
        collector
            .spans
            .lock()
            .expect("spans")
            .iter()
            .filter(|span| span.name.starts_with("invoke_agent"))
            .count()
            == 2
    })
    .await;
    let spans = collector.spans.lock().expect("spans").clone();
    let stored = traces(&app, "otel", "").await;
    let first_trace = hex(&stored[0]["id"]);
    let first: Vec<&Span> = spans
        .iter()
        .filter(|span| hex_bytes(&span.trace_id) == first_trace)
        .collect();
    let names: Vec<&str> = first.iter().map(|span| span.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "chat echo",
            "execute_tool get_time",
            "execute_tool select_issue (host)",
            "invoke_agent assistant-runtime"
        ],
        "the stored trace's id is the exported trace id"
    );
    let turn = first[3];
    assert!(turn.parent_span_id.is_empty(), "the turn is the root");
    for child in &first[..3] {
        assert_eq!(child.parent_span_id, turn.span_id, "{}", child.name);
        assert!(child.start_time_unix_nano >= turn.start_time_unix_nano);
        assert!(child.end_time_unix_nano <= turn.end_time_unix_nano);
    }
    let chat = attributes(first[0]);
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "builtin");
    assert_eq!(chat["gen_ai.request.model"], "echo");
    assert_eq!(chat["gen_ai.conversation.id"], "otel");
    assert!(chat["gen_ai.usage.input_tokens"].as_i64().expect("input") > 0);
    assert!(chat["gen_ai.usage.output_tokens"].as_i64().is_some());
    let tool = attributes(first[1]);
    assert_eq!(tool["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool["gen_ai.tool.name"], "get_time");
    assert!(tool["gen_ai.tool.call.id"].is_string());
    let action = attributes(first[2]);
    assert_eq!(action["assistant_runtime.tool.category"], "host");
    let agent = attributes(turn);
    assert_eq!(agent["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(agent["assistant_runtime.turn.outcome"], "host_action");
    assert_eq!(
        agent["gen_ai.usage.input_tokens"],
        chat["gen_ai.usage.input_tokens"]
    );
}

fn hex(value: &Value) -> String {
    value.as_str().expect("hex id").to_string()
}

fn hex_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
