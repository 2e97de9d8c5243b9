//! A plain-Rust CSR library, independent of Weft: the reference that the tests of Weft's
//! sparse plugin compare against, and the "library without fusion" baseline of the sparse
//! benchmarks.
//!
//! Nothing here uses Weft. The matrix is [`Csr`] (compressed sparse rows, `f64` values); the
//! solvers are [`cg`] and [`bicgstab`], unpreconditioned, from `x0 = 0`.
//!
//! # Op by op, on purpose
//!
//! The vector helpers ([`dot`], [`norm2`], [`scale`], [`add`], [`sub`], [`add_assign`],
//! [`sub_assign`], [`axpy`], [`xpay`], [`lincomb`]) each make exactly one rayon-parallel pass
//! over their operands, and the solvers call them the way a NumPy program evaluates its
//! expressions: one operation at a time, allocating a new array wherever NumPy would. For
//! example `p = r + beta * p` is computed as `tmp = scale(beta, &p)` followed by
//! `p = add(&r, &tmp)`, two passes and one temporary, and `x += alpha * p` as
//! `tmp = scale(alpha, &p)` then `add_assign(&mut x, &tmp)`. A matrix-vector product `A @ p`
//! allocates its result each time ([`Csr::spmv_par`] into a fresh vector). This is
//! deliberately not the fastest way to write CG in Rust; it is what a library that runs one
//! loop per vector operation, without fusing them, does, and so it is the baseline that fused
//! execution is measured against. [`axpy`], [`xpay`] and [`lincomb`] (the BLAS-style forms,
//! each still one pass) are there for callers that want them; the solvers do not use them.
//!
//! Parallel reductions ([`dot`], [`norm2`]) sum in an order that rayon chooses, so their last
//! bits may differ from a sequential sum, and from run to run.
//!
//! Dimension mismatches between a matrix and a vector, or between two vectors, are
//! programming errors here and panic (each function's `# Panics` says when); input that comes
//! from outside (triplets, two matrices to add) is checked and reported as `Err(String)`.

use rayon::prelude::*;

/// A sparse matrix in compressed sparse row form.
///
/// Row `i` holds the entries `indptr[i]..indptr[i + 1]` of `indices` (their columns) and
/// `data` (their values). The constructors here ([`Csr::from_coo`], [`Csr::poisson2d`],
/// [`Csr::poisson3d`], [`Csr::add`], [`Csr::transpose`] of one of those) give rows whose
/// columns are strictly increasing; [`Csr::validate`] checks the structural invariants of a
/// matrix built by hand.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Row starts: `rows + 1` offsets into `indices` and `data`, non-decreasing, from 0 to
    /// the number of stored entries.
    pub indptr: Vec<usize>,
    /// Column of each stored entry.
    pub indices: Vec<usize>,
    /// Value of each stored entry.
    pub data: Vec<f64>,
}

/// The result of [`cg`] or [`bicgstab`].
#[derive(Clone, Debug, PartialEq)]
pub struct Solve {
    /// The approximate solution.
    pub x: Vec<f64>,
    /// The residual norm `||r||_2`: first that of `r0 = b` (from `x0 = 0`), then one after
    /// each iteration (the solver's own residual vector, not a recomputed `b - A x`). The
    /// solve converged if the last entry is at most `tol * ||b||_2`.
    pub residuals: Vec<f64>,
    /// Number of iterations run (`residuals.len() - 1`).
    pub iterations: usize,
}

impl Csr {
    /// Builds a `rows x cols` matrix from coordinate triplets `(row[k], col[k], val[k])`.
    ///
    /// Duplicate coordinates are summed (in their input order), and the columns of each row
    /// come out sorted, strictly increasing. Every given entry keeps its place in the
    /// pattern, so explicit zeros, or duplicates that cancel, are stored as zeros (as SciPy's
    /// `coo_matrix.tocsr()` does).
    ///
    /// Errors when the three slices differ in length or an index is out of range.
    pub fn from_coo(
        rows: usize,
        cols: usize,
        row: &[usize],
        col: &[usize],
        val: &[f64],
    ) -> Result<Csr, String> {
        if row.len() != col.len() || row.len() != val.len() {
            return Err(format!(
                "from_coo: row, col and val differ in length ({}, {}, {})",
                row.len(),
                col.len(),
                val.len()
            ));
        }
        let mut triplets = Vec::with_capacity(row.len());
        for (k, ((&r, &c), &v)) in row.iter().zip(col).zip(val).enumerate() {
            if r >= rows {
                return Err(format!(
                    "from_coo: entry {k} has row {r}, out of range for {rows} rows"
                ));
            }
            if c >= cols {
                return Err(format!(
                    "from_coo: entry {k} has column {c}, out of range for {cols} columns"
                ));
            }
            triplets.push((r, c, v));
        }
        // Stable, so duplicates are summed in their input order.
        triplets.sort_by_key(|&(r, c, _)| (r, c));

        let mut indptr = vec![0usize; rows + 1];
        let mut indices: Vec<usize> = Vec::with_capacity(triplets.len());
        let mut data: Vec<f64> = Vec::with_capacity(triplets.len());
        let mut last: Option<(usize, usize)> = None;
        for (r, c, v) in triplets {
            if last == Some((r, c)) {
                if let Some(d) = data.last_mut() {
                    *d += v;
                }
            } else {
                indices.push(c);
                data.push(v);
                indptr[r + 1] += 1;
                last = Some((r, c));
            }
        }
        for i in 0..rows {
            indptr[i + 1] += indptr[i];
        }
        Ok(Csr {
            rows,
            cols,
            indptr,
            indices,
            data,
        })
    }

