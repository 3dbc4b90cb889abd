//! The JSON-RPC frame of a Guardian reply (§17) and the header every ACS
//! result carries (§6.1): what must hold before a reply's content is read.

use serde_json::Value;

use super::codes;
use super::fields::{member, object, required, string};
use super::WireError;
use crate::guardian::remote::json_view::{JsonObject, JsonView};
use crate::hooks::ACS_VERSION;

/// A JSON-RPC error object from the Guardian (§17, §17.1).
#[derive(Debug, Clone, PartialEq)]
pub struct AcsError {
    /// The JSON-RPC or ACS code (see [`codes`]).
    pub code: i64,
    /// The human-readable message.
    pub message: String,
    /// `data`, which SHOULD carry `reason` and the per-code fields.
    pub data: Option<Value>,
}

impl AcsError {
    /// Whether this error must deny the step whatever the failure posture
    /// ([`codes::fails_closed`]).
    pub fn fails_closed(&self) -> bool {
        codes::fails_closed(self.code)
    }

    /// Reads a JSON-RPC error object: integer `code`, string `message`,
    /// optional `data`. Its `signature`, if any, is not part of the error.
    fn from_value<V: JsonView>(error: &V) -> Result<Self, WireError> {
        let error = error
            .as_object()
            .ok_or(WireError::MalformedError("it is not an object"))?;
        let code = member(error, "code")
            .and_then(JsonView::as_i64)
            .ok_or(WireError::MalformedError("`code` is not an integer"))?;
        let message = member(error, "message")
            .and_then(JsonView::as_str)
            .ok_or(WireError::MalformedError("`message` is not a string"))?;
        Ok(Self {
            code,
            message: message.to_owned(),
            data: member(error, "data").map(JsonView::to_value),
        })
    }
}

impl From<AcsError> for WireError {
    fn from(error: AcsError) -> Self {
        WireError::Refused {
            code: error.code,
            message: error.message,
            data: error.data,
        }
    }
}

/// What a well-framed reply carries: exactly one of a result object and an
/// error.
pub(super) enum Outcome<'a, O> {
    /// `result`, an object.
    Result(&'a O),
    /// `error`, parsed.
    Error(AcsError),
}

/// Checks the JSON-RPC frame (an object, `jsonrpc: "2.0"`, exactly one of
/// `result` / `error`) and returns its outcome. The `id` is checked by the
/// caller, which knows what to expect.
pub(super) fn outcome<V: JsonView>(response: &V) -> Result<Outcome<'_, V::Map>, WireError> {
    let response = response.as_object().ok_or(WireError::NotAnObject)?;
    match response.get("jsonrpc") {
        Some(version) if version.as_str() == Some("2.0") => {}
        Some(other) => return Err(WireError::NotJsonRpc2(other.to_value().to_string())),
        None => return Err(WireError::NotJsonRpc2("absent".to_owned())),
    }
    match (response.get("result"), response.get("error")) {
        (Some(result), None) => object(result, "result").map(Outcome::Result),
        (None, Some(error)) => AcsError::from_value(error).map(Outcome::Error),
        (Some(_), Some(_)) => Err(WireError::BothOutcomes),
        (None, None) => Err(WireError::NoOutcome),
    }
}

/// Checks that `response` answers the request whose JSON-RPC id was
/// `expected_id` (same JSON value, so `1` and `"1"` differ).
pub fn check_reply_id<V: JsonView>(response: &V, expected_id: &Value) -> Result<(), WireError> {
    let got = response.member("id").ok_or(WireError::MissingField("id"))?;
    if !got.equals(expected_id) {
        return Err(WireError::IdMismatch {
            expected: expected_id.to_string(),
            got: got.to_value().to_string(),
        });
    }
    Ok(())
}

/// The id check for an error reply: JSON-RPC answers with a `null` id when
/// the Guardian could not read the request's, so `null` is accepted too.
/// Either way the error stops the step; only a foreign id is a mismatch.
pub(super) fn check_error_reply_id<V: JsonView>(
    response: &V,
    expected_id: &Value,
) -> Result<(), WireError> {
    match response.member("id") {
        Some(id) if id.is_null() => Ok(()),
        _ => check_reply_id(response, expected_id),
    }
}

/// The header of an ACS result (§6.1): `type` is `"final"`, `acs_version`
/// shares our major, and `request_id` echoes the request's — the second
/// binding besides the JSON-RPC id (DIGEST §16 item 6).
pub(super) fn check_result_header<O: JsonObject>(
    result: &O,
    expected_request_id: &str,
) -> Result<(), WireError> {
    let kind = string(required(result, "type", "result.type")?, "result.type")?;
    if kind != "final" {
        return Err(WireError::NotFinal(kind.to_owned()));
    }
    let version = required(result, "acs_version", "result.acs_version")?;
    check_version("result.acs_version", string(version, "result.acs_version")?)?;
    let request_id = required(result, "request_id", "result.request_id")?;
    let request_id = string(request_id, "result.request_id")?;
    if request_id != expected_request_id {
        return Err(WireError::RequestIdMismatch {
            expected: expected_request_id.to_owned(),
            got: request_id.to_owned(),
        });
    }
    Ok(())
}

