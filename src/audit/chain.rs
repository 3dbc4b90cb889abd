//! The ACS §8.2 chain hash and the §8.1 `request_hash`.
//!
//! `entry_hash = hex(SHA-256(JCS(entry − {entry_hash, previous_hash}) ||
//! raw 32 bytes of previous_hash))`, with nothing appended for a chain root.
//! This is normative with no alternatives in ACS v0.1, so it is implemented
//! once, over plain JSON, and checked against the published vectors.
//!
//! Entries this proxy makes are hashed straight from the typed
//! [`ContextEntry`]: its members are written in canonical order, with no
//! JSON tree in between, into a buffer that is hashed and then becomes the
//! log line ([`hashed_line_into`]). Tests pin that this gives the same bytes as
//! the generic path over the entry's JSON.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::entry::ContextEntry;
use super::monitored::Monitored;
use super::AuditError;
use crate::jcs::{self, HashSink, JcsError, Sink};

/// Computes the §8.2 `entry_hash` of `entry` from its content and its
/// `previous_hash` (the stored `entry_hash` is ignored), streamed into the
/// hasher. Linking uses `hashed_line_into`, which also keeps the bytes for
/// the log line; this independent path is what tests check it against.
pub fn entry_hash(entry: &ContextEntry) -> Result<String, AuditError> {
    let previous = previous_digest(entry)?;
    let mut sink = HashSink::default();
    write_content(&mut sink, entry)?;
    if let Some(previous) = &previous {
        sink.put(previous);
    }
    Ok(sink.finalize_hex())
}

/// The raw digest behind a typed entry's `previous_hash`; `None` for a
/// chain root.
fn previous_digest(entry: &ContextEntry) -> Result<Option<[u8; 32]>, AuditError> {
    entry
        .previous_hash
        .as_deref()
        .map(decode_previous)
        .transpose()
}

/// The entry's JSONL line (newline included) and its §8.2 `entry_hash`;
/// see [`hashed_line_into`].
#[cfg(test)]
fn hashed_line(entry: &ContextEntry) -> Result<(String, Vec<u8>), AuditError> {
    // Typical entries are 500-700 bytes; sizing up front saves regrowing.
    let mut line = Vec::with_capacity(1024);
    let hash = hashed_line_into(entry, &mut line)?;
    Ok((hash, line))
}

/// Appends the entry's JSONL line (newline included) to `out` and returns
/// its §8.2 `entry_hash`, from one canonical pass: the content is written
/// once, in canonical member order, hashed as it stands, and then becomes
/// the line by gaining the two chain members. The stored line is thus the
/// hashed bytes plus `entry_hash` and `previous_hash`, which every reader
/// parses as JSON. On error `out` is left as it was.
pub(crate) fn hashed_line_into(
    entry: &ContextEntry,
    out: &mut Vec<u8>,
) -> Result<String, AuditError> {
    let previous = previous_digest(entry)?;
    let start = out.len();
    if let Err(error) = write_content(out, entry) {
        out.truncate(start);
        return Err(error.into());
    }
    let mut hasher = Sha256::new();
    hasher.update(&out[start..]);
    if let Some(previous) = &previous {
        hasher.update(previous);
    }
    let hash = jcs::hex_lower(&hasher.finalize());
    // The content always has members (entry_id, …), so it ends in `}`
    // preceded by a member: replace the brace with a comma.
    out.pop();
    out.extend_from_slice(b",\"entry_hash\":\"");
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(b"\",\"previous_hash\":");
    match &entry.previous_hash {
        Some(previous) => jcs::write_str(out, previous),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b"}\n");
    Ok(hash)
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
    let mut sink = HashSink::default();
    write_json_content(&mut sink, members)?;
    if let Some(previous) = previous {
        sink.put(&previous);
    }
    Ok(sink.finalize_hex())
}

/// Returns the lowercase hex SHA-256 of the JCS form of a hook request's
/// `params` (§8.1), signature included when present, as the reference
/// Guardian computes it.
pub fn request_hash(params: &Value) -> Result<String, AuditError> {
    let mut sink = HashSink::default();
    jcs::write_value(&mut sink, params)?;
    Ok(sink.finalize_hex())
}

/// The members left out of the hashed content: `entry_hash` cannot cover
/// itself and `previous_hash` is mixed in as raw bytes instead.
const CHAIN_MEMBERS: [&str; 2] = ["entry_hash", "previous_hash"];

/// JCS of a stored entry without its two chain members.
fn write_json_content<S: Sink>(sink: &mut S, members: &Map<String, Value>) -> Result<(), JcsError> {
    jcs::write_object_without(sink, members, &CHAIN_MEMBERS)
}

