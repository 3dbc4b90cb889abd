//! MCP over HTTP, both sides: [`server`] serves agents (downstream),
//! [`client`] reaches HTTP MCP servers (upstream), and [`metadata`] holds
//! the 2026-07-28 request headers both of them speak.
//!
//! ```text
//!  agent ─HTTP→ listener → router → edge ─┬→ handlers (session era) ─┐
//!                                         ├→ stateless (2026-07-28)  ├→ start_session → relay
//!                                         └→ sse::server, ws::server ┘
//!  relay → Upstream.writer → client: one POST per frame  ─HTTP→ MCP server
//!  relay ← Upstream.frames ← client: JSON or SSE answers ←HTTP─ MCP server
//! ```
//!
//! - **Downstream.** The listener accepts TCP (and TLS), the router picks
//!   the endpoint by path, and every request passes the same edge checks
//!   (Host, Origin, bearer token, body limits) before a handler sees it.
//!   A handler starts (or finds) a session and hands the relay its two
//!   directions; what the relay writes back is routed to the response
//!   stream that awaits it, kept for resumption. The legacy HTTP+SSE and
//!   WebSocket servers (`transport::sse`, `transport::ws`) are endpoints of
//!   this same listener. Requests refused before a session are recorded in
//!   the listener's own audit chain.
//! - **Upstream.** Each frame the relay writes is posted as is; answers,
//!   JSON bodies or event streams, come back as frames. Every session of a
//!   route shares one HTTP client (`client::route`); what the network
//!   clients share (URL, TLS, errors, the frame link) is in `client::net`
//!   and `client::link`, which the SSE and WebSocket clients use too.
//! - **Metadata.** In the stateless era a request's headers mirror its
//!   body: the server checks them, the client writes them, both from the
//!   tool schemas `metadata::registry` learned from `tools/list`.
//!
//! Neither side knows about hooks or policy: a session here is bytes in,
//! bytes out, handed to the relay through
//! [`downstream`](super::downstream) and [`upstream`](super::upstream).
//! Which upstream a route uses is [`connect`](super::connect)'s choice.

pub mod client;
pub mod metadata;
pub mod server;
