//! Access-token validation against keys from a JWKS file, with tokens
//! signed (and forged) here with ring.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::json;

use super::*;
use crate::hooks::IdentityDescriptor;

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "https://proxy.example/mcp";

struct Keys {
    ec: EcdsaKeyPair,
    ed: Ed25519KeyPair,
    _dir: tempfile::TempDir,
    oauth: OAuth,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An OAuth validator whose JWKS file holds an ES256 key (`ec1`) and an
/// Ed25519 key (`ed1`), requiring `scopes`.
async fn keys(scopes: &[&str]) -> Keys {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ec =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let ed =
        Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref()).unwrap();
    let point = ec.public_key().as_ref();
    let jwks = json!({"keys": [
        {"kty": "EC", "crv": "P-256", "kid": "ec1", "x": b64(&point[1..33]), "y": b64(&point[33..])},
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed1", "x": b64(ed.public_key().as_ref())},
    ]});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks.to_string()).unwrap();
    let mut config: OAuthConfig = toml::from_str(&format!(
        "issuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks_file = {:?}\nroles_claim = \"realm_access.roles\"",
        path.display().to_string()
    ))
    .unwrap();
    config.required_scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
    let oauth = OAuth::new(&config).unwrap();
    oauth.jwks.load().await.unwrap();
    Keys {
        ec,
        ed,
        _dir: dir,
        oauth,
    }
}

fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "azp": "agent",
        "exp": now() + 600, "nbf": now() - 5, "scope": "mcp:tools",
        "realm_access": {"roles": ["reader"]}, "tenant": "acme",
    })
}

fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

impl Keys {
    fn es256(&self, kid: &str, claims: &Value) -> String {
        let message = unsigned(&json!({"alg": "ES256", "typ": "JWT", "kid": kid}), claims);
        let signature = self
            .ec
            .sign(&SystemRandom::new(), message.as_bytes())
            .unwrap();
        format!("{message}.{}", b64(signature.as_ref()))
    }

    fn eddsa(&self, claims: &Value) -> String {
        let message = unsigned(&json!({"alg": "EdDSA", "kid": "ed1"}), claims);
        let signature = self.ed.sign(message.as_bytes());
        format!("{message}.{}", b64(signature.as_ref()))
    }
}

#[tokio::test]
async fn a_valid_token_names_its_caller() {
    let keys = keys(&["mcp:tools"]).await;
    for token in [keys.es256("ec1", &claims()), keys.eddsa(&claims())] {
        let identity = keys.oauth.authenticate(&token).await.unwrap();
        assert_eq!(identity.user_id, "alice");
        assert_eq!(identity.roles, ["reader"]);
        assert_eq!(identity.tenant.as_deref(), Some("acme"));
        assert_eq!(
            identity.descriptor,
            IdentityDescriptor::OAuthSubject {
                issuer: ISSUER.into(),
                subject: "alice".into(),
                client_id: Some("agent".into()),
            }
        );
    }
}

#[tokio::test]
async fn claims_out_of_bounds_are_refused() {
    let keys = keys(&[]).await;
    let with = |name: &str, value: Value| {
        let mut claims = claims();
        claims[name] = value;
        claims
    };
    let cases = [
        (with("exp", json!(now() - 120)), "it has expired"),
        (with("nbf", json!(now() + 120)), "it is not valid yet"),
        (
            with("aud", json!("https://other.example/mcp")),
            "it is for another audience",
        ),
        (
            with("iss", json!("https://evil.example")),
            "it is from another issuer",
        ),
    ];
    for (claims, reason) in cases {
        let token = keys.es256("ec1", &claims);
        assert_eq!(
            keys.oauth.authenticate(&token).await,
            Err(OAuthError::Rejected(reason)),
            "{claims}"
        );
    }
    let mut no_subject = claims();
    no_subject.as_object_mut().unwrap().remove("sub");
    let token = keys.es256("ec1", &no_subject);
    assert!(matches!(
        keys.oauth.authenticate(&token).await,
        Err(OAuthError::Rejected(_))
    ));
    let within_leeway = with("exp", json!(now() - 10));
    assert!(keys
        .oauth
        .authenticate(&keys.es256("ec1", &within_leeway))
        .await
        .is_ok());
}

#[tokio::test]
async fn forged_tokens_are_refused() {
    let keys = keys(&[]).await;
    let none = format!(
        "{}.",
        unsigned(&json!({"alg": "none", "kid": "ec1"}), &claims())
    );
    assert_eq!(
        keys.oauth.authenticate(&none).await,
        Err(OAuthError::Malformed)
    );

    // HS256 with the public key's bytes as the secret.
    let message = unsigned(&json!({"alg": "HS256", "kid": "ec1"}), &claims());
    let secret = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, keys.ec.public_key().as_ref());
    let tag = ring::hmac::sign(&secret, message.as_bytes());
    let hmac = format!("{message}.{}", b64(tag.as_ref()));
    assert_eq!(
        keys.oauth.authenticate(&hmac).await,
        Err(OAuthError::Algorithm)
    );

    let unknown = keys.es256("nope", &claims());
    assert_eq!(
        keys.oauth.authenticate(&unknown).await,
        Err(OAuthError::UnknownKey)
    );

    let signed = keys.es256("ec1", &claims());
    let other = keys.es256("ec1", &json!({"sub": "mallory"}));
    let (message, _) = signed.rsplit_once('.').unwrap();
    let (_, signature) = other.rsplit_once('.').unwrap();
    assert_eq!(
        keys.oauth
            .authenticate(&format!("{message}.{signature}"))
            .await,
        Err(OAuthError::Rejected("the signature does not verify"))
    );
    assert_eq!(
        keys.oauth.authenticate("not-a-jwt").await,
        Err(OAuthError::Malformed)
    );
}

#[tokio::test]
async fn a_missing_scope_is_a_403_step_up_challenge() {
    let keys = keys(&["mcp:tools", "mcp:admin"]).await;
    let token = keys.es256("ec1", &claims());
    let err = keys.oauth.authenticate(&token).await.unwrap_err();
    assert_eq!(err, OAuthError::InsufficientScope);
    let response = keys.oauth.refusal(&err, "/mcp");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        response.headers()[header::WWW_AUTHENTICATE],
        "Bearer error=\"insufficient_scope\", scope=\"mcp:tools mcp:admin\", \
         resource_metadata=\"https://proxy.example/.well-known/oauth-protected-resource/mcp\""
    );
    let missing = keys.oauth.refusal(&OAuthError::Missing, "/mcp");
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
}
