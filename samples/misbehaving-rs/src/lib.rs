//! A Rust module whose handlers misbehave on purpose, one way each, for the
//! host's containment tests (the Go one is samples/misbehaving), and probes
//! of ABI details a guest of any language relies on. Each handler is named
//! after what it does. Unlike a handler author's code, this one uses the
//! host functions directly, with `unsafe`, to break the rules.

use std::cell::RefCell;
use std::time::Duration;

use berth::{Context, Error, Processor, Request, Retry};

thread_local! {
    /// Keeps allocations reachable so that the memory hog really holds memory.
    static SINK: RefCell<Vec<Vec<u8>>> = RefCell::new(Vec::new());
    /// What config_get answered during _initialize.
    static INIT_PROBE: RefCell<i64> = RefCell::new(0);
}

#[cfg(target_arch = "wasm32")]
mod raw {
    #[link(wasm_import_module = "berth")]
    extern "C" {
        pub fn log(level: i32, ptr: *const u8, len: i32);
        pub fn config_get(ptr: *const u8, len: i32) -> i64;
        pub fn take_reply(ptr: *mut u8, len: i32) -> i32;
    }
}

/// config_get of key, made directly: the i64 the host returned.
#[cfg(target_arch = "wasm32")]
fn raw_config_get(key: &str) -> i64 {
    unsafe { raw::config_get(key.as_ptr(), key.len() as i32) }
}
#[cfg(not(target_arch = "wasm32"))]
fn raw_config_get(_: &str) -> i64 {
    -2
}

#[cfg(target_arch = "wasm32")]
fn raw_take_reply(buf: &mut [u8]) -> i32 {
    unsafe { raw::take_reply(buf.as_mut_ptr(), buf.len() as i32) }
}
#[cfg(not(target_arch = "wasm32"))]
fn raw_take_reply(_: &mut [u8]) -> i32 {
    -1
}

/// A log call whose length runs past the end of memory.
#[cfg(target_arch = "wasm32")]
fn lie_about_a_length() {
    let s = "a line";
    unsafe { raw::log(1, s.as_ptr(), i32::MAX) }
}
#[cfg(not(target_arch = "wasm32"))]
fn lie_about_a_length() {}

/// The Misbehaving reactor. It probes config_get from _initialize, where
/// the ABI says request/reply host functions answer -2.
pub fn processor() -> Processor {
    INIT_PROBE.with(|p| *p.borrow_mut() = raw_config_get("probe"));
    Processor::reactor("Misbehaving")
        .on("spinner", "Spin", |_| {
            let mut i: u64 = 0;
            loop {
                i = unsafe { std::ptr::read_volatile(&i) }.wrapping_add(1);
            }
        })
        .on("sleeper", "Sleep", |_| {
            std::thread::sleep(Duration::from_secs(3600));
            Ok(())
        })
        .on("memoryHog", "Hog", |_| loop {
            let mut b = vec![0u8; 1 << 20];
            b[(1 << 20) - 1] = 1;
            SINK.with(|s| s.borrow_mut().push(b));
        })
        .on("bigAlloc", "BigAlloc", |_| {
            // One 64 MiB block: past a smaller limit the host refuses the
            // memory.grow, and std aborts ("memory allocation of … failed").
            let mut b = vec![0u8; 64 << 20];
            b[(64 << 20) - 1] = 1;
            SINK.with(|s| s.borrow_mut().push(b));
            Ok(())
        })
        .on("panicker", "Panic", |_| panic!("the handler panicked on purpose"))
        .on("liar", "Lie", |_| {
            lie_about_a_length();
            Ok(())
        })
        .on("echo", "Echo", |c: &mut Context| {
            let key = c.invocation_key.clone();
            c.info(&format!("echo key={}", key));
            println!("stdout line from {}", key);
            Ok(())
        })
        .on("initProbe", "InitProbe", |_| {
            let got = INIT_PROBE.with(|p| *p.borrow());
            if got != -2 {
                return Err(Error::msg(format!("config_get from _initialize answered {}, want -2", got)));
            }
            Ok(())
        })
        .on("shortTakeReply", "ShortTakeReply", short_take_reply)
        .on_with("attemptReporter", "ReportAttempt", Retry::new().max_attempts(2).initial_backoff(Duration::from_millis(10)), report_attempt)
}

/// Tells the service at config report-url its invocation key and attempt,
/// and fails while the service answers an error: for tests of how the host
/// numbers attempts.
fn report_attempt(c: &mut Context) -> Result<(), Error> {
    let url = c.config("report-url").ok_or_else(|| Error::msg("no report-url configured"))?;
    let body = format!(r#"{{"key":{},"attempt":{}}}"#, berth::json::quote(&c.invocation_key), c.attempt);
    let resp = c.http(&Request::post(&url).body(body))?;
    if resp.status >= 300 {
        return Err(Error::msg(format!("the reporter answered {}", resp.status)));
    }
    Ok(())
}

berth::export!(processor);

/// config_get("probe") answers a reply of n bytes; take_reply with a buffer
/// one byte short copies n-1 and returns n-1, and the reply is then gone
/// (a second take_reply answers -1).
fn short_take_reply(_: &mut Context) -> Result<(), Error> {
    let n = raw_config_get("probe");
    if n <= 1 {
        return Err(Error::msg(format!("config_get answered {}", n)));
    }
    let mut buf = vec![0u8; n as usize - 1];
    let first = raw_take_reply(&mut buf);
    let second = raw_take_reply(&mut buf);
    if first as i64 != n - 1 || second != -1 {
        return Err(Error::msg(format!("take_reply of {} of {} bytes answered {}, then {}; want {} then -1", n - 1, n, first, second, n - 1)));
    }
    Ok(())
}
