//! A Guardian's reply to a hook: a decision (§6, response-envelope.json)
//! or an error, validated against the rules of DIGEST §2.2/§4 and §16.
//!
//! Only the wire shape is checked here. Whether a `modifications` object
//! can be applied (§6.3 composition, disjoint targets) is for
//! [`crate::enforce`], because breaking those rules means DENY, not a
//! decision failure.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::fields::{invalid, member, optional_strings, required, string};
use super::frame::{check_error_reply_id, check_reply_id, check_result_header, outcome, Outcome};
use super::{AcsError, WireError};
use crate::guardian::decision::PolicyReference;
use crate::guardian::remote::json_view::{JsonObject, JsonView};
use crate::guardian::{Decision, Disposition};

/// What the Guardian answered to one hook.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A valid decision, to be honoured. Boxed: a decision is several times
    /// the size of an error.
    Decision(Box<Decision>),
    /// A JSON-RPC error: no decision (see [`AcsError::fails_closed`]).
    Error(AcsError),
}

/// Reads the reply to a hook request whose JSON-RPC id was `expected_id`
/// and whose `params.request_id` was `expected_request_id`.
///
/// A result must: carry `expected_id`; have `type: "final"`, an
/// `acs_version` of our major and `request_id == expected_request_id`; a
/// lowercase `decision`; `reasoning` unless it allows; `modifications`,
/// `ask_details`, `defer_details` exactly on modify, ask, defer; and a
/// `chain_hash`, if any, of 64 lowercase hex digits. Unknown members are
/// ignored. An error reply may carry a `null` id (the Guardian could not
/// read ours). The signature is checked separately, over the same tree.
pub fn parse_decision<V: JsonView>(
    response: &V,
    expected_id: &Value,
    expected_request_id: &str,
) -> Result<Reply, WireError> {
    match outcome(response)? {
        Outcome::Error(error) => {
            check_error_reply_id(response, expected_id)?;
            Ok(Reply::Error(error))
        }
        Outcome::Result(result) => {
            check_reply_id(response, expected_id)?;
            check_result_header(result, expected_request_id)?;
            read_decision(result).map(|decision| Reply::Decision(Box::new(decision)))
        }
    }
}

/// Reads a decision object that has no envelope around it (an in-process
/// policy's answer) with exactly the checks a Guardian's `result` gets,
/// less the header (`type`, `acs_version`, `request_id`) only a reply has.
pub fn read_decision_object(value: &Value) -> Result<Decision, WireError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("result", "an object"))?;
    read_decision(object)
}

/// `result.decision`, which must be one of the five lowercase spellings.
pub(super) fn disposition<O: JsonObject>(result: &O) -> Result<Disposition, WireError> {
    let decision = required(result, "decision", "result.decision")?;
    match string(decision, "result.decision")? {
        "allow" => Ok(Disposition::Allow),
        "deny" => Ok(Disposition::Deny),
        "modify" => Ok(Disposition::Modify),
        "ask" => Ok(Disposition::Ask),
        "defer" => Ok(Disposition::Defer),
        other => Err(WireError::UnknownDecision(other.to_owned())),
    }
}

/// The decision members of a result whose header was checked.
fn read_decision<O: JsonObject>(result: &O) -> Result<Decision, WireError> {
    let decision = disposition(result)?;
    let reasoning = member(result, "reasoning")
        .map(|value| string(value, "result.reasoning").map(str::to_owned))
        .transpose()?;
    if reasoning.is_none() && decision != Disposition::Allow {
        return Err(WireError::MissingReasoning(decision));
    }
    let mut parsed = Decision::new(decision, reasoning);
    parsed.reason_codes = optional_strings(result, "reason_codes", "result.reason_codes")?;
    parsed.policy_references = policy_references(result)?.into();
    parsed.modifications = details(result, "modifications", Disposition::Modify, decision)?;
    parsed.ask_details = details(result, "ask_details", Disposition::Ask, decision)?;
    parsed.defer_details = details(result, "defer_details", Disposition::Defer, decision)?;
    parsed.chain_hash = chain_hash(result)?;
    Ok(parsed)
}

/// `policy_references`: an array of objects (each member optional).
fn policy_references<O: JsonObject>(result: &O) -> Result<Vec<PolicyReference>, WireError> {
    let Some(references) = member(result, "policy_references") else {
        return Ok(Vec::new());
    };
    let malformed = || invalid("result.policy_references", "an array of objects of strings");
    let items = references.as_array().ok_or_else(malformed)?;
    items
        .iter()
        .map(|item| {
            // Checked first: serde would also take a struct from an array.
            if item.as_object().is_none() {
                return Err(malformed());
            }
            item.deserialize_as::<PolicyReference>()
                .map_err(|_| malformed())
        })
        .collect()
}

/// The details member `name`, required when `decision` is `owner` and
/// refused on any other decision.
fn details<T: DeserializeOwned, O: JsonObject>(
    result: &O,
    name: &'static str,
    owner: Disposition,
    decision: Disposition,
) -> Result<Option<T>, WireError> {
    match (member(result, name), decision == owner) {
        (None, false) => Ok(None),
        (None, true) => Err(WireError::MissingDetails {
            decision,
            field: name,
        }),
        (Some(_), false) => Err(WireError::UnexpectedDetails {
            decision,
            field: name,
            allowed_on: owner,
        }),
        (Some(value), true) => parse_details(value, name).map(Some),
    }
}

fn parse_details<T: DeserializeOwned, V: JsonView>(
    value: &V,
    name: &'static str,
) -> Result<T, WireError> {
    let malformed = |reason: String| WireError::MalformedDetails {
        field: name,
        reason,
    };
    // Checked first: serde would also take a struct from an array.
    if value.as_object().is_none() {
        return Err(malformed("it is not an object".to_owned()));
    }
    value
        .deserialize_as::<T>()
        .map_err(|e| malformed(e.to_string()))
}

/// `chain_hash`, if present: the Guardian's audit head, `^[0-9a-f]{64}$`.
fn chain_hash<O: JsonObject>(result: &O) -> Result<Option<String>, WireError> {
    let Some(value) = member(result, "chain_hash") else {
        return Ok(None);
    };
    match value.as_str() {
        Some(hash) if is_lowercase_sha256_hex(hash) => Ok(Some(hash.to_owned())),
        _ => Err(WireError::InvalidChainHash(value.to_value().to_string())),
    }
}

fn is_lowercase_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests;
