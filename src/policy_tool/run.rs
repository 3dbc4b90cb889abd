//! Running the tools: collecting tests under a directory, evaluating, and
//! the lines printed for each.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use super::error::ToolError;
use super::fixture::Fixture;
use super::hook_file::HookFile;
use crate::config::Config;
use crate::guardian::embedded::{Explained, PolicyEngine};
use crate::policy::rego::{RegoSettings, TestOutcome};
use crate::policy::RegoPolicy;

/// One test's outcome, printed as `PASS name` or `FAIL name: why`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLine {
    /// What was tested (Rego rule path, or fixture file and case name).
    pub name: String,
    /// `None` on success, else why it failed.
    pub failure: Option<String>,
}

impl fmt::Display for TestLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.failure {
            None => write!(f, "PASS {}", self.name),
            Some(why) => write!(f, "FAIL {}: {why}", self.name),
        }
    }
}

/// Every test under a directory.
#[derive(Debug, Clone, Default)]
pub struct TestReport {
    /// One line per test, Rego tests first, then fixtures by file name.
    pub lines: Vec<TestLine>,
}

impl TestReport {
    /// How many tests failed.
    pub fn failed(&self) -> usize {
        self.lines.iter().filter(|l| l.failure.is_some()).count()
    }

    /// How many tests passed.
    pub fn passed(&self) -> usize {
        self.lines.len() - self.failed()
    }
}

/// Runs the Rego `test_*` rules and the `*.fixture.json` cases under `dir`.
///
/// A file that cannot be loaded at all (a module that does not compile, a
/// fixture that is not JSON, a config that does not load) counts as a
/// failed test naming the file, so one broken file does not hide the rest.
pub fn test_directory(dir: &Path) -> Result<TestReport, ToolError> {
    let mut report = TestReport::default();
    let files = files_under(dir)?;
    if files
        .iter()
        .any(|f| f.extension().is_some_and(|e| e == "rego"))
    {
        match RegoSettings::for_directory(dir).and_then(|s| RegoPolicy::load(&s)) {
            Ok(policy) => report.lines.extend(rego_tests(&policy)),
            Err(err) => report.lines.push(TestLine {
                name: dir.display().to_string(),
                failure: Some(err.to_string()),
            }),
        }
    }
    for fixture in files.iter().filter(|f| is_fixture(f)) {
        match fixture_tests(fixture) {
            Ok(lines) => report.lines.extend(lines),
            Err(err) => report.lines.push(TestLine {
                name: fixture.display().to_string(),
                failure: Some(err.to_string()),
            }),
        }
    }
    Ok(report)
}

/// Decides the hook in `hook_file` with the policy of `config`.
pub fn eval(config: &Path, hook_file: &Path) -> Result<Explained, ToolError> {
    let config = Config::load(config)?;
    let value = read_json(hook_file)?;
    let file = HookFile::from_value(&value).map_err(|message| ToolError::Format {
        path: hook_file.to_owned(),
        message,
    })?;
    let engine = PolicyEngine::from_config(&config);
    Ok(engine.explain(&file.hook, &file.metadata, Some(&file.context)))
}

fn rego_tests(policy: &RegoPolicy) -> Vec<TestLine> {
    policy
        .tests()
        .iter()
        .map(|test| TestLine {
            name: format!("{} ({}:{})", test.path, test.file.display(), test.line),
            failure: match policy.run_test(test) {
                TestOutcome::Pass => None,
                TestOutcome::Fail(why) => Some(why),
            },
        })
        .collect()
}

fn fixture_tests(path: &Path) -> Result<Vec<TestLine>, ToolError> {
    let fixture = Fixture::load(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let config = Config::load(&base.join(&fixture.config))?;
    let engine = PolicyEngine::from_config(&config);
    let lines = fixture
        .cases
        .iter()
        .map(|case| {
            let name = format!("{}: {}", path.display(), case.name);
            let failure = match HookFile::from_value(&case.hook) {
                Ok(file) => {
                    let result = engine.decide(&file.hook, &file.metadata, Some(&file.context));
                    case.expect.mismatch(&result)
                }
                Err(err) => Some(format!("bad hook: {err}")),
            };
            TestLine { name, failure }
        })
        .collect();
    Ok(lines)
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    if !dir.is_dir() {
        return Err(ToolError::Read {
            path: dir.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let mut found = BTreeSet::new();
    crate::policy::rego::walk(dir, &mut found)?;
    Ok(found.into_iter().collect())
}

fn is_fixture(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(".fixture.json"))
}

fn read_json(path: &Path) -> Result<serde_json::Value, ToolError> {
    let text = std::fs::read_to_string(path).map_err(|source| ToolError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|err| ToolError::Format {
        path: path.to_owned(),
        message: err.to_string(),
    })
}
