//! Bearer tokens from `auth_tokens_file`: one per line (`#` comments and
//! blank lines skipped), kept as SHA-256 digests, compared in constant
//! time, and re-read when the file changes.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::super::principal::Principal;

/// The token of `Bearer <token>` (scheme case-insensitive).
pub(super) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Bearer tokens from a file, kept as SHA-256 digests and re-read when
/// the file changes.
#[derive(Debug)]
pub(crate) struct TokenFile {
    path: PathBuf,
    state: RwLock<TokenState>,
}

#[derive(Debug)]
struct TokenState {
    digests: Vec<[u8; 32]>,
    stamp: Option<(SystemTime, u64)>,
}

impl TokenFile {
    pub(super) fn load(path: &Path) -> Result<Self, String> {
        let (digests, stamp) = read_tokens(path)?;
        if digests.is_empty() {
            tracing::warn!(path = %path.display(), "the auth tokens file has no tokens: every request will be refused");
        }
        Ok(Self {
            path: path.to_owned(),
            state: RwLock::new(TokenState { digests, stamp }),
        })
    }

    /// The principal `token` authenticates when it is one of the file's;
    /// constant time per token.
    pub(super) fn principal(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut found = subtle::Choice::from(0);
        for known in &state.digests {
            found |= known.ct_eq(&digest);
        }
        bool::from(found).then(|| Principal::from_token_digest(digest))
    }

    /// Re-reads the file if its modification time or size changed; keeps
    /// the old tokens when it cannot be read.
    pub(crate) fn reload_if_changed(&self) {
        let stamp = file_stamp(&self.path);
        {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            if stamp == state.stamp {
                return;
            }
        }
        match read_tokens(&self.path) {
            Ok((digests, stamp)) => {
                let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
                tracing::info!(path = %self.path.display(), tokens = digests.len(), "reloaded the auth tokens file");
                *state = TokenState { digests, stamp };
            }
            Err(err) => tracing::warn!(%err, "keeping the previous auth tokens"),
        }
    }
}

type Tokens = (Vec<[u8; 32]>, Option<(SystemTime, u64)>);

fn read_tokens(path: &Path) -> Result<Tokens, String> {
    let stamp = file_stamp(path);
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read auth tokens file {}: {err}", path.display()))?;
    let digests = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| Sha256::digest(line.as_bytes()).into())
        .collect();
    Ok((digests, stamp))
}

/// Modification time and size, to notice a changed file.
pub(crate) fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
