//! LU factorization with partial pivoting by panels of columns, as LAPACK's `getrf` blocks
//! it and as hybrid CPU-GPU codes (MAGMA's) split it: each panel of [`PANEL`] columns is
//! read to the host once and factored there (the pivot of each column the first row of the
//! largest magnitude on or below the diagonal, as `getf2` picks it), written back with its
//! rows swapped in; the rest of those rows are permuted by one gather, the panel's rows right
//! of it become `U12 = L11^-1 A12` and everything below it `A22 - L21 U12`, by products that
//! run at the product routine's speed. The right-hand sides follow the same steps, and back
//! substitution takes a block of rows at a time (`x1 = U11^-1 (b1 - U12 x2)`, two products).
//! The inverses of each panel's triangles are computed on the host, where the panel is.
//!
//! A panel is one host read and about ten tasks, whatever its width: a matrix of order 400
//! is 7 panels, where a column at a time was 400 reads and several thousand tasks. The
//! results are not LAPACK's bits (its `trsm` substitutes where this multiplies by the
//! triangles' inverses, and its products sum in another order); the tests compare them with
//! a plain-Rust elimination written out and with the definitions within rounding.

use weft_ir::DType;

use super::{Array, Ix, Numeric, Range, Result};

/// The columns a panel factors on the host before the rest is updated by products.
const PANEL: i64 = 64;

/// `m[lo:hi]` along one dimension.
fn span(lo: i64, hi: i64) -> Ix {
    Ix::Slice(Range::new(lo, hi))
}

/// An elimination of a square matrix with partial pivoting, applied to right-hand sides too.
pub(super) struct Elimination {
    /// `U` on and above the diagonal, `L`'s multipliers below it.
    pub lu: Array,
    /// The right-hand sides, transformed (`L^-1 P b`).
    pub rhs: Option<Array>,
    /// Whether an even number of rows was swapped.
    pub even: bool,
    /// Whether a pivot was exactly zero (the elimination stops there).
    pub singular: bool,
    /// Per panel: its first row, its width, and the inverse of its diagonal block of `U`
    /// (row-major).
    upper_inverses: Vec<(i64, usize, Vec<f64>)>,
}

/// A panel factored on the host.
struct PanelLu {
    /// The panel's rows, swapped, holding `L`'s multipliers below the diagonal and `U` on
    /// and above it (row-major, `w` columns).
    values: Vec<f64>,
    /// The panel row that ends at each position.
    perm: Vec<usize>,
    /// The number of swaps.
    swaps: usize,
    /// Whether a column had no non-zero pivot.
    singular: bool,
}

/// Factors a panel of `rows` rows and `w` columns (`rows >= w`) with partial pivoting.
fn factor_panel(mut p: Vec<f64>, rows: usize, w: usize) -> PanelLu {
    let mut perm: Vec<usize> = (0..rows).collect();
    let (mut swaps, mut singular) = (0, false);
    for c in 0..w {
        let (mut piv, mut best) = (c, -1.0f64);
        for i in c..rows {
            let v = p[i * w + c];
            if v.abs() > best || v.is_nan() && !best.is_nan() {
                (piv, best) = (i, v.abs());
            }
        }
        if best == 0.0 {
            singular = true;
            break;
        }
        if piv != c {
            for j in 0..w {
                p.swap(c * w + j, piv * w + j);
            }
            perm.swap(c, piv);
            swaps += 1;
        }
        let d = p[c * w + c];
        for i in c + 1..rows {
            let m = p[i * w + c] / d;
            p[i * w + c] = m;
            for j in c + 1..w {
                p[i * w + j] -= m * p[c * w + j];
            }
        }
    }
    PanelLu {
        values: p,
        perm,
        swaps,
        singular,
    }
}

/// The inverse of the unit lower triangle of the first `w` rows of `p` (`w` columns).
fn unit_lower_inverse(p: &[f64], w: usize) -> Vec<f64> {
    let mut inv = vec![0.0; w * w];
    for col in 0..w {
        inv[col * w + col] = 1.0;
        for i in col + 1..w {
            let mut s = 0.0;
            for k in col..i {
                s -= p[i * w + k] * inv[k * w + col];
            }
            inv[i * w + col] = s;
        }
    }
    inv
}

