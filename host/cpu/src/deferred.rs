//! Deferred stores: a parallel loop whose stores to a store argument must land only when the
//! loop ends (see `weft_runtime::Binding`'s `deferred`), so that fusion can put a stencil's
//! `center[:] = work` in the same loop that reads `center`'s neighbours through shifted views
//! of the same grid.
//!
//! The compiled code is unchanged. The launcher runs each chunk of rows (dimension 0 of the
//! loop) in slices, one after another, with the deferred argument's pointer and strides in the
//! chunk's own copy of the frame redirected to one of two dense slice buffers; the chunk's
//! points write there. With a halo of `h` rows (the most by which any load of the grid is
//! shifted along dimension 0), row `q` is read only by rows `q - h ..= q + h`; once the slice
//! holding row `q + h` has run, row `q` is copied to the store, since nothing in the chunk
//! still reads it. The first and last `h` rows of each chunk are read by the neighbouring
//! chunks and point tasks, which run in any order: they are handed back
//! ([`crate::TaskOutput::held_rows`]) and written after the last point task of the launch. So each row is computed into a buffer that stays in cache and written to memory
//! once: the sweep is one pass over the grid, as a hand-written double-buffered loop is, but
//! without a second grid.

use rayon::ThreadPool;
use rayon::prelude::*;
use weft_ir::{Inst, Kernel, Op};

use crate::Result;
use crate::compile::StoreView;
use crate::launch::{CHUNK_ITERS, KernelFn, Plan, Shared};

/// Rows of a chunk of a loop with deferred stores, at least: its held rows (two halos) are
/// then a small part of it.
const MIN_CHUNK_ROWS: i64 = 64;

/// Chunks per thread of a loop with deferred stores, at most (beyond the other bounds).
const CHUNKS_PER_THREAD: i64 = 4;

/// About how many iterations one slice runs: its rows stay in the second-level cache.
const SLICE_ITERS: i64 = 8192;

/// For each top-level parallel loop of `kernel`, in order, the store parameters it may defer:
/// those it stores, whose every access in the loop (loads and reductions included, at any
/// depth) is at exactly the loop's index tuple. Such accesses of a chunk's rows `lo..hi` stay
/// inside rows `lo..hi` of a buffer shaped like the loop's sub-store, which is what makes
/// redirecting them memory-safe.
pub(crate) fn deferrable_by_loop(kernel: &Kernel) -> Vec<Vec<u32>> {
    kernel
        .body
        .iter()
        .filter_map(|inst| match &inst.op {
            Op::Parallel(p) => Some(p),
            _ => None,
        })
        .map(|p| {
            let mut stored = Vec::new();
            let mut elsewhere = Vec::new();
            visit(&p.body, &mut |param, indices, store| {
                if indices != p.indices.as_slice() {
                    elsewhere.push(param);
                } else if store {
                    stored.push(param);
                }
            });
            stored.sort_unstable();
            stored.dedup();
            stored.retain(|s| !elsewhere.contains(s));
            stored
        })
        .collect()
}

/// Calls `f(param, indices, is_store)` on every access in `body`, at any depth.
fn visit(body: &[Inst], f: &mut impl FnMut(u32, &[weft_ir::ValueId], bool)) {
    for inst in body {
        match &inst.op {
            Op::Load(a) | Op::Reduce(a, _, _) => f(a.param, &a.indices, false),
            Op::Store(a, _) => f(a.param, &a.indices, true),
            Op::For(l) => visit(&l.body, f),
            Op::Parallel(p) => visit(&p.body, f),
            _ => {}
        }
    }
}

/// One deferred argument as a step runs it.
#[derive(Clone, Copy)]
pub(crate) struct Deferred {
    /// Its index in the layout's stores.
    pub store: usize,
    /// Its halo, in rows.
    pub halo: i64,
}

/// Where a deferred argument's rows go: its store view, shareable between the chunks (which
/// write disjoint rows).
struct RowTarget {
    ptr: Shared<u8>,
    extents: Vec<i64>,
    strides: Vec<i64>,
}

/// A row of a deferred store argument that other chunks or point tasks may still read: it is
/// written only when the whole launch (every point task) has run.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldRow {
    /// The store argument (its position among the store parameters).
    pub store: usize,
    /// The row: its index along dimension 0 of the argument's sub-store.
    pub row: i64,
    /// Its elements, dense and row-major.
    pub bytes: Vec<u8>,
}

