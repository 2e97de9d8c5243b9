//! Conversions from the WIT types plugins hand over to the host's own types.

use weft_ir::flat::{FlatAccess, FlatKernel, FlatOp, Region};
use weft_ir::{BinaryOp, CmpOp, DType, Param, Privilege, ReduceOp, Scalar, UnaryOp};

use crate::bindings::base::weft::plugin::{kernel_ir as wit, types};
use weft_runtime::partition::{Partition, Tiling};

/// The flat IR of a WIT kernel (not yet checked: `weft_ir::flat::from_flat` and the validator
/// do that).
pub fn flat_kernel(k: wit::Kernel) -> FlatKernel {
    FlatKernel {
        name: k.name,
        params: k.params.into_iter().map(param).collect(),
        regions: k
            .regions
            .into_iter()
            .map(|r| Region {
                ops: r.ops.into_iter().map(op).collect(),
                yields: r.yields,
            })
            .collect(),
    }
}

fn param(p: wit::Param) -> Param {
    match p {
        wit::Param::Store(s) => Param::Store {
            dtype: dtype(s.dtype),
            rank: s.rank,
            privilege: privilege(s.privilege),
        },
        wit::Param::Scalar(d) => Param::Scalar { dtype: dtype(d) },
    }
}

fn access(a: wit::Access) -> FlatAccess {
    FlatAccess {
        param: a.param,
        indices: a.indices,
    }
}

fn op(o: wit::Op) -> FlatOp {
    match o {
        wit::Op::Constant(s) => FlatOp::Const(scalar(s)),
        wit::Op::Param(p) => FlatOp::Param(p),
        wit::Op::Binary(b) => FlatOp::Binary(binary_op(b.op), b.lhs, b.rhs),
        wit::Op::Unary((op, v)) => FlatOp::Unary(unary_op(op), v),
        wit::Op::Compare(c) => FlatOp::Cmp(cmp_op(c.op), c.lhs, c.rhs),
        wit::Op::Select((c, a, b)) => FlatOp::Select(c, a, b),
        wit::Op::Fma((a, b, c)) => FlatOp::Fma(a, b, c),
        wit::Op::Cast((d, v)) => FlatOp::Cast(dtype(d), v),
        wit::Op::Bitcast((d, v)) => FlatOp::Bitcast(dtype(d), v),
        wit::Op::Load(a) => FlatOp::Load(access(a)),
        wit::Op::Store((a, v)) => FlatOp::Store(access(a), v),
        wit::Op::Reduce(r) => FlatOp::Reduce(access(r.target), reduce_op(r.op), r.value),
        wit::Op::Extent((param, dim)) => FlatOp::Extent { param, dim },
        wit::Op::Origin((param, dim)) => FlatOp::Origin { param, dim },
        wit::Op::Parallel(p) => FlatOp::Parallel {
            over: p.over,
            body: p.body,
        },
        wit::Op::ForLoop(l) => FlatOp::For {
            lo: l.lo,
            hi: l.hi,
            init: l.init,
            body: l.body,
        },
    }
}

/// The IR element type of a WIT one.
pub fn dtype(d: types::Dtype) -> DType {
    match d {
        types::Dtype::F32 => DType::F32,
        types::Dtype::F64 => DType::F64,
        types::Dtype::I32 => DType::I32,
        types::Dtype::I64 => DType::I64,
        types::Dtype::Bool => DType::Bool,
        types::Dtype::U8 => DType::U8,
        types::Dtype::U16 => DType::U16,
        types::Dtype::U32 => DType::U32,
        types::Dtype::U64 => DType::U64,
    }
}

/// The WIT element type of an IR one.
pub fn wit_dtype(d: DType) -> types::Dtype {
    match d {
        DType::F32 => types::Dtype::F32,
        DType::F64 => types::Dtype::F64,
        DType::I32 => types::Dtype::I32,
        DType::I64 => types::Dtype::I64,
        DType::Bool => types::Dtype::Bool,
        DType::U8 => types::Dtype::U8,
        DType::U16 => types::Dtype::U16,
        DType::U32 => types::Dtype::U32,
        DType::U64 => types::Dtype::U64,
    }
}

/// The IR constant of a WIT scalar.
pub fn scalar(s: types::Scalar) -> Scalar {
    match s {
        types::Scalar::F32(v) => Scalar::F32(v),
        types::Scalar::F64(v) => Scalar::F64(v),
        types::Scalar::I32(v) => Scalar::I32(v),
        types::Scalar::I64(v) => Scalar::I64(v),
        types::Scalar::Bool(v) => Scalar::Bool(v),
    }
}

/// The WIT scalar of an IR constant.
pub fn wit_scalar(s: Scalar) -> types::Scalar {
    match s {
        Scalar::F32(v) => types::Scalar::F32(v),
        Scalar::F64(v) => types::Scalar::F64(v),
        Scalar::I32(v) => types::Scalar::I32(v),
        Scalar::I64(v) => types::Scalar::I64(v),
        Scalar::Bool(v) => types::Scalar::Bool(v),
    }
}

