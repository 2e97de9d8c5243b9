//! The canonical reduction order: one fixed combination tree per reduced element, defined on
//! the global coordinates of the loop's points, so that any split of the points (SIMD lanes,
//! threads, the pieces of a launch, GPU thread blocks, MPI ranks) gives the same bits.
//!
//! # The order
//! A parallel loop over a store of rank `r` visits points `p = (c_0, .., c_{r-1})`, their
//! coordinates in the view the task was given (a point task's sub-store origin plus the local
//! index), `0 <= c_d < extent_d`. For a reduced element `e`, each point contributes one value
//! (the point's reductions into `e`, folded in execution order), and the result is
//! `old(e) op T_0()`, where
//!
//! - `T_d(c_0, .., c_{d-1})` is the *aligned pairwise tree* over `c_d` of the values
//!   `T_{d+1}(c_0, .., c_d)` (at `d = r - 1`, of the points' contributions): the node at level
//!   `k` and index `m` covers `c_d` in `[m 2^k, (m+1) 2^k)` and is `left op right` of its two
//!   children; leaves outside `[0, extent_d)`, and points that do not reduce into `e`, are the
//!   operator's exact identity;
//! - the tree's value is its node at the first level `K` with `2^K >= extent_d`.
//!
//! The exact identity leaves every value's bits unchanged (`-0.0` for float sums, `1` for
//! products, `+inf`/`-inf` or the integer extremes for `min`/`max`), so a node whose sibling
//! lies wholly outside the extent passes its value up unchanged, and padding never changes a
//! result.
//!
//! # Computing it in parts
//! A worker that owns some of the points adds them (or whole subtrees it computed itself, such
//! as a SIMD block: [`Partial::add_node`]) to a [`Partial`], which keeps only complete nodes
//! and merges siblings as they meet. Partials of disjoint point sets merge in any order into
//! the same result: every node is a complete subtree of the one canonical tree.

use std::collections::BTreeMap;

use crate::interp::reduce;
use crate::{DType, Inst, Op, ParallelLoop, Param, Privilege, ReduceOp, Scalar, ValueId};

/// What can go wrong building a canonical reduction.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReductionError {
    /// A point or node lies outside the reduced space.
    #[error("reduction: {0} lies outside the reduced space {1:?}")]
    Outside(String, Vec<u64>),
    /// Two parts covered the same point.
    #[error("reduction: {0} was added twice")]
    Twice(String),
    /// A value of another type than the reduction's, or one the operator does not take.
    #[error("reduction: {op} of {dtype} cannot take {value:?}")]
    Type {
        /// The operator.
        op: &'static str,
        /// The reduction's type.
        dtype: DType,
        /// The value.
        value: Scalar,
    },
    /// Two partials of different reductions were merged.
    #[error("reduction: merging partials of different reductions")]
    Mismatch,
}

/// The identity of `op` for `dtype` that leaves every value's bits unchanged: as
/// [`ReduceOp::identity`], but `-0.0` for float sums (`+0.0 + -0.0` is `+0.0`, and
/// `-0.0 + -0.0` is `-0.0`).
pub fn exact_identity(op: ReduceOp, dtype: DType) -> Scalar {
    match (op, dtype) {
        (ReduceOp::Sum, DType::F32) => Scalar::F32(-0.0),
        (ReduceOp::Sum, DType::F64) => Scalar::F64(-0.0),
        _ => op.identity(dtype),
    }
}

/// A node of the canonical tree: the tree of dimension `prefix.len()` under the coordinates
/// `prefix`, at `level`, covering indices `[index 2^level, (index+1) 2^level)`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Node {
    prefix: Vec<u64>,
    level: u32,
    index: u64,
}

/// Part of a canonical reduction: the complete subtrees of the points added so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Partial {
    op: ReduceOp,
    dtype: DType,
    extents: Vec<u64>,
    /// Per dimension, the level of its tree's root.
    tops: Vec<u32>,
    nodes: BTreeMap<Node, Scalar>,
    /// The root, once every point is in.
    root: Option<Scalar>,
    /// For an element tree ([`Partial::blocked`]): the level of its blocks, whose points fold
    /// in order; 0 otherwise.
    block: u32,
    /// The points of blocks not yet complete (an element tree's), by block and coordinate.
    loose: BTreeMap<u64, BTreeMap<u64, Scalar>>,
}

impl Partial {
    /// An empty part of the reduction `op` of `dtype` values over the points `0 <= c_d <
    /// extents[d]` (no extents: the single point of a rank-0 loop).
    pub fn new(op: ReduceOp, dtype: DType, extents: &[u64]) -> Partial {
        Partial {
            op,
            dtype,
            extents: extents.to_vec(),
            tops: extents
                .iter()
                .map(|&e| e.max(1).next_power_of_two().trailing_zeros())
                .collect(),
            nodes: BTreeMap::new(),
            root: None,
            block: 0,
            loose: BTreeMap::new(),
        }
    }

    /// An empty part of an element tree's reduction ([`element_trees`]) over the points
    /// `0 <= c < extent` of a rank-1 loop: the points are cut into aligned blocks of
    /// `2^block` (the last one clipped to the extent), each block's contributions fold in
    /// point order from the exact identity, and the blocks combine by the aligned pairwise
    /// tree (a block is the node at level `block`, or the root when the extent fits in one).
    pub fn blocked(op: ReduceOp, dtype: DType, extent: u64, block: u32) -> Partial {
        Partial {
            block,
            ..Partial::new(op, dtype, &[extent])
        }
    }

