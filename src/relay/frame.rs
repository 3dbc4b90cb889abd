//! One frame read from one side: a single message, or a JSON-RPC batch
//! whose elements are decided one by one.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::delivery::{Delivery, Outcome};
use super::flow::handle_message;
use crate::jsonrpc::{codes, error_response, Frame, Message};
use crate::session::{Direction, Session};
use crate::telemetry::Carrier;

/// Handles one frame: a message, or each element of a batch.
pub async fn handle_frame(
    session: Arc<Session>,
    direction: Direction,
    frame: Frame,
    carrier: Option<&Carrier>,
    detach: &mut Option<oneshot::Sender<Outcome>>,
) -> Vec<Delivery> {
    match frame {
        Frame::Single(message) => {
            handle_message(&session, direction, message, carrier, detach).await
        }
        Frame::Batch(messages) => handle_batch(&session, direction, messages, carrier).await,
    }
}

/// A batch (MCP 2025-03-26) is decided element by element, in order. When
/// every element passes unchanged the original bytes go on as they came;
/// otherwise the surviving elements go on as a new array and the sender's
/// replies come back as one array.
async fn handle_batch(
    session: &Arc<Session>,
    direction: Direction,
    messages: Vec<Message>,
    carrier: Option<&Carrier>,
) -> Vec<Delivery> {
    let original: Vec<Bytes> = messages.iter().map(|m| m.bytes.clone()).collect();
    let mut forwards = Vec::new();
    let mut replies = Vec::new();
    for message in messages {
        if message.method() == "initialize" {
            replies.push(error_response(
                message.id.as_ref(),
                codes::INVALID_REQUEST,
                "`initialize` must not be part of a JSON-RPC batch",
                None,
            ));
            continue;
        }
        for delivery in handle_message(session, direction, message, carrier, &mut None).await {
            match delivery {
                Delivery::Forward(bytes) | Delivery::Answer(bytes, _) => forwards.push(bytes),
                Delivery::Reply(bytes) => replies.push(bytes),
            }
        }
    }
    let mut deliveries = Vec::new();
    if forwards == original {
        deliveries.push(Delivery::Forward(join_array(&original)));
    } else if !forwards.is_empty() {
        deliveries.push(Delivery::Forward(join_array(&forwards)));
    }
    if !replies.is_empty() {
        deliveries.push(Delivery::Reply(join_array(&replies)));
    }
    deliveries
}

fn join_array(elements: &[Bytes]) -> Bytes {
    let mut out =
        Vec::with_capacity(elements.iter().map(Bytes::len).sum::<usize>() + elements.len() + 1);
    out.push(b'[');
    for (index, element) in elements.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(element);
    }
    out.push(b']');
    Bytes::from(out)
}
