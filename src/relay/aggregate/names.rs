//! The names the agent sees: each upstream's tools and prompts under
//! prefixed names (per the aggregate's `prefix` mode), resources under
//! their own URIs (see [`super::uris`]), and the book that maps each back
//! to its upstream.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use foldhash::HashMap as FastMap;
use globset::{Glob, GlobMatcher};

use super::uris::UriBook;
use crate::config::{AggregateConfig, PrefixMode};

/// The two kinds of named items a virtual server renames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    /// `tools/list` entries, called by `tools/call`.
    Tool,
    /// `prompts/list` entries, fetched by `prompts/get`.
    Prompt,
}

impl Kind {
    /// The `initialize` capability of servers that offer this kind.
    pub(super) fn capability(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
        }
    }
}

/// Where an item the agent names really is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The leg's index.
    pub(super) leg: usize,
    /// The item's name on its own server.
    pub(super) original: Arc<str>,
    /// `original` as a JSON string, as it is spliced into a routed call.
    pub(super) quoted: Arc<str>,
}

impl Target {
    fn new(leg: usize, original: &str) -> Self {
        Self {
            leg,
            original: original.into(),
            quoted: serde_json::Value::from(original).to_string().into(),
        }
    }
}

/// How many names called before any listing gave them out a session
/// remembers: enough for any real server's tools, and a bound on what an
/// agent calling made-up names can make the book hold.
const MAX_GUESSED: usize = 1024;

/// `tools` filters: globs over `upstream<separator>tool` or the bare name.
#[derive(Debug, Default)]
struct ToolFilter {
    include: Vec<GlobMatcher>,
    exclude: Vec<GlobMatcher>,
}

impl ToolFilter {
    fn compile(patterns: &[String]) -> Self {
        let mut filter = ToolFilter::default();
        for pattern in patterns {
            let (list, glob) = match pattern.strip_prefix('!') {
                Some(glob) => (&mut filter.exclude, glob),
                None => (&mut filter.include, pattern.as_str()),
            };
            // Validated with the configuration; a pattern that fails here
            // cannot occur, and leaving it out is the safe reading.
            if let Ok(glob) = Glob::new(glob) {
                list.push(glob.compile_matcher());
            }
        }
        filter
    }

    fn allows(&self, qualified: &str, bare: &str) -> bool {
        let matches = |m: &GlobMatcher| m.is_match(qualified) || m.is_match(bare);
        (self.include.is_empty() || self.include.iter().any(matches))
            && !self.exclude.iter().any(matches)
    }
}

/// The names given out in one session, and what each stands for.
#[derive(Debug)]
pub(super) struct NameBook {
    mode: PrefixMode,
    separator: String,
    legs: Vec<String>,
    filter: ToolFilter,
    /// Exposed tool name → target.
    tools: FastMap<String, Target>,
    /// Exposed prompt name → target.
    prompts: FastMap<String, Target>,
    /// Prefixed tool and prompt names the agent called before a listing
    /// gave them out, read by their prefix once and remembered (see
    /// [`NameBook::resolve`]).
    guessed_tools: FastMap<String, Target>,
    guessed_prompts: FastMap<String, Target>,
    /// Original name → the legs that offer it, per kind (for `on_conflict`).
    offered: HashMap<(Kind, String), BTreeSet<usize>>,
    /// Resource URIs and templates.
    pub(super) uris: UriBook,
}

impl NameBook {
    /// An empty book for `aggregate`.
    pub(super) fn new(aggregate: &AggregateConfig) -> Self {
        Self {
            mode: aggregate.prefix,
            separator: aggregate.separator.clone(),
            legs: aggregate.upstreams.clone(),
            filter: ToolFilter::compile(&aggregate.tools),
            tools: FastMap::default(),
            prompts: FastMap::default(),
            guessed_tools: FastMap::default(),
            guessed_prompts: FastMap::default(),
            offered: HashMap::new(),
            uris: UriBook::new(&aggregate.upstreams),
        }
    }

