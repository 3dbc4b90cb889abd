//! `[integrity]`: pinned tool definitions, the poisoning scan and argument
//! checks (what the relay does with them is in `enforce::integrity`).
//!
//! The rules are data: the shipped set lives in
//! `src/enforce/integrity/default_rules.toml` in the same `[[rule]]` form a
//! deployment adds its own with `[[integrity.rule]]`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{resolve_file, PathSetting, SectionPaths};

/// How far the integrity checks go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntegrityMode {
    /// No pin checks and no scan.
    #[default]
    Off,
    /// Check and report (audit, log, metrics); change nothing.
    Observe,
    /// Report, hide flagged definitions from lists and deny calls to them.
    Enforce,
}

/// What a poisoning rule looks for; the label of its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Invisible or deceptive Unicode: tag characters, zero-width, bidi controls.
    HiddenUnicode,
    /// Markup or phrasing that addresses the model instead of describing the tool.
    HiddenInstruction,
    /// Instructions to read credentials or sensitive files.
    CredentialAccess,
    /// Instructions to send data somewhere.
    Exfiltration,
    /// Instructions to hide actions from the user.
    Concealment,
    /// Steering how another tool is used.
    Shadowing,
    /// A description longer than any honest one needs to be.
    Overlong,
}

impl RuleKind {
    /// The audit and log spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::HiddenUnicode => "hidden_unicode",
            RuleKind::HiddenInstruction => "hidden_instruction",
            RuleKind::CredentialAccess => "credential_access",
            RuleKind::Exfiltration => "exfiltration",
            RuleKind::Concealment => "concealment",
            RuleKind::Shadowing => "shadowing",
            RuleKind::Overlong => "overlong",
        }
    }
}

/// One poisoning rule: a regular expression matched against every text of
/// a definition (descriptions, titles, schema defaults and enum values).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Stable name, quoted in findings.
    pub name: String,
    /// The regular expression (Rust `regex` syntax).
    pub pattern: String,
    /// What a match means.
    pub kind: RuleKind,
}

/// The `[integrity]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrityConfig {
    /// `off`, `observe` or `enforce`.
    #[serde(default)]
    pub mode: IntegrityMode,
    /// The pin file (JSON), relative to the config file.
    #[serde(default = "default_pins")]
    pub pins: PathBuf,
    /// Pin what the first session sees of an upstream the pin file does
    /// not know yet, and write the file; otherwise unknown definitions are
    /// not trusted.
    #[serde(default = "default_true")]
    pub trust_on_first_use: bool,
    /// Refuse a `tools/call` whose arguments do not satisfy the tool's
    /// `inputSchema`, before the Guardian or the server sees it.
    #[serde(default)]
    pub validate_arguments: bool,
    /// Take out of `tools/list` the tools the embedded rules deny this
    /// session's caller outright (whatever the arguments), so the model is
    /// not offered what it cannot use; calls to them are still denied.
    #[serde(default)]
    pub hide_denied_tools: bool,
    /// Descriptions longer than this (in characters) are flagged.
    #[serde(default = "default_max_description_chars")]
    pub max_description_chars: usize,
    /// Rules added to the shipped set.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSpec>,
}

impl Default for IntegrityConfig {
    fn default() -> Self {
        Self {
            mode: IntegrityMode::Off,
            pins: default_pins(),
            trust_on_first_use: true,
            validate_arguments: false,
            hide_denied_tools: false,
            max_description_chars: default_max_description_chars(),
            rules: Vec::new(),
        }
    }
}

impl IntegrityConfig {
    /// Whether anything of this section runs at all.
    pub fn is_active(&self) -> bool {
        self.mode != IntegrityMode::Off || self.validate_arguments || self.hide_denied_tools
    }

    /// Every configured rule must compile; the error names the rule.
    pub(super) fn validate(&self) -> Result<(), String> {
        for rule in &self.rules {
            if let Err(err) = regex::Regex::new(&rule.pattern) {
                return Err(format!(
                    "integrity.rule {:?}: the pattern does not compile: {err}",
                    rule.name
                ));
            }
        }
        if self.max_description_chars == 0 {
            return Err("integrity.max_description_chars must be at least 1".into());
        }
        Ok(())
    }
}

impl SectionPaths for IntegrityConfig {
    fn resolve_paths(&mut self, base: &Path) {
        resolve_file(base, &mut self.pins);
    }

    fn path_settings(&self) -> Vec<PathSetting> {
        if self.mode == IntegrityMode::Off {
            return Vec::new();
        }
        vec![PathSetting {
            key: "integrity.pins".into(),
            path: self.pins.clone(),
            on_path: false,
        }]
    }
}

fn default_pins() -> PathBuf {
    PathBuf::from("tool-pins.json")
}

fn default_true() -> bool {
    true
}

/// Published poisoning examples run to a few hundred characters; honest
/// descriptions of large tools stay well under this.
fn default_max_description_chars() -> usize {
    4096
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    #[test]
    fn defaults_are_off_with_trust_on_first_use() {
        let config = Config::from_toml("t.toml", "").unwrap();
        assert_eq!(config.integrity.mode, IntegrityMode::Off);
        assert!(config.integrity.trust_on_first_use);
        assert!(!config.integrity.is_active());
    }

    #[test]
    fn rules_are_parsed_and_checked() {
        let config = Config::from_toml(
            "t.toml",
            "[integrity]\nmode = \"enforce\"\npins = \"p.json\"\n[[integrity.rule]]\nname = \"x\"\npattern = \"(?i)exfil\"\nkind = \"exfiltration\"\n",
        )
        .unwrap();
        assert_eq!(config.integrity.rules[0].kind, RuleKind::Exfiltration);
        let err = Config::from_toml(
            "t.toml",
            "[[integrity.rule]]\nname = \"bad\"\npattern = \"(\"\nkind = \"shadowing\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("bad"), "{err}");
    }
}
