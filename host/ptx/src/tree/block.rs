//! The canonical tree of a rank-1 loop's leaves in a fixed number of launches: PTX text
//! written here (it needs shared memory and barriers, which the kernel IR has not), one
//! module per operator and type with two entries.
//!
//! - `weft_tree_pass` (blocks of [`BLOCK`] threads): over the complete nodes of level `L` of
//!   the range (virtual node `v` covers global leaves `[v 2^L, (v+1) 2^L)`, and its value
//!   lies at the local index of its first leaf), each block takes an aligned run of
//!   [`BLOCK`] virtual nodes into shared memory and combines, level after level with a
//!   barrier between, every pair that forms a node lying wholly inside the range: the levels
//!   `L .. L + 10` of the in-place level launches ([`super::plan`]) at once. It writes back
//!   only the nodes it made that nothing above absorbed. Passes at `L = 0, 10, 20, ...` leave
//!   every complete aligned node of the range at its first leaf, as the level launches do.
//! - `weft_tree_fold` (one thread): walks the maximal aligned nodes of the range left to
//!   right ([`weft_ir::reduction::aligned_nodes`]' order) into a node buffer (which the host
//!   may read in one copy), and, where asked, folds them right to left (the canonical tree's
//!   root over a whole view: each node passes up unchanged until it meets its left
//!   neighbour) and folds the root into the 0-d target: `target = target op root`, as the
//!   executor folds a result.

use weft_ir::{DType, ReduceOp};

/// Threads per block of a pass, and virtual nodes per block: `2^LEVELS`.
pub const BLOCK: u64 = 1 << LEVELS;

/// Levels one pass combines.
pub const LEVELS: u32 = 10;

/// The most nodes the fold entry writes: two per level of a 64-bit range.
pub const MAX_NODES: u64 = 128;

