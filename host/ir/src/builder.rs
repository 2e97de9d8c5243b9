//! A builder for kernels, for plugin authors.
//!
//! A [`KernelBuilder`] declares the parameters and holds the kernel body. It dereferences to a
//! [`BodyBuilder`], which has one method per operation and appends to the block being built;
//! loops take a closure that builds their body on the same [`BodyBuilder`]. Values are
//! [`Value`] handles that remember their type, so the builder infers result types; it does not
//! check them: [`KernelBuilder::finish_validated`] runs the validator. The value methods take
//! `&self`, so expressions nest: `b.store(out, i, b.mul(b.load(a, i), factor))`.
//!
//! ```
//! use weft_ir::builder::KernelBuilder;
//! use weft_ir::{DType, Privilege};
//!
//! // out[i] = a[i] + s * b[i]
//! let mut k = KernelBuilder::new("numeric.axpy.f64");
//! let a = k.store(DType::F64, 1, Privilege::Read);
//! let b = k.store(DType::F64, 1, Privilege::Read);
//! let out = k.store(DType::F64, 1, Privilege::Write);
//! let s = k.scalar(DType::F64);
//! k.parallel(out, |body, idx| {
//!     let x = body.load(a, idx);
//!     let y = body.load(b, idx);
//!     let sy = body.mul(s, y);
//!     let z = body.add(x, sy);
//!     body.store(out, idx, z);
//! });
//! let kernel = k.finish_validated().unwrap();
//! assert_eq!(kernel.params.len(), 4);
//! ```
//!
//! A CSR sparse matrix-vector product, with a `for` loop whose bounds are loaded and a load
//! through a computed index (`x[col[j]]`):
//!
//! ```
//! use weft_ir::builder::KernelBuilder;
//! use weft_ir::{DType, Privilege};
//!
//! let mut k = KernelBuilder::new("sparse.spmv.csr.f64");
//! let row_lo = k.store(DType::I64, 1, Privilege::Read);
//! let row_hi = k.store(DType::I64, 1, Privilege::Read);
//! let col = k.store(DType::I64, 1, Privilege::Read);
//! let val = k.store(DType::F64, 1, Privilege::Read);
//! let x = k.store(DType::F64, 1, Privilege::Read);
//! let y = k.store(DType::F64, 1, Privilege::Write);
//! k.parallel(y, |b, i| {
//!     let lo = b.load(row_lo, i);
//!     let hi = b.load(row_hi, i);
//!     let zero = b.const_f64(0.0);
//!     let sum = b.for_loop(lo, hi, &[zero], |b, j, acc| {
//!         let c = b.load(col, &[j]);
//!         let xv = b.load(x, &[c]);
//!         let v = b.load(val, &[j]);
//!         let p = b.mul(v, xv);
//!         vec![b.add(acc[0], p)]
//!     });
//!     b.store(y, i, sum[0]);
//! });
//! k.finish_validated().unwrap();
//! ```

use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};

use crate::validate::{ValidateError, validate};
use crate::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, Privilege,
    ReduceOp, Scalar, UnaryOp, ValueId,
};

/// An SSA value being built, with its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    id: ValueId,
    dtype: DType,
}

impl Value {
    /// The value's id in the kernel.
    pub fn id(self) -> ValueId {
        self.id
    }

    /// The value's type, as the builder inferred it.
    pub fn dtype(self) -> DType {
        self.dtype
    }
}

/// A store parameter of the kernel being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StoreParam {
    index: u32,
    dtype: DType,
    rank: u32,
    privilege: Privilege,
}

impl StoreParam {
    /// The parameter's index in [`Kernel::params`].
    pub fn index(self) -> u32 {
        self.index
    }

    /// The element type.
    pub fn dtype(self) -> DType {
        self.dtype
    }

    /// The rank.
    pub fn rank(self) -> u32 {
        self.rank
    }

    /// The privilege.
    pub fn privilege(self) -> Privilege {
        self.privilege
    }
}

/// Builds a [`Kernel`]: declares parameters, and builds the body through [`BodyBuilder`], to
/// which it dereferences. See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct KernelBuilder {
    name: String,
    body: BodyBuilder,
}

