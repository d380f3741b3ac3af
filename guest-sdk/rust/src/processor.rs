//! Processors, their handlers and retry settings, and the description the
//! host reads at load.

use std::time::Duration;

use crate::context::Context;
use crate::error::{Error, ErrorClass};
use crate::messages::{ClassDesc, Description, HandlerDesc, RetrySettings, VERSION};

/// What a processor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Side effects (outbound HTTP); starts at the end of the log.
    Reactor = 1,
    /// Derives commands; starts at the end of the log.
    Saga = 2,
    /// Maintains a read model (the key/value port); starts at the beginning.
    Projection = 3,
}

/// Where a new subscription of the processor starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// By kind: reactors and sagas at the end, projections at the beginning.
    Default = 0,
    /// Replay the whole log.
    Beginning = 1,
    /// Only events appended after the subscription starts.
    End = 2,
}

/// A processor's or a handler's retry budget, the Rust form of the spec's
/// @Retry. A zero field (and an empty list) is inherited: a handler's from
/// its processor, a processor's from the host's [subscription.retry]
/// (5 attempts, 100ms doubling to 5s). The operator may override any
/// setting per subscription.
#[derive(Debug, Clone, Default)]
pub struct Retry {
    /// The calls in all, at least 1 (0 inherits).
    pub max_attempts: u32,
    /// The wait after the first failure; each next wait doubles.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// How long one attempt may run; a longer one fails as berth.Timeout.
    pub timeout: Duration,
    /// Classes that park the aggregate at once.
    pub unrecoverable: Vec<&'static ErrorClass>,
    /// Classes retried within the budget even if they look like an outage.
    pub recoverable: Vec<&'static ErrorClass>,
}

