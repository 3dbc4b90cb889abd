//! Who is calling: the principal a session was opened by, as every hook
//! carries it (`metadata.user_context`, `params.tenant_id`) and as
//! `steps/sessionStart` describes it (`user_identity`, a typed descriptor
//! in the sense of ACS §11).
//!
//! The downstream side authenticates the caller (an OAuth access token, a
//! named static token, a client certificate, or, over stdio, the OS user);
//! everything above it only reads the [`Identity`] it produced. Nothing
//! here holds a credential: a token is known by its principal's name.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::jcs::{self, Sink};

/// The authenticated caller of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `metadata.user_context.user_id`: the OAuth `sub`, the token's
    /// principal name, the certificate's subject, or the OS user.
    pub user_id: String,
    /// `metadata.user_context.roles`.
    pub roles: Vec<String>,
    /// `params.tenant_id`, when the credential names one.
    pub tenant: Option<String>,
    /// How the caller proved it, with what `user_identity` says of it.
    pub descriptor: IdentityDescriptor,
}

/// The typed identity descriptor of `steps/sessionStart`'s `user_identity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityDescriptor {
    /// A validated OAuth 2.1 access token (JWT).
    OAuthSubject {
        /// The token's `iss`.
        issuer: String,
        /// The token's `sub`.
        subject: String,
        /// The token's `client_id` (or `azp`), when present.
        client_id: Option<String>,
    },
    /// A verified TLS client certificate.
    CertSubject {
        /// The certificate's subject distinguished name.
        subject: String,
        /// Its URI subject alternative names (e.g. SPIFFE IDs).
        uris: Vec<String>,
    },
    /// A static bearer token from `auth_tokens_file`, by its principal's name.
    ApiToken {
        /// The principal the token file names.
        name: String,
    },
    /// The OS user running the proxy (stdio).
    PosixUid {
        /// The numeric user id.
        uid: u32,
        /// The user's login name, when the system knows it.
        user: Option<String>,
    },
    /// A user the configuration names (`[hooks] user_id`, over stdio).
    Configured,
}

impl IdentityDescriptor {
    /// `metadata.user_context.authentication_method`.
    pub fn authentication_method(&self) -> &'static str {
        match self {
            IdentityDescriptor::OAuthSubject { .. } => "oauth2",
            IdentityDescriptor::CertSubject { .. } => "mtls",
            IdentityDescriptor::ApiToken { .. } => "api_token",
            IdentityDescriptor::PosixUid { .. } => "posix",
            IdentityDescriptor::Configured => "configured",
        }
    }

    /// The descriptor's `type` discriminator (ACS §11).
    pub fn kind(&self) -> &'static str {
        match self {
            IdentityDescriptor::OAuthSubject { .. } => "oauth_subject",
            IdentityDescriptor::CertSubject { .. } => "cert_subject",
            IdentityDescriptor::ApiToken { .. } => "api_token",
            IdentityDescriptor::PosixUid { .. } => "posix_uid",
            IdentityDescriptor::Configured => "configured",
        }
    }
}

impl Identity {
    /// `metadata.user_context`.
    pub fn user_context(&self) -> Value {
        json!({
            "user_id": self.user_id,
            "roles": self.roles,
            "authentication_method": self.descriptor.authentication_method(),
        })
    }

