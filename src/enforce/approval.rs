//! Holding a step for ASK and DEFER (DESIGN §3.7): what a hold resolves
//! to. Asking the human through the session is the relay's part
//! (`relay::approval`); the request it sends, the reading of the answer and
//! the deferral budget are here.
//!
//! ASK: when the agent's client declared the `elicitation` capability, the
//! proxy asks the human through `elicitation/create`, naming the exact tool
//! and a digest of the exact arguments, and waits up to the ASK's timeout.
//! Without that capability there is no approver, so the step is denied with
//! the registered code `approver_unavailable` (§9.2).
//!
//! DEFER: ACS v0.1 has no message that resolves a deferral, so the step is
//! held until `resolution_timeout_ms` and then `timeout_decision` applies
//! (default deny). At most [`MAX_DEFERRED`] steps per session are held at
//! once; a further deferral is denied at once so deferrals cannot pile up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::guardian::{Decision, Disposition};
use crate::hooks::HookRequest;
use crate::jcs;

/// Deferred steps one session may hold at once.
pub const MAX_DEFERRED: usize = 16;

/// Default ASK timeout when the decision names none.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// Default DEFER hold when the decision names none.
const DEFAULT_DEFER_TIMEOUT: Duration = Duration::from_secs(5);

/// The outcome of a hold: the decision that now applies and how it came about.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// allow or deny.
    pub decision: Decision,
    /// How it was resolved, for the audit entry.
    pub detail: String,
}

impl Resolution {
    /// A resolution to `decision`, with how it came about.
    pub fn new(decision: Decision, detail: impl Into<String>) -> Self {
        Self {
            decision,
            detail: detail.into(),
        }
    }
}

/// Counts the deferrals a session holds.
#[derive(Debug, Default)]
pub struct DeferralBudget {
    held: AtomicUsize,
}

/// Holds a `defer` decision until its resolution timeout, within the
/// session's budget. `None` if the step was cancelled while held.
pub async fn defer(
    budget: &DeferralBudget,
    held: &Decision,
    cancel: &CancellationToken,
) -> Option<Resolution> {
    if budget.held.fetch_add(1, Ordering::AcqRel) >= MAX_DEFERRED {
        budget.held.fetch_sub(1, Ordering::AcqRel);
        return Some(Resolution::new(
            Decision::deny("too many deferred steps in this session", None),
            "defer: session budget exhausted",
        ));
    }
    let details = held.defer_details.clone().unwrap_or_default();
    let hold = details
        .resolution_timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_DEFER_TIMEOUT);
    let on_timeout = details.timeout_decision.unwrap_or(Disposition::Deny);
    let cancelled = tokio::select! {
        _ = cancel.cancelled() => true,
        _ = tokio::time::sleep(hold) => false,
    };
    budget.held.fetch_sub(1, Ordering::AcqRel);
    if cancelled {
        return None;
    }
    Some(timed_out(on_timeout, "defer: resolution timeout elapsed"))
}

/// The decision a hold ends with when nobody answered in time.
pub fn timed_out(on_timeout: Disposition, detail: &str) -> Resolution {
    let decision = match on_timeout {
        Disposition::Allow => Decision::allow(),
        _ => Decision::deny(format!("{detail}; timeout decision is deny"), None),
    };
    Resolution::new(decision, detail)
}

/// The `elicitation/create` request: a yes/no question bound to the exact
/// tool and argument digest the approval covers.
pub fn elicitation_request(id_json: &str, question: &str, hook: &HookRequest) -> String {
    let tool = hook.tool.as_deref().unwrap_or(hook.method.as_str());
    let digest = jcs::value_digest(hook.payload.tree());
    let message = format!(
        "{question}\n\nTool: {tool}\nArguments digest (SHA-256): {digest}\nApprove this exact call?"
    );
    let request = json!({
        "jsonrpc": "2.0",
        "id": serde_json::from_str::<Value>(id_json).unwrap_or(Value::Null),
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": format!("Allow {tool} with these exact arguments"),
                    }
                },
                "required": ["approve"],
            },
        },
    });
    request.to_string()
}

/// The decision an approver's `elicitation/create` answer gives.
pub fn read_elicitation_answer(bytes: &[u8]) -> Resolution {
    let answer: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let result = &answer["result"];
    let accepted = result["action"] == "accept" && result["content"]["approve"] == true;
    if accepted {
        Resolution::new(
            Decision::allow(),
            "ask: approved by the user through elicitation",
        )
    } else {
        let action = result["action"].as_str().unwrap_or("error");
        Resolution::new(
            Decision::deny(
                format!("the user did not approve (elicitation {action})"),
                None,
            ),
            format!("ask: elicitation {action}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_yes_approves() {
        let yes = br#"{"jsonrpc":"2.0","id":"acs-proxy-1","result":{"action":"accept","content":{"approve":true}}}"#;
        assert_eq!(
            read_elicitation_answer(yes).decision.decision,
            Disposition::Allow
        );
        let no = br#"{"jsonrpc":"2.0","id":"acs-proxy-1","result":{"action":"accept","content":{"approve":false}}}"#;
        assert_eq!(
            read_elicitation_answer(no).decision.decision,
            Disposition::Deny
        );
        let declined = br#"{"jsonrpc":"2.0","id":"acs-proxy-1","result":{"action":"decline"}}"#;
        assert_eq!(
            read_elicitation_answer(declined).decision.decision,
            Disposition::Deny
        );
        let error = br#"{"jsonrpc":"2.0","id":"acs-proxy-1","error":{"code":-1,"message":"x"}}"#;
        assert_eq!(
            read_elicitation_answer(error).decision.decision,
            Disposition::Deny
        );
    }

    #[tokio::test]
    async fn deferral_times_out_to_deny_and_respects_budget() {
        let budget = DeferralBudget::default();
        let mut decision = Decision::new(Disposition::Defer, Some("wait".into()));
        decision.defer_details = Some(Box::new(crate::guardian::decision::DeferDetails {
            resolution_timeout_ms: Some(10),
            ..Default::default()
        }));
        let resolution = defer(&budget, &decision, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(resolution.decision.decision, Disposition::Deny);
        budget.held.store(MAX_DEFERRED, Ordering::Release);
        let resolution = defer(&budget, &decision, &CancellationToken::new())
            .await
            .unwrap();
        assert!(resolution.detail.contains("budget"));
    }

    #[tokio::test]
    async fn cancelled_deferral_resolves_to_nothing() {
        let budget = DeferralBudget::default();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let decision = Decision::new(Disposition::Defer, Some("wait".into()));
        assert!(defer(&budget, &decision, &cancel).await.is_none());
    }
}
