//! Streaming one model response into the assistant message: text and
//! thinking deltas (forwarded to the sink unless silent), tool calls as sent,
//! and the provider's token counts.

use futures_util::StreamExt;

use super::tools::RawCall;
use super::{CancelToken, TurnPlan};
use crate::conversation::{Message, Segment};
use crate::events::{DeltaEvent, EventSink, TurnEvent};
use crate::model::{ModelError, ModelEvent, ModelRequest, TokenUsage};

pub(super) struct Response {
    pub(super) calls: Vec<RawCall>,
    /// Summed over the response's `Usage` events (normally one, at the end).
    pub(super) tokens: TokenUsage,
    pub(super) cancelled: bool,
    pub(super) error: Option<ModelError>,
}

/// Streams one model response into `assistant`, forwarding deltas to `sink`.
pub(super) async fn stream_response(
    plan: &TurnPlan,
    request: ModelRequest,
    assistant: &mut Message,
    sink: &EventSink,
    cancel: &mut CancelToken,
    silent: bool,
) -> Response {
    // Providers report usage at the end of a response; a cancel drops the
    // stream before that, so the turn keeps its own count to fall back on.
    let input_estimate = request.estimated_input_tokens();
    let mut streamed_chars = 0usize;
    let mut stream = plan.model.stream(request);
    let first_segment = assistant.segments.len();
    let mut response = Response {
        calls: Vec::new(),
        tokens: TokenUsage::default(),
        cancelled: false,
        error: None,
    };
    let mut delta_index = 0usize;
    // A receiver that does not stream (HTTP's final response) reads only the
    // first delta, which times the first token; the rest would be allocated,
    // queued and dropped for nothing.
    let mut wants_delta = !silent;
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                response.cancelled = true;
                count_unreported(&mut response.tokens, input_estimate, streamed_chars);
                return response;
            }
            next = stream.next() => next,
        };
        let event = match next {
            None => return response,
            Some(Err(error)) => {
                response.error = Some(error);
                return response;
            }
            Some(Ok(event)) => event,
        };
        match event {
            ModelEvent::TextDelta(text) | ModelEvent::ThinkingDelta(text) if text.is_empty() => {}
            ModelEvent::TextDelta(text) => {
                streamed_chars += text.len();
                let delta = append_delta(assistant, first_segment, false, text, &mut delta_index);
                if wants_delta {
                    wants_delta = sink.streamed;
                    sink.send(TurnEvent::TextDelta(delta));
                }
            }
            ModelEvent::ThinkingDelta(text) => {
                streamed_chars += text.len();
                let delta = append_delta(assistant, first_segment, true, text, &mut delta_index);
                if wants_delta {
                    wants_delta = sink.streamed;
                    sink.send(TurnEvent::ThinkingDelta(delta));
                }
            }
            ModelEvent::ThinkingSignature(value) => {
                if let Some(Segment::Thinking { signature, .. }) = assistant.segments.last_mut() {
                    *signature = Some(value);
                }
            }
            ModelEvent::ToolCall {
                id,
                name,
                arguments,
            } => response.calls.push(RawCall {
                id,
                name,
                arguments,
            }),
            ModelEvent::Usage(tokens) => {
                let total = &mut response.tokens;
                total.input_tokens += tokens.input_tokens;
                total.output_tokens += tokens.output_tokens;
                total.cache_read_tokens += tokens.cache_read_tokens;
                total.cache_write_tokens += tokens.cache_write_tokens;
            }
        }
    }
}

/// A cancelled response's usage: what the provider reported before the
/// cancel, and for what it had not reported yet, the runtime's own count
/// (request and streamed text at about four characters a token, the estimate
/// `builtin:echo` reports too).
fn count_unreported(tokens: &mut TokenUsage, input_estimate: u64, streamed_chars: usize) {
    if tokens.input_tokens == 0 {
        tokens.input_tokens = input_estimate;
    }
    if tokens.output_tokens == 0 {
        tokens.output_tokens = (streamed_chars as u64).div_ceil(4);
    }
}
/// Appends a delta to the response's current segment of that kind, or opens
/// one, and describes it for the stream (`delta_index` counts within the segment).
fn append_delta(
    assistant: &mut Message,
    first_segment: usize,
    thinking: bool,
    text: String,
    delta_index: &mut usize,
) -> DeltaEvent {
    let n_segments = assistant.segments.len();
    let continued = n_segments > first_segment
        && match assistant.segments.last_mut() {
            Some(Segment::Thinking {
                text: current,
                signature: None,
            }) if thinking => {
                current.push_str(&text);
                true
            }
            Some(Segment::Text { text: current }) if !thinking => {
                current.push_str(&text);
                true
            }
            _ => false,
        };
    let index = if continued {
        *delta_index += 1;
        n_segments - 1
    } else {
        *delta_index = 0;
        assistant.segments.push(if thinking {
            Segment::Thinking {
                text: text.clone(),
                signature: None,
            }
        } else {
            Segment::Text { text: text.clone() }
        });
        n_segments
    };
    DeltaEvent {
        content: text,
        segment_id: format!("{}:{index}", assistant.id),
        segment_index: index,
        delta_index: *delta_index,
        segment_started: !continued,
        segment_kind: if thinking { "thinking" } else { "text" },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_cancelled_response_keeps_what_the_provider_reported() {
        let mut tokens = TokenUsage {
            input_tokens: 120,
            output_tokens: 7,
            ..TokenUsage::default()
        };
        count_unreported(&mut tokens, 999, 400);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (120, 7));
    }

    #[test]
    pub(super) fn a_cancelled_response_without_a_report_is_counted_by_the_runtime() {
        let mut tokens = TokenUsage::default();
        count_unreported(&mut tokens, 50, 9);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (50, 3));
        // Input reported, output not yet.
        let mut tokens = TokenUsage {
            input_tokens: 80,
            ..TokenUsage::default()
        };
        count_unreported(&mut tokens, 50, 8);
        assert_eq!((tokens.input_tokens, tokens.output_tokens), (80, 2));
    }
}
