//! The register tiles of the blocked product: `MR x NR` elements of `C` held in registers
//! while a pass of `kc` terms streams through them, one term at a time, each adding
//! `A[i, p] * BT[j, p]` to its element by one fused multiply-add.
//!
//! A tile reads `A`'s rows packed term by term (`a[p * MR + r]`, each broadcast to a vector)
//! and `BT`'s rows packed the same way (`b[p * NR + c]`, loaded as vectors across the
//! tile's columns), as BLAS's kernels do for `C` stored by rows. Each element's chain of
//! `fma`s runs in the order of its terms, and a pass that does not start the chain loads the
//! element's partial value from `C` and continues it: however the terms are cut into passes,
//! the bits are those of one chain from zero.

use super::{Element, Path};

/// Rows, columns and terms per pass of the register tile that one path runs for one element
/// type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Rows of the tile.
    pub mr: usize,
    /// Columns of the tile (whole vectors).
    pub nr: usize,
    /// Terms per pass: the packed `BT` rows of one tile (`kc * nr` elements) stay near L1.
    pub kc: usize,
}

/// Bytes of packed `BT` rows that one tile's pass reads again for every row tile, on the
/// AVX-512 path: measured on a Xeon with 48 KiB of L1 (1024^3 products at 2 threads,
/// `bench_products`), 48 KiB (256 terms) ran `f64` at 0.80-1.05 of NumPy's rate and `f32` at
/// 0.83-0.85, 24 KiB (128 terms) at 0.76-0.93 and 0.70-0.75.
const PANEL_BYTES_AVX512: usize = 48 << 10;

/// [`PANEL_BYTES_AVX512`] on the other paths (the CPUs without AVX-512 we run on have 32 KiB of
/// L1): 384 terms on AVX2.
const PANEL_BYTES: usize = 24 << 10;

impl Geometry {
    /// The tile of `path` for elements of `bytes` bytes.
    pub(crate) fn of(path: Path, bytes: usize) -> Geometry {
        // Vectors across the columns: with 32 registers (AVX-512), 8 rows of three vectors,
        // the three of `BT` and the broadcast `A` element; with 16 (AVX2), 6 rows of two
        // (4 rows of three left the compiler one register short: it spilled a sum in the
        // loop, and ran at 27 GFLOP/s where NumPy ran at 92).
        let (mr, nr) = match path {
            Path::Avx512 => (8, 3 * 64 / bytes),
            Path::Avx2 => (6, 2 * 32 / bytes),
            Path::Portable => (4, 8),
        };
        let panel = match path {
            Path::Avx512 => PANEL_BYTES_AVX512,
            _ => PANEL_BYTES,
        };
        let kc = (panel / (nr * bytes)).max(8) / 8 * 8;
        Geometry { mr, nr, kc }
    }
}

/// The portable tile: plain Rust (`mul_add`, a library call without FMA hardware).
///
/// # Safety
///
/// As [`Element::tile`] on [`Path::Portable`] (4 x 8).
pub(crate) unsafe fn portable<T: Element>(
    kc: usize,
    a: *const T,
    b: *const T,
    c: *mut T,
    rs: usize,
    load: bool,
) {
    const MR: usize = 4;
    const NR: usize = 8;
    let mut acc = [[T::ZERO; NR]; MR];
    if load {
        for (r, row) in acc.iter_mut().enumerate() {
            for (x, v) in row.iter_mut().enumerate() {
                // SAFETY: the tile of `C` is valid for reads.
                *v = unsafe { *c.add(r * rs + x) };
            }
        }
    }
    for p in 0..kc {
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: `a` holds `kc * MR` elements.
            let ar = unsafe { *a.add(p * MR + r) };
            for (x, v) in row.iter_mut().enumerate() {
                // SAFETY: `b` holds `kc * NR` elements.
                *v = ar.fma(unsafe { *b.add(p * NR + x) }, *v);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            // SAFETY: the tile of `C` is valid for writes.
            unsafe { *c.add(r * rs + x) = *v };
        }
    }
}

/// Defines one vector tile: `$mr` rows of `$nv` vectors of `$w` elements, each `A` element
/// broadcast once per term and row.
macro_rules! vector_tile {
    ($(#[$doc:meta])* $name:ident, $t:ty, $vec:ty, $w:literal, $mr:literal, $nv:literal,
     $features:literal, $zero:ident, $load:ident, $store:ident, $splat:ident, $fma:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As [`Element::tile`] on this tile's path.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name(
            kc: usize,
            a: *const $t,
            b: *const $t,
            c: *mut $t,
            rs: usize,
            load: bool,
        ) {
            use std::arch::x86_64::*;
            let mut acc: [[$vec; $nv]; $mr] = [[$zero(); $nv]; $mr];
            if load {
                for (r, row) in acc.iter_mut().enumerate() {
                    for (v, x) in row.iter_mut().enumerate() {
                        // SAFETY: the tile of `C` is valid for reads.
                        *x = unsafe { $load(c.add(r * rs + v * $w)) };
                    }
                }
            }
            for p in 0..kc {
                let mut bv: [$vec; $nv] = [$zero(); $nv];
                for (v, x) in bv.iter_mut().enumerate() {
                    // SAFETY: `b` holds `kc * nr` elements.
                    *x = unsafe { $load(b.add(p * $nv * $w + v * $w)) };
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    // SAFETY: `a` holds `kc * mr` elements.
                    let ar = $splat(unsafe { *a.add(p * $mr + r) });
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = $fma(ar, bv[v], *x);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                for (v, x) in row.iter().enumerate() {
                    // SAFETY: the tile of `C` is valid for writes.
                    unsafe { $store(c.add(r * rs + v * $w), *x) };
                }
            }
        }
    };
}

vector_tile!(
    /// The AVX-512 tile for `f64`: 8 rows of three `zmm` (24 columns).
    f64_avx512, f64, __m512d, 8, 8, 3, "avx512f,fma", _mm512_setzero_pd, _mm512_loadu_pd,
    _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd
);

vector_tile!(
    /// The AVX-512 tile for `f32`: 8 rows of three `zmm` (48 columns).
    f32_avx512, f32, __m512, 16, 8, 3, "avx512f,fma", _mm512_setzero_ps, _mm512_loadu_ps,
    _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps
);

vector_tile!(
    /// The AVX2 tile for `f64`: 6 rows of two `ymm` (8 columns).
    f64_avx2, f64, __m256d, 4, 6, 2, "avx2,fma", _mm256_setzero_pd, _mm256_loadu_pd,
    _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd
);

vector_tile!(
    /// The AVX2 tile for `f32`: 6 rows of two `ymm` (16 columns).
    f32_avx2, f32, __m256, 8, 6, 2, "avx2,fma", _mm256_setzero_ps, _mm256_loadu_ps,
    _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps
);
