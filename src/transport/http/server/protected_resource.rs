//! `/.well-known/oauth-protected-resource[/<endpoint path>]` (RFC 9728):
//! where an MCP client learns which authorization server issues tokens
//! for this listener. Served only with `[listen.oauth]`; no token needed,
//! any origin may read it (it is public), the Host check still applies.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use axum::Router;

use super::edge::WELL_KNOWN;
use super::responses::method_not_allowed;
use super::shared::Shared;
use crate::metrics::METRICS;

/// Adds the metadata paths for `endpoints` (and the bare well-known path)
/// to `app`; `taken` holds the paths already served.
pub(super) fn routes(
    mut app: Router,
    shared: &Arc<Shared>,
    endpoints: &[String],
    taken: &mut BTreeSet<String>,
) -> Result<Router, String> {
    if shared.edge.oauth().is_none() {
        return Ok(app);
    }
    let paths: BTreeSet<String> = std::iter::once(WELL_KNOWN.to_owned())
        .chain(
            endpoints
                .iter()
                .map(|path| format!("{WELL_KNOWN}{}", path.trim_end_matches('/'))),
        )
        .collect();
    for path in paths {
        if !taken.insert(path.clone()) {
            return Err(format!(
                "{path:?} is both an MCP endpoint and the OAuth metadata path; change listen.path"
            ));
        }
        let shared = shared.clone();
        app = app.route(
            &path,
            any(move |request: Request| {
                let shared = shared.clone();
                async move { serve(&shared, request) }
            }),
        );
    }
    Ok(app)
}

fn serve(shared: &Shared, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let mut response = match (shared.edge.check_host(&parts), shared.edge.oauth()) {
        (Err(refused), _) => *refused,
        (Ok(()), None) => method_not_allowed("GET"),
        (Ok(()), Some(oauth)) => match parts.method {
            Method::GET | Method::HEAD => document(oauth.metadata_document()),
            Method::OPTIONS => preflight(),
            _ => method_not_allowed("GET, HEAD, OPTIONS"),
        },
    };
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    METRICS.http_request("-", response.status().as_u16());
    response
}

fn document(body: bytes::Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

fn preflight() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("mcp-protocol-version"),
    );
    response
}
