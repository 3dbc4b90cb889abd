//! The per-session HMAC key (§10): HKDF-SHA256 of the deployment secret,
//! bound to one `session_id`.
//!
//! Deriving a key per session means a key recovered from one session's
//! traffic signs nothing in another, and both ends can derive it without a
//! key exchange.

use std::fmt;

use hkdf::Hkdf;
use hmac::{Hmac, KeyInit};
use sha2::Sha256;

use super::SigningSecret;

/// HMAC-SHA256, the baseline MAC.
pub(super) type HmacSha256 = Hmac<Sha256>;

/// HKDF's `L`: one SHA-256 output, the natural HMAC-SHA256 key size.
const SESSION_KEY_BYTES: usize = 32;

/// The HMAC-SHA256 key for one ACS session. Its bytes are never shown.
#[derive(Clone)]
pub struct SessionKey {
    /// The MAC keyed once with the derived key. Keying hashes the key's
    /// inner and outer pads; every message starts from a copy of this
    /// state instead, so that is done once per session, not per message.
    keyed: HmacSha256,
    #[cfg(test)]
    bytes: [u8; SESSION_KEY_BYTES],
}

impl SessionKey {
    /// Derives the key of session `session_id` (the envelope's
    /// `metadata.session_id`): HKDF-SHA256 with no salt, IKM = `secret`,
    /// `info` = the UTF-8 `session_id`, 32 bytes, as every reference
    /// implementation does (§10 leaves these parameters open).
    pub fn derive(secret: &SigningSecret, session_id: &str) -> SessionKey {
        Self::from_ikm(secret.expose(), session_id)
    }

    /// The derivation on raw keying material, unchecked for length so the
    /// known-answer tests can use their short secret.
    pub(super) fn from_ikm(ikm: &[u8], session_id: &str) -> SessionKey {
        let mut okm = [0u8; SESSION_KEY_BYTES];
        Hkdf::<Sha256>::new(None, ikm)
            .expand(session_id.as_bytes(), &mut okm)
            .expect("32 bytes is far below HKDF-SHA256's 8160-byte output limit");
        SessionKey {
            keyed: <HmacSha256 as KeyInit>::new_from_slice(&okm)
                .expect("HMAC accepts keys of any length"),
            #[cfg(test)]
            bytes: okm,
        }
    }

    /// A fresh MAC keyed with this session key.
    pub(super) fn mac(&self) -> HmacSha256 {
        self.keyed.clone()
    }

    /// Lowercase hex of the key, for comparison with published vectors.
    #[cfg(test)]
    pub(super) fn to_hex(&self) -> String {
        hex::encode(self.bytes)
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> SigningSecret {
        SigningSecret::from_bytes([7u8; 32]).unwrap()
    }

    #[test]
    fn derivation_is_deterministic_per_session() {
        let a = SessionKey::derive(&secret(), "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30");
        let b = SessionKey::derive(&secret(), "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30");
        assert_eq!(a.to_hex(), b.to_hex());
    }

    #[test]
    fn sessions_get_different_keys() {
        let a = SessionKey::derive(&secret(), "00000000-0000-4000-8000-000000000001");
        let b = SessionKey::derive(&secret(), "00000000-0000-4000-8000-000000000002");
        assert_ne!(a.to_hex(), b.to_hex());
    }

    #[test]
    fn empty_salt_equals_zero_salt() {
        // DIGEST §9.3: the Python reference extracts with 32 zero bytes of
        // salt, Go with none; RFC 5869 makes the two the same key.
        let with_zero_salt = {
            let mut okm = [0u8; 32];
            Hkdf::<Sha256>::new(Some(&[0u8; 32]), &[7u8; 32])
                .expand(b"s", &mut okm)
                .unwrap();
            hex::encode(okm)
        };
        assert_eq!(SessionKey::derive(&secret(), "s").to_hex(), with_zero_salt);
    }

    #[test]
    fn debug_is_redacted() {
        let key = SessionKey::derive(&secret(), "s");
        assert_eq!(format!("{key:?}"), "SessionKey(<redacted>)");
    }
}
