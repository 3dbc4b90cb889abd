//! Checking the signature on a Guardian's response before anything in it
//! is believed.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value;

use super::{response_member, MacSink, SessionKey, SignedEnvelope, HMAC_SHA256};
use crate::guardian::remote::json_view::{JsonObject, JsonView};

/// Why a response's signature was not accepted. Every variant means "not
/// authenticated"; the caller decides what that means for the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No signature where one belongs (`result.signature` or
    /// `error.signature`). Errors to unauthenticated requests arrive like
    /// this too.
    #[error("the response is not signed")]
    Missing,
    /// A signature with an algorithm other than HMAC-SHA256.
    #[error("unsupported signature algorithm {0:?} (only HMAC-SHA256 is verified)")]
    UnsupportedAlgorithm(String),
    /// The response or its signature object does not have the wire shape,
    /// or `value` is not standard base64.
    #[error("malformed signature: {0}")]
    Malformed(&'static str),
    /// Well-formed, but the MAC does not match this response under the key.
    #[error("the signature does not match the response")]
    Invalid,
}

/// Verifies a response signed with `key`: the signature at `error.signature`
/// for an error reply, else `result.signature` (decisions, the ServerHello),
/// over JCS of the whole response with only that member removed. The MAC
/// comparison is constant-time.
///
/// `key_id` must be present (the schema requires it) but is not checked:
/// one session has one key.
pub fn verify_response(response: &Value, key: &SessionKey) -> Result<(), SignatureError> {
    verify_signed(response, key)
}

/// [`verify_response`] for a reply in any tree: a decision reply is
/// verified in the tree it was parsed into and is then read from.
pub fn verify_signed<R: SignedEnvelope>(
    response: &R,
    key: &SessionKey,
) -> Result<(), SignatureError> {
    let member = response_member(response).map_err(SignatureError::Malformed)?;
    let container = response
        .member(member)
        .and_then(JsonView::as_object)
        .ok_or(SignatureError::Malformed(
            "the signed member (`result` or `error`) is not an object",
        ))?;
    let tag = match container.get("signature") {
        None => return Err(SignatureError::Missing),
        Some(signature) if signature.is_null() => return Err(SignatureError::Missing),
        Some(signature) => parse_signature(signature)?,
    };
    let mut mac = MacSink::new(key);
    response
        .write_signed_input(&mut mac, member)
        .map_err(|_| SignatureError::Malformed("the response has no RFC 8785 canonical form"))?;
    if mac.verify(&tag) {
        Ok(())
    } else {
        Err(SignatureError::Invalid)
    }
}

/// The decoded MAC of a `{algorithm, value, key_id}` signature object.
fn parse_signature<J: JsonView>(signature: &J) -> Result<Vec<u8>, SignatureError> {
    let signature = signature
        .as_object()
        .ok_or(SignatureError::Malformed("`signature` is not an object"))?;
    let algorithm = text(
        signature,
        "algorithm",
        "`signature.algorithm` is not a string",
    )?;
    if algorithm != HMAC_SHA256 {
        return Err(SignatureError::UnsupportedAlgorithm(algorithm.to_owned()));
    }
    text(signature, "key_id", "`signature.key_id` is not a string")?;
    let value = text(signature, "value", "`signature.value` is not a string")?;
    STANDARD
        .decode(value)
        .map_err(|_| SignatureError::Malformed("`signature.value` is not standard base64"))
}

