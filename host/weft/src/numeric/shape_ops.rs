//! The facade's views, axis reductions, named element-wise methods and in-place operators.

use super::replayed::CallKey;
use super::{Array, BinaryOp, Ix, Operand, Reduction, UnaryOp, api};

impl Array {
    /// The view `self[i0, i1, ...]` of NumPy's basic indexing: positions drop their dimension,
    /// slices keep it, [`Ix::NewAxis`] adds one; missing trailing dimensions are whole.
    #[track_caller]
    pub fn index(&self, indices: &[Ix]) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if let Some(view) = self.host_index(indices) {
            return view;
        }
        let indices: Vec<api::Subscript> = indices
            .iter()
            .map(|i| match *i {
                Ix::At(at) => api::Subscript::At(at),
                Ix::Slice(r) => api::Subscript::Range(api::Range {
                    start: r.start,
                    stop: r.stop,
                    step: r.step,
                }),
                Ix::NewAxis => api::Subscript::NewAxis,
            })
            .collect();
        let key = indices.iter().fold(CallKey::new("index"), |k, i| match i {
            api::Subscript::At(at) => k.word(0).word(*at as u64),
            api::Subscript::Range(r) => k.word(1).option(r.start).option(r.stop).option(r.step),
            api::Subscript::NewAxis => k.word(2),
        });
        self.derive_replayed("index", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_index(s, a, &indices)
        })
    }

    /// The view with axes permuted: dimension `d` of the result is dimension `axes[d]` of
    /// `self` (NumPy's `transpose(a, axes)`).
    #[track_caller]
    pub fn permute(&self, axes: &[u32]) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let key = CallKey::new("permute").words(axes.iter().map(|&a| u64::from(a)));
        self.derive_replayed("permute", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_permute(s, a, axes)
        })
    }

    /// The transpose (axes reversed), a view: NumPy's `a.T`.
    #[track_caller]
    pub fn t(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        match self.shape() {
            Ok(shape) => {
                let axes: Vec<u32> = (0..shape.len() as u32).rev().collect();
                self.permute(&axes)
            }
            Err(e) => self.np.wrap(Err(e)),
        }
    }

    /// `self` with another shape (one extent may be -1): a view where the layout allows it,
    /// a copy otherwise, as NumPy's `reshape`.
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let key = CallKey::new("reshape").words(shape.iter().map(|&e| e as u64));
        self.derive_replayed("reshape", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_reshape(s, a, shape)
        })
    }

    /// The read-only view broadcast to `shape` (NumPy's `broadcast_to`).
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[u64]) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let key = CallKey::new("broadcast_to").words(shape.iter().copied());
        self.derive_replayed("broadcast_to", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_broadcast_to(s, a, shape)
        })
    }

    /// A view with a new dimension of extent 1 at `axis` (negative counts from the end of
    /// the result), as NumPy's `expand_dims`.
    #[track_caller]
    pub fn expand_dims(&self, axis: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.with_shape(|shape| {
            let rank = shape.len() as i64 + 1;
            let at = if axis < 0 { axis + rank } else { axis };
            if !(0..rank).contains(&at) {
                return Err(format!(
                    "expand_dims: axis {axis} is out of bounds for array of dimension {rank}"
                ));
            }
            let mut out: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
            out.insert(at as usize, 1);
            Ok(out)
        })
    }

    /// A view without the dimensions of extent 1 (NumPy's `squeeze()`).
    #[track_caller]
    pub fn squeeze(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.with_shape(|shape| {
            Ok(shape
                .iter()
                .filter(|&&e| e != 1)
                .map(|&e| e as i64)
                .collect())
        })
    }

    /// The reshape to the shape `f` derives from this array's shape.
    fn with_shape(&self, f: impl FnOnce(&[u64]) -> Result<Vec<i64>, String>) -> Array {
        match self.shape() {
            Ok(shape) => match f(&shape) {
                Ok(out) => self.reshape(&out),
                Err(m) => self.np.wrap(Err(crate::Error::Usage(m))),
            },
            Err(e) => self.np.wrap(Err(e)),
        }
    }

    /// The reduction over `axes` (negative ones count from the end; `None`: every axis),
    /// keeping them with extent 1 when `keepdims`: NumPy's `a.sum(axis=..., keepdims=...)`.
    #[track_caller]
    pub fn reduce_axes(&self, op: Reduction, axes: Option<&[i64]>, keepdims: bool) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if let Some(r) = self.through_i64(super::unsigned::Kept::of(op), |a| {
            a.reduce_axes(op, axes, keepdims)
        }) {
            return r;
        }
        let key = CallKey::new("reduce-axes")
            .word(op as u64)
            .word(u64::from(keepdims))
            .word(axes.map_or(0, |a| a.len() as u64 + 1))
            .words(axes.unwrap_or_default().iter().map(|&a| a as u64));
        self.derive_replayed("reduce-axes", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_reduce_axes(s, op, a, axes, keepdims)
        })
    }

    /// The sum over one axis.
    #[track_caller]
    pub fn sum_axis(&self, axis: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.reduce_axes(Reduction::Sum, Some(&[axis]), false)
    }

    /// The product over one axis.
    #[track_caller]
    pub fn prod_axis(&self, axis: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.reduce_axes(Reduction::Prod, Some(&[axis]), false)
    }

    /// The minimum over one axis.
    #[track_caller]
    pub fn min_axis(&self, axis: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.reduce_axes(Reduction::Min, Some(&[axis]), false)
    }

    /// The maximum over one axis.
    #[track_caller]
    pub fn max_axis(&self, axis: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.reduce_axes(Reduction::Max, Some(&[axis]), false)
    }

    /// The mean over `axes` (`None`: all), as NumPy's `mean`: the sum divided by the number
    /// of elements reduced (an integer array's mean is `f64`).
    #[track_caller]
    pub fn mean_axes(&self, axes: Option<&[i64]>, keepdims: bool) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let count = match self.reduced_count(axes) {
            Ok(n) => n,
            Err(e) => return self.np.wrap(Err(e)),
        };
        if self
            .dtype()
            .is_ok_and(|d| !matches!(d, weft_ir::DType::F32 | weft_ir::DType::F64))
        {
            // NumPy accumulates a mean of integers (and bools) in `float64`: an integer sum
            // would wrap.
            return self
                .astype(weft_ir::DType::F64)
                .reduce_axes(Reduction::Sum, axes, keepdims)
                / count as f64;
        }
        self.reduce_axes(Reduction::Sum, axes, keepdims) / count as f64
    }

    /// The mean of all elements (0-d).
    #[track_caller]
    pub fn mean(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if let Some(deferred) = self.deferred_mean() {
            return deferred;
        }
        self.mean_axes(None, false)
    }

    /// The variance over `axes` (`None`: all) with `ddof` degrees of freedom removed, as
    /// NumPy's `var`: the mean of the squared deviations from the mean.
    #[track_caller]
    pub fn var_axes(&self, axes: Option<&[i64]>, keepdims: bool, ddof: u64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let count = match self.reduced_count(axes) {
            Ok(n) => n,
            Err(e) => return self.np.wrap(Err(e)),
        };
        let deviation = self - &self.mean_axes(axes, true);
        let squares = &deviation * &deviation;
        squares.reduce_axes(Reduction::Sum, axes, keepdims) / count.saturating_sub(ddof) as f64
    }

    /// The variance of all elements (0-d).
    #[track_caller]
    pub fn var(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.var_axes(None, false, 0)
    }

    /// The standard deviation over `axes`, the square root of [`Array::var_axes`].
    #[track_caller]
    pub fn std_axes(&self, axes: Option<&[i64]>, keepdims: bool, ddof: u64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.var_axes(axes, keepdims, ddof).sqrt()
    }

    /// The standard deviation of all elements (0-d).
    #[track_caller]
    pub fn std(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.std_axes(None, false, 0)
    }

    /// The number of elements a reduction over `axes` combines into each result.
    #[track_caller]
    fn reduced_count(&self, axes: Option<&[i64]>) -> crate::Result<u64> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let shape = self.shape()?;
        let rank = shape.len() as i64;
        Ok(match axes {
            None => shape.iter().product(),
            Some(axes) => axes
                .iter()
                .map(|&a| {
                    let d = if a < 0 { a + rank } else { a };
                    usize::try_from(d)
                        .ok()
                        .and_then(|d| shape.get(d))
                        .copied()
                        .unwrap_or(1)
                })
                .product(),
        })
    }

    /// `floor(self)` (integers stay as they are, as in NumPy 2).
    #[track_caller]
    pub fn floor(&self) -> Array {
        self.unary(UnaryOp::Floor)
    }

    /// `ceil(self)` (integers stay as they are, as in NumPy 2).
    #[track_caller]
    pub fn ceil(&self) -> Array {
        self.unary(UnaryOp::Ceil)
    }

    /// NumPy's `remainder` (`self % other`): the remainder with the divisor's sign.
    #[track_caller]
    pub fn remainder<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Remainder, other)
    }

    /// `sin(self)`.
    #[track_caller]
    pub fn sin(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Sin)
    }

    /// `cos(self)`.
    #[track_caller]
    pub fn cos(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Cos)
    }

    /// `tanh(self)`.
    #[track_caller]
    pub fn tanh(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::Tanh)
    }

    /// `not self`, element-wise, for a bool array.
    #[track_caller]
    pub fn logical_not(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.unary(UnaryOp::LogicalNot)
    }

    /// Element-wise `self == other` (bool).
    #[track_caller]
    pub fn eq<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::Equal, other)
    }

    /// Element-wise `self != other` (bool).
    #[track_caller]
    pub fn ne<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::NotEqual, other)
    }

    /// Element-wise `self <= other` (bool).
    #[track_caller]
    pub fn le<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::LessEqual, other)
    }

    /// Element-wise `self >= other` (bool).
    #[track_caller]
    pub fn ge<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::GreaterEqual, other)
    }

    /// Element-wise `self and other` (bool arrays).
    #[track_caller]
    pub fn logical_and<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::LogicalAnd, other)
    }

    /// Element-wise `self or other` (bool arrays).
    #[track_caller]
    pub fn logical_or<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.binary(BinaryOp::LogicalOr, other)
    }

    /// `min(max(self, lo), hi)`, element-wise (NumPy's `clip`).
    #[track_caller]
    pub fn clip<'a, 'b>(&self, lo: impl Into<Operand<'a>>, hi: impl Into<Operand<'b>>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.maximum(lo).minimum(hi)
    }

    /// `self[...] = self op rhs`, the in-place form of a binary operator: the result is
    /// written into this array's elements (through a view, into its root), as NumPy's `+=`.
    /// An error (operands whose shapes do not broadcast to this array's, say) poisons the
    /// elements it would have written: `self` and every array on the same storage (the
    /// view's root, its other views) return it at their next read, as after a failed task.
    #[track_caller]
    pub fn update<'a>(&mut self, op: BinaryOp, rhs: impl Into<Operand<'a>>) {
        let np = self.np.clone();
        let _site = np.site_guard(std::panic::Location::caller());
        let result = self.binary(op, rhs);
        if let Err(e) = self.assign(&result) {
            if let Ok(handle) = self.handle() {
                let id = handle.id();
                // If even poisoning fails, `self` still carries the error.
                let _ = np.runtime(|rt| rt.poison(id, &e));
            }
            *self = self.np.wrap(Err(e));
        }
    }
}

