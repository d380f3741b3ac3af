//! The Rust codec against the golden vectors the Go codec wrote
//! (wasm/abi/testdata/vectors.txt, pinned by wasm/abi's TestGoldenVectors):
//! the same values encode to the same bytes, and every vector decodes back
//! to its value; every strict prefix and a trailing byte are refused. And
//! the log line with fields against the lines abi.EncodeLogLine wrote
//! (wasm/abi/testdata/loglines.txt, pinned by TestGoldenLogLines).

use std::collections::BTreeMap;

use berth::codec::{Decoder, Encoder};
use berth::json::Value;
use berth::messages::*;

const SECOND: i64 = 1_000_000_000;

fn vectors() -> BTreeMap<String, Vec<u8>> {
    read_hex(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wasm/abi/testdata/vectors.txt"))
}

/// The named byte strings of a testdata file of "<name>: <hex>" lines.
fn read_hex(path: &str) -> BTreeMap<String, Vec<u8>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {}", path, e));
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (name, hex) = line.split_once(": ").unwrap_or_else(|| panic!("bad line {:?}", line));
        let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect();
        out.insert(name.to_string(), bytes);
    }
    out
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// A message's encoding and a check that the bytes decode back to it.
struct Golden {
    enc: Vec<u8>,
    decodes: Box<dyn Fn(&[u8]) -> bool>,
}

fn golden<T: PartialEq + 'static>(v: T, enc: fn(&T) -> Vec<u8>, dec: fn(&[u8]) -> Result<T, berth::codec::DecodeError>) -> Golden {
    let e = enc(&v);
    Golden { enc: e, decodes: Box::new(move |b| dec(b).map_or(false, |got| got == v)) }
}

