//! The operators numeric offers, their names, and the element types each accepts.
//!
//! This is the one place that says which dtypes an operator takes: the operations check a
//! call's arrays against it (for the error the user sees) and the key decoder checks keys
//! against it (so that the key space is exactly what the operations produce).

use weft_sdk::ir::{DType, ReduceOp};

/// Which element types an operator accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Every dtype.
    Any,
    /// Numbers: every dtype but `bool`.
    Numeric,
    /// Floats: `f32` and `f64`.
    Float,
    /// `bool` only.
    Bool,
    /// Integers: `i32`, `i64` and the unsigned `u8` .. `u64`.
    Integer,
    /// Integers and `bool`.
    IntegerOrBool,
    /// Numbers with a sign (`f32`, `f64`, `i32`, `i64`): the kernels of reductions, running
    /// sums and positions, whose unsigned forms the host composes from casts.
    SignedNumeric,
    /// Every dtype but the unsigned ones.
    Signed,
}

impl Rule {
    /// Whether `dtype` satisfies the rule.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            Rule::Any => true,
            Rule::Numeric => dtype != DType::Bool,
            Rule::Float => dtype.is_float(),
            Rule::Bool => dtype == DType::Bool,
            Rule::Integer => dtype.is_int() || dtype.is_unsigned(),
            Rule::IntegerOrBool => dtype.is_int() || dtype.is_unsigned() || dtype == DType::Bool,
            Rule::SignedNumeric => dtype != DType::Bool && !dtype.is_unsigned(),
            Rule::Signed => !dtype.is_unsigned(),
        }
    }

    /// `Ok` if `dtype` satisfies the rule, else the error message for operator `op`
    /// (`"pow: needs a float dtype (f32 or f64), got i64"`).
    pub fn check(self, op: &str, dtype: DType) -> Result<(), String> {
        if self.accepts(dtype) {
            return Ok(());
        }
        let wanted = match self {
            Rule::Any => "any dtype",
            Rule::Numeric => "a numeric dtype (not bool)",
            Rule::Float => "a float dtype (f32 or f64)",
            Rule::Bool => "a bool dtype",
            Rule::Integer => "an integer dtype",
            Rule::IntegerOrBool => "an integer or bool dtype",
            Rule::SignedNumeric => "a signed numeric dtype (f32, f64, i32 or i64)",
            Rule::Signed => "a dtype that is not unsigned",
        };
        Err(format!("{op}: needs {wanted}, got {dtype}"))
    }
}

/// An element-wise binary operator (the `numeric.binary-op` of the WIT interface).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integer division truncates; by zero gives 0).
    Div,
    /// `a ** b` (floats).
    Pow,
    /// The smaller operand (NaN propagates).
    Minimum,
    /// The larger operand (NaN propagates).
    Maximum,
    /// `a == b`.
    Equal,
    /// `a != b`.
    NotEqual,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessEqual,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterEqual,
    /// `a && b` (bools).
    LogicalAnd,
    /// `a || b` (bools).
    LogicalOr,
    /// NumPy's `%`: the remainder with the divisor's sign.
    Remainder,
    /// NumPy's `arctan2(a, b)`: the angle of the point `(b, a)` (floats).
    Arctan2,
    /// `a & b` (integers and bools).
    BitwiseAnd,
    /// `a | b` (integers and bools).
    BitwiseOr,
    /// `a ^ b` (integers and bools).
    BitwiseXor,
    /// `a << b` (integers).
    LeftShift,
    /// `a >> b`, arithmetic (integers).
    RightShift,
}

impl BinOp {
    /// Every operator, in a fixed order.
    pub const ALL: [BinOp; 22] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Pow,
        BinOp::Minimum,
        BinOp::Maximum,
        BinOp::Equal,
        BinOp::NotEqual,
        BinOp::Less,
        BinOp::LessEqual,
        BinOp::Greater,
        BinOp::GreaterEqual,
        BinOp::LogicalAnd,
        BinOp::LogicalOr,
        BinOp::Remainder,
        BinOp::Arctan2,
        BinOp::BitwiseAnd,
        BinOp::BitwiseOr,
        BinOp::BitwiseXor,
        BinOp::LeftShift,
        BinOp::RightShift,
    ];

    /// The operator's name, as the WIT interface spells it; used in keys and errors.
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Pow => "pow",
            BinOp::Minimum => "minimum",
            BinOp::Maximum => "maximum",
            BinOp::Equal => "equal",
            BinOp::NotEqual => "not-equal",
            BinOp::Less => "less",
            BinOp::LessEqual => "less-equal",
            BinOp::Greater => "greater",
            BinOp::GreaterEqual => "greater-equal",
            BinOp::LogicalAnd => "logical-and",
            BinOp::LogicalOr => "logical-or",
            BinOp::Remainder => "remainder",
            BinOp::Arctan2 => "arctan2",
            BinOp::BitwiseAnd => "bitwise-and",
            BinOp::BitwiseOr => "bitwise-or",
            BinOp::BitwiseXor => "bitwise-xor",
            BinOp::LeftShift => "left-shift",
            BinOp::RightShift => "right-shift",
        }
    }

    /// The operator named `name` (see [`BinOp::name`]).
    pub fn from_name(name: &str) -> Option<BinOp> {
        BinOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether the operator is a comparison (its result is `bool` whatever its operands).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Equal
                | BinOp::NotEqual
                | BinOp::Less
                | BinOp::LessEqual
                | BinOp::Greater
                | BinOp::GreaterEqual
        )
    }

    /// The dtypes the operands may have.
    pub fn rule(self) -> Rule {
        match self {
            BinOp::Pow | BinOp::Arctan2 => Rule::Float,
            BinOp::LogicalAnd | BinOp::LogicalOr => Rule::Bool,
            BinOp::BitwiseAnd | BinOp::BitwiseOr | BinOp::BitwiseXor => Rule::IntegerOrBool,
            BinOp::LeftShift | BinOp::RightShift => Rule::Integer,
            op if op.is_comparison() => Rule::Any,
            _ => Rule::Numeric,
        }
    }

    /// The result's dtype for operands of `dtype`.
    pub fn result_dtype(self, dtype: DType) -> DType {
        if self.is_comparison() {
            DType::Bool
        } else {
            dtype
        }
    }
}

