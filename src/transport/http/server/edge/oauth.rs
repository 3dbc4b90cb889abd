//! The listener as an OAuth 2.1 resource server (`[listen.oauth]`), as the
//! MCP authorization spec asks of an MCP server: every request carries a
//! JWT access token in `Authorization: Bearer`, issued by the configured
//! issuer for this resource (`aud`, RFC 8707), signed by one of the
//! issuer's keys, and valid now (`exp`, `nbf`, with `leeway_s`).
//!
//! - A request without a token gets 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="…"`; a refused token
//!   gets 401 with `error="invalid_token"` too; a valid token without
//!   `required_scopes` gets 403 `error="insufficient_scope"` (`metadata`).
//! - Public-key algorithms only (RS/PS/ES/EdDSA); `alg: none` does not
//!   parse and HMAC is never accepted (`crypto`).
//! - Keys are cached and reloaded as `jwks` describes; a token that
//!   validated is remembered until it expires, so the requests after a
//!   session's first skip the signature check (`accepted`).
//! - The token's `sub` (with `iss`) names the caller, and sessions are
//!   bound to it; roles, tenant and client come from the claims (`claims`).
//!
//! The token itself is never logged, and it never travels further: the
//! upstream requests carry only the headers the upstream is configured
//! with.

mod accepted;
mod claims;
mod crypto;
mod jwks;
mod metadata;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::Response;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::accepted::Accepted;
use self::claims::{caller, Caller, ClaimPaths};
use self::jwks::{Jwks, KeySet};
pub(crate) use self::metadata::WELL_KNOWN;
use self::metadata::{Challenge, Metadata};
use super::super::responses::rejection;
use crate::config::OAuthConfig;
use crate::hooks::Identity;

/// The algorithms a token may be signed with.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a request's access token was not accepted. The messages say what
/// was wrong, never what the token was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// No `Authorization: Bearer` header.
    #[error("an access token is required")]
    Missing,
    /// Not a JWT, or an unparsable header (`alg: none` ends here too).
    #[error("the access token is not a well-formed JWT")]
    Malformed,
    /// A symmetric or otherwise unaccepted `alg`.
    #[error("the access token's algorithm is not accepted")]
    Algorithm,
    /// No key of the issuer's has this `kid` (the JWKS was reloaded, or
    /// could not be, or was reloaded too recently to try again).
    #[error("the access token is signed with an unknown key")]
    UnknownKey,
    /// The signature, the issuer, the audience or the validity period.
    #[error("the access token is not accepted: {0}")]
    Rejected(&'static str),
    /// The token names no subject.
    #[error("the access token has no subject")]
    NoSubject,
    /// Valid, but without every required scope.
    #[error("the access token lacks the required scope")]
    InsufficientScope,
}

impl OAuthError {
    fn challenge(&self) -> Challenge {
        match self {
            OAuthError::Missing => Challenge::Missing,
            OAuthError::InsufficientScope => Challenge::InsufficientScope,
            _ => Challenge::InvalidToken,
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            OAuthError::InsufficientScope => StatusCode::FORBIDDEN,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
}

/// Access-token validation for one listener (public for the token
/// validation benchmark).
#[derive(Debug)]
pub struct OAuth {
    issuer: String,
    /// One prepared validation per accepted algorithm.
    validations: HashMap<Algorithm, Validation>,
    paths: ClaimPaths,
    required_scopes: Vec<String>,
    /// Clock skew tolerated on `exp`, also how long past it a remembered
    /// token stays accepted.
    leeway_s: u64,
    jwks: Jwks,
    accepted: Accepted,
    metadata: Metadata,
    /// How often the keys are reloaded while some are held.
    refresh_interval: Duration,
    /// How soon a load is tried again while none are.
    retry_interval: Duration,
}

impl OAuth {
    /// Validation as `config` describes it; no key is loaded yet (see
    /// [`OAuth::keep_keys_fresh`]).
    pub fn new(config: &OAuthConfig) -> Result<Self, String> {
        crypto::install();
        config.validate()?;
        let validations = ALGORITHMS
            .iter()
            .map(|algorithm| (*algorithm, validation(config, *algorithm)))
            .collect();
        Ok(Self {
            issuer: config.issuer.clone(),
            validations,
            paths: ClaimPaths::new(&config.roles_claim, &config.tenant_claim),
            required_scopes: config.required_scopes.clone(),
            leeway_s: config.leeway_s,
            accepted: Accepted::default(),
            jwks: Jwks::new(config).map_err(|err| format!("listen.oauth: {err}"))?,
            metadata: Metadata::new(config)?,
            refresh_interval: Duration::from_secs(config.jwks_refresh_interval_s),
            retry_interval: Duration::from_secs(config.jwks_refresh_min_interval_s.max(1)),
        })
    }

    /// The caller `token` authenticates, with the required scopes checked.
    /// Waits on the network only for a `kid` the cache lacks; a token seen
    /// before under the same keys costs a digest and a lookup.
    pub async fn authenticate(&self, token: &str) -> Result<Identity, OAuthError> {
        let keys = self.jwks.current();
        if let Some(caller) = self.accepted.get(token, &keys) {
            self.check_scopes(&caller)?;
            return Ok(caller.identity);
        }
        self.authenticate_afresh(token).await
    }

    /// [`OAuth::authenticate`] without the memory of accepted tokens: the
    /// whole check, signature included (what a session's first request
    /// costs; public for the benchmark).
    pub async fn authenticate_afresh(&self, token: &str) -> Result<Identity, OAuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| OAuthError::Malformed)?;
        if !self.validations.contains_key(&header.alg) {
            return Err(OAuthError::Algorithm);
        }
        let kid = header.kid.as_deref();
        let mut keys = self.jwks.current();
        if !keys.knows(kid) {
            keys = self.jwks.for_unknown_kid(kid).await;
        }
        let (caller, expires) =
            self.validate(token, header.alg, kid, &keys)
                .inspect_err(|err| {
                    tracing::debug!(%err, kid, alg = ?header.alg, "access token refused");
                })?;
        self.accepted.insert(
            token,
            keys,
            caller.clone(),
            expires.saturating_add(self.leeway_s),
        );
        self.check_scopes(&caller)?;
        Ok(caller.identity)
    }

