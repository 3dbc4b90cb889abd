//! Loading a Rego policy: files found, modules parsed, data merged, the
//! whole analysed once, and the query checked, all before the first hook.

use std::path::{Path, PathBuf};

use super::error::RegoError;
use super::files::{self, expand};
use super::policy::{RegoPolicy, DEFAULT_QUERY};
use super::testing;
use crate::policy::outcome;
use crate::policy::spec::{EngineKind, PolicySpec, Verdict};
use crate::policy::PolicySource;

/// What to load: the `[policy]` keys of `engine = "rego"`, with paths
/// resolved, or a directory handed to `acs-proxy policy test`.
#[derive(Debug, Clone, PartialEq)]
pub struct RegoSettings {
    /// The directory globs are relative to (the config file's).
    pub base: PathBuf,
    /// Globs of module files.
    pub patterns: Vec<String>,
    /// Data documents (JSON, or YAML by a `.yaml` / `.yml` extension),
    /// merged into `data`.
    pub data: Vec<PathBuf>,
    /// The rule whose value is the decision.
    pub query: String,
    /// The decision when the query is undefined.
    pub default: Verdict,
    /// `policy_id` in the decisions' `policy_references`.
    pub policy_id: String,
    /// Load `*_test.rego` files and collect `test_*` rules as well.
    pub with_tests: bool,
}

/// The data file names `acs-proxy policy test DIR` loads, as `opa test` does.
const DATA_FILE_NAMES: [&str; 3] = ["data.json", "data.yaml", "data.yml"];

impl RegoSettings {
    /// The settings `[policy]` gives, relative to `base`.
    pub fn from_spec(spec: &PolicySpec, base: &Path, policy_id: &str) -> Self {
        Self {
            base: base.to_owned(),
            patterns: spec.rego.clone(),
            data: spec.data.iter().map(|data| base.join(data)).collect(),
            query: spec
                .query
                .clone()
                .unwrap_or_else(|| DEFAULT_QUERY.to_owned()),
            default: spec.default,
            policy_id: policy_id.to_owned(),
            with_tests: false,
        }
    }

    /// Every `.rego` file under `dir` (tests included) and every
    /// `data.json` / `data.yaml` there, as `opa test DIR` loads them.
    pub fn for_directory(dir: &Path) -> Result<Self, RegoError> {
        let mut found = std::collections::BTreeSet::new();
        files::walk(dir, &mut found)?;
        let data = found
            .into_iter()
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| DATA_FILE_NAMES.contains(&name))
            })
            .collect();
        Ok(Self {
            base: dir.to_owned(),
            patterns: vec!["**/*.rego".to_owned()],
            data,
            query: DEFAULT_QUERY.to_owned(),
            default: Verdict::Allow,
            policy_id: dir.display().to_string(),
            with_tests: true,
        })
    }
}

impl RegoPolicy {
    /// Loads, parses and analyses the policy `settings` names.
    ///
    /// Stops at the first problem: the proxy will not run a policy it
    /// could only partly load.
    pub fn load(settings: &RegoSettings) -> Result<RegoPolicy, RegoError> {
        if settings.patterns.is_empty() {
            return Err(RegoError::NoPatterns);
        }
        let files = module_files(settings)?;
        let mut engine = regorus::Engine::new();
        let mut tests = Vec::new();
        for path in &files {
            let text = read(path)?;
            let package = engine
                .add_policy(path.display().to_string(), text.clone())
                .map_err(compile_error)?;
            if settings.with_tests {
                tests.extend(testing::discover(&package, path, &text));
            }
        }
        for path in &settings.data {
            engine
                .add_data(data(path)?)
                .map_err(|err| RegoError::Data {
                    path: path.clone(),
                    message: err.to_string(),
                })?;
        }
        prepare(&mut engine)?;
        check_query(&engine, &settings.query)?;
        Ok(RegoPolicy::new(
            engine,
            settings.query.clone(),
            outcome::fallback(settings.default, &settings.policy_id),
            settings.policy_id.clone(),
            files,
            tests,
        ))
    }
}

