//! Dense products (`weft_ir::product`'s kernel) through a blocked routine with the lane
//! order's bits.
//!
//! The kernel makes each `C[i, j]` the lane-order sum of `A[i, p] * BT[j, p]`: eight partial
//! sums from the identity, partial `l` adding the terms `p = 8q + l` in order (each by one
//! fused multiply-add, `partial = fma(A[i, p], BT[j, p], partial)`), the partials combined as
//! `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`, then the terms past the last whole
//! eight summed from the identity (by `fma` too) and added. Compiled as written, each element streams its two
//! rows from memory. This routine computes the same operations in the same order per element,
//! but for blocks of `C` at once, as BLAS does: operands packed per block, a register tile of
//! 4 x 6 elements (each element's eight partials one vector), and the partials kept in memory
//! between passes over `k`. Blocking changes which element is computed when, never the order
//! of any element's own operations, so the bits are the compiled kernel's on any number of
//! threads (the tests compare them with the reference interpreter's).

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

/// The lane order's partial sums per element.
const LANES: usize = weft_ir::builder::FOLD_LANES;
/// Rows of the register tile.
const MR: usize = 4;
/// Columns of the register tile.
const NR: usize = 6;
/// Rows of `C` per block (a multiple of [`MR`]).
const MB: usize = 64;
/// Columns of `C` per block (a multiple of [`NR`]).
const NB: usize = 72;
/// Terms per pass over `k` (a multiple of [`LANES`]): a block's packed operands stay in L2.
const KC: usize = 256;

/// Which register tile runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Plain Rust, for any CPU (`mul_add`, which is a library call without FMA hardware).
    Portable,
    /// 256-bit vectors: needs AVX2 and FMA.
    Avx2,
    /// 512-bit vectors: needs AVX-512F (and, for `f32`, AVX-512VL) and FMA.
    Avx512,
}

impl Path {
    /// The fastest path this CPU runs, unless `avx512` is off.
    pub(crate) fn detect(avx512: bool) -> Path {
        #[cfg(target_arch = "x86_64")]
        if avx512
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("fma")
        {
            return Path::Avx512;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Path::Avx2;
        }
        let _ = avx512;
        Path::Portable
    }
}

/// A float element of a product.
pub(crate) trait Element:
    Copy + Send + Sync + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + 'static
{
    /// The sum's identity (`+0`).
    const ZERO: Self;

    /// `self * b + c` rounded once.
    fn fma(self, b: Self, c: Self) -> Self;

    /// `acc[t][l] = fma(a[t / NR][q * 8 + l], b[t % NR][q * 8 + l], acc[t][l])` for
    /// `q < steps`, on `path`'s vectors (512-bit, 256-bit, or plain Rust); `a` holds [`MR`]
    /// rows and `b` [`NR`] rows, each `ld` apart. The partials start from `acc` if `load`,
    /// else from zero (`acc` is then only written).
    ///
    /// # Safety
    ///
    /// The CPU has `path`'s features (see [`Path`]); `a` and `b` hold their rows of
    /// `steps * 8` elements and `acc` holds `MR * NR * 8` elements.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        path: Path,
        a: &[Self],
        b: &[Self],
        ld: usize,
        steps: usize,
        load: bool,
        acc: &mut [Self],
    );
}

/// Implements [`Element`] for a float type, with its tiles.
macro_rules! element {
    ($t:ty, $tile512:ident, $tile256:ident) => {
        impl Element for $t {
            const ZERO: $t = 0.0;

            #[inline(always)]
            fn fma(self, b: $t, c: $t) -> $t {
                self.mul_add(b, c)
            }

            #[allow(clippy::too_many_arguments)]
            unsafe fn tile(
                path: Path,
                a: &[$t],
                b: &[$t],
                ld: usize,
                steps: usize,
                load: bool,
                acc: &mut [$t],
            ) {
                let (a, b) = (a.as_ptr(), b.as_ptr());
                match path {
                    // SAFETY: the caller's contract is the tile's.
                    #[cfg(target_arch = "x86_64")]
                    Path::Avx512 => unsafe { $tile512(a, b, ld, steps, load, acc.as_mut_ptr()) },
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Path::Avx2 => unsafe { $tile256(a, b, ld, steps, load, acc.as_mut_ptr()) },
                    // SAFETY: the caller's contract: the slices hold the rows and partials.
                    _ => unsafe {
                        tile_portable(
                            std::slice::from_raw_parts(a, (MR - 1) * ld + steps * LANES),
                            std::slice::from_raw_parts(b, (NR - 1) * ld + steps * LANES),
                            ld,
                            steps,
                            load,
                            acc,
                        )
                    },
                }
            }
        }
    };
}

