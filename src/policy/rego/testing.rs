//! Rego unit tests, as `opa test` runs them: every rule whose name starts
//! with `test_`, in any package, must evaluate to `true`.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// One `test_*` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegoTest {
    /// `data.<package>.<name>`: what is evaluated.
    pub path: String,
    /// The rule's name.
    pub name: String,
    /// The module that defines it.
    pub file: PathBuf,
    /// The line of its (first) definition.
    pub line: usize,
}

/// How one test went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestOutcome {
    /// It evaluated to `true`.
    Pass,
    /// It evaluated to something else, was undefined, or failed: why.
    Fail(String),
}

/// A rule head at the start of a line named `test_…`. Rules are written
/// flush left by `opa fmt`, and a test must be a top-level rule.
static TEST_RULE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(test_[A-Za-z0-9_]*)\b").expect("a fixed pattern that compiles")
});

/// The `test_*` rules of one module of `package` (`data.…`), each once.
pub(super) fn discover(package: &str, file: &Path, text: &str) -> Vec<RegoTest> {
    let mut tests: Vec<RegoTest> = Vec::new();
    for found in TEST_RULE.captures_iter(text) {
        let Some(name) = found.get(1) else { continue };
        if tests.iter().any(|test| test.name == name.as_str()) {
            continue;
        }
        let line = text[..name.start()].matches('\n').count() + 1;
        tests.push(RegoTest {
            path: format!("{package}.{}", name.as_str()),
            name: name.as_str().to_owned(),
            file: file.to_owned(),
            line,
        });
    }
    tests
}

/// Evaluates `test` on a clone of the prepared engine, without input and
/// without the per-hook time limit (a test may evaluate many hooks).
pub(super) fn run(engine: &regorus::Engine, test: &RegoTest) -> TestOutcome {
    let mut engine = engine.clone();
    engine.clear_execution_timer_config();
    engine.set_input(regorus::Value::Undefined);
    match engine.eval_rule(test.path.clone()) {
        Ok(regorus::Value::Bool(true)) => TestOutcome::Pass,
        Ok(regorus::Value::Undefined) => TestOutcome::Fail("undefined".to_owned()),
        Ok(other) => TestOutcome::Fail(format!("evaluated to {other}")),
        Err(err) => TestOutcome::Fail(format!("error: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_test_rule_once_with_its_line() {
        let text = "package x\n\ntest_a if { true }\n\ntest_a if { false }\n  test_nested := 1\ntest_b := true\nnot_test_c := 1\n";
        let tests = discover("data.x", Path::new("x_test.rego"), text);
        let found: Vec<(&str, usize)> = tests.iter().map(|t| (t.path.as_str(), t.line)).collect();
        assert_eq!(found, [("data.x.test_a", 3), ("data.x.test_b", 7)]);
    }
}