/// The Rego policy `[policy]` configures, if `engine = "rego"`; `base` is
/// the config file's directory (`None`: the working directory).
///
/// Keys that belong to the other engine are refused rather than ignored:
/// a rule or a glob that silently does nothing is a misconfiguration.
pub fn load_configured(
    spec: &PolicySpec,
    source: &PolicySource<'_>,
    base: Option<&Path>,
) -> Result<Option<RegoPolicy>, RegoError> {
    if spec.engine == EngineKind::Rules {
        let misplaced = [
            ("rego", !spec.rego.is_empty()),
            ("data", spec.data.is_some()),
            ("query", spec.query.is_some()),
        ];
        return match misplaced.into_iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(RegoError::RegoKeyWithRules { key }),
            None => Ok(None),
        };
    }
    if let Some(rule) = spec.rules.first() {
        return Err(RegoError::RulesWithRego {
            file: source.name.to_owned(),
            line: source.line_of(&rule.span()),
        });
    }
    let base = base.unwrap_or(Path::new("."));
    let policy_id = spec.id.as_deref().unwrap_or(source.name);
    RegoPolicy::load(&RegoSettings::from_spec(spec, base, policy_id)).map(Some)
}

/// The files of every glob, in order and without repeats.
fn module_files(settings: &RegoSettings) -> Result<Vec<PathBuf>, RegoError> {
    let mut files = Vec::new();
    for pattern in &settings.patterns {
        let mut any = false;
        for path in expand(&settings.base, pattern)? {
            if !(settings.with_tests || files::is_policy_module(&path)) {
                continue;
            }
            any = true;
            if !files.contains(&path) {
                files.push(path);
            }
        }
        if !any {
            return Err(RegoError::NoFiles {
                pattern: settings.base.join(pattern).display().to_string(),
            });
        }
    }
    Ok(files)
}

fn read(path: &Path) -> Result<String, RegoError> {
    std::fs::read_to_string(path).map_err(|source| RegoError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A data document: YAML by extension, JSON otherwise.
fn data(path: &Path) -> Result<regorus::Value, RegoError> {
    let text = read(path)?;
    let yaml = path
        .extension()
        .is_some_and(|ext| ext == "yaml" || ext == "yml");
    let parsed = if yaml {
        regorus::Value::from_yaml_str(&text)
    } else {
        regorus::Value::from_json_str(&text)
    };
    parsed.map_err(|err| RegoError::Data {
        path: path.to_owned(),
        message: err.to_string(),
    })
}

/// Analyses the modules (undefined names, unsafe variables, recursion)
/// now rather than on the first hook; evaluating a trivial query is the
/// public way to have regorus do it.
fn prepare(engine: &mut regorus::Engine) -> Result<(), RegoError> {
    engine
        .eval_query("true".to_owned(), false)
        .map(drop)
        .map_err(compile_error)
}

/// regorus reports `--> file:line:col`, a source excerpt, then
/// `error: message`; the first line becomes `file:line:col: message`, as
/// the other config errors read, with the excerpt kept below it.
fn compile_error(err: anyhow::Error) -> RegoError {
    let raw = err.to_string();
    let location = raw
        .lines()
        .find_map(|line| line.trim().strip_prefix("--> "));
    let message = raw.lines().find_map(|line| line.strip_prefix("error: "));
    let (Some(location), Some(message)) = (location, message) else {
        return RegoError::Compile(raw);
    };
    let excerpt: Vec<&str> = raw
        .lines()
        .skip_while(|line| !line.trim().starts_with("--> "))
        .skip(1)
        .take_while(|line| !line.starts_with("error: "))
        .collect();
    RegoError::Compile(format!("{location}: {message}\n{}", excerpt.join("\n")))
}

/// The query must name a rule the modules define; evaluating it once with
/// an empty input proves that (and that it does not fail outright).
fn check_query(engine: &regorus::Engine, query: &str) -> Result<(), RegoError> {
    let mut probe = engine.clone();
    probe.set_input(regorus::Value::new_object());
    probe
        .eval_rule(query.to_owned())
        .map(drop)
        .map_err(|err| RegoError::Query {
            query: query.to_owned(),
            message: err.to_string(),
        })
}
