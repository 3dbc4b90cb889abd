//! A throwaway PKI for the TLS tests: one CA, a server certificate for
//! `localhost` / `127.0.0.1`, and a client certificate, all signed by the CA
//! and written as PEM files the way an operator would supply them.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::TlsSettings;

/// The generated material; the files live as long as this value.
pub(crate) struct TestPki {
    _dir: tempfile::TempDir,
    /// The CA certificate (PEM file).
    pub ca_cert: PathBuf,
    /// The client certificate (PEM file).
    pub client_cert: PathBuf,
    /// The client key (PEM file).
    pub client_key: PathBuf,
    ca_der: CertificateDer<'static>,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl TestPki {
    /// Generates a fresh CA and its two leaf certificates.
    pub fn generate() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server.signed_by(&server_key, &issuer).unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(vec!["acs-proxy".into()]).unwrap();
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = client.signed_by(&client_key, &issuer).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        Self {
            ca_cert: write("ca.pem", ca.pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            _dir: dir,
            ca_der: ca.der().clone(),
            server_cert: server.der().clone(),
            server_key: server_key.serialize_der(),
        }
    }

    /// Client settings trusting this CA, with or without the client
    /// certificate.
    pub fn client_settings(&self, with_identity: bool) -> TlsSettings {
        TlsSettings {
            ca_file: Some(self.ca_cert.clone()),
            client_cert: with_identity.then(|| self.client_cert.clone()),
            client_key: with_identity.then(|| self.client_key.clone()),
        }
    }

    /// A server configuration offering h2 and http/1.1, optionally
    /// requiring a client certificate signed by this CA.
    pub fn server_config(&self, require_client_cert: bool) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut config = builder
            .with_single_cert(vec![self.server_cert.clone()], key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}
