//! The RFC 8785 (JCS) form of a [`BorrowedJson`]: the same string escapes,
//! number spelling and key order [`crate::jcs`] gives a `Value`, written
//! with its pieces, so the proxy still has one canonicalizer.

use super::{BorrowedJson, BorrowedObject};
use crate::jcs::{self, JcsError, Sink};

/// Streams the canonical form of `value` into `sink`.
pub fn write_canonical<S: Sink>(sink: &mut S, value: &BorrowedJson<'_>) -> Result<(), JcsError> {
    match value {
        BorrowedJson::Null => sink.put(b"null"),
        BorrowedJson::Bool(true) => sink.put(b"true"),
        BorrowedJson::Bool(false) => sink.put(b"false"),
        BorrowedJson::Number(number) => jcs::write_number(sink, number)?,
        BorrowedJson::String(text) => jcs::write_str(sink, text),
        BorrowedJson::Array(items) => {
            sink.put(b"[");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    sink.put(b",");
                }
                write_canonical(sink, item)?;
            }
            sink.put(b"]");
        }
        BorrowedJson::Object(object) => write_object_without(sink, object, &[])?,
    }
    Ok(())
}

/// Streams the canonical form of `object` minus the keys in `skip` (a
/// signed member's `signature`).
pub fn write_object_without<S: Sink>(
    sink: &mut S,
    object: &BorrowedObject<'_>,
    skip: &[&str],
) -> Result<(), JcsError> {
    write_object_with(sink, object, skip, |sink, _, value| {
        write_canonical(sink, value)
    })
}

/// Streams `object` minus the keys in `skip` in JCS key order, each
/// member's value written by `write_value(sink, key, value)`, so a caller
/// can treat one member differently (the signed input leaves the
/// signature out of the signed member only).
pub fn write_object_with<'m, S, F>(
    sink: &mut S,
    object: &'m BorrowedObject<'m>,
    skip: &[&str],
    write_value: F,
) -> Result<(), JcsError>
where
    S: Sink,
    F: FnMut(&mut S, &'m str, &'m BorrowedJson<'m>) -> Result<(), JcsError>,
{
    let kept = object
        .members
        .iter()
        .filter(|(key, _)| !skip.contains(&key.as_ref()))
        .map(|(key, value)| (key.as_ref(), value));
    jcs::write_object_in_key_order(sink, kept, write_value)
}
