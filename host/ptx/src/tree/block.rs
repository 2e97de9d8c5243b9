//! The canonical tree of a rank-1 loop's leaves in a fixed number of launches: PTX text
//! written here (it needs shared memory and barriers, which the kernel IR has not), one
//! module per operator and type with two entries.
//!
//! - `weft_tree_pass` (blocks of [`THREADS`] threads): over the complete nodes of level `L`
//!   of the range (virtual node `v` covers global leaves `[v 2^L, (v+1) 2^L)`, and its value
//!   lies at the local index of its first leaf), each block takes an aligned run of
//!   [`BLOCK`] virtual nodes, eight adjacent ones per thread, loaded together. Each thread
//!   combines its eight's first three levels in registers, then the block the threads'
//!   first nodes in shared memory, level after level with a barrier between; a pair is
//!   combined when the node it forms lies wholly inside the range: the levels
//!   `L .. L + 13` of the in-place level launches ([`super::plan`]) at once. It writes back
//!   only the nodes it made that nothing above absorbed. Passes at `L = 0, 13, 26, ...`
//!   leave every complete aligned node of the range at its first leaf, as the level
//!   launches do. (One node per thread and ten levels a pass kept too few loads in flight:
//!   74 us for the 4M leaves of a dot product on an H200, 0.43 TB/s.)
//! - `weft_tree_fold` (one thread): walks the maximal aligned nodes of the range left to
//!   right ([`weft_ir::reduction::aligned_nodes`]' order) into a node buffer (which the host
//!   may read in one copy), and, where asked, folds them right to left (the canonical tree's
//!   root over a whole view: each node passes up unchanged until it meets its left
//!   neighbour) and folds the root into the 0-d target: `target = target op root`, as the
//!   executor folds a result.
//! - `weft_tree_pass_fold`: a pass whose one block's thread 0 then runs the fold's walk,
//!   folding (the last pass of a whole view's reduction that fits one block: one launch
//!   fewer, and no wait for a second one between them).

use weft_ir::{DType, ReduceOp};

/// Virtual nodes per block of a pass: `2^LEVELS`.
pub const BLOCK: u64 = 1 << LEVELS;

/// Levels one pass combines: [`THREAD_LEVELS`] in each thread's registers, then ten across
/// the block in shared memory.
pub const LEVELS: u32 = THREAD_LEVELS + 10;

/// Levels a thread combines in registers, over its `2^THREAD_LEVELS` adjacent virtual nodes
/// (loaded together, so that a pass keeps many loads in flight).
pub const THREAD_LEVELS: u32 = 3;

/// Threads per block of a pass.
pub const THREADS: u64 = BLOCK >> THREAD_LEVELS;

/// The most nodes the fold entry writes: two per level of a 64-bit range.
pub const MAX_NODES: u64 = 128;

