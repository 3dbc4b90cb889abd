//! `Content`: an entry's members, borrowed from wherever they are kept, and
//! their canonical (JCS) form, the bytes §8.2 hashes.
//!
//! A stored [`ContextEntry`] and a queued [`super::AuditRecord`] completed
//! with its chain position both lend their members to one `Content`, so
//! the writer hashes and writes an entry without first copying every
//! member into a `ContextEntry` of its own, and both forms are written by
//! this one function.

use serde_json::Value;

use super::entry::ContextEntry;
use super::mcp_id::McpIdRef;
use super::monitored::Monitored;
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::jcs::{self, JcsError, Sink};
use crate::session::Direction;

/// Every hashed member of one entry (all but `entry_hash` and
/// `previous_hash`), absent members as `None` or empty.
#[derive(Debug, Default)]
pub(crate) struct Content<'a> {
    pub(crate) entry_id: &'a str,
    pub(crate) step_id: &'a str,
    pub(crate) step_type: &'a str,
    pub(crate) session_id: &'a str,
    pub(crate) timestamp: &'a str,
    pub(crate) request_hash: Option<&'a str>,
    pub(crate) decision: Option<&'a str>,
    pub(crate) decision_source: Option<DecisionSource>,
    pub(crate) reasoning: Option<&'a str>,
    pub(crate) reason_codes: &'a [String],
    pub(crate) rule: Option<&'a str>,
    pub(crate) limit: Option<&'a str>,
    pub(crate) enforced: Option<bool>,
    pub(crate) monitored: Option<&'a Monitored>,
    pub(crate) policy_digest: Option<&'a str>,
    pub(crate) direction: Option<Direction>,
    pub(crate) mcp_method: Option<&'a str>,
    pub(crate) mcp_id: Option<McpIdRef<'a>>,
    pub(crate) action: Option<Action>,
    pub(crate) guardian_chain_hash: Option<&'a str>,
    pub(crate) content_digest: Option<&'a str>,
    pub(crate) hook_params: Option<&'a Value>,
    pub(crate) detail: Option<&'a str>,
    pub(crate) user_id: Option<&'a str>,
    pub(crate) authentication_method: Option<&'a str>,
    pub(crate) tenant_id: Option<&'a str>,
    pub(crate) upstream: Option<&'a str>,
}

impl<'a> Content<'a> {
    /// The members of a stored entry.
    ///
    /// The exhaustive destructuring makes a new field a compile error here
    /// rather than a silently unhashed member.
    pub(crate) fn of(entry: &'a ContextEntry) -> Self {
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
        Self {
            entry_id,
            step_id,
            step_type,
            session_id,
            timestamp,
            request_hash: request_hash.as_deref(),
            decision: decision.as_deref(),
            decision_source: *decision_source,
            reasoning: reasoning.as_deref(),
            reason_codes,
            rule: rule.as_deref(),
            limit: limit.as_deref(),
            enforced: *enforced,
            monitored: monitored.as_ref(),
            policy_digest: policy_digest.as_deref(),
            direction: *direction,
            mcp_method: mcp_method.as_deref(),
            mcp_id: mcp_id.as_ref().map(McpIdRef::Stored),
            action: *action,
            guardian_chain_hash: guardian_chain_hash.as_deref(),
            content_digest: content_digest.as_deref(),
            hook_params: hook_params.as_ref(),
            detail: detail.as_deref(),
            user_id: user_id.as_deref(),
            authentication_method: authentication_method.as_deref(),
            tenant_id: tenant_id.as_deref(),
            upstream: upstream.as_deref(),
        }
    }

    /// JCS of the members: the same bytes as the generic canonicalizer
    /// over the entry's JSON without its two chain members.
    ///
    /// Every key is ASCII, so canonical order is plain byte order, spelled
    /// out below.
    pub(crate) fn write<S: Sink>(&self, sink: &mut S) -> Result<(), JcsError> {
        let mut object = CanonicalObject::new(sink);
        object.str("action", self.action.map(|a| a.as_str()));
        object.str("authentication_method", self.authentication_method);
        object.str("content_digest", self.content_digest);
        object.str("decision", self.decision);
        object.str("decision_source", self.decision_source.map(|s| s.as_str()));
        object.str("detail", self.detail);
        object.str("direction", self.direction.map(|d| d.as_str()));
        object.bool("enforced", self.enforced);
        object.str("entry_id", Some(self.entry_id));
        object.str("guardian_chain_hash", self.guardian_chain_hash);
        object.value("hook_params", self.hook_params)?;
        object.str("limit", self.limit);
        if let Some(id) = self.mcp_id {
            object.key("mcp_id");
            id.write(object.sink)?;
        }
        object.str("mcp_method", self.mcp_method);
        if let Some(monitored) = self.monitored {
            object.key("monitored");
            write_monitored(object.sink, monitored);
        }
        object.str("policy_digest", self.policy_digest);
        object.strings("reason_codes", self.reason_codes);
        object.str("reasoning", self.reasoning);
        object.str("request_hash", self.request_hash);
        object.str("rule", self.rule);
        object.str("session_id", Some(self.session_id));
        object.str("step_id", Some(self.step_id));
        object.str("step_type", Some(self.step_type));
        object.str("tenant_id", self.tenant_id);
        object.str("timestamp", Some(self.timestamp));
        object.str("upstream", self.upstream);
        object.str("user_id", self.user_id);
        object.sink.put(b"}");
        Ok(())
    }
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

    /// Starts the member `key`. Keys are the member names spelled in this
    /// file, plain ASCII letters and underscores with nothing to escape, so
    /// they are quoted as they are instead of being scanned for escapes
    /// (about twenty per entry).
    fn key(&mut self, key: &'static str) {
        debug_assert!(
            key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{key}"
        );
        if !self.first {
            self.sink.put(b",");
        }
        self.first = false;
        self.sink.put_quoted(key.as_bytes());
        self.sink.put(b":");
    }

    fn str(&mut self, key: &'static str, value: Option<&str>) {
        if let Some(value) = value {
            self.key(key);
            jcs::write_str(self.sink, value);
        }
    }

    fn bool(&mut self, key: &'static str, value: Option<bool>) {
        if let Some(value) = value {
            self.key(key);
            self.sink.put(if value { b"true" } else { b"false" });
        }
    }

    /// An array of strings, skipped when empty as serde skips it.
    fn strings(&mut self, key: &'static str, values: &[String]) {
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

    fn value(&mut self, key: &'static str, value: Option<&Value>) -> Result<(), JcsError> {
        if let Some(value) = value {
            self.key(key);
            jcs::write_value(self.sink, value)?;
        }
        Ok(())
    }
}
