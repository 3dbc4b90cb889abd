//! `AuditRecord`: what a caller knows about a step, before it is chained.
//!
//! Callers describe the step and the decision; the chain alone assigns
//! `entry_id`, `session_id`, `timestamp`, `previous_hash` and `entry_hash`,
//! so no caller can break the chain by filling those wrongly.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use super::chain::hashed_line_into;
use super::content::Content;
#[cfg(test)]
use super::entry::ContextEntry;
use super::mcp_id::{McpId, McpIdRef};
use super::monitored::Monitored;
use super::AuditError;
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::hooks::{Identity, RequestDigest};
use crate::jcs::HexDigest;
use crate::session::Direction;

/// A step to be recorded, built up with chained setters.
///
/// A record is boxed from the start and its setters pass the box along:
/// it is several hundred bytes, it crosses the audit queue behind a
/// pointer anyway, and a builder that moved it by value copied it once
/// per member set (about ten times per hook).
///
/// ```
/// use acs_proxy::audit::AuditRecord;
/// use acs_proxy::enforce::Action;
/// use acs_proxy::guardian::DecisionSource;
/// use acs_proxy::session::Direction;
/// let record = AuditRecord::new("req-7", "steps/toolCallRequest")
///     .decision("deny")
///     .decision_source(DecisionSource::Embedded)
///     .rule("no-shell")
///     .direction(Direction::ClientToServer)
///     .action(Action::Blocked);
/// # let _ = record;
/// ```
///
/// Four records are made per proxied call, so members that repeat from
/// one record to the next (step type, decision, method, policy digest,
/// caller, upstream) are kept as static or shared strings, not copies.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    step_id: StepId,
    step_type: Cow<'static, str>,
    request_hash: Option<RequestDigest>,
    decision: Option<Cow<'static, str>>,
    decision_source: Option<DecisionSource>,
    reasoning: Option<String>,
    reason_codes: Vec<String>,
    rule: Option<Arc<str>>,
    limit: Option<String>,
    enforced: Option<bool>,
    monitored: Option<Monitored>,
    policy_digest: Option<Arc<str>>,
    direction: Option<Direction>,
    mcp_method: Option<Cow<'static, str>>,
    mcp_id: Option<McpId>,
    action: Option<Action>,
    guardian_chain_hash: Option<String>,
    content_digest: Option<String>,
    hook_params: Option<Value>,
    detail: Option<String>,
    caller: Option<Arc<Identity>>,
    upstream: Option<Arc<str>>,
}

/// A record's `step_id`: a hook's request id is kept as the id itself and
/// spelled only when the entry is written.
#[derive(Debug, Clone, PartialEq)]
enum StepId {
    Text(String),
    Hook(Uuid),
}

/// What the chain adds to a record to make it an entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) entry_id: u64,
    pub(crate) timestamp: &'a str,
    /// The previous entry's `entry_hash`, `None` for a chain root.
    pub(crate) previous_hash: Option<&'a str>,
}

impl AuditRecord {
    /// Starts a record for the hook request `step_id` (its `request_id`) of
    /// method `step_type`, or [`super::ENFORCEMENT_STEP_TYPE`].
    pub fn new(step_id: impl Into<String>, step_type: impl Into<Cow<'static, str>>) -> Box<Self> {
        Self::with_step(StepId::Text(step_id.into()), step_type.into())
    }

    /// Starts a record for the hook whose `request_id` is `request_id`, of
    /// method `step_type`: [`Self::new`] without spelling the id now.
    pub fn for_hook(request_id: Uuid, step_type: impl Into<Cow<'static, str>>) -> Box<Self> {
        Self::with_step(StepId::Hook(request_id), step_type.into())
    }

