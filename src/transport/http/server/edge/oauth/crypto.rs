//! JWT signature checks for `jsonwebtoken`, done by ring: the crate leaves
//! its crypto backend to the application, and ring is already the
//! proxy's TLS provider, so no second crypto library is built.
//!
//! Only public-key algorithms are offered (RSA PKCS#1 v1.5 and PSS with
//! 2048–8192-bit keys, ECDSA P-256/P-384, Ed25519). HMAC is refused
//! outright: an access token is never checked against a shared secret, so
//! a token signed with HS256 over a public key's bytes cannot pass. The
//! proxy never signs a JWT, so there is no signer either.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind, Result};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature::{self as ring_sig, RsaPublicKeyComponents, UnparsedPublicKey};

/// The ring-backed provider.
static RING_PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(unsupported()),
        rsa_pub_components_from_public_key: |_| Err(unsupported()),
        ec_pub_components_from_private_key: |_, _| Err(unsupported()),
        ed_pub_components_from_private_key: no_ed_components,
        compute_digest: digest,
    },
};

/// Makes ring `jsonwebtoken`'s provider for this process; harmless when
/// already done.
pub(super) fn install() {
    // Err means a provider is installed already: this one, by an earlier call.
    let _ = RING_PROVIDER.install_default();
}

/// What verifies `algorithm`: ring's parameters for it.
enum Check {
    Rsa(&'static ring_sig::RsaParameters),
    Other(&'static dyn ring_sig::VerificationAlgorithm),
}

fn check_for(algorithm: Algorithm) -> Option<Check> {
    Some(match algorithm {
        Algorithm::RS256 => Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA256),
        Algorithm::RS384 => Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA384),
        Algorithm::RS512 => Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA512),
        Algorithm::PS256 => Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA256),
        Algorithm::PS384 => Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA384),
        Algorithm::PS512 => Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA512),
        Algorithm::ES256 => Check::Other(&ring_sig::ECDSA_P256_SHA256_FIXED),
        Algorithm::ES384 => Check::Other(&ring_sig::ECDSA_P384_SHA384_FIXED),
        Algorithm::EdDSA => Check::Other(&ring_sig::ED25519),
        // HS256/384/512, and whatever a later version adds.
        _ => return None,
    })
}

/// One token's check: the algorithm its header names and the key it
/// names, which must be of the algorithm's family.
struct RingVerifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    if check_for(*algorithm).is_none() || algorithm.family() != key.family() {
        return Err(ErrorKind::InvalidAlgorithm.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        key: key.clone(),
    }))
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(
        &self,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> std::result::Result<(), signature::Error> {
        let verified = match (check_for(self.algorithm), self.key.kind()) {
            (Some(Check::Rsa(params)), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            (Some(Check::Rsa(params)), DecodingKeyKind::SecretOrDer(der)) => {
                UnparsedPublicKey::new(params, der).verify(message, signature)
            }
            (Some(Check::Other(algorithm)), DecodingKeyKind::SecretOrDer(public)) => {
                UnparsedPublicKey::new(algorithm, public).verify(message, signature)
            }
            _ => Err(ring::error::Unspecified),
        };
        verified.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(unsupported())
}

fn no_ed_components(_: &[u8], _: &EllipticCurve) -> Result<Vec<u8>> {
    Err(unsupported())
}

fn digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(unsupported()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

fn unsupported() -> Error {
    ErrorKind::UnsupportedAlgorithm.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    #[test]
    fn ecdsa_and_ed25519_signatures_verify_and_tampering_fails() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let key = DecodingKey::from_ec_der(pair.public_key().as_ref());
        let signature = pair.sign(&rng, b"message").unwrap().as_ref().to_vec();
        let check = verifier(&Algorithm::ES256, &key).unwrap();
        assert!(check.verify(b"message", &signature).is_ok());
        assert!(check.verify(b"massage", &signature).is_err());

        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let key = DecodingKey::from_ed_der(pair.public_key().as_ref());
        let signature = pair.sign(b"message").as_ref().to_vec();
        let check = verifier(&Algorithm::EdDSA, &key).unwrap();
        assert!(check.verify(b"message", &signature).is_ok());
    }

    #[test]
    fn hmac_and_family_mismatches_are_refused() {
        let secret = DecodingKey::from_secret(b"public key bytes").unwrap();
        assert!(verifier(&Algorithm::HS256, &secret).is_err());
        let rsa = DecodingKey::from_rsa_raw_components(&[1; 256], &[1, 0, 1]);
        assert!(verifier(&Algorithm::HS256, &rsa).is_err());
        assert!(verifier(&Algorithm::ES256, &rsa).is_err());
        assert!(verifier(&Algorithm::RS256, &rsa).is_ok());
    }
}