element!(f64, tile_f64_avx512, tile_f64_avx2);
element!(f32, tile_f32_avx512, tile_f32_avx2);

/// A matrix in memory: element `(r, c)` at `ptr + r * rs + c * cs` (in elements).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Matrix<T> {
    /// Element `(0, 0)`.
    pub ptr: *mut T,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row stride, in elements.
    pub rs: isize,
    /// Column stride, in elements.
    pub cs: isize,
}

// SAFETY: a `Matrix` only describes memory; `multiply`'s caller guarantees that the memory is
// valid for the call, and the routine's threads read `A` and `BT` and write disjoint blocks
// of `C`.
unsafe impl<T: Send> Send for Matrix<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Sync> Sync for Matrix<T> {}

impl<T: Copy> Matrix<T> {
    /// Element `(r, c)`.
    ///
    /// # Safety
    ///
    /// `(r, c)` is inside the matrix, whose memory is valid for reads.
    unsafe fn get(&self, r: usize, c: usize) -> T {
        // SAFETY: the caller's contract.
        unsafe { *self.ptr.offset(r as isize * self.rs + c as isize * self.cs) }
    }

    /// Sets element `(r, c)`.
    ///
    /// # Safety
    ///
    /// `(r, c)` is inside the matrix, whose memory is valid for writes by this thread alone.
    unsafe fn set(&self, r: usize, c: usize, v: T) {
        // SAFETY: the caller's contract.
        unsafe { *self.ptr.offset(r as isize * self.rs + c as isize * self.cs) = v }
    }
}

/// Why a product stopped early.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Cancelled;

/// `C = A @ BT.T` in the lane order (see the module documentation): `a` is `(m, k)`, `bt`
/// `(n, k)` and `c` `(m, n)`, on the threads of `pool`. Checks `cancel` between blocks and
/// stops with [`Cancelled`] once it is set (the kernel time limit).
///
/// # Safety
///
/// Every element of the three matrices lies in memory valid for the call (reads of `a` and
/// `bt`, writes of `c`); `c` overlaps neither operand, and nothing else touches `c` meanwhile;
/// `path` is [`Path::Avx512`] only on a CPU with AVX-512F, AVX-512VL and FMA, and
/// [`Path::Avx2`] only on one with AVX2 and FMA.
pub(crate) unsafe fn multiply<T: Element>(
    a: Matrix<T>,
    bt: Matrix<T>,
    c: Matrix<T>,
    path: Path,
    pool: &rayon::ThreadPool,
    cancel: &AtomicU32,
) -> Result<(), Cancelled> {
    let (m, n, k) = (c.rows, c.cols, a.cols);
    debug_assert!(a.rows == m && bt.rows == n && bt.cols == k);
    if n <= FEW_COLUMNS && a.rs == 1 && a.cs != 1 {
        // SAFETY: the caller's contract.
        return unsafe { by_columns::<T, false>(a, bt, c, path, pool, cancel) };
    }
    if m <= FEW_COLUMNS && bt.rs == 1 && bt.cs != 1 {
        // `C.T = BT @ A.T`: few rows of `C` against a `B` stored by rows (an MLP's layer on a
        // small batch) stream `B` once, as `BT`'s columns. Each product keeps its operands'
        // order (`SWAPPED`), so every element's operations are the lane order's.
        let ct = Matrix {
            ptr: c.ptr,
            rows: n,
            cols: m,
            rs: c.cs,
            cs: c.rs,
        };
        // SAFETY: the caller's contract; `ct` names the elements of `c`.
        return unsafe { by_columns::<T, true>(bt, a, ct, path, pool, cancel) };
    }
    let (row_blocks, col_blocks) = (m.div_ceil(MB), n.div_ceil(NB));
    pool.install(|| {
        (0..row_blocks * col_blocks)
            .into_par_iter()
            .map_init(Scratch::new, |scratch, block| {
                if cancel.load(Ordering::Relaxed) != 0 {
                    return Err(Cancelled);
                }
                let (bi, bj) = (block / col_blocks, block % col_blocks);
                let rows = bi * MB..(bi * MB + MB).min(m);
                let cols = bj * NB..(bj * NB + NB).min(n);
                // SAFETY: the blocks lie inside `C` and are disjoint; the caller's contract
                // covers the memory and the path.
                unsafe { scratch.block(&a, &bt, &c, rows, cols, path, cancel) }
            })
            .collect::<Result<(), Cancelled>>()
    })
}

