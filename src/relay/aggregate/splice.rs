//! Routing a call in its own bytes: the members the router changes (the
//! request's id and the name it calls) are found by a borrowing peek and
//! replaced in place, so a routed `tools/call` or `prompts/get` and its
//! answer cross the router without being parsed into a tree and written
//! out again.
//!
//! Anything the peek cannot place exactly (a duplicate member, an escaped
//! id, a name that is not a plain string) goes the way of every other
//! message, through a parsed tree.

use std::borrow::Cow;
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Number;

use crate::jsonrpc::{
    locate_members, peek_named_request, BorrowedJson, MessageTree, NamedRequest, RequestId,
};

/// A `tools/call` or `prompts/get` from the agent, peeked once: by the
/// router to route it, and for the relay session it goes on to.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct NamedCall {
    /// `true` for `tools/call`, `false` for `prompts/get`.
    pub(super) is_tool: bool,
    /// The agent's id.
    pub(super) id: RequestId,
    /// The request (its id taken out), with where its id and name sit.
    pub(super) request: NamedRequest,
}

/// Reads a routable call out of `bytes`, checked as the relay checks
/// every message (nesting within `max_depth`); `None` for any other
/// message, or one whose members cannot be placed exactly.
pub(super) fn peek_named_call(bytes: &Bytes, max_depth: usize) -> Option<NamedCall> {
    let mut request = peek_named_request(bytes.clone(), max_depth)?;
    let is_tool = match request.message.method() {
        "tools/call" => true,
        "prompts/get" => false,
        _ => return None,
    };
    let id = request.message.id.take()?;
    if !plain_id(id.as_json()) {
        return None;
    }
    Some(NamedCall {
        is_tool,
        id,
        request,
    })
}

/// The id (JSON text) of an answer from a leg, when it is a response,
/// with where that id sits. The leg's relay has already read the frame as
/// JSON, so only its top-level members are looked at.
pub(super) fn peek_reply_id(bytes: &[u8]) -> Option<(&str, Range<usize>)> {
    let [id, method] = locate_members(bytes, ["id", "method"])?;
    if method.is_some() {
        return None;
    }
    let id = id?;
    let text = std::str::from_utf8(bytes.get(id.clone())?).ok()?;
    Some((text, id))
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

/// The tree of a call spliced into `bytes`, `name` and `id` being what
/// was spliced in (each `None` when kept): the agent's tree with the same
/// members changed, so the leg's hooks read the call as it is sent
/// without parsing it again. `None` (the leg then parses it) when the
/// tree is shared or an id cannot be spelled as a tree value.
pub(super) fn spliced_tree(
    mut tree: Arc<MessageTree>,
    bytes: &Bytes,
    name: Option<&str>,
    id: Option<&RequestId>,
) -> Option<Arc<MessageTree>> {
    if name.is_none() && id.is_none() {
        return Some(tree);
    }
    let id = match id {
        Some(id) => Some(id_value(id)?),
        None => None,
    };
    Arc::get_mut(&mut tree)?.splice(bytes.clone(), |root| {
        if let Some(name) = name {
            if let Some(slot) = root.get_mut("params").and_then(|p| p.get_mut("name")) {
                *slot = BorrowedJson::String(server_name(slot, name));
            }
        }
        if let (Some(id), Some(slot)) = (id, root.get_mut("id")) {
            *slot = id;
        }
    });
    Some(tree)
}

/// The server's name `name` for a call whose tree names it `called`:
/// under a prefix the server's name is the end of the agent's, so it can
/// borrow the message's text as the agent's name did.
fn server_name<'a>(called: &BorrowedJson<'a>, name: &str) -> Cow<'a, str> {
    if let BorrowedJson::String(Cow::Borrowed(called)) = called {
        let called: &'a str = called;
        if let Some(end) = called.len().checked_sub(name.len()) {
            if let Some(suffix) = called.get(end..).filter(|suffix| *suffix == name) {
                return Cow::Borrowed(suffix);
            }
        }
    }
    Cow::Owned(name.to_owned())
}

