//! What routing reads from the messages it routes (progress tokens, the
//! request a cancellation names) and the few it writes itself (the
//! cancellation of an abandoned request, a JSON-mode body), each with a
//! borrowed peek: never a re-serialization of what it forwards.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::jsonrpc::{peek_frame, Frame, Message, RequestId};

/// A JSON-mode body: the one response, or every response as one array.
pub(super) fn join_parts(parts: Vec<Bytes>, batch: bool) -> Option<Bytes> {
    if parts.is_empty() {
        return None;
    }
    if !batch && parts.len() == 1 {
        return parts.into_iter().next();
    }
    let mut elements = Vec::new();
    for part in parts {
        match peek_frame(part.clone()) {
            Ok(Frame::Batch(messages)) => elements.extend(messages.into_iter().map(|m| m.bytes)),
            _ => elements.push(part),
        }
    }
    let mut out = Vec::with_capacity(elements.iter().map(|e| e.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, element) in elements.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(element);
    }
    out.push(b']');
    Some(Bytes::from(out))
}

/// The `protocolVersion` an `initialize` result names.
pub(super) fn negotiated_version(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Reply<'a> {
        #[serde(borrow)]
        result: Option<InitResult<'a>>,
    }
    #[derive(Deserialize)]
    struct InitResult<'a> {
        #[serde(borrow, rename = "protocolVersion")]
        protocol_version: Option<std::borrow::Cow<'a, str>>,
    }
    let reply: Reply<'_> = serde_json::from_slice(bytes).ok()?;
    Some(reply.result?.protocol_version?.into_owned())
}

#[derive(Deserialize)]
struct RequestEnvelope<'a> {
    #[serde(borrow)]
    params: Option<RequestParams<'a>>,
}

#[derive(Deserialize)]
struct RequestParams<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<ProgressMeta<'a>>,
}

#[derive(Deserialize)]
struct ProgressMeta<'a> {
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ProgressEnvelope<'a> {
    #[serde(borrow)]
    params: Option<ProgressMeta<'a>>,
}

#[derive(Deserialize)]
struct CancelEnvelope<'a> {
    #[serde(borrow)]
    params: Option<CancelParams<'a>>,
}

#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(borrow, rename = "requestId")]
    request_id: Option<&'a RawValue>,
}

/// `params._meta.progressToken` of a request, as JSON text.
pub(super) fn progress_token_of_request(bytes: &[u8]) -> Option<Box<str>> {
    let parsed: RequestEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    Some(parsed.params?.meta?.token?.get().trim().into())
}

/// `params.progressToken` of `notifications/progress`, as JSON text.
pub(super) fn progress_token_of_notification(bytes: &[u8]) -> Option<Box<str>> {
    let parsed: ProgressEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    Some(parsed.params?.token?.get().trim().into())
}

/// `params.requestId` of a client's `notifications/cancelled`.
pub(crate) fn cancelled_request(message: &Message) -> Option<RequestId> {
    if message.method() != "notifications/cancelled" {
        return None;
    }
    let parsed: CancelEnvelope<'_> = serde_json::from_slice(&message.bytes).ok()?;
    Some(RequestId::from_json(parsed.params?.request_id?.get()))
}

/// The `notifications/cancelled` sent for a request whose client went away.
pub(crate) fn cancellation(id: &RequestId) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the client closed the HTTP response stream"}}}}"#,
        id.as_json()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_names_the_request() {
        let text = cancellation(&RequestId::from_json("\"a\""));
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(value["params"]["requestId"], "a");
        let message = match peek_frame(text).unwrap() {
            Frame::Single(m) => m,
            Frame::Batch(_) => unreachable!(),
        };
        assert_eq!(
            cancelled_request(&message),
            Some(RequestId::from_json("\"a\""))
        );
    }
}
