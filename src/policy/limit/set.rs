//! The compiled `[[policy.limit]]` entries and the check of one call.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::calls::CallRate;
use super::concurrent::{ConcurrentCalls, Slot};
use super::spec::{LimitSpec, Per};
use crate::hooks::Identity;
use crate::policy::error::{LimitProblem, PolicyError};
use crate::policy::pattern::NamePattern;
use crate::policy::PolicySource;

/// What a concurrency refusal suggests as `retry_after_ms`: nothing says
/// when a call in flight will be answered, so a short, fixed pause.
const CONCURRENT_RETRY_MS: u64 = 1000;

/// Every limit of the policy, with its state: one instance serves every
/// session of the process, so a user's quota spans their sessions.
///
/// A clone shares the state (buckets and counts in flight) of every limit
/// it copies, so a reloaded policy can keep the limits that did not change
/// ([`RateLimits::carry_over`]).
#[derive(Debug, Default, Clone)]
pub struct RateLimits {
    pub(super) limits: Vec<Limit>,
}

/// One compiled limit.
#[derive(Debug, Clone)]
pub(super) struct Limit {
    /// The definition it was compiled from.
    pub(super) spec: LimitSpec,
    pub(super) name: String,
    hook: NamePattern,
    tool: Option<NamePattern>,
    pub(super) per: Per,
    pub(super) rate: Option<Rate>,
    pub(super) concurrent: Option<ConcurrentCalls>,
}

/// `calls` per `interval_s`, as configured and as a bucket.
#[derive(Debug, Clone)]
pub(super) struct Rate {
    pub(super) calls: u32,
    pub(super) interval_s: u64,
    pub(super) bucket: Arc<CallRate>,
}

/// The call a limit is checked against.
#[derive(Debug, Clone, Copy)]
pub struct LimitedCall<'a> {
    /// The hook methods the call passes through, e.g.
    /// `protocols/MCP/tools/call` and `steps/toolCallRequest`.
    pub hooks: &'a [&'a str],
    /// The tool of a `tools/call`.
    pub tool: Option<&'a str>,
    /// The name the agent of a virtual server called the tool by
    /// (`everything__echo`); a `tool` glob may fit either name.
    pub called_as: Option<&'a str>,
    /// Who is calling, when known.
    pub user: Option<&'a Identity>,
    /// The agent (`metadata.agent_id`).
    pub agent: &'a str,
    /// The session.
    pub session: &'a str,
}

/// The places a call holds under concurrency limits; dropping this gives
/// them back, so it lives as long as the call is in flight.
#[derive(Debug, Default)]
pub struct Admitted {
    _slots: Vec<Slot>,
}

/// A call refused by a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimited {
    /// Over `calls` per `interval_s`.
    #[error("rate limit {limit:?} reached: at most {calls} calls per {interval_s} s per {per}; retry in {retry_after_ms} ms")]
    Calls {
        /// The limit's name.
        limit: String,
        /// Its `calls`.
        calls: u32,
        /// Its `interval_s`.
        interval_s: u64,
        /// Its `per`.
        per: &'static str,
        /// When a token is back.
        retry_after_ms: u64,
    },
    /// Over `concurrent` calls in flight.
    #[error("rate limit {limit:?} reached: at most {max} calls in flight per {per}; retry once one is answered")]
    Concurrent {
        /// The limit's name.
        limit: String,
        /// Its `concurrent`.
        max: u32,
        /// Its `per`.
        per: &'static str,
    },
}

impl RateLimited {
    /// The name of the limit that refused the call.
    pub fn limit(&self) -> &str {
        match self {
            RateLimited::Calls { limit, .. } | RateLimited::Concurrent { limit, .. } => limit,
        }
    }

    /// How long the caller should wait before trying again.
    pub fn retry_after_ms(&self) -> u64 {
        match self {
            RateLimited::Calls { retry_after_ms, .. } => *retry_after_ms,
            RateLimited::Concurrent { .. } => CONCURRENT_RETRY_MS,
        }
    }
}

impl RateLimits {
    /// Compiles the limits of `[policy]`, which was parsed from `source`;
    /// stops at the first that is not usable.
    pub fn compile(
        specs: &[Spanned<LimitSpec>],
        source: &PolicySource<'_>,
    ) -> Result<Self, PolicyError> {
        let mut first_lines: HashMap<&str, usize> = HashMap::with_capacity(specs.len());
        let mut limits = Vec::with_capacity(specs.len());
        for spanned in specs {
            let spec = spanned.get_ref();
            let line = source.line_of(&spanned.span());
            let located = |problem| PolicyError::Limit {
                file: source.name.to_owned(),
                line,
                limit: spec.name.clone(),
                problem,
            };
            if let Some(&first_line) = first_lines.get(spec.name.as_str()) {
                return Err(located(LimitProblem::DuplicateName { first_line }));
            }
            first_lines.insert(&spec.name, line);
            limits.push(Limit::compile(spec).map_err(located)?);
        }
        Ok(Self { limits })
    }

