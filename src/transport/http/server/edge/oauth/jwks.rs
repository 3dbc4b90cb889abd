//! The issuer's signing keys (JWKS), cached: a token naming a known `kid`
//! is checked against memory, never waiting on the network.
//!
//! Keys come from `jwks_url` (fetched at startup, every
//! `jwks_refresh_interval_s`, and again when a token names a `kid` the
//! cache lacks, at most once per `jwks_refresh_min_interval_s`) or from
//! `jwks_file` (re-read on the same occasions). A fetch that fails keeps
//! the keys already held, so a briefly unreachable authorization server
//! does not lock callers out; a key never fetched is never trusted, so an
//! unknown `kid` while the server is unreachable is refused.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde_json::Value;

use crate::config::OAuthConfig;
use crate::transport::client_tls::TlsSettings;

/// How long one JWKS fetch may take, connect included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the TCP (and TLS) connect of a fetch may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// Why the keys could not be loaded. Keys already held stay in use.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JwksError {
    /// The HTTP client cannot be built from the settings.
    #[error("JWKS client: {0}")]
    Client(String),
    /// The server could not be reached or broke off.
    #[error("fetching the JWKS failed: {0}")]
    Fetch(String),
    /// The server answered, but not with the keys.
    #[error("the JWKS endpoint answered HTTP {0}")]
    Status(u16),
    /// The document is larger than any key set should be.
    #[error("the JWKS document exceeds {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    /// The file could not be read.
    #[error("cannot read the JWKS file {}: {reason}", path.display())]
    Read {
        /// The file, so the operator knows which one to fix.
        path: PathBuf,
        /// What the system said.
        reason: String,
    },
    /// The document is not a JWKS, or holds no key acs-proxy can use.
    #[error("the JWKS holds no usable signing key: {0}")]
    NoKeys(String),
}

/// One usable public key.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    /// The public key, as `jsonwebtoken` checks signatures with it.
    pub(crate) decoding: DecodingKey,
    /// The JWK's own `alg`, when it pins one.
    pub(crate) algorithm: Option<Algorithm>,
}

impl Key {
    /// Whether the key may check a token signed with `algorithm`.
    pub(crate) fn fits(&self, algorithm: Algorithm) -> bool {
        self.decoding.family() == algorithm.family()
            && self.algorithm.is_none_or(|pinned| pinned == algorithm)
    }
}

/// A snapshot of the keys, by `kid`; keys without one are checked only
/// against tokens without one.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    named: HashMap<String, Key>,
    unnamed: Vec<Key>,
}

impl KeySet {
    /// The candidate keys for a token's `kid` and `alg`.
    pub(crate) fn candidates(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> impl Iterator<Item = &Key> {
        let (named, unnamed) = match kid {
            Some(kid) => (self.named.get(kid), &[][..]),
            None => (None, &self.unnamed[..]),
        };
        named
            .into_iter()
            .chain(unnamed)
            .filter(move |key| key.fits(algorithm))
    }

    /// Whether the set has a key named `kid` (any key, with no `kid`).
    pub(crate) fn knows(&self, kid: Option<&str>) -> bool {
        match kid {
            Some(kid) => self.named.contains_key(kid),
            None => !self.unnamed.is_empty(),
        }
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.named.len() + self.unnamed.len()
    }

    /// The signing keys of a JWKS document. Encryption keys, symmetric
    /// keys and keys of unknown types are skipped; none usable is an error.
    pub(crate) fn parse(document: &[u8]) -> Result<Self, JwksError> {
        let value: Value =
            serde_json::from_slice(document).map_err(|err| JwksError::NoKeys(err.to_string()))?;
        let Some(keys) = value.get("keys").and_then(Value::as_array) else {
            return Err(JwksError::NoKeys("no \"keys\" array".into()));
        };
        let mut set = KeySet::default();
        for key in keys {
            let Ok(jwk) = serde_json::from_value::<Jwk>(key.clone()) else {
                continue;
            };
            let Some(usable) = usable(&jwk) else { continue };
            match jwk.common.key_id {
                Some(kid) => {
                    set.named.insert(kid, usable);
                }
                None => set.unnamed.push(usable),
            }
        }
        if set.len() == 0 {
            return Err(JwksError::NoKeys(format!(
                "none of its {} keys is a public signing key",
                keys.len()
            )));
        }
        Ok(set)
    }
}

/// A JWK as a verification key, unless it is for encryption, symmetric,
/// or of a type or algorithm ring does not check.
fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        None => None,
        Some(pinned) => Some(signing_algorithm(pinned)?),
    };
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    (decoding.family() != AlgorithmFamily::Hmac).then_some(Key {
        decoding,
        algorithm,
    })
}

