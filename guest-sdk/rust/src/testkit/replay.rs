//! Replaying an attempt capsule against a handler natively, so that a
//! parked failure becomes a regression test in one step: the Rust form of
//! the Go kit's berthtest.Replay, with the same semantics.

use std::fmt;
use std::panic::resume_unwind;
use std::path::Path;

use crate::context::{Command, Level, Ports, Request, Response};
use crate::error::{classes, reply_error, Error, ErrorClass};
use crate::json::Value;
use crate::messages::{reply, HandleResult};
use crate::processor::Processor;

use super::capsule::{error_reply, Call, Capsule, HttpCall, LogCall, Outcome, Reply};

/// The message of the answer a call gets that the capsule has no answer for.
pub const NOT_RECORDED: &str = "not recorded in the capsule";

/// Runs the handler the capsule's event names, of processor, natively,
/// against the capsule at path (GET /v1/subscriptions/{name}/parked/{type}/{id}/capsule,
/// or `berth parked replay --save`). Panics on a capsule it cannot read or
/// an event the processor has no handler for.
///
/// The handler gets the capsule's event as the guest received it and ports
/// that answer from the recording: each call gets the answer of the
/// recorded call of the same fn with the same request (HTTP: method, URL
/// and body; kv and config: the key, and a put's value; commands: the
/// command; log: level and text), the next recorded one in order if it is
/// one, else the first unused one. A call none is left for is answered with
/// a berth.HostError "…: not recorded in the capsule" (a config read: no
/// value) and listed in departures. The errors are those the module's ports
/// give for the recorded replies (berth::reply_error). A call during which
/// the recorded deadline passed does not return: the handler stops there
/// and the outcome is a timeout, as it was.
///
/// Native code cannot have its clock and random bytes replaced: the handler
/// reads the test machine's, and its deadline, as recorded, has passed. The
/// wasm replay, `berth parked replay`, gives the recorded clocks and random
/// bytes under the recorded limits; a trap (a Rust panic in a module) or a
/// memory limit reproduces only there. Nor can a native replay stop a
/// handler that never returns.
#[track_caller]
pub fn replay(processor: &Processor, path: impl AsRef<Path>) -> Replayed {
    let path = path.as_ref();
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("berth::testkit: replay {}: {}", path.display(), e));
    let c = Capsule::parse(&b).unwrap_or_else(|e| panic!("berth::testkit: replay {}: {}", path.display(), e));
    replay_capsule(processor, &c)
}

/// replay of a capsule already read.
#[track_caller]
pub fn replay_capsule(processor: &Processor, c: &Capsule) -> Replayed {
    let ev = c.event.clone();
    if processor.handler(&ev.handler).is_none() {
        panic!("berth::testkit: replay: processor {} has no handler {:?} (the capsule's event names it)", processor.name, ev.handler);
    }
    if !c.truncated.is_empty() {
        eprintln!("berth::testkit: replay: the capsule was truncated: {}", c.truncated.join("; "));
    }
    let key = ev.invocation_key.clone();
    let mut ports = Recording { key: key.clone(), recorded: &c.calls, used: vec![false; c.calls.len()], ..Recording::default() };
    let (res, err) = processor.dispatch_keeping(ev, &mut ports);
    let mut r = Replayed { key, err, outcome: outcome_of(&res), calls: ports.calls, departures: ports.departures, recorded: c.outcome.clone() };
    if let Some(i) = ports.deadline {
        let e = classes::TIMEOUT.error(format!("the attempt's deadline passed during call {}, {}, as recorded", i + 1, call_string(&r.calls[i])));
        r.outcome = Outcome { kind: "timeout".into(), classes: classes::TIMEOUT.chain().into_iter().map(String::from).collect(), message: e.message.clone() };
        r.err = Some(e);
    }
    r
}

fn outcome_of(res: &HandleResult) -> Outcome {
    match &res.failure {
        None => Outcome { kind: "success".into(), ..Outcome::default() },
        Some(f) => Outcome { kind: "failure".into(), classes: f.classes.clone(), message: f.message.clone() },
    }
}

/// A host call of a replay the recording has no answer for.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    /// The call's place in Replayed::calls, from 0.
    pub index: usize,
    /// The call as made, with its answer: an error "not recorded in the capsule".
    pub call: Call,
}

impl fmt::Display for Departure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call {}: {}: {}", self.index + 1, call_string(&self.call), NOT_RECORDED)
    }
}

fn call_string(c: &Call) -> String {
    match (&c.http, &c.command, &c.log) {
        (Some(h), _, _) => format!("{} {}", h.method, h.url),
        (_, Some(cmd), _) => format!("command {} to {} {}", cmd.command_type, cmd.aggregate_type, cmd.aggregate_id),
        (_, _, Some(l)) => format!("log {}", l.level),
        _ => format!("{} {}", c.fn_name, c.key),
    }
}

