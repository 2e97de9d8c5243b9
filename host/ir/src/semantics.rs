//! The semantics every back end keeps: the one place that states them.
//!
//! A kernel means the same thing on every back end (the Cranelift CPU back end today, the PTX
//! back end and every MPI rank later). Where a back end cannot give the same bits, this module
//! says so; nothing else may differ. The validator ([`crate::validate()`]) enforces the limits,
//! the reference interpreter ([`crate::interp`]) implements the rest, and back-end tests compare
//! against it.
//!
//! # Limits
//! - A store parameter has rank at most [`MAX_RANK`]; a task's launch domain has rank at most
//!   [`MAX_LAUNCH_RANK`].
//! - Loops nest at most [`MAX_LOOP_DEPTH`] deep; value ids are below [`MAX_VALUE_ID`]; a
//!   kernel has at most [`MAX_PARAMS`] parameters and [`MAX_INSTS`] instructions, and keeps
//!   at most [`MAX_LIVE`] values live at once.
//!
//! # Integers
//! - Integer arithmetic wraps (two's complement). Division or remainder by zero gives 0, and
//!   `i64::MIN / -1` wraps; compiled code never traps.
//! - Shifts (`shl`, `shr`) take the shift amount modulo the operand's bit width; `shr` is
//!   logical (it shifts zeros in).
//!
//! # Floats
//! - Arithmetic is IEEE 754 with round-to-nearest-even, one rounding per operation: no
//!   reassociation, no flush of subnormals, and no multiply and add contracted into one
//!   operation. A fused multiply-add exists only where the IR says `fma` (`a * b + c`
//!   rounded once, as IEEE 754's `fusedMultiplyAdd`), and every back end computes that
//!   exactly: the FMA instruction or a library `fma` on the CPU, `fma.rn` on the GPU,
//!   `mul_add` in the interpreter. [`crate::product::matmul`] uses it.
//! - Float remainder follows C's `fmod` (`x rem 0.0` is NaN).
//! - Float `min`/`max` (operators and reductions) give NaN if either operand is NaN and order
//!   `-0.0` below `+0.0`.
//! - The sign and payload of a NaN that arithmetic produces are unspecified: back ends (and
//!   their optimizers) may differ there, and only there. An operation on a single NaN that
//!   passes it on (`neg`, `abs`, `select`, a load and store, `bitcast`) keeps its payload.
//! - Math functions (`exp`, `log`, `erf`, ...) are lowered to plain arithmetic by
//!   [`crate::passes::math::lower_math`] before any back end sees them, so every back end
//!   computes them with the same operations.
//!
//! # Conversions
//! - Casts from float to integer truncate toward zero and saturate; NaN becomes 0.
//! - Casts from bool give 0 or 1; casts to bool compare with zero (NaN is true). A `bool` in
//!   memory is true when its byte is nonzero; stores write 0 or 1.
//! - `bitcast` keeps every bit, NaN payloads included.
//!
//! # Bools
//! - `min`/`and` and `max`/`or` are the logical operators; the `sum` and `max` reductions are
//!   "any", `prod` and `min` are "all".
//!
//! # Memory
//! - Every index is checked against the extent of its store's sub-store (or proven in bounds).
//!   An out-of-bounds access stops the kernel with an error that names the kernel; it never
//!   touches memory outside the stores handed to the task. After such a fault the stores the
//!   kernel writes hold unspecified values.
//!
//! # Reduction order
//! **The canonical order** is defined in [`crate::reduction`]: for each reduced element, the
//! points' contributions (each point's reductions into it folded in execution order) are
//! combined by a fixed aligned pairwise tree over the points' coordinates in the task's view,
//! one tree per dimension from the innermost out, padded with the operator's exact identity;
//! the result is `old op tree`. Because the tree depends only on coordinates, any split of
//! the points (lanes, threads, pieces, GPU blocks, ranks) can compute complete subtrees and
//! merge them ([`crate::reduction::Partial`]) into the same bits. It is the order every back
//! end is to keep; `weft-ir`'s tests check the merging against the definition.
//!
//! **Which reductions keep it, and how.** The order matters only for float `sum` and `prod`:
//! integer operators wrap, and `min`, `max` and the `bool` operators are exact, so every order
//! gives the same bits (up to the payload of a NaN, unspecified as everywhere).
//! - *Float sums and products into 0-d stores* (`sum`, `prod`, `dot` of more than 16,384
//!   elements, `norm`, `mean`): every back end keeps the canonical order, whatever the thread count, the number of pieces a
//!   launch is cut into, the SIMD path (scalar, 128-bit, AVX-512) or, later, the GPU and the
//!   number of MPI ranks. The CPU back end (`weft-cpu`'s `leaves` module) has each point leave
//!   its contribution in a chunk-private buffer, reduces the buffers into complete subtrees,
//!   and hands those to the executor, which merges the parts of every point and folds once
//!   per task; the reference interpreter computes the definition directly. So each loop's
//!   result is folded into its store when the task ends (a kernel cannot read a store it
//!   reduces into, and fusion never puts a reader of it in the same task).
//! - Two parallel loops whose float sums or products may reach one element do not fuse into
//!   one loop ([`crate::passes::fuse`]): each keeps its own tree.
//! - *Reductions carried by a sequential `for` loop* (a `matvec` row, a reduction over the
//!   last dimension of a store) are written out in the IR, so every back end computes exactly
//!   the order written. The order to write is the **lane order** that
//!   [`crate::builder::BodyBuilder::fold_lanes`] emits: the terms in
//!   [`crate::builder::FOLD_LANES`] (8) interleaved partial results, each folded in index
//!   order from the operator's identity, the terms after the last whole block of 8 in a ninth,
//!   and the partials combined by the fixed tree
//!   `(((s0 op s1) op (s2 op s3)) op ((s4 op s5) op (s6 op s7))) op tail`. Every vector width
//!   that back ends use for 32- and 64-bit lanes (2, 4, 8) divides 8, so a back end may run
//!   the partials as vector lanes (the CPU back end does, in 128-bit vectors, and for `f64`
//!   in AVX2 and AVX-512 bodies where the CPU has them: `weft-cpu`'s `lanes` and
//!   `wide::fold` modules) and a GPU may give each partial its own thread, with the same bits. A
//!   row is never split between threads, pieces or ranks, so neither changes the result.
//!   `numeric`'s `matvec` and reductions over one trailing dimension use it, and so does its
//!   `dot` of at most 16,384 elements (`numeric`'s `SMALL_DOT`), on one point, each term added
//!   to its partial by one `fma` (`fold_lanes_fma`, as BLAS's `dot` kernels do): a loop of short
//!   dot products (a triangular solve's rows) then runs each step in one launch, the dot
//!   product fused with the scalar arithmetic that uses it. The dense
//!   product ([`crate::product::matmul`]) writes another order: each element one chain of
//!   `fma`s in increasing index from zero, the order in which BLAS-style register tiles
//!   (which keep a tile of results in vector registers while the terms stream through)
//!   compute it, so that a back end runs it at BLAS speed with the same bits.
//! - *Reductions written as trees*: a plugin may also write the canonical tree itself, as
//!   plain arithmetic. `numeric`'s float sums and products over axes whose result is small
//!   (smaller than what each element reduces) of an input of more than 65,536 elements do:
//!   tasks `treeblocks` each compute one level of 16-leaf aligned subtrees along one
//!   dimension (elements past the end count as the exact identity), the innermost reduced
//!   dimension first, and the result is `identity op tree`, as for a 0-d store; so they give
//!   the canonical bits everywhere. (A smaller input is one task over the result, each
//!   element the fold of its values in row-major order: a row is never split either.)
//! - *Element trees*: float sums and products of a rank-1 parallel loop into a store of rank
//!   1 or more, made once per point and element, inside `for` loops whose induction values
//!   index the element ([`crate::reduction::element_trees`]: `vecmat`'s and `vecmat_rows`'
//!   `y[r] += A[r, i] * x[i]`, so `X.T @ r` and `A @ x` for a wide `A`). Each element's
//!   points are cut into aligned blocks of `2^`[`crate::reduction::ELEMENT_BLOCK_LEVEL`]
//!   (4096) points in the view's coordinates; a block's contributions fold in point order
//!   from the exact identity, and the blocks combine by the aligned pairwise tree, the
//!   result folded into the element as for a 0-d store ([`crate::reduction::Partial::blocked`]).
//!   Blocks keep the hot loop a sequential fold into one row (the CPU back end runs a whole
//!   block as one call whose points all update the same row of leaves), while any split of
//!   the points still gives the same bits: a block that a piece, a chunk or (later) a rank
//!   holds only part of travels as its points' contributions, folded once they meet.
//! - **Not yet:** other float sums and products into stores of rank 1 or more through a
//!   parallel loop (at an index the point owns, at loaded data, or more than once per point
//!   and element), and CSR rows (written as one partial, folded in iteration order, not
//!   vectorized). On the CPU back end a reduction into an element that the parallel loop's
//!   rows own (indexed on dimension 0 by the loop's dimension-0 index) is performed in
//!   iteration order; otherwise the loop's rows are cut into chunks whose size depends only
//!   on the loop's shape, each chunk reduces in iteration order, and the chunks' results are
//!   combined in chunk order: the bits do not depend on the thread count or SIMD path, but
//!   may depend on the number of pieces.

/// The largest rank a store parameter (and so a store) may have.
pub const MAX_RANK: u32 = 16;

/// The largest rank of a task's launch domain.
pub const MAX_LAUNCH_RANK: usize = 8;

/// The deepest loops may nest (a parallel loop counts as one level).
pub const MAX_LOOP_DEPTH: usize = 64;

/// Value ids must be below this bound, so that a table indexed by value stays small.
pub const MAX_VALUE_ID: u32 = 1 << 24;

/// The most parameters a kernel may have (a launch passes one pointer or scalar per
/// parameter).
pub const MAX_PARAMS: usize = 1024;

/// The most instructions a kernel may have, nested bodies included, so that validation,
/// lowering, fusion analysis and compiling stay bounded in time and memory.
pub const MAX_INSTS: usize = 1 << 18;

/// The most values a kernel may keep live at once ([`crate::liveness::max_live`]): more
/// would make a register allocator's work grow faster than the kernel and its stack frame
/// large.
pub const MAX_LIVE: usize = 2048;
