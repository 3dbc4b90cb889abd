//! The pin file: what a team reviewed and committed, per upstream.
//!
//! ```json
//! {
//!   "version": 1,
//!   "upstreams": {
//!     "demo": {
//!       "tools": {
//!         "echo": { "sha256": "9f2c…", "reviewed": false, "definition": { "name": "echo", … } }
//!       },
//!       "prompts": {},
//!       "resource_templates": {}
//!     }
//!   }
//! }
//! ```
//!
//! `sha256` is the hex SHA-256 of the definition as listed (every member:
//! name, title, description, input and output schemas, annotations),
//! canonicalized with RFC 8785 (JCS): the same digest `agbom/snapshot` and
//! `agbom/changed` carry as `definition_digest`. `reviewed: true` says a
//! person read a definition the poisoning scan flags and accepted it.
//! `definition` is the definition itself, kept so a review can show what
//! changed; only `sha256` is compared.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::IntegrityError;
use super::section::Section;
use crate::jcs;

/// The pin file's format version.
pub const PIN_FILE_VERSION: u32 = 1;

/// One pinned definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// Hex SHA-256 of the JCS-canonical definition.
    pub sha256: String,
    /// A person accepted what the poisoning scan flags in it.
    #[serde(default)]
    pub reviewed: bool,
    /// The definition as pinned, for diffs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
}

impl Pin {
    /// A pin of `definition` as listed now.
    pub fn of(definition: &Value) -> Self {
        Self {
            sha256: digest(definition),
            reviewed: false,
            definition: Some(definition.clone()),
        }
    }
}

/// The digest a definition is pinned by.
pub fn digest(definition: &Value) -> String {
    jcs::value_digest(definition)
}

/// One upstream's pins, by section and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamPins {
    /// Tools by name.
    #[serde(default)]
    pub tools: BTreeMap<String, Pin>,
    /// Prompts by name.
    #[serde(default)]
    pub prompts: BTreeMap<String, Pin>,
    /// Resource templates by name.
    #[serde(default)]
    pub resource_templates: BTreeMap<String, Pin>,
}

impl UpstreamPins {
    /// The pins of one section.
    pub fn section(&self, section: Section) -> &BTreeMap<String, Pin> {
        match section {
            Section::Tools => &self.tools,
            Section::Prompts => &self.prompts,
            Section::ResourceTemplates => &self.resource_templates,
        }
    }

    /// The pins of one section, for changing.
    pub fn section_mut(&mut self, section: Section) -> &mut BTreeMap<String, Pin> {
        match section {
            Section::Tools => &mut self.tools,
            Section::Prompts => &mut self.prompts,
            Section::ResourceTemplates => &mut self.resource_templates,
        }
    }
}

/// The whole pin file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinFile {
    /// [`PIN_FILE_VERSION`].
    pub version: u32,
    /// Pins by upstream route name (`[[upstream]] name`).
    #[serde(default)]
    pub upstreams: BTreeMap<String, UpstreamPins>,
}

impl Default for PinFile {
    fn default() -> Self {
        Self {
            version: PIN_FILE_VERSION,
            upstreams: BTreeMap::new(),
        }
    }
}

impl PinFile {
    /// Reads `path`; a missing file is an empty pin set (nothing pinned yet).
    pub fn load(path: &Path) -> Result<PinFile, IntegrityError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(PinFile::default()),
            Err(source) => {
                return Err(IntegrityError::ReadPins {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let file: PinFile =
            serde_json::from_str(&text).map_err(|source| IntegrityError::ParsePins {
                path: path.to_owned(),
                source,
            })?;
        if file.version != PIN_FILE_VERSION {
            return Err(IntegrityError::PinVersion {
                path: path.to_owned(),
                version: file.version,
                expected: PIN_FILE_VERSION,
            });
        }
        Ok(file)
    }

    /// Writes the file whole: to a temporary file beside it, then renamed
    /// over it, so a reader never sees half a pin file.
    pub fn save(&self, path: &Path) -> Result<(), IntegrityError> {
        let write_error = |source| IntegrityError::WritePins {
            path: path.to_owned(),
            source,
        };
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|err| write_error(std::io::Error::other(err)))?;
        text.push('\n');
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text).map_err(write_error)?;
        std::fs::rename(&temporary, path).map_err(write_error)
    }

    /// The pin of one definition.
    pub fn pin(&self, upstream: &str, section: Section, name: &str) -> Option<&Pin> {
        self.upstreams.get(upstream)?.section(section).get(name)
    }

    /// Whether the file holds anything for this upstream's section.
    pub fn knows(&self, upstream: &str, section: Section) -> bool {
        self.upstreams
            .get(upstream)
            .is_some_and(|pins| !pins.section(section).is_empty())
    }

    /// Pins `definition`, keeping the `reviewed` mark only when the digest
    /// is unchanged (a review covers the text that was read).
    pub fn approve(&mut self, upstream: &str, section: Section, definition: &Value) {
        if let Some(name) = Section::item_name(definition) {
            self.set_pin(upstream, section, name, Pin::of(definition));
        }
    }

    /// Sets one pin; a `reviewed` mark already there stays while the
    /// digest is the same.
    pub fn set_pin(&mut self, upstream: &str, section: Section, name: &str, mut pin: Pin) {
        let pins = self
            .upstreams
            .entry(upstream.to_owned())
            .or_default()
            .section_mut(section);
        if let Some(old) = pins.get(name) {
            pin.reviewed |= old.reviewed && old.sha256 == pin.sha256;
        }
        pins.insert(name.to_owned(), pin);
    }

    /// Names pinned for other upstreams' tools, with their upstream: what a
    /// tool of `upstream` must not shadow.
    pub fn foreign_tools<'a>(
        &'a self,
        upstream: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.upstreams
            .iter()
            .filter(move |(name, _)| name.as_str() != upstream)
            .flat_map(|(name, pins)| {
                pins.tools
                    .keys()
                    .map(move |tool| (name.as_str(), tool.as_str()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_and_a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.json");
        assert_eq!(PinFile::load(&path).unwrap(), PinFile::default());
        let mut file = PinFile::default();
        file.approve(
            "demo",
            Section::Tools,
            &json!({"name":"echo","description":"Echo"}),
        );
        file.save(&path).unwrap();
        let loaded = PinFile::load(&path).unwrap();
        assert_eq!(loaded, file);
        let pin = loaded.pin("demo", Section::Tools, "echo").unwrap();
        assert_eq!(
            pin.sha256,
            digest(&json!({"description":"Echo","name":"echo"}))
        );
    }

    #[test]
    fn approving_a_changed_definition_drops_the_review() {
        let mut file = PinFile::default();
        let v1 = json!({"name":"t","description":"one"});
        file.approve("a", Section::Tools, &v1);
        file.upstreams
            .get_mut("a")
            .unwrap()
            .tools
            .get_mut("t")
            .unwrap()
            .reviewed = true;
        file.approve("a", Section::Tools, &v1);
        assert!(file.pin("a", Section::Tools, "t").unwrap().reviewed);
        file.approve(
            "a",
            Section::Tools,
            &json!({"name":"t","description":"two"}),
        );
        assert!(!file.pin("a", Section::Tools, "t").unwrap().reviewed);
    }

    #[test]
    fn a_wrong_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.json");
        std::fs::write(&path, r#"{"version":9,"upstreams":{}}"#).unwrap();
        assert!(matches!(
            PinFile::load(&path),
            Err(IntegrityError::PinVersion { .. })
        ));
    }
}
