//! Typed reads of reply members, each failure naming the member.
//!
//! `null` counts as absent throughout: the Go reference marshals an empty
//! optional list as `null`, and no ACS member gives `null` a meaning of its
//! own.
//!
//! Each read takes any [`JsonView`] tree, so a decision reply parsed from
//! its bytes and a `Value` are held to the same rules.

#[cfg(test)]
use serde_json::{Map, Value};

use super::WireError;
use crate::guardian::remote::json_view::{JsonObject, JsonView};

/// The member `name`, or `None` when absent or `null`.
pub(super) fn member<'a, O: JsonObject>(object: &'a O, name: &str) -> Option<&'a O::Value> {
    object.get(name).filter(|value| !value.is_null())
}

/// The member `name`, which must be present; `field` is its full path.
pub(super) fn required<'a, O: JsonObject>(
    object: &'a O,
    name: &str,
    field: &'static str,
) -> Result<&'a O::Value, WireError> {
    member(object, name).ok_or(WireError::MissingField(field))
}

/// `value` as a string.
pub(super) fn string<'a, V: JsonView>(value: &'a V, field: &str) -> Result<&'a str, WireError> {
    value.as_str().ok_or_else(|| invalid(field, "a string"))
}

/// `value` as an object.
pub(super) fn object<'a, V: JsonView>(value: &'a V, field: &str) -> Result<&'a V::Map, WireError> {
    value.as_object().ok_or_else(|| invalid(field, "an object"))
}

/// `value` as an array of strings.
pub(super) fn strings<V: JsonView>(value: &V, field: &str) -> Result<Vec<String>, WireError> {
    let not_strings = || invalid(field, "an array of strings");
    value
        .as_array()
        .ok_or_else(not_strings)?
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(not_strings))
        .collect()
}

/// The optional array of strings `name`; empty when absent.
pub(super) fn optional_strings<O: JsonObject>(
    object: &O,
    name: &str,
    field: &str,
) -> Result<Vec<String>, WireError> {
    member(object, name).map_or(Ok(Vec::new()), |value| strings(value, field))
}

/// `value` as an integer ≥ 0.
pub(super) fn non_negative<V: JsonView>(value: &V, field: &str) -> Result<u64, WireError> {
    value
        .as_u64()
        .ok_or_else(|| invalid(field, "an integer ≥ 0"))
}

/// `value` as an integer ≥ 1 (timeouts: a zero timeout would fail every
/// step before it is sent).
pub(super) fn positive<V: JsonView>(value: &V, field: &str) -> Result<u64, WireError> {
    value
        .as_u64()
        .filter(|&n| n >= 1)
        .ok_or_else(|| invalid(field, "an integer ≥ 1"))
}

/// An [`WireError::InvalidField`] for `field`.
pub(super) fn invalid(field: &str, expected: &'static str) -> WireError {
    WireError::InvalidField {
        field: field.to_owned(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn null_is_absent() {
        let object = map(json!({"a": null, "b": 1}));
        assert!(member(&object, "a").is_none());
        assert!(member(&object, "c").is_none());
        assert_eq!(member(&object, "b"), Some(&json!(1)));
        assert_eq!(
            required(&object, "a", "x.a"),
            Err(WireError::MissingField("x.a"))
        );
        assert_eq!(optional_strings(&object, "a", "x.a"), Ok(Vec::new()));
    }

    #[test]
    fn strings_must_all_be_strings() {
        assert_eq!(
            strings(&json!(["a", "b"]), "f"),
            Ok(vec!["a".into(), "b".into()])
        );
        assert!(strings(&json!(["a", 1]), "f").is_err());
        assert!(strings(&json!("a"), "f").is_err());
    }

    #[test]
    fn integers() {
        // Numbers keep their spelling (arbitrary_precision); 5.0 is not an integer.
        let five: Value = serde_json::from_str("5.0").unwrap();
        assert!(positive(&five, "f").is_err());
        assert_eq!(positive(&json!(5), "f"), Ok(5));
        assert!(positive(&json!(0), "f").is_err());
        assert!(positive(&json!(-1), "f").is_err());
        assert_eq!(non_negative(&json!(0), "f"), Ok(0));
        assert!(non_negative(&json!(-1), "f").is_err());
        assert!(non_negative(&json!("1"), "f").is_err());
    }
}