    /// [`Partial::blocked`] over an extent the worker does not know (see
    /// [`Partial::unbounded`]).
    pub fn unbounded_blocked(op: ReduceOp, dtype: DType, block: u32) -> Partial {
        Partial::blocked(op, dtype, 1 << UNBOUNDED_LEVEL, block)
    }

    /// The level at which an element tree's blocks enter the tree: its block level, or the
    /// root's when the extent fits in one block.
    fn block_level(&self) -> u32 {
        self.block.min(self.tops.first().copied().unwrap_or(0))
    }

    /// Adds a complete block of an element tree ([`Partial::blocked`]): the fold, in point
    /// order from the exact identity, of the contributions of every point of block `index`.
    pub fn add_block(&mut self, index: u64, value: Scalar) -> Result<(), ReductionError> {
        if self.block == 0 || self.extents.len() != 1 {
            return Err(ReductionError::Mismatch);
        }
        if index
            .checked_shl(self.block)
            .is_none_or(|start| start >= self.extents[0])
        {
            return Err(ReductionError::Outside(
                format!("block {index}"),
                self.extents.clone(),
            ));
        }
        let level = self.block_level();
        self.insert(
            Node {
                prefix: Vec::new(),
                level,
                index: index >> (self.block - level),
            },
            value,
            false,
        )
    }

    /// Adds one point of an element tree's block; once the block's points are all in, folds
    /// them in order into the block.
    fn add_loose(&mut self, c: u64, value: Scalar) -> Result<(), ReductionError> {
        if value.dtype() != self.dtype {
            return Err(ReductionError::Type {
                op: self.op.name(),
                dtype: self.dtype,
                value,
            });
        }
        let b = c >> self.block;
        let points = self.loose.entry(b).or_default();
        if points.insert(c, value).is_some() {
            return Err(ReductionError::Twice(format!("point [{c}]")));
        }
        let start = b << self.block;
        let end = start.saturating_add(1 << self.block).min(self.extents[0]);
        if points.len() as u64 == end - start {
            self.close_block(b)?;
        }
        Ok(())
    }

    /// Folds the points present of block `b` in order and adds the block.
    fn close_block(&mut self, b: u64) -> Result<(), ReductionError> {
        let mut acc = exact_identity(self.op, self.dtype);
        for (_, v) in self.loose.remove(&b).unwrap_or_default() {
            acc = self.combine(acc, v)?;
        }
        self.add_block(b, acc)
    }

    /// An empty part of the reduction `op` of `dtype` values over a space of rank `rank` whose
    /// extents the worker does not know: every dimension is taken to extend to `2^62`, which
    /// the identity padding makes equal to any extent that holds the points. Its value is
    /// [`Partial::finish`]ed once every point is in.
    pub fn unbounded(op: ReduceOp, dtype: DType, rank: usize) -> Partial {
        Partial::new(op, dtype, &vec![1 << UNBOUNDED_LEVEL; rank])
    }

    /// The reduction's operator.
    pub fn op(&self) -> ReduceOp {
        self.op
    }

    /// The reduction's element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Adds the contribution of the point `point`.
    pub fn add(&mut self, point: &[u64], value: Scalar) -> Result<(), ReductionError> {
        let outside = || ReductionError::Outside(format!("point {point:?}"), self.extents.clone());
        if point.len() != self.extents.len() || point.iter().zip(&self.extents).any(|(c, e)| c >= e)
        {
            return Err(outside());
        }
        if self.block > 0 {
            return self.add_loose(point[0], value);
        }
        match point.split_last() {
            None => self.insert(
                Node {
                    prefix: Vec::new(),
                    level: 0,
                    index: 0,
                },
                value,
                true,
            ),
            Some((&last, prefix)) => self.add_node(prefix, 0, last, value),
        }
    }

    /// Adds a complete subtree a worker computed itself: the node of dimension
    /// `prefix.len()`'s tree under `prefix`, at `level`, with `index` (it covers that
    /// dimension's coordinates `[index 2^level, (index+1) 2^level)`, clipped to the extent).
    pub fn add_node(
        &mut self,
        prefix: &[u64],
        level: u32,
        index: u64,
        value: Scalar,
    ) -> Result<(), ReductionError> {
        let d = prefix.len();
        let fits = d < self.extents.len()
            && (self.block == 0 || level >= self.block_level())
            && level <= self.tops[d]
            && prefix.iter().zip(&self.extents).all(|(c, e)| c < e)
            && index
                .checked_shl(level)
                .is_some_and(|start| start < self.extents[d]);
        if !fits {
            return Err(ReductionError::Outside(
                format!("node {index} at level {level} under {prefix:?}"),
                self.extents.clone(),
            ));
        }
        let node = Node {
            prefix: prefix.to_vec(),
            level,
            index,
        };
        self.insert(node, value, false)
    }

    /// Adds every node of `other`, a part over points disjoint from this one's.
    pub fn merge(&mut self, other: Partial) -> Result<(), ReductionError> {
        if (other.op, other.dtype, &other.extents, other.block)
            != (self.op, self.dtype, &self.extents, self.block)
        {
            return Err(ReductionError::Mismatch);
        }
        for (c, v) in other.loose.into_values().flatten() {
            self.add_loose(c, v)?;
        }
        if let Some(root) = other.root {
            self.insert(
                Node {
                    prefix: Vec::new(),
                    level: 0,
                    index: 0,
                },
                root,
                true,
            )?;
        }
        for (node, value) in other.nodes {
            self.insert(node, value, false)?;
        }
        Ok(())
    }

    /// The reduction of every point, once all are in; `None` while some are missing (and for
    /// a space without points, whose result leaves the element as it was).
    pub fn result(&self) -> Option<Scalar> {
        self.root
    }