/// The inverse of the upper triangle (diagonal included) of the first `w` rows of `p`.
fn upper_inverse(p: &[f64], w: usize) -> Vec<f64> {
    let mut inv = vec![0.0; w * w];
    for col in (0..w).rev() {
        inv[col * w + col] = 1.0 / p[col * w + col];
        for i in (0..col).rev() {
            let mut s = 0.0;
            for k in i + 1..=col {
                s -= p[i * w + k] * inv[k * w + col];
            }
            inv[i * w + col] = s / p[i * w + i];
        }
    }
    inv
}

impl Numeric {
    /// `a` (`n` x `n`, already checked square) factored as `P a = L U`, in `dtype`, the same
    /// row operations applied to `rhs` (`n` rows) if given. Stops at the first panel with a
    /// zero pivot (`singular`).
    pub(super) fn eliminate(
        &self,
        a: &Array,
        rhs: Option<&Array>,
        n: i64,
        dtype: DType,
    ) -> Result<Elimination> {
        let lu = a.astype(dtype).copy();
        let rhs = rhs.map(|b| b.astype(dtype).copy());
        let all = || Ix::Slice(Range::all());
        let upload = |shape: &[u64], values: &[f64]| self.from_slice(shape, values).astype(dtype);
        let (mut even, mut singular) = (true, false);
        let mut upper_inverses = Vec::new();
        for j0 in (0..n).step_by(PANEL as usize) {
            let j1 = (j0 + PANEL).min(n);
            let (rows, w) = ((n - j0) as usize, (j1 - j0) as usize);
            let panel = lu.index(&[span(j0, n), span(j0, j1)]);
            let f = factor_panel(panel.to_vec()?, rows, w);
            panel.assign(&upload(&[rows as u64, w as u64], &f.values))?;
            even ^= f.swaps % 2 == 1;
            if f.singular {
                singular = true;
                break;
            }
            if f.swaps > 0 {
                let order: Vec<i64> = f.perm.iter().map(|&i| i as i64).collect();
                let perm = self.from_slice(&[rows as u64], &order);
                if j1 < n {
                    let right = lu.index(&[span(j0, n), span(j1, n)]);
                    right.assign(&right.take(&perm, Some(0)))?;
                }
                if let Some(b) = &rhs {
                    let below = b.index(&[span(j0, n), all()]);
                    below.assign(&below.take(&perm, Some(0)))?;
                }
            }
            let l_inv = upload(&[w as u64, w as u64], &unit_lower_inverse(&f.values, w));
            if let Some(b) = &rhs {
                let b1 = b.index(&[span(j0, j1), all()]);
                b1.assign(&l_inv.matmul(&b1))?;
            }
            if j1 < n {
                let u12 = lu.index(&[span(j0, j1), span(j1, n)]);
                u12.assign(&l_inv.matmul(&u12))?;
                let l21 = lu.index(&[span(j1, n), span(j0, j1)]);
                let mut trailing = lu.index(&[span(j1, n), span(j1, n)]);
                trailing -= &l21.matmul(&u12);
                trailing.check()?;
                if let Some(b) = &rhs {
                    let mut below = b.index(&[span(j1, n), all()]);
                    below -= &l21.matmul(&b.index(&[span(j0, j1), all()]));
                    below.check()?;
                }
            }
            upper_inverses.push((j0, w, upper_inverse(&f.values, w)));
        }
        Ok(Elimination {
            lu,
            rhs,
            even,
            singular,
            upper_inverses,
        })
    }
}

impl Elimination {
    /// The solution of `U x = rhs` (the transformed right-hand sides), a block of rows at a
    /// time from the last: `x1 = U11^-1 (b1 - U12 x2)`. Needs a complete, non-singular
    /// elimination with right-hand sides.
    pub(super) fn back_substitute(&self) -> Result<Array> {
        let x = self.rhs.as_ref().ok_or_else(|| {
            crate::Error::Usage("internal: back substitution without right-hand sides".into())
        })?;
        let np = x.numeric();
        let n = self.lu.shape()?.first().copied().unwrap_or(0) as i64;
        let dtype = self.lu.dtype()?;
        let all = || Ix::Slice(Range::all());
        for (j0, w, inverse) in self.upper_inverses.iter().rev() {
            let j1 = j0 + *w as i64;
            let block = x.index(&[span(*j0, j1), all()]);
            let mut rest = block.copy();
            if j1 < n {
                rest -= &self
                    .lu
                    .index(&[span(*j0, j1), span(j1, n)])
                    .matmul(&x.index(&[span(j1, n), all()]));
            }
            let u_inv = np
                .from_slice(&[*w as u64, *w as u64], inverse)
                .astype(dtype);
            block.assign(&u_inv.matmul(&rest))?;
        }
        Ok(x.clone())
    }
}
