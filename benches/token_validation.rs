//! Access-token validation with a cached key: what `[listen.oauth]` adds
//! to every request. Tokens are signed here (ring) and checked by the
//! listener's validator against a JWKS file loaded once, so no network is
//! involved. RS256 needs the `openssl` command to make its key (ring
//! cannot generate RSA keys); without it that case is skipped.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use acs_proxy::config::OAuthConfig;
use acs_proxy::transport::http::server::OAuth;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use criterion::{criterion_group, criterion_main, Criterion};
use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "https://proxy.example/mcp";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn signing_input(alg: &str, kid: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "client_id": "agent",
        "iat": now, "nbf": now, "exp": now + 3600, "scope": "mcp:tools",
        "roles": ["reader"], "tenant": "acme",
    });
    let header = json!({"alg": alg, "typ": "JWT", "kid": kid});
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// A 2048-bit RSA key from `openssl genpkey`, as PKCS#1 DER (what
/// OpenSSL 3 writes for `-outform DER`).
fn rsa_der() -> Option<Vec<u8>> {
    let output = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-outform",
            "DER",
        ])
        .output()
        .ok()?;
    output.status.success().then_some(output.stdout)
}

/// The tokens to check (by name) and the JWKS holding their keys.
fn tokens_and_jwks() -> (Vec<(&'static str, String)>, Value) {
    let rng = SystemRandom::new();
    let mut tokens = Vec::new();
    let mut keys = Vec::new();

    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ec =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = ec.public_key().as_ref();
    keys.push(json!({"kty": "EC", "crv": "P-256", "kid": "ec", "x": b64(&point[1..33]), "y": b64(&point[33..])}));
    let input = signing_input("ES256", "ec");
    let signature = ec.sign(&rng, input.as_bytes()).unwrap();
    tokens.push(("ES256", format!("{input}.{}", b64(signature.as_ref()))));

    let ed =
        Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref()).unwrap();
    keys.push(
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(ed.public_key().as_ref())}),
    );
    let input = signing_input("EdDSA", "ed");
    tokens.push((
        "EdDSA",
        format!("{input}.{}", b64(ed.sign(input.as_bytes()).as_ref())),
    ));

    match rsa_der() {
        Some(der) => {
            let rsa = RsaKeyPair::from_der(&der).unwrap();
            let public: PublicKeyComponents<Vec<u8>> = rsa.public().into();
            keys.push(
                json!({"kty": "RSA", "kid": "rsa", "n": b64(&public.n), "e": b64(&public.e)}),
            );
            let input = signing_input("RS256", "rsa");
            let mut signature = vec![0; rsa.public().modulus_len()];
            rsa.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut signature)
                .unwrap();
            tokens.push(("RS256", format!("{input}.{}", b64(&signature))));
        }
        None => eprintln!("token_validation: no openssl command, RS256 skipped"),
    }
    (tokens, json!({"keys": keys}))
}

fn token_validation(c: &mut Criterion) {
    let (tokens, jwks) = tokens_and_jwks();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks.to_string()).unwrap();
    let config: OAuthConfig = toml::from_str(&format!(
        "issuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks_file = {:?}\nrequired_scopes = [\"mcp:tools\"]",
        path.display().to_string()
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let oauth = OAuth::new(&config).unwrap();
    runtime.block_on(oauth.load_keys()).unwrap();

    let mut group = c.benchmark_group("token_validation");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for (name, token) in &tokens {
        let identity = runtime.block_on(oauth.authenticate(token)).unwrap();
        assert_eq!(identity.user_id, "alice");
        group.bench_function(format!("{name}/first_use"), |b| {
            b.iter(|| runtime.block_on(oauth.authenticate_afresh(token)).unwrap())
        });
        group.bench_function(format!("{name}/seen_before"), |b| {
            b.iter(|| runtime.block_on(oauth.authenticate(token)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, token_validation);
criterion_main!(benches);
