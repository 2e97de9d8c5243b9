//! LU factorization with partial pivoting by panels of columns, as LAPACK's `getrf` blocks
//! it and as hybrid CPU-GPU codes (MAGMA's) split it: each panel of [`PANEL`] columns is
//! read to the host once and factored there (the pivot of each column the first row of the
//! largest magnitude on or below the diagonal, as `getf2` picks it), written back with its
//! rows swapped in; the rest of those rows are permuted by one gather, the panel's rows right
//! of it become `U12 = L11^-1 A12` and everything below it `A22 - L21 U12`, by products that
//! run at the product routine's speed. The right-hand sides follow the same steps, and back
//! substitution takes a block of rows at a time (`x1 = U11^-1 (b1 - U12 x2)`, two products).
//! The inverses of each panel's triangles are computed on the host, where the panel is.
//! The same code factors real matrices ([`Array`], `f64` on the host) and complex ones
//! ([`ComplexArray`], whose products are four real ones; pivots by `|re| + |im|`, as
//! LAPACK's `izamax` picks them).
//!
//! A panel is one host read and about ten tasks, whatever its width: a matrix of order 400
//! is 7 panels, where a column at a time was 400 reads and several thousand tasks. The
//! results are not LAPACK's bits (its `trsm` substitutes where this multiplies by the
//! triangles' inverses, and its products sum in another order); the tests compare them with
//! a plain-Rust elimination written out and with the definitions within rounding.

use std::ops::{Div, Mul, Sub};

use weft_ir::DType;

use super::{Array, Complex, ComplexArray, Ix, Numeric, Range, Result};

/// The columns a panel factors on the host before the rest is updated by products.
const PANEL: i64 = 64;

/// `m[lo:hi]` along one dimension.
fn span(lo: i64, hi: i64) -> Ix {
    Ix::Slice(Range::new(lo, hi))
}

/// An element of a matrix being factored, on the host.
pub(super) trait Entry:
    Copy + Mul<Output = Self> + Div<Output = Self> + Sub<Output = Self>
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// The magnitude a pivot is chosen by.
    fn magnitude(self) -> f64;
}

impl Entry for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn magnitude(self) -> f64 {
        self.abs()
    }
}

impl Entry for Complex {
    const ZERO: Complex = Complex { re: 0.0, im: 0.0 };
    const ONE: Complex = Complex { re: 1.0, im: 0.0 };
    fn magnitude(self) -> f64 {
        self.re.abs() + self.im.abs()
    }
}

/// A matrix (or a view of one) on the back end, real or complex: what the factorization
/// does to it.
pub(super) trait Matrix: Clone + Sized {
    /// Its elements on the host.
    type Entry: Entry;
    /// The view `self[rows, cols]`.
    fn view(&self, rows: Ix, cols: Ix) -> Self;
    /// The elements, row-major (runs the pending tasks).
    fn read(&self) -> Result<Vec<Self::Entry>>;
    /// A new matrix of `shape` holding `values`, its parts in `dtype`.
    fn upload(np: &Numeric, shape: &[u64], values: &[Self::Entry], dtype: DType) -> Self;
    /// `self[...] = src`.
    fn set(&self, src: &Self) -> Result<()>;
    /// The rows at `perm`, a new matrix.
    fn rows_at(&self, perm: &Array) -> Self;
    /// `self @ other`.
    fn times(&self, other: &Self) -> Self;
    /// `self - other`.
    fn minus(&self, other: &Self) -> Self;
    /// A copy.
    fn duplicate(&self) -> Self;
}

impl Matrix for Array {
    type Entry = f64;
    fn view(&self, rows: Ix, cols: Ix) -> Self {
        self.index(&[rows, cols])
    }
    fn read(&self) -> Result<Vec<f64>> {
        self.to_vec()
    }
    fn upload(np: &Numeric, shape: &[u64], values: &[f64], dtype: DType) -> Self {
        np.from_slice(shape, values).astype(dtype)
    }
    fn set(&self, src: &Self) -> Result<()> {
        self.assign(src)
    }
    fn rows_at(&self, perm: &Array) -> Self {
        self.take(perm, Some(0))
    }
    fn times(&self, other: &Self) -> Self {
        self.matmul(other)
    }
    fn minus(&self, other: &Self) -> Self {
        self - other
    }
    fn duplicate(&self) -> Self {
        self.copy()
    }
}

