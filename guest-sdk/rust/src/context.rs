//! What a handler gets: the event, the invocation key, the attempt, the
//! deadline, and the ports (log, outbound HTTP, key/value, commands, config).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;
use crate::json::Value;
use crate::messages;

/// The event a handler is called for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// e.g. "OrderShipped".
    pub event_type: String,
    /// e.g. "Order".
    pub aggregate_type: String,
    /// The aggregate's id.
    pub aggregate_id: String,
    /// The aggregate version of the commit holding the event (1, 2, …).
    pub version: u64,
    /// The event's index within its commit, from 0.
    pub index: u32,
    /// The aggregate's owner, possibly empty.
    pub owner_id: String,
    /// The commit's global position in the log.
    pub position: u64,
    /// When the commit was appended (None: not known).
    pub time: Option<SystemTime>,
    /// The event body, JSON by convention.
    pub payload: Vec<u8>,
}

impl Event {
    /// The payload parsed as JSON (berth::json); a payload that does not
    /// parse is an unclassified error naming the event type.
    pub fn json(&self) -> Result<Value, Error> {
        Value::parse(&self.payload).map_err(|e| Error::msg(format!("decode {} payload: {}", self.event_type, e)))
    }
}

/// Log levels of the host's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// An outbound HTTP request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A request with the method and URL.
    pub fn new(method: &str, url: &str) -> Request {
        Request { method: method.into(), url: url.into(), ..Request::default() }
    }
    /// A GET request.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }
    /// A POST request.
    pub fn post(url: &str) -> Request {
        Request::new("POST", url)
    }
    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }
    /// The first value of the header (names compared ignoring case).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

/// An HTTP response: any status is a response; the handler decides what a 404 means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A response with the status and body.
    pub fn new(status: u16, body: &str) -> Response {
        Response { status, headers: Vec::new(), body: body.as_bytes().to_vec() }
    }
    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// The first value of the header (names compared ignoring case).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

fn find_header<'a>(hs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    hs.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// A command a saga derives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub command_type: String,
    /// JSON.
    pub payload: Vec<u8>,
}

impl Command {
    /// A command of the type to the aggregate, with a JSON payload.
    pub fn new(aggregate_type: &str, aggregate_id: &str, command_type: &str, payload: impl Into<Vec<u8>>) -> Command {
        Command { aggregate_type: aggregate_type.into(), aggregate_id: aggregate_id.into(), command_type: command_type.into(), payload: payload.into() }
    }
}

/// The ports a handler's Context calls. In a module they are the host's
/// (berth.* imports); under `cargo test` the test kit's fakes. Errors are
/// classified as the host's replies are: berth.ConnectionRefused (systemic),
/// berth.OutboundDenied, berth.WaitTimeout (backpressure), berth.Unsupported,
/// berth.HostError.
pub trait Ports {
    /// Writes a log line with its structured fields (key-value pairs in
    /// order, none for a plain line), tagged by the host with module and
    /// invocation key.
    fn log(&mut self, level: Level, msg: &str, fields: &[(&str, Value)]);
    /// Sends an outbound HTTP request.
    fn http(&mut self, req: &Request) -> Result<Response, Error>;
    /// Reads a projection's key (None: no value).
    fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error>;
    /// Writes a projection's key.
    fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), Error>;
    /// Deletes a projection's key (a missing key is no error).
    fn kv_delete(&mut self, key: &str) -> Result<(), Error>;
    /// Queues a saga's command; the host sends it only if the handler succeeds.
    fn send_command(&mut self, cmd: &Command) -> Result<(), Error>;
    /// A value the operator configured for the module.
    fn config(&mut self, key: &str) -> Option<String>;
}

/// What a handler gets. In a module a Context lives for one call: keep
/// nothing of it past the handler's return (clone what you need).
pub struct Context<'a> {
    /// The event.
    pub event: Event,
    /// "Processor.handler:aggregateType/aggregateId@version:index", escaped
    /// (berth::invocation_key): the same on every attempt at this event and
    /// no other event's; use it as the idempotency key of side effects.
    pub invocation_key: String,
    /// The attempt at this event, from 1.
    pub attempt: u32,
    /// When the host ends this attempt (None: not known).
    pub deadline: Option<SystemTime>,
    ports: &'a mut dyn Ports,
}

