//! Reductions into 0-d stores in the canonical order ([`weft_ir::reduction`]).
//!
//! Before lowering, each top-level parallel loop's float sums and products into a 0-d store
//! `P` (the reductions whose bits depend on the order; see [`order_matters`]) become
//! updates of a hidden *leaf store* `L` with the loop's rank, indexed by the loop's indices:
//! `reduce P[], op, v` becomes `L[i] = v` where each point reduces into `P` exactly once (the
//! usual case), else `L[i] = L[i] op v`. The launcher gives each chunk of the loop
//! its own leaf buffer (the chunk's rows, dense, filled with the operator's exact identity), so
//! the compiled code (scalar, 128-bit or AVX-512, all made from the same loads and stores)
//! leaves each point's contribution, its reductions folded in execution order, where the
//! launcher finds it. The launcher then reduces the buffer into the complete aligned nodes of
//! the canonical tree ([`chunk_nodes`]) and merges those of every chunk and every point task.
//! Compiled code never combines two points, so every path, thread count, chunking and number
//! of pieces gives the same bits.
//!
//! **Element trees** ([`weft_ir::reduction::element_trees`]: a rank-1 loop's float sums and
//! products into a store of rank 1 or more, once per point and element, such as `vecmat`'s
//! `y[r] += A[r, i] * x[i]` over `r`) become updates `L[i, r] = L[i, r] op v` of a leaf store
//! with the loop's dimension followed by the target's. For a whole block of the canonical
//! order (aligned, `2^`[`ELEMENT_BLOCK_LEVEL`] points) the launcher sets the leaf's
//! dimension-0 stride to zero, so the block's points fold in order into one row, as the order
//! says; the points of a block that a chunk or a point task holds only part of get a row each
//! (loose points), folded in order once the block's points meet. The launcher merges blocks
//! and loose points per chunk and step as [`RowPartial`]s (a row per node: every element at
//! once) and hands the executor one canonical partial per element.

use std::collections::BTreeMap;

use weft_ir::ValueId;
use weft_ir::reduction::{
    DenseShape, ELEMENT_BLOCK_LEVEL, Partial, ReductionError, dense_nodes, element_trees,
    exact_identity, grouped_nodes_with,
};
#[cfg(test)]
use weft_ir::visit_defs;
use weft_ir::{Access, BinaryOp, DType, Inst, Kernel, Op, Param, Privilege, ReduceOp, Scalar};

/// A hidden leaf store of the rewritten kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// The leaf store's parameter in the rewritten kernel.
    pub param: u32,
    /// The store parameter reduced into: a 0-d store, or one of rank `elements` whose
    /// elements are each reduced by their own tree.
    pub target: u32,
    /// The target's rank: 0, or the number of trailing dimensions of the leaf store that index
    /// the target's elements (an element tree).
    pub elements: u32,
    /// The reduction's operator and element type.
    pub op: ReduceOp,
    pub dtype: DType,
    /// The loop: its position among the kernel's top-level parallel loops.
    pub loop_index: u32,
    /// The store parameter the loop runs over.
    pub over: u32,
    /// Whether each point may leave its element untouched or reduce into it more than once
    /// (then the buffer starts as the identity, and the point updates it in place); otherwise
    /// each point stores its one contribution.
    pub fill: bool,
}

impl Leaf {
    /// Whether a scalar point loop may fill this leaf store *grouped* (see
    /// [`weft_ir::reduction::grouped_nodes_with`]): a 0-d target that each point reduces into
    /// exactly once, so that the point stores one contribution at the loop's index.
    pub(crate) fn groupable(&self) -> bool {
        self.elements == 0 && !self.fill
    }
}

/// Whether the result of `op` on `dtype` depends on the order of its operands' combination:
/// float sums and products. Integer operators wrap and `min`, `max` and the `bool` operators
/// are exact, so any order gives the canonical order's bits, and those reductions keep their
/// register accumulators.
pub(crate) fn order_matters(op: ReduceOp, dtype: DType) -> bool {
    matches!(op, ReduceOp::Sum | ReduceOp::Prod) && matches!(dtype, DType::F32 | DType::F64)
}