/// The outcome of a replay beside the recorded one. Its expect methods
/// panic with what happened when it is not what the test expects, and
/// return the Replayed for chaining.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The capsule's invocation key.
    pub key: String,
    /// The error the handler returned natively (a berth.Timeout error for a timeout).
    pub err: Option<Error>,
    /// How the native run ended: kind "success", "failure" or "timeout".
    pub outcome: Outcome,
    /// The host calls the handler made, in order, with the answers it got.
    pub calls: Vec<Call>,
    /// The calls the recording had no answer for.
    pub departures: Vec<Departure>,
    /// How the recorded attempt ended.
    pub recorded: Outcome,
}

fn kind(k: &str) -> &str {
    if k.is_empty() {
        "success"
    } else {
        k
    }
}

/// A failure's message, a panic's without what follows a blank line (a
/// stack, in a Go guest's).
fn failure_text(o: &Outcome) -> &str {
    if o.classes.first().map(String::as_str) == Some(classes::PANIC.name()) {
        return o.message.split("\n\n").next().unwrap_or_default();
    }
    &o.message
}

fn describe(o: &Outcome) -> String {
    match kind(&o.kind) {
        "success" => "succeeded".into(),
        "failure" if o.classes.is_empty() => format!("failed: {}", failure_text(o)),
        "failure" => format!("failed with class {}: {}", o.classes.join(" < "), failure_text(o)),
        k => format!("ended as {}: {}", k, o.message),
    }
}

impl Replayed {
    /// Whether the native run ended as the recorded attempt did: the same
    /// kind and, for a failure, the same class chain and message.
    pub fn reproduced(&self) -> bool {
        let (got, want) = (&self.outcome, &self.recorded);
        kind(&got.kind) == kind(&want.kind) && (kind(&got.kind) != "failure" || (got.classes == want.classes && failure_text(got) == failure_text(want)))
    }

    #[track_caller]
    fn fail(&self, what: String) -> ! {
        let mut msg = format!("{}: {}", self.key, what);
        for d in &self.departures {
            msg += &format!("\n\tdeparted: {}", d);
        }
        panic!("{}", msg)
    }

    /// The native run ended as the recorded attempt did.
    #[track_caller]
    pub fn expect_reproduced(&self) -> &Replayed {
        if !self.reproduced() {
            self.fail(format!("want the recorded outcome, it {}; but natively it {}", describe(&self.recorded), describe(&self.outcome)));
        }
        self
    }

    /// The handler succeeded natively: against a failure's capsule, a fix handles the event.
    #[track_caller]
    pub fn expect_success(&self) -> &Replayed {
        if kind(&self.outcome.kind) != "success" {
            self.fail(format!("want success, but natively it {}", describe(&self.outcome)));
        }
        self
    }

    /// The handler failed natively with the class or a class under it.
    #[track_caller]
    pub fn expect_error_class(&self, c: &ErrorClass) -> &Replayed {
        if !self.outcome.classes.iter().any(|n| n == c.name()) {
            self.fail(format!("want an error of class {}, but natively it {}", c.name(), describe(&self.outcome)));
        }
        self
    }

    /// Every call the handler made had an answer in the recording.
    #[track_caller]
    pub fn expect_no_departure(&self) -> &Replayed {
        if !self.departures.is_empty() {
            self.fail(format!("want no departure from the recording, but {} calls had no recorded answer", self.departures.len()));
        }
        self
    }
}

/// What a port raises for a call the recorded deadline passed in; with
/// resume_unwind, so that no panic hook prints it.
struct DeadlinePassed;

/// The ports of a replay: they answer from the recorded calls and keep the
/// calls as made.
#[derive(Default)]
struct Recording<'a> {
    key: String,
    recorded: &'a [Call],
    used: Vec<bool>,
    next: usize,
    calls: Vec<Call>,
    departures: Vec<Departure>,
    deadline: Option<usize>,
}

