//! Real providers end to end: the whole server (HTTP and the `/assistant`
//! Socket.IO namespace) pointed at the loopback `FakeProvider`, which speaks
//! each provider's streaming wire format and records every request. The
//! adapter-level cases live in `providers.rs`; these check what the server
//! sends upstream, streams back, stores and replays.

use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, RecordedRequest, Script, DEFAULT_REPLY};
use crate::helpers::{spawn_app_with, tasks_context, TestApp};
use crate::raw_ws::RawWs;

/// A 1x1 PNG: small, and a real image for any provider.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// A different image, so screenshot and reference can be told apart.
const SCREENSHOT_BASE64: &str = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    const BOTH: [Provider; 2] = [Provider::OpenAi, Provider::Anthropic];

    fn model(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai:gpt-test",
            Provider::Anthropic => "anthropic:claude-test",
        }
    }

    fn text(self, pieces: &[&str]) -> Script {
        match self {
            Provider::OpenAi => Script::openai_text(pieces),
            Provider::Anthropic => Script::anthropic_text(pieces),
        }
    }

    fn tool_calls(self, calls: &[(&str, &str, &str)]) -> Script {
        match self {
            Provider::OpenAi => Script::openai_tool_calls(calls),
            Provider::Anthropic => Script::anthropic_tool_use(calls),
        }
    }

    /// The request's conversation, without what is not history: OpenAI's
    /// leading system message, Anthropic's `cache_control` markers (they
    /// move to the newest history end on every request and are not part of
    /// the cached content).
    fn history(self, request: &RecordedRequest) -> Vec<Value> {
        let messages = request.body["messages"].as_array().cloned().unwrap();
        match self {
            Provider::OpenAi => {
                assert_eq!(messages[0]["role"], "system");
                messages[1..].to_vec()
            }
            Provider::Anthropic => messages.into_iter().map(without_cache_control).collect(),
        }
    }
}

/// Settings for both providers on one fake, `provider` the default model.
async fn spawn_on(fake: &FakeProvider, provider: Provider, extra: &[(&str, &str)]) -> TestApp {
    let openai_url = fake.base_url_openai();
    let anthropic_url = fake.base_url_anthropic();
    let mut settings = vec![
        ("LLM__PRIMARY_MODEL", provider.model()),
        ("OPENAI_BASE_URL", openai_url.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("ANTHROPIC_BASE_URL", anthropic_url.as_str()),
        ("ANTHROPIC_API_KEY", "ak-test"),
        ("LLM__RETRY_BACKOFF_MS", "10"),
        // Requests here pick either provider by `config.default_model`.
        (
            "ASSISTANT__REQUEST_MODELS",
            "openai:gpt-test,anthropic:claude-test,builtin:echo,openai:gpt-4o-mini,anthropic:claude-sonnet-4-5",
        ),
    ];
    settings.extend_from_slice(extra);
    spawn_app_with(&settings).await
}

fn without_cache_control(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("cache_control");
            for item in map.values_mut() {
                *item = without_cache_control(item.take());
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = without_cache_control(item.take());
            }
        }
        _ => {}
    }
    value
}

/// JSON pointers of every `cache_control` in a request body.
fn cache_breakpoints(value: &Value, at: String, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                if key == "cache_control" {
                    found.push(at.clone());
                } else {
                    cache_breakpoints(item, format!("{at}/{key}"), found);
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                cache_breakpoints(item, format!("{at}/{index}"), found);
            }
        }
        _ => {}
    }
}

fn breakpoints(request: &RecordedRequest) -> Vec<String> {
    let mut found = Vec::new();
    cache_breakpoints(&request.body, String::new(), &mut found);
    found
}

fn image_attachment() -> Value {
    json!({"kind": "image", "name": "receipt", "data_uri": format!("data:image/png;base64,{PNG_BASE64}")})
}

fn screenshot_attachment() -> Value {
    json!({"kind": "image", "purpose": "screenshot", "data_uri": format!("data:image/gif;base64,{SCREENSHOT_BASE64}")})
}

// ---- Socket.IO -------------------------------------------------------------

