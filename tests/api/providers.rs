//! Adapter tests over real HTTP: `OpenAiModel`, `AnthropicModel`, the retry
//! and `ModelProviders`, each against the loopback `FakeProvider`.

use std::sync::Arc;
use std::time::Duration;

use actors::model::anthropic::AnthropicModel;
use actors::model::openai::OpenAiModel;
use actors::model::providers::{ModelProviders, ProviderConfig, ProviderKind, ProviderSettings};
use actors::model::retry::{RetryPolicy, RetryingModel};
use actors::model::{
    build_http_client, AssistantPart, ChatItem, ContentPart, MediaSource, ModelClient, ModelError,
    ModelErrorKind, ModelEvent, ModelId, ModelRequest, ModelSettings, ToolResultItem, ToolSpec,
};
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::fake_provider::{FakeProvider, Script, ANTHROPIC_USAGE, DEFAULT_REPLY, OPENAI_USAGE};

/// Short enough to keep timeout tests fast, long enough for a loaded machine
/// to answer a loopback request that is not meant to hang.
const TEST_IDLE_TIMEOUT: Duration = Duration::from_millis(1500);

fn openai(fake: &FakeProvider) -> OpenAiModel {
    OpenAiModel::new(
        build_http_client(),
        Some(fake.base_url_openai()),
        Some("sk-test".into()),
        "gpt-test",
    )
    .with_idle_timeout(TEST_IDLE_TIMEOUT)
}

fn anthropic(fake: &FakeProvider) -> AnthropicModel {
    AnthropicModel::new(
        build_http_client(),
        Some(fake.base_url_anthropic()),
        Some("ak-test".into()),
        "claude-test",
    )
    .with_idle_timeout(TEST_IDLE_TIMEOUT)
}

fn request(provider: &str, messages: Vec<ChatItem>) -> ModelRequest {
    ModelRequest {
        model: ModelId::parse(&format!("{provider}:test")).unwrap(),
        system: "You are terse.".into(),
        messages: messages.into(),
        tools: vec![],
        settings: ModelSettings::default(),
        purpose: Default::default(),
    }
}

fn user(text: &str) -> ChatItem {
    ChatItem::User(vec![ContentPart::Text(text.into())])
}

async fn collect(
    model: &dyn ModelClient,
    request: ModelRequest,
) -> Vec<Result<ModelEvent, ModelError>> {
    model.stream(request).collect().await
}

/// The text deltas joined, checking there was more than one when `min_deltas` says so.
fn text_of(events: &[Result<ModelEvent, ModelError>]) -> (String, usize) {
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (deltas.concat(), deltas.len())
}

fn error_kind(events: &[Result<ModelEvent, ModelError>]) -> Option<ModelErrorKind> {
    events.last()?.as_ref().err().map(|error| error.kind)
}

#[tokio::test]
async fn openai_text_streams_as_deltas_then_usage() {
    let fake = FakeProvider::start();
    fake.push(Script::openai_text(&["Hel", "lo"]));
    let events = collect(&openai(&fake), request("openai", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::TextDelta("Hel".into())),
            Ok(ModelEvent::TextDelta("lo".into())),
            Ok(ModelEvent::Usage(OPENAI_USAGE)),
        ]
    );
}

#[tokio::test]
async fn openai_reasoning_content_becomes_thinking_deltas() {
    let fake = FakeProvider::start();
    fake.push(Script::openai_reasoning(&["Let me ", "think."], &["Done."]));
    let events = collect(&openai(&fake), request("openai", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ThinkingDelta("Let me ".into())),
            Ok(ModelEvent::ThinkingDelta("think.".into())),
            Ok(ModelEvent::TextDelta("Done.".into())),
            Ok(ModelEvent::Usage(OPENAI_USAGE)),
        ]
    );
}

