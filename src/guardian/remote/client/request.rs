//! Building a signed request body in one pass.
//!
//! A request goes out as its envelope with `params.signature` in it, and
//! that signature is the HMAC of the envelope's canonical form without it
//! (§10). Both are produced together: the envelope's members are written in
//! canonical order into the body and fed to the MAC at the same time, all
//! but the signature member, whose value is a fixed-width placeholder until
//! the MAC is known. So no envelope tree is built, copied for signing or
//! serialized a second time. The payload is the one piece written twice:
//! to the body as serde_json spells it (numbers verbatim, as the Guardian
//! has always received them) and to the MAC in its RFC 8785 form.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rustls::crypto::SecureRandom;
use serde_json::Number;
use uuid::fmt::Hyphenated;
use uuid::Uuid;

use crate::guardian::remote::signing::{MacSink, SessionKey, SigningError, HMAC_SHA256};
use crate::guardian::GuardianError;
use crate::hooks::{HookPayload, HookRequest, Metadata};
use crate::jcs::{self, JcsError, Sink};

/// Length of a 32-byte HMAC-SHA256 tag in padded standard base64.
const TAG_BASE64_LEN: usize = 44;

/// Nonce length in bytes: 32 hex digits, inside ACS's 16–64 characters.
const NONCE_BYTES: usize = 16;

/// Integers of up to this many digits are their own RFC 8785 spelling.
const EXACT_DIGITS: usize = 15;

/// Signs the requests of one session.
pub(super) struct RequestSigner<'a> {
    /// The session's key.
    pub key: &'a SessionKey,
    /// `signature.key_id`.
    pub key_id: &'a str,
    /// Whether every request carries a fresh `params.nonce`.
    pub nonce: bool,
}

impl RequestSigner<'_> {
    /// Appends to `body` the signed envelope of `hook`, sent under JSON-RPC
    /// `id` and carrying `head`, the last chain head the Guardian published
    /// in this session (§8.6), as `metadata.session_state.chain_hash`.
    ///
    /// On failure `body` holds a partial envelope and must not be sent.
    pub(super) fn write_hook(
        &self,
        body: &mut Vec<u8>,
        hook: &HookRequest,
        id: u64,
        metadata: &Metadata,
        head: Option<&str>,
    ) -> Result<(), GuardianError> {
        let nonce = if self.nonce {
            Some(fresh_nonce()?)
        } else {
            None
        };
        let mut uuid = Uuid::encode_buffer();
        let mut out = Tee {
            body,
            mac: MacSink::new(self.key),
        };
        out.put(b"{\"id\":");
        out.id(id).map_err(cannot_sign)?;
        out.put(b",\"jsonrpc\":\"2.0\",\"method\":");
        jcs::write_str(&mut out, &hook.method);
        out.put(b",\"params\":{");
        metadata.write_canonical_head(&mut out);
        if let Some(head) = head {
            out.put(b",\"session_state\":{\"chain_hash\":");
            jcs::write_str(&mut out, head);
            out.put(b"}");
        }
        if let Some(user) = &metadata.user {
            user.write_canonical_user_context(&mut out);
        }
        out.put(b"}");
        if let Some(nonce) = &nonce {
            out.put(b",\"nonce\":");
            jcs::write_str(&mut out, nonce);
        }
        out.put(b",\"payload\":");
        out.payload(&hook.payload)?;
        out.put(b",\"request_id\":");
        let request_id = Hyphenated::from_uuid(hook.request_id).encode_lower(&mut uuid);
        jcs::write_str(&mut out, request_id);
        let tag_at = out.signature_placeholder(self.key_id);
        if let Some(tenant) = metadata.tenant() {
            out.put(b",\"tenant_id\":");
            jcs::write_str(&mut out, tenant);
        }
        out.put(b",\"timestamp\":");
        jcs::write_str(&mut out, &hook.timestamp);
        out.put(b"}}");
        let Tee { body, mac } = out;
        let tag = mac.finalize();
        STANDARD
            .encode_slice(tag, &mut body[tag_at..tag_at + TAG_BASE64_LEN])
            .map_err(|err| GuardianError::Malformed(format!("cannot sign the request: {err}")))?;
        Ok(())
    }
}

/// The request body and the MAC, written together.
struct Tee<'b> {
    body: &'b mut Vec<u8>,
    mac: MacSink,
}

impl Sink for Tee<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.body.extend_from_slice(bytes);
        self.mac.put(bytes);
    }
}