    /// The reduction of every point, computed from the nodes present as though every point
    /// that was never added contributed the identity: the result once all points are in,
    /// whether or not the extents are known (see [`Partial::unbounded`]). `None` when no point
    /// was added.
    ///
    /// The nodes left are closed deepest dimension first: in each tree, the node of lowest
    /// level has no other node inside its ancestors' siblings below the next lowest level
    /// present, so it passes up to that level unchanged and merges there (or rises to the
    /// tree's root, which becomes a leaf of the dimension above).
    pub fn finish(&mut self) -> Result<Option<Scalar>, ReductionError> {
        // An element tree's blocks not complete: their points fold as they are (the points
        // missing lie past the extent, and count as the identity).
        let blocks: Vec<u64> = self.loose.keys().copied().collect();
        for b in blocks {
            self.close_block(b)?;
        }
        for depth in (0..self.extents.len()).rev() {
            // The trees of this dimension, by prefix.
            let mut groups: BTreeMap<Vec<u64>, BTreeMap<(u32, u64), Scalar>> = BTreeMap::new();
            let nodes = std::mem::take(&mut self.nodes);
            for (node, value) in nodes {
                if node.prefix.len() == depth {
                    groups
                        .entry(node.prefix)
                        .or_default()
                        .insert((node.level, node.index), value);
                } else {
                    self.nodes.insert(node, value);
                }
            }
            for (mut prefix, mut tree) in groups {
                let root = self.close(&mut tree)?;
                match prefix.pop() {
                    None => {
                        if self.root.is_some() {
                            return Err(ReductionError::Twice("the whole space".into()));
                        }
                        self.root = Some(root);
                    }
                    Some(c) => self.insert(
                        Node {
                            prefix,
                            level: 0,
                            index: c,
                        },
                        root,
                        false,
                    )?,
                }
            }
        }
        Ok(self.root)
    }

    /// The root of one tree from its nodes (keyed by level and index; at least one): the node
    /// of lowest level rises (unchanged: its ancestors' siblings below the next level present
    /// hold no point) to that level, or one above its own, and merges with its sibling there
    /// if present, until one node is left.
    fn close(&self, tree: &mut BTreeMap<(u32, u64), Scalar>) -> Result<Scalar, ReductionError> {
        while tree.len() > 1 {
            let Some(((level, index), mut value)) = tree.pop_first() else {
                break;
            };
            let next = tree.keys().next().map_or(level + 1, |k| k.0).max(level + 1);
            let mut node = (next, index >> (next - level));
            while let Some(other) = tree.remove(&(node.0, node.1 ^ 1)) {
                value = if node.1.is_multiple_of(2) {
                    self.combine(value, other)?
                } else {
                    self.combine(other, value)?
                };
                node = (node.0 + 1, node.1 / 2);
            }
            tree.insert(node, value);
        }
        match tree.pop_first() {
            Some((_, v)) => Ok(v),
            None => Err(ReductionError::Mismatch),
        }
    }

    /// `old op result`, the element's new value, once all points are in (`old` itself for a
    /// space without points).
    pub fn fold_into(&self, old: Scalar) -> Option<Scalar> {
        if self.extents.contains(&0) {
            return Some(old);
        }
        reduce(self.op, old, self.root?)
    }

    fn combine(&self, left: Scalar, right: Scalar) -> Result<Scalar, ReductionError> {
        reduce(self.op, left, right).ok_or(ReductionError::Type {
            op: self.op.name(),
            dtype: self.dtype,
            value: right,
        })
    }

    /// Inserts a complete node, merging it with its sibling (or passing it up, when the
    /// sibling lies outside the extent) and lifting a finished dimension's tree into a leaf of
    /// the dimension above, as far as it goes. `is_root` marks the whole reduction's value.
    fn insert(
        &mut self,
        mut node: Node,
        mut value: Scalar,
        is_root: bool,
    ) -> Result<(), ReductionError> {
        if value.dtype() != self.dtype {
            return Err(ReductionError::Type {
                op: self.op.name(),
                dtype: self.dtype,
                value,
            });
        }
        if is_root || self.extents.is_empty() {
            if self.root.is_some() {
                return Err(ReductionError::Twice("the whole space".into()));
            }
            self.root = Some(value);
            return Ok(());
        }
        loop {
            let d = node.prefix.len();
            if node.level == self.tops[d] {
                // The tree of dimension d under `prefix` is complete.
                match node.prefix.pop() {
                    None => {
                        if self.root.is_some() {
                            return Err(ReductionError::Twice("the whole space".into()));
                        }
                        self.root = Some(value);
                        return Ok(());
                    }
                    Some(c) => {
                        node = Node {
                            prefix: node.prefix,
                            level: 0,
                            index: c,
                        };
                        continue;
                    }
                }
            }
            let sibling = Node {
                index: node.index ^ 1,
                ..node.clone()
            };
            let beyond = sibling
                .index
                .checked_shl(sibling.level)
                .is_none_or(|start| start >= self.extents[d]);
            if !beyond {
                match self.nodes.remove(&sibling) {
                    None => {
                        if self.nodes.contains_key(&node) {
                            return Err(ReductionError::Twice(format!("{node:?}")));
                        }
                        self.nodes.insert(node, value);
                        return Ok(());
                    }
                    Some(other) => {
                        value = if node.index.is_multiple_of(2) {
                            self.combine(value, other)?
                        } else {
                            self.combine(other, value)?
                        };
                    }
                }
            }
            // The parent: this node with its sibling, or alone (its sibling is the identity).
            node = Node {
                prefix: node.prefix,
                level: node.level + 1,
                index: node.index / 2,
            };
        }
    }
}

