//! Small MCP servers on 127.0.0.1 for the network upstream tests: a
//! Streamable HTTP server (session era and 2026-07-28), a legacy HTTP+SSE
//! server and a WebSocket server, plus a throwaway PKI for their TLS
//! variants.
//!
//! Each server answers with hand-written bytes (odd spacing, escapes,
//! unknown fields, big numbers) so a test can check the client forwards
//! them exactly, and records what it received, headers included. The
//! Streamable HTTP server can refuse chosen `Authorization` values with
//! 401, as a server does with a revoked token.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::handshake::server::{
    Request as WsRequest, Response as WsResponse,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::either::Either;

/// The version the session-era server negotiates.
pub const SESSION_VERSION: &str = "2025-11-25";

/// One request a server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// GET, POST, DELETE.
    pub method: Method,
    /// Path and query.
    pub uri: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, exactly.
    pub body: Bytes,
}

impl Seen {
    /// A header as text ("" when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    /// The JSON-RPC method of the body, if any.
    pub fn rpc_method(&self) -> Option<String> {
        peek(&self.body).method
    }
}

#[derive(Deserialize, Default)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

struct Peeked {
    id: Option<String>,
    method: Option<String>,
    params: Option<String>,
    tool: Option<String>,
}

fn peek(body: &[u8]) -> Peeked {
    let envelope: Envelope<'_> = serde_json::from_slice(body).unwrap_or_default();
    let tool = envelope.params.and_then(|p| {
        serde_json::from_str::<serde_json::Value>(p.get())
            .ok()?
            .get("name")?
            .as_str()
            .map(str::to_owned)
    });
    Peeked {
        id: envelope.id.map(|id| id.get().to_owned()),
        method: envelope.method,
        params: envelope.params.map(|p| p.get().to_owned()),
        tool,
    }
}

/// A running server; stopped when dropped.
struct Running {
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------
// TLS
// ---------------------------------------------------------------------

/// A CA (as a PEM file) and a server certificate for `localhost` and
/// `127.0.0.1` signed by it.
pub struct TestPki {
    _dir: tempfile::TempDir,
    /// The CA certificate, PEM.
    pub ca_cert: PathBuf,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl TestPki {
    /// A fresh CA and server certificate.
    pub fn generate() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server.signed_by(&server_key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_cert = dir.path().join("ca.pem");
        std::fs::write(&ca_cert, ca.pem()).unwrap();
        Self {
            _dir: dir,
            ca_cert,
            server_cert: server.der().clone(),
            server_key: server_key.serialize_der(),
        }
    }

    /// A TLS acceptor offering `alpn`.
    pub fn acceptor(&self, alpn: &[&[u8]]) -> TlsAcceptor {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.server_cert.clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsAcceptor::from(Arc::new(config))
    }
}

struct Listener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
}

impl axum::serve::Listener for Listener {
    type Io = Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            let Some(acceptor) = &self.tls else {
                return (Either::Left(tcp), addr);
            };
            if let Ok(stream) = acceptor.accept(tcp).await {
                return (Either::Right(stream), addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

async fn serve(router: Router, tls: Option<TlsAcceptor>) -> (u16, Running) {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        axum::serve(Listener { tcp, tls }, router).await.unwrap();
    });
    (port, Running { task })
}

/// An event-stream response whose events are written through the sender;
/// the stream ends when every sender is dropped.
fn event_stream() -> (mpsc::Sender<Bytes>, Response) {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let response = Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .unwrap();
    (tx, response)
}

fn json_response(body: String) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

// ---------------------------------------------------------------------
// Streamable HTTP
// ---------------------------------------------------------------------

/// Exact bytes the Streamable HTTP server answers with (`ID` is replaced
/// by the request's id, as it was spelled).
pub mod replies {
    /// The `initialize` result.
    pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"test-server","version":"1"},"futureField":  1.0E+2}}"#;
    /// The `tools/list` result.
    pub const TOOLS: &str = r#"{"jsonrpc":"2.0","id":ID, "result":{"tools":[{"name":"echo","x-extra":"\u00e9\/","big":12345678901234567890123}]}}"#;
    /// A progress notification sent before a streamed result.
    pub const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1E0}}"#;
    /// A streamed `tools/call` result.
    pub const CALLED: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"done \ud83d\ude00"}],"isError":false}}"#;
    /// The server's request on the standalone stream.
    pub const ROOTS: &str = r#"{"jsonrpc":"2.0","id":"srv-1","method":"roots/list"}"#;
    /// The notification sent on the reopened standalone stream.
    pub const LOG: &str = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"reconnected"}}"#;
    /// A 2026-07-28 answer.
    pub const DISCOVERED: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","supportedVersions":["2026-07-28"]}}"#;
    /// A 2026-07-28 `tools/list` result: `query` mirrors `region` into
    /// `Mcp-Param-Region`.
    pub const MODERN_TOOLS: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","tools":[{"name":"query","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"sql":{"type":"string"}}}},{"name":"progress","inputSchema":{"type":"object"}}]}}"#;
    /// A 2026-07-28 `tools/call` result.
    pub const MODERN_CALLED: &str = r#"{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","content":[{"type":"text","text":"queried"}]}}"#;
    /// A 2026-07-28 server's answer to a method it does not serve (HTTP 404).
    pub const NO_METHOD: &str =
        r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32601,"message":"Method not found"}}"#;
    /// A JSON-RPC error sent with HTTP 400.
    pub const REFUSED: &str =
        r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32020,"message":"header mismatch"}}"#;
}

