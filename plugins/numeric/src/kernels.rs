//! Kernel bodies, built from their keys with the SDK's [`KernelBuilder`].
//!
//! Parameters are the task's store arguments in order, then its scalars. Every kernel runs
//! one parallel loop over its output (or, for reductions, over the array reduced), with
//! indices relative to the point task's sub-store; where a store is passed whole (partition
//! none) while the loop runs over a tile, the kernel turns the loop index into a global one
//! with `origin`.
//!
//! | key | stores | scalars |
//! | --- | --- | --- |
//! | element-wise (`fill`, `copy`, `cast`, `binary`, `unary`, `select`) | array operands in order (read), `out` (write) | scalar operands in order |
//! | `arange` | `out` (write, rank 1) | `start: f64`, `step: f64` |
//! | `linspace` | `out` (write, rank 1) | `start: f64`, `step: f64`, `stop: f64`, `last: i64` |
//! | `random` | `out` (write) | `seed: i64`, `low: f64`, `high: f64`, one `stride: i64` per dimension |
//! | `reduce` | `a` (read), `out` (reduce(op), rank 0) | |
//! | `dot` | `a`, `b` (read, rank 1), `out` (reduce(sum), rank 0) | |
//! | `norm.sumsq` | `a` (read), `out` (reduce(sum), rank 0) | |
//! | `norm.sqrt` | `out` (read-write, rank 0) | |
//! | `matvec` | `A` (read, rank 2, rows), `x` (read, rank 1, whole), `y` (write, rank 1) | |
//! | `matvec_parts` | as `matvec` | |
//! | `matmul` | `A` (read, rank 2, rows), `B` (read, rank 2, whole), `C` (write, rank 2) | |
//! | `diag.extract` | `A` (read, rank 2, the diagonal block of `out`'s tile), `out` (write, rank 1) | |
//! | `diag.embed` | `v` (read, rank 1, whole), `out` (write, rank 2) | |
//! | `cumsum` | `domain` (read, rank k, tiled: `a[..., 0]`), `a` (read, rank k+1), `out` (write, rank k+1), both tiled with the last dim whole | |
//! | `take` | `a` (read, whole), `idx` (read, rank 1, whole), `out` (write, tiled) | |
//! | `treeblocks` | `a` (read, whole), `out` (write, tiled; dimension 0 a sixteenth of `a`'s, rounded up) | |

use weft_sdk::KernelBuilder;
use weft_sdk::ir::builder::{BodyBuilder, StoreParam, Value};
use weft_sdk::ir::{BinaryOp, CmpOp, DType, Kernel, Privilege, ReduceOp, UnaryOp};

use crate::catalog::{BinOp, UnOp};
use crate::keys::{Key, Kind};
use crate::{rng, unsigned};

/// The kernel named by `key`, validated. The error says why the kernel is invalid (which, for
/// a key that decoded, is a bug in this module).
pub fn build(key: &Key) -> Result<Kernel, String> {
    let name = key.to_string();
    let k = match *key {
        Key::Fill { dtype, rank } => map(name, &[(Kind::Scalar, dtype)], dtype, rank, |_, v| v[0]),
        Key::Copy { dtype, rank, src } => map(name, &[(src, dtype)], dtype, rank, |_, v| v[0]),
        Key::Cast { from, to, rank } => map(name, &[(Kind::Array, from)], to, rank, |b, v| {
            unsigned::convert(b, from, to, v[0])
        }),
        Key::Arange { dtype } => arange(name, dtype),
        Key::Linspace { dtype } => linspace(name, dtype),
        Key::Random { dtype, rank } => random(name, dtype, rank),
        Key::Binary {
            op,
            dtype,
            rank,
            kinds,
        } => {
            let inputs = [(kinds[0], dtype), (kinds[1], dtype)];
            let out = op.result_dtype(dtype);
            map(name, &inputs, out, rank, |b, v| {
                if dtype.is_unsigned()
                    && let Some(r) = unsigned::binary(b, op, dtype, v[0], v[1])
                {
                    return r;
                }
                binary(b, op, v[0], v[1])
            })
        }
        Key::Unary { op, dtype, rank } => {
            map(name, &[(Kind::Array, dtype)], dtype, rank, |b, v| {
                if dtype.is_unsigned()
                    && let Some(r) = unsigned::unary(b, op, v[0])
                {
                    return r;
                }
                b.unary(unary_op(op), v[0])
            })
        }
        Key::Select { dtype, rank, kinds } => {
            let inputs = [
                (kinds[0], DType::Bool),
                (kinds[1], dtype),
                (kinds[2], dtype),
            ];
            map(name, &inputs, dtype, rank, |b, v| {
                b.select(v[0], v[1], v[2])
            })
        }
        Key::Reduce { op, dtype, rank } => reduce(name, op, dtype, rank, |_, a| a),
        Key::ReduceAxes {
            op,
            dtype,
            rank,
            mask,
        } => reduce_axes(name, op, dtype, rank, mask),
        Key::ReduceRows {
            op,
            dtype,
            kept,
            reduced,
        } => reduce_rows(name, op, dtype, kept, reduced),
        Key::TreeBlocks {
            op,
            dtype,
            rank,
            leaves,
        } => tree_blocks(name, op, dtype, rank, leaves),
        Key::Vecmat { dtype } => vecmat(name, dtype),
        Key::VecmatRows { dtype } => vecmat_rows(name, dtype),
        Key::Dot { dtype } => dot(name, dtype),
        Key::DotFold { dtype } => dot_fold(name, dtype),
        Key::SumSquares { dtype, rank } => {
            reduce(name, ReduceOp::Sum, dtype, rank, |b, a| b.mul(a, a))
        }
        Key::SqrtInPlace { dtype } => sqrt_in_place(name, dtype),
        Key::Matvec { dtype } => matvec(name, dtype),
        Key::MatvecParts { dtype } => weft_sdk::ir::matvec::matvec_parts(name, dtype),
        // The host's canonical product (`weft_ir::product`): recognized there, it runs alone
        // and through the CPU back end's blocked routine.
        Key::Matmul { dtype } => weft_sdk::ir::product::matmul(name, dtype),
        // Also recognized by the host: it runs alone, blocks of points through a routine.
        Key::MatmulRows { dtype } => weft_sdk::ir::product::matmul_rows(name, dtype),
        Key::DiagExtract { dtype } => diag_extract(name, dtype),
        Key::DiagEmbed { dtype } => diag_embed(name, dtype),
        Key::Cumsum { dtype, kept } => cumsum(name, dtype, kept),
        Key::ArgRows { op, dtype, kept } => arg_rows(name, op, dtype, kept),
        Key::FlatNonzero => flat_nonzero(name),
        Key::ChunkCounts => chunk_counts(name),
        Key::Scatter { dtype, accumulate } => scatter(name, dtype, accumulate),
        Key::MergePass { dtype, indices } => merge_pass(name, dtype, indices),
        Key::Take {
            dtype,
            index,
            rank,
            axis,
        } => take(name, dtype, index, rank, axis),
    };
    k.finish_validated().map_err(|e| e.to_string())
}