impl Plan {
    /// Runs one parallel step (over layout store `over`, with `obligations` already proven)
    /// whose stores to the `defer` arguments are deferred, as the module documentation says,
    /// and returns the rows it held back. The step has no reductions.
    ///
    /// # Safety
    /// As for [`crate::CompiledKernel::run`]; `frame` was built by [`Plan::frame`] from
    /// `stores`; every access of the step to a deferred argument is at the loop's index tuple
    /// (see [`deferrable_by_loop`]).
    pub(crate) unsafe fn parallel_deferred(
        &self,
        func: KernelFn,
        over: usize,
        frame: &mut [u64],
        stores: &[StoreView],
        pool: &ThreadPool,
        defer: &[Deferred],
    ) -> Result<Vec<HeldRow>> {
        let ext = &stores[over].extents;
        let (rows, inner) = match ext.split_first() {
            None => (1, 1),
            Some((&r, rest)) => (r, rest.iter().fold(1i64, |a, &b| a.saturating_mul(b))),
        };
        for d in defer {
            if stores[d.store].extents != *ext {
                return Err(self.fault(format!(
                    "deferred store parameter {} has extents {:?}, not its loop's {ext:?}",
                    self.layout.stores[d.store].param, stores[d.store].extents
                )));
            }
        }
        if rows == 0 || inner == 0 {
            return Ok(Vec::new());
        }
        let halo = defer.iter().map(|d| d.halo).max().unwrap_or(0).max(0);
        let slice = (SLICE_ITERS / inner.max(1)).max(1).max(halo);
        // Few chunks (each holds back its first and last `halo` rows, which the launch then
        // writes alone), enough for every thread: the rows a chunk writes do not depend on
        // how the loop is cut.
        let threads = i64::try_from(pool.current_num_threads())
            .unwrap_or(1)
            .max(1);
        let per = (CHUNK_ITERS / inner.max(1))
            .max(MIN_CHUNK_ROWS)
            .max(4 * halo)
            .max(slice)
            .max((rows - 1) / (CHUNKS_PER_THREAD * threads) + 1);
        let nchunks = (rows - 1) / per + 1;
        let row_bytes: Vec<usize> = defer
            .iter()
            .map(|d| {
                usize::try_from(inner)
                    .ok()
                    .and_then(|n| n.checked_mul(self.layout.stores[d.store].dtype.size()))
                    .ok_or_else(|| self.fault("a row too large"))
            })
            .collect::<Result<_>>()?;
        let frame_len = frame.len();
        let frame_ptr = Shared(frame.as_mut_ptr());
        let targets: Vec<RowTarget> = stores
            .iter()
            .map(|v| RowTarget {
                ptr: Shared(v.ptr),
                extents: v.extents.clone(),
                strides: v.strides.clone(),
            })
            .collect();
        let targets = &targets;
        let call = |c: i64, bufs: &mut Vec<[Vec<u64>; 2]>| -> Result<Vec<HeldRow>> {
            let (lo, hi) = (c * per, (c * per).saturating_add(per).min(rows));
            // SAFETY: the frame holds `frame_len` words and is only read while tasks run.
            let mut own =
                unsafe { std::slice::from_raw_parts(frame_ptr.get(), frame_len) }.to_vec();
            bufs.resize_with(defer.len(), Default::default);
            let slice_bytes = |j: usize| row_bytes[j].saturating_mul(slice as usize);
            for (j, (d, pair)) in defer.iter().zip(bufs.iter_mut()).enumerate() {
                let slot = &self.layout.stores[d.store];
                for b in pair.iter_mut() {
                    let words = slice_bytes(j).div_ceil(8).max(1);
                    if b.len() < words {
                        b.resize(words, 0);
                    }
                }
                // The buffers are dense: row-major strides in bytes.
                for dim in 0..slot.rank {
                    own[slot.stride(dim)] = own[slot.dense_stride(dim)];
                }
            }
            let mut held = Vec::new();
            let mut committed = lo + halo;
            let mut start = lo;
            let mut k = 0usize;
            while start < hi {
                let end = start.saturating_add(slice).min(hi);
                for ((d, pair), &rb) in defer.iter().zip(bufs.iter_mut()).zip(&row_bytes) {
                    // Row `start` is the buffer's start: the compiled code adds `i * stride`
                    // to this address only for rows `start..end`.
                    own[self.layout.stores[d.store].ptr()] = (pair[k % 2].as_mut_ptr() as u64)
                        .wrapping_sub((start as u64).wrapping_mul(rb as u64));
                }
                // SAFETY: as for a chunk of `Plan::parallel`, with the chunk's own frame, whose
                // deferred pointers address rows `start..end` of dense buffers private to this
                // chunk, large enough for `slice >= end - start` rows; every access to them is
                // at the loop's index (the caller's contract).
                let s = unsafe { func(own.as_mut_ptr(), std::ptr::null(), start, end) };
                if s != 0 {
                    return Err(self.status_error(s));
                }
                for ((d, pair), &rb) in defer.iter().zip(bufs.iter()).zip(&row_bytes) {
                    let base = pair[k % 2].as_ptr().cast::<u8>();
                    for q in (start..end).filter(|&q| q < lo + halo || q >= hi - halo) {
                        let at = (q - start) as usize * rb;
                        // SAFETY: the buffer holds rows `start..end`, `rb` bytes each.
                        let row = unsafe { std::slice::from_raw_parts(base.add(at), rb) };
                        held.push(HeldRow {
                            row: q,
                            store: d.store,
                            bytes: row.to_vec(),
                        });
                    }
                }
                // Rows whose readers in this chunk have all run, other than held ones.
                let until = if end == hi { hi - halo } else { end - halo };
                for q in committed..until {
                    // Row q lies in this slice's buffer or the previous one (slice >= halo).
                    let (slice_of, at) = if q >= start {
                        (k % 2, q - start)
                    } else {
                        ((k + 1) % 2, q - (start - slice))
                    };
                    for ((d, pair), &rb) in defer.iter().zip(bufs.iter()).zip(&row_bytes) {
                        let src = pair[slice_of].as_ptr().cast::<u8>();
                        // SAFETY: the buffer holds that row (`at < slice` rows in), written by
                        // the compiled code; the store's row `q` is valid for writes (the
                        // caller's contract) and no other chunk touches it.
                        unsafe { write_row(&targets[d.store], q, src.add(at as usize * rb), rb) };
                    }
                }
                committed = committed.max(until);
                start = end;
                k += 1;
            }
            Ok(held)
        };
        let results: Vec<Result<Vec<HeldRow>>> = if nchunks == 1 {
            vec![call(0, &mut Vec::new())]
        } else {
            pool.install(|| {
                (0..nchunks)
                    .into_par_iter()
                    .map_init(Vec::new, |bufs, c| call(c, bufs))
                    .collect()
            })
        };
        let mut held = Vec::new();
        for r in results {
            held.extend(r?);
        }
        Ok(held)
    }
}

