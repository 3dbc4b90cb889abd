//! Who is who on a shared stdio server: the pure bookkeeping that lets
//! several sessions speak to one child without their ids colliding.
//!
//! - Requests going up get a fresh numeric id; the answer coming down is
//!   given back its session's own id and goes to that session only.
//! - Progress tokens going up are replaced the same way (`mux-<n>`), so a
//!   progress notification reaches only the session that asked for it.
//! - `notifications/cancelled` going up names the rewritten id.
//! - The server is initialized once: the first `initialize` goes up, later
//!   ones are answered from the remembered result (each with its session's
//!   own id), and only the first `notifications/initialized` goes up.
//! - A request from the server (`sampling/createMessage`,
//!   `elicitation/create`, `roots/list`, `ping`) goes to one session: among
//!   the sessions whose client declared the capability it needs (all
//!   sessions when none did), the one whose request went up most recently
//!   and is still unanswered, else the one that joined most recently.
//! - Any other notification from the server (`list_changed`, log messages,
//!   resource updates) goes to every session.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::jsonrpc::RequestId;

/// One session attached to the shared server.
pub type MemberId = u64;

/// Where a message from a session goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Up {
    /// To the server, rewritten.
    Forward(Value),
    /// Straight back to the session (an `initialize` answered from memory).
    Answer(Value),
    /// Nowhere now (a repeated `notifications/initialized`, a cancellation
    /// of nothing, an `initialize` waiting for the first one's answer).
    Hold,
}

/// Where a message from the server goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Down {
    /// To these sessions, each with its own rewritten copy.
    To(Vec<(MemberId, Value)>),
    /// To every session.
    Broadcast(Value),
    /// Nowhere (its session has gone; a request no session can answer is
    /// answered with an error by the caller).
    Drop,
}

#[derive(Debug, Default)]
struct Member {
    /// The client's `initialize` capabilities.
    capabilities: Value,
    joined: u64,
}

#[derive(Debug)]
struct Outbound {
    member: MemberId,
    id: RequestId,
    token: Option<String>,
}

#[derive(Debug, Default)]
enum Init {
    /// Nobody asked yet (or the last attempt failed).
    #[default]
    Idle,
    /// The first `initialize` is up; these sessions wait for its answer.
    Pending {
        upstream_id: u64,
        waiters: Vec<(MemberId, RequestId)>,
    },
    /// The server's `initialize` result.
    Ready(Value),
}

/// The shared server's routing state.
#[derive(Debug, Default)]
pub struct Routes {
    next_id: u64,
    next_join: u64,
    members: HashMap<MemberId, Member>,
    requests: HashMap<u64, Outbound>,
    by_origin: HashMap<(MemberId, RequestId), u64>,
    tokens: HashMap<String, (MemberId, Value)>,
    server_requests: HashMap<RequestId, MemberId>,
    init: Init,
    initialized_sent: bool,
}

fn id_of(value: &Value) -> RequestId {
    RequestId::from_json(&value.to_string())
}

impl Routes {
    /// Attaches a session.
    pub fn join(&mut self, member: MemberId) {
        self.next_join += 1;
        self.members.insert(
            member,
            Member {
                capabilities: Value::Null,
                joined: self.next_join,
            },
        );
    }

    /// Detaches a session; returns the rewritten ids of its requests still
    /// up, so the server can be told they are cancelled.
    pub fn leave(&mut self, member: MemberId) -> Vec<u64> {
        self.members.remove(&member);
        let abandoned: Vec<u64> = self
            .requests
            .iter()
            .filter(|(_, outbound)| outbound.member == member)
            .map(|(id, _)| *id)
            .collect();
        for id in &abandoned {
            self.finish(*id);
        }
        self.server_requests.retain(|_, owner| *owner != member);
        if let Init::Pending { waiters, .. } = &mut self.init {
            waiters.retain(|(owner, _)| *owner != member);
        }
        abandoned
    }

