//! The per-session audit chain (DIGEST §8, ACS §8.2 and §8.6).
//!
//! For every content-bearing request (everything but `system/ping` and
//! `handshake/hello`) that passes the signature, timestamp and replay checks,
//! the Guardian appends one ContextEntry:
//!
//! ```json
//! {"entry_id": "<n>", "step_id": "<params.request_id>", "step_type": "<method>",
//!  "request_hash": "<sha256 hex of JCS(params as received, signature included)>",
//!  "timestamp": "<params.timestamp>"}
//! ```
//!
//! with `entry_id` counting "1", "2", … per session. Its hash is
//! `sha256(JCS(entry without entry_hash/previous_hash) || raw previous hash)`
//! (no previous bytes for the first entry), and the session head
//! `chain_hash` is the latest entry hash. Because every member comes from the
//! request, a client can recompute the head from what it sent.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::jcs;

/// Members excluded from the hashed content of an entry.
const UNHASHED: [&str; 2] = ["entry_hash", "previous_hash"];

/// `request_hash`: lowercase hex SHA-256 of JCS(`params`), exactly as
/// received (a `signature` member included, as the Go and Python references do).
pub fn request_hash(params: &Value) -> String {
    jcs::value_digest(params)
}

/// The hash of `entry` chained onto `previous` (a 64-hex head, or `None` for
/// the first entry). `entry_hash`/`previous_hash` members of `entry`, if
/// present, are ignored. A `previous` that is not hex contributes no bytes.
pub fn entry_hash(entry: &Value, previous: Option<&str>) -> String {
    let mut content = entry.clone();
    if let Some(members) = content.as_object_mut() {
        for name in UNHASHED {
            members.remove(name);
        }
    }
    let mut hasher = Sha256::new();
    match jcs::canonical_bytes(&content) {
        Some(bytes) => hasher.update(&bytes),
        None => hasher.update(content.to_string().as_bytes()),
    }
    if let Some(previous) = previous.and_then(|hex_head| hex::decode(hex_head).ok()) {
        hasher.update(&previous);
    }
    hex::encode(hasher.finalize())
}

/// One session's chain: its entries and every head it has published.
#[derive(Debug, Default)]
pub struct Chain {
    /// Entries with `entry_hash` and `previous_hash` filled in, oldest first.
    entries: Vec<Value>,
}

impl Chain {
    /// Appends the ContextEntry for one request and returns the new head.
    pub fn append(&mut self, step_id: &str, step_type: &str, params: &Value) -> String {
        let previous = self.head().map(str::to_owned);
        let mut entry = json!({
            "entry_id": (self.entries.len() + 1).to_string(),
            "step_id": step_id,
            "step_type": step_type,
            "request_hash": request_hash(params),
        });
        if let Some(timestamp) = params.get("timestamp").and_then(Value::as_str) {
            entry["timestamp"] = Value::String(timestamp.to_owned());
        }
        let hash = entry_hash(&entry, previous.as_deref());
        entry["previous_hash"] = previous.map_or(Value::Null, Value::String);
        entry["entry_hash"] = Value::String(hash.clone());
        self.entries.push(entry);
        hash
    }

    /// The current head, `None` before the first entry.
    pub fn head(&self) -> Option<&str> {
        self.entries.last()?.get("entry_hash")?.as_str()
    }

    /// Whether `hash` is a head this chain has had at some point (the client's
    /// `session_state.chain_hash` may lag behind by in-flight requests).
    pub fn has_published(&self, hash: &str) -> bool {
        self.entries
            .iter()
            .any(|entry| entry.get("entry_hash").and_then(Value::as_str) == Some(hash))
    }

    /// The entries so far, oldest first.
    pub fn entries(&self) -> &[Value] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN_VECTORS: &str = include_str!("../vectors/agt-go-chain-vectors.json");
    const DERIVED_ENTRY: &str = include_str!("../vectors/derived-python-suite-chain-entry.json");

    #[test]
    fn entry_hashes_match_agt_go_vectors() {
        let v: Value = serde_json::from_str(CHAIN_VECTORS).expect("JSON");
        let steps = v["chain"].as_array().expect("chain array");
        assert_eq!(steps.len(), 3);
        for step in steps {
            let previous = step["previous_hash"].as_str();
            assert_eq!(
                entry_hash(&step["entry"], previous),
                step["entry_hash"].as_str().expect("entry_hash"),
                "entry {}",
                step["entry"]["entry_id"]
            );
        }
    }

    #[test]
    fn request_hash_matches_agt_go_vector() {
        let v: Value = serde_json::from_str(CHAIN_VECTORS).expect("JSON");
        assert_eq!(
            request_hash(&v["request_hash"]["params"]),
            v["request_hash"]["hash"].as_str().expect("hash")
        );
    }

    #[test]
    fn request_hash_includes_signature_like_the_references() {
        let v: Value = serde_json::from_str(DERIVED_ENTRY).expect("JSON");
        let params = &v["input_request"]["params"];
        assert_eq!(
            request_hash(params),
            v["request_hash"].as_str().expect("hash")
        );
        assert_eq!(
            entry_hash(&v["entry"], None),
            v["entry_hash_first_entry"].as_str().expect("entry hash")
        );
    }

    #[test]
    fn append_numbers_entries_and_links_heads() {
        let mut chain = Chain::default();
        let params = json!({"request_id": "r1", "timestamp": "2026-09-19T10:00:00Z"});
        let first = chain.append("r1", "steps/sessionStart", &params);
        let expected_first = entry_hash(
            &json!({
                "entry_id": "1", "step_id": "r1", "step_type": "steps/sessionStart",
                "request_hash": request_hash(&params), "timestamp": "2026-09-19T10:00:00Z"
            }),
            None,
        );
        assert_eq!(first, expected_first);

        let second = chain.append("r2", "steps/toolCallRequest", &json!({"request_id": "r2"}));
        assert_eq!(chain.head(), Some(second.as_str()));
        assert_eq!(chain.entries()[1]["entry_id"], "2");
        assert_eq!(chain.entries()[1]["previous_hash"], json!(first));
        assert!(chain.has_published(&first));
        assert!(!chain.has_published(&"0".repeat(64)));
    }
}