/// The pass entry (see the module's documentation): thread `t` of block `b` owns the virtual
/// nodes `base + i`, `i < 8`, `base = ((v0 >> LEVELS) + b) << LEVELS + 8 t`. It combines their
/// first three levels in registers (the pair at `i`, `i + h` when the node `[base + i,
/// base + i + 2h)` lies inside the range: the left one is *made*, the right one *absorbed*),
/// then puts its first node's value in shared memory for the block's ten levels over the
/// threads' first nodes, and writes back each of its nodes made and not absorbed.
fn pass_entry(t: &str, size: u64, shift: u32, inst: &str, fold: bool) -> String {
    let per = 1u64 << THREAD_LEVELS;
    let mut c = String::new();
    let mut line = |l: String| {
        c.push_str("    ");
        c.push_str(&l);
        c.push('\n');
    };
    line("ld.param.u64 %rd1, [buf];".into());
    line("cvta.to.global.u64 %rd1, %rd1;".into());
    line("ld.param.u64 %rd2, [start];".into());
    line("ld.param.u64 %rd3, [count];".into());
    line("ld.param.u64 %rd4, [level];".into());
    line("cvt.u32.u64 %r1, %rd4;".into());
    line("// v0 = ceil(start / 2^L), v1 = floor((start + count) / 2^L): the complete nodes".into());
    line("mov.u64 %rd5, 1;".into());
    line("shl.b64 %rd5, %rd5, %r1;".into());
    line("add.s64 %rd6, %rd2, %rd5;".into());
    line("sub.s64 %rd6, %rd6, 1;".into());
    line("shr.u64 %rd6, %rd6, %r1;".into());
    line("add.s64 %rd7, %rd2, %rd3;".into());
    line("shr.u64 %rd7, %rd7, %r1;".into());
    line("// base = ((v0 >> LEVELS) + block) << LEVELS + 8 thread".into());
    line("mov.u32 %r2, %ctaid.x;".into());
    line("cvt.u64.u32 %rd8, %r2;".into());
    line(format!("shr.u64 %rd9, %rd6, {LEVELS};"));
    line("add.s64 %rd9, %rd9, %rd8;".into());
    line(format!("shl.b64 %rd9, %rd9, {LEVELS};"));
    line("mov.u32 %r3, %tid.x;".into());
    line("cvt.u64.u32 %rd10, %r3;".into());
    line(format!("shl.b64 %rd11, %rd10, {THREAD_LEVELS};"));
    line("add.s64 %rd11, %rd9, %rd11;".into());
    // Node i: %node{i} its virtual index, %inside{i} inside the range, %after{i} at or after v0,
    // %a{i} its address, %v{i} its value; %made{i} made, %absorbed{i} absorbed.
    line("// the thread's nodes: in the range, their values loaded together".into());
    for i in 0..per {
        line(format!("add.s64 %node{i}, %rd11, {i};"));
        line(format!("setp.ge.u64 %after{i}, %node{i}, %rd6;"));
        line(format!("setp.lt.u64 %inside{i}, %node{i}, %rd7;"));
        line(format!("and.pred %inside{i}, %inside{i}, %after{i};"));
        line(format!("shl.b64 %a{i}, %node{i}, %r1;"));
        line(format!("sub.s64 %a{i}, %a{i}, %rd2;"));
        line(format!("shl.b64 %a{i}, %a{i}, {shift};"));
        line(format!("add.s64 %a{i}, %rd1, %a{i};"));
        // False (a comparison of a register with itself).
        line(format!("setp.ne.u64 %made{i}, %rd10, %rd10;"));
        line(format!("setp.ne.u64 %absorbed{i}, %rd10, %rd10;"));
    }
    for i in 0..per {
        line(format!("@%inside{i} ld.global.{t} %v{i}, [%a{i}];"));
    }
    line("// levels 1, 2, 4 in registers: node i takes node i + h if [i, i + 2h) is inside".into());
    let mut h = 1;
    while h < per {
        for i in (0..per).step_by(2 * h as usize) {
            line(format!("add.s64 %far, %node{i}, {};", 2 * h));
            line("setp.le.u64 %join, %far, %rd7;".into());
            line(format!("and.pred %join, %join, %after{i};"));
            line(format!("@%join {inst} %v{i}, %v{i}, %v{};", i + h));
            line(format!("or.pred %made{i}, %made{i}, %join;"));
            line(format!(
                "or.pred %absorbed{}, %absorbed{}, %join;",
                i + h,
                i + h
            ));
        }
        h *= 2;
    }
    line("// the first node into shared memory: weft_sh[thread]".into());
    line("mov.u64 %rd13, weft_sh;".into());
    line(format!("shl.b64 %rd14, %rd10, {shift};"));
    line("add.s64 %rd14, %rd13, %rd14;".into());
    line(format!("@%inside0 st.shared.{t} [%rd14], %v0;"));
    line("bar.sync 0;".into());
    line("mov.u64 %rd15, 1;".into());
    line("$level:".into());
    line(
        "// h = %rd15 threads (8h nodes): a left one (thread mod 2h = 0) takes its right one"
            .into(),
    );
    line("// if its node of 16h lies inside".into());
    line("shl.b64 %rd16, %rd15, 1;".into());
    line("sub.s64 %rd17, %rd16, 1;".into());
    line("and.b64 %rd17, %rd10, %rd17;".into());
    line("setp.eq.u64 %p3, %rd17, 0;".into());
    line(format!("shl.b64 %rd18, %rd16, {THREAD_LEVELS};"));
    line("add.s64 %rd18, %rd11, %rd18;".into());
    line("setp.le.u64 %p4, %rd18, %rd7;".into());
    line("and.pred %p3, %p3, %p4;".into());
    line("and.pred %p3, %p3, %after0;".into());
    line(format!("shl.b64 %rd19, %rd15, {shift};"));
    line("add.s64 %rd19, %rd14, %rd19;".into());
    line(format!("@%p3 ld.shared.{t} %f1, [%rd14];"));
    line(format!("@%p3 ld.shared.{t} %f2, [%rd19];"));
    line(format!("@%p3 {inst} %f1, %f1, %f2;"));
    line(format!("@%p3 st.shared.{t} [%rd14], %f1;"));
    line("or.pred %made0, %made0, %p3;".into());
    line(
        "// a right one (thread mod 2h = h) is absorbed if [node - 8h, node + 8h) is inside".into(),
    );
    line("setp.eq.u64 %p6, %rd17, %rd15;".into());
    line(format!("shl.b64 %rd20, %rd15, {THREAD_LEVELS};"));
    line("sub.s64 %rd21, %rd11, %rd20;".into());
    line("setp.ge.u64 %p7, %rd21, %rd6;".into());
    line("setp.le.u64 %p8, %rd21, %rd11;".into());
    line("and.pred %p7, %p7, %p8;".into());
    line("add.s64 %rd22, %rd11, %rd20;".into());
    line("setp.le.u64 %p2, %rd22, %rd7;".into());
    line("and.pred %p6, %p6, %p7;".into());
    line("and.pred %p6, %p6, %p2;".into());
    line("or.pred %absorbed0, %absorbed0, %p6;".into());
    line("bar.sync 0;".into());
    line("mov.u64 %rd15, %rd16;".into());
    line(format!("setp.lt.u64 %p3, %rd15, {THREADS};"));
    line("@%p3 bra.uni $level;".into());
    line("// write back each node made that nothing above absorbed".into());
    line(format!("@%inside0 ld.shared.{t} %v0, [%rd14];"));
    for i in 0..per {
        line(format!("not.pred %join, %absorbed{i};"));
        line(format!("and.pred %join, %join, %made{i};"));
        line(format!("and.pred %join, %join, %inside{i};"));
        line(format!("@%join st.global.{t} [%a{i}], %v{i};"));
    }
    if fold {
        line("// the last pass, one block: thread 0 walks and folds the nodes".into());
        line("bar.sync 0;".into());
        line("setp.ne.u64 %p3, %rd10, 0;".into());
        line("@%p3 bra.uni $done;".into());
        for l in fold_walk(t, shift, inst, ["%fp", "%fr", "%frd", "%ff"], None).lines() {
            line(l.trim().to_string());
        }
        line("$done:".into());
    }
    line("ret;".into());
    let regs = |prefix: &str, ty: &str| -> String {
        (0..per)
            .map(|i| format!("    .reg .{ty} {prefix}{i};\n"))
            .collect()
    };
    let (name, extra, fold_regs) = if fold {
        (
            "weft_tree_pass_fold",
            ",\n    .param .u64 nodes,\n    .param .u64 target",
            format!(
                "    .reg .pred %fp<4>;\n    .reg .u32 %fr<6>;\n    .reg .u64 %frd<20>;\n    \
                 .reg .{t} %ff<4>;\n"
            ),
        )
    } else {
        ("weft_tree_pass", "", String::new())
    };
    format!(
        ".visible .entry {name}(
    .param .u64 buf,
    .param .u64 start,
    .param .u64 count,
    .param .u64 level{extra}
)
.maxntid {THREADS}, 1, 1
{{
{fold_regs}    .reg .pred %p<10>;
    .reg .pred %join;
    .reg .u32 %r<8>;
    .reg .u64 %rd<24>;
    .reg .u64 %far;
    .reg .{t} %f<3>;
{ra}{a}{v}{pg}{pv}{pm}{pa}    .shared .align 8 .b8 weft_sh[{shared}];
{c}}}
",
        ra = regs("%node", "u64"),
        a = regs("%a", "u64"),
        v = regs("%v", t),
        pg = regs("%after", "pred"),
        pv = regs("%inside", "pred"),
        pm = regs("%made", "pred"),
        pa = regs("%absorbed", "pred"),
        shared = THREADS * size,
    )
}