/// An input of an element-wise kernel, once declared.
#[derive(Clone, Copy)]
enum Input {
    /// A store loaded at the loop index.
    Tiled(StoreParam),
    /// A 0-d store loaded at `[]`.
    Whole(StoreParam),
    /// A scalar parameter's value.
    Value(Value),
}

/// An element-wise kernel: `out[i] = f(inputs at i)` over an output of rank `rank`. Array
/// inputs become store parameters (in order), then `out`, then the scalar inputs.
fn map(
    name: String,
    inputs: &[(Kind, DType)],
    out_dtype: DType,
    rank: u32,
    f: impl FnOnce(&mut BodyBuilder, &[Value]) -> Value,
) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let stores: Vec<Option<StoreParam>> = inputs
        .iter()
        .map(|&(kind, dtype)| match kind {
            Kind::Array => Some(k.store(dtype, rank, Privilege::Read)),
            Kind::Zero => Some(k.store(dtype, 0, Privilege::Read)),
            Kind::Scalar => None,
        })
        .collect();
    let out = k.store(out_dtype, rank, Privilege::Write);
    let inputs: Vec<Input> = inputs
        .iter()
        .zip(stores)
        .map(|(&(kind, dtype), store)| match (kind, store) {
            (Kind::Zero, Some(p)) => Input::Whole(p),
            (_, Some(p)) => Input::Tiled(p),
            // A scalar of an unsigned dtype travels as its `i64` value.
            (_, None) => Input::Value(k.scalar(dtype.value_type())),
        })
        .collect();
    k.parallel(out, |b, idx| {
        let values: Vec<Value> = inputs
            .iter()
            .map(|input| match *input {
                Input::Tiled(p) => b.load(p, idx),
                Input::Whole(p) => b.load(p, &[]),
                Input::Value(v) => v,
            })
            .collect();
        let r = f(b, &values);
        b.store(out, idx, r);
    });
    k
}

/// Emits `a op b`.
fn binary(b: &mut BodyBuilder, op: BinOp, x: Value, y: Value) -> Value {
    match lower(op) {
        Lowered::Binary(o) => b.binary(o, x, y),
        Lowered::Cmp(c) => b.cmp(c, x, y),
        Lowered::FloorRemainder => {
            // NumPy's `%`: C's remainder (`fmod` for floats), moved by `y` where it is
            // nonzero and its sign differs from `y`'s, so that it takes the divisor's sign.
            let r = b.binary(BinaryOp::Rem, x, y);
            let zero = b.const_like(r, 0.0);
            let nonzero = b.cmp(CmpOp::Ne, r, zero);
            let r_neg = b.cmp(CmpOp::Lt, r, zero);
            let y_neg = b.cmp(CmpOp::Lt, y, zero);
            let signs_differ = b.cmp(CmpOp::Ne, r_neg, y_neg);
            let adjust = b.and(nonzero, signs_differ);
            let moved = b.binary(BinaryOp::Add, r, y);
            b.select(adjust, moved, r)
        }
        Lowered::LeftShift => {
            // NumPy's `<<`: 0 once the amount reaches the width (the IR takes it modulo).
            let width = b.const_like(y, bit_width(x));
            let past = b.cmp(CmpOp::Ge, y, width);
            let shifted = b.binary(BinaryOp::Shl, x, y);
            let zero = b.const_like(x, 0.0);
            b.select(past, zero, shifted)
        }
        Lowered::ArithmeticRightShift => {
            // NumPy's `>>` on signed integers copies the sign bit in: the IR's logical shift
            // of `x`, or of `!x` inverted back for negative `x`; amounts from the width on
            // shift by width - 1 (0 or -1).
            let top = b.const_like(y, bit_width(x) - 1.0);
            let amount = b.binary(BinaryOp::Min, y, top);
            let zero = b.const_like(x, 0.0);
            let negative = b.cmp(CmpOp::Lt, x, zero);
            let flipped = b.unary(UnaryOp::Not, x);
            let source = b.select(negative, flipped, x);
            let shifted = b.binary(BinaryOp::Shr, source, amount);
            let back = b.unary(UnaryOp::Not, shifted);
            b.select(negative, back, shifted)
        }
    }
}

/// The bits of `v`'s integer type, as a float (for `const_like`).
fn bit_width(v: Value) -> f64 {
    if v.dtype() == DType::I32 { 32.0 } else { 64.0 }
}

/// The IR operation a binary operator becomes.
enum Lowered {
    /// A binary operation (the result has the operands' type).
    Binary(BinaryOp),
    /// A comparison (the result is a bool).
    Cmp(CmpOp),
    /// NumPy's remainder (the sign of the divisor), from the IR's truncated remainder.
    FloorRemainder,
    /// NumPy's `<<` (0 past the bit width).
    LeftShift,
    /// NumPy's `>>` (arithmetic, saturating at the bit width).
    ArithmeticRightShift,
}

