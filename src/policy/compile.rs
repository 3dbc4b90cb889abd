//! Turning a [`PolicySpec`] into a [`Policy`], with errors that name the
//! file, line and rule.

use std::collections::HashMap;

use serde::Deserialize;

use super::engine::Policy;
use super::error::{PolicyError, RuleProblem};
use super::limit::RateLimits;
use super::outcome;
use super::rule::Rule;
use super::source::PolicySource;
use super::spec::PolicySpec;

/// A TOML document of which only `[policy]` matters; other tables are
/// ignored so a whole `proxy.toml` can be read this way too.
#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    policy: PolicySpec,
}

impl Policy {
    /// Compiles and validates `spec`, which was parsed from `source`.
    ///
    /// Stops at the first bad rule: the proxy will not run with a policy
    /// it could only partly understand.
    pub fn compile(spec: &PolicySpec, source: &PolicySource<'_>) -> Result<Policy, PolicyError> {
        let policy_id = spec.id.as_deref().unwrap_or(source.name);
        let mut first_lines: HashMap<&str, usize> = HashMap::with_capacity(spec.rules.len());
        let mut rules = Vec::with_capacity(spec.rules.len());
        for spanned in &spec.rules {
            let rule = spanned.get_ref();
            let line = source.line_of(&spanned.span());
            let located = |problem| PolicyError::Rule {
                file: source.name.to_owned(),
                line,
                rule: rule.name.clone(),
                problem,
            };
            if let Some(&first_line) = first_lines.get(rule.name.as_str()) {
                return Err(located(RuleProblem::DuplicateName { first_line }));
            }
            first_lines.insert(&rule.name, line);
            rules.push(Rule::compile(rule, policy_id).map_err(located)?);
        }
        Ok(Policy::new(
            rules,
            outcome::fallback(spec.default, policy_id),
            spec.mode,
            RateLimits::compile(&spec.limits, source)?,
        ))
    }

    /// Parses `text` (a `proxy.toml`, or just its `[policy]` part) and
    /// compiles its policy; `name` is the file name used in errors.
    pub fn from_toml_str(name: &str, text: &str) -> Result<Policy, PolicyError> {
        let source = PolicySource::new(name, text);
        let document: Document =
            toml::from_str(text).map_err(|err| PolicyError::from_toml(&source, &err))?;
        Policy::compile(&document.policy, &source)
    }
}

