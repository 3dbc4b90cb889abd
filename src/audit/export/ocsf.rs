//! One audit entry as OCSF events, per the ACS Trace mapping.
//!
//! Every entry becomes one event of its step's class (`steps/sessionStart`
//! → Authentication 3002 Logon, `steps/toolCallRequest` → Process Activity
//! 1007, …); steps the mapping does not name (`protocols/MCP/*`, the
//! proxy's own `enforcement` entries) are Application Activity 6002, the
//! class the mapping gives allowed activity. A `deny`, `modify`, `ask` or
//! `defer` is in addition a Detection Finding (2004) with the fields the
//! mapping requires. Severities come from the mapping's disposition table.
//!
//! Each event names its entry under `unmapped.acs` (`entry_hash`,
//! `session_id`, `entry_id`, …) so a SIEM event leads back to the line of
//! the verifiable chain it came from; `metadata.correlation_uid` is the
//! session.

use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::mapping::OcsfMapping;
use crate::audit::ContextEntry;

/// The OCSF schema version the events follow.
pub const OCSF_VERSION: &str = "1.5.0";

/// Class of steps the mapping does not name.
const APPLICATION_ACTIVITY: (u64, &str) = (6002, "Application Activity");

/// OCSF `activity_id` 99: an activity the class does not enumerate.
const OTHER_ACTIVITY: u64 = 99;

/// Dispositions that make a Detection Finding.
const FINDING_DISPOSITIONS: [&str; 4] = ["deny", "modify", "ask", "defer"];

/// The OCSF events of one audit entry: its step event, then a finding for
/// a non-allow decision.
pub fn events(mapping: &OcsfMapping, entry: &ContextEntry) -> Vec<Value> {
    let mut events = vec![step_event(mapping, entry)];
    if let Some(decision) = entry.decision.as_deref() {
        if FINDING_DISPOSITIONS.contains(&decision) {
            events.push(finding_event(mapping, entry, decision));
        }
    }
    events
}

fn step_event(mapping: &OcsfMapping, entry: &ContextEntry) -> Value {
    let (class_uid, class_name, activity_id) = match mapping.step(&entry.step_type) {
        Some(class) => (
            class.class_uid,
            class.class_name.as_str(),
            class
                .activity_id
                .unwrap_or_else(|| default_activity(&entry.step_type)),
        ),
        None => (
            APPLICATION_ACTIVITY.0,
            APPLICATION_ACTIVITY.1,
            OTHER_ACTIVITY,
        ),
    };
    let mut event = common(mapping, entry, class_uid, class_name, activity_id);
    event["message"] = Value::from(message(entry));
    if let Some((action_id, action)) = entry.decision.as_deref().map(action_of) {
        event["action_id"] = Value::from(action_id);
        event["action"] = Value::from(action);
    }
    if class_uid == 3002 {
        // Authentication names the principal that logs on as `user`.
        if let Some(user) = event.pointer("/actor/user").cloned() {
            event["user"] = user;
        }
        if let Some(method) = &entry.authentication_method {
            event["auth_protocol_id"] = Value::from(OTHER_ACTIVITY);
            event["auth_protocol"] = Value::from(method.as_str());
        }
    }
    event
}

fn finding_event(mapping: &OcsfMapping, entry: &ContextEntry, decision: &str) -> Value {
    let mut event = common(
        mapping,
        entry,
        mapping.finding_class_uid,
        &mapping.finding_class_name,
        1,
    );
    let title = format!("acs-proxy {decision}: {}", subject(entry));
    let uid = format!("{}:finding", entry.entry_hash);
    // `finding` is what the ACS mapping requires verbatim; `finding_info`
    // is where OCSF 1.5 readers look for the same facts.
    event["finding"] = json!({ "title": title, "uid": uid });
    let mut info = json!({ "title": title, "uid": uid, "types": entry.reason_codes });
    if let Some(reasoning) = &entry.reasoning {
        info["desc"] = Value::from(reasoning.as_str());
    }
    if let Some(rule) = &entry.rule {
        info["analytic"] = json!({ "name": rule, "type_id": 1, "type": "Rule" });
    }
    event["finding_info"] = info;
    event["evidences"] = json!([{ "data": evidence(entry) }]);
    let (verdict_id, verdict) = verdict_of(decision);
    event["verdict_id"] = Value::from(verdict_id);
    event["verdict"] = Value::from(verdict);
    event["metadata"]["uid"] = Value::from(uid);
    event["message"] = Value::from(message(entry));
    event
}