/// The IR operation of a binary operator.
fn lower(op: BinOp) -> Lowered {
    match op {
        BinOp::Add => Lowered::Binary(BinaryOp::Add),
        BinOp::Sub => Lowered::Binary(BinaryOp::Sub),
        BinOp::Mul => Lowered::Binary(BinaryOp::Mul),
        BinOp::Div => Lowered::Binary(BinaryOp::Div),
        BinOp::Pow => Lowered::Binary(BinaryOp::Pow),
        BinOp::Minimum => Lowered::Binary(BinaryOp::Min),
        BinOp::Maximum => Lowered::Binary(BinaryOp::Max),
        BinOp::LogicalAnd => Lowered::Binary(BinaryOp::And),
        BinOp::LogicalOr => Lowered::Binary(BinaryOp::Or),
        BinOp::Equal => Lowered::Cmp(CmpOp::Eq),
        BinOp::NotEqual => Lowered::Cmp(CmpOp::Ne),
        BinOp::Less => Lowered::Cmp(CmpOp::Lt),
        BinOp::LessEqual => Lowered::Cmp(CmpOp::Le),
        BinOp::Greater => Lowered::Cmp(CmpOp::Gt),
        BinOp::GreaterEqual => Lowered::Cmp(CmpOp::Ge),
        BinOp::Remainder => Lowered::FloorRemainder,
        BinOp::Arctan2 => Lowered::Binary(BinaryOp::Atan2),
        BinOp::BitwiseAnd => Lowered::Binary(BinaryOp::And),
        BinOp::BitwiseOr => Lowered::Binary(BinaryOp::Or),
        BinOp::BitwiseXor => Lowered::Binary(BinaryOp::Xor),
        BinOp::LeftShift => Lowered::LeftShift,
        BinOp::RightShift => Lowered::ArithmeticRightShift,
    }
}

/// The IR operator of a unary operator.
fn unary_op(op: UnOp) -> UnaryOp {
    match op {
        UnOp::Neg => UnaryOp::Neg,
        UnOp::Abs => UnaryOp::Abs,
        UnOp::Sqrt => UnaryOp::Sqrt,
        UnOp::Exp => UnaryOp::Exp,
        UnOp::Log => UnaryOp::Log,
        UnOp::Sin => UnaryOp::Sin,
        UnOp::Cos => UnaryOp::Cos,
        UnOp::Tanh => UnaryOp::Tanh,
        UnOp::Erf => UnaryOp::Erf,
        UnOp::LogicalNot => UnaryOp::Not,
        UnOp::Floor => UnaryOp::Floor,
        UnOp::Ceil => UnaryOp::Ceil,
        UnOp::Arcsin => UnaryOp::Asin,
        UnOp::Arccos => UnaryOp::Acos,
        UnOp::Arctan => UnaryOp::Atan,
        UnOp::Sinh => UnaryOp::Sinh,
        UnOp::Cosh => UnaryOp::Cosh,
        UnOp::Arcsinh => UnaryOp::Asinh,
        UnOp::Arccosh => UnaryOp::Acosh,
        UnOp::Arctanh => UnaryOp::Atanh,
        UnOp::Invert => UnaryOp::Not,
    }
}

/// `v` converted to an element of `dtype` (an unsigned one's `i64` value), or `v` itself when
/// it already has that type.
fn cast_to(b: &mut BodyBuilder, dtype: DType, v: Value) -> Value {
    unsigned::convert(b, v.dtype(), dtype, v)
}

/// The global index (`i64`) along dimension `dim` of loop index `i` over `store`.
fn global(b: &mut BodyBuilder, store: StoreParam, dim: u32, i: Value) -> Value {
    let o = b.origin(store, dim);
    b.add(o, i)
}

/// `out[i] = dtype(start + step * g)`.
fn arange(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let out = k.store(dtype, 1, Privilege::Write);
    let start = k.scalar(DType::F64);
    let step = k.scalar(DType::F64);
    k.parallel(out, |b, idx| {
        let g = global(b, out, 0, idx[0]);
        let gf = b.cast(DType::F64, g);
        let offset = b.mul(step, gf);
        let v = b.add(start, offset);
        let v = cast_to(b, dtype, v);
        b.store(out, idx, v);
    });
    k
}

/// `out[i] = dtype(g == last ? stop : start + step * g)` (NumPy's linspace, whose last
/// element is exactly `stop`).
fn linspace(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let out = k.store(dtype, 1, Privilege::Write);
    let start = k.scalar(DType::F64);
    let step = k.scalar(DType::F64);
    let stop = k.scalar(DType::F64);
    let last = k.scalar(DType::I64);
    k.parallel(out, |b, idx| {
        let g = global(b, out, 0, idx[0]);
        let gf = b.cast(DType::F64, g);
        let offset = b.mul(step, gf);
        let v = b.add(start, offset);
        let is_last = b.eq(g, last);
        let v = b.select(is_last, stop, v);
        let v = cast_to(b, dtype, v);
        b.store(out, idx, v);
    });
    k
}

/// `out[i] = dtype(low + (high - low) * uniform(linear(g), seed))`, with the global row-major
/// linear index computed from the strides the task passes.
fn random(name: String, dtype: DType, rank: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let out = k.store(dtype, rank, Privilege::Write);
    let seed = k.scalar(DType::I64);
    let low = k.scalar(DType::F64);
    let high = k.scalar(DType::F64);
    let strides: Vec<Value> = (0..rank).map(|_| k.scalar(DType::I64)).collect();
    let span = k.sub(high, low);
    k.parallel(out, |b, idx| {
        let mut linear = b.const_i64(0);
        for (d, (&i, &stride)) in (0u32..).zip(idx.iter().zip(&strides)) {
            let g = global(b, out, d, i);
            let term = b.mul(g, stride);
            linear = b.add(linear, term);
        }
        let u = rng::emit_uniform(b, linear, seed);
        let x = b.mul(span, u);
        let v = b.add(low, x);
        let v = cast_to(b, dtype, v);
        b.store(out, idx, v);
    });
    k
}

