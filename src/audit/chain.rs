//! The ACS §8.2 chain hash and the §8.1 `request_hash`.
//!
//! `entry_hash = hex(SHA-256(JCS(entry − {entry_hash, previous_hash}) ||
//! raw 32 bytes of previous_hash))`, with nothing appended for a chain root.
//! This is normative with no alternatives in ACS v0.1, so it is implemented
//! once, over plain JSON, and checked against the published vectors.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::entry::ContextEntry;
use super::AuditError;
use crate::jcs;

/// Computes the §8.2 `entry_hash` of `entry` from its content and its
/// `previous_hash` (the stored `entry_hash` is ignored).
pub fn entry_hash(entry: &ContextEntry) -> Result<String, AuditError> {
    entry_hash_of(&serde_json::to_value(entry)?)
}

/// Computes the §8.2 `entry_hash` of a ContextEntry given as JSON.
///
/// Works on JSON rather than [`ContextEntry`] so that members this proxy
/// does not know (Go's `provenance_summary`, `turn_id`, …) are hashed like
/// any other, and so a verifier hashes exactly what is stored.
pub fn entry_hash_of(entry: &Value) -> Result<String, AuditError> {
    let Value::Object(members) = entry else {
        return Err(AuditError::Malformed("entry is not a JSON object"));
    };
    let previous = previous_hash_bytes(members.get("previous_hash"))?;
    let mut hasher = Sha256::new();
    hasher.update(content_bytes(members)?);
    hasher.update(previous);
    Ok(hex::encode(hasher.finalize()))
}

/// Returns the lowercase hex SHA-256 of the JCS form of a hook request's
/// `params` (§8.1), signature included when present, as the reference
/// Guardian computes it.
pub fn request_hash(params: &Value) -> Result<String, AuditError> {
    Ok(jcs::sha256_hex(&jcs::canonical_bytes(params)?))
}

/// JCS bytes of the entry without its two chain members; they are left out
/// because `entry_hash` cannot cover itself and `previous_hash` is mixed in
/// as raw bytes instead.
fn content_bytes(members: &Map<String, Value>) -> Result<Vec<u8>, AuditError> {
    let mut content = members.clone();
    content.remove("entry_hash");
    content.remove("previous_hash");
    Ok(jcs::canonical_bytes(&Value::Object(content))?)
}

/// The raw digest behind `previous_hash`; empty for a chain root, which the
/// spec allows to carry `null` or omit the member.
fn previous_hash_bytes(previous: Option<&Value>) -> Result<Vec<u8>, AuditError> {
    match previous {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(hex_digest)) => match hex::decode(hex_digest) {
            Ok(bytes) if bytes.len() == 32 => Ok(bytes),
            _ => Err(AuditError::Malformed(
                "previous_hash is not a 64-digit hex SHA-256",
            )),
        },
        Some(_) => Err(AuditError::Malformed(
            "previous_hash is neither null nor a string",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_VECTORS: &str = include_str!("../../tests/vectors/agt-go-chain-vectors.json");
    const PYTHON_DERIVED: &str =
        include_str!("../../tests/vectors/derived-python-suite-chain-entry.json");

    fn with_previous(entry: &Value, previous: &Value) -> Value {
        let mut entry = entry.clone();
        if let Value::Object(members) = &mut entry {
            members.insert("previous_hash".into(), previous.clone());
        }
        entry
    }

    #[test]
    fn agt_go_chain_vectors() {
        let vectors: Value = serde_json::from_str(GO_VECTORS).unwrap();
        let chain = vectors["chain"].as_array().unwrap();
        assert_eq!(chain.len(), 3);
        let mut head = Value::Null;
        for case in chain {
            assert_eq!(case["previous_hash"], head, "vectors link to each other");
            let Value::Object(members) = &case["entry"] else {
                panic!("entry is an object")
            };
            let canonical = String::from_utf8(content_bytes(members).unwrap()).unwrap();
            assert_eq!(canonical, case["canonical_content"].as_str().unwrap());
            let hash = entry_hash_of(&with_previous(&case["entry"], &head)).unwrap();
            assert_eq!(hash, case["entry_hash"].as_str().unwrap());
            head = Value::String(hash);
        }
    }

    #[test]
    fn agt_go_request_hash_vector() {
        let vectors: Value = serde_json::from_str(GO_VECTORS).unwrap();
        let case = &vectors["request_hash"];
        let canonical = jcs::canonical_bytes(&case["params"]).unwrap();
        assert_eq!(canonical, case["canonical"].as_str().unwrap().as_bytes());
        assert_eq!(request_hash(&case["params"]).unwrap(), case["hash"]);
    }

    #[test]
    fn derived_python_suite_first_entry() {
        let vector: Value = serde_json::from_str(PYTHON_DERIVED).unwrap();
        let mut params = vector["input_request"]["params"].clone();
        assert_eq!(request_hash(&params).unwrap(), vector["request_hash"]);
        if let Value::Object(members) = &mut params {
            members.remove("signature");
        }
        assert_eq!(
            request_hash(&params).unwrap(),
            vector["request_hash_if_signature_excluded"]
        );
        // A chain root hashes the same whether previous_hash is absent or null.
        let entry = &vector["entry"];
        assert_eq!(
            entry_hash_of(entry).unwrap(),
            vector["entry_hash_first_entry"]
        );
        let explicit_null = with_previous(entry, &Value::Null);
        assert_eq!(
            entry_hash_of(&explicit_null).unwrap(),
            vector["entry_hash_first_entry"]
        );
    }

    #[test]
    fn stored_entry_hash_does_not_feed_the_hash() {
        let vectors: Value = serde_json::from_str(GO_VECTORS).unwrap();
        let mut entry = with_previous(&vectors["chain"][0]["entry"], &Value::Null);
        if let Value::Object(members) = &mut entry {
            members.insert("entry_hash".into(), Value::String("anything".into()));
        }
        assert_eq!(
            entry_hash_of(&entry).unwrap(),
            vectors["chain"][0]["entry_hash"].as_str().unwrap()
        );
    }

    #[test]
    fn typed_entry_hashes_like_its_json() {
        let entry = super::super::AuditRecord::new("r-1", "steps/sessionStart").into_entry(
            "s",
            1,
            "2026-12-02T11:15:05.123Z".into(),
            None,
        );
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(entry_hash(&entry).unwrap(), entry_hash_of(&json).unwrap());
    }

    #[test]
    fn malformed_previous_hash_is_rejected() {
        let entry = serde_json::json!({"entry_id": "2", "previous_hash": "abcd"});
        assert!(matches!(
            entry_hash_of(&entry),
            Err(AuditError::Malformed(_))
        ));
    }
}
