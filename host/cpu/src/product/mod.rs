//! Dense products (`weft_ir::product`'s kernel) through blocked routines with the kernel's
//! bits.
//!
//! The kernel makes each `C[i, j]` the canonical blocked sum of `A[i, p] * BT[j, p]` over
//! `p`: `p` cut into aligned blocks of 1,024 terms, each block one chain of fused
//! multiply-adds from zero in increasing `p` (`sum = fma(A[i, p], BT[j, p], sum)`), the
//! blocks' sums combined by the aligned pairwise tree ([`tree`]). Compiled as written, each
//! element streams its two rows from memory. These routines compute the same operations in
//! the same order per element, but for many elements at once, as BLAS does: [`blocks`] packs
//! the operands per block and runs register tiles ([`kernels`]) that keep a tile of `C` in
//! vector registers while the terms stream through, continuing each element's chain from `C`
//! between passes over `k` inside a block of terms and merging the block's sums into a stack
//! of partial sums at its end; [`by_columns`] streams a matrix stored by columns once for a
//! few columns of `C`. Blocking changes which element is computed when, never the order of
//! any element's own operations, so the bits are the compiled kernel's on any number of
//! threads (the tests compare them with the order written out). Small products (at most
//! [`SMALL_PRODUCT`] multiply-adds) skip all that: the calling thread computes each
//! element's sum straight from the operands.

mod blocks;
mod by_columns;
mod kernels;
mod tree;

use std::sync::atomic::AtomicU32;

use by_columns::{FEW_COLUMNS, by_columns};

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

    /// `C[r, c] = fma(a[p * mr + r], b[p * nr + c], C[r, c])` for `p < kc` in increasing
    /// `p`, `C[r, c]` at `c + r * rs`, on `path`'s tile (`kernels::Geometry::of(path,
    /// size_of::<Self>())` gives `mr` and `nr`); the chains start from `C`'s values if `load`,
    /// else from zero (`C` is then only written).
    ///
    /// # Safety
    ///
    /// The CPU has `path`'s features (see [`Path`]); `a` holds `kc * mr` elements, `b`
    /// `kc * nr`, and the tile of `C` (`mr` rows of `nr` elements, `rs` apart) is valid for
    /// reads and writes.
    unsafe fn tile(
        path: Path,
        kc: usize,
        a: *const Self,
        b: *const Self,
        c: *mut Self,
        rs: usize,
        load: bool,
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

            unsafe fn tile(
                path: Path,
                kc: usize,
                a: *const $t,
                b: *const $t,
                c: *mut $t,
                rs: usize,
                load: bool,
            ) {
                match path {
                    // SAFETY: the caller's contract is the tile's.
                    #[cfg(target_arch = "x86_64")]
                    Path::Avx512 => unsafe { kernels::$tile512(kc, a, b, c, rs, load) },
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Path::Avx2 => unsafe { kernels::$tile256(kc, a, b, c, rs, load) },
                    // SAFETY: as above.
                    _ => unsafe { kernels::portable(kc, a, b, c, rs, load) },
                }
            }
        }
    };
}

element!(f64, f64_avx512, f64_avx2);
element!(f32, f32_avx512, f32_avx2);

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

/// The memory of the blocked routine's stack of partial sums (one element per element of
/// `C`'s column panel per level: two levels of 128 MiB for a 4096 x 4096 `f64` product),
/// kept from one product to the next: allocating it afresh cost each 4096 x 4096 product
/// about 15% of its time in the kernel's zeroing of new pages. It keeps what the largest
/// recent product needed, and lets it go when a product of several blocks needs less than a
/// quarter of it.
#[derive(Debug, Default)]
pub(crate) struct StackScratch(std::sync::Mutex<Vec<u64>>);

impl StackScratch {
    /// Runs `f` with at least `elements` elements of `T` (their values unspecified: the
    /// routine writes each before it reads it).
    pub(crate) fn with<T: Element, R>(&self, elements: usize, f: impl FnOnce(*mut T) -> R) -> R {
        let mut words = match self.0.lock() {
            Ok(words) => words,
            Err(poisoned) => poisoned.into_inner(),
        };
        let need = (elements * std::mem::size_of::<T>()).div_ceil(8);
        if need > words.len() || (need > 0 && need < words.len() / 4) {
            *words = vec![0u64; need];
        }
        // `u64`s are aligned for `f32` and `f64`.
        f(words.as_mut_ptr().cast::<T>())
    }
}

