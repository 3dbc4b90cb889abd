//! Parsing a message into a [`Value`], refusing duplicate object keys, for
//! the consumers that need a `Value` of a message the hooks do not read
//! (the hooks read [`super::MessageTree`], which refuses them alike).
//!
//! JSON leaves duplicate keys undefined (RFC 8259 §4), and parsers differ:
//! most keep the last value, some the first, some refuse. A message with
//! two `"name"` members could show policy one tool while the server calls
//! another, so the proxy refuses such messages instead of guessing which
//! value the other side will act on. Keys are compared after unescaping
//! (`"name"` and `"n\u0061me"` are the same key).
//!
//! Numbers are kept verbatim (serde_json `arbitrary_precision`), so
//! `1e400` or a 100-digit integer is neither rounded nor refused here.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// The key under which serde_json (`arbitrary_precision`) hands a number's
/// digits to a visitor.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Parses `bytes` into a [`Value`], refusing duplicate keys.
///
/// serde_json's recursion limit is lifted: callers parse only frames whose
/// nesting [`super::scan`] has already bounded.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let value = StrictValue.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds a [`Value`] like serde_json's own visitor, plus the duplicate check.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        StrictValue.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        if first == NUMBER_TOKEN {
            let digits: String = map.next_value()?;
            return Number::from_str(&digits)
                .map(Value::Number)
                .map_err(de::Error::custom);
        }
        // Not sized up front: trees a session keeps (a server's tool
        // definitions, its capabilities) are mostly small objects, and
        // room for four members in each cost an idle session about 1 KB.
        let mut object = Map::new();
        object.insert(first, map.next_value_seed(StrictValue)?);
        while let Some(key) = map.next_key::<String>()? {
            // One lookup both refuses a duplicate and finds the new slot.
            match object.entry(key) {
                Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate key {:?} in an object",
                        taken.key()
                    )));
                }
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(StrictValue)?);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_tree_as_serde_json() {
        let text = r#"{"b":[1,-2,3.50,1E+2,true,null,"\u00e9"],"a":{"z":{},"y":[]},"n":12345678901234567890123}"#;
        let ours = parse(text.as_bytes()).unwrap();
        let theirs: Value = serde_json::from_str(text).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(ours.to_string(), theirs.to_string());
    }

    #[test]
    fn numbers_beyond_f64_keep_their_digits() {
        let digits = "1".repeat(100);
        let text = format!(r#"{{"big":{digits},"huge":1e400,"tiny":-1e-400}}"#);
        let value = parse(text.as_bytes()).unwrap();
        // Digits are kept; serde_json spells every exponent with its sign.
        let respelled = format!(r#"{{"big":{digits},"huge":1e+400,"tiny":-1e-400}}"#);
        assert_eq!(value.to_string(), respelled);
    }

    #[test]
    fn duplicate_keys_are_refused_even_when_escaped() {
        for text in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"params":{"name":"echo","n\u0061me":"get-env"}}"#,
            r#"[{"x":1},{"y":{"k":1,"k":1}}]"#,
        ] {
            let err = parse(text.as_bytes()).unwrap_err();
            assert!(err.is_data(), "{text}: {err}");
            assert!(err.to_string().contains("duplicate key"), "{err}");
        }
        assert!(parse(br#"{"a":{"k":1},"b":{"k":1}}"#).is_ok());
    }

    #[test]
    fn depth_up_to_the_ceiling_parses_on_a_worker_sized_stack() {
        let depth = super::super::MAX_JSON_DEPTH_CEILING;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let handle = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                let value = parse(text.as_bytes()).unwrap();
                let canonical = crate::jcs::canonical_bytes(&value).unwrap();
                canonical.len()
            })
            .unwrap();
        assert_eq!(handle.join().unwrap(), 2 * depth);
    }
}
