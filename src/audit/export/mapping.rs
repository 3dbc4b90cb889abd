//! The ACS Trace → OCSF mapping, read from the normative
//! `schemas/trace/ocsf-mapping.json` itself (compiled in), so class UIDs,
//! activities and severities are the specification's own numbers rather
//! than a copy of them.

use std::collections::HashMap;

use serde_json::Value;

/// Why the mapping document could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MappingError(String);

/// The mapping file, as the specification publishes it.
const MAPPING_JSON: &str = include_str!("../../../schemas/trace/ocsf-mapping.json");

/// The OCSF class of one ACS step method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepClass {
    /// OCSF `class_uid`.
    pub class_uid: u64,
    /// The mapping's `class_name`.
    pub class_name: String,
    /// OCSF `activity_id`, where the mapping fixes one.
    pub activity_id: Option<u64>,
}

/// What the mapping says: classes by step method, the class of decision
/// findings, and the severity of each disposition.
#[derive(Debug, Clone)]
pub struct OcsfMapping {
    steps: HashMap<String, StepClass>,
    /// `class_uid` of decision findings (Detection Finding, 2004).
    pub finding_class_uid: u64,
    /// `class_name` of decision findings.
    pub finding_class_name: String,
    severities: HashMap<String, u64>,
}

impl OcsfMapping {
    /// The mapping compiled into this binary.
    pub fn acs_v0_1() -> Result<Self, MappingError> {
        let document: Value = serde_json::from_str(MAPPING_JSON)
            .map_err(|err| MappingError(format!("not JSON: {err}")))?;
        Self::from_document(&document)
    }

    /// Reads the `default` members of a mapping document.
    pub fn from_document(document: &Value) -> Result<Self, MappingError> {
        let properties = &document["properties"];
        let steps = properties["step_to_class"]["default"]
            .as_object()
            .ok_or_else(|| missing("step_to_class.default"))?
            .iter()
            .map(|(method, class)| Ok((method.clone(), step_class(method, class)?)))
            .collect::<Result<HashMap<_, _>, MappingError>>()?;
        let finding = &properties["decision_class"]["properties"];
        let finding_class_uid = finding["class_uid"]["const"]
            .as_u64()
            .ok_or_else(|| missing("decision_class.class_uid.const"))?;
        let finding_class_name = finding["class_name"]["const"]
            .as_str()
            .ok_or_else(|| missing("decision_class.class_name.const"))?
            .to_owned();
        let severities = properties["severity_mapping"]["default"]
            .as_object()
            .ok_or_else(|| missing("severity_mapping.default"))?
            .iter()
            .map(|(disposition, id)| {
                let id = id
                    .as_u64()
                    .ok_or_else(|| missing("severity_mapping.default values"))?;
                Ok((disposition.clone(), id))
            })
            .collect::<Result<HashMap<_, _>, MappingError>>()?;
        Ok(Self {
            steps,
            finding_class_uid,
            finding_class_name,
            severities,
        })
    }

    /// The class of `step_type`, when the mapping names it.
    pub fn step(&self, step_type: &str) -> Option<&StepClass> {
        self.steps.get(step_type)
    }

    /// The `severity_id` of a disposition, when the mapping names it.
    pub fn severity(&self, disposition: &str) -> Option<u64> {
        self.severities.get(disposition).copied()
    }
}

fn step_class(method: &str, class: &Value) -> Result<StepClass, MappingError> {
    Ok(StepClass {
        class_uid: class["class_uid"]
            .as_u64()
            .ok_or_else(|| MappingError(format!("{method}: no class_uid")))?,
        class_name: class["class_name"]
            .as_str()
            .ok_or_else(|| MappingError(format!("{method}: no class_name")))?
            .to_owned(),
        activity_id: class["activity_id"].as_u64(),
    })
}

fn missing(what: &str) -> MappingError {
    MappingError(format!("no {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_mapping_reads() {
        let mapping = OcsfMapping::acs_v0_1().unwrap();
        let start = mapping.step("steps/sessionStart").unwrap();
        assert_eq!((start.class_uid, start.activity_id), (3002, Some(1)));
        assert_eq!(
            mapping.step("steps/toolCallRequest").unwrap().class_uid,
            1007
        );
        assert_eq!(mapping.finding_class_uid, 2004);
        assert_eq!(mapping.severity("deny"), Some(4));
        assert_eq!(mapping.severity("allow"), Some(1));
        assert!(mapping.step("protocols/MCP/tools/call").is_none());
    }
}