    /// Whether the policy has no limits.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Counts `call` against every limit it falls under, or names the first
    /// that refuses it.
    ///
    /// Concurrency places are taken first, because a refusal gives them
    /// back; tokens are taken last, since one taken cannot be returned (a
    /// call refused by a later rate limit still spends the earlier ones).
    pub fn admit(&self, call: &LimitedCall<'_>) -> Result<Admitted, RateLimited> {
        let applicable: Vec<(&Limit, String)> = self.covering(call).collect();
        let mut slots = Vec::new();
        for (limit, key) in &applicable {
            if let Some(concurrent) = &limit.concurrent {
                let slot = concurrent
                    .acquire(key)
                    .ok_or_else(|| limit.over_concurrency(concurrent.max()))?;
                slots.push(slot);
            }
        }
        for (limit, key) in &applicable {
            if let Some(rate) = &limit.rate {
                rate.bucket
                    .check(key)
                    .map_err(|wait| limit.over_rate(rate, wait))?;
            }
        }
        Ok(Admitted { _slots: slots })
    }
}

impl RateLimits {
    /// The limits that count `call`, each with the key it counts under.
    pub(super) fn covering<'s>(
        &'s self,
        call: &'s LimitedCall<'_>,
    ) -> impl Iterator<Item = (&'s Limit, String)> + 's {
        self.limits
            .iter()
            .filter(|limit| limit.covers(call))
            .map(|limit| (limit, limit.key(call)))
    }
}

impl Limit {
    fn compile(spec: &LimitSpec) -> Result<Self, LimitProblem> {
        if spec.name.is_empty() {
            return Err(LimitProblem::EmptyName);
        }
        let rate = match (spec.calls, spec.interval_s) {
            (Some(calls), Some(interval_s)) => Some(rate(calls, interval_s)?),
            (None, None) => None,
            _ => return Err(LimitProblem::HalfRate),
        };
        let concurrent = match spec.concurrent {
            Some(0) => return Err(LimitProblem::Zero("concurrent")),
            Some(max) => Some(ConcurrentCalls::new(max)),
            None => None,
        };
        if rate.is_none() && concurrent.is_none() {
            return Err(LimitProblem::NothingLimited);
        }
        Ok(Self {
            spec: spec.clone(),
            name: spec.name.clone(),
            hook: NamePattern::compile(&spec.hook, "hook")?,
            tool: spec
                .tool
                .as_deref()
                .map(|tool| NamePattern::compile(tool, "tool"))
                .transpose()?,
            per: spec.per,
            rate,
            concurrent,
        })
    }

    /// Whether the call is one this limit counts: a hook fits and, with a
    /// `tool` glob, it calls a fitting tool (by its own name or the one
    /// the agent used).
    fn covers(&self, call: &LimitedCall<'_>) -> bool {
        let tool_fits = match (&self.tool, call.tool) {
            (None, _) => true,
            (Some(pattern), Some(tool)) => {
                pattern.matches(tool) || call.called_as.is_some_and(|name| pattern.matches(name))
            }
            (Some(_), None) => false,
        };
        tool_fits && call.hooks.iter().any(|hook| self.hook.matches(hook))
    }

    /// Whose quota the call counts against.
    fn key(&self, call: &LimitedCall<'_>) -> String {
        match self.per {
            Per::User => call.user.map(|u| u.user_id.clone()).unwrap_or_default(),
            Per::Tenant => call.user.and_then(|u| u.tenant.clone()).unwrap_or_default(),
            Per::Agent => call.agent.to_owned(),
            Per::Session => call.session.to_owned(),
            Per::Global => String::new(),
        }
    }

    fn over_concurrency(&self, max: u32) -> RateLimited {
        RateLimited::Concurrent {
            limit: self.name.clone(),
            max,
            per: self.per.as_str(),
        }
    }

    fn over_rate(&self, rate: &Rate, wait: Duration) -> RateLimited {
        // Rounded up: retrying after the advertised wait must succeed.
        let retry_after_ms = u64::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        RateLimited::Calls {
            limit: self.name.clone(),
            calls: rate.calls,
            interval_s: rate.interval_s,
            per: self.per.as_str(),
            retry_after_ms,
        }
    }
}

fn rate(calls: u32, interval_s: u64) -> Result<Rate, LimitProblem> {
    let nonzero_calls = NonZeroU32::new(calls).ok_or(LimitProblem::Zero("calls"))?;
    if interval_s == 0 {
        return Err(LimitProblem::Zero("interval_s"));
    }
    let bucket = CallRate::new(nonzero_calls, Duration::from_secs(interval_s))
        .ok_or(LimitProblem::RateTooFine { calls, interval_s })?;
    Ok(Rate {
        calls,
        interval_s,
        bucket: Arc::new(bucket),
    })
}

#[cfg(test)]
mod tests;
