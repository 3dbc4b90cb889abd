//! What a listener is built from: the `[listen]` section and the limits it
//! applies, taken once from the configuration. Every part of the listener
//! reads it, so it has a module of its own that imports none of them.

use std::time::Duration;

use crate::config::{Config, ListenConfig};

/// What the listener needs to know.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// `[listen]`.
    pub listen: ListenConfig,
    /// The route names (aggregates and upstreams), in configuration order.
    pub routes: Vec<String>,
    /// Request body limit (and WebSocket message limit).
    pub max_message_bytes: usize,
    /// Nesting limit checked before a body is parsed.
    pub max_json_depth: usize,
    /// Frames queued per session and direction.
    pub queue: usize,
    /// How long shutdown waits for sessions to seal their audit chains.
    pub shutdown_deadline: Duration,
}

impl ServerSettings {
    /// The settings a configuration describes.
    pub fn from_config(config: &Config) -> Self {
        Self {
            listen: config.listen.clone(),
            routes: config.route_names(),
            max_message_bytes: config.limits.max_message_bytes,
            max_json_depth: config.limits.max_json_depth,
            queue: config.limits.max_in_flight,
            shutdown_deadline: Duration::from_secs(10),
        }
    }
}
