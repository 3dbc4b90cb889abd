//! acs-proxy: an MCP gateway that puts the Agent Control Standard (ACS v0.1.0)
//! in front of any MCP server.
//!
//! ```text
//!  agent ⇄ downstream ⇄ [ peek → hooks → Guardian → enforce → audit ] ⇄ upstream ⇄ MCP server
//!                                          │                   │
//!                                 embedded policy       hash-chained JSONL
//!                                 or remote Guardian    + Prometheus metrics
//! ```
//!
//! A message is read from one side as bytes, peeked ([`jsonrpc`]), turned into
//! ACS hook requests ([`hooks`]), decided by a [`guardian`], applied by
//! [`enforce`], recorded by [`audit`], and written to the other side by the
//! per-session pump in [`relay`]. [`transport`] owns framing and processes,
//! [`session`] owns the per-session tables, [`config`] turns `proxy.toml`
//! into one typed form, and [`metrics`] / [`admin`] expose the Prometheus
//! registry and health endpoints; [`telemetry`] exports OpenTelemetry
//! traces when switched on.
//!
//! The modules stand in layers, each importing only from its own layer and
//! those below: the wire formats and shared vocabulary ([`jcs`],
//! [`jsonrpc`], [`hooks`], [`metrics`], [`telemetry`]); the [`policy`] language; the
//! [`audit`] trail; [`config`] and the [`limits`] it sets; the
//! [`transport`]s; the decision ([`guardian`], [`enforce`]); the [`admin`]
//! endpoints and the [`policy_tool`]s; per-[`session`] state; the
//! [`relay`]; and the binary on top.
//! `layers.toml` writes this order down once, and `tests/layering.rs` fails
//! on an import from a higher layer or an import cycle between files.

pub mod admin;
pub mod audit;
pub mod config;
pub mod enforce;
pub mod guardian;
pub mod hooks;
pub mod jcs;
pub mod jsonrpc;
pub mod limits;
pub mod metrics;
pub mod policy;
pub mod policy_tool;
pub mod relay;
pub mod session;
pub mod telemetry;
pub mod transport;