impl Matrix for ComplexArray {
    type Entry = Complex;
    fn view(&self, rows: Ix, cols: Ix) -> Self {
        self.index(&[rows, cols])
    }
    fn read(&self) -> Result<Vec<Complex>> {
        self.to_vec()
    }
    fn upload(np: &Numeric, shape: &[u64], values: &[Complex], dtype: DType) -> Self {
        let re: Vec<f64> = values.iter().map(|c| c.re).collect();
        let im: Vec<f64> = values.iter().map(|c| c.im).collect();
        np.complex(&np.from_slice(shape, &re), &np.from_slice(shape, &im))
            .astype(dtype)
    }
    fn set(&self, src: &Self) -> Result<()> {
        self.assign(src)
    }
    fn rows_at(&self, perm: &Array) -> Self {
        self.each(|p| p.take(perm, Some(0)))
    }
    fn times(&self, other: &Self) -> Self {
        self.matmul(other)
    }
    fn minus(&self, other: &Self) -> Self {
        self - other
    }
    fn duplicate(&self) -> Self {
        self.copy()
    }
}

/// An elimination of a square matrix with partial pivoting, applied to right-hand sides too.
pub(super) struct Elimination<M: Matrix> {
    /// `U` on and above the diagonal; below it, each panel's multipliers in its own rows'
    /// order (a later panel's swaps are not applied to them, as LAPACK's `dlaswp` would:
    /// nothing reads them after their panel's updates).
    pub lu: M,
    /// The right-hand sides, transformed (`L^-1 P b`).
    pub rhs: Option<M>,
    /// Whether an even number of rows was swapped.
    pub even: bool,
    /// Whether a pivot was exactly zero (the elimination stops there).
    pub singular: bool,
    /// Per panel: its first row, its width, and the inverse of its diagonal block of `U`
    /// (row-major).
    upper_inverses: Vec<(i64, usize, Vec<M::Entry>)>,
    /// The parts' dtype.
    dtype: DType,
}

/// A panel factored on the host.
struct PanelLu<E> {
    /// The panel's rows, swapped, holding `L`'s multipliers below the diagonal and `U` on
    /// and above it (row-major, `w` columns).
    values: Vec<E>,
    /// The panel row that ends at each position.
    perm: Vec<usize>,
    /// The number of swaps.
    swaps: usize,
    /// Whether a column had no non-zero pivot.
    singular: bool,
}

