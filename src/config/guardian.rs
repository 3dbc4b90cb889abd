//! `[guardian]`: who decides, and how to reach a remote Guardian.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{
    optional_setting, program_setting, resolve_optional, resolve_program, PathSetting, SectionPaths,
};

/// Which Guardian decides, and how to reach a remote one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardianConfig {
    /// `embedded` (the `[policy]` rules) or `remote` (an ACS Guardian).
    #[serde(default)]
    pub mode: GuardianMode,
    /// Remote over HTTP(S): the Guardian's endpoint, e.g. `https://guardian:8787/acs`.
    #[serde(default)]
    pub url: Option<String>,
    /// Remote over stdio: the Guardian program and arguments (Content-Length
    /// framing); the program is found as an `[[upstream]] command`'s is.
    #[serde(default)]
    pub command: Vec<String>,
    /// The HMAC secret: a file of at least 32 raw bytes.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// The HMAC secret: the name of an environment variable holding it in base64.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// `key_id` sent with every signature.
    #[serde(default = "default_key_id")]
    pub key_id: String,
    /// Decision timeout used until (or unless) the Guardian's ServerHello sets one.
    #[serde(default = "default_guardian_timeout_ms")]
    pub timeout_ms: u64,
    /// Local failure posture; it can only make the negotiated one stricter.
    #[serde(default)]
    pub on_decision_failure: Option<PostureSetting>,
    /// What a session does when the handshake gets no answer.
    #[serde(default)]
    pub startup_posture: StartupPosture,
    /// Extra CA certificate (PEM) trusted for an `https` Guardian.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Send the two hooks of one message (a `tools/call` request or
    /// response with `hooks.tools_call = "both"`) as one JSON-RPC batch.
    /// A Guardian that answers the array with -32600 is asked one hook at a
    /// time from then on.
    #[serde(default)]
    pub batch: bool,
    /// Put a fresh random `params.nonce` (32 hex digits) on every signed
    /// request (§10.3 replay protection; `system/ping` is not signed).
    #[serde(default)]
    pub nonce: bool,
    /// How often `system/ping` checks the Guardian for `/readyz`.
    #[serde(default = "default_ping_interval_ms")]
    pub ping_interval_ms: u64,
}

impl SectionPaths for GuardianConfig {
    fn resolve_paths(&mut self, base: &Path) {
        resolve_program(base, &mut self.command);
        for path in [
            &mut self.secret_file,
            &mut self.ca_file,
            &mut self.client_cert,
            &mut self.client_key,
        ] {
            resolve_optional(base, path);
        }
    }

    fn path_settings(&self) -> Vec<PathSetting> {
        [
            program_setting("guardian.command", &self.command),
            optional_setting("guardian.secret_file", &self.secret_file),
            optional_setting("guardian.ca_file", &self.ca_file),
            optional_setting("guardian.client_cert", &self.client_cert),
            optional_setting("guardian.client_key", &self.client_key),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

fn default_key_id() -> String {
    "default".to_owned()
}

fn default_guardian_timeout_ms() -> u64 {
    5_000
}

fn default_ping_interval_ms() -> u64 {
    10_000
}

/// `on_decision_failure` as written in `proxy.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PostureSetting {
    /// Fail open (the ACS default); only documents intent.
    Proceed,
    /// Fail closed, whatever the Guardian negotiates.
    Deny,
}

/// What a session does when the Guardian handshake gets no answer (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartupPosture {
    /// Run the session unguarded; every bypassed hook is audited.
    #[default]
    Proceed,
    /// Refuse the session: every request is answered with an error.
    Refuse,
}

/// Guardian kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardianMode {
    /// Rules from `[policy]`, evaluated in process.
    #[default]
    Embedded,
    /// An ACS Guardian over HTTP(S) or stdio.
    Remote,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_and_nonce_are_off_by_default_and_can_be_set() {
        let off: GuardianConfig = toml::from_str("mode = \"remote\"").unwrap();
        assert!(!off.batch && !off.nonce);
        let on: GuardianConfig = toml::from_str("batch = true\nnonce = true").unwrap();
        assert!(on.batch && on.nonce);
    }
}