    /// The 5-point Laplacian on a `g x g` interior grid with Dirichlet boundaries:
    /// `g^2 x g^2`, 4 on the diagonal and -1 for each grid neighbour. Unknown `(r, c)` (row,
    /// column of the grid) is `k = r * g + c`. Columns are sorted within each row and no
    /// zeros are stored.
    pub fn poisson2d(g: usize) -> Csr {
        Csr::poisson(g, 2)
    }

    /// The 7-point Laplacian on a `g x g x g` interior grid with Dirichlet boundaries:
    /// `g^3 x g^3`, 6 on the diagonal and -1 for each grid neighbour. Unknown `(z, y, x)` is
    /// `k = (z * g + y) * g + x`. Columns are sorted within each row and no zeros are stored.
    pub fn poisson3d(g: usize) -> Csr {
        Csr::poisson(g, 3)
    }

    /// The `2d + 1`-point Laplacian on a `g^d` interior grid: unknown `k`'s coordinate along
    /// the axis of stride `s` (`g^(d-1)`, ..., `g`, 1) is `(k / s) % g`; its row holds `-1` for
    /// each neighbour inside the grid and `2d` on the diagonal, in column order.
    fn poisson(g: usize, d: u32) -> Csr {
        let n = g.pow(d);
        let strides: Vec<usize> = (0..d).rev().map(|i| g.pow(i)).collect();
        let points = 2 * d as usize + 1;
        let mut indptr = Vec::with_capacity(n + 1);
        let mut indices = Vec::with_capacity(points * n);
        let mut data = Vec::with_capacity(points * n);
        indptr.push(0);
        for k in 0..n {
            let coord = |s: usize| (k / s) % g;
            let mut push = |j: usize, v: f64| {
                indices.push(j);
                data.push(v);
            };
            for &s in &strides {
                if coord(s) > 0 {
                    push(k - s, -1.0);
                }
            }
            push(k, f64::from(2 * d));
            for &s in strides.iter().rev() {
                if coord(s) + 1 < g {
                    push(k + s, -1.0);
                }
            }
            indptr.push(indices.len());
        }
        Csr {
            rows: n,
            cols: n,
            indptr,
            indices,
            data,
        }
    }

