//! The guest half of ABI v1 in a module (target wasm32): the state behind
//! the exports that berth::export! defines, and the host-backed ports. All
//! of the SDK's `unsafe` is here, none in a handler's code.

use std::cell::RefCell;

use crate::codec::pack;
use crate::context::{Command, Level, Ports, Request, Response};
use crate::error::{classes, reply_error, Error};
use crate::json::Value;
use crate::messages::{self, reply, CommandMsg, HandleResult, HttpRequest, HttpResponse, KvPut, Reply};
use crate::processor::Processor;

#[link(wasm_import_module = "berth")]
extern "C" {
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: i32);
    #[link_name = "http_request"]
    fn host_http(ptr: *const u8, len: i32) -> i64;
    #[link_name = "kv_get"]
    fn host_kv_get(ptr: *const u8, len: i32) -> i64;
    #[link_name = "kv_put"]
    fn host_kv_put(ptr: *const u8, len: i32) -> i64;
    #[link_name = "kv_delete"]
    fn host_kv_delete(ptr: *const u8, len: i32) -> i64;
    #[link_name = "send_command"]
    fn host_command(ptr: *const u8, len: i32) -> i64;
    #[link_name = "config_get"]
    fn host_config(ptr: *const u8, len: i32) -> i64;
    #[link_name = "take_reply"]
    fn host_take_reply(ptr: *mut u8, len: i32) -> i32;
}

extern "C" {
    // Runs the static constructors of wasi-libc and the Rust runtime; what
    // crt1-reactor.o's _initialize does. A cdylib links no crt1, so the
    // _initialize that berth::export! defines calls it itself.
    fn __wasm_call_ctors();
}

/// The module's state: its processor, the envelope buffer the host writes
/// into (valid until the next berth_alloc), and the last description and
/// result (valid until the host's next call).
#[derive(Default)]
struct State {
    input: Vec<u8>,
    output: Vec<u8>,
}

thread_local! {
    static PROCESSOR: RefCell<Option<Processor>> = RefCell::new(None);
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// _initialize: runs the constructors, installs the panic hook, then
/// builds the processor.
pub fn initialize(build: fn() -> Processor) {
    // SAFETY: called once per instance, first, by the host (ABI.md, Lifecycle).
    unsafe { __wasm_call_ctors() };
    std::panic::set_hook(Box::new(report_panic));
    // The call makes the module import wasi_snapshot_preview1.sched_yield,
    // which is what the host's loop guard calls to check a deadline (ABI.md,
    // Deadline): with it the host stops a spinning guest by rewriting its
    // loops, which costs a call nothing; without it every call would run
    // under wazero's close-on-context-done, several microseconds a call.
    std::thread::yield_now();
    let p = build();
    PROCESSOR.with(|cell| *cell.borrow_mut() = Some(p));
}

/// Writes a panic to stderr as the host quotes a guest's crash: from
/// "panic: " on (ABI.md, "Limits and outcomes"). Rust 1.63 cannot unwind on
/// wasm32, so the panic then aborts: the attempt fails as berth.Trap with
/// this text, and the instance is discarded.
fn report_panic(info: &std::panic::PanicInfo<'_>) {
    let p = info.payload();
    let msg = p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str)).unwrap_or("Box<dyn Any>");
    let at = info.location().map(|l| format!(" [{}:{}]", l.file(), l.line())).unwrap_or_default();
    eprintln!("panic: {}{}", msg, at);
}

/// The module's allocator: the system's, which says "out of memory" on
/// stderr when the module's memory limit refuses it more, before Rust
/// aborts on the failed allocation. The host knows of the memory.grow it
/// refused and records berth.MemoryExceeded from that (ABI.md, "Limits and
/// outcomes"); the line says so in the guest's own output too, as Go's
/// "fatal error: out of memory" does. A module cannot define a
/// #[global_allocator] of its own.
struct Allocator;

fn out_of_memory(p: *mut u8) -> *mut u8 {
    if p.is_null() {
        use std::io::Write;
        // No allocation here: a static line, and stderr is unbuffered.
        let _ = std::io::stderr().write_all(b"fatal error: out of memory\n");
    }
    p
}

// SAFETY: every method hands the call on to System unchanged.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        out_of_memory(std::alloc::System.alloc(l))
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        out_of_memory(std::alloc::System.alloc_zeroed(l))
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        out_of_memory(std::alloc::System.realloc(p, l, n))
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        std::alloc::System.dealloc(p, l)
    }
}

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// berth_alloc: a buffer of at least size bytes for the host's envelope.
pub fn alloc(size: u32) -> u32 {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.input.clear();
        s.input.resize(size.max(1) as usize, 0); // an empty envelope still needs an address
        s.input.as_mut_ptr() as u32
    })
}

fn packed(b: &[u8]) -> u64 {
    if b.is_empty() {
        return 0;
    }
    pack(b.as_ptr() as u32, b.len() as u32)
}

