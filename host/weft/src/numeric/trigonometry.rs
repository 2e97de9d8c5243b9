//! The facade's inverse trigonometric functions and the hyperbolic ones with their inverses,
//! element-wise on float arrays. Each is computed by plain arithmetic in the kernel IR (the
//! math lowering), so every back end gives the same bits; `weft_ir::passes::math` states
//! their accuracy.

use super::{Array, BinaryOp, Operand, UnaryOp};

impl Array {
    /// Inverse sine, `arcsin(self)`, in `[-π/2, π/2]` (NaN outside `[-1, 1]`).
    #[track_caller]
    pub fn arcsin(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arcsin)
    }

    /// Inverse cosine, `arccos(self)`, in `[0, π]` (NaN outside `[-1, 1]`).
    #[track_caller]
    pub fn arccos(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arccos)
    }

    /// Inverse tangent, `arctan(self)`, in `[-π/2, π/2]`.
    #[track_caller]
    pub fn arctan(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arctan)
    }

    /// Hyperbolic sine, `sinh(self)`.
    #[track_caller]
    pub fn sinh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Sinh)
    }

    /// Hyperbolic cosine, `cosh(self)`.
    #[track_caller]
    pub fn cosh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Cosh)
    }

    /// Inverse hyperbolic sine, `arcsinh(self)`.
    #[track_caller]
    pub fn arcsinh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arcsinh)
    }

    /// Inverse hyperbolic cosine, `arccosh(self)` (NaN below 1).
    #[track_caller]
    pub fn arccosh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arccosh)
    }

    /// Inverse hyperbolic tangent, `arctanh(self)` (`±inf` at `±1`, NaN beyond).
    #[track_caller]
    pub fn arctanh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Arctanh)
    }

    /// `arctan2(self, other)`: the angle of the point `(other, self)`, in `[-π, π]`, with
    /// C99's values at zeros and infinities (NumPy's `arctan2`); broadcasts as the other
    /// operators do.
    #[track_caller]
    pub fn arctan2<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::Arctan2, other)
    }
}
