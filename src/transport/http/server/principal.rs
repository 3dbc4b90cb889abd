//! Who authenticated a request, so a session serves only the client that
//! opened it, and its hooks say who that is.
//!
//! A session remembers the principal of its `initialize`; a request naming
//! the session as another principal (or as none) is answered 404, exactly
//! as for an unknown id, so session ids cannot be probed across
//! principals. The same principal presenting a fresh credential (a
//! refreshed OAuth token) keeps its session. Without authentication every
//! request has no principal and sessions are bound only by their
//! unguessable id.

use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::hooks::Identity;

/// The authenticated caller of a request.
#[derive(Clone)]
pub(crate) struct Principal {
    /// What sessions are bound to, compared in constant time.
    key: [u8; 32],
    identity: Arc<Identity>,
}

impl Principal {
    /// The principal `identity` names, bound by its
    /// [`Identity::binding_key`].
    pub(crate) fn new(identity: Identity) -> Self {
        Self::with_key(identity.binding_key(), identity)
    }

    /// A principal bound by `key` rather than by its name: an unnamed
    /// static token is bound by its own digest.
    pub(crate) fn with_key(key: [u8; 32], identity: Identity) -> Self {
        Self {
            key,
            identity: Arc::new(identity),
        }
    }

    /// Who the caller is, for the session's hooks.
    pub(crate) fn identity(&self) -> &Arc<Identity> {
        &self.identity
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        self.key.ct_eq(&other.key).into()
    }
}

impl Eq for Principal {}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Principal")
            .field(&self.identity.user_id)
            .finish()
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
    use crate::hooks::IdentityDescriptor;

    fn token(name: &str) -> Identity {
        Identity {
            user_id: name.into(),
            roles: Vec::new(),
            tenant: None,
            descriptor: IdentityDescriptor::ApiToken { name: name.into() },
        }
    }

    #[test]
    fn sessions_are_bound_to_their_principal() {
        let alpha = Principal::new(token("alpha"));
        let beta = Principal::new(token("beta"));
        assert!(may_use(Some(&alpha), Some(&alpha)));
        assert!(!may_use(Some(&alpha), Some(&beta)));
        assert!(!may_use(Some(&alpha), None));
        assert!(may_use(None, None));
        assert_eq!(format!("{alpha:?}"), "Principal(\"alpha\")");
        let unnamed = Principal::with_key([1; 32], token("token-1"));
        assert!(!may_use(
            Some(&unnamed),
            Some(&Principal::new(token("token-1")))
        ));
    }
}
