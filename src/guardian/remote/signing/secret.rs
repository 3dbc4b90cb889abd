//! The deployment secret every per-session signing key is derived from.
//!
//! It is HKDF input keying material, loaded once at start-up from a file of
//! raw bytes or from a base64 environment variable. Its bytes never leave
//! this module except into the key derivation: neither `Debug` nor any
//! error message shows them.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// The shortest secret accepted: SHA-256's output size. Below it, guessing
/// the secret is cheaper than guessing the HMAC key (RFC 2104 §3); the Go
/// reference Guardian refuses shorter secrets for the same reason.
pub const MIN_SECRET_BYTES: usize = 32;

/// Bytes stripped from the end of a secret file, exactly those the Python
/// reference strips (`rstrip(b"\r\n\t ")`): editors and `echo` append a
/// newline that is not part of the secret, and both ends must derive the
/// same key from the same file.
const TRAILING_WHITESPACE: &[u8] = b"\r\n\t ";

/// Why a signing secret could not be loaded. Messages name the source and
/// the length, never the content.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The secret file could not be read.
    #[error("cannot read the signing secret file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The secret file holds fewer than [`MIN_SECRET_BYTES`] bytes.
    #[error(
        "the signing secret file {} holds {len} bytes after trailing whitespace is stripped; \
         at least {} are required",
        path.display(),
        MIN_SECRET_BYTES
    )]
    FileTooShort {
        /// The file.
        path: PathBuf,
        /// Its length after stripping.
        len: usize,
    },
    /// The environment variable is not set.
    #[error("environment variable {var} (the base64 signing secret) is not set")]
    EnvMissing {
        /// The variable's name.
        var: String,
    },
    /// The environment variable is not standard base64 (with padding).
    #[error("environment variable {var} is not standard base64")]
    EnvNotBase64 {
        /// The variable's name.
        var: String,
    },
    /// The environment variable decodes to fewer than [`MIN_SECRET_BYTES`] bytes.
    #[error(
        "environment variable {var} decodes to {len} bytes; at least {} are required",
        MIN_SECRET_BYTES
    )]
    EnvTooShort {
        /// The variable's name.
        var: String,
        /// The decoded length.
        len: usize,
    },
    /// The bytes given directly are fewer than [`MIN_SECRET_BYTES`].
    #[error(
        "the signing secret is {len} bytes; at least {} are required",
        MIN_SECRET_BYTES
    )]
    TooShort {
        /// The length given.
        len: usize,
    },
}

/// The pre-shared secret a deployment configures for its remote Guardian
/// (input keying material of [`SessionKey::derive`](super::SessionKey::derive)).
#[derive(Clone)]
pub struct SigningSecret(Vec<u8>);

impl SigningSecret {
    /// Reads the raw bytes of `path`, strips trailing `\r`, `\n`, `\t` and
    /// spaces, and requires at least [`MIN_SECRET_BYTES`] to remain.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, SecretError> {
        let path = path.as_ref();
        let mut bytes = std::fs::read(path).map_err(|source| SecretError::Read {
            path: path.to_owned(),
            source,
        })?;
        strip_trailing_whitespace(&mut bytes);
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(SecretError::FileTooShort {
                path: path.to_owned(),
                len: bytes.len(),
            });
        }
        Ok(Self(bytes))
    }

    /// Decodes the environment variable `var_name` as standard base64 (with
    /// padding; surrounding whitespace ignored) and requires at least
    /// [`MIN_SECRET_BYTES`] decoded bytes.
    pub fn from_env_base64(var_name: &str) -> Result<Self, SecretError> {
        Self::from_env_value(var_name, std::env::var_os(var_name).as_deref())
    }

    /// Takes `bytes` as they are; at least [`MIN_SECRET_BYTES`] are required.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<Self, SecretError> {
        let bytes = bytes.into();
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort { len: bytes.len() });
        }
        Ok(Self(bytes))
    }

    /// The secret's bytes, for the key derivation only.
    pub(super) fn expose(&self) -> &[u8] {
        &self.0
    }

    /// [`from_env_base64`](Self::from_env_base64) on a value already read,
    /// so tests need not mutate the process environment.
    fn from_env_value(var: &str, value: Option<&OsStr>) -> Result<Self, SecretError> {
        let value = value.ok_or_else(|| SecretError::EnvMissing {
            var: var.to_owned(),
        })?;
        let not_base64 = || SecretError::EnvNotBase64 {
            var: var.to_owned(),
        };
        // Non-UTF-8 cannot be base64 anyway. The decoder's own error is
        // dropped because it quotes the offending byte of the secret.
        let text = value.to_str().ok_or_else(not_base64)?;
        let bytes = STANDARD.decode(text.trim()).map_err(|_| not_base64())?;
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(SecretError::EnvTooShort {
                var: var.to_owned(),
                len: bytes.len(),
            });
        }
        Ok(Self(bytes))
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningSecret(<redacted, {} bytes>)", self.0.len())
    }
}

