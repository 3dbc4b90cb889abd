//! `acs-proxy audit export`: the log of a real session (the built binary
//! over stdio in front of the demo server) as JSONL and as OCSF events,
//! each event checked against the ACS mapping file
//! (`schemas/trace/ocsf-mapping.json`): class, activity and severity, the
//! finding fields a non-allow decision requires, the caller, and the audit
//! entry it came from.

mod support;

use std::collections::HashSet;
use std::process::Command;

use serde_json::{json, Value};
use support::policies::DENY_AND_REDACT_RULES;
use support::{parse, tool_call, Proxy, Scratch};

const HOOKS: &str = r#"
[hooks]
tools_call = "both"
user_id = "ada"
roles = ["analyst"]
tenant = "acme"
"#;

/// A session with allowed, denied and modified calls; its audit log.
fn session_log(scratch: &Scratch) -> Vec<Value> {
    let mut proxy = Proxy::start(&scratch.demo_config(&format!("{HOOKS}{DENY_AND_REDACT_RULES}")));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "hello"})));
    proxy.response(&json!(2));
    proxy.send(&tool_call(3, "get-env", json!({})));
    proxy.response(&json!(3));
    proxy.send(&tool_call(4, "lookup-user", json!({"name": "Ada"})));
    proxy.response(&json!(4));
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    scratch.audit_entries()
}

fn export(scratch: &Scratch, format: &str) -> String {
    let output = Command::new(support::proxy_bin())
        .args(["audit", "export", "--format", format])
        .arg(scratch.audit_log())
        .output()
        .expect("run audit export");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The mapping's `default` tables, read from the specification's file.
struct Mapping {
    document: Value,
}

impl Mapping {
    fn load() -> Self {
        let path = support::repo_root().join("schemas/trace/ocsf-mapping.json");
        let text = std::fs::read_to_string(path).expect("mapping file");
        Self {
            document: parse(&text),
        }
    }

    fn step(&self, step_type: &str) -> Option<&Value> {
        self.document["properties"]["step_to_class"]["default"].get(step_type)
    }

    fn severity(&self, decision: &str) -> u64 {
        self.document["properties"]["severity_mapping"]["default"][decision]
            .as_u64()
            .unwrap_or_else(|| panic!("no severity for {decision}"))
    }

    fn finding_class(&self) -> u64 {
        self.document["properties"]["decision_class"]["properties"]["class_uid"]["const"]
            .as_u64()
            .expect("decision class")
    }

    /// `finding.title` → `/finding/title`.
    fn finding_fields(&self) -> Vec<String> {
        self.document["properties"]["decision_class"]["properties"]["required_fields"]["default"]
            .as_array()
            .expect("required fields")
            .iter()
            .map(|field| format!("/{}", field.as_str().expect("name").replace('.', "/")))
            .collect()
    }
}

#[test]
fn jsonl_export_is_the_log_as_stored() {
    let scratch = Scratch::new();
    session_log(&scratch);
    let stored = std::fs::read_to_string(scratch.audit_log()).unwrap();
    assert_eq!(export(&scratch, "jsonl"), stored);
}

#[test]
fn every_entry_of_a_session_becomes_ocsf_events_as_the_mapping_says() {
    let scratch = Scratch::new();
    let entries = session_log(&scratch);
    let events: Vec<Value> = export(&scratch, "ocsf").lines().map(parse).collect();
    let mapping = Mapping::load();
    let mut decisions = HashSet::new();
    let mut step_types = HashSet::new();

    for entry in &entries {
        let hash = entry["entry_hash"].as_str().expect("entry_hash");
        let of_entry: Vec<&Value> = events
            .iter()
            .filter(|e| e["unmapped"]["acs"]["entry_hash"] == hash)
            .collect();
        let step_type = entry["step_type"].as_str().expect("step_type");
        let decision = entry["decision"].as_str();
        step_types.insert(step_type.to_owned());
        decisions.extend(decision.map(str::to_owned));
        let finding = decision.is_some_and(|d| d != "allow");
        assert_eq!(
            of_entry.len(),
            1 + usize::from(finding),
            "events of {entry}: {of_entry:?}"
        );
        let severity = decision.map_or(1, |d| mapping.severity(d));

        let step = of_entry[0];
        match mapping.step(step_type) {
            Some(class) => {
                assert_eq!(step["class_uid"], class["class_uid"], "{step_type}");
                assert_eq!(step["class_name"], class["class_name"], "{step_type}");
                if let Some(activity) = class.get("activity_id") {
                    assert_eq!(&step["activity_id"], activity, "{step_type}");
                }
            }
            // Steps the mapping leaves out: Application Activity.
            None => assert_eq!(step["class_uid"], 6002, "{step_type}"),
        }
        for event in &of_entry {
            assert_eq!(event["severity_id"], severity, "{event}");
            let class = event["class_uid"].as_u64().unwrap();
            let activity = event["activity_id"].as_u64().unwrap();
            assert_eq!(event["type_uid"], class * 100 + activity, "{event}");
            assert_eq!(event["category_uid"], class / 1000, "{event}");
            assert!(event["time"].as_i64().is_some_and(|t| t > 0), "{event}");
            let acs = &event["unmapped"]["acs"];
            assert_eq!(acs["session_id"], entry["session_id"]);
            assert_eq!(acs["entry_id"], entry["entry_id"]);
            assert_eq!(acs["step_type"], entry["step_type"]);
            assert_eq!(event["metadata"]["correlation_uid"], entry["session_id"]);
            assert_eq!(event["actor"]["user"]["uid"], "ada", "{event}");
            assert_eq!(event["actor"]["user"]["org"]["uid"], "acme", "{event}");
            assert_eq!(acs["authentication_method"], entry["authentication_method"]);
        }
        if finding {
            let finding = of_entry[1];
            assert_eq!(finding["class_uid"], mapping.finding_class());
            for field in mapping.finding_fields() {
                assert!(
                    finding.pointer(&field).is_some_and(|v| !v.is_null()),
                    "{field} missing in {finding}"
                );
            }
        }
    }
    assert_eq!(
        events.len(),
        entries.len()
            + entries
                .iter()
                .filter(|e| e["decision"].as_str().is_some_and(|d| d != "allow"))
                .count()
    );
    for wanted in ["allow", "deny", "modify"] {
        assert!(decisions.contains(wanted), "no {wanted} in the session");
    }
    for wanted in [
        "steps/sessionStart",
        "steps/toolCallRequest",
        "steps/toolCallResult",
        "steps/sessionEnd",
    ] {
        assert!(step_types.contains(wanted), "no {wanted} in the session");
    }
    let logon = events
        .iter()
        .find(|e| e["unmapped"]["acs"]["step_type"] == "steps/sessionStart")
        .expect("a logon");
    assert_eq!(logon["user"]["uid"], "ada");
}
