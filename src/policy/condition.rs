//! The optional `match` clause of a rule.

use regex::Regex;
use serde_json::Value;

use super::error::RuleProblem;
use super::pointer;
use super::spec::MatchSpec;

/// "The value at this pointer matches this regex."
///
/// Strings are searched as they are; any other JSON value is searched in
/// its compact text, so `regex = "^true$"` or `"\"admin\""` can look at
/// booleans and arrays without a separate syntax. An absent pointer never
/// matches: a rule about a field cannot fire on a payload without it.
#[derive(Debug, Clone)]
pub(crate) struct Condition {
    pointer: String,
    regex: Regex,
}

impl Condition {
    /// Validates the pointer and compiles the regex.
    pub(crate) fn compile(spec: &MatchSpec) -> Result<Self, RuleProblem> {
        pointer::validate(&spec.pointer, "match.pointer")?;
        let regex = Regex::new(&spec.regex).map_err(|source| RuleProblem::InvalidRegex {
            field: "match.regex",
            source,
        })?;
        Ok(Self {
            pointer: spec.pointer.clone(),
            regex,
        })
    }

    /// Whether `payload` satisfies the clause.
    pub(crate) fn holds(&self, payload: &Value) -> bool {
        match payload.pointer(&self.pointer) {
            None => false,
            Some(Value::String(text)) => self.regex.is_match(text),
            // Only non-string values pay for rendering.
            Some(other) => self.regex.is_match(&other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(pointer: &str, regex: &str) -> Condition {
        Condition::compile(&MatchSpec {
            pointer: pointer.to_owned(),
            regex: regex.to_owned(),
        })
        .expect("valid match")
    }

    #[test]
    fn string_value_is_searched_as_is() {
        let payload = json!({"arguments": {"cmd": {"value": "sudo rm -rf /"}}});
        assert!(condition("/arguments/cmd/value", "rm -rf").holds(&payload));
        assert!(!condition("/arguments/cmd/value", "^rm").holds(&payload));
    }

    #[test]
    fn non_string_values_use_compact_json() {
        let payload = json!({"n": 42, "flag": true, "list": ["a", "b"], "obj": {"k": 1}});
        assert!(condition("/n", "^42$").holds(&payload));
        assert!(condition("/flag", "^true$").holds(&payload));
        assert!(condition("/list", r#"^\["a","b"\]$"#).holds(&payload));
        assert!(condition("/obj", r#"^\{"k":1\}$"#).holds(&payload));
    }

    #[test]
    fn absent_pointer_never_matches() {
        let payload = json!({"a": "x"});
        assert!(!condition("/b", ".*").holds(&payload));
        assert!(!condition("/a/0", ".*").holds(&payload));
    }

    #[test]
    fn escaped_keys_are_looked_up() {
        let payload = json!({"a/b": {"c~d": "hit"}});
        assert!(condition("/a~1b/c~0d", "hit").holds(&payload));
    }

    #[test]
    fn bad_regex_and_pointer_are_rejected() {
        let regex = MatchSpec {
            pointer: "/a".to_owned(),
            regex: "(".to_owned(),
        };
        let err = Condition::compile(&regex).expect_err("bad regex");
        assert!(
            err.to_string().starts_with("invalid regex in match.regex"),
            "{err}"
        );
        let pointer = MatchSpec {
            pointer: "a".to_owned(),
            regex: "x".to_owned(),
        };
        let err = Condition::compile(&pointer).expect_err("bad pointer");
        assert!(err.to_string().contains("match.pointer"), "{err}");
    }
}
