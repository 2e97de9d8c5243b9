//! Running a compiled kernel: argument checks, the frame, the split of each parallel loop into
//! chunks on a rayon pool, and reductions.
//!
//! # Determinism
//! The outermost dimension of a parallel loop is cut into chunks of [`chunk_rows`] rows, a
//! number that depends only on the loop's shape (a loop whose points run `for` loops and that
//! sends no float sum or product through chunk buffers may be cut finer, by the thread count:
//! its results do not depend on the chunks). A store reduced into by a parallel loop is
//! either updated in place (when every reduction's first index is the loop's first index, so
//! chunks touch disjoint rows) or through one private buffer per chunk, initialised to the
//! operator's identity and folded into the store element by element in chunk order. Either way
//! the result is the same bits for any number of threads. Float sums and products into 0-d
//! stores, and element trees, go through leaf stores instead ([`crate::leaves`]): each chunk
//! gets its own leaf buffers (through its own copy of the frame) and returns their canonical
//! nodes, which merge into the same bits in any order. A chunk with leaf stores runs in
//! several calls ([`leaf_calls`]): slices of about [`LEAF_ITERS`] points, and each whole block
//! of an element tree alone (chunks of such loops are cut on the blocks' bounds).

use rayon::ThreadPool;
use rayon::prelude::*;
use weft_ir::{DType, ReduceOp, Scalar};

use weft_ir::reduction::{ELEMENT_BLOCK_LEVEL, LoopPartial};

use crate::compile::StoreView;
use crate::leaves::{Leaf, LeafPart, Rows, chunk_nodes, fill_exact_identity, grouped_chunk_nodes};
use crate::lower::wide::Isa;
use crate::lower::{FaultSite, Layout, Obligation, RedBuf, RedMode, StepKind};
use crate::rows_product::{B_PARAM, RowsProduct, X_PARAM};
use crate::{Error, Result};
use weft_ir::reduction::DenseShape;

/// The signature of every compiled step; see [`crate::lower`].
pub(crate) type KernelFn = unsafe extern "C" fn(*mut u64, *const *mut u8, i64, i64) -> i64;

/// About how many loop iterations one chunk of a parallel loop runs.
pub(crate) const CHUNK_ITERS: i64 = 16 * 1024;

/// Chunks per thread, at least, of a loop whose points run `for` loops.
const SPREAD: i64 = 4;

/// About how many loop iterations one slice of a chunk with leaf stores runs (see
/// [`crate::leaves`]): their leaves stay in the first-level cache.
const LEAF_ITERS: i64 = 4096;

/// The memory that the reduction buffers of one wave of chunks may take (more when needed to
/// give every thread a chunk).
const PARTIAL_BUDGET: usize = 64 << 20;

/// The most that reduction buffers may take to give every thread a chunk.
const PARTIAL_LIMIT: usize = 1 << 30;

/// Rows of the outermost dimension per chunk for a loop whose inner dimensions hold `inner`
/// iterations per row. Depends on the loop's shape only.
pub(crate) fn chunk_rows(inner: i64) -> i64 {
    (CHUNK_ITERS / inner.max(1)).max(1)
}

/// The rows per chunk of a loop of `rows` rows cut into chunks of at most `per` rows, evened
/// out where it runs as several chunks: their count rounded up to a multiple of `threads` and
/// the rows shared evenly among them, so that each thread can take the same share. (NPBench's
/// `heat_3d` at `M`, 38 rows of 38 x 38 points, ran as chunks of 11, 11, 11 and 5 rows, 22
/// rows on one thread against 16 on the other; now 10, 10, 10 and 8.) Only for loops whose
/// results do not depend on their chunks (no reduction through chunk buffers or leaves).
pub(crate) fn balanced_rows(rows: i64, per: i64, threads: usize) -> i64 {
    let per = per.max(1);
    let chunks = (rows.max(1) - 1) / per + 1;
    let threads = i64::try_from(threads).unwrap_or(1).max(1);
    if chunks < 2 || threads < 2 {
        return per;
    }
    let even = (chunks - 1) / threads * threads + threads;
    ((rows - 1) / even + 1).min(per)
}

/// How many iterations one point of a loop counts for when choosing its chunks, where a store
/// argument's innermost elements lie a cache line or more apart: each access then brings a
/// line of its own. (NPBench's `vadv` updates `(112, 112)` planes `a[:, :, k]` whose elements
/// are 1,440 bytes apart: one chunk by the count of points, about 160 us on one thread.)
const STRIDED_WEIGHT: i64 = 8;

/// The bytes of a cache line.
const LINE_BYTES: i64 = 64;

/// Whether any of the store arguments `(element bytes, extents, strides)` steps a cache line or
/// more between neighbours of its innermost dimension (see [`STRIDED_WEIGHT`]).
pub(crate) fn crosses_lines<'a>(
    stores: impl IntoIterator<Item = (usize, &'a [i64], &'a [i64])>,
) -> bool {
    stores.into_iter().any(|(size, extents, strides)| {
        let size = i64::try_from(size).unwrap_or(1);
        match (extents.last(), strides.last()) {
            (Some(&e), Some(&s)) => e > 1 && s.saturating_abs().saturating_mul(size) >= LINE_BYTES,
            _ => false,
        }
    })
}

/// The rows per chunk of a loop whose results do not depend on its chunks (no reduction
/// through chunk buffers or leaves, no `for` loops in its points): [`chunk_rows`], each point
/// weighted by [`STRIDED_WEIGHT`] where `strided` (see [`crosses_lines`]), evened out across
/// the threads by [`balanced_rows`].
pub(crate) fn plain_rows(rows: i64, inner: i64, strided: bool, threads: usize) -> i64 {
    let weight = if strided { STRIDED_WEIGHT } else { 1 };
    balanced_rows(rows, chunk_rows(inner.saturating_mul(weight)), threads)
}

/// [`chunk_rows`] of a loop whose points run `for` loops (its step's `spread`): also at least
/// [`SPREAD`] chunks per thread, whatever the shape says (a `matvec` has few rows, each of much
/// work).
pub(crate) fn chunk_rows_spread(rows: i64, inner: i64, threads: usize) -> i64 {
    let threads = i64::try_from(threads).unwrap_or(1).max(1);
    chunk_rows(inner).min((rows - 1) / (SPREAD * threads) + 1)
}

/// What running a kernel on one point task hands back (see
/// [`crate::CompiledKernel::run_task`]).
#[derive(Debug, Default)]
pub struct TaskOutput {
    /// The canonical partials of its float sums and products into 0-d stores.
    pub partials: Vec<LoopPartial>,
    /// The rows of deferred store arguments that other point tasks may still read: the caller
    /// writes them once every point task of the launch has run.
    pub held_rows: Vec<crate::deferred::HeldRow>,
}

/// One finalized step.
pub(crate) struct PlanStep {
    pub kind: StepKind,
    pub func: KernelFn,
    /// Whether `func` is the vector function of a parallel step.
    pub vectorized: bool,
    /// The instruction set of the wide body that vector function calls, if any.
    pub wide: Option<Isa>,
    /// Why that vector function calls no wide body on a path that has them.
    pub wide_refusal: Option<String>,
    /// Whether that wide body runs whole rows (its last partial step masked).
    pub whole_rows: bool,
}

