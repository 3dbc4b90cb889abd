//! The undefined marker: a `default` for the query rule, compiled into the
//! VM's program only, that tells "no definition holds" from "definitions
//! disagree".
//!
//! regorus's VM reads definitions of a complete rule that disagree as
//! undefined, where the interpreter reports the conflict as the error it
//! is. With a default no policy can produce, the VM answers the marker when
//! no definition holds and stays undefined only on a conflict, so the
//! interpreter is asked only then, for its verdict.
//!
//! A default changes what every reader of the rule sees, so the marker is
//! added only when nothing in the policy but the query itself reads the
//! rule, and only when the policy has no `default` of its own for it. The
//! check reads the policy's source: any mention of the rule's name in code
//! (strings and comments aside), or any reference to `data` or to one of
//! the query's packages as a whole, keeps the marker out. That errs on the
//! side of the interpreter, never of a changed answer.

use regorus::unstable::{Module, Rule, RuleHead};

/// The value the VM answers when no definition of the query holds.
pub(super) const UNDEFINED_MARKER: &str = "acs-proxy: no definition of the query holds";

/// The name of the module that carries the marker.
const MARKER_MODULE: &str = "acs-proxy:undefined-marker.rego";

/// A query of the form `data.<package>.<rule>`, plain names only.
struct QueryRule<'a> {
    path: Vec<&'a str>,
}

impl<'a> QueryRule<'a> {
    fn parse(query: &'a str) -> Option<Self> {
        let path: Vec<&str> = query.split('.').collect();
        let plain = path.len() >= 3 && path[0] == "data" && path.iter().all(|s| is_identifier(s));
        plain.then_some(Self { path })
    }

    fn package(&self) -> String {
        self.path[1..self.path.len() - 1].join(".")
    }

    fn rule(&self) -> &'a str {
        self.path[self.path.len() - 1]
    }

    /// Whether `dotted` (`data.acs`) names a document that holds the rule
    /// without naming the rule itself.
    fn is_enclosed_by(&self, dotted: &[&str]) -> bool {
        dotted.len() < self.path.len() && self.path.starts_with(dotted)
    }
}

/// `engine` with the marker as the query rule's default, when the query
/// names a rule by a plain path, the policy has no default for it, and no
/// other part of the policy reads it.
pub(super) fn with_undefined_marker(
    engine: &regorus::Engine,
    query: &str,
) -> Option<regorus::Engine> {
    let query = QueryRule::parse(query)?;
    let mut engine = engine.clone();
    let readers_only_the_query = engine
        .get_modules()
        .iter()
        .all(|module| !reads_the_rule(module, &query));
    if !readers_only_the_query {
        return None;
    }
    let module = format!(
        "package {}\n\ndefault {} := \"{UNDEFINED_MARKER}\"\n",
        query.package(),
        query.rule()
    );
    engine.add_policy(MARKER_MODULE.to_owned(), module).ok()?;
    Some(engine)
}

/// Whether `module` has a default for the query rule, or anything in it
/// other than the rule's own definitions may read the rule.
fn reads_the_rule(module: &Module, query: &QueryRule<'_>) -> bool {
    let in_package = module.package.refr.span().text() == query.package();
    let imports = module.imports.iter().map(|import| import.span.text());
    let rules = module
        .policy
        .iter()
        .filter(|rule| !(in_package && defines(rule, query.rule())))
        .map(|rule| rule.span().text());
    let defaults_it = in_package
        && module
            .policy
            .iter()
            .any(|rule| matches!(rule.as_ref(), Rule::Default { refr, .. } if refr.span().text() == query.rule()));
    defaults_it || imports.chain(rules).any(|text| mentions(text, query))
}

/// Whether `rule` is one of the (non-default) definitions of `name`.
fn defines(rule: &Rule, name: &str) -> bool {
    let Rule::Spec { head, .. } = rule else {
        return false;
    };
    let refr = match head {
        RuleHead::Compr { refr, .. } | RuleHead::Set { refr, .. } | RuleHead::Func { refr, .. } => {
            refr
        }
    };
    refr.span().text() == name
}

