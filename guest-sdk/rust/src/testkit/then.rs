//! The outcome of one when_event, and the expectations on it.

use std::time::Duration;

use crate::context::{Command, Request};
use crate::error::{Error, ErrorClass};
use crate::messages::{FailureKind, HandleResult};
use crate::rejection::Rejection;

use super::{json_equal, CommandMatch};

/// The outcome of one when_event. Its expect methods panic with what
/// happened when it is not what the test expects, and return the Then for
/// chaining; the fields are there for checks of your own.
#[derive(Debug, Clone, Default)]
pub struct Then {
    /// "Processor.handler", the subscription that ran.
    pub subscription: String,
    /// The invocation key the handler was given.
    pub key: String,
    /// The attempt the handler was given.
    pub attempt: u32,
    /// What the host reads back.
    pub result: HandleResult,
    /// The error the handler returned (None on success).
    pub err: Option<Error>,
    /// The HTTP requests this delivery made, failed ones included.
    pub requests: Vec<Request>,
    /// The commands this delivery sent (none if it failed).
    pub commands: Vec<Command>,
    /// The commands of this delivery the gateway rejected.
    pub rejections: Vec<Rejection>,
    /// The read model after the delivery.
    pub state: Vec<(String, Vec<u8>)>,
}

impl Then {
    /// Whether the handler failed.
    pub fn failed(&self) -> bool {
        self.result.failure.is_some()
    }

    /// What the handler did, for a report.
    pub fn outcome(&self) -> String {
        let f = match &self.result.failure {
            None => return "it succeeded".into(),
            Some(f) => f,
        };
        let mut s = String::from("it failed");
        if !f.classes.is_empty() {
            s += &format!(" with class {}", f.classes.join(" < "));
        }
        match f.kind {
            FailureKind::Systemic => s += ", systemic",
            FailureKind::Backpressure => s += ", backpressure",
            FailureKind::Unspecified => {}
        }
        if f.retry_after_millis > 0 {
            s += &format!(", retry after {}ms", f.retry_after_millis);
        }
        if !f.code.is_empty() {
            s += &format!(", code {}", f.code);
        }
        s + ": " + &f.message
    }

    #[track_caller]
    fn fail(&self, want: String) -> ! {
        panic!("{}: want {}, but {}", self.key, want, self.outcome())
    }

    /// The handler succeeded.
    #[track_caller]
    pub fn expect_no_error(&self) -> &Then {
        if self.failed() {
            self.fail("no error".into());
        }
        self
    }

    /// The handler failed, for any reason.
    #[track_caller]
    pub fn expect_error(&self) -> &Then {
        if !self.failed() {
            self.fail("an error".into());
        }
        self
    }

    /// The handler failed with the class or a class under it, by the class
    /// chain the host reads: the spec's expectError<T>().
    #[track_caller]
    pub fn expect_error_class(&self, c: &ErrorClass) -> &Then {
        if !self.result.failure.as_ref().map_or(false, |f| f.classes.iter().any(|n| n == c.name())) {
            self.fail(format!("an error of class {}", c.name()));
        }
        self
    }

    /// The handler failed with a message containing text.
    #[track_caller]
    pub fn expect_error_message(&self, text: &str) -> &Then {
        if !self.result.failure.as_ref().map_or(false, |f| f.message.contains(text)) {
            self.fail(format!("an error saying {:?}", text));
        }
        self
    }

    /// The handler reported a systemic failure.
    #[track_caller]
    pub fn expect_systemic(&self) -> &Then {
        if !self.result.failure.as_ref().map_or(false, |f| f.kind == FailureKind::Systemic) {
            self.fail("a systemic failure".into());
        }
        self
    }

    /// The handler reported backpressure with the floor, in whole milliseconds rounded up.
    #[track_caller]
    pub fn expect_backpressure(&self, retry_after: Duration) -> &Then {
        let want = ((retry_after.as_nanos() + 999_999) / 1_000_000) as u64;
        if !self.result.failure.as_ref().map_or(false, |f| f.kind == FailureKind::Backpressure && f.retry_after_millis == want) {
            self.fail(format!("backpressure, retry after {}ms", want));
        }
        self
    }

    fn request_list(&self) -> String {
        if self.requests.is_empty() {
            return "none".into();
        }
        self.requests.iter().map(|r| format!("{} {}", r.method, r.url)).collect::<Vec<_>>().join(", ")
    }

    /// The delivery made at least one request with the method and URL.
    #[track_caller]
    pub fn expect_request(&self, method: &str, url: &str) -> &Then {
        if !self.requests.iter().any(|r| r.method == method && r.url == url) {
            panic!("{}: want a request {} {}, but it made {} ({})", self.key, method, url, self.request_list(), self.outcome());
        }
        self
    }

    /// The delivery made no request.
    #[track_caller]
    pub fn expect_no_request(&self) -> &Then {
        if !self.requests.is_empty() {
            panic!("{}: want no request, but it made {}", self.key, self.request_list());
        }
        self
    }

    /// The delivery sent a command matching m.
    #[track_caller]
    pub fn expect_command(&self, m: &CommandMatch) -> &Then {
        if !self.commands.iter().any(|c| m.matches(c)) {
            panic!("{}: want a command {:?}, but it sent {:?} ({})", self.key, m, self.commands, self.outcome());
        }
        self
    }

    /// The delivery sent no command.
    #[track_caller]
    pub fn expect_no_command(&self) -> &Then {
        if !self.commands.is_empty() {
            panic!("{}: want no command, but it sent {:?}", self.key, self.commands);
        }
        self
    }

    /// The gateway rejected a command of this delivery matching m.
    #[track_caller]
    pub fn expect_rejected(&self, m: &CommandMatch) -> &Then {
        if !self.rejections.iter().any(|r| m.matches(&r.command)) {
            panic!("{}: want a rejection of {:?}, but rejected {:?}", self.key, m, self.rejections);
        }
        self
    }

    /// The read model holds want under key (compared as JSON when both parse).
    #[track_caller]
    pub fn expect_state(&self, key: &str, want: &str) -> &Then {
        match self.state.iter().find(|(k, _)| k == key) {
            None => panic!("{}: want state {} = {}, but it has none ({})", self.key, key, want, self.outcome()),
            Some((_, v)) if !json_equal(v, want.as_bytes()) => {
                panic!("{}: want state {} = {}, but it is {}", self.key, key, want, String::from_utf8_lossy(v))
            }
            Some(_) => self,
        }
    }

    /// The read model holds nothing under key.
    #[track_caller]
    pub fn expect_no_state(&self, key: &str) -> &Then {
        if let Some((_, v)) = self.state.iter().find(|(k, _)| k == key) {
            panic!("{}: want no state {}, but it is {}", self.key, key, String::from_utf8_lossy(v));
        }
        self
    }
}
