//! Transformations of kernels. Each pass takes a kernel and returns a new one; a pass keeps a
//! valid kernel valid.
//!
//! - [`math`]: expands math functions (`exp`, `log`, `sin`, `cos`, `tanh`, `erf`, `pow`, the
//!   inverse trigonometric functions, `atan2`, the hyperbolic functions and their inverses)
//!   into plain arithmetic, so that every back end computes the same results and loops with
//!   math in them can be vectorized;
//! - [`rem`]: expands float `rem` (C's `fmod`) into integer arithmetic and a `for` loop, for
//!   back ends with no `fmod` (PTX).
//!
//! Kernel fusion (the host fuses a prefix of index tasks into one task):
//! - [`compose`]: concatenates the parts' kernels in program order;
//! - [`fuse`]: fuses adjacent parallel loops over one iteration space, when legal;
//! - [`forward`]: store-to-load forwarding and redundant-load elimination;
//! - [`cse`]: common-subexpression elimination of pure operations;
//! - [`inline`]: recomputes a small element-wise producer where a loop of another shape reads
//!   its local temporary;
//! - [`scalar`]: scalar replacement of local temporaries;
//! - [`dce`]: dead-code elimination and removal of unused parameters;
//! - [`pipeline`]: what the host knows ([`FusionFacts`]), the passes in order ([`optimize`]),
//!   what they did ([`PassReport`]) and passes by name ([`by_name`]).

pub mod compose;
pub mod cse;
pub mod dce;
pub mod forward;
pub mod fuse;
pub mod inline;
pub mod math;
pub mod pipeline;
pub mod rem;
pub mod scalar;
mod util;

pub use util::{map_op_uses, map_uses, op_uses};

pub use pipeline::{
    FusionFacts, Optimized, PASS_NAMES, PassFn, PassOutput, PassReport, by_name, optimize,
};
