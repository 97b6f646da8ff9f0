//! Reading a request body with a size limit and a deadline. actix's own
//! timeout covers only the request head, so a client sending one byte a
//! second could hold a connection (and a file descriptor) for as long as it
//! liked; here the whole body must arrive within `SERVER__BODY_TIMEOUT_SECONDS`.
//!
//! A large body is also parsed and checked on the blocking pool
//! (`parse_off_worker`): a few megabytes of JSON take milliseconds to parse
//! and validate, and on an HTTP worker thread that time would be taken from
//! every other connection the worker serves (`/health` included).

use std::time::Duration;

use actix_web::web::{self, Bytes, BytesMut};
use actors::offload;
use futures_util::{FutureExt, StreamExt};

use crate::errors::ApiError;

/// The body limits of the HTTP routes (app data).
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// The whole body, or 413 past `max_bytes`, or 408 past `timeout`.
pub async fn read_body(mut payload: web::Payload, limits: &BodyLimits) -> Result<Bytes, ApiError> {
    let read = async {
        let mut body = Collected::Empty;
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|error| {
                ApiError::from(actors::contract::ValidationError::new(
                    "body",
                    format!("could not be read: {error}"),
                ))
            })?;
            if body.len() + chunk.len() > limits.max_bytes {
                return Err(ApiError::TooLarge(limits.max_bytes));
            }
            body = body.push(chunk);
        }
        Ok(body.freeze())
    };
    let mut read = std::pin::pin!(read);
    // A small body has usually arrived with the request head: it is read
    // without arming a timer (a timer's entry and removal cost more than
    // the read). The handler is first polled as the head is decoded, before
    // the connection feeds it the body it read with the head, so it looks
    // again once after that. One still on its way gets the whole timeout.
    if let Some(read) = read.as_mut().now_or_never() {
        return read;
    }
    polled_again().await;
    if let Some(read) = read.as_mut().now_or_never() {
        return read;
    }
    match tokio::time::timeout(limits.timeout, read).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::BodyTimeout(limits.timeout.as_secs())),
    }
}

/// Pending once, asking to be polled again: the connection that is polling
/// the handler feeds it the rest of what it read first (and was woken for
/// that already, so asking costs no extra poll).
fn polled_again() -> impl std::future::Future<Output = ()> {
    let mut asked = false;
    std::future::poll_fn(move |cx| {
        if asked {
            return std::task::Poll::Ready(());
        }
        asked = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}

/// A body's chunks so far. Most bodies are one chunk, which is kept as it
/// came (a slice of the connection's buffer) instead of copied.
enum Collected {
    Empty,
    One(Bytes),
    Many(BytesMut),
}

impl Collected {
    fn len(&self) -> usize {
        match self {
            Collected::Empty => 0,
            Collected::One(chunk) => chunk.len(),
            Collected::Many(chunks) => chunks.len(),
        }
    }

    fn push(self, chunk: Bytes) -> Collected {
        match self {
            Collected::Empty => Collected::One(chunk),
            Collected::One(first) => {
                let mut chunks = BytesMut::with_capacity(first.len() + chunk.len());
                chunks.extend_from_slice(&first);
                chunks.extend_from_slice(&chunk);
                Collected::Many(chunks)
            }
            Collected::Many(mut chunks) => {
                chunks.extend_from_slice(&chunk);
                Collected::Many(chunks)
            }
        }
    }

    fn freeze(self) -> Bytes {
        match self {
            Collected::Empty => Bytes::new(),
            Collected::One(chunk) => chunk,
            Collected::Many(chunks) => chunks.freeze(),
        }
    }
}

/// `parse(body)`, on the blocking pool when the body is larger than
/// `actors::offload::INLINE_BYTES`.
pub async fn parse_off_worker<T, F>(body: Bytes, parse: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&[u8]) -> Result<T, ApiError> + Send + 'static,
{
    if body.len() <= offload::INLINE_BYTES {
        return parse(&body);
    }
    offload::on_blocking_pool(move || parse(&body))
        .await
        .unwrap_or_else(|why| {
            Err(ApiError::from(actors::session::SessionError::Internal(
                format!("the body could not be parsed: {why}"),
            )))
        })
}
