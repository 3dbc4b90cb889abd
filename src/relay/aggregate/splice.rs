//! Routing a call in its own bytes: the members the router changes (the
//! request's id and the name it calls) are found by a borrowing peek and
//! replaced in place, so a routed `tools/call` or `prompts/get` and its
//! answer cross the router without being parsed into a tree and written
//! out again.
//!
//! Anything the peek cannot place exactly (a duplicate member, an escaped
//! id, a name that is not a plain string) goes the way of every other
//! message, through a parsed tree.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::jsonrpc::RequestId;

/// A `tools/call` or `prompts/get` from the agent, as its bytes hold it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct NamedCall {
    /// `true` for `tools/call`, `false` for `prompts/get`.
    pub(super) is_tool: bool,
    /// The agent's id.
    pub(super) id: RequestId,
    /// Where the id's text sits in the message.
    pub(super) id_at: Range<usize>,
    /// The name the agent called.
    pub(super) name: String,
    /// Where the name's JSON string (quotes included) sits in the message.
    pub(super) name_at: Range<usize>,
}

#[derive(Deserialize)]
struct CallEnvelope<'a> {
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    params: NameOnly<'a>,
}

#[derive(Deserialize)]
struct NameOnly<'a> {
    #[serde(borrow)]
    name: &'a RawValue,
}

#[derive(Deserialize)]
struct ReplyEnvelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<IgnoredAny>,
}

/// Reads a routable call out of `bytes`; `None` for any other message, or
/// one whose members cannot be placed exactly.
pub(super) fn peek_named_call(bytes: &[u8]) -> Option<NamedCall> {
    let envelope: CallEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    let is_tool = match envelope.method {
        "tools/call" => true,
        "prompts/get" => false,
        _ => return None,
    };
    let id = envelope.id.get();
    if !plain_id(id) {
        return None;
    }
    let raw_name = envelope.params.name.get();
    let name: String = serde_json::from_str(raw_name).ok()?;
    Some(NamedCall {
        is_tool,
        id: RequestId::from_json(id),
        id_at: place(bytes, id)?,
        name,
        name_at: place(bytes, raw_name)?,
    })
}

/// The id of an answer from a leg, when it is a response whose id is one
/// of the leg's own (a number), with where that id sits.
pub(super) fn peek_reply_id(bytes: &[u8]) -> Option<(u64, Range<usize>)> {
    let envelope: ReplyEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    if envelope.method.is_some() {
        return None;
    }
    let id = envelope.id?.get();
    Some((id.parse().ok()?, place(bytes, id)?))
}

/// Ids written as JSON writes them back (an integer, or a string with
/// nothing escaped), so the text is also the key a cancellation names.
fn plain_id(id: &str) -> bool {
    if let Some(text) = id.strip_prefix('"') {
        return text.ends_with('"') && !text.contains('\\');
    }
    let digits = id.strip_prefix('-').unwrap_or(id);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Where `part`, borrowed from `whole`, sits in it.
fn place(whole: &[u8], part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start + part.len();
    (whole.get(start..end)? == part.as_bytes()).then_some(start..end)
}

/// `bytes` with each range replaced by its text; the ranges do not overlap.
pub(super) fn splice(bytes: &[u8], edits: &mut [(Range<usize>, &[u8])]) -> Bytes {
    edits.sort_by_key(|(range, _)| range.start);
    let added: usize = edits.iter().map(|(_, text)| text.len()).sum();
    let mut out = BytesMut::with_capacity(bytes.len() + added);
    let mut from = 0;
    for (range, text) in edits.iter() {
        out.put_slice(&bytes[from..range.start]);
        out.put_slice(text);
        from = range.end;
    }
    out.put_slice(&bytes[from..]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_read_with_the_places_of_its_id_and_name() {
        let text = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"b__echo","arguments":{"name":"x"}}}"#;
        let call = peek_named_call(text).unwrap();
        assert!(call.is_tool);
        assert_eq!(call.id.as_json(), "7");
        assert_eq!(&text[call.id_at.clone()], b"7");
        assert_eq!(call.name, "b__echo");
        assert_eq!(&text[call.name_at.clone()], br#""b__echo""#);
    }

    #[test]
    fn the_id_and_name_are_replaced_in_the_original_bytes() {
        let text = br#"{"params":{"name":"b__echo","arguments":{}},"method":"tools/call","id":"a-1","jsonrpc":"2.0"}"#;
        let call = peek_named_call(text).unwrap();
        let spliced = splice(
            text,
            &mut [(call.id_at, b"12"), (call.name_at, br#""echo""#)],
        );
        assert_eq!(
            &spliced[..],
            br#"{"params":{"name":"echo","arguments":{}},"method":"tools/call","id":12,"jsonrpc":"2.0"}"#
        );
    }

    #[test]
    fn what_cannot_be_placed_exactly_is_left_to_the_tree() {
        let escaped_id =
            br#"{"jsonrpc":"2.0","id":"\u0061","method":"tools/call","params":{"name":"e"}}"#;
        let duplicate =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","name":"f"}}"#;
        let not_a_string = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#;
        let other = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"e"}}"#;
        let fraction = br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"e"}}"#;
        for text in [&escaped_id[..], duplicate, not_a_string, other, fraction] {
            assert_eq!(
                peek_named_call(text),
                None,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_reply_is_known_by_its_numeric_id() {
        let text = br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"id":"x"}]}}"#;
        let (id, at) = peek_reply_id(text).unwrap();
        assert_eq!(id, 42);
        assert_eq!(&text[at], b"42");
        let request = br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"}"#;
        assert_eq!(peek_reply_id(request), None);
        assert_eq!(
            peek_reply_id(br#"{"jsonrpc":"2.0","id":"s:1","result":{}}"#),
            None
        );
    }
}
