//! Access tokens already validated. An agent presents the same token on
//! every request of a session, and verifying its signature again each time
//! costs tens of microseconds (RSA and ECDSA verification); a token that
//! validated is remembered by its SHA-256 digest until it expires, so a
//! repeat costs a hash and a lookup.
//!
//! An entry is honoured only while the key set it was checked against is
//! the one in force: every JWKS reload starts afresh, so a key the issuer
//! withdrew stops vouching for its tokens at the next reload.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::claims::Caller;
use super::jwks::KeySet;

/// Entries kept at most; past it, expired ones go, then all of them.
const CAPACITY: usize = 4096;

/// Validated tokens by digest.
#[derive(Debug, Default)]
pub(super) struct Accepted {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

#[derive(Debug)]
struct Entry {
    caller: Caller,
    /// `exp` plus the leeway, in Unix seconds.
    until: u64,
    keys: Arc<KeySet>,
}

impl Accepted {
    /// The caller `token` named when it validated, if it still may:
    /// unexpired, and checked against `keys`.
    pub(super) fn get(&self, token: &str, keys: &Arc<KeySet>) -> Option<Caller> {
        let digest = digest(token);
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = entries.get(&digest)?;
        (Arc::ptr_eq(&entry.keys, keys) && now() < entry.until).then(|| entry.caller.clone())
    }

    /// Remembers that `token` validated against `keys` as `caller`, until
    /// `until` (Unix seconds).
    pub(super) fn insert(&self, token: &str, keys: Arc<KeySet>, caller: Caller, until: u64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY {
            let now = now();
            entries.retain(|_, entry| entry.until > now);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(
            digest(token),
            Entry {
                caller,
                until,
                keys,
            },
        );
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(super) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::{Identity, IdentityDescriptor};

    fn caller(name: &str) -> Caller {
        Caller {
            identity: Identity {
                user_id: name.into(),
                roles: Vec::new(),
                tenant: None,
                descriptor: IdentityDescriptor::OAuthSubject {
                    issuer: "https://idp.example".into(),
                    subject: name.into(),
                    client_id: None,
                },
            },
            scopes: vec!["mcp:tools".into()],
        }
    }

    #[test]
    fn a_token_is_remembered_until_it_expires_under_the_same_keys() {
        let accepted = Accepted::default();
        let keys = Arc::new(KeySet::default());
        accepted.insert("t1", keys.clone(), caller("alice"), now() + 60);
        accepted.insert("t2", keys.clone(), caller("bob"), now().saturating_sub(1));
        let hit = accepted.get("t1", &keys).expect("remembered");
        assert_eq!(hit.identity.user_id, "alice");
        assert!(accepted.get("t2", &keys).is_none(), "expired");
        assert!(accepted.get("t3", &keys).is_none(), "never seen");
        let reloaded = Arc::new(KeySet::default());
        assert!(accepted.get("t1", &reloaded).is_none(), "other keys");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first() {
        let accepted = Accepted::default();
        let keys = Arc::new(KeySet::default());
        for n in 0..CAPACITY {
            accepted.insert(&format!("old{n}"), keys.clone(), caller("x"), 1);
        }
        accepted.insert("fresh", keys.clone(), caller("alice"), now() + 60);
        assert!(accepted.get("fresh", &keys).is_some());
        let entries = accepted.entries.lock().unwrap();
        assert_eq!(entries.len(), 1);
    }
}
