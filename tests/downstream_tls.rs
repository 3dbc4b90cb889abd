//! TLS termination on the agent-facing listener: HTTPS with HTTP/2 over
//! ALPN (and HTTP/1.1), and a certificate rotated on disk is picked up
//! without a restart.

mod support;

use std::path::Path;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use reqwest::{Client, StatusCode, Version};
use serde_json::json;
use support::mcp_http::{McpHttp, SseStream};
use support::{listen_section, tool_call, NetProxy, Scratch};

/// A CA (PEM) and a leaf for localhost/127.0.0.1 it signed (PEM chain, PEM key).
fn pki() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}

/// A client trusting only `ca_pem`, offering h2 and http/1.1.
fn client(ca_pem: &str) -> Client {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .build()
        .unwrap()
}

fn write(path: &Path, text: &str) {
    // Written aside and renamed, like a certificate manager does.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn https_with_http2_and_certificate_rotation() {
    let scratch = Scratch::new();
    let (ca, chain, key) = pki();
    let cert_path = scratch.path("server.pem");
    let key_path = scratch.path("server.key");
    write(&cert_path, &chain);
    write(&key_path, &key);
    let config = scratch.demo_config(&listen_section(
        "http",
        &format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            cert_path.display().to_string(),
            key_path.display().to_string()
        ),
    ));
    let proxy = NetProxy::start(&config);
    assert_eq!(proxy.scheme, "https");
    let url = proxy.url("/mcp");

    let mut mcp = McpHttp::new(client(&ca), url.clone());
    mcp.initialize("2025-11-25", json!({})).await;
    let response = mcp
        .post(&tool_call(2, "echo", json!({"text":"over tls"})))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_2, "h2 over ALPN");
    let mut stream = SseStream::new(response);
    let reply = stream.next_message().await.unwrap().json();
    assert_eq!(reply["result"]["content"][0]["text"], "over tls");

    // Plain HTTP to the TLS port gets nowhere.
    let plain = support::mcp_http::client(None)
        .get(url.replace("https://", "http://"))
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != StatusCode::OK);

    // Rotate to a certificate from another CA: new handshakes use it.
    let (new_ca, new_chain, new_key) = pki();
    write(&key_path, &new_key);
    write(&cert_path, &new_chain);
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let fresh = client(&new_ca);
        if let Ok(response) = fresh
            .get(&url)
            .header("accept", "text/event-stream")
            .send()
            .await
        {
            // No session id: 400, but the handshake succeeded.
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let stale = client(&ca).get(&url).send().await;
    assert!(stale.is_err(), "the old certificate is no longer served");
}