    /// Whether the `tools` filters offer `leg`'s tool `original`.
    pub(super) fn offers_tool(&self, leg: usize, original: &str) -> bool {
        let qualified = format!("{}{}{original}", self.legs[leg], self.separator);
        self.filter.allows(&qualified, original)
    }

    /// Notes that `leg` offers `original`, before names are given out, so
    /// that `on_conflict` sees every upstream of a listing.
    pub(super) fn note_offer(&mut self, kind: Kind, leg: usize, original: &str) {
        self.offered
            .entry((kind, original.to_owned()))
            .or_default()
            .insert(leg);
    }

    /// The name the agent sees for `leg`'s `original`, or `None` when the
    /// `tools` filters leave a tool out. The name is remembered for routing.
    pub(super) fn expose(&mut self, kind: Kind, leg: usize, original: &str) -> Option<String> {
        let qualified = format!("{}{}{original}", self.legs[leg], self.separator);
        if kind == Kind::Tool && !self.filter.allows(&qualified, original) {
            return None;
        }
        let shared = self
            .offered
            .get(&(kind, original.to_owned()))
            .is_some_and(|legs| legs.len() > 1);
        let name = match self.mode {
            PrefixMode::Always => qualified,
            PrefixMode::OnConflict if shared => qualified,
            PrefixMode::OnConflict | PrefixMode::Never => original.to_owned(),
        };
        let target = Target::new(leg, original);
        match self.exposed(kind).get(&name) {
            // Under `never` a clash was refused at start-up; should a
            // server add a clashing tool later, the first one keeps the name.
            Some(existing) if existing.leg != leg => return None,
            _ => {}
        }
        let exposed = match kind {
            Kind::Tool => &mut self.tools,
            Kind::Prompt => &mut self.prompts,
        };
        exposed.insert(name.clone(), target);
        Some(name)
    }

    /// What an exposed name stands for. A prefixed name the book has not
    /// given out yet (the agent called before listing) is read by its
    /// prefix when prefixes are always used, and remembered: an agent that
    /// never lists calls it that way every time.
    pub(super) fn resolve(&mut self, kind: Kind, name: &str) -> Option<Target> {
        if let Some(target) = self.exposed(kind).get(name) {
            return Some(target.clone());
        }
        if self.mode != PrefixMode::Always {
            return None;
        }
        if let Some(target) = self.guessed(kind).get(name) {
            return Some(target.clone());
        }
        let target = self.legs.iter().enumerate().find_map(|(leg, leg_name)| {
            let original = name.strip_prefix(leg_name)?.strip_prefix(&self.separator)?;
            let qualified_allowed = kind != Kind::Tool || self.filter.allows(name, original);
            qualified_allowed.then(|| Target::new(leg, original))
        })?;
        let guessed = self.guessed(kind);
        if guessed.len() < MAX_GUESSED {
            guessed.insert(name.to_owned(), target.clone());
        }
        Some(target)
    }

    /// The names of `kind` read by their prefix before any listing.
    fn guessed(&mut self, kind: Kind) -> &mut FastMap<String, Target> {
        match kind {
            Kind::Tool => &mut self.guessed_tools,
            Kind::Prompt => &mut self.guessed_prompts,
        }
    }

