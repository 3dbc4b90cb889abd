//! A request that names what it calls in `params.name` (`tools/call`,
//! `prompts/get`), peeked once for whoever routes it by that name: the
//! same checks and the same [`Message`] as [`peek_frame_within`] (its tree
//! included), plus where the id and the name sit in the bytes, so a router
//! can replace them in place and hand the message on without its being
//! parsed again.
//!
//! [`peek_frame_within`]: super::peek_frame_within

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;

use super::members::{leading_member, locate_members, place_quoted};
use super::message::peek_tree;
use super::{BorrowedJson, Message, MessageKind};

/// A single request with a `params.name`, and where its parts sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRequest {
    /// The message, as [`peek_frame_within`](super::peek_frame_within)
    /// would have read it, with its tree.
    pub message: Message,
    /// Where the id's JSON text sits in the message's bytes.
    pub id_at: Range<usize>,
    /// Where the name's JSON string (quotes included) sits.
    pub name_at: Range<usize>,
}

impl NamedRequest {
    /// The name the request calls, unescaped.
    pub fn name(&self) -> &str {
        self.message
            .tree
            .as_ref()
            .and_then(|tree| tree.root().get("params")?.get("name")?.as_str())
            .unwrap_or_default()
    }
}

/// Reads `bytes` as a request whose `params.name` is a string, checked as
/// [`peek_frame_within`](super::peek_frame_within) checks a message
/// (UTF-8, nesting within `max_depth`, a valid JSON-RPC request) and
/// parsed into the tree its hooks read. `None` for anything else, which is
/// left to the ordinary peek and its errors.
pub fn peek_named_request(bytes: Bytes, max_depth: usize) -> Option<NamedRequest> {
    super::scan(&bytes, max_depth).ok()?;
    let message = peek_tree(&bytes)?;
    if message.kind != MessageKind::Request {
        return None;
    }
    let root = message.tree.as_ref()?.root();
    let params = root.get("params")?;
    // The tree refused a key given twice, so the walk may stop at the
    // first `id`; a member before it with an escaped name stops it short,
    // and the request is then left to the ordinary peek.
    let id_at = value_at(&bytes, root.get("id")?, |bytes| leading_member(bytes, "id"))?;
    let name = params.get("name").filter(|name| name.as_str().is_some())?;
    let name_at = value_at(&bytes, name, |bytes| {
        let [params] = locate_members(bytes, ["params"])?;
        let params = params?;
        let [name] = locate_members(bytes.get(params.clone())?, ["name"])?;
        let name = name?;
        Some(params.start + name.start..params.start + name.end)
    })?;
    Some(NamedRequest {
        message,
        id_at,
        name_at,
    })
}

/// Where `value`, read from `bytes`, sits in them: found from the string
/// itself when the tree borrowed it (quotes included), else by `locate`,
/// which walks the members to it.
fn value_at(
    bytes: &[u8],
    value: &BorrowedJson<'_>,
    locate: impl FnOnce(&[u8]) -> Option<Range<usize>>,
) -> Option<Range<usize>> {
    match value {
        BorrowedJson::String(Cow::Borrowed(text)) => place_quoted(bytes, text),
        _ => locate(bytes),
    }
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
        assert_eq!(&text[named.id_at], r#""a""#);
        assert_eq!(named.message.method(), "prompts/get");
        assert!(named.message.tree.is_some());
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
