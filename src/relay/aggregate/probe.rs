//! The start-up check of `prefix = "never"`: every upstream of such an
//! aggregate is started once and its tools listed, and two upstreams
//! offering a tool of the same name stop the proxy before it serves.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::names::NameBook;
use crate::config::{AggregateConfig, Config, PrefixMode, UpstreamConfig};
use crate::relay::connector::Connector;
use crate::transport::upstream::Upstream;
use crate::transport::LineFrame;

/// Why the aggregates cannot be served as configured.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Two upstreams offer the same tool name and nothing tells them apart.
    #[error(
        "aggregate {aggregate:?} (prefix = \"never\"): tool {tool:?} of upstream {first:?} \
         and tool {tool:?} of upstream {second:?} have the same name; set prefix = \
         \"on_conflict\" or \"always\", or leave one out with `tools`"
    )]
    Conflict {
        /// The aggregate.
        aggregate: String,
        /// The tool name both offer.
        tool: String,
        /// The upstream listed first.
        first: String,
        /// The other upstream.
        second: String,
    },
}

/// Checks every `prefix = "never"` aggregate of `config`. An upstream that
/// cannot be listed now is skipped (it is left out of sessions too).
pub async fn check(config: &Config) -> Result<(), ProbeError> {
    let connector = Connector::new(&config.limits);
    for aggregate in &config.aggregates {
        if aggregate.prefix == PrefixMode::Never {
            check_aggregate(config, aggregate, &connector).await?;
        }
    }
    Ok(())
}

async fn check_aggregate(
    config: &Config,
    aggregate: &AggregateConfig,
    connector: &Connector,
) -> Result<(), ProbeError> {
    let book = NameBook::new(aggregate);
    let limit = Duration::from_millis(aggregate.startup_timeout_ms);
    let mut owners: HashMap<String, usize> = HashMap::new();
    for (leg, name) in aggregate.upstreams.iter().enumerate() {
        let Some(upstream) = config.upstreams.iter().find(|u| &u.name == name) else {
            continue;
        };
        let tools = match tokio::time::timeout(limit, list_tools(upstream, connector)).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(reason)) => {
                tracing::warn!(upstream = %name, %reason, "could not list an upstream's tools at start-up");
                continue;
            }
            Err(_) => {
                tracing::warn!(upstream = %name, "an upstream did not list its tools in time at start-up");
                continue;
            }
        };
        for tool in tools {
            if !book.offers_tool(leg, &tool) {
                continue;
            }
            if let Some(first) = owners.get(&tool) {
                return Err(ProbeError::Conflict {
                    aggregate: aggregate.name.clone(),
                    tool,
                    first: aggregate.upstreams[*first].clone(),
                    second: name.clone(),
                });
            }
            owners.insert(tool, leg);
        }
    }
    Ok(())
}

/// Starts `config`'s server, lists every page of its tools, and ends it.
async fn list_tools(config: &UpstreamConfig, connector: &Connector) -> Result<Vec<String>, String> {
    let mut upstream = connector
        .connect(config)
        .await
        .map_err(|err| err.to_string())?;
    let listed = list_over(&mut upstream).await;
    upstream.writer.close();
    let _ = upstream.control.shutdown().await;
    listed
}

async fn list_over(upstream: &mut Upstream) -> Result<Vec<String>, String> {
    let initialize = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "acs-proxy", "version": env!("CARGO_PKG_VERSION")}});
    ask(upstream, 0, "initialize", initialize).await?;
    send(
        upstream,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await?;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 1.. {
        let params = cursor.map_or_else(|| json!({}), |cursor| json!({"cursor": cursor}));
        let result = ask(upstream, id, "tools/list", params).await?;
        let names = result["tools"].as_array().into_iter().flatten();
        tools.extend(names.filter_map(|tool| tool["name"].as_str().map(str::to_owned)));
        cursor = result["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// Sends a request and returns its result, skipping whatever else the
/// server sends meanwhile.
async fn ask(
    upstream: &mut Upstream,
    id: u64,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    send(upstream, &request).await?;
    while let Some(frame) = upstream.frames.next().await {
        let Ok(LineFrame::Line(bytes)) = frame else {
            continue;
        };
        let Ok(message) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if message.get("method").is_none() && message["id"] == id {
            return match message.get("result") {
                Some(result) => Ok(result.clone()),
                None => Err(format!("{method} was refused: {}", message["error"])),
            };
        }
    }
    Err("the server closed before answering".into())
}

async fn send(upstream: &Upstream, message: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(message).map_err(|err| err.to_string())?;
    upstream
        .writer
        .send(Bytes::from(bytes))
        .await
        .map_err(|err| err.to_string())
}