    fn with_step(step_id: StepId, step_type: Cow<'static, str>) -> Box<Self> {
        Box::new(Self {
            step_id,
            step_type,
            request_hash: None,
            decision: None,
            decision_source: None,
            reasoning: None,
            reason_codes: Vec::new(),
            rule: None,
            limit: None,
            enforced: None,
            monitored: None,
            policy_digest: None,
            direction: None,
            mcp_method: None,
            mcp_id: None,
            action: None,
            guardian_chain_hash: None,
            content_digest: None,
            hook_params: None,
            detail: None,
            caller: None,
            upstream: None,
        })
    }

    /// Sets `request_hash`, normally from [`super::request_hash`].
    pub fn request_hash(self: Box<Self>, hash: HexDigest) -> Box<Self> {
        self.request_digest(RequestDigest::Known(hash))
    }

    /// Sets `request_hash` to a digest that may be taken only when the
    /// entry is linked (see [`RequestDigest`]).
    pub fn request_digest(mut self: Box<Self>, digest: RequestDigest) -> Box<Self> {
        self.request_hash = Some(digest);
        self
    }

    /// Sets the decision applied (`allow`, `deny`, …).
    pub fn decision(mut self: Box<Self>, decision: impl Into<Cow<'static, str>>) -> Box<Self> {
        self.decision = Some(decision.into());
        self
    }

    /// Sets who produced the decision.
    pub fn decision_source(mut self: Box<Self>, source: DecisionSource) -> Box<Self> {
        self.decision_source = Some(source);
        self
    }

