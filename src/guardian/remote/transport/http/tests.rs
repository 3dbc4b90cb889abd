use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::guardian::remote::transport::test_pki::TestPki;
use crate::guardian::remote::transport::test_server::TestServer;

const PING: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"system/ping"}"#;

fn plain(url: String) -> HttpTransport {
    HttpTransport::new(&url, TlsSettings::default()).unwrap()
}

async fn call(transport: &HttpTransport) -> Result<Bytes, TransportError> {
    transport.call(Bytes::from_static(PING)).await
}

#[tokio::test]
async fn posts_the_body_as_json_and_returns_the_reply() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/acs", server.base));
    assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
    assert_eq!(transport.name(), "http");
}

#[tokio::test]
async fn a_non_200_status_is_reported_with_its_code() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/status/503", server.base));
    let err = call(&transport).await.unwrap_err();
    assert!(
        matches!(err, TransportError::Status { status: 503 }),
        "{err}"
    );
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/redirect", server.base));
    let err = call(&transport).await.unwrap_err();
    assert!(
        matches!(err, TransportError::Status { status: 307 }),
        "{err}"
    );
}

#[tokio::test]
async fn connection_refused_fails_at_once() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let transport = plain(format!("http://127.0.0.1:{port}/acs"));
    let started = Instant::now();
    let err = call(&transport).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err, TransportError::Connect(m) if m.contains("refused")),
        "{err}"
    );
    assert!(!closed_before_reply(&err), "a refusal is not sent again");
}

#[tokio::test]
async fn one_connection_serves_many_calls() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/acs", server.base));
    for _ in 0..5 {
        call(&transport).await.unwrap();
    }
    assert_eq!(server.accepted(), 1);
}

#[tokio::test]
async fn plain_http_stays_http1() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/version", server.base));
    assert_eq!(call(&transport).await.unwrap(), "HTTP/1.1");
}

#[tokio::test]
async fn a_guardian_hanging_up_is_closed_after_one_resend() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/acs", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = stream.read(&mut [0; 1024]).await;
        }
    });
    let err = call(&plain(url)).await.unwrap_err();
    assert!(matches!(err, TransportError::Closed(_)), "{err}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "sent once more, only");
}

/// Reads one request (head and `Content-Length` body) off `stream`.
async fn read_request(stream: &mut TcpStream) -> Vec<u8> {
    let mut request = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length: usize = head
                .split("\r\n")
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse().unwrap());
            if request.len() >= end + 4 + length {
                return request[end + 4..].to_vec();
            }
        }
        let read = stream.read(&mut chunk).await.unwrap();
        assert_ne!(read, 0, "the client closed mid-request");
        request.extend_from_slice(&chunk[..read]);
    }
}

/// Answers 200 with `body`, keeping the connection open and saying
/// nothing about closing it.
async fn answer(stream: &mut TcpStream, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
}

/// A server whose first connection answers one request, then does to
/// the second what `second` does; every later connection answers each
/// request with `resend_reply`. Returns the URL and the count of
/// connections accepted.
async fn server_closing_under_the_second_request<F, Fut>(
    second: F,
    resend_reply: &'static [u8],
) -> (String, Arc<AtomicUsize>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/acs", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        counter.fetch_add(1, Ordering::SeqCst);
        let body = read_request(&mut stream).await;
        answer(&mut stream, &body).await;
        second(stream).await;
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                loop {
                    read_request(&mut stream).await;
                    answer(&mut stream, resend_reply).await;
                }
            });
        }
    });
    (url, accepted)
}

