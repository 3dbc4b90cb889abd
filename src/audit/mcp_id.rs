//! `McpId`: the JSON-RPC id an audit record names, kept as the message
//! spelled it whenever that spelling is already canonical.
//!
//! Every hook of every request and response records its message's id.
//! Most ids are small integers or plain strings whose JSON text is their
//! JCS form byte for byte, so the record keeps that text (inline in a
//! [`RequestId`]) and writes it as it is; only an id whose text JCS would
//! respell (an escape, an integer beyond what a double holds exactly, `-0`)
//! is parsed into a value and canonicalized like any other.

use std::sync::Arc;

use serde_json::Value;

use crate::jcs::{self, JcsError, Sink};
use crate::jsonrpc::RequestId;

/// The id of the MCP message a record is about.
#[derive(Debug, Clone, PartialEq)]
pub enum McpId {
    /// A JSON-RPC id whose text is its canonical form.
    Canonical(RequestId),
    /// Any other JSON value, canonicalized when written.
    Value(Arc<Value>),
}

/// Digits a JSON integer may have and still be a double exactly, so that
/// JCS (which writes numbers as ECMAScript does) spells it with the same
/// digits.
const EXACT_DIGITS: usize = 15;

impl McpId {
    /// The id of a message, by its text when that is canonical.
    pub fn of(id: &RequestId) -> Self {
        if is_canonical(id.as_json()) {
            Self::Canonical(id.clone())
        } else {
            Self::Value(Arc::new(id.to_value()))
        }
    }

    /// Checks that the id has a canonical form, as
    /// [`jcs::check_value`] does for a value.
    pub(crate) fn check(&self) -> Result<(), JcsError> {
        match self {
            Self::Canonical(_) => Ok(()),
            Self::Value(value) => jcs::check_value(value),
        }
    }

    /// The id's JCS form.
    pub(crate) fn write<S: Sink>(&self, sink: &mut S) -> Result<(), JcsError> {
        match self {
            Self::Canonical(id) => {
                sink.put(id.as_json().as_bytes());
                Ok(())
            }
            Self::Value(value) => jcs::write_value(sink, value),
        }
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Canonical(id) => id.to_value(),
            Self::Value(value) => Value::clone(value),
        }
    }
}

/// An id lent to an entry's content: a record's, or a stored entry's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum McpIdRef<'a> {
    Record(&'a McpId),
    Stored(&'a Value),
}

impl McpIdRef<'_> {
    /// The id's JCS form.
    pub(crate) fn write<S: Sink>(self, sink: &mut S) -> Result<(), JcsError> {
        match self {
            Self::Record(id) => id.write(sink),
            Self::Stored(value) => jcs::write_value(sink, value),
        }
    }

    /// The id as a JSON value.
    #[cfg(test)]
    pub(crate) fn to_value(self) -> Value {
        match self {
            Self::Record(id) => id.to_value(),
            Self::Stored(value) => value.clone(),
        }
    }
}

impl From<Value> for McpId {
    fn from(value: Value) -> Self {
        Self::Value(Arc::new(value))
    }
}

/// Whether the JSON text of an id is already its JCS form: a string with
/// no escape (JCS escapes only what JSON requires escaped, and writes
/// everything else as the raw UTF-8 such a string already holds), or an
/// integer of at most [`EXACT_DIGITS`] digits other than `-0`.
fn is_canonical(text: &str) -> bool {
    if let Some(inner) = text.strip_prefix('"') {
        return inner.ends_with('"') && !inner.contains('\\');
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = digits == "0" || !digits.starts_with('0');
    integer && no_leading_zero && digits.len() <= EXACT_DIGITS && text != "-0"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(id: &McpId) -> String {
        let mut out = Vec::new();
        id.write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn generic(text: &str) -> String {
        let mut out = Vec::new();
        let value = RequestId::from_json(text).to_value();
        jcs::write_value(&mut out, &value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_id_writes_what_the_generic_canonicalizer_writes() {
        for text in [
            "0",
            "7",
            "-12",
            "123456789012345",
            "1234567890123456",
            "-1234567890123456789",
            "-0",
            "\"\"",
            "\"abc\"",
            "\"id-7 é ☃\"",
            "\"a\\u0041\"",
            "\"tab\\t\"",
            "\"\\/\"",
        ] {
            let id = McpId::of(&RequestId::from_json(text));
            assert_eq!(canonical(&id), generic(text), "{text}");
            assert_eq!(id.to_value(), RequestId::from_json(text).to_value());
        }
    }

    #[test]
    fn plain_ids_are_kept_as_text() {
        for text in ["0", "-12", "123456789012345", "\"abc\"", "\"é\""] {
            let id = McpId::of(&RequestId::from_json(text));
            assert!(matches!(id, McpId::Canonical(_)), "{text}");
        }
        for text in ["-0", "1234567890123456", "\"a\\u0041\""] {
            let id = McpId::of(&RequestId::from_json(text));
            assert!(matches!(id, McpId::Value(_)), "{text}");
        }
    }
}
