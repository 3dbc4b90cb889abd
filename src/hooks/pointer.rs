//! RFC 6901 JSON Pointers as payload lookups use them: split and
//! unescaped once, then walked without allocating.

use serde_json::Value;

use crate::jsonrpc::BorrowedJson;

/// One RFC 6901 reference token, unescaped, with its array index when it
/// spells one (digits, no leading zero, as `serde_json` reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerToken {
    /// The token as an object key.
    pub key: String,
    /// The token as an array index, when it is one.
    pub index: Option<usize>,
}

impl PointerToken {
    /// The token for the unescaped `key`.
    pub fn new(key: String) -> Self {
        let index = if key.starts_with('+') || (key.starts_with('0') && key.len() != 1) {
            None
        } else {
            key.parse().ok()
        };
        Self { key, index }
    }

    /// Splits a well-formed pointer into its unescaped tokens (`~1` → `/`,
    /// then `~0` → `~`, the order RFC 6901 prescribes), once, so lookups
    /// walk a payload without allocating.
    pub fn split(pointer: &str) -> Box<[PointerToken]> {
        if pointer.is_empty() {
            return Box::new([]);
        }
        pointer
            .split('/')
            .skip(1)
            .map(|raw| Self::new(raw.replace("~1", "/").replace("~0", "~")))
            .collect()
    }
}

/// The value at `tokens` under `value`.
pub(super) fn walk<'v>(value: &'v Value, tokens: &[PointerToken]) -> Option<&'v Value> {
    tokens.iter().try_fold(value, |target, token| match target {
        Value::Object(members) => members.get(token.key.as_str()),
        Value::Array(items) => token.index.and_then(|index| items.get(index)),
        _ => None,
    })
}

/// The value at `tokens` under a borrowed `value`.
pub(super) fn walk_borrowed<'v>(
    value: &'v BorrowedJson<'v>,
    tokens: &[PointerToken],
) -> Option<&'v BorrowedJson<'v>> {
    tokens.iter().try_fold(value, |target, token| match target {
        BorrowedJson::Object(members) => members.get(token.key.as_str()),
        BorrowedJson::Array(items) => token.index.and_then(|index| items.get(index)),
        _ => None,
    })
}

/// What a pointer found in a payload: in a tree the proxy built, or in
/// the tree of the message a payload reads in place.
#[derive(Debug, Clone, Copy)]
pub enum Found<'v> {
    /// In a `Value`.
    Value(&'v Value),
    /// In a message's borrowed tree.
    Borrowed(&'v BorrowedJson<'v>),
}

impl Found<'_> {
    /// The string found, unescaped.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Found::Value(value) => value.as_str(),
            Found::Borrowed(value) => value.as_str(),
        }
    }

    /// The value's compact JSON text, as serde_json writes a `Value`.
    pub fn compact_text(&self) -> String {
        match self {
            Found::Value(value) => value.to_string(),
            // Serializing a tree of strings, numbers and members cannot
            // fail; the fallback is only there to avoid a panic path.
            Found::Borrowed(value) => serde_json::to_string(value).unwrap_or_default(),
        }
    }

    /// The value found, as a `Value`.
    pub fn to_value(&self) -> Value {
        match self {
            Found::Value(value) => (*value).clone(),
            Found::Borrowed(value) => value.to_value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_read_indexes_as_serde_json_does() {
        let index = |token: &str| PointerToken::new(token.to_owned()).index;
        assert_eq!(index("3"), Some(3));
        assert_eq!(index("0"), Some(0));
        for not_an_index in ["03", "+3", "-1", "x", ""] {
            assert_eq!(index(not_an_index), None, "{not_an_index}");
        }
    }

    #[test]
    fn tokens_are_unescaped_tilde_last() {
        let keys = |pointer: &str| -> Vec<String> {
            PointerToken::split(pointer)
                .iter()
                .map(|t| t.key.clone())
                .collect()
        };
        assert_eq!(keys("/a~1b/~01/3"), ["a/b", "~1", "3"]);
        assert_eq!(keys(""), Vec::<String>::new());
        assert_eq!(keys("/"), [""]);
    }
}
