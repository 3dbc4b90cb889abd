//! Classifying one frame without parsing it into a tree.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::ScanError;
use crate::hooks::mcp;

/// What a single JSON-RPC message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// Has `method` and `id`: expects a response.
    Request,
    /// Has `method`, no `id`.
    Notification,
    /// Has `id` and one of `result` / `error`.
    Response,
}

/// A request id, kept as its exact JSON text (`1` and `"1"` are different ids).
///
/// Ids of up to 22 bytes, which is nearly all of them, are kept inline:
/// every request and response carries an id and the relay clones it into
/// its pending table, so a boxed copy was several allocations per call.
#[derive(Clone)]
pub struct RequestId(IdText);

/// The longest id text kept inline: an inline id is then no bigger than a
/// `String`.
const INLINE_ID: usize = 22;

#[derive(Clone)]
enum IdText {
    Inline { len: u8, bytes: [u8; INLINE_ID] },
    Boxed(Box<str>),
}

impl RequestId {
    /// Wraps the JSON text of an id (a JSON string with its quotes, or a number).
    pub fn from_json(text: &str) -> Self {
        let text = text.trim();
        if text.len() > INLINE_ID {
            return Self(IdText::Boxed(text.into()));
        }
        let mut bytes = [0; INLINE_ID];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Self(IdText::Inline {
            len: text.len() as u8,
            bytes,
        })
    }

    /// The id as JSON text, ready to splice into a message.
    pub fn as_json(&self) -> &str {
        match &self.0 {
            // Copied from a `&str` whole, so always UTF-8; checked rather
            // than assumed because the crate has no `unsafe`.
            IdText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            IdText::Boxed(text) => text,
        }
    }

    /// The id as a JSON value (for hook payloads and audit entries).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.as_json()).unwrap_or(serde_json::Value::Null)
    }
}

// Equality, order and hash are those of the text, whichever way it is
// stored, as `Borrow<str>` requires.

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl Eq for RequestId {}

impl PartialOrd for RequestId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RequestId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_json().cmp(other.as_json())
    }
}

impl std::hash::Hash for RequestId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_json().hash(state);
    }
}

/// Looked up by its JSON text, as read from a frame.
impl std::borrow::Borrow<str> for RequestId {
    fn borrow(&self) -> &str {
        self.as_json()
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RequestId").field(&self.as_json()).finish()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

/// One JSON-RPC message: the original bytes plus what the peek found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The message exactly as received (no line terminator).
    pub bytes: Bytes,
    /// Request, notification or response.
    pub kind: MessageKind,
    /// The id of a request or response.
    pub id: Option<RequestId>,
    /// The method of a request or notification: a static string for the
    /// methods MCP defines (see [`mcp::method_name`]), so that peeking a
    /// message costs no allocation for them.
    pub method: Option<Cow<'static, str>>,
}

impl Message {
    /// The method, or `""` for responses.
    pub fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("")
    }

    /// [`Self::method`] as a name to keep: static for the methods the
    /// proxy knows, so keeping it copies nothing.
    pub fn method_name(&self) -> Cow<'static, str> {
        self.method.clone().unwrap_or_default()
    }

    /// Parses the whole message into a tree (key order and number digits
    /// preserved), for hooks and rewrites. A duplicate object key anywhere
    /// is a data error ([`serde_json::Error::is_data`]): policy must see
    /// exactly what the other side will act on.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        super::strict::parse(&self.bytes)
    }
}

/// One frame read from a transport: a single message or a batch (2025-03-26).
#[derive(Debug, Clone)]
pub enum Frame {
    /// A single message.
    Single(Message),
    /// A JSON array of messages; each element keeps its own bytes.
    Batch(Vec<Message>),
}

/// Why a frame is not a usable JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeekError {
    /// Not JSON at all (or not UTF-8): answered with -32700.
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC 2.0 message: answered with -32600.
    #[error("invalid request: {reason}")]
    Invalid {
        /// The id, when one could be read, so the error can echo it.
        id: Option<RequestId>,
        /// What is wrong.
        reason: String,
    },
}