/// The public-key JWS algorithm a JWK's `alg` names.
fn signing_algorithm(pinned: KeyAlgorithm) -> Option<Algorithm> {
    Some(match pinned {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// Where the keys come from.
enum Source {
    Url {
        url: String,
        client: reqwest::Client,
    },
    File(PathBuf),
}

/// The cached keys and how to refresh them.
pub(crate) struct Jwks {
    source: Source,
    keys: RwLock<Arc<KeySet>>,
    /// When keys were last loaded for an unknown `kid`; held across the
    /// load, so concurrent tokens with the same new `kid` share one fetch.
    last_unknown_kid_load: tokio::sync::Mutex<Option<Instant>>,
    min_interval: Duration,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match &self.source {
            Source::Url { url, .. } => url.clone(),
            Source::File(path) => path.display().to_string(),
        };
        f.debug_struct("Jwks").field("source", &source).finish()
    }
}

impl Jwks {
    /// An empty cache for `config`'s key source; nothing is loaded yet.
    pub(crate) fn new(config: &OAuthConfig) -> Result<Self, JwksError> {
        let source = match (&config.jwks_url, &config.jwks_file) {
            (Some(url), _) => Source::Url {
                url: url.clone(),
                client: http_client(config)?,
            },
            (None, Some(path)) => Source::File(path.clone()),
            (None, None) => return Err(JwksError::Client("no jwks_url or jwks_file".into())),
        };
        Ok(Self {
            source,
            keys: RwLock::new(Arc::new(KeySet::default())),
            last_unknown_kid_load: tokio::sync::Mutex::new(None),
            min_interval: Duration::from_secs(config.jwks_refresh_min_interval_s),
        })
    }

    /// The keys held now.
    pub(crate) fn current(&self) -> Arc<KeySet> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether any key is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.current().len() == 0
    }

    /// Loads the keys now, replacing the cached ones on success.
    pub(crate) async fn load(&self) -> Result<usize, JwksError> {
        let document = match &self.source {
            Source::Url { url, client } => fetch(client, url).await?,
            Source::File(path) => tokio::fs::read(path).await.map_err(|err| JwksError::Read {
                path: path.clone(),
                reason: err.to_string(),
            })?,
        };
        let set = KeySet::parse(&document)?;
        let count = set.len();
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
        Ok(count)
    }

    /// The keys, loaded again first when they lack `kid` and the last such
    /// load is at least `jwks_refresh_min_interval_s` old. A failed load is
    /// logged and leaves the cached keys as they were.
    pub(crate) async fn for_unknown_kid(&self, kid: Option<&str>) -> Arc<KeySet> {
        let mut last = self.last_unknown_kid_load.lock().await;
        let current = self.current();
        if current.knows(kid) {
            return current;
        }
        if last.is_some_and(|at| at.elapsed() < self.min_interval) {
            return current;
        }
        *last = Some(Instant::now());
        match self.load().await {
            Ok(count) => tracing::info!(kid, keys = count, "JWKS loaded for a new key id"),
            Err(err) => tracing::warn!(kid, %err, "JWKS reload for a new key id failed"),
        }
        self.current()
    }
}

/// The JWKS client: the proxy's reqwest stack, ring TLS with the public
/// roots (plus `jwks_ca_file`), no redirects, no proxy from the
/// environment, bounded in time.
fn http_client(config: &OAuthConfig) -> Result<reqwest::Client, JwksError> {
    let tls = TlsSettings {
        ca_file: config.jwks_ca_file.clone(),
        ..TlsSettings::default()
    }
    .client_config()
    .map_err(|err| JwksError::Client(err.to_string()))?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|err| JwksError::Client(err.to_string()))
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, JwksError> {
    let fetch_error = |err: reqwest::Error| JwksError::Fetch(error_chain(&err));
    let mut response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(fetch_error)?;
    if !response.status().is_success() {
        return Err(JwksError::Status(response.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(fetch_error)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(JwksError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error with its causes, which reqwest keeps apart ("error sending
/// request" alone says nothing).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rsa_jwk(kid: Option<&str>, extra: Value) -> Value {
        let mut key = json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"});
        if let Some(kid) = kid {
            key["kid"] = json!(kid);
        }
        key.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        key
    }

    #[test]
    fn signing_keys_by_kid_and_alg() {
        let document = json!({"keys": [
            rsa_jwk(Some("k1"), json!({"alg": "RS256"})),
            rsa_jwk(Some("enc"), json!({"use": "enc"})),
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "XYZ", "kid": "weird"},
            rsa_jwk(None, json!({})),
        ]});
        let set = KeySet::parse(document.to_string().as_bytes()).unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.knows(Some("k1")) && !set.knows(Some("enc")) && !set.knows(Some("hmac")));
        assert_eq!(set.candidates(Some("k1"), Algorithm::RS256).count(), 1);
        assert_eq!(
            set.candidates(Some("k1"), Algorithm::PS256).count(),
            0,
            "alg pinned"
        );
        assert_eq!(set.candidates(Some("k1"), Algorithm::HS256).count(), 0);
        assert_eq!(set.candidates(None, Algorithm::PS256).count(), 1);
    }

    #[test]
    fn a_set_without_signing_keys_is_an_error() {
        for document in [
            json!({}),
            json!({"keys": []}),
            json!({"keys": [{"kty": "oct", "k": "AA"}]}),
        ] {
            assert!(
                KeySet::parse(document.to_string().as_bytes()).is_err(),
                "{document}"
            );
        }
        assert!(KeySet::parse(b"not json").is_err());
    }

    #[tokio::test]
    async fn a_failed_load_keeps_the_keys_and_unknown_kids_are_rate_limited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let write = |kid: &str| {
            let document = json!({"keys": [rsa_jwk(Some(kid), json!({}))]});
            std::fs::write(&path, document.to_string()).unwrap();
        };
        write("k1");
        let config: OAuthConfig = toml::from_str(&format!(
            "issuer = \"i\"\naudience = \"https://a\"\njwks_file = {:?}\njwks_refresh_min_interval_s = 3600",
            path.display().to_string()
        ))
        .unwrap();
        let jwks = Jwks::new(&config).unwrap();
        assert!(jwks.is_empty());
        assert_eq!(jwks.load().await.unwrap(), 1);
        std::fs::write(&path, "broken").unwrap();
        assert!(jwks.load().await.is_err());
        assert!(jwks.current().knows(Some("k1")), "kept after a failed load");
        write("k2");
        assert!(jwks.for_unknown_kid(Some("k2")).await.knows(Some("k2")));
        write("k3");
        assert!(
            !jwks.for_unknown_kid(Some("k3")).await.knows(Some("k3")),
            "within the minimum interval"
        );
    }
}