impl KernelBuilder {
    /// Starts a kernel called `name`.
    pub fn new(name: impl Into<String>) -> KernelBuilder {
        KernelBuilder {
            name: name.into(),
            body: BodyBuilder {
                params: Vec::new(),
                next: Cell::new(0),
                blocks: RefCell::new(vec![Vec::new()]),
            },
        }
    }

    /// Declares the next parameter: a store.
    pub fn store(&mut self, dtype: DType, rank: u32, privilege: Privilege) -> StoreParam {
        let index = self.body.params.len() as u32;
        self.body.params.push(Param::Store {
            dtype,
            rank,
            privilege,
        });
        StoreParam {
            index,
            dtype,
            rank,
            privilege,
        }
    }

    /// Declares the next parameter: a scalar. Returns its value, read by a `param` instruction
    /// appended to the top-level body, so it is visible in everything built after it.
    pub fn scalar(&mut self, dtype: DType) -> Value {
        let index = self.body.params.len() as u32;
        self.body.params.push(Param::Scalar { dtype });
        self.body.push_value(Op::Param(index), dtype)
    }

    /// The builder of the top-level body (the same one `KernelBuilder` dereferences to).
    pub fn body(&mut self) -> &mut BodyBuilder {
        &mut self.body
    }

    /// Returns the kernel, without validating it.
    pub fn finish(self) -> Kernel {
        let mut blocks = self.body.blocks.into_inner();
        Kernel {
            name: self.name,
            params: self.body.params,
            body: blocks.swap_remove(0),
        }
    }

    /// Returns the kernel if it is valid.
    pub fn finish_validated(self) -> Result<Kernel, ValidateError> {
        let kernel = self.finish();
        validate(&kernel)?;
        Ok(kernel)
    }
}

impl Deref for KernelBuilder {
    type Target = BodyBuilder;

    fn deref(&self) -> &BodyBuilder {
        &self.body
    }
}

impl DerefMut for KernelBuilder {
    fn deref_mut(&mut self) -> &mut BodyBuilder {
        &mut self.body
    }
}

/// Appends instructions to the block being built: the kernel's top-level body, or the body of
/// the loop whose closure is running.
///
/// The methods infer each result's type from the operands (the first operand's type for binary
/// and unary operations, `bool` for comparisons, the store's element type for loads) and do not
/// check operand types; the validator does.
#[derive(Clone, Debug)]
pub struct BodyBuilder {
    params: Vec<Param>,
    /// The next value id (a cell, so that the value methods take `&self` and nest:
    /// `b.store(out, i, b.add(x, y))`).
    next: Cell<u32>,
    /// The blocks being built: the top-level body, then the bodies of the open loops.
    blocks: RefCell<Vec<Vec<Inst>>>,
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, a: Value, b: Value) -> Value {
                self.binary(BinaryOp::$op, a, b)
            }
        )*
    };
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, a: Value) -> Value {
                self.unary(UnaryOp::$op, a)
            }
        )*
    };
}

macro_rules! cmp_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, a: Value, b: Value) -> Value {
                self.cmp(CmpOp::$op, a, b)
            }
        )*
    };
}

impl BodyBuilder {
    fn fresh(&self) -> ValueId {
        let v = ValueId(self.next.get());
        self.next.set(v.0 + 1);
        v
    }

    fn push(&self, inst: Inst) {
        if let Some(block) = self.blocks.borrow_mut().last_mut() {
            block.push(inst);
        }
    }

    fn push_value(&self, op: Op, dtype: DType) -> Value {
        let id = self.fresh();
        self.push(Inst {
            results: vec![id],
            op,
        });
        Value { id, dtype }
    }

    fn ids(vs: &[Value]) -> Vec<ValueId> {
        vs.iter().map(|v| v.id).collect()
    }

    /// The kernel's parameters declared so far.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// A constant.
    pub fn constant(&self, c: Scalar) -> Value {
        self.push_value(Op::Const(c), c.dtype())
    }

    /// An `f64` constant.
    pub fn const_f64(&self, c: f64) -> Value {
        self.constant(Scalar::F64(c))
    }

    /// An `f32` constant.
    pub fn const_f32(&self, c: f32) -> Value {
        self.constant(Scalar::F32(c))
    }

    /// An `i64` constant (the type of indices).
    pub fn const_i64(&self, c: i64) -> Value {
        self.constant(Scalar::I64(c))
    }