/// Why a product stopped early.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Cancelled;

/// One product for a routine to run: `C = A @ BT.T` (`a` `(m, k)`, `bt` `(n, k)`, `c`
/// `(m, n)`), the tile path, the threads, and the flag that stops it.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a, T> {
    /// `A`.
    pub a: Matrix<T>,
    /// `BT`, `B`'s transpose.
    pub bt: Matrix<T>,
    /// `C`, written.
    pub c: Matrix<T>,
    /// The register tiles to run.
    pub path: Path,
    /// The threads.
    pub pool: &'a rayon::ThreadPool,
    /// Set to stop the product (the kernel time limit).
    pub cancel: &'a AtomicU32,
    /// The memory of the blocks' partial sums.
    pub stack: &'a StackScratch,
}

/// `C = A @ BT.T`, each element its canonical blocked sum (see the module documentation): `a`
/// is `(m, k)`, `bt` `(n, k)` and `c` `(m, n)`, on the threads of `pool`, the blocks' partial
/// sums in `stack`. Checks `cancel` between blocks and
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
    stack: &StackScratch,
) -> Result<(), Cancelled> {
    let job = Job {
        a,
        bt,
        c,
        path,
        pool,
        cancel,
        stack,
    };
    // SAFETY: the caller's contract.
    unsafe { multiply_small_below(job, SMALL_PRODUCT) }
}

/// Products of at most this many multiply-adds run on the calling thread, element after
/// element, each its chain straight from the operands: packing and waking the threads cost
/// more. (NPBench's `nbody` multiplies `(50, 50)` by `(50, 1)` three times a step: 94 us
/// each through the blocks and the thread pool.)
const SMALL_PRODUCT: usize = 1 << 15;

/// [`multiply`], the products of at most `small` multiply-adds by [`small`].
///
/// # Safety
///
/// As for [`multiply`].
unsafe fn multiply_small_below<T: Element>(
    job: Job<'_, T>,
    small_limit: usize,
) -> Result<(), Cancelled> {
    let Job { a, bt, c, path, .. } = job;
    let (m, n, k) = (c.rows, c.cols, a.cols);
    debug_assert!(a.rows == m && bt.rows == n && bt.cols == k);
    if m.saturating_mul(n).saturating_mul(k) <= small_limit {
        match path {
            // SAFETY: the caller's contract; the path says the CPU has FMA.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 | Path::Avx512 => unsafe { small_fma(a, bt, c) },
            // SAFETY: the caller's contract.
            _ => unsafe { small(a, bt, c) },
        }
        return Ok(());
    }
    if n <= FEW_COLUMNS && a.rs == 1 && a.cs != 1 {
        // SAFETY: the caller's contract.
        return unsafe { by_columns::<T, false>(job) };
    }
    if m <= FEW_COLUMNS && bt.rs == 1 && bt.cs != 1 {
        // `C.T = BT @ A.T`: few rows of `C` against a `B` stored by rows (an MLP's layer on a
        // small batch) stream `B` once, as `BT`'s columns. Each product keeps its operands'
        // order (`SWAPPED`), so every element's operations are the kernel's.
        let ct = Matrix {
            ptr: c.ptr,
            rows: n,
            cols: m,
            rs: c.cs,
            cs: c.rs,
        };
        let swapped = Job {
            a: bt,
            bt: a,
            c: ct,
            ..job
        };
        // SAFETY: the caller's contract; `ct` names the elements of `c`.
        return unsafe { by_columns::<T, true>(swapped) };
    }
    // SAFETY: the caller's contract.
    unsafe { blocks::by_blocks(job) }
}

/// `C = A @ BT.T`, each element its canonical blocked sum ([`tree::element`]), one after
/// another.
///
/// # Safety
///
/// As for [`multiply`].
#[inline(always)]
unsafe fn small<T: Element>(a: Matrix<T>, bt: Matrix<T>, c: Matrix<T>) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            // SAFETY: `(i, p)` and `(j, p)` are inside `A` and `BT` for `p < k` (the
            // caller's contract).
            let sum = tree::element(
                a.cols,
                |p| unsafe { a.get(i, p) },
                |p| unsafe { bt.get(j, p) },
            );
            // SAFETY: `(i, j)` is inside `C`, written by this thread alone.
            unsafe { c.set(i, j, sum) };
        }
    }
}

