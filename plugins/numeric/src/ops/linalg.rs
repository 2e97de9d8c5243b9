//! Dense linear algebra: `matvec`, `matmul` and `diag`.
//!
//! Most products split the output's rows over the launch and hand each point the matching
//! rows of `A` (`Launch::rows`) and the whole of the other operand; the products of a
//! transposed tall matrix (`matmul_rows`) and of a wide matrix with few rows and a vector
//! (`vecmat`) are launched over the long inner dimension instead, each point reducing into
//! the whole output.

use weft_sdk::{Error, Launch, Partition, Privilege, Store, Task, Tiling};

use super::{Array, create, fail, host_error, same_dtype};
use crate::catalog;
use crate::keys::Key;
use crate::shapes;

/// The rows from which a wide matrix multiplies a vector by row products (the canonical
/// product) rather than by columns (`vecmat`).
const ROWS_ENOUGH: u64 = 64;

/// The most elements of `C = X.T @ B` (16K: 128 KiB of `f64`, within a core's L2) for which
/// the product is launched over the rows of `X` and `B`, each point adding its outer product
/// into the whole of `C` (`matmul_rows`).
const OUTER_ELEMENTS: u64 = 1 << 14;

/// The least inner dimension for `matmul_rows`: rows enough to spread over the threads.
const OUTER_ROWS: u64 = 4096;