    /// An `i32` constant.
    pub fn const_i32(&self, c: i32) -> Value {
        self.constant(Scalar::I32(c))
    }

    /// A `bool` constant.
    pub fn const_bool(&self, c: bool) -> Value {
        self.constant(Scalar::Bool(c))
    }

    /// A constant of `dtype` with value `c`, converted as a cast would (`as` in Rust:
    /// truncating and saturating to integers, non-zero to `true`). An unsigned storage type
    /// gives the `i64` constant of its values (saturated to the type's range).
    pub fn const_of(&self, dtype: DType, c: f64) -> Value {
        self.constant(match dtype {
            DType::F32 => Scalar::F32(c as f32),
            DType::F64 => Scalar::F64(c),
            DType::I32 => Scalar::I32(c as i32),
            DType::I64 => Scalar::I64(c as i64),
            DType::Bool => Scalar::Bool(c != 0.0),
            DType::U8 => Scalar::I64(i64::from(c as u8)),
            DType::U16 => Scalar::I64(i64::from(c as u16)),
            DType::U32 => Scalar::I64(i64::from(c as u32)),
            DType::U64 => Scalar::I64(c as u64 as i64),
        })
    }

    /// A constant of `like`'s type with value `c` (see [`BodyBuilder::const_of`]).
    ///
    /// ```
    /// # use weft_ir::builder::KernelBuilder;
    /// # use weft_ir::DType;
    /// let mut k = KernelBuilder::new("k");
    /// let x = k.scalar(DType::F32);
    /// let half = k.const_like(x, 0.5);
    /// assert_eq!(half.dtype(), DType::F32);
    /// ```
    pub fn const_like(&self, like: Value, c: f64) -> Value {
        self.const_of(like.dtype, c)
    }

    /// A binary operation; the result has `a`'s type.
    pub fn binary(&self, op: BinaryOp, a: Value, b: Value) -> Value {
        self.push_value(Op::Binary(op, a.id, b.id), a.dtype)
    }

    binary_methods! {
        /// `a + b`.
        add => Add;
        /// `a - b`.
        sub => Sub;
        /// `a * b`.
        mul => Mul;
        /// `a / b`.
        div => Div;
        /// The remainder of `a / b`.
        rem => Rem;
        /// The smaller of `a` and `b`.
        min => Min;
        /// The larger of `a` and `b`.
        max => Max;
        /// `a` to the power `b` (floats).
        pow => Pow;
        /// `atan2(a, b)`: the angle of the point `(b, a)` (floats).
        atan2 => Atan2;
        /// Bitwise and (integers and bools).
        and => And;
        /// Bitwise or (integers and bools).
        or => Or;
        /// Bitwise exclusive or (integers and bools).
        xor => Xor;
        /// `a << b` (integers; the amount is taken modulo the bit width).
        shl => Shl;
        /// `a >> b`, logical (integers; the amount is taken modulo the bit width).
        shr => Shr;
    }

    /// A unary operation; the result has `a`'s type.
    pub fn unary(&self, op: UnaryOp, a: Value) -> Value {
        self.push_value(Op::Unary(op, a.id), a.dtype)
    }

    unary_methods! {
        /// `-a`.
        neg => Neg;
        /// `|a|`.
        abs => Abs;
        /// Square root.
        sqrt => Sqrt;
        /// `e^a`.
        exp => Exp;
        /// Natural logarithm.
        log => Log;
        /// Sine.
        sin => Sin;
        /// Cosine.
        cos => Cos;
        /// Hyperbolic tangent.
        tanh => Tanh;
        /// The error function.
        erf => Erf;
        /// Inverse sine.
        asin => Asin;
        /// Inverse cosine.
        acos => Acos;
        /// Inverse tangent.
        atan => Atan;
        /// Hyperbolic sine.
        sinh => Sinh;
        /// Hyperbolic cosine.
        cosh => Cosh;
        /// Inverse hyperbolic sine.
        asinh => Asinh;
        /// Inverse hyperbolic cosine.
        acosh => Acosh;
        /// Inverse hyperbolic tangent.
        atanh => Atanh;
        /// Round toward minus infinity.
        floor => Floor;
        /// Round toward plus infinity.
        ceil => Ceil;
        /// Bitwise (or logical) not.
        not => Not;
    }

