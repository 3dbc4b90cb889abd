//! `[policy] engine = "rego"`: the embedded Guardian's policy written in
//! Rego (OPA's language) and evaluated in process by regorus.
//!
//! ```text
//!  rego = [globs], data ──load──▶ RegoPolicy (parsed, analysed once)
//!                                   │
//!  HookRequest + Metadata + GatewayContext ──input──▶ evaluate ──▶ query value
//! ```
//!
//! The policy sees the hook exactly as a remote Guardian would receive it
//! (`input.method`, `input.params`) plus `input.context`, the gateway facts
//! that are not on the ACS wire. Its answer, the value of `query` (default
//! `data.acs.decision`), is an ACS decision object; this module hands it
//! back as JSON and the Guardian checks it like a remote Guardian's result.
//! An undefined answer means the policy's `default`.

mod error;
mod files;
mod input;
mod load;
mod marker;
mod policy;
mod testing;
mod time_limit;
mod vm;

pub use error::RegoError;
pub use files::walk;
pub use input::document as input_document;
pub use load::{load_configured, RegoSettings};
pub use policy::{RegoPolicy, DEFAULT_QUERY};
pub use testing::{RegoTest, TestOutcome};
pub use time_limit::EVALUATION_TIME_LIMIT;

#[cfg(test)]
mod tests;
