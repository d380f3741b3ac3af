//! The log line the host's `log` function takes (wasm/abi/ABI.md, log): a
//! message, or a message with structured fields, which the host logs as
//! fields rather than as text. Written byte for byte as the Go SDK's
//! abi.EncodeLogLine writes it (pinned by tests/golden.rs).

use crate::json::{quote_go, Value};

/// As the first byte of a line (ASCII record separator, which no text line
/// begins with), says the rest is a JSON object {"msg": "…", "kv": [key,
/// value, …]} with the fields in order.
pub const FIELDS_MARK: u8 = 0x1e;

/// The line of msg with its fields, key-value pairs in order. No fields:
/// the line is msg itself.
pub fn encode(msg: &str, fields: &[(&str, Value)]) -> Vec<u8> {
    if fields.is_empty() {
        return msg.as_bytes().to_vec();
    }
    let mut out = String::with_capacity(msg.len() + 16 * fields.len() + 16);
    out.push(FIELDS_MARK as char);
    out.push_str("{\"msg\":");
    out.push_str(&quote_go(msg));
    out.push_str(",\"kv\":[");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&quote_go(k));
        out.push(',');
        out.push_str(&v.to_go_json());
    }
    out.push_str("]}");
    out.into_bytes()
}
