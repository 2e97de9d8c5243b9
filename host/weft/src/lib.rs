//! Weft for applications: a [`Runtime`] assembled from Weft's parts, its [`Config`], and the
//! typed facades of the first-party plugins ([`Numeric`] and [`Array`], [`Sparse`] and
//! [`CsrMatrix`]).
//!
//! ```no_run
//! use weft::{Config, Numeric, Runtime};
//! use weft_ir::DType;
//! # fn demo(numeric_component: &[u8]) -> weft::Result<f64> {
//! let np = Numeric::new(Runtime::new(Config::from_env())?, numeric_component)?;
//! let x = np.linspace(0.0, 1.0, 1000, DType::F64);
//! let y = (&x * &x + 1.0).sqrt();
//! y.sum().item()
//! # }
//! ```
//!
//! The parts, each a crate of its own: `weft-runtime` (stores, the window, the executor, the
//! seams), `weft-fusion` (the planner), `weft-cpu` (the back end), `weft-plugin` (the plugin
//! host), `weft-io` (file formats), `weft-ir` (the kernel IR). This crate is the only one that
//! reads environment variables ([`Config::from_env`]); examples and tests use only its public
//! API where an application could.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod numeric;
pub mod runtime;
pub mod sparse;
mod tracing_setup;
mod typed_exports;

pub use config::{Config, Device, PluginLimits, Ranks};
pub use error::{Error, Result};
pub use numeric::{
    Array, Complex, ComplexArray, ComplexOperand, Element, Ix, Numeric, Operand, Range, RepeatStats,
};
pub use runtime::Runtime;
pub use sparse::{CsrMatrix, RowOrder, Sparse};
/// The wasmtime this runtime is built with (the types of [`Runtime::with_plugin`]'s closure).
pub use wasmtime;
pub use weft_cpu::{SimdPath, WorkerPool};
pub use weft_io::{matrix_market, npy};
pub use weft_ir::DType;
pub use weft_plugin::{Error as PluginError, Fault, Value};
pub use weft_runtime::CancelToken;
pub use weft_runtime::backend::CANCELLED_BY_JOB;
pub use weft_runtime::products::ProductGrid;
pub use weft_runtime::{
    KernelProfile, Limits, PlannerStats, PluginId, Profile, Stats, StoreHandle, StoreId,
    backend::FunctionCounts,
};
