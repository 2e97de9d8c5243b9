//! A typed, SciPy-sparse-like facade over the sparse plugin: [`Sparse`] and [`CsrMatrix`].
//!
//! The sparse plugin shares the numeric plugin's runtime, so numeric and sparse tasks share one
//! window and fuse with each other (an SpMV with the dot product after it, for example).
//!
//! ```no_run
//! # use weft::{Config, Numeric, Runtime, Sparse};
//! # use weft_ir::DType;
//! # fn demo(numeric_component: &[u8], sparse_component: &[u8]) -> weft::Result<f64> {
//! // The components: e.g. `weft_plugin_artifacts::NUMERIC` and `SPARSE`.
//! let np = Numeric::new(Runtime::new(Config::from_env())?, numeric_component)?;
//! let sp = Sparse::new(&np, sparse_component)?;
//! let a = sp.poisson2d(64, DType::F64, DType::I32)?;
//! let x = np.ones(&[64 * 64], DType::F64);
//! let y = a.matvec(&x);
//! let r = (&y - &x).norm().item()?;
//! # Ok(r)
//! # }
//! ```
//!
//! Operations that return a vector return an [`Array`] (poisoned on error, as numeric's do);
//! operations that return a matrix return a `Result`.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use wasmtime::component::Resource;
use weft_ir::DType;

use crate::numeric::{Array, Numeric};
use crate::typed_exports::TypedExports;
use crate::{Error, Result};
use weft_plugin::bindings::base::weft::plugin::types as wit;
use weft_plugin::bindings::sparse::exports::weft::plugin::sparse::{
    self as api, Guest, GuestIndices,
};
use weft_plugin::convert;
use weft_plugin::imports::{PluginState, StoreRes};
use weft_runtime::{StoreHandle, StoreId};

/// The sparse plugin, loaded into a numeric plugin's runtime.
#[derive(Clone)]
pub struct Sparse {
    np: Numeric,
    exports: Rc<TypedExports<GuestIndices>>,
}

/// The order in which [`CsrMatrix::matvec`] sums each row's terms. Either order gives the
/// same bits on every thread count, piece count and SIMD path (and rank count); they differ
/// from each other on rows of eight entries or more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowOrder {
    /// One entry after another, as SciPy sums a row: scalar code on the CPU. The default:
    /// the lane order measured slower on short rows, and on long rows in one of the states
    /// of the machine we measure on (`docs/design.md`, *Row order of the `sparse` plugin*).
    #[default]
    Sequential,
    /// The canonical lane order of `weft_ir::builder::BodyBuilder::fold_lanes`: eight
    /// interleaved partials over the row's whole blocks of eight, their fixed tree, then the
    /// rest in order. The CPU back end runs it as vectors that gather `x`, in AVX2 or
    /// AVX-512 code for rows of 64 entries or more.
    Lanes,
}

/// A CSR matrix of the sparse plugin: its three stores, its shape, and the order in which its
/// products sum each row.
///
/// `pos` has shape `(rows, 2)`: row `i`'s entries are `pos[i, 0]..pos[i, 1]` of `crd` (their
/// columns) and `vals` (their values).
#[derive(Clone, Debug)]
pub struct CsrMatrix {
    sp: Sparse,
    pos: Array,
    crd: Array,
    vals: Array,
    rows: u64,
    cols: u64,
    /// How [`CsrMatrix::matvec`] sums each row.
    order: RowOrder,
    /// The column hull (`column-hull`), made by the first product and shared by the matrices
    /// of this pattern: it gives each point of a product its range of `x`.
    hull: Rc<RefCell<Option<Array>>>,
}

impl std::fmt::Debug for Sparse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sparse").finish_non_exhaustive()
    }
}

/// The lent handle `i` again (a borrow handle is its table index; each call takes one by value).
fn b(lent: &[Resource<StoreRes>], i: usize) -> Resource<StoreRes> {
    Resource::new_borrow(lent[i].rep())
}

/// The element bytes of `values` as `dtype` (integers for index types).
fn bytes_of(values: impl Iterator<Item = f64>, dtype: DType) -> Vec<u8> {
    weft_ir::elements::from_f64s(values, dtype)
}

