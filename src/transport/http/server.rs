//! The agent-facing network listener: acs-proxy as an MCP *server* that
//! agents reach over Streamable HTTP (and legacy HTTP+SSE), or WebSocket.
//!
//! Each accepted MCP session is handed to a [`SessionStarter`] as a
//! [`Downstream`](crate::transport::downstream::Downstream); this module
//! knows nothing of hooks or policy.
//!
//! Endpoints: `<path>` when there is one upstream, and `<path>/<name>` for
//! every upstream route. With `transport = "http"` each is a Streamable
//! HTTP endpoint (`handlers`), plus, with `legacy_sse`, `<endpoint>/sse`
//! and `<endpoint>/message` (`transport::sse::server`). With
//! `transport = "ws"` each is a WebSocket endpoint
//! (`transport::ws::server`). Every request passes the same edge
//! checks first (`edge`) and is counted in
//! `acs_proxy_http_requests_total{route,status}`.
//!
//! Parts (this file, the router, sits above them all):
//! - `listener`: TCP/TLS accept loop, HTTP/1.1 + HTTP/2, timeouts,
//!   graceful shutdown; `tls`: the reloading certificate; `client_cert`:
//!   mutual TLS and the principal a client certificate names.
//! - `handlers`: the Streamable HTTP endpoint by method.
//! - `shared`: session start, `max_sessions`, shutdown tracking; it holds
//!   the session tables of Streamable HTTP (`session`) and legacy SSE.
//! - `edge`: Host/Origin/bearer/OAuth checks, body limits, `Accept`;
//!   `principal`: who a bearer token names; `protected_resource`: the
//!   RFC 9728 metadata `[listen.oauth]` publishes; `cors`: preflights.
//! - `refusals`: the edge audit chain of requests refused before a session.
//! - `start`: what a started session hands its transport, or why it failed.
//! - `responses`: the error answers every part gives, marked for `refusals`.
//! - `settings`: what the listener is built from.
//! - `era`: whether a request is served in the session era or statelessly
//!   (2026-07-28); `stateless`: one ACS session per stateless request;
//!   `header_checks`: its metadata headers against its body.
//! - `session`: Streamable HTTP sessions, idle expiry, abandoned streams.
//! - `routing`: which stream each outgoing frame goes to, replay buffers.
//! - `events`: SSE encoding and bodies.

mod client_cert;
mod cors;
mod edge;
mod era;
mod events;
mod handlers;
mod header_checks;
mod listener;
mod outgoing;
mod principal;
mod protected_resource;
mod refusals;
mod responses;
mod routing;
mod session;
mod settings;
mod shared;
mod start;
mod stateless;
mod tls;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, request::Parts, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use cors::{cors, preflight};
pub(crate) use edge::{accepts, content_type_is_json, one_line, read_body};
pub use edge::{OAuth, OAuthError};
pub(crate) use events::{
    body as sse_body, named as sse_named, response as sse_response, DropGuard,
};
pub(crate) use principal::{may_use, Principal};
use refusals::EdgeLog;
pub(crate) use responses::{json_error, method_not_allowed, rejection, with_body_digest};
pub use settings::ServerSettings;
pub(crate) use shared::Shared;
pub(crate) use start::{FrameSender, StartError, Started};

use crate::audit::AuditLog;
use crate::config::ListenTransport;
use crate::metrics::METRICS;
use crate::transport::downstream::SessionStarter;

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Sessions that had not ended by the deadline.
    pub unfinished_sessions: usize,
}

/// A bound listener, ready to serve.
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    tls: Option<Arc<tls::ReloadingCert>>,
    app: Router,
}

/// What an endpoint path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    StreamableHttp,
    LegacySse,
    LegacyMessage,
    WebSocket,
}

