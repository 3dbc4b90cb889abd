//! Per-session Guardian state: the audit chain, the replay history, the
//! `key_id` the session signs with and the MCP `tools/call` names in flight.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::chain::Chain;
use crate::jcs;

/// The state of one `session_id`.
#[derive(Debug, Default)]
pub struct Session {
    /// The audit chain.
    pub chain: Chain,
    /// The last `key_id` that signed a valid request in this session.
    pub key_id: Option<String>,
    request_ids: HashSet<String>,
    nonces: HashSet<String>,
    /// Canonical MCP request id → tool name, for wrapped `tools/call` replies.
    mcp_tools: HashMap<String, String>,
}

/// A replayed request (-32005).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    RequestId,
    Nonce,
}

impl Session {
    /// Records `request_id` (and `nonce`) as seen, or reports that one of
    /// them was seen before in this session (nothing is recorded then).
    pub fn note(&mut self, request_id: &str, nonce: Option<&str>) -> Result<(), Replay> {
        if self.request_ids.contains(request_id) {
            return Err(Replay::RequestId);
        }
        if nonce.is_some_and(|nonce| self.nonces.contains(nonce)) {
            return Err(Replay::Nonce);
        }
        self.request_ids.insert(request_id.to_owned());
        if let Some(nonce) = nonce {
            self.nonces.insert(nonce.to_owned());
        }
        Ok(())
    }

    /// For a wrapped MCP `tools/call`: remembers the tool of a request, and
    /// returns the remembered tool of a response (matched by MCP `id`).
    pub fn mcp_tool(&mut self, payload: &Value, named: Option<&str>) -> Option<String> {
        let id = payload.get("id").map(jcs::value_digest)?;
        match named {
            Some(name) => {
                self.mcp_tools.insert(id, name.to_owned());
                Some(name.to_owned())
            }
            None if payload.get("result").is_some() || payload.get("error").is_some() => {
                self.mcp_tools.remove(&id)
            }
            None => None,
        }
    }
}

/// How far `timestamp` is from `now`, in milliseconds (absolute), or `None`
/// if it is not RFC 3339.
pub fn skew_ms(timestamp: &str, now: OffsetDateTime) -> Option<u128> {
    let at = OffsetDateTime::parse(timestamp, &Rfc3339).ok()?;
    Some((now - at).whole_milliseconds().unsigned_abs())
}

/// `now` in RFC 3339 (UTC), for `server_timestamp`.
pub fn rfc3339(now: OffsetDateTime) -> String {
    now.format(&Rfc3339)
        .unwrap_or_else(|_| now.unix_timestamp().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    #[test]
    fn replays_are_detected_per_request_id_and_nonce() {
        let mut session = Session::default();
        assert_eq!(session.note("a", Some("n1")), Ok(()));
        assert_eq!(session.note("a", None), Err(Replay::RequestId));
        assert_eq!(session.note("b", Some("n1")), Err(Replay::Nonce));
        assert_eq!(session.note("b", Some("n2")), Ok(()));
    }

    #[test]
    fn skew_is_absolute() {
        let now = datetime!(2026-01-01 00:05:00 UTC);
        assert_eq!(skew_ms("2026-01-01T00:00:00Z", now), Some(300_000));
        assert_eq!(skew_ms("2026-01-01T00:10:00.5+00:00", now), Some(300_500));
        assert_eq!(skew_ms("yesterday", now), None);
    }

    #[test]
    fn mcp_tool_names_follow_the_mcp_id() {
        let mut session = Session::default();
        let call =
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}});
        assert_eq!(
            session.mcp_tool(&call, Some("echo")).as_deref(),
            Some("echo")
        );
        let reply = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}});
        assert_eq!(session.mcp_tool(&reply, None).as_deref(), Some("echo"));
        assert_eq!(session.mcp_tool(&reply, None), None);
    }
}