/// The string member `name`, or `Malformed(problem)`.
fn text<'a, O: JsonObject>(
    object: &'a O,
    name: &str,
    problem: &'static str,
) -> Result<&'a str, SignatureError> {
    object
        .get(name)
        .and_then(JsonView::as_str)
        .ok_or(SignatureError::Malformed(problem))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::guardian::remote::signing::{sign_response, SigningSecret};

    const SESSION: &str = "00000000-0000-4000-8000-000000000001";

    fn key_for(session_id: &str) -> SessionKey {
        let secret = SigningSecret::from_bytes([42u8; 32]).unwrap();
        SessionKey::derive(&secret, session_id)
    }

    fn signed(mut response: Value) -> Value {
        sign_response(&mut response, &key_for(SESSION), "k1").unwrap();
        response
    }

    fn deny() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "result": {
                "type": "final",
                "acs_version": "0.1.0",
                "request_id": "11111111-1111-4111-8111-111111111111",
                "decision": "deny",
                "reasoning": "blocked",
                "chain_hash": "14e6d50a913e8295606bc0d86ee9cde870040e0e0a319b13ae15836128d0d111"
            }
        })
    }

    fn error_reply() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32005, "message": "replay", "data": {"reason": "replay_detected"}}
        })
    }

    #[test]
    fn signed_decision_verifies() {
        verify_response(&signed(deny()), &key_for(SESSION)).unwrap();
    }

    #[test]
    fn tampered_decision_fails() {
        let mut response = signed(deny());
        response["result"]["decision"] = json!("allow");
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn tampered_chain_hash_fails() {
        let mut response = signed(deny());
        response["result"]["chain_hash"] = json!("0".repeat(64));
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn tampered_jsonrpc_id_fails() {
        // The id is outside `result` but inside the signed input.
        let mut response = signed(deny());
        response["id"] = json!(8);
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn key_order_and_spacing_do_not_matter() {
        let response = signed(deny());
        let mut result: Vec<(String, Value)> = response["result"]
            .as_object()
            .unwrap()
            .clone()
            .into_iter()
            .collect();
        result.reverse();
        let reordered = json!({
            "result": Value::Object(result.into_iter().collect()),
            "id": 7,
            "jsonrpc": "2.0",
        });
        verify_response(&reordered, &key_for(SESSION)).unwrap();
    }

    #[test]
    fn wrong_key_fails() {
        let response = signed(deny());
        let other = key_for("00000000-0000-4000-8000-000000000002");
        assert_eq!(
            verify_response(&response, &other),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn missing_signature() {
        assert_eq!(
            verify_response(&deny(), &key_for(SESSION)),
            Err(SignatureError::Missing)
        );
        let mut null_signature = deny();
        null_signature["result"]["signature"] = Value::Null;
        assert_eq!(
            verify_response(&null_signature, &key_for(SESSION)),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn error_reply_is_verified_at_error_signature() {
        let response = signed(error_reply());
        assert!(response["error"]["signature"].is_object());
        verify_response(&response, &key_for(SESSION)).unwrap();

        let mut tampered = response.clone();
        tampered["error"]["code"] = json!(-32603);
        assert_eq!(
            verify_response(&tampered, &key_for(SESSION)),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn unsigned_error_reply_is_missing() {
        assert_eq!(
            verify_response(&error_reply(), &key_for(SESSION)),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn signature_outside_the_error_member_does_not_count() {
        let mut response = error_reply();
        let decision_signature = signed(deny())["result"]["signature"].clone();
        response["signature"] = decision_signature;
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn unsupported_algorithm() {
        let mut response = signed(deny());
        response["result"]["signature"]["algorithm"] = json!("ML-DSA-65");
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::UnsupportedAlgorithm("ML-DSA-65".into()))
        );
    }

    #[test]
    fn malformed_signatures() {
        let cases = [
            json!("c2lnbmF0dXJl"),
            json!({"algorithm": "HMAC-SHA256", "key_id": "k1"}),
            json!({"value": "AAAA", "key_id": "k1"}),
            json!({"algorithm": "HMAC-SHA256", "value": "AAAA"}),
            json!({"algorithm": "HMAC-SHA256", "value": "not base64!", "key_id": "k1"}),
            json!({"algorithm": "HMAC-SHA256", "value": 12, "key_id": "k1"}),
        ];
        for signature in cases {
            let mut response = deny();
            response["result"]["signature"] = signature.clone();
            assert!(
                matches!(
                    verify_response(&response, &key_for(SESSION)),
                    Err(SignatureError::Malformed(_))
                ),
                "{signature}"
            );
        }
    }

    #[test]
    fn truncated_mac_is_invalid() {
        let mut response = signed(deny());
        let value = response["result"]["signature"]["value"].as_str().unwrap();
        let mut mac = STANDARD.decode(value).unwrap();
        mac.truncate(16);
        response["result"]["signature"]["value"] = json!(STANDARD.encode(mac));
        assert_eq!(
            verify_response(&response, &key_for(SESSION)),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn malformed_responses() {
        let cases = [
            json!({"jsonrpc": "2.0", "id": 7}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {}, "error": {}}),
            json!({"jsonrpc": "2.0", "id": 7, "result": "allow"}),
            json!([1, 2]),
        ];
        for response in cases {
            assert!(
                matches!(
                    verify_response(&response, &key_for(SESSION)),
                    Err(SignatureError::Malformed(_))
                ),
                "{response}"
            );
        }
    }
}
