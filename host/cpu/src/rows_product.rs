//! The canonical product by rows (`weft_ir::product::matmul_rows`: `C += X.T @ B`, launched
//! over the rows `X` and `B` share) for a whole block of an element tree, register-tiled.
//!
//! The compiled kernel runs a block's points one after the other, and each point adds its
//! outer product `X[i, r] * B[i, j]` into every element of the block's leaf row (an element
//! tree's block folds its points in order into one row; see [`crate::leaves`]): every
//! element is loaded, added to and stored again for every point. This routine runs the same
//! block with the loops turned inside out: a tile of `R x J` elements stays in registers
//! while the points of a run of [`RUN`] points go by, then the next tile; the runs go in
//! point order. Each element still gets `leaf = leaf + X[i, r] * B[i, j]` (the product
//! rounded, then the sum) for its points in point order, so the bits are the compiled
//! kernel's. The launcher calls it only for whole blocks whose views hold every element the
//! kernel would touch; anything else runs the compiled code, which checks and faults.

use weft_ir::DType;

use crate::compile::StoreView;
use crate::product::Element;

/// Rows of `C` in a register tile.
const R: usize = 4;
/// Columns of `C` in a register tile (two 256-bit vectors of `f64`).
const J: usize = 8;
/// Points per run: a run's rows of `X` and `B` stay in the cache while every tile reads them.
const RUN: usize = 128;

/// A kernel recognized as the canonical product by rows, as the launcher runs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowsProduct {
    /// The element type.
    pub dtype: DType,
    /// Whether the tiles may use AVX2 (the CPU has it and SIMD is on).
    pub avx2: bool,
}

/// The kernel's parameter `X` (its first, `rows`, is never read, and its last, `C`, is the
/// element tree's target).
pub(crate) const X_PARAM: u32 = 1;
/// The kernel's parameter `B`.
pub(crate) const B_PARAM: u32 = 2;

/// One block call: `X` and `B` (element `(0, 0)` and strides in elements), the extents the
/// kernel loops over (`m = X`'s columns, `n = B`'s columns) and the leaf row (`C`'s elements
/// row-major, `ld` per row of `C`).
#[derive(Clone)]
struct Block<T> {
    x: *const T,
    xs: (isize, isize),
    b: *const T,
    bs: (isize, isize),
    m: usize,
    n: usize,
    leaf: *mut T,
    ld: usize,
}

impl RowsProduct {
    /// The matrices of one task, if `X` and `B` have rank 2 and the kernel's loops (`m` by `n`)
    /// stay inside `C`'s extents `target`; `None` leaves the task to the compiled code.
    pub(crate) fn views(&self, x: &StoreView, b: &StoreView, target: &[i64]) -> Option<RowsViews> {
        if x.extents.len() != 2 || b.extents.len() != 2 || target.len() != 2 {
            return None;
        }
        let (m, n) = (
            usize::try_from(x.extents[1]).ok()?,
            usize::try_from(b.extents[1]).ok()?,
        );
        let (mt, nt) = (
            usize::try_from(target[0]).ok()?,
            usize::try_from(target[1]).ok()?,
        );
        if m > mt || n > nt {
            return None;
        }
        let stride = |v: &StoreView, d: usize| isize::try_from(v.strides[d]).ok();
        Some(RowsViews {
            product: *self,
            block: Block {
                x: x.ptr,
                xs: (stride(x, 0)?, stride(x, 1)?),
                b: b.ptr,
                bs: (stride(b, 0)?, stride(b, 1)?),
                m,
                n,
                leaf: std::ptr::null_mut(),
                ld: nt,
            },
            points: usize::try_from(x.extents[0].min(b.extents[0])).ok()?,
            width: mt.checked_mul(nt)?,
        })
    }
}

/// One task's matrices for [`RowsViews::run_block`].
pub(crate) struct RowsViews {
    product: RowsProduct,
    /// Its leaf pointer unset.
    block: Block<u8>,
    /// The rows of `X` and `B` (the fewer).
    points: usize,
    /// The leaves of a row: `C`'s elements.
    width: usize,
}

// SAFETY: a `RowsViews` only describes the task's memory, which `run_block`'s caller
// guarantees for the call; its threads read `X` and `B` and write their own leaf rows.
unsafe impl Send for RowsViews {}
// SAFETY: as for `Send`.
unsafe impl Sync for RowsViews {}

impl RowsViews {
    /// Runs points `lo..hi` (one whole block) into the leaf row `leaf` of `width` elements;
    /// returns `false`, touching nothing, unless every element the kernel would read or write
    /// lies inside the views and the leaf row.
    ///
    /// # Safety
    ///
    /// The views `views` came from are valid for reads of every element inside their extents
    /// for the call; `leaf` is valid for reads and writes of `width` elements of the kernel's
    /// type, and nothing else touches it meanwhile.
    pub(crate) unsafe fn run_block(
        &self,
        leaf: *mut u8,
        width: usize,
        (lo, hi): (i64, i64),
    ) -> bool {
        let Some((lo, hi)) = usize::try_from(lo).ok().zip(usize::try_from(hi).ok()) else {
            return false;
        };
        if lo > hi || hi > self.points || width < self.width {
            return false;
        }
        let block = Block {
            leaf,
            ..self.block.clone()
        };
        let avx2 = self.product.avx2;
        // SAFETY: the checks here and in `views` put every element the block reads and writes
        // inside the views and the leaf row (the caller's contract covers them).
        unsafe {
            match self.product.dtype {
                DType::F32 => run::<f32>(&block.cast(), (lo, hi), avx2),
                DType::F64 => run::<f64>(&block.cast(), (lo, hi), avx2),
                _ => return false,
            }
        }
        true
    }
}

