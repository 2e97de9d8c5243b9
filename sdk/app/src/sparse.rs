//! The sparse plugin's CSR matrices, as the `weft` crate's `Sparse` and `CsrMatrix` give
//! them: each call is the sparse plugin's export of the same name, which the host links the
//! application's `sparse` import to, so a product's tasks enter the same window as the
//! vector operations around it.

use std::cell::RefCell;
use std::rc::Rc;

use crate::bindings::weft::plugin::host::{self, Store};
use crate::bindings::weft::plugin::sparse as sp;
use crate::bindings::weft::plugin::types as wit;
use crate::{Array, DType, Error, Numeric, Result, wit_dtype};

/// The sparse plugin, as the host serves it to this application.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sparse;

/// The order in which [`CsrMatrix::matvec`] sums each row's terms. Either order gives the
/// same bits on every thread count, piece count, SIMD path and rank count; they differ from
/// each other on rows of eight entries or more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowOrder {
    /// One entry after another, as SciPy sums a row.
    #[default]
    Sequential,
    /// The canonical lane order: eight interleaved partials over the row's whole blocks of
    /// eight, their fixed tree, then the rest in order.
    Lanes,
}

/// A CSR matrix of the sparse plugin: its three stores, its shape, and the order in which its
/// products sum each row.
///
/// `pos` has shape `(rows, 2)`: row `i`'s entries are `pos[i, 0]..pos[i, 1]` of `crd` (their
/// columns) and `vals` (their values).
#[derive(Clone, Debug)]
pub struct CsrMatrix {
    pos: Array,
    crd: Array,
    vals: Array,
    rows: u64,
    cols: u64,
    order: RowOrder,
    /// The column hull, made by the first product and shared by the matrices of this
    /// pattern.
    hull: Rc<RefCell<Option<Array>>>,
}

/// The element bytes of `values` as `dtype` (integers for index types), as the `weft` crate
/// makes them.
fn bytes_of(values: impl Iterator<Item = f64>, dtype: DType) -> Vec<u8> {
    weft_ir::elements::from_f64s(values, dtype)
}

/// An error of the sparse plugin's operation `op`, as the `weft` crate words it.
fn error(op: &str, message: String) -> Error {
    Error {
        message: format!("plugin `sparse`, call `{op}`: {message}"),
    }
}

/// The matrix a call returned.
fn matrix(r: std::result::Result<sp::Csr, wit::Error>) -> Result<CsrMatrix> {
    let csr = r?;
    let wrap = |s: Store| Array::made(Ok(s));
    Ok(CsrMatrix {
        pos: wrap(csr.pos),
        crd: wrap(csr.crd),
        vals: wrap(csr.vals),
        rows: csr.rows,
        cols: csr.cols,
        order: RowOrder::default(),
        hull: Rc::default(),
    })
}

impl Sparse {
    /// The host's sparse plugin, beside `np` (the host loads it for the job; `weft run` and
    /// `weft serve` do by default).
    pub fn new(_np: &Numeric) -> Sparse {
        Sparse
    }

    /// The numeric plugin whose runtime this one shares.
    pub fn numeric(&self) -> Numeric {
        Numeric
    }

    /// A vector store from the application's values, as `dtype`.
    fn vector(&self, values: impl ExactSizeIterator<Item = f64>, dtype: DType) -> Array {
        let n = values.len() as u64;
        let bytes = bytes_of(values, dtype);
        Array::made(host::store_from_bytes(&[n], wit_dtype(dtype), &bytes))
    }

    /// A matrix from COO triplets (vectors of one length: integer `row` and `col`, float
    /// `val`): duplicates are summed and each row's columns sorted; `index` is the index type.
    pub fn from_coo(
        &self,
        (rows, cols): (u64, u64),
        row: &Array,
        col: &Array,
        val: &Array,
        index: DType,
    ) -> Result<CsrMatrix> {
        let (r, c, v) = (row.store()?, col.store()?, val.store()?);
        matrix(sp::from_coo(rows, cols, r, c, v, wit_dtype(index)))
    }

    /// A matrix from the application's COO triplets, with values of type `dtype`.
    pub fn from_triplets(
        &self,
        (rows, cols): (u64, u64),
        (row, col, val): (&[u64], &[u64], &[f64]),
        dtype: DType,
        index: DType,
    ) -> Result<CsrMatrix> {
        let r = self.vector(row.iter().map(|&v| v as f64), DType::I64);
        let c = self.vector(col.iter().map(|&v| v as f64), DType::I64);
        let v = self.vector(val.iter().copied(), dtype);
        self.from_coo((rows, cols), &r, &c, &v, index)
    }

