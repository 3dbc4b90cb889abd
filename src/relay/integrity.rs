//! The integrity checks on the message path (`[integrity]`): every list the
//! server returns is checked against the pins and the poisoning rules,
//! what is found is audited, logged and counted, and in `enforce` flagged
//! definitions are taken out of the list the agent gets; a `tools/call`
//! (or `prompts/get`) naming one is refused before the Guardian or the
//! server sees it, and with `validate_arguments` so is a call whose
//! arguments fail the tool's `inputSchema`.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::decide::{self, MessageContext};
use crate::config::{Config, GuardianMode, IntegrityMode, ToolsCallHooks};
use crate::enforce::integrity::hide::hide_items;
use crate::enforce::integrity::{pins, Event, EventKind, Integrity, Section};
use crate::enforce::reply::{self, Denial};
use crate::enforce::{Action, MessageDoc};
use crate::guardian::{Decision, Disposition};
use crate::hooks::Identity;
use crate::jsonrpc::{codes, error_response, RequestId};
use crate::metrics::METRICS;
use crate::session::Session;

/// The checks for this session's config, or `None` when `[integrity]` is
/// inactive or its pin file cannot be loaded (logged; startup checks it).
fn integrity(session: &Session) -> Option<Arc<Integrity>> {
    let config = &session.config.integrity;
    if !config.is_active() {
        return None;
    }
    match Integrity::shared(config) {
        Ok(integrity) => Some(integrity),
        Err(err) => {
            tracing::error!(%err, "the integrity checks cannot run");
            None
        }
    }
}

/// Checks a list response on its way to the client and, in `enforce`,
/// removes the definitions it flags.
pub async fn screen_list(
    session: &Session,
    method: &str,
    doc: &mut MessageDoc,
    context: &MessageContext,
) {
    let Some(section) = Section::of_list(method) else {
        return;
    };
    let Some(result) = doc.value().get("result") else {
        return;
    };
    let Some(items) = section.items(result).cloned() else {
        return;
    };
    let complete = result.get("nextCursor").is_none_or(Value::is_null);
    let mut hidden = screen_items(session, section, &items, complete, context).await;
    if section == Section::Tools && session.config.integrity.hide_denied_tools {
        hidden.extend(denied_by_policy(session, &items));
    }
    if hidden.is_empty() {
        return;
    }
    if let Some(result) = doc.value_mut().get_mut("result") {
        hide_items(result, section, &hidden);
        doc.mark_rewritten();
    }
}

/// The tools the embedded rules deny this session's caller outright, at
/// every hook a `tools/call` goes through. Only the rules engine can be
/// read this way: a Rego policy or a remote Guardian decides per call.
fn denied_by_policy(session: &Session, items: &[Value]) -> HashSet<String> {
    let user = session.identity.as_deref();
    items
        .iter()
        .filter_map(|item| item.get("name").and_then(Value::as_str))
        .filter(|tool| {
            let called_as = session.tool_called_as(Some(tool));
            denies_tool_outright(&session.config, user, tool, called_as.as_deref())
        })
        .map(str::to_owned)
        .collect()
}

/// Whether the embedded rules deny `user` every call of `tool` (known to
/// the agent of a virtual server as `called_as`) at every hook a
/// `tools/call` goes through: what `hide_denied_tools` hides. Only the
/// rules engine can be read this way: a Rego policy or a remote Guardian
/// decides per call.
pub fn denies_tool_outright(
    config: &Config,
    user: Option<&Identity>,
    tool: &str,
    called_as: Option<&str>,
) -> bool {
    if config.guardian.mode != GuardianMode::Embedded || config.rego.is_some() {
        return false;
    }
    tools_call_methods(config.hooks.tools_call)
        .iter()
        .any(|method| {
            config
                .policy
                .denies_outright_as(method, tool, called_as, user)
        })
}

