//! Classifying one frame: what each message in it is, read from the tree
//! its hooks will read too, so a governed message is parsed once.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::members::place_quoted;
use super::{BorrowedJson, MessageTree, RequestId, ScanError};
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

/// One JSON-RPC message: the original bytes plus what the peek found.
#[derive(Debug, Clone)]
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
    /// The message parsed as its hooks read it, when the peek parsed it
    /// so; `None` when it was classified another way, and the hooks then
    /// parse it themselves.
    pub tree: Option<Arc<MessageTree>>,
}

/// Two messages are the same message when their bytes and what was read
/// of them are; a tree is only those bytes parsed.
impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
            && self.kind == other.kind
            && self.id == other.id
            && self.method == other.method
    }
}

impl Eq for Message {}

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
    match peek_tree(&bytes) {
        Some(message) => Ok(message),
        None => peek_envelope(bytes),
    }
}

/// Reads only the members that classify a message, and refuses what is
/// not a valid one with the reason.
fn peek_envelope(bytes: Bytes) -> Result<Message, PeekError> {
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
        tree: None,
    })
}

/// A valid message read from its tree, which then goes with it to its
/// hooks. `None` for a message the tree cannot read as the envelope would
/// (a duplicate key, a `null` or mistyped member, an id with an escape or
/// a fraction, a message that is not valid): the envelope then reads it,
/// and refuses it, exactly as it always has.
pub(super) fn peek_tree(bytes: &Bytes) -> Option<Message> {
    let tree = MessageTree::parse(bytes.clone()).ok()?;
    let (kind, id, method) = {
        let object = tree.root().as_object()?;
        let id = match object.get("id") {
            Some(id) => Some(id_text(bytes, id)?),
            None => None,
        };
        let members = Members {
            jsonrpc: optional_str(object.get("jsonrpc"))?,
            method: optional_str(object.get("method"))?,
            params_shaped: match object.get("params") {
                None | Some(BorrowedJson::Object(_) | BorrowedJson::Array(_)) => true,
                Some(_) => return None,
            },
            result: is_there(object.get("result"))?,
            error: is_there(object.get("error"))?,
        };
        let (kind, method) = classify(&members, &id).ok()?;
        (kind, id, method)
    };
    Some(Message {
        bytes: bytes.clone(),
        kind,
        id,
        method,
        tree: Some(Arc::new(tree)),
    })
}

/// A member read as the envelope reads a string: absent is `Some(None)`,
/// anything but a string (even `null`) is left to the envelope (`None`).
fn optional_str<'t>(member: Option<&'t BorrowedJson<'_>>) -> Option<Option<&'t str>> {
    match member {
        None => Some(None),
        Some(BorrowedJson::String(text)) => Some(Some(text)),
        Some(_) => None,
    }
}

/// Whether `result` or `error` is there; a `null` one, which the envelope
/// reads as absent, is left to it.
fn is_there(member: Option<&BorrowedJson<'_>>) -> Option<bool> {
    match member {
        None => Some(false),
        Some(BorrowedJson::Null) => None,
        Some(_) => Some(true),
    }
}

/// The id's exact text in `bytes`: a string that needed no unescaping,
/// quotes included, or an integer (whose digits the tree keeps as they
/// came).
fn id_text(bytes: &[u8], id: &BorrowedJson<'_>) -> Option<RequestId> {
    let text = match id {
        BorrowedJson::String(Cow::Borrowed(text)) => {
            std::str::from_utf8(bytes.get(place_quoted(bytes, text)?)?).ok()?
        }
        BorrowedJson::Number(number) if is_integer(number.as_str()) => number.as_str(),
        _ => return None,
    };
    Some(RequestId::from_json(text))
}

