//! A message as its hooks read it: a tree borrowed from the message's own
//! bytes, kept together with them.
//!
//! Every message the proxy governs is read by its hooks: a policy pointer
//! or two, the tool's name, the canonical form its `request_hash` covers.
//! None of that needs a [`Value`], whose owned strings and hashed maps
//! were the largest part of a governed call's allocations. A `Value` is
//! still built, once, for the consumers that need one (a Rego input, a
//! schema check, a rewrite), on first use.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

use super::borrowed::BorrowedJson;

self_cell::self_cell!(
    /// The bytes and the tree that borrows from them.
    struct Parsed {
        owner: Bytes,

        #[covariant]
        dependent: BorrowedJson,
    }

    impl {Debug}
);

/// One message's bytes, its borrowed tree and, once asked for, its `Value`.
#[derive(Debug)]
pub struct MessageTree {
    parsed: Parsed,
    /// The bytes sent, when they are not the bytes parsed: a router
    /// replaced members in their text and in the tree alike
    /// ([`Self::splice`]).
    spliced: Option<Bytes>,
    value: OnceLock<Value>,
}

impl MessageTree {
    /// Parses a message whose frame [`super::scan`] has already checked,
    /// refusing duplicate keys as the hooks must (see [`super::borrowed`]).
    pub fn parse(bytes: Bytes) -> Result<Self, serde_json::Error> {
        let parsed = Parsed::try_new(bytes, |bytes| BorrowedJson::parse_scanned(bytes))?;
        Ok(Self {
            parsed,
            spliced: None,
            value: OnceLock::new(),
        })
    }

    /// Makes this the message as a router sends it on, with some members
    /// replaced: `bytes` is its text with those members' text replaced,
    /// and `edit` makes the same change to the tree, so the message need
    /// not be parsed again. The caller keeps the two in step.
    pub fn splice(&mut self, bytes: Bytes, edit: impl FnOnce(&mut BorrowedJson<'_>)) {
        self.parsed.with_dependent_mut(|_, tree| edit(tree));
        self.spliced = Some(bytes);
        self.value = OnceLock::new();
    }

    /// A rewritten message: `value` and the compact text it is sent as.
    pub fn from_value(value: Value) -> Self {
        let bytes = Bytes::from(value.to_string());
        let parsed = Parsed::new(bytes, |_| BorrowedJson::from_value(&value));
        Self {
            parsed,
            spliced: None,
            value: OnceLock::from(value),
        }
    }

    /// The message as a tree.
    pub fn root(&self) -> &BorrowedJson<'_> {
        self.parsed.borrow_dependent()
    }

    /// The message's bytes, as it is forwarded.
    pub fn bytes(&self) -> &Bytes {
        self.spliced
            .as_ref()
            .unwrap_or_else(|| self.parsed.borrow_owner())
    }

    /// The message as a `Value`, built on first use.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| self.root().to_value())
    }

    /// A `Value` of the message of one's own (to rewrite), copied from
    /// [`Self::value`] when that was built, else built from the tree.
    pub fn to_value(&self) -> Value {
        match self.value.get() {
            Some(value) => value.clone(),
            None => self.root().to_value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_and_the_value_agree() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e\u0063ho","arguments":{"n":1.50,"z":[true,null]}}}"#;
        let tree = MessageTree::parse(Bytes::from(text)).expect("parses");
        let value: Value = serde_json::from_str(text).expect("parses");
        assert_eq!(tree.value(), &value);
        assert_eq!(tree.root().to_value(), value);
        assert_eq!(tree.bytes().as_ref(), text.as_bytes());
        assert_eq!(
            tree.root()
                .get("params")
                .and_then(|p| p.get("name"))
                .and_then(BorrowedJson::as_str),
            Some("echo")
        );
        assert_eq!(
            serde_json::to_string(tree.root()).unwrap(),
            value.to_string()
        );
    }

    #[test]
    fn a_copy_to_rewrite_is_the_same_value_before_and_after_it_is_built() {
        let text = r#"{"id":1,"result":{"b":[1,2],"a":"\u00e9"}}"#;
        let tree = MessageTree::parse(Bytes::from(text)).expect("parses");
        let copy = tree.to_value();
        assert_eq!(&copy, tree.value());
        assert_eq!(tree.to_value(), copy);
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let text = r#"{"a":1,"b":{"x":1,"\u0078":2}}"#;
        assert!(MessageTree::parse(Bytes::from(text)).is_err());
    }

    #[test]
    fn nesting_is_left_to_the_scan() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(MessageTree::parse(Bytes::from(deep)).is_ok());
    }

    #[test]
    fn a_rewritten_message_is_sent_as_its_compact_text() {
        let value = serde_json::json!({"jsonrpc":"2.0","id":"x","result":{"b":1,"a":[]}});
        let tree = MessageTree::from_value(value.clone());
        assert_eq!(tree.bytes().as_ref(), value.to_string().as_bytes());
        assert_eq!(tree.root().to_value(), value);
        assert_eq!(tree.value(), &value);
    }
}
