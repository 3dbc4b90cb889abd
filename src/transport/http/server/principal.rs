//! Who authenticated a request, so a session serves only the client that
//! opened it.
//!
//! With `auth_tokens_file`, the principal is the bearer token, kept as its
//! SHA-256 digest (the token itself is never stored or printed). A session
//! remembers the principal of its `initialize`; a request naming the
//! session with another token (or none) is answered 404, exactly as for an
//! unknown id, so session ids cannot be probed across principals. Without
//! bearer auth every request has no principal and sessions are bound only
//! by their unguessable id.

use std::fmt;

use subtle::ConstantTimeEq;

/// The authenticated identity of a request: its token's SHA-256 digest.
#[derive(Clone, Copy)]
pub(crate) struct Principal([u8; 32]);

impl Principal {
    /// The principal a bearer token with this digest authenticates.
    pub(crate) fn from_token_digest(digest: [u8; 32]) -> Self {
        Self(digest)
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for Principal {}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Principal(…)")
    }
}

/// Whether a request authenticated as `presented` may use a session opened
/// by `owner`.
pub(crate) fn may_use(owner: Option<&Principal>, presented: Option<&Principal>) -> bool {
    match (owner, presented) {
        (None, _) => true,
        (Some(owner), Some(presented)) => owner == presented,
        (Some(_), None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bound_to_their_principal() {
        let alpha = Principal::from_token_digest([1; 32]);
        let beta = Principal::from_token_digest([2; 32]);
        assert!(may_use(Some(&alpha), Some(&alpha)));
        assert!(!may_use(Some(&alpha), Some(&beta)));
        assert!(!may_use(Some(&alpha), None));
        assert!(may_use(None, None));
        assert_eq!(format!("{alpha:?}"), "Principal(…)");
    }
}
