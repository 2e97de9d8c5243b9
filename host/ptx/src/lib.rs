//! Weft's GPU back end: PTX text generated from the kernel IR.
//!
//! The emitter ([`emit()`]) turns a validated, math-lowered kernel ([`weft_ir::ValidKernel`])
//! into one PTX module: text our code writes, which the CUDA driver compiles when the module
//! loads, so no CUDA toolkit is needed at run time. The modules hold, one job each:
//! - [`abi`]: what a launch passes to an entry (the parameter list every entry shares) and
//!   the fault codes an entry reports;
//! - [`mod@emit`]: the module's entries, one per top-level parallel loop, and the lowering of
//!   every IR instruction to PTX;
//! - `backend`: [`PtxBackend`], `weft-runtime`'s back-end seam over a [`device::Device`]:
//!   device memory, module loading, launches, reductions;
//! - [`device`]: the driver calls behind one trait: the CUDA driver (`device::cuda`, feature
//!   `cuda`) and the simulator;
//! - [`sim`]: a simulated GPU, an interpreter of the PTX the emitter writes, on which the
//!   test suite runs the whole back end where no GPU is (`WEFT_DEVICE=sim`: a test device);
//! - `driver` (feature `cuda`): finding the driver before any call into it;
//! - [`ptxas`]: NVIDIA's assembler, to check modules offline in tests;
//! - `checked`: [`checked()`], another back end with every kernel's PTX checked
//!   (`WEFT_PTX_CHECK=1`);
//! - [`tree`]: the canonical tree of a loop's leaves on the device: in shared memory, ten
//!   levels a launch ([`tree::block`]), or as level launches of an IR kernel.
//!
//! # How a kernel runs on the GPU
//! - Each top-level parallel loop is one `.entry`. Its threads walk the loop's iteration space
//!   in a grid-stride loop over the linear index of the point's sub-store (row-major), so any
//!   grid covers any extent. The launcher runs the entries in order on one stream.
//! - Top-level code (it never stores: the IR allows stores only in parallel loops) is
//!   recomputed in each entry that uses its values. A top-level load whose value an entry
//!   needs after an earlier entry may have written memory is refused (see [`Error`]).
//! - Arithmetic keeps the IR's semantics bit for bit: `add.rn`, `sub.rn`, `mul.rn`, `div.rn`
//!   and `sqrt.rn` (the assembler never contracts them into fused multiply-adds), float
//!   `min`/`max` that propagate NaN and order `-0.0` below `+0.0`, integer division by zero
//!   giving 0, saturating float-to-integer casts with NaN giving 0.
//! - An element of an unsigned storage type (`u8`, `u16`, `u32`) loads at its width into a
//!   register of 16 or 32 bits and is zero-extended (`cvt.u64`) to its `i64` value; storing
//!   one truncates the value (`cvt.u16.u64`, `cvt.u32.u64`) and stores that width. A `u64`
//!   element loads and stores as 64 bits.
//! - Every index is checked against its sub-store's extent; a failed check writes a fault
//!   code ([`abi::FaultSite`]) into the launch's fault word (the first one wins) and ends the
//!   thread without touching memory. An access at exactly the loop's indices is checked once
//!   per thread, before the loop, by comparing extents.
//! - Each entry also exists with 32-bit offset arithmetic ([`emit::Entry::narrow`]), which
//!   the launcher runs where the shapes allow.

#![deny(missing_docs)]

pub mod abi;
mod backend;
mod checked;
pub mod device;
#[cfg(feature = "cuda")]
pub mod driver;
pub mod emit;
mod error;
pub mod ptxas;
pub mod sim;
pub mod tree;

pub use backend::{GridCaps, MODULE_CACHE_LIMITS, PtxBackend};
pub use checked::checked;
pub use emit::{Module, emit};
pub use error::{Error, Result};