/// One parallel loop's canonical partial result for one 0-d store it reduces into, over the
/// points a worker ran: what a back end hands the executor after a point task, so that the
/// parts of every point (and, later, of every rank) merge into one fold per task.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopPartial {
    /// The loop: its position among the kernel's top-level parallel loops.
    pub loop_index: u32,
    /// The kernel parameter reduced into.
    pub param: u32,
    /// The element of that store reduced into, in the coordinates of the view the store's
    /// sub-store is cut from (the sub-store's origin plus the element's index), so that the
    /// parts of points with different sub-stores meet: empty for a 0-d store; for a store of
    /// rank 1 or more, see [`element_trees`].
    pub element: Vec<u64>,
    /// The complete subtrees of the points run.
    pub partial: Partial,
}

impl LoopPartial {
    /// The partial as 64-bit words, for another process ([`LoopPartial::from_words`] reads
    /// them back): what ranks exchange to merge their points' reductions.
    pub fn to_words(&self) -> Vec<u64> {
        let p = &self.partial;
        let mut w = vec![
            u64::from(self.loop_index),
            u64::from(self.param),
            self.element.len() as u64,
        ];
        w.extend(&self.element);
        let op = ReduceOp::ALL.iter().position(|&o| o == p.op).unwrap_or(0);
        let dtype = DType::ALL.iter().position(|&d| d == p.dtype).unwrap_or(0);
        w.extend([op as u64, dtype as u64, p.extents.len() as u64]);
        w.extend(&p.extents);
        w.extend(p.tops.iter().map(|&t| u64::from(t)));
        w.push(p.nodes.len() as u64);
        for (node, value) in &p.nodes {
            w.push(node.prefix.len() as u64);
            w.extend(&node.prefix);
            w.extend([u64::from(node.level), node.index, value.to_bits()]);
        }
        match p.root {
            Some(v) => w.extend([1, v.to_bits()]),
            None => w.push(0),
        }
        w.push(u64::from(p.block));
        w.push(p.loose.len() as u64);
        for (block, points) in &p.loose {
            w.extend([*block, points.len() as u64]);
            for (c, v) in points {
                w.extend([*c, v.to_bits()]);
            }
        }
        w
    }

    /// Reads back what [`LoopPartial::to_words`] wrote, from the front of `words`, and returns
    /// the rest; `None` if the words are not such a partial.
    pub fn from_words(words: &[u64]) -> Option<(LoopPartial, &[u64])> {
        let mut r = Reader(words);
        let loop_index = u32::try_from(r.next()?).ok()?;
        let param = u32::try_from(r.next()?).ok()?;
        let element = r.vec()?;
        let op = *ReduceOp::ALL.get(usize::try_from(r.next()?).ok()?)?;
        let dtype = *DType::ALL.get(usize::try_from(r.next()?).ok()?)?;
        let extents = r.vec()?;
        let tops = (0..extents.len())
            .map(|_| r.next().and_then(|t| u32::try_from(t).ok()))
            .collect::<Option<Vec<u32>>>()?;
        let mut nodes = BTreeMap::new();
        for _ in 0..r.next()? {
            let prefix = r.vec()?;
            let level = u32::try_from(r.next()?).ok()?;
            let index = r.next()?;
            let value = Scalar::from_bits(dtype, r.next()?);
            nodes.insert(
                Node {
                    prefix,
                    level,
                    index,
                },
                value,
            );
        }
        let root = match r.next()? {
            0 => None,
            _ => Some(Scalar::from_bits(dtype, r.next()?)),
        };
        let block = u32::try_from(r.next()?).ok()?;
        let mut loose = BTreeMap::new();
        for _ in 0..r.next()? {
            let b = r.next()?;
            let mut points = BTreeMap::new();
            for _ in 0..r.next()? {
                let c = r.next()?;
                points.insert(c, Scalar::from_bits(dtype, r.next()?));
            }
            loose.insert(b, points);
        }
        let partial = Partial {
            op,
            dtype,
            extents,
            tops,
            nodes,
            root,
            block,
            loose,
        };
        Some((
            LoopPartial {
                loop_index,
                param,
                element,
                partial,
            },
            r.0,
        ))
    }
}

/// Words read from the front.
struct Reader<'a>(&'a [u64]);

impl Reader<'_> {
    fn next(&mut self) -> Option<u64> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    /// A length, then that many words (at most what is left).
    fn vec(&mut self) -> Option<Vec<u64>> {
        let n = usize::try_from(self.next()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head.to_vec())
    }
}

