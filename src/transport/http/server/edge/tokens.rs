//! Bearer tokens from `auth_tokens_file`, kept as SHA-256 digests,
//! compared in constant time, and re-read when the file changes.
//!
//! One token per line (`#` comments and blank lines skipped). A line may
//! name the token's principal, its roles and its tenant, separated by
//! whitespace:
//!
//! ```text
//! # token                 principal  roles (comma-separated, - for none)  tenant
//! 3f9c…e1                 alice      admin,ops                            acme
//! 77aa…0b                 ci-bot     deployer
//! 5d21…9c
//! ```
//!
//! A bare token (the original format) is principal `token-<n>`, its
//! ordinal among the file's tokens, with no roles; its sessions are bound
//! to the token itself. A named token's sessions are bound to its name, so
//! rotating a principal's token keeps the name its policy selects on.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::super::principal::Principal;
use crate::hooks::{Identity, IdentityDescriptor};

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
    tokens: Vec<KnownToken>,
    stamp: Option<(SystemTime, u64)>,
}

/// One line of the file.
#[derive(Debug)]
struct KnownToken {
    digest: [u8; 32],
    /// Set for a named token; a bare one is bound by its digest.
    named: bool,
    identity: Identity,
}

impl KnownToken {
    fn principal(&self) -> Principal {
        if self.named {
            Principal::new(self.identity.clone())
        } else {
            Principal::with_key(self.digest, self.identity.clone())
        }
    }
}

impl TokenFile {
    pub(super) fn load(path: &Path) -> Result<Self, String> {
        let (tokens, stamp) = read_tokens(path)?;
        if tokens.is_empty() {
            tracing::warn!(path = %path.display(), "the auth tokens file has no tokens: every request will be refused");
        }
        Ok(Self {
            path: path.to_owned(),
            state: RwLock::new(TokenState { tokens, stamp }),
        })
    }

    /// The principal `token` authenticates when it is one of the file's.
    /// Every known token is compared, in constant time, whichever matches.
    pub(super) fn principal(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut found = subtle::Choice::from(0);
        let mut index = 0u32;
        for (position, known) in (0u32..).zip(&state.tokens) {
            let matches = known.digest.ct_eq(&digest);
            index.conditional_assign(&position, matches);
            found |= matches;
        }
        bool::from(found).then(|| state.tokens[index as usize].principal())
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
            Ok((tokens, stamp)) => {
                let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
                tracing::info!(path = %self.path.display(), tokens = tokens.len(), "reloaded the auth tokens file");
                *state = TokenState { tokens, stamp };
            }
            Err(err) => tracing::warn!(%err, "keeping the previous auth tokens"),
        }
    }
}

type Tokens = (Vec<KnownToken>, Option<(SystemTime, u64)>);

fn read_tokens(path: &Path) -> Result<Tokens, String> {
    let stamp = file_stamp(path);
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read auth tokens file {}: {err}", path.display()))?;
    let tokens = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .enumerate()
        .map(|(ordinal, line)| parse_line(ordinal + 1, line))
        .collect();
    Ok((tokens, stamp))
}

/// `token [principal [roles [tenant]]]`; the token itself is only hashed.
fn parse_line(ordinal: usize, line: &str) -> KnownToken {
    let mut fields = line.split_whitespace();
    let token = fields.next().unwrap_or_default();
    let digest = Sha256::digest(token.as_bytes()).into();
    let name = fields.next();
    let roles = match fields.next() {
        None | Some("-") => Vec::new(),
        Some(roles) => roles
            .split(',')
            .filter(|role| !role.is_empty())
            .map(str::to_owned)
            .collect(),
    };
    let tenant = fields.next().map(str::to_owned);
    let user_id = name.map_or_else(|| format!("token-{ordinal}"), str::to_owned);
    KnownToken {
        digest,
        named: name.is_some(),
        identity: Identity {
            descriptor: IdentityDescriptor::ApiToken {
                name: user_id.clone(),
            },
            user_id,
            roles,
            tenant,
        },
    }
}

/// Modification time and size, to notice a changed file.
pub(crate) fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
