//! The fake ports of a Spec: outbound HTTP, a projection's key/value read
//! model, a saga's command gateway, the log.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use crate::context::{Command, Request, Response};
use crate::error::{classes, reply_error, Error};
use crate::json::Value;
use crate::messages::{reply, Reply};

/// A failure of a port as the host's reply reports it, classified as the
/// module's ports classify it (berth::reply_error): what names the call.
pub fn host_failure(code: u8, what: &str, retry_after: Duration) -> Error {
    let r = Reply { code, message: "scripted by the test".into(), retry_after_millis: retry_after.as_millis() as u64, body: Vec::new() };
    reply_error(what, &r)
}

/// A refused connection: berth.ConnectionRefused, systemic.
pub fn refused(what: &str) -> Error {
    host_failure(reply::REFUSED, what, Duration::ZERO)
}
/// A host the module may not reach: berth.OutboundDenied.
pub fn denied(what: &str) -> Error {
    host_failure(reply::DENIED, what, Duration::ZERO)
}
/// A wait that ran out: berth.WaitTimeout, backpressure with the floor.
pub fn timed_out(what: &str, retry_after: Duration) -> Error {
    host_failure(reply::TIMEOUT, what, retry_after)
}
/// A port the host does not offer this processor: berth.Unsupported.
pub fn unsupported(what: &str) -> Error {
    host_failure(reply::UNSUPPORTED, what, Duration::ZERO)
}

enum Failing {
    Error(Error),
    Refused,
    Denied,
    Timeout(Duration),
}

/// The outbound HTTP port. It records every request and answers each one,
/// in this order: the next scripted failure (fail, fail_refused, …, like a
/// service that is down); the next response scripted for the URL
/// (respond_to); the next response for any URL (respond); else 200 with an
/// empty body. Each scripted answer answers one request.
#[derive(Default)]
pub struct FakeHttp {
    failures: VecDeque<Failing>,
    by_url: HashMap<String, VecDeque<Response>>,
    queue: VecDeque<Response>,
    requests: Vec<(Request, bool)>,
}

impl FakeHttp {
    /// The next request fails with err.
    pub fn fail(&mut self, err: Error) -> &mut FakeHttp {
        self.failures.push_back(Failing::Error(err));
        self
    }
    /// The next request fails as a refused connection (systemic).
    pub fn fail_refused(&mut self) -> &mut FakeHttp {
        self.failures.push_back(Failing::Refused);
        self
    }
    /// The next request fails as a host not in allowed-hosts.
    pub fn fail_denied(&mut self) -> &mut FakeHttp {
        self.failures.push_back(Failing::Denied);
        self
    }
    /// The next request fails as a wait that ran out (backpressure).
    pub fn fail_timeout(&mut self, retry_after: Duration) -> &mut FakeHttp {
        self.failures.push_back(Failing::Timeout(retry_after));
        self
    }
    /// Queues a response for the next request to any URL.
    pub fn respond(&mut self, r: Response) -> &mut FakeHttp {
        self.queue.push_back(r);
        self
    }
    /// Queues a response for the next request to exactly url.
    pub fn respond_to(&mut self, url: &str, r: Response) -> &mut FakeHttp {
        self.by_url.entry(url.to_string()).or_default().push_back(r);
        self
    }
    /// Every request so far, failed ones included, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.iter().map(|(r, _)| r.clone()).collect()
    }
    /// The requests that got a response (of any status): those that reached the service.
    pub fn sent(&self) -> Vec<Request> {
        self.requests.iter().filter(|(_, ok)| *ok).map(|(r, _)| r.clone()).collect()
    }

    /// Records req and answers it as scripted.
    pub fn call(&mut self, req: &Request) -> Result<Response, Error> {
        let mut req = req.clone();
        if req.method.is_empty() {
            req.method = "GET".into();
        }
        let what = format!("{} {}", req.method, req.url);
        let answer = match self.failures.pop_front() {
            Some(Failing::Error(e)) => Err(e),
            Some(Failing::Refused) => Err(refused(&what)),
            Some(Failing::Denied) => Err(denied(&what)),
            Some(Failing::Timeout(d)) => Err(timed_out(&what, d)),
            None => Ok(self
                .by_url
                .get_mut(&req.url)
                .and_then(VecDeque::pop_front)
                .or_else(|| self.queue.pop_front())
                .unwrap_or_else(|| Response::new(200, ""))),
        };
        self.requests.push((req, answer.is_ok()));
        answer
    }
}

