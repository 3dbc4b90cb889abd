//! `x-mcp-header`: a tool's `inputSchema` may mark primitive arguments to
//! be mirrored into `Mcp-Param-{Name}` headers. An annotation is valid only
//! on a `string`, `integer` or `boolean` property reached from the schema
//! root through `properties` keys alone, with a non-empty HTTP token as its
//! value, unique (ignoring case) within the schema; anywhere else it makes
//! the whole tool definition invalid.

use serde_json::{Map, Value};

/// The schema keyword naming an argument's header.
const ANNOTATION: &str = "x-mcp-header";

/// One argument a tool mirrors into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The header is `Mcp-Param-{name}`.
    pub name: String,
    /// The `properties` keys leading from the arguments to the value.
    pub path: Vec<String>,
}

/// Why a tool's `x-mcp-header` annotations are invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAnnotation {
    /// Not a non-empty HTTP token.
    #[error("x-mcp-header {0:?} is not an HTTP header-name token")]
    NotAToken(String),
    /// Two annotations name the same header.
    #[error("x-mcp-header {0:?} is used twice")]
    Duplicate(String),
    /// On a property that is not a string, integer or boolean.
    #[error("x-mcp-header {0:?} is on a property that is not a string, integer or boolean")]
    NotPrimitive(String),
    /// Under `items`, a composition, a `$ref` or anything but `properties`.
    #[error("x-mcp-header is on a property not reachable through `properties` alone")]
    Unreachable,
}

/// The header annotations of one `inputSchema`, in schema order.
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, InvalidAnnotation> {
    let mut found = Vec::new();
    walk(input_schema, Some(&mut Vec::new()), &mut found)?;
    let mut seen: Vec<String> = Vec::new();
    for header in &found {
        let folded = header.name.to_ascii_lowercase();
        if seen.contains(&folded) {
            return Err(InvalidAnnotation::Duplicate(header.name.clone()));
        }
        seen.push(folded);
    }
    Ok(found)
}

