//! Replies: what a transport is told to do, and the step before it (a
//! planned JSON-RPC envelope that still has to be signed, or not).

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::signing::{self, SessionKey};

/// What a transport does with one request, after waiting `delay`.
#[derive(Debug)]
pub struct Outcome {
    /// How long to wait before acting.
    pub delay: Duration,
    /// The act itself.
    pub reply: Reply,
}

/// The act of answering (or not).
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Send these bytes as the reply body (JSON, or deliberately not JSON).
    Send(Vec<u8>),
    /// HTTP: close the connection without a response. stdio: exit the process.
    Drop,
    /// Never answer.
    Silent,
}

/// Whether and how a planned envelope is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// A correct signature (when a session key is known).
    Sign,
    /// No signature (errors to requests that did not authenticate, `unsigned`).
    Omit,
    /// A signature whose value is a MAC of other bytes (`bad_signature`).
    Corrupt,
}

/// The body of a plan.
#[derive(Debug)]
pub enum Body {
    /// A JSON-RPC envelope, to be signed per `signing`.
    Envelope { value: Value, signing: Signing },
    /// Raw bytes, sent as is.
    Raw(Vec<u8>),
    /// See [`Reply::Drop`].
    Drop,
    /// See [`Reply::Silent`].
    Silent,
}

/// A reply before signing.
#[derive(Debug)]
pub struct Plan {
    pub delay: Duration,
    pub body: Body,
}

impl Plan {
    /// A signed reply envelope.
    pub fn signed(value: Value) -> Plan {
        Plan::envelope(value, Signing::Sign)
    }

    /// An unsigned reply envelope.
    pub fn unsigned(value: Value) -> Plan {
        Plan::envelope(value, Signing::Omit)
    }

    fn envelope(value: Value, signing: Signing) -> Plan {
        Plan {
            delay: Duration::ZERO,
            body: Body::Envelope { value, signing },
        }
    }

    /// A plan without an envelope.
    pub fn bare(body: Body) -> Plan {
        Plan {
            delay: Duration::ZERO,
            body,
        }
    }

    /// Adds `extra` to the delay.
    pub fn delayed(mut self, extra: Duration) -> Plan {
        self.delay = self.delay.saturating_add(extra);
        self
    }

    /// Signs (or not) and serializes. Without a `signer` nothing is signed.
    pub fn finish(self, signer: Option<&Signer>) -> Outcome {
        let reply = match self.body {
            Body::Envelope { mut value, signing } => {
                if let Some(signer) = signer {
                    match signing {
                        Signing::Sign => signer.sign(&mut value),
                        Signing::Corrupt => {
                            signer.sign(&mut value);
                            signing::corrupt(&mut value);
                        }
                        Signing::Omit => {}
                    }
                }
                Reply::Send(value.to_string().into_bytes())
            }
            Body::Raw(bytes) => Reply::Send(bytes),
            Body::Drop => Reply::Drop,
            Body::Silent => Reply::Silent,
        };
        Outcome {
            delay: self.delay,
            reply,
        }
    }
}

/// The key and `key_id` replies of one request are signed with.
#[derive(Clone)]
pub struct Signer {
    pub key: SessionKey,
    pub key_id: String,
}

impl Signer {
    /// Signs `envelope` at `result.signature` or `error.signature`.
    pub fn sign(&self, envelope: &mut Value) {
        if !signing::sign_in_place(&self.key, envelope, &self.key_id) {
            crate::log(&format!(
                "could not sign a reply (no JCS form): {}",
                envelope.get("id").unwrap_or(&Value::Null)
            ));
        }
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn result_envelope(id: &Value, result: Map<String, Value>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `{"jsonrpc":"2.0","id":…,"error":{code, message[, data]}}`.
pub fn error_envelope(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = Map::new();
    error.insert("code".into(), json!(code));
    error.insert("message".into(), json!(message));
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The `data` member ACS errors carry: `reason` (machine) and `message`.
pub fn error_data(reason: &str, message: &str) -> Value {
    json!({"reason": reason, "message": message})
}
