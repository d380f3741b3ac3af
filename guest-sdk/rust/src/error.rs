//! Error classes and the classified failures a handler returns.

use std::fmt;
use std::time::Duration;

use crate::messages::{Failure, FailureKind};

/// A named class of failures, optionally under a parent class: the part
/// exception classes play on the JVM. A handler's retry settings name classes
/// as unrecoverable or recoverable, and the host decides by the nearest class
/// in the failure's chain. Declare classes as statics:
///
/// ```
/// use berth::ErrorClass;
/// pub static NOTIFICATION: ErrorClass = ErrorClass::root("Notification");
/// pub static UNKNOWN_BUYER: ErrorClass = ErrorClass::under("UnknownBuyer", &NOTIFICATION);
/// assert_eq!(UNKNOWN_BUYER.chain(), vec!["UnknownBuyer", "Notification"]);
/// ```
#[derive(Debug)]
pub struct ErrorClass {
    name: &'static str,
    parent: Option<&'static ErrorClass>,
}

impl ErrorClass {
    /// A class directly under the root.
    pub const fn root(name: &'static str) -> ErrorClass {
        ErrorClass { name, parent: None }
    }

    /// A class under parent.
    pub const fn under(name: &'static str, parent: &'static ErrorClass) -> ErrorClass {
        ErrorClass { name, parent: Some(parent) }
    }

    /// The class name, as the host and the ledger show it.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parent class, None under the root.
    pub fn parent(&self) -> Option<&'static ErrorClass> {
        self.parent
    }

    /// The class's name and its ancestors' names, nearest first.
    pub fn chain(&self) -> Vec<&'static str> {
        let mut out = vec![self.name];
        let mut p = self.parent;
        while let Some(c) = p {
            out.push(c.name);
            p = c.parent;
        }
        out
    }

    /// Whether self is target or one of its descendants (by name).
    pub fn is_a(&self, target: &ErrorClass) -> bool {
        self.chain().contains(&target.name)
    }

    /// A failure of this class with the message.
    pub fn error(&'static self, message: impl Into<String>) -> Error {
        Error { class: Some(self), message: message.into(), ..Error::default() }
    }

    /// A failure of this class caused by err (its text becomes the message).
    pub fn wrap(&'static self, err: impl fmt::Display) -> Error {
        self.error(err.to_string())
    }
}

impl PartialEq for ErrorClass {
    fn eq(&self, other: &ErrorClass) -> bool {
        self.chain() == other.chain()
    }
}

/// Classes the SDK itself reports, each one of the host's builtin classes
/// (wasm/abi/ABI.md, "Builtin classes"). Name them in Retry lists like any
/// other.
pub mod classes {
    use super::ErrorClass;

    /// A handler that panicked (natively; in a module a panic traps: `TRAP`).
    pub static PANIC: ErrorClass = ErrorClass::root("berth.Panic");
    /// A host call that failed for a reason of its own.
    pub static HOST: ErrorClass = ErrorClass::root("berth.HostError");
    /// An outbound connection was refused: systemic.
    pub static CONNECTION_REFUSED: ErrorClass = ErrorClass::under("berth.ConnectionRefused", &HOST);
    /// A request to a host the module may not reach.
    pub static OUTBOUND_DENIED: ErrorClass = ErrorClass::under("berth.OutboundDenied", &HOST);
    /// A host call whose wait ran out, or the host's side was busy: backpressure.
    pub static WAIT_TIMEOUT: ErrorClass = ErrorClass::under("berth.WaitTimeout", &HOST);
    /// A port this host does not offer to the processor.
    pub static UNSUPPORTED: ErrorClass = ErrorClass::under("berth.Unsupported", &HOST);
    /// An attempt that ran past its timeout (given by the host; list it to act on it).
    pub static TIMEOUT: ErrorClass = ErrorClass::root("berth.Timeout");
    /// A guest that crashed: a panic, a bad pointer, a result that did not decode.
    pub static TRAP: ErrorClass = ErrorClass::root("berth.Trap");
    /// A guest that needed more memory than its module's memory-limit.
    pub static MEMORY_EXCEEDED: ErrorClass = ErrorClass::root("berth.MemoryExceeded");
}

/// How the guest reports a failure beyond its class.
pub type Kind = FailureKind;

/// A failure a handler returns: a class (None: unclassified), a message, an
/// optional code, and how the host should treat it. `?` turns any
/// std::error::Error into an unclassified one; ErrorClass::error and
/// ErrorClass::wrap make classified ones.
#[derive(Debug, Clone, Default)]
pub struct Error {
    /// The class; None for an unclassified failure (recoverable unless a rule says otherwise).
    pub class: Option<&'static ErrorClass>,
    /// The text the ledger shows.
    pub message: String,
    /// An optional machine-readable code.
    pub code: String,
    /// Unspecified (the default), systemic or backpressure.
    pub kind: Kind,
    /// With backpressure: retry no sooner than this.
    pub retry_after: Option<Duration>,
}

impl Error {
    /// An unclassified failure with the message.
    pub fn msg(message: impl Into<String>) -> Error {
        Error { message: message.into(), ..Error::default() }
    }

    /// Sets the code.
    pub fn with_code(mut self, code: impl Into<String>) -> Error {
        self.code = code.into();
        self
    }

    /// Marks the failure as an outage that is not the aggregate's fault: the
    /// host pauses the partition and probes until it is back, spending no budget.
    pub fn systemic(mut self) -> Error {
        self.kind = FailureKind::Systemic;
        self
    }

    /// Marks the failure as a busy dependency: the host retries no sooner
    /// than retry_after (rounded up to whole milliseconds).
    pub fn backpressure(mut self, retry_after: Duration) -> Error {
        self.kind = FailureKind::Backpressure;
        self.retry_after = Some(retry_after);
        self
    }

    /// Whether the failure is of class c or of a class under it.
    pub fn is(&self, c: &ErrorClass) -> bool {
        self.class.map_or(false, |k| k.is_a(c))
    }

    /// The failure as the host reads it.
    pub fn to_failure(&self) -> Failure {
        let millis = self.retry_after.map_or(0, |d| {
            let n = d.as_nanos();
            ((n + 999_999) / 1_000_000) as u64
        });
        Failure {
            kind: self.kind,
            classes: self.class.map_or_else(Vec::new, |c| c.chain().into_iter().map(String::from).collect()),
            message: self.message.clone(),
            code: self.code.clone(),
            retry_after_millis: millis,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

// berth::Error is deliberately not a std::error::Error, so that this impl
// can make `?` work on every error type a handler meets (as anyhow does).
impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Error {
        Error::msg(e.to_string())
    }
}

/// The classified error of a failed host reply (ABI.md, "Reply"), as the
/// Go SDK maps it; what names the call.
pub fn reply_error(what: &str, r: &crate::messages::Reply) -> Error {
    let msg = format!("{}: {}", what, r.message);
    match r.code {
        crate::messages::reply::REFUSED => classes::CONNECTION_REFUSED.error(msg).systemic(),
        crate::messages::reply::DENIED => classes::OUTBOUND_DENIED.error(msg),
        crate::messages::reply::TIMEOUT | crate::messages::reply::BACKPRESSURE => {
            classes::WAIT_TIMEOUT.error(msg).backpressure(std::time::Duration::from_millis(r.retry_after_millis))
        }
        crate::messages::reply::UNSUPPORTED => classes::UNSUPPORTED.error(msg),
        _ => classes::HOST.error(msg),
    }
}
