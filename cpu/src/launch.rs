//! Running a compiled kernel: argument checks, the frame, the split of each parallel loop into
//! chunks on a rayon pool, and reductions.
//!
//! # Determinism
//! The outermost dimension of a parallel loop is cut into chunks of [`chunk_rows`] rows, a
//! number that depends only on the loop's shape. A store reduced into by a parallel loop is
//! either updated in place (when every reduction's first index is the loop's first index, so
//! chunks touch disjoint rows) or through one private buffer per chunk, initialised to the
//! operator's identity and folded into the store element by element in chunk order. Either way
//! the result is the same bits for any number of threads.

use rayon::ThreadPool;
use rayon::prelude::*;
use weft_ir::{DType, ReduceOp, Scalar};

use crate::compile::StoreView;
use crate::lower::{FaultSite, Layout, Obligation, RedBuf, RedMode, StepKind};
use crate::{Error, Result};

/// The signature of every compiled step; see [`crate::lower`].
pub(crate) type KernelFn = unsafe extern "C" fn(*mut u64, *const *mut u8, i64, i64) -> i64;

/// About how many loop iterations one chunk of a parallel loop runs.
pub(crate) const CHUNK_ITERS: i64 = 16 * 1024;

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

/// One finalized step.
pub(crate) struct PlanStep {
    pub kind: StepKind,
    pub func: KernelFn,
    /// Whether `func` is the vector function of a parallel step.
    pub vectorized: bool,
    /// Whether that vector function calls an AVX-512 body.
    pub avx512: bool,
}

/// Everything needed to run a compiled kernel.
pub(crate) struct Plan {
    pub name: String,
    pub layout: Layout,
    pub steps: Vec<PlanStep>,
    pub faults: Vec<FaultSite>,
}

/// A raw pointer shared by the tasks of one parallel step.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the pointers wrapped here are the frame (only read while tasks run) and stores
// whose elements the tasks touch disjointly; the launcher guarantees both (see the uses).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer. A method (not a field access) so that closures capture the whole wrapper.
    fn get(self) -> *mut T {
        self.0
    }
}

