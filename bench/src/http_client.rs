//! A minimal MCP Streamable HTTP client: `initialize` (the session id comes
//! back in `Mcp-Session-Id`), `notifications/initialized`, then `tools/call`
//! echo requests in a closed loop.
//!
//! Load uses one keep-alive HTTP/1.1 connection per in-flight slot: each
//! slot POSTs a call, reads the whole answer (a JSON body, or an SSE stream
//! that ends after the response), and POSTs the next. No pipelining: the
//! gateways compared here answer a POST with a stream, and HTTP/1.1
//! pipelining would serialise those streams on one connection anyway.

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpStream;

use crate::client::PhaseRun;

/// The MCP revision the client asks for (every gateway here speaks it).
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How long one HTTP exchange may take before the run is declared failed.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a Streamable HTTP endpoint is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub path: String,
}

/// An initialized MCP session.
#[derive(Debug, Clone)]
pub struct Session {
    pub endpoint: Endpoint,
    /// `Mcp-Session-Id` from the `initialize` answer (absent if the server
    /// is stateless).
    pub id: Option<HeaderValue>,
}

/// One keep-alive HTTP/1.1 connection, reopened when the server has
/// closed it (a server may close idle keep-alive connections; the MCP
/// session lives on, named by its header).
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    addr: SocketAddr,
    /// Times the connection was found closed and opened again.
    pub reconnects: usize,
}

/// `Authorization` sent with every request, when the gateway is set up to
/// authenticate the caller (`--policy rego`: the policy decides by role).
pub static BEARER: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();

/// What the client reads from each JSON-RPC message.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

impl Connection {
    /// Opens a connection to `addr` (`TCP_NODELAY`, as every gateway sets).
    pub async fn open(addr: SocketAddr) -> Result<Connection, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|err| format!("connect {addr}: {err}"))?;
        stream
            .set_nodelay(true)
            .map_err(|err| format!("TCP_NODELAY: {err}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|err| format!("HTTP handshake with {addr}: {err}"))?;
        tokio::spawn(connection);
        let host = HeaderValue::from_str(&addr.to_string())
            .map_err(|err| format!("host header: {err}"))?;
        Ok(Connection {
            sender,
            host,
            addr,
            reconnects: 0,
        })
    }

    /// POSTs `body` and returns the status, the session id header and the
    /// whole answer body.
    async fn post(
        &mut self,
        path: &str,
        session: Option<&HeaderValue>,
        body: Bytes,
    ) -> Result<(StatusCode, Option<HeaderValue>, bool, Bytes), String> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(HOST, self.host.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(token) = BEARER.get() {
            request = request.header(AUTHORIZATION, token.clone());
        }
        if let Some(id) = session {
            request = request
                .header("mcp-session-id", id.clone())
                .header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|err| format!("building a request: {err}"))?;
        if self.sender.ready().await.is_err() {
            let reconnects = self.reconnects + 1;
            *self = Connection::open(self.addr).await?;
            self.reconnects = reconnects;
        }
        let exchange = async {
            self.sender
                .ready()
                .await
                .map_err(|err| format!("connection closed: {err}"))?;
            let response = self
                .sender
                .send_request(request)
                .await
                .map_err(|err| format!("POST {path}: {err}"))?;
            let status = response.status();
            let session_id = response.headers().get("mcp-session-id").cloned();
            let sse = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|err| format!("reading the answer to POST {path}: {err}"))?
                .to_bytes();
            Ok((status, session_id, sse, body))
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("POST {path}: no answer within {EXCHANGE_TIMEOUT:?}"))?
    }

    /// Sends one JSON-RPC request and returns whether its answer was a
    /// result that is not `isError`.
    pub async fn request(
        &mut self,
        session: &Session,
        id: u64,
        body: Bytes,
    ) -> Result<bool, String> {
        let (status, _, sse, answer) = self
            .post(&session.endpoint.path, session.id.as_ref(), body)
            .await?;
        if status != StatusCode::OK {
            return Err(format!(
                "request {id}: HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        find_answer(&answer, sse, id).ok_or_else(|| {
            format!(
                "no answer to id {id} in: {}",
                String::from_utf8_lossy(&answer)
            )
        })
    }
}