impl Sparse {
    /// Loads the sparse plugin (the bytes of its component) into `np`'s runtime.
    pub fn new(np: &Numeric, component: &[u8]) -> Result<Sparse> {
        let exports = TypedExports::load(&mut np.runtime_cell().borrow_mut(), component, "sparse")?;
        Ok(Sparse {
            np: np.clone(),
            exports: Rc::new(exports),
        })
    }

    /// The numeric plugin whose runtime this one shares.
    pub fn numeric(&self) -> &Numeric {
        &self.np
    }

    /// Calls a sparse export with the stores `ids` lent to it; `f` gets the typed exports, the
    /// plugin's store and the lent handles.
    #[track_caller]
    fn call<R>(
        &self,
        name: &str,
        ids: &[StoreId],
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            &[Resource<StoreRes>],
        ) -> wasmtime::Result<std::result::Result<R, wit::Error>>,
        finish: impl FnOnce(&mut wasmtime::Store<PluginState>, R) -> wasmtime::Result<Vec<StoreId>>,
    ) -> Result<Vec<StoreHandle>> {
        // The tasks the call submits, and their errors, name the application's call site.
        let _site = self.np.site_guard(std::panic::Location::caller());
        let mut rt = self.np.runtime_cell().borrow_mut();
        let called = self.exports.call(&mut rt, name, |guest, store| {
            let lent = ids
                .iter()
                .map(|&id| store.data_mut().lend(id))
                .collect::<wasmtime::Result<Vec<_>>>()?;
            Ok(match f(guest, store, &lent)? {
                Ok(r) => Ok(finish(store, r)?),
                Err(e) => Err(e),
            })
        });
        let ids = match called {
            Ok(ids) => ids,
            Err(e) => {
                drop(rt);
                return Err(self.np.located(e));
            }
        };
        ids.into_iter().map(|id| rt.adopt(id)).collect()
    }

    /// Calls an export that returns one store.
    #[track_caller]
    fn one(
        &self,
        name: &str,
        ids: &[StoreId],
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            &[Resource<StoreRes>],
        ) -> wasmtime::Result<std::result::Result<Resource<StoreRes>, wit::Error>>,
    ) -> Array {
        let result = self
            .call(name, ids, f, |store, r| {
                Ok(vec![store.data_mut().take(&r)?])
            })
            .and_then(|mut v| {
                v.pop()
                    .ok_or_else(|| Error::Usage(format!("{name}: no result")))
            });
        self.np.wrap(result)
    }

    /// Calls an export that returns a matrix.
    #[track_caller]
    fn matrix(
        &self,
        name: &str,
        ids: &[StoreId],
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            &[Resource<StoreRes>],
        ) -> wasmtime::Result<std::result::Result<api::Csr, wit::Error>>,
    ) -> Result<CsrMatrix> {
        let shape = RefCell::new((0, 0));
        let handles = self.call(name, ids, f, |store, csr| {
            *shape.borrow_mut() = (csr.rows, csr.cols);
            let data = store.data_mut();
            Ok(vec![
                data.take(&csr.pos)?,
                data.take(&csr.crd)?,
                data.take(&csr.vals)?,
            ])
        })?;
        let [pos, crd, vals]: [StoreHandle; 3] = handles
            .try_into()
            .map_err(|_| Error::Usage(format!("{name}: the plugin returned no matrix")))?;
        let (rows, cols) = shape.into_inner();
        Ok(CsrMatrix {
            sp: self.clone(),
            pos: self.np.wrap(Ok(pos)),
            crd: self.np.wrap(Ok(crd)),
            vals: self.np.wrap(Ok(vals)),
            rows,
            cols,
            order: RowOrder::default(),
            hull: Rc::default(),
        })
    }

    /// A vector store from host values, as `dtype`.
    fn vector(&self, values: impl ExactSizeIterator<Item = f64>, dtype: DType) -> Array {
        let n = values.len() as u64;
        let bytes = bytes_of(values, dtype);
        let h = self
            .np
            .runtime_cell()
            .borrow_mut()
            .store_from_bytes(&[n], dtype, &bytes);
        self.np.wrap(h)
    }

    /// A matrix from COO triplets (vectors of one length: integer `row` and `col`, float
    /// `val`): duplicates are summed and each row's columns sorted; `index` is the index type.
    #[track_caller]
    pub fn from_coo(
        &self,
        (rows, cols): (u64, u64),
        row: &Array,
        col: &Array,
        val: &Array,
        index: DType,
    ) -> Result<CsrMatrix> {
        let ids = [row.handle()?.id(), col.handle()?.id(), val.handle()?.id()];
        let index = convert::wit_dtype(index);
        self.matrix("from-coo", &ids, |g, s, l| {
            g.call_from_coo(s, rows, cols, b(l, 0), b(l, 1), b(l, 2), index)
        })
    }

    /// A matrix from host COO triplets, with values of type `dtype`.
    #[track_caller]
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
    #[track_caller]
    pub fn from_csr_arrays(
        &self,
        (rows, cols): (u64, u64),
        indptr: &Array,
        indices: &Array,
        data: &Array,
    ) -> Result<CsrMatrix> {
        let ids = [
            indptr.handle()?.id(),
            indices.handle()?.id(),
            data.handle()?.id(),
        ];
        self.matrix("from-csr-arrays", &ids, |g, s, l| {
            g.call_from_csr_arrays(s, rows, cols, b(l, 0), b(l, 1), b(l, 2))
        })
    }

    /// A matrix from a Matrix Market file (`coordinate`, `real`/`integer`/`pattern`,
    /// `general`/`symmetric`/`skew-symmetric`), read here on the host: the plugin never sees a
    /// file.
    #[track_caller]
    pub fn from_matrix_market(&self, path: &Path, dtype: DType, index: DType) -> Result<CsrMatrix> {
        let coo = weft_io::matrix_market::read(path)?;
        self.from_triplets(
            (coo.rows, coo.cols),
            (&coo.row, &coo.col, &coo.val),
            dtype,
            index,
        )
    }

    /// The 5-point Laplacian on a `g` x `g` grid (4 on the diagonal, -1 per neighbour,
    /// row-major unknowns), built by tasks.
    #[track_caller]
    pub fn poisson2d(&self, g: u64, dtype: DType, index: DType) -> Result<CsrMatrix> {
        let (d, i) = (convert::wit_dtype(dtype), convert::wit_dtype(index));
        self.matrix("poisson2d", &[], |gst, s, _| gst.call_poisson2d(s, g, d, i))
    }

    /// The 7-point Laplacian on a `g` x `g` x `g` grid, built by tasks.
    #[track_caller]
    pub fn poisson3d(&self, g: u64, dtype: DType, index: DType) -> Result<CsrMatrix> {
        let (d, i) = (convert::wit_dtype(dtype), convert::wit_dtype(index));
        self.matrix("poisson3d", &[], |gst, s, _| gst.call_poisson3d(s, g, d, i))
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

    /// The order in which [`CsrMatrix::matvec`] sums each row ([`RowOrder::Sequential`] for
    /// every matrix the plugin makes).
    pub fn row_order(&self) -> RowOrder {
        self.order
    }

    /// The same matrix (its stores shared) whose products sum each row in `order`. Matrices
    /// made from it with its pattern (`scale`, `add` as the left operand, `with_index_type`)
    /// keep the order; the others start in [`RowOrder::Sequential`].
    pub fn with_row_order(&self, order: RowOrder) -> CsrMatrix {
        CsrMatrix {
            order,
            ..self.clone()
        }
    }

    /// The same matrix with `i32` or `i64` indices (the values are shared).
    #[track_caller]
    pub fn with_index_type(&self, index: DType) -> Result<CsrMatrix> {
        let fits = match index {
            DType::I64 => true,
            DType::I32 => self.nnz()?.max(self.cols) <= i32::MAX as u64,
            other => {
                return Err(self.error(
                    "with-index-type",
                    format!("the index type must be i32 or i64, not {other}"),
                ));
            }
        };
        if !fits {
            return Err(self.error(
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
            // The hull is of the index type.
            hull: Rc::default(),
            ..self.clone()
        })
    }

    fn ids(&self) -> Result<[StoreId; 3]> {
        Ok([
            self.pos.handle()?.id(),
            self.crd.handle()?.id(),
            self.vals.handle()?.id(),
        ])
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
    #[track_caller]
    pub fn matvec(&self, x: &Array) -> Array {
        let hull = self.column_hull().and_then(|h| Ok(h.handle()?.id()));
        if let Err(e) = self.sp.np.check_same(x.numeric()) {
            return self.sp.np.wrap(Err(crate::numeric::shared(&e)));
        }
        let ids = match (self.ids(), x.handle(), hull) {
            (Ok([p, c, v]), Ok(h), Ok(hull)) => [p, c, v, h.id(), hull],
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return self.sp.np.wrap(Err(e)),
        };
        let cols = self.cols;
        let order = match self.order {
            RowOrder::Sequential => api::RowOrder::Sequential,
            RowOrder::Lanes => api::RowOrder::Lanes,
        };
        self.sp.one("spmv", &ids, |g, s, l| {
            g.call_spmv(s, b(l, 0), b(l, 1), b(l, 2), cols, b(l, 3), b(l, 4), order)
        })
    }

    /// The column hull, made on first use and shared by the matrices of this pattern: a
    /// `(rows, 2)` array of the index type whose row `r` is a range of columns holding every
    /// column of row `r`, with starts and ends that never decrease, so that rows `a..=b` reach
    /// only columns `hull[a, 0]..hull[b, 1]`. Each point of a product reads that part of `x`.
    #[track_caller]
    pub fn column_hull(&self) -> Result<Array> {
        if let Some(hull) = self.hull.borrow().as_ref() {
            return Ok(hull.clone());
        }
        let ids = [self.pos.handle()?.id(), self.crd.handle()?.id()];
        let cols = self.cols;
        let hull = self.sp.one("column-hull", &ids, |g, s, l| {
            g.call_column_hull(s, b(l, 0), b(l, 1), cols)
        });
        hull.check()?;
        *self.hull.borrow_mut() = Some(hull.clone());
        Ok(hull)
    }

    /// The diagonal.
    #[track_caller]
    pub fn diagonal(&self) -> Array {
        self.array_export("diagonal", |g, s, l, rows, cols| {
            g.call_diagonal(s, b(l, 0), b(l, 1), b(l, 2), rows, cols)
        })
    }

    /// The dense `rows` x `cols` array (for small matrices).
    #[track_caller]
    pub fn to_dense(&self) -> Array {
        self.array_export("to-dense", |g, s, l, rows, cols| {
            g.call_to_dense(s, b(l, 0), b(l, 1), b(l, 2), rows, cols)
        })
    }

    /// Calls `name`, an export that takes the matrix's three stores (`pos`, `crd`, `vals`, lent
    /// in that order) and its shape, and returns an array.
    #[track_caller]
    fn array_export(
        &self,
        name: &str,
        call: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            &[Resource<StoreRes>],
            u64,
            u64,
        )
            -> wasmtime::Result<std::result::Result<Resource<StoreRes>, wit::Error>>,
    ) -> Array {
        let ids = match self.ids() {
            Ok(ids) => ids,
            Err(e) => return self.sp.np.wrap(Err(e)),
        };
        let (rows, cols) = (self.rows, self.cols);
        self.sp.one(name, &ids, |g, s, l| call(g, s, l, rows, cols))
    }

    /// `s * A` (same pattern, sharing this matrix's `pos` and `crd`).
    #[track_caller]
    pub fn scale(&self, s: f64) -> Result<CsrMatrix> {
        let id = self.vals.handle()?.id();
        let vals = self
            .sp
            .one("scale", &[id], |g, st, l| g.call_scale(st, b(l, 0), s));
        self.with_vals(vals)
    }

    /// `diag(d) @ A` (SciPy's `sparse.diags(d) @ A`): each entry of row `r` times `d[r]`, as a
    /// new matrix with this one's pattern. `d` is a vector of one value per row, of the
    /// matrix's value type.
    #[track_caller]
    pub fn scale_rows(&self, d: &Array) -> Result<CsrMatrix> {
        self.sp
            .np
            .check_same(d.numeric())
            .map_err(|e| crate::numeric::shared(&e))?;
        let [p, c, v] = self.ids()?;
        let dh = d.handle()?.id();
        let vals = self.sp.one("scale-rows", &[p, c, v, dh], |g, s, l| {
            g.call_scale_rows(s, b(l, 0), b(l, 1), b(l, 2), b(l, 3))
        });
        self.with_vals(vals)
    }

    /// `A @ diag(d)` (SciPy's `A @ sparse.diags(d)`): each entry of column `c` times `d[c]`,
    /// as a new matrix with this one's pattern: the values times `d` gathered at each entry's
    /// column, element-wise tasks that fuse with what uses them. `d` is a vector of one value
    /// per column, of the matrix's value type.
    #[track_caller]
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

    /// A matrix with this one's pattern and `data` as its values (SciPy's `with_data`, which
    /// also keeps the array itself, uncopied): a vector of one value per stored entry, `f32`
    /// or `f64`.
    #[track_caller]
    pub fn with_data(&self, data: &Array) -> Result<CsrMatrix> {
        let nnz = self.nnz()?;
        self.check_vector("with-data", data, nnz, DType::is_float, || {
            format!(
                "the data must be a vector of f32 or f64 with one value per stored entry ({nnz})"
            )
        })?;
        self.with_vals(data.clone())
    }

    /// Checks that `a` is an array of this matrix's runtime, a vector of `len` values whose
    /// dtype `dtype_ok` takes; otherwise an error of operation `op` that says what it `wants`
    /// and what `a` is.
    #[track_caller]
    fn check_vector(
        &self,
        op: &str,
        a: &Array,
        len: u64,
        dtype_ok: impl Fn(DType) -> bool,
        wants: impl FnOnce() -> String,
    ) -> Result<()> {
        self.sp
            .np
            .check_same(a.numeric())
            .map_err(|e| crate::numeric::shared(&e))?;
        let (shape, dtype) = (a.shape()?, a.dtype()?);
        if shape == [len] && dtype_ok(dtype) {
            return Ok(());
        }
        Err(self.error(
            op,
            format!(
                "{}, not {dtype} of shape {}",
                wants(),
                crate::numeric::shape_text(&shape)
            ),
        ))
    }

    /// NumPy's `sum(axis)` of the dense matrix: every entry (`None`, a 0-d array), each
    /// column's entries (`Some(0)` or `Some(-2)`, a vector of one sum per column, summed in row
    /// order through the transpose), or each row's (`Some(1)` or `Some(-1)`, one sum per row,
    /// in [`Self::row_order`]). SciPy returns the last two as `(1, cols)` and `(rows, 1)`
    /// matrices; these are vectors.
    #[track_caller]
    pub fn sum(&self, axis: Option<i64>) -> Result<Array> {
        let np = &self.sp.np;
        let dtype = self.dtype()?;
        match axis {
            None => Ok(self.vals.sum()),
            Some(1 | -1) => Ok(self.matvec(&np.ones(&[self.cols], dtype))),
            Some(0 | -2) => Ok(self.transpose()?.matvec(&np.ones(&[self.rows], dtype))),
            Some(a) => Err(self.error(
                "sum",
                format!("axis {a} is out of bounds for array of dimension 2"),
            )),
        }
    }

    /// An error of operation `op` of the sparse plugin's matrices, at the application's call.
    #[track_caller]
    fn error(&self, op: &str, message: String) -> Error {
        let e = Error::Plugin(weft_plugin::Error::Plugin {
            plugin: "sparse".into(),
            call: op.into(),
            message,
        });
        crate::numeric::at(std::panic::Location::caller(), e)
    }

    /// `A + B` for two matrices of one shape and one sparsity pattern.
    #[track_caller]
    pub fn add(&self, other: &CsrMatrix) -> Result<CsrMatrix> {
        if self.shape() != other.shape() {
            return Err(self.error(
                "add",
                format!(
                    "inconsistent shapes ({}, {}) and ({}, {})",
                    self.rows, self.cols, other.rows, other.cols
                ),
            ));
        }
        let [ap, ac, av] = self.ids()?;
        let [bp, bc, bv] = other.ids()?;
        let vals = self.sp.one("add", &[ap, ac, av, bp, bc, bv], |g, s, l| {
            g.call_add(s, b(l, 0), b(l, 1), b(l, 2), b(l, 3), b(l, 4), b(l, 5))
        });
        self.with_vals(vals)
    }

    /// The transpose, as a new matrix with sorted columns.
    #[track_caller]
    pub fn transpose(&self) -> Result<CsrMatrix> {
        let ids = self.ids()?;
        let (rows, cols) = (self.rows, self.cols);
        self.sp.matrix("transpose", &ids, |g, s, l| {
            g.call_transpose(s, b(l, 0), b(l, 1), b(l, 2), rows, cols)
        })
    }
}
