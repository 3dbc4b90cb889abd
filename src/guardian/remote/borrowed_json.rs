//! A Guardian reply parsed once into a small tree borrowed from its bytes.
//!
//! Every decision reply is parsed, MACed over its canonical form and then
//! read. A [`serde_json::Value`] would cost an owned `String` per key and
//! string and a hashed map per object; this tree keeps unescaped strings
//! and keys as slices of the reply, objects as short member lists, and is
//! both what the signature is checked over and what the decision is read
//! from, so the members acted upon are exactly the members verified.
//!
//! Parsing refuses a duplicate key anywhere (compared after unescaping):
//! JSON leaves duplicates undefined and parsers disagree on which one
//! wins, so a reply with one has no single meaning to verify. Numbers keep
//! their text, as in the proxy's `Value`s (`arbitrary_precision`).

mod canonical;
mod parse;

pub use canonical::{write_canonical, write_object_with, write_object_without};

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::{Number, Value};

use super::json_view::{JsonObject, JsonView};

/// A JSON value whose strings borrow from the bytes it was parsed from
/// wherever they hold no escape.
#[derive(Debug, Clone, PartialEq)]
pub enum BorrowedJson<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, by its text (serde_json's spelling, digits kept).
    Number(Number),
    /// A string, unescaped.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<BorrowedJson<'a>>),
    /// An object.
    Object(BorrowedObject<'a>),
}

/// An object's members in the order they came, no key twice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BorrowedObject<'a> {
    members: Vec<(Cow<'a, str>, BorrowedJson<'a>)>,
}

impl<'a> BorrowedJson<'a> {
    /// Parses one JSON text, refusing duplicate keys and trailing bytes.
    /// serde_json's nesting limit applies, as for any reply parsed with it.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        parse::parse(bytes)
    }
}

impl<'a> BorrowedObject<'a> {
    /// The members, in the order they came.
    pub fn members(&self) -> &[(Cow<'a, str>, BorrowedJson<'a>)] {
        &self.members
    }
}

impl<'a> JsonView for BorrowedJson<'a> {
    type Map = BorrowedObject<'a>;

    fn as_object(&self) -> Option<&Self::Map> {
        match self {
            BorrowedJson::Object(object) => Some(object),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, BorrowedJson::Null)
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            BorrowedJson::String(text) => Some(text),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&[Self]> {
        match self {
            BorrowedJson::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self {
            BorrowedJson::Number(number) => number.as_i64(),
            _ => None,
        }
    }

    fn as_u64(&self) -> Option<u64> {
        match self {
            BorrowedJson::Number(number) => number.as_u64(),
            _ => None,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            BorrowedJson::Null => Value::Null,
            BorrowedJson::Bool(value) => Value::Bool(*value),
            BorrowedJson::Number(number) => Value::Number(number.clone()),
            BorrowedJson::String(text) => Value::String(text.as_ref().to_owned()),
            BorrowedJson::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            BorrowedJson::Object(object) => Value::Object(
                object
                    .members
                    .iter()
                    .map(|(key, value)| (key.as_ref().to_owned(), value.to_value()))
                    .collect(),
            ),
        }
    }

    fn equals(&self, other: &Value) -> bool {
        match (self, other) {
            (BorrowedJson::Null, Value::Null) => true,
            (BorrowedJson::Bool(a), Value::Bool(b)) => a == b,
            (BorrowedJson::Number(a), Value::Number(b)) => a == b,
            (BorrowedJson::String(a), Value::String(b)) => a == b,
            (BorrowedJson::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.equals(b))
            }
            // Keys are unique on both sides, so equal sizes and every member
            // found equal means the same members.
            (BorrowedJson::Object(a), Value::Object(b)) => {
                a.members.len() == b.len()
                    && a.members
                        .iter()
                        .all(|(key, value)| b.get(key.as_ref()).is_some_and(|b| value.equals(b)))
            }
            _ => false,
        }
    }

    fn deserialize_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        // Only decision details and policy references are read this way,
        // and they are rare; the copy keeps serde's rules exactly those of
        // a `Value`.
        T::deserialize(self.to_value())
    }
}

impl<'a> JsonObject for BorrowedObject<'a> {
    type Value = BorrowedJson<'a>;

    fn get(&self, name: &str) -> Option<&BorrowedJson<'a>> {
        self.members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }
}

#[cfg(test)]
mod tests;