/// JCS of a typed entry without its two chain members: the same bytes as
/// [`write_json_content`] over `serde_json::to_value(entry)`.
///
/// Every key is ASCII, so canonical order is plain byte order, spelled out
/// below. The exhaustive destructuring makes a new field a compile error
/// here rather than a silently unhashed member.
fn write_content<S: Sink>(sink: &mut S, entry: &ContextEntry) -> Result<(), JcsError> {
    let ContextEntry {
        entry_id,
        step_id,
        step_type,
        session_id,
        timestamp,
        request_hash,
        decision,
        decision_source,
        reasoning,
        reason_codes,
        rule,
        limit,
        enforced,
        monitored,
        policy_digest,
        direction,
        mcp_method,
        mcp_id,
        action,
        guardian_chain_hash,
        content_digest,
        hook_params,
        detail,
        user_id,
        authentication_method,
        tenant_id,
        upstream,
        previous_hash: _,
        entry_hash: _,
    } = entry;
    let mut object = CanonicalObject::new(sink);
    object.str("action", action.map(|a| a.as_str()));
    object.str("authentication_method", authentication_method.as_deref());
    object.str("content_digest", content_digest.as_deref());
    object.str("decision", decision.as_deref());
    object.str("decision_source", decision_source.map(|s| s.as_str()));
    object.str("detail", detail.as_deref());
    object.str("direction", direction.map(|d| d.as_str()));
    object.bool("enforced", *enforced);
    object.str("entry_id", Some(entry_id));
    object.str("guardian_chain_hash", guardian_chain_hash.as_deref());
    object.value("hook_params", hook_params.as_ref())?;
    object.str("limit", limit.as_deref());
    object.value("mcp_id", mcp_id.as_ref())?;
    object.str("mcp_method", mcp_method.as_deref());
    if let Some(monitored) = monitored {
        object.key("monitored");
        write_monitored(object.sink, monitored);
    }
    object.str("policy_digest", policy_digest.as_deref());
    object.strings("reason_codes", reason_codes);
    object.str("reasoning", reasoning.as_deref());
    object.str("request_hash", request_hash.as_deref());
    object.str("rule", rule.as_deref());
    object.str("session_id", Some(session_id));
    object.str("step_id", Some(step_id));
    object.str("step_type", Some(step_type));
    object.str("tenant_id", tenant_id.as_deref());
    object.str("timestamp", Some(timestamp));
    object.str("upstream", upstream.as_deref());
    object.str("user_id", user_id.as_deref());
    object.sink.put(b"}");
    Ok(())
}

/// JCS of the `monitored` member, keys in canonical order.
fn write_monitored<S: Sink>(sink: &mut S, monitored: &Monitored) {
    let Monitored {
        decision,
        rule,
        reasoning,
        reason_codes,
    } = monitored;
    let mut object = CanonicalObject::new(sink);
    object.str("decision", Some(decision));
    object.strings("reason_codes", reason_codes);
    object.str("reasoning", reasoning.as_deref());
    object.str("rule", rule.as_deref());
    object.sink.put(b"}");
}

/// Writes the members of one object whose keys the caller gives in
/// canonical order; absent members are skipped as serde skips them.
struct CanonicalObject<'a, S: Sink> {
    sink: &'a mut S,
    first: bool,
}

impl<'a, S: Sink> CanonicalObject<'a, S> {
    fn new(sink: &'a mut S) -> Self {
        sink.put(b"{");
        Self { sink, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.sink.put(b",");
        }
        self.first = false;
        jcs::write_str(self.sink, key);
        self.sink.put(b":");
    }

    fn str(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.key(key);
            jcs::write_str(self.sink, value);
        }
    }

    fn bool(&mut self, key: &str, value: Option<bool>) {
        if let Some(value) = value {
            self.key(key);
            self.sink.put(if value { b"true" } else { b"false" });
        }
    }

    /// An array of strings, skipped when empty as serde skips it.
    fn strings(&mut self, key: &str, values: &[String]) {
        if values.is_empty() {
            return;
        }
        self.key(key);
        self.sink.put(b"[");
        for (index, value) in values.iter().enumerate() {
            if index > 0 {
                self.sink.put(b",");
            }
            jcs::write_str(self.sink, value);
        }
        self.sink.put(b"]");
    }

    fn value(&mut self, key: &str, value: Option<&Value>) -> Result<(), JcsError> {
        if let Some(value) = value {
            self.key(key);
            jcs::write_value(self.sink, value)?;
        }
        Ok(())
    }
}

