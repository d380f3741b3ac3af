//! The invocation key (wasm/abi/ABI.md, "Invocation key").

/// The key the host hands to a handler:
/// "Processor.handler:aggregateType/aggregateId@version:index", where in the
/// names '%', ':', '@', '/' and every byte outside printable ASCII are
/// written %XX (upper-case hex), so that no two events share a key.
pub fn invocation_key(processor: &str, handler: &str, aggregate_type: &str, aggregate_id: &str, version: u64, index: u32) -> String {
    let mut out = String::new();
    escape(&mut out, &format!("{}.{}", processor, handler));
    out.push(':');
    escape(&mut out, aggregate_type);
    out.push('/');
    escape(&mut out, aggregate_id);
    out.push_str(&format!("@{}:{}", version, index));
    out
}

fn escape(out: &mut String, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'%' | b':' | b'@' | b'/' => out.push_str(&format!("%{:02X}", b)),
            0x21..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("%{:02X}", b)),
        }
    }
}