/// Factors a panel of `rows` rows and `w` columns (`rows >= w`) with partial pivoting.
fn factor_panel<E: Entry>(mut p: Vec<E>, rows: usize, w: usize) -> PanelLu<E> {
    let mut perm: Vec<usize> = (0..rows).collect();
    let (mut swaps, mut singular) = (0, false);
    for c in 0..w {
        let (mut piv, mut best) = (c, -1.0f64);
        for i in c..rows {
            let v = p[i * w + c].magnitude();
            if v > best || v.is_nan() && !best.is_nan() {
                (piv, best) = (i, v);
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
                p[i * w + j] = p[i * w + j] - m * p[c * w + j];
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
fn unit_lower_inverse<E: Entry>(p: &[E], w: usize) -> Vec<E> {
    let mut inv = vec![E::ZERO; w * w];
    for col in 0..w {
        inv[col * w + col] = E::ONE;
        for i in col + 1..w {
            let mut s = E::ZERO;
            for k in col..i {
                s = s - p[i * w + k] * inv[k * w + col];
            }
            inv[i * w + col] = s;
        }
    }
    inv
}

/// The inverse of the upper triangle (diagonal included) of the first `w` rows of `p`.
pub(super) fn upper_inverse<E: Entry>(p: &[E], w: usize) -> Vec<E> {
    let mut inv = vec![E::ZERO; w * w];
    for col in (0..w).rev() {
        inv[col * w + col] = E::ONE / p[col * w + col];
        for i in (0..col).rev() {
            let mut s = E::ZERO;
            for k in i + 1..=col {
                s = s - p[i * w + k] * inv[k * w + col];
            }
            inv[i * w + col] = s / p[i * w + i];
        }
    }
    inv
}

impl Numeric {
    /// `a` (`n` x `n`, already checked square, parts in `dtype`: a copy is made) factored as
    /// `P a = L U`, the same row operations applied to `rhs` (`n` rows, copied) if given.
    /// Stops at the first panel with a zero pivot (`singular`).
    pub(super) fn eliminate<M: Matrix>(
        &self,
        a: &M,
        rhs: Option<&M>,
        n: i64,
        dtype: DType,
    ) -> Result<Elimination<M>> {
        let lu = a.duplicate();
        let rhs = rhs.map(M::duplicate);
        let all = || Ix::Slice(Range::all());
        let (mut even, mut singular) = (true, false);
        let mut upper_inverses = Vec::new();
        for j0 in (0..n).step_by(PANEL as usize) {
            let j1 = (j0 + PANEL).min(n);
            let (rows, w) = ((n - j0) as usize, (j1 - j0) as usize);
            let panel = lu.view(span(j0, n), span(j0, j1));
            let f = factor_panel(panel.read()?, rows, w);
            panel.set(&M::upload(self, &[rows as u64, w as u64], &f.values, dtype))?;
            even ^= f.swaps % 2 == 1;
            if f.singular {
                singular = true;
                break;
            }
            if f.swaps > 0 {
                let order: Vec<i64> = f.perm.iter().map(|&i| i as i64).collect();
                let perm = self.from_slice(&[rows as u64], &order);
                if j1 < n {
                    let right = lu.view(span(j0, n), span(j1, n));
                    right.set(&right.rows_at(&perm))?;
                }
                if let Some(b) = &rhs {
                    let below = b.view(span(j0, n), all());
                    below.set(&below.rows_at(&perm))?;
                }
            }
            let shape = [w as u64, w as u64];
            let l_inv = M::upload(self, &shape, &unit_lower_inverse(&f.values, w), dtype);
            if let Some(b) = &rhs {
                let b1 = b.view(span(j0, j1), all());
                b1.set(&l_inv.times(&b1))?;
            }
            if j1 < n {
                let u12 = lu.view(span(j0, j1), span(j1, n));
                u12.set(&l_inv.times(&u12))?;
                let l21 = lu.view(span(j1, n), span(j0, j1));
                let trailing = lu.view(span(j1, n), span(j1, n));
                trailing.set(&trailing.minus(&l21.times(&u12)))?;
                if let Some(b) = &rhs {
                    let below = b.view(span(j1, n), all());
                    below.set(&below.minus(&l21.times(&b.view(span(j0, j1), all()))))?;
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
            dtype,
        })
    }
}

impl<M: Matrix> Elimination<M> {
    /// The solution of `U x = rhs` (the transformed right-hand sides), a block of rows at a
    /// time from the last: `x1 = U11^-1 (b1 - U12 x2)`. Needs a complete, non-singular
    /// elimination of order `n` with right-hand sides.
    pub(super) fn back_substitute(&self, np: &Numeric, n: i64) -> Result<M> {
        let x = self.rhs.as_ref().ok_or_else(|| {
            crate::Error::Usage("internal: back substitution without right-hand sides".into())
        })?;
        let all = || Ix::Slice(Range::all());
        for (j0, w, inverse) in self.upper_inverses.iter().rev() {
            let j1 = j0 + *w as i64;
            let block = x.view(span(*j0, j1), all());
            let rest = if j1 < n {
                let done = self
                    .lu
                    .view(span(*j0, j1), span(j1, n))
                    .times(&x.view(span(j1, n), all()));
                block.minus(&done)
            } else {
                block.duplicate()
            };
            let u_inv = M::upload(np, &[*w as u64, *w as u64], inverse, self.dtype);
            block.set(&u_inv.times(&rest))?;
        }
        Ok(x.clone())
    }
}
