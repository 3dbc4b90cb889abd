//! The ACS transports of the handshake (§3, §15): what the ClientHello
//! offers and the ServerHello selects.

/// How acs-proxy reaches the Guardian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// JSON-RPC in an HTTP POST.
    Http,
    /// The same over TLS.
    Https,
    /// Content-Length framed JSON-RPC over a child's stdin/stdout.
    Stdio,
}

impl Transport {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Https => "https",
            Transport::Stdio => "stdio",
        }
    }

    /// Parses the wire spelling; `None` for anything else.
    pub fn from_wire(text: &str) -> Option<Self> {
        match text {
            "http" => Some(Transport::Http),
            "https" => Some(Transport::Https),
            "stdio" => Some(Transport::Stdio),
            _ => None,
        }
    }

    /// `transports_supported` for a ClientHello sent over this transport.
    /// An HTTP connection offers both schemes: the Guardian may report
    /// either for the same POST endpoint.
    pub fn offered(self) -> &'static [&'static str] {
        match self {
            Transport::Http | Transport::Https => &["http", "https"],
            Transport::Stdio => &["stdio"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_spelling_round_trips() {
        for transport in [Transport::Http, Transport::Https, Transport::Stdio] {
            assert_eq!(Transport::from_wire(transport.as_str()), Some(transport));
        }
        assert_eq!(Transport::from_wire("HTTP"), None);
        assert_eq!(Transport::from_wire("grpc"), None);
    }

    #[test]
    fn offers_follow_the_transport_in_use() {
        assert_eq!(Transport::Http.offered(), ["http", "https"]);
        assert_eq!(Transport::Https.offered(), ["http", "https"]);
        assert_eq!(Transport::Stdio.offered(), ["stdio"]);
    }
}
