//! SEP-2243 checks on a 2026-07-28 request: its metadata headers must say
//! what its body says, because the proxy decides on the body while
//! anything in front of it may route on the headers.
//!
//! - `MCP-Protocol-Version` must equal
//!   `params._meta["io.modelcontextprotocol/protocolVersion"]`, and name a
//!   revision the proxy serves;
//! - `Mcp-Method` must equal `method`;
//! - `Mcp-Name` must equal `params.name` (`tools/call`, `prompts/get`),
//!   `params.uri` (`resources/read`) or `params.taskId` (`tasks/*`), after
//!   `=?base64?…?=` decoding;
//! - for a `tools/call` of a tool the route has listed, each argument the
//!   tool marks `x-mcp-header` must come with its `Mcp-Param-{Name}`, equal
//!   to it, and no such header may come without the argument.
//!
//! `Mcp-Param-*` headers the proxy cannot check (an unlisted tool, a name
//! the tool does not declare) are passed on upstream, as intermediaries
//! must.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::responses::json_error_with_data;
use crate::jsonrpc::{codes, RequestId};
use crate::transport::http::metadata::encoding::decode;
use crate::transport::http::metadata::expected::{name_field, Expected};
use crate::transport::http::metadata::params::{agrees, argument_text};
use crate::transport::http::metadata::{
    registry, MCP_METHOD, MCP_NAME, PARAM_PREFIX, PROTOCOL_VERSION, STATELESS_VERSIONS,
};

/// Why a stateless request's headers were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeaderError {
    /// A header is missing, malformed, or disagrees with the body.
    #[error("header mismatch: {0}")]
    Mismatch(String),
    /// The request names a revision the proxy does not serve.
    #[error("unsupported protocol version {requested:?}")]
    UnsupportedVersion {
        /// The version asked for.
        requested: String,
        /// Every revision the endpoint serves.
        supported: Vec<&'static str>,
    },
}

impl HeaderError {
    /// HTTP 400 with `HeaderMismatch` (-32020) or
    /// `UnsupportedProtocolVersion` (-32022, listing what is supported).
    pub(crate) fn response(&self, id: Option<&RequestId>) -> Response {
        let (code, data) = match self {
            HeaderError::Mismatch(_) => (codes::HEADER_MISMATCH, None),
            HeaderError::UnsupportedVersion {
                requested,
                supported,
            } => (
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                Some(json!({ "supported": supported, "requested": requested })),
            ),
        };
        json_error_with_data(StatusCode::BAD_REQUEST, id, code, &self.to_string(), data)
    }
}

/// What passed the checks.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    /// `Mcp-Param-*` headers the proxy could not check, to pass on as sent.
    pub(crate) unrecognized: Vec<(String, String)>,
}

/// Checks a request's (or notification's) headers against its body, for
/// an endpoint that also serves `legacy` revisions; `route` names whose
/// tool schemas apply.
pub(crate) fn check(
    headers: &HeaderMap,
    body: &Value,
    route: &str,
    legacy: &[&'static str],
) -> Result<Checked, HeaderError> {
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    let tool = match method {
        "tools/call" => body["params"]["name"]
            .as_str()
            .and_then(|name| registry::lookup(route, name)),
        _ => None,
    };
    let expected = Expected::of(body, tool.as_deref());
    let version = plain(headers, PROTOCOL_VERSION)?;
    if version.as_deref() != expected.version.as_deref() {
        return Err(mismatch(
            "MCP-Protocol-Version",
            version.as_deref(),
            expected.version.as_deref(),
        ));
    }
    if let Some(requested) = version.filter(|v| !STATELESS_VERSIONS.contains(&v.as_str())) {
        let mut supported: Vec<&'static str> = STATELESS_VERSIONS.to_vec();
        supported.extend(legacy.iter().rev());
        return Err(HeaderError::UnsupportedVersion {
            requested,
            supported,
        });
    }
    let said_method = plain(headers, MCP_METHOD)?;
    if said_method.as_deref() != Some(method) {
        return Err(mismatch("Mcp-Method", said_method.as_deref(), Some(method)));
    }
    if name_field(method).is_some() {
        let said_name = decoded(headers, MCP_NAME)?;
        if said_name != expected.name {
            return Err(mismatch(
                "Mcp-Name",
                said_name.as_deref(),
                expected.name.as_deref(),
            ));
        }
    }
    params(headers, body, tool.as_deref())
}

/// The `Mcp-Param-*` checks for a known tool; the rest is passed on.
fn params(
    headers: &HeaderMap,
    body: &Value,
    tool: Option<&[crate::transport::http::metadata::params::ParamHeader]>,
) -> Result<Checked, HeaderError> {
    let arguments = &body["params"]["arguments"];
    let declared = tool.unwrap_or_default();
    for param in declared {
        let header = format!("{PARAM_PREFIX}{}", param.name.to_ascii_lowercase());
        let said = decoded(headers, &header)?;
        let label = format!("Mcp-Param-{}", param.name);
        match (said, argument_text(arguments, &param.path)) {
            (None, None) => {}
            (Some(said), Some(_)) if agrees(&said, arguments, &param.path) => {}
            (said, body) => return Err(mismatch(&label, said.as_deref(), body.as_deref())),
        }
    }
    let mut checked = Checked::default();
    for (name, value) in headers {
        let Some(suffix) = name.as_str().strip_prefix(PARAM_PREFIX) else {
            continue;
        };
        if declared.iter().any(|p| p.name.eq_ignore_ascii_case(suffix)) {
            continue;
        }
        let value = value
            .to_str()
            .map_err(|_| HeaderError::Mismatch(format!("{name} has invalid characters")))?;
        checked
            .unrecognized
            .push((name.as_str().to_owned(), value.to_owned()));
    }
    Ok(checked)
}

/// A header that carries plain text (no base64 form): the version, the
/// method.
fn plain(headers: &HeaderMap, name: &str) -> Result<Option<String>, HeaderError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(HeaderError::Mismatch(format!("{name} is sent twice")));
    }
    value
        .to_str()
        .map(|text| Some(text.trim().to_owned()))
        .map_err(|_| HeaderError::Mismatch(format!("{name} has invalid characters")))
}

