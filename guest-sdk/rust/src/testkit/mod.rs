//! The test kit: run a processor's handlers natively under `cargo test`, no
//! WebAssembly involved, with fakes for every port that a test scripts to
//! fail. The Rust form of the Go kit (guest-sdk/berthtest) and of the
//! spec's whenEvent / expectError / expectNoError scenarios.
//!
//! A Spec calls the handler registered for an event's type once per
//! when_event, through the same Processor::dispatch the module uses, with the
//! envelope the host would build: the invocation key, the attempt (counted
//! per key, so a second when_event of the same event is attempt 2 with the
//! same key), the deadline. Like the host, it keeps a saga's commands and a
//! projection's writes of one delivery only if the handler succeeds;
//! outbound HTTP happens at once. Expectations panic with what happened, so
//! a failed one fails the test at its line.
//!
//! replay runs a handler against an attempt capsule, the recording of a
//! failed attempt (a parked failure), with ports answering from it.

pub mod capsule;
mod classify;
mod fakes;
mod replay;
mod then;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use classify::{classify, Decision, Verdict};
pub use fakes::{denied, host_failure, refused, timed_out, unsupported, CommandMatch, FakeCommands, FakeHttp, FakeKv, LogLine};
pub use replay::{replay, replay_capsule, Departure, Replayed, NOT_RECORDED};
pub use then::Then;

use crate::context::{Command, Level, Ports, Request, Response};
use crate::error::Error;
use crate::invocation_key;
use crate::json::Value;
use crate::messages;
use crate::processor::{Handler, Kind, Processor};
use crate::rejection::{Rejection, EVENT_COMMAND_REJECTED};

/// The event a test delivers: the event the handler sees, and how it is
/// delivered.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// The event; a version of 0 is delivered as 1.
    pub event: crate::Event,
    /// The handler to run; empty: the first registered for the type.
    pub handler: String,
    /// The attempt the handler sees; 0 counts deliveries of the same key, from 1.
    pub attempt: u32,
}

impl Event {
    /// An event of the type.
    pub fn new(event_type: &str) -> Event {
        Event { event: crate::Event { event_type: event_type.into(), ..crate::Event::default() }, ..Event::default() }
    }
    /// Sets the aggregate.
    pub fn aggregate(mut self, aggregate_type: &str, aggregate_id: &str) -> Event {
        self.event.aggregate_type = aggregate_type.into();
        self.event.aggregate_id = aggregate_id.into();
        self
    }
    /// Sets the version.
    pub fn version(mut self, v: u64) -> Event {
        self.event.version = v;
        self
    }
    /// Sets the owner.
    pub fn owner(mut self, owner: &str) -> Event {
        self.event.owner_id = owner.into();
        self
    }
    /// Sets the JSON payload.
    pub fn payload(mut self, json: &str) -> Event {
        self.event.payload = json.as_bytes().to_vec();
        self
    }
}

/// Runs one processor's handlers against fake ports. Script the fakes before
/// when_event and inspect them after; they persist across calls, as the
/// services behind the ports would.
pub struct Spec {
    pub processor: Processor,
    pub http: FakeHttp,
    pub kv: FakeKv,
    pub commands: FakeCommands,
    /// The module's operator-set configuration.
    pub config: HashMap<String, String>,
    /// The lines handlers wrote, tagged with the invocation key.
    pub log: Vec<LogLine>,
    attempts: HashMap<String, u32>,
}

impl Spec {
    /// A Spec for the processor with empty fakes; panics if the host would
    /// refuse the processor at load.
    #[track_caller]
    pub fn new(processor: Processor) -> Spec {
        if let Err(e) = processor.validate() {
            panic!("berth::testkit: the host would refuse processor {}: {}", processor.name, e);
        }
        Spec {
            processor,
            http: FakeHttp::default(),
            kv: FakeKv::default(),
            commands: FakeCommands::default(),
            config: HashMap::new(),
            log: Vec::new(),
            attempts: HashMap::new(),
        }
    }

    /// Sets a config value.
    pub fn set_config(&mut self, key: &str, value: &str) -> &mut Spec {
        self.config.insert(key.into(), value.into());
        self
    }

    /// Delivers the event once to its handler and returns the outcome.
    #[track_caller]
    pub fn when_event(&mut self, given: Event) -> Then {
        let (name, timeout) = {
            let h = self.handler_for(&given);
            (h.name.clone(), h.retry.timeout)
        };
        let (ev, attempt) = (given.event, given.attempt);
        let version = if ev.version == 0 { 1 } else { ev.version };
        let key = invocation_key(&self.processor.name, &name, &ev.aggregate_type, &ev.aggregate_id, version, ev.index);
        let count = self.attempts.entry(key.clone()).or_insert(0);
        *count += 1;
        let attempt = if attempt == 0 { *count } else { attempt };
        let timeout = if timeout > Duration::ZERO { timeout } else { self.processor.retry.timeout };
        let env = messages::Event {
            handler: name.clone(),
            invocation_key: key.clone(),
            attempt,
            event_type: ev.event_type,
            aggregate_type: ev.aggregate_type,
            aggregate_id: ev.aggregate_id,
            version,
            index: ev.index,
            owner_id: ev.owner_id,
            position: ev.position,
            time_unix_nano: ev.time.map_or(0, nanos),
            deadline_unix_nano: if timeout > Duration::ZERO { nanos(SystemTime::now() + timeout) } else { 0 },
            payload: ev.payload,
        };
        let mut then = Then { subscription: format!("{}.{}", self.processor.name, name), key, attempt, ..Then::default() };
        let (res, err, d) = self.run(env.clone());
        then.requests = d.requests.clone();
        then.result = res;
        then.err = err;
        if then.result.failure.is_none() {
            self.commit(&mut then, &env, d);
        }
        then.state = self.kv.keys().into_iter().map(|k| (k.clone(), self.kv.value(&k).unwrap_or_default())).collect();
        then
    }