    /// Sessions attached now.
    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Routes one message a session sent toward the server.
    pub fn up(&mut self, member: MemberId, mut message: Value) -> Up {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => self.initialize(member, message, id),
            (Some(_), Some(id)) => {
                let upstream_id = self.next();
                let token = message
                    .pointer_mut("/params/_meta/progressToken")
                    .map(|token| {
                        let ours = format!("mux-{upstream_id}");
                        let original = std::mem::replace(token, Value::from(ours.clone()));
                        self.tokens.insert(ours.clone(), (member, original));
                        ours
                    });
                let origin = id_of(&id);
                self.by_origin.insert((member, origin.clone()), upstream_id);
                self.requests.insert(
                    upstream_id,
                    Outbound {
                        member,
                        id: origin,
                        token,
                    },
                );
                message["id"] = Value::from(upstream_id);
                Up::Forward(message)
            }
            (Some("notifications/initialized"), None) => {
                if std::mem::replace(&mut self.initialized_sent, true) {
                    Up::Hold
                } else {
                    Up::Forward(message)
                }
            }
            (Some("notifications/cancelled"), None) => {
                let Some(target) = message.pointer("/params/requestId").map(id_of) else {
                    return Up::Hold;
                };
                match self.by_origin.get(&(member, target)) {
                    Some(upstream_id) => {
                        message["params"]["requestId"] = Value::from(*upstream_id);
                        Up::Forward(message)
                    }
                    None => Up::Hold,
                }
            }
            (Some(_), None) => Up::Forward(message),
            (None, Some(id)) => {
                self.server_requests.remove(&id_of(&id));
                Up::Forward(message)
            }
            (None, None) => Up::Forward(message),
        }
    }

    fn initialize(&mut self, member: MemberId, mut message: Value, id: Value) -> Up {
        if let Some(entry) = self.members.get_mut(&member) {
            entry.capabilities = message
                .pointer("/params/capabilities")
                .cloned()
                .unwrap_or(Value::Null);
        }
        let origin = id_of(&id);
        match &mut self.init {
            Init::Ready(result) => {
                Up::Answer(json!({"jsonrpc": "2.0", "id": id, "result": result.clone()}))
            }
            Init::Pending { waiters, .. } => {
                waiters.push((member, origin));
                Up::Hold
            }
            Init::Idle => {
                let upstream_id = self.next();
                self.init = Init::Pending {
                    upstream_id,
                    waiters: vec![(member, origin)],
                };
                message["id"] = Value::from(upstream_id);
                Up::Forward(message)
            }
        }
    }

    /// Routes one message the server sent.
    pub fn down(&mut self, mut message: Value) -> Down {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (None, Some(id)) => {
                let Some(upstream_id) = id.as_u64() else {
                    return Down::Drop;
                };
                if let Some(answers) = self.initialized(upstream_id, &message) {
                    return Down::To(answers);
                }
                let Some(outbound) = self.finish(upstream_id) else {
                    return Down::Drop;
                };
                message["id"] = outbound.id.to_value();
                Down::To(vec![(outbound.member, message)])
            }
            (Some(method), Some(id)) => match self.answerer(method) {
                Some(member) => {
                    self.server_requests.insert(id_of(&id), member);
                    Down::To(vec![(member, message)])
                }
                None => Down::Drop,
            },
            (Some("notifications/progress"), None) => {
                let token = message.pointer("/params/progressToken").cloned();
                let Some((member, original)) = token
                    .as_ref()
                    .and_then(Value::as_str)
                    .and_then(|token| self.tokens.get(token))
                    .cloned()
                else {
                    return Down::Drop;
                };
                message["params"]["progressToken"] = original;
                Down::To(vec![(member, message)])
            }
            (Some("notifications/cancelled"), None) => {
                let target = message.pointer("/params/requestId").map(id_of);
                match target.and_then(|id| self.server_requests.remove(&id)) {
                    Some(member) => Down::To(vec![(member, message)]),
                    None => Down::Drop,
                }
            }
            (Some(_), None) => Down::Broadcast(message),
            (None, None) => Down::Drop,
        }
    }

    /// The answer to the first `initialize`: remembered when it succeeded,
    /// and handed to every session waiting, each with its own id.
    fn initialized(&mut self, upstream_id: u64, message: &Value) -> Option<Vec<(MemberId, Value)>> {
        let Init::Pending {
            upstream_id: pending,
            ..
        } = &self.init
        else {
            return None;
        };
        if *pending != upstream_id {
            return None;
        }
        let Init::Pending { waiters, .. } = std::mem::take(&mut self.init) else {
            return None;
        };
        if let Some(result) = message.get("result") {
            self.init = Init::Ready(result.clone());
        }
        Some(
            waiters
                .into_iter()
                .map(|(member, id)| {
                    let mut answer = message.clone();
                    answer["id"] = id.to_value();
                    (member, answer)
                })
                .collect(),
        )
    }

    /// Forgets an answered (or abandoned) request and its progress token.
    fn finish(&mut self, upstream_id: u64) -> Option<Outbound> {
        let outbound = self.requests.remove(&upstream_id)?;
        self.by_origin
            .remove(&(outbound.member, outbound.id.clone()));
        if let Some(token) = &outbound.token {
            self.tokens.remove(token);
        }
        Some(outbound)
    }

    /// The session a server request goes to (see the module docs).
    fn answerer(&self, method: &str) -> Option<MemberId> {
        let capability = match method {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        };
        let capable: Vec<MemberId> = self
            .members
            .iter()
            .filter(|(_, member)| {
                capability.is_none_or(|name| member.capabilities.get(name).is_some())
            })
            .map(|(id, _)| *id)
            .collect();
        let candidates = if capable.is_empty() {
            self.members.keys().copied().collect()
        } else {
            capable
        };
        let busiest = self
            .requests
            .iter()
            .filter(|(_, outbound)| candidates.contains(&outbound.member))
            .max_by_key(|(id, _)| **id)
            .map(|(_, outbound)| outbound.member);
        busiest.or_else(|| {
            candidates
                .iter()
                .max_by_key(|id| self.members.get(id).map_or(0, |member| member.joined))
                .copied()
        })
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initialize(id: Value, capabilities: Value) -> Value {
        json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"capabilities":capabilities}})
    }

    fn forwarded(up: Up) -> Value {
        match up {
            Up::Forward(message) => message,
            other => panic!("expected a forward, got {other:?}"),
        }
    }

    fn to_one(down: Down) -> (MemberId, Value) {
        match down {
            Down::To(mut deliveries) if deliveries.len() == 1 => deliveries.remove(0),
            other => panic!("expected one delivery, got {other:?}"),
        }
    }

    /// Two sessions attached and initialized.
    fn two_sessions() -> Routes {
        let mut routes = Routes::default();
        routes.join(1);
        routes.join(2);
        let first = forwarded(routes.up(1, initialize(json!("a"), json!({"sampling":{}}))));
        assert_eq!(routes.up(2, initialize(json!(0), json!({}))), Up::Hold);
        let answers = routes.down(json!({"jsonrpc":"2.0","id":first["id"],"result":{"v":1}}));
        assert_eq!(
            answers,
            Down::To(vec![
                (1, json!({"jsonrpc":"2.0","id":"a","result":{"v":1}})),
                (2, json!({"jsonrpc":"2.0","id":0,"result":{"v":1}})),
            ])
        );
        routes
    }

    #[test]
    fn the_server_is_initialized_once() {
        let mut routes = two_sessions();
        routes.join(3);
        assert_eq!(
            routes.up(3, initialize(json!(7), json!({}))),
            Up::Answer(json!({"jsonrpc":"2.0","id":7,"result":{"v":1}}))
        );
        let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        assert!(matches!(routes.up(1, initialized.clone()), Up::Forward(_)));
        assert_eq!(routes.up(2, initialized), Up::Hold);
    }

    #[test]
    fn equal_ids_from_two_sessions_never_collide() {
        let mut routes = two_sessions();
        let call = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}});
        let one = forwarded(routes.up(1, call.clone()));
        let two = forwarded(routes.up(2, call));
        assert_ne!(one["id"], two["id"]);
        assert_ne!(
            one["params"]["_meta"]["progressToken"],
            two["params"]["_meta"]["progressToken"]
        );
        let progress = json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":two["params"]["_meta"]["progressToken"],"progress":1}});
        let (member, restored) = to_one(routes.down(progress));
        assert_eq!(member, 2);
        assert_eq!(restored["params"]["progressToken"], "t");
        let (member, answer) =
            to_one(routes.down(json!({"jsonrpc":"2.0","id":one["id"],"result":{}})));
        assert_eq!((member, answer["id"].clone()), (1, json!(5)));
        assert_eq!(
            routes.down(json!({"jsonrpc":"2.0","id":one["id"],"result":{}})),
            Down::Drop,
            "an answer is delivered once"
        );
    }

    #[test]
    fn cancellations_name_the_rewritten_id() {
        let mut routes = two_sessions();
        let up = forwarded(routes.up(2, json!({"jsonrpc":"2.0","id":"x","method":"tools/call"})));
        let cancel =
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}});
        assert_eq!(
            routes.up(1, cancel.clone()),
            Up::Hold,
            "not session 1's request"
        );
        let sent = forwarded(routes.up(2, cancel));
        assert_eq!(sent["params"]["requestId"], up["id"]);
    }

    #[test]
    fn server_requests_go_to_a_capable_busy_session() {
        let mut routes = two_sessions();
        let sampling = json!({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"});
        // Only session 1 declared sampling, so it answers even when idle.
        forwarded(routes.up(2, json!({"jsonrpc":"2.0","id":1,"method":"tools/call"})));
        assert_eq!(to_one(routes.down(sampling)).0, 1);
        // Any session may answer a ping: the one with the latest request up.
        let ping = json!({"jsonrpc":"2.0","id":"s2","method":"ping"});
        assert_eq!(to_one(routes.down(ping)).0, 2);
        // Its answer goes up unchanged.
        let answer = json!({"jsonrpc":"2.0","id":"s2","result":{}});
        assert_eq!(routes.up(2, answer.clone()), Up::Forward(answer));
    }

    #[test]
    fn other_notifications_reach_everyone() {
        let mut routes = two_sessions();
        let changed = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
        assert_eq!(routes.down(changed.clone()), Down::Broadcast(changed));
    }

    #[test]
    fn leaving_hands_back_the_requests_still_up() {
        let mut routes = two_sessions();
        let up = forwarded(routes.up(1, json!({"jsonrpc":"2.0","id":1,"method":"tools/call"})));
        assert_eq!(routes.leave(1), vec![up["id"].as_u64().unwrap()]);
        assert_eq!(routes.members(), 1);
        assert_eq!(
            routes.down(json!({"jsonrpc":"2.0","id":up["id"],"result":{}})),
            Down::Drop
        );
    }
}
