//! Server-sent events: encoding, and response bodies that send what was
//! kept first, then live events, with keep-alive comments in between, and
//! run a hook when the connection goes away.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::edge::one_line;
use super::routing::Event;

/// A comment line this often keeps idle streams (and proxies) alive, and
/// notices clients that are gone.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `Mcp-Session-Id`, parsed once rather than on every lookup.
pub(crate) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");

/// `id: <stream>-<seq>` and the message as `data` (empty for a priming event).
pub(crate) fn encode(event: &Event) -> Bytes {
    let data = one_line(event.data.clone());
    let mut out = BytesMut::with_capacity(data.len() + 32);
    out.put_slice(format!("id: {}-{}\ndata: ", event.stream, event.seq).as_bytes());
    out.put_slice(&data);
    out.put_slice(b"\n\n");
    out.freeze()
}

/// `data: <message>` without an id (2026-07-28 streams are not resumable).
pub(crate) fn data_only(data: &Bytes) -> Bytes {
    let data = one_line(data.clone());
    let mut out = BytesMut::with_capacity(data.len() + 8);
    out.put_slice(b"data: ");
    out.put_slice(&data);
    out.put_slice(b"\n\n");
    out.freeze()
}

/// `event: <name>` with `data` (legacy HTTP+SSE).
pub(crate) fn named(name: &str, data: &[u8]) -> Bytes {
    let data = one_line(Bytes::copy_from_slice(data));
    let mut out = BytesMut::with_capacity(data.len() + name.len() + 16);
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\ndata: ");
    out.put_slice(&data);
    out.put_slice(b"\n\n");
    out.freeze()
}

/// Runs a closure when dropped: the response body went away, whether it
/// ended or the client disconnected.
pub(crate) struct DropGuard(Option<Box<dyn FnOnce() + Send>>);

impl DropGuard {
    pub(crate) fn new(on_drop: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(on_drop)))
    }

    /// Forgets the closure.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(on_drop) = self.0.take() {
            on_drop();
        }
    }
}

/// How long the SSE response to a POST waits for its first event before
/// its headers go out alone. Most requests are answered well within it, and
/// then the headers, the answer and the end of the stream leave in one
/// write instead of three; a slow tool call still gets its headers (and the
/// client's stream timeouts) after this long.
pub(crate) const FIRST_EVENT_WAIT: Duration = Duration::from_millis(50);

/// An SSE body: `first`, then `live` until it ends or `kick` fires.
pub(crate) fn body(
    first: Vec<Bytes>,
    live: BoxStream<'static, Bytes>,
    kick: CancellationToken,
    guard: DropGuard,
) -> Body {
    Body::from_stream(chunks(first, live, kick, guard))
}

/// [`body`], returned once its first chunk is ready or [`FIRST_EVENT_WAIT`]
/// has passed, whichever comes first, so hyper can send that chunk with
/// the response headers.
pub(crate) async fn body_after_first(
    first: Vec<Bytes>,
    live: BoxStream<'static, Bytes>,
    kick: CancellationToken,
    guard: DropGuard,
) -> Body {
    let mut stream = chunks(first, live, kick, guard);
    match tokio::time::timeout(FIRST_EVENT_WAIT, stream.next()).await {
        Ok(Some(chunk)) => Body::from_stream(futures_util::stream::iter([chunk]).chain(stream)),
        // Ended before sending anything; the stream must not be polled again.
        Ok(None) => Body::empty(),
        Err(_) => Body::from_stream(stream),
    }
}

struct BodyState {
    first: VecDeque<Bytes>,
    live: BoxStream<'static, Bytes>,
    kick: CancellationToken,
    keep_alive: tokio::time::Interval,
    _guard: DropGuard,
}

fn chunks(
    first: Vec<Bytes>,
    live: BoxStream<'static, Bytes>,
    kick: CancellationToken,
    guard: DropGuard,
) -> BoxStream<'static, Result<Bytes, Infallible>> {
    let state = BodyState {
        first: first.into(),
        live,
        kick,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        _guard: guard,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        if let Some(chunk) = state.first.pop_front() {
            return Some((Ok::<_, Infallible>(chunk), state));
        }
        tokio::select! {
            biased;
            chunk = state.live.next() => chunk.map(|chunk| (Ok(chunk), state)),
            _ = state.kick.cancelled() => None,
            _ = state.keep_alive.tick() => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), state)),
        }
    })
    .boxed()
}

/// A `200 text/event-stream` response, with the session id when given.
pub(crate) fn response(body: Body, session_id: Option<&str>) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(id) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(SESSION_HEADER, id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_encoded_on_one_data_line() {
        let event = Event {
            stream: 3,
            seq: 7,
            data: Bytes::from_static(b"{\"a\":\n1}"),
        };
        assert_eq!(&encode(&event)[..], b"id: 3-7\ndata: {\"a\": 1}\n\n");
        let priming = Event {
            stream: 0,
            seq: 1,
            data: Bytes::new(),
        };
        assert_eq!(&encode(&priming)[..], b"id: 0-1\ndata: \n\n");
        assert_eq!(
            &named("endpoint", b"/mcp/message?sessionId=x")[..],
            b"event: endpoint\ndata: /mcp/message?sessionId=x\n\n"
        );
    }
}
