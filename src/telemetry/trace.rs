//! [`Trace`]: one span, or nothing when tracing is off.
//!
//! Every method is a no-op on an empty handle and takes its attributes as
//! a closure, so with tracing off no attribute, name or span is built.
//! A span ends when [`Trace::end`] is called, or when the last copy of its
//! handle is dropped.

use std::borrow::Cow;
use std::future::Future;

use futures_util::future::Either;
use opentelemetry::context::{FutureExt as _, WithContext};

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::carrier::Carrier;
use super::tracer;

/// A span and its context (the parent of what it covers), or nothing.
#[derive(Debug, Clone, Default)]
pub struct Trace(Option<Context>);

impl Trace {
    /// The handle of a step that is not traced.
    pub const fn off() -> Self {
        Self(None)
    }

    /// Whether this handle holds a span.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The span's context, to make it current or propagate it.
    pub fn context(&self) -> Option<&Context> {
        self.0.as_ref()
    }

    /// A span whose parent is the agent's trace when `carrier` holds one,
    /// else `fallback` (e.g. the session's span), else none (a new trace).
    /// Off when tracing is off.
    pub fn start_continuing(
        carrier: Option<&Carrier>,
        fallback: &Trace,
        name: impl FnOnce() -> Cow<'static, str>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        let Some(tracer) = tracer() else {
            return Self::off();
        };
        let parent = match (carrier.and_then(Carrier::context), &fallback.0) {
            (Some(remote), _) => remote,
            (None, Some(local)) => local.clone(),
            (None, None) => Context::new(),
        };
        let span = tracer
            .span_builder(name())
            .with_kind(kind)
            .with_attributes(attributes())
            .start_with_context(tracer, &parent);
        Self(Some(parent.with_span(span)))
    }

    /// A child span; off when this one is.
    pub fn child(
        &self,
        name: impl FnOnce() -> Cow<'static, str>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        let (Some(parent), Some(tracer)) = (&self.0, tracer()) else {
            return Self::off();
        };
        let span = tracer
            .span_builder(name())
            .with_kind(kind)
            .with_attributes(attributes())
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// Adds an event to the span.
    pub fn event(&self, name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().add_event(name, attributes());
        }
    }

    /// Sets attributes on the span.
    pub fn annotate(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// Marks the span as failed.
    pub fn fail(&self, description: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(description()));
        }
    }

    /// Ends the span now.
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }

    /// The W3C carrier of this span's context, to pass on.
    pub fn carrier(&self) -> Option<Carrier> {
        self.0.as_ref().map(Carrier::of)
    }
}

impl Trace {
    /// `future`, with this span current while it runs (so a client inside
    /// it can propagate the context); `future` itself when off.
    pub fn instrument<F: Future>(&self, future: F) -> Either<WithContext<F>, F> {
        match &self.0 {
            Some(cx) => Either::Left(future.with_context(cx.clone())),
            None => Either::Right(future),
        }
    }
}