/// `out[] op= f(a[i])` over an array `a` of rank `rank`.
fn reduce(
    name: String,
    op: ReduceOp,
    dtype: DType,
    rank: u32,
    f: impl FnOnce(&mut BodyBuilder, Value) -> Value,
) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, rank, Privilege::Read);
    let out = k.store(dtype, 0, Privilege::Reduce(op));
    k.parallel(a, |b, idx| {
        let x = b.load(a, idx);
        let v = f(b, x);
        b.reduce(out, &[], v);
    });
    k
}

/// The binary operator that combines two partial results of reduction `op`.
fn combine(b: &mut BodyBuilder, op: ReduceOp, x: Value, y: Value) -> Value {
    let bin = match op {
        ReduceOp::Sum => weft_sdk::ir::BinaryOp::Add,
        ReduceOp::Prod => weft_sdk::ir::BinaryOp::Mul,
        ReduceOp::Min => weft_sdk::ir::BinaryOp::Min,
        ReduceOp::Max => weft_sdk::ir::BinaryOp::Max,
    };
    b.binary(bin, x, y)
}

/// `out[j] op= a[i]`, `j` being `i`'s global index with the dimensions of `mask` set to 0;
/// `out` (whole, of `a`'s rank) has extent 1 in those dimensions.
fn reduce_axes(name: String, op: ReduceOp, dtype: DType, rank: u32, mask: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, rank, Privilege::Read);
    let out = k.store(dtype, rank, Privilege::Reduce(op));
    k.parallel(a, |b, idx| {
        let x = b.load(a, idx);
        let zero = b.const_i64(0);
        let mut at = Vec::with_capacity(idx.len());
        for (d, &i) in (0u32..).zip(idx) {
            at.push(if mask >> d & 1 == 1 {
                zero
            } else {
                global(b, a, d, i)
            });
        }
        b.reduce(out, &at, x);
    });
    k
}

/// Leaves per subtree of `tree_blocks`: four levels of the canonical tree per pass.
pub const TREE_BLOCK: u64 = 16;

/// `out[b, i] = ` the aligned pairwise tree (`weft_ir::reduction`'s canonical order) of
/// `a[16 g + k, i]` for `k` in `0..leaves`, `g` being `b`'s global index: a complete subtree
/// four levels up of dimension 0's tree; elements past `a`'s end count as the operator's
/// exact identity. `leaves` is 16, or the power of two at least `a`'s extent where that is
/// smaller: the 16-leaf tree's other leaves would be exact identities, which change no bit
/// (`x op identity` is `x`), so the smaller tree is the same tree. `a` is whole and read at global indices; `out` is tiled like the launch.
fn tree_blocks(name: String, op: ReduceOp, dtype: DType, rank: u32, leaves: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, rank, Privilege::Read);
    let out = k.store(dtype, rank, Privilege::Write);
    let m = k.extent(a, 0);
    k.parallel(out, |b, idx| {
        let mut at: Vec<Value> = (0..rank)
            .map(|d| global(b, out, d, idx[d as usize]))
            .collect();
        let block = b.const_i64(TREE_BLOCK as i64);
        let first = b.mul(at[0], block);
        let one = b.const_i64(1);
        let last = b.sub(m, one);
        let pad = b.constant(weft_sdk::ir::reduction::exact_identity(op, dtype));
        let mut level: Vec<Value> = (0..u64::from(leaves).min(TREE_BLOCK))
            .map(|k| {
                let offset = b.const_i64(k as i64);
                let row = b.add(first, offset);
                let inside = b.cmp(CmpOp::Lt, row, m);
                // A row past the end loads the last row (never out of bounds) and is padded.
                at[0] = b.binary(BinaryOp::Min, row, last);
                let x = b.load(a, &at);
                b.select(inside, x, pad)
            })
            .collect();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| combine(b, op, pair[0], pair[1]))
                .collect();
        }
        b.store(out, idx, level[0]);
    });
    k
}

/// `out[i] = op over j of a[i, j]`, `i` the `kept` leading dimensions (tiled like `out`) and
/// `j` the `reduced` trailing ones (whole): one reduced dimension in the lane order of
/// [`BodyBuilder::fold_lanes`] (vector code on back ends that take it), several in
/// row-major order of `j`.
fn reduce_rows(name: String, op: ReduceOp, dtype: DType, kept: u32, reduced: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, kept + reduced, Privilege::Read);
    let out = k.store(dtype, kept, Privilege::Write);
    let extents: Vec<Value> = (kept..kept + reduced).map(|d| k.extent(a, d)).collect();
    k.parallel(out, |b, idx| {
        let mut at = idx.to_vec();
        let acc = if let [n] = extents[..] {
            let lo = b.const_i64(0);
            b.fold_lanes(op, dtype, lo, n, |b, j| {
                at.push(j);
                let x = b.load(a, &at);
                at.pop();
                x
            })
        } else {
            let init = b.constant(op.identity(dtype));
            reduce_nest(b, op, a, &extents, &mut at, init)
        };
        b.store(out, idx, acc);
    });
    k
}

/// Nested `for` loops over `extents` (the dimensions after `at`'s), combining `a[at, j]`
/// into `acc` with `op`.
fn reduce_nest(
    b: &mut BodyBuilder,
    op: ReduceOp,
    a: StoreParam,
    extents: &[Value],
    at: &mut Vec<Value>,
    acc: Value,
) -> Value {
    let Some((&n, rest)) = extents.split_first() else {
        let x = b.load(a, at);
        return combine(b, op, acc, x);
    };
    let lo = b.const_i64(0);
    let out = b.for_loop(lo, n, &[acc], |b, j, carried| {
        at.push(j);
        let v = reduce_nest(b, op, a, rest, at, carried[0]);
        at.pop();
        vec![v]
    });
    out[0]
}

