//! Running the handler an envelope names: the same path in a module and
//! under the native test kit.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::context::{Context, Ports};
use crate::error::{classes, Error};
use crate::messages::{self, Failure, HandleResult};
use crate::processor::Processor;
use crate::rejection::{Rejection, EVENT_COMMAND_REJECTED};

impl Processor {
    /// Registers f as the saga's rejection handler, named name, for commands
    /// the gateway rejects. The host calls it in the attempt that sent the
    /// command, with the key "<the event's key>:rejected:<command index>";
    /// a failure of it is that attempt's failure (retried, then parked).
    pub fn on_rejected<F>(self, name: &str, f: F) -> Processor
    where
        F: Fn(&mut Context<'_>, Rejection) -> Result<(), Error> + 'static,
    {
        self.on(name, EVENT_COMMAND_REJECTED, move |c| {
            let r = Rejection::decode(&c.event.payload)?;
            f(c, r)
        })
    }

    /// Runs the handler ev names with the ports and returns what the host
    /// reads. An unknown handler is a berth.HostError; a panic (natively: in
    /// a module a panic traps, and the host reports its text) is berth.Panic.
    pub fn dispatch(&self, ev: messages::Event, ports: &mut dyn Ports) -> HandleResult {
        self.dispatch_keeping(ev, ports).0
    }

    /// dispatch, also returning the handler's own error (for the test kit).
    pub fn dispatch_keeping(&self, ev: messages::Event, ports: &mut dyn Ports) -> (HandleResult, Option<Error>) {
        let h = match self.handler(&ev.handler) {
            Some(h) => h,
            None => {
                let e = classes::HOST.error(format!("processor {} has no handler {:?}", self.name, ev.handler));
                return (failed(e.to_failure()), Some(e));
            }
        };
        let mut c = Context::new(ev, ports);
        match catch_unwind(AssertUnwindSafe(|| h.call(&mut c))) {
            Ok(Ok(())) => (HandleResult { failure: None }, None),
            Ok(Err(e)) => (failed(e.to_failure()), Some(e)),
            Err(p) => {
                let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
                let e = classes::PANIC.error(format!("panic: {}", msg));
                (failed(e.to_failure()), Some(e))
            }
        }
    }
}

fn failed(f: Failure) -> HandleResult {
    HandleResult { failure: Some(f) }
}
