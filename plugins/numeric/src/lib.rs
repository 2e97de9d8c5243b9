//! numeric: a NumPy-like array library for Weft.
//!
//! numeric turns each call of its `weft:plugin/numeric` exports into index tasks over stores
//! (arrays the host owns) and hands the host their kernel bodies in the portable IR when it
//! asks for them by key. It uses only the public API of `weft-sdk`, as a third-party plugin
//! would.
//!
//! The crate is split by job:
//! - this file: the WIT bindings and the `Guest` implementations, which only translate WIT
//!   values and dispatch;
//! - [`catalog`]: the operators, their names and the dtypes each accepts;
//! - [`keys`]: kernel keys, encoded and decoded;
//! - [`kernels`]: the kernel body of each key;
//! - [`rng`]: the counter-based random generator of `random-uniform`;
//! - `scalars` and `shapes`: scalar conversion and shape arithmetic;
//! - `ops`: the operations (creation, element-wise, reductions, linear algebra, views).

#![deny(missing_docs)]

pub mod catalog;
pub mod kernels;
pub mod keys;
mod ops;
pub mod rng;
mod scalars;
mod shapes;
pub mod unsigned;

use weft_sdk::ir::ReduceOp;
use weft_sdk::{Dtype, Error, Scalar, Store, ir_dtype, ir_scalar};

use bindings::exports::weft::plugin::numeric::{
    self, BinaryOp, Operand, Range, Reduction, Subscript, UnaryOp,
};
use catalog::{BinOp, UnOp};
use ops::{Arg, Array};

weft_sdk::plugin! {
    plugin: Numeric,
    name: "numeric",
    wit: "../../wit",
    world: "weft:plugin/numeric-plugin",
    kernels: |key| kernels::build(&key.parse()?),
}

impl numeric::Guest for Numeric {
    fn full(shape: Vec<u64>, value: Scalar, dtype: Dtype) -> Result<Store, Error> {
        ops::creation::full("full", &shape, ir_scalar(value), ir_dtype(dtype))
    }

    fn zeros(shape: Vec<u64>, dtype: Dtype) -> Result<Store, Error> {
        let zero = weft_sdk::ir::Scalar::F64(0.0);
        ops::creation::full("zeros", &shape, zero, ir_dtype(dtype))
    }

    fn ones(shape: Vec<u64>, dtype: Dtype) -> Result<Store, Error> {
        let one = weft_sdk::ir::Scalar::F64(1.0);
        ops::creation::full("ones", &shape, one, ir_dtype(dtype))
    }

    fn arange(start: f64, stop: f64, step: f64, dtype: Dtype) -> Result<Store, Error> {
        ops::creation::arange(start, stop, step, ir_dtype(dtype))
    }

    fn linspace(start: f64, stop: f64, num: u64, dtype: Dtype) -> Result<Store, Error> {
        ops::creation::linspace(start, stop, num, ir_dtype(dtype))
    }

    fn random_uniform(
        shape: Vec<u64>,
        low: f64,
        high: f64,
        seed: u64,
        dtype: Dtype,
    ) -> Result<Store, Error> {
        ops::creation::random_uniform(&shape, low, high, seed, ir_dtype(dtype))
    }

    fn from_f64s(shape: Vec<u64>, values: Vec<f64>, dtype: Dtype) -> Result<Store, Error> {
        ops::creation::from_f64s(&shape, &values, ir_dtype(dtype))
    }

    fn slice(a: &Store, ranges: Vec<Range>) -> Result<Store, Error> {
        let ranges: Vec<_> = ranges.iter().map(|r| (r.start, r.stop, r.step)).collect();
        ops::views::slice(&Array::new(a), &ranges)
    }

    fn index(a: &Store, indices: Vec<Subscript>) -> Result<Store, Error> {
        let indices: Vec<ops::views::Index> = indices
            .iter()
            .map(|i| match *i {
                Subscript::At(at) => ops::views::Index::At(at),
                Subscript::Range(r) => ops::views::Index::Range(r.start, r.stop, r.step),
                Subscript::NewAxis => ops::views::Index::NewAxis,
            })
            .collect();
        ops::views::index(&Array::new(a), &indices)
    }

    fn permute(a: &Store, axes: Vec<u32>) -> Result<Store, Error> {
        ops::views::permute(&Array::new(a), &axes)
    }

    fn reshape(a: &Store, shape: Vec<i64>) -> Result<Store, Error> {
        ops::views::reshape(&Array::new(a), &shape)
    }

    fn broadcast_to(a: &Store, shape: Vec<u64>) -> Result<Store, Error> {
        ops::views::broadcast_to(&Array::new(a), &shape)
    }

    fn reduce_axes(
        op: Reduction,
        a: &Store,
        axes: Option<Vec<i64>>,
        keepdims: bool,
    ) -> Result<Store, Error> {
        ops::reductions::reduce_axes(reduce_op(op), &Array::new(a), axes.as_deref(), keepdims)
    }

    fn binary(op: BinaryOp, a: Operand<'_>, b: Operand<'_>) -> Result<Store, Error> {
        ops::elementwise::binary(bin_op(op), arg(a), arg(b))
    }

    fn unary(op: UnaryOp, a: &Store) -> Result<Store, Error> {
        ops::elementwise::unary(un_op(op), &Array::new(a))
    }

    fn select(cond: &Store, a: Operand<'_>, b: Operand<'_>) -> Result<Store, Error> {
        ops::elementwise::select(&Array::new(cond), arg(a), arg(b))
    }

    fn astype(a: &Store, dtype: Dtype) -> Result<Store, Error> {
        ops::elementwise::astype(&Array::new(a), ir_dtype(dtype))
    }

