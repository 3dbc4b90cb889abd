//! Signing requests and verifying responses: the HMAC-SHA256 baseline of
//! ACS §10 (DIGEST §9).
//!
//! A remote Guardian's answer decides what reaches the MCP server, so a
//! forged or altered answer must be detected. Both directions are signed
//! the same way:
//!
//! - **key**: per session, HKDF-SHA256 over a deployment [`SigningSecret`]
//!   with no salt, `info` = the UTF-8 `metadata.session_id` and 32 bytes of
//!   output ([`SessionKey`]). The spec leaves these parameters open; these
//!   are the ones every reference implementation uses (Go, Python, TS).
//! - **signed input**: the RFC 8785 (JCS) bytes of the whole JSON-RPC
//!   envelope with only the `signature` member of `params` (requests),
//!   `result` (decisions and the ServerHello) or `error` (errors) removed.
//! - **signature**: `{"algorithm":"HMAC-SHA256","value":<standard base64
//!   with padding>,"key_id":…}` in that same member.
//!
//! Checked against the agt-go envelope vectors and the Python adapters'
//! known-answer test (`tests/vectors/`).

mod mac_sink;
mod secret;
mod session_key;
mod sign;
mod verify;

pub use mac_sink::MacSink;
pub use secret::{SecretError, SigningSecret, MIN_SECRET_BYTES};
pub use session_key::SessionKey;
pub use sign::{sign_request, sign_response, SigningError};
pub use verify::{verify_response, verify_signed, SignatureError};

use serde_json::Value;

use super::json_view::JsonView;
use crate::jcs::{self, JcsError, Sink};
use crate::jsonrpc::borrowed::{self as borrowed_json, BorrowedJson};

/// The baseline algorithm, spelled as in the §10.1 registry. It is the only
/// one this module signs with or verifies.
pub const HMAC_SHA256: &str = "HMAC-SHA256";

/// Streams the signed input of §10 into `sink`: JCS of `envelope` without
/// `member.signature`.
///
/// Written straight from the envelope, without the copy that removing the
/// signature would need, because it runs for every request signed and
/// every answer verified. Anything that is not an object with an object
/// `member` is canonicalized whole, as there is no signature to leave out.
pub fn write_signed_input<S: Sink>(
    sink: &mut S,
    envelope: &Value,
    member: &str,
) -> Result<(), JcsError> {
    let Value::Object(members) = envelope else {
        return jcs::write_value(sink, envelope);
    };
    let mut entries: Vec<(&String, &Value)> = members.iter().collect();
    entries.sort_unstable_by(|(a, _), (b, _)| jcs::key_order(a, b));
    sink.put(b"{");
    for (index, (key, value)) in entries.into_iter().enumerate() {
        if index > 0 {
            sink.put(b",");
        }
        jcs::write_str(sink, key);
        sink.put(b":");
        match value {
            Value::Object(inner) if key.as_str() == member => {
                jcs::write_object_without(sink, inner, &["signature"])?;
            }
            _ => jcs::write_value(sink, value)?,
        }
    }
    sink.put(b"}");
    Ok(())
}

/// A parsed envelope whose signed input can be written: the same bytes
/// whichever tree holds it, so a reply is verified over exactly the tree
/// it is then read from.
pub trait SignedEnvelope: JsonView {
    /// Streams JCS of this envelope without `member.signature` into `sink`.
    fn write_signed_input<S: Sink>(&self, sink: &mut S, member: &str) -> Result<(), JcsError>;
}

impl SignedEnvelope for Value {
    fn write_signed_input<S: Sink>(&self, sink: &mut S, member: &str) -> Result<(), JcsError> {
        write_signed_input(sink, self, member)
    }
}

impl SignedEnvelope for BorrowedJson<'_> {
    fn write_signed_input<S: Sink>(&self, sink: &mut S, member: &str) -> Result<(), JcsError> {
        let BorrowedJson::Object(members) = self else {
            return borrowed_json::write_canonical(sink, self);
        };
        borrowed_json::write_object_with(sink, members, &[], |sink, key, value| match value {
            BorrowedJson::Object(inner) if key == member => {
                borrowed_json::write_object_without(sink, inner, &["signature"])
            }
            _ => borrowed_json::write_canonical(sink, value),
        })
    }
}

/// The signed input as bytes, for comparison with published vectors.
#[cfg(test)]
fn signed_input(envelope: &Value, member: &str) -> Result<Vec<u8>, JcsError> {
    let mut bytes = Vec::new();
    write_signed_input(&mut bytes, envelope, member)?;
    Ok(bytes)
}

/// Which member of a JSON-RPC response carries its signature: `error` for
/// an error reply, else `result`. A reply with both or neither has no
/// well-defined signed member, so it is refused with the reason.
fn response_member<J: JsonView>(response: &J) -> Result<&'static str, &'static str> {
    match (response.member("result"), response.member("error")) {
        (Some(_), None) => Ok("result"),
        (None, Some(_)) => Ok("error"),
        (Some(_), Some(_)) => Err("the response has both `result` and `error`"),
        (None, None) => Err("the response has neither `result` nor `error`"),
    }
}

