//! The access token a route holds, and when to replace it.
//!
//! A token is used until `refresh_before` its `expires_in` runs out, so a
//! request never leaves with one about to expire; with a lifetime shorter
//! than twice `refresh_before`, after half its lifetime instead, so a short
//! lived token is not fetched anew for every request. A token endpoint that
//! names no lifetime gets [`UNSTATED_LIFETIME`].

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;

/// The lifetime assumed when the token response has no `expires_in`.
pub(crate) const UNSTATED_LIFETIME: Duration = Duration::from_secs(300);

/// One access token, as the `Authorization` value it is sent in.
#[derive(Debug)]
pub(crate) struct CachedToken {
    /// `Bearer <token>`, marked sensitive.
    pub(crate) authorization: HeaderValue,
    /// Used for new requests until then.
    fresh_until: Instant,
}

impl CachedToken {
    /// A token obtained at `now`, valid for `expires_in` (as stated).
    pub(crate) fn new(
        authorization: HeaderValue,
        expires_in: Option<Duration>,
        refresh_before: Duration,
        now: Instant,
    ) -> Self {
        Self {
            authorization,
            fresh_until: now + use_for(expires_in.unwrap_or(UNSTATED_LIFETIME), refresh_before),
        }
    }

    /// Whether new requests may still carry it.
    pub(crate) fn is_fresh(&self, now: Instant) -> bool {
        now < self.fresh_until
    }
}

/// How long a token with `lifetime` is handed out.
fn use_for(lifetime: Duration, refresh_before: Duration) -> Duration {
    lifetime.saturating_sub(refresh_before).max(lifetime / 2)
}

/// The route's current token, shared by its sessions.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    current: RwLock<Option<Arc<CachedToken>>>,
}

impl TokenCache {
    /// The current token when it is fresh at `now`.
    pub(crate) fn fresh(&self, now: Instant) -> Option<Arc<CachedToken>> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.as_ref().filter(|t| t.is_fresh(now)).cloned()
    }

    /// Replaces the current token.
    pub(crate) fn store(&self, token: CachedToken) -> Arc<CachedToken> {
        let token = Arc::new(token);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(token.clone());
        token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_token_is_replaced_before_it_expires() {
        assert_eq!(use_for(60 * MINUTE, MINUTE), 59 * MINUTE);
        // Short lived: after half its lifetime rather than at once.
        assert_eq!(
            use_for(Duration::from_secs(2), MINUTE),
            Duration::from_secs(1)
        );
        assert_eq!(use_for(Duration::ZERO, MINUTE), Duration::ZERO);
    }

    #[test]
    fn the_cache_hands_out_only_fresh_tokens() {
        let cache = TokenCache::default();
        let now = Instant::now();
        assert!(cache.fresh(now).is_none());
        let value = HeaderValue::from_static("Bearer t");
        cache.store(CachedToken::new(value, Some(10 * MINUTE), MINUTE, now));
        assert!(cache.fresh(now + 8 * MINUTE).is_some());
        assert!(cache.fresh(now + 9 * MINUTE).is_none());
        let unstated = CachedToken::new(HeaderValue::from_static("Bearer u"), None, MINUTE, now);
        assert!(unstated.is_fresh(now + 3 * MINUTE));
        assert!(!unstated.is_fresh(now + UNSTATED_LIFETIME));
    }
}
