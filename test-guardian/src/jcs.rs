//! RFC 8785 (JCS) canonical bytes and SHA-256 digests, the two primitives
//! every ACS hash and signature is built from.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The RFC 8785 canonical UTF-8 bytes of `value`, or `None` when JCS has no
/// spelling for it (a number outside the IEEE 754 double range).
pub fn canonical_bytes(value: &Value) -> Option<Vec<u8>> {
    serde_json_canonicalizer::to_vec(value).ok()
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of `value`'s canonical form; a value JCS cannot
/// express is digested in its compact serialization instead, so hostile
/// input still gets a stable digest.
pub fn value_digest(value: &Value) -> String {
    match canonical_bytes(value) {
        Some(bytes) => sha256_hex(&bytes),
        None => sha256_hex(value.to_string().as_bytes()),
    }
}
