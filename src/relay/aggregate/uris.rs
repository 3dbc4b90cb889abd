//! Resource URIs as the agent sees them: unchanged, unless two upstreams
//! claim the same one. Then the upstream that listed it first keeps it and
//! the others' copies get a gateway URI that names the upstream and
//! carries the original verbatim:
//!
//! ```text
//! acs-proxy://<upstream>/<original URI>
//! acs-proxy://twin/demo://readme        (twin's demo://readme)
//! ```
//!
//! Reading, subscribing to or completing a gateway URI goes to the upstream
//! it names with the original URI; what that upstream says about the URI
//! (its `resources/read` contents, `notifications/resources/updated`)
//! comes back under the gateway URI. Templates are treated alike: the
//! gateway form of a template is the template behind the same prefix, so
//! its expansions are gateway URIs.

use std::collections::{HashMap, HashSet};

/// The scheme of gateway URIs.
const SCHEME: &str = "acs-proxy://";

/// The resource URIs and templates given out in one session.
#[derive(Debug, Default)]
pub(super) struct UriBook {
    /// Each leg's upstream name, by index.
    legs: Vec<String>,
    /// Resource URI → the leg that listed it first.
    owners: HashMap<String, usize>,
    /// Resource template → the leg that listed it first.
    template_owners: HashMap<String, usize>,
    /// Template, up to its first `{`, → a leg that listed it under its own text.
    templates: Vec<(String, usize)>,
    /// The (leg, original URI) pairs the agent knows by their gateway URI.
    gated: HashSet<(usize, String)>,
}

impl UriBook {
    /// An empty book over the upstreams `legs` (the aggregate's order).
    pub(super) fn new(legs: &[String]) -> Self {
        Self {
            legs: legs.to_vec(),
            ..Self::default()
        }
    }

    /// The URI the agent sees for the resource `uri` that `leg` listed.
    pub(super) fn expose_resource(&mut self, leg: usize, uri: &str) -> String {
        let owner = *self.owners.entry(uri.to_owned()).or_insert(leg);
        if owner == leg && !self.gated.contains(&(leg, uri.to_owned())) {
            return uri.to_owned();
        }
        self.gated.insert((leg, uri.to_owned()));
        self.gateway(leg, uri)
    }

    /// The template the agent sees for the `template` that `leg` listed.
    pub(super) fn expose_template(&mut self, leg: usize, template: &str) -> String {
        let owner = *self
            .template_owners
            .entry(template.to_owned())
            .or_insert(leg);
        if owner != leg {
            return self.gateway(leg, template);
        }
        let fixed = template.split('{').next().unwrap_or(template).to_owned();
        if !self.templates.iter().any(|(t, l)| *t == fixed && *l == leg) {
            self.templates.push((fixed, leg));
        }
        template.to_owned()
    }

    /// The URI the agent knows `leg`'s resource `uri` by, for what the
    /// upstream sends about it.
    pub(super) fn seen_as(&self, leg: usize, uri: &str) -> String {
        if self.gated.contains(&(leg, uri.to_owned())) {
            self.gateway(leg, uri)
        } else {
            uri.to_owned()
        }
    }

    /// The leg serving the agent's `uri` and the URI that leg knows: a
    /// gateway URI names both; otherwise the leg that listed `uri`, else the
    /// one whose template's fixed part is its longest prefix.
    pub(super) fn resolve(&mut self, uri: &str) -> Option<(usize, String)> {
        if let Some((leg, original)) = self.parse_gateway(uri) {
            // Whatever the upstream says of it later goes back in this form.
            self.gated.insert((leg, original.clone()));
            return Some((leg, original));
        }
        if let Some(leg) = self.owners.get(uri) {
            return Some((*leg, uri.to_owned()));
        }
        self.templates
            .iter()
            .filter(|(fixed, _)| !fixed.is_empty() && uri.starts_with(fixed.as_str()))
            .max_by_key(|(fixed, _)| fixed.len())
            .map(|(_, leg)| (*leg, uri.to_owned()))
    }

    /// Forgets which URIs `leg` owns: its upstream is gone. Gateway URIs
    /// given out stay as they are.
    pub(super) fn forget_leg(&mut self, leg: usize) {
        self.owners.retain(|_, l| *l != leg);
        self.template_owners.retain(|_, l| *l != leg);
        self.templates.retain(|(_, l)| *l != leg);
    }

    fn gateway(&self, leg: usize, uri: &str) -> String {
        format!("{SCHEME}{}/{uri}", self.legs[leg])
    }

    /// The leg and original URI of a gateway URI naming one of the legs.
    fn parse_gateway(&self, uri: &str) -> Option<(usize, String)> {
        let (name, original) = uri.strip_prefix(SCHEME)?.split_once('/')?;
        let leg = self.legs.iter().position(|leg| leg == name)?;
        (!original.is_empty()).then(|| (leg, original.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> UriBook {
        UriBook::new(&["demo".to_owned(), "twin".to_owned()])
    }

    #[test]
    fn a_uri_claimed_twice_is_kept_by_the_first_and_gated_for_the_other() {
        let mut book = book();
        assert_eq!(book.expose_resource(0, "demo://readme"), "demo://readme");
        assert_eq!(
            book.expose_resource(1, "demo://readme"),
            "acs-proxy://twin/demo://readme"
        );
        // Listed again: the same answer.
        assert_eq!(
            book.expose_resource(1, "demo://readme"),
            "acs-proxy://twin/demo://readme"
        );
        assert_eq!(book.expose_resource(1, "twin://own"), "twin://own");
        assert_eq!(
            book.resolve("demo://readme"),
            Some((0, "demo://readme".into()))
        );
        assert_eq!(
            book.resolve("acs-proxy://twin/demo://readme"),
            Some((1, "demo://readme".into()))
        );
        assert_eq!(
            book.seen_as(1, "demo://readme"),
            "acs-proxy://twin/demo://readme"
        );
        assert_eq!(book.seen_as(0, "demo://readme"), "demo://readme");
        // An upstream the aggregate does not have: an ordinary URI.
        assert_eq!(book.resolve("acs-proxy://other/x://y"), None);
    }

    #[test]
    fn a_gateway_uri_used_before_listing_routes_and_is_remembered() {
        let mut book = book();
        assert_eq!(
            book.resolve("acs-proxy://twin/demo://resource/7"),
            Some((1, "demo://resource/7".into()))
        );
        assert_eq!(
            book.seen_as(1, "demo://resource/7"),
            "acs-proxy://twin/demo://resource/7"
        );
    }

    #[test]
    fn shared_templates_are_gated_and_expansions_route_back() {
        let mut book = book();
        let template = "demo://resource/{id}";
        assert_eq!(book.expose_template(0, template), template);
        assert_eq!(
            book.expose_template(1, template),
            "acs-proxy://twin/demo://resource/{id}"
        );
        assert_eq!(
            book.resolve("demo://resource/3"),
            Some((0, "demo://resource/3".into()))
        );
        assert_eq!(
            book.resolve("acs-proxy://twin/demo://resource/3"),
            Some((1, "demo://resource/3".into()))
        );
        book.forget_leg(0);
        assert_eq!(book.resolve("demo://resource/3"), None);
    }
}