#[tokio::test]
async fn openai_parallel_tool_calls_arrive_whole_in_index_order() {
    let fake = FakeProvider::start();
    fake.push(Script::openai_tool_calls(&[
        ("call_a", "get_weather", r#"{"city":"Paris","unit":"c"}"#),
        ("call_b", "get_time", r#"{"zone":"UTC"}"#),
    ]));
    let events = collect(&openai(&fake), request("openai", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ToolCall {
                id: "call_a".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris","unit":"c"}"#.into()
            }),
            Ok(ModelEvent::ToolCall {
                id: "call_b".into(),
                name: "get_time".into(),
                arguments: r#"{"zone":"UTC"}"#.into()
            }),
            Ok(ModelEvent::Usage(OPENAI_USAGE)),
        ]
    );
}

#[tokio::test]
async fn openai_request_carries_auth_tools_images_and_tool_results() {
    let fake = FakeProvider::start();
    let image = MediaSource::Base64 {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let mut model_request = request(
        "openai",
        vec![
            ChatItem::User(vec![
                ContentPart::Text("what is this?".into()),
                ContentPart::Image(MediaSource::Url("https://example.com/a.png".into())),
            ]),
            ChatItem::Assistant(vec![
                AssistantPart::Text("Let me look.".into()),
                AssistantPart::ToolCall {
                    id: "call_1".into(),
                    name: "look_at_screen".into(),
                    arguments: json!({}),
                },
            ]),
            ChatItem::ToolResult(ToolResultItem {
                call_id: "call_1".into(),
                tool_name: "look_at_screen".into(),
                content: vec![
                    ContentPart::Text(r#"{"success":true}"#.into()),
                    ContentPart::Image(image),
                ],
                is_error: false,
            }),
        ],
    );
    model_request.tools = vec![ToolSpec {
        name: "look_at_screen".into(),
        description: "See the screen".into(),
        parameters: json!({"type": "object", "properties": {}}).into(),
    }];
    model_request.settings = ModelSettings {
        temperature: Some(0.2),
        thinking_budget: Some(4000),
        max_output_tokens: None,
    };
    let events = collect(&openai(&fake), model_request).await;
    assert_eq!(text_of(&events).0, DEFAULT_REPLY);

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let recorded = &requests[0];
    assert_eq!(recorded.path, "/chat/completions");
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    let body = &recorded.body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["reasoning_effort"], "medium");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "look_at_screen", "description": "See the screen",
            "parameters": {"type": "object", "properties": {}}
        }}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
            ]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look_at_screen", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1",
             "content": "{\"success\":true}\n(attachments follow in the next user message)"},
            {"role": "user", "content": [
                {"type": "text", "text": "Attachments returned by tool look_at_screen (call call_1):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]}
        ])
    );
}

#[tokio::test]
async fn openai_without_key_sends_no_authorization_and_omits_empty_tools() {
    let fake = FakeProvider::start();
    let mut model = openai(&fake);
    model.api_key = None;
    collect(&model, request("openai", vec![user("hi")])).await;
    let recorded = &fake.requests()[0];
    assert_eq!(recorded.header("authorization"), None);
    assert!(recorded.body.get("tools").is_none());
    assert!(recorded.body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn anthropic_text_streams_as_deltas_then_usage() {
    let fake = FakeProvider::start();
    fake.push(Script::anthropic_text(&["Hel", "lo"]));
    let events = collect(&anthropic(&fake), request("anthropic", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::TextDelta("Hel".into())),
            Ok(ModelEvent::TextDelta("lo".into())),
            Ok(ModelEvent::Usage(ANTHROPIC_USAGE)),
        ]
    );
}

#[tokio::test]
async fn anthropic_thinking_streams_with_its_signature() {
    let fake = FakeProvider::start();
    fake.push(Script::anthropic_thinking(
        &["Hmm", "..."],
        "sig-1",
        &["Yes."],
    ));
    let events = collect(&anthropic(&fake), request("anthropic", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ThinkingDelta("Hmm".into())),
            Ok(ModelEvent::ThinkingDelta("...".into())),
            Ok(ModelEvent::ThinkingSignature("sig-1".into())),
            Ok(ModelEvent::TextDelta("Yes.".into())),
            Ok(ModelEvent::Usage(ANTHROPIC_USAGE)),
        ]
    );
}

#[tokio::test]
async fn anthropic_tool_use_input_is_assembled_from_pieces() {
    let fake = FakeProvider::start();
    fake.push(Script::anthropic_tool_use(&[
        ("toolu_1", "get_weather", r#"{"city":"Paris"}"#),
        ("toolu_2", "get_time", ""),
    ]));
    let events = collect(&anthropic(&fake), request("anthropic", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ToolCall {
                id: "toolu_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into()
            }),
            Ok(ModelEvent::ToolCall {
                id: "toolu_2".into(),
                name: "get_time".into(),
                arguments: "{}".into()
            }),
            Ok(ModelEvent::Usage(ANTHROPIC_USAGE)),
        ]
    );
}

