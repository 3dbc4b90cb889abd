//! `tools/call` arguments against the tool's `inputSchema`
//! (`validate_arguments`), with validators compiled once per definition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::Value;

/// Validators kept at most; past this the cache starts over (a server
/// that keeps changing its schemas must not grow the proxy).
const MAX_VALIDATORS: usize = 1024;

/// Arguments that do not satisfy the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidArguments {
    /// JSON Pointer of the failing value inside `arguments` (`""` is the
    /// arguments object itself).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

/// Compiled validators by definition digest.
#[derive(Default)]
pub struct ArgumentValidators {
    compiled: Mutex<HashMap<String, Option<Arc<Validator>>>>,
}

impl std::fmt::Debug for ArgumentValidators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentValidators").finish_non_exhaustive()
    }
}

impl ArgumentValidators {
    /// Checks `arguments` against `schema`, the `inputSchema` of the
    /// definition with `digest`. A schema that does not compile checks
    /// nothing (the server would be unusable otherwise) and is logged once.
    pub fn check(
        &self,
        digest: &str,
        schema: &Value,
        arguments: &Value,
    ) -> Result<(), InvalidArguments> {
        let Some(validator) = self.validator(digest, schema) else {
            return Ok(());
        };
        let first = validator
            .iter_errors(arguments)
            .next()
            .map(|error| InvalidArguments {
                path: error.instance_path().to_string(),
                message: error.to_string(),
            });
        first.map_or(Ok(()), Err)
    }

    fn validator(&self, digest: &str, schema: &Value) -> Option<Arc<Validator>> {
        let mut compiled = self
            .compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = compiled.get(digest) {
            return found.clone();
        }
        if compiled.len() >= MAX_VALIDATORS {
            compiled.clear();
        }
        let validator = match jsonschema::validator_for(schema) {
            Ok(validator) => Some(Arc::new(validator)),
            Err(err) => {
                tracing::warn!(%err, "a tool's inputSchema does not compile; its arguments are not checked");
                None
            }
        };
        compiled.insert(digest.to_owned(), validator.clone());
        validator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_error_names_the_failing_path() {
        let validators = ArgumentValidators::default();
        let schema = json!({"type":"object","properties":{"a":{"type":"number"},
            "opts":{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}},"required":["a"]});
        assert!(validators.check("d", &schema, &json!({"a": 1})).is_ok());
        let err = validators
            .check("d", &schema, &json!({"a": "x"}))
            .unwrap_err();
        assert_eq!(err.path, "/a");
        let err = validators
            .check("d", &schema, &json!({"a": 1, "opts": {"n": -1}}))
            .unwrap_err();
        assert_eq!(err.path, "/opts/n");
        let err = validators.check("d", &schema, &json!({})).unwrap_err();
        assert_eq!(err.path, "");
        assert!(err.message.contains("\"a\""), "{}", err.message);
    }

    #[test]
    fn draft_07_schemas_are_understood() {
        let validators = ArgumentValidators::default();
        let schema = json!({"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
            "properties":{"items":{"type":"array","items":[{"type":"string"}],"additionalItems":false}}});
        assert!(validators
            .check("d7", &schema, &json!({"items":["a"]}))
            .is_ok());
        assert_eq!(
            validators
                .check("d7", &schema, &json!({"items":["a", 1]}))
                .unwrap_err()
                .path,
            "/items"
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_checks_nothing() {
        let validators = ArgumentValidators::default();
        assert!(validators
            .check("bad", &json!({"type": 12}), &json!({}))
            .is_ok());
    }
}
