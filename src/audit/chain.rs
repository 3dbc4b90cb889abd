//! The ACS §8.2 chain hash and the §8.1 `request_hash`.
//!
//! `entry_hash = hex(SHA-256(JCS(entry − {entry_hash, previous_hash}) ||
//! raw 32 bytes of previous_hash))`, with nothing appended for a chain root.
//! This is normative with no alternatives in ACS v0.1, so it is implemented
//! once, over plain JSON, and checked against the published vectors.
//!
//! Entries this proxy makes are hashed straight from their members (see
//! `content`, lent by a queued record or a typed [`ContextEntry`]): they
//! are written in canonical order, with no JSON tree in between, into a
//! buffer that is hashed and then becomes the log line
//! ([`hashed_line_into`]). Tests pin that this gives the same bytes as the
//! generic path over the entry's JSON.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::content::Content;
use super::entry::ContextEntry;
use super::AuditError;
use crate::jcs::{self, HashSink, HexDigest, JcsError, Sink};

/// Computes the §8.2 `entry_hash` of `entry` from its content and its
/// `previous_hash` (the stored `entry_hash` is ignored), streamed into the
/// hasher. Linking uses `hashed_line_into`, which also keeps the bytes for
/// the log line; this independent path is what tests check it against.
pub fn entry_hash(entry: &ContextEntry) -> Result<String, AuditError> {
    let previous = previous_digest(entry.previous_hash.as_deref())?;
    let mut sink = HashSink::default();
    Content::of(entry).write(&mut sink)?;
    if let Some(previous) = &previous {
        sink.put(previous);
    }
    Ok(sink.finalize_hex())
}

/// The raw digest behind a typed entry's `previous_hash`; `None` for a
/// chain root.
fn previous_digest(previous_hash: Option<&str>) -> Result<Option<[u8; 32]>, AuditError> {
    previous_hash.map(decode_previous).transpose()
}

/// The entry's JSONL line (newline included) and its §8.2 `entry_hash`;
/// see [`hashed_line_into`].
#[cfg(test)]
fn hashed_line(entry: &ContextEntry) -> Result<(String, Vec<u8>), AuditError> {
    // Typical entries are 500-700 bytes; sizing up front saves regrowing.
    let mut line = Vec::with_capacity(1024);
    let hash = hashed_line_into(
        &Content::of(entry),
        entry.previous_hash.as_deref(),
        &mut line,
    )?;
    Ok((hash.as_str().to_owned(), line))
}