fn fill(template: &str, id: &Option<String>) -> String {
    template.replace("ID", id.as_deref().unwrap_or("null"))
}

#[derive(Default)]
struct HttpState {
    seen: Mutex<Vec<Seen>>,
    session: Mutex<Option<String>>,
    sessions_made: AtomicUsize,
    next_event: AtomicU64,
    /// Events kept for replay: (id, stream name, data).
    events: Mutex<Vec<(u64, String, String)>>,
    standalone_opened: AtomicUsize,
    /// The open standalone stream, kept so it stays open.
    standalone: Mutex<Option<mpsc::Sender<Bytes>>>,
    no_get: AtomicBool,
    hung_up: AtomicUsize,
    /// `Authorization` values answered with 401.
    refused_authorizations: Mutex<Vec<String>>,
}

impl HttpState {
    fn event(&self, stream: &str, data: &str) -> (u64, Bytes) {
        let id = self.next_event.fetch_add(1, Ordering::SeqCst) + 1;
        self.events
            .lock()
            .unwrap()
            .push((id, stream.to_owned(), data.to_owned()));
        (id, Bytes::from(format!("id: {id}\ndata: {data}\n\n")))
    }
}

/// A Streamable HTTP MCP server at `/mcp`.
///
/// - `initialize` is answered in JSON with a new `Mcp-Session-Id`; every
///   later request must carry it (else 400, or 404 once expired) and
///   `MCP-Protocol-Version: 2025-11-25` (else 400). Requests carrying
///   `Mcp-Method` are served statelessly (2026-07-28).
/// - Notifications and responses get 202.
/// - `tools/list` is answered in JSON; `tools/call` as an event stream
///   whose shape the tool name picks: `stream` (progress, then result),
///   `drop` (a priming event with `retry`, progress, then the connection
///   closes; the result waits for a GET with `Last-Event-ID`), `slow`
///   (the result after 400 ms), `fail` (HTTP 500), `refuse` (HTTP 400
///   with a JSON-RPC error for the request); statelessly, `hang` opens a
///   stream that never answers, `tools/list` lists `query` (with an
///   `x-mcp-header` argument) and `progress`, `tools/call` of `query` is
///   refused (400, -32020) unless `Mcp-Param-Region` mirrors its `region`,
///   else answered in JSON and of `progress` as a stream (progress, then the
///   result), and `nope/*` methods get 404 with -32601; anything else
///   gets the `server/discover` answer.
/// - GET opens the standalone stream: the first one sends `roots/list` and
///   closes; a reopened one sends a log notification and stays open. With
///   `Last-Event-ID` it first replays the rest of that event's stream.
/// - DELETE ends the session.
pub struct StreamableServer {
    /// `http://127.0.0.1:PORT/mcp` (or `https://localhost:PORT/mcp`).
    pub url: String,
    state: Arc<HttpState>,
    _running: Running,
}