fn strip_trailing_whitespace(bytes: &mut Vec<u8>) {
    while bytes
        .last()
        .is_some_and(|b| TRAILING_WHITESPACE.contains(b))
    {
        bytes.pop();
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    /// 32 printable bytes, so a leak into a message would be visible.
    const SECRET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

    fn write_file(content: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), content).unwrap();
        file
    }

    #[test]
    fn file_trailing_whitespace_is_stripped() {
        let mut content = SECRET.to_vec();
        content.extend_from_slice(b" \t\r\n\n");
        let file = write_file(&content);
        let secret = SigningSecret::from_file(file.path()).unwrap();
        assert_eq!(secret.expose(), SECRET);
    }

    #[test]
    fn file_leading_and_inner_whitespace_is_kept() {
        let content = b" 0123456789abcdef ghijklmnopqrstuv\n";
        let file = write_file(content);
        let secret = SigningSecret::from_file(file.path()).unwrap();
        assert_eq!(secret.expose(), &content[..content.len() - 1]);
    }

    #[test]
    fn file_is_raw_bytes_not_text() {
        let content: Vec<u8> = (0..=255u8).rev().collect();
        let file = write_file(&content);
        let secret = SigningSecret::from_file(file.path()).unwrap();
        // Whitespace bytes inside (0x20, 0x0d, 0x0a, 0x09) are secret too.
        assert_eq!(secret.expose(), &content[..]);
    }

    #[test]
    fn file_too_short_names_file_and_length_not_content() {
        // 31 bytes once the newline is gone.
        let file = write_file(b"0123456789abcdefghijklmnopqrstu\n");
        let err = SigningSecret::from_file(file.path()).unwrap_err();
        assert!(
            matches!(err, SecretError::FileTooShort { len: 31, .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&file.path().display().to_string()),
            "{message}"
        );
        assert!(message.contains("31 bytes"), "{message}");
        assert!(!message.contains("0123456789"), "{message}");
    }

    #[test]
    fn file_of_only_whitespace_is_too_short() {
        let file = write_file(&[b' '; 40]);
        let err = SigningSecret::from_file(file.path()).unwrap_err();
        assert!(matches!(err, SecretError::FileTooShort { len: 0, .. }));
    }

    #[test]
    fn missing_file_is_a_read_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.key");
        let err = SigningSecret::from_file(&path).unwrap_err();
        assert!(matches!(err, SecretError::Read { .. }));
        assert!(err.to_string().contains("absent.key"));
    }

    #[test]
    fn env_base64_decodes() {
        let value = OsString::from(STANDARD.encode(SECRET));
        let secret = SigningSecret::from_env_value("ACS_KEY", Some(&value)).unwrap();
        assert_eq!(secret.expose(), SECRET);
    }

    #[test]
    fn env_base64_ignores_surrounding_whitespace() {
        let value = OsString::from(format!(" {}\n", STANDARD.encode(SECRET)));
        let secret = SigningSecret::from_env_value("ACS_KEY", Some(&value)).unwrap();
        assert_eq!(secret.expose(), SECRET);
    }

    #[test]
    fn env_too_short_names_variable_and_length() {
        let value = OsString::from(STANDARD.encode(&SECRET[..31]));
        let err = SigningSecret::from_env_value("ACS_KEY", Some(&value)).unwrap_err();
        assert!(
            matches!(err, SecretError::EnvTooShort { len: 31, .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("ACS_KEY") && message.contains("31 bytes"),
            "{message}"
        );
    }

    #[test]
    fn env_not_base64_does_not_quote_the_value() {
        for bad in ["not base64!", "@@@@", "MDEy-_==", "é"] {
            let err =
                SigningSecret::from_env_value("ACS_KEY", Some(&OsString::from(bad))).unwrap_err();
            assert!(
                matches!(err, SecretError::EnvNotBase64 { .. }),
                "{bad}: {err:?}"
            );
            assert!(!err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn env_unpadded_base64_is_refused() {
        // Every reference emits and expects padded standard base64.
        let unpadded = STANDARD.encode(SECRET).trim_end_matches('=').to_owned();
        let err =
            SigningSecret::from_env_value("ACS_KEY", Some(&OsString::from(unpadded))).unwrap_err();
        assert!(matches!(err, SecretError::EnvNotBase64 { .. }), "{err:?}");
    }

    #[test]
    fn env_missing_names_variable() {
        let var = "ACS_PROXY_TEST_SECRET_THAT_IS_NEVER_SET_8c1f";
        let err = SigningSecret::from_env_base64(var).unwrap_err();
        assert!(matches!(err, SecretError::EnvMissing { .. }));
        assert!(err.to_string().contains(var));
    }

    #[test]
    fn bytes_too_short() {
        let err = SigningSecret::from_bytes(&SECRET[..31]).unwrap_err();
        assert!(matches!(err, SecretError::TooShort { len: 31 }));
        assert!(SigningSecret::from_bytes(&SECRET[..]).is_ok());
    }

    #[test]
    fn debug_is_redacted() {
        let secret = SigningSecret::from_bytes(&SECRET[..]).unwrap();
        assert_eq!(format!("{secret:?}"), "SigningSecret(<redacted, 32 bytes>)");
    }
}
