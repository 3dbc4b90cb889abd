//! A real OAuth 2.1 authorization server for the identity tests:
//! `oauth2-mock-server` (npm) run by `tests/peers/oauth_server.mjs` on
//! 127.0.0.1, issuing signed JWTs and serving JWKS, discovery and the
//! token endpoint. Tests mint tokens with chosen claims and keys over the
//! launcher's stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use super::pairs::node22;
use super::repo_root;

/// A running authorization server; killed on drop.
pub struct AuthorizationServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its issuer URL (`http://localhost:PORT`).
    pub issuer: String,
    /// The port it listens on.
    pub port: u16,
}

impl AuthorizationServer {
    /// Starts one on `port` (0: any free port) with one RS256 key, `k1`.
    pub fn start(port: u16) -> Self {
        let mut child = Command::new(node22())
            .arg(repo_root().join("tests/peers/oauth_server.mjs"))
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start oauth2-mock-server (run .ci/install-peers)");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let ready = read_json(&mut stdout);
        let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
        let port = issuer
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .expect("issuer port");
        Self {
            child,
            stdin,
            stdout,
            issuer,
            port,
        }
    }

    /// The JWKS endpoint.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// The token endpoint (client credentials and the other grants).
    pub fn token_url(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// A signed access token with `claims` merged over the defaults
    /// (`iss`, `iat`, `nbf`, `exp` in an hour), signed with key `kid`
    /// (any key when `None`).
    pub fn token(&mut self, claims: Value, kid: Option<&str>) -> String {
        self.token_expiring(claims, kid, 3600)
    }

    /// As [`Self::token`], expiring in `expires_in` seconds.
    pub fn token_expiring(&mut self, claims: Value, kid: Option<&str>, expires_in: u64) -> String {
        let answer = self.command(json!({
            "cmd": "token", "claims": claims, "kid": kid, "expires_in": expires_in,
        }));
        answer["token"].as_str().expect("token").to_owned()
    }

    /// Adds a signing key (`RS256`, `PS256`, `ES256`, `EdDSA` …) named `kid`.
    pub fn generate_key(&mut self, alg: &str, kid: &str) {
        let crv = (alg == "EdDSA").then_some("Ed25519");
        self.command(json!({"cmd": "generate", "alg": alg, "kid": kid, "crv": crv}));
    }

    /// The public JWKS, as served.
    pub fn jwks(&mut self) -> Value {
        self.command(json!({"cmd": "jwks"}))
    }

    /// Makes the JWKS endpoint answer 500 (`down`) or serve the keys again.
    pub fn set_jwks_down(&mut self, down: bool) {
        self.command(json!({"cmd": "jwks_down", "down": down}));
    }

    /// Claims added to every token the token endpoint issues from now on.
    pub fn set_endpoint_claims(&mut self, claims: Value) {
        self.command(json!({"cmd": "claims", "claims": claims}));
    }

    /// The `expires_in` the token endpoint's answers state from now on.
    pub fn set_endpoint_ttl(&mut self, expires_in: u64) {
        self.command(json!({"cmd": "ttl", "expires_in": expires_in}));
    }

    /// Every request to the token endpoint so far: its form `body`, its
    /// `authorization` header (or null) and the `access_token` answered.
    pub fn token_requests(&mut self) -> Vec<Value> {
        let answer = self.command(json!({"cmd": "token_requests"}));
        answer["requests"].as_array().cloned().unwrap_or_default()
    }

    fn command(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").expect("write command");
        self.stdin.flush().expect("flush");
        let answer = read_json(&mut self.stdout);
        assert!(answer.get("error").is_none(), "{command} -> {answer}");
        answer
    }
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_json(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read launcher output");
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("launcher said {line:?}: {err}"))
}