/// berth_describe: the encoded description, or nothing if no processor.
pub fn describe() -> u64 {
    let desc = PROCESSOR.with(|p| p.borrow().as_ref().map(|p| p.describe().encode()));
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.output = desc.unwrap_or_default();
        packed(&s.output)
    })
}

/// berth_handle: decode the envelope at ptr (which berth_alloc returned),
/// run its handler, encode the result.
pub fn handle(ptr: u32, len: u32) -> u64 {
    let ev = STATE.with(|s| {
        let s = s.borrow();
        if ptr != s.input.as_ptr() as u32 || len as usize > s.input.len() {
            return Err(classes::HOST.error("berth_handle: the envelope is not in the buffer berth_alloc returned"));
        }
        messages::Event::decode(&s.input[..len as usize]).map_err(|e| classes::HOST.error(format!("decode envelope: {}", e)))
    });
    let res = match ev {
        Err(e) => HandleResult { failure: Some(e.to_failure()) },
        Ok(ev) => PROCESSOR.with(|p| match p.borrow().as_ref() {
            Some(p) => p.dispatch(ev, &mut HostPorts),
            None => HandleResult { failure: Some(classes::HOST.error("berth: no processor (call berth::export!)").to_failure()) },
        }),
    };
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let out = std::mem::take(&mut s.output);
        s.output = res.encode_into(out);
        packed(&s.output)
    })
}

/// Makes a host call with req and returns its decoded reply.
fn call(f: unsafe extern "C" fn(*const u8, i32) -> i64, req: &[u8]) -> Result<Reply, Error> {
    // SAFETY: the host reads req during the call only.
    let n = unsafe { f(req.as_ptr(), req.len() as i32) };
    if n < 0 {
        return Err(classes::HOST.error(format!("host call failed with code {}", n)));
    }
    let mut buf = vec![0u8; n as usize];
    if n > 0 {
        // SAFETY: buf has room for the n bytes the host copies.
        let got = unsafe { host_take_reply(buf.as_mut_ptr(), n as i32) };
        if got != n as i32 {
            return Err(classes::HOST.error(format!("take_reply copied {} bytes of {}", got, n)));
        }
    }
    Reply::decode(&buf).map_err(|e| classes::HOST.error(format!("decode reply: {}", e)))
}

/// The ports backed by the host's functions.
struct HostPorts;

impl Ports for HostPorts {
    fn log(&mut self, level: Level, msg: &str, fields: &[(&str, Value)]) {
        // The fields travel as fields (crate::logline), so that the host
        // logs them as the Go SDK's.
        let line = crate::logline::encode(msg, fields);
        // SAFETY: the host reads line during the call only.
        unsafe { host_log(level as i32, line.as_ptr(), line.len() as i32) }
    }

    fn http(&mut self, req: &Request) -> Result<Response, Error> {
        let method = if req.method.is_empty() { "GET" } else { req.method.as_str() };
        let msg = HttpRequest { method: method.into(), url: req.url.clone(), headers: req.headers.clone(), body: req.body.clone() };
        let r = call(host_http, &msg.encode())?;
        if r.code != reply::OK {
            return Err(reply_error(&format!("{} {}", method, req.url), &r));
        }
        let hr = HttpResponse::decode(&r.body).map_err(|e| classes::HOST.wrap(e))?;
        Ok(Response { status: hr.status.min(u32::from(u16::MAX)) as u16, headers: hr.headers, body: hr.body })
    }

    fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let r = call(host_kv_get, key.as_bytes())?;
        match r.code {
            reply::OK => Ok(Some(r.body)),
            reply::NOT_FOUND => Ok(None),
            _ => Err(reply_error(&format!("kv get {}", key), &r)),
        }
    }

    fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), Error> {
        let r = call(host_kv_put, &KvPut { key: key.into(), value: value.to_vec() }.encode())?;
        match r.code {
            reply::OK => Ok(()),
            _ => Err(reply_error(&format!("kv put {}", key), &r)),
        }
    }

    fn kv_delete(&mut self, key: &str) -> Result<(), Error> {
        let r = call(host_kv_delete, key.as_bytes())?;
        match r.code {
            reply::OK | reply::NOT_FOUND => Ok(()),
            _ => Err(reply_error(&format!("kv delete {}", key), &r)),
        }
    }

    fn send_command(&mut self, cmd: &Command) -> Result<(), Error> {
        let msg = CommandMsg {
            aggregate_type: cmd.aggregate_type.clone(),
            aggregate_id: cmd.aggregate_id.clone(),
            command_type: cmd.command_type.clone(),
            payload: cmd.payload.clone(),
        };
        let r = call(host_command, &msg.encode())?;
        match r.code {
            reply::OK => Ok(()),
            _ => Err(reply_error(&format!("send command {}", cmd.command_type), &r)),
        }
    }

    fn config(&mut self, key: &str) -> Option<String> {
        match call(host_config, key.as_bytes()) {
            Ok(r) if r.code == reply::OK => Some(String::from_utf8_lossy(&r.body).into_owned()),
            _ => None,
        }
    }
}
