//! The OrderSaga in Rust (the Go one is samples/order-saga): when an order is
//! placed it reserves the order's stock, and when the stock service rejects
//! the reservation it compensates by cancelling the order.
//!
//! A rejection as a conflict (409, e.g. out of stock) reaches
//! on_reservation_rejected in the same attempt, which sends CancelOrder. A 422
//! means the service could not process the command the saga built: the
//! saga's bug, so the compensation fails with InvalidReservation and the
//! order is retried, then parked. A placed order without an item or a
//! positive quantity can never be reserved: InvalidOrder parks it at once.
//!
//! Build: cargo build --release --target wasm32-wasip1 (wasm32-wasi before Rust 1.78)
//! Configure: [commands.Stock] url = "http://…" and [commands.Order] url = "http://…".

#![forbid(unsafe_code)]

use std::time::Duration;

use berth::json::Value;
use berth::{Command, Context, Error, ErrorClass, Processor, Rejection, Retry};

/// A placed order the saga cannot reserve stock for: no retry helps.
pub static INVALID_ORDER: ErrorClass = ErrorClass::root("InvalidOrder");
/// A reservation the stock service could not process (422).
pub static INVALID_RESERVATION: ErrorClass = ErrorClass::root("InvalidReservation");

/// The OrderSaga: three attempts from 500ms apart up to 5s, five seconds
/// each, and InvalidOrder parks at once.
pub fn processor() -> Processor {
    Processor::saga("OrderSaga")
        .retry(
            Retry::new()
                .max_attempts(3)
                .initial_backoff(Duration::from_millis(500))
                .max_backoff(Duration::from_secs(5))
                .timeout(Duration::from_secs(5))
                .unrecoverable(&[&INVALID_ORDER]),
        )
        .errors(&[&INVALID_RESERVATION])
        .on("onOrderPlaced", "OrderPlaced", on_order_placed)
        .on_rejected("onReservationRejected", on_reservation_rejected)
}

berth::export!(processor);

fn on_order_placed(c: &mut Context) -> Result<(), Error> {
    let order = c.event.aggregate_id.clone();
    let ev = Value::parse(&c.event.payload).map_err(|e| INVALID_ORDER.error(format!("order {}: {}", order, e)))?;
    let item = ev.get("item").and_then(Value::as_str).unwrap_or("").to_string();
    let quantity = ev.get("quantity").and_then(Value::as_i64).unwrap_or(0);
    if item.is_empty() || quantity <= 0 {
        return Err(INVALID_ORDER.error(format!("order {}: an item and a positive quantity are required", order)));
    }
    c.info_with("reserving stock", &[("order", (&order).into()), ("item", (&item).into()), ("quantity", quantity.into())]);
    let payload = Value::object(vec![("order", order.as_str().into()), ("quantity", quantity.into())]);
    c.send(&Command::new("Stock", &item, "ReserveStock", payload.to_vec()))
}

fn on_reservation_rejected(c: &mut Context, r: Rejection) -> Result<(), Error> {
    if r.command.command_type != "ReserveStock" {
        c.warn_with("a command was rejected; nothing to compensate", &[("command", (&r.command.command_type).into()), ("reason", (&r.reason).into())]);
        return Ok(());
    }
    if r.status == 422 {
        return Err(INVALID_RESERVATION.error(format!("the stock service could not process {}: {}", r.request_id, r.reason)));
    }
    let order = Value::parse(&r.command.payload).ok().and_then(|v| v.get("order").and_then(Value::as_str).map(String::from)).unwrap_or_default();
    if order.is_empty() {
        return Err(INVALID_RESERVATION.error(format!("the rejected reservation {} names no order", r.request_id)));
    }
    c.info_with("cancelling order", &[("order", (&order).into()), ("reason", (&r.reason).into())]);
    let payload = Value::object(vec![("reason", format!("stock not reserved: {}", r.reason).into())]);
    c.send(&Command::new("Order", &order, "CancelOrder", payload.to_vec()))
}

#[cfg(test)]
mod tests {
    use berth::testkit::{CommandMatch, Event, Spec, Verdict};

    use super::{processor, Value, INVALID_ORDER, INVALID_RESERVATION};

    fn placed(payload: &str) -> Event {
        Event::new("OrderPlaced").aggregate("Order", "o-1").version(1).payload(payload)
    }

    fn reserve() -> CommandMatch {
        CommandMatch { aggregate_type: "Stock".into(), aggregate_id: "sku-9".into(), command_type: "ReserveStock".into(), payload: Some(r#"{"order":"o-1","quantity":2}"#.into()) }
    }

    fn cancel() -> CommandMatch {
        CommandMatch { aggregate_type: "Order".into(), aggregate_id: "o-1".into(), command_type: "CancelOrder".into(), payload: Some(r#"{"reason":"stock not reserved: out of stock"}"#.into()) }
    }

    const ITEM: &str = r#"{"item":"sku-9","quantity":2}"#;

    #[test]
    fn a_placed_order_reserves_its_stock() {
        let mut spec = Spec::new(processor());
        spec.when_event(placed(ITEM)).expect_no_error().expect_command(&reserve());
        assert_eq!(spec.commands.sent().len(), 1);
    }

    #[test]
    fn a_rejected_reservation_cancels_the_order_in_the_same_delivery() {
        let mut spec = Spec::new(processor());
        spec.commands.reject(CommandMatch::of_type("ReserveStock"), "out of stock");
        let then = spec.when_event(placed(ITEM));
        then.expect_no_error().expect_rejected(&reserve()).expect_command(&reserve()).expect_command(&cancel());
        assert_eq!(then.rejections[0].request_id, "OrderSaga.onOrderPlaced:Order/o-1@1:0/0");
        assert_eq!(spec.log.last().map(|l| l.key.as_str()), Some("OrderSaga.onOrderPlaced:Order/o-1@1:0:rejected:0"));
        let l = spec.log.last().expect("a log line");
        assert_eq!((l.msg.as_str(), l.field("order").and_then(Value::as_str), l.field("reason").and_then(Value::as_str)), ("cancelling order", Some("o-1"), Some("out of stock")));
    }

    #[test]
    fn a_reservation_the_service_cannot_process_fails_the_delivery() {
        let mut spec = Spec::new(processor());
        spec.commands.reject_with(CommandMatch::of_type("ReserveStock"), 422, "bad quantity");
        let then = spec.when_event(placed(ITEM));
        then.expect_error_class(&INVALID_RESERVATION);
        assert_eq!(spec.classify(&then).map(|d| d.verdict), Some(Verdict::Recoverable));
    }

    #[test]
    fn an_order_without_an_item_parks_at_once_and_sends_nothing() {
        let mut spec = Spec::new(processor());
        let then = spec.when_event(placed(r#"{"quantity":2}"#));
        then.expect_error_class(&INVALID_ORDER).expect_no_command();
        assert_eq!(spec.classify(&then).map(|d| d.verdict), Some(Verdict::Unrecoverable));
    }
}
