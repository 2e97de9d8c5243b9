//! The Weft host: loads Wasm plugins, buffers their task streams in a window, compiles kernel
//! IR for CPUs with Cranelift and runs it on a thread pool.

#![deny(missing_docs)]

pub mod config;
pub mod cpu;
pub mod dynamic;
pub mod error;
pub mod fusion;
pub mod matrix_market;
pub mod numeric;
pub mod plugin;
pub mod runtime;
pub mod sparse;

pub use config::{Config, PluginLimits};
pub use dynamic::Value;
pub use error::{Error, Result};
pub use numeric::{Array, Numeric, Range};
pub use runtime::{PluginId, Runtime, StoreHandle};
pub use sparse::{CsrMatrix, Sparse};