/// Visits a schema node; `path` is `Some` while the node is reachable
/// through `properties` alone.
fn walk(
    node: &Value,
    mut path: Option<&mut Vec<String>>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), InvalidAnnotation> {
    match node {
        Value::Array(items) => {
            for item in items {
                walk(item, None, found)?;
            }
            Ok(())
        }
        Value::Object(schema) => {
            if let Some(annotation) = schema.get(ANNOTATION) {
                let Some(path) = path.as_deref() else {
                    return Err(InvalidAnnotation::Unreachable);
                };
                if path.is_empty() {
                    return Err(InvalidAnnotation::Unreachable);
                }
                found.push(annotated(annotation, schema, path)?);
            }
            for (key, value) in schema {
                match (key.as_str(), value) {
                    (ANNOTATION, _) => {}
                    ("properties", Value::Object(properties)) => {
                        for (name, property) in properties {
                            match path.as_deref_mut() {
                                Some(path) => {
                                    path.push(name.clone());
                                    let result = walk(property, Some(path), found);
                                    path.pop();
                                    result?;
                                }
                                None => walk(property, None, found)?,
                            }
                        }
                    }
                    _ => walk(value, None, found)?,
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn annotated(
    annotation: &Value,
    schema: &Map<String, Value>,
    path: &[String],
) -> Result<ParamHeader, InvalidAnnotation> {
    let name = match annotation.as_str() {
        Some(name) if is_token(name) => name.to_owned(),
        Some(name) => return Err(InvalidAnnotation::NotAToken(name.to_owned())),
        None => return Err(InvalidAnnotation::NotAToken(annotation.to_string())),
    };
    let primitive = |t: &str| matches!(t, "string" | "integer" | "boolean");
    let typed = match schema.get("type") {
        Some(Value::String(t)) => primitive(t),
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            names.len() == types.len()
                && names.iter().filter(|t| **t != "null").count() == 1
                && names.iter().all(|t| *t == "null" || primitive(t))
        }
        _ => false,
    };
    if !typed {
        return Err(InvalidAnnotation::NotPrimitive(name));
    }
    Ok(ParamHeader {
        name,
        path: path.to_vec(),
    })
}

/// RFC 9110 `token`: one or more `tchar`.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The header text of the argument at `path`; `None` when it is absent or
/// null (the header is then omitted).
pub fn argument_text(arguments: &Value, path: &[String]) -> Option<String> {
    let mut value = arguments;
    for key in path {
        value = value.get(key)?;
    }
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(match (number.as_i64(), number.as_u64()) {
            (Some(n), _) => n.to_string(),
            (_, Some(n)) => n.to_string(),
            _ => number.to_string(),
        }),
        other => Some(other.to_string()),
    }
}

/// Whether a decoded header value says what the body's argument says:
/// text for strings and booleans, numerically for numbers (`42` and `42.0`
/// agree).
pub fn agrees(header: &str, arguments: &Value, path: &[String]) -> bool {
    let mut value = arguments;
    for key in path {
        match value.get(key) {
            Some(next) => value = next,
            None => return false,
        }
    }
    match value {
        Value::Number(number) => match (header.trim().parse::<f64>(), number.as_f64()) {
            (Ok(said), Some(body)) => said == body,
            _ => argument_text(arguments, path).as_deref() == Some(header),
        },
        _ => argument_text(arguments, path).as_deref() == Some(header),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(schema: Value) -> Result<Vec<ParamHeader>, InvalidAnnotation> {
        param_headers(&schema)
    }

    #[test]
    fn annotations_reachable_through_properties_are_found() {
        let found = headers(json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"},
                "target": {"type": "object", "properties": {
                    "dry": {"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"}
                }}
            }
        }))
        .unwrap();
        assert_eq!(
            found,
            [
                ParamHeader {
                    name: "Region".into(),
                    path: vec!["region".into()]
                },
                ParamHeader {
                    name: "Dry-Run".into(),
                    path: vec!["target".into(), "dry".into()]
                }
            ]
        );
        assert_eq!(headers(json!({"type": "object"})).unwrap(), []);
    }

    #[test]
    fn invalid_annotations_invalidate_the_tool() {
        let unreachable = json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}
        }});
        assert_eq!(headers(unreachable), Err(InvalidAnnotation::Unreachable));
        let composed = json!({"oneOf": [{"type": "string", "x-mcp-header": "A"}]});
        assert_eq!(headers(composed), Err(InvalidAnnotation::Unreachable));
        let number = json!({"properties": {"n": {"type": "number", "x-mcp-header": "N"}}});
        assert_eq!(
            headers(number),
            Err(InvalidAnnotation::NotPrimitive("N".into()))
        );
        let spaced = json!({"properties": {"n": {"type": "string", "x-mcp-header": "a b"}}});
        assert_eq!(
            headers(spaced),
            Err(InvalidAnnotation::NotAToken("a b".into()))
        );
        let twice = json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "Same"},
            "b": {"type": "string", "x-mcp-header": "same"}
        }});
        assert_eq!(
            headers(twice),
            Err(InvalidAnnotation::Duplicate("same".into()))
        );
    }

    #[test]
    fn argument_values_become_header_text() {
        let args = json!({"s": "x y", "i": -7, "b": true, "n": null, "o": {"deep": 42}});
        let path = |keys: &[&str]| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        assert_eq!(argument_text(&args, &path(&["s"])).as_deref(), Some("x y"));
        assert_eq!(argument_text(&args, &path(&["i"])).as_deref(), Some("-7"));
        assert_eq!(argument_text(&args, &path(&["b"])).as_deref(), Some("true"));
        assert_eq!(argument_text(&args, &path(&["n"])), None);
        assert_eq!(argument_text(&args, &path(&["missing"])), None);
        assert_eq!(
            argument_text(&args, &path(&["o", "deep"])).as_deref(),
            Some("42")
        );
        assert!(agrees("42.0", &args, &path(&["o", "deep"])));
        assert!(!agrees("43", &args, &path(&["o", "deep"])));
        assert!(!agrees("True", &args, &path(&["b"])));
        assert!(!agrees("x", &args, &path(&["missing"])));
    }
}
