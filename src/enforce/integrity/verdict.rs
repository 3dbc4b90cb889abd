//! What the integrity checks conclude about one listed definition, and the
//! events and reason codes that follow from it.

use super::scan::Finding;
use super::section::Section;
use crate::config::RuleKind;

/// How a definition stands against the pin file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinStatus {
    /// Pinned with this digest; `reviewed` when a person accepted its findings.
    Pinned {
        /// The pin's `reviewed` mark.
        reviewed: bool,
    },
    /// Pinned just now: the first session to see this upstream.
    PinnedOnFirstUse,
    /// Pinned with another digest: the definition changed (a rug pull).
    Changed {
        /// The digest in the pin file.
        pinned: String,
    },
    /// Not in the pin file, and not trusted on first use.
    Unpinned,
}

/// The bounded kinds of integrity event: the `kind` label of
/// `acs_proxy_integrity_events_total` and the first word of audit details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A definition differs from its pin.
    DefinitionChanged,
    /// A definition has no pin.
    Unpinned,
    /// A poisoning rule matched.
    Poisoning,
    /// A definition shadows another upstream's tool.
    Shadowing,
    /// `tools/call` arguments failed the tool's schema.
    InvalidArguments,
    /// A call named a definition the checks hid (or never saw listed).
    HiddenCalled,
}

impl EventKind {
    /// The metric label and audit spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::DefinitionChanged => "definition_changed",
            EventKind::Unpinned => "unpinned",
            EventKind::Poisoning => "poisoning",
            EventKind::Shadowing => "shadowing",
            EventKind::InvalidArguments => "invalid_arguments",
            EventKind::HiddenCalled => "hidden_called",
        }
    }

    /// The reason code a denial for this kind carries, for `section`:
    /// `tool_definition_changed`, `prompt_poisoning`, ….
    pub fn reason_code(self, section: Section) -> String {
        let prefix = match section {
            Section::Tools => "tool",
            Section::Prompts => "prompt",
            Section::ResourceTemplates => "resource_template",
        };
        let suffix = match self {
            EventKind::DefinitionChanged => "definition_changed",
            EventKind::Unpinned => "definition_unpinned",
            EventKind::Poisoning => "poisoning",
            EventKind::Shadowing => "shadowing",
            EventKind::InvalidArguments => return "invalid_arguments".into(),
            EventKind::HiddenCalled => "definition_unknown",
        };
        format!("{prefix}_{suffix}")
    }
}

/// One thing to audit, log and count about a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Readable detail naming the definition and where in it.
    pub detail: String,
    /// A key that is the same each time the same thing is seen again, so a
    /// session reports it once.
    pub key: String,
}

/// The checks' conclusion about one listed definition.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Which list it is in.
    pub section: Section,
    /// Its upstream route.
    pub upstream: String,
    /// Its name.
    pub name: String,
    /// Its digest as listed.
    pub digest: String,
    /// How it stands against the pin file.
    pub pin: PinStatus,
    /// What the poisoning scan found.
    pub findings: Vec<Finding>,
}

impl Verdict {
    /// `tool demo/echo`.
    pub fn subject(&self) -> String {
        format!("{} {}/{}", self.section.noun(), self.upstream, self.name)
    }

    /// Why `enforce` keeps it from the agent, if it does: a changed or
    /// unpinned definition, or findings nobody reviewed.
    pub fn hide_reason(&self) -> Option<EventKind> {
        match &self.pin {
            PinStatus::Changed { .. } => return Some(EventKind::DefinitionChanged),
            PinStatus::Unpinned => return Some(EventKind::Unpinned),
            PinStatus::Pinned { reviewed: true } => return None,
            PinStatus::Pinned { reviewed: false } | PinStatus::PinnedOnFirstUse => {}
        }
        let kinds = self.findings.iter().map(|finding| finding.kind);
        let mut hidden = None;
        for kind in kinds {
            if kind == RuleKind::Shadowing {
                hidden.get_or_insert(EventKind::Shadowing);
            } else {
                hidden = Some(EventKind::Poisoning);
            }
        }
        hidden
    }

