//! A request's id, kept as the exact JSON text it came as.

use std::fmt;

/// A request id, kept as its exact JSON text (`1` and `"1"` are different ids).
///
/// Ids of up to 22 bytes, which is nearly all of them, are kept inline:
/// every request and response carries an id and the relay clones it into
/// its pending table, so a boxed copy was several allocations per call.
#[derive(Clone)]
pub struct RequestId(IdText);

/// The longest id text kept inline: an inline id is then no bigger than a
/// `String`.
const INLINE_ID: usize = 22;

#[derive(Clone)]
enum IdText {
    Inline { len: u8, bytes: [u8; INLINE_ID] },
    Boxed(Box<str>),
}

impl RequestId {
    /// Wraps the JSON text of an id (a JSON string with its quotes, or a number).
    pub fn from_json(text: &str) -> Self {
        let text = text.trim();
        if text.len() > INLINE_ID {
            return Self(IdText::Boxed(text.into()));
        }
        let mut bytes = [0; INLINE_ID];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Self(IdText::Inline {
            len: text.len() as u8,
            bytes,
        })
    }

    /// The id as JSON text, ready to splice into a message.
    pub fn as_json(&self) -> &str {
        match &self.0 {
            // Copied from a `&str` whole, so always UTF-8; checked rather
            // than assumed because the crate has no `unsafe`.
            IdText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            IdText::Boxed(text) => text,
        }
    }

    /// The id as a JSON value (for hook payloads and audit entries).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.as_json()).unwrap_or(serde_json::Value::Null)
    }
}

// Equality, order and hash are those of the text, whichever way it is
// stored, as `Borrow<str>` requires.

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl Eq for RequestId {}

impl PartialOrd for RequestId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RequestId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_json().cmp(other.as_json())
    }
}

impl std::hash::Hash for RequestId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_json().hash(state);
    }
}

/// Looked up by its JSON text, as read from a frame.
impl std::borrow::Borrow<str> for RequestId {
    fn borrow(&self) -> &str {
        self.as_json()
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RequestId").field(&self.as_json()).finish()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_compare_and_hash_by_text_whatever_their_length() {
        use std::collections::HashSet;
        let short = "\"".to_owned() + &"s".repeat(INLINE_ID - 2) + "\"";
        let long = "\"".to_owned() + &"l".repeat(INLINE_ID - 1) + "\"";
        let mut ids = HashSet::new();
        for text in ["7", " 7 ", short.as_str(), long.as_str()] {
            let id = RequestId::from_json(text);
            assert_eq!(id.as_json(), text.trim());
            assert_eq!(id.to_string(), text.trim());
            assert_eq!(id, RequestId::from_json(text.trim()));
            ids.insert(id);
        }
        assert_eq!(ids.len(), 3);
        assert!(ids.contains(long.as_str()) && ids.contains(short.as_str()));
        assert!(RequestId::from_json("10") < RequestId::from_json("9"));
        assert_eq!(
            format!("{:?}", RequestId::from_json("1")),
            r#"RequestId("1")"#
        );
    }
}
