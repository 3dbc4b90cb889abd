//! Mutual TLS on the listener: which client certificates are admitted
//! (`[listen] client_ca`), and who a verified one says the caller is.
//!
//! rustls verifies the client's chain against `client_ca` during the
//! handshake; a client without a certificate, or with one another CA
//! issued, never gets to send a request. The accept loop then reads the
//! verified leaf once per connection into a [`ClientCertificate`], which
//! rides along in every request's extensions. [`principal`] turns it into
//! the request's principal when no bearer credential names one: with
//! bearer auth configured too, the bearer identity is the principal and
//! the certificate only admits the connection.
//!
//! The identity is `CertSubject { subject, uris }`: the subject DN in
//! RFC 4514 form (`dn`) and the URI subject alternative names. Its
//! `user_id` is the first URI SAN when there is one (a workload's SPIFFE
//! ID, `spiffe://trust-domain/path`, is what names it), else the
//! subject's common name, else the whole DN. Sessions bind to the subject
//! and URIs together, so another certificate cannot use them.

mod dn;

use std::path::Path;
use std::sync::Arc;

use axum::http::request::Parts;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::principal::Principal;
use crate::hooks::{Identity, IdentityDescriptor};

/// Why mutual TLS cannot be set up, or a certificate not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientCertError {
    /// `client_ca` could not be read or holds no usable CA certificate.
    #[error("listen.client_ca {path}: {reason}")]
    CaFile {
        /// The file, so the operator knows which one to fix.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The verified certificate is not one x509-parser can read.
    #[error("the client certificate cannot be parsed: {0}")]
    Unparsable(String),
}

