//! The operations that run as index tasks.

use weft_sdk::host::{self, Store};
use weft_sdk::ir::DType;
use weft_sdk::ir::shape::tuple;
use weft_sdk::{Error, Launch, Partition, Privilege, Scalar, Task, error, ir_dtype, wit_dtype};

use crate::kernels::{Key, RowOrder};
use crate::{Matrix, Parts};

/// The checked facts of a matrix's stores.
pub(crate) struct Shape {
    pub rows: u64,
    pub nnz: u64,
    pub v: DType,
    pub i: DType,
}

/// Checks that `m` is a well-formed CSR triple and returns its facts; `op` names the operation
/// in errors.
pub(crate) fn check(m: &Matrix<'_>, op: &str) -> Result<Shape, Error> {
    let pos = m.pos.shape();
    let crd = m.crd.shape();
    let vals = m.vals.shape();
    let i = ir_dtype(m.pos.dtype());
    let v = ir_dtype(m.vals.dtype());
    if pos.len() != 2 || pos[1] != 2 {
        return Err(error(format!(
            "{op}: pos must have shape (rows, 2), not {}",
            tuple(&pos)
        )));
    }
    if crd.len() != 1 || vals.len() != 1 || crd != vals {
        return Err(error(format!(
            "{op}: crd and vals must be vectors of one length, not {} and {}",
            tuple(&crd),
            tuple(&vals)
        )));
    }
    if !matches!(i, DType::I32 | DType::I64) || ir_dtype(m.crd.dtype()) != i {
        return Err(error(format!(
            "{op}: pos and crd must share an index type (i32 or i64), not {i} and {}",
            ir_dtype(m.crd.dtype())
        )));
    }
    if !v.is_float() {
        return Err(error(format!("{op}: values must be f32 or f64, not {v}")));
    }
    Ok(Shape {
        rows: pos[0],
        nnz: crd[0],
        v,
        i,
    })
}

/// The launch over `rows` rows, the partition of `pos` by rows, and of `crd`/`vals` by image
/// (of argument 0, which is always `pos`).
fn row_launch(rows: u64) -> (Launch, Partition, Partition) {
    let launch = Launch::preferred(&[rows]);
    let by_rows = launch.rows(&[rows, 2]);
    (launch, by_rows, Partition::Image(0))
}

/// `A @ x`, each row summed in `order`, each point reading the range of `x` that `hull` (the
/// matrix's column hull) gives its rows.
pub(crate) fn spmv(
    m: &Matrix<'_>,
    cols: u64,
    x: &Store,
    hull: &Store,
    order: RowOrder,
) -> Result<Store, Error> {
    let s = check(m, "spmv")?;
    let hs = hull.shape();
    if hs != [s.rows, 2] || ir_dtype(hull.dtype()) != s.i {
        return Err(error(format!(
            "spmv: the column hull must be a {} store of shape ({}, 2), not {} of shape {}",
            s.i,
            s.rows,
            ir_dtype(hull.dtype()),
            tuple(&hs)
        )));
    }
    let xs = x.shape();
    if xs != [cols] {
        // SciPy's words for a vector of another length.
        return Err(error(match xs[..] {
            [k] => {
                format!("spmv: dimension mismatch with signature (n,k={cols}),(k={k},1?)->(n,1?)")
            }
            _ => format!(
                "spmv: x has shape {}, the matrix has {cols} columns",
                tuple(&xs)
            ),
        }));
    }
    let xd = ir_dtype(x.dtype());
    if xd != s.v {
        return Err(error(format!(
            "spmv: x is {xd}, the matrix's values are {}",
            s.v
        )));
    }
    let y = host::create_store(&[s.rows], wit_dtype(s.v))?;
    let (launch, by_rows, image) = row_launch(s.rows);
    let key = Key::Spmv {
        v: s.v,
        i: s.i,
        order,
    };
    Task::new(key.to_string(), &launch)
        .arg(m.pos, by_rows.clone(), Privilege::Read)
        .arg(m.crd, image.clone(), Privilege::Read)
        .arg(m.vals, image, Privilege::Read)
        .arg(x, Partition::Image(5), Privilege::Read)
        .arg(&y, launch.tiled(), Privilege::Write)
        .arg(hull, by_rows, Privilege::Read)
        .submit()?;
    Ok(y)
}