/// What every event carries: class, time, severity, product, caller and
/// the audit entry it came from.
fn common(
    mapping: &OcsfMapping,
    entry: &ContextEntry,
    class_uid: u64,
    class_name: &str,
    activity_id: u64,
) -> Value {
    let category_uid = class_uid / 1000;
    let activity_name = activity_name(class_uid, activity_id);
    let severity_id = entry
        .decision
        .as_deref()
        .and_then(|decision| mapping.severity(decision))
        .unwrap_or(1);
    let mut event = json!({
        "class_uid": class_uid,
        "class_name": class_name,
        "category_uid": category_uid,
        "category_name": category_name(category_uid),
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": class_uid * 100 + activity_id,
        "type_name": format!("{class_name}: {activity_name}"),
        "severity_id": severity_id,
        "severity": severity_name(severity_id),
        "metadata": {
            "version": OCSF_VERSION,
            "product": {
                "name": "acs-proxy",
                "vendor_name": "acs-proxy",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "uid": entry.entry_hash,
            "correlation_uid": entry.session_id,
            "original_time": entry.timestamp,
            "log_name": "acs-audit",
        },
        "unmapped": { "acs": acs_facts(entry) },
    });
    if let Some(time) = epoch_millis(&entry.timestamp) {
        event["time"] = Value::from(time);
    }
    if let Some(user_id) = &entry.user_id {
        let mut user = json!({ "uid": user_id, "name": user_id });
        if let Some(tenant) = &entry.tenant_id {
            user["org"] = json!({ "uid": tenant });
        }
        event["actor"] = json!({ "user": user });
    }
    event
}

/// The entry's own members, so the event can be matched to its chain line.
fn acs_facts(entry: &ContextEntry) -> Value {
    let mut facts = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            facts.insert(key.to_owned(), value);
        }
    };
    let text = |value: &Option<String>| value.as_deref().map(Value::from);
    put("entry_hash", Some(Value::from(entry.entry_hash.as_str())));
    put("previous_hash", text(&entry.previous_hash));
    put("entry_id", Some(Value::from(entry.entry_id.as_str())));
    put("session_id", Some(Value::from(entry.session_id.as_str())));
    put("step_id", Some(Value::from(entry.step_id.as_str())));
    put("step_type", Some(Value::from(entry.step_type.as_str())));
    put("decision", text(&entry.decision));
    put(
        "decision_source",
        entry.decision_source.map(|s| Value::from(s.as_str())),
    );
    put("reasoning", text(&entry.reasoning));
    if !entry.reason_codes.is_empty() {
        put("reason_codes", Some(json!(entry.reason_codes)));
    }
    put("rule", text(&entry.rule));
    put("action", entry.action.map(|a| Value::from(a.as_str())));
    put("mcp_method", text(&entry.mcp_method));
    put("mcp_id", entry.mcp_id.clone());
    put("request_hash", text(&entry.request_hash));
    put("content_digest", text(&entry.content_digest));
    put("guardian_chain_hash", text(&entry.guardian_chain_hash));
    put("detail", text(&entry.detail));
    put("tenant_id", text(&entry.tenant_id));
    put("authentication_method", text(&entry.authentication_method));
    Value::Object(facts)
}

fn evidence(entry: &ContextEntry) -> Value {
    let mut data = json!({ "step_type": entry.step_type });
    if let Some(method) = &entry.mcp_method {
        data["mcp_method"] = Value::from(method.as_str());
    }
    if let Some(hash) = &entry.request_hash {
        data["request_hash"] = Value::from(hash.as_str());
    }
    if let Some(digest) = &entry.content_digest {
        data["content_digest"] = Value::from(digest.as_str());
    }
    if let Some(detail) = &entry.detail {
        data["detail"] = Value::from(detail.as_str());
    }
    data
}

/// The step and, when there is one, the MCP method it concerns.
fn subject(entry: &ContextEntry) -> String {
    match &entry.mcp_method {
        Some(method) => format!("{} ({method})", entry.step_type),
        None => entry.step_type.clone(),
    }
}

fn message(entry: &ContextEntry) -> String {
    let decision = entry.decision.as_deref().unwrap_or("recorded");
    match &entry.reasoning {
        Some(reasoning) => format!("{}: {decision}: {reasoning}", subject(entry)),
        None => format!("{}: {decision}", subject(entry)),
    }
}

