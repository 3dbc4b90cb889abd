//! WebSocket (subprotocol `mcp`, one JSON-RPC message per text frame), both
//! sides: [`server`] serves agents, [`client`] reaches WebSocket MCP servers.

pub mod client;
pub mod server;