/// The fold's walk (see the module documentation): the maximal aligned nodes of the range
/// (`start`, `count` parameters) into `nodes` in order, then, where `fold` (a parameter's
/// name; none: always) asks, folded right to left into the root and the root into `target`;
/// its registers named by the prefixes given (predicates, 32-bit, 64-bit, values), so the last
/// pass can run it after its levels.
fn fold_walk(t: &str, shift: u32, inst: &str, regs: [&str; 4], fold: Option<&str>) -> String {
    let [p, r, rd, f] = regs;
    let fold = match fold {
        Some(param) => format!("ld.param.u64 {rd}6, [{param}];"),
        None => format!("mov.u64 {rd}6, 1;"),
    };
    format!(
        "    ld.param.u64 {rd}1, [buf];\n\
    cvta.to.global.u64 {rd}1, {rd}1;\n\
    ld.param.u64 {rd}2, [start];\n\
    ld.param.u64 {rd}3, [count];\n\
    ld.param.u64 {rd}4, [nodes];\n\
    cvta.to.global.u64 {rd}4, {rd}4;\n\
    ld.param.u64 {rd}5, [target];\n\
    cvta.to.global.u64 {rd}5, {rd}5;\n\
    {fold}\n\
    // pos = start, end = start + count, k = 0\n\
    mov.u64 {rd}7, {rd}2;\n\
    add.s64 {rd}8, {rd}2, {rd}3;\n\
    mov.u64 {rd}9, 0;\n\
$walk:\n\
    setp.ge.u64 {p}1, {rd}7, {rd}8;\n\
    @{p}1 bra.uni $walked;\n\
    // level = min(trailing zeros of pos, floor(log2(end - pos)))\n\
    brev.b64 {rd}10, {rd}7;\n\
    clz.b64 {r}1, {rd}10;\n\
    sub.s64 {rd}11, {rd}8, {rd}7;\n\
    clz.b64 {r}2, {rd}11;\n\
    mov.u32 {r}3, 63;\n\
    sub.s32 {r}3, {r}3, {r}2;\n\
    min.u32 {r}4, {r}1, {r}3;\n\
    // nodes[k] = buf[pos - start] (from the L2: other threads of the block wrote it)\n\
    sub.s64 {rd}12, {rd}7, {rd}2;\n\
    shl.b64 {rd}12, {rd}12, {shift};\n\
    add.s64 {rd}12, {rd}1, {rd}12;\n\
    ld.global.cg.{t} {f}1, [{rd}12];\n\
    shl.b64 {rd}13, {rd}9, {shift};\n\
    add.s64 {rd}13, {rd}4, {rd}13;\n\
    st.global.{t} [{rd}13], {f}1;\n\
    add.s64 {rd}9, {rd}9, 1;\n\
    mov.u64 {rd}14, 1;\n\
    shl.b64 {rd}14, {rd}14, {r}4;\n\
    add.s64 {rd}7, {rd}7, {rd}14;\n\
    bra.uni $walk;\n\
$walked:\n\
    setp.eq.u64 {p}1, {rd}6, 0;\n\
    setp.eq.u64 {p}2, {rd}9, 0;\n\
    or.pred {p}1, {p}1, {p}2;\n\
    @{p}1 bra.uni $done;\n\
    // the root: the nodes folded right to left\n\
    sub.s64 {rd}9, {rd}9, 1;\n\
    shl.b64 {rd}13, {rd}9, {shift};\n\
    add.s64 {rd}13, {rd}4, {rd}13;\n\
    ld.global.{t} {f}1, [{rd}13];\n\
$fold:\n\
    setp.eq.u64 {p}1, {rd}9, 0;\n\
    @{p}1 bra.uni $folded;\n\
    sub.s64 {rd}9, {rd}9, 1;\n\
    shl.b64 {rd}13, {rd}9, {shift};\n\
    add.s64 {rd}13, {rd}4, {rd}13;\n\
    ld.global.{t} {f}2, [{rd}13];\n\
    {inst} {f}1, {f}2, {f}1;\n\
    bra.uni $fold;\n\
$folded:\n\
    // target = target op root\n\
    ld.global.{t} {f}3, [{rd}5];\n\
    {inst} {f}3, {f}3, {f}1;\n\
    st.global.{t} [{rd}5], {f}3;\n\
"
    )
}

/// The module of `op` (`sum` or `prod`) on `dtype` (`f32` or `f64`): PTX text with the
/// entries `weft_tree_pass`, `weft_tree_pass_fold` (a last pass of one block whose thread 0
/// then runs the fold's walk, always folding) and `weft_tree_fold`.
pub fn module(op: ReduceOp, dtype: DType) -> String {
    let (t, size, shift) = match dtype {
        DType::F32 => ("f32", 4, 2),
        _ => ("f64", 8, 3),
    };
    let inst = match op {
        ReduceOp::Prod => format!("mul.rn.{t}"),
        _ => format!("add.rn.{t}"),
    };
    format!(
        "//
// weft: the canonical tree of a reduction ({name} {t}) in shared memory
//
.version {version}
.target {target}
.address_size 64

{pass}
{pass_fold}
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
{walk}$done:
    ret;
}}
",
        name = op.name(),
        pass = pass_entry(t, size, shift, &inst, false),
        pass_fold = pass_entry(t, size, shift, &inst, true),
        walk = fold_walk(t, shift, &inst, ["%p", "%r", "%rd", "%f"], Some("fold")),
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
