//! The OrderSummary projection in Rust (the Go one is samples/order-summary):
//! per buyer, how many orders were placed and shipped and what they came to,
//! under "buyer/<ownerId>", and each order under "order/<id>":
//!
//! ```text
//! buyer/buyer-42  {"orders":2,"shipped":1,"total":4998}
//! order/o-1       {"buyer":"buyer-42","total":1999,"shipped":true}
//! ```
//!
//! One handler takes both event types, so the summary is one read model. The
//! host applies a call's writes only when it succeeds, with the mark that the
//! event was applied, so the counts are exact however often an event is
//! retried or redelivered.
//!
//! Build: cargo build --release --target wasm32-wasip1 (wasm32-wasi before Rust 1.78)
//! Read: GET /v1/projections/OrderSummary.onOrder/buyer%2F<buyer>

#![forbid(unsafe_code)]

use berth::json::Value;
use berth::{Context, Error, Processor, Retry};

/// The OrderSummary projection.
pub fn processor() -> Processor {
    Processor::projection("OrderSummary").on_types("onOrder", &["OrderPlaced", "OrderShipped"], Retry::new(), on_order)
}

berth::export!(processor);

/// The read model's key of a buyer's summary.
pub fn key(buyer: &str) -> String {
    format!("buyer/{}", buyer)
}

/// The read model's key of one order.
pub fn order_key(id: &str) -> String {
    format!("order/{}", id)
}

/// Reads key as a JSON object (an empty one if it has no value).
fn get(c: &mut Context, key: &str) -> Result<Value, Error> {
    match c.kv_get(key)? {
        None => Ok(Value::Object(Vec::new())),
        Some(b) => Value::parse(&b).map_err(|e| Error::msg(format!("{}: {}", key, e))),
    }
}

/// The integer member k of v (0 if none).
fn int(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0)
}

fn on_order(c: &mut Context) -> Result<(), Error> {
    let buyer = c.event.owner_id.clone();
    if buyer.is_empty() {
        return Ok(()); // an order nobody owns is in nobody's summary
    }
    let okey = order_key(&c.event.aggregate_id);
    let order = get(c, &okey)?;
    let (mut total, mut shipped) = (int(&order, "total"), order.get("shipped") == Some(&Value::Bool(true)));
    let placed = c.event.event_type == "OrderPlaced";
    if placed {
        total = int(&c.event.json()?, "total");
    } else {
        shipped = true;
    }
    let order = Value::object(vec![("buyer", buyer.as_str().into()), ("total", total.into()), ("shipped", shipped.into())]);
    c.kv_put(&okey, &order.to_vec())?;

    let s = get(c, &key(&buyer))?;
    let (mut orders, mut shipped_n, mut sum) = (int(&s, "orders"), int(&s, "shipped"), int(&s, "total"));
    if placed {
        orders += 1;
        sum += total;
    } else {
        shipped_n += 1;
    }
    let s = Value::object(vec![("orders", orders.into()), ("shipped", shipped_n.into()), ("total", sum.into())]);
    c.kv_put(&key(&buyer), &s.to_vec())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use berth::classes;
    use berth::testkit::{timed_out, Event, Spec};

    use super::processor;

    fn placed(order: &str, total: i64) -> Event {
        Event::new("OrderPlaced").aggregate("Order", order).owner("buyer-42").payload(&format!(r#"{{"total":{}}}"#, total))
    }

    #[test]
    fn orders_are_summed_per_buyer() {
        let mut spec = Spec::new(processor());
        spec.when_event(placed("o-1", 1999)).expect_no_error();
        spec.when_event(placed("o-2", 2999)).expect_no_error();
        spec.when_event(Event::new("OrderShipped").aggregate("Order", "o-1").version(2).owner("buyer-42"))
            .expect_no_error()
            .expect_state("buyer/buyer-42", r#"{"orders":2,"shipped":1,"total":4998}"#)
            .expect_state("order/o-1", r#"{"buyer":"buyer-42","total":1999,"shipped":true}"#);
    }

    #[test]
    fn a_failed_delivery_writes_nothing_and_its_retry_counts_once() {
        let mut spec = Spec::new(processor());
        spec.kv.fail(timed_out("kv get", Duration::from_secs(1)));
        spec.when_event(placed("o-1", 10))
            .expect_error_class(&classes::WAIT_TIMEOUT)
            .expect_backpressure(Duration::from_secs(1))
            .expect_no_state("buyer/buyer-42");
        let then = spec.when_event(placed("o-1", 10));
        then.expect_no_error().expect_state("buyer/buyer-42", r#"{"orders":1,"shipped":0,"total":10}"#);
        assert_eq!(then.attempt, 2);
    }

    #[test]
    fn an_order_nobody_owns_is_in_no_summary() {
        let mut spec = Spec::new(processor());
        let mut ev = placed("o-1", 10);
        ev.event.owner_id.clear();
        spec.when_event(ev).expect_no_error();
        assert!(spec.kv.keys().is_empty());
    }

    #[test]
    fn a_payload_that_is_not_json_fails() {
        let mut spec = Spec::new(processor());
        spec.when_event(placed("o-1", 10).payload("not json")).expect_error().expect_error_message("decode OrderPlaced payload");
    }
}