/// The members the peek reads; everything else stays in the original bytes.
/// Duplicate members are rejected by serde, which is what we want. `P` is
/// how `params` is read: kept raw by the ordinary peek.
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
pub(super) struct Envelope<'a, P> {
    #[serde(borrow, default, deserialize_with = "borrowed")]
    pub(super) jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "borrowed")]
    pub(super) method: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) id: Option<&'a RawValue>,
    #[serde(default)]
    pub(super) params: Option<P>,
    #[serde(borrow, default)]
    pub(super) result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) error: Option<&'a RawValue>,
}

impl<P> Envelope<'_, P> {
    /// What [`classify`] reads, `params` being of the right shape when
    /// present as `params_shaped` says.
    pub(super) fn members(&self, params_shaped: bool) -> Members<'_> {
        Members {
            jsonrpc: self.jsonrpc.as_deref(),
            method: self.method.as_deref(),
            params_shaped: self.params.is_none() || params_shaped,
            result: self.result.is_some(),
            error: self.error.is_some(),
        }
    }
}

/// Whether raw `params` are an object or an array.
fn shaped(params: &RawValue) -> bool {
    let starts = params.get().trim_start().as_bytes().first().copied();
    matches!(starts, Some(b'{') | Some(b'['))
}

/// What deciding a message's kind reads of its members.
pub(super) struct Members<'e> {
    /// `jsonrpc`, when present.
    pub(super) jsonrpc: Option<&'e str>,
    /// `method`, when present.
    pub(super) method: Option<&'e str>,
    /// `params` is absent, an object or an array.
    pub(super) params_shaped: bool,
    /// `result` is present.
    pub(super) result: bool,
    /// `error` is present.
    pub(super) error: bool,
}

/// Reads an optional string borrowed from the frame, copied only when it
/// has escapes to decode. Serde borrows a bare `Cow<str>` but always copies
/// one inside an `Option`, which was an allocation per member per message.
fn borrowed<'de, D>(deserializer: D) -> Result<Option<Cow<'de, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    let text = Option::<Borrowed<'de>>::deserialize(deserializer)?;
    Ok(text.map(|Borrowed(text)| text))
}

/// Keeps an explicit `null` as `Some("null")`: `"id": null` is not the same
/// as no id (a notification), and must be refused on a request.
fn present<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Classifies a frame with the default nesting limit
/// ([`DEFAULT_MAX_JSON_DEPTH`](super::DEFAULT_MAX_JSON_DEPTH)).
pub fn peek_frame(bytes: Bytes) -> Result<Frame, PeekError> {
    peek_frame_within(bytes, super::DEFAULT_MAX_JSON_DEPTH)
}

/// Classifies a frame whose arrays and objects nest at most `max_depth`
/// deep. Batches are split into their elements, each keeping its own
/// original bytes.
pub fn peek_frame_within(bytes: Bytes, max_depth: usize) -> Result<Frame, PeekError> {
    super::scan(&bytes, max_depth).map_err(|err| match err {
        ScanError::NotUtf8 { .. } => PeekError::Parse(err.to_string()),
        ScanError::TooDeep { .. } => PeekError::Invalid {
            id: None,
            reason: err.to_string(),
        },
    })?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') {
        return peek_batch(&bytes).map(Frame::Batch);
    }
    peek_message(bytes).map(Frame::Single)
}

fn peek_batch(bytes: &Bytes) -> Result<Vec<Message>, PeekError> {
    let elements: Vec<&RawValue> =
        serde_json::from_slice(bytes).map_err(|err| PeekError::Parse(err.to_string()))?;
    if elements.is_empty() {
        return Err(PeekError::Invalid {
            id: None,
            reason: "empty batch".into(),
        });
    }
    elements
        .into_iter()
        .map(|raw| peek_message(bytes.slice_ref(raw.get().as_bytes())))
        .collect()
}

fn peek_message(bytes: Bytes) -> Result<Message, PeekError> {
    let envelope: Envelope<'_, &RawValue> = match serde_json::from_slice(&bytes) {
        Ok(envelope) => envelope,
        Err(err) if err.is_data() => return Err(data_error(&bytes, err)),
        Err(err) => return Err(PeekError::Parse(err.to_string())),
    };
    let id = envelope.id.map(|raw| RequestId::from_json(raw.get()));
    let params_shaped = envelope.params.is_some_and(shaped);
    let (kind, method) = classify(&envelope.members(params_shaped), &id)?;
    Ok(Message {
        bytes,
        kind,
        id,
        method,
    })
}