    /// A comparison; the result is a `bool`.
    pub fn cmp(&self, op: CmpOp, a: Value, b: Value) -> Value {
        self.push_value(Op::Cmp(op, a.id, b.id), DType::Bool)
    }

    cmp_methods! {
        /// `a == b`.
        eq => Eq;
        /// `a != b`.
        ne => Ne;
        /// `a < b`.
        lt => Lt;
        /// `a <= b`.
        le => Le;
        /// `a > b`.
        gt => Gt;
        /// `a >= b`.
        ge => Ge;
    }

    /// `cond ? a : b`; the result has `a`'s type.
    pub fn select(&self, cond: Value, a: Value, b: Value) -> Value {
        self.push_value(Op::Select(cond.id, a.id, b.id), a.dtype)
    }

    /// `a * b + c` rounded once (floats of one type).
    pub fn fma(&self, a: Value, b: Value, c: Value) -> Value {
        self.push_value(Op::Fma(a.id, b.id, c.id), a.dtype)
    }

    /// `a` converted to `dtype`.
    pub fn cast(&self, dtype: DType, a: Value) -> Value {
        self.push_value(Op::Cast(dtype, a.id), dtype)
    }

    /// `a`'s bits read as `dtype` (same size: `f64`/`i64` or `f32`/`i32`).
    ///
    /// ```
    /// # use weft_ir::builder::KernelBuilder;
    /// # use weft_ir::DType;
    /// let mut k = KernelBuilder::new("k");
    /// let x = k.scalar(DType::F64);
    /// let bits = k.bitcast(DType::I64, x);
    /// assert_eq!(bits.dtype(), DType::I64);
    /// k.finish_validated().unwrap();
    /// ```
    pub fn bitcast(&self, dtype: DType, a: Value) -> Value {
        self.push_value(Op::Bitcast(dtype, a.id), dtype)
    }

    /// The value of scalar parameter `index` (normally [`KernelBuilder::scalar`] does this).
    /// Its type is the parameter's, or `i64` if `index` is not a scalar parameter.
    pub fn param(&self, index: u32) -> Value {
        let dtype = match self.params.get(index as usize) {
            Some(Param::Scalar { dtype }) => *dtype,
            _ => DType::I64,
        };
        self.push_value(Op::Param(index), dtype)
    }

    fn access(store: StoreParam, indices: &[Value]) -> Access {
        Access {
            param: store.index,
            indices: Self::ids(indices),
        }
    }

    /// Loads `store[indices]`.
    pub fn load(&self, store: StoreParam, indices: &[Value]) -> Value {
        self.push_value(
            Op::Load(Self::access(store, indices)),
            store.dtype.value_type(),
        )
    }

    /// Stores `value` at `store[indices]`.
    pub fn store(&self, store: StoreParam, indices: &[Value], value: Value) {
        self.push(Inst {
            results: Vec::new(),
            op: Op::Store(Self::access(store, indices), value.id),
        });
    }

    /// Reduces `value` into `store[indices]` with the operator of the store's privilege
    /// (`sum` if its privilege is not a reduction, which the validator rejects).
    pub fn reduce(&self, store: StoreParam, indices: &[Value], value: Value) {
        let op = match store.privilege {
            Privilege::Reduce(op) => op,
            _ => ReduceOp::Sum,
        };
        self.reduce_with(store, op, indices, value);
    }

    /// Reduces `value` into `store[indices]` with `op`.
    pub fn reduce_with(&self, store: StoreParam, op: ReduceOp, indices: &[Value], value: Value) {
        self.push(Inst {
            results: Vec::new(),
            op: Op::Reduce(Self::access(store, indices), op, value.id),
        });
    }

    /// The extent (`i64`) of the point task's sub-store of `store` along `dim`.
    pub fn extent(&self, store: StoreParam, dim: u32) -> Value {
        self.push_value(
            Op::Extent {
                param: store.index,
                dim,
            },
            DType::I64,
        )
    }

    /// The global coordinate (`i64`) of the origin of the point task's sub-store of `store`
    /// along `dim`.
    pub fn origin(&self, store: StoreParam, dim: u32) -> Value {
        self.push_value(
            Op::Origin {
                param: store.index,
                dim,
            },
            DType::I64,
        )
    }