    fn assign(dst: &Store, src: Operand<'_>) -> Result<(), Error> {
        ops::elementwise::assign(&Array::new(dst), arg(src))
    }

    fn copy(a: &Store) -> Result<Store, Error> {
        ops::elementwise::copy(&Array::new(a))
    }

    fn reduce(op: Reduction, a: &Store) -> Result<Store, Error> {
        ops::reductions::reduce(reduce_op(op), &Array::new(a))
    }

    fn dot(a: &Store, b: &Store) -> Result<Store, Error> {
        ops::reductions::dot(&Array::new(a), &Array::new(b))
    }

    fn norm(a: &Store) -> Result<Store, Error> {
        ops::reductions::norm(&Array::new(a))
    }

    fn matvec(a: &Store, x: &Store) -> Result<Store, Error> {
        ops::linalg::matvec(&Array::new(a), &Array::new(x))
    }

    fn matmul(a: &Store, b: &Store) -> Result<Store, Error> {
        ops::linalg::matmul(&Array::new(a), &Array::new(b))
    }

    fn diag(a: &Store) -> Result<Store, Error> {
        ops::linalg::diag(&Array::new(a))
    }

    fn take(a: &Store, indices: &Store, axis: Option<i64>) -> Result<Store, Error> {
        ops::indexing::take(&Array::new(a), &Array::new(indices), axis)
    }

    fn cumsum(a: &Store, axis: Option<i64>) -> Result<Store, Error> {
        ops::indexing::cumsum(&Array::new(a), axis)
    }

    fn arg_reduce(op: Reduction, a: &Store, axis: Option<i64>) -> Result<Store, Error> {
        ops::indexing::arg_reduce(reduce_op(op), &Array::new(a), axis)
    }

    fn flatnonzero(a: &Store) -> Result<Store, Error> {
        ops::indexing::flatnonzero(&Array::new(a))
    }

    fn scatter(
        target: &Store,
        positions: &Store,
        values: &Store,
        accumulate: bool,
    ) -> Result<(), Error> {
        ops::indexing::scatter(
            &Array::new(target),
            &Array::new(positions),
            &Array::new(values),
            accumulate,
        )
    }

    fn sort_rows(a: &Store, indices: bool) -> Result<Store, Error> {
        ops::sorting::sort_rows(&Array::new(a), indices)
    }
}

/// An operand as the operations take it.
fn arg(o: Operand<'_>) -> Arg<'_> {
    match o {
        Operand::Array(s) => Arg::Array(Array::new(s)),
        Operand::Scalar(s) => Arg::Scalar(ir_scalar(s)),
    }
}

/// The catalog's binary operator of a WIT one.
fn bin_op(op: BinaryOp) -> BinOp {
    match op {
        BinaryOp::Add => BinOp::Add,
        BinaryOp::Sub => BinOp::Sub,
        BinaryOp::Mul => BinOp::Mul,
        BinaryOp::Div => BinOp::Div,
        BinaryOp::Pow => BinOp::Pow,
        BinaryOp::Minimum => BinOp::Minimum,
        BinaryOp::Maximum => BinOp::Maximum,
        BinaryOp::Equal => BinOp::Equal,
        BinaryOp::NotEqual => BinOp::NotEqual,
        BinaryOp::Less => BinOp::Less,
        BinaryOp::LessEqual => BinOp::LessEqual,
        BinaryOp::Greater => BinOp::Greater,
        BinaryOp::GreaterEqual => BinOp::GreaterEqual,
        BinaryOp::LogicalAnd => BinOp::LogicalAnd,
        BinaryOp::LogicalOr => BinOp::LogicalOr,
        BinaryOp::Remainder => BinOp::Remainder,
        BinaryOp::Arctan2 => BinOp::Arctan2,
        BinaryOp::BitwiseAnd => BinOp::BitwiseAnd,
        BinaryOp::BitwiseOr => BinOp::BitwiseOr,
        BinaryOp::BitwiseXor => BinOp::BitwiseXor,
        BinaryOp::LeftShift => BinOp::LeftShift,
        BinaryOp::RightShift => BinOp::RightShift,
    }
}

/// The catalog's unary operator of a WIT one.
fn un_op(op: UnaryOp) -> UnOp {
    match op {
        UnaryOp::Neg => UnOp::Neg,
        UnaryOp::Abs => UnOp::Abs,
        UnaryOp::Sqrt => UnOp::Sqrt,
        UnaryOp::Exp => UnOp::Exp,
        UnaryOp::Log => UnOp::Log,
        UnaryOp::Sin => UnOp::Sin,
        UnaryOp::Cos => UnOp::Cos,
        UnaryOp::Tanh => UnOp::Tanh,
        UnaryOp::Erf => UnOp::Erf,
        UnaryOp::LogicalNot => UnOp::LogicalNot,
        UnaryOp::Floor => UnOp::Floor,
        UnaryOp::Ceil => UnOp::Ceil,
        UnaryOp::Arcsin => UnOp::Arcsin,
        UnaryOp::Arccos => UnOp::Arccos,
        UnaryOp::Arctan => UnOp::Arctan,
        UnaryOp::Sinh => UnOp::Sinh,
        UnaryOp::Cosh => UnOp::Cosh,
        UnaryOp::Arcsinh => UnOp::Arcsinh,
        UnaryOp::Arccosh => UnOp::Arccosh,
        UnaryOp::Arctanh => UnOp::Arctanh,
        UnaryOp::Invert => UnOp::Invert,
    }
}

/// The IR reduction operator of a WIT reduction.
fn reduce_op(op: Reduction) -> ReduceOp {
    match op {
        Reduction::Sum => ReduceOp::Sum,
        Reduction::Prod => ReduceOp::Prod,
        Reduction::Min => ReduceOp::Min,
        Reduction::Max => ReduceOp::Max,
    }
}
