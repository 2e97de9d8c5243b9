//! Quick launches: a small launch runs on the calling thread, its frame written straight from
//! the bindings into a frame kept from launch to launch, and, where it is the whole of its
//! task (a *sole* launch, see `weft_runtime::Backend::set_sole_launch`), its float sums and
//! products into 0-d stores folded into their targets at once.
//!
//! A loop of small steps (a dot product and an update, NPBench's `trmm`, `lu` or `cholesky`,
//! thousands of times) pays the general launcher's cost per launch: views with vectors of
//! their own, a frame and its copy per chunk, leaf buffers, canonical partials in ordered
//! maps, and the executor's fold through reads and writes of the buffer. A quick launch does
//! none of that, and gives the same bits:
//! - every parallel loop runs as one chunk where the general launcher would also run one,
//!   and at most [`QUICK_POINTS`] points where it has leaf stores, in one call;
//! - a leaf store's loop must cover its whole view (its origin at 0, its extents the view's),
//!   and the root of its canonical tree is computed in place ([`whole_root`]): aligned pairs,
//!   level by level, which is the identity-padded pairwise tree of `weft_ir::reduction` with
//!   every `x op identity` left out (exact for float sums and products);
//! - the roots fold into their targets after the last step, in the kernel's loop order, as
//!   the executor folds a task's partials (`target = target op root`).
//!
//! Anything else (register reductions, element trees, hidden scratch stores, deferred or
//! scratch bindings, a larger loop) declines, having done nothing, and takes the general
//! path.

use weft_ir::{DType, ReduceOp, Scalar};

use crate::Result;
use crate::launch::{
    CHUNK_ITERS, KernelFn, Plan, chunk_rows, chunk_rows_spread, crosses_lines, plain_rows,
};
use crate::leaves::fill_exact_identity;
use crate::lower::StepKind;

/// The most points of a parallel loop with leaf stores that a quick launch runs: as many as
/// one chunk of the general launcher (whose leaf buffer, 128 KiB of `f64`, stays in the
/// second-level cache).
pub(crate) const QUICK_POINTS: i64 = CHUNK_ITERS;

/// One store argument of a quick launch, borrowed from its binding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BoundStore<'a> {
    /// Address of the element at index 0 in every dimension.
    pub ptr: *mut u8,
    /// Extent, stride (in elements) and origin of each dimension.
    pub extents: &'a [i64],
    pub strides: &'a [i64],
    pub origin: &'a [i64],
    /// Extents of the whole view the sub-store is cut from.
    pub view: &'a [u64],
}

/// Buffers a back end keeps from one quick launch to the next.
#[derive(Debug, Default)]
pub(crate) struct QuickScratch {
    frame: Vec<u64>,
    /// One leaf buffer per leaf store.
    leaves: Vec<Vec<u64>>,
    /// Per leaf store, the root of its tree once its loop has run (`None`: no point).
    roots: Vec<Option<Scalar>>,
}

/// Whether a plan's form allows quick launches (decided once, when it is compiled): no hidden
/// scratch stores, no product routine, leaf stores only of 0-d targets, and no reduction
/// through chunk buffers or registers.
pub(crate) fn allowed(plan: &Plan) -> bool {
    plan.scratch.is_empty()
        && plan.rows_product.is_none()
        && plan.leaves.iter().all(|l| l.elements == 0)
        && plan.steps.iter().all(|s| match &s.kind {
            StepKind::Sequential => true,
            StepKind::Parallel { reds, .. } => reds.is_empty(),
        })
}