/// Activities the mapping leaves open: a tool call is launched by its
/// request and ends with its result; inventory is logged.
fn default_activity(step_type: &str) -> u64 {
    match step_type {
        "steps/toolCallRequest" => 1,
        "steps/toolCallResult" => 2,
        "agbom/snapshot" | "agbom/changed" | "steps/skillRegister" => 1,
        _ => OTHER_ACTIVITY,
    }
}

fn activity_name(class_uid: u64, activity_id: u64) -> &'static str {
    match (class_uid, activity_id) {
        (3002, 1) => "Logon",
        (3002, 2) => "Logoff",
        (1007, 1) => "Launch",
        (1007, 2) => "Terminate",
        (1005, 1) => "Load",
        (1005, 2) => "Unload",
        (5001, 1) => "Log",
        (2004, 1) => "Create",
        _ => "Other",
    }
}

fn category_name(category_uid: u64) -> &'static str {
    match category_uid {
        1 => "System Activity",
        2 => "Findings",
        3 => "Identity & Access Management",
        5 => "Discovery",
        6 => "Application Activity",
        _ => "Other",
    }
}

fn severity_name(severity_id: u64) -> &'static str {
    match severity_id {
        1 => "Informational",
        2 => "Low",
        3 => "Medium",
        4 => "High",
        5 => "Critical",
        6 => "Fatal",
        _ => "Unknown",
    }
}

/// OCSF `action_id`: what was done with the activity.
fn action_of(decision: &str) -> (u64, &'static str) {
    match decision {
        "allow" => (1, "Allowed"),
        "deny" => (2, "Denied"),
        "modify" => (4, "Modified"),
        _ => (OTHER_ACTIVITY, "Other"),
    }
}

/// A deny or modify is the policy's confirmed verdict (True Positive); an
/// ask or defer awaits an approver or a later resolution.
fn verdict_of(decision: &str) -> (u64, &'static str) {
    match decision {
        "deny" | "modify" => (2, "True Positive"),
        _ => (0, "Unknown"),
    }
}

/// OCSF `time`: milliseconds since the Unix epoch.
fn epoch_millis(timestamp: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(timestamp, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(step_type: &str, decision: Option<&str>) -> ContextEntry {
        let mut value = json!({
            "entry_id": "2", "step_id": "r", "step_type": step_type, "session_id": "s",
            "timestamp": "2026-12-02T11:15:05.123Z", "previous_hash": "p", "entry_hash": "h",
            "user_id": "ada", "authentication_method": "oauth2", "tenant_id": "acme",
        });
        if let Some(decision) = decision {
            value["decision"] = Value::from(decision);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_allowed_session_start_is_a_logon_with_the_caller() {
        let mapping = OcsfMapping::acs_v0_1().unwrap();
        let events = events(&mapping, &entry("steps/sessionStart", Some("allow")));
        assert_eq!(events.len(), 1);
        let event = &events[0];
        assert_eq!(event["type_uid"], 300201);
        assert_eq!(event["severity_id"], 1);
        assert_eq!(event["time"], 1_796_210_105_123_i64);
        assert_eq!(event["actor"]["user"]["uid"], "ada");
        assert_eq!(event["user"]["org"]["uid"], "acme");
        assert_eq!(event["auth_protocol"], "oauth2");
        assert_eq!(event["unmapped"]["acs"]["entry_hash"], "h");
    }

    #[test]
    fn a_deny_adds_a_finding_with_the_required_fields() {
        let mapping = OcsfMapping::acs_v0_1().unwrap();
        let events = events(&mapping, &entry("steps/toolCallRequest", Some("deny")));
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["class_uid"], 1007);
        assert_eq!(events[0]["severity_id"], 4);
        let finding = &events[1];
        assert_eq!(finding["class_uid"], 2004);
        assert_eq!(finding["severity_id"], 4);
        for pointer in [
            "/finding/title",
            "/finding/uid",
            "/evidences",
            "/verdict_id",
        ] {
            assert!(finding.pointer(pointer).is_some(), "{pointer}");
        }
    }

    #[test]
    fn unmapped_steps_are_application_activity() {
        let mapping = OcsfMapping::acs_v0_1().unwrap();
        let events = events(&mapping, &entry("protocols/MCP/initialize", None));
        assert_eq!(events[0]["class_uid"], 6002);
        assert_eq!(events[0]["activity_id"], 99);
        assert_eq!(events[0]["severity_id"], 1);
    }
}
