//! A certificate's distinguished name as an RFC 4514 string: the RDNs
//! last to first, `,` between them, `+` inside a multi-valued one, the
//! RFC's short names for the attributes it names and the dotted OID with
//! a `#`-hex DER value for any other, and values escaped as it requires.
//! This is the form LDAP, Go's `pkix.Name.String` and Java's
//! `X500Principal.getName()` agree on, so an operator can match the
//! `subject` of an audit record against what other tools print.

use std::fmt::Write;

use x509_parser::der_parser::Oid;
use x509_parser::oid_registry::{
    OID_DOMAIN_COMPONENT, OID_USERID, OID_X509_COMMON_NAME, OID_X509_COUNTRY_NAME,
    OID_X509_LOCALITY_NAME, OID_X509_ORGANIZATIONAL_UNIT, OID_X509_ORGANIZATION_NAME,
    OID_X509_STATE_OR_PROVINCE_NAME, OID_X509_STREET_ADDRESS,
};
use x509_parser::prelude::{AttributeTypeAndValue, X509Name};
use x509_parser::x509::RelativeDistinguishedName;

/// `name` in RFC 4514 string form.
pub(super) fn rfc4514(name: &X509Name<'_>) -> String {
    let rdns: Vec<&RelativeDistinguishedName<'_>> = name.iter().collect();
    rdns.iter()
        .rev()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect::<Vec<_>>()
        .join(",")
}

/// One `type=value` pair.
fn attribute(attr: &AttributeTypeAndValue<'_>) -> String {
    match (short_name(attr.attr_type()), attr.as_str()) {
        (Some(name), Ok(value)) => format!("{name}={}", escape(value)),
        // RFC 4514 §2.4: a value of another syntax is its BER encoding in hex.
        (name, _) => {
            let kind = name.map_or_else(|| attr.attr_type().to_id_string(), str::to_owned);
            let mut hex = String::with_capacity(attr.attr_value().data.len() * 2 + 8);
            for byte in der_of(attr) {
                let _ = write!(hex, "{byte:02x}");
            }
            format!("{kind}=#{hex}")
        }
    }
}

/// The value's whole DER encoding (tag, length, content).
fn der_of(attr: &AttributeTypeAndValue<'_>) -> Vec<u8> {
    use x509_parser::asn1_rs::ToDer;
    attr.attr_value().to_der_vec().unwrap_or_default()
}

/// The short names RFC 4514 §3 defines.
fn short_name(oid: &Oid<'_>) -> Option<&'static str> {
    let names = [
        (&OID_X509_COMMON_NAME, "CN"),
        (&OID_X509_LOCALITY_NAME, "L"),
        (&OID_X509_STATE_OR_PROVINCE_NAME, "ST"),
        (&OID_X509_ORGANIZATION_NAME, "O"),
        (&OID_X509_ORGANIZATIONAL_UNIT, "OU"),
        (&OID_X509_COUNTRY_NAME, "C"),
        (&OID_X509_STREET_ADDRESS, "STREET"),
        (&OID_DOMAIN_COMPONENT, "DC"),
        (&OID_USERID, "UID"),
    ];
    names
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, name)| *name)
}

/// RFC 4514 §2.4: `"+,;<>\` and NUL anywhere, a leading space or `#`, and
/// a trailing space are escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\0' => out.push_str("\\00"),
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            '#' if i == 0 => out.push_str("\\#"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(escape("Acme, Inc."), "Acme\\, Inc.");
        assert_eq!(escape(" lead"), "\\ lead");
        assert_eq!(escape("trail "), "trail\\ ");
        assert_eq!(escape("#1"), "\\#1");
        assert_eq!(escape("a#b+c=d"), "a#b\\+c=d");
        assert_eq!(escape("quote\"<>;\\"), "quote\\\"\\<\\>\\;\\\\");
        assert_eq!(escape(""), "");
    }
}