/// The bytes of partial sums a task of [`by_columns`] keeps: its rows are as many as fit
/// (from 64 to 4096), so that each column of `A` it reads is one long run of memory and its
/// partials stay in L2.
const PARTIAL_BYTES: usize = 128 << 10;

/// The most columns of `C` (or, with the operands' roles swapped, rows) that [`by_columns`]
/// takes: a task's partials are `8` per element of `C` it computes (see [`PARTIAL_BYTES`]).
const FEW_COLUMNS: usize = 16;

/// [`multiply`] for a few columns of `C` (`A @ x`, or `A @ X` with a thin `X`) where `A` is
/// stored by columns (a transpose, as in `x @ A`): each task takes a run of rows and streams
/// down every column of `A` once, adding `A[i, p] * BT[j, p]` (by `fma`) into partial `p mod 8` of each
/// of its elements `(i, j)`, then combines each element's partials as the lane order does.
/// Every element's operations and their order are the lane order's; only which elements
/// advance together changes. With `SWAPPED`, `a` is the caller's `BT` and `bt` its `A` (see
/// [`multiply`]): each `fma` then takes `BT[j, p]`'s partner as its first factor, so that the
/// factors keep the caller's order.
///
/// # Safety
///
/// As [`multiply`], with `a`'s rows contiguous (`rs == 1`) and at most [`FEW_COLUMNS`] rows
/// in `bt`.
unsafe fn by_columns<T: Element, const SWAPPED: bool>(
    a: Matrix<T>,
    bt: Matrix<T>,
    c: Matrix<T>,
    path: Path,
    pool: &rayon::ThreadPool,
    cancel: &AtomicU32,
) -> Result<(), Cancelled> {
    let (m, k, n) = (a.rows, a.cols, bt.rows);
    let whole = k / LANES * LANES;
    let per_task = (PARTIAL_BYTES / (n.max(1) * LANES * std::mem::size_of::<T>()))
        .clamp(64, 4096)
        .min(m.div_ceil(pool.current_num_threads()).max(64));
    pool.install(|| {
        (0..m.div_ceil(per_task))
            .into_par_iter()
            .map_init(Vec::new, |partials: &mut Vec<T>, task| {
                if cancel.load(Ordering::Relaxed) != 0 {
                    return Err(Cancelled);
                }
                let lo = task * per_task;
                let len = per_task.min(m - lo);
                partials.clear();
                partials.resize(n * LANES * len, T::ZERO);
                for p in 0..whole {
                    // SAFETY: rows `lo .. lo + len` of column `p` lie inside `A`, one element
                    // apart.
                    let column = unsafe {
                        std::slice::from_raw_parts(
                            a.ptr.offset(lo as isize + p as isize * a.cs),
                            len,
                        )
                    };
                    for j in 0..n {
                        // SAFETY: `(j, p)` lies inside `BT`.
                        let xp = unsafe { bt.get(j, p) };
                        let lane = &mut partials[(j * LANES + p % LANES) * len..][..len];
                        match path {
                            // SAFETY: the path is AVX-512 only where the CPU has it.
                            Path::Avx512 => unsafe {
                                add_products_avx512::<T, SWAPPED>(lane, column, xp)
                            },
                            // SAFETY: the path is AVX2 only where the CPU has it.
                            Path::Avx2 => unsafe {
                                add_products_avx2::<T, SWAPPED>(lane, column, xp)
                            },
                            Path::Portable => add_products::<T, SWAPPED>(lane, column, xp),
                        }
                    }
                }
                for j in 0..n {
                    let part = &partials[j * LANES * len..][..LANES * len];
                    for r in 0..len {
                        let l = |x: usize| part[x * len + r];
                        let tree =
                            ((l(0) + l(1)) + (l(2) + l(3))) + ((l(4) + l(5)) + (l(6) + l(7)));
                        let mut tail = T::ZERO;
                        for p in whole..k {
                            // SAFETY: `(lo + r, p)` and `(j, p)` lie inside `A` and `BT`.
                            let (v, x) = unsafe { (a.get(lo + r, p), bt.get(j, p)) };
                            tail = if SWAPPED {
                                x.fma(v, tail)
                            } else {
                                v.fma(x, tail)
                            };
                        }
                        // SAFETY: `(lo + r, j)` lies in this task's rows of `C`, which only
                        // this thread writes.
                        unsafe { c.set(lo + r, j, tree + tail) };
                    }
                }
                Ok(())
            })
            .collect::<Result<(), Cancelled>>()
    })
}

