//! Dense linear algebra: `matvec`, `matmul` and `diag`.
//!
//! The products split the output's rows over the launch and hand each point the matching rows
//! of `A` (`Launch::rows`) and the whole of the other operand.

use weft_sdk::{Error, Launch, Partition, Privilege, Store, Task};

use super::{Array, create, fail, host_error, same_dtype};
use crate::catalog;
use crate::keys::Key;
use crate::shapes;

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
        return Err(mismatch(name, a, x));
    }
    let dtype = same_dtype(name, a, x)?;
    catalog::LINALG_RULE
        .check(name, dtype)
        .map_err(weft_sdk::error)?;
    let y = create(name, &[m], dtype)?;
    let launch = Launch::preferred(&[m]);
    Task::new(Key::Matvec { dtype }.to_string(), &launch)
        .arg(a.store, launch.rows(&a.shape), Privilege::Read)
        .arg(x.store, Partition::None, Privilege::Read)
        .arg(&y, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(y)
}

/// `A @ B` for an `(m, k)` and a `(k, n)` matrix of one float dtype: an `(m, n)` matrix.
pub fn matmul(a: &Array<'_>, b: &Array<'_>) -> Result<Store, Error> {
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
        return Err(mismatch(name, a, b));
    }
    let dtype = same_dtype(name, a, b)?;
    catalog::LINALG_RULE
        .check(name, dtype)
        .map_err(weft_sdk::error)?;
    let c = create(name, &[m, n], dtype)?;
    let launch = Launch::preferred(&[m, n]);
    Task::new(Key::Matmul { dtype }.to_string(), &launch)
        .arg(a.store, launch.rows(&a.shape), Privilege::Read)
        .arg(b.store, Partition::None, Privilege::Read)
        .arg(&c, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(c)
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
    Task::new(key.to_string(), &launch)
        .arg(a.store, Partition::None, Privilege::Read)
        .arg(&out, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// The error for operands whose inner dimensions differ.
fn mismatch(name: &str, a: &Array<'_>, b: &Array<'_>) -> Error {
    fail(
        name,
        format!(
            "shapes {} and {} do not match",
            shapes::show(&a.shape),
            shapes::show(&b.shape)
        ),
    )
}
