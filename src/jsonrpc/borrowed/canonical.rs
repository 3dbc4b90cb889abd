//! The RFC 8785 (JCS) form of a [`BorrowedJson`]: the same string escapes,
//! number spelling and key order [`crate::jcs`] gives a `Value`, written
//! with its pieces, so the proxy still has one canonicalizer.

use std::borrow::Cow;

use super::{BorrowedJson, BorrowedObject};
use crate::jcs::{self, JcsError, Sink};

/// Objects up to this size are sorted on the stack.
const SORTED_ON_STACK: usize = 16;

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
pub fn write_object_with<S, F>(
    sink: &mut S,
    object: &BorrowedObject<'_>,
    skip: &[&str],
    mut write_value: F,
) -> Result<(), JcsError>
where
    S: Sink,
    F: FnMut(&mut S, &str, &BorrowedJson<'_>) -> Result<(), JcsError>,
{
    let kept = |(key, _): &&(Cow<'_, str>, BorrowedJson<'_>)| !skip.contains(&key.as_ref());
    let in_order = |a: &&(Cow<'_, str>, _), b: &&(Cow<'_, str>, _)| jcs::key_order(&a.0, &b.0);
    let members = object.members.iter().filter(kept);
    sink.put(b"{");
    // Replies usually come with their members already in order (JCS
    // writers): then no list of them is built. Messages usually do not,
    // but have few members: those are sorted on the stack.
    if members.clone().is_sorted_by(|a, b| in_order(a, b).is_le()) {
        write_members(sink, members, &mut write_value)?;
    } else if object.members.len() <= SORTED_ON_STACK {
        let mut slots = [None; SORTED_ON_STACK];
        let mut count = 0;
        for (slot, member) in slots.iter_mut().zip(members) {
            *slot = Some(member);
            count += 1;
        }
        let sorted = &mut slots[..count];
        sorted.sort_unstable_by(|a, b| match (a, b) {
            (Some(a), Some(b)) => in_order(a, b),
            _ => std::cmp::Ordering::Equal,
        });
        write_members(sink, sorted.iter().flatten().copied(), &mut write_value)?;
    } else {
        let mut sorted: Vec<_> = members.collect();
        sorted.sort_unstable_by(in_order);
        write_members(sink, sorted.into_iter(), &mut write_value)?;
    }
    sink.put(b"}");
    Ok(())
}

fn write_members<'m, 'a: 'm, S, F>(
    sink: &mut S,
    members: impl Iterator<Item = &'m (Cow<'a, str>, BorrowedJson<'a>)>,
    write_value: &mut F,
) -> Result<(), JcsError>
where
    S: Sink,
    F: FnMut(&mut S, &str, &BorrowedJson<'_>) -> Result<(), JcsError>,
{
    for (index, (key, value)) in members.enumerate() {
        if index > 0 {
            sink.put(b",");
        }
        jcs::write_str(sink, key);
        sink.put(b":");
        write_value(sink, key, value)?;
    }
    Ok(())
}