/// The binary operation that folds two contributions of `op` on `dtype`.
fn binary_of(op: ReduceOp, dtype: DType) -> BinaryOp {
    match (op, dtype) {
        (ReduceOp::Sum | ReduceOp::Max, DType::Bool) => BinaryOp::Max,
        (ReduceOp::Prod | ReduceOp::Min, DType::Bool) => BinaryOp::Min,
        (ReduceOp::Sum, _) => BinaryOp::Add,
        (ReduceOp::Prod, _) => BinaryOp::Mul,
        (ReduceOp::Min, _) => BinaryOp::Min,
        (ReduceOp::Max, _) => BinaryOp::Max,
    }
}

/// `kernel` with every top-level parallel loop's reductions into 0-d stores turned into
/// updates of hidden leaf stores (appended to the parameters), and those stores.
pub(crate) fn rewrite(kernel: &Kernel) -> (Kernel, Vec<Leaf>) {
    let mut out = kernel.clone();
    let mut leaves = Vec::new();
    let mut next = kernel.value_bound();
    let mut loop_index = 0u32;
    for inst in &mut out.body {
        let Op::Parallel(pl) = &mut inst.op else {
            continue;
        };
        let this_loop = loop_index;
        loop_index += 1;
        let trees = element_trees(&kernel.params, pl);
        // Targets reduced into once per point: exactly one reduction, at the body's top level.
        let mut once = Vec::new();
        let mut nested = Vec::new();
        count_reductions(&pl.body, false, &mut once, &mut nested);
        let single: Vec<u32> = once
            .iter()
            .copied()
            .filter(|t| once.iter().filter(|&u| u == t).count() == 1 && !nested.contains(t))
            .collect();
        let mut cx = Rewrite {
            params: &mut out.params,
            leaves: &mut leaves,
            loop_index: this_loop,
            over: pl.over,
            indices: pl.indices.clone(),
            next: &mut next,
            single,
            trees,
        };
        cx.body(&mut pl.body, true);
    }
    (out, leaves)
}

/// The 0-d targets of the reductions in `body`: those at its top level into `top`, those in
/// `for` loops into `nested` (once per reduction).
fn count_reductions(body: &[Inst], in_for: bool, top: &mut Vec<u32>, nested: &mut Vec<u32>) {
    for inst in body {
        match &inst.op {
            Op::For(f) => count_reductions(&f.body, true, top, nested),
            Op::Reduce(acc, _, _) if acc.indices.is_empty() => {
                if in_for {
                    nested.push(acc.param);
                } else {
                    top.push(acc.param);
                }
            }
            _ => {}
        }
    }
}

struct Rewrite<'a> {
    params: &'a mut Vec<Param>,
    leaves: &'a mut Vec<Leaf>,
    loop_index: u32,
    over: u32,
    indices: Vec<ValueId>,
    next: &'a mut u32,
    /// Targets each point reduces into exactly once.
    single: Vec<u32>,
    /// The loop's element-tree targets.
    trees: Vec<u32>,
}