/// `out[i]` = the first `j` where `a[i, j]` is least (`Min`) or greatest (`Max`), or the first
/// `j` where it is NaN: `i` the `kept` leading dimensions (the launch's), `j` the last one
/// (whole, not empty), scanned in order with the best value and its position carried.
fn arg_rows(name: String, op: ReduceOp, dtype: DType, kept: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, kept + 1, Privilege::Read);
    let out = k.store(DType::I64, kept, Privilege::Write);
    let n = k.extent(a, kept);
    let beats = if op == ReduceOp::Max {
        CmpOp::Gt
    } else {
        CmpOp::Lt
    };
    k.parallel(out, |b, idx| {
        let mut at = idx.to_vec();
        let (zero, one) = (b.const_i64(0), b.const_i64(1));
        at.push(zero);
        let first = b.load(a, &at);
        at.pop();
        let found = b.for_loop(one, n, &[first, zero], |b, j, carried| {
            let (best, pos) = (carried[0], carried[1]);
            at.push(j);
            let x = b.load(a, &at);
            at.pop();
            let mut better = b.cmp(beats, x, best);
            if dtype.is_float() {
                // A NaN beats every number and nothing beats a NaN: the first NaN stays.
                let x_nan = b.cmp(CmpOp::Ne, x, x);
                let best_number = b.cmp(CmpOp::Eq, best, best);
                let nan_first = b.and(x_nan, best_number);
                better = b.or(better, nan_first);
            }
            vec![b.select(better, x, best), b.select(better, j, pos)]
        });
        b.store(out, idx, found[1]);
    });
    k
}

/// `out[i, j] = a[i, 0] + ... + a[i, j]`: `i` the `kept` leading dimensions, iterated over
/// `domain` (a view of `a[..., 0]` tiled like the launch), `j` the last one (whole), summed
/// in order.
fn cumsum(name: String, dtype: DType, kept: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let domain = k.store(dtype, kept, Privilege::Read);
    let a = k.store(dtype, kept + 1, Privilege::Read);
    let out = k.store(dtype, kept + 1, Privilege::Write);
    let n = k.extent(a, kept);
    k.parallel(domain, |b, idx| {
        let zero = b.constant(ReduceOp::Sum.identity(dtype));
        let lo = b.const_i64(0);
        let mut at = idx.to_vec();
        b.for_loop(lo, n, &[zero], |b, j, acc| {
            at.push(j);
            let x = b.load(a, &at);
            let sum = b.add(acc[0], x);
            b.store(out, &at, sum);
            at.pop();
            vec![sum]
        });
    });
    k
}

/// `out[k]` = the position of the `k`-th true element of the 1-d bool `mask` (`total` of
/// them, `out` one longer: a false element writes its position into the last slot), from one
/// point that walks only the chunks of `chunk` elements whose count in `counts` (see
/// [`chunk_counts`]) is not zero: a sparse mask's walk skips most of it.
fn flat_nonzero(name: String) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let total = k.store(DType::I64, 0, Privilege::Read);
    let mask = k.store(DType::Bool, 1, Privilege::Read);
    let counts = k.store(DType::I64, 1, Privilege::Read);
    let out = k.store(DType::I64, 1, Privilege::Write);
    let chunk = k.scalar(DType::I64);
    let n = k.extent(mask, 0);
    let chunks = k.extent(counts, 0);
    k.parallel(total, |b, _| {
        let count = b.load(total, &[]);
        let zero = b.const_i64(0);
        b.for_loop(zero, chunks, &[zero], |b, c, before| {
            let here = b.load(counts, &[c]);
            let lo = b.mul(c, chunk);
            let end = b.add(lo, chunk);
            let end = b.binary(BinaryOp::Min, end, n);
            // A chunk with no true element runs no iteration.
            let none = b.cmp(CmpOp::Eq, here, zero);
            let hi = b.select(none, lo, end);
            b.for_loop(lo, hi, &[before[0]], |b, i, seen| {
                let m = b.load(mask, &[i]);
                let at = b.select(m, seen[0], count);
                b.store(out, &[at], i);
                let step = b.cast(DType::I64, m);
                vec![b.add(seen[0], step)]
            });
            vec![b.add(before[0], here)]
        });
    });
    k
}

/// `counts[c]` = the number of true elements of `mask[c * chunk .. (c + 1) * chunk]` (the
/// last chunk shorter), for the chunks `c` of each point's tile of `counts`.
fn chunk_counts(name: String) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let mask = k.store(DType::Bool, 1, Privilege::Read);
    let counts = k.store(DType::I64, 1, Privilege::Write);
    let chunk = k.scalar(DType::I64);
    let n = k.extent(mask, 0);
    k.parallel(counts, |b, c| {
        let g = global(b, counts, 0, c[0]);
        let lo = b.mul(g, chunk);
        let hi = b.add(lo, chunk);
        let hi = b.binary(BinaryOp::Min, hi, n);
        let zero = b.const_i64(0);
        let sum = b.for_loop(lo, hi, &[zero], |b, i, s| {
            let m = b.load(mask, &[i]);
            let one = b.cast(DType::I64, m);
            vec![b.add(s[0], one)]
        });
        b.store(counts, c, sum[0]);
    });
    k
}

/// Whether `x` sorts before `y` in NumPy's order: NaN after every number (two NaNs equal),
/// bools as `0 < 1`.
fn sorts_before(b: &BodyBuilder, dtype: DType, x: Value, y: Value) -> Value {
    match dtype {
        DType::F32 | DType::F64 => {
            let less = b.lt(x, y);
            let y_nan = b.ne(y, y);
            let x_number = b.eq(x, x);
            let nan_after = b.and(y_nan, x_number);
            b.or(less, nan_after)
        }
        DType::Bool => {
            let (x, y) = (b.cast(DType::I32, x), b.cast(DType::I32, y));
            b.lt(x, y)
        }
        DType::I32 | DType::I64 => b.lt(x, y),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unsigned::cmp(b, dtype, CmpOp::Lt, x, y)
        }
    }
}