/// Sends one `assistant_message` over a raw websocket and returns every
/// `assistant:*` event `(name, payload)` up to and including `status: completed`.
async fn socket_turn(app: &TestApp, body: Value) -> Vec<(String, Value)> {
    let addr: SocketAddr = format!("127.0.0.1:{}", app.port).parse().unwrap();
    actix_web::rt::task::spawn_blocking(move || {
        let mut ws = RawWs::connect(addr, "EIO=4&transport=websocket");
        ws.recv_until(false, |_| true).expect("open packet");
        ws.send_text("40/assistant,");
        ws.recv_until(true, |text| text.starts_with("40/assistant,"))
            .expect("namespace CONNECT reply");
        ws.send_text(&format!(
            "42/assistant,{}",
            json!(["assistant_message", body])
        ));
        let mut events = Vec::new();
        loop {
            let text = ws
                .recv_until(true, |text| text.starts_with("42/assistant,"))
                .expect("the server sends events until status completed");
            let frame: Value = serde_json::from_str(&text["42/assistant,".len()..]).unwrap();
            let name = frame[0].as_str().unwrap().to_string();
            let payload = frame[1].clone();
            let done = name == "assistant:status" && payload["status"] == "completed";
            events.push((name, payload));
            if done {
                return events;
            }
        }
    })
    .await
    .expect("socket thread")
}

fn named<'a>(events: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|(event, _)| event == name)
        .map(|(_, payload)| payload)
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

// ---- models and health -----------------------------------------------------

#[actix_web::test]
async fn models_route_lists_configured_providers_and_the_default_model() {
    let fake = FakeProvider::start();
    let app = spawn_app_with(&[
        ("LLM__PRIMARY_MODEL", "anthropic:claude-test"),
        ("ANTHROPIC_API_KEY", "ak-test"),
        ("ANTHROPIC_BASE_URL", &fake.base_url_anthropic()),
    ])
    .await;
    let (status, models) = app.get("/api/models").await;
    assert_eq!(status, 200);
    assert_eq!(
        models,
        json!({
            "default_model": "anthropic:claude-test",
            "fallback": false,
            "providers": [
                {"name": "builtin", "kind": null, "has_credentials": true, "base_url": null, "models": ["builtin:echo"]},
                {"name": "openai", "kind": "openai", "has_credentials": false, "base_url": "https://api.openai.com/v1", "models": []},
                {"name": "anthropic", "kind": "anthropic", "has_credentials": true, "base_url": fake.base_url_anthropic(), "models": ["anthropic:claude-test"]},
            ]
        })
    );
    assert!(!models.to_string().contains("ak-test"), "no key is shown");
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(health["components"]["model"]["healthy"], true);
    assert_eq!(health["components"]["model"]["detail"], Value::Null);
}

