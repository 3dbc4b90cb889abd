//! Request hygiene for every endpoint: what `Accept` and `Content-Type`
//! allow, bodies read with a byte limit (413) and a time limit (408), and
//! frames made single-line for newline-framed upstreams.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::super::responses::rejection;
use crate::telemetry::Carrier;

/// How long a client may take to send a request body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What an `Accept` header allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accepts {
    /// `application/json`.
    pub(crate) json: bool,
    /// `text/event-stream`.
    pub(crate) sse: bool,
}

/// The W3C trace context (`traceparent`, `tracestate`) a request came
/// with, while tracing is on.
pub(crate) fn trace_context(headers: &HeaderMap) -> Option<Carrier> {
    Carrier::from_headers(|name| headers.get(name).and_then(|value| value.to_str().ok()))
}

/// Whether an `Accept` parameter is `q=0` (the media type is refused).
/// Every POST reads `Accept`, so media types and parameters are compared
/// in place, case-insensitively, without copies.
fn refuses(param: &str) -> bool {
    let param = param.trim();
    let Some((name, q)) = param.split_once('=') else {
        return false;
    };
    name.trim_end().eq_ignore_ascii_case("q") && q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
}

/// Parses `Accept`; an absent header accepts everything.
pub(crate) fn accepts(headers: &HeaderMap) -> Accepts {
    let mut result = Accepts {
        json: false,
        sse: false,
    };
    let mut any_header = false;
    for value in headers.get_all(header::ACCEPT) {
        any_header = true;
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut params = item.split(';');
            let media = params.next().unwrap_or("").trim();
            if params.any(refuses) {
                continue;
            }
            let is = |name: &str| media.eq_ignore_ascii_case(name);
            if is("*/*") {
                result.json = true;
                result.sse = true;
            } else if is("application/json") || is("application/*") {
                result.json = true;
            } else if is("text/event-stream") || is("text/*") {
                result.sse = true;
            }
        }
    }
    if !any_header {
        return Accepts {
            json: true,
            sse: true,
        };
    }
    result
}

/// Whether the body is declared as JSON (or not declared at all).
pub(crate) fn content_type_is_json(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_TYPE) {
        None => true,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json")),
    }
}

/// Reads a request body of at most `limit` bytes: 413 beyond it, 408 when
/// the client is too slow, 400 when the body breaks off.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|err| {
                rejection(
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {err}"),
                )
            })?;
            if buf.len() + chunk.len() > limit {
                return Err(too_large(limit));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    };
    match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Ok(result) => result,
        Err(_) => Err(rejection(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )),
    }
}

fn too_large(limit: usize) -> Response {
    rejection(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("the request body exceeds the {limit}-byte limit"),
    )
}

/// A frame as one line: raw CR and LF can only be insignificant whitespace
/// in valid JSON, so they become spaces, and a message from a body or a
/// WebSocket frame can travel on a newline-framed upstream unchanged
/// otherwise. Invalid JSON stays invalid.
pub(crate) fn one_line(frame: Bytes) -> Bytes {
    if memchr::memchr2(b'\n', b'\r', &frame).is_none() {
        return frame;
    }
    let mut out = BytesMut::from(&frame[..]);
    for byte in out.iter_mut() {
        if *byte == b'\n' || *byte == b'\r' {
            *byte = b' ';
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn accept_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            accepts(&headers),
            Accepts {
                json: true,
                sse: true
            }
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(
            accepts(&headers),
            Accepts {
                json: true,
                sse: false
            }
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json;q=0"),
        );
        assert_eq!(
            accepts(&headers),
            Accepts {
                json: false,
                sse: true
            }
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("Application/JSON; Q=0.5, TEXT/Event-Stream;q=0.0"),
        );
        assert_eq!(
            accepts(&headers),
            Accepts {
                json: true,
                sse: false
            }
        );
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        assert_eq!(
            accepts(&headers),
            Accepts {
                json: false,
                sse: false
            }
        );
    }

    #[test]
    fn frames_become_one_line() {
        let frame = Bytes::from_static(b"{\r\n  \"a\": 1\n}");
        assert_eq!(&one_line(frame)[..], b"{    \"a\": 1 }");
    }
}