impl Server {
    /// Binds the listener and loads what it needs (TLS pair, token file);
    /// any problem is a startup error. Requests refused before they reach
    /// a session are recorded in an edge chain of `audit`, when given.
    pub async fn bind(
        settings: ServerSettings,
        starter: Arc<dyn SessionStarter>,
        audit: Option<AuditLog>,
    ) -> Result<Server, String> {
        let listen = &settings.listen;
        if listen.transport == ListenTransport::Stdio {
            return Err("listen.transport = \"stdio\" has no network listener".into());
        }
        if settings.routes.is_empty() {
            return Err("a network listener needs at least one [[upstream]]".into());
        }
        if listen.legacy_sse && listen.transport != ListenTransport::Http {
            return Err("listen.legacy_sse needs listen.transport = \"http\"".into());
        }
        let tls = match (&listen.tls_cert, &listen.tls_key) {
            (Some(cert), Some(key)) => Some(tls::ReloadingCert::load(
                cert,
                key,
                listen.client_ca.as_deref(),
            )?),
            _ => None,
        };
        let listener = TcpListener::bind(listen.address)
            .await
            .map_err(|err| format!("cannot listen on {}: {err}", listen.address))?;
        let local_addr = listener
            .local_addr()
            .map_err(|err| format!("cannot listen on {}: {err}", listen.address))?;
        let edge = edge::Edge::new(listen, local_addr)?;
        let shared = Arc::new(Shared::new(settings, edge, EdgeLog::new(audit), starter));
        let app = router(&shared)?;
        Ok(Server {
            listener,
            local_addr,
            shared,
            tls,
            app,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `https`/`wss` when TLS is on.
    pub fn scheme(&self) -> &'static str {
        match (self.shared.settings.listen.transport, self.tls.is_some()) {
            (ListenTransport::Ws, true) => "wss",
            (ListenTransport::Ws, false) => "ws",
            (_, true) => "https",
            (_, false) => "http",
        }
    }

    /// The endpoint paths served, for the startup log.
    pub fn endpoints(&self) -> Vec<String> {
        endpoints(&self.shared.settings)
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// Serves until `stop` fires, then shuts down in order: stop accepting,
    /// fire `cancel_sessions` (the relay's stop: each session ends and seals
    /// its audit chain) and end the agents' sides, wait for the sessions up
    /// to the deadline, then close the connections still open.
    pub async fn run(
        self,
        stop: CancellationToken,
        cancel_sessions: CancellationToken,
    ) -> ShutdownReport {
        let Server {
            listener,
            shared,
            tls,
            app,
            ..
        } = self;
        let acceptor = match &tls {
            Some(cert) => match cert.acceptor() {
                Ok(acceptor) => Some(acceptor),
                Err(err) => {
                    tracing::error!(%err, "TLS cannot be set up");
                    return ShutdownReport {
                        unfinished_sessions: 0,
                    };
                }
            },
            None => None,
        };
        let housekeeping = tokio::spawn(housekeeping(shared.clone(), tls, stop.clone()));
        let key_refresh = shared
            .edge
            .oauth()
            .map(|oauth| tokio::spawn(oauth.keep_keys_fresh(stop.clone())));
        let header_timeout = Duration::from_millis(shared.settings.listen.header_read_timeout_ms);
        let graceful = listener::accept_until(listener, app, acceptor, header_timeout, stop).await;
        shared.stopping.cancel();
        housekeeping.abort();
        if let Some(key_refresh) = key_refresh {
            key_refresh.abort();
        }
        cancel_sessions.cancel();
        for session in shared.http.drain() {
            session.close();
        }
        shared.legacy.close_all();
        shared.tracker.close();
        let deadline = shared.settings.shutdown_deadline;
        if tokio::time::timeout(deadline, shared.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                sessions = shared.active_sessions(),
                "sessions still running at the shutdown deadline"
            );
        }
        let unfinished_sessions = shared.active_sessions();
        shared.refusals.close().await;
        // Streams end with their sessions; give connections a moment to finish.
        let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
        ShutdownReport {
            unfinished_sessions,
        }
    }
}

/// Idle expiry, and reloading the TLS pair and token file when they change.
async fn housekeeping(
    shared: Arc<Shared>,
    tls: Option<Arc<tls::ReloadingCert>>,
    stop: CancellationToken,
) {
    const RELOAD_EVERY: Duration = Duration::from_secs(2);
    let idle = Duration::from_millis(shared.settings.listen.session_idle_timeout_ms.max(1));
    let tick = (idle / 4).clamp(Duration::from_millis(50), RELOAD_EVERY);
    let tokens = shared.edge.tokens();
    let mut since_reload = Duration::ZERO;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        shared.http.expire_idle(idle);
        since_reload += tick;
        if since_reload >= RELOAD_EVERY {
            since_reload = Duration::ZERO;
            if let Some(cert) = &tls {
                cert.reload_if_changed();
            }
            if let Some(tokens) = &tokens {
                tokens.reload_if_changed();
            }
        }
    }
}

/// `path` without a trailing `/` (`""` for `/`).
fn base_path(path: &str) -> &str {
    path.trim_end_matches('/')
}

/// Every endpoint path with its route.
fn endpoints(settings: &ServerSettings) -> Vec<(String, String)> {
    let base = base_path(&settings.listen.path);
    let mut out = Vec::new();
    if let [only] = settings.routes.as_slice() {
        let path = if base.is_empty() {
            "/".to_owned()
        } else {
            base.to_owned()
        };
        out.push((path, only.clone()));
    }
    for name in &settings.routes {
        out.push((format!("{base}/{name}"), name.clone()));
    }
    out
}

fn router(shared: &Arc<Shared>) -> Result<Router, String> {
    let settings = &shared.settings;
    for name in &settings.routes {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(format!(
                "upstream name {name:?} cannot be a URL path segment (use letters, digits, '-', '_', '.')"
            ));
        }
    }
    let mut paths = BTreeSet::new();
    let mut app = Router::new();
    let endpoints = endpoints(settings);
    for (path, route) in &endpoints {
        let path_of_resource = path.clone();
        let mut add = |path: String, kind: Kind| -> Result<(), String> {
            if !paths.insert(path.clone()) {
                return Err(format!(
                    "two endpoints would be served at {path:?}; rename the upstream {route:?}"
                ));
            }
            let handler = Endpoint {
                shared: shared.clone(),
                route: Arc::from(route.as_str()),
                resource_path: Arc::from(path_of_resource.as_str()),
                kind,
                message_path: match kind {
                    Kind::LegacySse => path
                        .strip_suffix("/sse")
                        .map(|base| format!("{base}/message"))
                        .unwrap_or_default(),
                    _ => String::new(),
                },
            };
            let handler = Arc::new(handler);
            app = std::mem::take(&mut app).route(
                &path,
                any(move |request: Request| {
                    let handler = handler.clone();
                    async move { handler.handle(request).await }
                }),
            );
            Ok(())
        };
        match settings.listen.transport {
            ListenTransport::Ws => add(path.clone(), Kind::WebSocket)?,
            _ => {
                let base = base_path(path).to_owned();
                add(path.clone(), Kind::StreamableHttp)?;
                if settings.listen.legacy_sse {
                    add(format!("{base}/sse"), Kind::LegacySse)?;
                    add(format!("{base}/message"), Kind::LegacyMessage)?;
                }
            }
        }
    }
    let endpoint_paths: Vec<String> = endpoints.into_iter().map(|(path, _)| path).collect();
    let app = protected_resource::routes(app, shared, &endpoint_paths, &mut paths)?;
    let fallback = shared.clone();
    Ok(app.fallback(move |request: Request| {
        let shared = fallback.clone();
        async move {
            let (parts, _) = request.into_parts();
            let response = match shared.edge.check(&parts, "/").await {
                Err(response) => *response,
                Ok(_) => rejection(StatusCode::NOT_FOUND, "no MCP endpoint here"),
            };
            shared
                .refusals
                .note(&Arc::from("-"), &parts.method, &response, None);
            METRICS.http_request("-", response.status().as_u16());
            response
        }
    }))
}