/// Appends the JSONL line (newline included) of the entry of `content`
/// linked to `previous_hash` to `out` and returns its §8.2 `entry_hash`,
/// from one canonical pass: the content is written once, in canonical
/// member order, hashed as it stands, and then becomes the line by gaining
/// the two chain members. The stored line is thus the hashed bytes plus
/// `entry_hash` and `previous_hash`, which every reader parses as JSON. On
/// error `out` is left as it was.
pub(crate) fn hashed_line_into(
    content: &Content<'_>,
    previous_hash: Option<&str>,
    out: &mut Vec<u8>,
) -> Result<HexDigest, AuditError> {
    let previous = previous_digest(previous_hash)?;
    let start = out.len();
    if let Err(error) = content.write(out) {
        out.truncate(start);
        return Err(error.into());
    }
    let mut hasher = Sha256::new();
    hasher.update(&out[start..]);
    if let Some(previous) = &previous {
        hasher.update(previous);
    }
    let hash = HexDigest::of(&hasher.finalize().into());
    // The content always has members (entry_id, …), so it ends in `}`
    // preceded by a member: replace the brace with a comma.
    out.pop();
    out.extend_from_slice(b",\"entry_hash\":\"");
    out.extend_from_slice(hash.as_str().as_bytes());
    out.extend_from_slice(b"\",\"previous_hash\":");
    match previous_hash {
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

/// Decodes a 64-digit hex SHA-256 (either case), as `hex::decode_to_slice`
/// does, through a table: every entry linked decodes its predecessor's
/// hash, and the per-digit match showed in profiles.
fn decode_previous(hex_digest: &str) -> Result<[u8; 32], AuditError> {
    let malformed = || AuditError::Malformed("previous_hash is not a 64-digit hex SHA-256");
    let digits = hex_digest.as_bytes();
    if digits.len() != 64 {
        return Err(malformed());
    }
    let mut bytes = [0u8; 32];
    let mut invalid = 0u8;
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let high = HEX_VALUES[usize::from(pair[0])];
        let low = HEX_VALUES[usize::from(pair[1])];
        invalid |= high | low;
        *byte = (high << 4) | (low & 0x0f);
    }
    if invalid & NOT_HEX != 0 {
        return Err(malformed());
    }
    Ok(bytes)
}

/// Marks a byte that is not a hex digit in [`HEX_VALUES`].
const NOT_HEX: u8 = 0x80;

/// The value of each hex digit byte; [`NOT_HEX`] for any other byte.
const HEX_VALUES: [u8; 256] = {
    let mut values = [NOT_HEX; 256];
    let mut digit = 0;
    while digit < 16 {
        values[b"0123456789abcdef"[digit] as usize] = digit as u8;
        values[b"0123456789ABCDEF"[digit] as usize] = digit as u8;
        digit += 1;
    }
    values
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_hash_decodes_as_the_hex_crate_does() {
        let digest: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37)).collect();
        let lower = hex::encode(&digest);
        let mut cases = vec![
            lower.clone(),
            lower.to_uppercase(),
            String::new(),
            "ab".into(),
        ];
        for at in [0, 1, 31, 62, 63] {
            for bad in ['g', 'G', ' ', '/', ':', '@', '`', 'é'] {
                let mut text: Vec<char> = lower.chars().collect();
                text[at] = bad;
                cases.push(text.into_iter().collect());
            }
        }
        cases.push(format!("{lower}0"));
        for case in cases {
            let mut expected = [0u8; 32];
            let reference = hex::decode_to_slice(&case, &mut expected).map(|()| expected);
            match (decode_previous(&case), reference) {
                (Ok(decoded), Ok(expected)) => assert_eq!(decoded, expected, "{case}"),
                (Err(_), Err(_)) => {}
                (ours, theirs) => panic!("{case}: {ours:?} vs {theirs:?}"),
            }
        }
    }

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
        use super::super::monitored::Monitored;
        use crate::enforce::Action;
        use crate::guardian::DecisionSource;
        use crate::session::Direction;
        let full = super::super::AuditRecord::new("r-\"1\"", "steps/toolCallResult")
            .request_hash(HexDigest::of(&[0x9f; 32]))
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
            .caller(&std::sync::Arc::new(crate::hooks::Identity {
                user_id: "alice \"a\"".into(),
                roles: vec!["admin".into()],
                tenant: Some("acme".into()),
                descriptor: crate::hooks::IdentityDescriptor::ApiToken {
                    name: "alice".into(),
                },
            }))
            .upstream("everything \"2\"".into())
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
            Content::of(&entry).write(&mut typed).unwrap();
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
            .request_hash(HexDigest::of(&[0x9f; 32]))
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

    /// A record's line, written from the record's own members, is the
    /// line of the entry it makes, byte for byte.
    #[test]
    fn a_record_writes_the_line_of_its_entry() {
        use super::super::record::{AuditRecord, Position};
        use crate::enforce::Action;
        let hook_id = uuid::Uuid::new_v4();
        let metadata = crate::hooks::Metadata {
            agent_id: "agent".into(),
            session_id: uuid::Uuid::nil(),
            environment: Some("production".into()),
            user: None,
        };
        let hook = crate::hooks::HookRequest::new(
            "steps/toolCallRequest",
            serde_json::json!({"tool": {"name": "echo"}, "arguments": {"n": {"value": 1.50}}}),
            None,
        );
        let caller = std::sync::Arc::new(crate::hooks::Identity {
            user_id: "bob".into(),
            roles: Vec::new(),
            tenant: None,
            descriptor: crate::hooks::IdentityDescriptor::Configured,
        });
        let records = [
            AuditRecord::for_hook(hook_id, "steps/toolCallRequest")
                .request_hash(HexDigest::parse(&hook.params_digest(&metadata)).unwrap())
                .decision("allow")
                .mcp_method("tools/call")
                .mcp_id(serde_json::json!(12))
                .policy_digest("0123456789abcdef")
                .action(Action::Forwarded)
                .caller(&caller),
            AuditRecord::new("r", "enforcement").detail("é\n"),
        ];
        for (index, record) in records.into_iter().enumerate() {
            let previous = (index > 0).then(|| "ab".repeat(32));
            let position = Position {
                session_id: "s",
                entry_id: 1_234_567 + index as u64,
                timestamp: "2026-12-02T11:15:05.123Z",
                previous_hash: previous.as_deref(),
            };
            let mut line = b"before\n".to_vec();
            let hash = record.hashed_line_into(position, &mut line).unwrap();
            let hash = hash.as_str().to_owned();
            let entry = record.into_entry(
                "s",
                position.entry_id,
                position.timestamp.into(),
                previous.clone(),
            );
            let (expected_hash, expected_line) = hashed_line(&entry).unwrap();
            assert_eq!(hash, expected_hash);
            assert_eq!(
                String::from_utf8(line).unwrap(),
                format!("before\n{}", String::from_utf8(expected_line).unwrap())
            );
            if index == 0 {
                assert_eq!(entry.step_id, hook_id.to_string());
                assert_eq!(entry.request_hash, Some(hook.params_digest(&metadata)));
                assert_eq!(entry.entry_id, "1234567");
            }
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