    /// Number of stored entries (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.data.len()
    }

    /// Checks the structural invariants: `indptr` has `rows + 1` non-decreasing entries from
    /// 0 to `indices.len()`, `indices` and `data` have the same length, and every column is
    /// below `cols`. (Sorted, duplicate-free rows are not required.)
    pub fn validate(&self) -> Result<(), String> {
        if self.indptr.len() != self.rows + 1 {
            return Err(format!(
                "indptr has {} entries, expected rows + 1 = {}",
                self.indptr.len(),
                self.rows + 1
            ));
        }
        if self.indices.len() != self.data.len() {
            return Err(format!(
                "indices has {} entries but data has {}",
                self.indices.len(),
                self.data.len()
            ));
        }
        if self.indptr[0] != 0 {
            return Err(format!("indptr[0] is {}, expected 0", self.indptr[0]));
        }
        if let Some(i) = self.indptr.windows(2).position(|w| w[0] > w[1]) {
            return Err(format!("indptr decreases after row start {i}"));
        }
        if self.indptr[self.rows] != self.indices.len() {
            return Err(format!(
                "indptr ends at {}, but {} entries are stored",
                self.indptr[self.rows],
                self.indices.len()
            ));
        }
        if let Some(k) = self.indices.iter().position(|&c| c >= self.cols) {
            return Err(format!(
                "entry {k} has column {}, out of range for {} columns",
                self.indices[k], self.cols
            ));
        }
        Ok(())
    }

    /// Row `i` of `A x`.
    fn row_dot(&self, i: usize, x: &[f64]) -> f64 {
        let (start, end) = (self.indptr[i], self.indptr[i + 1]);
        self.indices[start..end]
            .iter()
            .zip(&self.data[start..end])
            .map(|(&j, &v)| v * x[j])
            .sum()
    }

    fn check_spmv(&self, x: &[f64], y: &[f64]) {
        assert_eq!(x.len(), self.cols, "spmv: x has the wrong length");
        assert_eq!(y.len(), self.rows, "spmv: y has the wrong length");
    }

    /// `y = A x`, sequentially, row by row.
    ///
    /// # Panics
    ///
    /// If `x.len() != cols` or `y.len() != rows`.
    pub fn spmv(&self, x: &[f64], y: &mut [f64]) {
        self.check_spmv(x, y);
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = self.row_dot(i, x);
        }
    }

    /// `y = A x`, with the rows split across the current rayon pool.
    ///
    /// # Panics
    ///
    /// If `x.len() != cols` or `y.len() != rows`.
    pub fn spmv_par(&self, x: &[f64], y: &mut [f64]) {
        self.check_spmv(x, y);
        y.par_iter_mut()
            .enumerate()
            .for_each(|(i, yi)| *yi = self.row_dot(i, x));
    }

    /// The main diagonal (`min(rows, cols)` values; an absent entry is 0, duplicates are
    /// summed).
    pub fn diagonal(&self) -> Vec<f64> {
        let mut d = vec![0.0; self.rows.min(self.cols)];
        for (i, di) in d.iter_mut().enumerate() {
            for k in self.indptr[i]..self.indptr[i + 1] {
                if self.indices[k] == i {
                    *di += self.data[k];
                }
            }
        }
        d
    }

    /// `s * A`, with the same pattern.
    pub fn scale(&self, s: f64) -> Csr {
        Csr {
            data: self.data.iter().map(|&v| s * v).collect(),
            ..self.clone()
        }
    }

    /// `A + B`. The result's pattern is the union of both patterns (an entry present in
    /// either is stored, even where the sum is zero), with sorted columns.
    ///
    /// Errors when the shapes differ or either matrix fails [`Csr::validate`].
    pub fn add(&self, other: &Csr) -> Result<Csr, String> {
        if (self.rows, self.cols) != (other.rows, other.cols) {
            return Err(format!(
                "add: shapes differ ({} x {} and {} x {})",
                self.rows, self.cols, other.rows, other.cols
            ));
        }
        self.validate()
            .map_err(|e| format!("add: left operand: {e}"))?;
        other
            .validate()
            .map_err(|e| format!("add: right operand: {e}"))?;
        let (mut row, mut col, mut val) = (Vec::new(), Vec::new(), Vec::new());
        for m in [self, other] {
            for i in 0..m.rows {
                for k in m.indptr[i]..m.indptr[i + 1] {
                    row.push(i);
                    col.push(m.indices[k]);
                    val.push(m.data[k]);
                }
            }
        }
        Csr::from_coo(self.rows, self.cols, &row, &col, &val)
    }

    /// `A^T` (`cols x rows`). Its rows' columns are sorted: entries are placed in the order
    /// of their original rows.
    pub fn transpose(&self) -> Csr {
        let mut indptr = vec![0usize; self.cols + 1];
        for &j in &self.indices {
            indptr[j + 1] += 1;
        }
        for j in 0..self.cols {
            indptr[j + 1] += indptr[j];
        }
        let mut next = indptr.clone();
        let mut indices = vec![0usize; self.indices.len()];
        let mut data = vec![0.0; self.data.len()];
        for i in 0..self.rows {
            for k in self.indptr[i]..self.indptr[i + 1] {
                let j = self.indices[k];
                indices[next[j]] = i;
                data[next[j]] = self.data[k];
                next[j] += 1;
            }
        }
        Csr {
            rows: self.cols,
            cols: self.rows,
            indptr,
            indices,
            data,
        }
    }

    /// The dense matrix, row-major (`rows * cols` values; duplicates are summed).
    pub fn to_dense(&self) -> Vec<f64> {
        let mut dense = vec![0.0; self.rows * self.cols];
        for i in 0..self.rows {
            for k in self.indptr[i]..self.indptr[i + 1] {
                dense[i * self.cols + self.indices[k]] += self.data[k];
            }
        }
        dense
    }
}

fn check_len(op: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{op}: vectors differ in length");
}

/// Elements per chunk of a reduction: each chunk sums in order, then the chunks' sums add in
/// order, so the result does not depend on how rayon splits the work (its own `sum` does).
const CHUNK: usize = 1 << 12;

