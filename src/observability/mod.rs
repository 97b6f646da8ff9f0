//! What operators see: a request id on every request (taken from
//! `x-request-id` or generated, echoed back), one access log line per request
//! at `info`, and the Prometheus metrics of `GET /metrics`.
//!
//! - `request_id`: the id and its rules.
//! - `access_log`: the middleware that logs, echoes the id and counts requests.
//! - `metrics`: the registry, turn observation, and the text format.
//! - `timed_store`: a `Store` wrapper that times every store operation.
//! - `turn_failure`: the WARN line of a failed turn.
//! - `otel`: turn spans exported over OTLP/HTTP (GenAI semantic conventions).

pub mod access_log;
pub mod metrics;
pub mod otel;
pub mod request_id;
pub mod timed_store;
pub mod turn_failure;

pub use metrics::{Metrics, Transport, TurnObserver};
pub use request_id::RequestId;
