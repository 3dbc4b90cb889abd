//! Mutual TLS on the agent-facing listener (`[listen] client_ca`): only a
//! client with a certificate from the configured CA completes the
//! handshake, the certificate names the caller in every hook
//! (`metadata.user_context`, `authentication_method = "mtls"`), a SPIFFE
//! URI SAN is the user id, and a session serves only the certificate that
//! opened it.

mod support;

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use reqwest::{Client, StatusCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use support::mcp_http::McpHttp;
use support::{listen_section, tool_call, NetProxy, Scratch};

const SPIFFE_ID: &str = "spiffe://example.org/ns/agents/sa/planner";

/// A throwaway certificate authority.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf (PEM certificate, PEM key) with this subject and SANs.
    fn leaf(&self, subject: &[(DnType, &str)], sans: Vec<SanType>) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        for (kind, value) in subject {
            name.push(kind.clone(), *value);
        }
        params.distinguished_name = name;
        params.subject_alt_names = sans;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// The listener's certificate for 127.0.0.1.
    fn server(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A client trusting `server_ca`, presenting `identity` (PEM chain, PEM key).
fn client(server_ca: &str, identity: Option<&(String, String)>) -> Client {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(server_ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let tls = match identity {
        Some((chain, key)) => {
            let chain = CertificateDer::pem_slice_iter(chain.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .build()
        .unwrap()
}

/// A proxy in front of the demo server, requiring certificates from
/// `client_ca` (written next to the config; the paths are relative, so
/// they follow the config file), recording hook params in the audit log.
fn proxy(scratch: &Scratch, server_ca: &Ca, client_ca: &Ca) -> NetProxy {
    let (chain, key) = server_ca.server();
    std::fs::write(scratch.path("server.pem"), chain).unwrap();
    std::fs::write(scratch.path("server.key"), key).unwrap();
    std::fs::write(scratch.path("clients-ca.pem"), &client_ca.pem).unwrap();
    let config = scratch.demo_config_recording_content(&listen_section(
        "http",
        "tls_cert = \"server.pem\"\ntls_key = \"server.key\"\nclient_ca = \"clients-ca.pem\"\n",
    ));
    let proxy = NetProxy::start(&config);
    assert_eq!(proxy.scheme, "https");
    proxy
}

/// The `metadata.user_context` of the audited tool call with `text`.
fn user_context_of_call(scratch: &Scratch, text: &str) -> Value {
    let entries = scratch.audit_entries();
    let call = entries
        .iter()
        .find(|entry| {
            entry["step_type"] == "steps/toolCallRequest"
                && entry["hook_params"].to_string().contains(text)
        })
        .unwrap_or_else(|| panic!("no audited tool call with {text:?}: {entries:#?}"));
    call["hook_params"]["metadata"]["user_context"].clone()
}

async fn echo(mcp: &McpHttp, id: i64, text: &str) -> Value {
    let (reply, _) = mcp
        .request(&tool_call(id, "echo", json!({ "text": text })))
        .await;
    reply
}

#[tokio::test]
async fn the_client_certificate_names_the_caller_and_owns_its_session() {
    let scratch = Scratch::new();
    let (server_ca, client_ca) = (Ca::new("server CA"), Ca::new("client CA"));
    let mut proxy = proxy(&scratch, &server_ca, &client_ca);
    let url = proxy.url("/mcp");

    let alice = client_ca.leaf(
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::CommonName, "alice"),
        ],
        Vec::new(),
    );
    let mut as_alice = McpHttp::new(client(&server_ca.pem, Some(&alice)), url.clone());
    as_alice.initialize("2025-11-25", json!({})).await;
    let reply = echo(&as_alice, 2, "from alice").await;
    assert_eq!(reply["result"]["content"][0]["text"], "from alice");

    let planner = client_ca.leaf(
        &[(DnType::CommonName, "planner")],
        vec![SanType::URI(SPIFFE_ID.try_into().unwrap())],
    );
    let mut as_planner = McpHttp::new(client(&server_ca.pem, Some(&planner)), url.clone());
    as_planner.initialize("2025-11-25", json!({})).await;
    echo(&as_planner, 2, "from the planner").await;

    // Alice's session id presented with the planner's certificate: 404,
    // as for an unknown session.
    let mut hijack = McpHttp::new(as_planner.client.clone(), url.clone());
    hijack.session = as_alice.session.clone();
    hijack.version = as_alice.version.clone();
    let response = hijack
        .post(&tool_call(3, "echo", json!({"text": "hijack"})))
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // Alice herself still has it.
    echo(&as_alice, 4, "alice again").await;

    assert_eq!(
        user_context_of_call(&scratch, "from alice"),
        json!({"user_id": "alice", "roles": [], "authentication_method": "mtls"})
    );
    assert_eq!(
        user_context_of_call(&scratch, "from the planner"),
        json!({"user_id": SPIFFE_ID, "roles": [], "authentication_method": "mtls"})
    );
    let starts: Vec<Value> = scratch
        .audit_entries()
        .into_iter()
        .filter(|entry| entry["step_type"] == "steps/sessionStart")
        .map(|entry| entry["hook_params"]["payload"]["user_identity"].clone())
        .collect();
    assert!(
        starts.contains(&json!({"type": "cert_subject", "subject": "CN=alice,O=Acme"})),
        "{starts:#?}"
    );
    assert!(
        starts.contains(&json!({
            "type": "cert_subject", "subject": "CN=planner", "uris": [SPIFFE_ID]
        })),
        "{starts:#?}"
    );
    assert!(!scratch.server_lines().iter().any(|l| l.contains("hijack")));

    // The refused hijack is on the edge chain, naming who tried.
    assert!(proxy.terminate().success());
    let refused: Vec<Value> = scratch
        .audit_entries()
        .into_iter()
        .filter(|e| {
            e["session_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("edge-"))
        })
        .collect();
    assert!(
        refused
            .iter()
            .any(|e| e["user_id"] == SPIFFE_ID && e["authentication_method"] == "mtls"),
        "{refused:#?}"
    );
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn clients_without_a_certificate_from_the_ca_are_refused() {
    let scratch = Scratch::new();
    let (server_ca, client_ca) = (Ca::new("server CA"), Ca::new("client CA"));
    let proxy = proxy(&scratch, &server_ca, &client_ca);
    let url = proxy.url("/mcp");
    let initialize = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"mtls-test","version":"1"}}});

    let post = |client: Client| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize.to_string())
            .send()
    };
    let refused = post(client(&server_ca.pem, None)).await;
    assert!(refused.is_err(), "no certificate: {refused:?}");

    let stranger_ca = Ca::new("another CA");
    let stranger = stranger_ca.leaf(&[(DnType::CommonName, "alice")], Vec::new());
    let refused = post(client(&server_ca.pem, Some(&stranger))).await;
    assert!(
        refused.is_err(),
        "a certificate from another CA: {refused:?}"
    );

    // The same name from the configured CA gets in.
    let alice = client_ca.leaf(&[(DnType::CommonName, "alice")], Vec::new());
    let mut mcp = McpHttp::new(client(&server_ca.pem, Some(&alice)), url.clone());
    mcp.initialize("2025-11-25", json!({})).await;
    assert!(scratch
        .audit_entries()
        .iter()
        .all(|entry| entry["step_type"] != "steps/toolCallRequest"));
}