/// The sum of `parts` (one value per chunk) in chunk order, whatever the pool's splitting.
pub fn ordered_sum(parts: impl IndexedParallelIterator<Item = f64>) -> f64 {
    parts.collect::<Vec<f64>>().iter().sum()
}

/// `a . b`, one parallel pass, the same bits on any number of threads.
///
/// # Panics
///
/// If the lengths differ.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    check_len("dot", a, b);
    ordered_sum(
        a.par_chunks(CHUNK)
            .zip(b.par_chunks(CHUNK))
            .map(|(x, y)| x.iter().zip(y).map(|(&x, &y)| x * y).sum()),
    )
}

/// `||a||_2`, one parallel pass, the same bits on any number of threads.
pub fn norm2(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// `alpha * x` into a new vector, one parallel pass (NumPy's `alpha * x`).
pub fn scale(alpha: f64, x: &[f64]) -> Vec<f64> {
    x.par_iter().map(|&v| alpha * v).collect()
}

/// `a + b` into a new vector, one parallel pass (NumPy's `a + b`).
///
/// # Panics
///
/// If the lengths differ.
pub fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    check_len("add", a, b);
    a.par_iter().zip(b).map(|(&x, &y)| x + y).collect()
}

/// `a - b` into a new vector, one parallel pass (NumPy's `a - b`).
///
/// # Panics
///
/// If the lengths differ.
pub fn sub(a: &[f64], b: &[f64]) -> Vec<f64> {
    check_len("sub", a, b);
    a.par_iter().zip(b).map(|(&x, &y)| x - y).collect()
}

/// `y += x` in place, one parallel pass (NumPy's `y += x`).
///
/// # Panics
///
/// If the lengths differ.
pub fn add_assign(y: &mut [f64], x: &[f64]) {
    check_len("add_assign", y, x);
    y.par_iter_mut().zip(x).for_each(|(yi, &xi)| *yi += xi);
}

/// `y -= x` in place, one parallel pass (NumPy's `y -= x`).
///
/// # Panics
///
/// If the lengths differ.
pub fn sub_assign(y: &mut [f64], x: &[f64]) {
    check_len("sub_assign", y, x);
    y.par_iter_mut().zip(x).for_each(|(yi, &xi)| *yi -= xi);
}

/// `y += alpha * x` in place, one parallel pass (BLAS `axpy`; no temporary).
///
/// # Panics
///
/// If the lengths differ.
pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    check_len("axpy", x, y);
    y.par_iter_mut()
        .zip(x)
        .for_each(|(yi, &xi)| *yi += alpha * xi);
}

/// `y = x + beta * y` in place, one parallel pass (no temporary).
///
/// # Panics
///
/// If the lengths differ.
pub fn xpay(x: &[f64], beta: f64, y: &mut [f64]) {
    check_len("xpay", x, y);
    y.par_iter_mut()
        .zip(x)
        .for_each(|(yi, &xi)| *yi = xi + beta * *yi);
}

/// `alpha * x + beta * y` into a new vector, one parallel pass.
///
/// # Panics
///
/// If the lengths differ.
pub fn lincomb(alpha: f64, x: &[f64], beta: f64, y: &[f64]) -> Vec<f64> {
    check_len("lincomb", x, y);
    x.par_iter()
        .zip(y)
        .map(|(&xi, &yi)| alpha * xi + beta * yi)
        .collect()
}

/// `A @ v` into a new vector (NumPy/SciPy's `A @ v` allocates its result).
fn matvec(a: &Csr, v: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; a.rows];
    a.spmv_par(v, &mut out);
    out
}

fn check_system(solver: &str, a: &Csr, b: &[f64]) {
    assert_eq!(a.rows, a.cols, "{solver}: the matrix is not square");
    assert_eq!(b.len(), a.rows, "{solver}: b has the wrong length");
}