/// The message of a kernel fault caused by the cancel flag; the back end adds why it was
/// set.
pub(crate) const CANCELLED_MESSAGE: &str = "cancelled";

/// How the message of a launch stopped by an out-of-bounds index begins (the back end then
/// finds the index itself: `weft_runtime::diagnose`).
pub(crate) const INDEX_FAULT_MESSAGE: &str = "index out of bounds in store parameter";

/// Everything needed to run a compiled kernel.
pub(crate) struct Plan {
    pub name: String,
    pub layout: Layout,
    pub steps: Vec<PlanStep>,
    pub faults: Vec<FaultSite>,
    /// The hidden leaf stores of reductions into 0-d stores (see [`crate::leaves`]), whose
    /// parameters follow the kernel's own.
    pub leaves: Vec<Leaf>,
    /// The hidden scratch stores of loops cut into segments (see [`crate::strips`]), whose
    /// parameters follow the leaf stores': (parameter, the store parameter its loop runs
    /// over).
    pub scratch: Vec<(u32, u32)>,
    /// Per top-level parallel loop, the store parameters whose stores it can defer (see
    /// [`crate::deferred`]).
    pub deferrable: Vec<Vec<u32>>,
    /// The back end's cancel flag (see `Compiler::cancel_flag`).
    pub cancel: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// Set when the kernel is the canonical product by rows: its element tree's whole blocks
    /// run through [`crate::rows_product`].
    pub rows_product: Option<RowsProduct>,
    /// Whether the kernel's form allows quick launches (see [`crate::quick`]).
    pub quick: bool,
}

/// A leaf store as one parallel step runs it.
struct LeafRun<'a> {
    leaf: &'a Leaf,
    /// The frame words of its data pointer and of its dimension-0 stride.
    word: usize,
    stride_word: usize,
    /// The extents of the view its loop runs over.
    view: Vec<u64>,
    /// An element tree's target's extents and origin (empty for a 0-d target), and the
    /// extents' product: the leaves per point.
    shape: Vec<i64>,
    origin: Vec<i64>,
    width: usize,
}

/// A raw pointer shared by the tasks of one parallel step.
#[derive(Clone, Copy)]
pub(crate) struct Shared<T>(pub(crate) *mut T);
// SAFETY: the pointers wrapped here are the frame (only read while tasks run) and stores
// whose elements the tasks touch disjointly; the launcher guarantees both (see the uses).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer. A method (not a field access) so that closures capture the whole wrapper.
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

/// Writes `s`'s bytes at the start of a frame word, in native order (where compiled code
/// loads a value of its type).
pub(crate) fn scalar_word(s: Scalar) -> u64 {
    let mut b = [0u8; 8];
    match s {
        Scalar::F32(x) => b[..4].copy_from_slice(&x.to_ne_bytes()),
        Scalar::F64(x) => b.copy_from_slice(&x.to_ne_bytes()),
        Scalar::I32(x) => b[..4].copy_from_slice(&x.to_ne_bytes()),
        Scalar::I64(x) => b.copy_from_slice(&x.to_ne_bytes()),
        Scalar::Bool(x) => b[0] = u8::from(x),
    }
    u64::from_ne_bytes(b)
}

impl Plan {
    /// The error of a run stopped by the cancel flag.
    pub(crate) fn cancelled(&self) -> Error {
        self.fault(CANCELLED_MESSAGE)
    }