impl StreamableServer {
    /// Serves plain HTTP.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Serves HTTPS with `pki`'s certificate (HTTP/2 and HTTP/1.1).
    pub async fn start_tls(pki: &TestPki) -> Self {
        Self::start_with(Some(pki.acceptor(&[b"h2", b"http/1.1"]))).await
    }

    async fn start_with(tls: Option<TlsAcceptor>) -> Self {
        let state = Arc::new(HttpState::default());
        let router = Router::new()
            .route("/mcp", any(streamable))
            .with_state(state.clone());
        let host = if tls.is_some() {
            "https://localhost"
        } else {
            "http://127.0.0.1"
        };
        let (port, running) = serve(router, tls).await;
        Self {
            url: format!("{host}:{port}/mcp"),
            state,
            _running: running,
        }
    }

    /// Everything received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// The current session id.
    pub fn session(&self) -> Option<String> {
        self.state.session.lock().unwrap().clone()
    }

    /// Forgets the session: its id now gets 404.
    pub fn expire_session(&self) {
        *self.state.session.lock().unwrap() = Some("expired-and-replaced".into());
    }

    /// Answers a GET without `Last-Event-ID` (the standalone stream) with
    /// 405 from now on; resumptions are still served.
    pub fn refuse_get(&self) {
        self.state.no_get.store(true, Ordering::SeqCst);
    }

    /// Answers every request carrying `Authorization: <value>` with 401
    /// from now on, as a server does with a revoked or expired token.
    pub fn refuse_authorization(&self, value: &str) {
        self.state
            .refused_authorizations
            .lock()
            .unwrap()
            .push(value.to_owned());
    }

    /// How many never-answered stateless streams the client closed.
    pub fn hung_up(&self) -> usize {
        self.state.hung_up.load(Ordering::SeqCst)
    }

    /// How many standalone streams were opened.
    pub fn standalone_opened(&self) -> usize {
        self.state.standalone_opened.load(Ordering::SeqCst)
    }
}