    /// A parallel loop over the point task's sub-store of `over` (top level only). `body`
    /// builds the loop body; it gets the loop's indices, one `i64` per dimension of `over`.
    /// Returns what `body` returns.
    pub fn parallel<R>(
        &mut self,
        over: StoreParam,
        body: impl FnOnce(&mut BodyBuilder, &[Value]) -> R,
    ) -> R {
        let indices: Vec<Value> = (0..over.rank)
            .map(|_| Value {
                id: self.fresh(),
                dtype: DType::I64,
            })
            .collect();
        self.blocks.borrow_mut().push(Vec::new());
        let r = body(self, &indices);
        let block = self.blocks.borrow_mut().pop().unwrap_or_default();
        self.push(Inst {
            results: Vec::new(),
            op: Op::Parallel(ParallelLoop {
                over: over.index,
                indices: Self::ids(&indices),
                body: block,
            }),
        });
        r
    }

    /// A sequential loop `for iv in lo..hi` carrying one value per `init`. `body` builds the
    /// loop body; it gets the induction value and the carried values and returns their next
    /// values. Returns the carried values' final values.
    ///
    /// ```
    /// # use weft_ir::builder::KernelBuilder;
    /// # use weft_ir::{DType, Privilege};
    /// // out[i] = sum of k for k in 0..i
    /// let mut k = KernelBuilder::new("triangle");
    /// let out = k.store(DType::I64, 1, Privilege::Write);
    /// k.parallel(out, |b, i| {
    ///     let zero = b.const_i64(0);
    ///     let sum = b.for_loop(zero, i[0], &[zero], |b, iv, acc| vec![b.add(acc[0], iv)]);
    ///     b.store(out, i, sum[0]);
    /// });
    /// k.finish_validated().unwrap();
    /// ```
    pub fn for_loop(
        &mut self,
        lo: Value,
        hi: Value,
        init: &[Value],
        body: impl FnOnce(&mut BodyBuilder, Value, &[Value]) -> Vec<Value>,
    ) -> Vec<Value> {
        let induction = Value {
            id: self.fresh(),
            dtype: DType::I64,
        };
        let carried: Vec<Value> = init
            .iter()
            .map(|v| Value {
                id: self.fresh(),
                dtype: v.dtype,
            })
            .collect();
        self.blocks.borrow_mut().push(Vec::new());
        let yields = body(self, induction, &carried);
        let block = self.blocks.borrow_mut().pop().unwrap_or_default();
        let results: Vec<Value> = init
            .iter()
            .map(|v| Value {
                id: self.fresh(),
                dtype: v.dtype,
            })
            .collect();
        self.push(Inst {
            results: Self::ids(&results),
            op: Op::For(ForLoop {
                lo: lo.id,
                hi: hi.id,
                induction: induction.id,
                init: Self::ids(init),
                carried: Self::ids(&carried),
                body: block,
                yields: Self::ids(&yields),
            }),
        });
        results
    }

