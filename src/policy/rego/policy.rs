//! The loaded Rego policy and how it evaluates one hook.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::error::RegoError;
use super::input;
use super::testing::{self, RegoTest, TestOutcome};
use super::time_limit;
use super::vm::{CompiledQuery, VmAnswer};
use crate::hooks::decision::Decision;
use crate::hooks::{GatewayContext, HookRequest, Metadata};

/// The query evaluated when `[policy] query` is not set.
pub const DEFAULT_QUERY: &str = "data.acs.decision";

/// A loaded Rego policy: modules parsed and analysed, data merged.
///
/// Immutable once loaded, so one instance serves every session and a
/// reload can replace it whole. The query runs as a program on regorus's
/// VM; a policy the VM compiler cannot lower is interpreted, each
/// evaluation on a cheap clone of the prepared engine (its modules and
/// data are shared behind `Arc`s).
#[derive(Clone)]
pub struct RegoPolicy {
    engine: regorus::Engine,
    compiled: Option<Arc<CompiledQuery>>,
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
            .field("vm", &self.compiled.is_some())
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
        let value = match &self.compiled {
            Some(compiled) => match compiled.evaluate(input.clone())? {
                VmAnswer::Defined(value) => value,
                VmAnswer::Undefined => return Ok(None),
                // Definitions that disagree are an error the interpreter
                // names; the VM only reads them as undefined.
                VmAnswer::Unsure => self.interpret(input)?,
            },
            None => self.interpret(input)?,
        };
        if value == regorus::Value::Undefined {
            return Ok(None);
        }
        serde_json::to_value(&value)
            .map(Some)
            .map_err(|err| RegoError::Output(err.to_string()))
    }

    fn interpret(&self, input: regorus::Value) -> Result<regorus::Value, RegoError> {
        let mut engine = self.engine.clone();
        engine.set_input(input);
        engine
            .eval_rule(self.query.clone())
            .map_err(|err| RegoError::Evaluation(err.to_string()))
    }

    /// Whether the query runs on regorus's VM (else it is interpreted).
    pub fn runs_on_vm(&self) -> bool {
        self.compiled.is_some()
    }

    /// Whether an undefined query costs the VM alone (the program carries
    /// the undefined marker), rather than the VM and then the interpreter.
    pub fn vm_tells_undefined_apart(&self) -> bool {
        self.compiled
            .as_ref()
            .is_some_and(|compiled| compiled.is_marked())
    }

    /// The same policy, always interpreted (to compare the two).
    pub fn interpreted(mut self) -> Self {
        self.compiled = None;
        self
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
        engine.set_execution_timer_config(time_limit::timer());
        let compiled = CompiledQuery::compile(&engine, &query).map(Arc::new);
        Self {
            engine,
            compiled,
            query,
            default,
            policy_id,
            files,
            tests,
        }
    }
}