    /// `steps/sessionStart`'s `user_identity`.
    pub fn user_identity(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::from(self.descriptor.kind()));
        match &self.descriptor {
            IdentityDescriptor::OAuthSubject {
                issuer,
                subject,
                client_id,
            } => {
                map.insert("issuer".into(), Value::from(issuer.as_str()));
                map.insert("subject".into(), Value::from(subject.as_str()));
                if let Some(client_id) = client_id {
                    map.insert("client_id".into(), Value::from(client_id.as_str()));
                }
            }
            IdentityDescriptor::CertSubject { subject, uris } => {
                map.insert("subject".into(), Value::from(subject.as_str()));
                if !uris.is_empty() {
                    map.insert("uris".into(), json!(uris));
                }
            }
            IdentityDescriptor::ApiToken { name } => {
                map.insert("name".into(), Value::from(name.as_str()));
            }
            IdentityDescriptor::PosixUid { uid, user } => {
                map.insert("uid".into(), Value::from(*uid));
                if let Some(user) = user {
                    map.insert("user".into(), Value::from(user.as_str()));
                }
            }
            IdentityDescriptor::Configured => {
                map.insert("user_id".into(), Value::from(self.user_id.as_str()));
            }
        }
        if !self.roles.is_empty() {
            map.insert("roles".into(), json!(self.roles));
        }
        if let Some(tenant) = &self.tenant {
            map.insert("tenant_id".into(), Value::from(tenant.as_str()));
        }
        Value::Object(map)
    }

    /// A digest naming the principal across requests: the same caller
    /// presenting a fresh credential (a refreshed OAuth token) keeps using
    /// its session; another caller cannot.
    pub fn binding_key(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.descriptor.kind().as_bytes());
        hasher.update([0]);
        match &self.descriptor {
            IdentityDescriptor::OAuthSubject {
                issuer, subject, ..
            } => {
                hasher.update(issuer.as_bytes());
                hasher.update([0]);
                hasher.update(subject.as_bytes());
            }
            IdentityDescriptor::CertSubject { subject, uris } => {
                hasher.update(subject.as_bytes());
                for uri in uris {
                    hasher.update([0]);
                    hasher.update(uri.as_bytes());
                }
            }
            IdentityDescriptor::ApiToken { name } => hasher.update(name.as_bytes()),
            IdentityDescriptor::PosixUid { uid, .. } => hasher.update(uid.to_be_bytes()),
            IdentityDescriptor::Configured => hasher.update(self.user_id.as_bytes()),
        }
        hasher.finalize().into()
    }

    /// `,"user_context":{…}` in canonical (RFC 8785) member order, for
    /// the writers that stream an envelope's canonical form.
    pub fn write_canonical_user_context<S: Sink>(&self, sink: &mut S) {
        sink.put(b",\"user_context\":{\"authentication_method\":");
        jcs::write_str(sink, self.descriptor.authentication_method());
        sink.put(b",\"roles\":[");
        for (index, role) in self.roles.iter().enumerate() {
            if index > 0 {
                sink.put(b",");
            }
            jcs::write_str(sink, role);
        }
        sink.put(b"],\"user_id\":");
        jcs::write_str(sink, &self.user_id);
        sink.put(b"}");
    }

    /// Whether any of the caller's roles is `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(sub: &str) -> Identity {
        Identity {
            user_id: sub.into(),
            roles: vec!["reader".into()],
            tenant: Some("acme".into()),
            descriptor: IdentityDescriptor::OAuthSubject {
                issuer: "https://idp.example".into(),
                subject: sub.into(),
                client_id: None,
            },
        }
    }

    #[test]
    fn user_context_has_the_three_acs_members() {
        let context = oauth("alice").user_context();
        assert_eq!(
            context,
            json!({"user_id": "alice", "roles": ["reader"], "authentication_method": "oauth2"})
        );
    }

    #[test]
    fn user_identity_is_a_typed_descriptor() {
        let identity = oauth("alice").user_identity();
        assert_eq!(identity["type"], "oauth_subject");
        assert_eq!(identity["issuer"], "https://idp.example");
        assert_eq!(identity["tenant_id"], "acme");
        let posix = Identity {
            user_id: "deploy".into(),
            roles: Vec::new(),
            tenant: None,
            descriptor: IdentityDescriptor::PosixUid {
                uid: 1000,
                user: Some("deploy".into()),
            },
        };
        assert_eq!(
            posix.user_identity(),
            json!({"type": "posix_uid", "uid": 1000, "user": "deploy"})
        );
    }

    #[test]
    fn binding_key_follows_the_principal_not_its_roles() {
        let mut alice = oauth("alice");
        let key = alice.binding_key();
        alice.roles.push("admin".into());
        assert_eq!(alice.binding_key(), key);
        assert_ne!(oauth("bob").binding_key(), key);
        let named = Identity {
            descriptor: IdentityDescriptor::ApiToken {
                name: "alice".into(),
            },
            ..oauth("alice")
        };
        assert_ne!(named.binding_key(), key, "same name, other kind");
    }
}
