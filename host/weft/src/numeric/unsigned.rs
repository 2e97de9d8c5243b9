//! Reductions of the unsigned dtypes (`uint8` .. `uint64`), composed from casts.
//!
//! The numeric plugin's reduction kernels take signed dtypes only (their results are
//! reduced into stores, and the IR gives unsigned stores no reductions). An unsigned array
//! reduces through `i64`, as NumPy's results come out: a sum, product or running sum is
//! NumPy's `uint64` (the `i64` arithmetic wraps with the same bits), a minimum or maximum has
//! the array's dtype. A `uint64` array is ordered through its values with the top bit flipped
//! (`x ^ 2^63` orders as an `i64` exactly as `x` does as an unsigned number), flipped back
//! after. An `int32` or `bool` array's sum, product and running sum go through `i64` too: NumPy gives
//! them in its default integer, `int64`. The casts fuse with the reductions that read them.

use weft_ir::DType;

use super::{Array, Reduction};

/// What a reduction's result is, for an unsigned input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kept {
    /// A sum or product (`uint64`, as NumPy's).
    Total,
    /// One of the elements (a minimum or maximum): the input's dtype.
    Element,
    /// A position (`argmin`, `argmax`): an `i64` index, the input's order kept.
    Position,
}

impl Kept {
    /// The kind of result `op` gives.
    pub(crate) fn of(op: Reduction) -> Kept {
        match op {
            Reduction::Sum | Reduction::Prod => Kept::Total,
            Reduction::Min | Reduction::Max => Kept::Element,
        }
    }
}

impl Array {
    /// For an unsigned array, `run` (a reduction of kind `kept`) applied to its `i64` form, and
    /// its result brought back (see the [module documentation](self)); for an `int32` or `bool`
    /// array's sum, product or running sum, `run` on its `i64` form (NumPy's `int64` result); `None`
    /// for any other array (or one whose dtype is an error, which `run` on it reports).
    pub(crate) fn through_i64(
        &self,
        kept: Kept,
        run: impl FnOnce(&Array) -> Array,
    ) -> Option<Array> {
        let dtype = self.dtype().ok()?;
        if matches!(dtype, DType::I32 | DType::Bool) && kept == Kept::Total {
            // NumPy sums and multiplies `int32` and `bool` in its default integer, `int64`.
            return Some(run(&self.astype(DType::I64)));
        }
        let dtype = Some(dtype).filter(|d| d.is_unsigned())?;
        let wide = self.astype(DType::I64);
        let ordered = kept != Kept::Total && dtype == DType::U64;
        let input = if ordered {
            wide.bitwise_xor(i64::MIN)
        } else {
            wide
        };
        let out = run(&input);
        Some(match kept {
            Kept::Total => out.astype(DType::U64),
            Kept::Element if ordered => out.bitwise_xor(i64::MIN).astype(dtype),
            Kept::Element => out.astype(dtype),
            Kept::Position => out,
        })
    }
}
