//! The proxy as the client of a WebSocket MCP server.
//!
//! The binding is the TypeScript SDK's convention (no MCP revision defines
//! one): subprotocol `mcp`, one JSON-RPC message per text frame, closing
//! the socket ends the session. The upgrade request carries the configured
//! headers (and, with `[upstream.oauth]`, the route's access token; a 401
//! is retried once with a fresh one); `wss://` uses the same TLS setup as the HTTP upstreams (ALPN
//! limited to HTTP/1.1, which the upgrade needs). A server that does not
//! select `mcp` is refused.
//!
//! Each frame the relay writes goes out as one text message; each text
//! message received is one frame, byte for byte. Pings are answered by
//! the WebSocket layer; binary messages are ignored with a warning. A
//! message over the size limit is reported and ends the connection (the
//! WebSocket layer refuses to buffer it).

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::http::header::{AUTHORIZATION, SEC_WEBSOCKET_PROTOCOL};
use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use crate::config::UpstreamConfig;
use crate::transport::http::client::link::{Goodbye, Link, LinkControl};
use crate::transport::http::client::net::{self, Target, CONNECT_TIMEOUT};
use crate::transport::http::client::route::RouteClient;
use crate::transport::upstream::{Upstream, UpstreamError};
use crate::transport::writer::{FrameReceiver, FrameWriter};

/// The WebSocket subprotocol of MCP.
const SUBPROTOCOL: &str = "mcp";

/// A TCP or TLS byte stream.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Socket = WebSocketStream<Box<dyn Io>>;
type Sink = Arc<Mutex<SplitSink<Socket, Message>>>;

/// Connects to a WebSocket MCP server and completes the upgrade (with
/// the route's shared TLS configuration for `wss://`).
pub async fn connect(
    config: &UpstreamConfig,
    route: Arc<RouteClient>,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    let target = &route.target;
    let headers = net::configured_headers(config).map_err(|reason| target.error(reason))?;
    let limits = WebSocketConfig::default()
        .max_message_size(Some(max_message_bytes))
        .max_frame_size(Some(max_message_bytes));
    let mut authorization = route.authorization().await?;
    let mut renewed = false;
    let socket = loop {
        match upgrade(&route, &headers, authorization.as_ref(), limits).await {
            Err(Upgrade::Unauthorized(err)) if !renewed => {
                // Once with a fresh token, as for the HTTP transports.
                let Some(rejected) = &authorization else {
                    return Err(err);
                };
                authorization = route.renew_authorization(rejected).await;
                if authorization.is_none() {
                    return Err(err);
                }
                renewed = true;
            }
            Err(Upgrade::Unauthorized(err) | Upgrade::Failed(err)) => return Err(err),
            Ok(socket) => break socket,
        }
    };

    let (link, frames) = Link::new(queue);
    let (sink, stream) = socket.split();
    let sink: Sink = Arc::new(Mutex::new(sink));
    link.spawn(read(link.clone(), stream, target.route.clone()));
    let (writer, receiver) = FrameWriter::channel(queue.max(1));
    let drained = CancellationToken::new();
    let writer_task = tokio::spawn(write(
        link.clone(),
        sink.clone(),
        receiver,
        drained.clone(),
        target.route.clone(),
    ));
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    let closing = link.clone();
    let goodbye: Goodbye = Box::new(move || {
        async move {
            let _ = tokio::time::timeout(grace, drained.cancelled()).await;
            let close = async {
                let mut sink = sink.lock().await;
                let frame = CloseFrame {
                    code: CloseCode::Normal,
                    reason: Utf8Bytes::from_static(""),
                };
                let _ = sink.send(Message::Close(Some(frame))).await;
            };
            let _ = tokio::time::timeout(grace, close).await;
            // The server answers with its own close frame; the reader then
            // closes the link.
            let _ = tokio::time::timeout(grace, closing.closed()).await;
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

/// Why an upgrade failed: a 401 may be retried with a fresh token.
enum Upgrade {
    Unauthorized(UpstreamError),
    Failed(UpstreamError),
}

/// Opens a connection and completes the upgrade with the configured
/// headers and the access token, if any.
async fn upgrade(
    route: &RouteClient,
    headers: &HeaderMap,
    authorization: Option<&HeaderValue>,
    limits: WebSocketConfig,
) -> Result<Socket, Upgrade> {
    let target = &route.target;
    let stream = open(target, route.tls.clone())
        .await
        .map_err(Upgrade::Failed)?;
    let mut request = target
        .url
        .as_str()
        .into_client_request()
        .map_err(|err| Upgrade::Failed(target.error(format!("invalid url: {err}"))))?;
    for (name, value) in headers {
        request.headers_mut().append(name, value.clone());
    }
    if let Some(authorization) = authorization {
        request
            .headers_mut()
            .insert(AUTHORIZATION, authorization.clone());
    }
    request.headers_mut().insert(
        SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SUBPROTOCOL),
    );
    let upgrade = tokio_tungstenite::client_async_with_config(request, stream, Some(limits));
    let (socket, response) = match tokio::time::timeout(CONNECT_TIMEOUT, upgrade).await {
        Ok(Ok(done)) => done,
        Ok(Err(WsError::Http(response))) if response.status() == StatusCode::UNAUTHORIZED => {
            let err = WsError::Http(response);
            return Err(Upgrade::Unauthorized(target.error(upgrade_error(&err))));
        }
        Ok(Err(err)) => return Err(Upgrade::Failed(target.error(upgrade_error(&err)))),
        Err(_) => {
            return Err(Upgrade::Failed(
                target.error("the WebSocket upgrade timed out"),
            ))
        }
    };
    let selected = response.headers().get(SEC_WEBSOCKET_PROTOCOL);
    if selected.is_none_or(|value| value != SUBPROTOCOL) {
        return Err(Upgrade::Failed(target.error(format!(
            "the server did not select the WebSocket subprotocol `{SUBPROTOCOL}`"
        ))));
    }
    Ok(socket)
}

/// TCP, then TLS for `wss://`.
async fn open(
    target: &Target,
    tls: Arc<rustls::ClientConfig>,
) -> Result<Box<dyn Io>, UpstreamError> {
    let host = target
        .url
        .host_str()
        .ok_or_else(|| target.error("the url has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = target
        .url
        .port_or_known_default()
        .ok_or_else(|| target.error("the url has no port"))?;
    let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host.as_str(), port)))
        .await
    {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(err)) => return Err(target.error(format!("cannot connect: {err}"))),
        Err(_) => return Err(target.error("cannot connect: the connection timed out")),
    };
    let _ = tcp.set_nodelay(true);
    if !target.is_tls() {
        return Ok(Box::new(tcp));
    }
    let name = rustls::pki_types::ServerName::try_from(host)
        .map_err(|err| target.error(format!("invalid server name: {err}")))?;
    let connector = tokio_rustls::TlsConnector::from(tls);
    match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp)).await {
        Ok(Ok(stream)) => Ok(Box::new(stream)),
        Ok(Err(err)) => Err(target.error(format!("TLS handshake failed: {}", net::describe(&err)))),
        Err(_) => Err(target.error("the TLS handshake timed out")),
    }
}

