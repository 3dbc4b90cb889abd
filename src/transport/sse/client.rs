//! The proxy as the client of a legacy HTTP+SSE MCP server (2024-11-05).
//!
//! One `GET` opens the server's event stream. Its first `endpoint` event
//! names where to `POST` (usually a relative URL carrying a session query
//! parameter, resolved against the stream's URL; one on another origin is
//! refused, since the configured headers would go there). Every frame the
//! relay writes is posted there, in order, each once the previous one was
//! accepted; every `message` event's data is handed to the relay as one
//! frame, byte for byte. When the event stream ends, the upstream is gone.
//!
//! With `[upstream.oauth]` the GET and every POST carry the route's access
//! token, renewed once after a 401.
//!
//! A request whose POST fails gets a JSON-RPC error (-32011) for its id,
//! so the agent is not left waiting; a 404 means the server no longer
//! knows the session, and the upstream closes.

pub mod decode;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Response, StatusCode, Url};
use tokio_util::sync::CancellationToken;

use self::decode::{SseDecoder, SseEvent};
use crate::config::UpstreamConfig;
use crate::jsonrpc::{codes, error_response};
use crate::transport::http::client::link::{Goodbye, Link, LinkControl};
use crate::transport::http::client::message::Outgoing;
use crate::transport::http::client::net::{self, describe_reqwest, Target, CONNECT_TIMEOUT};
use crate::transport::http::client::route::RouteClient;
use crate::transport::upstream::{Upstream, UpstreamError};
use crate::transport::writer::{FrameReceiver, FrameWriter};

/// How long the server may take to name its POST endpoint.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to a legacy HTTP+SSE MCP server through its route's shared
/// client: opens the event stream and waits for its `endpoint` event.
pub async fn connect(
    config: &UpstreamConfig,
    route: Arc<RouteClient>,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    let target = &route.target;
    let headers = net::configured_headers(config).map_err(|reason| target.error(reason))?;
    route.authorization().await?;

    let mut get_headers = headers.clone();
    get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let get = route.send(route.http.get(target.url.clone()).headers(get_headers));
    let response = match tokio::time::timeout(CONNECT_TIMEOUT + ENDPOINT_TIMEOUT, get).await {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => {
            return Err(target.error(format!("cannot connect: {}", describe_reqwest(err))))
        }
        Err(_) => return Err(target.error("the server did not answer the event-stream GET")),
    };
    let status = response.status();
    if !status.is_success() {
        return Err(target.error(format!(
            "the server answered HTTP {status} to the event-stream GET"
        )));
    }
    let mut events = EventReader::new(response, max_message_bytes);
    let mut early = Vec::new();
    let endpoint = tokio::time::timeout(ENDPOINT_TIMEOUT, async {
        loop {
            match events.next().await {
                Ok(Some(event)) if event.event.as_deref() == Some("endpoint") => {
                    break Ok(event.data.unwrap_or_default());
                }
                Ok(Some(event)) => early.push(event),
                Ok(None) => break Err("the event stream ended before the endpoint event".into()),
                Err(reason) => break Err(format!("reading the event stream failed: {reason}")),
            }
        }
    })
    .await
    .unwrap_or_else(|_| Err("the server sent no endpoint event".to_owned()))
    .map_err(|reason: String| target.error(reason))?;
    let endpoint = resolve_endpoint(target, &endpoint)?;

    let (link, frames) = Link::new(queue);
    let client = Arc::new(Client {
        route_client: route.clone(),
        route: target.route.clone(),
        endpoint,
        headers,
        link: link.clone(),
    });
    link.spawn(client.clone().read(events, early));
    let (writer, receiver) = FrameWriter::channel(queue.max(1));
    let drained = CancellationToken::new();
    let writer_task = tokio::spawn(client.clone().post_all(receiver, drained.clone()));
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    let goodbye: Goodbye = Box::new(move || {
        async move {
            let _ = tokio::time::timeout(grace, drained.cancelled()).await;
        }
        .boxed()
    });
    Ok(Upstream {
        frames,
        writer,
        writer_task: Some(writer_task),
        control: Box::new(LinkControl::new(link, Some(goodbye))),
    })
}

/// Resolves the `endpoint` event's URI against the stream's URL; it must
/// stay on the same origin.
fn resolve_endpoint(target: &Target, data: &[u8]) -> Result<Url, UpstreamError> {
    let text = std::str::from_utf8(data)
        .map_err(|_| target.error("the endpoint event is not UTF-8"))?
        .trim();
    let endpoint = target
        .url
        .join(text)
        .map_err(|err| target.error(format!("the endpoint event is not a URL: {err}")))?;
    if endpoint.origin() != target.url.origin() {
        return Err(target.error(format!(
            "the endpoint event names another origin ({}); refused",
            net::redact(&endpoint)
        )));
    }
    Ok(endpoint)
}