    /// `op` over `term(p)` for `p` in `lo..hi`, in the *lane order* of a sequential reduction
    /// (`weft_ir::semantics`, *Reduction order*): with `n = hi - lo` (none if negative),
    /// term `p - lo < FOLD_LANES * floor(n / FOLD_LANES)` goes to partial result
    /// `(p - lo) mod FOLD_LANES`, each partial combining its terms in increasing `p` from
    /// `op`'s identity ([`ReduceOp::identity`]); the terms after them go to one more partial
    /// (the tail); and the result is the partials combined by a fixed tree,
    /// `(((s0 op s1) op (s2 op s3)) op ((s4 op s5) op (s6 op s7))) op tail`.
    ///
    /// The [`FOLD_LANES`] partials are independent chains, so the body keeps the arithmetic
    /// units busy, and a back end may run them as vector lanes of any width that divides
    /// [`FOLD_LANES`] (the CPU back end does, in 128-bit vectors) with the same bits: the order is
    /// written out in the IR. `term` is called once per lane (so `FOLD_LANES` times) in the
    /// main loop's body, with `p` as `lo + FOLD_LANES q + k`, and once in the tail's body.
    ///
    /// ```
    /// use weft_ir::builder::KernelBuilder;
    /// use weft_ir::{DType, Privilege, ReduceOp};
    ///
    /// // y[i] = sum over j of A[i, j] * x[j]
    /// let mut k = KernelBuilder::new("matvec");
    /// let a = k.store(DType::F64, 2, Privilege::Read);
    /// let x = k.store(DType::F64, 1, Privilege::Read);
    /// let y = k.store(DType::F64, 1, Privilege::Write);
    /// let n = k.extent(a, 1);
    /// k.parallel(y, |b, i| {
    ///     let lo = b.const_i64(0);
    ///     let sum = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
    ///         b.mul(b.load(a, &[i[0], j]), b.load(x, &[j]))
    ///     });
    ///     b.store(y, i, sum);
    /// });
    /// k.finish_validated().unwrap();
    /// ```
    pub fn fold_lanes(
        &mut self,
        op: ReduceOp,
        dtype: DType,
        lo: Value,
        hi: Value,
        mut term: impl FnMut(&mut BodyBuilder, Value) -> Value,
    ) -> Value {
        self.fold_lanes_with(op, dtype, lo, hi, |b, acc, p| {
            let t = term(b, p);
            combine(b, op, acc, t)
        })
    }

    /// The sum of `x(p) * y(p)` for `p` in `lo..hi` in the lane order of
    /// [`BodyBuilder::fold_lanes`], each term added to its partial by one fused multiply-add
    /// (`partial = fma(x, y, partial)`, one rounding per term, as BLAS's kernels do) instead of
    /// a rounded product and a rounded sum. The partials combine by the same tree, by `add`.
    /// `terms` returns the two factors of term `p`.
    pub fn fold_lanes_fma(
        &mut self,
        dtype: DType,
        lo: Value,
        hi: Value,
        mut terms: impl FnMut(&mut BodyBuilder, Value) -> (Value, Value),
    ) -> Value {
        self.fold_lanes_with(ReduceOp::Sum, dtype, lo, hi, |b, acc, p| {
            let (x, y) = terms(b, p);
            b.fma(x, y, acc)
        })
    }

    /// [`BodyBuilder::fold_lanes`] with `step(acc, p)` giving a partial's next value.
    fn fold_lanes_with(
        &mut self,
        op: ReduceOp,
        dtype: DType,
        lo: Value,
        hi: Value,
        mut step: impl FnMut(&mut BodyBuilder, Value, Value) -> Value,
    ) -> Value {
        let identity = self.constant(op.identity(dtype));
        let zero = self.const_i64(0);
        let lanes = self.const_i64(FOLD_LANES as i64);
        // `span / 8` and `blocks * 8` as shifts (`span` is not negative): a division costs
        // more than a short row's terms.
        let log = self.const_i64(i64::from(FOLD_LANES.trailing_zeros()));
        let span = self.sub(hi, lo);
        let span = self.max(span, zero);
        let blocks = self.shr(span, log);
        let partials = self.for_loop(zero, blocks, &[identity; FOLD_LANES], |b, q, acc| {
            let base_step = b.mul(q, lanes);
            let base = b.add(lo, base_step);
            (0..FOLD_LANES)
                .map(|k| {
                    let offset = b.const_i64(k as i64);
                    let p = b.add(base, offset);
                    step(b, acc[k], p)
                })
                .collect()
        });
        let done = self.shl(blocks, log);
        let start = self.add(lo, done);
        let tail = self.for_loop(start, hi, &[identity], |b, p, acc| vec![step(b, acc[0], p)]);
        let mut level = partials;
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| combine(self, op, pair[0], pair[1]))
                .collect();
        }
        combine(self, op, level[0], tail[0])
    }
}

/// `x op y` for a reduction's operator.
fn combine(b: &BodyBuilder, op: ReduceOp, x: Value, y: Value) -> Value {
    let bin = match op {
        ReduceOp::Sum => BinaryOp::Add,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::Min => BinaryOp::Min,
        ReduceOp::Max => BinaryOp::Max,
    };
    b.binary(bin, x, y)
}

/// The number of interleaved partial results of [`BodyBuilder::fold_lanes`]: every vector
/// width a back end uses for lanes of 32 or 64 bits divides it.
pub const FOLD_LANES: usize = 8;
