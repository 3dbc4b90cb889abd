//! The proxy as the client of an MCP server reached over Streamable HTTP,
//! in both eras: the session era (2025-03-26 to 2025-11-25) and the
//! stateless revision (2026-07-28).
//!
//! Every frame the relay writes becomes one `POST` of its exact bytes.
//! What comes back is handed to the relay as exact bytes too: a JSON body
//! as one frame, each `data` of an event stream as one frame.
//!
//! - **Ordering.** Frames holding requests are posted concurrently, each on
//!   its own task, so a slow tool call holds nothing else up. Frames holding
//!   only notifications and responses are posted one after the other, each
//!   once the previous one was accepted, so they keep their order; a request
//!   is posted only after the notifications written before it were accepted
//!   (a `tools/list` never overtakes `notifications/initialized`). Until the
//!   `initialize` request is answered, everything but responses waits.
//! - **Session era.** `Mcp-Session-Id` is taken from the response to
//!   `initialize` and `MCP-Protocol-Version` from its result; both go on
//!   every later request. Once `notifications/initialized` is accepted the
//!   standalone `GET` stream is opened (a 405 means the server has none) and
//!   reopened with `Last-Event-ID` when it drops, after the server's `retry`.
//!   A response stream that drops before its response is resumed the same
//!   way, when the server gave event ids. A 404 for the session id means the
//!   server ended the session: the upstream closes. Shutdown sends `DELETE`.
//! - **Stateless era.** When the first message is not `initialize` (for
//!   example `server/discover`), or a message's `_meta` names 2026-07-28 or
//!   later, no session id is sent; `Mcp-Method` and `Mcp-Name` mirror the
//!   body (non-ASCII values as `=?base64?…?=`) and `MCP-Protocol-Version`
//!   comes from `_meta`. A `notifications/cancelled` is not posted: closing
//!   the request's response stream is the cancellation in this revision.
//! - **Failures.** A request the server cannot answer (unreachable, an HTTP
//!   error, a stream that ends without its response and cannot be resumed)
//!   gets a JSON-RPC error (-32011) for its id, so the agent never waits
//!   forever. When the error status carries the server's own JSON-RPC
//!   answer to the request (2026-07-28 servers answer header mismatches and
//!   unknown methods so), that answer is forwarded instead.
//!
//! - **`Mcp-Param-*`.** A stateless `tools/call` carries one header per
//!   argument its tool marks `x-mcp-header`, computed from the body as it
//!   is sent (so after a Guardian rewrite), from the route's tool schemas
//!   ([`registry`](crate::transport::http::metadata::registry)). A tool not
//!   listed yet gets none; `Mcp-Param-*` headers the agent sent that the
//!   proxy did not recognise come in with the configured headers.
//!
//! Parts: `headers` (what each POST carries), `pending` (the requests a
//! POST waits on), `reply` (answers, and errors in their place), `streams`
//! (event streams and their resumption), `message` (peeks), `link`, `net`,
//! `route` (what the sessions of a route share), `credentials` (the
//! route's OAuth access token, `[upstream.oauth]`).
//!
//! Not done here: the agent's own `Authorization` (`forward_authorization`).

mod credentials;
mod headers;
pub(crate) mod link;
pub(crate) mod message;
pub(crate) mod net;
mod pending;
mod reply;
pub(crate) mod route;
mod streams;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::{Response, StatusCode};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use self::link::{Goodbye, Link, LinkControl};
use self::message::{id_key, Outgoing};
use self::net::describe_reqwest;
use self::pending::Pending;
use self::route::RouteClient;
use crate::config::UpstreamConfig;
use crate::jsonrpc::RequestId;
use crate::transport::upstream::{Upstream, UpstreamError};
use crate::transport::writer::{FrameReceiver, FrameWriter};

