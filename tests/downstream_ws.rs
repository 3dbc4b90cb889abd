//! acs-proxy as a WebSocket MCP server (`[listen] transport = "ws"`,
//! subprotocol `mcp`, one JSON-RPC message per text frame), end to end
//! with a tokio-tungstenite client in front of the demo server.

mod support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{audit_chains, listen_section, tool_call, NetProxy, Scratch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, StatusCode};
use tokio_tungstenite::tungstenite::{Error, Message};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const RULES: &str = r#"
[[policy.rule]]
name = "no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "the environment stays private"
"#;

async fn connect(url: &str, headers: &[(&str, &str)]) -> Result<Socket, Error> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, response)| {
            if headers.iter().any(|(n, _)| *n == "sec-websocket-protocol") {
                assert_eq!(response.headers()["sec-websocket-protocol"], "mcp");
            }
            socket
        })
}

async fn send(socket: &mut Socket, message: &Value) {
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
}

async fn recv(socket: &mut Socket) -> Value {
    loop {
        let next = tokio::time::timeout(support::WAIT, socket.next())
            .await
            .expect("a message in time")
            .expect("the socket is open")
            .expect("no WebSocket error");
        match next {
            Message::Text(text) => return support::parse(&text),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn response(socket: &mut Socket, id: Value) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    loop {
        let message = recv(socket).await;
        if message.get("method").is_none() && message["id"] == id {
            return (message, before);
        }
        before.push(message);
    }
}

#[tokio::test]
async fn a_websocket_session_end_to_end() {
    let scratch = Scratch::new();
    let proxy = NetProxy::start(
        &scratch.demo_config_recording_content(&format!("{}\n{RULES}", listen_section("ws", ""))),
    );
    assert_eq!(proxy.scheme, "ws");
    let url = proxy.url("/mcp");
    let mcp = [("sec-websocket-protocol", "mcp")];

    // The subprotocol is required; foreign origins are refused.
    match connect(&url, &[]).await {
        Err(Error::Http(response)) => assert_eq!(response.status(), StatusCode::BAD_REQUEST),
        other => panic!("expected 400, got {other:?}"),
    }
    match connect(&url, &[mcp[0], ("origin", "https://evil.example")]).await {
        Err(Error::Http(response)) => assert_eq!(response.status(), StatusCode::FORBIDDEN),
        other => panic!("expected 403, got {other:?}"),
    }

    let mut socket = connect(&url, &mcp).await.expect("upgrade");
    send(
        &mut socket,
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{"sampling":{}},
        "clientInfo":{"name":"ws-test","version":"1"}}}),
    )
    .await;
    let (init, _) = response(&mut socket, json!(1)).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "acs-proxy-demo-server"
    );
    send(
        &mut socket,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .await;

    // A frame with embedded newlines still reaches the line-framed server.
    socket
        .send(Message::text(
            "{\"jsonrpc\":\"2.0\",\n \"id\":2,\n \"method\":\"tools/call\",\n \"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}}",
        ))
        .await
        .unwrap();
    let (reply, _) = response(&mut socket, json!(2)).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi");

    send(&mut socket, &tool_call(3, "get-env", json!({}))).await;
    let (reply, _) = response(&mut socket, json!(3)).await;
    assert_eq!(reply["result"]["isError"], true);

    // A server→client request on the same socket, answered on it.
    send(
        &mut socket,
        &tool_call(4, "sample", json!({"prompt":"hello"})),
    )
    .await;
    let request = recv(&mut socket).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    send(
        &mut socket,
        &json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"ws sampled"},
        "model":"m","stopReason":"endTurn"}}),
    )
    .await;
    let (reply, _) = response(&mut socket, json!(4)).await;
    assert!(reply.to_string().contains("ws sampled"), "{reply}");

    // Closing the socket ends the session and seals its chain.
    socket.close(None).await.unwrap();
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let chains = audit_chains(&scratch);
        if chains.len() == 1 && chains[0].1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{chains:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let received = scratch.server_received();
    assert!(!received.iter().any(|m| m["params"]["name"] == "get-env"));
    let entries = scratch.audit_entries();
    let start = support::entries_of(&entries, "steps/sessionStart");
    assert!(
        start
            .iter()
            .any(|e| e.to_string().contains(r#""transport":"ws""#)),
        "{start:?}"
    );
}
