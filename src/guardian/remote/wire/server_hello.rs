//! The ServerHello (§4, handshake.json): what the Guardian agreed to for
//! one session, and how it becomes the session's [`Negotiated`] terms.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Map, Value};

use super::fields::{
    invalid, member, non_negative, object, optional_strings, positive, required, string, strings,
};
use super::frame::{check_version, outcome, Outcome};
use super::{Transport, WireError};
use crate::guardian::{FailurePosture, Negotiated};

/// `skew_window_ms` when the Guardian does not say (§10.3, RECOMMENDED).
pub const DEFAULT_SKEW_WINDOW_MS: u64 = 300_000;

/// The Guardian's half of the handshake.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerHello {
    /// The ACS version in use; same major as ours.
    pub negotiated_version: String,
    /// Methods the Guardian evaluates; others are allowed without asking.
    pub methods_evaluated: Vec<String>,
    /// The transport the Guardian selected.
    pub selected_transport: Transport,
    /// How long to wait for each decision.
    pub timeout_config: TimeoutConfig,
    /// What to do without a usable decision (`proceed` when absent).
    pub on_decision_failure: FailurePosture,
    /// Allowed clock difference, both directions, in milliseconds.
    pub skew_window_ms: u64,
    /// Signature algorithms the Guardian verifies (empty when absent).
    pub signature_algorithms_supported: Vec<String>,
    /// Profiles the Guardian accepted from `profiles_supported`.
    pub profiles_accepted: Vec<String>,
    /// Whether policy needs provenance (a Guardian that says so to a
    /// `provenance_producer: "none"` client should have refused, -32002).
    pub policy_requires_provenance: bool,
}

/// The negotiated decision timeouts (`timeout_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeoutConfig {
    /// For every method not in `per_method_ms`; at least 1.
    pub default_ms: u64,
    /// Full method name (e.g. `steps/toolCallRequest`) → timeout; each at
    /// least 1.
    pub per_method_ms: BTreeMap<String, u64>,
}

/// Reads the reply to `handshake/hello`.
///
/// `result` must be the ServerHello itself; the superseded form that wraps
/// it in a decision (`type`, `decision`, `payload`) is refused with
/// [`WireError::WrappedServerHello`]. A JSON-RPC error reply becomes
/// [`WireError::Refused`]. The JSON-RPC id and the signature are checked
/// by the caller ([`check_reply_id`](super::check_reply_id),
/// [`verify_response`](crate::guardian::remote::signing::verify_response)).
pub fn parse_server_hello(response: &Value) -> Result<ServerHello, WireError> {
    match outcome(response)? {
        Outcome::Error(error) => Err(error.into()),
        Outcome::Result(hello) => {
            if hello.contains_key("type") || hello.contains_key("decision") {
                return Err(WireError::WrappedServerHello);
            }
            ServerHello::from_result(hello)
        }
    }
}

impl ServerHello {
    /// The session's terms: the Guardian's methods and timeouts, and its
    /// failure posture unless `local_posture` (proxy.toml) is stricter. A
    /// local setting can only tighten the posture, never loosen it.
    pub fn negotiated(&self, local_posture: Option<FailurePosture>) -> Negotiated {
        let per_method_timeout: HashMap<String, Duration> = self
            .timeout_config
            .per_method_ms
            .iter()
            .map(|(method, &ms)| (method.clone(), Duration::from_millis(ms)))
            .collect();
        Negotiated {
            methods_evaluated: Some(self.methods_evaluated.iter().cloned().collect()),
            default_timeout: Some(Duration::from_millis(self.timeout_config.default_ms)),
            per_method_timeout,
            on_decision_failure: local_posture.map_or(self.on_decision_failure, |local| {
                stricter(local, self.on_decision_failure)
            }),
            unguarded: None,
        }
    }

