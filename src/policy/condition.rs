//! The optional `match` clause of a rule.

use regex::Regex;

use crate::hooks::{Found, HookPayload, PointerToken};

use super::error::RuleProblem;
use super::pointer;
use super::spec::MatchSpec;

/// "The value at this pointer matches this regex."
///
/// Strings are searched as they are; any other JSON value is searched in
/// its compact text, so `regex = "^true$"` or `"\"admin\""` can look at
/// booleans and arrays without a separate syntax. An absent pointer never
/// matches: a rule about a field cannot fire on a payload without it.
///
/// The pointer is split into unescaped tokens once, at compile time, so a
/// lookup walks the payload without allocating; rules that test the same
/// pointer share one walk per evaluation through [`Lookups`].
#[derive(Debug, Clone)]
pub(crate) struct Condition {
    pointer: String,
    tokens: Box<[PointerToken]>,
    /// Equal for conditions with the same pointer in one policy; assigned
    /// by [`Condition::share_pointer`].
    pointer_id: usize,
    regex: Regex,
}

/// The pointer lookups already done while evaluating one hook.
///
/// Policies that grow tend to repeat a pointer across many rules (one rule
/// per forbidden path, say); the index hands those rules out one after
/// another, so remembering the last lookup avoids walking again.
#[derive(Debug, Default)]
pub(crate) struct Lookups<'v> {
    last: Option<(usize, Option<Found<'v>>)>,
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
            tokens: PointerToken::split(&spec.pointer),
            pointer_id: usize::MAX,
            regex,
        })
    }

    /// The pointer as configured.
    pub(crate) fn pointer(&self) -> &str {
        &self.pointer
    }

    /// Files this condition under `id`, shared by every condition of the
    /// policy with the same pointer.
    pub(crate) fn share_pointer(&mut self, id: usize) {
        self.pointer_id = id;
    }

    /// Whether `payload` satisfies the clause.
    pub(crate) fn holds<'v>(&self, payload: &'v HookPayload, lookups: &mut Lookups<'v>) -> bool {
        let found = match lookups.last {
            Some((id, found)) if id == self.pointer_id => found,
            _ => {
                let found = payload.find(&self.tokens);
                lookups.last = Some((self.pointer_id, found));
                found
            }
        };
        match found {
            None => false,
            Some(found) => match found.as_str() {
                Some(text) => self.regex.is_match(text),
                // Only non-string values pay for rendering.
                None => self.regex.is_match(&found.compact_text()),
            },
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
        let payload = HookPayload::from(json!({"arguments": {"cmd": {"value": "sudo rm -rf /"}}}));
        assert!(
            condition("/arguments/cmd/value", "rm -rf").holds(&payload, &mut Lookups::default())
        );
        assert!(!condition("/arguments/cmd/value", "^rm").holds(&payload, &mut Lookups::default()));
    }

    #[test]
    fn non_string_values_use_compact_json() {
        let payload =
            HookPayload::from(json!({"n": 42, "flag": true, "list": ["a", "b"], "obj": {"k": 1}}));
        assert!(condition("/n", "^42$").holds(&payload, &mut Lookups::default()));
        assert!(condition("/flag", "^true$").holds(&payload, &mut Lookups::default()));
        assert!(condition("/list", r#"^\["a","b"\]$"#).holds(&payload, &mut Lookups::default()));
        assert!(condition("/obj", r#"^\{"k":1\}$"#).holds(&payload, &mut Lookups::default()));
    }

    #[test]
    fn absent_pointer_never_matches() {
        let payload = HookPayload::from(json!({"a": "x"}));
        assert!(!condition("/b", ".*").holds(&payload, &mut Lookups::default()));
        assert!(!condition("/a/0", ".*").holds(&payload, &mut Lookups::default()));
    }

    #[test]
    fn escaped_keys_are_looked_up() {
        let payload = HookPayload::from(json!({"a/b": {"c~d": "hit"}}));
        assert!(condition("/a~1b/c~0d", "hit").holds(&payload, &mut Lookups::default()));
    }

    #[test]
    fn lookups_agree_with_serde_json_pointer() {
        let payload = HookPayload::from(json!({"a": [10, {"b/c": {"~": 1}}], "": {"": 2}, "01": 3,
            "arr": [0, 1, 2], "n": null}));
        for pointer in [
            "",
            "/a",
            "/a/0",
            "/a/1/b~1c/~0",
            "/a/01",
            "/a/+1",
            "/a/2",
            "/",
            "//",
            "/01",
            "/arr/1",
            "/arr/-",
            "/n",
            "/n/x",
            "/missing/x",
        ] {
            let condition = condition(pointer, ".*");
            assert_eq!(
                payload
                    .find(&condition.tokens)
                    .map(|found| found.to_value()),
                payload.tree().pointer(pointer).cloned(),
                "{pointer}"
            );
        }
    }

    #[test]
    fn shared_pointer_is_walked_once_per_evaluation() {
        let mut first = condition("/a", "^x$");
        let mut second = condition("/a", "^y$");
        first.share_pointer(0);
        second.share_pointer(0);
        let payload = HookPayload::from(json!({"a": "y"}));
        let mut lookups = Lookups::default();
        assert!(!first.holds(&payload, &mut lookups));
        assert!(second.holds(&payload, &mut lookups));
        // A different pointer id does not reuse the remembered walk.
        let mut other = condition("/b", ".*");
        other.share_pointer(1);
        assert!(!other.holds(&payload, &mut lookups));
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