/// The store parameters of rank 1 or more that the parallel loop `pl` reduces into by
/// **element trees**: one canonical reduction per element over the loop's points, in aligned
/// blocks of `2^`[`ELEMENT_BLOCK_LEVEL`] points folded in point order, the blocks combined by
/// the aligned pairwise tree ([`Partial::blocked`]). A parameter qualifies when
/// - the loop has rank 1, and the parameter is a float store of rank at least 1 with
///   `Reduce(sum)` or `Reduce(prod)` privilege;
/// - the loop's body reduces into it exactly once, by its own operator, inside one or more
///   `for` loops, at indices that include the induction value of every `for` loop around the
///   reduction and are otherwise values defined outside the parallel loop. So each point adds
///   at most one contribution to each element, and no index depends on the point or on loaded
///   data: `y[r] += A[r, i] * x[i]` over `r`, as `vecmat` does.
///
/// Other reductions into stores of rank 1 or more (at a row the point owns, at loaded data,
/// or more than once per point) are not element trees; see the semantics
/// (`weft_ir::semantics`).
pub fn element_trees(params: &[Param], pl: &ParallelLoop) -> Vec<u32> {
    if pl.indices.len() != 1 {
        return Vec::new();
    }
    let mut inside = std::collections::BTreeSet::new();
    crate::visit_defs(&pl.body, &mut |v| {
        inside.insert(v);
    });
    inside.extend(pl.indices.iter().copied());
    // Per reduced parameter: how many reductions, and whether every one qualifies.
    let mut seen: BTreeMap<u32, (u32, bool)> = BTreeMap::new();
    let mut around = Vec::new();
    visit_reductions(&pl.body, &mut around, &mut |param, op, indices, around| {
        let store_ok = matches!(
            params.get(param as usize),
            Some(Param::Store {
                dtype: DType::F32 | DType::F64,
                rank: 1..,
                privilege: Privilege::Reduce(p),
            }) if *p == op && matches!(op, ReduceOp::Sum | ReduceOp::Prod)
        );
        let indices_ok = !around.is_empty()
            && around.iter().all(|v| indices.contains(v))
            && indices
                .iter()
                .all(|v| around.contains(v) || !inside.contains(v));
        let e = seen.entry(param).or_insert((0, true));
        e.0 += 1;
        e.1 &= store_ok && indices_ok;
    });
    seen.into_iter()
        .filter_map(|(param, (count, ok))| (ok && count == 1).then_some(param))
        .collect()
}

/// Calls `f(param, op, indices, around)` for every reduction in `body`, at any depth, `around`
/// holding the induction values of the `for` loops around it.
fn visit_reductions(
    body: &[Inst],
    around: &mut Vec<ValueId>,
    f: &mut impl FnMut(u32, ReduceOp, &[ValueId], &[ValueId]),
) {
    for inst in body {
        match &inst.op {
            Op::Reduce(acc, op, _) => f(acc.param, *op, &acc.indices, around),
            Op::For(l) => {
                around.push(l.induction);
                visit_reductions(&l.body, around, f);
                around.pop();
            }
            Op::Parallel(p) => visit_reductions(&p.body, around, f),
            _ => {}
        }
    }
}

/// The level of an element tree's blocks ([`Partial::blocked`]): 4096 points, each block's
/// contributions folded in point order.
pub const ELEMENT_BLOCK_LEVEL: u32 = 12;

/// The level of the roots of [`Partial::unbounded`]'s trees.
const UNBOUNDED_LEVEL: u32 = 62;

/// The shape of a dense buffer of contributions ([`dense_nodes`]): the loop's rows `lo..hi`
/// (of dimension 0) of a sub-store with extents `extents` whose origin lies at `origin` of a
/// view with extents `view`.
#[derive(Clone, Copy, Debug)]
pub struct DenseShape<'a> {
    /// The first row.
    pub lo: i64,
    /// One past the last row.
    pub hi: i64,
    /// The sub-store's extents.
    pub extents: &'a [i64],
    /// The sub-store's origin in the view.
    pub origin: &'a [i64],
    /// The view's extents.
    pub view: &'a [u64],
}

/// Adds the canonical nodes of a dense buffer of contributions to `part`, a partial over the
/// view's extents: `v` holds, in row-major order, one value per point of rows `lo..hi` of a
/// loop's sub-store (`shape`), each point's reductions folded from the exact identity, and is
/// used as scratch. Lines of the innermost dimension become aligned nodes; a line that spans
/// the view's whole extent (and so the whole tree of that dimension) is closed at once, and so
/// on outwards, so a buffer of whole rows adds a handful of nodes. `op` combines two values
/// and `to_scalar` makes a node's value: the host-side half of a back end's leaf reductions
/// (the CPU's chunk buffers, the GPU's leaf buffers).
pub fn dense_nodes<T: Copy>(
    v: &mut [T],
    shape: &DenseShape<'_>,
    part: &mut Partial,
    op: impl Fn(T, T) -> T + Copy,
    to_scalar: impl Fn(T) -> Scalar,
) -> Result<(), ReductionError> {
    let rank = shape.extents.len();
    if rank == 0 {
        return match v.first() {
            Some(x) => part.add(&[], to_scalar(*x)),
            None => Ok(()),
        };
    }
    let coord = |d: usize, i: i64| u64::try_from(shape.origin[d] + i).unwrap_or(u64::MAX);
    // Dimension d spans the view's whole extent: its trees close inside the chunk.
    let whole = |d: usize| shape.origin[d] == 0 && coord(d, shape.extents[d]) == shape.view[d];
    // The innermost dimensions that close inside the chunk, from the innermost out: `k` is the
    // first of them (all of `k..rank` are whole).
    let mut k = rank;
    while k > 1 && whole(k - 1) {
        k -= 1;
    }
    // Each block of the dimensions `k..rank` (row-major, contiguous) reduces to one value:
    // line by line, the innermost dimension first.
    let block: usize = shape.extents[k..]
        .iter()
        .map(|&e| usize::try_from(e).unwrap_or(0))
        .product();
    if k < rank {
        let mut len = v.len();
        let mut dims = rank;
        while dims > k {
            let e = usize::try_from(shape.extents[dims - 1]).unwrap_or(0);
            let lines = len / e.max(1);
            for l in 0..lines {
                let line = &mut v[l * e..(l + 1) * e];
                let mut root = None;
                close_line(line, op, &mut root);
                if let Some(r) = root {
                    v[l] = r;
                }
            }
            len = lines;
            dims -= 1;
        }
    }
    // Now `v[..count]` holds one value per point of the dimensions `0..k` (row-major); the
    // last of them, `k - 1`, is a line in the tree of its dimension.
    let outer: usize = v.len() / block.max(1);
    let e = if k == 1 {
        usize::try_from(shape.hi - shape.lo).unwrap_or(0)
    } else {
        usize::try_from(shape.extents[k - 1]).unwrap_or(0)
    };
    let first = if k == 1 { shape.lo } else { 0 };
    let lines = outer / e.max(1);
    let mut prefix = vec![0u64; k - 1];
    for l in 0..lines {
        // The coordinates of the line's outer dimensions (`0..k-1`).
        let mut rest = l;
        for d in (0..k - 1).rev() {
            let ext = usize::try_from(if d == 0 {
                shape.hi - shape.lo
            } else {
                shape.extents[d]
            })
            .unwrap_or(1)
            .max(1);
            let i = (rest % ext) as i64 + if d == 0 { shape.lo } else { 0 };
            prefix[d] = coord(d, i);
            rest /= ext;
        }
        let line = &mut v[l * e..(l + 1) * e];
        let start = coord(k - 1, first);
        let mut err = Ok(());
        aligned_nodes(start, line, op, |level, index, x| {
            if err.is_ok() {
                err = part.add_node(&prefix, level, index, to_scalar(x));
            }
        });
        err?;
    }
    Ok(())
}

