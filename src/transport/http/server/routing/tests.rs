//! The routing state of a session, driven through its public operations.

use super::*;

const LIMITS: ReplayLimits = ReplayLimits {
    events: 4,
    bytes: 1 << 20,
    finished_streams: 2,
    channel: 16,
};

fn request(id: &str, token: Option<&str>) -> PostedRequest {
    PostedRequest {
        id: RequestId::from_json(id),
        progress_token: token.map(Into::into),
    }
}

fn sse(opened: Result<Opened, AttachError>) -> Attachment {
    match opened.unwrap() {
        Opened::Sse(a) => a,
        Opened::Json { .. } => panic!("expected SSE"),
    }
}

fn live_event(dispatch: &Dispatch) -> &Event {
    match dispatch {
        Dispatch::Live { event, .. } => event,
        Dispatch::Json { .. } => panic!("expected a live event"),
    }
}

fn frame(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

#[test]
fn responses_and_progress_go_to_their_post_stream() {
    let mut routes = Routes::new(LIMITS);
    let a = sse(routes.open_post(&[request("1", Some("\"t1\""))], Mode::Sse, false, false));
    let b = sse(routes.open_post(&[request("2", None)], Mode::Sse, false, false));
    let out = routes.route(frame(
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1}}"#,
    ));
    assert_eq!(live_event(&out[0]).stream, a.stream);
    let out = routes.route(frame(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#));
    assert_eq!(live_event(&out[0]).stream, b.stream);
    assert_eq!(live_event(&out[0]).seq, 1);
    assert!(!routes.is_pending(&RequestId::from_json("2")));
    // Unrelated traffic goes to the newest open POST stream (b is finished).
    let out = routes.route(frame(
        r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}"#,
    ));
    assert_eq!(live_event(&out[0]).stream, a.stream);
    // Unknown response ids are dropped.
    assert!(routes
        .route(frame(r#"{"jsonrpc":"2.0","id":99,"result":{}}"#))
        .is_empty());
}

#[test]
fn unrelated_messages_wait_for_the_get_stream() {
    let mut routes = Routes::new(LIMITS);
    let out = routes.route(frame(
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
    ));
    assert!(out.is_empty(), "no connection: kept");
    let get = routes.attach(STANDALONE, None).unwrap();
    assert_eq!(get.replay.len(), 1);
    assert_eq!(get.replay[0].seq, 1);
    let out = routes.route(frame(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#));
    assert_eq!(live_event(&out[0]).stream, STANDALONE);
    // Resuming after seq 1 replays seq 2 and kicks the old connection.
    let again = routes.attach(STANDALONE, Some(1)).unwrap();
    assert!(get.kick.is_cancelled());
    assert_eq!(again.replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
}

#[test]
fn json_mode_collects_a_batch() {
    let mut routes = Routes::new(LIMITS);
    let opened = routes
        .open_post(
            &[request("1", None), request("2", None)],
            Mode::Json,
            true,
            false,
        )
        .unwrap();
    let Opened::Json { mut reply, .. } = opened else {
        panic!("expected JSON")
    };
    assert!(routes
        .route(frame(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#))
        .is_empty());
    let out = routes.route(frame(r#"[{"jsonrpc":"2.0","id":2,"result":{"x":1}}]"#));
    match out.into_iter().next() {
        Some(Dispatch::Json { tx, body }) => tx.send(body).unwrap(),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        &reply.try_recv().unwrap()[..],
        br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"x":1}}]"#
    );
}

#[test]
fn abandoned_requests_are_cancelled_unless_resumed() {
    let mut routes = Routes::new(LIMITS);
    let a = sse(routes.open_post(&[request("7", None)], Mode::Sse, false, false));
    assert!(routes.detach(a.stream, a.generation));
    let resumed = routes.attach(a.stream, Some(0)).unwrap();
    assert!(routes.abandon(a.stream, a.generation).is_empty());
    assert!(routes.detach(resumed.stream, resumed.generation));
    let ids = routes.abandon(resumed.stream, resumed.generation);
    assert_eq!(ids, vec![RequestId::from_json("7")]);
    assert!(!routes.is_pending(&RequestId::from_json("7")));
}

#[test]
fn client_cancellation_finishes_the_stream() {
    let mut routes = Routes::new(LIMITS);
    let a = sse(routes.open_post(&[request("\"x\"", None)], Mode::Sse, false, false));
    let mut live = a.live.unwrap();
    assert!(routes
        .client_cancelled(&RequestId::from_json("\"x\""))
        .is_none());
    assert!(live.try_recv().is_err());
    assert!(matches!(
        live.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    ));
}

#[test]
fn version_priming_and_replay_bounds() {
    let mut routes = Routes::new(LIMITS);
    let init = sse(routes.open_post(&[request("0", None)], Mode::Sse, false, true));
    assert!(
        init.replay.is_empty(),
        "no priming before the version is known"
    );
    routes.route(frame(
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}"#,
    ));
    assert_eq!(routes.protocol_version(), Some("2025-11-25"));
    let get = routes.attach(STANDALONE, None).unwrap();
    assert_eq!(get.replay.len(), 1);
    assert!(get.replay[0].data.is_empty(), "a priming event");
    for i in 0..10 {
        routes.route(frame(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"n":{i}}}}}"#
        )));
    }
    let resumed = routes.attach(STANDALONE, Some(1)).unwrap();
    assert_eq!(resumed.replay.len(), LIMITS.events);
    // Finished streams are kept for resumption, up to the limit.
    for id in 10..14 {
        let _ = routes.open_post(&[request(&id.to_string(), None)], Mode::Sse, false, false);
        routes.route(frame(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#
        )));
    }
    assert_eq!(
        routes.attach(2, Some(0)).unwrap_err(),
        AttachError::UnknownStream
    );
    let last = routes.attach(5, Some(0)).unwrap();
    assert!(last.live.is_none(), "finished: replay only");
}

#[test]
fn a_closed_session_opens_nothing() {
    let mut routes = Routes::new(LIMITS);
    let a = sse(routes.open_post(&[request("1", None)], Mode::Sse, false, false));
    routes.close();
    assert!(a.live.is_some());
    assert_eq!(
        routes
            .open_post(&[request("2", None)], Mode::Sse, false, false)
            .unwrap_err(),
        AttachError::Closed
    );
    assert_eq!(
        routes.attach(STANDALONE, None).unwrap_err(),
        AttachError::Closed
    );
}
