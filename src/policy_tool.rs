//! `acs-proxy policy test` and `acs-proxy policy eval`: checking a policy
//! before it guards anything.
//!
//! `test DIR` runs the Rego unit tests under DIR (every `test_*` rule must
//! be `true`, as with `opa test`) and every `*.fixture.json` there, each a
//! config plus hooks with the decision they must get, for either engine.
//! `eval` decides one hook file with a config's policy and says which rule
//! decided. Both evaluate through the same [`PolicyEngine`] the embedded
//! Guardian uses, so what passes here is what the proxy enforces.
//!
//! [`PolicyEngine`]: crate::guardian::embedded::PolicyEngine

mod error;
mod fixture;
mod hook_file;
mod run;

pub use error::ToolError;
pub use fixture::{Expectation, Fixture, FixtureCase};
pub use hook_file::HookFile;
pub use run::{eval, test_directory, TestLine, TestReport};
