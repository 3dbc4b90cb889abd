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
    Glob { glob: Glob, matcher: Matcher },
}

/// How a glob is tested against a name.
///
/// Most hook and tool globs are a literal with `*` at one end or both
/// (`protocols/MCP/*`, `*_delete`); those are string comparisons, which
/// cost a fraction of running `globset`'s regex on every hook.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// `literal*`.
    Prefix(String),
    /// `*literal`.
    Suffix(String),
    /// `*literal*`.
    Contains(String),
    /// Anything else: `globset`'s compiled matcher.
    Regex(GlobMatcher),
}

impl Matcher {
    /// The cheapest matcher equivalent to `glob` (whose text is `text`).
    fn for_glob(text: &str, glob: &Glob) -> Self {
        let literal = |part: &str| !part.is_empty() && !part.contains(GLOB_META);
        let inner = text
            .strip_prefix('*')
            .and_then(|rest| rest.strip_suffix('*'));
        match (text.strip_suffix('*'), text.strip_prefix('*'), inner) {
            (_, _, Some(middle)) if literal(middle) => Self::Contains(middle.to_owned()),
            (Some(prefix), _, _) if literal(prefix) => Self::Prefix(prefix.to_owned()),
            (_, Some(suffix), _) if literal(suffix) => Self::Suffix(suffix.to_owned()),
            _ => Self::Regex(glob.compile_matcher()),
        }
    }

    fn is_match(&self, name: &str) -> bool {
        match self {
            Self::Prefix(prefix) => name.starts_with(prefix.as_str()),
            Self::Suffix(suffix) => name.ends_with(suffix.as_str()),
            Self::Contains(middle) => name.contains(middle.as_str()),
            Self::Regex(matcher) => matcher.is_match_candidate(&Candidate::from_bytes(name)),
        }
    }
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
        let matcher = Matcher::for_glob(text, &glob);
        Ok(Self::Glob { glob, matcher })
    }

    /// Whether `name` fits the pattern.
    pub(crate) fn matches(&self, name: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(exact) => exact == name,
            Self::Glob { matcher, .. } => matcher.is_match(name),
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

    /// Globs with `*` only at their ends are string comparisons, and they
    /// match exactly what `globset` would.
    #[test]
    fn star_ended_globs_match_as_globset_does() {
        let names = [
            "",
            "protocols/MCP/",
            "protocols/MCP/tools/call",
            "x_delete",
            "_delete",
            "a_delete_b",
            "run_",
            "Run_shell",
            "run_shell",
        ];
        for text in [
            "protocols/MCP/*",
            "*_delete",
            "*delete*",
            "run_*",
            "r*n_*",
            "**",
        ] {
            let compiled = pattern(text);
            let reference = build_glob(text).expect("valid glob").compile_matcher();
            for name in names {
                assert_eq!(
                    compiled.matches(name),
                    reference.is_match(name),
                    "{text} on {name:?}"
                );
            }
        }
        let shape = |text| match pattern(text) {
            NamePattern::Glob { matcher, .. } => matcher,
            other => panic!("{text} compiled to {other:?}"),
        };
        assert!(matches!(shape("protocols/MCP/*"), Matcher::Prefix(_)));
        assert!(matches!(shape("*_delete"), Matcher::Suffix(_)));
        assert!(matches!(shape("*delete*"), Matcher::Contains(_)));
        assert!(matches!(shape("r*n_*"), Matcher::Regex(_)));
        assert!(matches!(shape("run_[ab]*"), Matcher::Regex(_)));
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
