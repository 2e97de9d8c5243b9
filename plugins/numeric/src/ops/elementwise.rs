//! Element-wise operations: `binary`, `unary`, `select`, `astype`, `copy` and `assign`.

use weft_sdk::ir::DType;
use weft_sdk::{Error, Store};

use super::{Arg, Array, Input, create, fail, fill, rank, same_dtype, submit_map};
use crate::catalog::{BinOp, UnOp};
use crate::keys::{Key, Kind};
use crate::shapes;

/// `a op b`, with NumPy's broadcasting of 0-d arrays and scalars. Array operands must share
/// one dtype; scalars are converted to it.
pub fn binary(op: BinOp, a: Arg<'_>, b: Arg<'_>) -> Result<Store, Error> {
    let name = op.name();
    let args = [a, b];
    let arrays: Vec<&Array<'_>> = args.iter().filter_map(Arg::array).collect();
    let dtype = array_dtype(name, &arrays)?
        .ok_or_else(|| fail(name, "needs at least one array operand"))?;
    op.rule().check(name, dtype).map_err(weft_sdk::error)?;
    let shape = broadcast(name, &arrays)?;
    let inputs = [args[0].input(&shape, dtype), args[1].input(&shape, dtype)];
    let key = Key::Binary {
        op,
        dtype,
        rank: rank(name, &shape)?,
        kinds: [inputs[0].kind(), inputs[1].kind()],
    };
    let out = create(name, &shape, op.result_dtype(dtype))?;
    submit_map(name, &key, &out, &shape, &inputs)?;
    Ok(out)
}

/// `op a`, element-wise.
pub fn unary(op: UnOp, a: &Array<'_>) -> Result<Store, Error> {
    let name = op.name();
    op.rule().check(name, a.dtype).map_err(weft_sdk::error)?;
    let key = Key::Unary {
        op,
        dtype: a.dtype,
        rank: rank(name, &a.shape)?,
    };
    let out = create(name, &a.shape, a.dtype)?;
    submit_map(
        name,
        &key,
        &out,
        &a.shape,
        &[Input::Store(a.store, Kind::Array)],
    )?;
    Ok(out)
}

/// `cond ? a : b`, element-wise (NumPy's `where`): `cond` is a bool array; `a` and `b` are
/// arrays of one dtype or scalars (converted to the arrays' dtype; two scalars must have
/// the same dtype).
pub fn select(cond: &Array<'_>, a: Arg<'_>, b: Arg<'_>) -> Result<Store, Error> {
    let name = "select";
    if cond.dtype != DType::Bool {
        return Err(fail(
            name,
            format!("the condition must be a bool array, got {}", cond.dtype),
        ));
    }
    let arms = [a, b];
    let arrays: Vec<&Array<'_>> = arms.iter().filter_map(Arg::array).collect();
    let dtype = match array_dtype(name, &arrays)? {
        Some(d) => d,
        None => scalar_dtype(name, &arms)?,
    };
    let mut all = vec![cond];
    all.extend(&arrays);
    let shape = broadcast(name, &all)?;
    let inputs = [
        Input::Store(cond.store, shapes::kind(&cond.shape, &shape)),
        arms[0].input(&shape, dtype),
        arms[1].input(&shape, dtype),
    ];
    let key = Key::Select {
        dtype,
        rank: rank(name, &shape)?,
        kinds: inputs.map(|i| i.kind()),
    };
    let out = create(name, &shape, dtype)?;
    submit_map(name, &key, &out, &shape, &inputs)?;
    Ok(out)
}

/// A copy of `a` converted to `dtype`.
pub fn astype(a: &Array<'_>, dtype: DType) -> Result<Store, Error> {
    let name = "astype";
    if dtype == a.dtype {
        return copy_as(name, a);
    }
    let key = Key::Cast {
        from: a.dtype,
        to: dtype,
        rank: rank(name, &a.shape)?,
    };
    let out = create(name, &a.shape, dtype)?;
    submit_map(
        name,
        &key,
        &out,
        &a.shape,
        &[Input::Store(a.store, Kind::Array)],
    )?;
    Ok(out)
}