async fn streamable(
    State(state): State<Arc<HttpState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        uri: uri.to_string(),
        headers: headers.clone(),
        body: body.clone(),
    });
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok());
    if authorization.is_some_and(|value| {
        state
            .refused_authorizations
            .lock()
            .unwrap()
            .iter()
            .any(|refused| refused == value)
    }) {
        return (StatusCode::UNAUTHORIZED, "invalid token").into_response();
    }
    let stateless = headers.contains_key("mcp-method");
    let message = peek(&body);
    if method == Method::POST && message.method.as_deref() == Some("initialize") {
        let n = state.sessions_made.fetch_add(1, Ordering::SeqCst) + 1;
        let session = format!("session-{n}");
        *state.session.lock().unwrap() = Some(session.clone());
        let mut response = json_response(fill(replies::INITIALIZE, &message.id));
        response
            .headers_mut()
            .insert("mcp-session-id", session.parse().unwrap());
        return response;
    }
    if stateless {
        if message.tool.as_deref() == Some("hang") {
            // Never answers; counts the client closing the stream.
            let (tx, response) = event_stream();
            let state = state.clone();
            tokio::spawn(async move {
                tx.closed().await;
                state.hung_up.fetch_add(1, Ordering::SeqCst);
            });
            return response;
        }
        if message.id.is_none() {
            return StatusCode::ACCEPTED.into_response();
        }
        return match (message.method.as_deref(), message.tool.as_deref()) {
            (Some("tools/list"), _) => json_response(fill(replies::MODERN_TOOLS, &message.id)),
            (Some("tools/call"), Some("query")) if !region_header_agrees(&headers, &message) => {
                let mut response = json_response(fill(replies::REFUSED, &message.id));
                *response.status_mut() = StatusCode::BAD_REQUEST;
                response
            }
            (Some("tools/call"), Some("query")) => {
                json_response(fill(replies::MODERN_CALLED, &message.id))
            }
            (Some("tools/call"), Some("progress")) => {
                let (tx, response) = event_stream();
                let result = fill(replies::MODERN_CALLED, &message.id);
                tokio::spawn(async move {
                    let progress = format!("data: {}\n\n", replies::PROGRESS);
                    let _ = tx.send(Bytes::from(progress)).await;
                    let _ = tx.send(Bytes::from(format!("data: {result}\n\n"))).await;
                });
                response
            }
            (Some(method), _) if method.starts_with("nope/") => {
                let mut response = json_response(fill(replies::NO_METHOD, &message.id));
                *response.status_mut() = StatusCode::NOT_FOUND;
                response
            }
            _ => json_response(fill(replies::DISCOVERED, &message.id)),
        };
    }
    let current = state.session.lock().unwrap().clone();
    match (headers.get("mcp-session-id"), &current) {
        (None, _) => return (StatusCode::BAD_REQUEST, "missing session").into_response(),
        (Some(got), Some(current)) if got == current.as_str() => {}
        _ => return (StatusCode::NOT_FOUND, "unknown session").into_response(),
    }
    if headers
        .get("mcp-protocol-version")
        .is_none_or(|v| v != SESSION_VERSION)
    {
        return (StatusCode::BAD_REQUEST, "bad protocol version").into_response();
    }
    match method {
        Method::POST => post_message(state, message).await,
        Method::GET => open_stream(state, &headers).await,
        Method::DELETE => {
            *state.session.lock().unwrap() = None;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

/// Whether `Mcp-Param-Region` mirrors the `query` call's `region`
/// argument (decoding `=?base64?…?=`), as a 2026-07-28 server checks.
fn region_header_agrees(headers: &HeaderMap, message: &Peeked) -> bool {
    use base64::Engine;
    let params: serde_json::Value =
        serde_json::from_str(message.params.as_deref().unwrap_or("null")).unwrap_or_default();
    let region = params["arguments"]["region"].as_str().map(str::to_owned);
    let header = headers.get("mcp-param-region").map(|value| {
        let text = value.to_str().unwrap_or_default();
        match text
            .strip_prefix("=?base64?")
            .and_then(|rest| rest.strip_suffix("?="))
        {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .unwrap_or_default(),
            None => text.to_owned(),
        }
    });
    header == region
}

async fn post_message(state: Arc<HttpState>, message: Peeked) -> Response {
    if message.id.is_none() || message.method.is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    let id = message.id.clone();
    match message.method.as_deref() {
        Some("tools/list") => json_response(fill(replies::TOOLS, &id)),
        Some("tools/call") => {
            let tool = message.tool.unwrap_or_default();
            match tool.as_str() {
                "fail" => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
                "refuse" => {
                    let mut response = json_response(fill(replies::REFUSED, &id));
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    response
                }
                _ => call_stream(state, &tool, &id),
            }
        }
        _ => json_response(format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
            id.unwrap()
        )),
    }
}

fn call_stream(state: Arc<HttpState>, tool: &str, id: &Option<String>) -> Response {
    let (tx, response) = event_stream();
    let stream = format!("post-{}", id.as_deref().unwrap_or(""));
    let result = fill(replies::CALLED, id);
    let tool = tool.to_owned();
    tokio::spawn(async move {
        match tool.as_str() {
            "drop" => {
                let (prime, _) = state.event(&stream, "");
                let prime = Bytes::from(format!("id: {prime}\nretry: 30\ndata:\n\n"));
                let _ = tx.send(prime).await;
                let (_, progress) = state.event(&stream, replies::PROGRESS);
                let _ = tx.send(progress).await;
                // Kept for the GET that resumes this stream.
                state.event(&stream, &result);
                drop(tx);
            }
            "slow" => {
                tokio::time::sleep(Duration::from_millis(400)).await;
                let (_, event) = state.event(&stream, &result);
                let _ = tx.send(event).await;
            }
            _ => {
                let _ = tx.send(Bytes::from_static(b": a comment\n\n")).await;
                let (_, progress) = state.event(&stream, replies::PROGRESS);
                let _ = tx.send(progress).await;
                let (_, event) = state.event(&stream, &result);
                let _ = tx.send(event).await;
            }
        }
    });
    response
}

async fn open_stream(state: Arc<HttpState>, headers: &HeaderMap) -> Response {
    let last: Option<u64> = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    if state.no_get.load(Ordering::SeqCst) && last.is_none() {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let (tx, response) = event_stream();
    let replay_stream = last.and_then(|last| {
        let events = state.events.lock().unwrap();
        events
            .iter()
            .find(|(id, _, _)| *id == last)
            .map(|(_, stream, _)| stream.clone())
    });
    if let (Some(last), Some(stream)) = (last, replay_stream.clone()) {
        let replay: Vec<_> = state
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, s, data)| *id > last && *s == stream && !data.is_empty())
            .map(|(id, _, data)| Bytes::from(format!("id: {id}\ndata: {data}\n\n")))
            .collect();
        for event in replay {
            let _ = tx.send(event).await;
        }
        if stream.starts_with("post-") {
            return response;
        }
    }
    let opened = state.standalone_opened.fetch_add(1, Ordering::SeqCst) + 1;
    if opened == 1 {
        let (_, event) = state.event("standalone", replies::ROOTS);
        let _ = tx.send(event).await;
        return response;
    }
    let (_, event) = state.event("standalone", replies::LOG);
    let _ = tx.send(event).await;
    *state.standalone.lock().unwrap() = Some(tx);
    response
}

