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

pub mod block;

use weft_ir::{DType, Kernel, ReduceOp};

/// One launch of the level kernel: for each line `r < lines` and pair `k < count`, the node
/// at local `offset + r * line_stride + k * stride` (left) takes `left op right`, the right
/// one lying `right` further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelStep {
    /// The first pair's left node, a local index.
    pub offset: u64,
    /// From a left node to its right one.
    pub right: u64,
    /// The distance between pairs.
    pub stride: u64,
    /// How many pairs per line.
    pub count: u64,
    /// How many lines.
    pub lines: u64,
    /// The distance between lines.
    pub line_stride: u64,
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
                right: pair / 2,
                stride: pair,
                count: (n - first) / pair,
                lines: 1,
                line_stride: 1,
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

/// The steps and nodes of a rank-2 loop's leaves whose rows are whole lines of the view
/// (`width` is the view's extent of dimension 1), rows `s0 .. s0 + rows`: each line's tree is
/// closed on the device (its aligned nodes, then combined right to left into the line's root,
/// as [`weft_ir::reduction::dense_nodes`] closes a whole line), and the roots, one per row
/// at local `r * width`, reduce as a rank-1 range. The nodes are those of dimension 0's
/// tree.
pub fn plan_rows(s0: u64, rows: u64, width: u64) -> (Vec<LevelStep>, Vec<NodeAt>) {
    let (line_steps, line_nodes) = plan(0, width);
    let mut steps: Vec<LevelStep> = line_steps
        .into_iter()
        .map(|st| LevelStep {
            lines: rows,
            line_stride: width,
            ..st
        })
        .collect();
    // Close each line: node k takes node k op (the nodes after it), right to left.
    for k in (0..line_nodes.len().saturating_sub(1)).rev() {
        steps.push(LevelStep {
            offset: line_nodes[k].local,
            right: line_nodes[k + 1].local - line_nodes[k].local,
            stride: 1,
            count: 1,
            lines: rows,
            line_stride: width,
        });
    }
    let (root_steps, root_nodes) = plan(s0, rows);
    steps.extend(root_steps.into_iter().map(|st| LevelStep {
        offset: st.offset * width,
        right: st.right * width,
        stride: st.stride * width,
        ..st
    }));
    let nodes = root_nodes
        .into_iter()
        .map(|n| NodeAt {
            local: n.local * width,
            ..n
        })
        .collect();
    (steps, nodes)
}

/// The level kernel of `op` on `dtype`: `left[r, i] = left[r, i] op right[r, i]` over `left`
/// (lines `r`, pairs `i`; see [`LevelStep`]).
pub fn level_kernel(op: ReduceOp, dtype: DType) -> Result<Kernel, String> {
    let (name, inst) = match op {
        ReduceOp::Prod => ("prod", "mul"),
        _ => ("sum", "add"),
    };
    let t = dtype.name();
    let text = format!(
        "kernel @weft.gpu.tree.{name}.{t}(%left: store<{t}, 2, readwrite>, \
         %right: store<{t}, 2, read>) {{\n  parallel %left (%r, %i) {{\n    \
         %a = load %left[%r, %i]\n    %b = load %right[%r, %i]\n    %c = {inst} %a, %b\n    \
         store %left[%r, %i], %c\n  }}\n}}\n"
    );
    weft_ir::text::parse(&text).map_err(|e| format!("the tree level kernel: {e}"))
}