impl<'a> Recording<'a> {
    /// Keeps call and returns the recorded call that answers it (None: a
    /// departure, or a log line none matches).
    fn answer(&mut self, mut call: Call) -> Option<&'a Call> {
        if self.deadline.is_some() {
            return None; // the guest never ran again; a handler that caught the unwind gets nothing
        }
        let found = (self.next < self.recorded.len() && !self.used[self.next] && same_request(&self.recorded[self.next], &call))
            .then(|| self.next)
            .or_else(|| (0..self.recorded.len()).find(|&i| !self.used[i] && same_request(&self.recorded[i], &call)));
        let i = match found {
            None => {
                if call.fn_name != "log" {
                    call.reply = Some(Reply::of(reply::ERROR, NOT_RECORDED));
                    self.departures.push(Departure { index: self.calls.len(), call: call.clone() });
                }
                self.calls.push(call);
                return None;
            }
            Some(i) => i,
        };
        self.used[i] = true;
        self.next = i + 1;
        let recorded = self.recorded;
        let rec = &recorded[i];
        if rec.deadline {
            call.deadline = true;
            self.deadline = Some(self.calls.len());
            self.calls.push(call);
            resume_unwind(Box::new(DeadlinePassed));
        }
        call.reply = rec.reply.clone();
        if let (Some(h), Some(rh)) = (call.http.as_mut(), rec.http.as_ref()) {
            h.response = rh.response.clone();
        }
        self.calls.push(call);
        Some(rec)
    }

    /// The reply the guest got from the call.
    fn reply(&mut self, call: Call) -> crate::messages::Reply {
        match self.answer(call) {
            None => error_reply(NOT_RECORDED),
            Some(Call { reply: None, .. }) => error_reply("the capsule holds no answer to this call"),
            Some(Call { reply: Some(r), .. }) => r.to_reply(),
        }
    }
}

fn same_request(a: &Call, b: &Call) -> bool {
    a.fn_name == b.fn_name
        && match a.fn_name.as_str() {
            "http" => match (&a.http, &b.http) {
                (Some(x), Some(y)) => method(&x.method) == method(&y.method) && x.url == y.url && x.body == y.body,
                _ => false,
            },
            "kv_put" => a.key == b.key && a.value == b.value,
            "command" => a.command.is_some() && a.command == b.command,
            "log" => a.log.is_some() && a.log == b.log,
            _ => a.key == b.key,
        }
}

/// The method the host sends: GET when none is given.
fn method(m: &str) -> &str {
    if m.is_empty() {
        "GET"
    } else {
        m
    }
}

fn call(fn_name: &str) -> Call {
    Call { fn_name: fn_name.into(), ..Call::default() }
}

impl Ports for Recording<'_> {
    fn log(&mut self, level: Level, msg: &str, fields: &[(&str, Value)]) {
        let level = ["debug", "info", "warn", "error"][level as usize];
        eprintln!("{} {}: {}", level, self.key, msg);
        self.answer(Call { log: Some(LogCall { level: level.into(), text: crate::logline::encode(msg, fields) }), ..call("log") });
    }

    fn http(&mut self, req: &Request) -> Result<Response, Error> {
        let m = method(&req.method).to_string();
        let what = format!("{} {}", m, req.url);
        let c = Call { http: Some(HttpCall { method: m, url: req.url.clone(), headers: req.headers.clone(), body: req.body.clone(), response: None }), ..call("http") };
        let rec = self.answer(c);
        let r = match rec {
            None => error_reply(NOT_RECORDED),
            Some(rec) => rec.reply.as_ref().map_or_else(|| error_reply("the capsule holds no answer to this call"), Reply::to_reply),
        };
        if r.code != reply::OK {
            return Err(reply_error(&what, &r));
        }
        rec.and_then(|rec| rec.http.as_ref()).and_then(|h| h.response.clone()).ok_or_else(|| classes::HOST.error(format!("{}: the capsule holds no response to this call", what)))
    }

    fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let r = self.reply(Call { key: key.into(), ..call("kv_get") });
        match r.code {
            reply::OK => Ok(Some(r.body)),
            reply::NOT_FOUND => Ok(None),
            _ => Err(reply_error(&format!("kv get {}", key), &r)),
        }
    }

    fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), Error> {
        let r = self.reply(Call { key: key.into(), value: value.to_vec(), ..call("kv_put") });
        match r.code {
            reply::OK => Ok(()),
            _ => Err(reply_error(&format!("kv put {}", key), &r)),
        }
    }

    fn kv_delete(&mut self, key: &str) -> Result<(), Error> {
        let r = self.reply(Call { key: key.into(), ..call("kv_delete") });
        match r.code {
            reply::OK | reply::NOT_FOUND => Ok(()),
            _ => Err(reply_error(&format!("kv delete {}", key), &r)),
        }
    }

    fn send_command(&mut self, cmd: &Command) -> Result<(), Error> {
        let r = self.reply(Call { command: Some(cmd.clone()), ..call("command") });
        match r.code {
            reply::OK => Ok(()),
            _ => Err(reply_error(&format!("send command {}", cmd.command_type), &r)),
        }
    }

    fn config(&mut self, key: &str) -> Option<String> {
        let r = self.reply(Call { key: key.into(), ..call("config") });
        (r.code == reply::OK).then(|| String::from_utf8_lossy(&r.body).into_owned())
    }
}