fn values() -> BTreeMap<String, Golden> {
    let mut m = BTreeMap::new();
    for u in [0u64, 1, 127, 128, 300, 16384, (1 << 32) - 1, u64::MAX] {
        let mut e = Encoder::default();
        e.uint(u);
        m.insert(format!("uint {}", u), Golden { enc: e.finish(), decodes: Box::new(move |b| { let mut d = Decoder::new(b); d.uint() == Ok(u) && d.done().is_ok() }) });
    }
    for i in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
        let mut e = Encoder::default();
        e.int(i);
        m.insert(format!("int {}", i), Golden { enc: e.finish(), decodes: Box::new(move |b| { let mut d = Decoder::new(b); d.int() == Ok(i) && d.done().is_ok() }) });
    }
    let ev = Event {
        handler: "onOrderShipped".into(),
        invocation_key: "ShipmentNotifier.onOrderShipped:Order/o-1@6:0".into(),
        attempt: 3,
        event_type: "OrderShipped".into(),
        aggregate_type: "Order".into(),
        aggregate_id: "o-1".into(),
        version: 6,
        index: 2,
        owner_id: "buyer-7".into(),
        position: 42,
        time_unix_nano: -5,
        deadline_unix_nano: 1 << 62,
        payload: br#"{"a":1}"#.to_vec(),
    };
    m.insert("event".into(), golden(ev, Event::encode, Event::decode));
    m.insert("event empty".into(), golden(Event::default(), Event::encode, Event::decode));
    m.insert("result ok".into(), golden(HandleResult { failure: None }, HandleResult::encode, HandleResult::decode));
    let failed = Failure { kind: FailureKind::Backpressure, classes: s(&["UnknownBuyer", "Notification"]), message: "größe busy".into(), code: "E42".into(), retry_after_millis: 2000 };
    m.insert("result failed".into(), golden(HandleResult { failure: Some(failed) }, HandleResult::encode, HandleResult::decode));
    let systemic = Failure { kind: FailureKind::Systemic, message: "down".into(), ..Failure::default() };
    m.insert("result systemic unclassified".into(), golden(HandleResult { failure: Some(systemic) }, HandleResult::encode, HandleResult::decode));
    let desc = Description {
        abi_version: 1,
        processor: "ShipmentNotifier".into(),
        kind: 2,
        start: 1,
        retry: RetrySettings { max_attempts: 5, initial_backoff_nanos: SECOND, max_backoff_nanos: 30 * SECOND, timeout_nanos: 10 * SECOND, unrecoverable: s(&["UnknownBuyer"]), recoverable: vec![] },
        handlers: vec![
            HandlerDesc { name: "onOrderShipped".into(), event_types: s(&["OrderShipped", "OrderReturned"]), retry: RetrySettings::default() },
            HandlerDesc {
                name: "onRejected".into(),
                event_types: s(&["berth.CommandRejected"]),
                retry: RetrySettings { timeout_nanos: 2 * SECOND, recoverable: s(&["Notification"]), ..RetrySettings::default() },
            },
        ],
        classes: vec![ClassDesc { name: "Notification".into(), parent: "".into() }, ClassDesc { name: "UnknownBuyer".into(), parent: "Notification".into() }],
    };
    m.insert("description".into(), golden(desc, Description::encode, Description::decode));
    m.insert("reply".into(), golden(Reply { code: reply::BACKPRESSURE, message: "busy".into(), retry_after_millis: 1500, body: b"x".to_vec() }, Reply::encode, Reply::decode));
    m.insert("reply empty".into(), golden(Reply::default(), Reply::encode, Reply::decode));
    let req = HttpRequest {
        method: "POST".into(),
        url: "http://x/y".into(),
        headers: vec![("Idempotency-Key".into(), "P.h:A/1@1:0".into()), ("Content-Type".into(), "application/json".into())],
        body: b"{}".to_vec(),
    };
    m.insert("http request".into(), golden(req, HttpRequest::encode, HttpRequest::decode));
    let resp = HttpResponse { status: 429, headers: vec![("Retry-After".into(), "2".into())], body: b"slow".to_vec() };
    m.insert("http response".into(), golden(resp, HttpResponse::encode, HttpResponse::decode));
    m.insert("kv put".into(), golden(KvPut { key: "order/o-1".into(), value: br#"{"total":30}"#.to_vec() }, KvPut::encode, KvPut::decode));
    let cmd = CommandMsg { aggregate_type: "Stock".into(), aggregate_id: "s-1".into(), command_type: "Reserve".into(), payload: br#"{"n":2}"#.to_vec() };
    m.insert("command".into(), golden(cmd, CommandMsg::encode, CommandMsg::decode));
    m
}

#[test]
fn the_rust_codec_writes_the_go_codecs_bytes() {
    let want = vectors();
    let got = values();
    let names = |m: Vec<&String>| m.into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(names(got.keys().collect()), names(want.keys().collect()), "the vectors and the Rust values name different messages");
    for (name, g) in &got {
        assert_eq!(&g.enc, &want[name], "{}: the Rust encoding differs from the Go codec's", name);
        assert!((g.decodes)(&want[name]), "{}: the Go codec's bytes do not decode to the value", name);
        for i in 0..want[name].len() {
            assert!(!(g.decodes)(&want[name][..i]), "{}: a prefix of {} bytes decoded", name, i);
        }
        let mut trailing = want[name].clone();
        trailing.push(0);
        assert!(!(g.decodes)(&trailing), "{}: a trailing byte was accepted", name);
    }
}

/// The messages and fields of TestGoldenLogLines's lines, by name.
fn log_lines() -> BTreeMap<String, Vec<u8>> {
    let n = Value::Number;
    let lines: Vec<(&str, &str, Vec<(&str, Value)>)> = vec![
        ("no fields", "buyer notified", vec![]),
        (
            "fields",
            "buyer notified",
            vec![("buyer", "buyer-7".into()), ("order", "order-7".into()), ("attempt", 3u32.into()), ("final", true.into()), ("ratio", 1.5.into()), ("none", Value::Null)],
        ),
        ("escapes", "say \"hi\" <b>&</b>\n\t\u{fc}\\", vec![("k\u{2028}\u{2029}", "\u{8}\u{c}\u{1}\u{1f}\u{7f}\u{20ac}".into()), ("tab\there", "x".into())]),
        (
            "numbers",
            "n",
            vec![
                ("big", n(1e21)),
                ("small", n(1e-7)),
                ("edge", n(1e-6)),
                ("neg", n(-2.5e-9)),
                ("zero", 0i64.into()),
                ("negzero", n(-0.0)),
                ("huge", n(123456789012345680000.0)),
                ("nan", n(f64::NAN)),
                ("inf", n(f64::INFINITY)),
                ("-inf", n(f64::NEG_INFINITY)),
            ],
        ),
        (
            "nested",
            "n",
            vec![
                ("list", Value::Array(vec![1i64.into(), "a".into(), Value::Null, false.into()])),
                ("obj", Value::object(vec![("a", 1i64.into()), ("b", "x<y".into())])),
            ],
        ),
    ];
    lines.into_iter().map(|(name, msg, fields)| (name.to_string(), berth::logline::encode(msg, &fields))).collect()
}

#[test]
fn the_log_line_with_fields_is_the_go_sdks() {
    let want = read_hex(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wasm/abi/testdata/loglines.txt"));
    let got = log_lines();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the lines and the Rust values name different lines");
    for (name, line) in &got {
        assert_eq!(String::from_utf8_lossy(line), String::from_utf8_lossy(&want[name]), "{}: the Rust line differs from abi.EncodeLogLine's", name);
    }
}