/// A projection's key/value read model. Within a Spec a delivery's writes
/// reach it only if the handler succeeds.
#[derive(Default)]
pub struct FakeKv {
    data: BTreeMap<String, Vec<u8>>,
    failures: VecDeque<Error>,
}

impl FakeKv {
    /// The next calls of the port (get, put or delete) fail with err, one call each.
    pub fn fail(&mut self, err: Error) -> &mut FakeKv {
        self.failures.push_back(err);
        self
    }
    /// Stores a value directly, to give a test its starting state.
    pub fn set(&mut self, key: &str, value: impl Into<Vec<u8>>) -> &mut FakeKv {
        self.data.insert(key.into(), value.into());
        self
    }
    /// The stored value of key.
    pub fn value(&self, key: &str) -> Option<Vec<u8>> {
        self.data.get(key).cloned()
    }
    /// The stored keys, in order.
    pub fn keys(&self) -> Vec<String> {
        self.data.keys().cloned().collect()
    }
    pub(crate) fn next_failure(&mut self) -> Option<Error> {
        self.failures.pop_front()
    }
    pub(crate) fn apply(&mut self, key: String, value: Option<Vec<u8>>) {
        match value {
            Some(v) => self.data.insert(key, v),
            None => self.data.remove(&key),
        };
    }
}

/// A saga's command port and the command gateway behind it.
#[derive(Default)]
pub struct FakeCommands {
    failures: VecDeque<Error>,
    pub(crate) sent: Vec<Command>,
    pub(crate) rules: Vec<(CommandMatch, u16, String)>,
    pub(crate) rejected: Vec<crate::rejection::Rejection>,
}

/// Describes commands: empty fields match anything; a payload is compared as JSON.
#[derive(Debug, Clone, Default)]
pub struct CommandMatch {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub command_type: String,
    pub payload: Option<String>,
}

impl CommandMatch {
    /// Matches commands of the type, to any aggregate.
    pub fn of_type(command_type: &str) -> CommandMatch {
        CommandMatch { command_type: command_type.into(), ..CommandMatch::default() }
    }
    /// Whether cmd matches.
    pub fn matches(&self, cmd: &Command) -> bool {
        let field = |want: &str, got: &str| want.is_empty() || want == got;
        field(&self.aggregate_type, &cmd.aggregate_type)
            && field(&self.aggregate_id, &cmd.aggregate_id)
            && field(&self.command_type, &cmd.command_type)
            && self.payload.as_ref().map_or(true, |p| super::json_equal(&cmd.payload, p.as_bytes()))
    }
}

impl FakeCommands {
    /// The next sends fail with err, one each.
    pub fn fail(&mut self, err: Error) -> &mut FakeCommands {
        self.failures.push_back(err);
        self
    }
    /// The gateway rejects every command matching m with 409 and the reason.
    pub fn reject(&mut self, m: CommandMatch, reason: &str) -> &mut FakeCommands {
        self.reject_with(m, 409, reason)
    }
    /// The gateway rejects every command matching m with the status (409 or 422).
    pub fn reject_with(&mut self, m: CommandMatch, status: u16, reason: &str) -> &mut FakeCommands {
        self.rules.push((m, status, reason.into()));
        self
    }
    /// The commands sent so far (of succeeded deliveries), in order.
    pub fn sent(&self) -> &[Command] {
        &self.sent
    }
    /// The rejections so far, in order.
    pub fn rejected(&self) -> &[crate::rejection::Rejection] {
        &self.rejected
    }
    pub(crate) fn check(&mut self, cmd: &Command) -> Result<(), Error> {
        if cmd.aggregate_type.is_empty() || cmd.aggregate_id.is_empty() || cmd.command_type.is_empty() {
            return Err(classes::HOST.error(format!("send command {:?}: aggregate type, aggregate id and type are required", cmd.command_type)));
        }
        self.failures.pop_front().map_or(Ok(()), Err)
    }
    pub(crate) fn verdict(&self, cmd: &Command) -> Option<(u16, String)> {
        self.rules.iter().find(|(m, _, _)| m.matches(cmd)).map(|(_, s, r)| (*s, r.clone()))
    }
}

/// One line a handler logged.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// "debug", "info", "warn" or "error".
    pub level: &'static str,
    /// The invocation key the host tags the line with.
    pub key: String,
    pub msg: String,
    /// The line's structured fields, key-value pairs in order (empty for a
    /// plain line), as the host logs them.
    pub fields: Vec<(String, Value)>,
}

impl LogLine {
    /// The value of the field key (None: the line has no such field).
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}