    /// A matrix from SciPy-style CSR arrays: `indptr` (`rows + 1` entries, non-decreasing,
    /// from 0 to the number of entries; its type is the index type), `indices` and `data`.
    pub fn from_csr_arrays(
        &self,
        (rows, cols): (u64, u64),
        indptr: &Array,
        indices: &Array,
        data: &Array,
    ) -> Result<CsrMatrix> {
        let (p, i, d) = (indptr.store()?, indices.store()?, data.store()?);
        matrix(sp::from_csr_arrays(rows, cols, p, i, d))
    }

    /// The 5-point Laplacian on a `g` x `g` grid (4 on the diagonal, -1 per neighbour,
    /// row-major unknowns), built by tasks.
    pub fn poisson2d(&self, g: u64, dtype: DType, index: DType) -> Result<CsrMatrix> {
        matrix(sp::poisson2d(g, wit_dtype(dtype), wit_dtype(index)))
    }

    /// The 7-point Laplacian on a `g` x `g` x `g` grid, built by tasks.
    pub fn poisson3d(&self, g: u64, dtype: DType, index: DType) -> Result<CsrMatrix> {
        matrix(sp::poisson3d(g, wit_dtype(dtype), wit_dtype(index)))
    }
}

impl CsrMatrix {
    /// `(rows, cols)`.
    pub fn shape(&self) -> (u64, u64) {
        (self.rows, self.cols)
    }

    /// The number of stored entries.
    pub fn nnz(&self) -> Result<u64> {
        Ok(self.crd.shape()?.first().copied().unwrap_or(0))
    }

    /// The value type.
    pub fn dtype(&self) -> Result<DType> {
        self.vals.dtype()
    }

    /// The `(rows, 2)` row ranges.
    pub fn pos(&self) -> &Array {
        &self.pos
    }

    /// The column of each entry.
    pub fn crd(&self) -> &Array {
        &self.crd
    }

    /// The value of each entry.
    pub fn vals(&self) -> &Array {
        &self.vals
    }

    /// The order in which [`CsrMatrix::matvec`] sums each row.
    pub fn row_order(&self) -> RowOrder {
        self.order
    }

    /// The same matrix (its stores shared) whose products sum each row in `order`.
    pub fn with_row_order(&self, order: RowOrder) -> CsrMatrix {
        CsrMatrix {
            order,
            ..self.clone()
        }
    }

    /// The same matrix with `i32` or `i64` indices (the values are shared).
    pub fn with_index_type(&self, index: DType) -> Result<CsrMatrix> {
        let fits = match index {
            DType::I64 => true,
            DType::I32 => self.nnz()?.max(self.cols) <= i32::MAX as u64,
            other => {
                return Err(error(
                    "with-index-type",
                    format!("the index type must be i32 or i64, not {other}"),
                ));
            }
        };
        if !fits {
            return Err(error(
                "with-index-type",
                format!(
                    "a matrix of {} entries and {} columns needs i64 indices",
                    self.nnz()?,
                    self.cols
                ),
            ));
        }
        let (pos, crd) = (self.pos.astype(index), self.crd.astype(index));
        pos.check()?;
        crd.check()?;
        Ok(CsrMatrix {
            pos,
            crd,
            hull: Rc::default(),
            ..self.clone()
        })
    }

    /// The three stores, or the error one of them carries.
    fn stores(&self) -> Result<(&Store, &Store, &Store)> {
        Ok((self.pos.store()?, self.crd.store()?, self.vals.store()?))
    }

    /// A matrix with this one's pattern and other values.
    fn with_vals(&self, vals: Array) -> Result<CsrMatrix> {
        vals.check()?;
        Ok(CsrMatrix {
            vals,
            ..self.clone()
        })
    }

    /// `A @ x` (SciPy's `A @ x`), as a new vector, each row summed in [`Self::row_order`].
    pub fn matvec(&self, x: &Array) -> Array {
        let hull = match self.column_hull() {
            Ok(h) => h,
            Err(e) => return Array::failed(Rc::new(e)),
        };
        let order = match self.order {
            RowOrder::Sequential => sp::RowOrder::Sequential,
            RowOrder::Lanes => sp::RowOrder::Lanes,
        };
        let called = (|| {
            let (p, c, v) = self.stores()?;
            let (x, h) = (x.store()?, hull.store()?);
            Ok(sp::spmv(p, c, v, self.cols, x, h, order))
        })();
        match called {
            Ok(r) => Array::made(r),
            Err(e) => Array::failed(Rc::new(e)),
        }
    }

    /// The column hull, made on first use and shared by the matrices of this pattern: a
    /// `(rows, 2)` array of the index type whose row `r` is a range of columns holding every
    /// column of row `r`, with starts and ends that never decrease.
    pub fn column_hull(&self) -> Result<Array> {
        if let Some(hull) = self.hull.borrow().as_ref() {
            return Ok(hull.clone());
        }
        let hull = Array::made(sp::column_hull(
            self.pos.store()?,
            self.crd.store()?,
            self.cols,
        ));
        hull.check()?;
        *self.hull.borrow_mut() = Some(hull.clone());
        Ok(hull)
    }