#[actix_web::test]
async fn health_is_503_and_turns_fail_as_provider_auth_when_the_default_provider_has_no_key() {
    let app = spawn_app_with(&[
        ("LLM__PRIMARY_MODEL", "anthropic:claude-test"),
        ("ASSISTANT__REQUEST_MODELS", "builtin:echo,openai:gpt-4o"),
    ])
    .await;
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 503);
    assert_eq!(health["healthy"], false);
    let model = &health["components"]["model"];
    assert_eq!(model["healthy"], false);
    assert_eq!(model["fallback_to_echo"], false);
    assert!(
        model["detail"]
            .as_str()
            .unwrap()
            .contains("`anthropic` has no credentials"),
        "{model}"
    );
    // The host sent nothing wrong: the turn fails like a rejected key, and
    // a request naming a usable model still works on the same session.
    let (status, body) = app.say("nokey", "m1", "hi", None).await;
    assert_eq!(
        (status.as_u16(), &body["type"]),
        (500, &json!("provider_auth"))
    );
    let (status, body) = app
        .post_chat(&json!({"id": "m2", "session_id": "nokey", "content": "hi", "config": {"default_model": "builtin:echo"}}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app
        .post_chat(&json!({"id": "m3", "session_id": "nokey", "content": "hi", "config": {"default_model": "openai:gpt-4o"}}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["type"]),
        (422, &json!("validation"))
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("config.default_model"),
        "{body}"
    );
}

#[actix_web::test]
async fn no_key_at_all_starts_on_echo_and_health_says_so() {
    let app = spawn_app_with(&[]).await;
    let (status, health) = app.get("/health").await;
    assert_eq!(status, 200);
    let model = &health["components"]["model"];
    assert_eq!(model["default_model"], "builtin:echo");
    assert_eq!(model["fallback_to_echo"], true);
    assert!(model["detail"].as_str().unwrap().contains("builtin:echo"));
    let (_, models) = app.get("/api/models").await;
    assert_eq!(
        (&models["default_model"], &models["fallback"]),
        (&json!("builtin:echo"), &json!(true))
    );
}

// ---- streaming: text, thinking, parallel tool calls, usage -----------------

#[actix_web::test]
async fn both_providers_stream_thinking_text_and_parallel_tool_calls_with_usage() {
    for provider in Provider::BOTH {
        let fake = FakeProvider::start();
        let app = spawn_on(&fake, provider, &[]).await;
        let calls = [("call_a", "get_time", "{}"), ("call_b", "get_time", "{}")];
        fake.push(provider.tool_calls(&calls));
        let (priced_model, cost_per_request) = match provider {
            Provider::OpenAi => {
                fake.push(Script::openai_reasoning(
                    &["Let me ", "think."],
                    &["It is ", "noon."],
                ));
                // 9 uncached * 0.15 + 3 cached * 0.075 + 5 out * 0.60, per million.
                ("openai:gpt-4o-mini", 4.575e-6)
            }
            Provider::Anthropic => {
                fake.push(Script::anthropic_thinking(
                    &["Let me ", "think."],
                    "sig-1",
                    &["It is ", "noon."],
                ));
                ("anthropic:claude-sonnet-4-5", 128.7e-6)
            }
        };
        let session = format!("stream-{provider:?}");
        let events = socket_turn(&app, json!({"id": "m1", "session_id": session, "content": "What time is it?",
            "config": {"default_model": priced_model, "thinking_budget": 3000, "temperature": 0.2}})).await;
        let order = names(&events);
        assert_eq!(order.first(), Some(&"assistant:status"), "{order:?}");
        assert_eq!(
            &order[order.len() - 2..],
            ["assistant:final_response", "assistant:status"],
            "{order:?}"
        );
        assert!(named(&events, "assistant:error").is_empty(), "{events:?}");
        let tool_calls = named(&events, "assistant:tool_call");
        assert_eq!(
            tool_calls
                .iter()
                .map(|call| call["call_id"].clone())
                .collect::<Vec<_>>(),
            [json!("call_a"), json!("call_b")]
        );
        assert!(tool_calls.iter().all(|call| call["category"] == "backend"));
        assert_eq!(named(&events, "assistant:tool_result").len(), 2);
        let joined = |name: &str| {
            let deltas = named(&events, name);
            assert!(deltas.len() >= 2, "{name} arrives in pieces: {deltas:?}");
            deltas
                .iter()
                .map(|delta| delta["content"].as_str().unwrap())
                .collect::<String>()
        };
        assert_eq!(joined("assistant:thinking_delta"), "Let me think.");
        assert_eq!(joined("assistant:text_delta"), "It is noon.");
        let final_response = named(&events, "assistant:final_response")[0];
        assert_eq!(final_response["content"], "It is noon.");
        assert_eq!(final_response["model"], priced_model);
        let usage = &final_response["usage"];
        let (input, output) = match provider {
            Provider::OpenAi => (12, 5),
            Provider::Anthropic => (16, 6),
        };
        assert_eq!(
            (
                &usage["input_tokens"],
                &usage["output_tokens"],
                &usage["total_tokens"],
                &usage["requests"],
                &usage["tool_calls"]
            ),
            (
                &json!(2 * input),
                &json!(2 * output),
                &json!(2 * (input + output)),
                &json!(2),
                &json!(2)
            ),
            "{provider:?}"
        );
        let cost = usage["cost_usd"]
            .as_f64()
            .expect("a priced model has a cost");
        assert!((cost - 2.0 * cost_per_request).abs() < 1e-9, "{cost}");

        // What went upstream: the settings in each provider's words, and
        // both calls with both results in the second request.
        let requests = fake.requests();
        assert_eq!(requests.len(), 2);
        let second = &requests[1].body;
        match provider {
            Provider::OpenAi => {
                assert_eq!(requests[0].body["reasoning_effort"], "medium");
                assert_eq!(requests[0].body["temperature"], 0.2);
                let messages = second["messages"].as_array().unwrap();
                assert_eq!(messages.len(), 5, "{second}");
                let ids: Vec<&Value> = messages[2]["tool_calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|call| &call["id"])
                    .collect();
                assert_eq!(ids, [&json!("call_a"), &json!("call_b")]);
                assert_eq!(
                    (&messages[3]["role"], &messages[3]["tool_call_id"]),
                    (&json!("tool"), &json!("call_a"))
                );
                assert_eq!(
                    (&messages[4]["role"], &messages[4]["tool_call_id"]),
                    (&json!("tool"), &json!("call_b"))
                );
            }
            Provider::Anthropic => {
                assert_eq!(
                    requests[0].body["thinking"],
                    json!({"type": "enabled", "budget_tokens": 3000})
                );
                assert!(
                    requests[0].body.get("temperature").is_none(),
                    "no temperature with thinking"
                );
                assert_eq!(requests[0].header("x-api-key"), Some("ak-test"));
                let messages = second["messages"].as_array().unwrap();
                assert_eq!(messages.len(), 3, "{second}");
                let uses: Vec<&Value> = messages[1]["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|block| &block["id"])
                    .collect();
                assert_eq!(uses, [&json!("call_a"), &json!("call_b")]);
                let results: Vec<&Value> = messages[2]["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|block| &block["tool_use_id"])
                    .collect();
                assert_eq!(results, [&json!("call_a"), &json!("call_b")]);
            }
        }

        // Stored in order, with the signature that must be replayed.
        let (_, path) = app.get(&format!("/api/sessions/{session}/messages")).await;
        let segments = path[1]["segments"].as_array().unwrap();
        let kinds: Vec<&Value> = segments.iter().map(|segment| &segment["kind"]).collect();
        assert_eq!(
            kinds,
            [&json!("tool_group"), &json!("thinking"), &json!("text")]
        );
        assert_eq!(path[1]["usage"], *usage);
        if provider == Provider::Anthropic {
            assert_eq!(segments[1]["signature"], "sig-1");
            let (status, _) = app.say(&session, "m2", "thanks", None).await;
            assert_eq!(status, 200);
            let replayed = &fake.requests()[2].body["messages"][3]["content"];
            assert_eq!(
                replayed[0],
                json!({"type": "thinking", "thinking": "Let me think.", "signature": "sig-1"})
            );
        }
    }
}

// ---- the stable prefix and the cache breakpoints ---------------------------

#[actix_web::test]
async fn three_turns_with_a_host_action_and_attachments_keep_a_stable_prefix() {
    for provider in Provider::BOTH {
        let fake = FakeProvider::start();
        let app = spawn_on(&fake, provider, &[]).await;
        let session = format!("prefix-{provider:?}");
        fake.push(provider.tool_calls(&[("call_1", "select_issue", r#"{"number":42}"#)]));
        let (status, first) = app
            .post_chat(
                &json!({"id": "m1", "session_id": session, "content": "Pick the login bug",
                "host_context": tasks_context(), "attachments": [image_attachment()]}),
            )
            .await;
        assert_eq!(status, 200, "{first}");
        assert_eq!(first["pending_tool_call"]["call_id"], "call_1");
        fake.push(provider.text(&["Selected ", "issue 42."]));
        let (status, _) = app
            .continue_call(&session, "m1-result", "call_1", json!({"selected": 42}))
            .await;
        assert_eq!(status, 200);
        fake.push(provider.text(&["It says hello."]));
        let (status, _) = app
            .post_chat(&json!({"id": "m2", "session_id": session, "content": "Summarise these",
                "attachments": [
                    {"kind": "document", "name": "notes.txt", "data_uri": "data:text/plain;base64,aGVsbG8="},
                    {"kind": "text", "name": "memo", "text": "Ship on Friday"}
                ]}))
            .await;
        assert_eq!(status, 200);
        fake.push(provider.text(&["You're welcome."]));
        let (status, _) = app.say(&session, "m3", "Thanks", None).await;
        assert_eq!(status, 200);

        let requests = fake.requests();
        assert_eq!(requests.len(), 4, "{provider:?}");
        for pair in requests.windows(2) {
            let (before, after) = (provider.history(&pair[0]), provider.history(&pair[1]));
            assert!(after.len() > before.len());
            assert_eq!(
                after[..before.len()],
                before[..],
                "{provider:?}: request N+1 begins with request N"
            );
            assert_eq!(
                after[before.len()]["role"],
                "assistant",
                "then N's response"
            );
            assert_eq!(pair[0].body["tools"], pair[1].body["tools"]);
            let system = |request: &RecordedRequest| match provider {
                Provider::OpenAi => request.body["messages"][0].clone(),
                Provider::Anthropic => request.body["system"].clone(),
            };
            assert_eq!(
                system(&pair[0]),
                system(&pair[1]),
                "the system prompt is stable"
            );
        }
        if provider == Provider::Anthropic {
            for (index, request) in requests.iter().enumerate() {
                let n_tools = request.body["tools"].as_array().unwrap().len();
                let messages = request.body["messages"].as_array().unwrap();
                let mut expected = vec!["/system/0".to_string()];
                if messages.len() >= 2 {
                    let history_end = messages.len() - 2;
                    let n_blocks = messages[history_end]["content"].as_array().unwrap().len();
                    expected.push(format!("/messages/{history_end}/content/{}", n_blocks - 1));
                }
                expected.push(format!("/tools/{}", n_tools - 1));
                let mut found = breakpoints(request);
                found.sort();
                expected.sort();
                assert_eq!(
                    found, expected,
                    "request {index}: system, last tool and the history end"
                );
            }
        }
    }
}

// ---- attachments and the screenshot ----------------------------------------

#[actix_web::test]
async fn reference_images_are_native_stored_and_replayed_the_screenshot_only_via_look_at_screen() {
    let chart_url = "https://example.test/chart.png";
    for provider in Provider::BOTH {
        let fake = FakeProvider::start();
        let app = spawn_on(&fake, provider, &[]).await;
        let session = format!("attach-{provider:?}");
        fake.push(provider.tool_calls(&[("look_1", "look_at_screen", "{}")]));
        fake.push(provider.text(&["A chart and a receipt."]));
        let (status, reply) = app
            .post_chat(&json!({"id": "m1", "session_id": session, "content": "What do you see?",
                "attachments": [image_attachment(), {"kind": "image", "url": chart_url}, screenshot_attachment()]}))
            .await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["content"], "A chart and a receipt.");
        fake.push(provider.text(&["Still a chart."]));
        let (status, _) = app.say(&session, "m2", "And now?", None).await;
        assert_eq!(status, 200);

        let requests = fake.requests();
        assert_eq!(requests.len(), 3);
        let body_text = |index: usize| requests[index].body.to_string();
        // The reference images, in the provider's own content format, in the user message.
        let user_content = &requests[0].body["messages"][match provider {
            Provider::OpenAi => 1,
            Provider::Anthropic => 0,
        }]["content"];
        let expected = match provider {
            Provider::OpenAi => json!([
                {"type": "text", "text": "What do you see?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_BASE64}")}},
                {"type": "image_url", "image_url": {"url": chart_url}}
            ]),
            Provider::Anthropic => json!([
                {"type": "text", "text": "What do you see?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}},
                {"type": "image", "source": {"type": "url", "url": chart_url}}
            ]),
        };
        assert_eq!(*user_content, expected, "{provider:?}");
        assert!(
            !body_text(0).contains(SCREENSHOT_BASE64),
            "the screenshot is not in the user message"
        );
        let tool_names: Vec<String> = requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| match provider {
                Provider::OpenAi => tool["function"]["name"].as_str().unwrap().to_string(),
                Provider::Anthropic => tool["name"].as_str().unwrap().to_string(),
            })
            .collect();
        assert!(
            tool_names.contains(&"look_at_screen".to_string()),
            "{tool_names:?}"
        );

        // The screenshot arrives as the result of look_at_screen.
        let messages = requests[1].body["messages"].as_array().unwrap();
        let screenshot = match provider {
            Provider::OpenAi => {
                let tool_message = &messages[messages.len() - 2];
                assert_eq!(
                    (&tool_message["role"], &tool_message["tool_call_id"]),
                    (&json!("tool"), &json!("look_1"))
                );
                messages[messages.len() - 1]["content"][1].clone()
            }
            Provider::Anthropic => {
                let result = &messages[messages.len() - 1]["content"][0];
                assert_eq!(
                    (&result["type"], &result["tool_use_id"]),
                    (&json!("tool_result"), &json!("look_1"))
                );
                result["content"][1].clone()
            }
        };
        let expected = match provider {
            Provider::OpenAi => {
                json!({"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{SCREENSHOT_BASE64}")}})
            }
            Provider::Anthropic => {
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": SCREENSHOT_BASE64}})
            }
        };
        assert_eq!(screenshot, expected, "{provider:?}");

        // Stored: the references, a placeholder for the screenshot; the
        // next turn replays the first and not the second.
        let tree = app.tree(&session).await;
        let stored = tree.to_string();
        assert!(
            !stored.contains(SCREENSHOT_BASE64),
            "the screenshot is never stored"
        );
        assert!(stored.contains(PNG_BASE64) && stored.contains(chart_url));
        let user = tree
            .as_array()
            .unwrap()
            .iter()
            .find(|message| message["id"] == "m1")
            .unwrap();
        assert_eq!(user["attachments"].as_array().unwrap().len(), 2, "{user}");
        let assistant = tree
            .as_array()
            .unwrap()
            .iter()
            .find(|message| message["id"] == "m1:reply")
            .unwrap();
        assert_eq!(
            assistant["segments"][0]["tools"][0]["output"],
            json!({"success": true, "screenshot": "[screenshot shown to the model; not stored]"})
        );
        assert!(body_text(2).contains(PNG_BASE64) && body_text(2).contains(chart_url));
        assert!(
            !body_text(2).contains(SCREENSHOT_BASE64),
            "{provider:?}: not replayed"
        );
    }
}

// ---- the error table -------------------------------------------------------

/// One upstream failure: the scripts it takes (three when it is safe to
/// resend: refused before streaming with 429 or 5xx).
struct FailureCase {
    label: &'static str,
    scripts: Vec<Script>,
    error_type: &'static str,
    retry_allowed: bool,
}

fn failure_cases(provider: Provider) -> Vec<FailureCase> {
    let thrice = |script: Script| vec![script.clone(), script.clone(), script];
    let mut cases = vec![
        FailureCase {
            label: "429",
            scripts: thrice(Script::status(429, "slow down")),
            error_type: "rate_limit",
            retry_allowed: true,
        },
        FailureCase {
            label: "401",
            scripts: vec![Script::status(401, "bad key")],
            error_type: "provider_auth",
            retry_allowed: false,
        },
        FailureCase {
            label: "403",
            scripts: vec![Script::status(403, "forbidden")],
            error_type: "provider_auth",
            retry_allowed: false,
        },
        FailureCase {
            label: "400",
            scripts: vec![Script::status(400, "bad request")],
            error_type: "provider_client_error",
            retry_allowed: false,
        },
        FailureCase {
            label: "404",
            scripts: vec![Script::status(404, "no such model")],
            error_type: "provider_client_error",
            retry_allowed: false,
        },
        FailureCase {
            label: "500",
            scripts: thrice(Script::status(500, "oops")),
            error_type: "provider_error",
            retry_allowed: true,
        },
        FailureCase {
            label: "503",
            scripts: thrice(Script::status(503, "down")),
            error_type: "provider_error",
            retry_allowed: true,
        },
        FailureCase {
            label: "hang",
            // Silence is not resent: the provider may be working on it.
            scripts: vec![Script::Hang],
            error_type: "timeout",
            retry_allowed: true,
        },
    ];
    if provider == Provider::Anthropic {
        let overloaded = Script::AnthropicError {
            error_type: "overloaded_error".into(),
            message: "busy".into(),
        };
        cases.push(FailureCase {
            label: "overloaded event",
            // Streaming had begun: not resent.
            scripts: vec![overloaded],
            error_type: "provider_error",
            retry_allowed: true,
        });
    }
    cases
}

/// Checks a failed turn's events: final_response (error), error, status completed.
fn assert_clean_failure(
    events: &[(String, Value)],
    error_type: &str,
    retry_allowed: bool,
    label: &str,
) {
    let order = names(events);
    assert_eq!(
        &order[order.len() - 3..],
        [
            "assistant:final_response",
            "assistant:error",
            "assistant:status"
        ],
        "{label}: {order:?}"
    );
    let final_response = named(events, "assistant:final_response")[0];
    assert_eq!(
        (&final_response["error"], &final_response["error_type"]),
        (&json!(true), &json!(error_type)),
        "{label}"
    );
    let error = named(events, "assistant:error")[0];
    assert_eq!(
        (
            &error["type"],
            &error["error_type"],
            &error["retry_allowed"],
            &error["terminal"]
        ),
        (
            &json!("error"),
            &json!(error_type),
            &json!(retry_allowed),
            &json!(true)
        ),
        "{label}: {error}"
    );
}

#[actix_web::test]
async fn each_upstream_failure_gives_its_error_type_a_clean_end_and_a_usable_session() {
    for provider in Provider::BOTH {
        let fake = FakeProvider::start();
        let app = spawn_on(&fake, provider, &[("LLM__REQUEST_TIMEOUT_SECONDS", "1")]).await;
        for (index, case) in failure_cases(provider).into_iter().enumerate() {
            let label = format!("{provider:?} {}", case.label);
            let session = format!("fail-{provider:?}-{index}");
            let n_before = fake.requests().len();
            let n_attempts = case.scripts.len();
            for script in case.scripts.iter().cloned() {
                fake.push(script);
            }
            let events = socket_turn(
                &app,
                json!({"id": "m1", "session_id": session, "content": "hi"}),
            )
            .await;
            assert_clean_failure(&events, case.error_type, case.retry_allowed, &label);
            assert_eq!(
                fake.requests().len() - n_before,
                n_attempts,
                "{label}: resent only when safe"
            );
            // Over HTTP the same failure is a 500 whose type is the error_type.
            if case.label != "hang" {
                for script in case.scripts.iter().cloned() {
                    fake.push(script);
                }
                let (status, body) = app.say(&session, "m2", "again", None).await;
                assert_eq!(
                    (status.as_u16(), &body["type"]),
                    (500, &json!(case.error_type)),
                    "{label}: {body}"
                );
            }
            // The session answers the next message, and kept the failed reply.
            let (status, body) = app.say(&session, "m3", "and now?", None).await;
            assert_eq!(
                (status.as_u16(), &body["content"]),
                (200, &json!(DEFAULT_REPLY)),
                "{label}: {body}"
            );
            let (_, path) = app.get(&format!("/api/sessions/{session}/tree")).await;
            let failed = path
                .as_array()
                .unwrap()
                .iter()
                .find(|message| message["id"] == "m1:reply")
                .unwrap();
            assert_eq!(failed["error_type"], case.error_type, "{label}");
        }
    }
}

#[actix_web::test]
async fn refused_connection_and_a_stall_after_output_end_the_turn_cleanly() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let app = spawn_app_with(&[
        ("LLM__PRIMARY_MODEL", "openai:gpt-test"),
        ("OPENAI_BASE_URL", &closed_url),
        ("OPENAI_API_KEY", "sk-test"),
        ("LLM__RETRY_BACKOFF_MS", "10"),
        ("ASSISTANT__REQUEST_MODELS", "builtin:echo"),
    ])
    .await;
    let events = socket_turn(
        &app,
        json!({"id": "m1", "session_id": "refused", "content": "hi"}),
    )
    .await;
    assert_clean_failure(&events, "connection_error", true, "refused");
    let (status, body) = app
        .post_chat(&json!({"id": "m2", "session_id": "refused", "content": "hi", "config": {"default_model": "builtin:echo"}}))
        .await;
    assert_eq!(
        status, 200,
        "the session still answers on another model: {body}"
    );

    // Output already shown is kept, and not repeated by a retry.
    let fake = FakeProvider::start();
    let app = spawn_on(
        &fake,
        Provider::OpenAi,
        &[("LLM__REQUEST_TIMEOUT_SECONDS", "1")],
    )
    .await;
    fake.push(Script::OpenAiStall(vec![
        "partial ".into(),
        "answer".into(),
    ]));
    let events = socket_turn(
        &app,
        json!({"id": "m1", "session_id": "stall", "content": "hi"}),
    )
    .await;
    assert_clean_failure(&events, "timeout", true, "stall");
    assert_eq!(
        named(&events, "assistant:final_response")[0]["content"],
        "partial answer"
    );
    assert_eq!(fake.requests().len(), 1);
    let (status, body) = app.say("stall", "m2", "again", None).await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!(DEFAULT_REPLY))
    );
    let history = Provider::OpenAi.history(&fake.requests()[1]);
    assert_eq!(
        history[1],
        json!({"role": "assistant", "content": "partial answer"}),
        "the partial reply is replayed"
    );
}

