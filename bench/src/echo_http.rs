//! `acs-proxy-bench serve-echo-http`: a minimal, stateless MCP server over
//! Streamable HTTP with one `echo` tool, answering every POST with JSON.
//!
//! The scale suite puts it behind acs-proxy so that 5,000 sessions need 5,000
//! HTTP exchanges upstream instead of 5,000 child processes, and the
//! proxy's own memory per session can be read.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::net::TcpListener;

/// The parts of a request the server looks at.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    arguments: Option<Arguments<'a>>,
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<&'a str>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
}

/// Serves on `addr` until killed; writes the bound address to `addr_file`.
pub fn serve(addr: SocketAddr, addr_file: &Path) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(async {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("bind {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| format!("{e}"))?;
        std::fs::write(addr_file, bound.to_string())
            .map_err(|e| format!("{}: {e}", addr_file.display()))?;
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != Method::POST {
        return Ok(status(StatusCode::METHOD_NOT_ALLOWED));
    }
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let Ok(message) = serde_json::from_slice::<Message<'_>>(&body) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let Some(id) = message.id else {
        return Ok(status(StatusCode::ACCEPTED));
    };
    let result = match message.method {
        "initialize" => format!(
            r#"{{"protocolVersion":"{}","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"acs-proxy-bench-echo","version":"0.1.0"}}}}"#,
            message
                .params
                .as_ref()
                .and_then(|p| p.protocol_version)
                .unwrap_or(crate::http_client::PROTOCOL_VERSION)
        ),
        "tools/list" => r#"{"tools":[{"name":"echo","description":"Echoes text","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}"#.to_owned(),
        "prompts/list" => r#"{"prompts":[]}"#.to_owned(),
        "resources/list" => r#"{"resources":[]}"#.to_owned(),
        "ping" => "{}".to_owned(),
        "tools/call" => {
            let text = message
                .params
                .and_then(|p| p.arguments)
                .and_then(|a| a.text)
                .map_or(r#""""#, RawValue::get);
            format!(r#"{{"content":[{{"type":"text","text":{text}}}]}}"#)
        }
        other => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,"message":"method not found: {}"}}}}"#,
                id.get(),
                other.escape_default()
            );
            return Ok(json(body));
        }
    };
    Ok(json(format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        id.get()
    )))
}

fn json(body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}