/// `-?[0-9]+`.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
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
    if text.starts_with('"') || is_integer(text) {
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

    /// What the tree reads is what the envelope reads: the same kind, id
    /// and method, or the same refusal.
    #[test]
    fn the_tree_and_the_envelope_read_a_message_alike() {
        let texts = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":-12,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/list","params":[]}"#,
            r#"{"method":"tools\/call","jsonrpc":"\u0032.0","id":"x"}"#,
            r#"{"jsonrpc":"2.0","id":"\u0061","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1.5}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":"3","error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":2.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":null,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":7}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":"p"}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":{"a":1,"a":2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            r#"["not", "an", "object"]"#,
            r#""text""#,
        ];
        for text in texts {
            let bytes = Bytes::copy_from_slice(text.as_bytes());
            let read = peek_message(bytes.clone());
            let enveloped = peek_envelope(bytes);
            assert_eq!(read, enveloped, "{text}");
        }
    }

    #[test]
    fn a_plain_message_keeps_its_tree_and_an_odd_one_is_read_without() {
        let plain = single(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#);
        let tree = plain.tree.expect("parsed once");
        assert_eq!(tree.bytes(), &plain.bytes);
        assert_eq!(
            tree.root().get("method").and_then(|m| m.as_str()),
            Some("tools/call")
        );
        let escaped_id = single(r#"{"jsonrpc":"2.0","id":"\u0061","method":"ping"}"#);
        assert_eq!(
            escaped_id.id.as_ref().map(RequestId::as_json),
            Some(r#""\u0061""#)
        );
        assert!(escaped_id.tree.is_none());
        let nested_twice = single(r#"{"jsonrpc":"2.0","method":"x","params":{"a":1,"a":2}}"#);
        assert!(nested_twice.tree.is_none());
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// One member's text, or `None` for absent: valid spellings,
        /// escaped ones and wrong types alike.
        fn member(name: &'static str, values: &[&'static str]) -> BoxedStrategy<Option<String>> {
            let spelled: Vec<Option<String>> = std::iter::once(None)
                .chain(
                    values
                        .iter()
                        .map(|value| Some(format!("\"{name}\":{value}"))),
                )
                .collect();
            prop::sample::select(spelled).boxed()
        }

        /// Envelopes of every shape the peek meets, members in any order.
        fn envelope() -> impl Strategy<Value = String> {
            let members = (
                member(
                    "jsonrpc",
                    &[r#""2.0""#, r#""\u0032.0""#, r#""1.0""#, "null", "2"],
                ),
                member(
                    "id",
                    &[
                        "7",
                        "-3",
                        r#""a""#,
                        r#""\u0061""#,
                        r#""x\"y""#,
                        "null",
                        "1.5",
                        "1e2",
                        "true",
                        "{}",
                    ],
                ),
                member(
                    "method",
                    &[r#""tools/call""#, r#""tools\/call""#, r#""x""#, "5", "null"],
                ),
                member(
                    "params",
                    &[
                        "{}",
                        "[]",
                        r#"{"a":1}"#,
                        r#"{"a":1,"a":2}"#,
                        "null",
                        r#""p""#,
                    ],
                ),
                member("result", &["{}", "null", "3", r#"{"b":[1,{"c":null}]}"#]),
                member("error", &[r#"{"code":1,"message":"m"}"#, "null"]),
                member("extra", &["[1,2]", r#""\ud83d\ude00""#]),
                member("id", &["8"]),
            );
            members
                .prop_map(|(a, b, c, d, e, f, g, h)| {
                    [a, b, c, d, e, f, g, h]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                })
                .prop_shuffle()
                .prop_map(|members| format!("{{{}}}", members.join(",")))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Reading a message from its tree never changes what the
            /// peek answers, for a valid message or a refused one.
            #[test]
            fn the_tree_reads_any_envelope_as_the_envelope_peek_does(text in envelope()) {
                let bytes = Bytes::from(text.clone());
                prop_assert_eq!(peek_message(bytes.clone()), peek_envelope(bytes), "{}", text);
            }
        }
    }
}
