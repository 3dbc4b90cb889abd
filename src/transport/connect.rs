//! Reaching the upstream a route describes: a child process for a
//! `command`, or the network client of the transport its `url` names.
//!
//! The factory sits above the implementations it picks (`child`,
//! `http::client`, `sse::client`, `ws::client`), which know only the
//! [`Upstream`] they return, so none of them imports it back. Callers
//! reach it as `transport::upstream::connect`, which re-exports it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;

use super::child::ChildUpstream;
use super::http::client::route::RouteClient;
use super::upstream::{Upstream, UpstreamError};
use crate::config::{UpstreamConfig, UpstreamTransport};

/// The clients of every network route, each built when its first session
/// starts and kept for the life of the process (routes are fixed by the
/// configuration).
#[derive(Default)]
pub struct RouteClients {
    routes: Mutex<HashMap<String, Arc<RouteClient>>>,
}

impl RouteClients {
    /// The client of `config`'s route, built on first use. A failure is
    /// not kept: the next session tries again (and reports it again).
    fn get(
        &self,
        config: &UpstreamConfig,
        transport: UpstreamTransport,
    ) -> Result<Arc<RouteClient>, UpstreamError> {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = routes.get(&config.name) {
            return Ok(client.clone());
        }
        let client = Arc::new(RouteClient::new(config, transport)?);
        routes.insert(config.name.clone(), client.clone());
        Ok(client)
    }
}

/// Connects to the upstream `config` describes: spawns its `command`, or
/// reaches its `url` over the transport it names, with a client of its own.
pub async fn connect(
    config: &UpstreamConfig,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    connect_route(config, &RouteClients::default(), max_message_bytes, queue).await
}

/// Like [`connect`], but a network route's client (TLS configuration and
/// connection pool) is taken from `routes`, shared with the route's other
/// sessions.
pub async fn connect_route(
    config: &UpstreamConfig,
    routes: &RouteClients,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    if let Some(transport) = config.network_transport() {
        let route = routes.get(config, transport)?;
        return match transport {
            UpstreamTransport::StreamableHttp => {
                super::http::client::connect(config, route, max_message_bytes, queue).await
            }
            UpstreamTransport::Sse => {
                super::sse::client::connect(config, route, max_message_bytes, queue).await
            }
            UpstreamTransport::Ws => {
                super::ws::client::connect(config, route, max_message_bytes, queue).await
            }
        };
    }
    let child = ChildUpstream::spawn(config, max_message_bytes, queue)?;
    let (process, frames, writer, writer_task) = child.into_parts();
    Ok(Upstream {
        frames: frames.boxed(),
        writer,
        writer_task: Some(writer_task),
        control: Box::new(process),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, url: &str) -> UpstreamConfig {
        let mut config = UpstreamConfig::for_command(vec![]);
        config.name = name.into();
        config.url = Some(url.into());
        config
    }

    #[test]
    fn sessions_of_a_route_share_one_client() {
        let clients = RouteClients::default();
        let http = UpstreamTransport::StreamableHttp;
        let a = clients.get(&config("a", "http://127.0.0.1:9/mcp"), http);
        let again = clients.get(&config("a", "http://127.0.0.1:9/mcp"), http);
        let b = clients.get(&config("b", "http://127.0.0.1:9/mcp"), http);
        let (a, again, b) = (a.unwrap(), again.unwrap(), b.unwrap());
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_failed_build_is_not_kept() {
        let clients = RouteClients::default();
        let http = UpstreamTransport::StreamableHttp;
        assert!(clients.get(&config("a", "ftp://x/"), http).is_err());
        assert!(clients.get(&config("a", "http://x/"), http).is_ok());
    }
}
