//! TLS for an `https://` Guardian: the proxy's client TLS, shared with the
//! `https://`/`wss://` upstream clients and kept in the transport layer
//! below both (see [`crate::transport::client_tls`]). Its failures become
//! a [`TransportError`](super::TransportError) like any other.

pub use crate::transport::client_tls::{TlsError, TlsSettings};
