//! What the proxy's spans are called and carry.
//!
//! ACS steps follow the normative mapping (`schemas/trace/otel-mapping.json`)
//! verbatim: span name and required attributes per hook, each decision an
//! `acs.decision` event on its step's span. `protocols/MCP/*` hooks have no
//! span of their own in the mapping; their decisions go on the MCP request's
//! server span, which follows the MCP semantic conventions. The Guardian
//! call, the upstream call and an approval wait are child spans.

use std::borrow::Cow;

use opentelemetry::trace::SpanKind;
use opentelemetry::{KeyValue, StringValue, Value as OtelValue};
use serde_json::Value;

use super::carrier::Carrier;
use super::trace::Trace;
use crate::hooks::decision::Decision;
use crate::hooks::{self, HookRequest, Metadata};

/// The event a decision is recorded as.
pub const DECISION_EVENT: &str = "acs.decision";
/// The Guardian call's span.
pub const GUARDIAN_SPAN: &str = "acs.guardian.evaluate";
/// The span of a wait for an approval (ask) or a deferred decision.
pub const APPROVAL_SPAN: &str = "acs.approval.wait";
/// `acs.capability` of a tool call whose hook names none: the proxy knows
/// only that it is an MCP tool, as the AgBOM says (`tool_fields.capability`).
pub const MCP_TOOL_CAPABILITY: &str = "mcp.tool";

/// The span name of an ACS step, per the mapping; `None` for hooks the
/// mapping gives no span (`protocols/MCP/*`, `system/*`, `handshake/*`).
pub fn step_span_name(method: &str) -> Option<&'static str> {
    Some(match method {
        "steps/sessionStart" => "acs.session",
        "steps/agentTrigger" => "acs.agent.trigger",
        "steps/userMessage" => "acs.message.user",
        "steps/agentResponse" => "acs.message.agent",
        "steps/toolCallRequest" => "gen_ai.tool.call",
        "steps/toolCallResult" => "gen_ai.tool.result",
        "steps/knowledgeRetrieval" => "acs.knowledge.retrieval",
        "steps/memoryStore" => "acs.memory.store",
        "steps/memoryContextRetrieval" => "acs.memory.retrieval",
        "steps/sessionEnd" => "acs.session.end",
        "steps/turnStart" => "acs.turn",
        "steps/turnEnd" => "acs.turn.end",
        "steps/preCompact" => "acs.compact",
        "steps/postCompact" => "acs.compact.complete",
        "steps/subagentStart" => "acs.subagent",
        "steps/subagentStop" => "acs.subagent.end",
        "steps/skillRegister" => "acs.skill.register",
        "steps/skillLoad" => "acs.skill.load",
        "steps/skillUnload" => "acs.skill.unload",
        "agbom/snapshot" | "agbom/changed" => "acs.agbom",
        _ => return None,
    })
}

/// The attributes of an ACS step span the proxy emits, from its hook.
pub fn step_attributes(hook: &HookRequest, metadata: &Metadata) -> Vec<KeyValue> {
    let payload = hook.payload.tree();
    let text = |value: &Value| value.as_str().map(str::to_owned);
    let mut attributes = vec![KeyValue::new("acs.request_id", hook.request_id.to_string())];
    let put = |attributes: &mut Vec<KeyValue>, key: &'static str, value: Option<String>| {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, value));
        }
    };
    match hook.method.as_str() {
        hooks::SESSION_START => {
            put(
                &mut attributes,
                "acs.session.id",
                Some(metadata.session_id.to_string()),
            );
            put(
                &mut attributes,
                "acs.tenant_id",
                metadata.tenant().map(str::to_owned),
            );
            put(
                &mut attributes,
                "acs.user.id",
                metadata.user.as_ref().map(|user| user.user_id.clone()),
            );
        }
        hooks::SESSION_END => {
            put(
                &mut attributes,
                "acs.session.reason",
                text(&payload["reason"]),
            );
        }
        hooks::TOOL_CALL_REQUEST => {
            put(
                &mut attributes,
                "gen_ai.tool.name",
                text(&payload["tool"]["name"]),
            );
            put(
                &mut attributes,
                "acs.capability",
                Some(text(&payload["capability"]).unwrap_or_else(|| MCP_TOOL_CAPABILITY.into())),
            );
            put(
                &mut attributes,
                "acs.tool.provider",
                text(&payload["tool"]["provider"]),
            );
            put(
                &mut attributes,
                "acs.tool.version",
                text(&payload["tool"]["version"]),
            );
            put(
                &mut attributes,
                "acs.operation",
                text(&payload["operation"]),
            );
        }
        hooks::TOOL_CALL_RESULT => {
            put(
                &mut attributes,
                "gen_ai.tool.name",
                text(&payload["tool"]["name"]),
            );
            put(
                &mut attributes,
                "acs.exit_status",
                text(&payload["exit_status"]),
            );
            put(
                &mut attributes,
                "acs.request_id_ref",
                text(&payload["request_id_ref"]),
            );
            if let Some(ms) = payload["duration_ms"].as_i64() {
                attributes.push(KeyValue::new("acs.duration_ms", ms));
            }
        }
        hooks::AGBOM_SNAPSHOT => {
            attributes.push(KeyValue::new("acs.agbom.format", "canonical"));
            let count = payload["components"].as_array().map_or(0, Vec::len);
            attributes.push(KeyValue::new(
                "acs.agbom.component_count",
                i64::try_from(count).unwrap_or(i64::MAX),
            ));
        }
        hooks::AGBOM_CHANGED => {
            attributes.push(KeyValue::new("acs.agbom.format", "canonical"));
            put(
                &mut attributes,
                "acs.agbom.change_reason",
                text(&payload["change_reason"]),
            );
        }
        _ => {}
    }
    attributes
}