    /// Everything worth reporting.
    pub fn events(&self) -> Vec<Event> {
        let subject = self.subject();
        let mut events = Vec::new();
        match &self.pin {
            PinStatus::Changed { pinned } => events.push(Event {
                kind: EventKind::DefinitionChanged,
                detail: format!(
                    "definition_changed: {subject} differs from its pin (pinned sha256 {pinned}, listed sha256 {})",
                    self.digest
                ),
                key: format!("changed {subject} {}", self.digest),
            }),
            PinStatus::Unpinned => events.push(Event {
                kind: EventKind::Unpinned,
                detail: format!("unpinned: {subject} (sha256 {}) is not in the pin file", self.digest),
                key: format!("unpinned {subject} {}", self.digest),
            }),
            PinStatus::Pinned { .. } | PinStatus::PinnedOnFirstUse => {}
        }
        let reviewed = self.pin == PinStatus::Pinned { reviewed: true };
        for finding in &self.findings {
            let kind = if finding.kind == RuleKind::Shadowing {
                EventKind::Shadowing
            } else {
                EventKind::Poisoning
            };
            let note = if reviewed {
                " (pinned as reviewed)"
            } else {
                ""
            };
            events.push(Event {
                kind,
                detail: format!(
                    "{}: {subject} at {}: rule {} ({}) matched {:?}{note}",
                    kind.as_str(),
                    finding.location,
                    finding.rule,
                    finding.kind.as_str(),
                    finding.excerpt
                ),
                key: format!(
                    "{} {subject} {} {} {}",
                    kind.as_str(),
                    self.digest,
                    finding.rule,
                    finding.location
                ),
            });
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(pin: PinStatus, findings: Vec<Finding>) -> Verdict {
        Verdict {
            section: Section::Tools,
            upstream: "demo".into(),
            name: "echo".into(),
            digest: "new".into(),
            pin,
            findings,
        }
    }

    fn finding(kind: RuleKind) -> Finding {
        Finding {
            rule: "r".into(),
            kind,
            location: "/description".into(),
            excerpt: "x".into(),
        }
    }

    #[test]
    fn changed_and_unpinned_definitions_are_hidden() {
        let changed = verdict(
            PinStatus::Changed {
                pinned: "old".into(),
            },
            vec![],
        );
        assert_eq!(changed.hide_reason(), Some(EventKind::DefinitionChanged));
        assert!(changed.events()[0]
            .detail
            .contains("pinned sha256 old, listed sha256 new"));
        assert_eq!(
            verdict(PinStatus::Unpinned, vec![]).hide_reason(),
            Some(EventKind::Unpinned)
        );
        assert_eq!(
            verdict(PinStatus::Pinned { reviewed: false }, vec![]).hide_reason(),
            None
        );
        assert_eq!(
            EventKind::DefinitionChanged.reason_code(Section::Tools),
            "tool_definition_changed"
        );
    }

    #[test]
    fn findings_hide_unless_reviewed() {
        let poisoned = vec![
            finding(RuleKind::Shadowing),
            finding(RuleKind::HiddenInstruction),
        ];
        assert_eq!(
            verdict(PinStatus::PinnedOnFirstUse, poisoned.clone()).hide_reason(),
            Some(EventKind::Poisoning)
        );
        let reviewed = verdict(PinStatus::Pinned { reviewed: true }, poisoned);
        assert_eq!(reviewed.hide_reason(), None);
        assert_eq!(
            reviewed.events().len(),
            2,
            "reviewed findings are still reported"
        );
        let shadow = verdict(
            PinStatus::Pinned { reviewed: false },
            vec![finding(RuleKind::Shadowing)],
        );
        assert_eq!(shadow.hide_reason(), Some(EventKind::Shadowing));
    }
}