// ---- budgets and per-request configuration ---------------------------------

#[actix_web::test]
async fn budgets_end_the_turn_as_usage_limit_with_a_saved_partial_message() {
    let fake = FakeProvider::start();
    // A tool_calls budget of 1 against two parallel calls: neither runs.
    let app = spawn_on(
        &fake,
        Provider::OpenAi,
        &[("ASSISTANT__BUDGET__TOOL_CALLS", "1")],
    )
    .await;
    fake.push(Script::openai_tool_calls(&[
        ("a", "get_time", "{}"),
        ("b", "get_time", "{}"),
    ]));
    let (status, body) = app.say("budget-tools", "m1", "time?", None).await;
    assert_eq!(
        (status.as_u16(), &body["error_type"]),
        (200, &json!("usage_limit")),
        "{body}"
    );
    assert_eq!(
        (&body["usage"]["requests"], &body["usage"]["tool_calls"]),
        (&json!(1), &json!(2))
    );
    let (_, path) = app.get("/api/sessions/budget-tools/messages").await;
    let tools = &path[1]["segments"][0]["tools"];
    assert_eq!(
        (&tools[0]["status"], &tools[1]["status"]),
        (&json!("cancelled"), &json!("cancelled"))
    );
    assert_eq!(path[1]["error_type"], "usage_limit");

    // Each token budget, reached by the first request (12 in, 5 out), stops the second.
    for (key, limit) in [
        ("ASSISTANT__BUDGET__INPUT_TOKENS", "12"),
        ("ASSISTANT__BUDGET__OUTPUT_TOKENS", "5"),
        ("ASSISTANT__BUDGET__TOTAL_TOKENS", "17"),
    ] {
        let fake = FakeProvider::start();
        let app = spawn_on(&fake, Provider::OpenAi, &[(key, limit)]).await;
        fake.push(Script::openai_tool_calls(&[("a", "get_time", "{}")]));
        let (status, body) = app.say("budget-tokens", "m1", "time?", None).await;
        assert_eq!(
            (status.as_u16(), &body["error_type"]),
            (200, &json!("usage_limit")),
            "{key}: {body}"
        );
        assert_eq!(fake.requests().len(), 1, "{key}");
        let (_, path) = app.get("/api/sessions/budget-tokens/messages").await;
        let tool = &path[1]["segments"][0]["tools"][0];
        assert_eq!(
            tool["outcome"], "success",
            "{key}: the completed call is kept"
        );
        assert_eq!(path[1]["usage"]["total_tokens"], 17);
    }
}