/// One pass of a bottom-up stable merge sort along dimension 1 of `src` (rows of `n`): the
/// runs `[lo, lo + width)` and `[lo + width, lo + 2 width)` of each row, each sorted, merge into
/// `dst`, a left element first on ties. Each point writes one chunk of `chunk` outputs of one
/// pair (`chunk` divides `2 width`, or equals it): it finds where its chunk starts in the two
/// runs by `steps` halvings of the merge path (none when the chunk is the whole pair), then
/// merges. The domain is a strided view with one element per chunk, `(rows, chunks)`, or
/// `(chunks, rows)` when `swap` is nonzero (the back end splits the first dimension across
/// threads). With `indices`, the keys' positions (`i64`) move with them.
fn merge_pass(name: String, dtype: DType, indices: bool) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let domain = k.store(dtype, 2, Privilege::Read);
    let src = k.store(dtype, 2, Privilege::Read);
    let dst = k.store(dtype, 2, Privilege::Write);
    let positions = indices.then(|| {
        (
            k.store(DType::I64, 2, Privilege::Read),
            k.store(DType::I64, 2, Privilege::Write),
        )
    });
    let width = k.scalar(DType::I64);
    let chunk = k.scalar(DType::I64);
    let steps = k.scalar(DType::I64);
    let swap = k.scalar(DType::I64);
    let n = k.extent(src, 1);
    k.parallel(domain, |b, p| {
        let zero = b.const_i64(0);
        let one = b.const_i64(1);
        let swapped = b.ne(swap, zero);
        let row = b.select(swapped, p[1], p[0]);
        let c = b.select(swapped, p[0], p[1]);
        let last = b.sub(n, one);
        // Every load is at a position in the row, whether or not its value is used.
        let at = |b: &BodyBuilder, x: Value| {
            let x = b.max(x, zero);
            b.min(x, last)
        };
        let start = b.mul(c, chunk);
        let pair = b.add(width, width);
        let lo = b.mul(b.div(start, pair), pair);
        let mid = b.min(b.add(lo, width), n);
        let hi = b.min(b.add(lo, pair), n);
        let end = b.min(b.add(start, chunk), hi);
        let d = b.sub(start, lo);
        let (left_len, right_len) = (b.sub(mid, lo), b.sub(hi, mid));
        // The merge path: how many of the first `d` outputs come from the left run.
        let low = b.max(b.sub(d, right_len), zero);
        let high = b.min(d, left_len);
        let found = b.for_loop(zero, steps, &[low, high], |b, _, range| {
            let (low, high) = (range[0], range[1]);
            let active = b.lt(low, high);
            let m = b.div(b.add(low, high), b.const_i64(2));
            let left = b.load(src, &[row, at(b, b.add(lo, m))]);
            let right_at = b.sub(b.sub(b.add(mid, d), m), one);
            let right = b.load(src, &[row, at(b, right_at)]);
            // The left element goes first unless the right one sorts strictly before it.
            let right_first = sorts_before(b, dtype, right, left);
            let left_first = b.not(right_first);
            let raise = b.and(active, left_first);
            let lower = b.and(active, right_first);
            vec![
                b.select(raise, b.add(m, one), low),
                b.select(lower, m, high),
            ]
        });
        let i0 = b.add(lo, found[0]);
        let j0 = b.sub(b.add(mid, d), found[0]);
        b.for_loop(start, end, &[i0, j0], |b, out, ij| {
            let (i, j) = (ij[0], ij[1]);
            // `i` and `j` are never negative: only the end of the row bounds them.
            let (ai, aj) = (b.min(i, last), b.min(j, last));
            let left = b.load(src, &[row, ai]);
            let right = b.load(src, &[row, aj]);
            let left_done = b.ge(i, mid);
            let right_left = b.lt(j, hi);
            let before = sorts_before(b, dtype, right, left);
            let either = b.or(left_done, before);
            let take_right = b.and(right_left, either);
            b.store(dst, &[row, out], b.select(take_right, right, left));
            if let Some((from, to)) = positions {
                let pl = b.load(from, &[row, ai]);
                let pr = b.load(from, &[row, aj]);
                b.store(to, &[row, out], b.select(take_right, pr, pl));
            }
            let step = b.cast(DType::I64, take_right);
            vec![b.sub(b.add(i, one), step), b.add(j, step)]
        });
    });
    k
}

/// `p + len` where `p` is negative and that is in range, else `p`: a position below `-len`
/// stays itself, so that the access it faults names the position the caller gave (NumPy's
/// `index -7 is out of bounds for axis 0 with size 5`).
fn wrap_negative(b: &mut BodyBuilder, p: Value, len: Value, zero: Value) -> Value {
    let negative = b.cmp(CmpOp::Lt, p, zero);
    let wrapped = b.add(p, len);
    let wrapped = b.select(negative, wrapped, p);
    let still = b.cmp(CmpOp::Lt, wrapped, zero);
    b.select(still, p, wrapped)
}

/// One point walks the positions in order: `out[p[j]] = v[j]`, or `out[p[j]] += v[j]` when
/// `accumulate` (a negative position counts from the end; an out-of-range one faults, as
/// every access is checked). The domain is a 0-d view of the first position: one point.
fn scatter(name: String, dtype: DType, accumulate: bool) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let domain = k.store(DType::I64, 0, Privilege::Read);
    let positions = k.store(DType::I64, 1, Privilege::Read);
    let values = k.store(dtype, 1, Privilege::Read);
    let out = k.store(dtype, 1, Privilege::ReadWrite);
    let n = k.extent(positions, 0);
    let len = k.extent(out, 0);
    k.parallel(domain, |b, _| {
        let zero = b.const_i64(0);
        b.for_loop(zero, n, &[], |b, j, _| {
            let p = b.load(positions, &[j]);
            let p = wrap_negative(b, p, len, zero);
            let v = b.load(values, &[j]);
            let v = if accumulate {
                let old = b.load(out, &[p]);
                b.add(old, v)
            } else {
                v
            };
            b.store(out, &[p], v);
            vec![]
        });
    });
    k
}