impl PolicyError {
    /// Locates a TOML parse error in `source`.
    ///
    /// Keeps only the parser's one-line message (which names the key) and
    /// the line, to match the `file:line: ...` form of the other errors.
    pub fn from_toml(source: &PolicySource<'_>, err: &toml::de::Error) -> Self {
        PolicyError::Toml {
            file: source.name.to_owned(),
            line: err.span().map_or(1, |span| source.line_of(&span)),
            message: err.message().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles `text` and returns the error message, which must exist.
    fn error(text: &str) -> String {
        match Policy::from_toml_str("proxy.toml", text) {
            Ok(_) => panic!("policy should not compile:\n{text}"),
            Err(err) => err.to_string(),
        }
    }

    fn assert_starts(message: &str, prefix: &str) {
        assert!(
            message.starts_with(prefix),
            "{message:?} should start with {prefix:?}"
        );
    }

    #[test]
    fn duplicate_names_are_rejected() {
        let text = "[policy]\n\
            [[policy.rule]]\nname = \"a\"\ndecision = \"allow\"\n\
            [[policy.rule]]\nname = \"a\"\ndecision = \"allow\"\n";
        let message = error(text);
        assert_starts(&message, "proxy.toml:5: rule \"a\": duplicate rule name");
        assert!(message.contains("line 2"), "{message}");
    }

    #[test]
    fn bad_regex_names_line_rule_and_field() {
        let text = "[policy]\n\n[[policy.rule]]\nname = \"no-env\"\n\
            match = { pointer = \"/a\", regex = \"(\" }\ndecision = \"allow\"\n";
        assert_starts(
            &error(text),
            "proxy.toml:3: rule \"no-env\": invalid regex in match.regex: ",
        );
        let text = "[policy]\n[[policy.rule]]\nname = \"r\"\ndecision = \"modify\"\n\
            reasoning = \"x\"\nredact = { regex = \"[\" }\n";
        assert_starts(
            &error(text),
            "proxy.toml:2: rule \"r\": invalid regex in redact.regex: ",
        );
    }

    #[test]
    fn bad_glob_is_rejected() {
        let text =
            "[policy]\n[[policy.rule]]\nname = \"g\"\nhook = \"steps/{a\"\ndecision = \"allow\"\n";
        assert_starts(
            &error(text),
            "proxy.toml:2: rule \"g\": invalid glob in hook: ",
        );
        let text = "[policy]\n[[policy.rule]]\nname = \"g\"\ntool = \"x[\"\ndecision = \"allow\"\n";
        assert_starts(
            &error(text),
            "proxy.toml:2: rule \"g\": invalid glob in tool: ",
        );
    }

    #[test]
    fn bad_pointer_is_rejected() {
        let text = "[policy]\n[[policy.rule]]\nname = \"p\"\n\
            match = { pointer = \"arguments\", regex = \"x\" }\ndecision = \"allow\"\n";
        assert_starts(
            &error(text),
            "proxy.toml:2: rule \"p\": invalid JSON pointer in match.pointer: ",
        );
        let text = "[policy]\n[[policy.rule]]\nname = \"p\"\ndecision = \"modify\"\n\
            reasoning = \"x\"\nredact = { pointer = \"/a~2\", regex = \"x\" }\n";
        assert_starts(
            &error(text),
            "proxy.toml:2: rule \"p\": invalid JSON pointer in redact.pointer: ",
        );
    }

    #[test]
    fn missing_reasoning_is_rejected() {
        for decision in ["deny", "ask", "defer"] {
            let text =
                format!("[policy]\n[[policy.rule]]\nname = \"m\"\ndecision = \"{decision}\"\n");
            assert_starts(
                &error(&text),
                &format!("proxy.toml:2: rule \"m\": reasoning is required with decision = \"{decision}\""),
            );
        }
        let blank = "[policy]\n[[policy.rule]]\nname = \"m\"\ndecision = \"modify\"\n\
            reasoning = \"  \"\nset = { a = 1 }\n";
        assert_starts(
            &error(blank),
            "proxy.toml:2: rule \"m\": reasoning is required",
        );
    }

    #[test]
    fn blocks_must_fit_the_decision() {
        let cases = [
            (
                "decision = \"deny\"\nredact = { regex = \"x\" }",
                "`redact` is only allowed with decision = \"modify\"",
            ),
            (
                "decision = \"allow\"\nset = { a = 1 }",
                "`set` is only allowed with decision = \"modify\"",
            ),
            (
                "decision = \"deny\"\nask = { timeout_seconds = 5 }",
                "`ask` is only allowed with decision = \"ask\"",
            ),
            (
                "decision = \"ask\"\ndefer = { timeout_ms = 5 }",
                "`defer` is only allowed with decision = \"defer\"",
            ),
            (
                "decision = \"modify\"",
                "decision = \"modify\" needs `redact` or `set`",
            ),
            (
                "decision = \"modify\"\nset = {}",
                "decision = \"modify\" needs `redact` or `set`",
            ),
        ];
        for (body, problem) in cases {
            let text =
                format!("[policy]\n[[policy.rule]]\nname = \"b\"\nreasoning = \"r\"\n{body}\n");
            assert_starts(
                &error(&text),
                &format!("proxy.toml:2: rule \"b\": {problem}"),
            );
        }
    }

    #[test]
    fn other_rule_problems_are_located() {
        let empty = "[policy]\n[[policy.rule]]\nname = \"\"\ndecision = \"allow\"\n";
        assert_starts(
            &error(empty),
            "proxy.toml:2: rule \"\": name must not be empty",
        );
        let codes = "[policy]\n[[policy.rule]]\nname = \"c\"\ndecision = \"allow\"\n\
            reason_codes = [\"x\", \"x\"]\n";
        assert_starts(
            &error(codes),
            "proxy.toml:2: rule \"c\": reason code \"x\" is listed twice",
        );
        let nan = "[policy]\n[[policy.rule]]\nname = \"n\"\ndecision = \"modify\"\n\
            reasoning = \"r\"\nset = { x = nan }\n";
        assert_starts(&error(nan), "proxy.toml:2: rule \"n\": set.x: ");
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        let text = "[policy]\n[[policy.rule]]\nname = \"u\"\ndecision = \"allow\"\nreasonning = \"typo\"\n";
        let message = error(text);
        assert_starts(&message, "proxy.toml:5: ");
        assert!(message.contains("reasonning"), "{message}");
        let text = "[policy]\ndefualt = \"deny\"\n";
        let message = error(text);
        assert_starts(&message, "proxy.toml:2: ");
        assert!(message.contains("defualt"), "{message}");
    }

    #[test]
    fn bad_value_types_are_toml_errors() {
        let text = "[policy]\ndefault = \"ask\"\n";
        assert_starts(&error(text), "proxy.toml:2: ");
        let text = "[policy]\n[[policy.rule]]\nname = \"x\"\n";
        assert!(error(text).contains("decision"));
    }

    #[test]
    fn other_sections_are_ignored_by_from_toml_str() {
        let text = "[listen]\ntransport = \"stdio\"\n[policy]\ndefault = \"deny\"\n";
        let policy = Policy::from_toml_str("proxy.toml", text).expect("valid");
        assert_eq!(policy.rule_count(), 0);
    }

    #[test]
    fn compile_accepts_a_spec_parsed_elsewhere() {
        #[derive(Deserialize)]
        struct Config {
            policy: PolicySpec,
        }
        let text = "[policy]\n[[policy.rule]]\nname = \"x\"\ndecision = \"bogus\"\n";
        assert!(toml::from_str::<Config>(text).is_err());
        let text = "[policy]\n\n\n[[policy.rule]]\nname = \"x\"\ndecision = \"deny\"\n";
        let config: Config = toml::from_str(text).expect("valid TOML");
        let err = Policy::compile(&config.policy, &PolicySource::new("proxy.toml", text))
            .expect_err("deny without reasoning");
        assert_starts(&err.to_string(), "proxy.toml:4: rule \"x\"");
    }
}
