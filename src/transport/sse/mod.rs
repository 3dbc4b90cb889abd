//! The legacy HTTP+SSE transport (MCP 2024-11-05), both sides: [`server`]
//! for old clients, [`client`] for old servers.

pub mod client;
pub mod server;
