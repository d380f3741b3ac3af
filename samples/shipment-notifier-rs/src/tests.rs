//! The spec's scenarios for the ShipmentNotifier, natively with berth's test
//! kit: the same as the Go sample's (samples/shipment-notifier/main_test.go).

use std::time::Duration;

use berth::classes;
use berth::testkit::{Event, Spec, Verdict};
use berth::json::Value;
use berth::{Error, Response};

use super::{processor, NOTIFICATION, UNKNOWN_BUYER};

const NOTIFICATIONS: &str = "http://notifications.test";
const BUYER_URL: &str = "http://notifications.test/buyers/buyer-42/notifications";

fn reactor_spec() -> Spec {
    let mut spec = Spec::new(processor());
    spec.set_config("notifications-url", NOTIFICATIONS);
    spec
}

/// The sixth commit of the order: it shipped.
fn shipped() -> Event {
    Event::new("OrderShipped").aggregate("Order", "order-7").version(6).owner("buyer-42").payload(r#"{"carrier":"DHL"}"#)
}

#[test]
fn a_failed_notification_is_asked_for_again_with_the_same_key() {
    let mut spec = reactor_spec();
    spec.http.fail(Error::msg("the mail service is down"));

    spec.when_event(shipped()).expect_error().expect_error_message("the mail service is down");
    let then = spec.when_event(shipped());
    then.expect_no_error();
    assert_eq!(then.attempt, 2);

    let sent = spec.http.sent();
    assert_eq!(sent.len(), 1, "sent {:?}", sent);
    assert_eq!(sent[0].header_value("Idempotency-Key"), Some("ShipmentNotifier.onOrderShipped:Order/order-7@6:0"));
    let all = spec.http.requests();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].header_value("Idempotency-Key"), all[1].header_value("Idempotency-Key"));
}

#[test]
fn an_unknown_buyer_is_unrecoverable() {
    let mut spec = reactor_spec();
    spec.http.respond_to(BUYER_URL, Response::new(404, r#"{"error":"no such buyer"}"#));

    let then = spec.when_event(shipped());
    then.expect_request("POST", BUYER_URL).expect_error_class(&UNKNOWN_BUYER).expect_error_class(&NOTIFICATION);
    let d = spec.classify(&then).expect("a failure");
    assert_eq!(d.verdict, Verdict::Unrecoverable, "{:?}", d);
    assert_eq!(d.chain, vec!["UnknownBuyer", "Notification"]);
}

#[test]
fn a_busy_service_is_backpressure() {
    let mut spec = reactor_spec();
    spec.http.respond(Response::new(429, "").with_header("Retry-After", "2"));

    spec.when_event(shipped()).expect_error_class(&NOTIFICATION).expect_backpressure(Duration::from_secs(2));
    spec.when_event(shipped()).expect_no_error();
}

#[test]
fn a_refused_connection_is_systemic() {
    let mut spec = reactor_spec();
    spec.http.fail_refused();

    let then = spec.when_event(shipped());
    then.expect_error_class(&classes::CONNECTION_REFUSED).expect_systemic();
    assert_eq!(spec.classify(&then).map(|d| d.verdict), Some(Verdict::Systemic));
}

#[test]
fn an_order_without_owner_notifies_nobody() {
    let mut spec = reactor_spec();
    let mut ev = shipped();
    ev.event.owner_id.clear();

    spec.when_event(ev).expect_no_error().expect_no_request();
}

#[test]
fn the_notification_names_the_order() {
    let mut spec = reactor_spec();

    let then = spec.when_event(shipped());
    then.expect_no_error().expect_request("POST", BUYER_URL);
    assert_eq!(String::from_utf8_lossy(&then.requests[0].body), r#"{"order":"order-7","event":"shipped"}"#);
    assert_eq!(spec.log.len(), 1);
    let l = &spec.log[0];
    assert_eq!((l.level, l.key.as_str(), l.msg.as_str()), ("info", "ShipmentNotifier.onOrderShipped:Order/order-7@6:0", "buyer notified"));
    assert_eq!(l.fields, vec![("buyer".to_string(), Value::from("buyer-42")), ("order".to_string(), Value::from("order-7"))]);
}

#[test]
fn without_a_notifications_url_it_fails() {
    let mut spec = Spec::new(processor());

    spec.when_event(shipped()).expect_error_class(&NOTIFICATION).expect_no_request();
}
