//! Read-only access to a parsed JSON value, whichever tree holds it.
//!
//! A decision reply is parsed once into a tree borrowed from its bytes
//! ([`BorrowedJson`](super::borrowed_json::BorrowedJson)); the handshake,
//! pings and an in-process policy's answer arrive as a
//! [`serde_json::Value`]. The wire rules ([`super::wire`]) and the
//! signature check ([`super::signing`]) read both through this trait, so
//! each rule is written, and tested, once.

use serde::de::DeserializeOwned;
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
