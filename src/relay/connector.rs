//! Connecting a route's upstream for a new session: a child of its own, a
//! hold on the route's shared child, or a session with a network server
//! through the route's shared client. Kept apart from the listeners'
//! session starter so a virtual server can connect each of its upstreams
//! the same way from its own task.

use std::sync::Arc;

use crate::config::{LimitsConfig, UpstreamConfig};
use crate::transport::shared_child::SharedChildren;
use crate::transport::upstream::{self, RouteClients, Upstream, UpstreamError};

/// Connects upstreams; cheap to clone, every clone shares the same shared
/// children and network clients.
#[derive(Clone)]
pub struct Connector {
    max_message_bytes: usize,
    max_in_flight: usize,
    shared: Arc<SharedChildren>,
    /// Each network route's client, shared by the route's sessions.
    routes: Arc<RouteClients>,
}

impl Connector {
    /// A connector applying `limits` to every upstream it connects.
    pub fn new(limits: &LimitsConfig) -> Self {
        Self {
            max_message_bytes: limits.max_message_bytes,
            max_in_flight: limits.max_in_flight,
            shared: Arc::default(),
            routes: Arc::default(),
        }
    }

    /// The session's own upstream (a child, or a session with a network
    /// server through the route's shared client), or a hold on the route's
    /// shared child.
    pub async fn connect(&self, config: &UpstreamConfig) -> Result<Upstream, UpstreamError> {
        if config.share && config.url.is_none() {
            return self
                .shared
                .connect(config, self.max_message_bytes, self.max_in_flight);
        }
        upstream::connect_route(
            config,
            &self.routes,
            self.max_message_bytes,
            self.max_in_flight,
        )
        .await
    }
}
