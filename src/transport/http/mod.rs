//! MCP Streamable HTTP, both sides: [`server`] serves agents (downstream),
//! [`client`] reaches HTTP MCP servers (upstream).

pub mod client;
pub mod metadata;
pub mod server;
