//! Producing signatures: on every request the proxy sends, and (for test
//! doubles of a Guardian) on responses.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::{response_member, write_signed_input, MacSink, SessionKey, HMAC_SHA256};
use crate::jcs::JcsError;

/// Why an envelope could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// The member that carries the signature is absent or not an object.
    #[error("cannot sign: the envelope has no `{0}` object")]
    NoSignedMember(&'static str),
    /// A response with both or neither of `result` and `error`.
    #[error("cannot sign: {0}")]
    NotAResponse(&'static str),
    /// The envelope has no RFC 8785 form (a number beyond the double range).
    #[error("cannot sign: {0}")]
    Canonical(#[from] JcsError),
}

/// Signs a request envelope in place: HMAC-SHA256 under `key` over JCS of
/// the envelope without `params.signature`, written to `params.signature`
/// as `{"algorithm":"HMAC-SHA256","value":…,"key_id":key_id}`. A signature
/// already there is replaced.
pub fn sign_request(
    envelope: &mut Value,
    key: &SessionKey,
    key_id: &str,
) -> Result<(), SigningError> {
    sign_member(envelope, "params", key, key_id)
}

/// Signs a response the way a Guardian does: at `error.signature` for an
/// error reply, else `result.signature` (decisions and the ServerHello).
/// The proxy never sends responses; this exists so test Guardians speak the
/// exact wire [`verify_response`](super::verify_response) checks.
pub fn sign_response(
    response: &mut Value,
    key: &SessionKey,
    key_id: &str,
) -> Result<(), SigningError> {
    let member = response_member(response).map_err(SigningError::NotAResponse)?;
    sign_member(response, member, key, key_id)
}

/// Signs `envelope` and stores the signature at `member.signature`.
fn sign_member(
    envelope: &mut Value,
    member: &'static str,
    key: &SessionKey,
    key_id: &str,
) -> Result<(), SigningError> {
    if !envelope.get(member).is_some_and(Value::is_object) {
        return Err(SigningError::NoSignedMember(member));
    }
    let mut mac = MacSink::new(key);
    write_signed_input(&mut mac, envelope, member)?;
    let tag = mac.finalize();
    let signature = json!({
        "algorithm": HMAC_SHA256,
        "value": STANDARD.encode(tag),
        "key_id": key_id,
    });
    if let Some(container) = envelope.get_mut(member).and_then(Value::as_object_mut) {
        container.insert("signature".to_owned(), signature);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guardian::remote::signing::SigningSecret;

    fn key() -> SessionKey {
        let secret = SigningSecret::from_bytes([42u8; 32]).unwrap();
        SessionKey::derive(&secret, "00000000-0000-4000-8000-000000000001")
    }

    fn request() -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "steps/toolCallRequest",
            "params": {
                "acs_version": "0.1.0",
                "request_id": "11111111-1111-4111-8111-111111111111",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "metadata": {"agent_id": "a", "session_id": "00000000-0000-4000-8000-000000000001"},
                "payload": {"tool": {"name": "t"}, "arguments": {}}
            }
        })
    }

    #[test]
    fn signature_has_the_wire_shape() {
        let mut envelope = request();
        sign_request(&mut envelope, &key(), "k1").unwrap();
        let signature = &envelope["params"]["signature"];
        assert_eq!(signature["algorithm"], "HMAC-SHA256");
        assert_eq!(signature["key_id"], "k1");
        let value = signature["value"].as_str().unwrap();
        // 32 bytes in padded standard base64.
        assert_eq!(value.len(), 44);
        assert!(value.ends_with('='));
        assert_eq!(STANDARD.decode(value).unwrap().len(), 32);
    }

    #[test]
    fn resigning_replaces_the_old_signature() {
        let mut once = request();
        sign_request(&mut once, &key(), "k1").unwrap();
        let mut twice = once.clone();
        sign_request(&mut twice, &key(), "k1").unwrap();
        assert_eq!(once, twice);
    }

    #[test]
    fn signature_depends_on_the_content() {
        let mut a = request();
        let mut b = request();
        b["params"]["payload"]["tool"]["name"] = json!("u");
        sign_request(&mut a, &key(), "k1").unwrap();
        sign_request(&mut b, &key(), "k1").unwrap();
        assert_ne!(a["params"]["signature"], b["params"]["signature"]);
    }

    #[test]
    fn envelope_without_params_cannot_be_signed() {
        let mut envelope = json!({"jsonrpc": "2.0", "id": 1, "method": "system/ping"});
        let err = sign_request(&mut envelope, &key(), "k1").unwrap_err();
        assert!(matches!(err, SigningError::NoSignedMember("params")));
        let mut envelope = json!({"jsonrpc": "2.0", "id": 1, "params": []});
        assert!(sign_request(&mut envelope, &key(), "k1").is_err());
    }

    #[test]
    fn number_beyond_double_range_cannot_be_signed() {
        let mut envelope = request();
        envelope["params"]["payload"]["n"] = serde_json::from_str("1e400").unwrap();
        let err = sign_request(&mut envelope, &key(), "k1").unwrap_err();
        assert!(matches!(err, SigningError::Canonical(_)));
        assert!(envelope["params"].get("signature").is_none());
    }

    #[test]
    fn response_is_signed_in_result_or_error() {
        let mut decision = json!({"jsonrpc": "2.0", "id": 1, "result": {"decision": "allow"}});
        sign_response(&mut decision, &key(), "k1").unwrap();
        assert!(decision["result"]["signature"].is_object());

        let mut error =
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32004, "message": "m"}});
        sign_response(&mut error, &key(), "k1").unwrap();
        assert!(error["error"]["signature"].is_object());

        let mut neither = json!({"jsonrpc": "2.0", "id": 1});
        let err = sign_response(&mut neither, &key(), "k1").unwrap_err();
        assert!(matches!(err, SigningError::NotAResponse(_)));
    }
}
