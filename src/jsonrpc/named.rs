//! A request that names what it calls in `params.name` (`tools/call`,
//! `prompts/get`), peeked once for whoever routes it by that name: the
//! same checks and the same [`Message`] as [`peek_frame_within`], plus
//! where the id and the name sit in the bytes, so a router can replace
//! them in place and hand the message on without its being peeked again.
//!
//! [`peek_frame_within`]: super::peek_frame_within

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use bytes::Bytes;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::message::{classify, Envelope};
use super::{Message, MessageKind, RequestId};

/// A single request with a `params.name`, and where its parts sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRequest {
    /// The message, as [`peek_frame_within`](super::peek_frame_within)
    /// would have read it.
    pub message: Message,
    /// Where the id's JSON text sits in the message's bytes.
    pub id_at: Range<usize>,
    /// Where the name's JSON string (quotes included) sits.
    pub name_at: Range<usize>,
    /// The name, when it had to be unescaped; otherwise it is read from
    /// the bytes.
    unescaped_name: Option<String>,
}

impl NamedRequest {
    /// The name the request calls.
    pub fn name(&self) -> &str {
        if let Some(name) = &self.unescaped_name {
            return name;
        }
        let quoted = &self.message.bytes[self.name_at.clone()];
        let bare = quoted
            .get(1..quoted.len().saturating_sub(1))
            .unwrap_or_default();
        std::str::from_utf8(bare).unwrap_or_default()
    }
}

/// `params` as an object (never an array), keeping only its `name`.
struct NamedParams<'a> {
    name: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for NamedParams<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(NamedParamsVisitor(PhantomData))
    }
}

struct NamedParamsVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for NamedParamsVisitor<'a> {
    type Value = NamedParams<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of params")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut name = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "name" {
                if name.is_some() {
                    return Err(serde::de::Error::duplicate_field("name"));
                }
                name = Some(map.next_value::<&'a RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(NamedParams { name })
    }
}

/// Reads `bytes` as a request whose `params.name` is a string, checked as
/// [`peek_frame_within`](super::peek_frame_within) checks a message
/// (UTF-8, nesting within `max_depth`, a valid JSON-RPC request).
/// `None` for anything else, which is left to the ordinary peek and its
/// errors.
pub fn peek_named_request(bytes: Bytes, max_depth: usize) -> Option<NamedRequest> {
    super::scan(&bytes, max_depth).ok()?;
    let envelope: Envelope<'_, NamedParams<'_>> = serde_json::from_slice(&bytes).ok()?;
    let raw_id = envelope.id?;
    let raw_name = envelope.params.as_ref()?.name?;
    let id = Some(RequestId::from_json(raw_id.get()));
    // `NamedParams` reads only an object.
    let (kind, method) = classify(&envelope.members(true), &id).ok()?;
    if kind != MessageKind::Request {
        return None;
    }
    let quoted = raw_name.get();
    if !quoted.starts_with('"') {
        return None;
    }
    let unescaped_name = if quoted.contains('\\') {
        Some(serde_json::from_str::<String>(quoted).ok()?)
    } else {
        None
    };
    let id_at = place(&bytes, raw_id.get())?;
    let name_at = place(&bytes, raw_name.get())?;
    Some(NamedRequest {
        message: Message {
            bytes: bytes.clone(),
            kind,
            id,
            method,
        },
        id_at,
        name_at,
        unescaped_name,
    })
}

/// Where `part`, a string borrowed from `whole` (by a borrowing
/// deserializer), sits in it.
pub fn place(whole: &[u8], part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start + part.len();
    (whole.get(start..end)? == part.as_bytes()).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{peek_frame_within, Frame, DEFAULT_MAX_JSON_DEPTH};

    fn peek(text: &str) -> Option<NamedRequest> {
        peek_named_request(
            Bytes::copy_from_slice(text.as_bytes()),
            DEFAULT_MAX_JSON_DEPTH,
        )
    }

    #[test]
    fn a_call_reads_as_the_ordinary_peek_reads_it_with_its_places() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"b__echo","arguments":{"name":"x"}}}"#;
        let named = peek(text).unwrap();
        let Ok(Frame::Single(ordinary)) =
            peek_frame_within(Bytes::copy_from_slice(text.as_bytes()), 128)
        else {
            panic!("the ordinary peek refused it");
        };
        assert_eq!(named.message, ordinary);
        assert_eq!(&text[named.id_at.clone()], "7");
        assert_eq!(named.name(), "b__echo");
        assert_eq!(&text[named.name_at], r#""b__echo""#);
    }

    #[test]
    fn an_escaped_name_is_unescaped_and_placed_with_its_escapes() {
        let text =
            r#"{"jsonrpc":"2.0","id":"a","method":"prompts/get","params":{"name":"b\u005fx"}}"#;
        let named = peek(text).unwrap();
        assert_eq!(named.name(), "b_x");
        assert_eq!(&text[named.name_at], r#""b\u005fx""#);
        assert_eq!(named.message.method(), "prompts/get");
    }

    #[test]
    fn what_the_ordinary_peek_refuses_is_not_read_here_either() {
        for text in [
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","name":"f"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["e"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e"}}]"#,
        ] {
            assert_eq!(peek(text), None, "{text}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"e","arguments":{}}}}}"#,
            "[".repeat(200) + &"]".repeat(200)
        );
        assert_eq!(peek(&deep), None);
        let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}";
        assert_eq!(peek_named_request(Bytes::from_static(not_utf8), 128), None);
    }
}