/// Whether the code of `text` names the rule, or `data` or one of the
/// query's packages as a whole.
fn mentions(text: &str, query: &QueryRule<'_>) -> bool {
    let code = code_only(text);
    let words = words(&code);
    for (at, word) in words.iter().enumerate() {
        if *word == query.rule() {
            return true;
        }
        if *word == "data" {
            let dotted = dotted_path(&code, &words[at..]);
            if query.is_enclosed_by(&dotted) {
                return true;
            }
        }
    }
    false
}

/// `text` with string literals and comments blanked out.
fn code_only(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        code.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => drop(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
                code.push_str("\"\"");
            }
            '`' => {
                for c in chars.by_ref() {
                    if c == '`' {
                        break;
                    }
                }
                code.push_str("\"\"");
            }
            c => code.push(c),
        }
    }
    code
}

/// The identifiers of `code`, as slices of it.
fn words(code: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in code.char_indices() {
        let part = c.is_ascii_alphanumeric() || c == '_';
        match (start, part) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                words.push(&code[from..at]);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        words.push(&code[from..]);
    }
    words
}

/// The dotted path `data.a.b` that starts at `words[0]` in `code`: the
/// words joined by nothing but `.`.
fn dotted_path<'a>(code: &str, words: &[&'a str]) -> Vec<&'a str> {
    let mut path = vec![words[0]];
    for pair in words.windows(2) {
        let end = pair[0].as_ptr() as usize - code.as_ptr() as usize + pair[0].len();
        let next = pair[1].as_ptr() as usize - code.as_ptr() as usize;
        if &code[end..next] != "." {
            break;
        }
        path.push(pair[1]);
    }
    path
}

/// A Rego variable name: what may follow `data.` unquoted.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(modules: &[&str]) -> bool {
        let mut engine = regorus::Engine::new();
        for (n, module) in modules.iter().enumerate() {
            engine
                .add_policy(format!("m{n}.rego"), (*module).to_owned())
                .unwrap();
        }
        with_undefined_marker(&engine, "data.acs.decision").is_some()
    }

    const DECISION: &str = "package acs\nimport rego.v1\n\
        # the decision\n\
        decision := {\"decision\": \"deny\"} if input.tool == \"rm\"\n\
        decision := {\"decision\": \"allow\", \"reasoning\": `a decision`} if input.tool == \"ls\"\n";

    #[test]
    fn a_query_read_by_nothing_else_is_marked() {
        assert!(marked(&[DECISION]));
        let helper = "package acs.common\nimport rego.v1\ntool := input.tool\n";
        let user = "package acs.tools\nimport rego.v1\nimport data.acs.common\nx := common.tool\n";
        assert!(marked(&[DECISION, helper, user]));
    }

    #[test]
    fn a_policy_that_reads_the_rule_or_defaults_it_is_not_marked() {
        let readers = [
            "package acs\nimport rego.v1\nlogged if decision\n",
            "package other\nimport rego.v1\nx := data.acs.decision\n",
            "package other\nimport rego.v1\nimport data.acs.decision as d\n",
            "package other\nimport rego.v1\nimport data.acs\nx := acs[\"deci\" + \"sion\"]\n",
            "package other\nimport rego.v1\nx := data.acs[k] if k := \"decision\"\n",
            "package other\nimport rego.v1\nx := walk(data)\n",
            "package acs\ndefault decision := {\"decision\": \"ask\"}\n",
        ];
        for reader in readers {
            assert!(!marked(&[DECISION, reader]), "{reader}");
        }
    }

    #[test]
    fn only_plain_rule_paths_are_marked() {
        let engine = regorus::Engine::new();
        for query in [
            "data.acs",
            "data.acs[\"x\"].decision",
            "acs.decision",
            "data.1a.b",
        ] {
            assert!(with_undefined_marker(&engine, query).is_none(), "{query}");
        }
        assert!(with_undefined_marker(&engine, "data.acs.v1.decision").is_some());
    }

    #[test]
    fn strings_and_comments_are_not_code() {
        assert_eq!(
            code_only("a := \"de\\\"cision\" # decision\nb := `x`"),
            "a := \"\" \nb := \"\""
        );
    }
}
