//! Element-wise operations: `binary`, `unary`, `select`, `astype`, `copy` and `assign`.

use weft_sdk::ir::{DType, Scalar};
use weft_sdk::{Error, Store};

use super::{Arg, Array, Input, create, fail, fill, rank, submit_map};
use crate::catalog::{BinOp, UnOp};
use crate::keys::{Key, Kind};
use crate::shapes;

/// `a op b`, with NumPy's broadcasting and type promotion (see [`promote`]); `div` is true
/// division, as NumPy's `/`.
pub fn binary(op: BinOp, a: Arg<'_>, b: Arg<'_>) -> Result<Store, Error> {
    let name = op.name();
    let args = [a, b];
    let mut dtype = promote(name, &args)?;
    if let Some(out) = out_of_range(op, &args, dtype)? {
        return Ok(out);
    }
    if op == BinOp::Div && !matches!(dtype, DType::F32 | DType::F64) {
        // NumPy's `/` is true division: integer and bool operands divide as f64.
        dtype = DType::F64;
    }
    op.rule().check(name, dtype).map_err(weft_sdk::error)?;
    let shape = broadcast(
        name,
        &args.iter().filter_map(Arg::array).collect::<Vec<_>>(),
    )?;
    let prepared = prepare(name, &args, &shape, dtype)?;
    let inputs = [
        prepared[0].input(&args[0], &shape, dtype),
        prepared[1].input(&args[1], &shape, dtype),
    ];
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

/// For an unsigned `dtype`, a Python integer operand outside its range, as NumPy 2 treats
/// one: a comparison is decided exactly (every element of the array lies on one side of it:
/// a constant result), any other operator fails (`Python integer -1 out of bounds for
/// uint8`). `None` where no operand is out of range.
fn out_of_range(op: BinOp, args: &[Arg<'_>; 2], dtype: DType) -> Result<Option<Store>, Error> {
    let name = op.name();
    if !dtype.is_unsigned() {
        return Ok(None);
    }
    let max = u64::MAX >> (64 - 8 * dtype.size());
    let beyond = |a: &Arg<'_>| match *a {
        Arg::Scalar(Scalar::I64(v)) if v < 0 || v as u64 > max => Some(v),
        _ => None,
    };
    let Some((at, v)) = args
        .iter()
        .enumerate()
        .find_map(|(i, a)| beyond(a).map(|v| (i, v)))
    else {
        return Ok(None);
    };
    if !op.is_comparison() {
        let numpy = format!("uint{}", 8 * dtype.size());
        return Err(fail(
            name,
            format!("Python integer {v} out of bounds for {numpy}"),
        ));
    }
    // Every element is greater than a negative integer and less than one past the range.
    let array_greater = v < 0;
    let left_greater = if at == 0 {
        !array_greater
    } else {
        array_greater
    };
    let value = match op {
        BinOp::Equal => false,
        BinOp::NotEqual => true,
        BinOp::Less | BinOp::LessEqual => !left_greater,
        _ => left_greater,
    };
    let shape = broadcast(
        name,
        &args.iter().filter_map(Arg::array).collect::<Vec<_>>(),
    )?;
    let out = create(name, &shape, DType::Bool)?;
    fill(name, &out, &shape, DType::Bool, Scalar::Bool(value))?;
    Ok(Some(out))
}

/// An operand made ready for an element-wise kernel of some shape and dtype: converted to
/// the dtype and broadcast to the shape where it needs to be (a new store or view), or used
/// as it is.
struct Prepared(Option<Store>);

impl Prepared {
    /// How the operand reaches the kernel.
    fn input<'a>(&'a self, arg: &Arg<'a>, out: &[u64], dtype: DType) -> Input<'a> {
        match &self.0 {
            Some(store) => Input::Store(store, Kind::Array),
            None => arg.input(out, dtype),
        }
    }
}

/// Converts each array operand to `dtype` (a cast task, which fuses) and broadcasts it to
/// `shape` (a read-only view); a 0-d array stays whole and is loaded at `[]`.
fn prepare(
    name: &str,
    args: &[Arg<'_>],
    shape: &[u64],
    dtype: DType,
) -> Result<Vec<Prepared>, Error> {
    let mut out = Vec::with_capacity(args.len());
    for arg in args {
        let Arg::Array(a) = arg else {
            out.push(Prepared(None));
            continue;
        };
        let cast = if a.dtype == dtype {
            None
        } else {
            Some(astype(a, dtype)?)
        };
        let store = cast.as_ref().unwrap_or(a.store);
        let needs_view = !a.shape.is_empty() && a.shape != shape;
        out.push(Prepared(if needs_view {
            Some(
                store
                    .broadcast_to(shape)
                    .map_err(|e| fail(name, e.message))?,
            )
        } else {
            cast
        }));
    }
    Ok(out)
}

/// `op a`, element-wise. An operator defined on floats only takes an integer or bool array
/// as the smallest float that holds its values, as NumPy does (`np.sqrt` of `int64` is
/// `float64`, of `uint16` `float32`; of `uint8` `float32` too, NumPy's `float16` being no
/// dtype here), except `floor` and `ceil`, which leave integers as they are (NumPy 2).
pub fn unary(op: UnOp, a: &Array<'_>) -> Result<Store, Error> {
    let name = op.name();
    if matches!(op, UnOp::Floor | UnOp::Ceil) && (a.dtype.is_int() || a.dtype.is_unsigned()) {
        return copy(a);
    }
    let widened;
    let a = if op.rule() == crate::catalog::Rule::Float && !a.dtype.is_float() {
        let float = if matches!(a.dtype, DType::U8 | DType::U16) {
            DType::F32
        } else {
            DType::F64
        };
        widened = astype(a, float)?;
        &Array::new(&widened)
    } else {
        a
    };
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
    let dtype = promote(name, &arms)?;
    let mut all = vec![cond];
    all.extend(arms.iter().filter_map(Arg::array));
    let shape = broadcast(name, &all)?;
    let cond_arg = [Arg::Array(Array {
        store: cond.store,
        shape: cond.shape.clone(),
        dtype: cond.dtype,
    })];
    let cond_prepared = prepare(name, &cond_arg, &shape, DType::Bool)?;
    let prepared = prepare(name, &arms, &shape, dtype)?;
    let inputs = [
        cond_prepared[0].input(&cond_arg[0], &shape, DType::Bool),
        prepared[0].input(&arms[0], &shape, dtype),
        prepared[1].input(&arms[1], &shape, dtype),
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

/// `dst[...] = src`: `src` is an array that broadcasts to `dst`'s shape (converted to its
/// dtype), or a scalar. When `src` may share elements with `dst`, it is copied to a
/// temporary first, so that overlapping views behave as in NumPy.
pub fn assign(dst: &Array<'_>, src: Arg<'_>) -> Result<(), Error> {
    let name = "assign";
    let src = match src {
        Arg::Scalar(v) => return fill(name, dst.store, &dst.shape, dst.dtype, v),
        Arg::Array(src) => src,
    };
    // NumPy's words whether or not the two shapes broadcast together at all.
    let into = || {
        fail(
            name,
            format!(
                "could not broadcast input array from shape {} into shape {}",
                shapes::tuple(&src.shape),
                shapes::tuple(&dst.shape)
            ),
        )
    };
    let shape = shapes::broadcast(&[&dst.shape, &src.shape]).map_err(|_| into())?;
    if shape != dst.shape {
        return Err(into());
    }
    let args = [Arg::Array(Array {
        store: src.store,
        shape: src.shape.clone(),
        dtype: src.dtype,
    })];
    let prepared = prepare(name, &args, &dst.shape, dst.dtype)?;
    let (store, shape) = match &prepared[0].0 {
        Some(s) => (s, dst.shape.clone()),
        None => (src.store, src.shape.clone()),
    };
    let ready = Array {
        store,
        shape,
        dtype: dst.dtype,
    };
    if !dst.store.may_overlap(ready.store) {
        return copy_into(name, dst, &ready);
    }
    let tmp = create(name, &ready.shape, ready.dtype)?;
    let tmp = Array {
        store: &tmp,
        shape: ready.shape.clone(),
        dtype: ready.dtype,
    };
    copy_into(name, &tmp, &ready)?;
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

/// The dtype of an element-wise operation over these operands, by NumPy's promotion rules
/// (NEP 50): arrays promote among themselves (`bool` < integers < floats; `i32` with `i64`
/// is `i64`, `f32` with `f64` is `f64`, an integer with `f32` is `f64`); scalars are weak and
/// take the arrays' type, except that a float scalar makes integer or bool arrays `f64`. With
/// no array, the scalars promote among themselves.
pub fn promote(op: &str, args: &[Arg<'_>]) -> Result<DType, Error> {
    let arrays: Vec<DType> = args
        .iter()
        .filter_map(Arg::array)
        .map(|a| a.dtype)
        .collect();
    let scalars: Vec<DType> = args
        .iter()
        .filter_map(|a| match a {
            Arg::Scalar(s) => Some(s.dtype()),
            Arg::Array(_) => None,
        })
        .collect();
    let strong = if arrays.is_empty() { &scalars } else { &arrays };
    let Some(mut dtype) = strong.iter().copied().reduce(promote_pair) else {
        return Err(fail(op, "needs at least one operand"));
    };
    let is_float = |d: DType| matches!(d, DType::F32 | DType::F64);
    if !arrays.is_empty() && !is_float(dtype) && scalars.iter().any(|&d| is_float(d)) {
        dtype = DType::F64;
    }
    Ok(dtype)
}

/// NumPy's promotion of two array dtypes: the smallest dtype that holds every value of both
/// (`u8` with `u32` is `u32`; `u8` or `u16` with `i32` is `i32`, `u32` with `i32` is `i64`;
/// `u64` with a signed integer is `f64`, as NumPy has no wider integer; `u8` or `u16` with
/// `f32` is `f32`, a wider integer with `f32` is `f64`).
pub(crate) fn promote_pair(a: DType, b: DType) -> DType {
    use DType::*;
    match (a, b) {
        _ if a == b => a,
        (Bool, x) | (x, Bool) => x,
        (I32, I64) | (I64, I32) => I64,
        (F32, F64) | (F64, F32) => F64,
        (U8 | U16 | U32 | U64, U8 | U16 | U32 | U64) => {
            if a.size() >= b.size() {
                a
            } else {
                b
            }
        }
        (U8 | U16, I32) | (I32, U8 | U16) => I32,
        (U8 | U16 | U32, I32 | I64) | (I32 | I64, U8 | U16 | U32) => I64,
        (U8 | U16, F32) | (F32, U8 | U16) => F32,
        _ => F64,
    }
}

/// The shape of an element-wise result over these arrays (see [`shapes::broadcast`]).
fn broadcast(op: &str, arrays: &[&Array<'_>]) -> Result<Vec<u64>, Error> {
    let shapes: Vec<&[u64]> = arrays.iter().map(|a| a.shape.as_slice()).collect();
    shapes::broadcast(&shapes).map_err(|m| fail(op, m))
}