/// The module of `op` (`sum` or `prod`) on `dtype` (`f32` or `f64`): PTX text with the
/// entries `weft_tree_pass` and `weft_tree_fold`.
pub fn module(op: ReduceOp, dtype: DType) -> String {
    let (t, size, shift) = match dtype {
        DType::F32 => ("f32", 4, 2),
        _ => ("f64", 8, 3),
    };
    let inst = match op {
        ReduceOp::Prod => format!("mul.rn.{t}"),
        _ => format!("add.rn.{t}"),
    };
    let shared = BLOCK * size;
    format!(
        "//
// weft: the canonical tree of a reduction ({name} {t}) in shared memory
//
.version {version}
.target {target}
.address_size 64

.visible .entry weft_tree_pass(
    .param .u64 buf,
    .param .u64 start,
    .param .u64 count,
    .param .u64 level
)
.maxntid {BLOCK}, 1, 1
{{
    .reg .pred %p<8>;
    .reg .u32 %r<8>;
    .reg .u64 %rd<24>;
    .reg .{t} %f<3>;
    .shared .align 8 .b8 weft_sh[{shared}];
    ld.param.u64 %rd1, [buf];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [start];
    ld.param.u64 %rd3, [count];
    ld.param.u64 %rd4, [level];
    cvt.u32.u64 %r1, %rd4;
    // v0 = ceil(start / 2^L), v1 = floor((start + count) / 2^L): the complete nodes
    mov.u64 %rd5, 1;
    shl.b64 %rd5, %rd5, %r1;
    add.s64 %rd6, %rd2, %rd5;
    sub.s64 %rd6, %rd6, 1;
    shr.u64 %rd6, %rd6, %r1;
    add.s64 %rd7, %rd2, %rd3;
    shr.u64 %rd7, %rd7, %r1;
    // this thread's virtual node v = ((v0 >> LEVELS) + block) << LEVELS + thread
    mov.u32 %r2, %ctaid.x;
    cvt.u64.u32 %rd8, %r2;
    shr.u64 %rd9, %rd6, {LEVELS};
    add.s64 %rd9, %rd9, %rd8;
    shl.b64 %rd9, %rd9, {LEVELS};
    mov.u32 %r3, %tid.x;
    cvt.u64.u32 %rd10, %r3;
    add.s64 %rd11, %rd9, %rd10;
    setp.ge.u64 %p1, %rd11, %rd6;
    setp.lt.u64 %p2, %rd11, %rd7;
    and.pred %p1, %p1, %p2;
    // its value: buf[v 2^L - start]; its slot: weft_sh[thread]
    shl.b64 %rd12, %rd11, %r1;
    sub.s64 %rd12, %rd12, %rd2;
    shl.b64 %rd12, %rd12, {shift};
    add.s64 %rd12, %rd1, %rd12;
    mov.u64 %rd13, weft_sh;
    shl.b64 %rd14, %rd10, {shift};
    add.s64 %rd14, %rd13, %rd14;
    @%p1 ld.global.{t} %f1, [%rd12];
    @%p1 st.shared.{t} [%rd14], %f1;
    // made: this thread combined a pair; absorbed: its node went into its left neighbour's
    mov.u32 %r4, 0;
    mov.u32 %r5, 0;
    bar.sync 0;
    mov.u64 %rd15, 1;
$level:
    // h = %rd15: a left node at v (v mod 2h = 0) takes its right one if [v, v + 2h) is inside
    shl.b64 %rd16, %rd15, 1;
    sub.s64 %rd17, %rd16, 1;
    and.b64 %rd17, %rd10, %rd17;
    setp.eq.u64 %p3, %rd17, 0;
    add.s64 %rd18, %rd11, %rd16;
    setp.le.u64 %p4, %rd18, %rd7;
    setp.ge.u64 %p5, %rd11, %rd6;
    and.pred %p3, %p3, %p4;
    and.pred %p3, %p3, %p5;
    shl.b64 %rd19, %rd15, {shift};
    add.s64 %rd19, %rd14, %rd19;
    @%p3 ld.shared.{t} %f1, [%rd14];
    @%p3 ld.shared.{t} %f2, [%rd19];
    @%p3 {inst} %f1, %f1, %f2;
    @%p3 st.shared.{t} [%rd14], %f1;
    @%p3 mov.u32 %r4, 1;
    // a right node at v (v mod 2h = h) is absorbed if [v - h, v + h) is inside
    setp.eq.u64 %p6, %rd17, %rd15;
    sub.s64 %rd20, %rd11, %rd15;
    setp.ge.u64 %p7, %rd20, %rd6;
    add.s64 %rd21, %rd11, %rd15;
    setp.le.u64 %p2, %rd21, %rd7;
    and.pred %p6, %p6, %p7;
    and.pred %p6, %p6, %p2;
    @%p6 mov.u32 %r5, 1;
    bar.sync 0;
    mov.u64 %rd15, %rd16;
    setp.lt.u64 %p3, %rd15, {BLOCK};
    @%p3 bra.uni $level;
    // write back what this thread made, unless a node above absorbed it
    setp.ne.u32 %p3, %r4, 0;
    setp.eq.u32 %p4, %r5, 0;
    and.pred %p3, %p3, %p4;
    and.pred %p3, %p3, %p1;
    @%p3 ld.shared.{t} %f1, [%rd14];
    @%p3 st.global.{t} [%rd12], %f1;
    ret;
}}

.visible .entry weft_tree_fold(
    .param .u64 buf,
    .param .u64 start,
    .param .u64 count,
    .param .u64 nodes,
    .param .u64 target,
    .param .u64 fold
)
.maxntid 1, 1, 1
{{
    .reg .pred %p<4>;
    .reg .u32 %r<6>;
    .reg .u64 %rd<20>;
    .reg .{t} %f<4>;
    ld.param.u64 %rd1, [buf];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [start];
    ld.param.u64 %rd3, [count];
    ld.param.u64 %rd4, [nodes];
    cvta.to.global.u64 %rd4, %rd4;
    ld.param.u64 %rd5, [target];
    cvta.to.global.u64 %rd5, %rd5;
    ld.param.u64 %rd6, [fold];
    // pos = start, end = start + count, k = 0
    mov.u64 %rd7, %rd2;
    add.s64 %rd8, %rd2, %rd3;
    mov.u64 %rd9, 0;
$walk:
    setp.ge.u64 %p1, %rd7, %rd8;
    @%p1 bra.uni $walked;
    // level = min(trailing zeros of pos, floor(log2(end - pos)))
    brev.b64 %rd10, %rd7;
    clz.b64 %r1, %rd10;
    sub.s64 %rd11, %rd8, %rd7;
    clz.b64 %r2, %rd11;
    mov.u32 %r3, 63;
    sub.s32 %r3, %r3, %r2;
    min.u32 %r4, %r1, %r3;
    // nodes[k] = buf[pos - start]
    sub.s64 %rd12, %rd7, %rd2;
    shl.b64 %rd12, %rd12, {shift};
    add.s64 %rd12, %rd1, %rd12;
    ld.global.{t} %f1, [%rd12];
    shl.b64 %rd13, %rd9, {shift};
    add.s64 %rd13, %rd4, %rd13;
    st.global.{t} [%rd13], %f1;
    add.s64 %rd9, %rd9, 1;
    mov.u64 %rd14, 1;
    shl.b64 %rd14, %rd14, %r4;
    add.s64 %rd7, %rd7, %rd14;
    bra.uni $walk;
$walked:
    setp.eq.u64 %p1, %rd6, 0;
    setp.eq.u64 %p2, %rd9, 0;
    or.pred %p1, %p1, %p2;
    @%p1 bra.uni $done;
    // the root: the nodes folded right to left
    sub.s64 %rd9, %rd9, 1;
    shl.b64 %rd13, %rd9, {shift};
    add.s64 %rd13, %rd4, %rd13;
    ld.global.{t} %f1, [%rd13];
$fold:
    setp.eq.u64 %p1, %rd9, 0;
    @%p1 bra.uni $folded;
    sub.s64 %rd9, %rd9, 1;
    shl.b64 %rd13, %rd9, {shift};
    add.s64 %rd13, %rd4, %rd13;
    ld.global.{t} %f2, [%rd13];
    {inst} %f1, %f2, %f1;
    bra.uni $fold;
$folded:
    // target = target op root
    ld.global.{t} %f3, [%rd5];
    {inst} %f3, %f3, %f1;
    st.global.{t} [%rd5], %f3;
$done:
    ret;
}}
",
        name = op.name(),
        version = crate::emit::PTX_VERSION,
        target = crate::emit::PTX_TARGET,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails, never skips, where `ptxas` is missing (`scripts/test` installs it).
    #[test]
    fn every_module_assembles() {
        let ptxas = crate::ptxas::find().expect("ptxas (scripts/test installs it)");
        for op in [ReduceOp::Sum, ReduceOp::Prod] {
            for dtype in [DType::F32, DType::F64] {
                let text = module(op, dtype);
                for arch in ["sm_80", "sm_90"] {
                    crate::ptxas::assemble_with(&ptxas, &text, arch, "tree")
                        .unwrap_or_else(|e| panic!("{} {dtype:?} on {arch}: {e}", op.name()));
                }
            }
        }
    }
}
