//! OpenTelemetry export of turns: with `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! every finished turn's trace (`actors::trace`) becomes spans following the
//! GenAI semantic conventions (`invoke_agent` for the turn, `chat` per model
//! request, `execute_tool` per tool call), sent over OTLP/HTTP protobuf to
//! `<endpoint>/v1/traces`.
//!
//! The spans are made from the finished record, with its recorded times, so
//! nothing OpenTelemetry runs during a turn. The session actor only queues
//! them (a bounded queue; a full one drops the turn's spans and says so in
//! the log); one thread of its own batches and exports them with the
//! `opentelemetry-otlp` exporter over the workspace's async reqwest client.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actors::conversation::ToolCategory;
use actors::trace::{FinishedTrace, TraceEvent, TraceObserver};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tokio::sync::mpsc;

use crate::settings::Settings;

/// Turns waiting for export at most; past it a turn's spans are dropped,
/// never the turn slowed.
const QUEUE_TURNS: usize = 1024;
/// Spans sent in one export request at most.
const MAX_BATCH_SPANS: usize = 512;
/// How long one export may take before it counts as failed.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The observer the session actors report turns to, when an endpoint is set.
pub fn observer(settings: &Settings) -> Option<Arc<dyn TraceObserver>> {
    let endpoint = settings.otlp_endpoint.as_deref()?;
    match OtlpObserver::start(endpoint, &settings.otel_service_name) {
        Ok(observer) => {
            log::info!("exporting turn spans over OTLP/HTTP to {endpoint}/v1/traces");
            Some(Arc::new(observer))
        }
        Err(error) => {
            log::warn!("OTLP export to {endpoint} is off: {error}");
            None
        }
    }
}

/// Queues each turn's spans for the exporter thread.
struct OtlpObserver {
    sender: mpsc::Sender<Vec<SpanData>>,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
    n_dropped: AtomicU64,
}

impl OtlpObserver {
    fn start(endpoint: &str, service_name: &str) -> Result<OtlpObserver, String> {
        let (sender, receiver) = mpsc::channel(QUEUE_TURNS);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("cannot start the exporter's runtime: {error}"))?;
        let url = format!("{endpoint}/v1/traces");
        let resource = Resource::builder_empty()
            .with_service_name(service_name.to_string())
            .build();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || runtime.block_on(export_loop(receiver, url, resource)))
            .map_err(|error| format!("cannot start the exporter thread: {error}"))?;
        Ok(OtlpObserver {
            sender,
            scope: InstrumentationScope::builder("assistant-runtime")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            ids: RandomIdGenerator::default(),
            n_dropped: AtomicU64::new(0),
        })
    }
}

impl TraceObserver for OtlpObserver {
    fn turn_finished(&self, trace: &FinishedTrace) {
        let spans = spans(trace, &self.scope, &self.ids);
        if self.sender.try_send(spans).is_err() {
            let n_dropped = self.n_dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // The first drop, then one line per thousand.
            if n_dropped % 1000 == 1 {
                log::warn!("OTLP export queue full: {n_dropped} turn(s) not exported");
            }
        }
    }
}