fn upgrade_error(err: &WsError) -> String {
    match err {
        WsError::Http(response) => format!(
            "the server refused the WebSocket upgrade with HTTP {}",
            response.status()
        ),
        WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(_)) => {
            format!("the server did not select the WebSocket subprotocol `{SUBPROTOCOL}` ({err})")
        }
        other => format!("the WebSocket upgrade failed: {}", net::describe(other)),
    }
}

/// Hands every text message to the relay until the socket closes.
async fn read(link: Arc<Link>, mut stream: SplitStream<Socket>, route: String) {
    let reason = loop {
        match stream.next().await {
            Some(Ok(Message::Text(text))) => {
                if !link.emit(text.into()).await {
                    return;
                }
            }
            Some(Ok(Message::Binary(_))) => {
                tracing::warn!(%route, "ignored a binary WebSocket message (MCP uses text messages)");
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Ok(Message::Close(frame))) => {
                break match frame {
                    Some(frame) if frame.reason.is_empty() => {
                        format!("the server closed the WebSocket (code {})", frame.code)
                    }
                    Some(frame) => format!(
                        "the server closed the WebSocket (code {}: {})",
                        frame.code, frame.reason
                    ),
                    None => "the server closed the WebSocket".to_owned(),
                };
            }
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                link.emit_too_long().await;
                break format!(
                    "the server sent a {size}-byte message, over the {max_size}-byte limit"
                );
            }
            Some(Err(err)) => break format!("the WebSocket failed: {}", net::describe(&err)),
            None => break "the WebSocket connection ended".to_owned(),
        }
    };
    link.close(reason);
}

/// Sends each frame the relay writes as one text message.
async fn write(
    link: Arc<Link>,
    sink: Sink,
    mut receiver: FrameReceiver,
    drained: CancellationToken,
    route: String,
) -> std::io::Result<()> {
    let result = loop {
        let frame = tokio::select! {
            biased;
            _ = link.closed() => break Ok(()),
            frame = receiver.recv() => frame,
        };
        let Some(frame) = frame else { break Ok(()) };
        let text = match Utf8Bytes::try_from(frame) {
            Ok(text) => text,
            Err(_) => {
                tracing::warn!(%route, "dropped a frame that is not UTF-8 (a WebSocket text message must be)");
                continue;
            }
        };
        let sent = tokio::select! {
            _ = link.closed() => break Ok(()),
            sent = async { sink.lock().await.send(Message::Text(text)).await } => sent,
        };
        if let Err(err) = sent {
            let reason = format!("sending to the WebSocket failed: {}", net::describe(&err));
            link.close(reason.clone());
            break Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, reason));
        }
    };
    drained.cancel();
    result
}