/// The verifier that admits only certificates `client_ca` issued; a client
/// must present one.
pub(crate) fn verifier(
    client_ca: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, ClientCertError> {
    let ca_error = |reason: String| ClientCertError::CaFile {
        path: client_ca.display().to_string(),
        reason,
    };
    let certificates = CertificateDer::pem_file_iter(client_ca)
        .map_err(|err| ca_error(err.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| ca_error(err.to_string()))?;
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(ca_error("no CA certificate found".into()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|err| ca_error(err.to_string()))
}

/// The verified client certificate of a connection, as the principal it
/// names (read once per connection, cloned into each request).
#[derive(Debug, Clone)]
pub(crate) struct ClientCertificate {
    principal: Principal,
}

impl ClientCertificate {
    /// Reads the leaf certificate rustls verified.
    pub(crate) fn from_der(der: &CertificateDer<'_>) -> Result<Self, ClientCertError> {
        let identity = identity(der)?;
        Ok(Self {
            principal: Principal::new(identity),
        })
    }
}

/// The principal of a request's client certificate, if its connection
/// presented one.
pub(crate) fn principal(parts: &Parts) -> Option<Principal> {
    parts
        .extensions
        .get::<ClientCertificate>()
        .map(|cert| cert.principal.clone())
}

/// Who the certificate names.
fn identity(der: &CertificateDer<'_>) -> Result<Identity, ClientCertError> {
    let (_, cert) = X509Certificate::from_der(der.as_ref())
        .map_err(|err| ClientCertError::Unparsable(err.to_string()))?;
    let subject = dn::rfc4514(cert.subject());
    let uris = uri_sans(&cert)?;
    let common_name = cert
        .subject()
        .iter_common_name()
        .find_map(|cn| cn.as_str().ok())
        .map(str::to_owned);
    let user_id = uris
        .first()
        .cloned()
        .or(common_name)
        .unwrap_or_else(|| subject.clone());
    Ok(Identity {
        user_id,
        roles: Vec::new(),
        tenant: None,
        descriptor: IdentityDescriptor::CertSubject { subject, uris },
    })
}

/// The URI subject alternative names, in certificate order.
fn uri_sans(cert: &X509Certificate<'_>) -> Result<Vec<String>, ClientCertError> {
    let sans = cert
        .subject_alternative_name()
        .map_err(|err| ClientCertError::Unparsable(err.to_string()))?;
    Ok(sans
        .map(|sans| {
            sans.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::URI(uri) => Some((*uri).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::http::server::edge::Edge;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn certificate(dn: &[(DnType, &str)], sans: Vec<SanType>) -> CertificateDer<'static> {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        for (kind, value) in dn {
            name.push(kind.clone(), *value);
        }
        params.distinguished_name = name;
        params.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    fn descriptor(identity: &Identity) -> (&str, &[String]) {
        match &identity.descriptor {
            IdentityDescriptor::CertSubject { subject, uris } => (subject, uris),
            other => panic!("not a certificate subject: {other:?}"),
        }
    }

    #[test]
    fn a_spiffe_id_names_the_caller() {
        let spiffe = "spiffe://example.org/ns/prod/sa/agent";
        let der = certificate(
            &[
                (DnType::OrganizationName, "Acme"),
                (DnType::CommonName, "agent-1"),
            ],
            vec![
                SanType::DnsName("agent.example".try_into().unwrap()),
                SanType::URI(spiffe.try_into().unwrap()),
            ],
        );
        let identity = identity(&der).unwrap();
        assert_eq!(identity.user_id, spiffe);
        assert_eq!(identity.descriptor.authentication_method(), "mtls");
        let (subject, uris) = descriptor(&identity);
        assert_eq!(subject, "CN=agent-1,O=Acme");
        assert_eq!(uris, [spiffe.to_owned()]);
    }

    #[test]
    fn without_a_uri_the_common_name_then_the_dn_names_the_caller() {
        let der = certificate(
            &[
                (DnType::OrganizationName, "Acme, Inc."),
                (DnType::CommonName, "alice"),
            ],
            Vec::new(),
        );
        let identity = identity(&der).unwrap();
        assert_eq!(identity.user_id, "alice");
        assert_eq!(descriptor(&identity).0, "CN=alice,O=Acme\\, Inc.");
        let der = certificate(
            &[
                (DnType::CountryName, "DE"),
                (DnType::OrganizationName, "Acme"),
            ],
            Vec::new(),
        );
        assert_eq!(identity_of(&der), "O=Acme,C=DE");
    }

    fn identity_of(der: &CertificateDer<'_>) -> String {
        identity(der).unwrap().user_id
    }

    #[test]
    fn another_certificate_is_another_principal() {
        let alice = certificate(&[(DnType::CommonName, "alice")], Vec::new());
        let bob = certificate(&[(DnType::CommonName, "bob")], Vec::new());
        let alice_again = certificate(&[(DnType::CommonName, "alice")], Vec::new());
        let principal = |der| ClientCertificate::from_der(der).unwrap().principal;
        assert!(
            principal(&alice) == principal(&alice_again),
            "same subject, renewed key"
        );
        assert!(principal(&alice) != principal(&bob));
    }

    #[tokio::test]
    async fn a_bearer_principal_outranks_the_certificate() {
        use crate::config::ListenConfig;
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, "secret-one\n").unwrap();
        let der = certificate(&[(DnType::CommonName, "alice")], Vec::new());
        let request = |auth: Option<&str>| {
            let mut builder = axum::http::Request::builder().header("host", "localhost");
            if let Some(auth) = auth {
                builder = builder.header("authorization", auth);
            }
            let mut parts = builder.body(()).unwrap().into_parts().0;
            parts
                .extensions
                .insert(ClientCertificate::from_der(&der).unwrap());
            parts
        };
        let bound = "127.0.0.1:8080".parse().unwrap();
        let certificate_only = Edge::new(&ListenConfig::default(), bound).unwrap();
        let principal = certificate_only
            .check(&request(None), "/mcp")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(principal.identity().user_id, "alice");
        let listen = ListenConfig {
            auth_tokens_file: Some(tokens),
            ..ListenConfig::default()
        };
        let both = Edge::new(&listen, bound).unwrap();
        let principal = both
            .check(&request(Some("Bearer secret-one")), "/mcp")
            .await
            .unwrap();
        assert_eq!(principal.unwrap().identity().user_id, "token-1");
        assert!(
            both.check(&request(None), "/mcp").await.is_err(),
            "the certificate is no bearer token"
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let err = verifier(&path, provider).err().unwrap().to_string();
        assert!(err.contains("listen.client_ca"), "{err}");
    }
}
