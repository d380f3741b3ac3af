//! The SDK's own pieces against what the Go side writes: invocation keys
//! (ABI.md's table), rejection payloads (as the Go SDK's EncodeRejection and
//! the host write them), JSON, and the test kit's delivery semantics and
//! log.

use berth::json::Value;
use berth::testkit::{CommandMatch, Event, Spec};
use berth::{invocation_key, Command, Processor, Rejection};

#[test]
fn invocation_keys_are_abi_mds() {
    for (typ, id, want) in [
        ("Thing", "dup-1", "P.h:Thing/dup-1@1:0"),
        ("Other", "dup-1", "P.h:Other/dup-1@1:0"),
        ("Order", "a:b@2", "P.h:Order/a%3Ab%402@1:0"),
        ("Order", "a/b", "P.h:Order/a%2Fb@1:0"),
        ("Order/a", "b", "P.h:Order%2Fa/b@1:0"),
        ("Order", "50% off", "P.h:Order/50%25%20off@1:0"),
        ("Order", "größe", "P.h:Order/gr%C3%B6%C3%9Fe@1:0"),
    ] {
        assert_eq!(invocation_key("P", "h", typ, id, 1, 0), want);
    }
    assert_eq!(invocation_key("ShipmentNotifier", "onOrderShipped", "Order", "o-1", 3, 0), "ShipmentNotifier.onOrderShipped:Order/o-1@3:0");
}

/// Written by the Go SDK's berth.EncodeRejection for the same rejections.
const GO_REJECTION: &str = r#"{"command":{"aggregateType":"Stock","aggregateId":"sku-9","type":"ReserveStock","payload":{"order":"o-1","quantity":2}},"reason":"out of stock","status":409,"eventType":"OrderPlaced","requestId":"OrderSaga.onOrderPlaced:Order/o-1@1:0/0"}"#;
const GO_REJECTION_NO_PAYLOAD: &str = r#"{"command":{"aggregateType":"Stock","aggregateId":"sku-9","type":"ReserveStock","payload":null},"reason":"größe \"x\"","status":422,"eventType":"","requestId":""}"#;

