//! The attempt capsule (wasm/abi/capsule.go, "berth-capsule/1"), read with
//! the crate's JSON reader: the parts a native replay uses (the event, the
//! host calls and their answers, the limits' timeout, the outcome). Other
//! fields, and fields a later minor version adds, are ignored.

use crate::context::{Command, Response};
use crate::json::Value;
use crate::messages;

/// The format this reader knows, the first field of every capsule.
pub const CAPSULE_FORMAT: &str = "berth-capsule/1";

/// The recording of one failed attempt, as far as a native replay needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capsule {
    /// The envelope exactly as the guest received it.
    pub event: messages::Event,
    /// The guest's host calls in the order it made them.
    pub calls: Vec<Call>,
    /// The attempt's time budget, in milliseconds.
    pub timeout_millis: i64,
    /// How the attempt ended.
    pub outcome: Outcome,
    /// What the capsule's size cap left out, if anything.
    pub truncated: Vec<String>,
}

/// One host call: what the guest asked (the field of its fn) and the reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Call {
    /// "http", "kv_get", "kv_put", "kv_delete", "command", "config" or "log".
    pub fn_name: String,
    /// An http call's request and, when the reply is ok, its response.
    pub http: Option<HttpCall>,
    /// A kv or config call's key.
    pub key: String,
    /// A kv_put's value.
    pub value: Vec<u8>,
    /// A command call's command.
    pub command: Option<Command>,
    /// A log call's line.
    pub log: Option<LogCall>,
    /// The host's answer (None for a log line, or a call the deadline passed in).
    pub reply: Option<Reply>,
    /// The attempt's deadline passed during this call: the guest never ran again.
    pub deadline: bool,
}

/// An outbound HTTP exchange.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpCall {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub response: Option<Response>,
}

/// A log line: its level ("debug", …) and its text as the guest wrote it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogCall {
    pub level: String,
    pub text: Vec<u8>,
}

/// A host call's reply with its code by name ("ok", "not_found", …).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    pub code: String,
    pub message: String,
    pub retry_after_millis: u64,
    pub body: Vec<u8>,
}

/// How an attempt ended: kind "success", "failure" (classes, message),
/// "timeout", "trap" or "memory-exceeded".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub kind: String,
    pub classes: Vec<String>,
    pub message: String,
}

/// Reply codes by name, in the ABI's order (messages::reply).
const REPLY_CODES: [&str; 9] = ["ok", "not_found", "denied", "refused", "timeout", "unsupported", "error", "too_large", "backpressure"];

impl Reply {
    /// The Reply the guest got; an unknown code name is an error reply saying so.
    pub fn to_reply(&self) -> messages::Reply {
        match REPLY_CODES.iter().position(|c| *c == self.code) {
            Some(code) => messages::Reply { code: code as u8, message: self.message.clone(), retry_after_millis: self.retry_after_millis, body: self.body.clone() },
            None => error_reply(&format!("the capsule's reply code {:?} is unknown", self.code)),
        }
    }

    /// A reply of the code with the message.
    pub fn of(code: u8, message: &str) -> Reply {
        Reply { code: REPLY_CODES.get(code as usize).map_or_else(|| format!("code_{}", code), |c| c.to_string()), message: message.into(), ..Reply::default() }
    }
}

/// An error reply with the message.
pub(crate) fn error_reply(message: &str) -> messages::Reply {
    messages::Reply { code: messages::reply::ERROR, message: message.into(), ..messages::Reply::default() }
}

impl Capsule {
    /// Reads a capsule file's JSON, refusing another format.
    pub fn parse(b: &[u8]) -> Result<Capsule, String> {
        let v = Value::parse_keeping_numbers(b).map_err(|e| format!("not a capsule: {}", e))?;
        let format = text(&v, "format");
        if format != CAPSULE_FORMAT {
            return Err(format!("capsule format {:?}, this reader knows {:?}", format, CAPSULE_FORMAT));
        }
        let e = member(&v, "event");
        let event = messages::Event {
            handler: text(e, "handler"),
            invocation_key: text(e, "invocation_key"),
            attempt: int(e, "attempt")? as u32,
            event_type: text(e, "type"),
            aggregate_type: text(e, "aggregate_type"),
            aggregate_id: text(e, "aggregate_id"),
            version: int(e, "version")? as u64,
            index: int(e, "index")? as u32,
            owner_id: text(e, "owner_id"),
            position: int(e, "position")? as u64,
            time_unix_nano: int(e, "time_unix_nano")? as i64,
            deadline_unix_nano: int(e, "deadline_unix_nano")? as i64,
            payload: blob(e, "payload")?,
        };
        let calls = list(&v, "calls").iter().map(call).collect::<Result<Vec<_>, _>>()?;
        let o = member(&v, "outcome");
        let outcome = Outcome { kind: text(o, "kind"), classes: strings(o, "classes"), message: text(o, "message") };
        Ok(Capsule { event, calls, timeout_millis: int(member(&v, "limits"), "timeout_ms")? as i64, outcome, truncated: strings(&v, "truncated") })
    }
}

