//! W3C trace context (`traceparent`, `tracestate`) as it travels: in HTTP
//! headers, and in an MCP message's `params._meta` (stdio, and clients
//! that carry it there).

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};

/// `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// `tracestate`.
pub const TRACESTATE: &str = "tracestate";

/// A received or outgoing trace context, as its two W3C fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carrier {
    /// `traceparent`.
    pub traceparent: String,
    /// `tracestate`, when there is one.
    pub tracestate: Option<String>,
}

impl Carrier {
    /// The carrier in headers (read through `header`), when tracing is on
    /// and there is a `traceparent`.
    pub fn from_headers<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        super::tracer()?;
        Some(Self {
            traceparent: header(TRACEPARENT)?.to_owned(),
            tracestate: header(TRACESTATE).map(str::to_owned),
        })
    }

    /// The carrier in a message's `params._meta`, when tracing is on.
    pub fn from_message(message: &Value) -> Option<Self> {
        super::tracer()?;
        let meta = message.get("params")?.get("_meta")?;
        Some(Self {
            traceparent: meta.get(TRACEPARENT)?.as_str()?.to_owned(),
            tracestate: meta
                .get(TRACESTATE)
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// The carrier of the current span (see [`super::Trace::instrument`]),
    /// when tracing is on and there is one: for a client to pass on.
    pub fn current() -> Option<Self> {
        super::tracer()?;
        let cx = Context::current();
        let valid = cx.span().span_context().is_valid();
        valid.then(|| Self::of(&cx))
    }

    /// The carrier of `cx`'s span.
    pub fn of(cx: &Context) -> Self {
        let mut fields = Fields::default();
        TraceContextPropagator::new().inject_context(cx, &mut fields);
        Self {
            traceparent: fields.0.remove(TRACEPARENT).unwrap_or_default(),
            tracestate: fields.0.remove(TRACESTATE).filter(|s| !s.is_empty()),
        }
    }

    /// The remote span this carrier names; `None` when `traceparent` is
    /// malformed (the request then starts a trace of its own).
    pub fn context(&self) -> Option<Context> {
        let mut fields = Fields::default();
        fields
            .0
            .insert(TRACEPARENT.into(), self.traceparent.clone());
        if let Some(state) = &self.tracestate {
            fields.0.insert(TRACESTATE.into(), state.clone());
        }
        let cx = TraceContextPropagator::new().extract(&fields);
        cx.span().span_context().is_valid().then_some(cx)
    }

    /// Writes this carrier into a request's `params._meta`, replacing one
    /// the sender put there.
    pub fn write_meta(&self, message: &mut Value) {
        let Some(params) = message.as_object_mut().and_then(|m| {
            m.entry("params")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
        }) else {
            return;
        };
        let Some(meta) = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
        else {
            return;
        };
        meta.insert(TRACEPARENT.into(), Value::from(self.traceparent.as_str()));
        match &self.tracestate {
            Some(state) => {
                meta.insert(TRACESTATE.into(), Value::from(state.as_str()));
            }
            None => {
                meta.remove(TRACESTATE);
            }
        }
    }
}

/// A text map for the W3C propagator.
#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Extractor for Fields {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl Injector for Fields {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_names_a_remote_parent() {
        let carrier = Carrier {
            traceparent: PARENT.into(),
            tracestate: Some("vendor=1".into()),
        };
        let cx = carrier.context().unwrap();
        let span = cx.span().span_context().clone();
        assert_eq!(
            span.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(span.is_remote());
        assert_eq!(Carrier::of(&cx), carrier);
        let bad = Carrier {
            traceparent: "00-zz".into(),
            tracestate: None,
        };
        assert!(bad.context().is_none());
    }

    #[test]
    fn meta_is_written_beside_what_is_there() {
        let mut message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"echo","_meta":{"progressToken":7,"tracestate":"old=1"}}});
        Carrier {
            traceparent: PARENT.into(),
            tracestate: None,
        }
        .write_meta(&mut message);
        assert_eq!(message["params"]["_meta"]["progressToken"], 7);
        assert_eq!(message["params"]["_meta"]["traceparent"], PARENT);
        assert!(message["params"]["_meta"].get("tracestate").is_none());
        let mut bare = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
        Carrier {
            traceparent: PARENT.into(),
            tracestate: Some("a=b".into()),
        }
        .write_meta(&mut bare);
        assert_eq!(bare["params"]["_meta"]["tracestate"], "a=b");
    }
}