/// The root of a whole line's tree (the line holds every coordinate of its dimension): its
/// aligned nodes, largest first, combined right to left, the identity padding the rest.
fn close_line<T: Copy>(line: &mut [T], op: impl Fn(T, T) -> T + Copy, root: &mut Option<T>) {
    let mut nodes: Vec<T> = Vec::new();
    aligned_nodes(0, line, op, |_, _, x| nodes.push(x));
    *root = nodes
        .into_iter()
        .rev()
        .reduce(|right, left| op(left, right));
}

/// The complete aligned nodes of one dimension's tree that the contributions of the
/// consecutive coordinates `start .. start + values.len()` form: the fewest aligned blocks
/// covering the range, largest first where they fit, each reduced by the pairwise tree.
/// `emit(level, index, value)` receives each node in coordinate order; `values` is used as
/// scratch. The fast path of workers that hold dense contributions (the CPU back end's
/// per-chunk buffers): the nodes go to [`Partial::add_node`].
pub fn aligned_nodes<T: Copy>(
    start: u64,
    values: &mut [T],
    op: impl Fn(T, T) -> T + Copy,
    emit: impl FnMut(u32, u64, T),
) {
    aligned_nodes_with(start, values, &mut Vec::new(), op, emit);
}

/// [`aligned_nodes`] with a scratch buffer that the caller keeps from call to call.
pub fn aligned_nodes_with<T: Copy>(
    start: u64,
    values: &mut [T],
    scratch: &mut Vec<T>,
    op: impl Fn(T, T) -> T + Copy,
    mut emit: impl FnMut(u32, u64, T),
) {
    let mut pos = start;
    let mut rest = values;
    while let Some(&first) = rest.first() {
        let left = rest.len() as u64;
        let aligned = if pos == 0 { 63 } else { pos.trailing_zeros() };
        let level = aligned.min(63 - left.leading_zeros());
        let size = 1usize << level;
        let (block, tail) = rest.split_at_mut(size);
        let need = if size >= 8 { size / 8 } else { size / 2 };
        if scratch.len() < need {
            scratch.resize(need, first);
        }
        emit(level, pos >> level, block_tree(block, scratch, op));
        pos += size as u64;
        rest = tail;
    }
}

/// The points a worker gathers into nodes of [`GROUP_LEVEL`] itself: `2^GROUP_LEVEL`
/// consecutive points, aligned in the view's coordinates.
pub const GROUP_LEVEL: u32 = 3;

/// The complete aligned nodes of the contributions of the points `start .. start +
/// values.len()` of a rank-1 loop, when the worker left them *grouped*: each aligned group of
/// `2^`[`GROUP_LEVEL`] points that lies wholly in the range holds its node (the pairwise tree
/// of its points) in its first point's slot, its other slots unused; the points before the
/// first whole group and after the last hold their own contributions. `emit(level, index,
/// value)` receives the nodes, as [`aligned_nodes_with`] gives them. `values` is used as
/// scratch.
pub fn grouped_nodes_with<T: Copy>(
    start: u64,
    values: &mut [T],
    scratch: &mut Vec<T>,
    op: impl Fn(T, T) -> T + Copy,
    mut emit: impl FnMut(u32, u64, T),
) {
    let group = 1usize << GROUP_LEVEL;
    let (head, groups) = group_split(start, values.len());
    let (first, rest) = values.split_at_mut(head);
    aligned_nodes_with(start, first, scratch, op, &mut emit);
    // The groups' nodes, moved together (each slot moves down, never over one still to move).
    for k in 0..groups {
        rest[k] = rest[k * group];
    }
    let begin = start.wrapping_add(head as u64);
    aligned_nodes_with(
        begin >> GROUP_LEVEL,
        &mut rest[..groups],
        scratch,
        op,
        |level, index, x| emit(level + GROUP_LEVEL, index, x),
    );
    let tail = groups * group;
    aligned_nodes_with(
        begin.wrapping_add(tail as u64),
        &mut rest[tail..],
        scratch,
        op,
        emit,
    );
}

/// How a range of `len` points from coordinate `start` splits into groups of
/// `2^`[`GROUP_LEVEL`] aligned points ([`grouped_nodes_with`]): the points before the first
/// whole group, and the number of whole groups.
pub fn group_split(start: u64, len: usize) -> (usize, usize) {
    let group = 1usize << GROUP_LEVEL;
    let head = (start.wrapping_neg() as usize & (group - 1)).min(len);
    (head, (len - head) / group)
}