/// `acc[i] = fma(column[i], x, acc[i])` for every `i`; with `SWAPPED`,
/// `fma(x, column[i], acc[i])`.
#[inline(always)]
fn add_products<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    for (a, &v) in acc.iter_mut().zip(column) {
        *a = if SWAPPED { x.fma(v, *a) } else { v.fma(x, *a) };
    }
}

/// [`add_products`] compiled for AVX-512, so that its loop runs in wide vectors.
///
/// # Safety
///
/// The CPU has AVX-512F, AVX-512VL and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,fma")]
unsafe fn add_products_avx512<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    add_products::<T, SWAPPED>(acc, column, x);
}

/// [`add_products`] compiled for AVX2.
///
/// # Safety
///
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_products_avx2<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    add_products::<T, SWAPPED>(acc, column, x);
}

/// [`add_products`] off x86-64, where the AVX2 path is never chosen.
///
/// # Safety
///
/// None beyond [`add_products`]'s.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn add_products_avx2<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    add_products::<T, SWAPPED>(acc, column, x);
}

/// [`add_products`] off x86-64, where the AVX-512 path is never chosen.
///
/// # Safety
///
/// None beyond [`add_products`]'s.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn add_products_avx512<T: Element, const SWAPPED: bool>(acc: &mut [T], column: &[T], x: T) {
    add_products::<T, SWAPPED>(acc, column, x);
}

/// One thread's buffers: the packed operands of a block and its partial sums.
struct Scratch<T> {
    a: Vec<T>,
    b: Vec<T>,
    acc: Vec<T>,
}

impl<T: Element> Scratch<T> {
    /// Empty buffers.
    fn new() -> Scratch<T> {
        Scratch {
            a: Vec::new(),
            b: Vec::new(),
            acc: Vec::new(),
        }
    }