/// [`small`] with the `fma` instruction for `mul_add`.
///
/// # Safety
///
/// As for [`multiply`], and the CPU has FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn small_fma<T: Element>(a: Matrix<T>, bt: Matrix<T>, c: Matrix<T>) {
    // SAFETY: the caller's contract.
    unsafe { small(a, bt, c) }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_values::uniform as values;

    /// One element's canonical sum, written out independently of the routines: blocks of
    /// 1,024 terms, each a chain of `fma`s from zero, combined by the aligned tree as its
    /// recursion (the left subtree takes the largest power of two of blocks below the
    /// count).
    fn chain<T: Element>(a: impl Fn(usize) -> T, b: impl Fn(usize) -> T, k: usize) -> T {
        let sums: Vec<T> = (0..k)
            .step_by(1024)
            .map(|lo| (lo..(lo + 1024).min(k)).fold(T::ZERO, |sum, p| a(p).fma(b(p), sum)))
            .collect();
        aligned_tree(&sums)
    }

    /// The aligned pairwise tree over `blocks` written as its recursion: the left subtree
    /// takes the largest power of two of blocks below the count (`+0` for none).
    pub(crate) fn aligned_tree<T: Element>(blocks: &[T]) -> T {
        match blocks {
            [] => T::ZERO,
            [one] => *one,
            _ => {
                let half = 1usize << (usize::BITS - 1 - (blocks.len() - 1).leading_zeros());
                aligned_tree(&blocks[..half]) + aligned_tree(&blocks[half..])
            }
        }
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
        small_limit: usize,
    ) -> Vec<T> {
        let (a_cols, bt_cols) = match layout {
            Layout::Rows => (false, false),
            Layout::Columns => (true, true),
            Layout::BtColumns => (false, true),
        };
        let (mut a_store, rs, cs) = stored(a, (m, k), a_cols);
        let (mut bt_store, bt_rs, bt_cs) = stored(bt, (n, k), bt_cols);
        let pad = 3;
        let mut c_store = vec![T::ZERO; m * (n + pad)];
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
        // SAFETY: the three matrices describe the vectors above, which outlive the call; `C`
        // is its own vector; the path was detected (or is the portable one).
        unsafe { run_on(threads, am, bm, cm, path, small_limit) };
        (0..m)
            .flat_map(|i| c_store[i * (n + pad)..i * (n + pad) + n].to_vec())
            .collect()
    }

    /// [`multiply_small_below`] on a pool of `threads` threads, never cancelled.
    ///
    /// # Safety
    ///
    /// As for [`multiply`].
    unsafe fn run_on<T: Element>(
        threads: usize,
        a: Matrix<T>,
        bt: Matrix<T>,
        c: Matrix<T>,
        path: Path,
        small_limit: usize,
    ) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool");
        let cancel = AtomicU32::new(0);
        let stack = StackScratch::default();
        let job = Job {
            a,
            bt,
            c,
            path,
            pool: &pool,
            cancel: &cancel,
            stack: &stack,
        };
        // SAFETY: the caller's contract.
        unsafe { multiply_small_below(job, small_limit) }.expect("not cancelled");
    }

    /// The `(rows, cols)` matrix `x` (given by rows) stored by rows or by columns, with its
    /// row and column strides.
    fn stored<T: Copy>(
        x: &[T],
        (rows, cols): (usize, usize),
        by_columns: bool,
    ) -> (Vec<T>, isize, isize) {
        if by_columns {
            let data = (0..rows * cols)
                .map(|i| x[(i % rows) * cols + i / rows])
                .collect();
            (data, 1, rows as isize)
        } else {
            (x.to_vec(), cols as isize, 1)
        }
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

    /// Shapes around every blocking edge: no rows, no columns, no terms, fewer terms than a
    /// tile's pass, more than one pass over `k`, rows and columns past the tiles and the
    /// blocks.
    /// Single columns (`A @ x`), which take `by_columns` where `A` is stored by columns.
    /// A few rows against many columns (`A @ B` with `B` by rows streams `B` in tasks of 64 rows
    /// or more).
    /// Products of several blocks of terms (1,024 each), one cut short, merge in the tree;
    /// six blocks narrow the column panels (three levels of stack).
    const SHAPES: [(usize, usize, usize); 18] = [
        (10, 50, 5 * 1024 + 3),
        (9, 30, 2048),
        (19, 5, 4100),
        (3, 2, 3073),
        (5, 600, 37),
        (3, 4, 0),
        (0, 20, 7),
        (20, 0, 7),
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

    /// `A @ A.T` with both operands the same matrix (by rows, or by columns as a transposed
    /// view is): the routine computes the lower triangle's tiles and copies the rest, with the
    /// chain's bits everywhere.
    #[test]
    fn a_gram_product_has_the_chains_bits() {
        for (s, &(m, k)) in [
            (1usize, 3usize),
            (9, 21),
            (67, 300),
            (130, 515),
            (517, 83),
            (40, 3000),
        ]
        .iter()
        .enumerate()
        {
            let a = values(m * k, 40 + s as u64);
            let want: Vec<u64> = (0..m * m)
                .map(|x| {
                    let (i, j) = (x / m, x % m);
                    chain(|p| a[i * k + p], |p| a[j * k + p], k).to_bits()
                })
                .collect();
            for by_columns in [false, true] {
                let (mut store, rs, cs) = stored(&a, (m, k), by_columns);
                let am = Matrix {
                    ptr: store.as_mut_ptr(),
                    rows: m,
                    cols: k,
                    rs,
                    cs,
                };
                for path in paths() {
                    for threads in [1, 3] {
                        let mut c_store = vec![f64::NAN; m * m];
                        let cm = Matrix {
                            ptr: c_store.as_mut_ptr(),
                            rows: m,
                            cols: m,
                            rs: m as isize,
                            cs: 1,
                        };
                        // SAFETY: `am` describes `store` and `cm` `c_store`, which outlive
                        // the call and do not overlap; the path was detected.
                        unsafe { run_on(threads, am, am, cm, path, 0) };
                        let got: Vec<u64> = c_store.iter().map(|v| v.to_bits()).collect();
                        assert!(
                            got == want,
                            "{m}x{k} @ its transpose, {path:?}, {threads} threads, by columns \
                             {by_columns}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_routine_has_the_chains_bits_in_f64() {
        for (s, &(m, n, k)) in SHAPES.iter().enumerate() {
            let a = values(m * k, 2 * s as u64 + 1);
            let bt = values(n * k, 2 * s as u64 + 2);
            let want: Vec<u64> = (0..m * n)
                .map(|x| {
                    let (i, j) = (x / n, x % n);
                    chain(|p| a[i * k + p], |p| bt[j * k + p], k).to_bits()
                })
                .collect();
            // The routines (nothing is small), then the element-by-element loop (everything
            // is).
            for small in [0, usize::MAX] {
                for path in paths() {
                    for threads in [1, 3] {
                        for layout in [Layout::Rows, Layout::Columns, Layout::BtColumns] {
                            let got: Vec<u64> =
                                routine(&a, &bt, (m, n, k), layout, path, threads, small)
                                    .iter()
                                    .map(|v| v.to_bits())
                                    .collect();
                            assert!(
                                got == want,
                                "{m}x{k} @ {k}x{n}, {path:?}, {threads} threads, {layout:?}, \
                                 small below {small}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_routine_has_the_chains_bits_in_f32() {
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
                    chain(|p| a[i * k + p], |p| bt[j * k + p], k).to_bits()
                })
                .collect();
            for small in [0, usize::MAX] {
                for path in paths() {
                    for layout in [Layout::Columns, Layout::BtColumns] {
                        let got: Vec<u32> = routine(&a, &bt, (m, n, k), layout, path, 2, small)
                            .iter()
                            .map(|v| v.to_bits())
                            .collect();
                        assert!(
                            got == want,
                            "{m}x{k} @ {k}x{n}, {path:?}, {layout:?}, small below {small}"
                        );
                    }
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
                &StackScratch::default(),
            )
        };
        assert_eq!(result, Err(Cancelled));
        assert!(c.iter().all(|&v| v == 0.0), "no block ran");
    }
}
