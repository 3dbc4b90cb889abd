//! The §6.3 rules a `modifications` object must meet before anything is
//! applied: its composition, what the [`Target`] can take, and the
//! disjointness of everything it changes. [`validate`](super::validate)
//! runs them in this file's order, which fixes which error a decision that
//! breaks several rules gets.

use serde_json::{Map, Value};

use super::pointer::{encode_pointer, parse_pointer};
use super::{parse_arguments, ModifyError, Target};
use crate::guardian::decision::{Modifications, Redaction};

/// `modified_content` alone, or at least one redaction or override.
pub(super) fn check_composition(m: &Modifications) -> Result<(), ModifyError> {
    let has_patches = !m.redactions.is_empty() || !m.parameter_overrides.is_empty();
    match (&m.modified_content, has_patches) {
        (None, false) => Err(ModifyError::Empty),
        (Some(_), true) => Err(ModifyError::ModifiedContentNotAlone),
        _ => Ok(()),
    }
}

/// `modified_content` and overrides only where [`Target`] can take them.
pub(super) fn check_target_accepts(m: &Modifications, target: Target) -> Result<(), ModifyError> {
    if let Some(content) = &m.modified_content {
        if !target.takes_modified_content() {
            return Err(ModifyError::ModifiedContentUnsupported { target });
        }
        // Parse now so a malformed object is refused before any apply.
        if target == Target::ToolCallRequest {
            parse_arguments(content)?;
        }
    }
    if !m.parameter_overrides.is_empty() && !target.takes_overrides() {
        return Err(ModifyError::OverridesUnsupported { target });
    }
    Ok(())
}

/// Each redaction with its decoded tokens, so the overlap checks compare
/// tokens rather than strings.
pub(super) fn parse_redactions(
    redactions: &[Redaction],
) -> Result<Vec<(&str, Vec<String>)>, ModifyError> {
    redactions
        .iter()
        .map(|redaction| {
            let tokens = parse_pointer(&redaction.path)?;
            if tokens.is_empty() {
                return Err(ModifyError::RedactsWholeDocument);
            }
            Ok((redaction.path.as_str(), tokens))
        })
        .collect()
}

