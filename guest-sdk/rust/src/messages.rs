//! The messages of ABI v1, field by field as wasm/abi/ABI.md lists them, with
//! their encodings. Decoders refuse a short message and bytes left over.

use crate::codec::{DecodeError, Decoder, Encoder};

/// The ABI version this crate speaks; berth_abi_version returns it.
pub const VERSION: u32 = 1;

/// The envelope the host hands to berth_handle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub handler: String,
    pub invocation_key: String,
    pub attempt: u32,
    pub event_type: String,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub version: u64,
    pub index: u32,
    pub owner_id: String,
    pub position: u64,
    pub time_unix_nano: i64,
    pub deadline_unix_nano: i64,
    pub payload: Vec<u8>,
}

impl Event {
    /// The encoding of the event.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.str(&self.handler);
        e.str(&self.invocation_key);
        e.uint(u64::from(self.attempt));
        e.str(&self.event_type);
        e.str(&self.aggregate_type);
        e.str(&self.aggregate_id);
        e.uint(self.version);
        e.uint(u64::from(self.index));
        e.str(&self.owner_id);
        e.uint(self.position);
        e.int(self.time_unix_nano);
        e.int(self.deadline_unix_nano);
        e.bytes(&self.payload);
        e.finish()
    }

    /// Decodes an event.
    pub fn decode(b: &[u8]) -> Result<Event, DecodeError> {
        let mut d = Decoder::new(b);
        let ev = Event {
            handler: d.string()?,
            invocation_key: d.string()?,
            attempt: d.u32()?,
            event_type: d.string()?,
            aggregate_type: d.string()?,
            aggregate_id: d.string()?,
            version: d.uint()?,
            index: d.u32()?,
            owner_id: d.string()?,
            position: d.uint()?,
            time_unix_nano: d.int()?,
            deadline_unix_nano: d.int()?,
            payload: d.bytes()?.to_vec(),
        };
        d.done()?;
        Ok(ev)
    }
}

/// How the guest classifies a failure itself (the Failure's kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The host classifies by class (0).
    Unspecified = 0,
    /// An outage that is not the aggregate's fault (1).
    Systemic = 1,
    /// A busy dependency; retry no sooner than retry_after_millis (2).
    Backpressure = 2,
}

impl Default for FailureKind {
    fn default() -> Self {
        FailureKind::Unspecified
    }
}

/// Why a handler failed, as the host reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The class chain, nearest first.
    pub classes: Vec<String>,
    pub message: String,
    pub code: String,
    pub retry_after_millis: u64,
}

/// What berth_handle returns: None is success (status 0), Some a failure (status 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandleResult {
    pub failure: Option<Failure>,
}

impl HandleResult {
    /// Appends the encoding to buf (cleared first).
    pub fn encode_into(&self, buf: Vec<u8>) -> Vec<u8> {
        let mut e = Encoder::new(buf);
        match &self.failure {
            None => e.uint(0),
            Some(f) => {
                e.uint(1);
                e.uint(f.kind as u64);
                e.strs(&f.classes);
                e.str(&f.message);
                e.str(&f.code);
                e.uint(f.retry_after_millis);
            }
        }
        e.finish()
    }

    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_into(Vec::new())
    }

    /// Decodes a result.
    pub fn decode(b: &[u8]) -> Result<HandleResult, DecodeError> {
        let mut d = Decoder::new(b);
        let r = match d.u8()? {
            0 => HandleResult { failure: None },
            1 => {
                let kind = match d.u8()? {
                    0 => FailureKind::Unspecified,
                    1 => FailureKind::Systemic,
                    2 => FailureKind::Backpressure,
                    k => return Err(DecodeError(format!("unknown failure kind {}", k))),
                };
                HandleResult {
                    failure: Some(Failure {
                        kind,
                        classes: d.strings()?,
                        message: d.string()?,
                        code: d.string()?,
                        retry_after_millis: d.uint()?,
                    }),
                }
            }
            s => return Err(DecodeError(format!("unknown result status {}", s))),
        };
        d.done()?;
        Ok(r)
    }
}

/// Retry settings as the description carries them; zero fields and empty
/// lists are inherited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetrySettings {
    pub max_attempts: u32,
    pub initial_backoff_nanos: i64,
    pub max_backoff_nanos: i64,
    pub timeout_nanos: i64,
    pub unrecoverable: Vec<String>,
    pub recoverable: Vec<String>,
}

impl RetrySettings {
    fn encode(&self, e: &mut Encoder) {
        e.uint(u64::from(self.max_attempts));
        e.int(self.initial_backoff_nanos);
        e.int(self.max_backoff_nanos);
        e.int(self.timeout_nanos);
        e.strs(&self.unrecoverable);
        e.strs(&self.recoverable);
    }

    fn decode(d: &mut Decoder<'_>) -> Result<RetrySettings, DecodeError> {
        Ok(RetrySettings {
            max_attempts: d.u32()?,
            initial_backoff_nanos: d.int()?,
            max_backoff_nanos: d.int()?,
            timeout_nanos: d.int()?,
            unrecoverable: d.strings()?,
            recoverable: d.strings()?,
        })
    }
}

/// One handler in the description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerDesc {
    pub name: String,
    pub event_types: Vec<String>,
    pub retry: RetrySettings,
}

/// One node of the error class tree; parent is empty under the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassDesc {
    pub name: String,
    pub parent: String,
}

