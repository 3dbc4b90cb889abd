//! Which way a message travels: the one fact about a message that every
//! layer above the wire (audit, transports, enforcement, the relay) records.

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the agent to the MCP server.
    ClientToServer,
    /// From the MCP server to the agent.
    ServerToClient,
}

impl Direction {
    /// The audit and metric spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client_to_server",
            Direction::ServerToClient => "server_to_client",
        }
    }

    /// The other way.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::ClientToServer => Direction::ServerToClient,
            Direction::ServerToClient => Direction::ClientToServer,
        }
    }
}
