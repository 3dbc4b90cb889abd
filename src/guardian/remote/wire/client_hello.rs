//! The ClientHello (§4, handshake.json): what acs-proxy declares about
//! itself in `params.payload` of `handshake/hello`.

use std::num::NonZeroU64;

use serde_json::{json, Map, Value};

use super::Transport;
use crate::hooks::ACS_VERSION;

/// The conformance profiles acs-proxy claims unless configured otherwise:
/// Core (the baseline), Audit (its hash-chained log) and Inspect (the
/// AgBOM it sends).
pub const DEFAULT_PROFILES: &[&str] = &["acs-core", "acs-audit", "acs-inspect"];

/// Builds the ClientHello for `params.payload` of `handshake/hello`.
///
/// - `methods_implemented`: every method the session may emit
///   (`protocols/MCP/<m>`, `steps/*`, `agbom/*`, and `system/ping`, which
///   clients SHOULD list). The Guardian answers with the subset it evaluates.
/// - `mcp_version`: the MCP revision in use, declared as a wrapped protocol
///   (DIGEST §16 item 1: required when MCP is in play); omitted while unknown.
/// - `transport`: the transport this hello travels on ([`Transport::offered`]).
/// - `profiles`: normally [`DEFAULT_PROFILES`].
/// - `max_payload_size_bytes`: the largest request the proxy will send.
///
/// `provenance_producer` is `"none"`: the proxy relays MCP traffic and has
/// no deterministic provenance of its own to attach.
pub fn client_hello_payload(
    methods_implemented: &[String],
    mcp_version: Option<&str>,
    transport: Transport,
    profiles: &[&str],
    max_payload_size_bytes: NonZeroU64,
) -> Value {
    let mut hello = Map::new();
    hello.insert("acs_versions_supported".into(), json!([ACS_VERSION]));
    hello.insert("methods_implemented".into(), json!(methods_implemented));
    hello.insert("transports_supported".into(), json!(transport.offered()));
    hello.insert("provenance_producer".into(), json!("none"));
    hello.insert(
        "max_payload_size_bytes".into(),
        json!(max_payload_size_bytes.get()),
    );
    if let Some(version) = mcp_version {
        hello.insert(
            "wrapped_protocols".into(),
            json!([{"protocol": "MCP", "version": version}]),
        );
    }
    hello.insert("profiles_supported".into(), json!(profiles));
    Value::Object(hello)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDSHAKE_SCHEMA: &str = include_str!("../../../../schemas/handshake.json");

    fn methods() -> Vec<String> {
        [
            "protocols/MCP/tools/call",
            "steps/toolCallRequest",
            "system/ping",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn size(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    #[test]
    fn http_hello_has_every_member_in_wire_order() {
        let hello = client_hello_payload(
            &methods(),
            Some("2025-06-18"),
            Transport::Https,
            DEFAULT_PROFILES,
            size(1_000_000),
        );
        assert_eq!(
            hello.to_string(),
            concat!(
                r#"{"acs_versions_supported":["0.1.0"],"#,
                r#""methods_implemented":["protocols/MCP/tools/call","steps/toolCallRequest","system/ping"],"#,
                r#""transports_supported":["http","https"],"provenance_producer":"none","#,
                r#""max_payload_size_bytes":1000000,"#,
                r#""wrapped_protocols":[{"protocol":"MCP","version":"2025-06-18"}],"#,
                r#""profiles_supported":["acs-core","acs-audit","acs-inspect"]}"#
            )
        );
    }

    #[test]
    fn stdio_hello_offers_only_stdio() {
        let hello = client_hello_payload(
            &methods(),
            None,
            Transport::Stdio,
            DEFAULT_PROFILES,
            size(1),
        );
        assert_eq!(hello["transports_supported"], json!(["stdio"]));
    }

    #[test]
    fn unknown_mcp_version_omits_wrapped_protocols() {
        let hello =
            client_hello_payload(&methods(), None, Transport::Http, DEFAULT_PROFILES, size(1));
        assert!(hello.get("wrapped_protocols").is_none());
    }

    #[test]
    fn profiles_are_a_parameter() {
        let hello = client_hello_payload(&methods(), None, Transport::Http, &["acs-core"], size(1));
        assert_eq!(hello["profiles_supported"], json!(["acs-core"]));
    }

    #[test]
    fn hello_validates_against_handshake_schema() {
        let schema: Value = serde_json::from_str(HANDSHAKE_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema["$defs"]["ClientHello"]).unwrap();
        for (transport, mcp) in [
            (Transport::Http, Some("2025-06-18")),
            (Transport::Stdio, None),
        ] {
            let hello =
                client_hello_payload(&methods(), mcp, transport, DEFAULT_PROFILES, size(4096));
            let errors: Vec<String> = validator
                .iter_errors(&hello)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{errors:?}");
        }
    }
}
