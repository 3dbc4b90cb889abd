//! Taking definitions out of a list result before the agent sees it. Used
//! for definitions the integrity checks flag; any other reason to hide an
//! item (a policy that denies it to this caller) can use it too.

use std::collections::HashSet;

use serde_json::Value;

use super::section::Section;

/// Removes the items of `section` whose name is in `names` from a list
/// `result`; returns how many were removed.
pub fn hide_items(result: &mut Value, section: Section, names: &HashSet<String>) -> usize {
    let Some(items) = result
        .get_mut(section.result_field())
        .and_then(Value::as_array_mut)
    else {
        return 0;
    };
    let before = items.len();
    items.retain(|item| Section::item_name(item).is_none_or(|name| !names.contains(name)));
    before - items.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_named_items_go() {
        let mut result =
            json!({"tools":[{"name":"a"},{"name":"b"},{"name":"c"}],"nextCursor":null});
        let names = HashSet::from(["b".to_owned(), "z".to_owned()]);
        assert_eq!(hide_items(&mut result, Section::Tools, &names), 1);
        assert_eq!(result["tools"], json!([{"name":"a"},{"name":"c"}]));
        assert_eq!(hide_items(&mut result, Section::Prompts, &names), 0);
    }
}