/// An id as a tree value: an integer, or a string with nothing escaped
/// (as the router spells the ids it gives).
fn id_value(id: &RequestId) -> Option<BorrowedJson<'static>> {
    let text = id.as_json();
    if let Some(quoted) = text.strip_prefix('"') {
        let inner = quoted.strip_suffix('"')?;
        return (!inner.contains('\\')).then(|| BorrowedJson::String(Cow::Owned(inner.to_owned())));
    }
    Number::from_str(text).ok().map(BorrowedJson::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peek(text: &[u8]) -> Option<NamedCall> {
        peek_named_call(&Bytes::copy_from_slice(text), 128)
    }

    #[test]
    fn a_call_is_read_with_the_places_of_its_id_and_name() {
        let text = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"b__echo","arguments":{"name":"x"}}}"#;
        let call = peek(text).unwrap();
        assert!(call.is_tool);
        assert_eq!(call.id.as_json(), "7");
        assert_eq!(&text[call.request.id_at.clone()], b"7");
        assert_eq!(call.request.name(), "b__echo");
        assert_eq!(&text[call.request.name_at.clone()], br#""b__echo""#);
    }

    #[test]
    fn the_id_and_name_are_replaced_in_the_original_bytes() {
        let text = br#"{"params":{"name":"b__echo","arguments":{}},"method":"tools/call","id":"a-1","jsonrpc":"2.0"}"#;
        let call = peek(text).unwrap();
        let spliced = splice(
            text,
            &mut [
                (call.request.id_at, b"12"),
                (call.request.name_at, br#""echo""#),
            ],
        );
        assert_eq!(
            &spliced[..],
            br#"{"params":{"name":"echo","arguments":{}},"method":"tools/call","id":12,"jsonrpc":"2.0"}"#
        );
    }

    #[test]
    fn a_spliced_call_keeps_a_tree_that_reads_as_its_new_bytes() {
        let text = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"b__echo","arguments":{"x":"y"}}}"#;
        for (new_id, renamed) in [
            ("\"r:1\"", Some("echo")),
            ("12", None),
            ("7", Some("e\"cho")),
        ] {
            let call = peek(text).unwrap();
            let new_id = RequestId::from_json(new_id);
            let quoted = serde_json::to_string(renamed.unwrap_or("b__echo")).unwrap();
            let bytes = splice(
                text,
                &mut [
                    (call.request.name_at.clone(), quoted.as_bytes()),
                    (call.request.id_at.clone(), new_id.as_json().as_bytes()),
                ],
            );
            let tree = call.request.message.tree.unwrap();
            let tree = spliced_tree(tree, &bytes, renamed, Some(&new_id)).unwrap();
            assert_eq!(tree.bytes(), &bytes);
            let reparsed = MessageTree::parse(bytes.clone()).unwrap();
            assert_eq!(tree.root(), reparsed.root());
            assert_eq!(tree.value(), reparsed.value());
        }
    }

    #[test]
    fn the_servers_name_borrows_the_end_of_the_agents() {
        let called = BorrowedJson::String(Cow::Borrowed("b__echo"));
        assert!(matches!(
            server_name(&called, "echo"),
            Cow::Borrowed("echo")
        ));
        assert!(matches!(server_name(&called, "other"), Cow::Owned(name) if name == "other"));
        let escaped = BorrowedJson::String(Cow::Owned("b__echo".into()));
        assert!(matches!(server_name(&escaped, "echo"), Cow::Owned(_)));
    }

    #[test]
    fn a_call_sent_as_it_came_keeps_its_own_tree() {
        let text = br#"{"jsonrpc":"2.0","id":"a","method":"prompts/get","params":{"name":"p"}}"#;
        let call = peek(text).unwrap();
        let tree = call.request.message.tree.unwrap();
        let bytes = Bytes::copy_from_slice(text);
        let kept = spliced_tree(tree.clone(), &bytes, None, None).unwrap();
        assert!(Arc::ptr_eq(&kept, &tree));
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
            assert_eq!(peek(text), None, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn a_reply_is_known_by_its_id() {
        let text = br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"id":"x"}]}}"#;
        let (id, at) = peek_reply_id(text).unwrap();
        assert_eq!(id, "42");
        assert_eq!(&text[at], b"42");
        let request = br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"}"#;
        assert_eq!(peek_reply_id(request), None);
        let named = br#"{"jsonrpc":"2.0","id":"s:1","result":{}}"#;
        assert_eq!(peek_reply_id(named).map(|(id, _)| id), Some("\"s:1\""));
    }
}