/// The hooks a `tools/call` is decided at.
fn tools_call_methods(hooks: ToolsCallHooks) -> Vec<String> {
    let wrapped = crate::hooks::mcp::wrapped_method("tools/call");
    match hooks {
        ToolsCallHooks::Steps => vec![crate::hooks::TOOL_CALL_REQUEST.to_owned()],
        ToolsCallHooks::Wrapped => vec![wrapped.to_string()],
        ToolsCallHooks::Both => vec![
            crate::hooks::TOOL_CALL_REQUEST.to_owned(),
            wrapped.to_string(),
        ],
    }
}

/// Checks definitions the proxy read itself (the inventory snapshot).
pub async fn screen_fetched(session: &Session, method: &str, items: &[Value]) {
    let Some(section) = Section::of_list(method) else {
        return;
    };
    let context = MessageContext::new(crate::session::Direction::ServerToClient, method, None);
    screen_items(session, section, items, true, &context).await;
}

/// Checks `items`, notes them in the session's view, reports what is new to
/// the session, and returns the names `enforce` hides.
async fn screen_items(
    session: &Session,
    section: Section,
    items: &[Value],
    complete: bool,
    context: &MessageContext,
) -> HashSet<String> {
    let Some(integrity) = integrity(session) else {
        return HashSet::new();
    };
    if integrity.mode() == IntegrityMode::Off {
        note_unchecked(session, section, items);
        return HashSet::new();
    }
    let verdicts = integrity.evaluate(&session.upstream, section, items, complete);
    let enforce = integrity.mode() == IntegrityMode::Enforce;
    let mut hidden = HashSet::new();
    let mut reports = Vec::new();
    {
        let mut learned = session.learned();
        for (verdict, item) in verdicts.iter().zip(definitions(items)) {
            let hide = verdict.hide_reason().filter(|_| enforce);
            learned.integrity.note(section, &verdict.digest, hide, item);
            if hide.is_some() {
                hidden.insert(verdict.name.clone());
            }
            for event in verdict.events() {
                if learned.integrity.first_report(&event.key) {
                    reports.push((event, hide, verdict.section));
                }
            }
        }
    }
    for (event, hide, section) in reports {
        report(
            session,
            &event,
            hide.map(|kind| kind.reason_code(section)),
            context,
        )
        .await;
    }
    hidden
}

/// The named items, in the order `evaluate` returns verdicts for them.
fn definitions(items: &[Value]) -> impl Iterator<Item = &Value> {
    items
        .iter()
        .filter(|item| Section::item_name(item).is_some())
}

/// With checks off (only `validate_arguments`), the view still needs each
/// tool's schema.
fn note_unchecked(session: &Session, section: Section, items: &[Value]) {
    let mut learned = session.learned();
    for item in items {
        learned
            .integrity
            .note(section, &pins::digest(item), None, item);
    }
}

/// Audits, logs and counts one event; `hidden_for` is the reason code when
/// `enforce` kept the definition from the agent.
async fn report(
    session: &Session,
    event: &Event,
    hidden_for: Option<String>,
    context: &MessageContext,
) {
    tracing::warn!(
        kind = event.kind.as_str(),
        upstream = %session.upstream,
        hidden = hidden_for.is_some(),
        "tool integrity: {}",
        event.detail
    );
    METRICS.integrity_event(event.kind.as_str());
    let (disposition, action) = match hidden_for {
        Some(_) => (Disposition::Deny, Action::Rewritten),
        None => (Disposition::Allow, Action::Recorded),
    };
    let mut decision = Decision::new(disposition, Some(event.detail.clone()));
    decision
        .reason_codes
        .push(hidden_for.unwrap_or_else(|| format!("integrity_{}", event.kind.as_str())));
    let step = uuid::Uuid::new_v4().to_string();
    let detail = format!("integrity {}", event.detail);
    if let Err(err) = decide::record_event(session, step, &decision, context, action, detail).await
    {
        tracing::error!(%err, "an integrity event could not be recorded");
    }
}