/// The raw digest behind `previous_hash`; `None` for a chain root, which the
/// spec allows to carry `null` or omit the member.
fn previous_hash_bytes(previous: Option<&Value>) -> Result<Option<[u8; 32]>, AuditError> {
    match previous {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(hex_digest)) => decode_previous(hex_digest).map(Some),
        Some(_) => Err(AuditError::Malformed(
            "previous_hash is neither null nor a string",
        )),
    }
}

/// Decodes a 64-digit hex SHA-256.
fn decode_previous(hex_digest: &str) -> Result<[u8; 32], AuditError> {
    let mut bytes = [0u8; 32];
    match hex::decode_to_slice(hex_digest, &mut bytes) {
        Ok(()) => Ok(bytes),
        Err(_) => Err(AuditError::Malformed(
            "previous_hash is not a 64-digit hex SHA-256",
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
            let mut canonical = Vec::new();
            write_json_content(&mut canonical, members).unwrap();
            let canonical = String::from_utf8(canonical).unwrap();
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

    /// Every member set, with values that need escaping, unsorted nested
    /// keys and non-integer numbers: the typed writer and the generic one
    /// over the entry's JSON must give the same bytes.
    #[test]
    fn typed_content_is_byte_identical_to_the_generic_form() {
        use crate::enforce::Action;
        use crate::guardian::DecisionSource;
        use crate::session::Direction;
        let full = super::super::AuditRecord::new("r-\"1\"", "steps/toolCallResult")
            .request_hash("9f2c")
            .decision("modify")
            .decision_source(DecisionSource::NotEvaluated)
            .reasoning("line\nbreak \u{1} é \u{1f600}")
            .reason_codes(vec!["policy_violation".into(), "custom\t".into()])
            .rule("redact-ssn")
            .limit("per-user \"calls\"")
            .policy_digest("0123456789abcdef")
            .monitored(Monitored {
                decision: "deny".into(),
                rule: Some("trial".into()),
                reasoning: Some("would \u{1f600} block".into()),
                reason_codes: vec!["b".into(), "a".into()],
            })
            .direction(Direction::ServerToClient)
            .mcp_method("tools/call")
            .mcp_id(serde_json::json!("id-7"))
            .action(Action::Rewritten)
            .guardian_chain_hash("abc")
            .content_digest("def")
            .hook_params(serde_json::json!({"z": [1.50, -0, 1e21], "a": {"y": null, "b": true}}))
            .detail("modification refused")
            .caller(&crate::hooks::Identity {
                user_id: "alice \"a\"".into(),
                roles: vec!["admin".into()],
                tenant: Some("acme".into()),
                descriptor: crate::hooks::IdentityDescriptor::ApiToken {
                    name: "alice".into(),
                },
            })
            .into_entry(
                "s",
                12,
                "2026-12-02T11:15:05.123Z".into(),
                Some("00".repeat(32)),
            );
        let null_id = super::super::AuditRecord::new("r", "enforcement")
            .mcp_id(Value::Null)
            .into_entry("s", 1, "t".into(), None);
        for entry in [full, null_id] {
            let mut typed = Vec::new();
            write_content(&mut typed, &entry).unwrap();
            let Value::Object(members) = serde_json::to_value(&entry).unwrap() else {
                panic!("an entry is an object")
            };
            let mut generic = Vec::new();
            write_json_content(&mut generic, &members).unwrap();
            assert_eq!(
                String::from_utf8(typed).unwrap(),
                String::from_utf8(generic).unwrap()
            );
            assert_eq!(
                entry_hash(&entry).unwrap(),
                entry_hash_of(&Value::Object(members)).unwrap()
            );
        }
    }

    /// The line written to the log parses to the entry's own JSON, and
    /// its stored hash is what a verifier computes over it.
    #[test]
    fn hashed_line_is_the_entry_with_its_hash() {
        let root = super::super::AuditRecord::new("r-\"1\"", "steps/toolCallRequest")
            .request_hash("9f2c")
            .reasoning("line\nbreak é")
            .mcp_id(serde_json::json!(7))
            .hook_params(serde_json::json!({"z": [1.5, true], "a": null}))
            .into_entry("s", 1, "2026-12-02T11:15:05.123Z".into(), None);
        let mut linked = super::super::AuditRecord::new("r-2", "enforcement").into_entry(
            "s",
            2,
            "t".into(),
            None,
        );
        let (root_hash, _) = hashed_line(&root).unwrap();
        linked.previous_hash = Some(root_hash);
        for mut entry in [root, linked] {
            let (hash, line) = hashed_line(&entry).unwrap();
            assert!(line.ends_with(b"}\n"));
            assert_eq!(hash, entry_hash(&entry).unwrap());
            entry.entry_hash = hash.clone();
            let stored: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(stored, serde_json::to_value(&entry).unwrap());
            assert_eq!(entry_hash_of(&stored).unwrap(), hash);
        }
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