impl Block<u8> {
    /// The same block, its pointers to elements of `T`.
    fn cast<T>(&self) -> Block<T> {
        Block {
            x: self.x.cast(),
            xs: self.xs,
            b: self.b.cast(),
            bs: self.bs,
            m: self.m,
            n: self.n,
            leaf: self.leaf.cast(),
            ld: self.ld,
        }
    }
}

/// Runs points `lo..hi` of `blk`, run by run, tile by tile.
///
/// # Safety
///
/// Every element `X[i, r]`, `B[i, j]` (`i` in `lo..hi`, `r < m`, `j < n`) and `leaf[r * ld +
/// j]` lies in valid memory, the leaf's for this thread alone; `avx2` only on a CPU with AVX2.
unsafe fn run<T: Element>(blk: &Block<T>, (lo, hi): (usize, usize), avx2: bool) {
    let unit = blk.xs.1 == 1 && blk.bs.1 == 1;
    let mut p0 = lo;
    while p0 < hi {
        let points = RUN.min(hi - p0);
        for r0 in (0..blk.m).step_by(R) {
            for j0 in (0..blk.n).step_by(J) {
                // SAFETY: `(p0, r0)`, `(p0, j0)` and `r0 * ld + j0` are elements of the block
                // (the caller's contract); the tile reads and writes only its own.
                unsafe {
                    let x = blk
                        .x
                        .offset(p0 as isize * blk.xs.0 + r0 as isize * blk.xs.1);
                    let b = blk
                        .b
                        .offset(p0 as isize * blk.bs.0 + j0 as isize * blk.bs.1);
                    let leaf = blk.leaf.add(r0 * blk.ld + j0);
                    if unit && r0 + R <= blk.m && j0 + J <= blk.n {
                        let args = (x, blk.xs.0, b, blk.bs.0, points, leaf, blk.ld);
                        #[cfg(target_arch = "x86_64")]
                        if avx2 {
                            tile_avx2(args);
                            continue;
                        }
                        tile(args);
                    } else {
                        let rows = R.min(blk.m - r0);
                        let cols = J.min(blk.n - j0);
                        edge(blk, (x, b, leaf), (rows, cols), points);
                    }
                }
            }
        }
        p0 += points;
    }
}

/// A tile's arguments: `X[p0, r0]` and `X`'s row stride, `B[p0, j0]` and its row stride, the
/// points, the tile's first leaf element and the leaf's row length.
type TileArgs<T> = (*const T, isize, *const T, isize, usize, *mut T, usize);

/// One full `R x J` tile over the run's points, rows and columns unit-strided.
///
/// # Safety
///
/// As [`run`], for the tile's elements.
#[inline(always)]
unsafe fn tile<T: Element>((x, xrs, b, brs, points, leaf, ld): TileArgs<T>) {
    let mut acc = [[T::ZERO; J]; R];
    for (r, row) in acc.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            // SAFETY: the caller's contract.
            *v = unsafe { *leaf.add(r * ld + j) };
        }
    }
    for p in 0..points {
        // SAFETY: the caller's contract: row `p` of the run holds the tile's `R` elements of
        // `X` and `J` of `B`.
        let (xp, bp) = unsafe { (x.offset(p as isize * xrs), b.offset(p as isize * brs)) };
        let mut bv = [T::ZERO; J];
        for (j, v) in bv.iter_mut().enumerate() {
            // SAFETY: as above.
            *v = unsafe { *bp.add(j) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: as above.
            let xr = unsafe { *xp.add(r) };
            for (v, &bj) in row.iter_mut().zip(&bv) {
                *v = *v + xr * bj;
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { *leaf.add(r * ld + j) = v };
        }
    }
}

/// [`tile`] compiled for AVX2 (the same operations, 256-bit vectors; no contraction).
///
/// # Safety
///
/// As [`tile`], on a CPU with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile_avx2<T: Element>(args: TileArgs<T>) {
    // SAFETY: the caller's contract.
    unsafe { tile(args) }
}

/// A partial tile (`rows x cols`) or one with strided rows or columns, element by element.
///
/// # Safety
///
/// As [`run`], for the tile's elements.
unsafe fn edge<T: Element>(
    blk: &Block<T>,
    (x, b, leaf): (*const T, *const T, *mut T),
    (rows, cols): (usize, usize),
    points: usize,
) {
    for r in 0..rows {
        for j in 0..cols {
            // SAFETY: the caller's contract.
            unsafe {
                let at = leaf.add(r * blk.ld + j);
                let mut acc = *at;
                for p in 0..points {
                    let xr = *x.offset(p as isize * blk.xs.0 + r as isize * blk.xs.1);
                    let bj = *b.offset(p as isize * blk.bs.0 + j as isize * blk.bs.1);
                    acc = acc + xr * bj;
                }
                *at = acc;
            }
        }
    }
}