impl Tee<'_> {
    /// The JSON-RPC id. Past 15 digits RFC 8785 spells an integer as the
    /// double it rounds to, so the MAC gets that spelling and the body the
    /// exact digits, as when the envelope was a `Value`.
    fn id(&mut self, id: u64) -> Result<(), JcsError> {
        let mut buffer = [0u8; 20];
        let digits = decimal(id, &mut buffer);
        if digits.len() <= EXACT_DIGITS {
            self.put(digits);
            return Ok(());
        }
        self.body.extend_from_slice(digits);
        jcs::write_number(&mut self.mac, &Number::from(id))
    }

    /// The payload: canonical into the MAC, as serde_json writes it into
    /// the body.
    fn payload(&mut self, payload: &HookPayload) -> Result<(), GuardianError> {
        payload
            .write_canonical(&mut self.mac)
            .map_err(cannot_sign)?;
        match payload {
            HookPayload::Tree(tree) => {
                serde_json::to_writer(&mut *self.body, &**tree).map_err(cannot_serialize)
            }
            // As serde_json writes the message's `Value`.
            HookPayload::Message(message) => {
                serde_json::to_writer(&mut *self.body, message.root()).map_err(cannot_serialize)
            }
            // Built by the proxy from a parsed message, so its canonical
            // form, already written once above, cannot fail here.
            HookPayload::Step(_) => payload
                .write_canonical(&mut *self.body)
                .map_err(cannot_sign),
        }
    }

    /// Writes `,"signature":{…}` into the body only (the signed input
    /// leaves it out), its `value` a placeholder; returns where the
    /// placeholder starts. `signature` sorts between `request_id` and
    /// `timestamp`, so the comma before it is the body's alone.
    fn signature_placeholder(&mut self, key_id: &str) -> usize {
        let body = &mut *self.body;
        body.extend_from_slice(b",\"signature\":{\"algorithm\":");
        jcs::write_str(body, HMAC_SHA256);
        body.extend_from_slice(b",\"key_id\":");
        jcs::write_str(body, key_id);
        body.extend_from_slice(b",\"value\":\"");
        let at = body.len();
        body.extend_from_slice(&[b'='; TAG_BASE64_LEN]);
        body.extend_from_slice(b"\"}");
        at
    }
}

/// `value` in decimal digits, written at the end of `buffer`.
fn decimal(mut value: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buffer[at..];
        }
    }
}

fn cannot_serialize(err: serde_json::Error) -> GuardianError {
    GuardianError::Malformed(format!("cannot serialize the request: {err}"))
}

/// A request with no canonical form (a number beyond the double range)
/// cannot be signed, so it is not sent.
fn cannot_sign(err: JcsError) -> GuardianError {
    GuardianError::Malformed(format!(
        "cannot sign the request: {}",
        SigningError::Canonical(err)
    ))
}

