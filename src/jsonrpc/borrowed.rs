//! JSON parsed once into a small tree borrowed from its bytes: every MCP
//! message the hooks describe ([`super::MessageTree`]) and every Guardian
//! reply.
//!
//! A [`serde_json::Value`] would cost an owned `String` per key and string
//! and a hashed map per object; this tree keeps unescaped strings and keys
//! as slices of the text, objects as short member lists. A message's hooks
//! read it, hash its canonical form and look up policy pointers in it; a
//! Guardian reply is both what its signature is checked over and what the
//! decision is read from, so the members acted upon are exactly the members
//! verified.
//!
//! Parsing refuses a duplicate key anywhere (compared after unescaping):
//! JSON leaves duplicates undefined and parsers disagree on which one
//! wins, so a text with one has no single meaning to govern or verify.
//! Numbers keep their text, as in the proxy's `Value`s
//! (`arbitrary_precision`).

mod canonical;
mod parse;

pub use canonical::{write_canonical, write_object_with, write_object_without};

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Number, Value};

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
        parse::parse(bytes, parse::Depth::SerdeLimit)
    }

    /// Parses one message whose nesting [`super::scan`] has already
    /// bounded (to the configured `max_json_depth`, which may exceed
    /// serde_json's own limit), refusing duplicate keys and trailing bytes.
    pub fn parse_scanned(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        parse::parse(bytes, parse::Depth::Scanned)
    }

    /// The same value owning all its strings, from a `Value`.
    pub fn from_value(value: &Value) -> BorrowedJson<'static> {
        match value {
            Value::Null => BorrowedJson::Null,
            Value::Bool(value) => BorrowedJson::Bool(*value),
            Value::Number(number) => BorrowedJson::Number(number.clone()),
            Value::String(text) => BorrowedJson::String(Cow::Owned(text.clone())),
            Value::Array(items) => {
                BorrowedJson::Array(items.iter().map(Self::from_value).collect())
            }
            Value::Object(members) => BorrowedJson::Object(BorrowedObject {
                members: members
                    .iter()
                    .map(|(key, value)| (Cow::Owned(key.clone()), Self::from_value(value)))
                    .collect(),
            }),
        }
    }

    /// The same value as a `Value`, members in the order they came.
    pub fn to_value(&self) -> Value {
        match self {
            BorrowedJson::Null => Value::Null,
            BorrowedJson::Bool(value) => Value::Bool(*value),
            BorrowedJson::Number(number) => Value::Number(number.clone()),
            BorrowedJson::String(text) => Value::String(text.as_ref().to_owned()),
            BorrowedJson::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            BorrowedJson::Object(object) => {
                let mut members = Map::with_capacity(object.members.len());
                for (key, value) in &object.members {
                    members.insert(key.as_ref().to_owned(), value.to_value());
                }
                Value::Object(members)
            }
        }
    }

    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<&BorrowedJson<'a>> {
        self.as_object()?.get(name)
    }

    /// The member `name` of an object, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut BorrowedJson<'a>> {
        match self {
            BorrowedJson::Object(object) => object.get_mut(name),
            _ => None,
        }
    }

    /// This object.
    pub fn as_object(&self) -> Option<&BorrowedObject<'a>> {
        match self {
            BorrowedJson::Object(object) => Some(object),
            _ => None,
        }
    }

    /// This array's items.
    pub fn as_array(&self) -> Option<&[BorrowedJson<'a>]> {
        match self {
            BorrowedJson::Array(items) => Some(items),
            _ => None,
        }
    }

    /// This string, unescaped.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            BorrowedJson::String(text) => Some(text),
            _ => None,
        }
    }

    /// This boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            BorrowedJson::Bool(value) => Some(*value),
            _ => None,
        }
    }
}

/// Written as serde_json writes the `Value` it stands for: members in the
/// order they came, strings with serde_json's escapes, numbers by their
/// text. Compact text of a borrowed value is the same as of its `Value`.
impl Serialize for BorrowedJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BorrowedJson::Null => serializer.serialize_unit(),
            BorrowedJson::Bool(value) => serializer.serialize_bool(*value),
            BorrowedJson::Number(number) => number.serialize(serializer),
            BorrowedJson::String(text) => serializer.serialize_str(text),
            BorrowedJson::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            BorrowedJson::Object(object) => {
                let mut map = serializer.serialize_map(Some(object.members.len()))?;
                for (key, value) in &object.members {
                    map.serialize_entry(key.as_ref(), value)?;
                }
                map.end()
            }
        }
    }
}

impl<'a> BorrowedObject<'a> {
    /// The members, in the order they came.
    pub fn members(&self) -> &[(Cow<'a, str>, BorrowedJson<'a>)] {
        &self.members
    }

    /// The member `name`.
    pub fn get(&self, name: &str) -> Option<&BorrowedJson<'a>> {
        self.members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }

    /// The member `name`, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut BorrowedJson<'a>> {
        self.members
            .iter_mut()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

#[cfg(test)]
mod tests;