    /// `C[rows, cols]`, unless `cancel` is set before one of its passes over `k` (then `C` is
    /// left as it was).
    ///
    /// # Safety
    ///
    /// As [`multiply`], with `rows` and `cols` inside `C` and no other thread writing them.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        &mut self,
        a: &Matrix<T>,
        bt: &Matrix<T>,
        c: &Matrix<T>,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
        path: Path,
        cancel: &AtomicU32,
    ) -> Result<(), Cancelled> {
        let k = a.cols;
        let whole = k / LANES * LANES;
        let (mb, nb) = (rows.len(), cols.len());
        let (mp, np) = (mb.div_ceil(MR) * MR, nb.div_ceil(NR) * NR);
        let tiles_across = np / NR;
        // Every tile's partials are written by its first pass (which does not read them),
        // so the buffer is never cleared.
        if self.acc.len() < mp * np * LANES {
            self.acc.resize(mp * np * LANES, T::ZERO);
        }
        if whole == 0 {
            // No whole vector of terms: every partial is zero.
            self.acc[..MR * NR * LANES].fill(T::ZERO);
            for ti in 0..mp / MR {
                for tj in 0..tiles_across {
                    // SAFETY: as this function's.
                    unsafe { self.finish(a, bt, c, (&rows, &cols), (ti, tj), 0) };
                }
            }
            return Ok(());
        }
        let mut k0 = 0;
        while k0 < whole {
            if cancel.load(Ordering::Relaxed) != 0 {
                return Err(Cancelled);
            }
            let kc = KC.min(whole - k0);
            let (load, last) = (k0 > 0, k0 + kc == whole);
            // Packed rows one vector longer than their terms: a power-of-two row length would
            // put the rows that a transposing pack writes at once into a few cache sets.
            let ld = kc + LANES;
            // SAFETY: the packed rows and columns lie inside `A` and `BT` (the caller's
            // contract), and `k0 + kc <= k`.
            unsafe {
                pack(&mut self.a, a, rows.clone(), mp, k0, kc, ld);
                pack(&mut self.b, bt, cols.clone(), np, k0, kc, ld);
            }
            for ti in 0..mp / MR {
                for tj in 0..tiles_across {
                    let at = if last {
                        // The last pass leaves each tile's partials at the buffer's start,
                        // where they stay in the cache until `finish` reads them.
                        0
                    } else {
                        (ti * tiles_across + tj) * MR * NR * LANES
                    };
                    let from = (ti * tiles_across + tj) * MR * NR * LANES;
                    if last && load {
                        self.acc.copy_within(from..from + MR * NR * LANES, 0);
                    }
                    let acc = &mut self.acc[at..][..MR * NR * LANES];
                    let a_rows = &self.a[ti * MR * ld..][..MR * ld];
                    let b_rows = &self.b[tj * NR * ld..][..NR * ld];
                    let steps = kc / LANES;
                    // SAFETY: the slices hold the rows and partials the tile reads and writes;
                    // the path is a vector one only where the CPU has it (`Path::detect`).
                    unsafe { T::tile(path, a_rows, b_rows, ld, steps, load, acc) };
                    if last {
                        // SAFETY: as this function's.
                        unsafe { self.finish(a, bt, c, (&rows, &cols), (ti, tj), whole) };
                    }
                }
            }
            k0 += kc;
        }
        Ok(())
    }

    /// Writes the elements of tile `(ti, tj)` of the block `(rows, cols)` of `C` whose
    /// partials lie at the start of the partial buffer: each the tree of its eight partials
    /// plus the sum of its terms from `whole` on, in the lane order.
    ///
    /// # Safety
    ///
    /// As [`Scratch::block`].
    unsafe fn finish(
        &self,
        a: &Matrix<T>,
        bt: &Matrix<T>,
        c: &Matrix<T>,
        (rows, cols): (&std::ops::Range<usize>, &std::ops::Range<usize>),
        (ti, tj): (usize, usize),
        whole: usize,
    ) {
        for r in 0..MR {
            let i = rows.start + ti * MR + r;
            if i >= rows.end {
                break;
            }
            for cc in 0..NR {
                let j = cols.start + tj * NR + cc;
                if j >= cols.end {
                    break;
                }
                let l = &self.acc[(r * NR + cc) * LANES..][..LANES];
                let tree = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
                let mut tail = T::ZERO;
                for p in whole..a.cols {
                    // SAFETY: `(i, p)` and `(j, p)` lie inside `A` and `BT`.
                    tail = unsafe { a.get(i, p).fma(bt.get(j, p), tail) };
                }
                // SAFETY: `(i, j)` lies in this block of `C`, which only this thread writes.
                unsafe { c.set(i, j, tree + tail) };
            }
        }
    }
}

/// Packs rows `rows` of `x`, columns `k0..k0 + kc`, into `out` as `padded` rows of `kc`
/// contiguous elements, `ld` apart (the rows past `rows`, and the elements past `kc`, zero).
///
/// # Safety
///
/// The rows and columns lie inside `x`, whose memory is valid for reads.
unsafe fn pack<T: Element>(
    out: &mut Vec<T>,
    x: &Matrix<T>,
    rows: std::ops::Range<usize>,
    padded: usize,
    k0: usize,
    kc: usize,
    ld: usize,
) {
    out.clear();
    out.resize(padded * ld, T::ZERO);
    for (r, i) in rows.clone().enumerate() {
        let row = &mut out[r * ld..r * ld + kc];
        if x.cs == 1 {
            // SAFETY: the caller's contract: `kc` elements from `(i, k0)` lie inside `x`.
            let src = unsafe {
                std::slice::from_raw_parts(x.ptr.offset(i as isize * x.rs + k0 as isize), kc)
            };
            row.copy_from_slice(src);
        } else if x.rs != 1 {
            for (p, v) in row.iter_mut().enumerate() {
                // SAFETY: the caller's contract.
                *v = unsafe { x.get(i, k0 + p) };
            }
        }
    }
    if x.cs != 1 && x.rs == 1 {
        // Stored by columns (`B` of `A @ B`, read as `BT`): walk each column of the block in
        // memory order, so that the reads stream and only the writes stride.
        let first = rows.start;
        for p in 0..kc {
            // SAFETY: the caller's contract: rows `rows` of column `k0 + p` lie inside `x`,
            // one element apart.
            let column = unsafe {
                std::slice::from_raw_parts(
                    x.ptr.offset(first as isize + (k0 + p) as isize * x.cs),
                    rows.len(),
                )
            };
            for (r, &v) in column.iter().enumerate() {
                out[r * ld + p] = v;
            }
        }
    }
}