#[actix_web::test]
async fn request_config_only_lowers_ceilings_and_picks_the_provider() {
    let fake = FakeProvider::start();
    let app = spawn_on(
        &fake,
        Provider::OpenAi,
        &[
            ("ASSISTANT__MAX_TURNS", "2"),
            ("ASSISTANT__THINKING_BUDGET", "4000"),
        ],
    )
    .await;
    // max_turns 5 cannot raise the ceiling of 2.
    for _ in 0..3 {
        fake.push(Script::openai_tool_calls(&[("a", "get_time", "{}")]));
    }
    let (status, body) = app
        .post_chat(&json!({"id": "m1", "session_id": "config", "content": "loop", "config": {"max_turns": 5, "thinking_budget": 8000}}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["error_type"]),
        (200, &json!("usage_limit")),
        "{body}"
    );
    assert_eq!(body["usage"]["requests"], 2);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body["reasoning_effort"], "medium",
        "8000 asked, 4000 allowed"
    );
    // The same session moves to Anthropic for one request, with a lower budget.
    fake.discard_scripts();
    fake.push(Script::anthropic_text(&["ok"]));
    let (status, body) = app
        .post_chat(&json!({"id": "m2", "session_id": "config", "content": "switch",
            "config": {"default_model": "anthropic:claude-test", "thinking_budget": 2000, "max_turns": 1}}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["model"]),
        (200, &json!("anthropic:claude-test")),
        "{body}"
    );
    let last = fake.requests().pop().unwrap();
    assert_eq!(last.path, "/v1/messages");
    assert_eq!(last.body["thinking"]["budget_tokens"], 2000);
    assert_eq!(last.body["model"], "claude-test");
}

#[actix_web::test]
async fn limits_count_each_run_so_a_continuation_still_reaches_the_model() {
    let fake = FakeProvider::start();
    let app = spawn_on(&fake, Provider::OpenAi, &[("ASSISTANT__MAX_TURNS", "1")]).await;
    fake.push(Script::openai_tool_calls(&[(
        "call_1",
        "select_issue",
        r#"{"number":42}"#,
    )]));
    let (status, body) = app
        .say("per-run", "m1", "pick", Some(tasks_context()))
        .await;
    assert_eq!(
        (status.as_u16(), &body["pending_tool_call"]["call_id"]),
        (200, &json!("call_1")),
        "{body}"
    );
    fake.push(Script::openai_text(&["Done."]));
    let (status, body) = app
        .continue_call("per-run", "m1-result", "call_1", json!({"ok": true}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("Done.")),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 2);
    // The message's usage still sums both runs.
    assert_eq!(body["usage"]["requests"], 2);
}