    /// Loads the keys once, now; the number loaded.
    pub async fn load_keys(&self) -> Result<usize, String> {
        self.jwks.load().await.map_err(|err| err.to_string())
    }

    /// Checks `token` against the cached keys only; the caller and the
    /// token's `exp` (Unix seconds).
    fn validate(
        &self,
        token: &str,
        algorithm: Algorithm,
        kid: Option<&str>,
        keys: &KeySet,
    ) -> Result<(Caller, u64), OAuthError> {
        let validation = self
            .validations
            .get(&algorithm)
            .ok_or(OAuthError::Algorithm)?;
        let mut refusal = OAuthError::UnknownKey;
        for key in keys.candidates(kid, algorithm) {
            match jsonwebtoken::decode::<Value>(token, &key.decoding, validation) {
                Ok(data) => {
                    // `exp` is a required claim, checked by `decode`.
                    let expires = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
                    let caller = caller(&data.claims, &self.issuer, &self.paths)
                        .ok_or(OAuthError::NoSubject)?;
                    return Ok((caller, expires));
                }
                Err(err) => refusal = refused(err.kind()),
            }
        }
        Err(refusal)
    }

    fn check_scopes(&self, caller: &Caller) -> Result<(), OAuthError> {
        let granted = |scope: &String| caller.scopes.contains(scope);
        if self.required_scopes.iter().all(granted) {
            Ok(())
        } else {
            tracing::debug!(user_id = %caller.identity.user_id, "access token lacks a required scope");
            Err(OAuthError::InsufficientScope)
        }
    }

    /// The 401 or 403 answer to `err` on the endpoint at `resource_path`.
    pub(crate) fn refusal(&self, err: &OAuthError, resource_path: &str) -> Response {
        let mut response = rejection(err.status(), &err.to_string());
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            self.metadata.challenge(err.challenge(), resource_path),
        );
        response
    }

    /// The protected-resource metadata document (JSON).
    pub(crate) fn metadata_document(&self) -> bytes::Bytes {
        self.metadata.document()
    }

    /// Loads the keys now, then every `jwks_refresh_interval_s` (every
    /// `jwks_refresh_min_interval_s` while none could be loaded yet), until
    /// `stop`. A failure is logged and the keys held stay in use.
    pub(crate) async fn keep_keys_fresh(self: Arc<Self>, stop: CancellationToken) {
        loop {
            match self.jwks.load().await {
                Ok(count) => tracing::debug!(keys = count, "JWKS loaded"),
                Err(err) if self.jwks.is_empty() => {
                    tracing::warn!(%err, "no JWKS yet: every access token is refused until one loads")
                }
                Err(err) => tracing::warn!(%err, "JWKS reload failed; the cached keys stay in use"),
            }
            let wait = if self.jwks.is_empty() {
                self.retry_interval
            } else {
                self.refresh_interval
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The validation for tokens signed with `algorithm`.
fn validation(config: &OAuthConfig, algorithm: Algorithm) -> Validation {
    let mut validation = Validation::new(algorithm);
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.leeway = config.leeway_s;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation
}

/// What a failed `decode` says, in words safe to return and log.
fn refused(kind: &ErrorKind) -> OAuthError {
    OAuthError::Rejected(match kind {
        ErrorKind::InvalidSignature => "the signature does not verify",
        ErrorKind::ExpiredSignature => "it has expired",
        ErrorKind::ImmatureSignature => "it is not valid yet",
        ErrorKind::InvalidAudience => "it is for another audience",
        ErrorKind::InvalidIssuer => "it is from another issuer",
        ErrorKind::MissingRequiredClaim(_) => "a required claim is missing",
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            "the algorithm does not fit the key"
        }
        _ => "it is malformed",
    })
}

#[cfg(test)]
mod tests;