impl Plan {
    /// Runs the kernel as a quick launch (see the module documentation) on the store
    /// arguments `stores` (without the hidden leaf stores) and `scalars`, on a pool of
    /// `threads`; `sole` says the launch is the whole of its task. `Ok(false)`, having done
    /// nothing, where the launch is not one.
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`]: every view lies inside memory valid for its
    /// accesses, alive for the call.
    pub(crate) unsafe fn run_quick(
        &self,
        stores: &[BoundStore<'_>],
        scalars: &[Scalar],
        threads: usize,
        sole: bool,
        scratch: &mut QuickScratch,
    ) -> Result<bool> {
        if !self.quick || (!self.leaves.is_empty() && !sole) {
            return Ok(false);
        }
        let layout = &self.layout;
        let given = layout.stores.len() - self.leaves.len();
        if stores.len() != given || scalars.len() != layout.scalars.len() {
            return Ok(false);
        }
        for (slot, s) in layout.stores.iter().zip(stores) {
            let r = slot.rank;
            let shaped = s.extents.len() == r && s.strides.len() == r && s.origin.len() == r;
            if !shaped || s.extents.iter().any(|&e| e < 0) || (s.ptr.is_null() && r > 0) {
                return Ok(false);
            }
        }
        if layout
            .scalars
            .iter()
            .zip(scalars)
            .any(|(slot, s)| s.dtype() != slot.dtype)
        {
            return Ok(false);
        }
        // Each parallel loop: one chunk, as the general launcher would run it; with leaf
        // stores, few points over their whole view.
        let mut loop_index = 0u32;
        for step in &self.steps {
            let StepKind::Parallel { over, spread, .. } = &step.kind else {
                continue;
            };
            let Some(sub) = stores.get(*over) else {
                return Ok(false);
            };
            let (rows, inner) = rows_inner(sub.extents);
            let reduces = self.leaves.iter().any(|l| l.loop_index == loop_index);
            let per = if *spread {
                chunk_rows_spread(rows, inner, threads)
            } else if reduces {
                chunk_rows(inner)
            } else {
                let strided = crosses_lines(
                    layout
                        .stores
                        .iter()
                        .zip(stores)
                        .map(|(slot, s)| (slot.dtype.size(), s.extents, s.strides)),
                );
                plain_rows(rows, inner, strided, threads)
            };
            if rows > per {
                return Ok(false);
            }
            let whole = sub.origin.iter().all(|&o| o == 0)
                && sub.view.len() == sub.extents.len()
                && sub
                    .extents
                    .iter()
                    .zip(sub.view)
                    .all(|(&e, &v)| u64::try_from(e) == Ok(v));
            if reduces && (!whole || rows.saturating_mul(inner) > QUICK_POINTS) {
                return Ok(false);
            }
            loop_index += 1;
        }
        if self.is_cancelled() {
            return Err(self.cancelled());
        }

        // The frame: the given stores, the leaf stores (dense, over their loop's sub-store),
        // the scalars.
        let frame = &mut scratch.frame;
        frame.clear();
        frame.resize(layout.frame_len, 0);
        for (j, (slot, s)) in layout.stores.iter().zip(stores).enumerate() {
            self.write_store(frame, j, slot, s.ptr, s.extents, s.strides, s.origin)?;
        }
        scratch.leaves.resize_with(self.leaves.len(), Vec::new);
        scratch.roots.clear();
        scratch.roots.resize(self.leaves.len(), None);
        for (i, leaf) in self.leaves.iter().enumerate() {
            let over = self.store_index(leaf.over)?;
            let extents = stores[over].extents;
            let points: usize = extents
                .iter()
                .map(|&e| usize::try_from(e).unwrap_or(0))
                .product();
            let words = (points.max(1) * leaf.dtype.size()).div_ceil(8);
            // Each point stores its slot (or, `fill`, updates it from the identity): the buffer
            // is not cleared.
            let buf = &mut scratch.leaves[i];
            if buf.len() < words {
                buf.resize(words, 0);
            }
            if leaf.fill {
                // SAFETY: `buf` holds `points` elements of the leaf's type, 8-byte aligned.
                unsafe {
                    fill_exact_identity(buf.as_mut_ptr().cast(), points, leaf.dtype, leaf.op)
                };
            }
            let slot = &layout.stores[given + i];
            write_dense(frame, slot, buf.as_mut_ptr().cast(), extents);
        }
        for (slot, s) in layout.scalars.iter().zip(scalars) {
            frame[slot.off] = crate::launch::scalar_word(*s);
        }

        let mut loop_index = 0u32;
        for step in &self.steps {
            let func: KernelFn = step.func;
            match &step.kind {
                StepKind::Sequential => {
                    // SAFETY: the frame has the layout the function was compiled for; its
                    // store accesses are bounds-checked against the frame's extents, valid
                    // for the stores (the caller's contract); it runs alone, on this thread.
                    let status = unsafe { func(frame.as_mut_ptr(), std::ptr::null(), 0, 1) };
                    if status != 0 {
                        return Err(self.status_error(status));
                    }
                }
                StepKind::Parallel {
                    over,
                    obligations,
                    grouped,
                    ..
                } => {
                    let this = loop_index;
                    loop_index += 1;
                    let extent_of = |k: usize| match k.checked_sub(given) {
                        None => stores.get(k).map_or(&[][..], |s| s.extents),
                        Some(i) => self
                            .leaves
                            .get(i)
                            .and_then(|l| self.store_index(l.over).ok())
                            .and_then(|o| stores.get(o))
                            .map_or(&[][..], |s| s.extents),
                    };
                    self.check_obligations_by(*over, obligations, extent_of)?;
                    let (rows, inner) = rows_inner(stores[*over].extents);
                    if rows == 0 || inner == 0 {
                        continue;
                    }
                    // SAFETY: as above; the one chunk covers rows `0..rows` of the loop,
                    // whose accesses by loop index the obligations proved in bounds; the leaf
                    // stores point at buffers of the loop's points, private to this launch.
                    let status = unsafe { func(frame.as_mut_ptr(), std::ptr::null(), 0, rows) };
                    if status != 0 {
                        return Err(self.status_error(status));
                    }
                    for (i, leaf) in self.leaves.iter().enumerate() {
                        if leaf.loop_index != this {
                            continue;
                        }
                        let extents = stores[*over].extents;
                        let grouped = *grouped && leaf.groupable() && extents.len() == 1;
                        let buf = &mut scratch.leaves[i];
                        scratch.roots[i] = typed_root(buf, extents, grouped, leaf.op, leaf.dtype)
                            .map_err(|(op, dtype)| {
                            self.fault(format!("a leaf store of {op:?} on {dtype}"))
                        })?;
                    }
                }
            }
        }

        // The roots fold into their targets in the kernel's loop order.
        for (leaf, root) in self.leaves.iter().zip(&scratch.roots) {
            let Some(root) = *root else { continue };
            let target = &stores[self.store_index(leaf.target)?];
            if !target.extents.is_empty() {
                return Err(self.fault(format!(
                    "a reduction into parameter {} of rank {}, not a 0-d store",
                    leaf.target,
                    target.extents.len()
                )));
            }
            let size = leaf.dtype.size();
            let mut bytes = [0u8; 8];
            // SAFETY: a 0-d view's one element lies inside memory valid for reads and writes
            // of its type (the caller's contract), `size` bytes.
            unsafe { std::ptr::copy_nonoverlapping(target.ptr, bytes.as_mut_ptr(), size) };
            let old = Scalar::from_bits(leaf.dtype, u64::from_ne_bytes(bytes));
            let new = weft_ir::interp::reduce(leaf.op, old, root)
                .ok_or_else(|| self.fault(format!("cannot fold into parameter {}", leaf.target)))?;
            let out = new.to_bits().to_ne_bytes();
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), target.ptr, size) };
        }
        Ok(true)
    }
}

/// A loop's rows (its dimension 0) and points per row, from its sub-store's extents.
fn rows_inner(extents: &[i64]) -> (i64, i64) {
    match extents.split_first() {
        None => (1, 1),
        Some((&r, rest)) => (r, rest.iter().fold(1i64, |a, &b| a.saturating_mul(b))),
    }
}

/// Writes the frame words of a dense store of `extents` at `ptr` (a leaf store): row-major
/// strides, origin 0.
fn write_dense(frame: &mut [u64], slot: &crate::lower::StoreSlot, ptr: *mut u8, extents: &[i64]) {
    let size = slot.dtype.size() as i64;
    frame[slot.ptr()] = ptr as u64;
    let mut dense = size;
    for d in (0..slot.rank).rev() {
        let e = extents.get(d).copied().unwrap_or(0);
        frame[slot.extent(d)] = e as u64;
        frame[slot.stride(d)] = dense as u64;
        frame[slot.origin(d)] = 0;
        frame[slot.dense_stride(d)] = dense as u64;
        dense = dense.saturating_mul(e);
    }
}

/// [`whole_root`] of a leaf buffer of `op` on `dtype`; `Err` for an operator and type that
/// leaf stores never hold.
fn typed_root(
    buf: &mut [u64],
    extents: &[i64],
    grouped: bool,
    op: ReduceOp,
    dtype: DType,
) -> std::result::Result<Option<Scalar>, (ReduceOp, DType)> {
    let dims: weft_runtime::smallvec::SmallVec<[usize; 4]> = extents
        .iter()
        .map(|&e| usize::try_from(e).unwrap_or(0))
        .collect();
    let n: usize = dims.iter().product();
    // SAFETY (both arms): `buf` holds at least `n` elements of the leaf's type (sized by the
    // launch), 8-byte aligned, which is alignment enough for both.
    Ok(match (dtype, op) {
        (DType::F64, ReduceOp::Sum) => {
            whole_root(unsafe { typed(buf, n) }, &dims, grouped, |a: f64, b| a + b).map(Scalar::F64)
        }
        (DType::F64, ReduceOp::Prod) => {
            whole_root(unsafe { typed(buf, n) }, &dims, grouped, |a: f64, b| a * b).map(Scalar::F64)
        }
        (DType::F32, ReduceOp::Sum) => {
            whole_root(unsafe { typed(buf, n) }, &dims, grouped, |a: f32, b| a + b).map(Scalar::F32)
        }
        (DType::F32, ReduceOp::Prod) => {
            whole_root(unsafe { typed(buf, n) }, &dims, grouped, |a: f32, b| a * b).map(Scalar::F32)
        }
        _ => return Err((op, dtype)),
    })
}

/// The first `n` elements of `buf` as `T`s.
///
/// # Safety
/// `buf` holds at least `n` `T`s, and its alignment is enough for `T`.
unsafe fn typed<T>(buf: &mut [u64], n: usize) -> &mut [T] {
    // SAFETY: forwarded from the caller.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<T>(), n) }
}

/// The root of the canonical tree (`weft_ir::reduction`) of contributions `v` (row-major, one
/// per point of a view of `extents`, used as scratch): each line of the innermost dimension
/// reduces to its root, then each line of the next, outwards. `grouped` (rank 1): each whole
/// aligned group of eight points holds its node in its first slot (see
/// `weft_ir::reduction::grouped_nodes_with`). `None` for a view without points.
pub(crate) fn whole_root<T: Copy>(
    v: &mut [T],
    extents: &[usize],
    grouped: bool,
    op: impl Fn(T, T) -> T + Copy,
) -> Option<T> {
    if extents.contains(&0) || v.is_empty() {
        return None;
    }
    let mut len: usize = extents.iter().product();
    if len > v.len() {
        return None;
    }
    for &e in extents.iter().rev() {
        let lines = len / e;
        for l in 0..lines {
            let line = &mut v[l * e..(l + 1) * e];
            let root = if grouped && extents.len() == 1 {
                grouped_line_root(line, op)
            } else {
                line_root(line, op)
            };
            v[l] = root;
        }
        len = lines;
    }
    Some(v[0])
}

/// The root of one line's tree (every coordinate of the dimension, used as scratch): the
/// pairwise tree of aligned blocks, a node whose right half holds no coordinate passing up
/// unchanged (that half would hold only the identity). Three levels go at once (each aligned
/// eight values to one, packed at the front), then the next three, and so on.
fn line_root<T: Copy>(v: &mut [T], op: impl Fn(T, T) -> T + Copy) -> T {
    let mut n = v.len();
    while n >= 8 {
        let full = n / 8;
        for i in 0..full {
            let c = &v[8 * i..8 * i + 8];
            let node = op(
                op(op(c[0], c[1]), op(c[2], c[3])),
                op(op(c[4], c[5]), op(c[6], c[7])),
            );
            v[i] = node;
        }
        let mut next = full;
        if n > 8 * full {
            v[full] = small_root(&mut v[8 * full..n], op);
            next += 1;
        }
        n = next;
    }
    small_root(&mut v[..n], op)
}

/// [`line_root`] of a line of fewer than eight values (or any line, one level at a time).
fn small_root<T: Copy>(v: &mut [T], op: impl Fn(T, T) -> T) -> T {
    let mut n = v.len();
    while n > 1 {
        let half = n / 2;
        for i in 0..half {
            v[i] = op(v[2 * i], v[2 * i + 1]);
        }
        if n % 2 == 1 {
            v[half] = v[n - 1];
        }
        n = n.div_ceil(2);
    }
    v[0]
}

/// [`line_root`] of a line left grouped: whole groups of eight hold their node in their
/// first slot; the points after the last whole group hold their own contributions.
fn grouped_line_root<T: Copy>(v: &mut [T], op: impl Fn(T, T) -> T + Copy) -> T {
    let group = 1usize << weft_ir::reduction::GROUP_LEVEL;
    let whole = v.len() / group;
    let tail = whole * group;
    let mut nodes = whole;
    if tail < v.len() {
        v[tail] = line_root(&mut v[tail..], op);
        nodes += 1;
    }
    for g in 1..nodes {
        v[g] = v[g * group];
    }
    line_root(&mut v[..nodes], op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use weft_ir::reduction::canonical;

    /// The reference: `weft_ir::reduction::canonical` over the same contributions.
    fn reference(values: &[f64], extents: &[usize]) -> Option<f64> {
        let ext: Vec<u64> = extents.iter().map(|&e| e as u64).collect();
        let value = |p: &[u64]| {
            let mut at = 0usize;
            for (&c, &e) in p.iter().zip(extents) {
                at = at * e + c as usize;
            }
            Scalar::F64(values[at])
        };
        match canonical(ReduceOp::Sum, DType::F64, &ext, &value)? {
            Scalar::F64(x) => Some(x),
            _ => None,
        }
    }

    /// Values whose sums depend on the order: large and small magnitudes of both signs.
    fn values(n: usize, seed: u64) -> Vec<f64> {
        crate::test_values::uniform(n, seed)
            .into_iter()
            .enumerate()
            .map(|(i, m)| m * 10f64.powi((i % 17) as i32 - 8))
            .collect()
    }

    proptest! {
        #[test]
        fn the_root_is_the_canonical_trees(
            extents in proptest::collection::vec(1usize..40, 0..4),
            seed in any::<u64>(),
        ) {
            let n: usize = extents.iter().product();
            let v = values(n, seed);
            let want = reference(&v, &extents);
            let got = whole_root(&mut v.clone(), &extents, false, |a, b| a + b);
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        }

        #[test]
        fn a_grouped_line_gives_the_canonical_root(n in 1usize..300, seed in any::<u64>()) {
            let v = values(n, seed);
            let want = reference(&v, &[n]);
            // Group as a grouped loop leaves it: each whole aligned group's node (the
            // pairwise tree of its eight points) in its first slot, the rest garbage.
            let mut grouped = v.clone();
            for g in 0..n / 8 {
                let c = &v[8 * g..8 * g + 8];
                grouped[8 * g] = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
                for slot in &mut grouped[8 * g + 1..8 * g + 8] {
                    *slot = f64::NAN;
                }
            }
            let got = whole_root(&mut grouped, &[n], true, |a, b| a + b);
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        }
    }

    #[test]
    fn a_view_without_points_has_no_root() {
        assert_eq!(
            whole_root(&mut [1.0f64; 4], &[4, 0], false, |a, b| a + b),
            None
        );
        assert_eq!(whole_root::<f64>(&mut [], &[3], false, |a, b| a + b), None);
    }
}
