//! The three kinds of definition a server lists and the proxy pins.

use serde_json::Value;

/// A list of definitions an MCP server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `tools/list`; used through `tools/call`.
    Tools,
    /// `prompts/list`; used through `prompts/get`.
    Prompts,
    /// `resources/templates/list`.
    ResourceTemplates,
}

impl Section {
    /// Every section, in pin-file order.
    pub const ALL: [Section; 3] = [Section::Tools, Section::Prompts, Section::ResourceTemplates];

    /// The section a list method returns.
    pub fn of_list(method: &str) -> Option<Section> {
        match method {
            "tools/list" => Some(Section::Tools),
            "prompts/list" => Some(Section::Prompts),
            "resources/templates/list" => Some(Section::ResourceTemplates),
            _ => None,
        }
    }

    /// The section a use method (`tools/call`, `prompts/get`) draws on.
    pub fn of_use(method: &str) -> Option<Section> {
        match method {
            "tools/call" => Some(Section::Tools),
            "prompts/get" => Some(Section::Prompts),
            _ => None,
        }
    }

    /// The list method.
    pub fn list_method(self) -> &'static str {
        match self {
            Section::Tools => "tools/list",
            Section::Prompts => "prompts/list",
            Section::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The server capability that says the list exists.
    pub fn capability(self) -> &'static str {
        match self {
            Section::Tools => "tools",
            Section::Prompts => "prompts",
            Section::ResourceTemplates => "resources",
        }
    }

    /// The member of a list result holding the items.
    pub fn result_field(self) -> &'static str {
        match self {
            Section::Tools => "tools",
            Section::Prompts => "prompts",
            Section::ResourceTemplates => "resourceTemplates",
        }
    }

    /// The pin-file key, and the singular noun used in messages.
    pub fn key(self) -> &'static str {
        match self {
            Section::Tools => "tools",
            Section::Prompts => "prompts",
            Section::ResourceTemplates => "resource_templates",
        }
    }

    /// One item, for messages: `tool`, `prompt`, `resource template`.
    pub fn noun(self) -> &'static str {
        match self {
            Section::Tools => "tool",
            Section::Prompts => "prompt",
            Section::ResourceTemplates => "resource template",
        }
    }

    /// An item's key: its `name`.
    pub fn item_name(item: &Value) -> Option<&str> {
        item.get("name").and_then(Value::as_str)
    }

    /// The items of a list result, if it has them.
    pub fn items(self, result: &Value) -> Option<&Vec<Value>> {
        result.get(self.result_field()).and_then(Value::as_array)
    }
}
