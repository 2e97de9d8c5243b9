//! Products with a few columns of `C` (`A @ x`, or a thin `X`) where `A` is stored by
//! columns: each task streams down every column of `A` once, with no packing.

use std::sync::atomic::Ordering;

use super::{Cancelled, Element, Job, Path, tree};

/// The bytes of running sums a task keeps: its rows are as many as fit (from 64 to 4096), so
/// that each column of `A` it reads is one long run of memory and its sums stay in L1.
const SUM_BYTES: usize = 32 << 10;

/// The most columns of `C` (or, with the operands' roles swapped, rows) that [`by_columns`]
/// takes: a task keeps one running sum per element of `C` it computes.
pub(crate) const FEW_COLUMNS: usize = 16;

/// `C = A @ BT.T` for a few columns of `C` where `A` is stored by columns (a transpose, as in
/// `x @ A`): each task takes a run of rows and streams down every column of `A` once, adding
/// `A[i, p] * BT[j, p]` (by `fma`) into the running sum of each of its elements `(i, j)`,
/// in increasing `p`, from zero at each block of terms, whose sums merge by the tree
/// (`super::tree`): every element's sum is the product's. With `SWAPPED`, `a` is the
/// caller's `BT` and `bt` its `A` (see [`super::multiply`]): each `fma` then takes
/// `BT[j, p]`'s partner as its first factor, so that the factors keep the caller's order.
///
/// # Safety
///
/// As [`super::multiply`], with `a`'s rows contiguous (`rs == 1`) and at most
/// [`FEW_COLUMNS`] rows in `bt`.
pub(crate) unsafe fn by_columns<T: Element, const SWAPPED: bool>(
    job: Job<'_, T>,
) -> Result<(), Cancelled> {
    let Job {
        a,
        bt,
        c,
        path,
        pool,
        cancel,
        ..
    } = job;
    let (m, k, n) = (a.rows, a.cols, bt.rows);
    let threads = pool.current_num_threads().max(1);
    // A task per thread (of 64 rows at least). The calling thread starts on them at once and
    // the pool's workers join as they wake (`shared_chunks`): handing the whole product to the
    // pool made the caller wait for a worker to wake first. On the 2-core machine this was
    // measured on, NPBench's `covariance` (1,400 products `x @ A` of about 0.2 ms each) took
    // 208-234 ms against 273-328 ms in three alternating runs each; two or four tasks per
    // thread were slower than one (shorter runs of each column).
    let per_task = (SUM_BYTES / (n.max(1) * std::mem::size_of::<T>()))
        .clamp(64, 4096)
        .min(m.div_ceil(threads).max(64));
    let tasks = m.div_ceil(per_task);
    let results = crate::shared_chunks::run(
        pool,
        tasks,
        threads - 1,
        |task, sums: &mut Vec<T>| -> Result<(), Cancelled> {
            // The whole matrix, not its pointer field alone (which is not `Sync`).
            let a = &a;
            if cancel.load(Ordering::Relaxed) != 0 {
                return Err(Cancelled);
            }
            let lo = task * per_task;
            let len = per_task.min(m - lo);
            sums.clear();
            sums.resize(n * len, T::ZERO);
            // The blocks' partial sums (`super::tree`), per level one per running sum.
            let blocks = tree::blocks(k);
            let mut stack = vec![T::ZERO; tree::levels(blocks) * n * len];
            // SAFETY: rows `lo .. lo + len` of column `p < k` lie inside `A`, one element
            // apart.
            let column = |p: usize| unsafe {
                std::slice::from_raw_parts(a.ptr.offset(lo as isize + p as isize * a.cs), len)
            };
            for block in 0..blocks {
                let start = block * tree::BLOCK;
                let end = tree::block_end(start, k);
                sums.fill(T::ZERO);
                // The columns of `A` [`GROUP`] at a time: each running sum is loaded and
                // stored once per group, its `fma`s in increasing `p` as before.
                let whole = end - (end - start) % GROUP;
                for p in (start..whole).step_by(GROUP) {
                    let columns: [&[T]; GROUP] = std::array::from_fn(|g| column(p + g));
                    for (j, sum) in sums.chunks_exact_mut(len).enumerate() {
                        // SAFETY: `(j, p + g)` lies inside `BT` (`p + g < k`).
                        let xs: [T; GROUP] = std::array::from_fn(|g| unsafe { bt.get(j, p + g) });
                        match path {
                            // SAFETY: the path is AVX-512 only where the CPU has it.
                            Path::Avx512 => unsafe {
                                add_group_avx512::<T, SWAPPED>(sum, &columns, &xs)
                            },
                            // SAFETY: the path is AVX2 only where the CPU has it.
                            Path::Avx2 => unsafe {
                                add_group_avx2::<T, SWAPPED>(sum, &columns, &xs)
                            },
                            Path::Portable => add_group::<T, SWAPPED>(sum, &columns, &xs),
                        }
                    }
                }
                for p in whole..end {
                    let column = column(p);
                    for (j, sum) in sums.chunks_exact_mut(len).enumerate() {
                        // SAFETY: `(j, p)` lies inside `BT`.
                        let xp = unsafe { bt.get(j, p) };
                        match path {
                            // SAFETY: the path is AVX-512 only where the CPU has it.
                            Path::Avx512 => unsafe {
                                add_products_avx512::<T, SWAPPED>(sum, column, xp)
                            },
                            // SAFETY: the path is AVX2 only where the CPU has it.
                            Path::Avx2 => unsafe {
                                add_products_avx2::<T, SWAPPED>(sum, column, xp)
                            },
                            Path::Portable => add_products::<T, SWAPPED>(sum, column, xp),
                        }
                    }
                }
                // The block's sums merge (onto the stack, or, after the last block, into
                // the running sums themselves).
                if blocks > 1 {
                    let (level, base) = (n * len, stack.as_mut_ptr());
                    // SAFETY: level `l` of the stack holds `n * len` elements from `l * level`
                    // (the stack has `levels(blocks)` of them), this task's own.
                    unsafe {
                        tree::merge_run(block + 1, blocks, sums, |l| {
                            base.wrapping_add(l * level).cast_const()
                        })
                    };
                    if let Some(l) = tree::lands(block + 1, blocks) {
                        stack[l * level..][..level].copy_from_slice(sums);
                    }
                }
            }
            for (j, sum) in sums.chunks_exact(len).enumerate() {
                for (r, &v) in sum.iter().enumerate() {
                    // SAFETY: `(lo + r, j)` lies in this task's rows of `C`, which only
                    // this thread writes.
                    unsafe { c.set(lo + r, j, v) };
                }
            }
            Ok(())
        },
    );
    results.into_iter().collect()
}