/// The IR reduction operator of a WIT one.
pub fn reduce_op(op: types::ReduceOp) -> ReduceOp {
    match op {
        types::ReduceOp::Sum => ReduceOp::Sum,
        types::ReduceOp::Prod => ReduceOp::Prod,
        types::ReduceOp::Min => ReduceOp::Min,
        types::ReduceOp::Max => ReduceOp::Max,
    }
}

/// The IR privilege of a WIT one.
pub fn privilege(p: types::Privilege) -> Privilege {
    match p {
        types::Privilege::Read => Privilege::Read,
        types::Privilege::Write => Privilege::Write,
        types::Privilege::ReadWrite => Privilege::ReadWrite,
        types::Privilege::Reduce(op) => Privilege::Reduce(reduce_op(op)),
    }
}

/// The runtime's partition of a WIT one.
pub fn partition(p: types::Partition) -> Partition {
    match p {
        types::Partition::None => Partition::None,
        types::Partition::Tiling(t) => Partition::Tiling(tiling(t)),
        types::Partition::Image(k) => Partition::Image(k),
    }
}

/// The runtime's tiling of a WIT one.
pub fn tiling(t: types::Tiling) -> Tiling {
    Tiling {
        tile: t.tile.into(),
        offset: t.offset.into(),
        projection: t.projection.into(),
        skew: None,
    }
}

/// The WIT tiling of the runtime's one.
pub fn wit_tiling(t: Tiling) -> types::Tiling {
    types::Tiling {
        tile: t.tile.to_vec(),
        offset: t.offset.to_vec(),
        projection: t.projection.to_vec(),
    }
}

fn binary_op(op: wit::BinaryOp) -> BinaryOp {
    match op {
        wit::BinaryOp::Add => BinaryOp::Add,
        wit::BinaryOp::Sub => BinaryOp::Sub,
        wit::BinaryOp::Mul => BinaryOp::Mul,
        wit::BinaryOp::Div => BinaryOp::Div,
        wit::BinaryOp::Rem => BinaryOp::Rem,
        wit::BinaryOp::Min => BinaryOp::Min,
        wit::BinaryOp::Max => BinaryOp::Max,
        wit::BinaryOp::Pow => BinaryOp::Pow,
        wit::BinaryOp::BitAnd => BinaryOp::And,
        wit::BinaryOp::BitOr => BinaryOp::Or,
        wit::BinaryOp::BitXor => BinaryOp::Xor,
        wit::BinaryOp::Shl => BinaryOp::Shl,
        wit::BinaryOp::Shr => BinaryOp::Shr,
        wit::BinaryOp::Atan2 => BinaryOp::Atan2,
    }
}

fn unary_op(op: wit::UnaryOp) -> UnaryOp {
    match op {
        wit::UnaryOp::Neg => UnaryOp::Neg,
        wit::UnaryOp::Abs => UnaryOp::Abs,
        wit::UnaryOp::Sqrt => UnaryOp::Sqrt,
        wit::UnaryOp::Exp => UnaryOp::Exp,
        wit::UnaryOp::Log => UnaryOp::Log,
        wit::UnaryOp::Sin => UnaryOp::Sin,
        wit::UnaryOp::Cos => UnaryOp::Cos,
        wit::UnaryOp::Tanh => UnaryOp::Tanh,
        wit::UnaryOp::Erf => UnaryOp::Erf,
        wit::UnaryOp::Floor => UnaryOp::Floor,
        wit::UnaryOp::Ceil => UnaryOp::Ceil,
        wit::UnaryOp::BitNot => UnaryOp::Not,
        wit::UnaryOp::Asin => UnaryOp::Asin,
        wit::UnaryOp::Acos => UnaryOp::Acos,
        wit::UnaryOp::Atan => UnaryOp::Atan,
        wit::UnaryOp::Sinh => UnaryOp::Sinh,
        wit::UnaryOp::Cosh => UnaryOp::Cosh,
        wit::UnaryOp::Asinh => UnaryOp::Asinh,
        wit::UnaryOp::Acosh => UnaryOp::Acosh,
        wit::UnaryOp::Atanh => UnaryOp::Atanh,
    }
}

fn cmp_op(op: wit::CmpOp) -> CmpOp {
    match op {
        wit::CmpOp::Eq => CmpOp::Eq,
        wit::CmpOp::Ne => CmpOp::Ne,
        wit::CmpOp::Lt => CmpOp::Lt,
        wit::CmpOp::Le => CmpOp::Le,
        wit::CmpOp::Gt => CmpOp::Gt,
        wit::CmpOp::Ge => CmpOp::Ge,
    }
}
