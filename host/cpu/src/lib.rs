//! The CPU back end: kernel IR compiled with Cranelift and run on a rayon pool, and host memory
//! for stores, as an implementation of `weft-runtime`'s [`Backend`](weft_runtime::Backend)
//! seam.
//!
//! - [`CpuBackend`] (`backend`) implements the seam: buffers in host memory with a pool that
//!   reuses freed memory (`memory`), kernels compiled on first use and cached by their content
//!   id, launches on its own thread pool.
//! - [`Compiler`] (`compile`) lowers validated kernel IR to native code in one JIT module
//!   (`lower`: scalar, 128-bit vector, AVX2 and AVX-512 code; `launch`: running the steps);
//!   [`CompiledKernel::run`] runs one point task's sub-stores.
//! - `math`: the scalar math functions the lowering may call.
//!
//! It depends on `weft-runtime` and `weft-ir`, and must not depend on the plugin host, the
//! planner or any other back end.
//!
//! # How a kernel runs
//! - Every top-level parallel loop is its own compiled function. The launcher cuts the loop's
//!   outermost dimension into chunks of a fixed number of rows (about 16K iterations per chunk;
//!   the number depends only on the loop's shape, never on the thread count) and runs the
//!   chunks on the pool. Parallel loops run one after another, with a barrier between them.
//! - Top-level code between parallel loops that has an effect (a store, a load, a `for` loop)
//!   is compiled into sequential functions that run on the calling thread. Pure top-level
//!   values (constants, scalar parameters, extents and arithmetic on them) are recomputed
//!   inside each function that uses them, so they stay constants for Cranelift.
//! - Reductions: float sums and products into 0-d stores keep the canonical order of
//!   `weft_ir::reduction` (see `leaves`): each point leaves its contribution in a chunk-private
//!   leaf buffer, which the launcher reduces into complete subtrees; the parts are folded once
//!   per run, or handed back per point task ([`CompiledKernel::run_task`]) for the executor to
//!   merge across points. Any other store with `Reduce` privilege is updated in place when
//!   every reduction into it is indexed on its dimension 0 by the loop's dimension-0 index
//!   (the chunks then touch disjoint rows); otherwise each chunk reduces into a private buffer
//!   (dense, initialised to the identity; for a rank-0 target, a register written once at the
//!   end of the chunk), and the buffers are folded into the store in chunk order. The result
//!   is bit-identical for any number of threads.
//! - Quick launches (see `quick`): a launch whose every parallel loop is one chunk runs on the
//!   calling thread, its frame written straight from the bindings; where it is the whole of
//!   its task (`Backend::set_sole_launch`), its float sums and products into 0-d stores are
//!   rooted in place and folded into their targets at once, with the general path's bits. A
//!   sole launch that takes the general path folds its partials itself too, so a sole launch
//!   never hands partials back.
//! - Memory (see `memory`, `free_list`, `host_words`): buffers from the system allocator,
//!   freed ones kept by size class for reuse.
//! - Deferred stores (see `deferred`): a store argument bound with a halo
//!   ([`CompiledKernel::run_task`]'s `deferred`, from fusion through a bounded
//!   anti-dependence) is written, by each parallel loop that stores it, into small slice
//!   buffers that the launcher copies to the store once no point of the chunk still reads
//!   those rows; the rows that neighbouring chunks read are written after the loop.
//! - Vectors: a parallel loop whose body the vector lowering takes (element-wise arithmetic,
//!   comparisons, selects, contiguous loads and stores, exact rank-0 reductions in registers; see
//!   `lower::vector`) is compiled into one vector function instead: its innermost dimension
//!   runs in 128-bit vectors (`f64x2`, `f32x4`, ...), with a scalar loop for each row's
//!   remainder, and for whole rows when a contiguous store's innermost stride is not one
//!   element. Element-wise results equal the scalar code's bit for bit, and so do the leaf
//!   buffers of float sums and products; the other rank-0 reductions are exact in any order.
//! - Wide bodies: on the `avx512` path (the default where the CPU has AVX-512 F and DQ) and
//!   the `avx2` path (the default where it has AVX2 but not AVX-512; see [`SimdPath`]), a
//!   vector function with 64-bit lanes, no reduction and no use of the loop index as a value
//!   first calls a body of machine code emitted by the back end itself (`lower::wide`) for most
//!   of each row: 32 iterations per step in 512-bit registers, or 16 in 256-bit ones; the
//!   128-bit and scalar loops run the rest, or, where the body runs whole rows (no gathers,
//!   widened loads or grouped stores), the body runs the row's last iterations one vector at a
//!   time, the last vector masked, and walks the rows around them. AVX2 bodies do not take 64-bit integer `mul` nor
//!   `i64 -> f64` casts: such loops keep the 128-bit code
//!   ([`CompiledKernel::wide_refusals`] says why). Same operations, same bits (up to the sign
//!   and payload of a NaN made by arithmetic, which the IR leaves open).
//!
//! - Loops cut into segments (see `strips`): on the vector paths, a rank-1 parallel loop
//!   whose points run `for` loops and a long straight run of arithmetic is cut into
//!   consecutive loops over the same points (values crossing a cut pass through hidden
//!   scratch stores), so the straight run vectorizes; one driver function (`lower::driver`)
//!   runs the segments strip by strip and is the one step the launcher sees.
//! - Lanes and iterations: in a loop nest with unit innermost strides, a `for` loop whose
//!   carried values form lanes (`lower::lanes`; loads at indices the lanes compute are
//!   gathered), or whose iterations reduce into distinct elements of a chunk buffer
//!   (`lower::iterations`), runs as 128-bit vectors with the scalar code's bits. On the
//!   `avx2` and `avx512` paths a lane loop of `f64` lanes runs its bulk in a wide body of its
//!   own (`lower::wide::fold`), gathers included (`vgatherqpd`, each vector's indices checked
//!   first; a bad one hands the rest of the loop back to the 128-bit code, which faults where
//!   the scalar code would).
//! - Pairs: a scalar `for` loop with a short read-only body whose loads at its induction
//!   value are checked before it (a CSR row's product) runs two iterations per trip, in
//!   order (`lower::pairs`).
//! - Prefetches: a scalar `for` loop that loads a rank-1 store of unit stride at its induction
//!   value (a CSR row reading `crd` and `vals`) prefetches that store a fixed number of
//!   iterations past its first one (`lower::prefetch`; [`Compiler::set_prefetch`] turns it
//!   off). Cranelift has no prefetch instruction: the lowering emits a marked byte load and
//!   rewrites it into `prefetcht0` once the function is compiled.
//!
//! # Calling convention
//! Each step (a parallel loop, or a run of top-level code with effects) is one function
//! `extern "C" fn(frame: *mut u64, red: *const *mut u8, lo: i64, hi: i64) -> i64`:
//! - `frame` holds 64-bit words built by `run` for each call: per store parameter its data
//!   pointer, extents, strides in bytes, origins and dense (row-major) strides in bytes; per
//!   scalar parameter its value; then words where sequential steps leave values for later steps.
//!   Base pointers, extents and strides are loaded once, in the function's entry block.
//! - `red` holds one pointer per chunk-private reduction buffer of a parallel step.
//! - A parallel step runs rows `lo..hi` of its loop's outermost dimension (all of the inner
//!   ones); a sequential step is called with `0, 1`.
//! - It returns 0, or `1 + i` for the `i`-th out-of-bounds site (a parameter and a dimension).
//!
//! # Memory safety
//! Every index of every load, store and reduction is compared (unsigned) with the extent of
//! its store's view, except an index that is directly the parallel loop's index of dimension
//! `k`, used on dimension `d` of a store: that one is proven by checking, in
//! [`CompiledKernel::run`] before the loop starts, that the loop's extent on `k` is at most the
//! store's extent on `d`. (So such an access counts as executed by every iteration, even inside
//! a sequential loop that might run zero times.) A failed check stops the kernel and `run`
//! returns [`Error::KernelFault`] naming the kernel, the parameter and the dimension.
//! Integer division never traps (see `weft_ir`'s semantics). A prefetch may name any address:
//! it never faults, and the lowering checks that every prefetch marker became one.
//!
//! # Semantics chosen here
//! - Float `rem` is C's `fmod` (so `x rem 0.0` is NaN); integer `rem` and `div` by zero give 0.
//! - Casts to `bool` compare with zero; NaN casts to `true`. A `bool` loaded from memory is true
//!   when its byte is nonzero; stores write 0 or 1.
//! - On `bool`: `min`/`and` and `max`/`or` are the logical operators; the `sum` and `max`
//!   reductions are "any", `prod` and `min` are "all".
//! - Float `min`/`max` (operators and reductions) give NaN if either operand is NaN, and order
//!   `-0.0` below `+0.0`.

#![deny(missing_docs)]

mod backend;
mod compile;
mod deferred;
mod error;
mod free_list;
pub mod function_cache;
mod guarded;
mod host_words;
mod launch;
mod leaves;
mod lower;
pub mod math;
mod memory;
mod packed;
mod pool;
mod product;
mod quick;
mod rows_product;
mod shared_chunks;
mod simd_path;
mod splat;
mod strips;
#[cfg(test)]
mod test_values;
mod watchdog;

pub use backend::{CODE_CACHE_LIMITS, CpuBackend, CpuOptions};
pub use lower::MAX_FRAME_BYTES;

/// The stack of each worker thread that runs kernels: far more than a kernel's frame may take
/// ([`MAX_FRAME_BYTES`]) plus the host's frames below it.
pub const WORKER_STACK_BYTES: usize = 8 << 20;
pub use compile::{CompiledKernel, Compiler, MODULE_CODE_BYTES, StoreView};
pub use deferred::HeldRow;
pub use error::{Error, Result};
pub use function_cache::{FunctionCache, FunctionCacheStats};
pub use launch::TaskOutput;
pub use memory::Memory;
pub use pool::WorkerPool;
pub use simd_path::SimdPath;