/// `out[i] = a[i with dimension axis replaced by p]` where `p = idx[i_axis]`, plus `a`'s
/// extent there if negative (an out-of-range position faults, as every access is checked).
fn take(name: String, dtype: DType, index: DType, rank: u32, axis: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, rank, Privilege::Read);
    let idx = k.store(index, 1, Privilege::Read);
    let out = k.store(dtype, rank, Privilege::Write);
    let n = k.extent(a, axis);
    k.parallel(out, |b, i| {
        // `a` and `idx` are whole: they are read at global coordinates.
        let mut at: Vec<Value> = (0..rank)
            .map(|d| global(b, out, d, i[d as usize]))
            .collect();
        let raw = b.load(idx, &[at[axis as usize]]);
        let p = if index == DType::I64 {
            raw
        } else {
            b.cast(DType::I64, raw)
        };
        let zero = b.const_i64(0);
        let p = wrap_negative(b, p, n, zero);
        at[axis as usize] = p;
        let x = b.load(a, &at);
        b.store(out, i, x);
    });
    k
}

/// `y[r] += A[r, i] * x[i]` for every row `r`: `A` tiled by columns like `x`, `y` whole.
fn vecmat(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 2, Privilege::Read);
    let x = k.store(dtype, 1, Privilege::Read);
    let y = k.store(dtype, 1, Privilege::Reduce(ReduceOp::Sum));
    let m = k.extent(a, 0);
    k.parallel(x, |b, idx| {
        let i = idx[0];
        let xi = b.load(x, &[i]);
        let lo = b.const_i64(0);
        b.for_loop(lo, m, &[], |b, r, _| {
            let ari = b.load(a, &[r, i]);
            let p = b.mul(ari, xi);
            b.reduce(y, &[r], p);
            vec![]
        });
    });
    k
}

/// `y[r] += B[i, r] * x[i]` for every `r`: `B` (the transpose of `vecmat`'s `A`) tiled by
/// rows like `x`, `y` whole; the same operations in the same order as `vecmat`.
fn vecmat_rows(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let bm = k.store(dtype, 2, Privilege::Read);
    let x = k.store(dtype, 1, Privilege::Read);
    let y = k.store(dtype, 1, Privilege::Reduce(ReduceOp::Sum));
    let m = k.extent(bm, 1);
    k.parallel(x, |b, idx| {
        let i = idx[0];
        let xi = b.load(x, &[i]);
        let lo = b.const_i64(0);
        b.for_loop(lo, m, &[], |b, r, _| {
            let bir = b.load(bm, &[i, r]);
            let p = b.mul(bir, xi);
            b.reduce(y, &[r], p);
            vec![]
        });
    });
    k
}

/// `out[] += a[i] * b[i]`.
fn dot(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 1, Privilege::Read);
    let bs = k.store(dtype, 1, Privilege::Read);
    let out = k.store(dtype, 0, Privilege::Reduce(ReduceOp::Sum));
    k.parallel(a, |b, idx| {
        let x = b.load(a, idx);
        let y = b.load(bs, idx);
        let p = b.mul(x, y);
        b.reduce(out, &[], p);
    });
    k
}

/// `out[] = sum_i a[i] * b[i]` on one point, folded in the lane order, each term added by
/// one fused multiply-add (as BLAS's `dot` kernels do).
fn dot_fold(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 1, Privilege::Read);
    let bs = k.store(dtype, 1, Privilege::Read);
    let out = k.store(dtype, 0, Privilege::Write);
    let n = k.extent(a, 0);
    k.parallel(out, |b, idx| {
        let lo = b.const_i64(0);
        let sum = b.fold_lanes_fma(dtype, lo, n, |b, i| {
            let x = b.load(a, &[i]);
            let y = b.load(bs, &[i]);
            (x, y)
        });
        b.store(out, idx, sum);
    });
    k
}

/// `out[] = sqrt(out[])`.
fn sqrt_in_place(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let out = k.store(dtype, 0, Privilege::ReadWrite);
    k.parallel(out, |b, idx| {
        let x = b.load(out, idx);
        let r = b.sqrt(x);
        b.store(out, idx, r);
    });
    k
}

/// `y[i] = sum_j A[i, j] * x[j]`: `A` tiled by rows like `y`, `x` whole.
fn matvec(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 2, Privilege::Read);
    let x = k.store(dtype, 1, Privilege::Read);
    let y = k.store(dtype, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, idx| {
        let i = idx[0];
        let lo = b.const_i64(0);
        let sum = b.fold_lanes(ReduceOp::Sum, dtype, lo, n, |b, j| {
            let aij = b.load(a, &[i, j]);
            let xj = b.load(x, &[j]);
            b.mul(aij, xj)
        });
        b.store(y, idx, sum);
    });
    k
}

/// `out[i] = A[i, i]`, `A` the diagonal block of `out`'s elements (it starts where `out`
/// does, along both dimensions).
fn diag_extract(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 2, Privilege::Read);
    let out = k.store(dtype, 1, Privilege::Write);
    k.parallel(out, |b, idx| {
        let v = b.load(a, &[idx[0], idx[0]]);
        b.store(out, idx, v);
    });
    k
}

/// `out[i, j] = row == col ? v[row] : 0` with `row` and `col` global; `v` whole.
fn diag_embed(name: String, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let v = k.store(dtype, 1, Privilege::Read);
    let out = k.store(dtype, 2, Privilege::Write);
    k.parallel(out, |b, idx| {
        let row = global(b, out, 0, idx[0]);
        let col = global(b, out, 1, idx[1]);
        let on_diagonal = b.eq(row, col);
        let x = b.load(v, &[row]);
        let zero = b.const_of(dtype, 0.0);
        let r = b.select(on_diagonal, x, zero);
        b.store(out, idx, r);
    });
    k
}

#[cfg(test)]
mod tests {
    use weft_sdk::ir::{Param, text};

    use super::*;
    use crate::catalog::{BinOp, UnOp};

    const RANKS: [u32; 3] = [0, 1, 3];
    const KINDS: [Kind; 3] = [Kind::Array, Kind::Zero, Kind::Scalar];