#[test]
fn rejections_are_the_go_sdks() {
    let r = Rejection {
        command: Command::new("Stock", "sku-9", "ReserveStock", r#"{"order":"o-1","quantity":2}"#),
        reason: "out of stock".into(),
        status: 409,
        event_type: "OrderPlaced".into(),
        request_id: "OrderSaga.onOrderPlaced:Order/o-1@1:0/0".into(),
    };
    assert_eq!(String::from_utf8(r.encode()).unwrap(), GO_REJECTION);
    assert_eq!(Rejection::decode(GO_REJECTION.as_bytes()).unwrap(), r);
    let bare = Rejection { command: Command::new("Stock", "sku-9", "ReserveStock", ""), reason: "größe \"x\"".into(), status: 422, ..Rejection::default() };
    assert_eq!(String::from_utf8(bare.encode()).unwrap(), GO_REJECTION_NO_PAYLOAD);
    assert_eq!(Rejection::decode(GO_REJECTION_NO_PAYLOAD.as_bytes()).unwrap(), bare);
    let bad = Rejection::decode(b"{").unwrap_err();
    assert!(bad.is(&berth::classes::HOST), "{:?}", bad);
}

#[test]
fn json_reads_and_writes() {
    let v = Value::parse(br#" {"a": [1, -2.5, true, null, "x\"\u00e9\ud83d\ude00"], "b": {}} "#).unwrap();
    assert_eq!(v.get("a").and_then(|a| a.as_array()).map(|a| a.len()), Some(5));
    assert_eq!(v.to_string(), r#"{"a":[1,-2.5,true,null,"x\"é😀"],"b":{}}"#);
    for bad in ["", "{", "[1,]", "{\"a\" 1}", "01x", "\"\u{1}\"", "tru", "1 2", "+1", ".5"] {
        assert!(Value::parse(bad.as_bytes()).is_err(), "{:?} parsed", bad);
    }
    assert_eq!(berth::json::quote("a\nb\u{1}"), r#""a\nb\u0001""#);
}

/// A processor of each kind that writes, sends and fails on demand.
fn recorder(kind: berth::Kind) -> Processor {
    Processor::new("Rec", kind).on("h", "E", |c| {
        let fail = c.event.json()?.get("fail") == Some(&Value::Bool(true));
        match c.kv_put("k", b"v") {
            Err(e) if !e.is(&berth::classes::UNSUPPORTED) => return Err(e),
            _ => {}
        }
        let _ = c.send(&Command::new("A", "1", "Do", "{}"));
        if fail {
            return Err(berth::Error::msg("asked to fail"));
        }
        Ok(())
    })
}

#[test]
fn a_failed_delivery_keeps_nothing() {
    let mut p = Spec::new(recorder(berth::Kind::Projection));
    p.when_event(Event::new("E").payload(r#"{"fail":true}"#)).expect_error().expect_no_state("k");
    p.when_event(Event::new("E").payload("{}")).expect_no_error().expect_state("k", "v");

    let mut s = Spec::new(recorder(berth::Kind::Saga));
    s.when_event(Event::new("E").payload(r#"{"fail":true}"#)).expect_error().expect_no_command();
    assert!(s.commands.sent().is_empty());
    s.when_event(Event::new("E").payload("{}")).expect_no_error().expect_command(&CommandMatch::of_type("Do"));
}

#[test]
fn ports_a_kind_is_not_offered_are_unsupported() {
    let mut r = Spec::new(Processor::reactor("R").on("h", "E", |c| {
        c.kv_get("k")?;
        Ok(())
    }));
    r.when_event(Event::new("E")).expect_error_class(&berth::classes::UNSUPPORTED);
}

#[test]
fn the_test_kits_log_keeps_fields_as_fields() {
    let mut r = Spec::new(Processor::reactor("R").on("h", "E", |c| {
        c.info("plain");
        c.warn_with("slow", &[("buyer", "b-1".into()), ("attempt", c.attempt.into()), ("final", false.into())]);
        Ok(())
    }));
    r.when_event(Event::new("E")).expect_no_error();

    let key = "R.h:/@1:0"; // the event names no aggregate
    assert_eq!(r.log.len(), 2, "{:?}", r.log);
    assert_eq!((r.log[0].level, r.log[0].msg.as_str(), r.log[0].fields.len()), ("info", "plain", 0));
    let l = &r.log[1];
    assert_eq!((l.level, l.key.as_str(), l.msg.as_str()), ("warn", key, "slow"));
    assert_eq!(l.fields, vec![("buyer".to_string(), Value::from("b-1")), ("attempt".to_string(), Value::from(1u32)), ("final".to_string(), Value::Bool(false))]);
    assert_eq!(l.field("buyer").and_then(Value::as_str), Some("b-1"));
    assert_eq!(l.field("missing"), None);
}

#[test]
fn a_panic_natively_is_berth_panic() {
    let mut r = Spec::new(Processor::reactor("R").on("h", "E", |_| panic!("on purpose")));
    r.when_event(Event::new("E")).expect_error_class(&berth::classes::PANIC).expect_error_message("on purpose");
}

#[test]
#[should_panic(expected = "has unknown parent")]
fn a_processor_the_host_would_refuse_fails_the_test() {
    use berth::messages::ClassDesc;
    berth::validate::classes(&[ClassDesc { name: "A".into(), parent: "B".into() }]).map_err(|e| panic!("{}", e)).ok();
}

#[test]
#[should_panic(expected = "the host would refuse processor 9bad")]
fn a_bad_name_fails_the_spec() {
    Spec::new(Processor::reactor("9bad").on("h", "E", |_| Ok(())));
}