// ---------------------------------------------------------------------
// Legacy HTTP+SSE
// ---------------------------------------------------------------------

#[derive(Default)]
struct SseState {
    seen: Mutex<Vec<Seen>>,
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
}

/// A legacy HTTP+SSE server: `GET /sse` opens the stream (first event
/// `endpoint` naming `/messages?sessionId=s1`), `POST /messages` takes
/// messages (202) and answers requests on the stream with
/// `{"jsonrpc":"2.0","id":ID,"result":{"echo":PARAMS}}`, both copied
/// byte for byte.
pub struct LegacySseServer {
    /// `http://127.0.0.1:PORT/sse`.
    pub url: String,
    state: Arc<SseState>,
    _running: Running,
}

impl LegacySseServer {
    /// Starts the server.
    pub async fn start() -> Self {
        let state = Arc::new(SseState::default());
        let router = Router::new()
            .route("/sse", get(legacy_stream))
            .route("/messages", post(legacy_post))
            .with_state(state.clone());
        let (port, running) = serve(router, None).await;
        Self {
            url: format!("http://127.0.0.1:{port}/sse"),
            state,
            _running: running,
        }
    }

    /// Everything received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Sends raw event-stream bytes.
    pub async fn push(&self, raw: &str) {
        let tx = self.state.stream.lock().unwrap().clone();
        tx.expect("stream open")
            .send(Bytes::from(raw.to_owned()))
            .await
            .unwrap();
    }

    /// Ends the event stream.
    pub fn close_stream(&self) {
        self.state.stream.lock().unwrap().take();
    }
}

async fn legacy_stream(
    State(state): State<Arc<SseState>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    state.seen.lock().unwrap().push(Seen {
        method: Method::GET,
        uri: uri.to_string(),
        headers,
        body: Bytes::new(),
    });
    let (tx, response) = event_stream();
    tx.send(Bytes::from_static(
        b": hello\n\nevent: endpoint\ndata: /messages?sessionId=s1\n\n",
    ))
    .await
    .unwrap();
    *state.stream.lock().unwrap() = Some(tx);
    response
}

