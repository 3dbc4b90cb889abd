//! The loaded Rego policy and how it evaluates one hook.

use std::path::PathBuf;
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;
use serde_json::Value;

use super::error::RegoError;
use super::input;
use super::testing::{self, RegoTest, TestOutcome};
use crate::hooks::decision::Decision;
use crate::hooks::{GatewayContext, HookRequest, Metadata};

/// The query evaluated when `[policy] query` is not set.
pub const DEFAULT_QUERY: &str = "data.acs.decision";

/// How long one evaluation may run before it is abandoned as a decision
/// failure: a policy that loops must not hold a session's message.
pub const EVALUATION_TIME_LIMIT: Duration = Duration::from_millis(100);

/// A loaded Rego policy: modules parsed and analysed, data merged.
///
/// Immutable once loaded; evaluation works on a cheap clone of the
/// prepared engine (its modules and data are shared behind `Arc`s), so one
/// instance serves every session and a reload can replace it whole.
#[derive(Clone)]
pub struct RegoPolicy {
    engine: regorus::Engine,
    query: String,
    default: Decision,
    policy_id: String,
    files: Vec<PathBuf>,
    tests: Vec<RegoTest>,
}

impl std::fmt::Debug for RegoPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegoPolicy")
            .field("query", &self.query)
            .field("policy_id", &self.policy_id)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl RegoPolicy {
    /// Evaluates the query for one hook: `Ok(None)` when the policy leaves
    /// it undefined, the decision object as JSON otherwise.
    pub fn evaluate(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
        context: Option<&GatewayContext>,
    ) -> Result<Option<Value>, RegoError> {
        let input = input::build(hook, metadata, context)?;
        self.evaluate_input(input)
    }

    /// Evaluates the query with an `input` document built elsewhere (the
    /// benches and the tooling).
    pub fn evaluate_input(&self, input: regorus::Value) -> Result<Option<Value>, RegoError> {
        let mut engine = self.engine.clone();
        engine.set_input(input);
        let value = engine
            .eval_rule(self.query.clone())
            .map_err(|err| RegoError::Evaluation(err.to_string()))?;
        if value == regorus::Value::Undefined {
            return Ok(None);
        }
        serde_json::to_value(&value)
            .map(Some)
            .map_err(|err| RegoError::Output(err.to_string()))
    }

    /// The decision when the query is undefined: the policy's `default`.
    pub fn default_decision(&self) -> &Decision {
        &self.default
    }

    /// `policy_id` in the decisions' `policy_references`.
    pub fn policy_id(&self) -> &str {
        &self.policy_id
    }

    /// The rule evaluated for every hook.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// The module files loaded, in load order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The `test_*` rules of the loaded modules (OPA's test convention).
    pub fn tests(&self) -> &[RegoTest] {
        &self.tests
    }

    /// Runs one `test_*` rule: it passes when it evaluates to `true`.
    pub fn run_test(&self, test: &RegoTest) -> TestOutcome {
        testing::run(&self.engine, test)
    }

    /// Wraps a prepared engine; `default` is the decision for an
    /// undefined query.
    pub(super) fn new(
        mut engine: regorus::Engine,
        query: String,
        default: Decision,
        policy_id: String,
        files: Vec<PathBuf>,
        tests: Vec<RegoTest>,
    ) -> Self {
        engine.set_execution_timer_config(ExecutionTimerConfig {
            limit: EVALUATION_TIME_LIMIT,
            check_interval: std::num::NonZeroU32::MIN,
        });
        Self {
            engine,
            query,
            default,
            policy_id,
            files,
            tests,
        }
    }
}