/// Refuses a `tools/call` or `prompts/get` the checks do not let through:
/// one naming a definition `enforce` hid (or the session was never
/// shown), or, with `validate_arguments`, a `tools/call` whose arguments
/// fail the tool's `inputSchema`. `None` lets the request go on.
pub async fn check_call(
    session: &Session,
    method: &str,
    doc: &MessageDoc,
    id: &RequestId,
    context: &MessageContext,
) -> Option<Bytes> {
    let section = Section::of_use(method)?;
    let integrity = integrity(session)?;
    let request = doc.value();
    let name = request["params"]["name"].as_str().unwrap_or_default();
    let listed = session.learned().integrity.listed(section, name).cloned();
    if integrity.mode() == IntegrityMode::Enforce {
        let refused = match &listed {
            None => Some(EventKind::HiddenCalled),
            Some(listed) => listed.hidden,
        };
        if let Some(kind) = refused {
            return Some(refuse_hidden(session, section, name, kind, id, method, context).await);
        }
    }
    if section != Section::Tools || !integrity.validates_arguments() {
        return None;
    }
    let listed = listed?;
    let schema = listed.input_schema.as_ref()?;
    let arguments = match request["params"].get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments) => arguments.clone(),
    };
    let invalid = integrity
        .check_arguments(&listed.digest, schema, &arguments)
        .err()?;
    let event = Event {
        kind: EventKind::InvalidArguments,
        detail: format!(
            "invalid_arguments: tool {}/{name} at {:?}: {}",
            session.upstream, invalid.path, invalid.message
        ),
        key: String::new(),
    };
    let entry = refuse(session, &event, "invalid_arguments", context).await;
    let data = json!({
        "path": invalid.path,
        "reason_codes": ["invalid_arguments"],
        "audit_entry_id": entry,
    });
    let message = format!(
        "acs-proxy: invalid arguments for tool {name} at {:?}: {}",
        invalid.path, invalid.message
    );
    Some(error_response(
        Some(id),
        codes::INVALID_PARAMS,
        &message,
        Some(data),
    ))
}

async fn refuse_hidden(
    session: &Session,
    section: Section,
    name: &str,
    kind: EventKind,
    id: &RequestId,
    method: &str,
    context: &MessageContext,
) -> Bytes {
    let code = kind.reason_code(section);
    let why = match kind {
        EventKind::DefinitionChanged => "its definition differs from the pinned one",
        EventKind::Unpinned => "its definition is not pinned",
        EventKind::Poisoning => "its definition holds hidden instructions",
        EventKind::Shadowing => "its definition shadows another server's tool",
        EventKind::InvalidArguments | EventKind::HiddenCalled => "it was never listed",
    };
    let reasoning = format!(
        "{} {}/{name} is withheld: {why} ({code})",
        section.noun(),
        session.upstream
    );
    let event = Event {
        kind: EventKind::HiddenCalled,
        detail: format!("hidden_called: {reasoning}"),
        key: String::new(),
    };
    let entry = refuse(session, &event, &code, context).await;
    let decision = Decision::deny(reasoning, Some(&code));
    reply::blocked_request(id, method, &Denial::of(&decision, entry.as_deref()))
}

/// Audits, logs and counts a refused request; returns its audit entry.
async fn refuse(
    session: &Session,
    event: &Event,
    code: &str,
    context: &MessageContext,
) -> Option<String> {
    tracing::warn!(kind = event.kind.as_str(), upstream = %session.upstream, "tool integrity: {}", event.detail);
    METRICS.integrity_event(event.kind.as_str());
    let decision = Decision::deny(event.detail.clone(), Some(code));
    let step = uuid::Uuid::new_v4().to_string();
    let detail = format!("integrity {}", event.detail);
    decide::record_event(session, step, &decision, context, Action::Blocked, detail)
        .await
        .ok()
        .flatten()
        .map(|receipt| receipt.entry_id_text())
}