#[tokio::test]
async fn anthropic_request_over_three_turns_marks_cache_breakpoints() {
    let fake = FakeProvider::start();
    let image = MediaSource::Base64 {
        media_type: "image/jpeg".into(),
        data: "/9j/4AAQ".into(),
    };
    let mut model_request = request(
        "anthropic",
        vec![
            ChatItem::User(vec![
                ContentPart::Text("turn one".into()),
                ContentPart::Image(image.clone()),
            ]),
            ChatItem::Assistant(vec![AssistantPart::Text("answer one".into())]),
            user("turn two"),
            ChatItem::Assistant(vec![
                AssistantPart::Thinking {
                    text: "pondering".into(),
                    signature: Some("sig".into()),
                },
                AssistantPart::ToolCall {
                    id: "toolu_1".into(),
                    name: "look".into(),
                    arguments: json!({"x": 1}),
                },
            ]),
            ChatItem::ToolResult(ToolResultItem {
                call_id: "toolu_1".into(),
                tool_name: "look".into(),
                content: vec![ContentPart::Text("seen".into()), ContentPart::Image(image)],
                is_error: true,
            }),
            ChatItem::Assistant(vec![AssistantPart::Text("answer two".into())]),
            user("turn three"),
        ],
    );
    let tool = |name: &'static str| ToolSpec {
        name: name.into(),
        description: format!("{name} tool").into(),
        parameters: json!({"type": "object"}).into(),
    };
    model_request.tools = vec![tool("look"), tool("search")];
    model_request.settings.temperature = Some(0.3);
    collect(&anthropic(&fake), model_request).await;

    let recorded = &fake.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("ak-test"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    let body = &recorded.body;
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.3);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tools"],
        json!([
            {"name": "look", "description": "look tool", "input_schema": {"type": "object"}},
            {"name": "search", "description": "search tool", "input_schema": {"type": "object"},
             "cache_control": {"type": "ephemeral"}}
        ])
    );
    let jpeg = json!({"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"});
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "turn one"},
                {"type": "image", "source": jpeg}
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "answer one"}]},
            {"role": "user", "content": [{"type": "text", "text": "turn two"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "pondering", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"x": 1}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "seen"},
                    {"type": "image", "source": jpeg}
                ], "is_error": true}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "answer two", "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "user", "content": [{"type": "text", "text": "turn three"}]}
        ])
    );
    let n_breakpoints = body.to_string().matches("cache_control").count();
    assert_eq!(n_breakpoints, 3);
}

#[tokio::test]
async fn anthropic_error_event_mid_stream_maps_to_its_kind() {
    let fake = FakeProvider::start();
    let check = |error_type: &str| Script::AnthropicError {
        error_type: error_type.into(),
        message: "try later".into(),
    };
    fake.push(check("overloaded_error"));
    fake.push(check("rate_limit_error"));
    let model = anthropic(&fake);
    let events = collect(&model, request("anthropic", vec![user("hi")])).await;
    assert_eq!(error_kind(&events), Some(ModelErrorKind::ProviderError));
    assert!(events[0]
        .as_ref()
        .unwrap_err()
        .message
        .contains("try later"));
    let events = collect(&model, request("anthropic", vec![user("hi")])).await;
    assert_eq!(error_kind(&events), Some(ModelErrorKind::RateLimit));
}

#[tokio::test]
async fn error_statuses_map_to_error_kinds_for_both_providers() {
    let cases = [
        (429, ModelErrorKind::RateLimit),
        (401, ModelErrorKind::ProviderAuth),
        (403, ModelErrorKind::ProviderAuth),
        (400, ModelErrorKind::ProviderClientError),
        (404, ModelErrorKind::ProviderClientError),
        (500, ModelErrorKind::ProviderError),
        (529, ModelErrorKind::ProviderError),
    ];
    let fake = FakeProvider::start();
    let models: [(&str, Box<dyn ModelClient>); 2] = [
        ("openai", Box::new(openai(&fake))),
        ("anthropic", Box::new(anthropic(&fake))),
    ];
    for (provider, model) in &models {
        for (status, kind) in cases {
            fake.push(Script::status(status, "the provider's reason"));
            let events = collect(model.as_ref(), request(provider, vec![user("hi")])).await;
            assert_eq!(events.len(), 1, "{provider} {status}");
            let error = events[0].as_ref().unwrap_err();
            assert_eq!(error.kind, kind, "{provider} {status}");
            assert!(
                error.message.contains("the provider's reason"),
                "{provider} {status}: {}",
                error.message
            );
        }
    }
}