/// Exports what is queued, a batch at a time, until every sender is gone.
async fn export_loop(mut receiver: mpsc::Receiver<Vec<SpanData>>, url: String, resource: Resource) {
    let client = match actors::model::tls::client_builder(&[]).build() {
        Ok(client) => client,
        Err(error) => {
            log::warn!("OTLP export is off: no HTTP client ({error})");
            return;
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build();
    let mut exporter = match exporter {
        Ok(exporter) => exporter,
        Err(error) => {
            log::warn!("OTLP export is off: {error}");
            return;
        }
    };
    exporter.set_resource(&resource);
    let mut n_failures: u64 = 0;
    while let Some(mut batch) = receiver.recv().await {
        while batch.len() < MAX_BATCH_SPANS {
            match receiver.try_recv() {
                Ok(spans) => batch.extend(spans),
                Err(_) => break,
            }
        }
        if let Err(error) = exporter.export(batch).await {
            n_failures += 1;
            if n_failures % 100 == 1 {
                log::warn!("OTLP export to {url} failed ({n_failures} so far): {error}");
            }
        }
    }
    let _ = exporter.shutdown();
}

/// The turn's spans: the turn, and under it each model request and tool call.
fn spans(
    trace: &FinishedTrace,
    scope: &InstrumentationScope,
    ids: &RandomIdGenerator,
) -> Vec<SpanData> {
    let turn = &trace.turn;
    let trace_id = TraceId::from_hex(&trace.id).unwrap_or_else(|_| ids.new_trace_id());
    let turn_span_id = ids.new_span_id();
    let at = |offset: Duration| turn.started_at + offset;
    let (provider, model) = split_model(&turn.model);
    let conversation = KeyValue::new("gen_ai.conversation.id", trace.session_id.to_string());
    let mut spans = Vec::with_capacity(turn.events.len() + 1);
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    for event in &turn.events {
        match event {
            TraceEvent::ModelRequest(request) => {
                input_tokens += request.tokens.input_tokens;
                output_tokens += request.tokens.output_tokens;
                let mut attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new("gen_ai.provider.name", provider.to_string()),
                    KeyValue::new("gen_ai.request.model", model.to_string()),
                    KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        request.tokens.input_tokens as i64,
                    ),
                    KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        request.tokens.output_tokens as i64,
                    ),
                    conversation.clone(),
                ];
                if let Some(first) = request.time_to_first_token {
                    attributes.push(KeyValue::new(
                        "assistant_runtime.time_to_first_token",
                        first.as_secs_f64(),
                    ));
                }
                let status = match request.error {
                    Some(error_type) => {
                        attributes.push(KeyValue::new("error.type", error_type));
                        Status::error(error_type)
                    }
                    None => Status::Unset,
                };
                spans.push(span(
                    SpanIds {
                        trace_id,
                        span_id: ids.new_span_id(),
                        parent: turn_span_id,
                    },
                    format!("chat {model}"),
                    SpanKind::Client,
                    (at(request.at), at(request.at + request.duration)),
                    attributes,
                    status,
                    scope,
                ));
            }
            TraceEvent::ToolCall(call) => {
                let mut attributes = vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", call.name.clone()),
                    KeyValue::new("gen_ai.tool.call.id", call.call_id.clone()),
                    KeyValue::new("gen_ai.tool.type", "function"),
                    KeyValue::new(
                        "assistant_runtime.tool.category",
                        actors::trace::category(call.category),
                    ),
                    KeyValue::new("assistant_runtime.tool.outcome", call.outcome),
                    conversation.clone(),
                ];
                let status = match call.outcome {
                    "failed" | "invalid" | "cancelled" => {
                        attributes.push(KeyValue::new("error.type", call.outcome));
                        Status::error(call.outcome)
                    }
                    _ => Status::Unset,
                };
                let name = match call.category {
                    ToolCategory::Host => format!("execute_tool {} (host)", call.name),
                    _ => format!("execute_tool {}", call.name),
                };
                spans.push(span(
                    SpanIds {
                        trace_id,
                        span_id: ids.new_span_id(),
                        parent: turn_span_id,
                    },
                    name,
                    SpanKind::Internal,
                    (at(call.at), at(call.at + call.duration)),
                    attributes,
                    status,
                    scope,
                ));
            }
            TraceEvent::Steering { .. } => {}
        }
    }
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
        KeyValue::new("gen_ai.agent.name", "assistant-runtime"),
        KeyValue::new("gen_ai.provider.name", provider.to_string()),
        KeyValue::new("gen_ai.request.model", model.to_string()),
        KeyValue::new("gen_ai.usage.input_tokens", input_tokens as i64),
        KeyValue::new("gen_ai.usage.output_tokens", output_tokens as i64),
        conversation,
        KeyValue::new("assistant_runtime.turn.outcome", trace.outcome),
        KeyValue::new(
            "assistant_runtime.turn.is_continuation",
            turn.is_continuation,
        ),
    ];
    let status = match trace.error_type {
        Some(error_type) => {
            attributes.push(KeyValue::new("error.type", error_type.as_str()));
            Status::error(error_type.as_str())
        }
        None => Status::Ok,
    };
    spans.push(span(
        SpanIds {
            trace_id,
            span_id: turn_span_id,
            parent: SpanId::INVALID,
        },
        "invoke_agent assistant-runtime".to_string(),
        SpanKind::Internal,
        (turn.started_at, at(trace.duration)),
        attributes,
        status,
        scope,
    ));
    spans
}

/// `openai:gpt-4o` as (`openai`, `gpt-4o`).
fn split_model(model: &str) -> (&str, &str) {
    model.split_once(':').unwrap_or(("unknown", model))
}

struct SpanIds {
    trace_id: TraceId,
    span_id: SpanId,
    /// `SpanId::INVALID` for the turn, the root.
    parent: SpanId,
}

fn span(
    ids: SpanIds,
    name: String,
    span_kind: SpanKind,
    (start_time, end_time): (SystemTime, SystemTime),
    attributes: Vec<KeyValue>,
    status: Status,
    scope: &InstrumentationScope,
) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            ids.trace_id,
            ids.span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: ids.parent,
        parent_span_is_remote: false,
        span_kind,
        name: Cow::Owned(name),
        start_time,
        end_time,
        attributes,
        dropped_attributes_count: 0,
        events: Default::default(),
        links: Default::default(),
        status,
        instrumentation_scope: scope.clone(),
    }
}
