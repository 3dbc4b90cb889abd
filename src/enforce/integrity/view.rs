//! What one session has been shown: each listed definition's digest,
//! whether the checks hid it, and what has been reported already.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::section::Section;
use super::verdict::EventKind;

/// One definition as last listed to this session.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its digest.
    pub digest: String,
    /// Why it was kept from the agent, if it was (in `enforce`).
    pub hidden: Option<EventKind>,
    /// A tool's `inputSchema`, for argument checks.
    pub input_schema: Option<Value>,
}

/// The session's view of the upstream's definitions.
#[derive(Debug, Default)]
pub struct SessionView {
    listed: HashMap<(Section, String), Listed>,
    reported: HashSet<String>,
}

impl SessionView {
    /// Records a definition just listed, with its digest and why the
    /// checks hid it (if they did).
    pub fn note(
        &mut self,
        section: Section,
        digest: &str,
        hidden: Option<EventKind>,
        definition: &Value,
    ) {
        let Some(name) = Section::item_name(definition) else {
            return;
        };
        let listed = Listed {
            digest: digest.to_owned(),
            hidden,
            input_schema: definition.get("inputSchema").cloned(),
        };
        self.listed.insert((section, name.to_owned()), listed);
    }

    /// The definition of `name` as last listed.
    pub fn listed(&self, section: Section, name: &str) -> Option<&Listed> {
        self.listed.get(&(section, name.to_owned()))
    }

    /// Whether the event with `key` is new to this session (and marks it seen).
    pub fn first_report(&mut self, key: &str) -> bool {
        self.reported.insert(key.to_owned())
    }
}