/// `A @ x` for an `(m, n)` matrix and an `(n,)` vector of one float dtype: an `(m,)` vector.
pub fn matvec(a: &Array<'_>, x: &Array<'_>) -> Result<Store, Error> {
    let name = "matvec";
    let (&[m, n], &[k]) = (a.shape.as_slice(), x.shape.as_slice()) else {
        return Err(fail(
            name,
            format!(
                "needs a 2-d matrix and a 1-d vector, got shapes {} and {}",
                shapes::show(&a.shape),
                shapes::show(&x.shape)
            ),
        ));
    };
    if n != k {
        return Err(mismatch(name, n, k));
    }
    let dtype = same_dtype(name, a, x)?;
    catalog::LINALG_RULE
        .check(name, dtype)
        .map_err(weft_sdk::error)?;
    // A wide matrix with few rows goes by columns (`vecmat`): launched over `x`, it fuses with
    // the task that made `x`. A matrix stored by rows takes the row products (`matvec`, the
    // lane order, or by parts for long rows), which fuse too. Any other (a transpose) takes
    // the canonical product with `x` as `B` (`(k, 1)`, so `B.T` is `x` as one row; each
    // element one chain of `fma`s), run by the CPU back end's product routine, which streams
    // down the columns of a matrix stored by columns instead of striding along its rows. By
    // columns, a wide matrix's product strided across every row (NPBench's atax, a 10,000 x
    // 12,500 `A @ x`: 1.1 s).
    if m < n && m < ROWS_ENOUGH {
        return vecmat(a, x, dtype);
    }
    let stored_by_rows = a
        .store
        .reshape(&[m.saturating_mul(n)])
        .map_err(host_error(name))?
        .is_some();
    if stored_by_rows {
        let y = create(name, &[m], dtype)?;
        let launch = Launch::preferred(&[m]);
        // Rows longer than `PARTS_FROM` terms are summed by parts, an order that a grid of
        // ranks may split along `k` with the same bits (`weft_ir::matvec`).
        let key = if n > weft_sdk::ir::matvec::PARTS_FROM {
            Key::MatvecParts { dtype }
        } else {
            Key::Matvec { dtype }
        };
        Task::new(key.to_string(), &launch)
            .arg(a.store, launch.rows(&a.shape), Privilege::Read)
            .arg(x.store, Partition::None, Privilege::Read)
            .arg(&y, launch.tiled(), Privilege::Write)
            .submit()
            .map_err(host_error(name))?;
        return Ok(y);
    }
    let row = match x.store.reshape(&[1, k]).map_err(host_error(name))? {
        Some(row) => row,
        None => {
            let dense = super::elementwise::copy(x)?;
            dense
                .reshape(&[1, k])
                .map_err(host_error(name))?
                .ok_or_else(|| fail(name, "the host could not view a vector as one row"))?
        }
    };
    let c = create(name, &[m, 1], dtype)?;
    let launch = Launch::preferred(&[m, 1]);
    Task::new(Key::Matmul { dtype }.to_string(), &launch)
        .arg(a.store, launch.rows(&a.shape), Privilege::Read)
        .arg(&row, Partition::None, Privilege::Read)
        .arg(&c, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    c.reshape(&[m])
        .map_err(host_error(name))?
        .ok_or_else(|| fail(name, "the host could not view a column as a vector"))
}

/// `a @ b` with NumPy's rules for 1-d and 2-d operands: two vectors give their dot product
/// (0-d), a matrix and a vector a vector, a vector and a matrix `b.T @ a`, two matrices a
/// matrix. Transposed operands are read in place through their strides.
pub fn matmul(a: &Array<'_>, b: &Array<'_>) -> Result<Store, Error> {
    let name = "matmul";
    match (a.shape.len(), b.shape.len()) {
        (1, 1) => super::reductions::dot(a, b),
        (2, 1) => matvec(a, b),
        (1, 2) => {
            let bt = b.store.permute(&[1, 0]).map_err(host_error(name))?;
            matvec(&Array::new(&bt), a)
        }
        (2, 2) => matmul_2d(a, b),
        _ => Err(fail(
            name,
            format!(
                "operands of shapes {} and {}: only 1-d and 2-d operands are supported",
                shapes::tuple(&a.shape),
                shapes::tuple(&b.shape)
            ),
        )),
    }
}

/// `A @ B` for an `(m, k)` and a `(k, n)` matrix of one float dtype: an `(m, n)` matrix,
/// each element the lane-order sum of a row of `A` times a row of `B.T` (the canonical product,
/// `weft_ir::product`).
fn matmul_2d(a: &Array<'_>, b: &Array<'_>) -> Result<Store, Error> {
    let name = "matmul";
    let (&[m, k], &[k2, n]) = (a.shape.as_slice(), b.shape.as_slice()) else {
        return Err(fail(
            name,
            format!(
                "needs two 2-d matrices, got shapes {} and {}",
                shapes::show(&a.shape),
                shapes::show(&b.shape)
            ),
        ));
    };
    if k != k2 {
        return Err(mismatch(name, k, k2));
    }
    let dtype = same_dtype(name, a, b)?;
    catalog::LINALG_RULE
        .check(name, dtype)
        .map_err(weft_sdk::error)?;
    if let Some(c) = outer_products(a, b, dtype)? {
        return Ok(c);
    }
    // `B.T` as a view: the CPU back end packs its rows itself (`weft_ir::product`).
    let bt = b.store.permute(&[1, 0]).map_err(host_error(name))?;
    let c = create(name, &[m, n], dtype)?;
    let launch = Launch::preferred(&[m, n]);
    Task::new(Key::Matmul { dtype }.to_string(), &launch)
        .arg(a.store, launch.rows(&a.shape), Privilege::Read)
        .arg(&bt, Partition::None, Privilege::Read)
        .arg(&c, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(c)
}

/// `A @ B` as `X.T @ B` launched over the rows of `X = A.T` and `B`, when `X` is stored by rows
/// (`A` is the transpose of a tall matrix, as in k-means' `onehot.T @ x`), the inner dimension
/// is long and `C` is small: each point adds `X[i, r] * B[i, j]` into every `C[r, j]`, so the
/// long dimension is read once, by rows, on every thread. Reading `A`'s rows across the
/// stride of `X` instead, one element of `C` per point, took 11 s for a (64, 10^6) `A` and a
/// (10^6, 32) `B` (NumPy: 0.1 s). `None` where the product does not qualify.
fn outer_products(
    a: &Array<'_>,
    b: &Array<'_>,
    dtype: weft_sdk::ir::DType,
) -> Result<Option<Store>, Error> {
    let name = "matmul";
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    if m.saturating_mul(n) > OUTER_ELEMENTS || k < OUTER_ROWS {
        return Ok(None);
    }
    let x = a.store.permute(&[1, 0]).map_err(host_error(name))?;
    if x.reshape(&[k.saturating_mul(m)])
        .map_err(host_error(name))?
        .is_none()
    {
        return Ok(None);
    }
    // `X[:, 0]`: the loop's rows (a rank-1 loop, so that `C` reduces by element trees).
    let rows = x
        .strided(&[0, 0], &[1, 1], &[k, 1])
        .map_err(host_error(name))?
        .reshape(&[k])
        .map_err(host_error(name))?
        .ok_or_else(|| fail(name, "the host could not view a column as a vector"))?;
    let c = super::reductions::identity_store(name, &[m, n], dtype, weft_sdk::ir::ReduceOp::Sum)?;
    let launch = Launch::preferred(&[k]);
    Task::new(Key::MatmulRows { dtype }.to_string(), &launch)
        .arg(&rows, launch.tiled(), Privilege::Read)
        .arg(&x, launch.rows(&[k, m]), Privilege::Read)
        .arg(b.store, launch.rows(&[k, n]), Privilege::Read)
        .arg(
            &c,
            Partition::None,
            Privilege::Reduce(weft_sdk::wit_reduce_op(weft_sdk::ir::ReduceOp::Sum)),
        )
        .submit()
        .map_err(host_error(name))?;
    Ok(Some(c))
}

/// `A @ x` for a wide `(m, n)` matrix (`m < n`, such as the transpose of a tall one): a task
/// over `x`'s tiling, each point adding its columns' share `A[:, i] * x[i]` into the whole
/// of `y`. Its launch is that of the element-wise tasks over `x`, so it fuses with the task
/// that produced `x`.
///
/// When `A`'s transpose is stored by rows (`A` is the transpose of a tall matrix, as in
/// `X.T @ r`), the task reads that transpose instead, a row per point (`vecmat_rows`): the
/// same sums in the same order, from contiguous memory.
fn vecmat(a: &Array<'_>, x: &Array<'_>, dtype: weft_sdk::ir::DType) -> Result<Store, Error> {
    let name = "matvec";
    let (m, n) = (a.shape[0], a.shape[1]);
    let y = super::reductions::identity_store(name, &[m], dtype, weft_sdk::ir::ReduceOp::Sum)?;
    let launch = Launch::preferred(&x.shape);
    let b = a.store.permute(&[1, 0]).map_err(host_error(name))?;
    let by_rows = b
        .reshape(&[m.saturating_mul(n)])
        .map_err(host_error(name))?
        .is_some();
    let (key, matrix, partition) = if by_rows {
        (Key::VecmatRows { dtype }, &b, launch.rows(&[n, m]))
    } else {
        let mut columns = launch.tiling.clone();
        columns.tile.insert(0, m);
        columns.offset.insert(0, 0);
        columns.projection.insert(0, None);
        (Key::Vecmat { dtype }, a.store, Partition::Tiling(columns))
    };
    Task::new(key.to_string(), &launch)
        .arg(matrix, partition, Privilege::Read)
        .arg(x.store, launch.tiled(), Privilege::Read)
        .arg(
            &y,
            Partition::None,
            Privilege::Reduce(weft_sdk::wit_reduce_op(weft_sdk::ir::ReduceOp::Sum)),
        )
        .submit()
        .map_err(host_error(name))?;
    Ok(y)
}

/// The diagonal of an `(m, n)` matrix as a vector of length `min(m, n)`, or, for a vector
/// of length `n`, the `(n, n)` matrix with it on the diagonal and zeros elsewhere.
pub fn diag(a: &Array<'_>) -> Result<Store, Error> {
    let name = "diag";
    let dtype = a.dtype;
    let (key, shape) = match *a.shape.as_slice() {
        [m, n] => (Key::DiagExtract { dtype }, vec![m.min(n)]),
        [n] => (Key::DiagEmbed { dtype }, vec![n, n]),
        _ => {
            return Err(fail(
                name,
                format!(
                    "needs a 1-d or 2-d array, got shape {}",
                    shapes::show(&a.shape)
                ),
            ));
        }
    };
    let out = create(name, &shape, dtype)?;
    let launch = Launch::preferred(&shape);
    // Extracting, each point reads only the diagonal block of its elements (tile `t` of the
    // output: the `t x t` block at `(o, o)`); embedding, each reads the whole vector.
    let input = match (
        &key,
        launch.tiling.tile.first(),
        launch.tiling.projection.first(),
    ) {
        (Key::DiagExtract { .. }, Some(&t), Some(&p)) => Partition::Tiling(Tiling {
            tile: vec![t, t],
            offset: vec![0, 0],
            projection: vec![p, p],
        }),
        _ => Partition::None,
    };
    Task::new(key.to_string(), &launch)
        .arg(a.store, input, Privilege::Read)
        .arg(&out, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// NumPy's error for operands whose inner dimensions differ: the first operand's `k`
/// columns against the second's `k2` rows.
fn mismatch(name: &str, k: u64, k2: u64) -> Error {
    fail(
        name,
        format!(
            "Input operand 1 has a mismatch in its core dimension 0, with gufunc signature \
             (n?,k),(k,m?)->(n?,m?) (size {k2} is different from {k})"
        ),
    )
}