    fn from_result(hello: &Map<String, Value>) -> Result<Self, WireError> {
        let version = required(hello, "negotiated_version", "result.negotiated_version")?;
        let version = string(version, "result.negotiated_version")?;
        check_version("result.negotiated_version", version)?;
        let methods = required(hello, "methods_evaluated", "result.methods_evaluated")?;
        let transport = required(hello, "selected_transport", "result.selected_transport")?;
        let transport = string(transport, "result.selected_transport")?;
        Ok(Self {
            negotiated_version: version.to_owned(),
            methods_evaluated: strings(methods, "result.methods_evaluated")?,
            selected_transport: Transport::from_wire(transport)
                .ok_or_else(|| WireError::UnknownTransport(transport.to_owned()))?,
            timeout_config: timeout_config(hello)?,
            on_decision_failure: failure_posture(hello)?,
            skew_window_ms: skew_window_ms(hello)?,
            signature_algorithms_supported: optional_strings(
                hello,
                "signature_algorithms_supported",
                "result.signature_algorithms_supported",
            )?,
            profiles_accepted: optional_strings(
                hello,
                "profiles_accepted",
                "result.profiles_accepted",
            )?,
            policy_requires_provenance: requires_provenance(hello)?,
        })
    }
}

/// `timeout_config`: `default_ms` required, `per_method_ms` optional.
fn timeout_config(hello: &Map<String, Value>) -> Result<TimeoutConfig, WireError> {
    let config = required(hello, "timeout_config", "result.timeout_config")?;
    let config = object(config, "result.timeout_config")?;
    let default_ms = required(config, "default_ms", "result.timeout_config.default_ms")?;
    let per_method_ms = match member(config, "per_method_ms") {
        None => BTreeMap::new(),
        Some(per_method) => object(per_method, "result.timeout_config.per_method_ms")?
            .iter()
            .map(|(method, ms)| {
                let field = format!("result.timeout_config.per_method_ms[{method:?}]");
                positive(ms, &field).map(|ms| (method.clone(), ms))
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(TimeoutConfig {
        default_ms: positive(default_ms, "result.timeout_config.default_ms")?,
        per_method_ms,
    })
}

/// `skew_window_ms`, default [`DEFAULT_SKEW_WINDOW_MS`].
fn skew_window_ms(hello: &Map<String, Value>) -> Result<u64, WireError> {
    member(hello, "skew_window_ms").map_or(Ok(DEFAULT_SKEW_WINDOW_MS), |value| {
        non_negative(value, "result.skew_window_ms")
    })
}

/// `policy_requires_provenance`, default `false`.
fn requires_provenance(hello: &Map<String, Value>) -> Result<bool, WireError> {
    member(hello, "policy_requires_provenance").map_or(Ok(false), |value| {
        value
            .as_bool()
            .ok_or_else(|| invalid("result.policy_requires_provenance", "a boolean"))
    })
}

/// `on_decision_failure`, default `proceed` (§6.4). The superseded
/// spelling `on_timeout` (older handshake.json) is read too; if a Guardian
/// sends both, the stricter wins, since a disagreement must not open a
/// fail-open path.
fn failure_posture(hello: &Map<String, Value>) -> Result<FailurePosture, WireError> {
    let current = member(hello, "on_decision_failure")
        .map(|value| posture(value, "result.on_decision_failure"))
        .transpose()?;
    let superseded = member(hello, "on_timeout")
        .map(|value| posture(value, "result.on_timeout"))
        .transpose()?;
    Ok(match (current, superseded) {
        (Some(a), Some(b)) => stricter(a, b),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => FailurePosture::Proceed,
    })
}

fn posture(value: &Value, field: &str) -> Result<FailurePosture, WireError> {
    match string(value, field)? {
        "proceed" => Ok(FailurePosture::Proceed),
        "deny" => Ok(FailurePosture::Deny),
        other => Err(WireError::UnknownPosture(other.to_owned())),
    }
}

/// `deny` if either says `deny`.
fn stricter(a: FailurePosture, b: FailurePosture) -> FailurePosture {
    if a == FailurePosture::Deny || b == FailurePosture::Deny {
        FailurePosture::Deny
    } else {
        FailurePosture::Proceed
    }
}

#[cfg(test)]
mod tests;