/// Writes `s`'s bytes at the start of a frame word, in native order (where compiled code
/// loads a value of its type).
fn scalar_word(s: Scalar) -> u64 {
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
    fn fault(&self, message: impl Into<String>) -> Error {
        Error::KernelFault {
            kernel: self.name.clone(),
            message: message.into(),
        }
    }

    fn status_error(&self, status: i64) -> Error {
        match usize::try_from(status - 1)
            .ok()
            .and_then(|i| self.faults.get(i))
        {
            Some(site) => self.fault(format!(
                "index out of bounds in store parameter {} (dim {})",
                site.param, site.dim
            )),
            None => self.fault(format!("compiled code returned unknown status {status}")),
        }
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
            let r = slot.rank;
            if view.extents.len() != r || view.strides.len() != r || view.origin.len() != r {
                return Err(self.fault(format!(
                    "store argument {j} (parameter {}) has rank {} (strides {}, origin {}), \
                     expected {r}",
                    slot.param,
                    view.extents.len(),
                    view.strides.len(),
                    view.origin.len()
                )));
            }
            if let Some(e) = view.extents.iter().find(|&&e| e < 0) {
                return Err(self.fault(format!(
                    "store argument {j} (parameter {}) has a negative extent {e}",
                    slot.param
                )));
            }
            let empty = view.extents.contains(&0);
            if view.ptr.is_null() && !empty {
                return Err(self.fault(format!(
                    "store argument {j} (parameter {}) has a null pointer",
                    slot.param
                )));
            }
            let size = slot.dtype.size() as i64;
            frame[slot.ptr()] = view.ptr as u64;
            let mut dense = size;
            for d in (0..r).rev() {
                frame[slot.extent(d)] = view.extents[d] as u64;
                let stride = view.strides[d]
                    .checked_mul(size)
                    .ok_or_else(|| self.fault(format!("store argument {j}: stride overflows")))?;
                frame[slot.stride(d)] = stride as u64;
                frame[slot.origin(d)] = view.origin[d] as u64;
                frame[slot.dense_stride(d)] = dense as u64;
                // Only reduction buffers use dense strides; those check their size apart.
                dense = dense.saturating_mul(view.extents[d]);
            }
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
        let mut frame = self.frame(stores, scalars)?;
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
                } => {
                    let func = step.func;
                    // SAFETY: forwarded from the caller; see `parallel`.
                    unsafe {
                        self.parallel(func, &mut frame, stores, *over, obligations, reds, pool)?
                    };
                }
            }
        }
        Ok(())
    }

    /// Runs one parallel step.
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`]; `frame` was built by [`Plan::frame`] from
    /// `stores`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn parallel(
        &self,
        func: KernelFn,
        frame: &mut [u64],
        stores: &[StoreView],
        over: usize,
        obligations: &[Obligation],
        reds: &[RedBuf],
        pool: &ThreadPool,
    ) -> Result<()> {
        let ext = &stores[over].extents;
        // The accesses indexed directly by loop indices are unchecked: prove them here.
        for ob in obligations {
            let (e, lim) = (ext[ob.loop_dim], stores[ob.store].extents[ob.dim]);
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
        let (rows, inner) = match ext.split_first() {
            None => (1, 1),
            Some((&r, rest)) => (r, rest.iter().fold(1i64, |a, &b| a.saturating_mul(b))),
        };
        if rows == 0 || inner == 0 {
            return Ok(());
        }
        let per = chunk_rows(inner);
        let nchunks = (rows - 1) / per + 1;
        let frame_ptr = Shared(frame.as_mut_ptr());
        let call = move |c: i64, red: *const *mut u8| -> i64 {
            let lo = c * per;
            let hi = lo.saturating_add(per).min(rows);
            // SAFETY: the frame matches the function's layout and is only read while
            // parallel tasks run. Chunks cover disjoint rows `lo..hi` of the loop; every access
            // is bounds-checked or proven in bounds by the obligations checked above; `red`
            // holds one valid buffer per reduction buffer of the step, private to this chunk.
            unsafe { func(frame_ptr.get(), red, lo, hi) }
        };

        if reds.is_empty() {
            let failed = if nchunks == 1 {
                let s = call(0, std::ptr::null());
                (s != 0).then_some((0, s))
            } else {
                pool.install(|| {
                    (0..nchunks)
                        .into_par_iter()
                        .filter_map(|c| {
                            let s = call(c, std::ptr::null());
                            (s != 0).then_some((c, s))
                        })
                        .min()
                })
            };
            return match failed {
                Some((_, s)) => Err(self.status_error(s)),
                None => Ok(()),
            };
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
            let run_chunk = |j: usize, mem: &mut [u64]| -> Option<(usize, i64)> {
                let mut ptrs = Vec::with_capacity(bufs_ref.len());
                for b in bufs_ref {
                    let p = mem[b.word..].as_mut_ptr();
                    // SAFETY: the region from `b.word` holds at least `b.elems` elements of
                    // `b.dtype` (sized above) and is 8-byte aligned.
                    unsafe { fill_identity(p.cast(), b.elems, b.dtype, b.op) };
                    ptrs.push(p.cast::<u8>());
                }
                let c = start + j;
                let s = call(c as i64, ptrs.as_ptr());
                (s != 0).then_some((c, s))
            };
            let failed = if n == 1 {
                run_chunk(0, region)
            } else {
                pool.install(|| {
                    region
                        .par_chunks_mut(chunk_words)
                        .enumerate()
                        .filter_map(|(j, mem)| run_chunk(j, mem))
                        .min()
                })
            };
            if let Some((_, s)) = failed {
                return Err(self.status_error(s));
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
        Ok(())
    }
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
