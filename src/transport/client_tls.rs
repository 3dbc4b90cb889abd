//! TLS for the proxy as a client: which servers to trust, and the client
//! certificate for mutual TLS. A remote Guardian over `https://` and the
//! `https://`/`wss://` upstream clients are configured alike (`ca_file`,
//! `client_cert`, `client_key`), so both build their rustls configuration
//! here; it sits in the transport layer, below both.
//!
//! The rustls configuration is built with the ring provider passed in
//! explicitly, so nothing depends on a process-wide provider having been
//! installed first. PEM files are read with `rustls-pki-types`.

#[cfg(test)]
pub(crate) mod test_pki;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// A client certificate chain and its private key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// ALPN offers: HTTP/2 when the server speaks it, else HTTP/1.1.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why the TLS settings cannot be turned into a client configuration.
/// The messages name the file at fault, never its contents.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// The settings cannot work: a client certificate without its key, or
    /// a certificate and key that do not belong together.
    #[error("invalid TLS settings: {0}")]
    Config(String),
    /// A certificate or key file could not be read or holds nothing usable.
    #[error("cannot load the {what} from {}: {reason}", path.display())]
    Pem {
        /// Which file it was meant to be ("CA file", "client key", ...).
        what: &'static str,
        /// The file, so the operator knows which one to fix.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
}

/// Where the TLS material for a server reached over TLS lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// A PEM bundle of extra CA certificates, trusted besides the public
    /// web roots (for a server with a private CA).
    pub ca_file: Option<PathBuf>,
    /// The PEM certificate chain this proxy presents (mutual TLS).
    pub client_cert: Option<PathBuf>,
    /// The PEM private key for `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl TlsSettings {
    /// Whether nothing is configured (public roots, no client certificate).
    pub fn is_empty(&self) -> bool {
        self == &TlsSettings::default()
    }

    /// Builds the rustls client configuration these settings describe.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Config(format!("TLS versions: {err}")))?
            .with_root_certificates(self.roots()?);
        let mut config = match self.identity()? {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|err| self.unusable_identity(&err))?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// The public web roots, plus the CA file's certificates.
    fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let Some(path) = &self.ca_file else {
            return Ok(roots);
        };
        for cert in read_certs(path, "CA file")? {
            roots
                .add(cert)
                .map_err(|err| pem_error("CA file", path, err))?;
        }
        Ok(roots)
    }

    /// The client certificate chain and key, when both are configured.
    fn identity(&self) -> Result<Option<Identity>, TlsError> {
        match (&self.client_cert, &self.client_key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert, "client certificate")?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|err| pem_error("client key", key, err))?;
                Ok(Some((chain, key)))
            }
            _ => Err(TlsError::Config(
                "client_cert and client_key must be given together".into(),
            )),
        }
    }

    fn unusable_identity(&self, err: &rustls::Error) -> TlsError {
        let name = |path: &Option<PathBuf>| {
            path.as_deref()
                .map_or_else(String::new, |p| p.display().to_string())
        };
        TlsError::Config(format!(
            "client certificate {} and key {} cannot be used together: {err}",
            name(&self.client_cert),
            name(&self.client_key)
        ))
    }
}

/// Every certificate in a PEM file; a file with none is an error, since it
/// was named to be used.
fn read_certs(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|err| pem_error(what, path, err))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(what, path, err))?;
    if certs.is_empty() {
        return Err(pem_error(what, path, "no CERTIFICATE block found"));
    }
    Ok(certs)
}

fn pem_error(what: &'static str, path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        what,
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::TestPki;
    use super::*;

    fn settings(ca: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> TlsSettings {
        TlsSettings {
            ca_file: ca.map(Path::to_owned),
            client_cert: cert.map(Path::to_owned),
            client_key: key.map(Path::to_owned),
        }
    }

    #[test]
    fn default_settings_offer_h2_then_http1() {
        let config = TlsSettings::default().client_config().unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(!config.client_auth_cert_resolver.has_certs());
    }

    #[test]
    fn a_ca_file_and_client_identity_load() {
        let pki = TestPki::generate();
        let config = pki.client_settings(true).client_config().unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let err = settings(Some(Path::new("/no/such/ca.pem")), None, None)
            .client_config()
            .unwrap_err();
        assert!(matches!(
            &err,
            TlsError::Pem {
                what: "CA file",
                ..
            }
        ));
        assert!(err.to_string().contains("/no/such/ca.pem"), "{err}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let pki = TestPki::generate();
        let err = settings(Some(&pki.client_key), None, None)
            .client_config()
            .unwrap_err();
        assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
        assert!(err.to_string().contains("client.key"), "{err}");
    }

    #[test]
    fn a_key_file_without_a_key_is_named() {
        let pki = TestPki::generate();
        let err = settings(None, Some(&pki.client_cert), Some(&pki.ca_cert))
            .client_config()
            .unwrap_err();
        assert!(
            matches!(
                &err,
                TlsError::Pem {
                    what: "client key",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("ca.pem"), "{err}");
    }

    #[test]
    fn a_certificate_without_its_key_is_refused() {
        let pki = TestPki::generate();
        let err = settings(None, Some(&pki.client_cert), None)
            .client_config()
            .unwrap_err();
        assert!(matches!(err, TlsError::Config(_)));
    }
}
