//! TLS termination with a certificate that is reloaded when its files
//! change: rustls asks [`ReloadingCert`] for the key on every handshake,
//! and a poller swaps in a new one when the PEM files' modification time
//! or size changes. A pair that fails to load keeps the previous one.
//! With `client_ca`, clients must present a certificate it issued
//! (`client_cert`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use super::client_cert;
use super::edge::file_stamp;

type Stamp = Option<(SystemTime, u64)>;

/// The listener's certificate and key, reloaded when the files change,
/// and the client certificates it requires, if any.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<(Arc<CertifiedKey>, Stamp, Stamp)>,
    /// `client_ca`: mutual TLS.
    client_auth: Option<Arc<dyn ClientCertVerifier>>,
}

impl ReloadingCert {
    /// Loads the pair (and the client CAs); fails when a file is
    /// unreadable or the pair does not match.
    pub(crate) fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<Arc<Self>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamps = (file_stamp(cert), file_stamp(key));
        let certified = load_pair(cert, key, &provider)?;
        let client_auth = client_ca
            .map(|path| client_cert::verifier(path, provider.clone()))
            .transpose()
            .map_err(|err| err.to_string())?;
        Ok(Arc::new(Self {
            cert_path: cert.to_owned(),
            key_path: key.to_owned(),
            provider,
            current: RwLock::new((Arc::new(certified), stamps.0, stamps.1)),
            client_auth,
        }))
    }

    /// Reloads the pair if either file changed since the last load.
    pub(crate) fn reload_if_changed(&self) {
        let stamps = (file_stamp(&self.cert_path), file_stamp(&self.key_path));
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if (current.1, current.2) == stamps {
                return;
            }
        }
        match load_pair(&self.cert_path, &self.key_path, &self.provider) {
            Ok(certified) => {
                let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                *current = (Arc::new(certified), stamps.0, stamps.1);
                tracing::info!(cert = %self.cert_path.display(), "reloaded the TLS certificate");
            }
            Err(err) => {
                // Retried at the next change; a half-written pair is normal mid-rotation.
                let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
                current.1 = stamps.0;
                current.2 = stamps.1;
                tracing::warn!(%err, "keeping the previous TLS certificate");
            }
        }
    }

    /// A TLS acceptor offering HTTP/2 and HTTP/1.1 over ALPN, requiring a
    /// client certificate when `client_ca` is set.
    pub(crate) fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, String> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("TLS versions: {err}"))?;
        let builder = match &self.client_auth {
            Some(verifier) => builder.with_client_cert_verifier(verifier.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        Some(current.0.clone())
    }
}

fn load_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|err| format!("listen.tls_cert {}: {err}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("listen.tls_cert {}: {err}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "listen.tls_cert {}: no certificate found",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|err| format!("listen.tls_key {}: {err}", key.display()))?;
    CertifiedKey::from_der(chain, key_der, provider)
        .map_err(|err| format!("listen.tls_cert and listen.tls_key do not fit together: {err}"))
}