#[tokio::test]
async fn a_request_on_a_connection_closed_under_it_is_sent_again_on_a_new_one() {
    // The second request arrives and the connection closes unread (a
    // reset, as when a keep-alive timer fires just then): the Guardian
    // never saw it.
    let (url, accepted) = server_closing_under_the_second_request(
        |stream| async move {
            stream.readable().await.unwrap();
            drop(stream);
        },
        PING,
    )
    .await;
    let transport = plain(url);
    assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
    assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    // The resend's connection is not kept: the next call opens one
    // for the pool.
    assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_resend_refused_as_a_replay_keeps_the_first_failure() {
    // The Guardian reads the second request, then hangs up: the resend
    // is a replay to it.
    let (url, accepted) = server_closing_under_the_second_request(
        |mut stream| async move {
            read_request(&mut stream).await;
            drop(stream);
        },
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"replay"}}"#,
    )
    .await;
    let transport = plain(url);
    call(&transport).await.unwrap();
    let err = call(&transport).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Closed(m) if m.contains("refused as a replay")),
        "{err}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn only_a_connection_closed_before_the_answer_is_sent_again() {
    assert!(closed_before_reply(&TransportError::Closed("reset".into())));
    for err in [
        TransportError::Connect("connection refused".into()),
        TransportError::Tls("UnknownIssuer".into()),
        TransportError::Status { status: 503 },
        TransportError::from(io::Error::other("odd")),
        TransportError::FrameTooLarge { length: 9, max: 8 },
    ] {
        assert!(!closed_before_reply(&err), "{err}");
    }
}

#[test]
fn replay_refusals_are_recognised_alone_and_in_a_batch() {
    let replay = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"replay"}}"#;
    assert!(refused_as_replay(replay));
    assert!(refused_as_replay(
        br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"id":2,"error":{"code":-32005}}]"#
    ));
    for other in [
        &br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32004}}"#[..],
        br#"{"jsonrpc":"2.0","id":1,"result":{"decision":"allow"}}"#,
        b"not json",
    ] {
        assert!(!refused_as_replay(other));
    }
}

#[tokio::test]
async fn an_oversized_reply_is_refused() {
    let server = TestServer::plain().await;
    let transport = plain(format!("{}/acs", server.base)).with_max_reply(8);
    let err = call(&transport).await.unwrap_err();
    assert!(
        matches!(err, TransportError::FrameTooLarge { max: 8, .. }),
        "{err}"
    );
}

#[test]
fn tls_settings_with_plain_http_are_refused() {
    let tls = TlsSettings {
        ca_file: Some("/etc/ca.pem".into()),
        ..TlsSettings::default()
    };
    let err = HttpTransport::new("http://127.0.0.1:1/acs", tls).unwrap_err();
    assert!(matches!(err, TransportError::Config(_)), "{err}");
}

#[test]
fn other_schemes_are_refused() {
    let err = HttpTransport::new("ftp://guardian/acs", TlsSettings::default()).unwrap_err();
    assert!(matches!(err, TransportError::Config(_)), "{err}");
}

#[tokio::test]
async fn https_with_the_ca_file_negotiates_http2_on_one_connection() {
    let pki = TestPki::generate();
    let server = TestServer::tls(pki.server_config(false)).await;
    let url = format!("{}/version", server.base);
    let transport = HttpTransport::new(&url, pki.client_settings(false)).unwrap();
    assert_eq!(transport.name(), "https");
    for _ in 0..3 {
        assert_eq!(call(&transport).await.unwrap(), "HTTP/2.0");
    }
    assert_eq!(server.accepted(), 1);
}

#[tokio::test]
async fn https_without_the_ca_is_a_tls_error() {
    let pki = TestPki::generate();
    let server = TestServer::tls(pki.server_config(false)).await;
    let url = format!("{}/acs", server.base);
    let transport = HttpTransport::new(&url, TlsSettings::default()).unwrap();
    let err = call(&transport).await.unwrap_err();
    assert!(
        matches!(&err, TransportError::Tls(m) if m.contains("UnknownIssuer")),
        "{err}"
    );
}

#[tokio::test]
async fn mtls_with_the_client_certificate_succeeds() {
    let pki = TestPki::generate();
    let server = TestServer::tls(pki.server_config(true)).await;
    let url = format!("{}/acs", server.base);
    let transport = HttpTransport::new(&url, pki.client_settings(true)).unwrap();
    assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
    assert_eq!(server.tls_failures(), 0);
}

#[tokio::test]
async fn mtls_without_a_client_certificate_fails_the_handshake() {
    let pki = TestPki::generate();
    let server = TestServer::tls(pki.server_config(true)).await;
    let url = format!("{}/acs", server.base);
    let transport = HttpTransport::new(&url, pki.client_settings(false)).unwrap();
    let err = call(&transport).await.unwrap_err();
    assert!(matches!(err, TransportError::Tls(_)), "{err}");
    // The server counts its refusal just after sending the alert.
    for _ in 0..100 {
        if server.tls_failures() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.tls_failures(), 1);
}
