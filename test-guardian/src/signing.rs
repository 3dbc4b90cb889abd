//! ACS HMAC-SHA256 envelope signatures (DIGEST §9).
//!
//! * Session key: HKDF-SHA256 (RFC 5869), no salt, IKM = the shared secret,
//!   info = the UTF-8 bytes of `params.metadata.session_id`, L = 32 bytes.
//! * Signed input: the RFC 8785 (JCS) bytes of the WHOLE JSON-RPC envelope
//!   with only the `signature` member removed from `params`, `result` or
//!   `error`.
//! * `value`: standard base64, with padding, of HMAC-SHA256(key, input).
//!
//! This is written from the digest, not shared with acs-proxy, so a signing
//! bug on either side shows up as a verification failure in the tests.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hkdf::Hkdf;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;

use crate::jcs;

/// The only algorithm this Guardian speaks, spelled as on the wire.
pub const ALGORITHM: &str = "HMAC-SHA256";

/// The envelope members that may carry a `signature`.
const SIGNED_MEMBERS: [&str; 3] = ["params", "result", "error"];

type HmacSha256 = Hmac<Sha256>;

/// A per-session HMAC key.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// Derives the key of `session_id` from the deployment secret.
    pub fn derive(secret: &[u8], session_id: &str) -> Self {
        let hkdf = Hkdf::<Sha256>::new(None, secret);
        let mut okm = [0u8; 32];
        // 32 bytes is always a valid HKDF-SHA256 output length (max 8160).
        hkdf.expand(session_id.as_bytes(), &mut okm)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        SessionKey(okm)
    }

    /// The raw key bytes (for tests and diagnostics).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// HMAC-SHA256 of `input` under this key.
    pub fn mac(&self, input: &[u8]) -> [u8; 32] {
        let mut mac = new_mac(&self.0);
        mac.update(input);
        mac.finalize().into_bytes().into()
    }

    /// Constant-time check of `tag` against HMAC-SHA256 of `input`.
    pub fn verify_mac(&self, input: &[u8], tag: &[u8]) -> bool {
        let mut mac = new_mac(&self.0);
        mac.update(input);
        mac.verify_slice(tag).is_ok()
    }
}

fn new_mac(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length.
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length")
}

/// Why an envelope's signature did not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// No `signature` member where one was expected.
    Missing,
    /// `signature` is not `{algorithm, value, key_id}` of strings, or `value`
    /// is not base64.
    Malformed(&'static str),
    /// An algorithm other than HMAC-SHA256.
    UnsupportedAlgorithm(String),
    /// The envelope has no RFC 8785 form (a number outside the double range).
    NotCanonicalizable,
    /// The MAC does not match.
    Mismatch,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Missing => write!(f, "signature missing"),
            VerifyError::Malformed(why) => write!(f, "signature malformed: {why}"),
            VerifyError::UnsupportedAlgorithm(alg) => write!(f, "unsupported algorithm {alg:?}"),
            VerifyError::NotCanonicalizable => write!(f, "envelope has no JCS form"),
            VerifyError::Mismatch => write!(f, "signature does not match"),
        }
    }
}

/// The bytes that are signed: JCS of `envelope` without the `signature`
/// member of `params`/`result`/`error`. `None` if JCS cannot express it.
pub fn signing_input(envelope: &Value) -> Option<Vec<u8>> {
    let mut stripped = envelope.clone();
    if let Some(top) = stripped.as_object_mut() {
        for member in SIGNED_MEMBERS {
            if let Some(inner) = top.get_mut(member).and_then(Value::as_object_mut) {
                inner.remove("signature");
            }
        }
    }
    jcs::canonical_bytes(&stripped)
}

/// The `{algorithm, value, key_id}` object for `envelope` (whose existing
/// `signature` members, if any, are ignored).
pub fn signature_object(key: &SessionKey, envelope: &Value, key_id: &str) -> Option<Value> {
    let input = signing_input(envelope)?;
    Some(json!({
        "algorithm": ALGORITHM,
        "value": STANDARD.encode(key.mac(&input)),
        "key_id": key_id,
    }))
}

/// Signs `envelope` in place: sets `signature` on the one of
/// `params`/`result`/`error` that it has. Returns false (and leaves the
/// envelope unsigned) if it has none of them or no JCS form.
pub fn sign_in_place(key: &SessionKey, envelope: &mut Value, key_id: &str) -> bool {
    let Some(signature) = signature_object(key, envelope, key_id) else {
        return false;
    };
    match signed_member_mut(envelope) {
        Some(member) => {
            member.insert("signature".to_owned(), signature);
            true
        }
        None => false,
    }
}

/// Verifies the `signature` inside `params`/`result`/`error` of `envelope`.
pub fn verify(key: &SessionKey, envelope: &Value) -> Result<(), VerifyError> {
    let signature = signed_member(envelope)
        .and_then(|member| member.get("signature"))
        .ok_or(VerifyError::Missing)?;
    let fields = signature
        .as_object()
        .ok_or(VerifyError::Malformed("not an object"))?;
    let text = |name: &'static str| {
        fields
            .get(name)
            .and_then(Value::as_str)
            .ok_or(VerifyError::Malformed(name))
    };
    let algorithm = text("algorithm")?;
    let value = text("value")?;
    text("key_id")?;
    if algorithm != ALGORITHM {
        return Err(VerifyError::UnsupportedAlgorithm(algorithm.to_owned()));
    }
    let tag = STANDARD
        .decode(value)
        .map_err(|_| VerifyError::Malformed("value is not base64"))?;
    let input = signing_input(envelope).ok_or(VerifyError::NotCanonicalizable)?;
    if key.verify_mac(&input, &tag) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