/// The session header (`MCP-Session-Id` from 2025-11-25; names are
/// case-insensitive).
const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// The negotiated (or, from 2026-07-28, the request's) protocol version.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// 2026-07-28: the request's method.
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// 2026-07-28: the tool or prompt name, or the resource URI.
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// Resumes an event stream after the event with this id.
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const POST_ACCEPT: &str = "application/json, text/event-stream";

/// Resumption attempts in a row that bring no event, before giving up.
const MAX_RESUME_ATTEMPTS: u32 = 5;
/// Failed attempts in a row to open the standalone stream, before giving up.
const MAX_LISTEN_FAILURES: u32 = 5;
/// The shortest wait before reconnecting an event stream.
const MIN_RETRY: Duration = Duration::from_millis(50);
/// The wait before reconnecting when the server named none, doubled per
/// failure up to [`MAX_BACKOFF`].
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The largest error body read to look for a JSON-RPC answer in it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Connects to a Streamable HTTP MCP server through its route's shared
/// client.
///
/// Nothing MCP is sent until the relay writes the agent's first message;
/// the server is only checked to accept TCP connections (unless it just
/// answered another session), so that a route to a server that is down
/// fails at once with a clear reason.
pub async fn connect(
    config: &UpstreamConfig,
    route: Arc<RouteClient>,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    let headers = net::configured_headers(config).map_err(|reason| route.target.error(reason))?;
    route.check_reachable().await?;
    route.authorization().await?;

    let (link, frames) = Link::new(queue);
    let client = Arc::new(Client {
        route,
        headers,
        link: link.clone(),
        max_message_bytes,
        state: Mutex::new(State::default()),
        cancels: Mutex::new(HashMap::new()),
    });
    let (writer, receiver) = FrameWriter::channel(queue.max(1));
    let drained = CancellationToken::new();
    let writer_task = tokio::spawn(dispatch(client.clone(), receiver, drained.clone()));
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    let goodbye: Goodbye = Box::new(move || {
        async move {
            // Let what the agent wrote last reach the server first.
            let _ = tokio::time::timeout(grace, drained.cancelled()).await;
            client.end_session(grace).await;
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

/// One upstream session.
struct Client {
    /// The route's URL and shared HTTP client.
    route: Arc<RouteClient>,
    /// The configured headers (values sensitive, never logged).
    headers: HeaderMap,
    link: Arc<Link>,
    max_message_bytes: usize,
    state: Mutex<State>,
    /// 2026-07-28: how to cancel each request in flight (by id key).
    cancels: Mutex<HashMap<String, CancellationToken>>,
}

#[derive(Debug, Default)]
struct State {
    /// The server's session id.
    session: Option<HeaderValue>,
    /// The version `initialize` negotiated.
    version: Option<String>,
    /// An `initialize` was sent: the session era.
    initializing: bool,
    /// The last version a stateless request's `_meta` named.
    stateless_version: Option<String>,
    /// The standalone GET stream was started.
    listening: bool,
}

/// How a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Session era; `with_session` when the session id went with it.
    Session { with_session: bool },
    /// 2026-07-28.
    Stateless,
}

/// Where a response or event stream ended.
#[derive(Debug, PartialEq, Eq)]
enum StreamEnd {
    /// Every awaited response arrived.
    Answered,
    /// The stream ended or broke first (why).
    Dropped(String),
    /// The connection was closed.
    Closed,
}

/// The writer side: reads the relay's frames in order and posts them.
async fn dispatch(
    client: Arc<Client>,
    mut receiver: FrameReceiver,
    drained: CancellationToken,
) -> std::io::Result<()> {
    let mut initializing: Option<oneshot::Receiver<()>> = None;
    loop {
        let frame = tokio::select! {
            biased;
            _ = client.link.closed() => break,
            frame = receiver.recv() => frame,
        };
        let Some(frame) = frame else { break };
        let out = Outgoing::peek(&frame);
        if !out.only_responses {
            if let Some(gate) = initializing.take() {
                tokio::select! {
                    _ = client.link.closed() => break,
                    _ = gate => {}
                }
            }
        }
        let (headers, mode) = client.request_headers(&out, &frame);
        if mode == Mode::Stateless {
            if let Some(target) = &out.cancels {
                client.cancel(target);
                continue;
            }
        }
        if out.requests.is_empty() {
            client.post_in_order(frame, &out, headers, mode).await;
            continue;
        }
        let gate = if out.initialize {
            let (tx, rx) = oneshot::channel();
            initializing = Some(rx);
            Some(tx)
        } else {
            None
        };
        client
            .clone()
            .start_request(frame, out, headers, mode, gate);
    }
    drained.cancel();
    Ok(())
}

impl Client {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cancels a 2026-07-28 request by closing its response stream.
    fn cancel(&self, target: &RequestId) {
        let token = self
            .cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id_key(target));
        match token {
            Some(token) => token.cancel(),
            None => {
                tracing::debug!(route = %self.route.target.route, "cancellation for no request in flight")
            }
        }
    }

    /// Posts a frame of notifications and responses, returning once the
    /// server accepted it (its body, if it has one, is read on its own).
    async fn post_in_order(
        self: &Arc<Self>,
        frame: Bytes,
        out: &Outgoing,
        headers: HeaderMap,
        mode: Mode,
    ) {
        let post = self.route.http.post(self.route.target.url.clone());
        let send = self.route.send(post.headers(headers).body(frame));
        let response = tokio::select! {
            response = send => response,
            _ = self.link.closed() => return,
        };
        self.route.note(&response);
        let response = match response {
            Ok(response) => response,
            Err(err) => {
                tracing::warn!(
                    route = %self.route.target.route,
                    error = %describe_reqwest(err),
                    "a notification or response could not be delivered upstream"
                );
                return;
            }
        };
        let status = response.status();
        if status == StatusCode::NOT_FOUND && mode == (Mode::Session { with_session: true }) {
            self.expire();
            return;
        }
        if !status.is_success() {
            tracing::warn!(
                route = %self.route.target.route,
                %status,
                "the upstream refused a notification or response"
            );
            return;
        }
        if content_type(&response).is_some() {
            let client = self.clone();
            self.link.spawn(async move {
                let mut pending = Pending::default();
                client.read_reply(response, &mut pending, mode).await;
            });
        }
        if out.initialized && matches!(mode, Mode::Session { .. }) {
            self.start_listening();
        }
    }

    /// Posts a frame holding requests on its own task.
    fn start_request(
        self: Arc<Self>,
        frame: Bytes,
        out: Outgoing,
        headers: HeaderMap,
        mode: Mode,
        gate: Option<oneshot::Sender<()>>,
    ) {
        let mut pending = Pending::new(&out, gate);
        let link = self.link.clone();
        if mode != Mode::Stateless {
            link.spawn(async move { self.request(frame, headers, mode, &mut pending).await });
            return;
        }
        let token = CancellationToken::new();
        let keys: Vec<String> = pending
            .requests
            .iter()
            .map(|(key, _)| key.clone())
            .collect();
        {
            let mut cancels = self.cancels.lock().unwrap_or_else(|e| e.into_inner());
            for key in &keys {
                cancels.insert(key.clone(), token.clone());
            }
        }
        link.spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = self.request(frame, headers, mode, &mut pending) => {}
            }
            let mut cancels = self.cancels.lock().unwrap_or_else(|e| e.into_inner());
            for key in &keys {
                cancels.remove(key);
            }
        });
    }

    /// One request exchange: POST, then the JSON body or the event stream
    /// (resumed if it drops), then errors for whatever stayed unanswered.
    async fn request(&self, frame: Bytes, headers: HeaderMap, mode: Mode, pending: &mut Pending) {
        let post = self.route.http.post(self.route.target.url.clone());
        let sent = self.route.send(post.headers(headers).body(frame)).await;
        self.route.note(&sent);
        let response = match sent {
            Ok(response) => response,
            Err(err) => {
                let reason = format!(
                    "the upstream server could not be reached: {}",
                    describe_reqwest(err)
                );
                self.fail(pending, &reason, None).await;
                return;
            }
        };
        if pending.initialize.is_some() {
            if let Some(session) = response.headers().get(&SESSION_ID) {
                self.lock().session = Some(session.clone());
            }
        }
        let status = response.status();
        if status == StatusCode::NOT_FOUND && mode == (Mode::Session { with_session: true }) {
            self.expire();
            return;
        }
        if !status.is_success() {
            self.refuse(response, pending).await;
            return;
        }
        match self.read_reply(response, pending, mode).await {
            StreamEnd::Answered | StreamEnd::Closed => {}
            StreamEnd::Dropped(reason) => self.fail(pending, &reason, None).await,
        }
    }

    /// Reads a successful POST's body: one JSON message (or batch), or an
    /// event stream, resumed while requests wait and the server allows it.
    async fn read_reply(&self, response: Response, pending: &mut Pending, mode: Mode) -> StreamEnd {
        match content_type(&response).as_deref() {
            Some(JSON) => {
                let body = match self.read_body(response, self.max_message_bytes).await {
                    Ok(Some(body)) => body,
                    Ok(None) => {
                        pending.oversized = true;
                        self.link.emit_too_long().await;
                        return StreamEnd::Dropped(self.too_long());
                    }
                    Err(reason) => return StreamEnd::Dropped(reason),
                };
                if body.iter().all(u8::is_ascii_whitespace) {
                    return self.unanswered(pending, "the upstream answered with an empty body");
                }
                if !self.deliver(body, pending).await {
                    return StreamEnd::Closed;
                }
                self.unanswered(pending, "the upstream's reply did not answer this request")
            }
            Some(EVENT_STREAM) => self.follow(response, pending, mode).await,
            _ if pending.is_empty() => StreamEnd::Answered,
            None => self.unanswered(
                pending,
                "the upstream accepted the request but sent no reply",
            ),
            Some(other) => {
                let reason = format!("the upstream replied with unexpected content type {other:?}");
                StreamEnd::Dropped(reason)
            }
        }
    }

    /// Whether `response` says the session this client holds is gone.
    fn session_gone(&self, response: &Response) -> bool {
        response.status() == StatusCode::NOT_FOUND && self.lock().session.is_some()
    }

    /// The server ended the session: the upstream closes.
    fn expire(&self) {
        self.link.close(
            "the server ended the MCP session (HTTP 404 for its session id); a new session needs a new initialize",
        );
    }

    /// Ends the session with DELETE (a 405 means the server keeps it).
    async fn end_session(&self, grace: Duration) {
        if self.lock().session.is_none() {
            return;
        }
        let headers = self.session_headers(None);
        let delete = self.route.http.delete(self.route.target.url.clone());
        let delete = self.route.send(delete.headers(headers));
        match tokio::time::timeout(grace.max(MIN_RETRY), delete).await {
            Ok(Ok(response)) if response.status().is_success() => {}
            Ok(Ok(response)) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {}
            Ok(Ok(response)) => {
                tracing::debug!(route = %self.route.target.route, status = %response.status(), "ending the session failed")
            }
            Ok(Err(err)) => {
                tracing::debug!(route = %self.route.target.route, error = %describe_reqwest(err), "ending the session failed")
            }
            Err(_) => {
                tracing::debug!(route = %self.route.target.route, "ending the session timed out")
            }
        }
    }
}

/// The response's media type, lower-case, without parameters.
fn content_type(response: &Response) -> Option<String> {
    let value = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or_default().trim();
    (!essence.is_empty()).then(|| essence.to_ascii_lowercase())
}

fn is_event_stream(response: &Response) -> bool {
    response.status().is_success() && content_type(response).as_deref() == Some(EVENT_STREAM)
}