/// A header that may be `=?base64?…?=`: `Mcp-Name`, `Mcp-Param-*`.
fn decoded(headers: &HeaderMap, name: &str) -> Result<Option<String>, HeaderError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(HeaderError::Mismatch(format!("{name} is sent twice")));
    }
    decode(value.as_bytes())
        .map(Some)
        .map_err(|err| HeaderError::Mismatch(format!("{name}: {err}")))
}

fn mismatch(header: &str, said: Option<&str>, body: Option<&str>) -> HeaderError {
    HeaderError::Mismatch(match (said, body) {
        (None, Some(body)) => format!("{header} is missing (the body says {body:?})"),
        (Some(said), None) => {
            format!("{header} says {said:?} but the body has no such value")
        }
        (Some(said), Some(body)) => {
            format!("{header} says {said:?} but the body says {body:?}")
        }
        (None, None) => format!("{header} is missing"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const ROUTE: &str = "header-checks-test";
    const LEGACY: [&str; 1] = ["2025-11-25"];

    fn call(arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "sql", "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn learn() {
        registry::learn(
            ROUTE,
            &[
                json!({"name": "sql", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "limit": {"type": "integer", "x-mcp-header": "Limit"}}}}),
            ],
        );
    }

    const GOOD: [(&str, &str); 3] = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "sql"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut pairs = GOOD.to_vec();
        pairs.extend_from_slice(extra);
        headers(&pairs)
    }

    fn is_mismatch(result: Result<Checked, HeaderError>) -> bool {
        matches!(result, Err(HeaderError::Mismatch(_)))
    }

    #[test]
    fn matching_headers_pass_and_unknown_params_are_passed_on() {
        learn();
        let body = call(json!({"region": "Hello, 世界", "limit": 5}));
        let checked = check(
            &with(&[
                ("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?="),
                ("mcp-param-limit", "5.0"),
                ("mcp-param-trace", "abc"),
            ]),
            &body,
            ROUTE,
            &LEGACY,
        )
        .unwrap();
        assert_eq!(
            checked.unrecognized,
            [("mcp-param-trace".to_owned(), "abc".to_owned())]
        );
    }

    #[test]
    fn every_disagreement_is_a_mismatch() {
        learn();
        let body = call(json!({"region": "eu"}));
        let region = ("mcp-param-region", "eu");
        assert!(check(&with(&[region]), &body, ROUTE, &LEGACY).is_ok());
        // The version header: absent, or not the body's.
        let mut h = with(&[region]);
        h.remove("mcp-protocol-version");
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2027-01-01"),
        );
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        // Method and name.
        let mut h = with(&[region]);
        h.insert("mcp-method", HeaderValue::from_static("tools/list"));
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        h.remove("mcp-method");
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        let mut h = with(&[region]);
        h.insert("mcp-name", HeaderValue::from_static("other"));
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        h.insert("mcp-name", HeaderValue::from_static("=?base64?!!?="));
        assert!(is_mismatch(check(&h, &body, ROUTE, &LEGACY)));
        // A declared argument: header missing, different, or without a value.
        assert!(is_mismatch(check(&with(&[]), &body, ROUTE, &LEGACY)));
        let other = ("mcp-param-region", "us");
        assert!(is_mismatch(check(&with(&[other]), &body, ROUTE, &LEGACY)));
        let extra = ("mcp-param-limit", "3");
        assert!(is_mismatch(check(
            &with(&[region, extra]),
            &body,
            ROUTE,
            &LEGACY
        )));
    }

    #[test]
    fn unsupported_versions_list_what_is_served() {
        let mut body = call(json!({}));
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2031-01-01");
        let mut h = with(&[]);
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2031-01-01"),
        );
        let err = check(&h, &body, ROUTE, &LEGACY).unwrap_err();
        assert_eq!(
            err,
            HeaderError::UnsupportedVersion {
                requested: "2031-01-01".into(),
                supported: vec!["2026-07-28", "2025-11-25"],
            }
        );
        assert_eq!(err.response(None).status(), StatusCode::BAD_REQUEST);
    }
}
