//! Building a [`BorrowedJson`] with serde_json's parser: strings without
//! escapes are borrowed, and an object with a key twice is refused.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::{BorrowedJson, BorrowedObject};

/// The key under which serde_json (`arbitrary_precision`) hands a
/// non-integer number's digits to a visitor, as a one-member map.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Objects up to this size are checked for a repeated key pair by pair;
/// larger ones by sorting their keys, so a reply with many members cannot
/// make the check quadratic.
const PAIRWISE_LIMIT: usize = 16;

/// Room for an object's members before its list grows: an ACS result has
/// about ten, and the list would otherwise be grown from one to four to
/// eight as they come.
const MEMBERS_CAPACITY: usize = 8;

/// One object member as parsed.
type Member<'a> = (Cow<'a, str>, BorrowedJson<'a>);

/// How deep a text may nest.
pub(super) enum Depth {
    /// serde_json's own limit: a Guardian reply, read as any reply is.
    SerdeLimit,
    /// No limit here: a message whose nesting the frame scan has already
    /// bounded to the configured depth.
    Scanned,
}

/// Parses `bytes` as one JSON text (trailing whitespace only).
pub(super) fn parse(bytes: &[u8], depth: Depth) -> Result<BorrowedJson<'_>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    if let Depth::Scanned = depth {
        deserializer.disable_recursion_limit();
    }
    let value = TreeSeed.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds one value of the tree.
struct TreeSeed;

impl<'de> DeserializeSeed<'de> for TreeSeed {
    type Value = BorrowedJson<'de>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TreeSeed {
    type Value = BorrowedJson<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        Ok(Number::from_f64(value).map_or(BorrowedJson::Null, BorrowedJson::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(BorrowedJson::String(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(BorrowedJson::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        TreeSeed.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(TreeSeed)? {
            items.push(item);
        }
        Ok(BorrowedJson::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok(BorrowedJson::Object(BorrowedObject::default()));
        };
        if first == NUMBER_TOKEN {
            // Read as serde_json's own `Value` reads it, so both trees agree.
            let digits: String = map.next_value()?;
            return Number::from_str(&digits)
                .map(BorrowedJson::Number)
                .map_err(de::Error::custom);
        }
        let mut members = Vec::with_capacity(MEMBERS_CAPACITY);
        members.push((first, map.next_value_seed(TreeSeed)?));
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let value = map.next_value_seed(TreeSeed)?;
            members.push((key, value));
        }
        if let Some(key) = repeated_key(&members) {
            return Err(de::Error::custom(format_args!(
                "duplicate key {key:?} in an object"
            )));
        }
        Ok(BorrowedJson::Object(BorrowedObject { members }))
    }
}

/// An object key, borrowed when it holds no escape.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(value))
    }
}

/// A key that appears twice among `members` (keys are already unescaped).
fn repeated_key<'m>(members: &'m [Member<'_>]) -> Option<&'m str> {
    if members.len() <= PAIRWISE_LIMIT {
        return members.iter().enumerate().find_map(|(index, (key, _))| {
            members[..index]
                .iter()
                .any(|(earlier, _)| earlier == key)
                .then_some(key.as_ref())
        });
    }
    let mut keys: Vec<&str> = members.iter().map(|(key, _)| key.as_ref()).collect();
    keys.sort_unstable();
    keys.windows(2).find_map(|pair| match pair {
        [a, b] if a == b => Some(*a),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_in_small_and_large_objects() {
        for size in [2, PAIRWISE_LIMIT, PAIRWISE_LIMIT + 1, 100] {
            let mut members: Vec<Member<'_>> = (0..size)
                .map(|n| (Cow::Owned(format!("k{n}")), BorrowedJson::Null))
                .collect();
            assert_eq!(repeated_key(&members), None, "{size}");
            members.push((Cow::Borrowed("k1"), BorrowedJson::Null));
            assert_eq!(repeated_key(&members), Some("k1"), "{size}");
        }
    }
}