impl Rewrite<'_> {
    fn fresh(&mut self) -> ValueId {
        let v = ValueId(*self.next);
        *self.next += 1;
        v
    }

    /// The leaf store of this loop for `target`, if it is a 0-d target or an element tree.
    fn leaf(&mut self, target: u32, op: ReduceOp) -> Option<u32> {
        let (dtype, elements) = match self.params.get(target as usize)? {
            Param::Store {
                dtype,
                rank,
                privilege: Privilege::Reduce(p),
            } if *p == op
                && order_matters(op, *dtype)
                && (*rank == 0 || self.trees.contains(&target)) =>
            {
                (*dtype, *rank)
            }
            _ => return None,
        };
        if let Some(l) = self
            .leaves
            .iter()
            .find(|l| l.loop_index == self.loop_index && l.target == target)
        {
            return Some(l.param);
        }
        let param = u32::try_from(self.params.len()).ok()?;
        self.params.push(Param::Store {
            dtype,
            rank: u32::try_from(self.indices.len())
                .ok()?
                .checked_add(elements)?,
            privilege: Privilege::ReadWrite,
        });
        self.leaves.push(Leaf {
            param,
            target,
            elements,
            op,
            dtype,
            loop_index: self.loop_index,
            over: self.over,
            // A point of an element tree may leave elements untouched.
            fill: elements > 0 || !self.single.contains(&target),
        });
        Some(param)
    }

    fn body(&mut self, body: &mut Vec<Inst>, top: bool) {
        let old = std::mem::take(body);
        for mut inst in old {
            match &mut inst.op {
                Op::For(f) => self.body(&mut f.body, false),
                Op::Reduce(acc, op, v)
                    if acc.indices.is_empty() || self.trees.contains(&acc.param) =>
                {
                    let (target, op, v) = (acc.param, *op, *v);
                    let element = acc.indices.clone();
                    if let Some(leaf) = self.leaf(target, op) {
                        let dtype = self
                            .leaves
                            .iter()
                            .find(|l| l.param == leaf)
                            .map(|l| l.dtype);
                        let mut indices = self.indices.clone();
                        indices.extend(element);
                        let at = Access {
                            param: leaf,
                            indices,
                        };
                        if top
                            && self.single.contains(&target)
                            && at.indices.len() == self.indices.len()
                        {
                            // The point's one contribution is its leaf.
                            body.push(Inst {
                                results: vec![],
                                op: Op::Store(at, v),
                            });
                            continue;
                        }
                        let (old_v, new_v) = (self.fresh(), self.fresh());
                        let bop = binary_of(op, dtype.unwrap_or(DType::F64));
                        body.push(Inst {
                            results: vec![old_v],
                            op: Op::Load(at.clone()),
                        });
                        body.push(Inst {
                            results: vec![new_v],
                            op: Op::Binary(bop, old_v, v),
                        });
                        body.push(Inst {
                            results: vec![],
                            op: Op::Store(at, new_v),
                        });
                        continue;
                    }
                }
                _ => {}
            }
            body.push(inst);
        }
    }
}

/// Whether the kernel defines a value numbered at least `bound` (a check that the rewrite's
/// fresh values are fresh).
#[cfg(test)]
fn defines_from(kernel: &Kernel, bound: u32) -> bool {
    let mut any = false;
    visit_defs(&kernel.body, &mut |v| any |= v.0 >= bound);
    any
}