#[tokio::test]
async fn rate_limit_is_retried_then_succeeds() {
    let fake = FakeProvider::start();
    fake.push(Script::status(429, "slow down"));
    fake.push(Script::openai_text(&["ok"]));
    let model = RetryingModel::new(Arc::new(openai(&fake)), quick_retry());
    let events = collect(&model, request("openai", vec![user("hi")])).await;
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::TextDelta("ok".into())),
            Ok(ModelEvent::Usage(OPENAI_USAGE))
        ]
    );
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.requests()[0].body, fake.requests()[1].body);
}

#[tokio::test]
async fn auth_failure_is_not_retried() {
    let fake = FakeProvider::start();
    fake.push(Script::status(401, "bad key"));
    let model = RetryingModel::new(Arc::new(anthropic(&fake)), quick_retry());
    let events = collect(&model, request("anthropic", vec![user("hi")])).await;
    assert_eq!(error_kind(&events), Some(ModelErrorKind::ProviderAuth));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn provider_that_never_answers_times_out() {
    let fake = FakeProvider::start();
    fake.push(Script::Hang);
    let model = openai(&fake).with_idle_timeout(Duration::from_millis(200));
    let events = collect(&model, request("openai", vec![user("hi")])).await;
    assert_eq!(events.len(), 1);
    assert_eq!(error_kind(&events), Some(ModelErrorKind::Timeout));
}

#[tokio::test]
async fn stream_that_stalls_mid_way_times_out_after_its_text() {
    let fake = FakeProvider::start();
    fake.push(Script::OpenAiStall(vec!["partial".into()]));
    let model = openai(&fake).with_idle_timeout(Duration::from_millis(300));
    let events = collect(&model, request("openai", vec![user("hi")])).await;
    assert_eq!(text_of(&events).0, "partial");
    assert_eq!(error_kind(&events), Some(ModelErrorKind::Timeout));
}

#[tokio::test]
async fn closed_port_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let model = OpenAiModel::new(
        build_http_client(),
        Some(format!("http://{address}")),
        None,
        "gpt-test",
    );
    let events = collect(&model, request("openai", vec![user("hi")])).await;
    assert_eq!(events.len(), 1);
    assert_eq!(error_kind(&events), Some(ModelErrorKind::ConnectionError));
}

#[tokio::test]
async fn providers_route_model_ids_to_the_configured_endpoints() {
    let fake = FakeProvider::start();
    let mut openai = ProviderConfig::new("openai", ProviderKind::OpenAi);
    openai.base_url = Some(fake.base_url_openai());
    let mut anthropic = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    anthropic.api_key = Some("ak-test".into());
    anthropic.base_url = Some(fake.base_url_anthropic());
    let providers = ModelProviders::new(ProviderSettings {
        providers: vec![openai, anthropic],
        request_timeout: TEST_IDLE_TIMEOUT,
        retry: quick_retry(),
        ..ProviderSettings::default()
    });
    for id in ["openai:gpt-local", "anthropic:claude-x"] {
        let model_id = ModelId::parse(id).unwrap();
        let client = providers.client_for(&model_id).unwrap();
        let events = collect(
            client.as_ref(),
            request(model_id.provider(), vec![user("hi")]),
        )
        .await;
        assert_eq!(text_of(&events).0, DEFAULT_REPLY, "{id}");
    }
    let requests = fake.requests();
    assert_eq!(requests[0].path, "/chat/completions");
    assert_eq!(requests[0].body["model"], "gpt-local");
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].body["model"], "claude-x");
    let value: Value = requests[1].body["messages"].clone();
    assert_eq!(
        value,
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
}

fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        base_backoff: Duration::from_millis(10),
        ..RetryPolicy::default()
    }
}