    #[track_caller]
    fn handler_for(&self, given: &Event) -> &Handler {
        let (p, ev) = (&self.processor, &given.event);
        let h = if given.handler.is_empty() { p.handler_for(&ev.event_type) } else { p.handler(&given.handler) };
        match h {
            Some(h) if h.event_types.contains(&ev.event_type) => h,
            Some(h) => panic!("berth::testkit: handler {}.{} does not handle {:?} events", p.name, h.name, ev.event_type),
            None => panic!("berth::testkit: processor {} has no handler for {:?} events", p.name, ev.event_type),
        }
    }

    /// Runs one call with a fresh delivery's ports.
    fn run(&mut self, env: messages::Event) -> (messages::HandleResult, Option<Error>, Delivery) {
        let mut d = Delivery { key: env.invocation_key.clone(), ..Delivery::default() };
        let (res, err) = {
            let mut ports = DeliveryPorts { d: &mut d, spec: SpecPorts { kind: self.processor.kind, http: &mut self.http, kv: &mut self.kv, commands: &mut self.commands, config: &self.config, log: &mut self.log } };
            self.processor.dispatch_keeping(env, &mut ports)
        };
        (res, err, d)
    }

    /// Applies a succeeded delivery's writes and sends its commands, as the
    /// host does: a rejected command goes to the saga's rejection handler at
    /// once, whose own commands are sent next.
    fn commit(&mut self, then: &mut Then, env: &messages::Event, d: Delivery) {
        for (k, v) in d.writes {
            self.kv.apply(k, v);
        }
        for (i, cmd) in d.queued.into_iter().enumerate() {
            self.commands.sent.push(cmd.clone());
            then.commands.push(cmd.clone());
            let (status, reason) = match self.commands.verdict(&cmd) {
                Some(v) => v,
                None => continue,
            };
            let rej = Rejection { command: cmd, reason, status, event_type: env.event_type.clone(), request_id: format!("{}/{}", env.invocation_key, i) };
            self.commands.rejected.push(rej.clone());
            then.rejections.push(rej.clone());
            let h = match self.processor.handler_for(EVENT_COMMAND_REJECTED) {
                Some(h) if env.event_type != EVENT_COMMAND_REJECTED => h.name.clone(),
                _ => continue, // logged by the host, not delivered again
            };
            let renv = messages::Event {
                handler: h,
                invocation_key: format!("{}:rejected:{}", env.invocation_key, i),
                event_type: EVENT_COMMAND_REJECTED.into(),
                payload: rej.encode(),
                ..env.clone()
            };
            let (res, err, rd) = self.run(renv.clone());
            then.requests.extend(rd.requests.iter().cloned());
            if res.failure.is_some() {
                then.result = res;
                then.err = err;
                return;
            }
            self.commit(then, &renv, rd);
        }
    }
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// One delivery: its requests, and the writes and commands kept until it succeeds.
#[derive(Default)]
struct Delivery {
    key: String,
    requests: Vec<Request>,
    writes: Vec<(String, Option<Vec<u8>>)>,
    queued: Vec<Command>,
}

struct SpecPorts<'a> {
    kind: Kind,
    http: &'a mut FakeHttp,
    kv: &'a mut FakeKv,
    commands: &'a mut FakeCommands,
    config: &'a HashMap<String, String>,
    log: &'a mut Vec<LogLine>,
}

struct DeliveryPorts<'a> {
    d: &'a mut Delivery,
    spec: SpecPorts<'a>,
}

impl DeliveryPorts<'_> {
    fn kv_supported(&mut self, what: &str) -> Result<(), Error> {
        if self.spec.kind != Kind::Projection {
            return Err(unsupported(&format!("{}: the key/value port is offered to projections only", what)));
        }
        self.spec.kv.next_failure().map_or(Ok(()), Err)
    }
}

impl Ports for DeliveryPorts<'_> {
    fn log(&mut self, level: Level, msg: &str, fields: &[(&str, Value)]) {
        let level = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let fields = fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        self.spec.log.push(LogLine { level, key: self.d.key.clone(), msg: msg.into(), fields });
    }

    fn http(&mut self, req: &Request) -> Result<Response, Error> {
        self.d.requests.push(req.clone());
        self.spec.http.call(req)
    }

    fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.kv_supported(&format!("kv get {}", key))?;
        if let Some((_, v)) = self.d.writes.iter().rev().find(|(k, _)| k == key) {
            return Ok(v.clone());
        }
        Ok(self.spec.kv.value(key))
    }

    fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.kv_supported(&format!("kv put {}", key))?;
        self.d.writes.push((key.into(), Some(value.to_vec())));
        Ok(())
    }

    fn kv_delete(&mut self, key: &str) -> Result<(), Error> {
        self.kv_supported(&format!("kv delete {}", key))?;
        self.d.writes.push((key.into(), None));
        Ok(())
    }

    fn send_command(&mut self, cmd: &Command) -> Result<(), Error> {
        if self.spec.kind != Kind::Saga {
            return Err(unsupported(&format!("send command {}: commands are accepted from sagas only", cmd.command_type)));
        }
        self.spec.commands.check(cmd)?;
        self.d.queued.push(cmd.clone());
        Ok(())
    }

    fn config(&mut self, key: &str) -> Option<String> {
        self.spec.config.get(key).cloned()
    }
}

/// Compares got with want as JSON values if both parse, else byte for byte.
pub fn json_equal(got: &[u8], want: &[u8]) -> bool {
    match (Value::parse(got), Value::parse(want)) {
        (Ok(g), Ok(w)) => g == w,
        _ => got == want,
    }
}
