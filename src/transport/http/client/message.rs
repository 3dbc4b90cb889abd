//! The few facts the Streamable HTTP client reads from the messages it
//! carries, each with a borrowed peek: never a re-serialization.
//!
//! - outgoing: the request ids (to answer them if the server cannot), the
//!   method and `params.name`/`params.uri` (the 2026-07-28 `Mcp-Method` and
//!   `Mcp-Name` headers), `_meta`'s protocol version, and which request a
//!   `notifications/cancelled` names;
//! - incoming: which requests a message answers, and the `protocolVersion`
//!   of an `initialize` result.

use std::borrow::Cow;

use bytes::Bytes;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::jsonrpc::{peek_frame, Frame, Message, MessageKind, RequestId};
use crate::telemetry::{self, Carrier};
use crate::transport::http::metadata::encoding;
use crate::transport::http::metadata::expected::name_field;

/// What one outgoing frame (a message or a batch) holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outgoing {
    /// The requests in it, in order.
    pub requests: Vec<RequestId>,
    /// The method of a single request or notification.
    pub method: Option<String>,
    /// A single `initialize` request.
    pub initialize: bool,
    /// It holds `notifications/initialized`.
    pub initialized: bool,
    /// `params.name` (`tools/call`, `prompts/get`), `params.uri`
    /// (`resources/read`) or `params.taskId` (`tasks/*`) of a single request.
    pub name: Option<String>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub version: Option<String>,
    /// The request a single `notifications/cancelled` names.
    pub cancels: Option<RequestId>,
    /// It holds responses only (no request, no notification).
    pub only_responses: bool,
    /// `params._meta.traceparent`/`tracestate` of a single request, while
    /// tracing is on: sent as headers too (the relay put them there).
    pub trace: Option<Carrier>,
}

#[derive(Deserialize)]
struct WithParams<'a> {
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "taskId")]
    task_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "requestId")]
    request_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    traceparent: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tracestate: Option<&'a RawValue>,
}

impl Outgoing {
    /// Peeks at a frame. A frame that is not JSON-RPC (the relay lets none
    /// through, but the client does not rely on it) counts as holding no
    /// request.
    pub fn peek(bytes: &Bytes) -> Self {
        match peek_frame(bytes.clone()) {
            Ok(Frame::Single(message)) => Self::single(&message),
            Ok(Frame::Batch(messages)) => Self {
                requests: messages
                    .iter()
                    .filter(|m| m.kind == MessageKind::Request)
                    .filter_map(|m| m.id.clone())
                    .collect(),
                initialized: messages
                    .iter()
                    .any(|m| m.method() == "notifications/initialized"),
                only_responses: messages.iter().all(|m| m.kind == MessageKind::Response),
                ..Self::default()
            },
            Err(_) => Self::default(),
        }
    }

    fn single(message: &Message) -> Self {
        let method = message.method.clone().map(Cow::into_owned);
        let request = message.kind == MessageKind::Request;
        let params = serde_json::from_slice::<WithParams<'_>>(&message.bytes)
            .ok()
            .and_then(|w| w.params)
            .and_then(|raw| serde_json::from_str::<Params<'_>>(raw.get()).ok());
        let text = |raw: Option<&RawValue>| raw.and_then(|raw| string(raw.get()));
        let meta = params
            .as_ref()
            .and_then(|params| params.meta)
            .and_then(|raw| serde_json::from_str::<Meta<'_>>(raw.get()).ok());
        let (name, cancel) = match &params {
            Some(params) => (
                match name_field(message.method()) {
                    Some("name") => text(params.name),
                    Some("uri") => text(params.uri),
                    Some(_) => text(params.task_id),
                    None => None,
                },
                params.request_id.map(|raw| RequestId::from_json(raw.get())),
            ),
            None => (None, None),
        };
        let version = meta.as_ref().and_then(|meta| text(meta.version));
        let trace = meta
            .as_ref()
            .filter(|_| request && telemetry::enabled())
            .and_then(|meta| {
                Some(Carrier {
                    traceparent: text(meta.traceparent)?,
                    tracestate: text(meta.tracestate),
                })
            });
        Self {
            requests: message.id.clone().filter(|_| request).into_iter().collect(),
            initialize: request && message.method() == "initialize",
            initialized: message.method() == "notifications/initialized",
            name: name.filter(|_| request),
            version,
            cancels: cancel.filter(|_| message.method() == "notifications/cancelled"),
            only_responses: message.kind == MessageKind::Response,
            method,
            trace,
        }
    }
}

/// A JSON string's value, `None` for anything else.
fn string(json: &str) -> Option<String> {
    serde_json::from_str::<Cow<'_, str>>(json)
        .ok()
        .map(Cow::into_owned)
}

/// A request id in a form that compares equal however the JSON spelled it
/// (`"\u0041"` and `"A"` are one id; `1` and `"1"` are two).
pub(crate) fn id_key(id: &RequestId) -> String {
    serde_json::from_str::<serde_json::Value>(id.as_json())
        .map(|value| value.to_string())
        .unwrap_or_else(|_| id.as_json().to_owned())
}

/// What one incoming frame answers.
#[derive(Debug, Default)]
pub(crate) struct Incoming {
    /// Keys ([`id_key`]) of the requests it answers.
    pub answers: Vec<String>,
    /// The `protocolVersion` of the result answering `initialize`.
    pub version: Option<String>,
}

#[derive(Deserialize)]
struct InitializeReply<'a> {
    #[serde(borrow, default)]
    result: Option<InitializeResult<'a>>,
}

#[derive(Deserialize)]
struct InitializeResult<'a> {
    #[serde(borrow, default, rename = "protocolVersion")]
    protocol_version: Option<&'a RawValue>,
}

