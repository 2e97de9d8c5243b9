//! The facade's bitwise operators on integer and bool arrays, by NumPy's names (the `&`,
//! `|`, `^`, `<<`, `>>` and `!` operators of [`Array`] call them): `&`, `|` and `^` take
//! integers and bools, the shifts integers, with NumPy's results for amounts from the bit
//! width on (`<<` gives 0, `>>` is arithmetic and gives 0 or -1).

use super::{Array, BinaryOp, Operand, UnaryOp};

impl Array {
    /// `self & other` (NumPy's `bitwise_and`).
    #[track_caller]
    pub fn bitwise_and<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::BitwiseAnd, other)
    }

    /// `self | other` (NumPy's `bitwise_or`).
    #[track_caller]
    pub fn bitwise_or<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::BitwiseOr, other)
    }

    /// `self ^ other` (NumPy's `bitwise_xor`).
    #[track_caller]
    pub fn bitwise_xor<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::BitwiseXor, other)
    }

    /// `self << other` (NumPy's `left_shift`).
    #[track_caller]
    pub fn left_shift<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::LeftShift, other)
    }

    /// `self >> other`, arithmetic (NumPy's `right_shift` of signed integers).
    #[track_caller]
    pub fn right_shift<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::RightShift, other)
    }

    /// `~self` (NumPy's `invert`): bitwise not of integers, logical not of bools.
    #[track_caller]
    pub fn invert(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Invert)
    }
}
