//! Streaming one model response into the assistant message: text and
//! thinking deltas (forwarded to the sink unless silent), tool calls as sent,
//! and the provider's token counts.

use std::borrow::Cow;
use std::time::Instant;

use futures_util::{FutureExt, StreamExt};

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
    /// When the first text, thinking or tool call came (only when timed).
    pub(super) first_output: Option<Instant>,
}

/// Streams one model response into `assistant`, forwarding deltas to `sink`.
/// `timed`: note when its first output came (the turn is traced).
pub(super) async fn stream_response(
    plan: &TurnPlan,
    request: ModelRequest,
    assistant: &mut Message,
    sink: &EventSink,
    cancel: &mut CancelToken,
    silent: bool,
    timed: bool,
) -> Response {
    // Providers report usage at the end of a response; a cancel drops the
    // stream before that, so the turn keeps its own count to fall back on.
    let input_estimate = request.estimated_input_tokens();
    let mut stream = plan.model.stream(request);
    let mut deltas = Deltas::new(assistant, silent);
    let mut response = Response {
        calls: Vec::new(),
        tokens: TokenUsage::default(),
        cancelled: false,
        error: None,
        first_output: None,
    };
    // Cleared at the first output, so later events pay one test of a bool.
    let mut awaiting_first = timed;
    // One wait for the cancel over the whole response, not a new one per
    // delta (a response of many small deltas would make one per delta).
    let flag = cancel.clone();
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        // A cancel is seen before each event: by the flag while the model's
        // events are ready (polling the wait for each of them cost more than
        // the event), by the wait while the model is pending. A ready event
        // is taken without the select, whose setup cost more than the event.
        let next = if flag.is_cancelled() {
            None
        } else if let Some(ready) = stream.next().now_or_never() {
            Some(ready)
        } else {
            tokio::select! {
                biased;
                next = stream.next() => Some(next),
                _ = &mut cancelled => None,
            }
        };
        let Some(next) = next else {
            response.cancelled = true;
            count_unreported(&mut response.tokens, input_estimate, deltas.streamed_chars);
            return response;
        };
        let event = match next {
            None => return response,
            Some(Err(error)) => {
                response.error = Some(error);
                return response;
            }
            Some(Ok(event)) => event,
        };
        if awaiting_first && !matches!(event, ModelEvent::Usage(_)) {
            awaiting_first = false;
            response.first_output = Some(Instant::now());
        }
        match event {
            ModelEvent::TextDelta(text) => deltas.take(assistant, sink, false, text),
            ModelEvent::ThinkingDelta(text) => deltas.take(assistant, sink, true, text),
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
/// The response's streamed text and thinking: where each delta goes in the
/// assistant message, and which deltas reach the sink.
struct Deltas {
    /// The first segment this response may continue (earlier ones belong
    /// to earlier responses of the turn).
    first_segment: usize,
    /// The next delta's place within its segment.
    delta_index: usize,
    streamed_chars: usize,
    /// Whether the next delta is sent: never when silent, and only the
    /// response's first to a receiver that does not stream (HTTP's final
    /// response, which times the first token by it); the rest would be
    /// described, queued and dropped for nothing.
    send_next: bool,
}

impl Deltas {
    fn new(assistant: &Message, silent: bool) -> Deltas {
        Deltas {
            first_segment: assistant.segments.len(),
            delta_index: 0,
            streamed_chars: 0,
            send_next: !silent,
        }
    }

    /// Appends `text` to the message, and sends it when the sink reads it.
    fn take(&mut self, assistant: &mut Message, sink: &EventSink, thinking: bool, text: String) {
        if text.is_empty() {
            return;
        }
        self.streamed_chars += text.len();
        if !(self.send_next && sink.reads_events()) {
            // No event carries this delta: the message may keep its text.
            self.append(assistant, thinking, Cow::Owned(text));
            if self.send_next {
                self.send_next = sink.sends_every_delta();
                sink.note_delta();
            }
            return;
        }
        let (index, started) = self.append(assistant, thinking, Cow::Borrowed(&text));
        self.send_next = sink.sends_every_delta();
        let delta = DeltaEvent {
            content: text,
            segment_id: format!("{}:{index}", assistant.id),
            segment_index: index,
            delta_index: self.delta_index,
            segment_started: started,
            segment_kind: if thinking { "thinking" } else { "text" },
        };
        sink.send(if thinking {
            TurnEvent::ThinkingDelta(delta)
        } else {
            TurnEvent::TextDelta(delta)
        });
    }

    /// Appends `text` to the response's current segment of that kind, or
    /// opens one: its index, and whether it was opened.
    fn append(
        &mut self,
        assistant: &mut Message,
        thinking: bool,
        text: Cow<'_, str>,
    ) -> (usize, bool) {
        let n_segments = assistant.segments.len();
        let continued = n_segments > self.first_segment
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
        if continued {
            self.delta_index += 1;
            return (n_segments - 1, false);
        }
        self.delta_index = 0;
        let text = text.into_owned();
        // Most replies are one segment: room for one, not the four a first
        // push gives, as the message stays resident after its turn.
        if assistant.segments.capacity() == 0 {
            assistant.segments.reserve_exact(1);
        }
        assistant.segments.push(if thinking {
            Segment::Thinking {
                text,
                signature: None,
            }
        } else {
            Segment::Text { text }
        });
        (n_segments, true)
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
