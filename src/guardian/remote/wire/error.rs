//! Everything that can be wrong with a Guardian's reply, one variant per
//! rule so logs and audit entries say exactly which rule was broken.

use serde_json::Value;

use crate::guardian::Disposition;

/// Why a Guardian reply was not accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// The reply is not a JSON object.
    #[error("the reply is not a JSON object")]
    NotAnObject,
    /// `jsonrpc` is absent or not `"2.0"`.
    #[error("the reply's `jsonrpc` is {0}, not \"2.0\"")]
    NotJsonRpc2(String),
    /// Neither `result` nor `error`.
    #[error("the reply has neither `result` nor `error`")]
    NoOutcome,
    /// Both `result` and `error`.
    #[error("the reply has both `result` and `error`")]
    BothOutcomes,
    /// The JSON-RPC `id` is not the request's.
    #[error("the reply's id {got} is not the request's id {expected}")]
    IdMismatch {
        /// The request's id, as JSON text.
        expected: String,
        /// The reply's id, as JSON text.
        got: String,
    },
    /// An `error` member without an integer `code` and a string `message`.
    #[error("the reply's `error` is malformed: {0}")]
    MalformedError(&'static str),
    /// The Guardian answered with a JSON-RPC error where only a result is
    /// usable (the handshake, a ping).
    #[error("the Guardian answered with error {code}: {message}")]
    Refused {
        /// The JSON-RPC / ACS error code (see [`codes`](super::codes)).
        code: i64,
        /// Its message.
        message: String,
        /// Its `data`, if any (`reason`, `supported_versions`, …).
        data: Option<Value>,
    },
    /// A required member is absent (or `null`).
    #[error("the reply lacks the required member `{0}`")]
    MissingField(&'static str),
    /// A member has the wrong type or an out-of-range value.
    #[error("`{field}` must be {expected}")]
    InvalidField {
        /// Where the member is, e.g. `result.timeout_config.default_ms`.
        field: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A version member that is not `MAJOR.MINOR.PATCH`.
    #[error("`{field}` is {got:?}, not a MAJOR.MINOR.PATCH version")]
    BadVersion {
        /// `result.acs_version` or `result.negotiated_version`.
        field: &'static str,
        /// The value received.
        got: String,
    },
    /// A version whose major differs from ours (§3: only the major must match).
    #[error("`{field}` is {got:?}; this proxy speaks ACS {ours} and needs the same major version")]
    IncompatibleVersion {
        /// `result.acs_version` or `result.negotiated_version`.
        field: &'static str,
        /// The value received.
        got: String,
        /// Our version.
        ours: &'static str,
    },
    /// A `handshake/hello` result shaped as a decision (`type`, `decision`,
    /// ServerHello in `payload`): the superseded form older adapters read.
    #[error(
        "the handshake/hello result is wrapped in a decision (`type`/`decision`); \
         ACS v0.1.0 puts the ServerHello itself in `result`"
    )]
    WrappedServerHello,
    /// `result.type` is not `"final"` (v0.2 adds streaming types).
    #[error("`result.type` is {0:?}; ACS v0.1.0 defines only \"final\"")]
    NotFinal(String),
    /// `result.request_id` does not echo the request's `params.request_id`.
    #[error("`result.request_id` {got:?} does not echo the request's {expected:?}")]
    RequestIdMismatch {
        /// The request's `request_id`.
        expected: String,
        /// The reply's.
        got: String,
    },
    /// A `decision` outside the lowercase enum (`"ALLOW"` included).
    #[error("unknown decision {0:?} (the wire spelling is lowercase: allow, deny, modify, ask or defer)")]
    UnknownDecision(String),
    /// A non-allow decision without `reasoning`.
    #[error("a {} decision must carry `reasoning`", .0.as_str())]
    MissingReasoning(Disposition),
    /// `modifications`, `ask_details` or `defer_details` missing from the
    /// decision that requires it.
    #[error("a {} decision must carry `{field}`", decision.as_str())]
    MissingDetails {
        /// The decision.
        decision: Disposition,
        /// The absent member.
        field: &'static str,
    },
    /// `modifications`, `ask_details` or `defer_details` on a decision
    /// other than the one it belongs to.
    #[error(
        "`{field}` belongs to a {} decision, not to {}",
        allowed_on.as_str(),
        decision.as_str()
    )]
    UnexpectedDetails {
        /// The decision received.
        decision: Disposition,
        /// The member that does not belong.
        field: &'static str,
        /// The only decision it may accompany.
        allowed_on: Disposition,
    },
    /// `modifications`, `ask_details` or `defer_details` of the wrong shape.
    #[error("`result.{field}` is malformed: {reason}")]
    MalformedDetails {
        /// The member.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `chain_hash` that is not 64 lowercase hex digits.
    #[error("`result.chain_hash` {0} is not 64 lowercase hex digits")]
    InvalidChainHash(String),
    /// `on_decision_failure` (or `on_timeout`) other than proceed / deny.
    #[error("unknown failure posture {0:?} (expected \"proceed\" or \"deny\")")]
    UnknownPosture(String),
    /// `selected_transport` other than http / https / stdio.
    #[error("unknown transport {0:?} (expected \"http\", \"https\" or \"stdio\")")]
    UnknownTransport(String),
    /// A `system/ping` reply that does not allow.
    #[error("a system/ping reply must allow, not {}", .0.as_str())]
    PingNotAllowed(Disposition),
    /// A `system/ping` reply whose `payload.status` is not `"ok"`.
    #[error("the system/ping reply's `payload.status` is {0:?}, not \"ok\"")]
    PingNotOk(String),
}