/// The events of one response body, one at a time.
struct EventReader {
    response: Response,
    decoder: SseDecoder,
    ready: VecDeque<SseEvent>,
    scratch: Vec<SseEvent>,
}

impl EventReader {
    fn new(response: Response, max_message_bytes: usize) -> Self {
        Self {
            response,
            decoder: SseDecoder::new(max_message_bytes),
            ready: VecDeque::new(),
            scratch: Vec::new(),
        }
    }

    /// The next event; `None` when the stream ended.
    async fn next(&mut self) -> Result<Option<SseEvent>, String> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            match self.response.chunk().await.map_err(describe_reqwest)? {
                Some(chunk) => {
                    self.decoder.feed(&chunk, &mut self.scratch);
                    self.ready.extend(self.scratch.drain(..));
                }
                None => return Ok(None),
            }
        }
    }
}

struct Client {
    /// The route's HTTP client and access token.
    route_client: Arc<RouteClient>,
    route: String,
    endpoint: Url,
    headers: HeaderMap,
    link: Arc<Link>,
}

impl Client {
    /// Hands every `message` event to the relay until the stream ends,
    /// which ends the upstream.
    async fn read(self: Arc<Self>, mut events: EventReader, early: Vec<SseEvent>) {
        for event in early {
            if !self.message(event).await {
                return;
            }
        }
        let reason = loop {
            match events.next().await {
                Ok(Some(event)) => {
                    if !self.message(event).await {
                        return;
                    }
                }
                Ok(None) => break "the server closed its event stream".to_owned(),
                Err(reason) => break format!("the server's event stream failed: {reason}"),
            }
        };
        self.link.close(reason);
    }

    async fn message(&self, event: SseEvent) -> bool {
        if !event.is_message() {
            tracing::debug!(route = %self.route, event = ?event.event, "ignored an event that is not a message");
            return true;
        }
        if event.oversized {
            return self.link.emit_too_long().await;
        }
        match event.payload() {
            Some(data) => self.link.emit(data.clone()).await,
            None => true,
        }
    }

    /// Posts the relay's frames in order.
    async fn post_all(
        self: Arc<Self>,
        mut receiver: FrameReceiver,
        drained: CancellationToken,
    ) -> std::io::Result<()> {
        loop {
            let frame = tokio::select! {
                biased;
                _ = self.link.closed() => break,
                frame = receiver.recv() => frame,
            };
            let Some(frame) = frame else { break };
            tokio::select! {
                _ = self.link.closed() => break,
                _ = self.post(frame) => {}
            }
        }
        drained.cancel();
        Ok(())
    }

    async fn post(&self, frame: Bytes) -> bool {
        let out = Outgoing::peek(&frame);
        let mut headers = self.headers.clone();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let post = self.route_client.http.post(self.endpoint.clone());
        let sent = self
            .route_client
            .send(post.headers(headers).body(frame))
            .await;
        let reason = match sent {
            Ok(response) if response.status().is_success() => return true,
            Ok(response) if response.status() == StatusCode::NOT_FOUND => {
                self.link
                    .close("the server no longer knows this session (HTTP 404)");
                return false;
            }
            Ok(response) => format!("the upstream server answered HTTP {}", response.status()),
            Err(err) => format!(
                "the upstream server could not be reached: {}",
                describe_reqwest(err)
            ),
        };
        if out.requests.is_empty() {
            tracing::warn!(route = %self.route, %reason, "a notification or response could not be delivered upstream");
        }
        for id in &out.requests {
            let reply = error_response(Some(id), codes::UPSTREAM_UNAVAILABLE, &reason, None);
            if !self.link.emit(reply).await {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        let mut config = UpstreamConfig::for_command(vec![]);
        config.url = Some(url.into());
        Target::new(&config, &["http", "https"]).unwrap()
    }

    #[test]
    fn endpoints_resolve_against_the_stream_url() {
        let t = target("http://127.0.0.1:8080/mcp/sse");
        let url = resolve_endpoint(&t, b"/messages?sessionId=abc").unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/messages?sessionId=abc");
        let url = resolve_endpoint(&t, b"messages?sessionId=abc").unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8080/mcp/messages?sessionId=abc"
        );
        let url = resolve_endpoint(&t, b"http://127.0.0.1:8080/m").unwrap();
        assert_eq!(url.path(), "/m");
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        let t = target("http://127.0.0.1:8080/sse");
        let err = resolve_endpoint(&t, b"http://evil.example/m?s=1").unwrap_err();
        assert!(err.to_string().contains("another origin"), "{err}");
        assert!(!err.to_string().contains("s=1"), "{err}");
    }
}
