//! The canonical tree of a rank-1 loop's leaves, reduced on the device: a plan of level
//! launches, each a tiny kernel emitted from the IR like any other, and the positions of the
//! nodes to read back, so that a dot product moves a handful of values to the host instead of
//! one per point.
//!
//! The leaves of points `s .. s + n` (global coordinates) lie at local indices `0 .. n` of a
//! buffer. Level `l` (`h = 2^l`) combines, in place, each pair of aligned nodes of level `l`
//! that form a node of level `l + 1` lying wholly inside the range: `L[a] = L[a] op L[a + h]`
//! for every local `a` with `s + a` a multiple of `2h` and `a + 2h <= n`. The launcher binds
//! the kernel's two parameters to the left and right halves of those pairs (offset `a0` and
//! `a0 + h`, stride `2h`), so every iteration touches its own two elements. After every
//! level, the complete aligned nodes of the range, the ones
//! [`weft_ir::reduction::aligned_nodes`] emits, hold their values at their first leaf.

use weft_ir::{DType, Kernel, ReduceOp};

/// One level's launch: pairs of nodes at local `offset + k * stride` (left) and
/// `offset + k * stride + stride / 2` (right), for `k < count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelStep {
    /// The first pair's left node, a local index.
    pub offset: u64,
    /// The distance between pairs (`2h`).
    pub stride: u64,
    /// How many pairs.
    pub count: u64,
}

/// A complete aligned node of the range, after every level has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAt {
    /// Its level.
    pub level: u32,
    /// Its index at that level (it covers global `[index 2^level, (index+1) 2^level)`).
    pub index: u64,
    /// Where its value is: a local index of the buffer.
    pub local: u64,
}

/// The level launches and the nodes to read for leaves of global coordinates `s .. s + n`.
pub fn plan(s: u64, n: u64) -> (Vec<LevelStep>, Vec<NodeAt>) {
    let mut steps = Vec::new();
    let mut level = 0u32;
    while level < 63 && (2u64 << level) <= n {
        let pair = 2u64 << level;
        let first = s.div_ceil(pair) * pair - s;
        if first + pair <= n {
            steps.push(LevelStep {
                offset: first,
                stride: pair,
                count: (n - first) / pair,
            });
        }
        level += 1;
    }
    // The maximal aligned blocks, as `aligned_nodes` walks them.
    let mut nodes = Vec::new();
    let (mut pos, end) = (s, s + n);
    while pos < end {
        let left = end - pos;
        let aligned = if pos == 0 { 63 } else { pos.trailing_zeros() };
        let level = aligned.min(63 - left.leading_zeros());
        nodes.push(NodeAt {
            level,
            index: pos >> level,
            local: pos - s,
        });
        pos += 1u64 << level;
    }
    (steps, nodes)
}

/// The level kernel of `op` on `dtype`: `left[i] = left[i] op right[i]` over `left`.
pub fn level_kernel(op: ReduceOp, dtype: DType) -> Result<Kernel, String> {
    let (name, inst) = match op {
        ReduceOp::Prod => ("prod", "mul"),
        _ => ("sum", "add"),
    };
    let t = dtype.name();
    let text = format!(
        "kernel @weft.gpu.tree.{name}.{t}(%left: store<{t}, 1, readwrite>, \
         %right: store<{t}, 1, read>) {{\n  parallel %left (%i) {{\n    %a = load %left[%i]\n    \
         %b = load %right[%i]\n    %c = {inst} %a, %b\n    store %left[%i], %c\n  }}\n}}\n"
    );
    weft_ir::text::parse(&text).map_err(|e| format!("the tree level kernel: {e}"))
}
