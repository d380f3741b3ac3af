//! The spec's ShipmentNotifier reactor, in Rust: it tells the buyer of a
//! shipped order that it is on its way.
//!
//! The notification service is a remote call that may be slow or briefly
//! down, so the reactor gives it its own budget: five attempts, from one
//! second apart up to thirty, and ten seconds for each, before the order is
//! parked in the failure ledger. A buyer the service does not know is a
//! failure no retry can fix, so it parks the order at once.
//!
//! Build: cargo build --release --target wasm32-wasip1 (wasm32-wasi before Rust 1.78)
//! Configure: [modules.shipment-notifier] config = { notifications-url = "http://…" }
//! and allow its host in allowed-hosts.

#![forbid(unsafe_code)]

use std::time::Duration;

use berth::{Context, Error, ErrorClass, Processor, Request, Retry};

/// Any failure to notify a buyer.
pub static NOTIFICATION: ErrorClass = ErrorClass::root("Notification");
/// The service does not know the buyer: no retry helps.
pub static UNKNOWN_BUYER: ErrorClass = ErrorClass::under("UnknownBuyer", &NOTIFICATION);

/// The ShipmentNotifier reactor with the spec's retry settings.
pub fn processor() -> Processor {
    Processor::reactor("ShipmentNotifier")
        .retry(
            Retry::new()
                .max_attempts(5)
                .initial_backoff(Duration::from_secs(1))
                .max_backoff(Duration::from_secs(30))
                .timeout(Duration::from_secs(10))
                .unrecoverable(&[&UNKNOWN_BUYER]),
        )
        .on("onOrderShipped", "OrderShipped", on_order_shipped)
}

berth::export!(processor);

fn on_order_shipped(c: &mut Context) -> Result<(), Error> {
    let buyer = c.event.owner_id.clone();
    if buyer.is_empty() {
        return Ok(());
    }
    let order = c.event.aggregate_id.clone();
    let base = c.config("notifications-url").ok_or_else(|| NOTIFICATION.error("the module has no notifications-url configured"))?;
    let body = format!(r#"{{"order":{},"event":"shipped"}}"#, berth::json::quote(&order));
    let req = Request::post(&format!("{}/buyers/{}/notifications", base, path_escape(&buyer)))
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", &c.invocation_key)
        .body(body);
    // A failure of the port is classified by it: refused is systemic, a
    // wait that ran out is backpressure.
    let resp = c.http(&req)?;
    match resp.status {
        s if s < 300 => {
            c.info_with("buyer notified", &[("buyer", buyer.into()), ("order", order.into())]);
            Ok(())
        }
        404 => Err(UNKNOWN_BUYER.error(format!("the notification service does not know buyer {}", buyer))),
        429 => {
            let after = resp.header("Retry-After").and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0);
            Err(NOTIFICATION.error("the notification service is busy").backpressure(Duration::from_secs(after)))
        }
        s => Err(NOTIFICATION.error(format!("the notification service answered {}: {}", s, String::from_utf8_lossy(&resp.body)))),
    }
}

/// Escapes a path segment as Go's url.PathEscape does for the ids the
/// service sees: unreserved bytes stay, every other byte is %XX.
fn path_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{:02X}", b),
        })
        .collect()
}

#[cfg(test)]
mod tests;