/// An element-wise unary operator (the `numeric.unary-op` of the WIT interface).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-a`.
    Neg,
    /// `|a|`.
    Abs,
    /// Square root.
    Sqrt,
    /// `e^a`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// The error function.
    Erf,
    /// `!a` (bools).
    LogicalNot,
    /// Rounding down (floats).
    Floor,
    /// Rounding up (floats).
    Ceil,
    /// Inverse sine.
    Arcsin,
    /// Inverse cosine.
    Arccos,
    /// Inverse tangent.
    Arctan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Arcsinh,
    /// Inverse hyperbolic cosine.
    Arccosh,
    /// Inverse hyperbolic tangent.
    Arctanh,
    /// `~a`: bitwise not of integers, logical not of bools.
    Invert,
}

impl UnOp {
    /// Every operator, in a fixed order.
    pub const ALL: [UnOp; 21] = [
        UnOp::Neg,
        UnOp::Abs,
        UnOp::Sqrt,
        UnOp::Exp,
        UnOp::Log,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Tanh,
        UnOp::Erf,
        UnOp::LogicalNot,
        UnOp::Floor,
        UnOp::Ceil,
        UnOp::Arcsin,
        UnOp::Arccos,
        UnOp::Arctan,
        UnOp::Sinh,
        UnOp::Cosh,
        UnOp::Arcsinh,
        UnOp::Arccosh,
        UnOp::Arctanh,
        UnOp::Invert,
    ];

    /// The operator's name, as the WIT interface spells it; used in keys and errors.
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Abs => "abs",
            UnOp::Sqrt => "sqrt",
            UnOp::Exp => "exp",
            UnOp::Log => "log",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Tanh => "tanh",
            UnOp::Erf => "erf",
            UnOp::LogicalNot => "logical-not",
            UnOp::Floor => "floor",
            UnOp::Ceil => "ceil",
            UnOp::Arcsin => "arcsin",
            UnOp::Arccos => "arccos",
            UnOp::Arctan => "arctan",
            UnOp::Sinh => "sinh",
            UnOp::Cosh => "cosh",
            UnOp::Arcsinh => "arcsinh",
            UnOp::Arccosh => "arccosh",
            UnOp::Arctanh => "arctanh",
            UnOp::Invert => "invert",
        }
    }

    /// The operator named `name` (see [`UnOp::name`]).
    pub fn from_name(name: &str) -> Option<UnOp> {
        UnOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The dtypes the operand may have.
    pub fn rule(self) -> Rule {
        match self {
            UnOp::Neg | UnOp::Abs => Rule::Numeric,
            UnOp::LogicalNot => Rule::Bool,
            UnOp::Invert => Rule::IntegerOrBool,
            _ => Rule::Float,
        }
    }
}

/// The dtypes a reduction's kernels accept: `sum` and `prod` need numbers, `min` and `max`
/// take anything (on bools they are `all` and `any`); neither takes an unsigned dtype (the
/// host reduces those through `i64`, NumPy's `uint64` result for sums and products).
pub fn reduce_rule(op: ReduceOp) -> Rule {
    match op {
        ReduceOp::Sum | ReduceOp::Prod => Rule::SignedNumeric,
        ReduceOp::Min | ReduceOp::Max => Rule::Signed,
    }
}

/// The dtypes of `dot`, `norm`, `matvec` and `matmul`.
pub const LINALG_RULE: Rule = Rule::Float;

/// The dtypes of `random-uniform` (uniform numbers in `[low, high)` are floats).
pub const RANDOM_RULE: Rule = Rule::Float;

/// The dtypes of `arange` (a bool range is meaningless past two elements).
pub const ARANGE_RULE: Rule = Rule::Numeric;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in BinOp::ALL {
            assert_eq!(BinOp::from_name(op.name()), Some(op));
        }
        for op in UnOp::ALL {
            assert_eq!(UnOp::from_name(op.name()), Some(op));
        }
        assert_eq!(BinOp::from_name("nope"), None);
    }

    #[test]
    fn rules_match_the_spec() {
        assert_eq!(BinOp::Add.rule(), Rule::Numeric);
        assert_eq!(BinOp::Minimum.rule(), Rule::Numeric);
        assert_eq!(BinOp::Pow.rule(), Rule::Float);
        assert_eq!(BinOp::Less.rule(), Rule::Any);
        assert_eq!(BinOp::LogicalOr.rule(), Rule::Bool);
        assert_eq!(UnOp::Abs.rule(), Rule::Numeric);
        assert_eq!(UnOp::Erf.rule(), Rule::Float);
        assert_eq!(UnOp::LogicalNot.rule(), Rule::Bool);
        assert_eq!(BinOp::Less.result_dtype(DType::F64), DType::Bool);
        assert_eq!(BinOp::Add.result_dtype(DType::I32), DType::I32);
    }

    #[test]
    fn rule_errors_name_the_op_and_dtype() {
        assert_eq!(
            Rule::Float.check("pow", DType::I64),
            Err("pow: needs a float dtype (f32 or f64), got i64".to_string())
        );
        assert!(Rule::Numeric.check("add", DType::Bool).is_err());
        assert!(Rule::Bool.check("logical-and", DType::Bool).is_ok());
    }
}
