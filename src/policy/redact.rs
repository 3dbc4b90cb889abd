//! The `redact` half of a modify rule: find string leaves to rewrite.

use regex::Regex;
use serde_json::Value;

use super::error::RuleProblem;
use super::pointer;
use super::spec::RedactSpec;
use crate::guardian::decision::Redaction;
use crate::hooks::{HookPayload, PointerToken};

/// Rewrites every string leaf under a pointer that a regex matches.
///
/// The output is one [`Redaction`] per leaf, addressed by its own pointer
/// and carrying the whole rewritten string: ACS redactions replace values,
/// not substrings, so the regex replacement happens here, not in
/// enforcement.
#[derive(Debug, Clone)]
pub(crate) struct Redactor {
    pointer: String,
    tokens: Box<[PointerToken]>,
    regex: Regex,
    replacement: String,
}

impl Redactor {
    /// Validates the pointer and compiles the regex.
    pub(crate) fn compile(spec: &RedactSpec) -> Result<Self, RuleProblem> {
        pointer::validate(&spec.pointer, "redact.pointer")?;
        let regex = Regex::new(&spec.regex).map_err(|source| RuleProblem::InvalidRegex {
            field: "redact.regex",
            source,
        })?;
        Ok(Self {
            pointer: spec.pointer.clone(),
            tokens: PointerToken::split(&spec.pointer),
            regex,
            replacement: spec.replacement.clone(),
        })
    }

    /// Whether there is anything to redact, without allocating.
    ///
    /// Rules call this before firing so a redact rule falls through when
    /// the payload is already clean.
    pub(crate) fn finds_any(&self, payload: &HookPayload) -> bool {
        payload.any_string_under(&self.tokens, |text| self.regex.is_match(text))
    }

    /// The redactions for `payload`, in document order.
    pub(crate) fn redactions(&self, payload: &Value) -> Vec<Redaction> {
        let mut found = Vec::new();
        if let Some(target) = payload.pointer(&self.pointer) {
            let mut path = self.pointer.clone();
            self.collect(target, &mut path, &mut found);
        }
        found
    }

    /// Walks `value`, keeping `path` equal to its pointer; the buffer is
    /// shared across the walk and trimmed back after each child.
    fn collect(&self, value: &Value, path: &mut String, found: &mut Vec<Redaction>) {
        match value {
            Value::String(text) => self.redact_leaf(text, path, found),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let len = path.len();
                    pointer::push_index(path, index);
                    self.collect(item, path, found);
                    path.truncate(len);
                }
            }
            Value::Object(members) => {
                for (key, item) in members {
                    let len = path.len();
                    pointer::push_token(path, key);
                    self.collect(item, path, found);
                    path.truncate(len);
                }
            }
            _ => {}
        }
    }

    fn redact_leaf(&self, text: &str, path: &str, found: &mut Vec<Redaction>) {
        if self.regex.is_match(text) {
            let replacement = self.regex.replace_all(text, self.replacement.as_str());
            found.push(Redaction {
                path: path.to_owned(),
                replacement: replacement.into_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redactor(pointer: &str, regex: &str, replacement: &str) -> Redactor {
        Redactor::compile(&RedactSpec {
            pointer: pointer.to_owned(),
            regex: regex.to_owned(),
            replacement: replacement.to_owned(),
        })
        .expect("valid redact")
    }

    fn paths(found: &[Redaction]) -> Vec<&str> {
        found.iter().map(|r| r.path.as_str()).collect()
    }

    #[test]
    fn leaves_get_their_own_escaped_pointers() {
        let payload = json!({
            "outputs": [
                {"value": "key sk-AAAA and sk-BBBB"},
                {"value": "clean"},
                {"value": 7}
            ],
            "a/b": {"c~d": "sk-CCCC"}
        });
        let found = redactor("", "sk-[A-Z]{4}", "[REDACTED]").redactions(&payload);
        assert_eq!(paths(&found), ["/outputs/0/value", "/a~1b/c~0d"]);
        assert_eq!(found[0].replacement, "key [REDACTED] and [REDACTED]");
        assert_eq!(found[1].replacement, "[REDACTED]");
    }

    #[test]
    fn pointer_limits_the_walk() {
        let payload = json!({"outputs": ["sk-AAAA"], "other": "sk-BBBB"});
        let found = redactor("/outputs", "sk-", "x").redactions(&payload);
        assert_eq!(paths(&found), ["/outputs/0"]);
    }

    #[test]
    fn pointer_may_name_a_string_leaf() {
        let payload = json!({"result": {"content": [{"text": "token sk-AAAA"}]}});
        let found = redactor("/result/content/0/text", "sk-[A-Z]+", "***").redactions(&payload);
        assert_eq!(paths(&found), ["/result/content/0/text"]);
        assert_eq!(found[0].replacement, "token ***");
    }

    #[test]
    fn capture_groups_expand_in_the_replacement() {
        let payload = json!("user=alice");
        let found = redactor("", "user=(\\w)\\w*", "user=$1***").redactions(&payload);
        assert_eq!(found[0].replacement, "user=a***");
    }

    #[test]
    fn clean_or_absent_targets_find_nothing() {
        let r = redactor("/outputs", "sk-", "x");
        let finds = |payload: Value| r.finds_any(&HookPayload::from(payload));
        assert!(!finds(json!({"outputs": ["clean", 1, null]})));
        assert!(!finds(json!({"other": "sk-"})));
        assert!(r.redactions(&json!({"other": "sk-"})).is_empty());
        assert!(finds(json!({"outputs": [{"deep": ["sk-1"]}]})));
    }
}
