//! sparse: a SciPy-sparse-like library of CSR matrices for Weft.
//!
//! A matrix is three stores the host owns: `pos` (`(rows, 2)`, each row's range of entries, as
//! Legate Sparse keeps row pointers), `crd` (each entry's column) and `vals` (each entry's
//! value). Operations over rows are index tasks whose `crd` and `vals` arguments are
//! partitioned by the *image* of `pos`, so that they tile with the rows and fuse with the
//! numeric plugin's vector operations over the same rows. It uses only the public API of
//! `weft-sdk`, as a third-party plugin would.
//!
//! The crate is split by job:
//! - this file: the WIT bindings and the `Guest` implementations, which translate and dispatch;
//! - [`kernels`]: kernel keys and the kernel body of each;
//! - `tasks`: the operations that run as tasks (SpMV, diagonal, scaling, sums, dense
//!   conversion, the Poisson generators);
//! - `assemble`: the constructions computed in the plugin from data it reads (COO and CSR
//!   arrays, the transpose), which check their input and sort and merge entries.

#![deny(missing_docs)]

mod assemble;
pub mod kernels;
mod tasks;

use weft_sdk::{Dtype, Error, Store, ir_dtype};

use bindings::exports::weft::plugin::sparse::{self, Csr};

weft_sdk::plugin! {
    plugin: Sparse,
    name: "sparse",
    wit: "../../wit",
    world: "weft:plugin/sparse-plugin",
    kernels: |key| kernels::build(&key.parse()?),
}

/// The three stores and the shape of a matrix the plugin made.
pub(crate) struct Parts {
    pub pos: Store,
    pub crd: Store,
    pub vals: Store,
    pub rows: u64,
    pub cols: u64,
}

impl From<Parts> for Csr {
    fn from(p: Parts) -> Csr {
        Csr {
            pos: p.pos,
            crd: p.crd,
            vals: p.vals,
            rows: p.rows,
            cols: p.cols,
        }
    }
}

/// A matrix's stores as an operation reads them.
pub(crate) struct Matrix<'a> {
    pub pos: &'a Store,
    pub crd: &'a Store,
    pub vals: &'a Store,
}

impl sparse::Guest for Sparse {
    fn from_coo(
        rows: u64,
        cols: u64,
        row: &Store,
        col: &Store,
        val: &Store,
        index_type: Dtype,
    ) -> Result<Csr, Error> {
        assemble::from_coo(rows, cols, row, col, val, ir_dtype(index_type)).map(Csr::from)
    }

    fn from_csr_arrays(
        rows: u64,
        cols: u64,
        indptr: &Store,
        indices: &Store,
        data: &Store,
    ) -> Result<Csr, Error> {
        assemble::from_csr_arrays(rows, cols, indptr, indices, data).map(Csr::from)
    }

    fn poisson2d(g: u64, dtype: Dtype, index_type: Dtype) -> Result<Csr, Error> {
        tasks::poisson(2, g, ir_dtype(dtype), ir_dtype(index_type)).map(Csr::from)
    }

    fn poisson3d(g: u64, dtype: Dtype, index_type: Dtype) -> Result<Csr, Error> {
        tasks::poisson(3, g, ir_dtype(dtype), ir_dtype(index_type)).map(Csr::from)
    }

    fn column_hull(pos: &Store, crd: &Store, cols: u64) -> Result<Store, Error> {
        assemble::column_hull(pos, crd, cols)
    }

    fn spmv(
        pos: &Store,
        crd: &Store,
        vals: &Store,
        cols: u64,
        x: &Store,
        hull: &Store,
        order: sparse::RowOrder,
    ) -> Result<Store, Error> {
        let order = match order {
            sparse::RowOrder::Sequential => kernels::RowOrder::Sequential,
            sparse::RowOrder::Lanes => kernels::RowOrder::Lanes,
        };
        tasks::spmv(&Matrix { pos, crd, vals }, cols, x, hull, order)
    }

    fn diagonal(
        pos: &Store,
        crd: &Store,
        vals: &Store,
        rows: u64,
        cols: u64,
    ) -> Result<Store, Error> {
        tasks::diagonal(&Matrix { pos, crd, vals }, rows, cols)
    }

    fn scale_rows(pos: &Store, crd: &Store, vals: &Store, d: &Store) -> Result<Store, Error> {
        tasks::scale_rows(&Matrix { pos, crd, vals }, d)
    }

    fn scale(vals: &Store, s: f64) -> Result<Store, Error> {
        tasks::scale(vals, s)
    }

    fn add(
        a_pos: &Store,
        a_crd: &Store,
        a_vals: &Store,
        b_pos: &Store,
        b_crd: &Store,
        b_vals: &Store,
    ) -> Result<Store, Error> {
        let a = Matrix {
            pos: a_pos,
            crd: a_crd,
            vals: a_vals,
        };
        let b = Matrix {
            pos: b_pos,
            crd: b_crd,
            vals: b_vals,
        };
        tasks::add(&a, &b)
    }

    fn transpose(
        pos: &Store,
        crd: &Store,
        vals: &Store,
        rows: u64,
        cols: u64,
    ) -> Result<Csr, Error> {
        assemble::transpose(&Matrix { pos, crd, vals }, rows, cols).map(Csr::from)
    }

    fn to_dense(
        pos: &Store,
        crd: &Store,
        vals: &Store,
        rows: u64,
        cols: u64,
    ) -> Result<Store, Error> {
        tasks::to_dense(&Matrix { pos, crd, vals }, rows, cols)
    }
}
