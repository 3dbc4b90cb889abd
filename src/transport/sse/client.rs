//! Not built yet.

use crate::config::UpstreamConfig;
use crate::transport::upstream::{Upstream, UpstreamError};

/// Connects to a legacy HTTP+SSE MCP server.
pub async fn connect(
    config: &UpstreamConfig,
    _max_message_bytes: usize,
    _queue: usize,
) -> Result<Upstream, UpstreamError> {
    Err(UpstreamError::Network {
        route: config.name.clone(),
        reason: "this upstream transport is not available in this build".into(),
    })
}
