//! What the proxy puts on the wire, validated against the ACS v0.1.0 JSON
//! Schemas in `schemas/`.
//!
//! A real proxy runs in front of the demo server with `[audit]
//! record_content = true`, so every audit entry carries `hook_params`, the
//! exact `params` object the proxy built for that hook, and `step_type`, the
//! hook method. Each emitted envelope is reconstructed from the log as
//! `{"jsonrpc":"2.0","id":1,"method":step_type,"params":hook_params}` and
//! checked against `request-envelope.json`; the tool-step payloads against
//! `hooks/tool-call-*.json`; every AgBOM component against
//! `agbom/component.json`. Decisions built with the proxy's own wire types
//! (`acs_proxy::guardian::decision`) are checked against
//! `response-envelope.json`.
//!
//! # Drift handling (schemas/SOURCES.md, "Known drift")
//!
//! The saved schemas are older snapshots. Files on disk are never edited;
//! at load time, in memory only:
//!
//! 1. (drift 1) a `$id` under the retired `https://acs.org/schema/v0.1.0/`
//!    base is rewritten to the genai base, and every schema file is
//!    registered as a resource under its `$id` (except the package index
//!    `ACS/acs_schema.json`, see [`AGGREGATOR`]), so relative `$ref`s
//!    (`../provenance.json`, `request-envelope.json#/$defs/Signature`, …)
//!    resolve offline.
//! 2. (drift 2) `"provenance"` is dropped from every `required` list of the
//!    hook schemas SOURCES.md marks "old: `provenance` REQUIRED": the current
//!    base schemas make data-field provenance optional (§7). A `provenance`
//!    that *is* present is still validated against `provenance.json`. The
//!    `summary` objects of post-compact, turn-end and subagent-stop keep
//!    their requirement (the current subagent-stop file still has it).
//! 3. (drift 6) `ask-details.json` / `defer-details.json`, which
//!    `response-envelope.json` references but which are missing upstream,
//!    are registered as empty placeholder schemas so the envelope compiles
//!    offline. `ask` / `defer` results are therefore not validated here.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use acs_proxy::guardian::decision::{
    Decision, Disposition, Modifications, PolicyReference, Redaction,
};
use acs_proxy::hooks::HookPayload;
use acs_proxy::policy::{HookView, Policy};
use jsonschema::{Registry, Validator};
use serde_json::{json, Map, Value};
use support::{tool_call, Proxy, Scratch};

/// The `$id` base of the older schema files (drift 1).
const RETIRED_BASE: &str = "https://acs.org/schema/v0.1.0/";
/// The `$id` base of the current spec.
const BASE: &str = "https://genai-security-project.github.io/agent-control-standard/schema/v0.1.0/";

/// Hook schemas whose saved version requires `provenance` (drift 2).
const PROVENANCE_REQUIRED_HERE: [&str; 7] = [
    "hooks/tool-call-request.json",
    "hooks/tool-call-result.json",
    "hooks/agent-response.json",
    "hooks/user-message.json",
    "hooks/knowledge-retrieval.json",
    "hooks/memory-context-retrieval.json",
    "hooks/memory-store.json",
];

/// The package index (`specification/ACS/acs_schema.json` upstream), not a
/// v0.1.0 schema: its own `$id` base and `../v0.1.0/…` references into a
/// layout this directory does not have, naming some twenty files that are
/// missing (DIGEST §14). Nothing validated here refers to it, and the
/// registry resolves every reference of what it holds, so it is left out.
const AGGREGATOR: &str = "ACS/acs_schema.json";

/// Referenced by `response-envelope.json` but missing upstream (drift 6).
const MISSING_REFERENCED: [&str; 2] = ["ask-details.json", "defer-details.json"];

/// The policy of the session: a deny, a modify by override, a modify by
/// redaction; everything else is allowed.
const POLICY: &str = r#"
[policy]
default = "allow"

[[policy.rule]]
name = "no-environment-dump"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "dumping the server environment would expose credentials"

