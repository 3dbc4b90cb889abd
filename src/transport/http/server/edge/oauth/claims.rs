//! What a validated access token says about its caller: the identity every
//! hook carries (`sub`, roles, tenant, client) and the scopes it grants.

use serde_json::Value;

use crate::hooks::{Identity, IdentityDescriptor};

/// Where the caller's roles and tenant are found in the claims.
#[derive(Debug, Clone)]
pub(super) struct ClaimPaths {
    /// Dotted path of the roles claim (`roles`, `realm_access.roles`).
    pub(super) roles: Vec<String>,
    /// Dotted path of the tenant claim.
    pub(super) tenant: Vec<String>,
}

impl ClaimPaths {
    /// The paths `roles_claim` and `tenant_claim` name.
    pub(super) fn new(roles_claim: &str, tenant_claim: &str) -> Self {
        let split = |path: &str| path.split('.').map(str::to_owned).collect();
        Self {
            roles: split(roles_claim),
            tenant: split(tenant_claim),
        }
    }
}

/// The caller a validated token names, and the scopes it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Caller {
    /// Who it is, as the hooks name it.
    pub(super) identity: Identity,
    /// The scopes the token grants (`scope` or `scp`).
    pub(super) scopes: Vec<String>,
}

/// The caller `claims` describe, or `None` without a string `sub`. `iss`
/// has been checked already, so it is the configured issuer.
pub(super) fn caller(claims: &Value, issuer: &str, paths: &ClaimPaths) -> Option<Caller> {
    let subject = claims.get("sub")?.as_str()?.to_owned();
    let client_id = ["client_id", "azp"]
        .iter()
        .find_map(|name| claims.get(*name).and_then(Value::as_str))
        .map(str::to_owned);
    let roles = lookup(claims, &paths.roles)
        .map(strings)
        .unwrap_or_default();
    let tenant = lookup(claims, &paths.tenant)
        .and_then(Value::as_str)
        .map(str::to_owned);
    let scopes = claims
        .get("scope")
        .or_else(|| claims.get("scp"))
        .map(strings)
        .unwrap_or_default();
    Some(Caller {
        identity: Identity {
            user_id: subject.clone(),
            roles,
            tenant,
            descriptor: IdentityDescriptor::OAuthSubject {
                issuer: issuer.to_owned(),
                subject,
                client_id,
            },
        },
        scopes,
    })
}

/// The value at a dotted path; a claim whose own name has a dot is found
/// first, as written.
fn lookup<'a>(claims: &'a Value, path: &[String]) -> Option<&'a Value> {
    if path.len() > 1 {
        if let Some(value) = claims.get(path.join(".")) {
            return Some(value);
        }
    }
    path.iter()
        .try_fold(claims, |value, segment| value.get(segment.as_str()))
}

/// An array of strings, or one space-separated string (the `scope` form);
/// anything else names nothing.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) => text.split_whitespace().map(str::to_owned).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths() -> ClaimPaths {
        ClaimPaths::new("roles", "tenant")
    }

    #[test]
    fn the_subject_roles_tenant_client_and_scopes() {
        let claims = json!({
            "sub": "alice", "azp": "agent-app", "roles": ["reader", 7, "ops"],
            "tenant": "acme", "scope": "mcp:read  mcp:write",
        });
        let caller = caller(&claims, "https://idp.example", &paths()).unwrap();
        assert_eq!(caller.identity.user_id, "alice");
        assert_eq!(caller.identity.roles, ["reader", "ops"]);
        assert_eq!(caller.identity.tenant.as_deref(), Some("acme"));
        assert_eq!(
            caller.identity.descriptor,
            IdentityDescriptor::OAuthSubject {
                issuer: "https://idp.example".into(),
                subject: "alice".into(),
                client_id: Some("agent-app".into()),
            }
        );
        assert_eq!(caller.scopes, ["mcp:read", "mcp:write"]);
    }

    #[test]
    fn client_id_wins_over_azp_and_scp_is_an_array() {
        let claims = json!({"sub": "bot", "client_id": "c1", "azp": "c2", "scp": ["a", "b"]});
        let caller = caller(&claims, "iss", &paths()).unwrap();
        let IdentityDescriptor::OAuthSubject { client_id, .. } = caller.identity.descriptor else {
            panic!("not an OAuth subject");
        };
        assert_eq!(client_id.as_deref(), Some("c1"));
        assert_eq!(caller.scopes, ["a", "b"]);
        assert!(caller.identity.roles.is_empty());
    }

    #[test]
    fn nested_and_space_separated_roles() {
        let nested = ClaimPaths::new("realm_access.roles", "org.id");
        let claims = json!({"sub": "x", "realm_access": {"roles": ["admin"]}, "org": {"id": "t1"}});
        let caller = caller(&claims, "iss", &nested).unwrap();
        assert_eq!(caller.identity.roles, ["admin"]);
        assert_eq!(caller.identity.tenant.as_deref(), Some("t1"));
        let flat = ClaimPaths::new("https://example.com/roles", "tenant");
        let claims = json!({"sub": "x", "https://example.com/roles": "a b"});
        assert_eq!(
            super::caller(&claims, "iss", &flat).unwrap().identity.roles,
            ["a", "b"]
        );
    }

    #[test]
    fn no_subject_no_caller() {
        assert!(caller(&json!({"scope": "a"}), "iss", &paths()).is_none());
        assert!(caller(&json!({"sub": 5}), "iss", &paths()).is_none());
    }
}