    /// Sets the human-readable reason.
    pub fn reasoning(mut self: Box<Self>, reasoning: impl Into<String>) -> Box<Self> {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Sets the ACS reason codes.
    pub fn reason_codes(mut self: Box<Self>, codes: Vec<String>) -> Box<Self> {
        self.reason_codes = codes;
        self
    }

    /// Sets the embedded-policy rule that matched.
    pub fn rule(mut self: Box<Self>, rule: impl Into<Arc<str>>) -> Box<Self> {
        self.rule = Some(rule.into());
        self
    }

    /// Names the `[[policy.limit]]` that refused the call.
    pub fn limit(mut self: Box<Self>, limit: impl Into<String>) -> Box<Self> {
        self.limit = Some(limit.into());
        self
    }

    /// Names the version of the embedded policy that decided.
    pub fn policy_digest(mut self: Box<Self>, digest: impl Into<Arc<str>>) -> Box<Self> {
        self.policy_digest = Some(digest.into());
        self
    }

    /// Records what a monitored rule or policy would have decided, and
    /// that it was not enforced.
    pub fn monitored(mut self: Box<Self>, monitored: Monitored) -> Box<Self> {
        self.enforced = Some(false);
        self.monitored = Some(monitored);
        self
    }

    /// Sets which way the message was travelling.
    pub fn direction(mut self: Box<Self>, direction: Direction) -> Box<Self> {
        self.direction = Some(direction);
        self
    }

    /// Sets the MCP method.
    pub fn mcp_method(mut self: Box<Self>, method: impl Into<Cow<'static, str>>) -> Box<Self> {
        self.mcp_method = Some(method.into());
        self
    }

    /// Sets the JSON-RPC id of the MCP message.
    pub fn mcp_id(mut self: Box<Self>, id: impl Into<McpId>) -> Box<Self> {
        self.mcp_id = Some(id.into());
        self
    }

    /// Sets what the proxy did with the message.
    pub fn action(mut self: Box<Self>, action: Action) -> Box<Self> {
        self.action = Some(action);
        self
    }

    /// Sets the `chain_hash` a remote Guardian published for this step.
    pub fn guardian_chain_hash(mut self: Box<Self>, hash: impl Into<String>) -> Box<Self> {
        self.guardian_chain_hash = Some(hash.into());
        self
    }

    /// Sets the digest of arguments or results.
    pub fn content_digest(mut self: Box<Self>, digest: impl Into<String>) -> Box<Self> {
        self.content_digest = Some(digest.into());
        self
    }

    /// Keeps the hook request's full `params` in the entry.
    pub fn hook_params(mut self: Box<Self>, params: Value) -> Box<Self> {
        self.hook_params = Some(params);
        self
    }

    /// Sets free-form detail (enforcement events).
    pub fn detail(mut self: Box<Self>, detail: impl Into<String>) -> Box<Self> {
        self.detail = Some(detail.into());
        self
    }

    /// Names the session's caller on the entry.
    pub(crate) fn set_caller(&mut self, caller: &Arc<Identity>) {
        self.caller = Some(Arc::clone(caller));
    }

    /// Names the upstream of a virtual server the entry is about.
    pub(crate) fn set_upstream(&mut self, upstream: Arc<str>) {
        self.upstream = Some(upstream);
    }

    /// [`Self::set_caller`] as a builder.
    #[cfg(test)]
    pub(crate) fn caller(mut self: Box<Self>, caller: &Arc<Identity>) -> Box<Self> {
        self.set_caller(caller);
        self
    }

    /// [`Self::set_upstream`] as a builder.
    #[cfg(test)]
    pub(crate) fn upstream(mut self: Box<Self>, upstream: Arc<str>) -> Box<Self> {
        self.set_upstream(upstream);
        self
    }

    /// Whether the record is about a message on its way to the server.
    pub(crate) fn goes_to_server(&self) -> bool {
        self.direction == Some(Direction::ClientToServer)
    }

    /// The `step_type` this record will carry.
    pub fn step_type(&self) -> &str {
        &self.step_type
    }

    /// Checks that the record's JSON values (`mcp_id`, `hook_params`) have a
    /// canonical form, so that hashing the entry later cannot fail. Every
    /// other member is a string or a flag, which always has one.
    pub(crate) fn check_canonical(&self) -> Result<(), crate::jcs::JcsError> {
        if let Some(id) = &self.mcp_id {
            id.check()?;
        }
        self.hook_params
            .as_ref()
            .map_or(Ok(()), crate::jcs::check_value)
    }

    /// Appends the JSONL line of the entry this record makes at `position`
    /// to `out` (left as it was on error) and returns its `entry_hash`.
    /// The members are lent to the line, not copied into an entry first.
    pub(crate) fn hashed_line_into(
        &self,
        position: Position<'_>,
        out: &mut Vec<u8>,
    ) -> Result<HexDigest, AuditError> {
        let mut step_id = Uuid::encode_buffer();
        let mut entry_id = itoa::Buffer::new();
        let request_hash = self.request_hash.as_ref().map(RequestDigest::digest);
        let content = self.content(
            position,
            self.step_id_str(&mut step_id),
            entry_id.format(position.entry_id),
            request_hash.as_ref(),
        );
        hashed_line_into(&content, position.previous_hash, out)
    }

    fn step_id_str<'a>(&'a self, buffer: &'a mut [u8; 45]) -> &'a str {
        match &self.step_id {
            StepId::Text(text) => text,
            StepId::Hook(id) => id.hyphenated().encode_lower(buffer),
        }
    }

    /// The record's members at `position`, with its `step_id`, `entry_id`
    /// and `request_hash` spelled by the caller.
    fn content<'a>(
        &'a self,
        position: Position<'a>,
        step_id: &'a str,
        entry_id: &'a str,
        request_hash: Option<&'a HexDigest>,
    ) -> Content<'a> {
        let caller = self.caller.as_deref();
        Content {
            entry_id,
            step_id,
            step_type: &self.step_type,
            session_id: position.session_id,
            timestamp: position.timestamp,
            request_hash: request_hash.map(HexDigest::as_str),
            decision: self.decision.as_deref(),
            decision_source: self.decision_source,
            reasoning: self.reasoning.as_deref(),
            reason_codes: &self.reason_codes,
            rule: self.rule.as_deref(),
            limit: self.limit.as_deref(),
            enforced: self.enforced,
            monitored: self.monitored.as_ref(),
            policy_digest: self.policy_digest.as_deref(),
            direction: self.direction,
            mcp_method: self.mcp_method.as_deref(),
            mcp_id: self.mcp_id.as_ref().map(McpIdRef::Record),
            action: self.action,
            guardian_chain_hash: self.guardian_chain_hash.as_deref(),
            content_digest: self.content_digest.as_deref(),
            hook_params: self.hook_params.as_ref(),
            detail: self.detail.as_deref(),
            user_id: caller.map(|caller| caller.user_id.as_str()),
            authentication_method: caller.map(|caller| caller.descriptor.authentication_method()),
            tenant_id: caller.and_then(|caller| caller.tenant.as_deref()),
            upstream: self.upstream.as_deref(),
        }
    }

    /// The entry this record makes at `position` (its `entry_hash` left
    /// empty), for tests that compare it with what was written.
    #[cfg(test)]
    pub(crate) fn into_entry(
        self,
        session_id: &str,
        entry_id: u64,
        timestamp: String,
        previous_hash: Option<String>,
    ) -> ContextEntry {
        let position = Position {
            session_id,
            entry_id,
            timestamp: &timestamp,
            previous_hash: previous_hash.as_deref(),
        };
        let mut step_id = Uuid::encode_buffer();
        let entry_id = entry_id.to_string();
        let request_hash = self.request_hash.as_ref().map(RequestDigest::digest);
        let content = self.content(
            position,
            self.step_id_str(&mut step_id),
            &entry_id,
            request_hash.as_ref(),
        );
        let owned = |text: Option<&str>| text.map(str::to_owned);
        ContextEntry {
            entry_id: content.entry_id.to_owned(),
            step_id: content.step_id.to_owned(),
            step_type: content.step_type.to_owned(),
            session_id: content.session_id.to_owned(),
            timestamp: content.timestamp.to_owned(),
            request_hash: owned(content.request_hash),
            decision: owned(content.decision),
            decision_source: content.decision_source,
            reasoning: owned(content.reasoning),
            reason_codes: content.reason_codes.to_vec(),
            rule: owned(content.rule),
            limit: owned(content.limit),
            enforced: content.enforced,
            monitored: content.monitored.cloned(),
            policy_digest: owned(content.policy_digest),
            direction: content.direction,
            mcp_method: owned(content.mcp_method),
            mcp_id: content.mcp_id.map(McpIdRef::to_value),
            action: content.action,
            guardian_chain_hash: owned(content.guardian_chain_hash),
            content_digest: owned(content.content_digest),
            hook_params: content.hook_params.cloned(),
            detail: owned(content.detail),
            user_id: owned(content.user_id),
            authentication_method: owned(content.authentication_method),
            tenant_id: owned(content.tenant_id),
            upstream: owned(content.upstream),
            previous_hash: previous_hash.clone(),
            entry_hash: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_beyond_the_double_range_has_no_canonical_form() {
        let number = |text: &str| Value::Number(serde_json::from_str(text).unwrap());
        let record = AuditRecord::new("r", "steps/toolCallRequest").mcp_id(number("7"));
        assert!(record.check_canonical().is_ok());
        let params = serde_json::json!({"payload": {"arguments": [1.5, number("1e400")]}});
        assert!(record
            .clone()
            .hook_params(params)
            .check_canonical()
            .is_err());
        assert!(record.mcp_id(number("-1e999")).check_canonical().is_err());
    }

    #[test]
    fn into_entry_fills_only_chain_members() {
        let entry = AuditRecord::new("r", "steps/toolCallRequest")
            .request_hash(HexDigest::of(&[0xab; 32]))
            .mcp_id(serde_json::json!("id-1"))
            .action(Action::Forwarded)
            .into_entry("s", 3, "t".into(), Some("p".into()));
        assert_eq!(entry.entry_id, "3");
        assert_eq!(entry.session_id, "s");
        assert_eq!(entry.previous_hash.as_deref(), Some("p"));
        assert_eq!(entry.request_hash.as_deref(), Some(&*"ab".repeat(32)));
        assert_eq!(entry.action, Some(Action::Forwarded));
        assert_eq!(entry.entry_hash, "");
    }
}