/// Unpreconditioned conjugate gradients for `A x = b` (`A` symmetric positive definite),
/// from `x0 = 0`, written op by op as NumPy would run it (see the module documentation):
///
/// ```python
/// x = zeros(n); r = b.copy(); p = r.copy(); rr = r @ r
/// for it in range(max_iter):
///     Ap = A @ p
///     alpha = rr / (p @ Ap)
///     x += alpha * p
///     r -= alpha * Ap
///     rr_new = r @ r
///     if sqrt(rr_new) <= tol * norm(b): break
///     p = r + (rr_new / rr) * p
///     rr = rr_new
/// ```
///
/// Stops when `||r||_2 <= tol * ||b||_2` or after `max_iter` iterations (or if `p . A p`
/// is zero, which for an SPD matrix means the residual already is).
///
/// # Panics
///
/// If `a` is not square or `b.len() != a.rows`.
pub fn cg(a: &Csr, b: &[f64], tol: f64, max_iter: usize) -> Solve {
    check_system("cg", a, b);
    let n = a.rows;
    let target = tol * norm2(b);
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut rr = dot(&r, &r);
    let mut residuals = vec![rr.sqrt()];
    let mut iterations = 0;
    while iterations < max_iter && rr.sqrt() > target {
        let ap = matvec(a, &p);
        let pap = dot(&p, &ap);
        if pap == 0.0 {
            break;
        }
        let alpha = rr / pap;
        let tmp = scale(alpha, &p);
        add_assign(&mut x, &tmp);
        let tmp = scale(alpha, &ap);
        sub_assign(&mut r, &tmp);
        let rr_new = dot(&r, &r);
        iterations += 1;
        residuals.push(rr_new.sqrt());
        if rr_new.sqrt() <= target {
            break;
        }
        let beta = rr_new / rr;
        let tmp = scale(beta, &p);
        p = add(&r, &tmp);
        rr = rr_new;
    }
    Solve {
        x,
        residuals,
        iterations,
    }
}