/// The diagonal, of length `min(rows, cols)`.
pub(crate) fn diagonal(m: &Matrix<'_>, rows: u64, cols: u64) -> Result<Store, Error> {
    let s = check(m, "diagonal")?;
    if s.rows != rows {
        return Err(error(format!(
            "diagonal: pos has {} rows, the matrix {rows}",
            s.rows
        )));
    }
    let d = host::create_store(&[rows], wit_dtype(s.v))?;
    let (launch, by_rows, image) = row_launch(rows);
    Task::new(Key::Diag { v: s.v, i: s.i }.to_string(), &launch)
        .arg(m.pos, by_rows, Privilege::Read)
        .arg(m.crd, image.clone(), Privilege::Read)
        .arg(m.vals, image, Privilege::Read)
        .arg(&d, launch.tiled(), Privilege::Write)
        .submit()?;
    if cols < rows {
        return d.slice(&[0], &[cols]);
    }
    Ok(d)
}

/// The dense `rows` x `cols` array.
pub(crate) fn to_dense(m: &Matrix<'_>, rows: u64, cols: u64) -> Result<Store, Error> {
    let s = check(m, "to-dense")?;
    if s.rows != rows {
        return Err(error(format!(
            "to-dense: pos has {} rows, the matrix {rows}",
            s.rows
        )));
    }
    let out = host::create_store(&[rows, cols], wit_dtype(s.v))?;
    let (launch, by_rows, image) = row_launch(rows);
    Task::new(Key::Dense { v: s.v, i: s.i }.to_string(), &launch)
        .arg(m.pos, by_rows, Privilege::Read)
        .arg(m.crd, image.clone(), Privilege::Read)
        .arg(m.vals, image, Privilege::Read)
        .arg(&out, launch.rows(&[rows, cols]), Privilege::Write)
        .submit()?;
    Ok(out)
}

/// A scalar of a float type.
fn float_scalar(v: DType, x: f64) -> Scalar {
    if v == DType::F32 {
        Scalar::F32(x as f32)
    } else {
        Scalar::F64(x)
    }
}

/// The values of `s * A`.
pub(crate) fn scale(vals: &Store, s: f64) -> Result<Store, Error> {
    let shape = vals.shape();
    let v = ir_dtype(vals.dtype());
    if shape.len() != 1 || !v.is_float() {
        return Err(error(format!(
            "scale: values must be a vector of f32 or f64, not {v} of shape {}",
            tuple(&shape)
        )));
    }
    let out = host::create_store(&shape, wit_dtype(v))?;
    let launch = Launch::preferred(&shape);
    Task::new(Key::Scale { v }.to_string(), &launch)
        .arg(vals, launch.tiled(), Privilege::Read)
        .arg(&out, launch.tiled(), Privilege::Write)
        .scalar(float_scalar(v, s))
        .submit()?;
    Ok(out)
}

/// The values of `diag(d) @ A`: each entry of row `r` times `d[r]`, a task over rows that
/// writes the values through the image of `pos`.
pub(crate) fn scale_rows(m: &Matrix<'_>, d: &Store) -> Result<Store, Error> {
    let s = check(m, "scale-rows")?;
    let ds = d.shape();
    let dd = ir_dtype(d.dtype());
    if ds != [s.rows] || dd != s.v {
        return Err(error(format!(
            "scale-rows: the diagonal must be a {} vector of one value per row ({}), not {dd} of \
             shape {}",
            s.v,
            s.rows,
            tuple(&ds)
        )));
    }
    let out = host::create_store(&[s.nnz], wit_dtype(s.v))?;
    let (launch, by_rows, image) = row_launch(s.rows);
    Task::new(Key::ScaleRows { v: s.v, i: s.i }.to_string(), &launch)
        .arg(m.pos, by_rows, Privilege::Read)
        .arg(m.vals, image.clone(), Privilege::Read)
        .arg(d, launch.tiled(), Privilege::Read)
        .arg(&out, image, Privilege::Write)
        .submit()?;
    Ok(out)
}

