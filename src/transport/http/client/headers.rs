//! The headers of each request to the server: the session era's session
//! id and negotiated version, or the 2026-07-28 request metadata
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`)
//! computed from the body as it is sent.

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::Value;

use super::message::{header_text, Outgoing};
use super::{
    Client, Mode, State, JSON, MCP_METHOD, MCP_NAME, POST_ACCEPT, PROTOCOL_VERSION, SESSION_ID,
};
use crate::telemetry::carrier::{Carrier, TRACEPARENT, TRACESTATE};
use crate::transport::http::metadata::expected::Expected;
use crate::transport::http::metadata::{is_stateless, registry, PARAM_PREFIX};

impl Client {
    /// The headers for a POST of `frame` (peeked as `out`), and the era it
    /// is sent in.
    pub(super) fn request_headers(&self, out: &Outgoing, frame: &Bytes) -> (HeaderMap, Mode) {
        let mut headers = self.headers.clone();
        headers.insert(ACCEPT, HeaderValue::from_static(POST_ACCEPT));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
        if let Some(carrier) = &out.trace {
            trace_headers(&mut headers, carrier);
        }
        let mut state = self.lock();
        if out.initialize {
            state.initializing = true;
            return (
                headers,
                Mode::Session {
                    with_session: false,
                },
            );
        }
        let stateless = match &out.version {
            Some(version) => is_stateless(version),
            None => !state.initializing || state.version.as_deref().is_some_and(is_stateless),
        };
        if stateless {
            if let Some(version) = &out.version {
                state.stateless_version = Some(version.clone());
            }
            if let Some(version) = out.version.as_ref().or(state.stateless_version.as_ref()) {
                headers.insert(PROTOCOL_VERSION, header_text(version));
            }
            if let Some(method) = &out.method {
                headers.insert(MCP_METHOD, header_text(method));
            }
            if let Some(name) = &out.name {
                headers.insert(MCP_NAME, header_text(name));
            }
            for (name, value) in self.param_headers(out, frame) {
                headers.insert(name, value);
            }
            return (headers, Mode::Stateless);
        }
        let with_session = state.session.is_some();
        state.apply_session(&mut headers);
        (headers, Mode::Session { with_session })
    }

    /// `Mcp-Param-*` for a `tools/call` whose tool declares `x-mcp-header`
    /// arguments, from the body as it is sent (after any rewrite).
    pub(super) fn param_headers(
        &self,
        out: &Outgoing,
        frame: &Bytes,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let (Some("tools/call"), Some(tool)) = (out.method.as_deref(), out.name.as_deref()) else {
            return Vec::new();
        };
        let Some(annotations) = registry::lookup(&self.route.target.route, tool) else {
            return Vec::new();
        };
        if annotations.is_empty() {
            return Vec::new();
        }
        let Ok(body) = serde_json::from_slice::<Value>(frame) else {
            return Vec::new();
        };
        Expected::of(&body, Some(&annotations))
            .params
            .into_iter()
            .filter_map(|(name, value)| {
                let name =
                    HeaderName::from_bytes(format!("{PARAM_PREFIX}{name}").as_bytes()).ok()?;
                Some((name, header_text(&value)))
            })
            .collect()
    }

    /// Headers for a GET or DELETE in the session.
    pub(super) fn session_headers(&self, accept: Option<&'static str>) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(accept) = accept {
            headers.insert(ACCEPT, HeaderValue::from_static(accept));
        }
        self.lock().apply_session(&mut headers);
        headers
    }
}

impl State {
    pub(super) fn apply_session(&self, headers: &mut HeaderMap) {
        if let Some(session) = &self.session {
            headers.insert(SESSION_ID, session.clone());
        }
        if let Some(version) = &self.version {
            headers.insert(PROTOCOL_VERSION, header_text(version));
        }
    }
}

/// W3C trace context headers for the request's span (tracing on).
fn trace_headers(headers: &mut HeaderMap, carrier: &Carrier) {
    if let Ok(value) = HeaderValue::from_str(&carrier.traceparent) {
        headers.insert(TRACEPARENT, value);
    }
    if let Some(Ok(value)) = carrier.tracestate.as_deref().map(HeaderValue::from_str) {
        headers.insert(TRACESTATE, value);
    }
}