/// What berth_describe returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    pub abi_version: u32,
    pub processor: String,
    /// 1 reactor, 2 saga, 3 projection.
    pub kind: u8,
    /// 0 by kind, 1 beginning, 2 end.
    pub start: u8,
    pub retry: RetrySettings,
    pub handlers: Vec<HandlerDesc>,
    pub classes: Vec<ClassDesc>,
}

impl Description {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.uint(u64::from(self.abi_version));
        e.str(&self.processor);
        e.uint(u64::from(self.kind));
        e.uint(u64::from(self.start));
        self.retry.encode(&mut e);
        e.uint(self.handlers.len() as u64);
        for h in &self.handlers {
            e.str(&h.name);
            e.strs(&h.event_types);
            h.retry.encode(&mut e);
        }
        e.uint(self.classes.len() as u64);
        for c in &self.classes {
            e.str(&c.name);
            e.str(&c.parent);
        }
        e.finish()
    }

    /// Decodes a description without validating it.
    pub fn decode(b: &[u8]) -> Result<Description, DecodeError> {
        let mut d = Decoder::new(b);
        let mut desc = Description {
            abi_version: d.u32()?,
            processor: d.string()?,
            kind: d.u8()?,
            start: d.u8()?,
            retry: RetrySettings::decode(&mut d)?,
            ..Description::default()
        };
        for _ in 0..d.count()? {
            desc.handlers.push(HandlerDesc {
                name: d.string()?,
                event_types: d.strings()?,
                retry: RetrySettings::decode(&mut d)?,
            });
        }
        for _ in 0..d.count()? {
            desc.classes.push(ClassDesc { name: d.string()?, parent: d.string()? });
        }
        d.done()?;
        Ok(desc)
    }
}

/// Reply codes of host calls (ABI.md, "Reply").
pub mod reply {
    pub const OK: u8 = 0;
    pub const NOT_FOUND: u8 = 1;
    pub const DENIED: u8 = 2;
    pub const REFUSED: u8 = 3;
    pub const TIMEOUT: u8 = 4;
    pub const UNSUPPORTED: u8 = 5;
    pub const ERROR: u8 = 6;
    pub const TOO_LARGE: u8 = 7;
    pub const BACKPRESSURE: u8 = 8;
}

/// The answer to a host call, fetched with take_reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub code: u8,
    pub message: String,
    pub retry_after_millis: u64,
    pub body: Vec<u8>,
}

impl Reply {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.uint(u64::from(self.code));
        e.str(&self.message);
        e.uint(self.retry_after_millis);
        e.bytes(&self.body);
        e.finish()
    }

    /// Decodes a reply.
    pub fn decode(b: &[u8]) -> Result<Reply, DecodeError> {
        let mut d = Decoder::new(b);
        let r = Reply { code: d.u8()?, message: d.string()?, retry_after_millis: d.uint()?, body: d.bytes()?.to_vec() };
        d.done()?;
        Ok(r)
    }
}

fn encode_headers(e: &mut Encoder, hs: &[(String, String)]) {
    e.uint(hs.len() as u64);
    for (n, v) in hs {
        e.str(n);
        e.str(v);
    }
}

fn decode_headers(d: &mut Decoder<'_>) -> Result<Vec<(String, String)>, DecodeError> {
    let n = d.count()?;
    let mut hs = Vec::with_capacity(n);
    for _ in 0..n {
        hs.push((d.string()?, d.string()?));
    }
    Ok(hs)
}

/// The request of http_request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.str(&self.method);
        e.str(&self.url);
        encode_headers(&mut e, &self.headers);
        e.bytes(&self.body);
        e.finish()
    }

    /// Decodes a request.
    pub fn decode(b: &[u8]) -> Result<HttpRequest, DecodeError> {
        let mut d = Decoder::new(b);
        let r = HttpRequest { method: d.string()?, url: d.string()?, headers: decode_headers(&mut d)?, body: d.bytes()?.to_vec() };
        d.done()?;
        Ok(r)
    }
}

/// The body of an OK reply to http_request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u32,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.uint(u64::from(self.status));
        encode_headers(&mut e, &self.headers);
        e.bytes(&self.body);
        e.finish()
    }

    /// Decodes a response.
    pub fn decode(b: &[u8]) -> Result<HttpResponse, DecodeError> {
        let mut d = Decoder::new(b);
        let r = HttpResponse { status: d.u32()?, headers: decode_headers(&mut d)?, body: d.bytes()?.to_vec() };
        d.done()?;
        Ok(r)
    }
}

/// The request of kv_put.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvPut {
    pub key: String,
    pub value: Vec<u8>,
}

impl KvPut {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.str(&self.key);
        e.bytes(&self.value);
        e.finish()
    }

    /// Decodes a put.
    pub fn decode(b: &[u8]) -> Result<KvPut, DecodeError> {
        let mut d = Decoder::new(b);
        let p = KvPut { key: d.string()?, value: d.bytes()?.to_vec() };
        d.done()?;
        Ok(p)
    }
}

/// The request of send_command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandMsg {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub command_type: String,
    pub payload: Vec<u8>,
}

impl CommandMsg {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default();
        e.str(&self.aggregate_type);
        e.str(&self.aggregate_id);
        e.str(&self.command_type);
        e.bytes(&self.payload);
        e.finish()
    }

    /// Decodes a command.
    pub fn decode(b: &[u8]) -> Result<CommandMsg, DecodeError> {
        let mut d = Decoder::new(b);
        let c = CommandMsg {
            aggregate_type: d.string()?,
            aggregate_id: d.string()?,
            command_type: d.string()?,
            payload: d.bytes()?.to_vec(),
        };
        d.done()?;
        Ok(c)
    }
}