/// The `key_id` of the `signature` inside `params`/`result`/`error`, if any.
pub fn key_id(envelope: &Value) -> Option<&str> {
    signed_member(envelope)?
        .get("signature")?
        .get("key_id")?
        .as_str()
}

/// Replaces a signature's `value` with a MAC of different bytes (still 32
/// bytes of valid base64), for the `bad_signature` action.
pub fn corrupt(envelope: &mut Value) {
    if let Some(signature) = signed_member_mut(envelope)
        .and_then(|member| member.get_mut("signature"))
        .and_then(Value::as_object_mut)
    {
        let wrong = SessionKey::derive(b"not the shared secret", "bad_signature").mac(b"wrong");
        signature.insert("value".to_owned(), Value::String(STANDARD.encode(wrong)));
    }
}

fn signed_member(envelope: &Value) -> Option<&Map<String, Value>> {
    SIGNED_MEMBERS
        .iter()
        .find_map(|member| envelope.get(*member).and_then(Value::as_object))
}

fn signed_member_mut(envelope: &mut Value) -> Option<&mut Map<String, Value>> {
    let top = envelope.as_object_mut()?;
    let name = SIGNED_MEMBERS
        .iter()
        .find(|member| top.get(**member).is_some_and(Value::is_object))?;
    top.get_mut(*name)?.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTORS: &str = include_str!("../vectors/agt-go-envelope-vectors.json");
    const KAT: &str = include_str!("../vectors/capture-guardian-kat.json");

    fn vectors() -> Value {
        serde_json::from_str(VECTORS).expect("vector file is JSON")
    }

    fn vector_key(v: &Value) -> SessionKey {
        let ikm = hex::decode(v["ikm_hex"].as_str().expect("ikm_hex")).expect("hex");
        SessionKey::derive(&ikm, v["session_id"].as_str().expect("session_id"))
    }

    #[test]
    fn hkdf_session_key_matches_agt_go_vector() {
        let v = vectors();
        assert_eq!(
            hex::encode(vector_key(&v).as_bytes()),
            v["session_key_hex"].as_str().expect("session_key_hex")
        );
    }

    #[test]
    fn signing_input_matches_agt_go_vectors() {
        let v = vectors();
        for side in ["request", "response"] {
            let input = signing_input(&v[side]["signed"]).expect("canonical");
            assert_eq!(
                String::from_utf8(input).expect("utf8"),
                v[side]["signing_input"].as_str().expect("signing_input"),
                "{side}"
            );
        }
    }

    #[test]
    fn request_and_response_signatures_match_agt_go_vectors() {
        let v = vectors();
        let key = vector_key(&v);
        let key_id = v["key_id"].as_str().expect("key_id");
        for (side, member) in [("request", "params"), ("response", "result")] {
            let signed = &v[side]["signed"];
            assert_eq!(verify(&key, signed), Ok(()), "{side} verifies");

            // Re-sign from scratch and compare the whole signature object.
            let mut unsigned = signed.clone();
            unsigned[member]
                .as_object_mut()
                .expect("object")
                .remove("signature");
            assert!(sign_in_place(&key, &mut unsigned, key_id));
            assert_eq!(
                unsigned[member]["signature"], signed[member]["signature"],
                "{side}"
            );
            assert_eq!(&unsigned, signed);
        }
    }

    #[test]
    fn tampering_or_wrong_key_fails_verification() {
        let v = vectors();
        let key = vector_key(&v);
        let mut tampered = v["response"]["signed"].clone();
        tampered["result"]["decision"] = json!("allow");
        assert_eq!(verify(&key, &tampered), Err(VerifyError::Mismatch));

        let other = SessionKey::derive(b"another secret", "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30");
        assert_eq!(
            verify(&other, &v["request"]["signed"]),
            Err(VerifyError::Mismatch)
        );

        let mut corrupted = v["response"]["signed"].clone();
        corrupt(&mut corrupted);
        assert_eq!(verify(&key, &corrupted), Err(VerifyError::Mismatch));

        let mut unsigned = v["request"]["signed"].clone();
        unsigned["params"]
            .as_object_mut()
            .expect("object")
            .remove("signature");
        assert_eq!(verify(&key, &unsigned), Err(VerifyError::Missing));
    }

    #[test]
    fn python_capture_guardian_known_answer() {
        let kat: Value = serde_json::from_str(KAT).expect("kat is JSON");
        let secret = kat["secret_utf8"].as_str().expect("secret");
        let key = SessionKey::derive(secret.as_bytes(), kat["session_id"].as_str().expect("sid"));
        assert_eq!(
            hex::encode(key.as_bytes()),
            kat["session_key_hex"].as_str().expect("key hex")
        );
        let mut envelope = kat["unsigned_envelope"].clone();
        assert_eq!(
            String::from_utf8(signing_input(&envelope).expect("canonical")).expect("utf8"),
            kat["signing_input"].as_str().expect("signing_input")
        );
        assert!(sign_in_place(&key, &mut envelope, "default"));
        assert_eq!(envelope["params"]["signature"], kat["signature"]);
    }

    #[test]
    fn error_envelopes_are_signed_at_error_signature() {
        let key = SessionKey::derive(b"k", "s");
        let mut reply =
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32005, "message": "replay"}});
        assert!(sign_in_place(&key, &mut reply, "k1"));
        assert_eq!(reply["error"]["signature"]["key_id"], "k1");
        assert_eq!(verify(&key, &reply), Ok(()));
        assert_eq!(key_id(&reply), Some("k1"));
    }
}