/// Writes held rows into their store arguments.
///
/// # Safety
/// Each row's store argument in `stores` is valid for writes of that row, and no thread is
/// running a step of the kernel.
pub(crate) unsafe fn write_held(stores: &[StoreView], rows: &[HeldRow]) {
    for h in rows {
        let Some(view) = stores.get(h.store) else {
            continue;
        };
        let target = RowTarget {
            ptr: Shared(view.ptr),
            extents: view.extents.clone(),
            strides: view.strides.clone(),
        };
        // SAFETY: the caller's contract; `h.bytes` holds the row's elements, dense.
        unsafe { write_row(&target, h.row, h.bytes.as_ptr(), h.bytes.len()) };
    }
}

/// Copies row `q` (dimension 0) of a store from `src`, where its elements lie dense in
/// row-major order, `bytes` bytes in all.
///
/// # Safety
/// `src` is valid for reads of `bytes` bytes; row `q` of `view` is valid for writes and
/// `bytes` is its elements' size.
unsafe fn write_row(view: &RowTarget, q: i64, src: *const u8, bytes: usize) {
    let rank = view.extents.len();
    let count: i64 = view.extents.iter().skip(1).product();
    if count <= 0 {
        return;
    }
    let size = bytes / count as usize;
    let row_at = if rank == 0 { 0 } else { q * view.strides[0] };
    let inner = &view.extents[rank.min(1)..];
    let strides = &view.strides[rank.min(1)..];
    // Runs along the innermost dimension are contiguous when its stride is one element.
    let contiguous = strides.last().is_none_or(|&s| s == 1);
    let run = if contiguous {
        inner.last().copied().unwrap_or(1)
    } else {
        1
    };
    let mut index = vec![0i64; inner.len()];
    let mut done = 0usize;
    loop {
        let at = index
            .iter()
            .zip(strides)
            .fold(row_at, |a, (&i, &s)| a + i * s);
        // SAFETY: `at` is an element of row `q` (the caller's contract); `done + run` elements
        // of `src` exist.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.add(done * size),
                view.ptr.get().offset(at as isize * size as isize),
                run as usize * size,
            )
        };
        done += run as usize;
        // Next run: advance the index, skipping the innermost dimension when it is one run.
        let mut d = inner.len();
        if contiguous && d > 0 {
            d -= 1;
        }
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < inner[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::deferrable_by_loop;

    #[test]
    fn only_stores_at_the_loop_index_can_be_deferred() {
        let k = weft_ir::text::parse(
            "kernel @k(%a: store<f64, 1, read>, %b: store<f64, 1, write>, %c: store<f64, 1, write>) {
               %z = const i64 0
               parallel %a (%i) {
                 %v = load %a[%i]
                 store %b[%i], %v
                 store %c[%z], %v
               }
             }",
        )
        .expect("parses");
        assert_eq!(deferrable_by_loop(&k), vec![vec![1]]);
    }
}