/// The pairwise tree of a block of `2^k` values (destroyed), through `scratch` (at least an
/// eighth of the block). The bottom three levels go in one pass (each aligned eight values to
/// one), the rest level by level from one buffer into the other: no pass writes where it
/// reads, so the compiler vectorizes them.
fn block_tree<T: Copy>(block: &mut [T], scratch: &mut [T], op: impl Fn(T, T) -> T + Copy) -> T {
    let tree8 = |c: &[T]| {
        op(
            op(op(c[0], c[1]), op(c[2], c[3])),
            op(op(c[4], c[5]), op(c[6], c[7])),
        )
    };
    let mut n = block.len();
    let mut in_block = true;
    if n >= 8 {
        n /= 8;
        for (d, c) in scratch[..n].iter_mut().zip(block.chunks_exact(8)) {
            *d = tree8(c);
        }
        in_block = false;
    }
    while n > 1 {
        n /= 2;
        let (src, dst) = if in_block {
            (&block[..2 * n], &mut scratch[..n])
        } else {
            (&scratch[..2 * n], &mut block[..n])
        };
        for (d, pair) in dst.iter_mut().zip(src.chunks_exact(2)) {
            *d = op(pair[0], pair[1]);
        }
        in_block = !in_block;
    }
    if in_block { block[0] } else { scratch[0] }
}

/// The canonical reduction of the values `value(point)` over the points `0 <= c_d <
/// extents[d]`, computed straight from the definition (recursively, with identity padding):
/// the reference the parts are tested against. `None` for a space without points.
pub fn canonical(
    op: ReduceOp,
    dtype: DType,
    extents: &[u64],
    value: &dyn Fn(&[u64]) -> Scalar,
) -> Option<Scalar> {
    if extents.contains(&0) {
        return None;
    }
    let identity = exact_identity(op, dtype);
    let mut point = Vec::with_capacity(extents.len());
    Some(tree(op, identity, extents, &mut point, value))
}

