//! `[[policy.limit]]`: rate limits and quotas on calls.
//!
//! ```text
//!  LimitSpec ──RateLimits::compile──▶ RateLimits ──admit(LimitedCall)──▶ Admitted
//!                                                         └─────────────▶ RateLimited
//! ```
//!
//! A limit counts the agent's requests whose hook methods and tool fit its
//! globs, per user, agent, tenant, session or for the whole process:
//! `calls` per `interval_s` (a token bucket) and/or `concurrent` calls in
//! flight. The relay checks a request before the Guardian is asked, so a
//! refused call costs no decision and never reaches the server; the
//! [`Admitted`] it gets back is held until the call is answered.
//! [`RateLimits::usage`] shows a policy engine where a call stands.

mod calls;
mod carry;
mod concurrent;
mod set;
mod spec;
mod usage;

pub use set::{Admitted, LimitedCall, RateLimited, RateLimits};
pub use spec::{LimitSpec, Per};
pub use usage::LimitUsage;