/// [`Element::tile`] in plain Rust: rows `ld` apart, `steps` vectors of terms.
fn tile_portable<T: Element>(a: &[T], b: &[T], ld: usize, steps: usize, load: bool, acc: &mut [T]) {
    if !load {
        acc[..MR * NR * LANES].fill(T::ZERO);
    }
    for q in 0..steps {
        for i in 0..MR {
            let ar = &a[i * ld + q * LANES..][..LANES];
            for j in 0..NR {
                let br = &b[j * ld + q * LANES..][..LANES];
                let t = &mut acc[(i * NR + j) * LANES..][..LANES];
                for l in 0..LANES {
                    t[l] = ar[l].fma(br[l], t[l]);
                }
            }
        }
    }
}

/// Defines one 512-bit register tile of [`Element::tile`] for an element type: the vector
/// type holding one element's eight partials and its zero, load, store and multiply-add.
macro_rules! tile_avx512 {
    ($(#[$doc:meta])* $name:ident, $t:ty, $features:literal, $zero:ident, $load:ident,
     $store:ident, $fma:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As [`Element::tile`] on [`Path::Avx512`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(
            a: *const $t,
            b: *const $t,
            ld: usize,
            steps: usize,
            load: bool,
            acc: *mut $t,
        ) {
            use std::arch::x86_64::*;
            let mut t = [$zero(); MR * NR];
            if load {
                for (x, v) in t.iter_mut().enumerate() {
                    // SAFETY: `acc` holds `MR * NR * 8` elements.
                    *v = unsafe { $load(acc.add(x * LANES)) };
                }
            }
            for q in 0..steps {
                let at = q * LANES;
                let mut ar = [$zero(); MR];
                for (i, v) in ar.iter_mut().enumerate() {
                    // SAFETY: each of the `MR` rows of `a` holds `steps * 8` elements.
                    *v = unsafe { $load(a.add(i * ld + at)) };
                }
                for j in 0..NR {
                    // SAFETY: each of the `NR` rows of `b` holds `steps * 8` elements.
                    let bj = unsafe { $load(b.add(j * ld + at)) };
                    for i in 0..MR {
                        t[i * NR + j] = $fma(ar[i], bj, t[i * NR + j]);
                    }
                }
            }
            for (x, v) in t.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { $store(acc.add(x * LANES), *v) };
            }
        }
    };
}

tile_avx512!(
    /// [`Element::tile`] on AVX-512 for `f64`: each element's eight partials one `zmm` register.
    tile_f64_avx512, f64, "avx512f,fma", _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd,
    _mm512_fmadd_pd
);

tile_avx512!(
    /// [`Element::tile`] on AVX-512 for `f32`: each element's eight partials one `ymm` register
    /// (of the 32 that AVX-512VL gives).
    tile_f32_avx512, f32, "avx512f,avx512vl,fma", _mm256_setzero_ps, _mm256_loadu_ps,
    _mm256_storeu_ps, _mm256_fmadd_ps
);

/// Defines one 256-bit register tile of [`Element::tile`] for an element type: the tile runs as
/// sub-tiles of `$sr x $sc` elements whose partials fit the sixteen 256-bit registers (`$v`
/// vectors per element's eight partials), each over all of the tile's steps.
macro_rules! tile_avx2 {
    ($(#[$doc:meta])* $name:ident, $t:ty, $vec:ty, $v:literal, $sr:literal, $sc:literal,
     $zero:ident, $load:ident, $store:ident, $fma:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As [`Element::tile`] on [`Path::Avx2`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $name(
            a: *const $t,
            b: *const $t,
            ld: usize,
            steps: usize,
            load: bool,
            acc: *mut $t,
        ) {
            use std::arch::x86_64::*;
            const W: usize = LANES / $v;
            for i0 in (0..MR).step_by($sr) {
                for j0 in (0..NR).step_by($sc) {
                    let mut t: [[$vec; $v]; $sr * $sc] = [[$zero(); $v]; $sr * $sc];
                    for i in (0..$sr).filter(|_| load) {
                        for j in 0..$sc {
                            let x = ((i0 + i) * NR + j0 + j) * LANES;
                            for h in 0..$v {
                                // SAFETY: `acc` holds `MR * NR * 8` elements.
                                t[i * $sc + j][h] = unsafe { $load(acc.add(x + h * W)) };
                            }
                        }
                    }
                    for q in 0..steps {
                        let at = q * LANES;
                        let mut ar: [[$vec; $v]; $sr] = [[$zero(); $v]; $sr];
                        for (i, r) in ar.iter_mut().enumerate() {
                            for (h, v) in r.iter_mut().enumerate() {
                                // SAFETY: each of the `MR` rows of `a` holds `steps * 8`
                                // elements.
                                *v = unsafe { $load(a.add((i0 + i) * ld + at + h * W)) };
                            }
                        }
                        for j in 0..$sc {
                            for h in 0..$v {
                                // SAFETY: each of the `NR` rows of `b` holds `steps * 8`
                                // elements.
                                let bj = unsafe { $load(b.add((j0 + j) * ld + at + h * W)) };
                                for i in 0..$sr {
                                    let x = &mut t[i * $sc + j][h];
                                    *x = $fma(ar[i][h], bj, *x);
                                }
                            }
                        }
                    }
                    for i in 0..$sr {
                        for j in 0..$sc {
                            let x = ((i0 + i) * NR + j0 + j) * LANES;
                            for h in 0..$v {
                                // SAFETY: as for the loads.
                                unsafe { $store(acc.add(x + h * W), t[i * $sc + j][h]) };
                            }
                        }
                    }
                }
            }
        }
    };
}

tile_avx2!(
    /// [`Element::tile`] on AVX2 for `f64`: each element's eight partials two `ymm` registers,
    /// in sub-tiles of 2 x 2 elements (2 x 3 spills two of them).
    tile_f64_avx2, f64, __m256d, 2, 2, 2, _mm256_setzero_pd, _mm256_loadu_pd,
    _mm256_storeu_pd, _mm256_fmadd_pd
);

tile_avx2!(
    /// [`Element::tile`] on AVX2 for `f32`: each element's eight partials one `ymm` register, in
    /// sub-tiles of 2 x 6 elements.
    tile_f32_avx2, f32, __m256, 1, 2, 6, _mm256_setzero_ps, _mm256_loadu_ps,
    _mm256_storeu_ps, _mm256_fmadd_ps
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in `[-1, 1)`, not round, so that the order of additions shows.
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// The lane order for one element, written out as `fold_lanes` builds it.
    fn lane_order<T: Element>(a: impl Fn(usize) -> T, b: impl Fn(usize) -> T, k: usize) -> T {
        let mut l = [T::ZERO; LANES];
        for q in 0..k / LANES {
            for (x, v) in l.iter_mut().enumerate() {
                *v = a(q * LANES + x).fma(b(q * LANES + x), *v);
            }
        }
        let mut tail = T::ZERO;
        for p in k / LANES * LANES..k {
            tail = a(p).fma(b(p), tail);
        }
        (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + tail
    }

    /// `C = A @ BT.T` by the routine on `threads` threads, `A` stored by columns when
    /// `layout` (by rows, or by columns as a transposed view is), `C` with a padded row
    /// stride.
    fn routine<T: Element>(
        a: &[T],
        bt: &[T],
        (m, n, k): (usize, usize, usize),
        layout: Layout,
        path: Path,
        threads: usize,
    ) -> Vec<T> {
        let (a_cols, bt_cols) = match layout {
            Layout::Rows => (false, false),
            Layout::Columns => (true, true),
            Layout::BtColumns => (false, true),
        };
        let mut a_store: Vec<T> = if a_cols {
            (0..m * k).map(|x| a[(x % m) * k + x / m]).collect()
        } else {
            a.to_vec()
        };
        let mut bt_store: Vec<T> = if bt_cols {
            (0..n * k).map(|x| bt[(x % n) * k + x / n]).collect()
        } else {
            bt.to_vec()
        };
        let (bt_rs, bt_cs) = if bt_cols {
            (1, n as isize)
        } else {
            (k as isize, 1)
        };
        let pad = 3;
        let mut c_store = vec![T::ZERO; m * (n + pad)];
        let (rs, cs) = if a_cols {
            (1, m as isize)
        } else {
            (k as isize, 1)
        };
        let am = Matrix {
            ptr: a_store.as_mut_ptr(),
            rows: m,
            cols: k,
            rs,
            cs,
        };
        let bm = Matrix {
            ptr: bt_store.as_mut_ptr(),
            rows: n,
            cols: k,
            rs: bt_rs,
            cs: bt_cs,
        };
        let cm = Matrix {
            ptr: c_store.as_mut_ptr(),
            rows: m,
            cols: n,
            rs: (n + pad) as isize,
            cs: 1,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool");
        let cancel = AtomicU32::new(0);
        // SAFETY: the three matrices describe the vectors above, which outlive the call; `C`
        // is its own vector; the path was detected (or is the portable one).
        unsafe { multiply(am, bm, cm, path, &pool, &cancel) }.expect("not cancelled");
        (0..m)
            .flat_map(|i| c_store[i * (n + pad)..i * (n + pad) + n].to_vec())
            .collect()
    }

    /// How the test stores `A` and `BT`.
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        /// Both by rows (`A @ B.T`).
        Rows,
        /// Both by columns (`A.T @ B`).
        Columns,
        /// `A` by rows, `BT` by columns (`A @ B`).
        BtColumns,
    }

    fn paths() -> Vec<Path> {
        let mut paths = vec![Path::Portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            paths.push(Path::Avx2);
        }
        if Path::detect(true) == Path::Avx512 {
            paths.push(Path::Avx512);
        }
        paths
    }

    /// Shapes around every blocking edge: fewer than eight terms, terms past the last eight,
    /// more than one pass over `k`, rows and columns past the tiles and the blocks.
    /// Single columns (`A @ x`), which take `by_columns` where `A` is stored by columns.
    /// A few rows against many columns (`A @ B` with `B` by rows streams `B` in tasks of 64 rows
    /// or more).
    const SHAPES: [(usize, usize, usize); 11] = [
        (5, 600, 37),
        (1, 1, 1),
        (3, 5, 7),
        (5, 7, 8),
        (9, 13, 21),
        (67, 75, 300),
        (130, 150, 515),
        (4, 6, 256),
        (300, 1, 7),
        (517, 1, 83),
        (1, 1, 40),
    ];

    #[test]
    fn the_routine_has_the_lane_orders_bits_in_f64() {
        for (s, &(m, n, k)) in SHAPES.iter().enumerate() {
            let a = values(m * k, 2 * s as u64 + 1);
            let bt = values(n * k, 2 * s as u64 + 2);
            let want: Vec<u64> = (0..m * n)
                .map(|x| {
                    let (i, j) = (x / n, x % n);
                    lane_order(|p| a[i * k + p], |p| bt[j * k + p], k).to_bits()
                })
                .collect();
            for path in paths() {
                for threads in [1, 3] {
                    for layout in [Layout::Rows, Layout::Columns, Layout::BtColumns] {
                        let got: Vec<u64> = routine(&a, &bt, (m, n, k), layout, path, threads)
                            .iter()
                            .map(|v| v.to_bits())
                            .collect();
                        assert!(
                            got == want,
                            "{m}x{k} @ {k}x{n}, {path:?}, {threads} threads, {layout:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_routine_has_the_lane_orders_bits_in_f32() {
        for (s, &(m, n, k)) in SHAPES.iter().enumerate() {
            let a: Vec<f32> = values(m * k, 3 * s as u64 + 1)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let bt: Vec<f32> = values(n * k, 3 * s as u64 + 2)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let want: Vec<u32> = (0..m * n)
                .map(|x| {
                    let (i, j) = (x / n, x % n);
                    lane_order(|p| a[i * k + p], |p| bt[j * k + p], k).to_bits()
                })
                .collect();
            for path in paths() {
                for layout in [Layout::Columns, Layout::BtColumns] {
                    let got: Vec<u32> = routine(&a, &bt, (m, n, k), layout, path, 2)
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    assert!(got == want, "{m}x{k} @ {k}x{n}, {path:?}, {layout:?}");
                }
            }
        }
    }

    #[test]
    fn a_set_cancel_flag_stops_the_product() {
        let (m, n, k) = (200, 200, 16);
        let (mut a, mut bt, mut c) = (vec![1.0f64; m * k], vec![1.0f64; n * k], vec![0.0; m * n]);
        let matrix = |ptr: *mut f64, rows: usize, cols: usize| Matrix {
            ptr,
            rows,
            cols,
            rs: cols as isize,
            cs: 1,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a pool");
        let cancel = AtomicU32::new(1);
        // SAFETY: the matrices describe the vectors above, which outlive the call.
        let result = unsafe {
            multiply(
                matrix(a.as_mut_ptr(), m, k),
                matrix(bt.as_mut_ptr(), n, k),
                matrix(c.as_mut_ptr(), m, n),
                Path::Portable,
                &pool,
                &cancel,
            )
        };
        assert_eq!(result, Err(Cancelled));
        assert!(c.iter().all(|&v| v == 0.0), "no block ran");
    }
}