/// `T_d` under the coordinates in `point`.
fn tree(
    op: ReduceOp,
    identity: Scalar,
    extents: &[u64],
    point: &mut Vec<u64>,
    value: &dyn Fn(&[u64]) -> Scalar,
) -> Scalar {
    let d = point.len();
    if d == extents.len() {
        return value(point);
    }
    let top = extents[d].max(1).next_power_of_two();
    let mut level: Vec<Scalar> = (0..top)
        .map(|c| {
            if c < extents[d] {
                point.push(c);
                let v = tree(op, identity, extents, point, value);
                point.pop();
                v
            } else {
                identity
            }
        })
        .collect();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| reduce(op, pair[0], pair[1]).unwrap_or(identity))
            .collect();
    }
    level[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(r: &Option<Scalar>) -> Option<u64> {
        match r {
            Some(Scalar::F64(v)) => Some(v.to_bits()),
            _ => None,
        }
    }

    #[test]
    fn a_sum_of_eight_is_the_pairwise_tree() {
        let xs = [1e16, 1.0, -1e16, 1.0, 3.0, 0.5, 0.25, -7.0];
        let want = ((xs[0] + xs[1]) + (xs[2] + xs[3])) + ((xs[4] + xs[5]) + (xs[6] + xs[7]));
        let got = canonical(ReduceOp::Sum, DType::F64, &[8], &|p| {
            Scalar::F64(xs[p[0] as usize])
        });
        assert_eq!(f64s(&got), Some(want.to_bits()));
        // Not the sequential sum: the order is visible.
        let sequential: f64 = xs.iter().sum();
        assert_ne!(want.to_bits(), sequential.to_bits());
    }

    #[test]
    fn padding_keeps_negative_zero() {
        let got = canonical(ReduceOp::Sum, DType::F64, &[3], &|_| Scalar::F64(-0.0));
        assert_eq!(f64s(&got), Some((-0.0f64).to_bits()));
    }

    #[test]
    fn parts_complain_about_points_outside_and_twice() {
        let mut p = Partial::new(ReduceOp::Sum, DType::F64, &[4]);
        assert!(p.add(&[4], Scalar::F64(1.0)).is_err());
        assert!(p.add(&[0, 0], Scalar::F64(1.0)).is_err());
        assert!(p.add(&[1], Scalar::I64(1)).is_err());
        p.add(&[1], Scalar::F64(1.0)).unwrap();
        assert!(p.add(&[1], Scalar::F64(1.0)).is_err());
        let other = Partial::new(ReduceOp::Max, DType::F64, &[4]);
        assert_eq!(p.merge(other), Err(ReductionError::Mismatch));
    }

    #[test]
    fn a_rank_zero_loop_is_its_one_value_and_an_empty_space_leaves_the_element() {
        let mut p = Partial::new(ReduceOp::Prod, DType::I64, &[]);
        p.add(&[], Scalar::I64(6)).unwrap();
        assert_eq!(p.fold_into(Scalar::I64(7)), Some(Scalar::I64(42)));
        let empty = Partial::new(ReduceOp::Sum, DType::F64, &[3, 0]);
        assert_eq!(empty.fold_into(Scalar::F64(2.5)), Some(Scalar::F64(2.5)));
    }

    #[test]
    fn element_trees_are_reductions_at_indices_that_do_not_depend_on_the_point() {
        let k = crate::text::parse(
            "kernel @vecmat(%a: store<f64, 2, read>, %x: store<f64, 1, read>,
                            %y: store<f64, 1, reduce(sum)>, %z: store<f64, 1, reduce(sum)>,
                            %c: store<i64, 1, read>, %w: store<f64, 1, reduce(sum)>,
                            %q: store<i64, 1, reduce(sum)>, %u: store<f64, 2, reduce(sum)>,
                            %v: store<f64, 1, reduce(sum)>) {
               %0 = extent %a, 0
               %1 = const i64 0
               parallel %x (%i) {
                 %2 = load %x[%i]
                 for %r = %1 to %0 {
                   %3 = load %a[%r, %i]  %4 = mul %3, %2
                   reduce sum %y[%r], %4
                   %5 = load %c[%i]  reduce sum %w[%5], %4
                 }
                 reduce sum %z[%i], %2
                 for %s = %1 to %0 {
                   reduce sum %u[%1, %s], %2
                   reduce sum %v[%s], %2
                 }
                 reduce sum %v[%1], %2
                 %6 = const i64 1
                 reduce sum %q[%1], %6
               }
             }",
        )
        .unwrap();
        let Op::Parallel(pl) = &k.body[2].op else {
            panic!("the loop");
        };
        // y: at the induction value. u: at a value from outside the loop and the induction
        // value. z: at the point's own index (a row it owns). w: at loaded data (a scatter).
        // q: an integer sum. v: twice per point.
        assert_eq!(element_trees(&k.params, pl), vec![2, 7]);
    }

    #[test]
    fn element_trees_fold_blocks_in_order_and_merge_in_any_split() {
        // 3 blocks of 4096 points and a clipped fourth: each block folds in order, the blocks
        // by the pairwise tree.
        let n: u64 = 3 * 4096 + 1000;
        let v =
            |c: u64| Scalar::F64(((c * 7919) % 1013) as f64 * 1e-3 - 0.4 + (c % 3) as f64 * 1e9);
        let f = |s: Scalar| match s {
            Scalar::F64(x) => x,
            _ => f64::NAN,
        };
        let blocks: Vec<f64> = (0..4u64)
            .map(|b| (b * 4096..((b + 1) * 4096).min(n)).fold(-0.0, |a, c| a + f(v(c))))
            .collect();
        let want = (blocks[0] + blocks[1]) + (blocks[2] + blocks[3]);
        // Split into parts at awkward places; some parts hand whole blocks, others points.
        let cuts = [0u64, 5, 4096, 7000, 8192, 12_288, n];
        let mut parts = Vec::new();
        for w in cuts.windows(2) {
            let mut p = Partial::blocked(ReduceOp::Sum, DType::F64, n, ELEMENT_BLOCK_LEVEL);
            if w[0] % 4096 == 0 && (w[1] - w[0] == 4096 || w[1] == n) {
                let b = w[0] / 4096;
                p.add_block(b, Scalar::F64(blocks[b as usize])).unwrap();
            } else {
                for c in w[0]..w[1] {
                    p.add(&[c], v(c)).unwrap();
                }
            }
            parts.push(p);
        }
        for order in [[0usize, 1, 2, 3, 4, 5], [5, 3, 1, 0, 4, 2]] {
            let mut all = Partial::blocked(ReduceOp::Sum, DType::F64, n, ELEMENT_BLOCK_LEVEL);
            for &k in &order {
                all.merge(parts[k].clone()).unwrap();
            }
            assert_eq!(
                f64s(&all.finish().unwrap()),
                Some(want.to_bits()),
                "{order:?}"
            );
        }
        // A space that fits in one block is that block's fold; unbounded, the same.
        let mut one = Partial::unbounded_blocked(ReduceOp::Sum, DType::F64, ELEMENT_BLOCK_LEVEL);
        for c in 0..10 {
            one.add(&[c], v(c)).unwrap();
        }
        let seq = (0..10).fold(-0.0, |a, c| a + f(v(c)));
        assert_eq!(f64s(&one.finish().unwrap()), Some(seq.to_bits()));
        // A point twice, and a node below the blocks, are errors.
        let mut p = Partial::blocked(ReduceOp::Sum, DType::F64, n, ELEMENT_BLOCK_LEVEL);
        p.add(&[3], v(3)).unwrap();
        assert!(p.add(&[3], v(3)).is_err());
        assert!(p.add_node(&[], 0, 5, v(5)).is_err());
    }

    #[test]
    fn partials_cross_processes_as_words() {
        // Points 0..11 split between two "ranks": each sends its partial as words; merged in
        // either order they give the canonical result.
        let value = |i: u64| Scalar::F64(1.0 / (i as f64 + 3.0));
        let mut halves = Vec::new();
        for range in [0..5u64, 5..11] {
            let mut part = Partial::new(ReduceOp::Sum, DType::F64, &[11]);
            for i in range {
                part.add(&[i], value(i)).unwrap();
            }
            let lp = LoopPartial {
                loop_index: 1,
                param: 4,
                element: vec![],
                partial: part,
            };
            let words = lp.to_words();
            let (back, rest) = LoopPartial::from_words(&words).unwrap();
            assert!(rest.is_empty());
            assert_eq!(back, lp);
            halves.push(back);
        }
        let want = canonical(ReduceOp::Sum, DType::F64, &[11], &|p| value(p[0]));
        for order in [[0, 1], [1, 0]] {
            let mut merged = halves[order[0]].partial.clone();
            merged.merge(halves[order[1]].partial.clone()).unwrap();
            assert_eq!(merged.finish().unwrap(), want);
        }
        // Element trees' loose points, and truncated words.
        let mut blocked = Partial::blocked(ReduceOp::Sum, DType::F32, 9000, 12);
        blocked.add(&[4097], Scalar::F32(2.5)).unwrap();
        let lp = LoopPartial {
            loop_index: 0,
            param: 2,
            element: vec![3],
            partial: blocked,
        };
        let words = lp.to_words();
        assert_eq!(LoopPartial::from_words(&words).unwrap().0, lp);
        assert!(LoopPartial::from_words(&words[..words.len() - 1]).is_none());
    }
}