fn unix_nanos(n: i64) -> Option<SystemTime> {
    if n == 0 {
        None
    } else if n > 0 {
        Some(UNIX_EPOCH + Duration::from_nanos(n as u64))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_nanos(n.unsigned_abs()))
    }
}

impl<'a> Context<'a> {
    /// The context of the envelope ev with the ports.
    pub fn new(ev: messages::Event, ports: &'a mut dyn Ports) -> Context<'a> {
        Context {
            event: Event {
                event_type: ev.event_type,
                aggregate_type: ev.aggregate_type,
                aggregate_id: ev.aggregate_id,
                version: ev.version,
                index: ev.index,
                owner_id: ev.owner_id,
                position: ev.position,
                time: unix_nanos(ev.time_unix_nano),
                payload: ev.payload,
            },
            invocation_key: ev.invocation_key,
            attempt: ev.attempt,
            deadline: unix_nanos(ev.deadline_unix_nano),
            ports,
        }
    }

    /// Writes a log line at the level.
    pub fn log(&mut self, level: Level, msg: &str) {
        self.ports.log(level, msg, &[])
    }
    /// Writes a log line at the level with structured fields, key-value
    /// pairs in order, which the host logs as fields rather than as text
    /// (as the Go SDK's `c.Log.Info(msg, "k", v, …)`): `c.info_with("buyer
    /// notified", &[("buyer", buyer.into()), ("attempt", c.attempt.into())])`.
    pub fn log_with(&mut self, level: Level, msg: &str, fields: &[(&str, Value)]) {
        self.ports.log(level, msg, fields)
    }
    /// Writes a debug line.
    pub fn debug(&mut self, msg: &str) {
        self.log(Level::Debug, msg)
    }
    /// Writes an info line.
    pub fn info(&mut self, msg: &str) {
        self.log(Level::Info, msg)
    }
    /// Writes a warning.
    pub fn warn(&mut self, msg: &str) {
        self.log(Level::Warn, msg)
    }
    /// Writes an error line.
    pub fn error(&mut self, msg: &str) {
        self.log(Level::Error, msg)
    }
    /// Writes a debug line with fields (see log_with).
    pub fn debug_with(&mut self, msg: &str, fields: &[(&str, Value)]) {
        self.log_with(Level::Debug, msg, fields)
    }
    /// Writes an info line with fields (see log_with).
    pub fn info_with(&mut self, msg: &str, fields: &[(&str, Value)]) {
        self.log_with(Level::Info, msg, fields)
    }
    /// Writes a warning with fields (see log_with).
    pub fn warn_with(&mut self, msg: &str, fields: &[(&str, Value)]) {
        self.log_with(Level::Warn, msg, fields)
    }
    /// Writes an error line with fields (see log_with).
    pub fn error_with(&mut self, msg: &str, fields: &[(&str, Value)]) {
        self.log_with(Level::Error, msg, fields)
    }
    /// Sends an outbound HTTP request to a host in the module's allowed-hosts.
    pub fn http(&mut self, req: &Request) -> Result<Response, Error> {
        self.ports.http(req)
    }
    /// Reads a projection's key.
    pub fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.ports.kv_get(key)
    }
    /// Writes a projection's key; applied only if the handler succeeds.
    pub fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.ports.kv_put(key, value)
    }
    /// Deletes a projection's key; applied only if the handler succeeds.
    pub fn kv_delete(&mut self, key: &str) -> Result<(), Error> {
        self.ports.kv_delete(key)
    }
    /// Queues a saga's command; sent only if the handler succeeds.
    pub fn send(&mut self, cmd: &Command) -> Result<(), Error> {
        self.ports.send_command(cmd)
    }
    /// A value of the module's operator-set config ([modules.NAME] config).
    pub fn config(&mut self, key: &str) -> Option<String> {
        self.ports.config(key)
    }
}