/// No two redactions overlap.
pub(super) fn check_redactions_disjoint(
    redactions: &[(&str, Vec<String>)],
) -> Result<(), ModifyError> {
    // Quadratic, but a decision carries a handful of redactions at most.
    for (i, (first, first_tokens)) in redactions.iter().enumerate() {
        for (second, second_tokens) in &redactions[i + 1..] {
            if overlaps(first_tokens, second_tokens) {
                return Err(ModifyError::OverlappingRedactions {
                    first: (*first).to_owned(),
                    second: (*second).to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// No redaction overlaps the pointer an override sets.
pub(super) fn check_overrides_disjoint(
    redactions: &[(&str, Vec<String>)],
    overrides: &Map<String, Value>,
    target: Target,
) -> Result<(), ModifyError> {
    for key in overrides.keys() {
        let Some(overridden) = target.override_tokens(key) else {
            return Err(ModifyError::OverridesUnsupported { target });
        };
        if let Some((path, _)) = redactions
            .iter()
            .find(|(_, tokens)| overlaps(tokens, &overridden))
        {
            return Err(ModifyError::RedactionOverlapsOverride {
                path: (*path).to_owned(),
                key: key.clone(),
                overridden: encode_pointer(overridden.iter().map(String::as_str)),
            });
        }
    }
    Ok(())
}

/// Equal, ancestor or descendant — by whole tokens, so `/a/b` and `/a/bc`
/// do not overlap.
fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{mods, redact_only, redaction_with_override};
    use super::super::{validate, ModifyError, Target};

    #[test]
    fn whole_document_redaction_is_rejected() {
        let err = validate(&redact_only(""), Target::WrappedMcpResponse).unwrap_err();
        assert_eq!(err, ModifyError::RedactsWholeDocument);
    }

    // ---- composition (§6.3) ----

    #[test]
    fn empty_modifications_are_rejected() {
        for wire in [
            json!({}),
            json!({ "redactions": [], "parameter_overrides": {} }),
        ] {
            assert_eq!(
                validate(&mods(wire), Target::WrappedMcpRequest),
                Err(ModifyError::Empty)
            );
        }
    }

    #[test]
    fn modified_content_mixed_with_others_is_rejected() {
        let with_redaction =
            mods(json!({ "modified_content": "{}", "redactions": [{ "path": "/a" }] }));
        let with_override =
            mods(json!({ "modified_content": "{}", "parameter_overrides": { "a": 1 } }));
        for m in [with_redaction, with_override] {
            assert_eq!(
                validate(&m, Target::ToolCallRequest),
                Err(ModifyError::ModifiedContentNotAlone)
            );
        }
    }

    #[test]
    fn modified_content_on_wrapped_messages_is_unsupported() {
        let m = mods(json!({ "modified_content": "{}" }));
        for target in [Target::WrappedMcpRequest, Target::WrappedMcpResponse] {
            assert_eq!(
                validate(&m, target),
                Err(ModifyError::ModifiedContentUnsupported { target })
            );
        }
    }

    #[test]
    fn modified_content_for_tool_request_must_be_an_object() {
        for content in ["[1]", "\"x\"", "not json"] {
            let m = mods(json!({ "modified_content": content }));
            let err = validate(&m, Target::ToolCallRequest).unwrap_err();
            assert!(
                matches!(err, ModifyError::ModifiedContentNotArguments { .. }),
                "{content}: {err}"
            );
        }
    }

    #[test]
    fn overrides_on_responses_and_results_are_rejected() {
        let m = mods(json!({ "parameter_overrides": { "a": 1 } }));
        for target in [Target::WrappedMcpResponse, Target::ToolCallResult] {
            assert_eq!(
                validate(&m, target),
                Err(ModifyError::OverridesUnsupported { target })
            );
        }
    }

    // ---- disjointness ----

    fn assert_overlap(path: &str, key: &str, target: Target) {
        let err = validate(&redaction_with_override(path, key), target).unwrap_err();
        assert!(
            matches!(err, ModifyError::RedactionOverlapsOverride { .. }),
            "{path} vs {key}: {err}"
        );
    }

    #[test]
    fn redaction_equal_to_override_target_is_rejected() {
        assert_overlap("/params/arguments/to", "to", Target::WrappedMcpRequest);
        assert_overlap("/arguments/to/value", "to", Target::ToolCallRequest);
    }

    #[test]
    fn redaction_ancestor_of_override_target_is_rejected() {
        assert_overlap("/params/arguments", "to", Target::WrappedMcpRequest);
        assert_overlap("/params", "to", Target::WrappedMcpRequest);
        assert_overlap("/arguments/to", "to", Target::ToolCallRequest);
    }

    #[test]
    fn redaction_descendant_of_override_target_is_rejected() {
        assert_overlap("/params/arguments/to/0", "to", Target::WrappedMcpRequest);
        assert_overlap("/arguments/to/value/x", "to", Target::ToolCallRequest);
    }

    #[test]
    fn overlap_error_names_both_targets() {
        let err = validate(
            &redaction_with_override("/arguments/to", "to"),
            Target::ToolCallRequest,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ModifyError::RedactionOverlapsOverride {
                path: "/arguments/to".into(),
                key: "to".into(),
                overridden: "/arguments/to/value".into(),
            }
        );
    }

    #[test]
    fn sibling_with_common_string_prefix_is_disjoint() {
        let m = redaction_with_override("/params/arguments/tool", "to");
        assert_eq!(validate(&m, Target::WrappedMcpRequest), Ok(()));
        let m = redaction_with_override("/arguments/to/valued", "to");
        assert_eq!(validate(&m, Target::ToolCallRequest), Ok(()));
    }

    #[test]
    fn redaction_beside_override_value_is_disjoint() {
        let m = redaction_with_override("/arguments/to/provenance", "to");
        assert_eq!(validate(&m, Target::ToolCallRequest), Ok(()));
    }

    #[test]
    fn override_keys_are_compared_as_whole_tokens() {
        // Key "a/b" targets one token; its pointer spelling is `a~1b`.
        assert_overlap("/params/arguments/a~1b", "a/b", Target::WrappedMcpRequest);
        let m = redaction_with_override("/params/arguments/a/b", "a/b");
        assert_eq!(validate(&m, Target::WrappedMcpRequest), Ok(()));
        let m = redaction_with_override("/params/arguments/a~1b", "a");
        assert_eq!(validate(&m, Target::WrappedMcpRequest), Ok(()));
    }

    #[test]
    fn identical_redactions_are_rejected() {
        let m = mods(
            json!({ "redactions": [{ "path": "/a/b" }, { "path": "/a/b", "replacement": "x" }] }),
        );
        let err = validate(&m, Target::WrappedMcpResponse).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverlappingRedactions {
                first: "/a/b".into(),
                second: "/a/b".into()
            }
        );
    }

    #[test]
    fn nested_redactions_are_rejected() {
        let m = mods(json!({ "redactions": [{ "path": "/a/b/c" }, { "path": "/a/b" }] }));
        let err = validate(&m, Target::WrappedMcpResponse).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverlappingRedactions {
                first: "/a/b/c".into(),
                second: "/a/b".into()
            }
        );
    }

    #[test]
    fn redactions_sharing_a_string_prefix_are_disjoint() {
        let m = mods(
            json!({ "redactions": [{ "path": "/a/b" }, { "path": "/a/bc" }, { "path": "/a~1b" }] }),
        );
        assert_eq!(validate(&m, Target::WrappedMcpResponse), Ok(()));
    }
}
