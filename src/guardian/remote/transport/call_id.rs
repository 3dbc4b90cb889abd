//! JSON-RPC ids peeked out of request and reply bodies, for matching
//! replies to calls on a pipelined stream.
//!
//! A request is the proxy's own canonical JSON, where `id` is the first
//! member of each object, so its id is read by walking no further than
//! that member. A reply is first read the same way (a Guardian writing
//! canonical JSON leads with its `id` too), and when that finds no waiting
//! call, by serde, which parses only the `id` members and skips every
//! other value without building it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::TransportError;
use crate::jsonrpc::leading_member;

/// Whether a body is one JSON-RPC object or a batch array. A single reply
/// never answers a batch call and vice versa, so the two are keyed apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// One JSON-RPC object.
    Single,
    /// A JSON-RPC batch array.
    Batch,
}

/// A JSON-RPC id, normalised so that equal ids compare equal whatever
/// escaping the Guardian uses in its echo.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CallId {
    /// A numeric id, by its JSON text (ids are compared, never computed on).
    Number(String),
    /// A string id, unescaped.
    String(String),
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallId::Number(text) => f.write_str(text),
            CallId::String(text) => write!(f, "{text:?}"),
        }
    }
}

/// The ids found in a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplyIds {
    /// One reply object; `None` when its id is null or absent (a Guardian
    /// that could not read the request, or refused a batch, answers so).
    Single(Option<CallId>),
    /// A batch reply: each element's id, in the order they came.
    Batch(Vec<Option<CallId>>),
}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

/// The shape of a request and the id its reply will carry: the object's
/// id, or for a batch the first element's id.
pub(crate) fn request_key(body: &[u8]) -> Result<(Shape, CallId), TransportError> {
    if let Some(key) = leading_key(body) {
        return Ok(key);
    }
    let ids = peek(body).ok_or(TransportError::Unroutable(
        "the body is not a JSON-RPC request",
    ))?;
    let (shape, first) = match ids {
        ReplyIds::Single(id) => (Shape::Single, id),
        ReplyIds::Batch(ids) => {
            let first = ids
                .into_iter()
                .next()
                .ok_or(TransportError::Unroutable("the batch is empty"))?;
            (Shape::Batch, first)
        }
    };
    let id = first.ok_or(TransportError::Unroutable("the request has no usable id"))?;
    Ok((shape, id))
}

/// The ids of a reply; `None` when the body is not a JSON object or an
/// array of objects.
pub(crate) fn reply_ids(body: &[u8]) -> Option<ReplyIds> {
    peek(body)
}

/// The shape of a body and the id of its (first) object, read by walking
/// that object's members up to its `id`, nothing parsed; `None` when the
/// walk cannot tell (no such member at the top of the first object, an
/// escaped name, not JSON), and the full peek must.
pub(crate) fn leading_key(body: &[u8]) -> Option<(Shape, CallId)> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace())?;
    let (shape, object) = match body[start] {
        b'[' => (Shape::Batch, body.get(start + 1..)?),
        _ => (Shape::Single, body),
    };
    let at = leading_member(object, "id")?;
    let id = normalise(Some(std::str::from_utf8(object.get(at)?).ok()?))?;
    Some((shape, id))
}

fn peek(body: &[u8]) -> Option<ReplyIds> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first == b'[' {
        let elements: Vec<IdOnly<'_>> = serde_json::from_slice(body).ok()?;
        Some(ReplyIds::Batch(
            elements
                .iter()
                .map(|e| normalise(e.id.map(RawValue::get)))
                .collect(),
        ))
    } else {
        let object: IdOnly<'_> = serde_json::from_slice(body).ok()?;
        Some(ReplyIds::Single(normalise(object.id.map(RawValue::get))))
    }
}

/// Strings and numbers are valid ids; null and anything else match nothing.
fn normalise(text: Option<&str>) -> Option<CallId> {
    let text = text?.trim();
    match text.as_bytes().first()? {
        b'"' => serde_json::from_str(text).ok().map(CallId::String),
        b'-' | b'0'..=b'9' => Some(CallId::Number(text.to_owned())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> CallId {
        CallId::Number(text.into())
    }

    #[test]
    fn a_request_is_keyed_by_its_id() {
        let key = request_key(br#"{"jsonrpc":"2.0","method":"m","params":{"id":9},"id":7}"#);
        assert_eq!(key.unwrap(), (Shape::Single, number("7")));
    }

    #[test]
    fn a_batch_is_keyed_by_its_first_element() {
        let key = request_key(br#" [{"id":"a","method":"m"},{"id":"b","method":"m"}]"#);
        assert_eq!(key.unwrap(), (Shape::Batch, CallId::String("a".into())));
    }

    #[test]
    fn string_ids_are_unescaped() {
        let ids = reply_ids(br#"{"id":"\u0061b","result":{}}"#).unwrap();
        assert_eq!(ids, ReplyIds::Single(Some(CallId::String("ab".into()))));
    }

    #[test]
    fn requests_without_a_usable_id_are_unroutable() {
        for body in [
            &br#"{"method":"m"}"#[..],
            br#"{"id":null}"#,
            b"[]",
            b"not json",
            br#"{"id":true}"#,
        ] {
            assert!(
                matches!(request_key(body), Err(TransportError::Unroutable(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_null_reply_id_is_kept_as_none() {
        let ids = reply_ids(br#"{"jsonrpc":"2.0","error":{"code":-32600},"id":null}"#);
        assert_eq!(ids, Some(ReplyIds::Single(None)));
    }

    #[test]
    fn batch_reply_ids_are_listed_in_order() {
        let ids = reply_ids(br#"[{"id":2,"result":{}},{"id":null},{"id":1}]"#).unwrap();
        assert_eq!(
            ids,
            ReplyIds::Batch(vec![Some(number("2")), None, Some(number("1"))])
        );
    }

    #[test]
    fn a_request_the_walk_cannot_read_is_peeked_in_full() {
        let escaped = request_key(br#"{"\u0069d":5,"method":"m"}"#);
        assert_eq!(escaped.unwrap(), (Shape::Single, number("5")));
        let null_first = request_key(br#"[{"id":null},{"id":2}]"#);
        assert!(matches!(null_first, Err(TransportError::Unroutable(_))));
    }

    #[test]
    fn ids_are_found_past_nested_members_that_look_like_them() {
        let body = br#"{"params":{"id":"inner","hooks":[{"id":9}]},"method":"m","id":"outer"}"#;
        assert_eq!(
            request_key(body).unwrap(),
            (Shape::Single, CallId::String("outer".into()))
        );
        let batch = br#"[{"params":{"id":0},"id":3},{"id":4}]"#;
        assert_eq!(request_key(batch).unwrap(), (Shape::Batch, number("3")));
    }

    #[test]
    fn a_reply_is_keyed_by_the_id_its_first_object_leads_with() {
        let single = leading_key(br#"{"id":7,"jsonrpc":"2.0","result":{"id":1}}"#);
        assert_eq!(single, Some((Shape::Single, number("7"))));
        let batch = leading_key(br#"[{"id":"a","result":{}},{"id":"b"}]"#);
        assert_eq!(batch, Some((Shape::Batch, CallId::String("a".into()))));
        assert_eq!(leading_key(br#"{"result":{"id":1}}"#), None);
        assert_eq!(leading_key(b"{oops"), None);
    }

    #[test]
    fn a_reply_that_is_not_json_has_no_ids() {
        assert_eq!(reply_ids(b"{oops"), None);
        assert_eq!(reply_ids(b"42"), None);
    }
}