/// A member of the wrong type stops the peek before it reaches the end, so
/// the rest may not be JSON at all; only JSON is an invalid request (-32600),
/// anything else a parse error (-32700).
pub(super) fn data_error(bytes: &[u8], err: serde_json::Error) -> PeekError {
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => PeekError::Invalid {
            id: None,
            reason: err.to_string(),
        },
        Err(syntax) => PeekError::Parse(syntax.to_string()),
    }
}

pub(super) fn classify(
    members: &Members<'_>,
    id: &Option<RequestId>,
) -> Result<(MessageKind, Option<Cow<'static, str>>), PeekError> {
    let invalid = |reason: &str| PeekError::Invalid {
        id: id.clone(),
        reason: reason.to_owned(),
    };
    if members.jsonrpc != Some("2.0") {
        return Err(invalid("`jsonrpc` must be \"2.0\""));
    }
    if !members.params_shaped {
        return Err(invalid("`params` must be an object or an array"));
    }
    match (members.method, id) {
        (Some(method), Some(id)) => {
            check_request_id(id).map_err(invalid)?;
            Ok((MessageKind::Request, Some(mcp::method_name(method))))
        }
        (Some(method), None) => Ok((MessageKind::Notification, Some(mcp::method_name(method)))),
        (None, Some(_)) => match (members.result, members.error) {
            (true, false) | (false, true) => Ok((MessageKind::Response, None)),
            _ => Err(invalid(
                "a response needs exactly one of `result` and `error`",
            )),
        },
        (None, None) => Err(invalid("no `method` and no `id`")),
    }
}