[[policy.rule]]
name = "override-echo"
hook = "steps/toolCallRequest"
tool = "echo"
match = { pointer = "/arguments/text/value", regex = "please-override" }
decision = "modify"
reasoning = "this text is replaced by policy"
set = { text = "overridden by policy" }

[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
tool = "lookup-user"
decision = "modify"
reasoning = "US social security numbers are removed from tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[REDACTED SSN]" }
"#;

/// Hook methods the session must have produced, at least once each.
const EXPECTED_METHODS: [&str; 14] = [
    "steps/sessionStart",
    "agbom/snapshot",
    "agbom/changed",
    "protocols/MCP/initialize",
    "protocols/MCP/notifications/initialized",
    "protocols/MCP/tools/list",
    "protocols/MCP/tools/call",
    "steps/toolCallRequest",
    "steps/toolCallResult",
    "protocols/MCP/resources/read",
    "protocols/MCP/prompts/get",
    "protocols/MCP/notifications/tools/list_changed",
    "steps/sessionEnd",
    "protocols/MCP/notifications/cancelled",
];

// ---------------------------------------------------------------------------
// The schemas
// ---------------------------------------------------------------------------

/// Every schema file, transformed as described above, in one registry.
struct Schemas {
    registry: Registry<'static>,
}

impl Schemas {
    fn load() -> Self {
        let root = support::repo_root().join("schemas");
        let mut files = Vec::new();
        collect_json_files(&root, &mut files);
        files.sort();
        assert!(files.len() >= 20, "schema files missing: {files:?}");

        let mut resources: Vec<(String, Value)> = Vec::new();
        for file in &files {
            let rel = file
                .strip_prefix(&root)
                .expect("under schemas/")
                .to_string_lossy()
                .replace('\\', "/");
            if rel == AGGREGATOR {
                continue;
            }
            let text = std::fs::read_to_string(file).expect("read schema");
            let mut schema: Value = serde_json::from_str(&text)
                .unwrap_or_else(|err| panic!("{rel} is not JSON: {err}"));
            let id = rebase_id(&mut schema).unwrap_or_else(|| format!("{BASE}{rel}"));
            if PROVENANCE_REQUIRED_HERE.contains(&rel.as_str()) {
                let dropped = drop_required(&mut schema, "provenance");
                assert!(
                    dropped > 0,
                    "{rel}: SOURCES.md says it requires provenance, but nothing was dropped"
                );
            }
            resources.push((id, schema));
        }
        for missing in MISSING_REFERENCED {
            let id = format!("{BASE}{missing}");
            assert!(
                !resources.iter().any(|(known, _)| *known == id),
                "{missing} exists now: drop its placeholder"
            );
            resources.push((
                id.clone(),
                json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$id": id,
                    "description": "placeholder: missing upstream (schemas/SOURCES.md drift 6)"
                }),
            ));
        }
        for rel in [
            "request-envelope.json",
            "response-envelope.json",
            "provenance.json",
        ] {
            let id = format!("{BASE}{rel}");
            assert!(
                resources.iter().any(|(known, _)| *known == id),
                "{id} is not registered"
            );
        }
        let registry = Registry::new()
            .extend(resources)
            .expect("schema URIs are valid")
            .prepare()
            .expect("the schema registry builds offline");
        Self { registry }
    }

    /// A validator for the registered schema `rel` (relative to the genai
    /// base), with `format` asserted (uuid, date-time, uri).
    fn validator(&self, rel: &str) -> Validator {
        jsonschema::options()
            .with_registry(&self.registry)
            .should_validate_formats(true)
            .build(&json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": format!("{BASE}{rel}"),
            }))
            .unwrap_or_else(|err| panic!("{rel} does not compile: {err}"))
    }
}

fn collect_json_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read schemas dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect_json_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "json") {
            out.push(path);
        }
    }
}

