//! Read-only access to a parsed JSON value, whichever tree holds it.
//!
//! A decision reply is parsed once into a tree borrowed from its bytes
//! ([`BorrowedJson`](crate::jsonrpc::BorrowedJson)); the handshake,
//! pings and an in-process policy's answer arrive as a
//! [`serde_json::Value`]. The wire rules ([`super::wire`]) and the
//! signature check ([`super::signing`]) read both through this trait, so
//! each rule is written, and tested, once.

use serde::de::DeserializeOwned;

use crate::jsonrpc::{BorrowedJson, BorrowedObject};
use serde_json::{Map, Value};

/// What the wire checks read of a JSON value.
///
/// Numbers follow serde_json's `arbitrary_precision` semantics: a number
/// is its JSON text, so `5.0` is not the integer `5`, and `1` equals `1`
/// but not `"1"`.
pub trait JsonView: Sized {
    /// The tree's object type.
    type Map: JsonObject<Value = Self>;

    /// This object.
    fn as_object(&self) -> Option<&Self::Map>;

    /// The member `name` of an object; `None` when absent or when this is
    /// not an object.
    fn member(&self, name: &str) -> Option<&Self> {
        self.as_object()?.get(name)
    }

    /// Whether this is `null`.
    fn is_null(&self) -> bool;

    /// This string's (unescaped) text.
    fn as_str(&self) -> Option<&str>;

    /// This array's items.
    fn as_array(&self) -> Option<&[Self]>;

    /// This number, if its text is an integer within `i64`.
    fn as_i64(&self) -> Option<i64>;

    /// This number, if its text is an integer within `u64`.
    fn as_u64(&self) -> Option<u64>;

    /// An owned copy: for what outlives the reply (an error's `data`) and
    /// for error messages, which quote the offending value.
    fn to_value(&self) -> Value;

    /// Whether this is the same JSON value as `other` (ids are compared
    /// this way: `1` and `"1"` differ, key order does not matter).
    fn equals(&self, other: &Value) -> bool;

    /// Reads a typed member (decision details, policy references) from
    /// this value with serde.
    fn deserialize_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error>;
}

/// What the wire checks read of a JSON object.
pub trait JsonObject {
    /// The tree's value type.
    type Value: JsonView<Map = Self>;

    /// The member `name`, `null` included.
    fn get(&self, name: &str) -> Option<&Self::Value>;
}

impl JsonView for Value {
    type Map = Map<String, Value>;

    fn as_object(&self) -> Option<&Self::Map> {
        Value::as_object(self)
    }

    fn is_null(&self) -> bool {
        Value::is_null(self)
    }

    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }

    fn as_array(&self) -> Option<&[Self]> {
        Value::as_array(self).map(Vec::as_slice)
    }

    fn as_i64(&self) -> Option<i64> {
        Value::as_i64(self)
    }

    fn as_u64(&self) -> Option<u64> {
        Value::as_u64(self)
    }

    fn to_value(&self) -> Value {
        self.clone()
    }

    fn equals(&self, other: &Value) -> bool {
        self == other
    }

    fn deserialize_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(self)
    }
}

impl JsonObject for Map<String, Value> {
    type Value = Value;

    fn get(&self, name: &str) -> Option<&Value> {
        Map::get(self, name)
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
        BorrowedJson::to_value(self)
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
                a.members().len() == b.len()
                    && a.members()
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
        BorrowedObject::get(self, name)
    }
}
