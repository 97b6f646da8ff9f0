//! Plumbing shared by the network adapters (OpenAI, Anthropic): building the
//! HTTP client, sending one streamed request, mapping failures onto
//! `ModelErrorKind`, and reading the SSE body under an idle timeout. Payload
//! shapes belong to each adapter's `Decoder`; this file never looks inside them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::stream::{self, StreamExt};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;

use super::sse::{EventTooLarge, SseEvent, SseParser};
use super::{ModelError, ModelErrorKind, ModelEvent, ModelStream, Resend};

/// How long establishing a TCP/TLS connection may take: a provider that does
/// not accept within this is down or unreachable, and waiting longer only
/// delays the error the user sees.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default longest silence between response chunks (and before the response
/// headers). Long enough for a slow first token behind a long prompt or a
/// thinking phase; keep-alive pings from the providers reset it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest provider error text carried into a `ModelError`: enough to read the
/// cause, short enough for logs and the client's error sentence.
const MAX_ERROR_CHARS: usize = 500;

/// Default largest SSE event (or line) a provider may send: far above any
/// real delta or tool call, small enough that a provider or proxy sending
/// one endless line cannot exhaust memory (`LLM__MAX_EVENT_BYTES`).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// The HTTP client the providers without a CA file or headers of their own
/// share: one connection pool per process (`tls` says what it trusts).
pub fn build_http_client() -> reqwest::Client {
    http_client(&[], reqwest::header::HeaderMap::new())
        .expect("reqwest client with rustls and the bundled roots builds")
}

/// A client trusting `extra_cas` besides the system's and the bundled roots,
/// sending `headers` with every request. Fails only when a CA certificate
/// cannot be used.
pub fn http_client(
    extra_cas: &[reqwest::Certificate],
    headers: reqwest::header::HeaderMap,
) -> Result<reqwest::Client, String> {
    super::tls::client_builder(extra_cas)
        .connect_timeout(CONNECT_TIMEOUT)
        .default_headers(headers)
        .build()
        .map_err(|error| {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message
        })
}

/// Bounds on one streamed response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// Longest silence allowed before headers and between chunks.
    pub idle_timeout: Duration,
    /// Largest SSE event or line; over it the turn fails as `provider_error`.
    pub max_event_bytes: usize,
}

impl Default for StreamLimits {
    fn default() -> StreamLimits {
        StreamLimits {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// Collected events from one decoding step. An `Err` ends the stream.
pub(crate) type Outbox = VecDeque<Result<ModelEvent, ModelError>>;

/// Turns one provider's SSE events into `ModelEvent`s.
pub(crate) trait Decoder: Send + Sync + 'static {
    /// Handles one event; returns true when the response is complete and the
    /// rest of the body need not be read.
    fn event(&mut self, event: SseEvent, out: &mut Outbox) -> bool;

    /// The body ended without the decoder having declared completion.
    fn end(&mut self, out: &mut Outbox);
}

/// Sends `request` when the stream is first polled and decodes its SSE body.
/// Nothing happens before the first poll, and dropping the stream drops the
/// connection, which is how a cancelled turn stops the provider's work.
pub(crate) fn stream_sse<D: Decoder>(
    provider: Arc<str>,
    request: RequestBuilder,
    limits: StreamLimits,
    decoder: D,
) -> ModelStream {
    let reader = Reader {
        provider,
        idle_timeout: limits.idle_timeout,
        phase: Phase::Pending(request),
        parser: SseParser::with_max_event_bytes(limits.max_event_bytes),
        decoder,
        outbox: VecDeque::new(),
    };
    stream::unfold(reader, |mut reader| async move {
        let item = reader.next().await?;
        Some((item, reader))
    })
    .boxed()
}

/// A provider's error text: `error.message` when the body is the usual JSON
/// error object (both OpenAI and Anthropic use that shape), else the raw body.
pub(crate) fn error_text(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        value
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    truncate(message.as_deref().unwrap_or(body).trim())
}

pub(crate) fn truncate(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_string();
    }
    let mut short: String = text.chars().take(MAX_ERROR_CHARS).collect();
    short.push('…');
    short
}

/// The error kind for an HTTP status received before the stream started.
pub(crate) fn kind_for_status(status: StatusCode) -> ModelErrorKind {
    match status.as_u16() {
        429 => ModelErrorKind::RateLimit,
        401 | 403 => ModelErrorKind::ProviderAuth,
        400..=499 => ModelErrorKind::ProviderClientError,
        _ => ModelErrorKind::ProviderError,
    }
}

/// Most of an error response's body read: the message is cut to
/// `MAX_ERROR_CHARS` anyway, and a provider (or proxy) answering an error
/// with an endless body must not fill memory.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The start of an error response's body, as text.
async fn error_body(mut response: Response) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY_BYTES);
    String::from_utf8_lossy(&body).into_owned()
}