/// Drift 1: moves a `$id` under the retired base to the genai base; returns
/// the (possibly rewritten) `$id`.
fn rebase_id(schema: &mut Value) -> Option<String> {
    let id = schema.get("$id")?.as_str()?.to_owned();
    let id = match id.strip_prefix(RETIRED_BASE) {
        Some(rest) => format!("{BASE}{rest}"),
        None => id,
    };
    schema["$id"] = Value::from(id.as_str());
    Some(id)
}

/// Drift 2: removes `name` from every `required` array in the schema;
/// returns how many arrays lost it.
fn drop_required(schema: &mut Value, name: &str) -> usize {
    match schema {
        Value::Object(map) => {
            let mut dropped = 0;
            if let Some(Value::Array(required)) = map.get_mut("required") {
                let before = required.len();
                required.retain(|item| item != name);
                dropped += before - required.len();
            }
            dropped
                + map
                    .values_mut()
                    .map(|v| drop_required(v, name))
                    .sum::<usize>()
        }
        Value::Array(items) => items.iter_mut().map(|v| drop_required(v, name)).sum(),
        _ => 0,
    }
}

/// Every violation, one line each: where in the instance, which schema rule.
fn violations(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|err| {
            format!(
                "at {:?} (schema rule {}): {}",
                err.instance_path().as_str(),
                err.schema_path().as_str(),
                err
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The session
// ---------------------------------------------------------------------------

/// The audit entries of one session that yields every kind of hook; run once
/// and shared by the tests below.
fn session_entries() -> &'static [Value] {
    static ENTRIES: OnceLock<Vec<Value>> = OnceLock::new();
    ENTRIES.get_or_init(run_session)
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn run_session() -> Vec<Value> {
    let scratch = Scratch::new();
    let config = scratch.demo_config_recording_content(POLICY);
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));

    proxy.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}));
    let tools = proxy.response(&json!(2));
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() >= 7),
        "{tools}"
    );

    proxy.send(&tool_call(3, "echo", json!({"text": "hello"})));
    assert_eq!(text_of(&proxy.response(&json!(3))), "hello");

    proxy.send(&tool_call(4, "echo", json!({"text": "please-override"})));
    assert_eq!(
        text_of(&proxy.response(&json!(4))),
        "overridden by policy",
        "the override rule did not apply"
    );

    // A tool execution error (isError) and a protocol error (unknown tool).
    proxy.send(&tool_call(5, "add", json!({"a": "one", "b": 2})));
    assert_eq!(proxy.response(&json!(5))["result"]["isError"], true);
    proxy.send(&tool_call(6, "no-such-tool", json!({})));
    assert!(proxy.response(&json!(6)).get("error").is_some());

    proxy.send(&tool_call(7, "lookup-user", json!({"name": "ada"})));
    let user = text_of(&proxy.response(&json!(7)));
    assert!(user.contains("[REDACTED SSN]"), "not redacted: {user}");

    proxy.send(&tool_call(8, "get-env", json!({})));
    let denied = proxy.response(&json!(8));
    assert!(!denied.to_string().contains("sk-demo"), "{denied}");

    proxy.send(&json!({"jsonrpc":"2.0","id":9,"method":"resources/read",
        "params":{"uri":"demo://readme"}}));
    assert!(proxy.response(&json!(9))["result"]["contents"].is_array());

    proxy.send(&json!({"jsonrpc":"2.0","id":10,"method":"prompts/get",
        "params":{"name":"greeting","arguments":{"name":"Ada"}}}));
    assert!(proxy.response(&json!(10))["result"]["messages"].is_array());

    // A client notification besides notifications/initialized.
    proxy.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":"nothing-in-flight","reason":"test"}}));

    // change-tools makes the server emit notifications/tools/list_changed;
    // the next tools/list then differs from the snapshot: agbom/changed.
    proxy.send(&tool_call(11, "change-tools", json!({})));
    proxy.response(&json!(11));
    proxy.send(&json!({"jsonrpc":"2.0","id":12,"method":"tools/list","params":{}}));
    let tools = proxy.response(&json!(12));
    assert!(
        tools.to_string().contains("extra-tool"),
        "change-tools had no effect: {tools}"
    );

    assert!(proxy.finish().success(), "the proxy did not exit cleanly");
    scratch.assert_audit_verifies();
    scratch.audit_entries()
}

