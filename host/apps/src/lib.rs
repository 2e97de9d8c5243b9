//! Runs Weft applications that are Wasm components.
//!
//! An application component targets the `weft:plugin/application` world (`wit/weft.wit`):
//! it imports `numeric` and `sparse` (and `host` for its store handles) and WASI for its
//! arguments, environment, standard streams, clocks and one preopened directory. Its guest
//! crate is `weft-app` (`sdk/app`).
//!
//! [`AppHost`] links each plugin interface the component imports to the plugin of the
//! job's runtime that exports it ([`linking`]): a call such as `numeric.binary` becomes that
//! plugin's export, called through [`weft::Runtime::call`], so its tasks enter the runtime's
//! window and fuse exactly as a native application's do. Store handles the application
//! holds are its own resources (`host.store`), kept in its table and released when the job
//! ends ([`AppHost::run`]). The application runs in its own wasmtime store with a memory
//! cap, an epoch deadline and a bound on its output ([`AppLimits`]).

#![deny(missing_docs)]

mod error;
pub mod files;
mod job;
pub mod linking;
mod output;
pub mod typed;

pub use error::{Error, Result};
pub use job::{AppHost, AppLimits, DIR_CHECK_TICKS, Job, JobOutcome, dir_bytes};
pub use output::{OutputSink, SinkFn, Stream};
