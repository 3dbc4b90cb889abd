//! Hostile input over the WebSocket listener: each frame gets its JSON-RPC
//! error on the socket, an oversized frame closes only its own connection
//! (1009), and another session keeps working throughout.

mod support;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{listen_section, tool_call, NetProxy, Scratch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: &str) -> Socket {
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "mcp".parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

async fn next(socket: &mut Socket) -> Option<Message> {
    tokio::time::timeout(support::WAIT, socket.next())
        .await
        .expect("a frame in time")
        .and_then(Result::ok)
}

async fn recv(socket: &mut Socket) -> Value {
    loop {
        match next(socket).await.expect("the socket is open") {
            Message::Text(text) => return support::parse(&text),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn initialize(socket: &mut Socket) {
    let init = json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    socket.send(Message::text(init.to_string())).await.unwrap();
    assert!(recv(socket).await["result"].is_object());
    let done = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    socket.send(Message::text(done.to_string())).await.unwrap();
}

async fn echo(socket: &mut Socket, id: i64) {
    let call = tool_call(id, "echo", json!({"text": "fine"}));
    socket.send(Message::text(call.to_string())).await.unwrap();
    loop {
        let reply = recv(socket).await;
        if reply["id"] == id {
            assert_eq!(reply["result"]["content"][0]["text"], "fine", "{reply}");
            return;
        }
    }
}

#[tokio::test]
async fn each_hostile_frame_gets_its_error_and_the_other_session_goes_on() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(&format!(
        "{}\n[limits]\nmax_message_bytes = 4096\n",
        listen_section("ws", "")
    ));
    let proxy = NetProxy::start(&config);
    let url = proxy.url("/mcp");
    let mut bystander = connect(&url).await;
    initialize(&mut bystander).await;
    let mut hostile = connect(&url).await;
    initialize(&mut hostile).await;

    let mut utf8 = br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":""#.to_vec();
    utf8.extend_from_slice(b"\xff\"}");
    hostile.send(Message::binary(utf8)).await.unwrap();
    let reply = recv(&mut hostile).await;
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(
        reply["error"]["message"],
        "parse error: the message is not valid UTF-8 (first invalid byte at offset 45)"
    );
    echo(&mut bystander, 1).await;

    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    hostile.send(Message::text(deep)).await.unwrap();
    let reply = recv(&mut hostile).await;
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(
        reply["error"]["message"],
        "invalid request: JSON nesting exceeds the limit of 128 levels ([limits] max_json_depth)"
    );

    let duplicate = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","name":"get-env"}}"#;
    hostile.send(Message::text(duplicate)).await.unwrap();
    let reply = recv(&mut hostile).await;
    assert_eq!(reply["id"], 2);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid request: duplicate key \"name\" in an object"));

    let batch = json!([{"jsonrpc":"2.0","id":"again","method":"initialize","params":{}}]);
    hostile
        .send(Message::text(batch.to_string()))
        .await
        .unwrap();
    let reply = recv(&mut hostile).await;
    assert_eq!(reply[0]["error"]["code"], -32600, "{reply}");
    echo(&mut hostile, 3).await;
    echo(&mut bystander, 4).await;

    // A frame over the limit ends that connection only, with 1009.
    let big = tool_call(5, "echo", json!({"text": "x".repeat(8192)}));
    hostile.send(Message::text(big.to_string())).await.unwrap();
    let closed = loop {
        match next(&mut hostile).await {
            Some(Message::Close(frame)) => break frame.map(|f| f.code),
            Some(_) => continue,
            None => break None,
        }
    };
    assert!(
        matches!(closed, Some(CloseCode::Size) | None),
        "closed with {closed:?}"
    );
    echo(&mut bystander, 6).await;
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("get-env") || l.contains("xxxxxxxx")));
}