/// 16 random bytes from the operating system's CSPRNG (through the ring
/// provider rustls is built with), as 32 lowercase hex digits.
fn fresh_nonce() -> Result<String, GuardianError> {
    static RANDOM: OnceLock<&'static dyn SecureRandom> = OnceLock::new();
    let random = RANDOM.get_or_init(|| rustls::crypto::ring::default_provider().secure_random);
    let mut bytes = [0u8; NONCE_BYTES];
    random
        .fill(&mut bytes)
        .map_err(|_| GuardianError::Malformed("no randomness for the request nonce".into()))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    //! The one-pass body against the envelope built as a tree and signed
    //! with `sign_request`: the same members, the same signature.

    use serde_json::{json, Value};

    use super::*;
    use crate::guardian::remote::signing::{sign_request, SigningSecret};

    fn key(metadata: &Metadata) -> SessionKey {
        let secret = SigningSecret::from_bytes([5u8; 32]).unwrap();
        SessionKey::derive(&secret, &metadata.session_id.to_string())
    }

    /// With an environment, also a caller with roles and a tenant: the
    /// members that come and go with the session.
    fn metadata(environment: Option<&str>) -> Metadata {
        let user = environment.map(|_| {
            std::sync::Arc::new(crate::hooks::Identity {
                user_id: "alice \"a\"".into(),
                roles: vec!["admin".into(), "ops".into()],
                tenant: Some("acme".into()),
                descriptor: crate::hooks::IdentityDescriptor::ApiToken {
                    name: "alice".into(),
                },
            })
        });
        Metadata {
            agent_id: "agent \"q\"\n".into(),
            session_id: Uuid::new_v4(),
            environment: environment.map(str::to_owned),
            user,
        }
    }

    /// The envelope as the tree path builds it, sealed by `sign_request`.
    fn reference(
        hook: &HookRequest,
        id: u64,
        metadata: &Metadata,
        head: Option<&str>,
        nonce: Option<&Value>,
        key_id: &str,
    ) -> Value {
        let mut envelope = hook.envelope(id, metadata);
        if let Some(head) = head {
            envelope["params"]["metadata"]["session_state"] = json!({ "chain_hash": head });
        }
        if let Some(nonce) = nonce {
            envelope["params"]["nonce"] = nonce.clone();
        }
        sign_request(&mut envelope, &key(metadata), key_id).unwrap();
        envelope
    }

    fn written(
        signer: &RequestSigner<'_>,
        hook: &HookRequest,
        id: u64,
        metadata: &Metadata,
        head: Option<&str>,
    ) -> (Vec<u8>, Value) {
        let mut body = Vec::new();
        signer
            .write_hook(&mut body, hook, id, metadata, head)
            .unwrap();
        let value = serde_json::from_slice(&body).unwrap();
        (body, value)
    }

    #[test]
    fn the_body_is_the_signed_envelope() {
        let payloads = [
            json!({}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"z": 1.50, "a": "\u{1f600}\u{e000}",
                   "big": 123456789012345678901u128, "neg": -0.0, "e": 1e-7, "ctl": "\u{1}\t"}}}),
            json!([null, true, false, "x"]),
        ];
        for environment in [None, Some("production")] {
            let metadata = metadata(environment);
            let key = key(&metadata);
            for payload in &payloads {
                for head in [None, Some("ab".repeat(32))] {
                    for id in [1, 999_999_999_999_999, 1_000_000_000_000_001, u64::MAX] {
                        for key_id in ["k1", "key \"two\""] {
                            let hook =
                                HookRequest::new("steps/toolCallRequest", payload.clone(), None);
                            let signer = RequestSigner {
                                key: &key,
                                key_id,
                                nonce: false,
                            };
                            let (body, value) =
                                written(&signer, &hook, id, &metadata, head.as_deref());
                            let expected =
                                reference(&hook, id, &metadata, head.as_deref(), None, key_id);
                            assert_eq!(value, expected, "{}", String::from_utf8_lossy(&body));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn numbers_reach_the_guardian_verbatim() {
        let metadata = metadata(None);
        let key = key(&metadata);
        let signer = RequestSigner {
            key: &key,
            key_id: "k1",
            nonce: false,
        };
        let payload: Value =
            serde_json::from_str(r#"{"n":1.50,"big":123456789012345678901}"#).unwrap();
        let hook = HookRequest::new("protocols/MCP/tools/call", payload, None);
        let (body, _) = written(&signer, &hook, 3, &metadata, None);
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.contains(r#""payload":{"n":1.50,"big":123456789012345678901}"#),
            "{text}"
        );
    }

    #[test]
    fn the_nonce_is_signed_with_the_rest() {
        let metadata = metadata(None);
        let key = key(&metadata);
        let signer = RequestSigner {
            key: &key,
            key_id: "k1",
            nonce: true,
        };
        let hook = HookRequest::new(
            "steps/toolCallRequest",
            json!({"tool": {"name": "t"}}),
            None,
        );
        let (_, value) = written(&signer, &hook, 9, &metadata, Some("c"));
        let nonce = &value["params"]["nonce"];
        assert_eq!(nonce.as_str().map(str::len), Some(32));
        assert_eq!(
            value,
            reference(&hook, 9, &metadata, Some("c"), Some(nonce), "k1")
        );
    }

    #[test]
    fn a_payload_without_a_canonical_form_is_not_signed() {
        let metadata = metadata(None);
        let key = key(&metadata);
        let signer = RequestSigner {
            key: &key,
            key_id: "k1",
            nonce: false,
        };
        let payload: Value = serde_json::from_str(r#"{"n":1e400}"#).unwrap();
        let hook = HookRequest::new("steps/toolCallRequest", payload, None);
        let err = signer
            .write_hook(&mut Vec::new(), &hook, 1, &metadata, None)
            .unwrap_err();
        assert!(
            matches!(&err, GuardianError::Malformed(m) if m.contains("cannot sign")),
            "{err}"
        );
    }

    #[test]
    fn decimal_spells_every_width() {
        let mut buffer = [0u8; 20];
        for value in [0, 7, 10, 999, 1_000_000, u64::MAX] {
            assert_eq!(decimal(value, &mut buffer), value.to_string().as_bytes());
        }
    }
}