/// Whether a request refused with `status` may be sent again, and when:
/// 429 and 5xx came before any streaming, so nothing was produced. The
/// provider's `retry-after-ms` (OpenAI) wins over `retry-after` (seconds or
/// an HTTP date, RFC 9110).
pub(crate) fn resend_for_status(
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Resend {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return Resend::Never;
    }
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let after_ms = header("retry-after-ms")
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0));
    let after = after_ms.or_else(|| header("retry-after").and_then(|text| retry_after(text, now)));
    match after {
        Some(wait) => Resend::After(wait),
        None => Resend::Backoff,
    }
}

/// `retry-after`: delay seconds, or an HTTP date (a date in the past is no wait).
fn retry_after(text: &str, now: SystemTime) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(text).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Decodes standard base64 (padding optional, whitespace ignored) as UTF-8
/// text; `None` if it is not valid base64 or not UTF-8. Used for text
/// documents, which the providers take as text rather than as files.
pub(crate) fn decode_base64_text(data: &str) -> Option<String> {
    fn value(byte: u8) -> Option<u32> {
        match byte {
            b'A'..=b'Z' => Some(u32::from(byte - b'A')),
            b'a'..=b'z' => Some(u32::from(byte - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(byte - b'0') + 52),
            b'+' | b'-' => Some(62),
            b'/' | b'_' => Some(63),
            _ => None,
        }
    }
    let symbols: Vec<u8> = data
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect();
    let symbols = symbols
        .strip_suffix(b"==")
        .or_else(|| symbols.strip_suffix(b"="))
        .unwrap_or(&symbols);
    if symbols.len() % 4 == 1 {
        return None;
    }
    let mut bytes = Vec::with_capacity(symbols.len() * 3 / 4);
    for group in symbols.chunks(4) {
        let mut accumulator = 0u32;
        for &symbol in group {
            accumulator = (accumulator << 6) | value(symbol)?;
        }
        accumulator <<= 6 * (4 - group.len() as u32);
        let decoded = accumulator.to_be_bytes();
        bytes.extend_from_slice(&decoded[1..group.len()]);
    }
    String::from_utf8(bytes).ok()
}

/// Where the exchange is: not sent yet, reading the body, or over.
enum Phase {
    Pending(RequestBuilder),
    Reading(Response),
    Finished,
}

struct Reader<D> {
    /// Names the provider in error messages.
    provider: Arc<str>,
    idle_timeout: Duration,
    phase: Phase,
    parser: SseParser,
    decoder: D,
    /// Events decoded but not yet yielded: one chunk may complete several.
    outbox: Outbox,
}

impl<D: Decoder> Reader<D> {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(item) = self.outbox.pop_front() {
                if item.is_err() {
                    // An error is the last item of a stream.
                    self.outbox.clear();
                    self.phase = Phase::Finished;
                }
                return Some(item);
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Pending(request) => match self.open(request).await {
                    Ok(response) => self.phase = Phase::Reading(response),
                    Err(error) => return Some(Err(error)),
                },
                Phase::Reading(mut response) => {
                    let chunk =
                        match tokio::time::timeout(self.idle_timeout, response.chunk()).await {
                            Err(_) => return Some(Err(self.idle_error())),
                            Ok(Err(error)) => return Some(Err(self.transport_error(error))),
                            Ok(Ok(chunk)) => chunk,
                        };
                    let Some(chunk) = chunk else {
                        self.end_of_body();
                        continue;
                    };
                    let events = match self.parser.push(&chunk) {
                        Ok(events) => events,
                        Err(too_large) => return Some(Err(self.too_large_error(too_large))),
                    };
                    let mut complete = false;
                    for event in events {
                        if self.decoder.event(event, &mut self.outbox) {
                            complete = true;
                            break;
                        }
                    }
                    if !complete {
                        self.phase = Phase::Reading(response);
                    }
                }
            }
        }
    }

    /// Sends the request and checks the status; the idle timeout also bounds
    /// the wait for response headers, so a provider that accepts the
    /// connection and then says nothing still ends in `Timeout`.
    async fn open(&self, request: RequestBuilder) -> Result<Response, ModelError> {
        let response = match tokio::time::timeout(self.idle_timeout, request.send()).await {
            Err(_) => return Err(self.idle_error()),
            Ok(Err(error)) => {
                let mut failure = self.transport_error(error);
                // No byte of a response came: the provider cannot have
                // started answering, so sending again duplicates nothing.
                if failure.kind == ModelErrorKind::ConnectionError {
                    failure.resend = Resend::Backoff;
                }
                return Err(failure);
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let resend = resend_for_status(status, response.headers(), SystemTime::now());
        let body = tokio::time::timeout(self.idle_timeout, error_body(response))
            .await
            .unwrap_or_default();
        Err(ModelError {
            kind: kind_for_status(status),
            resend,
            message: format!(
                "{} answered HTTP {}: {}",
                self.provider,
                status,
                error_text(&body)
            ),
        })
    }

    fn end_of_body(&mut self) {
        let mut complete = false;
        if let Some(event) = self.parser.finish() {
            complete = self.decoder.event(event, &mut self.outbox);
        }
        if !complete {
            self.decoder.end(&mut self.outbox);
        }
    }

    fn too_large_error(&self, too_large: EventTooLarge) -> ModelError {
        ModelError {
            kind: ModelErrorKind::ProviderError,
            message: format!(
                "{} sent an event or line longer than {} bytes (LLM__MAX_EVENT_BYTES); the response was abandoned",
                self.provider, too_large.limit
            ),
            resend: Resend::Never,
        }
    }

    fn idle_error(&self) -> ModelError {
        ModelError {
            kind: ModelErrorKind::Timeout,
            resend: Resend::Never,
            message: format!("{} sent nothing for {:?}", self.provider, self.idle_timeout),
        }
    }

    fn transport_error(&self, error: reqwest::Error) -> ModelError {
        let kind = if error.is_timeout() {
            ModelErrorKind::Timeout
        } else if error.is_builder() {
            // A malformed base URL: sending again cannot help.
            ModelErrorKind::ProviderClientError
        } else {
            // Refused or failed connections, and connections lost mid-body.
            ModelErrorKind::ConnectionError
        };
        let mut message = format!("{} request failed: {error}", self.provider);
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        ModelError {
            kind,
            resend: Resend::Never,
            message: truncate(&message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_error_kinds() {
        let check = |status: u16, kind: ModelErrorKind| {
            assert_eq!(
                kind_for_status(StatusCode::from_u16(status).unwrap()),
                kind,
                "status {status}"
            );
        };
        check(429, ModelErrorKind::RateLimit);
        check(401, ModelErrorKind::ProviderAuth);
        check(403, ModelErrorKind::ProviderAuth);
        check(400, ModelErrorKind::ProviderClientError);
        check(404, ModelErrorKind::ProviderClientError);
        check(500, ModelErrorKind::ProviderError);
        check(529, ModelErrorKind::ProviderError);
    }

    #[test]
    fn only_429_and_5xx_may_be_resent_when_the_provider_says() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let resend = |status: u16, headers: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            resend_for_status(StatusCode::from_u16(status).unwrap(), &map, now)
        };
        assert_eq!(resend(400, &[("retry-after", "1")]), Resend::Never);
        assert_eq!(resend(401, &[]), Resend::Never);
        assert_eq!(resend(500, &[]), Resend::Backoff);
        assert_eq!(resend(429, &[("retry-after", "soon")]), Resend::Backoff);
        assert_eq!(
            resend(429, &[("retry-after", "3")]),
            Resend::After(Duration::from_secs(3))
        );
        assert_eq!(
            resend(503, &[("retry-after", "3"), ("retry-after-ms", "250")]),
            Resend::After(Duration::from_millis(250))
        );
        let in_ten_seconds = httpdate::fmt_http_date(now + Duration::from_secs(10));
        assert_eq!(
            resend(429, &[("retry-after", &in_ten_seconds)]),
            Resend::After(Duration::from_secs(10))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(10));
        assert_eq!(
            resend(429, &[("retry-after", &past)]),
            Resend::After(Duration::ZERO)
        );
    }

    #[test]
    fn error_text_prefers_the_json_message_and_is_truncated() {
        assert_eq!(
            error_text(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_text("  plain failure \n"), "plain failure");
        let long = "x".repeat(2000);
        assert_eq!(error_text(&long).chars().count(), MAX_ERROR_CHARS + 1);
    }

    #[test]
    fn base64_text_decodes_with_and_without_padding() {
        assert_eq!(
            decode_base64_text("aGVsbG8gd29ybGQ=").as_deref(),
            Some("hello world")
        );
        assert_eq!(decode_base64_text("aGk").as_deref(), Some("hi"));
        assert_eq!(decode_base64_text("aGVs\nbG8=").as_deref(), Some("hello"));
        assert_eq!(decode_base64_text("").as_deref(), Some(""));
        assert_eq!(decode_base64_text("a"), None);
        assert_eq!(decode_base64_text("!!!!"), None);
    }
}
