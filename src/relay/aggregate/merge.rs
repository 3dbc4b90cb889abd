//! Merging what several upstreams answer into one answer: the
//! `initialize` result, and the cursors of a merged, paginated list.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Map, Value};

/// One upstream's `initialize` result, with its name.
pub(super) struct Initialized<'a> {
    /// The `[[upstream]]` name.
    pub(super) name: &'a str,
    /// Its `result`.
    pub(super) result: &'a Value,
}

/// The virtual server's `initialize` result: the oldest protocol revision
/// any upstream chose (every upstream understands it), the union of their
/// capabilities, and their instructions joined under their names.
pub(super) fn initialize_result(aggregate: &str, upstreams: &[Initialized<'_>]) -> Value {
    let protocol = upstreams
        .iter()
        .filter_map(|u| u.result["protocolVersion"].as_str())
        .min()
        .unwrap_or("2025-06-18");
    let mut result = json!({
        "protocolVersion": protocol,
        "capabilities": capabilities(upstreams),
        "serverInfo": {"name": aggregate, "version": env!("CARGO_PKG_VERSION")},
    });
    let instructions: Vec<String> = upstreams
        .iter()
        .filter_map(|u| {
            let text = u.result["instructions"].as_str()?.trim();
            (!text.is_empty()).then(|| format!("[{}]\n{text}", u.name))
        })
        .collect();
    if !instructions.is_empty() {
        result["instructions"] = Value::from(instructions.join("\n\n"));
    }
    result
}

/// The union of the upstreams' capabilities. `listChanged` is always
/// offered for lists: an upstream that goes away changes them.
fn capabilities(upstreams: &[Initialized<'_>]) -> Value {
    let has = |key: &str| {
        upstreams
            .iter()
            .any(|u| u.result["capabilities"].get(key).is_some())
    };
    let mut merged = Map::new();
    if has("tools") {
        merged.insert("tools".into(), json!({"listChanged": true}));
    }
    if has("prompts") {
        merged.insert("prompts".into(), json!({"listChanged": true}));
    }
    if has("resources") {
        let subscribe = upstreams
            .iter()
            .any(|u| u.result["capabilities"]["resources"]["subscribe"] == true);
        merged.insert(
            "resources".into(),
            json!({"listChanged": true, "subscribe": subscribe}),
        );
    }
    for plain in ["logging", "completions"] {
        if has(plain) {
            merged.insert(plain.into(), json!({}));
        }
    }
    let mut experimental = Map::new();
    for upstream in upstreams {
        if let Some(Value::Object(entries)) = upstream.result["capabilities"].get("experimental") {
            for (key, value) in entries {
                experimental.entry(key.clone()).or_insert(value.clone());
            }
        }
    }
    if !experimental.is_empty() {
        merged.insert("experimental".into(), Value::Object(experimental));
    }
    Value::Object(merged)
}

/// Where a merged listing stands: for each upstream still to list, the
/// cursor to send it (`None`: its first page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Positions(pub(super) BTreeMap<usize, Option<String>>);

impl Positions {
    /// The first page: every upstream in `legs` from its start.
    pub(super) fn start(legs: impl Iterator<Item = usize>) -> Self {
        Self(legs.map(|leg| (leg, None)).collect())
    }

    /// The agent's opaque cursor.
    pub(super) fn encode(&self) -> String {
        let map: Map<String, Value> = self
            .0
            .iter()
            .map(|(leg, cursor)| (leg.to_string(), Value::from(cursor.clone())))
            .collect();
        URL_SAFE_NO_PAD.encode(Value::Object(map).to_string())
    }

    /// Reads a cursor made by [`Positions::encode`]; `None` if it was not.
    pub(super) fn decode(cursor: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let Value::Object(map) = serde_json::from_slice(&bytes).ok()? else {
            return None;
        };
        let mut positions = BTreeMap::new();
        for (leg, cursor) in map {
            let cursor = match cursor {
                Value::Null => None,
                Value::String(text) => Some(text),
                _ => return None,
            };
            positions.insert(leg.parse().ok()?, cursor);
        }
        Some(Self(positions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_united_and_instructions_joined() {
        let a = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}, "logging": {}},
            "instructions": "use a"});
        let b = json!({"protocolVersion": "2025-03-26", "capabilities": {"resources": {"subscribe": true}}});
        let merged = initialize_result(
            "all",
            &[
                Initialized {
                    name: "a",
                    result: &a,
                },
                Initialized {
                    name: "b",
                    result: &b,
                },
            ],
        );
        assert_eq!(merged["protocolVersion"], "2025-03-26");
        assert_eq!(merged["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(merged["capabilities"]["resources"]["subscribe"], true);
        assert!(merged["capabilities"].get("prompts").is_none());
        assert_eq!(merged["capabilities"]["logging"], json!({}));
        assert_eq!(merged["instructions"], "[a]\nuse a");
        assert_eq!(merged["serverInfo"]["name"], "all");
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        let mut positions = Positions::start([0, 2].into_iter());
        positions.0.insert(2, Some("page-2".into()));
        let cursor = positions.encode();
        assert_eq!(Positions::decode(&cursor), Some(positions));
        assert_eq!(Positions::decode("not a cursor"), None);
    }
}