    /// Whether the cancel flag is set.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    pub(crate) fn fault(&self, message: impl Into<String>) -> Error {
        Error::KernelFault {
            kernel: self.name.clone(),
            message: message.into(),
        }
    }

    pub(crate) fn status_error(&self, status: i64) -> Error {
        if status == crate::lower::CANCELLED {
            return self.cancelled();
        }
        match usize::try_from(status - 1)
            .ok()
            .and_then(|i| self.faults.get(i))
        {
            Some(site) => self.fault(format!(
                "{INDEX_FAULT_MESSAGE} {} (dim {})",
                site.param, site.dim
            )),
            None => self.fault(format!("compiled code returned unknown status {status}")),
        }
    }

    /// Checks store argument `j` (the sub-store at `ptr` with `extents`, `strides` in elements
    /// and `origin`) against its slot, and writes its words into `frame`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_store(
        &self,
        frame: &mut [u64],
        j: usize,
        slot: &crate::lower::StoreSlot,
        ptr: *mut u8,
        extents: &[i64],
        strides: &[i64],
        origin: &[i64],
    ) -> Result<()> {
        let r = slot.rank;
        if extents.len() != r || strides.len() != r || origin.len() != r {
            return Err(self.fault(format!(
                "store argument {j} (parameter {}) has rank {} (strides {}, origin {}), \
                 expected {r}",
                slot.param,
                extents.len(),
                strides.len(),
                origin.len()
            )));
        }
        if let Some(e) = extents.iter().find(|&&e| e < 0) {
            return Err(self.fault(format!(
                "store argument {j} (parameter {}) has a negative extent {e}",
                slot.param
            )));
        }
        let empty = extents.contains(&0);
        if ptr.is_null() && !empty {
            return Err(self.fault(format!(
                "store argument {j} (parameter {}) has a null pointer",
                slot.param
            )));
        }
        let size = slot.dtype.size() as i64;
        frame[slot.ptr()] = ptr as u64;
        let mut dense = size;
        for d in (0..r).rev() {
            frame[slot.extent(d)] = extents[d] as u64;
            let stride = strides[d]
                .checked_mul(size)
                .ok_or_else(|| self.fault(format!("store argument {j}: stride overflows")))?;
            frame[slot.stride(d)] = stride as u64;
            frame[slot.origin(d)] = origin[d] as u64;
            frame[slot.dense_stride(d)] = dense as u64;
            // Only reduction buffers use dense strides; those check their size apart.
            dense = dense.saturating_mul(extents[d]);
        }
        Ok(())
    }

    /// Checks the arguments and builds the frame.
    fn frame(&self, stores: &[StoreView], scalars: &[Scalar]) -> Result<Vec<u64>> {
        let layout = &self.layout;
        if stores.len() != layout.stores.len() {
            return Err(self.fault(format!(
                "expected {} store arguments, got {}",
                layout.stores.len(),
                stores.len()
            )));
        }
        if scalars.len() != layout.scalars.len() {
            return Err(self.fault(format!(
                "expected {} scalar arguments, got {}",
                layout.scalars.len(),
                scalars.len()
            )));
        }
        let mut frame = vec![0u64; layout.frame_len];
        for (j, (slot, view)) in layout.stores.iter().zip(stores).enumerate() {
            self.write_store(
                &mut frame,
                j,
                slot,
                view.ptr,
                &view.extents,
                &view.strides,
                &view.origin,
            )?;
        }
        for (j, (slot, s)) in layout.scalars.iter().zip(scalars).enumerate() {
            if s.dtype() != slot.dtype {
                return Err(self.fault(format!(
                    "scalar argument {j} (parameter {}) is {}, expected {}",
                    slot.param,
                    s.dtype(),
                    slot.dtype
                )));
            }
            frame[slot.off] = scalar_word(*s);
        }
        Ok(frame)
    }

    /// Runs the kernel. See [`crate::CompiledKernel::run`] for the contract.
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`].
    pub(crate) unsafe fn run(
        &self,
        stores: &[StoreView],
        scalars: &[Scalar],
        pool: &ThreadPool,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        let out = unsafe { self.run_deferring(stores, scalars, pool, None, &[])? };
        // SAFETY: as above; every step has finished.
        unsafe { crate::deferred::write_held(stores, &out.held_rows) };
        for p in out.partials {
            // SAFETY: as above; the target is a 0-d store with Reduce privilege.
            unsafe { self.fold_partial(stores, p)? };
        }
        Ok(())
    }

    /// Folds a loop's finished canonical partial into its element (of a 0-d target, or of an
    /// element tree's): `old op result`.
    ///
    /// # Safety
    /// `stores` is valid as for [`crate::CompiledKernel::run`].
    pub(crate) unsafe fn fold_partial(
        &self,
        stores: &[StoreView],
        mut part: LoopPartial,
    ) -> Result<()> {
        let fault = |m: String| self.fault(m);
        let Some(result) = part.partial.finish().map_err(|e| fault(e.to_string()))? else {
            return Ok(());
        };
        let view = match self.layout.slots.get(part.param as usize) {
            Some(crate::lower::Slot::Store(i)) => &stores[*i],
            _ => return Err(fault(format!("no store parameter {}", part.param))),
        };
        let dtype = result.dtype();
        let mut bytes = [0u8; 8];
        let size = dtype.size();
        // The element: its index in the sub-store, checked against its extents, and its
        // offset through the strides.
        let local: Vec<i64> = part
            .element
            .iter()
            .zip(&view.origin)
            .map(|(&e, &o)| i64::try_from(e).map_or(-1, |e| e - o))
            .collect();
        let inside = local.len() == view.extents.len()
            && local
                .iter()
                .zip(&view.extents)
                .all(|(&e, &x)| 0 <= e && e < x);
        if !inside {
            return Err(fault(format!(
                "element {:?} of parameter {} lies outside its store",
                part.element, part.param
            )));
        }
        let offset: isize = local
            .iter()
            .zip(&view.strides)
            .map(|(&e, &st)| e as isize * st as isize)
            .sum::<isize>()
            * size as isize;
        // SAFETY: the element lies inside the view (checked above), valid for reads and
        // writes (the caller's contract), `size` bytes of its type.
        let at = unsafe { view.ptr.offset(offset) };
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(at, bytes.as_mut_ptr(), size) };
        let old = Scalar::from_bits(dtype, u64::from_ne_bytes(bytes));
        let new = weft_ir::interp::reduce(part.partial.op(), old, result)
            .ok_or_else(|| fault(format!("cannot fold into parameter {}", part.param)))?;
        let out = match new {
            Scalar::Bool(b) => u64::from(b),
            other => other.to_bits(),
        };
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(out.to_ne_bytes().as_ptr(), at, size) };
        Ok(())
    }

    /// Runs the kernel, but hands back the canonical partials of its reductions into 0-d stores
    /// instead of folding them (see [`crate::leaves`]). `views` gives, per store parameter,
    /// the extents of the view its sub-store is cut from (`None`: the sub-store's origin plus
    /// its extents, as when one point task is the whole launch). `deferred` gives, per store
    /// argument (or none), the halo of an argument whose stores are deferred (see
    /// [`crate::deferred`]).
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`].
    pub(crate) unsafe fn run_deferring(
        &self,
        stores: &[StoreView],
        scalars: &[Scalar],
        pool: &ThreadPool,
        views: Option<&[weft_runtime::Dims<u64>]>,
        deferred: &[Option<u32>],
    ) -> Result<TaskOutput> {
        let given = self.layout.stores.len() - self.leaves.len() - self.scratch.len();
        if stores.len() != given {
            return Err(self.fault(format!(
                "expected {given} store arguments, got {}",
                stores.len()
            )));
        }
        // The leaf stores: shaped like their loop's sub-store, dense; each chunk points them
        // at its own buffer.
        // Copied only when leaf or scratch stores join (each view holds three vectors).
        let mut all: std::borrow::Cow<'_, [StoreView]> = std::borrow::Cow::Borrowed(stores);
        let mut runs = Vec::with_capacity(self.leaves.len());
        for leaf in &self.leaves {
            let over = self.store_index(leaf.over)?;
            let sub = &stores[over];
            // An element tree's leaves: a row of the target's elements per point.
            let (shape, origin) = if leaf.elements == 0 {
                (Vec::new(), Vec::new())
            } else {
                let t = &stores[self.store_index(leaf.target)?];
                (t.extents.clone(), t.origin.clone())
            };
            let width = shape
                .iter()
                .try_fold(1usize, |a, &e| {
                    usize::try_from(e).ok().and_then(|e| a.checked_mul(e))
                })
                .ok_or_else(|| self.fault("reduction target too large"))?;
            let mut extents = sub.extents.clone();
            extents.extend(&shape);
            all.to_mut().push(StoreView {
                ptr: std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
                ..StoreView::dense(std::ptr::null_mut(), &extents)
            });
            let view = match views.and_then(|v| v.get(over)) {
                Some(v) if v.len() == sub.extents.len() => v.to_vec(),
                _ => sub
                    .origin
                    .iter()
                    .zip(&sub.extents)
                    .map(|(&o, &e)| u64::try_from(o.saturating_add(e)).unwrap_or(0))
                    .collect(),
            };
            let (word, stride_word) = match self.layout.slots.get(leaf.param as usize) {
                Some(crate::lower::Slot::Store(i)) => (
                    self.layout.stores[*i].ptr(),
                    self.layout.stores[*i].stride(0),
                ),
                _ => return Err(self.fault("internal: a leaf store without a slot")),
            };
            runs.push(LeafRun {
                leaf,
                word,
                stride_word,
                view,
                shape,
                origin,
                width,
            });
        }
        // The scratch stores: shaped like their loop's sub-store, dense; the group's driver
        // points them at its own buffers.
        for &(_, over) in &self.scratch {
            let sub = &stores[self.store_index(over)?];
            all.to_mut().push(StoreView {
                ptr: std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
                ..StoreView::dense(std::ptr::null_mut(), &sub.extents)
            });
        }
        let mut frame = self.frame(&all, scalars)?;
        let mut parts = Vec::new();
        let mut held_rows = Vec::new();
        let mut loop_index = 0u32;
        for step in &self.steps {
            match &step.kind {
                StepKind::Sequential => {
                    // SAFETY: the frame has the layout the function was compiled for; every
                    // store access it makes is bounds-checked against the extents in the frame,
                    // which the caller guarantees are valid for its stores. A sequential step
                    // runs alone, on this thread, and may write spill words of the frame.
                    let status = unsafe { (step.func)(frame.as_mut_ptr(), std::ptr::null(), 0, 1) };
                    if status != 0 {
                        return Err(self.status_error(status));
                    }
                }
                StepKind::Parallel {
                    over,
                    obligations,
                    reds,
                    spread,
                    grouped,
                } => {
                    let func = step.func;
                    let leaves: Vec<&LeafRun<'_>> = runs
                        .iter()
                        .filter(|r| r.leaf.loop_index == loop_index)
                        .collect();
                    let defer = self.deferred_in(loop_index, deferred)?;
                    loop_index += 1;
                    if !defer.is_empty() {
                        if !reds.is_empty() || !leaves.is_empty() {
                            return Err(
                                self.fault("deferred stores in a parallel loop that also reduces")
                            );
                        }
                        self.check_obligations(*over, obligations, &all)?;
                        // SAFETY: forwarded from the caller; every access of this loop to a
                        // deferred argument is at the loop's index (`deferred_in` checked).
                        let held = unsafe {
                            self.parallel_deferred(func, *over, &mut frame, &all, pool, &defer)?
                        };
                        held_rows.extend(held);
                        continue;
                    }
                    let cx = StepCx {
                        func,
                        over: *over,
                        obligations,
                        reds,
                        leaves: &leaves,
                        spread: *spread,
                        grouped: *grouped,
                    };
                    // SAFETY: forwarded from the caller; see `parallel`.
                    let step_parts = unsafe { self.parallel(&cx, &mut frame, &all, pool)? };
                    parts.extend(step_parts);
                }
            }
        }
        Ok(TaskOutput {
            partials: parts,
            held_rows,
        })
    }

    /// The deferred arguments that parallel loop `loop_index` stores: each must be one the
    /// loop can defer (every access of it at the loop's index).
    fn deferred_in(
        &self,
        loop_index: u32,
        deferred: &[Option<u32>],
    ) -> Result<Vec<crate::deferred::Deferred>> {
        let deferrable = self
            .deferrable
            .get(loop_index as usize)
            .map_or(&[][..], Vec::as_slice);
        let mut out = Vec::new();
        for (store, halo) in deferred.iter().enumerate() {
            let Some(halo) = halo else { continue };
            let Some(slot) = self.layout.stores.get(store) else {
                return Err(self.fault(format!("no store argument {store} to defer")));
            };
            if deferrable.contains(&slot.param) {
                out.push(crate::deferred::Deferred {
                    store,
                    halo: i64::from(*halo),
                });
            }
        }
        Ok(out)
    }

    /// Proves the accesses of a parallel loop over layout store `over` that are indexed
    /// directly by loop indices, which the compiled code does not check.
    fn check_obligations(
        &self,
        over: usize,
        obligations: &[Obligation],
        stores: &[StoreView],
    ) -> Result<()> {
        self.check_obligations_by(over, obligations, |k| {
            stores.get(k).map_or(&[][..], |s| &s.extents[..])
        })
    }

    /// [`Plan::check_obligations`], the extents of layout store `k` given by `extents(k)`.
    pub(crate) fn check_obligations_by<'a>(
        &self,
        over: usize,
        obligations: &[Obligation],
        extents: impl Fn(usize) -> &'a [i64],
    ) -> Result<()> {
        let ext = extents(over);
        let points = !ext.contains(&0);
        for ob in obligations {
            let lim = extents(ob.store).get(ob.dim).copied().unwrap_or(0);
            if let Some(c) = ob.index {
                if points && c >= lim {
                    return Err(self.fault(format!(
                        "index out of bounds in store parameter {} (dim {}): index {c}, extent \
                         {lim}",
                        self.layout.stores[ob.store].param, ob.dim
                    )));
                }
                continue;
            }
            let e = ext.get(ob.loop_dim).copied().unwrap_or(0);
            if e > lim {
                return Err(self.fault(format!(
                    "index out of bounds in store parameter {} (dim {}): the parallel loop over \
                     parameter {} runs to {e} on its dim {}, past the extent {lim}",
                    self.layout.stores[ob.store].param,
                    ob.dim,
                    self.layout.stores[over].param,
                    ob.loop_dim
                )));
            }
        }
        Ok(())
    }

    /// The index in [`Layout::stores`] of store parameter `param`.
    pub(crate) fn store_index(&self, param: u32) -> Result<usize> {
        match self.layout.slots.get(param as usize) {
            Some(crate::lower::Slot::Store(i)) => Ok(*i),
            _ => Err(self.fault(format!("internal: no store parameter {param}"))),
        }
    }

    /// Runs one parallel step.
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`]; `frame` was built by [`Plan::frame`] from
    /// `stores`.
    unsafe fn parallel(
        &self,
        cx: &StepCx<'_, '_>,
        frame: &mut [u64],
        stores: &[StoreView],
        pool: &ThreadPool,
    ) -> Result<Vec<LoopPartial>> {
        let StepCx {
            func,
            over,
            obligations,
            reds,
            leaves,
            spread,
            grouped,
        } = *cx;
        let ext = &stores[over].extents;
        // The accesses indexed directly by loop indices are unchecked: prove them here.
        self.check_obligations(over, obligations, stores)?;
        let (rows, inner) = match ext.split_first() {
            None => (1, 1),
            Some((&r, rest)) => (r, rest.iter().fold(1i64, |a, &b| a.saturating_mul(b))),
        };
        // The step's canonical partials, one per leaf store, over its loop's view.
        let mut parts: Vec<LeafPart> = leaves
            .iter()
            .map(|r| LeafPart::new(r.leaf, &r.view, r.width))
            .collect();
        if rows == 0 || inner == 0 {
            return self.loop_partials(leaves, parts);
        }
        let threads = pool.current_num_threads();
        let mut per = if spread {
            chunk_rows_spread(rows, inner, threads)
        } else if reds.is_empty() && leaves.is_empty() {
            let strided = crosses_lines(self.layout.stores.iter().zip(stores).map(|(slot, s)| {
                (
                    slot.dtype.size(),
                    s.extents.as_slice(),
                    s.strides.as_slice(),
                )
            }));
            plain_rows(rows, inner, strided, threads)
        } else {
            // Chunk buffers' results depend on the chunks: those follow the shape alone.
            chunk_rows(inner)
        };
        // With element trees, chunks of whole blocks, their bounds on the blocks' (in the
        // view's coordinates), so that only a point task's first and last blocks may be split.
        let origin0 = stores[over].origin.first().copied().unwrap_or(0);
        let block = 1i64 << ELEMENT_BLOCK_LEVEL;
        let shift = if leaves.iter().any(|r| r.leaf.elements > 0) && per >= block {
            per = per / block * block;
            origin0.rem_euclid(per)
        } else {
            0
        };
        let nchunks = (rows + shift - 1) / per + 1;
        let frame_len = frame.len();
        let frame_ptr = Shared(frame.as_mut_ptr());
        // The canonical product by rows: its matrices, for the routine that runs whole blocks.
        let rows_views = match (self.rows_product, leaves) {
            (Some(rp), [leaf]) => {
                let x = self.store_index(X_PARAM).ok().and_then(|i| stores.get(i));
                let b = self.store_index(B_PARAM).ok().and_then(|i| stores.get(i));
                x.zip(b).and_then(|(x, b)| rp.views(x, b, &leaf.shape))
            }
            _ => None,
        };
        let (sub_extents, sub_origin) = (&stores[over].extents, &stores[over].origin);
        // Runs chunk `c`; with leaf stores, on a copy of the frame that points them at the
        // chunk's own leaf buffers, whose nodes it returns.
        let call = move |c: i64,
                         red: *const *mut u8,
                         bufs: &mut Vec<Vec<u64>>|
              -> std::result::Result<Vec<LeafPart>, Error> {
            // A cancelled run starts no more chunks.
            if self.is_cancelled() {
                return Err(self.cancelled());
            }
            let lo = (c * per - shift).max(0);
            let hi = ((c + 1) * per - shift).min(rows);
            if leaves.is_empty() {
                // SAFETY: the frame matches the function's layout and is only read while
                // parallel tasks run. Chunks cover disjoint rows `lo..hi` of the loop; every
                // access is bounds-checked or proven in bounds by the obligations checked
                // above; `red` holds one valid buffer per reduction buffer of the step,
                // private to this chunk.
                let s = unsafe { func(frame_ptr.get(), red, lo, hi) };
                return if s == 0 {
                    Ok(Vec::new())
                } else {
                    Err(self.status_error(s))
                };
            }
            // SAFETY: the frame holds `frame_len` words and is only read while tasks run.
            let mut own =
                unsafe { std::slice::from_raw_parts(frame_ptr.get(), frame_len) }.to_vec();
            // The chunk runs in calls of about LEAF_ITERS points, so that each call's leaves
            // stay in the first-level cache between the loop that writes them and the code
            // that reduces them; an element tree's whole blocks run one call each, into one
            // row of leaves (see `crate::leaves`).
            let widest = leaves.iter().map(|r| r.width).max().unwrap_or(1).max(1);
            let per_row = inner
                .max(1)
                .saturating_mul(i64::try_from(widest).unwrap_or(i64::MAX));
            let slice_rows = (LEAF_ITERS / per_row).max(1);
            let trees = leaves.iter().any(|r| r.leaf.elements > 0);
            let calls = leaf_calls(
                lo,
                hi,
                slice_rows,
                trees.then(|| tree_space(sub_origin, leaves)),
            );
            let longest = calls.iter().map(|c| c.1 - c.0).max().unwrap_or(0);
            // The worker's leaf buffers, reused from call to call and chunk to chunk.
            bufs.resize_with(leaves.len(), Vec::new);
            for (r, buf) in leaves.iter().zip(bufs.iter_mut()) {
                let points = if r.leaf.elements == 0 {
                    longest.saturating_mul(inner)
                } else {
                    slice_rows.min(longest)
                };
                let words = usize::try_from(points.max(1))
                    .ok()
                    .and_then(|n| n.checked_mul(r.width.max(1)))
                    .and_then(|n| n.checked_mul(r.leaf.dtype.size()))
                    .ok_or_else(|| self.fault("reduction leaves too large"))?
                    .div_ceil(8);
                if buf.len() < words {
                    buf.try_reserve_exact(words - buf.len()).map_err(|_| {
                        self.fault(format!(
                            "cannot allocate {} bytes of reduction leaves",
                            words.saturating_mul(8)
                        ))
                    })?;
                    buf.resize(words, 0);
                }
            }
            let mut out: Vec<LeafPart> = leaves
                .iter()
                .map(|r| LeafPart::new(r.leaf, &r.view, r.width))
                .collect();
            for &(start, end, block) in &calls {
                let n = usize::try_from((end - start).saturating_mul(inner)).unwrap_or(0);
                for (r, buf) in leaves.iter().zip(bufs.iter_mut()) {
                    let size = r.leaf.dtype.size() as u64;
                    // Rows of leaves: a point's (of a 0-d target, or of an element tree's
                    // loose points), or one for a whole block, which every point updates.
                    let (rows, row_bytes) = match (r.leaf.elements, block) {
                        (0, _) => (n, (inner as u64).wrapping_mul(size)),
                        (_, None) => (n, (r.width as u64).wrapping_mul(size)),
                        (_, Some(_)) => (1, 0),
                    };
                    if r.leaf.fill {
                        // SAFETY: `buf` holds at least `rows` rows of `width` elements of the
                        // leaf's type (sized above), 8-byte aligned.
                        unsafe {
                            fill_exact_identity(
                                buf.as_mut_ptr().cast(),
                                rows * r.width.max(1),
                                r.leaf.dtype,
                                r.leaf.op,
                            )
                        };
                    }
                    // Row `start` of the leaf store is the buffer's start: the compiled code
                    // adds `i * stride` to this address only for rows `start..end`.
                    own[r.word] = (buf.as_mut_ptr() as u64)
                        .wrapping_sub((start as u64).wrapping_mul(row_bytes));
                    if r.leaf.elements > 0 {
                        own[r.stride_word] = row_bytes;
                    }
                }
                // The canonical product by rows runs a whole block through its routine.
                let routine = match (&rows_views, block, bufs.first_mut()) {
                    (Some(views), Some(_), Some(buf)) => {
                        // SAFETY: the views are the task's (the caller's contract); the
                        // buffer holds the block's row of leaves of the kernel's type (sized
                        // and filled above), private to this chunk; the routine runs only
                        // where every element lies inside.
                        unsafe {
                            views.run_block(buf.as_mut_ptr().cast(), leaves[0].width, (start, end))
                        }
                    }
                    _ => false,
                };
                let s = if routine {
                    0
                } else {
                    // SAFETY: as above, with the chunk's own frame, whose leaf pointers address
                    // rows `start..end` of buffers private to this chunk, or one row that every
                    // point of a block updates in turn (the leaf stores' accesses are at the
                    // loop's indices, proven in bounds by the obligations, and an element tree's
                    // are inside `for` loops, which run each point's iterations in order).
                    unsafe { func(own.as_mut_ptr(), red, start, end) }
                };
                if s != 0 {
                    return Err(self.status_error(s));
                }
                // Of a rank-1 loop: the call's first point's coordinate in the view.
                let first = u64::try_from(
                    sub_origin
                        .first()
                        .copied()
                        .unwrap_or(0)
                        .saturating_add(start),
                )
                .unwrap_or(u64::MAX);
                for ((r, buf), part) in leaves.iter().zip(bufs.iter_mut()).zip(&mut out) {
                    let done = match part {
                        LeafPart::Scalar(part) if grouped && r.leaf.groupable() => {
                            // SAFETY: `buf` holds the call's points as the leaf's type,
                            // written above (grouped).
                            unsafe { grouped_chunk_nodes(buf.as_mut_ptr().cast(), first, n, part) }
                        }
                        LeafPart::Scalar(part) => {
                            let shape = DenseShape {
                                lo: start,
                                hi: end,
                                extents: sub_extents,
                                origin: sub_origin,
                                view: &r.view,
                            };
                            // SAFETY: `buf` holds the call's points as the leaf's type,
                            // written above.
                            unsafe { chunk_nodes(buf.as_mut_ptr().cast(), &shape, part) }
                        }
                        LeafPart::Rows(rows) => {
                            let len = if block.is_some() {
                                r.width
                            } else {
                                n * r.width
                            };
                            match rows {
                                // SAFETY: `buf` holds `len` leaves of the leaf's type, written
                                // above, 8-byte aligned.
                                Rows::F64(p) => p.add(first, block, unsafe {
                                    std::slice::from_raw_parts(buf.as_ptr().cast(), len)
                                }),
                                // SAFETY: as above.
                                Rows::F32(p) => p.add(first, block, unsafe {
                                    std::slice::from_raw_parts(buf.as_ptr().cast(), len)
                                }),
                            }
                        }
                    };
                    done.map_err(|e| self.fault(e.to_string()))?;
                }
            }
            Ok(out)
        };
        let mut merge = |chunk: Vec<LeafPart>| -> Result<()> {
            for (all, part) in parts.iter_mut().zip(chunk) {
                all.merge(part).map_err(|e| self.fault(e.to_string()))?;
            }
            Ok(())
        };

        if reds.is_empty() {
            // The launching thread runs chunks itself while the pool's workers join in (see
            // `shared_chunks`).
            let results: Vec<std::result::Result<Vec<LeafPart>, Error>> = if nchunks == 1 {
                vec![call(0, std::ptr::null(), &mut Vec::new())]
            } else {
                let chunks = usize::try_from(nchunks).map_err(|e| self.fault(e.to_string()))?;
                // The launching thread counts as one of the pool's threads (as in
                // `product::by_columns`): one helper fewer than the pool has workers, so that
                // no more threads run chunks than the tenant was given.
                let helpers = pool.current_num_threads().saturating_sub(1);
                crate::shared_chunks::run(pool, chunks, helpers, |c, bufs| {
                    call(c as i64, std::ptr::null(), bufs)
                })
            };
            // The first failing chunk's error, as a serial run would stop there.
            for r in results {
                merge(r?)?;
            }
            return self.loop_partials(leaves, parts);
        }

        // Reduction buffers: per chunk, one region per buffer, 8-byte aligned.
        let mut bufs = Vec::with_capacity(reds.len());
        let mut chunk_words = 0usize;
        for r in reds {
            let slot = &self.layout.stores[r.store];
            let elems = match r.mode {
                RedMode::Register => 1usize,
                RedMode::Buffer => stores[r.store]
                    .extents
                    .iter()
                    .try_fold(1usize, |a, &e| {
                        usize::try_from(e).ok().and_then(|e| a.checked_mul(e))
                    })
                    .ok_or_else(|| self.fault("reduction target too large"))?,
            };
            let bytes = elems
                .checked_mul(slot.dtype.size())
                .ok_or_else(|| self.fault("reduction target too large"))?;
            let words = bytes.div_ceil(8).max(1);
            bufs.push(BufInfo {
                word: chunk_words,
                elems,
                dtype: slot.dtype,
                op: r.op,
            });
            chunk_words = chunk_words
                .checked_add(words)
                .ok_or_else(|| self.fault("reduction target too large"))?;
        }
        let nchunks_u = usize::try_from(nchunks).unwrap_or(usize::MAX);
        // Chunks per wave: as many as the budget allows, at least one per thread unless that
        // would take more than PARTIAL_LIMIT. The wave size does not change the result.
        let chunk_bytes = chunk_words.saturating_mul(8);
        let threads = pool.current_num_threads().max(1);
        let by_budget = PARTIAL_BUDGET / chunk_bytes;
        let wave = if by_budget >= threads || chunk_bytes.saturating_mul(threads) > PARTIAL_LIMIT {
            by_budget
        } else {
            threads
        }
        .clamp(1, nchunks_u);
        let total_words = wave
            .checked_mul(chunk_words)
            .ok_or_else(|| self.fault("reduction buffers too large"))?;
        let mut storage: Vec<u64> = Vec::new();
        storage.try_reserve_exact(total_words).map_err(|_| {
            self.fault(format!(
                "cannot allocate {} bytes of reduction buffers",
                total_words.saturating_mul(8)
            ))
        })?;
        storage.resize(total_words, 0);
        let mut start = 0usize;
        while start < nchunks_u {
            let n = wave.min(nchunks_u - start);
            let region = &mut storage[..n * chunk_words];
            let bufs_ref = &bufs;
            let run_chunk = |j: usize,
                             mem: &mut [u64],
                             leaf_bufs: &mut Vec<Vec<u64>>|
             -> std::result::Result<Vec<LeafPart>, Error> {
                let mut ptrs = Vec::with_capacity(bufs_ref.len());
                for b in bufs_ref {
                    let p = mem[b.word..].as_mut_ptr();
                    // SAFETY: the region from `b.word` holds at least `b.elems` elements of
                    // `b.dtype` (sized above) and is 8-byte aligned.
                    unsafe { fill_identity(p.cast(), b.elems, b.dtype, b.op) };
                    ptrs.push(p.cast::<u8>());
                }
                let c = start + j;
                call(c as i64, ptrs.as_ptr(), leaf_bufs)
            };
            let results: Vec<std::result::Result<Vec<LeafPart>, Error>> = if n == 1 {
                vec![run_chunk(0, region, &mut Vec::new())]
            } else {
                pool.install(|| {
                    region
                        .par_chunks_mut(chunk_words)
                        .enumerate()
                        .map_init(Vec::new, |bufs, (j, mem)| run_chunk(j, mem, bufs))
                        .collect()
                })
            };
            for r in results {
                merge(r?)?;
            }
            // Fold the partials into the stores, in chunk order.
            for (b, r) in bufs.iter().zip(reds) {
                let view = &stores[r.store];
                let parts: Vec<*const u8> = (0..n)
                    .map(|j| storage[j * chunk_words + b.word..].as_ptr().cast::<u8>())
                    .collect();
                // SAFETY: `view` is valid for reads and writes of all its elements (the
                // caller's contract; the store has Reduce privilege); each part holds
                // `b.elems` dense elements in the view's row-major order.
                unsafe { fold(view, &parts, b, pool) };
            }
            start += n;
        }
        self.loop_partials(leaves, parts)
    }

    /// The step's partials, labelled with their loops and targets.
    fn loop_partials(
        &self,
        leaves: &[&LeafRun<'_>],
        parts: Vec<LeafPart>,
    ) -> Result<Vec<LoopPartial>> {
        let mut out = Vec::new();
        for (r, part) in leaves.iter().zip(parts) {
            let elements = part
                .into_partials(r.leaf, &r.shape, &r.origin)
                .map_err(|e| self.fault(e.to_string()))?;
            out.extend(elements.into_iter().map(|(element, partial)| LoopPartial {
                loop_index: r.leaf.loop_index,
                param: r.leaf.target,
                element,
                partial,
            }));
        }
        Ok(out)
    }
}

/// What one parallel step runs.
#[derive(Clone, Copy)]
struct StepCx<'a, 'b> {
    func: KernelFn,
    /// Index in [`Layout::stores`] of the store the loop runs over.
    over: usize,
    obligations: &'a [Obligation],
    reds: &'a [RedBuf],
    leaves: &'a [&'a LeafRun<'b>],
    /// See `StepKind::Parallel`.
    spread: bool,
    /// See `StepKind::Parallel`.
    grouped: bool,
}

/// One reduction buffer's place in a chunk's region.
struct BufInfo {
    /// Offset in words.
    word: usize,
    elems: usize,
    dtype: DType,
    op: ReduceOp,
}

/// Writes `op`'s identity into `n` elements of `dtype` at `p`.
///
/// # Safety
/// `p` is valid for writes of `n` elements of `dtype` and aligned for it.
unsafe fn fill_identity(p: *mut u8, n: usize, dtype: DType, op: ReduceOp) {
    // SAFETY: per the function's contract.
    unsafe {
        match op.identity(dtype) {
            Scalar::F32(x) => std::slice::from_raw_parts_mut(p.cast::<f32>(), n).fill(x),
            Scalar::F64(x) => std::slice::from_raw_parts_mut(p.cast::<f64>(), n).fill(x),
            Scalar::I32(x) => std::slice::from_raw_parts_mut(p.cast::<i32>(), n).fill(x),
            Scalar::I64(x) => std::slice::from_raw_parts_mut(p.cast::<i64>(), n).fill(x),
            Scalar::Bool(x) => std::slice::from_raw_parts_mut(p, n).fill(u8::from(x)),
        }
    }
}

/// `min` as compiled code computes it (Cranelift `fmin`): NaN if either is NaN, and
/// `-0 < +0`.
fn fmin<F: Float>(a: F, b: F) -> F {
    if a.is_nan() || b.is_nan() {
        F::NAN
    } else if a == b {
        F::from_bits_or(a, b)
    } else if a < b {
        a
    } else {
        b
    }
}

fn fmax<F: Float>(a: F, b: F) -> F {
    if a.is_nan() || b.is_nan() {
        F::NAN
    } else if a == b {
        F::from_bits_and(a, b)
    } else if a > b {
        a
    } else {
        b
    }
}

trait Float: Copy + PartialOrd {
    const NAN: Self;
    fn is_nan(self) -> bool;
    fn from_bits_or(a: Self, b: Self) -> Self;
    fn from_bits_and(a: Self, b: Self) -> Self;
}

impl Float for f32 {
    const NAN: f32 = f32::NAN;
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn from_bits_or(a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() | b.to_bits())
    }
    fn from_bits_and(a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() & b.to_bits())
    }
}

impl Float for f64 {
    const NAN: f64 = f64::NAN;
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn from_bits_or(a: f64, b: f64) -> f64 {
        f64::from_bits(a.to_bits() | b.to_bits())
    }
    fn from_bits_and(a: f64, b: f64) -> f64 {
        f64::from_bits(a.to_bits() & b.to_bits())
    }
}

/// Folds the dense partial buffers `parts` (in order) into `view` with `b.op`.
///
/// # Safety
/// `view` is valid for reads and writes of every element; each part holds `b.elems` elements
/// of `b.dtype` in the row-major order of `view.extents`, aligned.
unsafe fn fold(view: &StoreView, parts: &[*const u8], b: &BufInfo, pool: &ThreadPool) {
    macro_rules! go {
        ($t:ty, $f:expr) => {
            // SAFETY: forwarded.
            unsafe { fold_typed::<$t>(view, parts, b.elems, $f, pool) }
        };
    }
    match (b.dtype, b.op) {
        (DType::F32, ReduceOp::Sum) => go!(f32, |x, y| x + y),
        (DType::F32, ReduceOp::Prod) => go!(f32, |x, y| x * y),
        (DType::F32, ReduceOp::Min) => go!(f32, fmin),
        (DType::F32, ReduceOp::Max) => go!(f32, fmax),
        (DType::F64, ReduceOp::Sum) => go!(f64, |x, y| x + y),
        (DType::F64, ReduceOp::Prod) => go!(f64, |x, y| x * y),
        (DType::F64, ReduceOp::Min) => go!(f64, fmin),
        (DType::F64, ReduceOp::Max) => go!(f64, fmax),
        (DType::I32, ReduceOp::Sum) => go!(i32, i32::wrapping_add),
        (DType::I32, ReduceOp::Prod) => go!(i32, i32::wrapping_mul),
        (DType::I32, ReduceOp::Min) => go!(i32, i32::min),
        (DType::I32, ReduceOp::Max) => go!(i32, i32::max),
        (DType::I64, ReduceOp::Sum) => go!(i64, i64::wrapping_add),
        (DType::I64, ReduceOp::Prod) => go!(i64, i64::wrapping_mul),
        (DType::I64, ReduceOp::Min) => go!(i64, i64::min),
        (DType::I64, ReduceOp::Max) => go!(i64, i64::max),
        (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => {
            go!(u8, |x, y| u8::from(x != 0 || y != 0))
        }
        (DType::Bool, ReduceOp::Prod | ReduceOp::Min) => {
            go!(u8, |x, y| u8::from(x != 0 && y != 0))
        }
        // The validator gives unsigned stores no reductions; folding them would be this.
        (DType::U8, ReduceOp::Sum) => go!(u8, u8::wrapping_add),
        (DType::U8, ReduceOp::Prod) => go!(u8, u8::wrapping_mul),
        (DType::U8, ReduceOp::Min) => go!(u8, u8::min),
        (DType::U8, ReduceOp::Max) => go!(u8, u8::max),
        (DType::U16, ReduceOp::Sum) => go!(u16, u16::wrapping_add),
        (DType::U16, ReduceOp::Prod) => go!(u16, u16::wrapping_mul),
        (DType::U16, ReduceOp::Min) => go!(u16, u16::min),
        (DType::U16, ReduceOp::Max) => go!(u16, u16::max),
        (DType::U32, ReduceOp::Sum) => go!(u32, u32::wrapping_add),
        (DType::U32, ReduceOp::Prod) => go!(u32, u32::wrapping_mul),
        (DType::U32, ReduceOp::Min) => go!(u32, u32::min),
        (DType::U32, ReduceOp::Max) => go!(u32, u32::max),
        (DType::U64, ReduceOp::Sum) => go!(u64, u64::wrapping_add),
        (DType::U64, ReduceOp::Prod) => go!(u64, u64::wrapping_mul),
        (DType::U64, ReduceOp::Min) => go!(u64, u64::min),
        (DType::U64, ReduceOp::Max) => go!(u64, u64::max),
    }
}

/// Elements per task when folding in parallel.
const FOLD_GRAIN: usize = 16 * 1024;

/// # Safety
/// As for [`fold`], with `T` the element type.
unsafe fn fold_typed<T: Copy>(
    view: &StoreView,
    parts: &[*const u8],
    elems: usize,
    f: impl Fn(T, T) -> T + Sync,
    pool: &ThreadPool,
) {
    if elems == 0 {
        return;
    }
    let size = std::mem::size_of::<T>() as i64;
    let base = Shared(view.ptr.cast::<T>());
    let parts: Vec<Shared<T>> = parts
        .iter()
        .map(|&p| Shared(p.cast::<T>().cast_mut()))
        .collect();
    let extents = &view.extents;
    let strides = &view.strides;
    let range = |lo: usize, hi: usize| {
        // The multi-index of flat element `lo`.
        let r = extents.len();
        let mut idx = vec![0i64; r];
        let mut rest = lo as i64;
        for d in (0..r).rev() {
            idx[d] = rest % extents[d];
            rest /= extents[d];
        }
        for e in lo..hi {
            let off: i64 = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
            // SAFETY: `idx` is within the extents, so `off` is an element of the view (the
            // caller's contract); `e < elems` is within every part; this task alone touches
            // element `idx` of the store while folding.
            unsafe {
                let p = base.get().byte_offset((off * size) as isize);
                let mut acc = p.read_unaligned();
                for part in &parts {
                    acc = f(acc, part.get().add(e).read());
                }
                p.write_unaligned(acc);
            }
            for d in (0..r).rev() {
                idx[d] += 1;
                if idx[d] < extents[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    };
    if elems * parts.len() <= FOLD_GRAIN {
        range(0, elems);
    } else {
        let tasks = elems.div_ceil(FOLD_GRAIN);
        pool.install(|| {
            (0..tasks)
                .into_par_iter()
                .for_each(|t| range(t * FOLD_GRAIN, ((t + 1) * FOLD_GRAIN).min(elems)))
        });
    }
}

/// Where an element tree's blocks lie: the view coordinate of the loop's row 0, and the
/// extent of the loop's view (the last block ends there).
fn tree_space(sub_origin: &[i64], leaves: &[&LeafRun<'_>]) -> (i64, i64) {
    let origin = sub_origin.first().copied().unwrap_or(0);
    let view = leaves
        .iter()
        .find(|r| r.leaf.elements > 0)
        .and_then(|r| r.view.first())
        .map_or(i64::MAX, |&v| i64::try_from(v).unwrap_or(i64::MAX));
    (origin, view)
}

/// The calls that run rows `lo..hi` of a loop with leaf stores: `(start, end, block)`. With
/// element trees (`tree`: see [`tree_space`]), each block of
/// `2^`[`ELEMENT_BLOCK_LEVEL`] points that lies wholly in `lo..hi` is one call with its block
/// index, and the other rows (a block's part) run in calls of at most `slice` rows; without,
/// every call has at most `slice` rows.
pub(crate) fn leaf_calls(
    lo: i64,
    hi: i64,
    slice: i64,
    tree: Option<(i64, i64)>,
) -> Vec<(i64, i64, Option<u64>)> {
    let mut out = Vec::new();
    let loose = |out: &mut Vec<(i64, i64, Option<u64>)>, a: i64, b: i64| {
        let mut s = a;
        while s < b {
            let e = s.saturating_add(slice.max(1)).min(b);
            out.push((s, e, None));
            s = e;
        }
    };
    let Some((origin, view)) = tree else {
        loose(&mut out, lo, hi);
        return out;
    };
    let size = 1i64 << ELEMENT_BLOCK_LEVEL;
    let mut pos = lo;
    while pos < hi {
        let v = origin.saturating_add(pos);
        let b = v.div_euclid(size);
        let block_start = b * size - origin;
        let block_end = (b.saturating_add(1).saturating_mul(size)).min(view) - origin;
        if block_start == pos && block_end <= hi && block_end > pos {
            out.push((pos, block_end, u64::try_from(b).ok()));
            pos = block_end;
        } else {
            let end = block_end.min(hi).max(pos + 1);
            loose(&mut out, pos, end);
            pos = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{balanced_rows, crosses_lines, leaf_calls, plain_rows};
    use proptest::prelude::*;

    /// The rows the busiest of `threads` threads runs when the chunks of `per` rows are
    /// shared out as evenly as whole chunks allow.
    fn busiest(rows: i64, per: i64, threads: i64) -> i64 {
        let chunks = (rows - 1) / per + 1;
        let most = (chunks - 1) / threads + 1;
        // The busiest thread takes `most` chunks; the last chunk may be short.
        (most * per).min(rows)
    }

    #[test]
    fn chunks_are_evened_out_across_the_threads() {
        // heat_3d at M: 38 rows, 11 a chunk by size; 10, 10, 10 and 8 after.
        assert_eq!(balanced_rows(38, 11, 2), 10);
        // One chunk stays one chunk; one thread keeps the chunks by size.
        assert_eq!(balanced_rows(10, 16, 2), 16);
        assert_eq!(balanced_rows(38, 11, 1), 11);
    }

    #[test]
    fn planes_whose_elements_lie_lines_apart_run_in_several_chunks() {
        // vadv at M: `a[:, :, k]` of a (112, 112, 180) f64 array, elements 1,440 bytes apart.
        let (extents, strided, dense) = ([112i64, 112], [112i64 * 180, 180], [112i64, 1]);
        assert!(crosses_lines([(8, &extents[..], &strided[..])]));
        assert!(!crosses_lines([(8, &extents[..], &dense[..])]));
        // Seven f64 apart is still within a line; a broadcast (stride 0) reads one element.
        assert!(!crosses_lines([(8, &extents[..], &[784i64, 7][..])]));
        assert!(!crosses_lines([(8, &extents[..], &[0i64, 0][..])]));
        // One column of one element crosses nothing.
        assert!(!crosses_lines([(
            8,
            &[4096i64, 1][..],
            &[4096i64, 4096][..]
        )]));
        // One chunk by the count of points; several, shared by both threads, when strided.
        assert!(plain_rows(112, 112, false, 2) >= 112);
        let per = plain_rows(112, 112, true, 2);
        let chunks = (112 - 1) / per + 1;
        assert!(chunks >= 2 && chunks % 2 == 0, "{per} rows a chunk");
    }

    proptest! {
        /// Evened-out chunks are never larger, never fewer, and never leave the busiest thread
        /// more rows than the chunks by size did.
        #[test]
        fn evened_chunks_never_load_a_thread_more(
            rows in 1i64..5000,
            per in 1i64..600,
            threads in 1usize..9,
        ) {
            let even = balanced_rows(rows, per, threads);
            prop_assert!(even >= 1 && even <= per);
            let chunks = |p: i64| (rows - 1) / p + 1;
            prop_assert!(chunks(even) >= chunks(per));
            let t = threads as i64;
            prop_assert!(busiest(rows, even, t) <= busiest(rows, per, t));
        }
    }

    #[test]
    fn leaf_calls_cover_the_rows_and_run_whole_blocks_alone() {
        let b = 4096i64;
        // (lo, hi, slice, view origin of row 0, view extent)
        for (lo, hi, slice, origin, view) in [
            (0, 3 * b + 17, 512, 0, 3 * b + 17),
            (5, 2 * b + 9, 700, 300, 10 * b),
            (0, 100, 32, 4000, 4100),
            (0, 0, 8, 0, 0),
        ] {
            let calls = leaf_calls(lo, hi, slice, Some((origin, view)));
            let mut at = lo;
            for &(s, e, block) in &calls {
                assert_eq!(s, at, "the calls follow each other");
                assert!(e > s);
                match block {
                    Some(k) => {
                        let k = k as i64;
                        assert_eq!(origin + s, k * b, "a block call starts at its block");
                        assert_eq!(origin + e, ((k + 1) * b).min(view), "and ends at its end");
                    }
                    None => {
                        assert!(e - s <= slice);
                        // Loose rows: no whole block of the view lies inside lo..hi here.
                        let first = origin + s;
                        let k = first.div_euclid(b);
                        let whole = k * b - origin >= lo && ((k + 1) * b).min(view) - origin <= hi;
                        assert!(!whole, "rows {s}..{e} belong to a whole block");
                    }
                }
                at = e;
            }
            assert_eq!(at, hi.max(lo));
        }
        // Without element trees: slices only.
        let calls = leaf_calls(3, 20, 8, None);
        assert_eq!(calls, vec![(3, 11, None), (11, 19, None), (19, 20, None)]);
    }
}