/// Request ids are strings or integers (MCP forbids null).
fn check_request_id(id: &RequestId) -> Result<(), &'static str> {
    let text = id.as_json();
    let is_string = text.starts_with('"');
    let is_integer = text
        .strip_prefix('-')
        .unwrap_or(text)
        .bytes()
        .all(|b| b.is_ascii_digit())
        && !text.is_empty();
    if is_string || is_integer {
        Ok(())
    } else {
        Err("a request `id` must be a string or an integer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(text: &str) -> Message {
        match peek_frame(Bytes::copy_from_slice(text.as_bytes())).unwrap() {
            Frame::Single(message) => message,
            Frame::Batch(_) => panic!("expected a single message"),
        }
    }

    #[test]
    fn request_notification_response() {
        let request = single(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#);
        assert_eq!(request.kind, MessageKind::Request);
        assert_eq!(request.id.unwrap().as_json(), "7");
        assert_eq!(request.method.as_deref(), Some("tools/call"));

        let note = single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(note.kind, MessageKind::Notification);

        let response = single(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert_eq!(response.kind, MessageKind::Response);
        assert_eq!(response.id.unwrap().as_json(), "\"a\"");
    }

    #[test]
    fn escaped_method_is_decoded() {
        let request = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call"}"#);
        assert_eq!(request.method.as_deref(), Some("tools/call"));
    }

    #[test]
    fn escaped_members_are_decoded_and_plain_ones_borrowed() {
        let text = r#"{"jsonrpc":"\u0032.0","method":"tools\/call"}"#;
        let envelope: Envelope<'_, &RawValue> = serde_json::from_str(text).unwrap();
        assert_eq!(envelope.jsonrpc.as_deref(), Some("2.0"));
        assert_eq!(envelope.method.as_deref(), Some("tools/call"));
        assert!(matches!(envelope.method, Some(Cow::Owned(_))));
        let text = r#"{"jsonrpc":"2.0","method":"tools/call"}"#;
        let envelope: Envelope<'_, &RawValue> = serde_json::from_str(text).unwrap();
        assert!(matches!(envelope.jsonrpc, Some(Cow::Borrowed("2.0"))));
        assert!(matches!(envelope.method, Some(Cow::Borrowed("tools/call"))));
        // `null` reads as absent, as it did for the derived `Option`.
        let text = r#"{"jsonrpc":"2.0","method":null,"id":1,"result":{}}"#;
        assert_eq!(single(text).kind, MessageKind::Response);
    }

    #[test]
    fn known_methods_are_static_and_others_copied() {
        let request = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        assert!(matches!(request.method, Some(Cow::Borrowed("tools/call"))));
        let request = single(r#"{"jsonrpc":"2.0","id":1,"method":"vendor/x"}"#);
        assert!(matches!(request.method, Some(Cow::Owned(_))));
        assert_eq!(request.method(), "vendor/x");
    }

    #[test]
    fn ids_compare_and_hash_by_text_whatever_their_length() {
        use std::collections::HashSet;
        let short = "\"".to_owned() + &"s".repeat(INLINE_ID - 2) + "\"";
        let long = "\"".to_owned() + &"l".repeat(INLINE_ID - 1) + "\"";
        let mut ids = HashSet::new();
        for text in ["7", " 7 ", short.as_str(), long.as_str()] {
            let id = RequestId::from_json(text);
            assert_eq!(id.as_json(), text.trim());
            assert_eq!(id.to_string(), text.trim());
            assert_eq!(id, RequestId::from_json(text.trim()));
            ids.insert(id);
        }
        assert_eq!(ids.len(), 3);
        assert!(ids.contains(long.as_str()) && ids.contains(short.as_str()));
        assert!(RequestId::from_json("10") < RequestId::from_json("9"));
        assert_eq!(
            format!("{:?}", RequestId::from_json("1")),
            r#"RequestId("1")"#
        );
    }

    #[test]
    fn not_json_is_a_parse_error() {
        let err = peek_frame(Bytes::from_static(b"{not json")).unwrap_err();
        assert!(matches!(err, PeekError::Parse(_)));
        let err = peek_frame(Bytes::from_static(b"\xff\xfe")).unwrap_err();
        assert!(matches!(err, PeekError::Parse(_)));
    }

    // Found by the jsonrpc_peek fuzz target: a mistyped member ahead of a
    // syntax error made broken JSON an invalid request instead of a parse
    // error.
    #[test]
    fn broken_json_is_a_parse_error_whatever_comes_first() {
        for text in [
            r#"{"jsonrpc":5,"id":1,"method":"#,
            r#"{"method":[],"#,
            r#"{"id":1,"id":2"#,
        ] {
            let err = peek_frame(Bytes::copy_from_slice(text.as_bytes())).unwrap_err();
            assert!(matches!(err, PeekError::Parse(_)), "{text}: {err:?}");
        }
    }

    // Found by the jsonrpc_peek fuzz target: invalid UTF-8 in a member the
    // peek skips passed as a valid message.
    #[test]
    fn invalid_utf8_anywhere_is_a_parse_error() {
        for text in [
            &b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"junk\":\"\x90\"}"[..],
            b"{\"jsonrpc\":\"1.0\",\"id\":2,\"meth/d\":\"\x90x\"}",
            b"[{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"p\":\"\xc3\"}]",
        ] {
            let err = peek_frame(Bytes::copy_from_slice(text)).unwrap_err();
            assert!(matches!(err, PeekError::Parse(_)), "{err:?}");
        }
    }

    #[test]
    fn invalid_requests_keep_their_id() {
        let err = peek_frame(Bytes::from_static(
            br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#,
        ))
        .unwrap_err();
        match err {
            PeekError::Invalid { id, .. } => assert_eq!(id.unwrap().as_json(), "3"),
            other => panic!("{other:?}"),
        }
        for text in [
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":3}"#,
            r#"{"jsonrpc":"2.0","method":"x","method":"y"}"#,
            r#"[]"#,
            r#"42"#,
        ] {
            let err = peek_frame(Bytes::copy_from_slice(text.as_bytes())).unwrap_err();
            assert!(matches!(err, PeekError::Invalid { .. }), "{text}: {err:?}");
        }
    }

    #[test]
    fn batch_elements_keep_original_bytes() {
        let text =
            r#"[{"jsonrpc":"2.0","id":1,"method":"a","x":1e2}, {"jsonrpc":"2.0","method":"b"}]"#;
        match peek_frame(Bytes::copy_from_slice(text.as_bytes())).unwrap() {
            Frame::Batch(messages) => {
                assert_eq!(messages.len(), 2);
                assert_eq!(
                    &messages[0].bytes[..],
                    br#"{"jsonrpc":"2.0","id":1,"method":"a","x":1e2}"#
                );
                assert_eq!(messages[1].kind, MessageKind::Notification);
            }
            Frame::Single(_) => panic!("expected a batch"),
        }
    }
}
