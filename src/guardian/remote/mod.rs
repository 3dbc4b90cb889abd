//! The remote Guardian: acs-proxy as an ACS client of a Guardian reached
//! over HTTP(S) or stdio (`guardian.mode = "remote"`).
//!
//! ```text
//!  relay ─HookRequest→ client ─envelope→ signing (HMAC, session key) → transport ─bytes→ Guardian
//!  relay ←Decision──── client ←checked── wire (shape, binding) ← signing (verify) ←bytes─ Guardian
//! ```
//!
//! - [`client`] is the [`Guardian`](super::Guardian) implementation and
//!   keeps each session's state: the handshake that opens the session
//!   (again after the Guardian was unreachable), one exchange per hook or
//!   one batch for the hooks of one message, and the chain head it
//!   witnesses and sends back.
//! - [`signing`] derives each session's key from the deployment secret
//!   (HKDF), signs each request and verifies each answer before anything
//!   in it is believed (all but `system/ping`, an unsigned liveness check).
//! - [`wire`] builds the ClientHello and reads what the Guardian answers
//!   (ServerHello, decisions, pings, errors), each checked against the
//!   rules of the spec; a broken rule is a decision failure.
//! - [`transport`] only moves bytes: one `POST` per call, or a child
//!   process with `Content-Length` frames. Its TLS settings are the
//!   proxy's client TLS ([`crate::transport::client_tls`]), shared with
//!   the upstream clients.
//! - A decision reply is parsed once into a tree borrowed from its bytes
//!   ([`crate::jsonrpc::BorrowedJson`]), which the signature is checked over and the
//!   decision read from; [`json_view`] lets the wire rules and the
//!   signature check read it and a [`serde_json::Value`] alike.
//!
//! [`from_config`] wires them together from `[guardian]`.

pub mod client;
pub mod json_view;
pub mod signing;
pub mod transport;
pub mod wire;

pub use client::{RemoteGuardian, RemoteSettings};

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, PostureSetting};
use crate::guardian::FailurePosture;
use signing::{SecretError, SigningSecret};
use transport::{GuardianTransport, HttpTransport, StdioTransport, TlsSettings, TransportError};

/// Why a remote Guardian could not be set up at startup.
#[derive(Debug, thiserror::Error)]
pub enum RemoteSetupError {
    /// The signing secret could not be loaded.
    #[error("guardian secret: {0}")]
    Secret(#[from] SecretError),
    /// The transport could not be built (bad URL, unreadable PEM, spawn failure).
    #[error("guardian transport: {0}")]
    Transport(#[from] TransportError),
    /// Neither `secret_file` nor `secret_env` is set.
    #[error("guardian: set `secret_file` or `secret_env`")]
    NoSecret,
}

/// Builds the remote Guardian `[guardian]` describes.
pub fn from_config(config: &Config) -> Result<RemoteGuardian, RemoteSetupError> {
    let guardian = &config.guardian;
    let secret = match (&guardian.secret_file, &guardian.secret_env) {
        (Some(path), _) => SigningSecret::from_file(path)?,
        (None, Some(var)) => SigningSecret::from_env_base64(var)?,
        (None, None) => return Err(RemoteSetupError::NoSecret),
    };
    let (transport, kind): (Arc<dyn GuardianTransport>, wire::Transport) = match &guardian.url {
        Some(url) => {
            let tls = TlsSettings {
                ca_file: guardian.ca_file.clone(),
                client_cert: guardian.client_cert.clone(),
                client_key: guardian.client_key.clone(),
            };
            let kind = if url.starts_with("https://") {
                wire::Transport::Https
            } else {
                wire::Transport::Http
            };
            (Arc::new(HttpTransport::new(url, tls)?), kind)
        }
        None => {
            let transport = StdioTransport::spawn(
                &guardian.command,
                &Default::default(),
                config.limits.max_message_bytes,
            )?;
            (Arc::new(transport), wire::Transport::Stdio)
        }
    };
    let settings = RemoteSettings {
        secret,
        key_id: guardian.key_id.clone(),
        methods_implemented: crate::hooks::emitted_methods(config.hooks.tools_call),
        transport: kind,
        local_posture: guardian.on_decision_failure.map(|posture| match posture {
            PostureSetting::Proceed => FailurePosture::Proceed,
            PostureSetting::Deny => FailurePosture::Deny,
        }),
        timeout: Duration::from_millis(guardian.timeout_ms),
        nonce: guardian.nonce,
    };
    Ok(RemoteGuardian::new(transport, settings))
}