async fn legacy_post(
    State(state): State<Arc<SseState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.seen.lock().unwrap().push(Seen {
        method: Method::POST,
        uri: uri.to_string(),
        headers,
        body: body.clone(),
    });
    if uri.query() != Some("sessionId=s1") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let message = peek(&body);
    if let (Some(id), Some(_)) = (&message.id, &message.method) {
        let params = message.params.unwrap_or_else(|| "null".into());
        let reply = format!(
            "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"echo\":{params}}}}}\n\n"
        );
        let tx = state.stream.lock().unwrap().clone();
        if let Some(tx) = tx {
            let _ = tx.send(Bytes::from(reply)).await;
        }
    }
    StatusCode::ACCEPTED.into_response()
}

// ---------------------------------------------------------------------
// WebSocket
// ---------------------------------------------------------------------

#[derive(Default)]
struct WsState {
    upgrade_headers: Mutex<Option<HeaderMap>>,
    received: Mutex<Vec<String>>,
    pongs: AtomicUsize,
}

/// A WebSocket MCP server: selects the subprotocol `mcp` (unless made not
/// to), pings the client, sends one binary message, then answers each
/// request with `{"jsonrpc":"2.0","id":ID,"result":{"echo":PARAMS}}`
/// (copied byte for byte); a request for `close` gets a close frame.
pub struct WsServer {
    /// `ws://127.0.0.1:PORT/mcp` (or `wss://localhost:PORT/mcp`).
    pub url: String,
    state: Arc<WsState>,
    _running: Running,
}

impl WsServer {
    /// Serves `ws://`; `select_mcp = false` leaves the subprotocol out.
    pub async fn start(select_mcp: bool) -> Self {
        Self::start_with(select_mcp, None).await
    }

    /// Serves `wss://` with `pki`'s certificate.
    pub async fn start_tls(pki: &TestPki) -> Self {
        Self::start_with(true, Some(pki.acceptor(&[b"http/1.1"]))).await
    }

    async fn start_with(select_mcp: bool, tls: Option<TlsAcceptor>) -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let url = match tls {
            Some(_) => format!("wss://localhost:{port}/mcp"),
            None => format!("ws://127.0.0.1:{port}/mcp"),
        };
        let state = Arc::new(WsState::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = tcp.accept().await else {
                    continue;
                };
                let state = shared.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                ws_session(stream, state, select_mcp).await;
                            }
                        }
                        None => ws_session(tcp, state, select_mcp).await,
                    }
                });
            }
        });
        Self {
            url,
            state,
            _running: Running { task },
        }
    }

    /// The headers of the upgrade request.
    pub fn upgrade_headers(&self) -> Option<HeaderMap> {
        self.state.upgrade_headers.lock().unwrap().clone()
    }

    /// Text messages received.
    pub fn received(&self) -> Vec<String> {
        self.state.received.lock().unwrap().clone()
    }

    /// Pongs received (the server pings once per connection).
    pub fn pongs(&self) -> usize {
        self.state.pongs.load(Ordering::SeqCst)
    }
}

async fn ws_session<S>(stream: S, state: Arc<WsState>, select_mcp: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let record = state.clone();
    // The error type is tungstenite's, fixed by its callback trait.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &WsRequest, mut response: WsResponse| {
        *record.upgrade_headers.lock().unwrap() = Some(request.headers().clone());
        let offered = request
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|p| p.trim() == "mcp"));
        if offered && select_mcp {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", "mcp".parse().unwrap());
        }
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let _ = socket.send(Message::Ping(Bytes::from_static(b"hi"))).await;
    let _ = socket
        .send(Message::Binary(Bytes::from_static(b"\x00binary")))
        .await;
    while let Some(Ok(message)) = socket.next().await {
        match message {
            Message::Text(text) => {
                state.received.lock().unwrap().push(text.to_string());
                let message = peek(text.as_bytes());
                if message.method.as_deref() == Some("close") {
                    let _ = socket.close(None).await;
                    continue;
                }
                if let (Some(id), Some(_)) = (message.id, message.method) {
                    let params = message.params.unwrap_or_else(|| "null".into());
                    let reply = format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"echo\":{params}}}}}"
                    );
                    let _ = socket.send(Message::Text(reply.into())).await;
                }
            }
            Message::Pong(_) => {
                state.pongs.fetch_add(1, Ordering::SeqCst);
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
}