    /// Calls an export that takes the matrix's three stores and its shape and returns an
    /// array.
    fn array_export(
        &self,
        call: impl FnOnce(&Store, &Store, &Store, u64, u64) -> std::result::Result<Store, wit::Error>,
    ) -> Array {
        match self.stores() {
            Ok((p, c, v)) => Array::made(call(p, c, v, self.rows, self.cols)),
            Err(e) => Array::failed(Rc::new(e)),
        }
    }

    /// The diagonal.
    pub fn diagonal(&self) -> Array {
        self.array_export(sp::diagonal)
    }

    /// The dense `rows` x `cols` array (for small matrices).
    pub fn to_dense(&self) -> Array {
        self.array_export(sp::to_dense)
    }

    /// `s * A` (same pattern, sharing this matrix's `pos` and `crd`).
    pub fn scale(&self, s: f64) -> Result<CsrMatrix> {
        let vals = Array::made(sp::scale(self.vals.store()?, s));
        self.with_vals(vals)
    }

    /// `diag(d) @ A` (SciPy's `sparse.diags(d) @ A`): each entry of row `r` times `d[r]`.
    pub fn scale_rows(&self, d: &Array) -> Result<CsrMatrix> {
        let (p, c, v) = self.stores()?;
        let vals = Array::made(sp::scale_rows(p, c, v, d.store()?));
        self.with_vals(vals)
    }

    /// `A @ diag(d)` (SciPy's `A @ sparse.diags(d)`): each entry of column `c` times `d[c]`,
    /// the values times `d` gathered at each entry's column.
    pub fn scale_columns(&self, d: &Array) -> Result<CsrMatrix> {
        let want = self.dtype()?;
        self.check_vector(
            "scale-columns",
            d,
            self.cols,
            |t| t == want,
            || {
                format!(
                    "the diagonal must be a {want} vector of one value per column ({})",
                    self.cols
                )
            },
        )?;
        let vals = &self.vals * &d.take(&self.crd, None);
        self.with_vals(vals)
    }

    /// A matrix with this one's pattern and `data` as its values: a vector of one value per
    /// stored entry, `f32` or `f64`.
    pub fn with_data(&self, data: &Array) -> Result<CsrMatrix> {
        let nnz = self.nnz()?;
        self.check_vector("with-data", data, nnz, DType::is_float, || {
            format!(
                "the data must be a vector of f32 or f64 with one value per stored entry ({nnz})"
            )
        })?;
        self.with_vals(data.clone())
    }

    /// Checks that `a` is a vector of `len` values whose dtype `dtype_ok` takes.
    fn check_vector(
        &self,
        op: &str,
        a: &Array,
        len: u64,
        dtype_ok: impl Fn(DType) -> bool,
        wants: impl FnOnce() -> String,
    ) -> Result<()> {
        let (shape, dtype) = (a.shape()?, a.dtype()?);
        if shape == [len] && dtype_ok(dtype) {
            return Ok(());
        }
        Err(error(
            op,
            format!(
                "{}, not {dtype} of shape {}",
                wants(),
                weft_ir::shape::tuple(&shape)
            ),
        ))
    }

    /// NumPy's `sum(axis)` of the dense matrix: every entry (`None`), each column's entries
    /// (`Some(0)` or `Some(-2)`) or each row's (`Some(1)` or `Some(-1)`).
    pub fn sum(&self, axis: Option<i64>) -> Result<Array> {
        let np = Numeric;
        let dtype = self.dtype()?;
        match axis {
            None => Ok(self.vals.sum()),
            Some(1 | -1) => Ok(self.matvec(&np.ones(&[self.cols], dtype))),
            Some(0 | -2) => Ok(self.transpose()?.matvec(&np.ones(&[self.rows], dtype))),
            Some(a) => Err(error(
                "sum",
                format!("axis {a} is out of bounds for array of dimension 2"),
            )),
        }
    }

    /// `A + B` for two matrices of one shape and one sparsity pattern.
    pub fn add(&self, other: &CsrMatrix) -> Result<CsrMatrix> {
        if self.shape() != other.shape() {
            return Err(error(
                "add",
                format!(
                    "inconsistent shapes ({}, {}) and ({}, {})",
                    self.rows, self.cols, other.rows, other.cols
                ),
            ));
        }
        let (ap, ac, av) = self.stores()?;
        let (bp, bc, bv) = other.stores()?;
        let vals = Array::made(sp::add(ap, ac, av, bp, bc, bv));
        self.with_vals(vals)
    }

    /// The transpose, as a new matrix with sorted columns.
    pub fn transpose(&self) -> Result<CsrMatrix> {
        let (p, c, v) = self.stores()?;
        matrix(sp::transpose(p, c, v, self.rows, self.cols))
    }
}