macro_rules! assign_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait<&Array> for Array {
            #[track_caller]
            fn $method(&mut self, rhs: &Array) {
                self.update($op, rhs);
            }
        }
        impl std::ops::$trait<Array> for Array {
            #[track_caller]
            fn $method(&mut self, rhs: Array) {
                self.update($op, &rhs);
            }
        }
        impl std::ops::$trait<f64> for Array {
            #[track_caller]
            fn $method(&mut self, rhs: f64) {
                self.update($op, rhs);
            }
        }
    };
}

assign_operator!(AddAssign, add_assign, BinaryOp::Add);
assign_operator!(SubAssign, sub_assign, BinaryOp::Sub);
assign_operator!(MulAssign, mul_assign, BinaryOp::Mul);
assign_operator!(DivAssign, div_assign, BinaryOp::Div);
assign_operator!(RemAssign, rem_assign, BinaryOp::Remainder);

impl super::Numeric {
    /// The `n` x `n` identity matrix (NumPy's `eye`).
    #[track_caller]
    pub fn eye(&self, n: u64, dtype: weft_ir::DType) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        self.ones(&[n], dtype).diag()
    }
}

impl Array {
    /// An array of this array's shape and dtype filled with `value` (NumPy's `full_like`).
    #[track_caller]
    pub fn full_like(&self, value: f64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        match (self.shape(), self.dtype()) {
            (Ok(shape), Ok(dtype)) => self.np.full(&shape, value, dtype),
            (Err(e), _) | (_, Err(e)) => self.np.wrap(Err(e)),
        }
    }

    /// Zeros of this array's shape and dtype (NumPy's `zeros_like`).
    #[track_caller]
    pub fn zeros_like(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.full_like(0.0)
    }

    /// Ones of this array's shape and dtype (NumPy's `ones_like`).
    #[track_caller]
    pub fn ones_like(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.full_like(1.0)
    }

    /// The outer product of two vectors, `self[:, None] * other[None, :]` (NumPy's `outer`,
    /// which flattens its operands first).
    #[track_caller]
    pub fn outer(&self, other: &Array) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let a = self
            .reshape(&[-1])
            .index(&[Ix::Slice(super::Range::all()), Ix::NewAxis]);
        let b = other.reshape(&[-1]).index(&[Ix::NewAxis]);
        a * b
    }
}