impl Retry {
    /// Retry settings that inherit everything.
    pub fn new() -> Retry {
        Retry::default()
    }
    /// Sets max_attempts.
    pub fn max_attempts(mut self, n: u32) -> Retry {
        self.max_attempts = n;
        self
    }
    /// Sets initial_backoff.
    pub fn initial_backoff(mut self, d: Duration) -> Retry {
        self.initial_backoff = d;
        self
    }
    /// Sets max_backoff.
    pub fn max_backoff(mut self, d: Duration) -> Retry {
        self.max_backoff = d;
        self
    }
    /// Sets timeout.
    pub fn timeout(mut self, d: Duration) -> Retry {
        self.timeout = d;
        self
    }
    /// Adds classes to the unrecoverable list.
    pub fn unrecoverable(mut self, cs: &[&'static ErrorClass]) -> Retry {
        self.unrecoverable.extend_from_slice(cs);
        self
    }
    /// Adds classes to the recoverable list.
    pub fn recoverable(mut self, cs: &[&'static ErrorClass]) -> Retry {
        self.recoverable.extend_from_slice(cs);
        self
    }

    pub(crate) fn settings(&self) -> RetrySettings {
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let names = |cs: &[&'static ErrorClass]| cs.iter().map(|c| c.name().to_string()).collect();
        RetrySettings {
            max_attempts: self.max_attempts,
            initial_backoff_nanos: nanos(self.initial_backoff),
            max_backoff_nanos: nanos(self.max_backoff),
            timeout_nanos: nanos(self.timeout),
            unrecoverable: names(&self.unrecoverable),
            recoverable: names(&self.recoverable),
        }
    }
}

/// The code of a handler: Ok is success, an Error a failure the host
/// classifies and retries or parks.
pub type HandlerFn = Box<dyn Fn(&mut Context<'_>) -> Result<(), Error>>;

/// One registered handler.
pub struct Handler {
    /// The handler's name; the subscription is "Processor.name".
    pub name: String,
    /// The event types it handles.
    pub event_types: Vec<String>,
    /// Overrides the processor's Retry, setting by setting.
    pub retry: Retry,
    pub(crate) func: HandlerFn,
}

impl Handler {
    /// Runs the handler's code with c.
    pub fn call(&self, c: &mut Context<'_>) -> Result<(), Error> {
        (self.func)(c)
    }
}

/// A named set of handlers of one kind with a shared retry budget. Build one
/// in the function you pass to berth::export!.
pub struct Processor {
    /// The processor name (letters, digits, '_' and '-').
    pub name: String,
    /// Reactor, saga or projection.
    pub kind: Kind,
    /// Where a new subscription starts.
    pub start: Start,
    /// The processor's budget; zero fields inherit the host's.
    pub retry: Retry,
    /// Extra classes to declare (those in Retry lists are declared anyway,
    /// with their ancestors). Declare every class the module fails with.
    pub errors: Vec<&'static ErrorClass>,
    pub(crate) handlers: Vec<Handler>,
}

impl Processor {
    /// A processor of the kind.
    pub fn new(name: &str, kind: Kind) -> Processor {
        Processor { name: name.into(), kind, start: Start::Default, retry: Retry::default(), errors: Vec::new(), handlers: Vec::new() }
    }
    /// A reactor.
    pub fn reactor(name: &str) -> Processor {
        Processor::new(name, Kind::Reactor)
    }
    /// A saga.
    pub fn saga(name: &str) -> Processor {
        Processor::new(name, Kind::Saga)
    }
    /// A projection.
    pub fn projection(name: &str) -> Processor {
        Processor::new(name, Kind::Projection)
    }
    /// Sets the processor's retry settings.
    pub fn retry(mut self, r: Retry) -> Processor {
        self.retry = r;
        self
    }
    /// Sets the start position.
    pub fn start(mut self, s: Start) -> Processor {
        self.start = s;
        self
    }
    /// Declares classes (and their ancestors).
    pub fn errors(mut self, cs: &[&'static ErrorClass]) -> Processor {
        self.errors.extend_from_slice(cs);
        self
    }

    /// Registers f as the handler named name for the event type.
    pub fn on<F>(self, name: &str, event_type: &str, f: F) -> Processor
    where
        F: Fn(&mut Context<'_>) -> Result<(), Error> + 'static,
    {
        self.on_with(name, event_type, Retry::default(), f)
    }

    /// Registers f as the handler named name for the event type, with
    /// handler-level retry settings.
    pub fn on_with<F>(self, name: &str, event_type: &str, retry: Retry, f: F) -> Processor
    where
        F: Fn(&mut Context<'_>) -> Result<(), Error> + 'static,
    {
        self.on_types(name, &[event_type], retry, f)
    }

    /// Registers f as one handler named name for several event types (one
    /// subscription, so a projection's handler keeps one read model).
    pub fn on_types<F>(mut self, name: &str, event_types: &[&str], retry: Retry, f: F) -> Processor
    where
        F: Fn(&mut Context<'_>) -> Result<(), Error> + 'static,
    {
        let event_types = event_types.iter().map(|t| t.to_string()).collect();
        self.handlers.push(Handler { name: name.into(), event_types, retry, func: Box::new(f) });
        self
    }

    /// The registered handlers.
    pub fn handlers(&self) -> &[Handler] {
        &self.handlers
    }

    /// The handler with the name.
    pub fn handler(&self, name: &str) -> Option<&Handler> {
        self.handlers.iter().find(|h| h.name == name)
    }

    /// The first handler registered for the event type.
    pub fn handler_for(&self, event_type: &str) -> Option<&Handler> {
        self.handlers.iter().find(|h| h.event_types.iter().any(|t| t == event_type))
    }

    /// The description the host reads at load.
    pub fn describe(&self) -> Description {
        let mut classes: Vec<ClassDesc> = Vec::new();
        let mut add = |cs: &[&'static ErrorClass]| {
            for c in cs {
                // Ancestors first, as the Go SDK declares them.
                for name in c.chain().iter().rev() {
                    if !classes.iter().any(|k| k.name == *name) {
                        let parent = chain_parent(c, name);
                        classes.push(ClassDesc { name: (*name).into(), parent: parent.into() });
                    }
                }
            }
        };
        add(&self.errors);
        add(&self.retry.unrecoverable);
        add(&self.retry.recoverable);
        for h in &self.handlers {
            add(&h.retry.unrecoverable);
            add(&h.retry.recoverable);
        }
        Description {
            abi_version: VERSION,
            processor: self.name.clone(),
            kind: self.kind as u8,
            start: self.start as u8,
            retry: self.retry.settings(),
            handlers: self
                .handlers
                .iter()
                .map(|h| HandlerDesc { name: h.name.clone(), event_types: h.event_types.clone(), retry: h.retry.settings() })
                .collect(),
            classes,
        }
    }

    /// Checks the processor as the host will at load; the error names the problem.
    pub fn validate(&self) -> Result<(), String> {
        crate::validate::description(&self.describe()).map_err(|e| format!("berth: {}", e))
    }
}

/// The parent of the class named name in c's chain ("" at the root).
fn chain_parent(c: &ErrorClass, name: &str) -> &'static str {
    let chain = c.chain();
    let i = chain.iter().position(|n| *n == name).unwrap_or(chain.len());
    chain.get(i + 1).copied().unwrap_or("")
}