/// The values of `A + B`, for two matrices of one pattern.
pub(crate) fn add(a: &Matrix<'_>, b: &Matrix<'_>) -> Result<Store, Error> {
    let sa = check(a, "add (left)")?;
    let sb = check(b, "add (right)")?;
    if (sa.rows, sa.nnz) != (sb.rows, sb.nnz) || sa.i != sb.i || sa.v != sb.v {
        return Err(error(format!(
            "add: the matrices differ: {} rows and {} entries of {} ({}) against {} rows and {} \
             entries of {} ({})",
            sa.rows, sa.nnz, sa.v, sa.i, sb.rows, sb.nnz, sb.v, sb.i
        )));
    }
    {
        // Compare the patterns by a task, then read the count of differences. (Stores of one
        // root may still be different views, so sharing a root proves nothing.)
        let zero = 0i64.to_le_bytes();
        let diff = host::store_from_bytes(&[], wit_dtype(DType::I64), &zero)?;
        Task::new(Key::Same { i: sa.i }.to_string(), &Launch::single())
            .arg(a.pos, Partition::None, Privilege::Read)
            .arg(b.pos, Partition::None, Privilege::Read)
            .arg(a.crd, Partition::None, Privilege::Read)
            .arg(b.crd, Partition::None, Privilege::Read)
            .arg(
                &diff,
                Partition::None,
                Privilege::Reduce(weft_sdk::ReduceOp::Sum),
            )
            .submit()?;
        let bytes = host::read_bytes(&diff)?;
        let count = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(i64::from_le_bytes)
            .ok_or_else(|| error("add: the host returned a short count"))?;
        if count != 0 {
            return Err(error(format!(
                "add: the matrices have different sparsity patterns ({count} row bounds or \
                 columns differ)"
            )));
        }
    }
    let out = host::create_store(&[sa.nnz], wit_dtype(sa.v))?;
    let launch = Launch::preferred(&[sa.nnz]);
    Task::new(Key::Add { v: sa.v }.to_string(), &launch)
        .arg(a.vals, launch.tiled(), Privilege::Read)
        .arg(b.vals, launch.tiled(), Privilege::Read)
        .arg(&out, launch.tiled(), Privilege::Write)
        .submit()?;
    Ok(out)
}

/// The Poisson matrix on a grid of `g` points per side in `dims` dimensions, built by two
/// tasks: the row ranges (in closed form), then each row's columns and values.
pub(crate) fn poisson(dims: u8, g: u64, v: DType, i: DType) -> Result<Parts, Error> {
    let op = format!("poisson{dims}d");
    if g == 0 {
        return Err(error(format!(
            "{op}: the grid needs at least one point per side"
        )));
    }
    if !v.is_float() || !matches!(i, DType::I32 | DType::I64) {
        return Err(error(format!(
            "{op}: values must be f32 or f64 and indices i32 or i64, not {v} and {i}"
        )));
    }
    let too_big = || error(format!("{op}: a grid of {g} points per side is too large"));
    let n = g.checked_pow(u32::from(dims)).ok_or_else(too_big)?;
    // Each point has 2 dims + 1 entries, less one per missing neighbour: 2 g^(dims-1) per
    // dimension.
    let face = g.checked_pow(u32::from(dims) - 1).ok_or_else(too_big)?;
    let nnz = (2 * u64::from(dims) + 1)
        .checked_mul(n)
        .and_then(|all| all.checked_sub(2 * u64::from(dims) * face))
        .ok_or_else(too_big)?;
    let limit = if i == DType::I32 {
        i32::MAX as u64
    } else {
        i64::MAX as u64
    };
    if nnz > limit {
        return Err(error(format!("{op}: {nnz} entries do not fit {i} indices")));
    }
    let g_scalar = Scalar::I64(i64::try_from(g).map_err(|_| too_big())?);
    let pos = host::create_store(&[n, 2], wit_dtype(i))?;
    let crd = host::create_store(&[nnz], wit_dtype(i))?;
    let vals = host::create_store(&[nnz], wit_dtype(v))?;
    let (launch, by_rows, image) = row_launch(n);
    Task::new(Key::PoissonPos { dims, i }.to_string(), &launch)
        .arg(&pos, by_rows.clone(), Privilege::Write)
        .scalar(g_scalar)
        .submit()?;
    Task::new(Key::PoissonFill { dims, v, i }.to_string(), &launch)
        .arg(&pos, by_rows, Privilege::Read)
        .arg(&crd, image.clone(), Privilege::Write)
        .arg(&vals, image, Privilege::Write)
        .scalar(g_scalar)
        .submit()?;
    Ok(Parts {
        pos,
        crd,
        vals,
        rows: n,
        cols: n,
    })
}