/// Unpreconditioned BiCGSTAB for `A x = b`, from `x0 = 0` with shadow residual
/// `r_hat = r0 = b`, written op by op as NumPy would run it (see the module documentation):
///
/// ```python
/// x = zeros(n); r = b.copy(); r_hat = r.copy()
/// rho = alpha = omega = 1.0; v = zeros(n); p = zeros(n)
/// for it in range(max_iter):
///     rho_new = r_hat @ r
///     beta = (rho_new / rho) * (alpha / omega)
///     p = r + beta * (p - omega * v)
///     v = A @ p
///     alpha = rho_new / (r_hat @ v)
///     s = r - alpha * v
///     if norm(s) <= tol * norm(b): x += alpha * p; break
///     t = A @ s
///     omega = (t @ s) / (t @ t)
///     x += alpha * p
///     x += omega * s
///     r = s - omega * t
///     if norm(r) <= tol * norm(b): break
///     rho = rho_new
/// ```
///
/// Stops when `||r||_2 <= tol * ||b||_2` (the residual after an iteration that ends at the
/// half step is `s`), after `max_iter` iterations, or on a breakdown (`rho_new`, `r_hat . v`,
/// `t . t` or `omega` zero), returning the iterate reached so far.
///
/// # Panics
///
/// If `a` is not square or `b.len() != a.rows`.
pub fn bicgstab(a: &Csr, b: &[f64], tol: f64, max_iter: usize) -> Solve {
    check_system("bicgstab", a, b);
    let n = a.rows;
    let target = tol * norm2(b);
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let r_hat = r.clone();
    let (mut rho, mut alpha, mut omega) = (1.0f64, 1.0f64, 1.0f64);
    let mut v = vec![0.0; n];
    let mut p = vec![0.0; n];
    let mut residuals = vec![norm2(&r)];
    let mut iterations = 0;
    while iterations < max_iter && residuals[iterations] > target {
        let rho_new = dot(&r_hat, &r);
        if rho_new == 0.0 {
            break;
        }
        let beta = (rho_new / rho) * (alpha / omega);
        let tmp = scale(omega, &v);
        let tmp = sub(&p, &tmp);
        let tmp = scale(beta, &tmp);
        p = add(&r, &tmp);
        v = matvec(a, &p);
        let rv = dot(&r_hat, &v);
        if rv == 0.0 {
            break;
        }
        alpha = rho_new / rv;
        let tmp = scale(alpha, &v);
        let s = sub(&r, &tmp);
        let s_norm = norm2(&s);
        if s_norm <= target {
            let tmp = scale(alpha, &p);
            add_assign(&mut x, &tmp);
            iterations += 1;
            residuals.push(s_norm);
            break;
        }
        let t = matvec(a, &s);
        let tt = dot(&t, &t);
        if tt == 0.0 {
            break;
        }
        omega = dot(&t, &s) / tt;
        let tmp = scale(alpha, &p);
        add_assign(&mut x, &tmp);
        let tmp = scale(omega, &s);
        add_assign(&mut x, &tmp);
        let tmp = scale(omega, &t);
        r = sub(&s, &tmp);
        iterations += 1;
        residuals.push(norm2(&r));
        if omega == 0.0 {
            break;
        }
        rho = rho_new;
    }
    Solve {
        x,
        residuals,
        iterations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the tests (SplitMix64).
    struct Rng(u64);

    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next_u64() % n as u64) as usize
        }
        fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        }
    }

    /// A random `rows x cols` matrix with `nnz` triplets (duplicates likely), none in
    /// the rows of `empty`.
    fn random(rng: &mut Rng, rows: usize, cols: usize, nnz: usize, empty: &[usize]) -> Csr {
        let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
        while r.len() < nnz {
            let i = rng.below(rows);
            if empty.contains(&i) {
                continue;
            }
            r.push(i);
            c.push(rng.below(cols));
            v.push(rng.uniform());
        }
        Csr::from_coo(rows, cols, &r, &c, &v).unwrap()
    }

    fn dense_matvec(d: &[f64], rows: usize, cols: usize, x: &[f64]) -> Vec<f64> {
        (0..rows)
            .map(|i| (0..cols).map(|j| d[i * cols + j] * x[j]).sum())
            .collect()
    }

    fn assert_close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (k, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol, "entry {k}: {x} vs {y}");
        }
    }

    fn rows_sorted(m: &Csr) -> bool {
        (0..m.rows).all(|i| m.indices[m.indptr[i]..m.indptr[i + 1]].is_sorted_by(|a, b| a < b))
    }

    #[test]
    fn from_coo_sums_duplicates_and_sorts() {
        let row = [2, 0, 2, 0, 2, 0];
        let col = [1, 3, 0, 1, 1, 3];
        let val = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let m = Csr::from_coo(3, 4, &row, &col, &val).unwrap();
        assert_eq!(m.indptr, vec![0, 2, 2, 4]);
        assert_eq!(m.indices, vec![1, 3, 0, 1]);
        assert_eq!(m.data, vec![4.0, 8.0, 3.0, 6.0]);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.nnz(), 4);

        // Cancelling duplicates stay in the pattern as a stored zero.
        let z = Csr::from_coo(1, 1, &[0, 0], &[0, 0], &[1.0, -1.0]).unwrap();
        assert_eq!((z.indices, z.data), (vec![0], vec![0.0]));

        let empty = Csr::from_coo(2, 3, &[], &[], &[]).unwrap();
        assert_eq!(empty.indptr, vec![0, 0, 0]);
        assert_eq!(empty.to_dense(), vec![0.0; 6]);
    }

    #[test]
    fn from_coo_rejects_bad_input() {
        assert!(Csr::from_coo(3, 4, &[3], &[0], &[1.0]).is_err());
        assert!(Csr::from_coo(3, 4, &[0], &[4], &[1.0]).is_err());
        assert!(Csr::from_coo(3, 4, &[0, 1], &[0], &[1.0]).is_err());
        assert!(Csr::from_coo(3, 4, &[0], &[0], &[1.0, 2.0]).is_err());
        assert!(Csr::from_coo(0, 0, &[0], &[0], &[1.0]).is_err());
    }

    #[test]
    fn validate_catches_broken_structure() {
        let good = Csr::poisson2d(3);
        assert_eq!(good.validate(), Ok(()));
        let mut bad = good.clone();
        bad.indices[0] = 9;
        assert!(bad.validate().is_err());
        let mut bad = good.clone();
        bad.indptr.pop();
        assert!(bad.validate().is_err());
        let mut bad = good.clone();
        bad.data.pop();
        assert!(bad.validate().is_err());
        let mut bad = good;
        bad.indptr.swap(1, 2);
        assert!(bad.validate().is_err());
    }

    #[test]
    fn poisson2d_3_matches_hand_built_dense() {
        #[rustfmt::skip]
        let expected = [
            4., -1.,  0., -1.,  0.,  0.,  0.,  0.,  0.,
           -1.,  4., -1.,  0., -1.,  0.,  0.,  0.,  0.,
            0., -1.,  4.,  0.,  0., -1.,  0.,  0.,  0.,
           -1.,  0.,  0.,  4., -1.,  0., -1.,  0.,  0.,
            0., -1.,  0., -1.,  4., -1.,  0., -1.,  0.,
            0.,  0., -1.,  0., -1.,  4.,  0.,  0., -1.,
            0.,  0.,  0., -1.,  0.,  0.,  4., -1.,  0.,
            0.,  0.,  0.,  0., -1.,  0., -1.,  4., -1.,
            0.,  0.,  0.,  0.,  0., -1.,  0., -1.,  4.,
        ];
        let m = Csr::poisson2d(3);
        assert_eq!((m.rows, m.cols), (9, 9));
        assert_eq!(m.to_dense(), expected.to_vec());
        assert_eq!(m.nnz(), 9 + 2 * 12);
        assert!(rows_sorted(&m));
        assert!(m.data.iter().all(|&v| v != 0.0));
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.diagonal(), vec![4.0; 9]);
        assert_eq!(m.transpose(), m);
    }

    #[test]
    fn poisson3d_2_row_sums() {
        let m = Csr::poisson3d(2);
        assert_eq!((m.rows, m.cols, m.nnz()), (8, 8, 32));
        // Every unknown of a 2 x 2 x 2 grid is a corner: 3 neighbours.
        let mut sums = vec![0.0; 8];
        m.spmv(&[1.0; 8], &mut sums);
        assert_eq!(sums, vec![3.0; 8]);
        assert!(rows_sorted(&m));
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.diagonal(), vec![6.0; 8]);
        assert_eq!(m.transpose(), m);
        // Unknowns `k = 4z + 2y + x` are neighbours when they differ in one bit: the cube.
        let dense = m.to_dense();
        for i in 0..8usize {
            for j in 0..8usize {
                let want = match i ^ j {
                    0 => 6.0,
                    1 | 2 | 4 => -1.0,
                    _ => 0.0,
                };
                assert_eq!(dense[i * 8 + j], want, "({i}, {j})");
            }
        }
        // Unknown 0 = (z, y, x) = (0, 0, 0) neighbours x: 1, y: 2, z: 4.
        assert_eq!(&m.indices[..4], &[0, 1, 2, 4]);

        // On a 3-grid the centre (13) has six neighbours and sums to 0; a corner to 3.
        let m3 = Csr::poisson3d(3);
        let mut sums = vec![0.0; 27];
        m3.spmv(&[1.0; 27], &mut sums);
        assert_eq!((sums[13], sums[0]), (0.0, 3.0));
        assert_eq!(
            m3.indices[m3.indptr[13]..m3.indptr[14]],
            [4, 10, 12, 13, 14, 16, 22]
        );
        assert!(rows_sorted(&m3));
    }

    #[test]
    fn spmv_matches_dense_with_empty_rows() {
        let mut rng = Rng(7);
        let (rows, cols) = (37, 23);
        let m = random(&mut rng, rows, cols, 200, &[0, 5, 36]);
        for i in [0, 5, 36] {
            assert_eq!(m.indptr[i], m.indptr[i + 1]);
        }
        assert!(rows_sorted(&m));
        let x: Vec<f64> = (0..cols).map(|_| rng.uniform()).collect();
        let expected = dense_matvec(&m.to_dense(), rows, cols, &x);
        let mut y = vec![f64::NAN; rows];
        m.spmv(&x, &mut y);
        assert_close(&y, &expected, 1e-12);
        let mut y_par = vec![f64::NAN; rows];
        m.spmv_par(&x, &mut y_par);
        assert_eq!(y, y_par);
    }

    #[test]
    fn transpose_twice_is_identity() {
        let mut rng = Rng(11);
        let m = random(&mut rng, 19, 31, 150, &[3]);
        let t = m.transpose();
        assert_eq!((t.rows, t.cols), (31, 19));
        assert!(rows_sorted(&t));
        let (d, dt) = (m.to_dense(), t.to_dense());
        for i in 0..19 {
            for j in 0..31 {
                assert_eq!(d[i * 31 + j], dt[j * 19 + i]);
            }
        }
        assert_eq!(t.transpose(), m);
    }

    #[test]
    fn add_and_scale_match_dense() {
        let mut rng = Rng(3);
        let a = random(&mut rng, 17, 13, 60, &[2]);
        let b = random(&mut rng, 17, 13, 60, &[2, 9]);
        let sum = a.add(&b).unwrap();
        assert!(rows_sorted(&sum));
        assert_eq!(sum.validate(), Ok(()));
        let expected: Vec<f64> = a
            .to_dense()
            .iter()
            .zip(b.to_dense())
            .map(|(x, y)| x + y)
            .collect();
        assert_close(&sum.to_dense(), &expected, 1e-15);
        // The pattern is the union.
        let union = (0..17 * 13)
            .filter(|&k| {
                let (i, j) = (k / 13, k % 13);
                let has = |m: &Csr| m.indices[m.indptr[i]..m.indptr[i + 1]].contains(&j);
                has(&a) || has(&b)
            })
            .count();
        assert_eq!(sum.nnz(), union);

        let scaled = a.scale(-2.5);
        assert_eq!(
            (scaled.indptr.clone(), scaled.indices.clone()),
            (a.indptr.clone(), a.indices.clone())
        );
        let expected: Vec<f64> = a.to_dense().iter().map(|v| -2.5 * v).collect();
        assert_eq!(scaled.to_dense(), expected);

        assert!(a.add(&Csr::poisson2d(2)).is_err());
        let mut broken = b.clone();
        broken.indptr.pop();
        assert!(a.add(&broken).is_err());
    }

    #[test]
    fn vector_helpers() {
        let mut rng = Rng(5);
        let n = 10_001;
        let x: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
        let y: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
        let seq_dot: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
        assert!((dot(&x, &y) - seq_dot).abs() <= 1e-10);
        let seq_norm = x.iter().map(|a| a * a).sum::<f64>().sqrt();
        assert!((norm2(&x) - seq_norm).abs() <= 1e-10);
        let each = |f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
            x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect()
        };
        assert_eq!(
            scale(3.0, &x),
            x.iter().map(|a| 3.0 * a).collect::<Vec<_>>()
        );
        assert_eq!(add(&x, &y), each(&|a, b| a + b));
        assert_eq!(sub(&x, &y), each(&|a, b| a - b));
        assert_eq!(lincomb(2.0, &x, -0.5, &y), each(&|a, b| 2.0 * a + -0.5 * b));
        let mut z = y.clone();
        add_assign(&mut z, &x);
        assert_eq!(z, each(&|a, b| b + a));
        let mut z = y.clone();
        sub_assign(&mut z, &x);
        assert_eq!(z, each(&|a, b| b - a));
        let mut z = y.clone();
        axpy(1.5, &x, &mut z);
        assert_eq!(z, each(&|a, b| b + 1.5 * a));
        let mut z = y.clone();
        xpay(&x, 0.25, &mut z);
        assert_eq!(z, each(&|a, b| a + 0.25 * b));
    }

    fn check_solve(name: &str, a: &Csr, b: &[f64], s: &Solve, tol: f64) {
        let b_norm = norm2(b);
        assert_eq!(s.residuals.len(), s.iterations + 1, "{name}");
        assert_eq!(s.residuals[0], b_norm, "{name}");
        let last = *s.residuals.last().unwrap();
        assert!(last <= tol * b_norm, "{name}: final residual {last}");
        let mut ax = vec![0.0; a.rows];
        a.spmv(&s.x, &mut ax);
        let true_res = norm2(&sub(&ax, b));
        assert!(
            true_res <= 1e-7 * b_norm,
            "{name}: ||Ax - b|| = {true_res}, ||b|| = {b_norm}"
        );
    }

    #[test]
    fn solvers_converge_on_poisson2d_16() {
        let a = Csr::poisson2d(16);
        let mut rng = Rng(42);
        let b: Vec<f64> = (0..a.rows).map(|_| rng.uniform()).collect();
        let tol = 1e-8;

        let s = cg(&a, &b, tol, 1000);
        check_solve("cg", &a, &b, &s, tol);
        assert!(
            s.iterations > 1 && s.iterations < 256,
            "cg: {} iterations",
            s.iterations
        );

        let s = bicgstab(&a, &b, tol, 1000);
        check_solve("bicgstab", &a, &b, &s, tol);
        assert!(
            s.iterations > 1 && s.iterations < 256,
            "bicgstab: {} iterations",
            s.iterations
        );

        // The all-ones right-hand side too.
        let ones = vec![1.0; a.rows];
        check_solve("cg ones", &a, &ones, &cg(&a, &ones, tol, 1000), tol);
        check_solve(
            "bicgstab ones",
            &a,
            &ones,
            &bicgstab(&a, &ones, tol, 1000),
            tol,
        );
    }

    #[test]
    fn solvers_edge_cases() {
        let a = Csr::poisson2d(4);
        let zero = vec![0.0; 16];
        for s in [cg(&a, &zero, 1e-8, 10), bicgstab(&a, &zero, 1e-8, 10)] {
            assert_eq!(
                (s.iterations, s.residuals.clone(), s.x),
                (0, vec![0.0], zero.clone())
            );
        }
        let b = vec![1.0; 16];
        for s in [cg(&a, &b, 1e-12, 2), bicgstab(&a, &b, 1e-12, 2)] {
            assert_eq!(s.iterations, 2);
            assert_eq!(s.residuals.len(), 3);
        }
        // A diagonal system: one iteration each.
        let d = Csr::from_coo(3, 3, &[0, 1, 2], &[0, 1, 2], &[2.0, 2.0, 2.0]).unwrap();
        let s = cg(&d, &[2.0, 4.0, 6.0], 1e-12, 10);
        assert_eq!(s.iterations, 1);
        assert_close(&s.x, &[1.0, 2.0, 3.0], 1e-14);
        let s = bicgstab(&d, &[2.0, 4.0, 6.0], 1e-12, 10);
        assert_eq!(s.iterations, 1);
        assert_close(&s.x, &[1.0, 2.0, 3.0], 1e-14);
    }
}