impl Session {
    /// `initialize` and `notifications/initialized` on `connection`.
    pub async fn initialize(
        endpoint: &Endpoint,
        connection: &mut Connection,
        client_name: &str,
    ) -> Result<Session, String> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"{client_name}","version":"0.1.0"}}}}}}"#
        );
        let (status, id, sse, answer) = connection
            .post(&endpoint.path, None, Bytes::from(body))
            .await?;
        if status != StatusCode::OK || find_answer(&answer, sse, 0) != Some(true) {
            return Err(format!(
                "initialize: HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        let session = Session {
            endpoint: endpoint.clone(),
            id,
        };
        let (status, _, _, answer) = connection
            .post(
                &endpoint.path,
                session.id.as_ref(),
                Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            )
            .await?;
        if !status.is_success() {
            return Err(format!(
                "notifications/initialized: HTTP {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        Ok(session)
    }
}

/// Builds `tools/call` echo requests of about `request_bytes` bytes.
#[derive(Debug, Clone)]
pub struct EchoCall {
    argument: String,
    filler: String,
}

impl EchoCall {
    /// Calls of `echo {argument: "xxx…"}` padded to `request_bytes`.
    pub fn new(argument: &str, request_bytes: usize) -> EchoCall {
        let mut call = EchoCall {
            argument: argument.to_owned(),
            filler: String::new(),
        };
        let base = call.body(u64::from(u32::MAX)).len();
        call.filler = "x".repeat(request_bytes.saturating_sub(base));
        call
    }

    /// The request with JSON-RPC id `id`.
    pub fn body(&self, id: u64) -> Bytes {
        Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"{}":"{}"}}}}}}"#,
            self.argument, self.filler
        ))
    }
}

/// `calls` echo calls over `connections` (one in flight on each), ids from
/// `first_id`; every round trip is timed. Connections are opened before the
/// clock starts.
pub async fn run_phase(
    sessions: &[Session],
    connections: &mut [Connection],
    echo: &EchoCall,
    calls: usize,
    first_id: u64,
) -> Result<PhaseRun, String> {
    let next = Cell::new(0usize);
    let start = Instant::now();
    let slots = connections
        .iter_mut()
        .enumerate()
        .map(|(slot, connection)| {
            let session = &sessions[slot % sessions.len()];
            let next = &next;
            async move {
                let mut latencies = Vec::with_capacity(calls / sessions.len().max(1) + 1);
                let mut errors = 0usize;
                loop {
                    let index = next.get();
                    if index >= calls {
                        return Ok::<_, String>((latencies, errors));
                    }
                    next.set(index + 1);
                    let id = first_id + index as u64;
                    let sent = Instant::now();
                    let ok = connection.request(session, id, echo.body(id)).await?;
                    latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    if !ok {
                        errors += 1;
                    }
                }
            }
        });
    let outcomes = futures_util::future::join_all(slots).await;
    let wall = start.elapsed();
    let mut latencies_ns = Vec::with_capacity(calls);
    let mut errors = 0;
    for outcome in outcomes {
        let (latencies, slot_errors) = outcome?;
        latencies_ns.extend(latencies);
        errors += slot_errors;
    }
    Ok(PhaseRun {
        latencies_ns,
        wall,
        errors,
    })
}

/// Whether the answer to `id` in `body` (JSON, or SSE `data:` lines) is a
/// result that is not `isError`; `None` when there is no answer to `id`.
fn find_answer(body: &[u8], sse: bool, id: u64) -> Option<bool> {
    if sse {
        body.split(|&b| b == b'\n')
            .filter_map(|line| line.strip_prefix(b"data:"))
            .find_map(|data| answer_in(data.trim_ascii(), id))
    } else {
        answer_in(body, id)
    }
}

fn answer_in(message: &[u8], id: u64) -> Option<bool> {
    answer_of(message).and_then(|(got, ok)| (got == id).then_some(ok))
}

/// The numeric id of the answer `message` carries, and whether it is a
/// result that is not `isError`; `None` for anything but an answer.
pub fn answer_of(message: &[u8]) -> Option<(u64, bool)> {
    let peek: Peek<'_> = serde_json::from_slice(message).ok()?;
    let id: u64 = peek.id?.get().parse().ok()?;
    if peek.result.is_none() && peek.error.is_none() {
        return None;
    }
    let ok = peek.error.is_none()
        && peek
            .result
            .is_some_and(|result| !result.get().contains(r#""isError":true"#));
    Some((id, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_json_and_sse() {
        let json = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        assert_eq!(find_answer(json, false, 7), Some(true));
        assert_eq!(find_answer(json, false, 8), None);
        let sse = b"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                    data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":true}}\n\n";
        assert_eq!(find_answer(sse, true, 7), Some(false));
        let error = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}"#;
        assert_eq!(find_answer(error, false, 3), Some(false));
    }

    #[test]
    fn an_answer_is_known_by_its_id_and_a_notification_is_not_one() {
        let ok = br#"{"jsonrpc":"2.0","id":12,"result":{"content":[]}}"#;
        assert_eq!(answer_of(ok), Some((12, true)));
        let tool_error = br#"{"jsonrpc":"2.0","id":13,"result":{"isError":true}}"#;
        assert_eq!(answer_of(tool_error), Some((13, false)));
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert_eq!(answer_of(progress), None);
        let request = br#"{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage"}"#;
        assert_eq!(answer_of(request), None);
    }

    #[test]
    fn echo_calls_have_the_asked_size() {
        let echo = EchoCall::new("text", 200);
        assert_eq!(echo.body(u64::from(u32::MAX)).len(), 200);
    }
}