/// A fresh copy of `a`.
pub fn copy(a: &Array<'_>) -> Result<Store, Error> {
    copy_as("copy", a)
}

/// A fresh copy of `a`, for operation `op`.
fn copy_as(op: &str, a: &Array<'_>) -> Result<Store, Error> {
    let out = create(op, &a.shape, a.dtype)?;
    let out_array = Array {
        store: &out,
        shape: a.shape.clone(),
        dtype: a.dtype,
    };
    copy_into(op, &out_array, a)?;
    Ok(out)
}

/// `dst[...] = src`: `src` is an array of `dst`'s shape and dtype, a 0-d array of its dtype,
/// or a scalar (converted to its dtype). When `src` and `dst` share storage, `src` is copied
/// to a temporary first, so that overlapping views behave as in NumPy.
pub fn assign(dst: &Array<'_>, src: Arg<'_>) -> Result<(), Error> {
    let name = "assign";
    let src = match src {
        Arg::Scalar(v) => return fill(name, dst.store, &dst.shape, dst.dtype, v),
        Arg::Array(src) => src,
    };
    if src.shape != dst.shape && !src.shape.is_empty() {
        return Err(fail(
            name,
            format!(
                "shapes {} and {} do not match",
                shapes::show(&dst.shape),
                shapes::show(&src.shape)
            ),
        ));
    }
    same_dtype(name, dst, &src)?;
    if !dst.store.same_root(src.store) {
        return copy_into(name, dst, &src);
    }
    let tmp = create(name, &src.shape, src.dtype)?;
    let tmp = Array {
        store: &tmp,
        shape: src.shape.clone(),
        dtype: src.dtype,
    };
    copy_into(name, &tmp, &src)?;
    copy_into(name, dst, &tmp)
}

/// Submits `dst[...] = src` for arrays of one dtype, `src` of `dst`'s shape or 0-d.
fn copy_into(op: &str, dst: &Array<'_>, src: &Array<'_>) -> Result<(), Error> {
    let kind = shapes::kind(&src.shape, &dst.shape);
    let key = Key::Copy {
        dtype: dst.dtype,
        rank: rank(op, &dst.shape)?,
        src: kind,
    };
    submit_map(
        op,
        &key,
        dst.store,
        &dst.shape,
        &[Input::Store(src.store, kind)],
    )
}

/// The dtype the arrays share (`None` if there are none); the error names the first two that
/// differ.
fn array_dtype(op: &str, arrays: &[&Array<'_>]) -> Result<Option<DType>, Error> {
    let Some(first) = arrays.first() else {
        return Ok(None);
    };
    for other in &arrays[1..] {
        same_dtype(op, first, other)?;
    }
    Ok(Some(first.dtype))
}

/// The dtype of two scalar operands, which must agree.
fn scalar_dtype(op: &str, args: &[Arg<'_>]) -> Result<DType, Error> {
    let dtypes: Vec<DType> = args
        .iter()
        .filter_map(|a| match a {
            Arg::Scalar(s) => Some(s.dtype()),
            Arg::Array(_) => None,
        })
        .collect();
    match dtypes.as_slice() {
        [first, rest @ ..] => match rest.iter().find(|d| *d != first) {
            None => Ok(*first),
            Some(other) => Err(fail(op, format!("dtype mismatch {first} and {other}"))),
        },
        [] => Err(fail(op, "needs at least one operand")),
    }
}

/// The shape of an element-wise result over these arrays (see [`shapes::broadcast`]).
fn broadcast(op: &str, arrays: &[&Array<'_>]) -> Result<Vec<u64>, Error> {
    let shapes: Vec<&[u64]> = arrays.iter().map(|a| a.shape.as_slice()).collect();
    shapes::broadcast(&shapes).map_err(|m| fail(op, m))
}