    /// The exposed names of `kind`.
    fn exposed(&self, kind: Kind) -> &FastMap<String, Target> {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
        }
    }

    /// Forgets everything `leg` offered: its upstream is gone.
    pub(super) fn forget_leg(&mut self, leg: usize) {
        self.tools.retain(|_, target| target.leg != leg);
        self.prompts.retain(|_, target| target.leg != leg);
        self.guessed_tools.retain(|_, target| target.leg != leg);
        self.guessed_prompts.retain(|_, target| target.leg != leg);
        for legs in self.offered.values_mut() {
            legs.remove(&leg);
        }
        self.uris.forget_leg(leg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aggregate(prefix: PrefixMode, tools: &[&str]) -> AggregateConfig {
        AggregateConfig {
            name: "all".into(),
            upstreams: vec!["everything".into(), "demo".into()],
            prefix,
            separator: "__".into(),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            startup_timeout_ms: 1000,
            restart_backoff_ms: 1000,
            restart_max_backoff_ms: 60_000,
        }
    }

    #[test]
    fn always_prefixes_and_routes_back() {
        let mut book = NameBook::new(&aggregate(PrefixMode::Always, &[]));
        assert_eq!(
            book.expose(Kind::Tool, 0, "echo").as_deref(),
            Some("everything__echo")
        );
        let target = book.resolve(Kind::Tool, "everything__echo").unwrap();
        assert_eq!((target.leg, &*target.original), (0, "echo"));
        // Called before it was listed: read by its prefix.
        let target = book.resolve(Kind::Tool, "demo__slow").unwrap();
        assert_eq!((target.leg, &*target.original), (1, "slow"));
        assert!(book.resolve(Kind::Tool, "echo").is_none());
    }

    #[test]
    fn a_name_read_by_its_prefix_is_remembered_until_its_upstream_goes() {
        let mut book = NameBook::new(&aggregate(PrefixMode::Always, &[]));
        let first = book.resolve(Kind::Tool, "demo__slow").unwrap();
        assert_eq!(&*first.quoted, r#""slow""#);
        let again = book.resolve(Kind::Tool, "demo__slow").unwrap();
        assert!(Arc::ptr_eq(&first.original, &again.original));
        // A prompt of that name is another item.
        let prompt = book.resolve(Kind::Prompt, "demo__slow").unwrap();
        assert!(!Arc::ptr_eq(&first.original, &prompt.original));
        book.forget_leg(1);
        let after = book.resolve(Kind::Tool, "demo__slow").unwrap();
        assert!(!Arc::ptr_eq(&first.original, &after.original));
    }

    #[test]
    fn made_up_names_fill_the_memory_only_up_to_its_bound() {
        let mut book = NameBook::new(&aggregate(PrefixMode::Always, &[]));
        for n in 0..MAX_GUESSED + 10 {
            assert!(book.resolve(Kind::Tool, &format!("demo__t{n}")).is_some());
        }
        assert_eq!(book.guessed_tools.len(), MAX_GUESSED);
    }

    #[test]
    fn on_conflict_prefixes_only_shared_names() {
        let mut book = NameBook::new(&aggregate(PrefixMode::OnConflict, &[]));
        for (leg, name) in [(0, "echo"), (1, "echo"), (1, "slow")] {
            book.note_offer(Kind::Tool, leg, name);
        }
        assert_eq!(
            book.expose(Kind::Tool, 0, "echo").as_deref(),
            Some("everything__echo")
        );
        assert_eq!(
            book.expose(Kind::Tool, 1, "echo").as_deref(),
            Some("demo__echo")
        );
        assert_eq!(book.expose(Kind::Tool, 1, "slow").as_deref(), Some("slow"));
        assert_eq!(book.resolve(Kind::Tool, "slow").unwrap().leg, 1);
    }

    #[test]
    fn filters_match_qualified_or_bare_names() {
        let mut book = NameBook::new(&aggregate(
            PrefixMode::Always,
            &["everything__*", "slow", "!*__get-env"],
        ));
        assert!(book.expose(Kind::Tool, 0, "echo").is_some());
        assert!(book.expose(Kind::Tool, 0, "get-env").is_none());
        assert!(book.expose(Kind::Tool, 1, "echo").is_none());
        assert!(book.expose(Kind::Tool, 1, "slow").is_some());
        assert!(book.resolve(Kind::Tool, "demo__echo").is_none());
        // Prompts are not filtered.
        assert!(book.expose(Kind::Prompt, 1, "echo").is_some());
    }
}
