//! Write Berth event handlers in Rust: a processor (reactor, saga or
//! projection) with handlers per event type, their retry budgets, error
//! classes, and the context and ports a handler uses. The crate implements
//! the guest ABI, version 1 (wasm/abi/ABI.md), and depends on std only.
//!
//! ```
//! use berth::{Context, Error, ErrorClass, Processor, Retry};
//! use std::time::Duration;
//!
//! pub static NOTIFICATION: ErrorClass = ErrorClass::root("Notification");
//!
//! pub fn processor() -> Processor {
//!     Processor::reactor("Welcome")
//!         .retry(Retry::new().max_attempts(3).timeout(Duration::from_secs(5)))
//!         .errors(&[&NOTIFICATION])
//!         .on("onSignedUp", "CustomerSignedUp", on_signed_up)
//! }
//!
//! fn on_signed_up(c: &mut Context) -> Result<(), Error> {
//!     let url = c.config("mail-url").ok_or_else(|| NOTIFICATION.error("no mail-url configured"))?;
//!     let key = c.invocation_key.clone();
//!     c.http(&berth::Request::post(&url).header("Idempotency-Key", &key))?;
//!     Ok(())
//! }
//! // In the module's lib.rs: berth::export!(processor);
//! ```
//!
//! The same code runs natively under `cargo test` with the test kit
//! (berth::testkit), which fakes every port; see the crate's README.

pub mod codec;
mod context;
mod dispatch;
mod error;
pub mod json;
mod key;
pub mod logline;
pub mod messages;
mod processor;
mod rejection;
pub mod testkit;
pub mod validate;
#[cfg(target_arch = "wasm32")]
mod wasm;

pub use context::{Command, Context, Event, Level, Ports, Request, Response};
pub use error::{classes, reply_error, Error, ErrorClass};
pub use key::invocation_key;
pub use messages::FailureKind;
pub use processor::{Handler, HandlerFn, Kind, Processor, Retry, Start};
pub use rejection::{Rejection, EVENT_COMMAND_REJECTED};

/// Defines the module's exports (`_initialize`, `berth_abi_version`,
/// `berth_alloc`, `berth_describe`, `berth_handle`) for the processor that
/// the function `$build` (a `fn() -> Processor`) makes. Write it once, in
/// the crate's lib.rs; natively (under `cargo test`) it defines nothing.
#[macro_export]
macro_rules! export {
    ($build:path) => {
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn _initialize() {
            $crate::__private::initialize($build)
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn berth_abi_version() -> u32 {
            $crate::messages::VERSION
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn berth_alloc(size: u32) -> u32 {
            $crate::__private::alloc(size)
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn berth_describe() -> u64 {
            $crate::__private::describe()
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn berth_handle(ptr: u32, len: u32) -> u64 {
            $crate::__private::handle(ptr, len)
        }
    };
}

/// What berth::export! expands to calls; not part of the API.
#[doc(hidden)]
#[cfg(target_arch = "wasm32")]
pub mod __private {
    pub use crate::wasm::{alloc, describe, handle, initialize};
}