/// The hook entries (everything but enforcement events), each with the
/// envelope reconstructed from it.
fn hook_envelopes() -> Vec<(&'static Value, Value)> {
    let mut missing = Vec::new();
    let envelopes: Vec<(&'static Value, Value)> = session_entries()
        .iter()
        .filter(|entry| entry["step_type"] != "enforcement")
        .filter_map(|entry| match entry.get("hook_params") {
            Some(params) => Some((
                entry,
                json!({"jsonrpc":"2.0","id":1,"method":entry["step_type"],"params":params}),
            )),
            None => {
                missing.push(entry.clone());
                None
            }
        })
        .collect();
    assert!(
        missing.is_empty(),
        "hook entries without hook_params although record_content is on: {missing:#?}"
    );
    envelopes
}

fn payloads_of(method: &str) -> Vec<(&'static Value, Value)> {
    hook_envelopes()
        .into_iter()
        .filter(|(entry, _)| entry["step_type"] == method)
        .map(|(entry, envelope)| (entry, envelope["params"]["payload"].clone()))
        .collect()
}

fn describe(entry: &Value) -> String {
    format!(
        "entry {} ({}, mcp {} id {})",
        entry["entry_id"], entry["step_type"], entry["mcp_method"], entry["mcp_id"]
    )
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

#[test]
fn every_emitted_envelope_matches_request_envelope_schema() {
    let schemas = Schemas::load();
    let validator = schemas.validator("request-envelope.json");
    let envelopes = hook_envelopes();

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (entry, envelope) in &envelopes {
        let method = entry["step_type"].as_str().expect("step_type").to_owned();
        *counts.entry(method).or_default() += 1;
        // The reconstruction is the hashed object itself, not a look-alike.
        let params = &envelope["params"];
        if params["request_id"] != entry["step_id"] {
            problems.push(format!("{}: request_id ≠ step_id", describe(entry)));
        }
        if let Some(hash) = entry.get("request_hash") {
            if *hash != acs_proxy::jcs::value_digest(params) {
                problems.push(format!(
                    "{}: hook_params do not hash to request_hash",
                    describe(entry)
                ));
            }
        }
        for violation in violations(&validator, envelope) {
            problems.push(format!("{}: {violation}", describe(entry)));
        }
    }
    eprintln!("validated {} envelopes: {counts:#?}", envelopes.len());

    let absent: Vec<&str> = EXPECTED_METHODS
        .iter()
        .copied()
        .filter(|method| !counts.contains_key(*method))
        .collect();
    assert!(
        absent.is_empty(),
        "no envelope for {absent:?}; saw {counts:#?}"
    );
    assert!(envelopes.len() >= 30, "only {} envelopes", envelopes.len());
    assert!(
        problems.is_empty(),
        "{} envelope problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );

    // The validator is live: it rejects what it should.
    let (_, sample) = &envelopes[0];
    for (what, broken) in [
        ("no request_id", without(sample, "/params", "request_id")),
        ("no metadata", without(sample, "/params", "metadata")),
        ("null id", with(sample, "/id", Value::Null)),
        (
            "unknown namespace",
            with(sample, "/method", json!("tools/call")),
        ),
        (
            "bad uuid",
            with(sample, "/params/request_id", json!("nope")),
        ),
        (
            "bad timestamp",
            with(sample, "/params/timestamp", json!("yesterday")),
        ),
        ("extra top-level member", with(sample, "/extra", json!(1))),
    ] {
        assert!(
            !validator.is_valid(&broken),
            "accepted an envelope with {what}"
        );
    }
}

#[test]
fn tool_call_step_payloads_match_their_hook_schemas() {
    let schemas = Schemas::load();
    let request_schema = schemas.validator("hooks/tool-call-request.json");
    let result_schema = schemas.validator("hooks/tool-call-result.json");
    let requests = payloads_of("steps/toolCallRequest");
    let results = payloads_of("steps/toolCallResult");

    let mut problems = Vec::new();
    for (entry, payload) in &requests {
        for violation in violations(&request_schema, payload) {
            problems.push(format!("{}: {violation}", describe(entry)));
        }
    }
    for (entry, payload) in &results {
        for violation in violations(&result_schema, payload) {
            problems.push(format!("{}: {violation}", describe(entry)));
        }
    }
    eprintln!(
        "validated {} toolCallRequest and {} toolCallResult payloads",
        requests.len(),
        results.len()
    );

    // echo ×2, add, no-such-tool, lookup-user, get-env, change-tools.
    assert!(requests.len() >= 7, "{} requests", requests.len());
    // The same but get-env, which was denied before it ran.
    assert!(results.len() >= 6, "{} results", results.len());
    let decided = |set: &[(&Value, Value)], decision: &str| {
        set.iter()
            .filter(|(e, _)| e["decision"] == decision)
            .count()
    };
    assert!(decided(&requests, "deny") >= 1, "no denied request");
    assert!(decided(&requests, "modify") >= 1, "no modified request");
    assert!(decided(&results, "modify") >= 1, "no modified result");
    let status = |wanted: &str| {
        results
            .iter()
            .filter(|(_, p)| p["exit_status"] == wanted)
            .count()
    };
    assert!(status("failure") >= 2, "expected ≥2 failed results");
    assert!(status("success") >= 4, "expected ≥4 successful results");
    assert!(
        problems.is_empty(),
        "{} payload problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );

    // Live validators; and a provenance, when present, is still checked
    // (through the rewritten `../provenance.json` reference).
    let (_, request) = &requests[0];
    let (_, result) = &results[0];
    let argument = request["arguments"]
        .as_object()
        .and_then(|a| a.keys().next().cloned())
        .expect("a request with arguments comes first (echo)");
    let arg_ptr = format!("/arguments/{argument}");
    for (what, broken) in [
        ("no tool", without(request, "", "tool")),
        (
            "argument without value",
            without(request, &arg_ptr, "value"),
        ),
        (
            "bad provenance origin",
            with(
                request,
                &format!("{arg_ptr}/provenance"),
                json!({"provenance_id":"p1","origin":"hearsay"}),
            ),
        ),
    ] {
        assert!(
            !request_schema.is_valid(&broken),
            "accepted a request with {what}"
        );
    }
    let good = with(
        request,
        &format!("{arg_ptr}/provenance"),
        json!({"provenance_id":"p1","origin":"user_input"}),
    );
    assert!(
        request_schema.is_valid(&good),
        "rejected a valid provenance"
    );
    for (what, broken) in [
        (
            "unknown exit_status",
            with(result, "/exit_status", json!("crashed")),
        ),
        ("negative duration", with(result, "/duration_ms", json!(-1))),
        (
            "bad request_id_ref",
            with(result, "/request_id_ref", json!("x")),
        ),
        ("no outputs", without(result, "", "outputs")),
    ] {
        assert!(
            !result_schema.is_valid(&broken),
            "accepted a result with {what}"
        );
    }
}

#[test]
fn agbom_components_match_component_schema() {
    let schemas = Schemas::load();
    let validator = schemas.validator("agbom/component.json");
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut check = |entry: &Value, where_: &str, components: &Value| {
        let components = components
            .as_array()
            .unwrap_or_else(|| panic!("{}: {where_} is not an array", describe(entry)));
        for component in components {
            checked += 1;
            for violation in violations(&validator, component) {
                problems.push(format!(
                    "{} {where_} {}: {violation}",
                    describe(entry),
                    component["id"]
                ));
            }
        }
        components.len()
    };

    let snapshots = payloads_of("agbom/snapshot");
    assert_eq!(snapshots.len(), 1, "one agbom/snapshot per session");
    for (entry, payload) in &snapshots {
        let n = check(entry, "components", &payload["components"]);
        // The server, 7 tools, 1 prompt, 1 resource.
        assert!(n >= 10, "the snapshot lists only {n} components");
        let types: Vec<&str> = payload["components"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["type"].as_str())
            .collect();
        for wanted in ["mcp_server", "tool", "agent_capability", "knowledge_source"] {
            assert!(types.contains(&wanted), "no {wanted} component: {types:?}");
        }
    }
    let changes = payloads_of("agbom/changed");
    assert!(!changes.is_empty(), "no agbom/changed");
    let mut changed_components = 0;
    for (entry, payload) in &changes {
        for list in ["added", "removed", "changed"] {
            if !payload[list].is_null() {
                changed_components += check(entry, list, &payload[list]);
            }
        }
    }
    assert!(changed_components >= 1, "agbom/changed listed no component");
    eprintln!("validated {checked} AgBOM components");

    // Known to fail (src/hooks/agbom.rs, `item_component`), not drift:
    // - `tool` components carry no `version` (schema `allOf[3].then.required`;
    //   the current prose requires it too);
    // - `agent_capability` (prompt) components carry an empty
    //   `agent_capability_fields`, whose `required` names `description`
    //   (the description is put at the top level, and only when the prompt
    //   has one).
    assert!(
        problems.is_empty(),
        "{} AgBOM component problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );

    let ok = json!({"id":"tool:x/y","type":"tool","name":"y","version":"1","provider":"x",
        "tool_fields":{"capability":"mcp.tool"}});
    assert!(validator.is_valid(&ok), "{:?}", violations(&validator, &ok));
    assert!(!validator.is_valid(&without(&ok, "", "tool_fields")));
    assert!(!validator.is_valid(&with(&ok, "/type", json!("skill"))));
}

/// `{"jsonrpc":"2.0","id":1,"result":{type,acs_version,request_id,…decision}}`.
fn response_envelope(decision: &Decision, request_id: &str) -> Value {
    let mut result = Map::new();
    result.insert("type".into(), json!("final"));
    result.insert("acs_version".into(), json!(acs_proxy::hooks::ACS_VERSION));
    result.insert("request_id".into(), json!(request_id));
    match serde_json::to_value(decision).expect("a decision serializes") {
        Value::Object(fields) => result.extend(fields),
        other => panic!("a decision serialized as {other}"),
    }
    json!({"jsonrpc":"2.0","id":1,"result":result})
}

#[test]
fn decision_wire_types_match_response_envelope_schema() {
    let schemas = Schemas::load();
    let validator = schemas.validator("response-envelope.json");
    let request_id = "0190b4a2-6c1e-7c3a-9f7e-2d4b8a1c5e6f";
    let reference = PolicyReference {
        policy_id: Some("proxy.toml".into()),
        rule_id: Some("rule-1".into()),
    };

    let mut deny = Decision::deny(
        "the Guardian cannot apply this modification",
        Some("modify_unsupported"),
    );
    deny.policy_references = std::sync::Arc::new([reference.clone()]);
    let mut redact = Decision::new(Disposition::Modify, Some("PII removed".into()));
    redact.modifications = Some(Box::new(Modifications {
        redactions: vec![
            Redaction {
                path: "/outputs/0/value".into(),
                replacement: "[REDACTED SSN]".into(),
            },
            Redaction {
                path: "/outputs/1/value".into(),
                replacement: "[REDACTED]".into(),
            },
        ],
        ..Modifications::default()
    }));
    redact.policy_references = std::sync::Arc::new([reference]);
    let mut overrides = Decision::new(Disposition::Modify, Some("argument pinned".into()));
    let mut parameter_overrides = Map::new();
    parameter_overrides.insert("b".into(), json!(1000));
    overrides.modifications = Some(Box::new(Modifications {
        parameter_overrides,
        ..Modifications::default()
    }));
    let mut allow = Decision::allow();
    allow.chain_hash = Some("ab".repeat(32));
    let replaced = Decision {
        modifications: Some(Box::new(Modifications {
            modified_content: Some("{}".into()),
            ..Modifications::default()
        })),
        ..Decision::new(Disposition::Modify, Some("whole payload replaced".into()))
    };

    let mut problems = Vec::new();
    let mut validated = 0;
    for (what, decision) in [
        ("deny", &deny),
        ("modify (redactions)", &redact),
        ("modify (parameter_overrides)", &overrides),
        ("modify (modified_content)", &replaced),
        ("allow with chain_hash", &allow),
    ] {
        validated += 1;
        let envelope = response_envelope(decision, request_id);
        for violation in violations(&validator, &envelope) {
            problems.push(format!("{what}: {violation}\n  {envelope}"));
        }
    }

    // The decisions the embedded policy gives the session's own tool steps,
    // answered under each step's request_id.
    let policy = Policy::from_toml_str("schemas-test.toml", POLICY).expect("policy compiles");
    let mut by_disposition: BTreeMap<&str, usize> = BTreeMap::new();
    for method in ["steps/toolCallRequest", "steps/toolCallResult"] {
        for (entry, payload) in payloads_of(method) {
            let tool = payload["tool"]["name"].as_str();
            let hook_payload = HookPayload::from(payload.clone());
            let decision = policy.evaluate(&HookView::new(method, tool, &hook_payload));
            assert_eq!(
                entry["decision"],
                decision.decision.as_str(),
                "{}: re-evaluation disagrees with the audit log",
                describe(entry)
            );
            *by_disposition
                .entry(decision.decision.as_str())
                .or_default() += 1;
            validated += 1;
            let step_id = entry["step_id"].as_str().expect("step_id");
            let envelope = response_envelope(&decision, step_id);
            for violation in violations(&validator, &envelope) {
                problems.push(format!("{}: {violation}\n  {envelope}", describe(entry)));
            }
        }
    }
    eprintln!("validated {validated} response envelopes; policy decisions {by_disposition:?}");
    for disposition in ["allow", "deny", "modify"] {
        assert!(
            by_disposition.get(disposition).is_some_and(|n| *n >= 1),
            "no policy decision {disposition}: {by_disposition:?}"
        );
    }
    assert!(
        problems.is_empty(),
        "{} response envelope problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );

    // The validator is live.
    let good = response_envelope(&deny, request_id);
    for (what, broken) in [
        (
            "uppercase decision",
            with(&good, "/result/decision", json!("DENY")),
        ),
        (
            "deny without reasoning",
            without(&good, "/result", "reasoning"),
        ),
        (
            "type progress",
            with(&good, "/result/type", json!("progress")),
        ),
        ("no request_id", without(&good, "/result", "request_id")),
        (
            "bad chain_hash",
            with(&good, "/result/chain_hash", json!("XYZ")),
        ),
        (
            "result and error",
            with(&good, "/error", json!({"code":-32603,"message":"x"})),
        ),
    ] {
        assert!(
            !validator.is_valid(&broken),
            "accepted a response with {what}"
        );
    }
    let bare_modify = response_envelope(
        &Decision::new(Disposition::Modify, Some("no changes".into())),
        request_id,
    );
    assert!(
        !validator.is_valid(&bare_modify),
        "accepted a modify without modifications"
    );
    let empty_modifications = with(&good, "/result/decision", json!("modify"));
    let empty_modifications = with(&empty_modifications, "/result/modifications", json!({}));
    assert!(
        !validator.is_valid(&empty_modifications),
        "accepted empty modifications"
    );
}

// ---------------------------------------------------------------------------
// Small JSON editing helpers for the negative controls
// ---------------------------------------------------------------------------

/// A copy of `value` with `key` removed from the object at `pointer`.
fn without(value: &Value, pointer: &str, key: &str) -> Value {
    let mut copy = value.clone();
    copy.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {pointer:?}"))
        .shift_remove(key);
    copy
}

/// A copy of `value` with `pointer` set to `new` (its parent must exist).
fn with(value: &Value, pointer: &str, new: Value) -> Value {
    let mut copy = value.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    copy.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {parent:?}"))
        .insert(key.to_owned(), new);
    copy
}
