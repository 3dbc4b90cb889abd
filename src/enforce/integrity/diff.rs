//! A readable difference between a pinned definition and the listed one:
//! what a reviewer needs to see before approving a change.

use serde_json::{Map, Value};

use super::scan::is_invisible;

/// One line per difference: description and title text, input schema
/// properties added, removed or changed (widened or narrowed), required
/// arguments, and any other member that changed.
pub fn describe(old: &Value, new: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for field in ["title", "description"] {
        text_change(field, old.get(field), new.get(field), &mut lines);
    }
    schema_change(old.get("inputSchema"), new.get("inputSchema"), &mut lines);
    let empty = Map::new();
    let old_map = old.as_object().unwrap_or(&empty);
    let new_map = new.as_object().unwrap_or(&empty);
    let mut others: Vec<&String> = old_map.keys().chain(new_map.keys()).collect();
    others.sort();
    others.dedup();
    for key in others {
        if matches!(
            key.as_str(),
            "name" | "title" | "description" | "inputSchema"
        ) {
            continue;
        }
        match (old_map.get(key), new_map.get(key)) {
            (Some(a), Some(b)) if a != b => lines.push(format!("  ~ {key}: {a} -> {b}")),
            (None, Some(b)) => lines.push(format!("  + {key}: {b}")),
            (Some(a), None) => lines.push(format!("  - {key}: {a}")),
            _ => {}
        }
    }
    lines
}

fn text_change(field: &str, old: Option<&Value>, new: Option<&Value>, lines: &mut Vec<String>) {
    if old == new {
        return;
    }
    lines.push(format!("  {field}:"));
    if let Some(old) = old {
        lines.push(format!("    - {}", printable(old)));
    }
    if let Some(new) = new {
        lines.push(format!("    + {}", printable(new)));
    }
}

fn schema_change(old: Option<&Value>, new: Option<&Value>, lines: &mut Vec<String>) {
    let empty = Map::new();
    let properties = |schema: Option<&Value>| {
        schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let (before, after) = (properties(old), properties(new));
    for (name, schema) in &after {
        match before.get(name) {
            None => lines.push(format!("  + property {name}: {schema}")),
            Some(was) if was != schema => {
                lines.push(format!("  ~ property {name}: {was} -> {schema}"))
            }
            Some(_) => {}
        }
    }
    for (name, schema) in &before {
        if !after.contains_key(name) {
            lines.push(format!("  - property {name}: {schema}"));
        }
    }
    let required = |schema: Option<&Value>| -> Vec<String> {
        schema
            .and_then(|s| s.get("required"))
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (was, now) = (required(old), required(new));
    for name in now.iter().filter(|name| !was.contains(name)) {
        lines.push(format!("  + required {name}"));
    }
    for name in was.iter().filter(|name| !now.contains(name)) {
        lines.push(format!("  - required {name} (widened: now optional)"));
    }
    let rest = |schema: Option<&Value>| {
        let mut schema = schema.cloned().unwrap_or(Value::Null);
        if let Value::Object(map) = &mut schema {
            map.remove("properties");
            map.remove("required");
        }
        schema
    };
    let (rest_before, rest_after) = (rest(old), rest(new));
    if rest_before != rest_after {
        lines.push(format!("  ~ inputSchema: {rest_before} -> {rest_after}"));
    }
}

/// Text with invisible and control characters spelled out.
fn printable(value: &Value) -> String {
    let Some(text) = value.as_str() else {
        return value.to_string();
    };
    text.chars()
        .map(|c| {
            if c.is_control() || is_invisible(c) {
                format!("\\u{{{:X}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shows_text_and_schema_changes() {
        let old = json!({"name":"t","description":"Adds.","inputSchema":{"type":"object",
            "properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}});
        let new = json!({"name":"t","description":"Adds.\u{200B} <IMPORTANT>x</IMPORTANT>","inputSchema":{"type":"object",
            "properties":{"a":{"type":["number","string"]},"sidenote":{"type":"string"}},"required":["a"]},
            "annotations":{"readOnlyHint":false}});
        let lines = describe(&old, &new).join("\n");
        assert!(lines.contains("- Adds."), "{lines}");
        assert!(lines.contains("+ Adds.\\u{200B} <IMPORTANT>"), "{lines}");
        assert!(lines.contains("+ property sidenote"), "{lines}");
        assert!(lines.contains("- property b"), "{lines}");
        assert!(lines.contains("~ property a"), "{lines}");
        assert!(lines.contains("- required b (widened"), "{lines}");
        assert!(lines.contains("+ annotations"), "{lines}");
        assert!(describe(&old, &old).is_empty());
    }
}
