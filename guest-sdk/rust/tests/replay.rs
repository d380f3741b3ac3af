//! Replaying attempt capsules natively: the capsules the Go kit's tests
//! replay (guest-sdk/berthtest/testdata, written by hand to the format and
//! checked against abi.EncodeCapsule there), with the same scenarios: the
//! module that parked reproduces its failure, a fix that skips unknown
//! buyers succeeds with the one recorded call, and a request the recording
//! has no answer for is a departure.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use berth::testkit::capsule::Capsule;
use berth::testkit::{replay, replay_capsule};
use berth::{classes, Context, Error, ErrorClass, Processor, Request, Retry};

static NOTIFICATION: ErrorClass = ErrorClass::root("Notification");
static UNKNOWN_BUYER: ErrorClass = ErrorClass::under("UnknownBuyer", &NOTIFICATION);

fn testdata(name: &str) -> String {
    format!("{}/../berthtest/testdata/{}", env!("CARGO_MANIFEST_DIR"), name)
}

#[derive(Clone, Copy, PartialEq)]
enum Version {
    ParksUnknownBuyers,
    SkipsUnknownBuyers,
    LooksBuyersUp,
}

/// The spec's ShipmentNotifier (samples/shipment-notifier-rs), in versions.
fn notifier(version: Version) -> Processor {
    Processor::reactor("ShipmentNotifier")
        .retry(Retry::new().max_attempts(5).timeout(Duration::from_secs(10)).unrecoverable(&[&UNKNOWN_BUYER]))
        .on("onOrderShipped", "OrderShipped", move |c: &mut Context| -> Result<(), Error> {
            let base = c.config("notifications-url").ok_or_else(|| NOTIFICATION.error("no notifications-url"))?;
            let buyer = format!("{}/buyers/{}", base, c.event.owner_id);
            if version == Version::LooksBuyersUp {
                c.http(&Request::get(&buyer))?;
            }
            let key = c.invocation_key.clone();
            let body = format!(r#"{{"order":"{}","event":"shipped"}}"#, c.event.aggregate_id);
            let resp = c.http(&Request::post(&format!("{}/notifications", buyer)).header("Content-Type", "application/json").header("Idempotency-Key", &key).body(body))?;
            match resp.status {
                404 if version == Version::SkipsUnknownBuyers => {
                    c.warn("unknown buyer, not notified");
                    Ok(())
                }
                404 => Err(UNKNOWN_BUYER.error(format!("the notification service does not know buyer {}", c.event.owner_id))),
                s if s >= 300 => Err(NOTIFICATION.error(format!("the notification service answered {}", s))),
                _ => Ok(()),
            }
        })
}

#[test]
fn a_recorded_failure_is_reproduced() {
    let r = replay(&notifier(Version::ParksUnknownBuyers), testdata("unknown-buyer.capsule.json"));
    r.expect_reproduced().expect_error_class(&UNKNOWN_BUYER).expect_no_departure();
    assert_eq!(r.calls.len(), 2, "{:?}", r.calls);
    assert_eq!(r.calls[0].fn_name, "config");
    let post = r.calls[1].http.as_ref().expect("the POST");
    assert_eq!(post.response.as_ref().map(|res| res.status), Some(404));
    assert_eq!(post.headers.iter().find(|(n, _)| n == "Idempotency-Key").map(|(_, v)| v.as_str()), Some("ShipmentNotifier.onOrderShipped:Order/o-7@6:0"));
    assert_eq!(r.recorded.message, "the notification service does not know buyer buyer-404");
}

#[test]
fn a_fix_that_skips_unknown_buyers_succeeds_with_the_recorded_call() {
    let r = replay(&notifier(Version::SkipsUnknownBuyers), testdata("unknown-buyer.capsule.json"));
    r.expect_success().expect_no_departure();
    let http: Vec<_> = r.calls.iter().filter(|c| c.fn_name == "http").collect();
    assert_eq!(http.len(), 1);
    assert_eq!(r.calls.last().and_then(|c| c.log.as_ref()).map(|l| l.level.as_str()), Some("warn"));
    assert!(!r.reproduced());
}

#[test]
fn a_request_the_recording_has_no_answer_for_is_a_departure() {
    let r = replay(&notifier(Version::LooksBuyersUp), testdata("unknown-buyer.capsule.json"));
    assert_eq!(r.departures.len(), 1, "{:?}", r.departures);
    let d = &r.departures[0];
    assert_eq!(d.index, 1);
    assert_eq!(d.to_string(), r#"call #1 GET http://notifications.test/buyers/buyer-404: not recorded: answered error "not recorded in the capsule""#);
    assert_eq!(d.recorded.as_ref().and_then(|c| c.http.as_ref()).map(|h| h.method.as_str()), Some("POST"));
    let err = r.err.as_ref().expect("the handler's error");
    assert!(err.is(&classes::HOST) && err.message.ends_with(": not recorded in the capsule"), "{:?}", err);
    let msg = panic_message(|| {
        r.expect_reproduced();
    });
    assert!(msg.contains("want the recorded outcome, it failed with class UnknownBuyer < Notification") && msg.contains("departed at call #1 GET"), "{}", msg);
}

#[test]
fn a_deadline_stops_the_handler_in_the_call() {
    let r = replay(&notifier(Version::ParksUnknownBuyers), testdata("deadline.capsule.json"));
    r.expect_reproduced().expect_error_class(&classes::TIMEOUT);
    assert_eq!(r.calls.len(), 2);
    assert!(r.calls[1].deadline && r.calls[1].reply.is_none());
}

/// The capsule files read into the values the Go kit's test builds.
#[test]
fn the_shared_capsules_read_as_the_go_kit_builds_them() {
    let c = Capsule::parse(&std::fs::read(testdata("unknown-buyer.capsule.json")).unwrap()).unwrap();
    assert_eq!(c.event.invocation_key, "ShipmentNotifier.onOrderShipped:Order/o-7@6:0");
    assert_eq!((c.event.attempt, c.event.version, c.event.position), (1, 6, 41));
    assert_eq!(c.event.time_unix_nano, 1796479390000000000);
    assert_eq!(c.event.deadline_unix_nano, 1796479400000000000);
    assert_eq!(c.event.payload, br#"{"carrier":"DHL"}"#.to_vec());
    assert_eq!(c.timeout_millis, 10000);
    assert_eq!(c.calls[0].reply.as_ref().map(|r| r.body.clone()), Some(b"http://notifications.test".to_vec()));
    assert_eq!(c.outcome.classes, vec!["UnknownBuyer", "Notification"]);
}

#[test]
fn every_port_answers_from_the_recording() {
    let capsule = br#"{"format": "berth-capsule/1", "event": {"handler": "h", "invocation_key": "P.h:A/1@1:0", "attempt": 1, "type": "T"},
      "calls": [
        {"fn": "http", "http": {"method": "GET", "url": "http://s/a", "response": {"status": 500}}, "reply": {"code": "ok"}},
        {"fn": "http", "http": {"method": "GET", "url": "http://s/b"}, "reply": {"code": "refused", "message": "connection refused"}},
        {"fn": "http", "http": {"method": "GET", "url": "http://s/a", "response": {"status": 200, "body": "base64:aGk="}}, "reply": {"code": "ok"}},
        {"fn": "kv_get", "key": "k", "reply": {"code": "ok", "body": "v0"}},
        {"fn": "kv_get", "key": "gone", "reply": {"code": "not_found"}},
        {"fn": "kv_put", "key": "k", "value": "v1", "reply": {"code": "backpressure", "message": "busy", "retry_after_ms": 1500}},
        {"fn": "kv_delete", "key": "k", "reply": {"code": "not_found"}},
        {"fn": "command", "command": {"aggregate_type": "S", "aggregate_id": "9", "type": "Reserve"}, "reply": {"code": "unsupported", "message": "no"}},
        {"fn": "config", "key": "url", "reply": {"code": "ok", "body": "http://s"}}
      ],
      "outcome": {"kind": "failure"}}"#;
    let c = Capsule::parse(capsule).unwrap();
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let s = seen.clone();
    let p = Processor::projection("P").on("h", "T", move |c: &mut Context| -> Result<(), Error> {
        let note = |x: String| s.borrow_mut().push(x);
        let e = c.http(&Request::new("", "http://s/b")).unwrap_err();
        note(format!("b: {} systemic={:?}", e.message, e.kind));
        for _ in 0..3 {
            match c.http(&Request::get("http://s/a")) {
                Ok(r) => note(format!("a: {} {}", r.status, String::from_utf8_lossy(&r.body))),
                Err(e) => note(format!("a: {}", e.message)),
            }
        }
        note(format!("get k: {:?}", c.kv_get("k").map(|v| v.map(|v| String::from_utf8(v).unwrap()))));
        note(format!("get gone: {:?}", c.kv_get("gone").map(|v| v.is_some())));
        let e = c.kv_put("k", b"v1").unwrap_err();
        note(format!("put: {} {:?}", e.message, e.retry_after));
        note(format!("delete: {:?}", c.kv_delete("k").is_ok()));
        note(format!("send: {}", c.send(&berth::Command::new("S", "9", "Reserve", "")).unwrap_err().message));
        note(format!("url: {:?} never-read: {:?}", c.config("url"), c.config("never-read")));
        Ok(())
    });
    let r = replay_capsule(&p, &c);
    let want = vec![
        "b: GET http://s/b: connection refused systemic=Systemic",
        "a: 500 ", // b was out of order: the a's are next
        "a: 200 hi",
        "a: GET http://s/a: not recorded in the capsule",
        "get k: Ok(Some(\"v0\"))",
        "get gone: Ok(false)",
        "put: kv put k: busy Some(1.5s)",
        "delete: true",
        "send: send command Reserve: no",
        "url: Some(\"http://s\") never-read: None",
    ];
    assert_eq!(*seen.borrow(), want);
    let departed: Vec<String> = r.departures.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        departed,
        vec![
            "call #0 GET http://s/b: out of order: answered as recorded call #1",
            r#"call #3 GET http://s/a: not recorded: answered error "not recorded in the capsule""#,
            r#"call #10 config never-read: not recorded: answered error "not recorded in the capsule""#,
        ]
    );
    r.expect_success();
}

#[test]
fn mistakes_in_the_test_panic() {
    let msg = panic_message(|| {
        replay(&notifier(Version::ParksUnknownBuyers), testdata("missing.capsule.json"));
    });
    assert!(msg.contains("missing.capsule.json"), "{}", msg);
    let other = Processor::reactor("P").on("h", "T", |_: &mut Context| Ok(()));
    let msg = panic_message(|| {
        replay(&other, testdata("unknown-buyer.capsule.json"));
    });
    assert!(msg.contains(r#"processor P has no handler "onOrderShipped""#), "{}", msg);
}

fn panic_message(f: impl FnOnce()) -> String {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("a panic");
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