    /// Every key the operations can produce for small ranks.
    fn all_keys() -> Vec<Key> {
        let mut keys = vec![Key::FlatNonzero, Key::ChunkCounts];
        for dtype in DType::ALL {
            keys.extend([
                Key::MergePass {
                    dtype,
                    indices: false,
                },
                Key::MergePass {
                    dtype,
                    indices: true,
                },
                Key::Arange { dtype },
                Key::Linspace { dtype },
                Key::Dot { dtype },
                Key::DotFold { dtype },
                Key::SqrtInPlace { dtype },
                Key::Matvec { dtype },
                Key::MatvecParts { dtype },
                Key::Vecmat { dtype },
                Key::VecmatRows { dtype },
                Key::Matmul { dtype },
                Key::MatmulRows { dtype },
                Key::DiagExtract { dtype },
                Key::DiagEmbed { dtype },
            ]);
            for rank in RANKS {
                keys.extend([
                    Key::Fill { dtype, rank },
                    Key::Random { dtype, rank },
                    Key::SumSquares { dtype, rank },
                ]);
                keys.extend(KINDS.map(|src| Key::Copy { dtype, rank, src }));
                keys.extend(DType::ALL.map(|to| Key::Cast {
                    from: dtype,
                    to,
                    rank,
                }));
                keys.extend(UnOp::ALL.map(|op| Key::Unary { op, dtype, rank }));
                keys.push(Key::Cumsum { dtype, kept: rank });
                keys.extend([ReduceOp::Min, ReduceOp::Max].map(|op| Key::ArgRows {
                    op,
                    dtype,
                    kept: rank,
                }));
                for index in DType::ALL {
                    keys.extend((0..rank).map(|axis| Key::Take {
                        dtype,
                        index,
                        rank,
                        axis,
                    }));
                }
                keys.extend(ReduceOp::ALL.map(|op| Key::Reduce { op, dtype, rank }));
                for k0 in KINDS {
                    for k1 in KINDS {
                        keys.extend(BinOp::ALL.map(|op| Key::Binary {
                            op,
                            dtype,
                            rank,
                            kinds: [k0, k1],
                        }));
                        keys.extend(KINDS.map(|k2| Key::Select {
                            dtype,
                            rank,
                            kinds: [k0, k1, k2],
                        }));
                    }
                }
            }
        }
        keys
    }

    #[test]
    fn every_valid_key_builds_a_valid_kernel() {
        let keys = all_keys();
        let valid: Vec<&Key> = keys.iter().filter(|k| k.check().is_ok()).collect();
        assert!(valid.len() > 1000, "{} valid keys", valid.len());
        for key in valid {
            let s = key.to_string();
            assert_eq!(s.parse::<Key>().as_ref(), Ok(key), "{s}");
            let kernel = build(key).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(kernel.name, s);
        }
    }

    #[test]
    fn binary_kernel_takes_arrays_then_out_then_scalars() {
        let key: Key = "binary.less.f32.r2.sa".parse().expect("valid key");
        let kernel = build(&key).expect("valid kernel");
        assert_eq!(
            kernel.params,
            vec![
                Param::Store {
                    dtype: DType::F32,
                    rank: 2,
                    privilege: Privilege::Read
                },
                Param::Store {
                    dtype: DType::Bool,
                    rank: 2,
                    privilege: Privilege::Write
                },
                Param::Scalar { dtype: DType::F32 },
            ]
        );
    }

    #[test]
    fn zero_d_operands_are_loaded_at_no_index() {
        let key: Key = "binary.mul.f64.r1.za".parse().expect("valid key");
        let text = text::print(&build(&key).expect("valid kernel"));
        assert!(text.contains("%arg0[]"), "{text}");
    }

    #[test]
    fn row_products_run_in_vector_lanes_and_wide_bodies() {
        // `matvec`'s row products (by parts too) and a reduction over a trailing dimension
        // are in the lane order, which runs in vector lanes; the row products also run
        // several rows at a time (unroll-and-jam). `matmul`'s elements are one chain of `fma`s each
        // (the product routine's order), which its compiled loop runs as written, term by
        // term: the CPU back end runs the recognized kernel through the routine instead.
        let keys = [
            Key::Matvec { dtype: DType::F64 },
            Key::MatvecParts { dtype: DType::F64 },
            Key::Matmul { dtype: DType::F64 },
            Key::Matmul { dtype: DType::F32 },
            Key::ReduceRows {
                op: ReduceOp::Sum,
                dtype: DType::F64,
                kept: 1,
                reduced: 1,
            },
        ];
        let mut cpu = weft_cpu::CpuBackend::new().expect("a CPU back end");
        let paths = cpu.compiler().available_paths();
        for key in keys {
            let kernel = build(&key).expect("valid kernel");
            for &path in &paths {
                cpu.compiler().set_path(path).expect("an available path");
                let compiled = cpu.compile(&kernel).expect("compiles");
                // A product by parts has a lane loop per part.
                let loops = match key {
                    Key::MatvecParts { .. } => weft_sdk::ir::matvec::PARTS as usize,
                    _ => 1,
                };
                let (lanes, wide) = match path {
                    _ if matches!(key, Key::Matmul { .. }) => (0, 0),
                    weft_cpu::SimdPath::Scalar => (0, 0),
                    weft_cpu::SimdPath::Sse => (loops, 0),
                    // The wide bodies take `f64` lanes.
                    _ => (loops, loops),
                };
                assert_eq!(compiled.lane_loops(), lanes, "{key} on {path}");
                assert_eq!(compiled.wide_lane_loops(), wide, "{key} on {path}");
                // Row products run several rows side by side wherever they take lanes.
                if matches!(key, Key::Matvec { .. } | Key::MatvecParts { .. }) {
                    assert_eq!(compiled.jammed_loops(), lanes.min(1), "{key} on {path}");
                }
            }
        }
    }

    #[test]
    fn reductions_reduce_into_a_0d_output() {
        let key: Key = "reduce.max.i32.r2".parse().expect("valid key");
        let kernel = build(&key).expect("valid kernel");
        assert_eq!(
            kernel.params[1],
            Param::Store {
                dtype: DType::I32,
                rank: 0,
                privilege: Privilege::Reduce(ReduceOp::Max)
            }
        );
    }
}