/// Defines `$avx512` and `$avx2`: `$inner` compiled for AVX-512 (F and VL) with FMA, and
/// for AVX2 with FMA, so that its loops run in wide vectors. Off x86-64, where neither path
/// is ever chosen, both are `$inner` as it is.
macro_rules! wide_variants {
    ($inner:ident => $avx512:ident, $avx2:ident; ($($arg:ident: $ty:ty),*)) => {
        #[doc = concat!("[`", stringify!($inner), "`] compiled for AVX-512.")]
        ///
        /// # Safety
        ///
        /// The CPU has AVX-512F, AVX-512VL and FMA.
        #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f,avx512vl,fma"))]
        unsafe fn $avx512<T: Element, const SWAPPED: bool>($($arg: $ty),*) {
            $inner::<T, SWAPPED>($($arg),*)
        }

        #[doc = concat!("[`", stringify!($inner), "`] compiled for AVX2.")]
        ///
        /// # Safety
        ///
        /// The CPU has AVX2 and FMA.
        #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
        unsafe fn $avx2<T: Element, const SWAPPED: bool>($($arg: $ty),*) {
            $inner::<T, SWAPPED>($($arg),*)
        }
    };
}

/// The columns of `A` that [`by_columns`] adds into its running sums at once.
const GROUP: usize = 8;

/// For every `i`, `acc[i]` takes `fma(columns[g][i], xs[g], acc[i])` for `g` from 0 to
/// [`GROUP`] in order (with `SWAPPED`, `fma(xs[g], columns[g][i], acc[i])`): the chain that
/// [`GROUP`] calls of [`add_products`] make, with each sum loaded and stored once.
#[inline(always)]
fn add_group<T: Element, const SWAPPED: bool>(
    acc: &mut [T],
    columns: &[&[T]; GROUP],
    xs: &[T; GROUP],
) {
    let n = acc.len();
    let columns: [&[T]; GROUP] = std::array::from_fn(|g| &columns[g][..n]);
    for (i, a) in acc.iter_mut().enumerate() {
        let mut s = *a;
        for g in 0..GROUP {
            let v = columns[g][i];
            s = if SWAPPED {
                xs[g].fma(v, s)
            } else {
                v.fma(xs[g], s)
            };
        }
        *a = s;
    }
}

wide_variants!(add_group => add_group_avx512, add_group_avx2;
    (acc: &mut [T], columns: &[&[T]; GROUP], xs: &[T; GROUP]));

/// `acc[i] = fma(column[i], x, acc[i])` for every `i`; with `SWAPPED`,
/// `fma(x, column[i], acc[i])`.
#[inline(always)]
fn add_products<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    for (a, &v) in acc.iter_mut().zip(column) {
        *a = if SWAPPED { x.fma(v, *a) } else { v.fma(x, *a) };
    }
}

wide_variants!(add_products => add_products_avx512, add_products_avx2;
    (acc: &mut [T], column: &[T], x: T));
