//! Turning a built kernel into the WIT form that the `plugin.kernel-body` export returns.

use crate::ir::flat::{self, FlatAccess, FlatOp};
use crate::ir::{self, Kernel, Param};
use crate::kernel_ir as wit;
use crate::{wit_dtype, wit_privilege, wit_reduce_op, wit_scalar};

/// The WIT form of a kernel (the flat form, region by region).
pub fn kernel_to_wit(kernel: &Kernel) -> wit::Kernel {
    let flat = flat::to_flat(kernel);
    wit::Kernel {
        name: flat.name,
        params: flat.params.iter().map(param).collect(),
        regions: flat
            .regions
            .into_iter()
            .map(|r| wit::Region {
                ops: r.ops.into_iter().map(op).collect(),
                yields: r.yields,
            })
            .collect(),
    }
}

fn param(p: &Param) -> wit::Param {
    match *p {
        Param::Store {
            dtype,
            rank,
            privilege,
        } => wit::Param::Store(wit::StoreParam {
            dtype: wit_dtype(dtype),
            rank,
            privilege: wit_privilege(privilege),
        }),
        Param::Scalar { dtype } => wit::Param::Scalar(wit_dtype(dtype)),
    }
}

fn access(a: FlatAccess) -> wit::Access {
    wit::Access {
        param: a.param,
        indices: a.indices,
    }
}

fn op(o: FlatOp) -> wit::Op {
    match o {
        FlatOp::Const(s) => wit::Op::Constant(wit_scalar(s)),
        FlatOp::Param(p) => wit::Op::Param(p),
        FlatOp::Binary(op, lhs, rhs) => wit::Op::Binary(wit::Binary {
            op: binary_op(op),
            lhs,
            rhs,
        }),
        FlatOp::Unary(op, v) => wit::Op::Unary((unary_op(op), v)),
        FlatOp::Cmp(op, lhs, rhs) => wit::Op::Compare(wit::Compare {
            op: cmp_op(op),
            lhs,
            rhs,
        }),
        FlatOp::Select(c, a, b) => wit::Op::Select((c, a, b)),
        FlatOp::Fma(a, b, c) => wit::Op::Fma((a, b, c)),
        FlatOp::Cast(d, v) => wit::Op::Cast((wit_dtype(d), v)),
        FlatOp::Bitcast(d, v) => wit::Op::Bitcast((wit_dtype(d), v)),
        FlatOp::Load(a) => wit::Op::Load(access(a)),
        FlatOp::Store(a, v) => wit::Op::Store((access(a), v)),
        FlatOp::Reduce(a, op, v) => wit::Op::Reduce(wit::Reduction {
            target: access(a),
            op: wit_reduce_op(op),
            value: v,
        }),
        FlatOp::Extent { param, dim } => wit::Op::Extent((param, dim)),
        FlatOp::Origin { param, dim } => wit::Op::Origin((param, dim)),
        FlatOp::Parallel { over, body } => wit::Op::Parallel(wit::ParallelLoop { over, body }),
        FlatOp::For { lo, hi, init, body } => wit::Op::ForLoop(wit::ForLoop { lo, hi, init, body }),
    }
}

fn binary_op(op: ir::BinaryOp) -> wit::BinaryOp {
    match op {
        ir::BinaryOp::Add => wit::BinaryOp::Add,
        ir::BinaryOp::Sub => wit::BinaryOp::Sub,
        ir::BinaryOp::Mul => wit::BinaryOp::Mul,
        ir::BinaryOp::Div => wit::BinaryOp::Div,
        ir::BinaryOp::Rem => wit::BinaryOp::Rem,
        ir::BinaryOp::Min => wit::BinaryOp::Min,
        ir::BinaryOp::Max => wit::BinaryOp::Max,
        ir::BinaryOp::Pow => wit::BinaryOp::Pow,
        ir::BinaryOp::And => wit::BinaryOp::BitAnd,
        ir::BinaryOp::Or => wit::BinaryOp::BitOr,
        ir::BinaryOp::Xor => wit::BinaryOp::BitXor,
        ir::BinaryOp::Shl => wit::BinaryOp::Shl,
        ir::BinaryOp::Shr => wit::BinaryOp::Shr,
        ir::BinaryOp::Atan2 => wit::BinaryOp::Atan2,
    }
}

fn unary_op(op: ir::UnaryOp) -> wit::UnaryOp {
    match op {
        ir::UnaryOp::Neg => wit::UnaryOp::Neg,
        ir::UnaryOp::Abs => wit::UnaryOp::Abs,
        ir::UnaryOp::Sqrt => wit::UnaryOp::Sqrt,
        ir::UnaryOp::Exp => wit::UnaryOp::Exp,
        ir::UnaryOp::Log => wit::UnaryOp::Log,
        ir::UnaryOp::Sin => wit::UnaryOp::Sin,
        ir::UnaryOp::Cos => wit::UnaryOp::Cos,
        ir::UnaryOp::Tanh => wit::UnaryOp::Tanh,
        ir::UnaryOp::Erf => wit::UnaryOp::Erf,
        ir::UnaryOp::Floor => wit::UnaryOp::Floor,
        ir::UnaryOp::Ceil => wit::UnaryOp::Ceil,
        ir::UnaryOp::Not => wit::UnaryOp::BitNot,
        ir::UnaryOp::Asin => wit::UnaryOp::Asin,
        ir::UnaryOp::Acos => wit::UnaryOp::Acos,
        ir::UnaryOp::Atan => wit::UnaryOp::Atan,
        ir::UnaryOp::Sinh => wit::UnaryOp::Sinh,
        ir::UnaryOp::Cosh => wit::UnaryOp::Cosh,
        ir::UnaryOp::Asinh => wit::UnaryOp::Asinh,
        ir::UnaryOp::Acosh => wit::UnaryOp::Acosh,
        ir::UnaryOp::Atanh => wit::UnaryOp::Atanh,
    }
}

fn cmp_op(op: ir::CmpOp) -> wit::CmpOp {
    match op {
        ir::CmpOp::Eq => wit::CmpOp::Eq,
        ir::CmpOp::Ne => wit::CmpOp::Ne,
        ir::CmpOp::Lt => wit::CmpOp::Lt,
        ir::CmpOp::Le => wit::CmpOp::Le,
        ir::CmpOp::Gt => wit::CmpOp::Gt,
        ir::CmpOp::Ge => wit::CmpOp::Ge,
    }
}
