//! The relay: one session's two pumps, from start to an orderly end.
//!
//! - [`pump`]: read → decide → release, per direction, in arrival order.
//! - [`intake`]: a pump's intake shared with the sender of its frames.
//! - [`frame`]: a single message, or a batch decided element by element.
//! - [`flow`]: what each kind of message goes through.
//! - [`stages`]: which hooks a message passes through.
//! - [`stage`]: one hook of the pipeline and how its decision is applied.
//! - [`decide`]: the Guardian call, the failure posture, the audit entry.
//! - [`inventory`]: `agbom/snapshot` and `agbom/changed`.
//! - [`integrity`]: pinned definitions, the poisoning scan, argument checks.
//! - [`lifecycle`]: `steps/sessionStart` and `steps/sessionEnd`.
//! - [`quota`]: `[[policy.limit]]` rate limits, before any hook.
//! - [`timeout`]: the per-request upstream timeout.
//! - `tool_latency`: timing answered tool calls by tool, for `/metrics`.
//! - [`aggregate`]: a virtual server, one agent session over several
//!   upstreams, each through a relay session of its own.
//! - `traced`: the request's spans and trace context (ACS-Trace), kept out
//!   of the flow's own logic.
//! - [`run_session`]: one session over any pair of transports;
//!   [`run_stdio`] is the stdio deployment built on it.

pub mod aggregate;
pub mod approval;
pub mod connector;
pub mod decide;
pub mod delivery;
pub mod flow;
pub mod frame;
pub mod intake;
pub mod integrity;
pub mod inventory;
pub mod lifecycle;
pub mod limits_in_force;
pub mod pump;
pub mod quota;
mod release;
mod run;
mod sessions;
pub mod stage;
pub mod stages;
mod stdio;
pub mod timeout;
mod tool_latency;
mod traced;

pub use run::{run_session, SessionContext, SessionExit};
pub use sessions::RelaySessions;
pub use stdio::{run_stdio, stop_on_signal};