fn call(v: &Value) -> Result<Call, String> {
    let http = match v.get("http") {
        None | Some(Value::Null) => None,
        Some(h) => {
            let response = match h.get("response") {
                None | Some(Value::Null) => None,
                Some(r) => Some(Response { status: int(r, "status")? as u16, headers: headers(r), body: blob(r, "body")? }),
            };
            Some(HttpCall { method: text(h, "method"), url: text(h, "url"), headers: headers(h), body: blob(h, "body")?, response })
        }
    };
    let command = match v.get("command") {
        None | Some(Value::Null) => None,
        Some(c) => Some(Command { aggregate_type: text(c, "aggregate_type"), aggregate_id: text(c, "aggregate_id"), command_type: text(c, "type"), payload: blob(c, "payload")? }),
    };
    let log = match v.get("log") {
        None | Some(Value::Null) => None,
        Some(l) => Some(LogCall { level: text(l, "level"), text: blob(l, "text")? }),
    };
    let reply = match v.get("reply") {
        None | Some(Value::Null) => None,
        Some(r) => Some(Reply { code: text(r, "code"), message: text(r, "message"), retry_after_millis: int(r, "retry_after_ms")?, body: blob(r, "body")? }),
    };
    Ok(Call { fn_name: text(v, "fn"), http, key: text(v, "key"), value: blob(v, "value")?, command, log, reply, deadline: v.get("deadline") == Some(&Value::Bool(true)) })
}

static NULL: Value = Value::Null;

fn member<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&NULL)
}

fn text(v: &Value, key: &str) -> String {
    member(v, key).as_str().unwrap_or_default().to_string()
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    member(v, key).as_array().unwrap_or_default()
}

/// An integer member (numbers are kept as their text); a missing one is 0.
fn int(v: &Value, key: &str) -> Result<u64, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(n)) => n.parse::<u64>().or_else(|_| n.parse::<i64>().map(|i| i as u64)).map_err(|_| format!("capsule: {} is not an integer: {}", key, n)),
        Some(other) => Err(format!("capsule: {} is not an integer: {}", key, other)),
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    list(v, key).iter().filter_map(|s| s.as_str().map(String::from)).collect()
}

fn headers(v: &Value) -> Vec<(String, String)> {
    list(v, "headers").iter().map(|h| (text(h, "name"), text(h, "value"))).collect()
}

/// A Blob member (abi.Blob): the text's bytes, or "base64:" and the bytes
/// in standard base64.
fn blob(v: &Value, key: &str) -> Result<Vec<u8>, String> {
    let s = text(v, key);
    match s.strip_prefix("base64:") {
        Some(b64) => base64(b64).ok_or_else(|| format!("capsule: {} is not base64", key)),
        None => Ok(s.into_bytes()),
    }
}

/// Decodes standard base64 with padding.
fn base64(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return None;
    }
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (i, quad) in b.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != b.len() / 4) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | u32::from(sextet(c)?);
        }
        n <<= 6 * pad as u32;
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_the_standard_alphabet() {
        assert_eq!(base64("nwA84UIXqgU=").unwrap(), vec![0x9f, 0x00, 0x3c, 0xe1, 0x42, 0x17, 0xaa, 0x05]);
        assert_eq!(base64("").unwrap(), Vec::<u8>::new());
        assert_eq!(base64("YQ==").unwrap(), b"a".to_vec());
        assert_eq!(base64("YWI=").unwrap(), b"ab".to_vec());
        assert_eq!(base64("+/8=").unwrap(), vec![0xfb, 0xff]);
        for bad in ["YQ=", "Y===", "YQ==YQ==", "Y!Q="] {
            assert_eq!(base64(bad), None, "{}", bad);
        }
    }

    #[test]
    fn blobs_and_big_integers() {
        let v = Value::parse_keeping_numbers(br#"{"a":"base64:YWI=","b":"base64-less","n":1796479400000000000,"m":-5,"f":1.5}"#).unwrap();
        assert_eq!(blob(&v, "a").unwrap(), b"ab".to_vec());
        assert_eq!(blob(&v, "b").unwrap(), b"base64-less".to_vec());
        assert_eq!(blob(&v, "missing").unwrap(), Vec::<u8>::new());
        assert_eq!(int(&v, "n").unwrap(), 1796479400000000000);
        assert_eq!(int(&v, "m").unwrap() as i64, -5);
        assert!(int(&v, "f").is_err());
        assert!(int(&v, "a").is_err());
        assert!(Capsule::parse(br#"{"format":"berth-capsule/2"}"#).unwrap_err().contains("berth-capsule/2"));
    }
}
