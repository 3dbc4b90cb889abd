//! Name globs for `hook` and `tool`.

use globset::{Candidate, Glob, GlobBuilder, GlobMatcher};

use super::error::RuleProblem;

/// A compiled `hook` or `tool` pattern.
///
/// Patterns without glob syntax stay plain strings so the index can look
/// them up in a hash map instead of running a matcher; `*` alone gets its
/// own case because it is the default hook and matches everything.
#[derive(Debug, Clone)]
pub(crate) enum NamePattern {
    /// `*`: any name.
    Any,
    /// No glob metacharacters: equality.
    Exact(String),
    /// A real glob, kept with its source form so the index can share one
    /// matcher between rules that use the same pattern.
    Glob { glob: Glob, matcher: GlobMatcher },
}

/// Characters that give a pattern glob meaning in `globset`.
const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

impl NamePattern {
    /// Compiles `text`; `field` names the key in errors.
    pub(crate) fn compile(text: &str, field: &'static str) -> Result<Self, RuleProblem> {
        if text == "*" {
            return Ok(Self::Any);
        }
        if !text.contains(GLOB_META) {
            return Ok(Self::Exact(text.to_owned()));
        }
        let glob = build_glob(text).map_err(|source| RuleProblem::InvalidGlob { field, source })?;
        let matcher = glob.compile_matcher();
        Ok(Self::Glob { glob, matcher })
    }

    /// Whether `name` fits the pattern.
    pub(crate) fn matches(&self, name: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(exact) => exact == name,
            Self::Glob { matcher, .. } => matcher.is_match_candidate(&Candidate::from_bytes(name)),
        }
    }
}

/// Builds a glob with the options every pattern here shares.
///
/// Method names are not paths: `protocols/MCP/*` must reach
/// `protocols/MCP/tools/call`, so `*` crosses `/`. Backslash escaping is
/// pinned so a policy means the same on every platform.
pub(crate) fn build_glob(text: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(text)
        .literal_separator(false)
        .backslash_escape(true)
        .case_insensitive(false)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> NamePattern {
        NamePattern::compile(text, "hook").expect("valid glob")
    }

    #[test]
    fn star_crosses_slashes() {
        let p = pattern("protocols/MCP/*");
        assert!(p.matches("protocols/MCP/tools/call"));
        assert!(p.matches("protocols/MCP/initialize"));
        assert!(!p.matches("steps/toolCallRequest"));
    }

    #[test]
    fn prefix_glob() {
        let p = pattern("steps/toolCall*");
        assert!(p.matches("steps/toolCallRequest"));
        assert!(p.matches("steps/toolCallResult"));
        assert!(!p.matches("steps/sessionStart"));
    }

    #[test]
    fn plain_text_is_exact_and_star_is_any() {
        assert!(matches!(pattern("get-env"), NamePattern::Exact(_)));
        assert!(pattern("get-env").matches("get-env"));
        assert!(!pattern("get-env").matches("get-env2"));
        assert!(matches!(pattern("*"), NamePattern::Any));
        assert!(pattern("*").matches(""));
    }

    #[test]
    fn alternation_and_classes() {
        let p = pattern("run_{shell,exec}");
        assert!(p.matches("run_shell"));
        assert!(!p.matches("run_other"));
        assert!(pattern("tool-[0-9]").matches("tool-7"));
    }

    #[test]
    fn matching_is_case_sensitive() {
        assert!(!pattern("Run_*").matches("run_shell"));
    }

    #[test]
    fn bad_glob_is_reported_with_its_field() {
        let err = NamePattern::compile("tool-[", "tool").expect_err("unclosed class");
        assert!(
            err.to_string().starts_with("invalid glob in tool:"),
            "{err}"
        );
    }
}
