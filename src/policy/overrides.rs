//! The `set` half of a modify rule: parameter overrides.
//!
//! Values are converted from TOML to JSON once, at compile time. This file
//! also knows where an override lands in the payload, because §6.3 forbids
//! a redaction that touches an overridden value and only the rule that
//! produces both can keep them apart.

use serde_json::{Map, Number, Value};
use toml::Table;

use super::error::RuleProblem;
use super::pointer;
use crate::guardian::decision::Redaction;

/// Converts a `set` table into the `parameter_overrides` map.
pub(crate) fn compile(set: &Table) -> Result<Map<String, Value>, RuleProblem> {
    set.iter()
        .map(|(key, value)| match to_json(value) {
            Ok(json) => Ok((key.clone(), json)),
            Err(why) => Err(RuleProblem::InvalidOverride {
                key: key.clone(),
                why,
            }),
        })
        .collect()
}

/// One TOML value as JSON; datetimes become their RFC 3339 text because
/// JSON has no datetime type.
fn to_json(value: &toml::Value) -> Result<Value, &'static str> {
    Ok(match value {
        toml::Value::String(text) => Value::String(text.clone()),
        toml::Value::Integer(n) => Value::from(*n),
        toml::Value::Float(f) => Number::from_f64(*f)
            .map(Value::Number)
            .ok_or("NaN and infinity have no JSON form")?,
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(when) => Value::String(when.to_string()),
        toml::Value::Array(items) => {
            Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| to_json(v).map(|json| (k.clone(), json)))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Drops redactions that overlap an overridden argument (§6.3 requires
/// disjoint targets, and a client must DENY a decision that breaks that).
///
/// Nothing is lost: the override replaces the whole value, so a redaction
/// inside it has nothing left to hide.
pub(crate) fn retain_disjoint(
    redactions: &mut Vec<Redaction>,
    overrides: &Map<String, Value>,
    method: &str,
) {
    if overrides.is_empty() {
        return;
    }
    let targets: Vec<String> = overrides.keys().map(|k| target(method, k)).collect();
    redactions.retain(|r| {
        !targets
            .iter()
            .any(|t| pointer::is_within(&r.path, t) || pointer::is_within(t, &r.path))
    });
}

/// Where an override of argument `name` lands in the payload of `method`.
///
/// Follows the Go reference: a wrapped MCP message keeps arguments at
/// `/params/arguments/<name>`; ACS tool steps wrap each argument as
/// `{value, provenance}` and the override replaces `value`.
fn target(method: &str, name: &str) -> String {
    let mut path = String::new();
    if method.starts_with("protocols/") || method.starts_with("wrapped:") {
        path.push_str("/params/arguments");
        pointer::push_token(&mut path, name);
    } else {
        path.push_str("/arguments");
        pointer::push_token(&mut path, name);
        path.push_str("/value");
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(text: &str) -> Table {
        text.parse::<Table>().expect("valid TOML")
    }

    fn redaction(path: &str) -> Redaction {
        Redaction {
            path: path.to_owned(),
            replacement: "x".to_owned(),
        }
    }

    #[test]
    fn toml_values_become_json() {
        let set = table(
            "limit = 10\nratio = 0.5\nname = \"n\"\non = true\nlist = [1, \"a\"]\n\
             nested = { k = [ { z = 1 } ] }\nwhen = 1979-05-27T07:32:00Z\n",
        );
        let map = compile(&set).expect("convertible");
        assert_eq!(
            Value::Object(map),
            json!({
                "limit": 10, "ratio": 0.5, "name": "n", "on": true,
                "list": [1, "a"], "nested": {"k": [{"z": 1}]},
                "when": "1979-05-27T07:32:00Z"
            })
        );
    }

    #[test]
    fn non_finite_floats_are_rejected() {
        let err = compile(&table("x = nan\n")).expect_err("nan");
        assert!(err.to_string().starts_with("set.x:"), "{err}");
    }

    #[test]
    fn targets_follow_the_hook_shape() {
        assert_eq!(
            target("steps/toolCallRequest", "a/b"),
            "/arguments/a~1b/value"
        );
        assert_eq!(
            target("protocols/MCP/tools/call", "cmd"),
            "/params/arguments/cmd"
        );
    }

    #[test]
    fn overlapping_redactions_are_dropped() {
        let overrides = compile(&table("cmd = \"ls\"\n")).expect("convertible");
        let mut redactions = vec![
            redaction("/arguments/cmd/value"),
            redaction("/arguments/cmd"),
            redaction("/arguments/cmd/provenance/source"),
            redaction("/arguments/cmdline/value"),
        ];
        retain_disjoint(&mut redactions, &overrides, "steps/toolCallRequest");
        let kept: Vec<_> = redactions.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            kept,
            [
                "/arguments/cmd/provenance/source",
                "/arguments/cmdline/value"
            ]
        );
    }
}