/// A leaf buffer's elements, typed.
pub(crate) trait LeafValue: Copy {
    fn to_scalar(self) -> Scalar;
    fn add(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    /// The exact identity of `prod` (`product`) or `sum`.
    fn exact_identity(product: bool) -> Self;
}

/// [`LeafValue`] for a float type and its [`Scalar`] variant.
macro_rules! leaf_value {
    ($t:ty, $variant:ident) => {
        impl LeafValue for $t {
            fn to_scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
            fn add(self, other: $t) -> $t {
                self + other
            }
            fn mul(self, other: $t) -> $t {
                self * other
            }
            fn exact_identity(product: bool) -> $t {
                if product { 1.0 } else { -0.0 }
            }
        }
    };
}
leaf_value!(f64, F64);
leaf_value!(f32, F32);

/// Fills `n` elements at `p` with the exact identity of `op` on `dtype`.
///
/// # Safety
/// `p` is valid for writes of `n` elements of `dtype` and aligned for them.
pub(crate) unsafe fn fill_exact_identity(p: *mut u8, n: usize, dtype: DType, op: ReduceOp) {
    let id = exact_identity(op, dtype);
    // SAFETY: forwarded from the caller, per type.
    unsafe {
        match id {
            Scalar::F64(x) => std::slice::from_raw_parts_mut(p.cast::<f64>(), n).fill(x),
            Scalar::F32(x) => std::slice::from_raw_parts_mut(p.cast::<f32>(), n).fill(x),
            Scalar::I64(x) => std::slice::from_raw_parts_mut(p.cast::<i64>(), n).fill(x),
            Scalar::I32(x) => std::slice::from_raw_parts_mut(p.cast::<i32>(), n).fill(x),
            Scalar::Bool(x) => std::slice::from_raw_parts_mut(p, n).fill(u8::from(x)),
        }
    }
}

/// Adds the canonical nodes of one chunk's dense leaf buffer (`buf`, the chunk's points in
/// row-major order, as `shape` says) to `part`, a partial over the view's extents. Lines of
/// the innermost dimension become aligned nodes; a line that spans the view's whole extent
/// (and so the whole tree of that dimension) is closed at once, and so on outwards, so a chunk
/// of whole rows adds a handful of nodes.
///
/// # Safety
/// `buf` is valid for reads and writes of the chunk's points as elements of `part`'s type,
/// aligned for them.
pub(crate) unsafe fn chunk_nodes(
    buf: *mut u8,
    shape: &DenseShape<'_>,
    part: &mut Partial,
) -> Result<(), ReductionError> {
    struct Dense<'s, 'v>(&'s DenseShape<'v>);
    impl Nodes for Dense<'_, '_> {
        fn add<T: Copy>(
            &self,
            v: &mut [T],
            part: &mut Partial,
            op: impl Fn(T, T) -> T + Copy,
            to_scalar: impl Fn(T) -> Scalar,
        ) -> Result<(), ReductionError> {
            dense_nodes(v, self.0, part, op, to_scalar)
        }
    }
    let rows = usize::try_from(shape.hi - shape.lo).unwrap_or(0);
    // A 0-d store has no dimensions past the first; its one element is one row.
    let inner: usize = shape
        .extents
        .get(1..)
        .unwrap_or_default()
        .iter()
        .map(|&e| usize::try_from(e).unwrap_or(0))
        .product();
    // SAFETY: forwarded from the caller.
    unsafe { typed_nodes(buf, rows * inner, part, &Dense(shape)) }
}

/// [`chunk_nodes`] for a call of a rank-1 loop whose step left the leaves grouped (see
/// [`weft_ir::reduction::grouped_nodes_with`]): the call's `n` points from the view's
/// coordinate `start`.
///
/// # Safety
/// As for [`chunk_nodes`].
pub(crate) unsafe fn grouped_chunk_nodes(
    buf: *mut u8,
    start: u64,
    n: usize,
    part: &mut Partial,
) -> Result<(), ReductionError> {
    struct Grouped(u64);
    impl Nodes for Grouped {
        fn add<T: Copy>(
            &self,
            v: &mut [T],
            part: &mut Partial,
            op: impl Fn(T, T) -> T + Copy,
            to_scalar: impl Fn(T) -> Scalar,
        ) -> Result<(), ReductionError> {
            let mut err = Ok(());
            grouped_nodes_with(self.0, v, &mut Vec::new(), op, |level, index, x| {
                if err.is_ok() {
                    err = part.add_node(&[], level, index, to_scalar(x));
                }
            });
            err
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { typed_nodes(buf, n, part, &Grouped(start)) }
}

/// A way to turn a buffer of leaves into canonical nodes, for any element type.
trait Nodes {
    /// Adds the nodes of `v` (destroyed) to `part`, combining by `op`.
    fn add<T: Copy>(
        &self,
        v: &mut [T],
        part: &mut Partial,
        op: impl Fn(T, T) -> T + Copy,
        to_scalar: impl Fn(T) -> Scalar,
    ) -> Result<(), ReductionError>;
}

/// Runs `nodes` on the `n` leaves at `buf`, typed by `part`'s element type and operator.
///
/// # Safety
/// As for [`chunk_nodes`], for `n` elements.
unsafe fn typed_nodes(
    buf: *mut u8,
    n: usize,
    part: &mut Partial,
    nodes: &impl Nodes,
) -> Result<(), ReductionError> {
    let op = part.op();
    // SAFETY: forwarded from the caller, per type.
    unsafe {
        match (part.dtype(), op) {
            (DType::F64, ReduceOp::Sum) => nodes.add(f64s(buf, n), part, |a, b| a + b, Scalar::F64),
            (DType::F64, ReduceOp::Prod) => {
                nodes.add(f64s(buf, n), part, |a, b| a * b, Scalar::F64)
            }
            (DType::F32, ReduceOp::Sum) => nodes.add(f32s(buf, n), part, |a, b| a + b, Scalar::F32),
            (DType::F32, ReduceOp::Prod) => {
                nodes.add(f32s(buf, n), part, |a, b| a * b, Scalar::F32)
            }
            (dtype, _) => Err(ReductionError::Type {
                op: op.name(),
                dtype,
                value: exact_identity(op, dtype),
            }),
        }
    }
}

/// `n` `f64`s at `p`.
///
/// # Safety
/// As for [`chunk_nodes`].
unsafe fn f64s<'a>(p: *mut u8, n: usize) -> &'a mut [f64] {
    // SAFETY: forwarded from the caller.
    unsafe { std::slice::from_raw_parts_mut(p.cast::<f64>(), n) }
}

/// `n` `f32`s at `p`.
///
/// # Safety
/// As for [`chunk_nodes`].
unsafe fn f32s<'a>(p: *mut u8, n: usize) -> &'a mut [f32] {
    // SAFETY: forwarded from the caller.
    unsafe { std::slice::from_raw_parts_mut(p.cast::<f32>(), n) }
}

/// What a chunk or a step has of one leaf store's canonical reduction.
pub(crate) enum LeafPart {
    /// A 0-d target's partial.
    Scalar(Partial),
    /// An element tree's partials, every element's at once.
    Rows(Rows),
}

impl LeafPart {
    /// An empty part for `leaf`, whose loop runs over a view of extents `view`.
    pub(crate) fn new(leaf: &Leaf, view: &[u64], width: usize) -> LeafPart {
        if leaf.elements == 0 {
            return LeafPart::Scalar(Partial::new(leaf.op, leaf.dtype, view));
        }
        let extent = view.first().copied().unwrap_or(1);
        let product = leaf.op == ReduceOp::Prod;
        match leaf.dtype {
            DType::F32 => LeafPart::Rows(Rows::F32(RowPartial::new(width, extent, product))),
            _ => LeafPart::Rows(Rows::F64(RowPartial::new(width, extent, product))),
        }
    }

    /// Adds every node of `other`, a part over other points of the same leaf.
    pub(crate) fn merge(&mut self, other: LeafPart) -> Result<(), ReductionError> {
        match (self, other) {
            (LeafPart::Scalar(a), LeafPart::Scalar(b)) => a.merge(b),
            (LeafPart::Rows(Rows::F64(a)), LeafPart::Rows(Rows::F64(b))) => a.merge(b),
            (LeafPart::Rows(Rows::F32(a)), LeafPart::Rows(Rows::F32(b))) => a.merge(b),
            _ => Err(ReductionError::Mismatch),
        }
    }

    /// One canonical partial per element reduced into: `(element, partial)`, the element
    /// empty for a 0-d target; `shape` and `origin` are an element tree's target's extents and
    /// origin, and the element is its coordinates in the target's view (see
    /// [`weft_ir::reduction::LoopPartial::element`]).
    pub(crate) fn into_partials(
        self,
        leaf: &Leaf,
        shape: &[i64],
        origin: &[i64],
    ) -> Result<Vec<(Vec<u64>, Partial)>, ReductionError> {
        match self {
            LeafPart::Scalar(p) => Ok(vec![(Vec::new(), p)]),
            LeafPart::Rows(Rows::F64(r)) => r.into_partials(leaf, shape, origin),
            LeafPart::Rows(Rows::F32(r)) => r.into_partials(leaf, shape, origin),
        }
    }
}

/// An element tree's complete nodes, typed.
pub(crate) enum Rows {
    F64(RowPartial<f64>),
    F32(RowPartial<f32>),
}

/// The complete nodes of a rank-1 loop's element trees ([`Partial::blocked`]) for every
/// element at once (each node holds a row: one value per element, all elements' trees having
/// the same shape), and the points of blocks not yet complete.
pub(crate) struct RowPartial<T> {
    width: usize,
    extent: u64,
    /// The level of the tree's root.
    top: u32,
    /// Whether the operator is `prod` (else `sum`).
    product: bool,
    nodes: BTreeMap<(u32, u64), Vec<T>>,
    /// Rows of points of blocks not yet complete, by block and coordinate.
    loose: BTreeMap<u64, BTreeMap<u64, Vec<T>>>,
}

impl<T: LeafValue> RowPartial<T> {
    fn new(width: usize, extent: u64, product: bool) -> RowPartial<T> {
        RowPartial {
            width,
            extent,
            top: extent.max(1).next_power_of_two().trailing_zeros(),
            product,
            nodes: BTreeMap::new(),
            loose: BTreeMap::new(),
        }
    }

    /// The operator.
    fn combine(&self, a: T, b: T) -> T {
        if self.product { a.mul(b) } else { a.add(b) }
    }

    /// Adds what one call left: with `block`, the row of that whole block (its points' folds
    /// in order); without, the rows of the consecutive points `first ..`.
    pub(crate) fn add(
        &mut self,
        first: u64,
        block: Option<u64>,
        rows: &[T],
    ) -> Result<(), ReductionError> {
        let w = self.width;
        if let Some(b) = block {
            return self.add_block(b, rows.to_vec());
        }
        if w == 0 {
            return Ok(());
        }
        for (p, row) in rows.chunks_exact(w).enumerate() {
            self.add_loose(first.saturating_add(p as u64), row.to_vec())?;
        }
        Ok(())
    }

    /// Adds block `b`'s row at the level where blocks enter the tree.
    fn add_block(&mut self, b: u64, row: Vec<T>) -> Result<(), ReductionError> {
        let level = ELEMENT_BLOCK_LEVEL.min(self.top);
        self.insert(level, b >> (ELEMENT_BLOCK_LEVEL - level), row)
    }

    /// Adds one point's row; once its block's points are all in, folds them in order.
    fn add_loose(&mut self, c: u64, row: Vec<T>) -> Result<(), ReductionError> {
        let b = c >> ELEMENT_BLOCK_LEVEL;
        let start = b << ELEMENT_BLOCK_LEVEL;
        let end = start
            .saturating_add(1 << ELEMENT_BLOCK_LEVEL)
            .min(self.extent);
        let points = self.loose.entry(b).or_default();
        if points.insert(c, row).is_some() {
            return Err(ReductionError::Twice(format!("point [{c}]")));
        }
        if points.len() as u64 == end.saturating_sub(start) {
            let points = self.loose.remove(&b).unwrap_or_default();
            let mut acc = vec![T::exact_identity(self.product); self.width];
            for row in points.into_values() {
                for (a, &x) in acc.iter_mut().zip(&row) {
                    *a = self.combine(*a, x);
                }
            }
            self.add_block(b, acc)?;
        }
        Ok(())
    }

    /// Inserts a complete node, merging it with its sibling (or passing it up, when the
    /// sibling lies past the extent), as [`Partial`] does.
    fn insert(
        &mut self,
        mut level: u32,
        mut index: u64,
        mut row: Vec<T>,
    ) -> Result<(), ReductionError> {
        if row.len() != self.width {
            return Err(ReductionError::Mismatch);
        }
        while level < self.top {
            let sibling = index ^ 1;
            let beyond = sibling
                .checked_shl(level)
                .is_none_or(|start| start >= self.extent);
            if !beyond {
                let Some(other) = self.nodes.remove(&(level, sibling)) else {
                    if self.nodes.contains_key(&(level, index)) {
                        return Err(ReductionError::Twice(format!(
                            "node {index} at level {level}"
                        )));
                    }
                    self.nodes.insert((level, index), row);
                    return Ok(());
                };
                let (l, r) = if index.is_multiple_of(2) {
                    (row, other)
                } else {
                    (other, row)
                };
                row = l
                    .iter()
                    .zip(&r)
                    .map(|(&a, &b)| self.combine(a, b))
                    .collect();
            }
            level += 1;
            index /= 2;
        }
        if self.nodes.insert((level, 0), row).is_some() {
            return Err(ReductionError::Twice("the whole space".into()));
        }
        Ok(())
    }

    fn merge(&mut self, other: RowPartial<T>) -> Result<(), ReductionError> {
        if (other.width, other.extent) != (self.width, self.extent) {
            return Err(ReductionError::Mismatch);
        }
        for ((level, index), row) in other.nodes {
            self.insert(level, index, row)?;
        }
        for (c, row) in other.loose.into_values().flatten() {
            self.add_loose(c, row)?;
        }
        Ok(())
    }

    fn into_partials(
        self,
        leaf: &Leaf,
        shape: &[i64],
        origin: &[i64],
    ) -> Result<Vec<(Vec<u64>, Partial)>, ReductionError> {
        let mut out: Vec<(Vec<u64>, Partial)> = Vec::with_capacity(self.width);
        for e in 0..self.width {
            // The element's index in the target (row-major), plus the target's origin.
            let mut element = vec![0u64; shape.len()];
            let mut rest = e as u64;
            for (d, &ext) in shape.iter().enumerate().rev() {
                let ext = u64::try_from(ext).unwrap_or(1).max(1);
                let o = origin.get(d).copied().unwrap_or(0);
                element[d] = (rest % ext).saturating_add_signed(o);
                rest /= ext;
            }
            let part = Partial::blocked(leaf.op, leaf.dtype, self.extent, ELEMENT_BLOCK_LEVEL);
            out.push((element, part));
        }
        for ((level, index), row) in self.nodes {
            for ((_, part), x) in out.iter_mut().zip(row) {
                part.add_node(&[], level, index, x.to_scalar())?;
            }
        }
        for (c, row) in self.loose.into_values().flatten() {
            for ((_, part), x) in out.iter_mut().zip(row) {
                part.add(&[c], x.to_scalar())?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_ir::text;

    #[test]
    fn reductions_into_0d_stores_become_leaf_updates() {
        // One float sum per point: a plain store of the contribution.
        let k = text::parse(
            "kernel @dot(%a: store<f64, 1, read>, %out: store<f64, 0, reduce(sum)>) {
               parallel %a (%i) { %0 = load %a[%i]  %1 = mul %0, %0  reduce sum %out[], %1 }
             }",
        )
        .unwrap();
        let (r, leaves) = rewrite(&k);
        assert_eq!(leaves.len(), 1);
        assert_eq!((leaves[0].param, leaves[0].target), (2, 1));
        assert!(!leaves[0].fill);
        assert!(!defines_from(&r, k.value_bound()));
        let text = text::print(&r);
        assert!(text.contains("store<f64, 1, readwrite>"), "{text}");
        assert!(!text.contains("reduce sum"), "{text}");
        assert!(text.contains("store %arg2[%"), "{text}");
        weft_ir::validate(&r).unwrap();
        // Two per point (and an exact max, left alone): an update of an identity-filled leaf.
        let k = text::parse(
            "kernel @two(%a: store<f64, 1, read>, %out: store<f64, 0, reduce(sum)>,
                         %top: store<f64, 0, reduce(max)>) {
               parallel %a (%i) { %0 = load %a[%i]  reduce sum %out[], %0  reduce sum %out[], %0
                                  reduce max %top[], %0 }
             }",
        )
        .unwrap();
        let (r, leaves) = rewrite(&k);
        assert_eq!(leaves.len(), 1);
        assert!(leaves[0].fill);
        assert!(defines_from(&r, k.value_bound()));
        let text = text::print(&r);
        assert!(text.contains("reduce max"), "{text}");
        assert!(!text.contains("reduce sum"), "{text}");
        weft_ir::validate(&r).unwrap();
    }
}