impl Incoming {
    /// Peeks at a frame from the server; `initialize` is the key of the
    /// `initialize` request still waiting, if any.
    pub fn peek(bytes: &Bytes, initialize: Option<&str>) -> Self {
        let messages = match peek_frame(bytes.clone()) {
            Ok(Frame::Single(message)) => vec![message],
            Ok(Frame::Batch(messages)) => messages,
            Err(_) => return Self::default(),
        };
        let mut incoming = Self::default();
        for message in messages {
            let Some(id) = message
                .id
                .as_ref()
                .filter(|_| message.kind == MessageKind::Response)
            else {
                continue;
            };
            let key = id_key(id);
            if initialize == Some(key.as_str()) {
                incoming.version = serde_json::from_slice::<InitializeReply<'_>>(&message.bytes)
                    .ok()
                    .and_then(|reply| reply.result)
                    .and_then(|result| result.protocol_version)
                    .and_then(|raw| string(raw.get()));
            }
            incoming.answers.push(key);
        }
        incoming
    }
}

/// A value for an MCP request metadata header (`Mcp-Method`, `Mcp-Name`,
/// `Mcp-Param-*`), in the `=?base64?…?=` form when it cannot go plain.
pub(crate) fn header_text(value: &str) -> HeaderValue {
    HeaderValue::from_str(&encoding::encode(value))
        .unwrap_or_else(|_| HeaderValue::from_static("=?base64??="))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(json: &str) -> Outgoing {
        Outgoing::peek(&Bytes::from(json.to_owned()))
    }

    #[test]
    fn a_tools_call_names_its_tool_and_version() {
        let o = out(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"caf\u00e9","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert_eq!(o.requests, vec![RequestId::from_json("7")]);
        assert_eq!(o.method.as_deref(), Some("tools/call"));
        assert_eq!(o.name.as_deref(), Some("café"));
        assert_eq!(o.version.as_deref(), Some("2026-07-28"));
        assert!(!o.initialize);
        let o = out(
            r#"{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"file:///a b"}}"#,
        );
        assert_eq!(o.name.as_deref(), Some("file:///a b"));
        let o = out(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#);
        assert_eq!(o.name, None);
    }

    #[test]
    fn lifecycle_and_cancellation_are_recognised() {
        assert!(out(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#).initialize);
        let o = out(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(o.initialized && o.requests.is_empty());
        let o = out(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
        );
        assert_eq!(o.cancels, Some(RequestId::from_json("\"a\"")));
        let o = out(
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
        );
        assert_eq!(o.requests, vec![RequestId::from_json("1")]);
        assert!(o.initialized);
        assert_eq!(o.method, None);
    }

    #[test]
    fn incoming_answers_and_the_negotiated_version() {
        let bytes = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":"\u0069","result":{"protocolVersion":"2025-06-18"}}"#,
        );
        let incoming = Incoming::peek(&bytes, Some(&id_key(&RequestId::from_json("\"i\""))));
        assert_eq!(incoming.answers, vec!["\"i\"".to_owned()]);
        assert_eq!(incoming.version.as_deref(), Some("2025-06-18"));
        let request = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(Incoming::peek(&request, None).answers.is_empty());
    }

    #[test]
    fn header_values_are_sent_plain_or_as_base64() {
        assert_eq!(header_text("get-sum"), "get-sum");
        assert_eq!(
            header_text("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
    }
}