#[cfg(test)]
mod tests {
    //! The known-answer vectors, end to end: key derivation, signed input,
    //! request signature and response verification.

    use super::*;

    const GO_VECTORS: &str = include_str!("../../../tests/vectors/agt-go-envelope-vectors.json");
    const PYTHON_KAT: &str = include_str!("../../../tests/vectors/capture-guardian-kat.json");

    fn go() -> Value {
        serde_json::from_str(GO_VECTORS).unwrap()
    }

    fn kat() -> Value {
        serde_json::from_str(PYTHON_KAT).unwrap()
    }

    fn go_key(vectors: &Value) -> SessionKey {
        let ikm = hex::decode(vectors["ikm_hex"].as_str().unwrap()).unwrap();
        let secret = SigningSecret::from_bytes(ikm).unwrap();
        SessionKey::derive(&secret, vectors["session_id"].as_str().unwrap())
    }

    fn kat_key(kat: &Value) -> SessionKey {
        // The KAT secret is 24 bytes, below what SigningSecret accepts, so
        // the derivation is exercised directly.
        let ikm = kat["secret_utf8"].as_str().unwrap().as_bytes();
        SessionKey::from_ikm(ikm, kat["session_id"].as_str().unwrap())
    }

    fn without_signature(envelope: &Value, member: &str) -> Value {
        let mut unsigned = envelope.clone();
        unsigned[member]
            .as_object_mut()
            .unwrap()
            .remove("signature");
        unsigned
    }

    #[test]
    fn go_vector_session_key() {
        let vectors = go();
        assert_eq!(
            go_key(&vectors).to_hex(),
            vectors["session_key_hex"].as_str().unwrap()
        );
    }

    #[test]
    fn go_vector_request_signing_input() {
        let vectors = go();
        let input = signed_input(&vectors["request"]["signed"], "params").unwrap();
        assert_eq!(
            String::from_utf8(input).unwrap(),
            vectors["request"]["signing_input"].as_str().unwrap()
        );
    }

    #[test]
    fn go_vector_request_signature() {
        let vectors = go();
        let signed = &vectors["request"]["signed"];
        let mut envelope = without_signature(signed, "params");
        sign_request(&mut envelope, &go_key(&vectors), "k1").unwrap();
        assert_eq!(
            envelope["params"]["signature"],
            signed["params"]["signature"]
        );
        assert_eq!(&envelope, signed);
    }

    #[test]
    fn go_vector_response_signing_input() {
        let vectors = go();
        let input = signed_input(&vectors["response"]["signed"], "result").unwrap();
        assert_eq!(
            String::from_utf8(input).unwrap(),
            vectors["response"]["signing_input"].as_str().unwrap()
        );
    }

    #[test]
    fn go_vector_deny_response_verifies() {
        let vectors = go();
        verify_response(&vectors["response"]["signed"], &go_key(&vectors)).unwrap();
    }

    #[test]
    fn go_vector_deny_response_signature_is_reproduced() {
        let vectors = go();
        let signed = &vectors["response"]["signed"];
        let mut response = without_signature(signed, "result");
        sign_response(&mut response, &go_key(&vectors), "k1").unwrap();
        assert_eq!(&response, signed);
    }

    #[test]
    fn python_kat_session_key() {
        let kat = kat();
        assert_eq!(
            kat_key(&kat).to_hex(),
            kat["session_key_hex"].as_str().unwrap()
        );
    }

    #[test]
    fn python_kat_signing_input() {
        let kat = kat();
        let input = signed_input(&kat["unsigned_envelope"], "params").unwrap();
        assert_eq!(
            String::from_utf8(input).unwrap(),
            kat["signing_input"].as_str().unwrap()
        );
    }

    #[test]
    fn python_kat_request_signature() {
        let kat = kat();
        let mut envelope = kat["unsigned_envelope"].clone();
        sign_request(&mut envelope, &kat_key(&kat), "default").unwrap();
        assert_eq!(envelope["params"]["signature"], kat["signature"]);
    }

    #[test]
    fn response_member_is_error_for_errors_and_result_otherwise() {
        let error = serde_json::json!({"jsonrpc":"2.0","id":1,"error":{}});
        let result = serde_json::json!({"jsonrpc":"2.0","id":1,"result":{}});
        let both = serde_json::json!({"jsonrpc":"2.0","id":1,"result":{},"error":{}});
        let neither = serde_json::json!({"jsonrpc":"2.0","id":1});
        assert_eq!(response_member(&error), Ok("error"));
        assert_eq!(response_member(&result), Ok("result"));
        assert!(response_member(&both).is_err());
        assert!(response_member(&neither).is_err());
    }
}
