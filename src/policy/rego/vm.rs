//! The query compiled for regorus's virtual machine (RVM): the policy's
//! rules lowered once, at load, to a register program that evaluates a
//! hook several times faster than walking the syntax tree.
//!
//! A VM holds per-evaluation state, so each evaluation takes one from a
//! small pool of idle machines already loaded with the program and data,
//! and gives it back after. A policy the compiler cannot lower is
//! evaluated by the interpreter instead ([`CompiledQuery::compile`] gives
//! `None`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::{Program, RegoVM};
use regorus::utils::limits::ExecutionTimerConfig;
use regorus::CompiledPolicy;

use super::error::RegoError;

/// Idle machines kept for reuse; more evaluations at once build their own.
const IDLE_VMS: usize = 8;

/// The query as an RVM program, with the data it reads.
pub(super) struct CompiledQuery {
    program: Arc<Program>,
    policy: CompiledPolicy,
    data: regorus::Value,
    time_limit: Duration,
    idle: Mutex<Vec<RegoVM>>,
}

impl CompiledQuery {
    /// Lowers `query` of the prepared `engine`, each evaluation to stop
    /// after `time_limit`; `None` when the policy uses something the
    /// compiler does not lower (the interpreter evaluates it).
    pub(super) fn compile(
        engine: &regorus::Engine,
        query: &str,
        time_limit: Duration,
    ) -> Option<Self> {
        let mut engine = engine.clone();
        let policy = match engine.compile_with_entrypoint(&query.into()) {
            Ok(policy) => policy,
            Err(err) => return interpreted(query, &err.to_string()),
        };
        let program = match Compiler::compile_from_policy(&policy, &[query]) {
            Ok(program) => program,
            Err(err) => return interpreted(query, &err.to_string()),
        };
        let compiled = Self {
            program,
            policy,
            data: engine.get_data(),
            time_limit,
            idle: Mutex::default(),
        };
        // A first machine proves the data fits the program (no rule and
        // data document at the same path) before any hook depends on it.
        match compiled.machine() {
            Ok(vm) => compiled.lock_idle().push(vm),
            Err(err) => return interpreted(query, &err.to_string()),
        }
        Some(compiled)
    }

    /// The query's value for `input` (`Undefined` when no rule defines it).
    pub(super) fn evaluate(&self, input: regorus::Value) -> Result<regorus::Value, RegoError> {
        let idle = self.lock_idle().pop();
        let mut vm = match idle {
            Some(vm) => vm,
            None => self.machine()?,
        };
        vm.set_input(input);
        let result = vm
            .execute_entry_point_by_index(0)
            .map_err(|err| RegoError::Evaluation(err.to_string()));
        vm.set_input(regorus::Value::Undefined);
        let mut idle = self.lock_idle();
        if idle.len() < IDLE_VMS {
            idle.push(vm);
        }
        result
    }

    /// A machine loaded with the program and data, under the time limit.
    fn machine(&self) -> Result<RegoVM, RegoError> {
        let mut vm = RegoVM::new_with_policy(self.policy.clone());
        vm.load_program(self.program.clone());
        vm.set_data(self.data.clone())
            .map_err(|err| RegoError::Evaluation(err.to_string()))?;
        vm.set_execution_timer_config(Some(ExecutionTimerConfig {
            limit: self.time_limit,
            check_interval: std::num::NonZeroU32::MIN,
        }));
        // The time limit bounds an evaluation; a count of instructions
        // would refuse large data-driven policies that finish in time.
        vm.set_max_instructions(usize::MAX);
        Ok(vm)
    }

    /// A poisoned pool is still a list of whole machines.
    fn lock_idle(&self) -> MutexGuard<'_, Vec<RegoVM>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn interpreted(query: &str, reason: &str) -> Option<CompiledQuery> {
    tracing::debug!(%query, %reason, "the Rego VM cannot run this policy; interpreting it");
    None
}
