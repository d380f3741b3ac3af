//! A saga's rejected commands (wasm/abi/ABI.md, "Sagas: rejected commands").

use crate::context::Command;
use crate::error::{classes, Error};
use crate::json::Value;

/// The reserved event type of a saga's rejection handler.
pub const EVENT_COMMAND_REJECTED: &str = "berth.CommandRejected";

/// A command of the saga that the command gateway rejected (409 or 422). A
/// rejection is not a failure: the host never retries the command; the saga
/// compensates, e.g. by sending another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejection {
    /// The command as the saga sent it (payload: JSON, empty for none).
    pub command: Command,
    /// Why the gateway rejected it.
    pub reason: String,
    /// The gateway's HTTP status, 409 or 422.
    pub status: u16,
    /// The type of the event whose handling sent the command.
    pub event_type: String,
    /// "<invocation key>/<command index>", the same on every redelivery.
    pub request_id: String,
}

impl Rejection {
    /// Decodes the JSON payload of a berth.CommandRejected event; a payload
    /// that does not decode is a berth.HostError.
    pub fn decode(payload: &[u8]) -> Result<Rejection, Error> {
        let bad = |e: String| classes::HOST.error(format!("decode {} payload: {}", EVENT_COMMAND_REJECTED, e));
        let v = Value::parse(payload).map_err(bad)?;
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let cmd = v.get("command").ok_or_else(|| bad("no command".into()))?;
        let payload = match cmd.get("payload") {
            None | Some(Value::Null) => Vec::new(),
            Some(p) => p.to_vec(),
        };
        Ok(Rejection {
            command: Command { aggregate_type: s(cmd, "aggregateType"), aggregate_id: s(cmd, "aggregateId"), command_type: s(cmd, "type"), payload },
            reason: s(&v, "reason"),
            status: v.get("status").and_then(Value::as_i64).unwrap_or(0) as u16,
            event_type: s(&v, "eventType"),
            request_id: s(&v, "requestId"),
        })
    }

    /// The JSON payload the host delivers for r, the inverse of decode. A
    /// command payload that is not JSON is sent as a JSON string.
    pub fn encode(&self) -> Vec<u8> {
        let payload = if self.command.payload.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            Value::parse(&self.command.payload).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.command.payload).into_owned()))
        };
        let c = &self.command;
        Value::object(vec![
            (
                "command",
                Value::object(vec![
                    ("aggregateType", c.aggregate_type.as_str().into()),
                    ("aggregateId", c.aggregate_id.as_str().into()),
                    ("type", c.command_type.as_str().into()),
                    ("payload", payload),
                ]),
            ),
            ("reason", self.reason.as_str().into()),
            ("status", u64::from(self.status).into()),
            ("eventType", self.event_type.as_str().into()),
            ("requestId", self.request_id.as_str().into()),
        ])
        .to_vec()
    }
}