/// One endpoint path: its route and what it serves.
struct Endpoint {
    shared: Arc<Shared>,
    route: Arc<str>,
    /// The endpoint's path, for the OAuth metadata URL its challenges name.
    resource_path: Arc<str>,
    kind: Kind,
    /// For a legacy SSE stream: where its client posts.
    message_path: String,
}

impl Endpoint {
    async fn handle(&self, request: Request) -> Response {
        let (mut parts, body) = request.into_parts();
        let origin = parts.headers.get(header::ORIGIN).cloned();
        let method = parts.method.clone();
        let mut caller = None;
        let response = if parts.method == Method::OPTIONS {
            preflight(&self.shared, &parts)
        } else {
            match self.shared.edge.check(&parts, &self.resource_path).await {
                Err(response) => *response,
                Ok(principal) => {
                    if let Some(principal) = principal {
                        caller = Some(principal.identity().clone());
                        parts.extensions.insert(principal);
                    }
                    self.serve(parts, body).await
                }
            }
        };
        let response = cors(origin, response);
        self.shared
            .refusals
            .note(&self.route, &method, &response, caller);
        METRICS.http_request(&self.route, response.status().as_u16());
        response
    }

    async fn serve(&self, parts: Parts, body: axum::body::Body) -> Response {
        let shared = self.shared.clone();
        let route = self.route.clone();
        match self.kind {
            Kind::StreamableHttp => handlers::endpoint(shared, route, parts, body).await,
            Kind::LegacySse => {
                crate::transport::sse::server::open(shared, route, &self.message_path, parts).await
            }
            Kind::LegacyMessage => {
                crate::transport::sse::server::message(shared, route, parts, body).await
            }
            Kind::WebSocket => crate::transport::ws::server::upgrade(shared, route, parts).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ListenConfig;

    fn settings(path: &str, routes: &[&str]) -> ServerSettings {
        ServerSettings {
            listen: ListenConfig {
                path: path.into(),
                ..ListenConfig::default()
            },
            routes: routes.iter().map(|r| (*r).to_owned()).collect(),
            max_message_bytes: 1 << 20,
            max_json_depth: crate::jsonrpc::DEFAULT_MAX_JSON_DEPTH,
            queue: 16,
            shutdown_deadline: Duration::from_secs(1),
        }
    }

    #[test]
    fn endpoint_paths() {
        let one = endpoints(&settings("/mcp", &["demo"]));
        assert_eq!(
            one,
            [
                ("/mcp".to_owned(), "demo".to_owned()),
                ("/mcp/demo".to_owned(), "demo".to_owned())
            ]
        );
        let root = endpoints(&settings("/", &["a", "b"]));
        assert_eq!(
            root,
            [
                ("/a".to_owned(), "a".to_owned()),
                ("/b".to_owned(), "b".to_owned())
            ]
        );
    }
}
