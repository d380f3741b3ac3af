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
/// that answer from the recording, matched as `berth parked replay`
/// matches: a call gets the answer of the next recorded call (the first not
/// yet used) if it asks the same (the same fn; HTTP method, URL and body;
/// kv or config key, and a put's value; the command), else of a later
/// unused one that does, listed in departures as out of order. A call none
/// is left for is answered with a berth.HostError "…: not recorded in the
/// capsule" (a config read: no value) and listed in departures. Log lines
/// are kept in calls, never matched. The errors are those the module's ports
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
        let e = classes::TIMEOUT.error(format!("the attempt's deadline passed during call #{}, {}, as recorded", i, call_string(&r.calls[i])));
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

/// A host call of a replay where the handler departed from the recording,
/// as the sandbox's replay lists them: a call the recording has no answer
/// for (answered "not recorded in the capsule"), or one answered by a
/// recorded call later than the next one (out of order).
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    /// The call's place in Replayed::calls, from 0.
    pub index: usize,
    /// The call as made, with the answer it got.
    pub call: Call,
    /// The recorded call at that place (the first unused one), None when none was left.
    pub recorded: Option<Call>,
    /// How the call departed and how it was answered.
    pub note: String,
}

impl fmt::Display for Departure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call #{} {}: {}", self.index, call_string(&self.call), self.note)
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
            msg += &format!("\n\tdeparted at {}", d);
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

    /// Every call the handler made was answered by the next recorded call.
    #[track_caller]
    pub fn expect_no_departure(&self) -> &Replayed {
        if !self.departures.is_empty() {
            self.fail(format!("want no departure from the recording, but {} calls departed", self.departures.len()));
        }
        self
    }
}

/// What a port raises for a call the recorded deadline passed in; with
/// resume_unwind, so that no panic hook prints it.
struct DeadlinePassed;

/// The ports of a replay: they answer from the recorded calls, matched as
/// the sandbox's replay matches them, and keep the calls as made.
#[derive(Default)]
struct Recording<'a> {
    key: String,
    recorded: &'a [Call],
    used: Vec<bool>,
    /// The recorded calls before it are used or log lines.
    low: usize,
    calls: Vec<Call>,
    departures: Vec<Departure>,
    deadline: Option<usize>,
}

impl<'a> Recording<'a> {
    /// Keeps call and returns the recorded call that answers it: the next
    /// unused one (log lines aside) if it asks the same, else a later one
    /// that does (a departure, out of order); None: none does (a
    /// departure, answered NOT_RECORDED), or a log line, never matched.
    fn answer(&mut self, mut call: Call) -> Option<&'a Call> {
        if self.deadline.is_some() {
            return None; // the guest never ran again; a handler that caught the unwind gets nothing
        }
        if call.fn_name == "log" {
            self.calls.push(call);
            return None;
        }
        let recorded = self.recorded;
        while self.low < recorded.len() && (self.used[self.low] || recorded[self.low].fn_name == "log") {
            self.low += 1;
        }
        let at = recorded.get(self.low).cloned();
        let index = self.calls.len();
        let j = match (self.low..recorded.len()).find(|&k| !self.used[k] && same_request(&recorded[k], &call)) {
            Some(j) => j,
            None => {
                call.reply = Some(Reply::of(reply::ERROR, NOT_RECORDED));
                let note = format!("not recorded: answered error {:?}", NOT_RECORDED);
                self.departures.push(Departure { index, call: call.clone(), recorded: at, note });
                self.calls.push(call);
                return None;
            }
        };
        self.used[j] = true;
        let rec = &recorded[j];
        call.reply = rec.reply.clone();
        if let (Some(h), Some(rh)) = (call.http.as_mut(), rec.http.as_ref()) {
            h.response = rh.response.clone();
        }
        if rec.deadline {
            call.deadline = true;
            self.deadline = Some(index);
            self.calls.push(call);
            resume_unwind(Box::new(DeadlinePassed));
        }
        if j != self.low {
            let note = format!("out of order: answered as recorded call #{}", j);
            self.departures.push(Departure { index, call: call.clone(), recorded: at, note });
        }
        self.calls.push(call);
        Some(rec)
    }

    /// The reply the guest got from the call.
    fn reply(&mut self, call: Call) -> crate::messages::Reply {
        answer_reply(self.answer(call))
    }
}

/// The reply a recorded call gave, or (None) the not-recorded answer.
fn answer_reply(rec: Option<&Call>) -> crate::messages::Reply {
    match rec {
        None => error_reply(NOT_RECORDED),
        Some(Call { reply: None, .. }) => error_reply("the capsule has no reply for this call"),
        Some(Call { reply: Some(r), .. }) => r.to_reply(),
    }
}

/// Whether the recorded call a asks what b asks, as the sandbox's replay
/// compares them: the same fn and, for HTTP, method, URL and body (headers
/// aside); for a command, the command; else key and value.
fn same_request(a: &Call, b: &Call) -> bool {
    a.fn_name == b.fn_name
        && match a.fn_name.as_str() {
            "http" => match (&a.http, &b.http) {
                (Some(x), Some(y)) => method(&x.method) == method(&y.method) && x.url == y.url && x.body == y.body,
                _ => false,
            },
            "command" => a.command.is_some() && a.command == b.command,
            _ => a.key == b.key && a.value == b.value,
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
        let r = answer_reply(rec);
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