/// The span of an ACS step under `parent`: its own span when the mapping
/// gives it one, else `parent` itself (its decision then goes there).
pub fn step(parent: &Trace, hook: &HookRequest, metadata: &Metadata) -> Trace {
    if !parent.is_on() {
        return Trace::off();
    }
    match step_span_name(&hook.method) {
        Some(name) => parent.child(
            || Cow::Borrowed(name),
            SpanKind::Internal,
            || step_attributes(hook, metadata),
        ),
        None => parent.clone(),
    }
}

/// The session's `acs.session` span (`steps/sessionStart`), the root of
/// the session's own trace.
pub fn session(hook: &HookRequest, metadata: &Metadata) -> Trace {
    Trace::start_continuing(
        None,
        &Trace::off(),
        || Cow::Borrowed("acs.session"),
        SpanKind::Internal,
        || step_attributes(hook, metadata),
    )
}

/// Records `decision` as an `acs.decision` event on `step`; `evaluator`
/// names who decided (the Guardian kind, the failure posture, ...).
pub fn decision(step: &Trace, decision: &Decision, evaluator: &'static str) {
    step.event(DECISION_EVENT, || {
        let mut attributes = vec![
            KeyValue::new("acs.decision", decision.decision.as_str()),
            KeyValue::new("acs.evaluator", evaluator),
        ];
        if let Some(reasoning) = &decision.reasoning {
            attributes.push(KeyValue::new("acs.reasoning", reasoning.clone()));
        }
        if let Some(digest) = &decision.policy_digest {
            attributes.push(KeyValue::new("acs.evaluator_version", digest.to_string()));
        }
        if !decision.reason_codes.is_empty() {
            let codes: Vec<StringValue> = decision
                .reason_codes
                .iter()
                .map(|code| StringValue::from(code.clone()))
                .collect();
            attributes.push(KeyValue::new(
                "acs.reason_codes",
                OtelValue::Array(codes.into()),
            ));
        }
        attributes
    });
}

/// The span name of an MCP request (MCP semantic conventions:
/// `{mcp.method.name} {target}`, the target being the tool of a call).
fn mcp_span_name(method: &str, tool: Option<&str>) -> Cow<'static, str> {
    match tool {
        Some(tool) => Cow::Owned(format!("{method} {tool}")),
        None => Cow::Owned(method.to_owned()),
    }
}

fn mcp_attributes(
    method: &str,
    session_id: &str,
    request_id: &str,
    tool: Option<&str>,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", method.to_owned()),
        KeyValue::new("mcp.session.id", session_id.to_owned()),
        KeyValue::new("jsonrpc.request.id", request_id.to_owned()),
        KeyValue::new("jsonrpc.protocol.version", "2.0"),
    ];
    if let Some(tool) = tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    attributes
}

/// The server span of one MCP request from the agent: a child of the
/// agent's span when `carrier` names one, else of the session's span.
pub fn request(
    carrier: Option<&Carrier>,
    session: &Trace,
    method: &str,
    session_id: &str,
    request_id: &str,
    tool: Option<&str>,
) -> Trace {
    Trace::start_continuing(
        carrier,
        session,
        || mcp_span_name(method, tool),
        SpanKind::Server,
        || mcp_attributes(method, session_id, request_id, tool),
    )
}

/// The client span of the request's trip to the MCP server.
pub fn upstream(request: &Trace, method: &str, tool: Option<&str>, route: &str) -> Trace {
    request.child(
        || mcp_span_name(method, tool),
        SpanKind::Client,
        || {
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", method.to_owned()),
                KeyValue::new("acs.route", route.to_owned()),
            ];
            if let Some(tool) = tool {
                attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            }
            attributes
        },
    )
}

/// The span of one Guardian evaluation; `kind` is `remote` or `embedded`.
pub fn guardian(step: &Trace, method: &str, kind: &'static str) -> Trace {
    step.child(
        || Cow::Borrowed(GUARDIAN_SPAN),
        if kind == "remote" {
            SpanKind::Client
        } else {
            SpanKind::Internal
        },
        || {
            vec![
                KeyValue::new("acs.guardian.kind", kind),
                KeyValue::new("acs.hook.method", method.to_owned()),
            ]
        },
    )
}

/// The span of a wait for a human approval or a deferred decision.
pub fn approval(step: &Trace, decision: &Decision) -> Trace {
    step.child(
        || Cow::Borrowed(APPROVAL_SPAN),
        SpanKind::Internal,
        || vec![KeyValue::new("acs.decision", decision.decision.as_str())],
    )
}
