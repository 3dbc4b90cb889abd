//! The query compiled for regorus's virtual machine (RVM): the policy's
//! rules lowered once, at load, to a register program that evaluates a
//! hook several times faster than walking the syntax tree.
//!
//! A VM holds per-evaluation state, so each evaluation takes one from a
//! small pool of idle machines already loaded with the program and data,
//! and gives it back after. A policy the compiler cannot lower is
//! evaluated by the interpreter instead ([`CompiledQuery::compile`] gives
//! `None`).
//!
//! The program is compiled with the undefined marker where the policy
//! allows it (see `marker`), so that the answer tells a query no
//! definition of which holds from one whose definitions disagree.

use std::sync::{Arc, Mutex, MutexGuard};

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::{Program, RegoVM};
use regorus::CompiledPolicy;

use super::error::RegoError;
use super::marker::{with_undefined_marker, UNDEFINED_MARKER};
use super::time_limit;

/// Idle machines kept for reuse; more evaluations at once build their own.
const IDLE_VMS: usize = 8;

/// What the VM made of the query for one input.
#[derive(Debug, PartialEq)]
pub(super) enum VmAnswer {
    /// The query's value.
    Defined(regorus::Value),
    /// No definition of the query rule holds.
    Undefined,
    /// Undefined, for a reason the VM does not tell: definitions that
    /// disagree, or (without the marker) no definition holding.
    Unsure,
}

/// The query as an RVM program, with the data it reads.
pub(super) struct CompiledQuery {
    program: Arc<Program>,
    policy: CompiledPolicy,
    data: regorus::Value,
    /// Whether the program carries [`UNDEFINED_MARKER`].
    marked: bool,
    idle: Mutex<Vec<RegoVM>>,
}

impl CompiledQuery {
    /// Lowers `query` of the prepared `engine`, each evaluation to stop
    /// within the time limit; `None` when the policy uses something the
    /// compiler does not lower (the interpreter evaluates it).
    pub(super) fn compile(engine: &regorus::Engine, query: &str) -> Option<Self> {
        let marked = with_undefined_marker(engine, query).and_then(|mut engine| {
            lower(&mut engine, query)
                .ok()
                .map(|lowered| (engine, lowered))
        });
        let (engine, (policy, program), marked) = match marked {
            Some((engine, lowered)) => (engine, lowered, true),
            None => {
                let mut engine = engine.clone();
                match lower(&mut engine, query) {
                    Ok(lowered) => (engine, lowered, false),
                    Err(reason) => return interpreted(query, &reason),
                }
            }
        };
        let compiled = Self {
            program,
            policy,
            data: engine.get_data(),
            marked,
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

    /// Whether the program carries the undefined marker.
    pub(super) fn is_marked(&self) -> bool {
        self.marked
    }

    /// What the query is for `input`.
    pub(super) fn evaluate(&self, input: regorus::Value) -> Result<VmAnswer, RegoError> {
        let value = self.execute(input)?;
        Ok(match value {
            regorus::Value::Undefined => VmAnswer::Unsure,
            regorus::Value::String(ref text) if self.marked && **text == *UNDEFINED_MARKER => {
                VmAnswer::Undefined
            }
            value => VmAnswer::Defined(value),
        })
    }

    fn execute(&self, input: regorus::Value) -> Result<regorus::Value, RegoError> {
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
        vm.set_execution_timer_config(Some(time_limit::timer()));
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

/// The query as a policy and an RVM program of `engine`.
fn lower(
    engine: &mut regorus::Engine,
    query: &str,
) -> Result<(CompiledPolicy, Arc<Program>), String> {
    let policy = engine
        .compile_with_entrypoint(&query.into())
        .map_err(|err| err.to_string())?;
    let program =
        Compiler::compile_from_policy(&policy, &[query]).map_err(|err| err.to_string())?;
    Ok((policy, program))
}

fn interpreted(query: &str, reason: &str) -> Option<CompiledQuery> {
    tracing::debug!(%query, %reason, "the Rego VM cannot run this policy; interpreting it");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(rego: &str) -> CompiledQuery {
        let mut engine = regorus::Engine::new();
        engine.add_policy("p.rego".into(), rego.into()).unwrap();
        CompiledQuery::compile(&engine, "data.acs.decision").unwrap()
    }

    fn input(tool: &str) -> regorus::Value {
        regorus::Value::from_json_str(&format!(r#"{{"tool": "{tool}"}}"#)).unwrap()
    }

    const TWO_DEFINITIONS: &str = r#"package acs
import rego.v1
decision := "deny" if input.tool == "rm"
decision := "allow" if input.tool in {"echo", "rm"}
"#;

    #[test]
    fn no_definition_holding_is_told_apart_from_a_conflict() {
        let query = compiled(TWO_DEFINITIONS);
        assert!(query.marked);
        assert_eq!(
            query.evaluate(input("echo")).unwrap(),
            VmAnswer::Defined("allow".into())
        );
        assert_eq!(query.evaluate(input("ls")).unwrap(), VmAnswer::Undefined);
        assert_eq!(query.evaluate(input("rm")).unwrap(), VmAnswer::Unsure);
    }

    #[test]
    fn the_policys_own_default_answers_when_no_definition_holds() {
        let query = compiled(&format!("{TWO_DEFINITIONS}default decision := \"ask\"\n"));
        assert!(!query.marked);
        assert_eq!(
            query.evaluate(input("ls")).unwrap(),
            VmAnswer::Defined("ask".into())
        );
        assert_eq!(query.evaluate(input("rm")).unwrap(), VmAnswer::Unsure);
    }
}