/// Checks that `version` is `MAJOR.MINOR.PATCH` with our major: any minor
/// or patch of the same major is accepted (§3 forward compatibility).
pub(super) fn check_version(field: &'static str, version: &str) -> Result<(), WireError> {
    let Some(theirs) = major(version) else {
        return Err(WireError::BadVersion {
            field,
            got: version.to_owned(),
        });
    };
    if Some(theirs) != major(ACS_VERSION) {
        return Err(WireError::IncompatibleVersion {
            field,
            got: version.to_owned(),
            ours: ACS_VERSION,
        });
    }
    Ok(())
}

/// The major of a strict `^\d+\.\d+\.\d+$` version.
fn major(version: &str) -> Option<u64> {
    let parts: Vec<&str> = version.split('.').collect();
    let [major, minor, patch] = parts.as_slice() else {
        return None;
    };
    let numeric = |part: &&str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !(numeric(major) && numeric(minor) && numeric(patch)) {
        return None;
    }
    major.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn versions_of_our_major_are_accepted() {
        for version in ["0.1.0", "0.2.7", "0.10.0", "00.1.0"] {
            assert_eq!(check_version("v", version), Ok(()), "{version}");
        }
    }

    #[test]
    fn other_majors_are_incompatible() {
        let err = check_version("v", "1.0.0").unwrap_err();
        assert!(
            matches!(err, WireError::IncompatibleVersion { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn non_semver_is_a_bad_version() {
        for version in [
            "0.1",
            "0.1.0.0",
            "v0.1.0",
            "0.1.x",
            "",
            "0..1",
            "0.1.0-rc1",
            "٠.1.0",
        ] {
            let err = check_version("v", version).unwrap_err();
            assert!(
                matches!(err, WireError::BadVersion { .. }),
                "{version}: {err:?}"
            );
        }
    }

    #[test]
    fn frame_rules() {
        let cases = [
            (json!("x"), WireError::NotAnObject),
            (
                json!({"id": 1, "result": {}}),
                WireError::NotJsonRpc2("absent".into()),
            ),
            (
                json!({"jsonrpc": "1.0", "id": 1, "result": {}}),
                WireError::NotJsonRpc2("\"1.0\"".into()),
            ),
            (json!({"jsonrpc": "2.0", "id": 1}), WireError::NoOutcome),
            (
                json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}),
                WireError::BothOutcomes,
            ),
        ];
        for (response, expected) in cases {
            assert_eq!(outcome(&response).err(), Some(expected), "{response}");
        }
        let not_object = json!({"jsonrpc": "2.0", "id": 1, "result": null});
        assert!(matches!(
            outcome(&not_object),
            Err(WireError::InvalidField { .. })
        ));
    }

    #[test]
    fn error_objects() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32005, "message": "replay", "data": {"reason": "replay_detected"}}});
        let Ok(Outcome::Error(error)) = outcome(&ok) else {
            panic!("not an error outcome");
        };
        assert_eq!(error.code, -32005);
        assert_eq!(error.message, "replay");
        assert_eq!(error.data, Some(json!({"reason": "replay_detected"})));
        assert!(error.fails_closed());

        for bad in [
            json!("boom"),
            json!({"message": "m"}),
            json!({"code": "-32000", "message": "m"}),
            json!({"code": -32000.5, "message": "m"}),
            json!({"code": -32000}),
        ] {
            let response = json!({"jsonrpc": "2.0", "id": 1, "error": bad});
            assert!(
                matches!(outcome(&response), Err(WireError::MalformedError(_))),
                "{response}"
            );
        }
    }

    #[test]
    fn reply_id_must_match_exactly() {
        let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
        assert_eq!(check_reply_id(&response, &json!(1)), Ok(()));
        assert!(matches!(
            check_reply_id(&response, &json!("1")),
            Err(WireError::IdMismatch { .. })
        ));
        let no_id = json!({"jsonrpc": "2.0", "result": {}});
        assert_eq!(
            check_reply_id(&no_id, &json!(1)),
            Err(WireError::MissingField("id"))
        );
    }

    #[test]
    fn error_reply_may_have_a_null_id() {
        let null_id =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "m"}});
        assert_eq!(check_error_reply_id(&null_id, &json!(1)), Ok(()));
        let other = json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32700, "message": "m"}});
        assert!(check_error_reply_id(&other, &json!(1)).is_err());
    }
}
