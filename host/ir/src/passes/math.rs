//! Math lowering: expands the math functions of a kernel into plain arithmetic.
//!
//! [`lower_math`] replaces every `exp`, `log`, `sin`, `cos`, `tanh`, `erf`, `asin`, `acos`,
//! `atan`, `sinh`, `cosh`, `asinh`, `acosh`, `atanh` (unary), `pow` and `atan2` (binary) on
//! `f64` or `f32` by a straight-line sequence of IR operations: `add`, `sub`, `mul`, `div`,
//! `fma`, `min`, `max`, `neg`, `abs`, `sqrt`, `floor`, comparisons, `select`, `bitcast`, the
//! integer `add`, `and`, `or`, `xor`, `shl` and `shr`, and (only in the `f32` forms of `sin`,
//! `cos`, `pow` and the functions after `erf` above, which compute in `f64`) `cast` between
//! `f32` and `f64`. The expansions have
//! no calls, no loops and no branches, never convert between floats and integers (so a vector
//! unit without packed `i64`/`f64` conversions, such as SSE2, can run them), never compare
//! integers, and never trap: a back end can vectorize a loop that uses math functions, and
//! every back end computes the same results. `sqrt`, `abs`, `floor` and `ceil` are plain
//! operations of every back end and stay.
//!
//! Every other instruction is left as it is, in place; the expansion of an instruction goes
//! where the instruction was and ends with the definition of the instruction's own result
//! value, so the uses of that value are unchanged. The constants the expansions use are defined
//! once each, at the start of the kernel body. New values get ids from
//! [`Kernel::value_bound`] on (run [`crate::renumber`] for definition order).
//!
//! The pass is idempotent (a lowered kernel has no math function left) and keeps a valid kernel
//! valid. A kernel that does not validate is returned unchanged, as is one whose expansion would
//! need value ids beyond [`crate::validate::MAX_VALUE_ID`].
//!
//! # Algorithms
//!
//! Integer tricks stand in for conversions: `round(v)` is `(v + 1.5·2^52) - 1.5·2^52` (`1.5·2^23`
//! for `f32`), whose bits also hold the rounded value in their low bits, so `2^k` is built by
//! adding the exponent bias to those bits and shifting them into the exponent field (`shl`); an
//! exponent field `e` becomes the float `e` as `bitcast(e | bits(2^52)) - 2^52`. Polynomials
//! are evaluated by Horner's rule, each step one `fma` (rounded once, on every back end: the
//! FMA instruction or a library `fma` on the CPU, `fma.rn` on the GPU), split into even and odd
//! chains where they are long.
//!
//! - **exp** (`f64`): `k = round(x/ln 2)`, `r = x - k·ln 2` with `ln 2` in two parts (Cody and
//!   Waite), `e^r = 1 + r + r²·Q(r)` with `Q` of degree 9 (relative error 1.6e-17 on
//!   `|r| <= 0.3466`); `2^k` is applied as two exact power-of-two factors (`2^(k-1)·2` for
//!   `x > 0`, `2^(k+64)·2^-64` otherwise), so that results near the overflow threshold are
//!   finite and gradual underflow is rounded once. `x` is first clamped to `[-746, 710]`, which
//!   makes overflow give `+inf` and underflow `+0` with no other test; NaN propagates. 30
//!   operations.
//! - **exp** (`f32`): the same with Cephes' degree-7 `expf` polynomial, `2^(k-1)·2` or
//!   `2^(k+32)·2^-32`, and `x` clamped to `[-104, 89]`. 26 operations.
//! - **log**: subnormals are scaled by `2^54` (`f32`: `2^25`); the bits give `x = 2^k·m` with
//!   `m` in `[√½, √2)`; `log m = f - f²/2 + s·(f²/2 + R(s²))` with `f = m - 1`, `s = f/(2 + f)`
//!   (one division) and fdlibm's `R` (degree 7; `f32`: `logf`'s, degree 4); `k·ln 2` in two
//!   parts. Selects give `log(±0) = -inf`, `log x = NaN` for `x < 0` and NaN, `log(+inf) =
//!   +inf`. 42 (`f64`) and 39 (`f32`) operations.
//! - **sin, cos** (`f64`): `n = round(x·2/π)`; `x - n·π/2` with π/2 in three 33-bit pieces, the
//!   reduced argument kept as a double-double `y0 + y1` (fdlibm's medium-range reduction, its
//!   second round always taken); fdlibm's `__kernel_sin` and `__kernel_cos`, both computed; a
//!   select on the parity of `n` picks one and the bits of `n` give the sign. 59 and 60
//!   operations.
//! - **sin, cos** (`f32`): computed in `f64` (two-part reduction, fdlibm's `__kernel_sindf` and
//!   `__kernel_cosdf` polynomials) and rounded once. 37 and 38 operations.
//!
//!   The reduction is exact while `|n| < 2^20`, that is for `|x| < 2^20·π/2 ≈ 1.6e6`, where both
//!   types are within an ulp. Beyond, the absolute error grows like `|x|·2^-54` (measured: 1e-9
//!   at `1e7`, 6e-8 at `1e9`, 6e-5 at `1e12`, 0.06 at `1e15`); from `|x| = 2^50` on, and for
//!   `±inf` and NaN, the result is NaN.
//! - **tanh**: on `a = |x|`: `a + a·z·P(z)/Q(z)` (`z = a²`, Cephes' rational) for `a < 0.625`,
//!   else `(E - 1)/(E + 1)` with `E = e^(2·min(a, 20))`; the two share one division (numerator
//!   and denominator are selected). `f32`: Cephes' `tanhf` polynomial below 0.625, else
//!   `1 - 2/(E + 1)` with `E = e^(2·min(a, 10))`. The sign of `x` is copied onto the result,
//!   so `tanh(-0) = -0`; `tanh(±inf) = ±1`. 48 (`f64`) and 40 (`f32`) operations.
//! - **erf**: on `a = |x|`: `a + a·P(a²)` for `a < 0.84375` (`P` of degree 10, relative error
//!   2e-17; `f32`: degree 5); else `1 - e^(-c²)·N(c)/D(c)` with `c = min(a, 6)` (`f32`:
//!   `min(a, 4)`, where `erf` rounds to 1) and a rational fit of `erfc(c)·e^(c²)` of degree
//!   5/6 (`f32`: 2/3) whose absolute error in `erfc` is below 1e-17 (`f32`: 5e-10). The sign of
//!   `x` is copied onto the result; `erf(±inf) = ±1`. 62 (`f64`) and 46 (`f32`) operations.
//! - **pow** (`f64`): `a^b = e^(b·log|a|)` with `log|a|` a double-double accurate to about
//!   2^-64 relative (the reduction of `log` above; `s` split into a 16-bit head and a tail,
//!   `2s + (2/3)s³` kept exact, a degree-7 series for the rest), `b·log|a|` as an exact product
//!   (Dekker's, with Veltkamp's splitting), and its low part added to the reduced argument of
//!   `exp`. 152 operations.
//! - **pow** (`f32`): in `f64`, `e^(b·log|a|)` with the plain `f64` `log` (its error, at most
//!   `|b·log a|·2^-52`, is far below an `f32` ulp), rounded once. 100 operations.
//!
//!   The special cases of `pow` (both types) are those of C99 and Rust's `powf`:
//!   `pow(a, ±0) = 1` for any `a`, NaN included; `pow(1, b) = 1` for any `b`, NaN included;
//!   `pow(-1, ±inf) = 1`; a negative base (`-0` and `-inf` included) with an integer exponent
//!   gives `±|a|^b`, negative for an odd exponent; a finite negative base with a non-integer
//!   exponent gives NaN; otherwise NaN in gives NaN out; `pow(±0, b)` and `pow(±inf, b)` give
//!   the zeros and infinities C99 gives, and `b = ±inf` gives `+0` or `+inf` by whether `|a|`
//!   is below or above 1. Every pair of special values agrees with Rust's `powf` (tested).
//! - **atan** (in `arc_hyperbolic`): on `a = |x|`, Cephes' reduction (`-1/a` above
//!   `tan(3π/8)`, `(a - 1)/(a + 1)` above 0.66, with `π/2` or `π/4` added back together with
//!   the bits they lose to rounding) and its rational `x + x·z·P(z)/Q(z)` of degree 4/5; `x`'s
//!   sign. One division picks the reduction (numerator and denominator are selected).
//! - **asin** is `atan(a/√((1 - a)(1 + a)))` with `x`'s sign; **acos** is
//!   `2·atan(√((1 - x)/(1 + x)))`; both give NaN outside `[-1, 1]` through the square root.
//! - **atan2(y, x)**: `atan(y/x)`, plus `π` (in two parts) with `y`'s sign where `x`'s sign bit
//!   is set; where `y/x` is `0/0` or `inf/inf`, C99's `±0`, `±π`, `±π/4` and `±3π/4`.
//! - **sinh**: on `a = |x|`, its Taylor series to `a^19` below 1, `(E - 1/E)/2` with
//!   `E = e^a` up to 709, `(e^(a/2)/2)·e^(a/2)` beyond (so results up to the overflow threshold
//!   stay finite); `x`'s sign. **cosh**: `E/2 + (1/2)/E` up to 709, then the same product.
//! - **asinh, acosh**: one logarithm, of an argument selected per range: `log1p(v)` for small
//!   arguments (`v = a + a²/(1 + √(1 + a²))`, and `v = t + √(2t + t²)` with `t = x - 1` for
//!   `acosh` up to 2), `log(2a ± 1/(√(a² ± 1) + a))` in the middle, `log(a) + ln 2` from `2^28`
//!   on. `log1p(v)` is `log(u) + c/u` with `u = 1 + v` rounded and `c` its rounding error
//!   (exact by Fast2Sum). `acosh` is NaN below 1. **atanh**: `log1p(2a + 2a·a/(1 - a))/2` below
//!   1/2, `log1p(2a/(1 - a))/2` above; `±inf` at `±1`, NaN beyond.
//!
//!   Every one of these computes in `f64`; the `f32` forms convert, compute and round once.
//!
//! (Operation counts exclude constants and count `bitcast`, which is free on most machines.)
//!
//! # Accuracy
//!
//! The largest errors measured against Rust's `f64` and `f32` functions (and, for `erf`,
//! fdlibm's, as in the CPU back end's `erf`), over dense sweeps and random arguments (the tests
//! `math_lowering.rs` in this crate and `cpu_math_lowered.rs` in `weft-cpu`, which assert
//! 4 ulp, or 1e-15 relative for `erf`):
//!
//! | function | domain | `f64` | `f32` |
//! | --- | --- | --- | --- |
//! | exp | `[-708, 709]`, and the subnormal results below | 1 ulp | 1 ulp |
//! | log | `(0, 1e300]` (`f32`: every positive float), subnormals included | 1 ulp | 1 ulp |
//! | sin, cos | `|x| <= 1.6e6` | 1 ulp | 1 ulp |
//! | tanh | all reals | 2 ulp | 2 ulp |
//! | erf | all reals | 2.9e-16 relative | 1 ulp |
//! | pow | `a > 0`, `|b·ln a| < 700` (`f32`: `< 85`) | 1 ulp | 1 ulp |
//! | asin, acos | `[-1, 1]` | 2 ulp | 1 ulp |
//! | atan | all reals | 1 ulp | 1 ulp |
//! | atan2 | all pairs | 1 ulp | 1 ulp |
//! | sinh, cosh | up to overflow | 3 ulp | 2 ulp |
//! | asinh | all reals | 1 ulp | 0 ulp |
//! | acosh | `[1, inf)` | 1 ulp | 0 ulp |
//! | atanh | `(-1, 1)` | 2 ulp | 0 ulp |
//!
//! The inverse hyperbolic functions are measured against the `libm` crate's (Rust's own lose
//! most of their digits near `acosh(1)` and `atanh(±1)`), their `f32` forms against its `f64`
//! ones rounded. Special values (`±0`, `±inf`, NaN, subnormals, the overflow and underflow
//! thresholds) give the results of Rust's functions, signed zeros and infinities included.

// The published constants (fdlibm, Cephes) are kept digit for digit.
#![allow(clippy::excessive_precision)]

use std::collections::HashMap;

mod arc_hyperbolic;

use crate::validate::{MAX_VALUE_ID, Types, validate};
use crate::{BinaryOp, CmpOp, DType, Inst, Kernel, Op, Scalar, UnaryOp, ValueId};

/// Expands every math function of `kernel` into plain arithmetic (see the
/// [module documentation](self)); every other operation is kept as it is.
///
/// ```
/// use weft_ir::passes::math::{has_math_functions, lower_math};
/// use weft_ir::text;
///
/// let k = text::parse(
///     "kernel @k(%x: store<f64, 1, read>, %y: store<f64, 1, write>) {
///        parallel %y (%i) {
///          %v = load %x[%i]
///          %e = exp %v
///          store %y[%i], %e
///        }
///      }",
/// )
/// .unwrap();
/// let lowered = lower_math(&k);
/// assert!(has_math_functions(&k) && !has_math_functions(&lowered));
/// weft_ir::validate(&lowered).unwrap();
/// assert_eq!(lower_math(&lowered), lowered);
/// ```
pub fn lower_math(kernel: &Kernel) -> Kernel {
    if !has_math_functions(kernel) {
        return kernel.clone();
    }
    let Ok(types) = validate(kernel) else {
        return kernel.clone();
    };
    let mut lw = Lowerer {
        types,
        next: kernel.value_bound(),
        consts: Vec::new(),
        const_ids: HashMap::new(),
        overflow: false,
    };
    let body = lw.block(&kernel.body);
    if lw.overflow {
        return kernel.clone();
    }
    let mut all = std::mem::take(&mut lw.consts);
    all.extend(body);
    Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body: all,
    }
}

/// Whether `kernel` holds an operation that [`lower_math`] expands (a [`MathFn`]: a `Unary`
/// `exp`, `log`, `sin`, ..., `atanh`, or a `Binary` `pow` or `atan2`) anywhere in its body.
pub fn has_math_functions(kernel: &Kernel) -> bool {
    fn any(body: &[Inst]) -> bool {
        body.iter().any(|inst| match &inst.op {
            Op::Parallel(p) => any(&p.body),
            Op::For(l) => any(&l.body),
            op => is_math_function(op),
        })
    }
    any(&kernel.body)
}

/// Whether `op` is one of the operations [`lower_math`] expands, a [`MathFn`] (unlike
/// [`UnaryOp::is_math`], which also counts `sqrt`, `floor` and `ceil`).
pub fn is_math_function(op: &Op) -> bool {
    MathFn::of(op).is_some()
}

/// A math function that [`lower_math`] expands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    /// `e^a` (`Unary` `exp`).
    Exp,
    /// The natural logarithm (`Unary` `log`).
    Log,
    /// Sine (`Unary` `sin`).
    Sin,
    /// Cosine (`Unary` `cos`).
    Cos,
    /// Hyperbolic tangent (`Unary` `tanh`).
    Tanh,
    /// The error function (`Unary` `erf`).
    Erf,
    /// `a^b` (`Binary` `pow`).
    Pow,
    /// Inverse sine (`Unary` `asin`).
    Asin,
    /// Inverse cosine (`Unary` `acos`).
    Acos,
    /// Inverse tangent (`Unary` `atan`).
    Atan,
    /// The angle of a point (`Binary` `atan2`).
    Atan2,
    /// Hyperbolic sine (`Unary` `sinh`).
    Sinh,
    /// Hyperbolic cosine (`Unary` `cosh`).
    Cosh,
    /// Inverse hyperbolic sine (`Unary` `asinh`).
    Asinh,
    /// Inverse hyperbolic cosine (`Unary` `acosh`).
    Acosh,
    /// Inverse hyperbolic tangent (`Unary` `atanh`).
    Atanh,
}

impl MathFn {
    /// Every math function, in a fixed order.
    pub const ALL: [MathFn; 16] = [
        MathFn::Exp,
        MathFn::Log,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tanh,
        MathFn::Erf,
        MathFn::Pow,
        MathFn::Asin,
        MathFn::Acos,
        MathFn::Atan,
        MathFn::Atan2,
        MathFn::Sinh,
        MathFn::Cosh,
        MathFn::Asinh,
        MathFn::Acosh,
        MathFn::Atanh,
    ];

    /// The math function `op` applies and its operands (one, or two for `pow`); `None` for
    /// any other operation.
    pub fn of(op: &Op) -> Option<(MathFn, Vec<ValueId>)> {
        match op {
            Op::Unary(u, a) => Some((MathFn::of_unary(*u)?, vec![*a])),
            Op::Binary(BinaryOp::Pow, a, b) => Some((MathFn::Pow, vec![*a, *b])),
            Op::Binary(BinaryOp::Atan2, a, b) => Some((MathFn::Atan2, vec![*a, *b])),
            _ => None,
        }
    }

    /// The math function the unary operator `op` is, if it is one.
    pub fn of_unary(op: UnaryOp) -> Option<MathFn> {
        Some(match op {
            UnaryOp::Exp => MathFn::Exp,
            UnaryOp::Log => MathFn::Log,
            UnaryOp::Sin => MathFn::Sin,
            UnaryOp::Cos => MathFn::Cos,
            UnaryOp::Tanh => MathFn::Tanh,
            UnaryOp::Erf => MathFn::Erf,
            UnaryOp::Asin => MathFn::Asin,
            UnaryOp::Acos => MathFn::Acos,
            UnaryOp::Atan => MathFn::Atan,
            UnaryOp::Sinh => MathFn::Sinh,
            UnaryOp::Cosh => MathFn::Cosh,
            UnaryOp::Asinh => MathFn::Asinh,
            UnaryOp::Acosh => MathFn::Acosh,
            UnaryOp::Atanh => MathFn::Atanh,
            _ => return None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The pass
// ---------------------------------------------------------------------------------------------

struct Lowerer {
    types: Types,
    /// The next fresh value id.
    next: u32,
    /// The constants the expansions use, defined at the start of the kernel body.
    consts: Vec<Inst>,
    const_ids: HashMap<Scalar, ValueId>,
    /// Set when fresh ids ran past the validator's limit.
    overflow: bool,
}

impl Lowerer {
    fn fresh(&mut self) -> ValueId {
        if self.next >= MAX_VALUE_ID {
            self.overflow = true;
        }
        let v = ValueId(self.next);
        self.next = self.next.saturating_add(1);
        v
    }

    fn konst(&mut self, s: Scalar) -> ValueId {
        if let Some(&v) = self.const_ids.get(&s) {
            return v;
        }
        let v = self.fresh();
        self.consts.push(Inst {
            results: vec![v],
            op: Op::Const(s),
        });
        self.const_ids.insert(s, v);
        v
    }

    fn block(&mut self, body: &[Inst]) -> Vec<Inst> {
        super::util::expand_body(body, &mut |inst| {
            if is_math_function(&inst.op) {
                self.expand(inst)
            } else {
                None
            }
        })
    }

    /// The expansion of one math instruction, ending with the definition of its result; `None`
    /// if the instruction is not one this pass handles (it is then kept).
    fn expand(&mut self, inst: &Inst) -> Option<Vec<Inst>> {
        let &[result] = inst.results.as_slice() else {
            return None;
        };
        let operand = |v: ValueId| V {
            id: v,
            t: DType::F64,
        };
        let (f, args) = MathFn::of(&inst.op)?;
        let t = self.types.get(*args.first()?)?;
        if !t.is_float() || args.iter().any(|&a| self.types.get(a) != Some(t)) {
            return None;
        }
        let args: Vec<V> = args.into_iter().map(|a| V { t, ..operand(a) }).collect();
        let mut e = Em {
            lw: self,
            out: Vec::new(),
        };
        let y = match (f, t) {
            (MathFn::Exp, DType::F64) => exp_f64(&mut e, args[0], None, true),
            (MathFn::Exp, _) => exp_f32(&mut e, args[0], true),
            (MathFn::Log, DType::F64) => log_f64(&mut e, args[0]),
            (MathFn::Log, _) => log_f32(&mut e, args[0]),
            (MathFn::Sin, DType::F64) => sin_cos_f64(&mut e, args[0], false),
            (MathFn::Sin, _) => sin_cos_f32(&mut e, args[0], false),
            (MathFn::Cos, DType::F64) => sin_cos_f64(&mut e, args[0], true),
            (MathFn::Cos, _) => sin_cos_f32(&mut e, args[0], true),
            (MathFn::Tanh, DType::F64) => tanh_f64(&mut e, args[0]),
            (MathFn::Tanh, _) => tanh_f32(&mut e, args[0]),
            (MathFn::Erf, DType::F64) => erf_f64(&mut e, args[0]),
            (MathFn::Erf, _) => erf_f32(&mut e, args[0]),
            (MathFn::Pow, DType::F64) => pow_f64(&mut e, args[0], args[1]),
            (MathFn::Pow, _) => pow_f32(&mut e, args[0], args[1]),
            (MathFn::Asin, _) => arc_hyperbolic::asin(&mut e, args[0]),
            (MathFn::Acos, _) => arc_hyperbolic::acos(&mut e, args[0]),
            (MathFn::Atan, _) => arc_hyperbolic::atan(&mut e, args[0]),
            (MathFn::Atan2, _) => arc_hyperbolic::atan2(&mut e, args[0], args[1]),
            (MathFn::Sinh, _) => arc_hyperbolic::sinh(&mut e, args[0]),
            (MathFn::Cosh, _) => arc_hyperbolic::cosh(&mut e, args[0]),
            (MathFn::Asinh, _) => arc_hyperbolic::asinh(&mut e, args[0]),
            (MathFn::Acosh, _) => arc_hyperbolic::acosh(&mut e, args[0]),
            (MathFn::Atanh, _) => arc_hyperbolic::atanh(&mut e, args[0]),
        };
        let mut out = e.out;
        // Make the last instruction define the original result.
        match out.last_mut() {
            Some(last) if last.results == [y.id] => last.results = vec![result],
            _ => {
                let c = self.konst(Scalar::Bool(true));
                out.push(Inst {
                    results: vec![result],
                    op: Op::Select(c, y.id, y.id),
                });
            }
        }
        Some(out)
    }
}

// ---------------------------------------------------------------------------------------------
// The emitter
// ---------------------------------------------------------------------------------------------

/// A value being built, with its type.
#[derive(Clone, Copy, Debug)]
struct V {
    id: ValueId,
    t: DType,
}

/// Appends instructions to one expansion.
struct Em<'a> {
    lw: &'a mut Lowerer,
    out: Vec<Inst>,
}

/// The integer type of the size of float type `t`.
fn int_of(t: DType) -> DType {
    if t == DType::F32 {
        DType::I32
    } else {
        DType::I64
    }
}

impl Em<'_> {
    fn push(&mut self, op: Op, t: DType) -> V {
        let id = self.lw.fresh();
        self.out.push(Inst {
            results: vec![id],
            op,
        });
        V { id, t }
    }

    fn konst(&mut self, s: Scalar) -> V {
        V {
            id: self.lw.konst(s),
            t: s.dtype(),
        }
    }

    /// The float constant `x` in type `t` (rounded to `f32` for `f32`).
    fn f(&mut self, t: DType, x: f64) -> V {
        self.konst(if t == DType::F32 {
            Scalar::F32(x as f32)
        } else {
            Scalar::F64(x)
        })
    }

    /// The integer constant `x` in the integer type `t`.
    fn i(&mut self, t: DType, x: i64) -> V {
        self.konst(if t == DType::I32 {
            Scalar::I32(x as i32)
        } else {
            Scalar::I64(x)
        })
    }

    fn bin(&mut self, op: BinaryOp, a: V, b: V) -> V {
        self.push(Op::Binary(op, a.id, b.id), a.t)
    }

    fn add(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Add, a, b)
    }

    fn sub(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Sub, a, b)
    }

    fn mul(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Mul, a, b)
    }

    fn div(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Div, a, b)
    }

    fn min(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Min, a, b)
    }

    fn max(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Max, a, b)
    }

    fn and(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::And, a, b)
    }

    fn or(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Or, a, b)
    }

    fn xor(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Xor, a, b)
    }

    fn shl(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Shl, a, b)
    }

    fn shr(&mut self, a: V, b: V) -> V {
        self.bin(BinaryOp::Shr, a, b)
    }

    fn un(&mut self, op: UnaryOp, a: V) -> V {
        self.push(Op::Unary(op, a.id), a.t)
    }

    fn abs(&mut self, a: V) -> V {
        self.un(UnaryOp::Abs, a)
    }

    fn neg(&mut self, a: V) -> V {
        self.un(UnaryOp::Neg, a)
    }

    fn floor(&mut self, a: V) -> V {
        self.un(UnaryOp::Floor, a)
    }

    fn cmp(&mut self, op: CmpOp, a: V, b: V) -> V {
        self.push(Op::Cmp(op, a.id, b.id), DType::Bool)
    }

    fn sel(&mut self, c: V, a: V, b: V) -> V {
        self.push(Op::Select(c.id, a.id, b.id), a.t)
    }

    fn bitcast(&mut self, t: DType, a: V) -> V {
        self.push(Op::Bitcast(t, a.id), t)
    }

    fn cast(&mut self, t: DType, a: V) -> V {
        self.push(Op::Cast(t, a.id), t)
    }

    // Operations with a constant operand.

    fn addc(&mut self, a: V, c: f64) -> V {
        let k = self.f(a.t, c);
        self.add(a, k)
    }

    fn mulc(&mut self, a: V, c: f64) -> V {
        let k = self.f(a.t, c);
        self.mul(a, k)
    }

    /// `c - a`.
    fn csub(&mut self, c: f64, a: V) -> V {
        let k = self.f(a.t, c);
        self.sub(k, a)
    }

    fn minc(&mut self, a: V, c: f64) -> V {
        let k = self.f(a.t, c);
        self.min(a, k)
    }

    fn maxc(&mut self, a: V, c: f64) -> V {
        let k = self.f(a.t, c);
        self.max(a, k)
    }

    fn cmpc(&mut self, op: CmpOp, a: V, c: f64) -> V {
        let k = self.f(a.t, c);
        self.cmp(op, a, k)
    }

    /// `c ? x : y` for float constants `x`, `y` of type `t`.
    fn selc(&mut self, c: V, t: DType, x: f64, y: f64) -> V {
        let (x, y) = (self.f(t, x), self.f(t, y));
        self.sel(c, x, y)
    }

    /// `a + b·c`, rounded once (`fma`).
    fn mad(&mut self, a: V, b: V, c: V) -> V {
        self.fma(b, c, a)
    }

    /// `a·b + c`, rounded once.
    fn fma(&mut self, a: V, b: V, c: V) -> V {
        self.push(Op::Fma(a.id, b.id, c.id), a.t)
    }

    /// `c[0] + x·(c[1] + x·(c[2] + ...))` (Horner), each step one `fma`.
    fn horner(&mut self, x: V, c: &[f64]) -> V {
        let Some((&last, rest)) = c.split_last() else {
            return self.f(x.t, 0.0);
        };
        let Some((&next, rest)) = rest.split_last() else {
            return self.f(x.t, last);
        };
        // The first step is `last·x + next`, or `x + next` for a monic polynomial.
        let mut acc = if last == 1.0 {
            self.addc(x, next)
        } else {
            let (l, n) = (self.f(x.t, last), self.f(x.t, next));
            self.fma(l, x, n)
        };
        for &ci in rest.iter().rev() {
            let c = self.f(x.t, ci);
            acc = self.fma(acc, x, c);
        }
        acc
    }

    /// `c[0] + x·(c[1] + ...)` evaluated as two Horner chains in `x2 = x²` (even and odd
    /// coefficients), for more instruction-level parallelism at the same operation count.
    fn horner2(&mut self, x: V, x2: V, c: &[f64]) -> V {
        let even: Vec<f64> = c.iter().step_by(2).copied().collect();
        let odd: Vec<f64> = c.iter().skip(1).step_by(2).copied().collect();
        let e = self.horner(x2, &even);
        if odd.is_empty() {
            return e;
        }
        let o = self.horner(x2, &odd);
        self.mad(e, x, o)
    }

    /// `|y|` with the sign bit of `x` (`y` must have a clear sign bit).
    fn copysign_pos(&mut self, y: V, x: V) -> V {
        let it = int_of(x.t);
        let sign = self.i(
            it,
            if it == DType::I32 {
                i64::from(i32::MIN)
            } else {
                i64::MIN
            },
        );
        let xb = self.bitcast(it, x);
        let s = self.and(xb, sign);
        let yb = self.bitcast(it, y);
        let r = self.or(yb, s);
        self.bitcast(x.t, r)
    }

    /// The top bits of `x` (sign, exponent and `keep` mantissa bits), the rest cleared.
    fn trunc_bits(&mut self, x: V, keep: u32) -> V {
        let it = int_of(x.t);
        let mant = if it == DType::I32 { 23 } else { 52 };
        let mask = self.i(it, -1i64 << (mant - keep));
        let b = self.bitcast(it, x);
        let m = self.and(b, mask);
        self.bitcast(x.t, m)
    }
}

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// `1.5·2^52`: adding it rounds an `f64` of magnitude below `2^51` to an integer, whose value
/// then sits in the low bits of the sum's bits.
const SHIFT64: f64 = 6_755_399_441_055_744.0;
/// `1.5·2^23`, the same for `f32`.
const SHIFT32: f64 = 12_582_912.0;
const LOG2E: f64 = std::f64::consts::LOG2_E;
/// `ln 2` in two parts; the first has 21 trailing zero bits, so `k·LN2_HI` is exact for
/// `|k| < 2^21`.
const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;

/// `(e^r - 1 - r)/r²` on `|r| <= 0.3466`, degree 9 (Chebyshev interpolant).
const EXP_Q: [f64; 10] = [
    0.500_000_000_000_000_1,
    0.166_666_666_666_666_69,
    0.041_666_666_666_624_136,
    0.008_333_333_333_330_063,
    0.001_388_888_891_720_967,
    0.000_198_412_698_630_505_06,
    2.480_152_130_224_108_2e-5,
    2.755_726_846_483_162_7e-6,
    2.762_008_545_501_841_4e-7,
    2.510_038_319_586_702e-8,
];

/// Cephes' `expf`: `e^r ≈ 1 + r + r²·P(r)` on `|r| <= ln2/2`.
const EXPF_P: [f64; 6] = [
    5.000_000_120_1e-1,
    1.666_666_545_9e-1,
    4.166_579_589_4e-2,
    8.333_451_907_3e-3,
    1.398_199_950_7e-3,
    1.987_569_150_0e-4,
];

/// fdlibm's `log`: `R(z) = Lg1·z + ... + Lg7·z^7`, split into odd and even powers of `w = z²`.
const LG: [f64; 7] = [
    6.666_666_666_666_735_130e-1,
    3.999_999_999_940_941_908e-1,
    2.857_142_874_366_239_149e-1,
    2.222_219_843_214_978_396e-1,
    1.818_357_216_161_805_012e-1,
    1.531_383_769_920_937_332e-1,
    1.479_819_860_511_658_591e-1,
];

/// fdlibm's `logf` coefficients.
const LGF: [f64; 4] = [
    0.666_666_626_93,
    0.400_009_721_52,
    0.284_987_866_88,
    0.242_790_788_41,
];

/// `sin` and `cos` give NaN from this magnitude on.
const TRIG_LIMIT: f64 = 1_125_899_906_842_624.0; // 2^50

// fdlibm's medium-range reduction by π/2.
const INV_PIO2: f64 = std::f64::consts::FRAC_2_PI;
const PIO2_1: f64 = 1.570_796_326_734_125_614_17;
const PIO2_1T: f64 = 6.077_100_506_506_192_249_32e-11;
const PIO2_2: f64 = 6.077_100_506_303_965_976_60e-11;
const PIO2_2T: f64 = 2.022_266_248_795_950_631_54e-21;

// fdlibm's __kernel_sin and __kernel_cos.
const S1: f64 = -1.666_666_666_666_663_243_48e-1;
const S2: f64 = 8.333_333_333_322_489_461_24e-3;
const S3: f64 = -1.984_126_982_985_794_931_34e-4;
const S4: f64 = 2.755_731_370_707_006_767_89e-6;
const S5: f64 = -2.505_076_025_340_686_341_95e-8;
const S6: f64 = 1.589_690_995_211_550_102_21e-10;
const C1: f64 = 4.166_666_666_666_660_190_37e-2;
const C2: f64 = -1.388_888_888_887_410_957_49e-3;
const C3: f64 = 2.480_158_728_947_672_941_78e-5;
const C4: f64 = -2.755_731_435_139_066_330_35e-7;
const C5: f64 = 2.087_572_321_298_174_827_90e-9;
const C6: f64 = -1.135_964_755_778_819_482_65e-11;

// fdlibm's __kernel_sindf and __kernel_cosdf (evaluated in f64 for f32 arguments).
const SF: [f64; 4] = [
    -0.166_666_666_416_265_235_595,
    0.008_333_329_385_889_463_175_6,
    -0.000_198_393_348_360_966_317_347,
    0.000_002_718_311_493_989_821_906_4,
];
const CF: [f64; 4] = [
    -0.499_999_997_251_031_003_120,
    0.041_666_623_323_739_063_189_4,
    -0.001_388_676_377_460_992_946_92,
    0.000_024_390_448_796_277_409_065_4,
];

/// Cephes' `tanh` rational on `|x| < 0.625`: `x + x·z·P(z)/Q(z)`, `Q` monic.
const TANH_P: [f64; 3] = [
    -1.614_687_684_417_084_479_52e3,
    -9.928_772_310_019_185_865_64e1,
    -9.643_991_794_250_522_386_28e-1,
];
const TANH_Q: [f64; 4] = [
    4.844_063_053_251_254_860_48e3,
    2.235_488_390_601_004_485_83e3,
    1.128_116_784_916_329_314_02e2,
    1.0,
];

/// Cephes' `tanhf` on `|x| < 0.625`: `x + x·z·P(z)`.
const TANHF_P: [f64; 5] = [
    -3.333_328_194_22e-1,
    1.333_144_220_36e-1,
    -5.373_971_555_31e-2,
    2.063_908_879_54e-2,
    -5.704_988_727_45e-3,
];

/// `erf(x)/x - 1` as a polynomial in `z = x²` on `[0, 0.84375²]` (degree 10).
const ERF_P: [f64; 11] = [
    0.128_379_167_095_512_6,
    -0.376_126_389_031_834,
    0.112_837_916_709_353_11,
    -0.026_866_170_640_779_85,
    0.005_223_977_576_377_844,
    -0.000_854_832_379_116_413,
    0.000_120_551_999_413_218_85,
    -1.492_212_157_444_305_5e-5,
    1.640_162_967_934_702e-6,
    -1.571_446_067_260_244e-7,
    1.072_657_143_217_634_8e-8,
];

/// `erfc(c)·e^(c²) ≈ N(c)/D(c)` on `[0.84375, 6]` (degree 5/6, `D` monic).
const ERFC_N: [f64; 6] = [
    69.008_395_081_636_98,
    94.442_369_779_607_19,
    63.651_479_190_476_34,
    24.670_211_534_474_504,
    5.469_576_702_520_786,
    0.564_183_064_194_362_4,
];
const ERFC_D: [f64; 7] = [
    69.008_397_952_767_41,
    172.309_975_341_565_58,
    189.074_247_937_547_43,
    117.618_815_180_702_4,
    44.231_943_523_441_466,
    9.694_220_405_688_181,
    1.0,
];

/// `erf(x)/x - 1` in `z = x²` on `[0, 0.84375²]` for `f32` (degree 5).
const ERFF_P: [f64; 6] = [
    0.128_379_161_189_615,
    -0.376_125_790_981_863_5,
    0.112_828_052_179_781_97,
    -0.026_806_251_301_416_638,
    0.005_057_443_327_366_071,
    -0.000_635_306_056_027_475_9,
];

/// `erfc(c)·e^(c²) ≈ N(c)/D(c)` on `[0.84375, 4]` for `f32` (degree 2/3, `D` monic).
const ERFCF_N: [f64; 3] = [
    2.444_313_621_475_674_7,
    1.809_741_774_083_835_3,
    0.566_340_375_280_011_5,
];
const ERFCF_D: [f64; 4] = [
    2.442_839_823_510_212_7,
    4.576_508_677_973_259,
    3.254_227_063_882_334,
    1.0,
];

/// `(2·atanh(s) - 2s - (2/3)s³)/s⁵` as a polynomial in `w = s²` on `[0, 0.0295]` (degree 7).
const LOG_T2: [f64; 8] = [
    0.4,
    0.285_714_285_714_293_8,
    0.222_222_222_216_488_2,
    0.181_818_183_369_925_7,
    0.153_845_947_917_623_52,
    0.133_348_139_712_920_03,
    0.117_059_881_565_009_07,
    0.117_257_712_218_111_45,
];

// ---------------------------------------------------------------------------------------------
// exp
// ---------------------------------------------------------------------------------------------

/// `e^x` in `f64`. With `full`, any `x` (clamped, with overflow to `+inf`, gradual underflow
/// and NaN propagation); without, `x` must lie in `[-708, 709]`. `lo`, if given, is a small
/// low-order part of the argument (`e^(x + lo)`).
fn exp_f64(e: &mut Em<'_>, x: V, lo: Option<V>, full: bool) -> V {
    let t = DType::F64;
    let xc = if full {
        let hi = e.minc(x, 710.0);
        e.maxc(hi, -746.0)
    } else {
        x
    };
    let lx = e.mulc(xc, LOG2E);
    let sh = e.addc(lx, SHIFT64);
    let kf = e.addc(sh, -SHIFT64);
    let k1 = e.mulc(kf, LN2_HI);
    let r1 = e.sub(xc, k1);
    let k2 = e.mulc(kf, LN2_LO);
    let mut r = e.sub(r1, k2);
    if let Some(lo) = lo {
        r = e.add(r, lo);
    }
    let r2 = e.mul(r, r);
    let q = e.horner2(r, r2, &EXP_Q);
    let u = e.mad(r, r2, q);
    let p = e.addc(u, 1.0);
    let bits = e.bitcast(DType::I64, sh);
    let c52 = e.i(DType::I64, 52);
    if full {
        // 2^k as 2^(k-1)·2 for x > 0 and 2^(k+64)·2^-64 otherwise: both factors are normal
        // (or +inf past overflow), and the last product rounds once into the subnormals.
        let pos = e.cmpc(CmpOp::Gt, xc, 0.0);
        let (b1, b2) = (e.i(DType::I64, 1022), e.i(DType::I64, 1087));
        let off = e.sel(pos, b1, b2);
        let eb = e.add(bits, off);
        let sb = e.shl(eb, c52);
        let s1 = e.bitcast(t, sb);
        let s2 = e.selc(pos, t, 2.0, f64::from_bits(0x3bf0_0000_0000_0000));
        let y = e.mul(p, s1);
        e.mul(y, s2)
    } else {
        let bias = e.i(DType::I64, 1023);
        let eb = e.add(bits, bias);
        let sb = e.shl(eb, c52);
        let s = e.bitcast(t, sb);
        e.mul(p, s)
    }
}

/// `e^x` in `f32`; `full` as for [`exp_f64`] (without, `x` must lie in `[-87, 88]`).
fn exp_f32(e: &mut Em<'_>, x: V, full: bool) -> V {
    let t = DType::F32;
    let it = DType::I32;
    let xc = if full {
        let hi = e.minc(x, 89.0);
        e.maxc(hi, -104.0)
    } else {
        x
    };
    let lx = e.mulc(xc, LOG2E);
    let sh = e.addc(lx, SHIFT32);
    let kf = e.addc(sh, -SHIFT32);
    let k1 = e.mulc(kf, 0.693_359_375);
    let r1 = e.sub(xc, k1);
    let k2 = e.mulc(kf, -2.121_944_400_546_905_827_68e-4);
    let r = e.sub(r1, k2);
    let r2 = e.mul(r, r);
    let q = e.horner2(r, r2, &EXPF_P);
    let u = e.mad(r, r2, q);
    let p = e.addc(u, 1.0);
    let bits = e.bitcast(it, sh);
    let c23 = e.i(it, 23);
    if full {
        let pos = e.cmpc(CmpOp::Gt, xc, 0.0);
        let (b1, b2) = (e.i(it, 126), e.i(it, 159));
        let off = e.sel(pos, b1, b2);
        let eb = e.add(bits, off);
        let sb = e.shl(eb, c23);
        let s1 = e.bitcast(t, sb);
        let s2 = e.selc(pos, t, 2.0, 2f64.powi(-32));
        let y = e.mul(p, s1);
        e.mul(y, s2)
    } else {
        let bias = e.i(it, 127);
        let eb = e.add(bits, bias);
        let sb = e.shl(eb, c23);
        let s = e.bitcast(t, sb);
        e.mul(p, s)
    }
}

// ---------------------------------------------------------------------------------------------
// log
// ---------------------------------------------------------------------------------------------

/// The reduction shared by the logarithms: `x = 2^k·m`, `m` in `[√½, √2)`. Returns `(m, k)`
/// with `k` as a float. `x` must be positive and finite for the result to mean anything.
fn log_reduce(e: &mut Em<'_>, x: V) -> (V, V) {
    let t = x.t;
    let it = int_of(t);
    let f32 = t == DType::F32;
    let (min_normal, scale, nscale) = if f32 {
        (f64::from(f32::MIN_POSITIVE), 2f64.powi(25), 25.0)
    } else {
        (f64::MIN_POSITIVE, 2f64.powi(54), 54.0)
    };
    let (sqrt_half, one_bits, mant, exp_magic, bias) = if f32 {
        (0x3f35_04f3_i64, 0x3f80_0000_i64, 23, 0x4b00_0000_i64, 127.0)
    } else {
        (
            0x3fe6_a09e_667f_3bcd_i64,
            0x3ff0_0000_0000_0000_i64,
            52,
            0x4330_0000_0000_0000_i64,
            1023.0,
        )
    };
    let sub = e.cmpc(CmpOp::Lt, x, min_normal);
    let xsc = e.mulc(x, scale);
    let xs = e.sel(sub, xsc, x);
    let ix = e.bitcast(it, xs);
    let d = e.i(it, one_bits - sqrt_half);
    let iy = e.add(ix, d);
    let cm = e.i(it, mant);
    let kb = e.shr(iy, cm);
    let mmask = e.i(it, (1i64 << mant) - 1);
    let mlow = e.and(iy, mmask);
    let sh = e.i(it, sqrt_half);
    let mb = e.add(mlow, sh);
    let m = e.bitcast(t, mb);
    let magic = e.i(it, exp_magic);
    let kor = e.or(kb, magic);
    let kbig = e.bitcast(t, kor);
    let two_m = 2f64.powi(mant as i32);
    let off = e.selc(sub, t, two_m + bias + nscale, two_m + bias);
    let kf = e.sub(kbig, off);
    (m, kf)
}

/// The special values of `log`: `+inf` for `+inf`, `-inf` for `±0`, NaN below 0 or for NaN.
fn log_specials(e: &mut Em<'_>, x: V, y: V) -> V {
    let t = x.t;
    let is_inf = e.cmpc(CmpOp::Eq, x, f64::INFINITY);
    let inf = e.f(t, f64::INFINITY);
    let y1 = e.sel(is_inf, inf, y);
    let is_zero = e.cmpc(CmpOp::Eq, x, 0.0);
    let inner = e.selc(is_zero, t, f64::NEG_INFINITY, f64::NAN);
    let pos = e.cmpc(CmpOp::Gt, x, 0.0);
    e.sel(pos, y1, inner)
}

fn log_f64(e: &mut Em<'_>, x: V) -> V {
    let (m, kf) = log_reduce(e, x);
    let f = e.addc(m, -1.0);
    let y = log_core(e, f, kf, &LG, LN2_HI, LN2_LO);
    log_specials(e, x, y)
}

fn log_f32(e: &mut Em<'_>, x: V) -> V {
    let (m, kf) = log_reduce(e, x);
    let f = e.addc(m, -1.0);
    let y = log_core(e, f, kf, &LGF, 6.931_381_225_6e-1, 9.058_000_614_5e-6);
    log_specials(e, x, y)
}

/// fdlibm's `log(1 + f) + k·ln 2` for `1 + f` in `[√½, √2)`.
fn log_core(e: &mut Em<'_>, f: V, kf: V, lg: &[f64], ln2_hi: f64, ln2_lo: f64) -> V {
    let den = e.addc(f, 2.0);
    let s = e.div(f, den);
    let z = e.mul(s, s);
    let w = e.mul(z, z);
    // R = z·(Lg1 + w·(Lg3 + ...)) + w·(Lg2 + w·(Lg4 + ...))
    let odd: Vec<f64> = lg.iter().step_by(2).copied().collect();
    let even: Vec<f64> = lg.iter().skip(1).step_by(2).copied().collect();
    let po = e.horner(w, &odd);
    let t2 = e.mul(z, po);
    let pe = e.horner(w, &even);
    let t1 = e.mul(w, pe);
    let r = e.add(t2, t1);
    let hf = e.mulc(f, 0.5);
    let hfsq = e.mul(hf, f);
    let hr = e.add(hfsq, r);
    let shr = e.mul(s, hr);
    let klo = e.mulc(kf, ln2_lo);
    let a = e.add(shr, klo);
    let b = e.sub(hfsq, a);
    let c = e.sub(b, f);
    let khi = e.mulc(kf, ln2_hi);
    e.sub(khi, c)
}

/// `log x` as a double-double `(hi, lo)` accurate to about 2^-64 relative, for positive finite
/// `x` (`f64`). The special values are applied to `hi` (`lo` is then meaningless).
fn log_dd(e: &mut Em<'_>, x: V) -> (V, V) {
    let (m, kf) = log_reduce(e, x);
    let f = e.addc(m, -1.0);
    // den = m + 1 exactly as den_h + den_l.
    let den = e.addc(m, 1.0);
    let den_h = e.trunc_bits(den, 25);
    let dh1 = e.addc(den_h, -1.0);
    let den_l = e.sub(m, dh1);
    let one = e.f(DType::F64, 1.0);
    let v = e.div(one, den);
    let s = e.mul(f, v);
    // s = s_h + s_l, s_h with 16 significant bits.
    let s_h = e.trunc_bits(s, 15);
    let p1 = e.mul(s_h, den_h);
    let q1 = e.sub(f, p1);
    let p2 = e.mul(s_h, den_l);
    let q2 = e.sub(q1, p2);
    let s_l = e.mul(v, q2);
    // log m = 2s + (2/3)s³ + s⁵·T2(s²); 2·s_h + 0.625·s_h³ are exact, and their sum is split
    // exactly; everything else is small enough for plain arithmetic.
    let sh2 = e.mul(s_h, s_h);
    let x3 = e.mul(sh2, s_h);
    let a = e.add(s_h, s_h);
    let b = e.mulc(x3, 0.625);
    let h = e.add(a, b);
    let ha = e.sub(h, a);
    let l0 = e.sub(b, ha);
    // tail = 2·s_l + s_h³/24 + (2/3)·(s³ - s_h³) + s⁵·T2(s²), with
    // s³ - s_h³ = s_l·(s² + s·s_h + s_h²).
    let w = e.mul(s, s);
    let t2 = e.horner(w, &LOG_T2);
    let w2 = e.mul(w, w);
    let s5 = e.mul(w2, s);
    let c5 = e.mul(s5, t2);
    let x24 = e.mulc(x3, 1.0 / 24.0);
    let ssh = e.mul(s, s_h);
    let q = e.add(w, ssh);
    let q = e.add(q, sh2);
    let sq = e.mul(s_l, q);
    let c3 = e.mulc(sq, 2.0 / 3.0);
    let sl2 = e.add(s_l, s_l);
    let u1 = e.add(sl2, x24);
    let u2 = e.add(c3, c5);
    let tail = e.add(u1, u2);
    let lm_l = e.add(l0, tail);
    // k·ln 2 + (h + lm_l)
    let k1 = e.mulc(kf, LN2_HI);
    let sh_ = e.add(k1, h);
    let d = e.sub(sh_, k1);
    let sl = e.sub(h, d);
    let k2 = e.mulc(kf, LN2_LO);
    let lo1 = e.add(lm_l, k2);
    let lo = e.add(sl, lo1);
    // Normalize, so that `lo` is below half an ulp of `hi`.
    let hi = e.add(sh_, lo);
    let dh = e.sub(hi, sh_);
    let lo = e.sub(lo, dh);
    let hi = log_specials(e, x, hi);
    (hi, lo)
}

// ---------------------------------------------------------------------------------------------
// sin and cos
// ---------------------------------------------------------------------------------------------

/// Picks `sin` or `cos` of `x` from the kernels' results `ks`, `kc` on the reduced argument and
/// the rounded quotient `sh` (`n + SHIFT`) and `fnf` (`n` as a float).
fn quadrant(e: &mut Em<'_>, sh: V, fnf: V, ks: V, kc: V, cos: bool) -> V {
    let t = ks.t;
    let it = int_of(t);
    let half = e.mulc(fnf, 0.5);
    let fl = e.floor(half);
    let odd = e.cmp(CmpOp::Ne, fl, half);
    let v = if cos {
        e.sel(odd, ks, kc)
    } else {
        e.sel(odd, kc, ks)
    };
    let mut nb = e.bitcast(it, sh);
    if cos {
        let one = e.i(it, 1);
        nb = e.add(nb, one);
    }
    let width = if it == DType::I32 { 32 } else { 64 };
    let c = e.i(it, width - 2);
    let top = e.shl(nb, c);
    let sign = e.i(
        it,
        if it == DType::I32 {
            i64::from(i32::MIN)
        } else {
            i64::MIN
        },
    );
    let sgn = e.and(top, sign);
    let vb = e.bitcast(it, v);
    let rb = e.xor(vb, sgn);
    e.bitcast(t, rb)
}

/// `x` where `|x| < 2^50`, NaN elsewhere: beyond, the reduction by π/2 means nothing.
fn trig_domain(e: &mut Em<'_>, x: V) -> V {
    let ax = e.abs(x);
    let ok = e.cmpc(CmpOp::Lt, ax, TRIG_LIMIT);
    let nan = e.f(x.t, f64::NAN);
    e.sel(ok, x, nan)
}

fn sin_cos_f64(e: &mut Em<'_>, x: V, cos: bool) -> V {
    let x = trig_domain(e, x);
    let lx = e.mulc(x, INV_PIO2);
    let sh = e.addc(lx, SHIFT64);
    let fnf = e.addc(sh, -SHIFT64);
    // fdlibm's __rem_pio2, medium case, with the second round always taken.
    let p1 = e.mulc(fnf, PIO2_1);
    let r0 = e.sub(x, p1);
    let w0 = e.mulc(fnf, PIO2_2);
    let r1 = e.sub(r0, w0);
    let d0 = e.sub(r0, r1);
    let d1 = e.sub(d0, w0);
    let w1a = e.mulc(fnf, PIO2_2T);
    let w1 = e.sub(w1a, d1);
    let y0 = e.sub(r1, w1);
    let d2 = e.sub(r1, y0);
    let y1 = e.sub(d2, w1);
    // __kernel_sin(y0, y1) and __kernel_cos(y0, y1).
    let z = e.mul(y0, y0);
    let w = e.mul(z, z);
    let rs_a = e.horner(z, &[S2, S3, S4]);
    let rs_b = e.horner(z, &[S5, S6]);
    let zw = e.mul(z, w);
    let rs = e.mad(rs_a, zw, rs_b);
    let v = e.mul(z, y0);
    let hy = e.mulc(y1, 0.5);
    let vr = e.mul(v, rs);
    let a = e.sub(hy, vr);
    let za = e.mul(z, a);
    let b = e.sub(za, y1);
    let vs1 = e.mulc(v, S1);
    let c = e.sub(b, vs1);
    let ks = e.sub(y0, c);
    let rc_a = e.horner(z, &[C1, C2, C3]);
    let rc_a = e.mul(z, rc_a);
    let rc_b = e.horner(z, &[C4, C5, C6]);
    let ww = e.mul(w, w);
    let rc = e.mad(rc_a, ww, rc_b);
    let hz = e.mulc(z, 0.5);
    let wc = e.csub(1.0, hz);
    let ow = e.csub(1.0, wc);
    let owh = e.sub(ow, hz);
    let zr = e.mul(z, rc);
    let xy = e.mul(y0, y1);
    let zrxy = e.sub(zr, xy);
    let corr = e.add(owh, zrxy);
    let kc = e.add(wc, corr);
    quadrant(e, sh, fnf, ks, kc, cos)
}

fn sin_cos_f32(e: &mut Em<'_>, x: V, cos: bool) -> V {
    let x = e.cast(DType::F64, x);
    let x = trig_domain(e, x);
    let lx = e.mulc(x, INV_PIO2);
    let sh = e.addc(lx, SHIFT64);
    let fnf = e.addc(sh, -SHIFT64);
    let p1 = e.mulc(fnf, PIO2_1);
    let r0 = e.sub(x, p1);
    let p2 = e.mulc(fnf, PIO2_1T);
    let r = e.sub(r0, p2);
    let z = e.mul(r, r);
    // __kernel_sindf's polynomial, as r·(1 + z·S(z)) (in f64, this is accurate enough for an
    // f32 result, and it keeps the sign of r = -0).
    let sp = e.horner(z, &SF);
    let zs = e.mul(z, sp);
    let zs1 = e.addc(zs, 1.0);
    let ks = e.mul(r, zs1);
    // __kernel_cosdf: ((1 + z·C0) + w·C1) + (w·z)·(C2 + z·C3)
    let c0 = e.mulc(z, CF[0]);
    let c0 = e.addc(c0, 1.0);
    let w = e.mul(z, z);
    let c1 = e.mulc(w, CF[1]);
    let c01 = e.add(c0, c1);
    let c23 = e.horner(z, &CF[2..]);
    let wz = e.mul(w, z);
    let kc = e.mad(c01, wz, c23);
    let y = quadrant(e, sh, fnf, ks, kc, cos);
    e.cast(DType::F32, y)
}

// ---------------------------------------------------------------------------------------------
// tanh
// ---------------------------------------------------------------------------------------------

fn tanh_f64(e: &mut Em<'_>, x: V) -> V {
    let t = DType::F64;
    let a = e.abs(x);
    let small = e.cmpc(CmpOp::Lt, a, 0.625);
    // Large: (E - 1)/(E + 1), E = e^(2a); tanh(20) rounds to 1.
    let ac = e.minc(a, 20.0);
    let a2 = e.add(ac, ac);
    let big_e = exp_f64(e, a2, None, false);
    let nb = e.addc(big_e, -1.0);
    let db = e.addc(big_e, 1.0);
    // Small: a + a·z·P(z)/Q(z).
    let z = e.mul(a, a);
    let p = e.horner(z, &TANH_P);
    let az = e.mul(a, z);
    let ns = e.mul(az, p);
    let ds = e.horner(z, &TANH_Q);
    let num = e.sel(small, ns, nb);
    let den = e.sel(small, ds, db);
    let zero = e.f(t, 0.0);
    let base = e.sel(small, a, zero);
    let q = e.div(num, den);
    let y = e.add(base, q);
    e.copysign_pos(y, x)
}

fn tanh_f32(e: &mut Em<'_>, x: V) -> V {
    let a = e.abs(x);
    let small = e.cmpc(CmpOp::Lt, a, 0.625);
    let ac = e.minc(a, 10.0);
    let a2 = e.add(ac, ac);
    let big_e = exp_f32(e, a2, false);
    let db = e.addc(big_e, 1.0);
    let two = e.f(DType::F32, 2.0);
    let q = e.div(two, db);
    let pb = e.csub(1.0, q);
    let z = e.mul(a, a);
    let p = e.horner(z, &TANHF_P);
    let az = e.mul(a, z);
    let ps = e.mad(a, az, p);
    let y = e.sel(small, ps, pb);
    e.copysign_pos(y, x)
}

// ---------------------------------------------------------------------------------------------
// erf
// ---------------------------------------------------------------------------------------------

fn erf_f64(e: &mut Em<'_>, x: V) -> V {
    let a = e.abs(x);
    let small = e.cmpc(CmpOp::Lt, a, 0.843_75);
    let z = e.mul(a, a);
    let z2 = e.mul(z, z);
    let p = e.horner2(z, z2, &ERF_P);
    let ps = e.mad(a, a, p);
    let c = e.minc(a, 6.0);
    let c2 = e.mul(c, c);
    let nc2 = e.neg(c2);
    let ex = exp_f64(e, nc2, None, false);
    let n = e.horner(c, &ERFC_N);
    let d = e.horner(c, &ERFC_D);
    let r = e.div(n, d);
    let er = e.mul(ex, r);
    let pb = e.csub(1.0, er);
    let y = e.sel(small, ps, pb);
    e.copysign_pos(y, x)
}

fn erf_f32(e: &mut Em<'_>, x: V) -> V {
    let a = e.abs(x);
    let small = e.cmpc(CmpOp::Lt, a, 0.843_75);
    let z = e.mul(a, a);
    let p = e.horner(z, &ERFF_P);
    let ps = e.mad(a, a, p);
    let c = e.minc(a, 4.0);
    let c2 = e.mul(c, c);
    let nc2 = e.neg(c2);
    let ex = exp_f32(e, nc2, false);
    let n = e.horner(c, &ERFCF_N);
    let d = e.horner(c, &ERFCF_D);
    let r = e.div(n, d);
    let er = e.mul(ex, r);
    let pb = e.csub(1.0, er);
    let y = e.sel(small, ps, pb);
    e.copysign_pos(y, x)
}

// ---------------------------------------------------------------------------------------------
// pow
// ---------------------------------------------------------------------------------------------

/// Veltkamp's split of `a` into two halves of 26 bits each (`a = hi + lo` exactly).
fn split(e: &mut Em<'_>, a: V) -> (V, V) {
    let c = e.mulc(a, 134_217_729.0);
    let d = e.sub(c, a);
    let hi = e.sub(c, d);
    let lo = e.sub(a, hi);
    (hi, lo)
}

/// The C99 special cases of `pow`, applied to `r = |a|^b` (computed as `e^(b·log|a|)`).
fn pow_specials(e: &mut Em<'_>, a: V, b: V, ax: V, r: V) -> V {
    let t = a.t;
    let it = int_of(t);
    // |a| == 1 gives 1 (then -1 for a = -1 and an odd b), even for b = ±inf.
    let ax1 = e.cmpc(CmpOp::Eq, ax, 1.0);
    let one = e.f(t, 1.0);
    let r = e.sel(ax1, one, r);
    // A negative base (or -0, -inf) with an odd integer exponent: negative result.
    let fb = e.floor(b);
    let is_int = e.cmp(CmpOp::Eq, fb, b);
    let hb = e.mulc(b, 0.5);
    let fhb = e.floor(hb);
    let half_frac = e.cmp(CmpOp::Ne, fhb, hb);
    let odd = e.and(is_int, half_frac);
    let sign = e.i(
        it,
        if it == DType::I32 {
            i64::from(i32::MIN)
        } else {
            i64::MIN
        },
    );
    let abits = e.bitcast(it, a);
    let asign = e.and(abits, sign);
    let zero = e.i(it, 0);
    let flip = e.sel(odd, asign, zero);
    let rb = e.bitcast(it, r);
    let rf = e.xor(rb, flip);
    let r = e.bitcast(t, rf);
    // A finite negative base with a non-integer exponent: NaN.
    let neg = e.cmpc(CmpOp::Lt, a, 0.0);
    let fin = e.cmpc(CmpOp::Gt, a, f64::NEG_INFINITY);
    let neg_fin = e.and(neg, fin);
    let nan = e.f(t, f64::NAN);
    let r_int = e.sel(is_int, r, nan);
    let r = e.sel(neg_fin, r_int, r);
    // pow(a, ±0) = 1 and pow(1, b) = 1, whatever the other operand.
    let b0 = e.cmpc(CmpOp::Eq, b, 0.0);
    let r = e.sel(b0, one, r);
    let a1 = e.cmpc(CmpOp::Eq, a, 1.0);
    e.sel(a1, one, r)
}

fn pow_f64(e: &mut Em<'_>, a: V, b: V) -> V {
    let ax = e.abs(a);
    let (lh, ll) = log_dd(e, ax);
    // y = b·(lh + ll) as yh + yl (Dekker's product).
    let yh = e.mul(b, lh);
    let (bh, bl) = split(e, b);
    let (lhh, lhl) = split(e, lh);
    let p1 = e.mul(bh, lhh);
    let e1 = e.sub(p1, yh);
    let p2 = e.mul(bh, lhl);
    let e2 = e.add(e1, p2);
    let p3 = e.mul(bl, lhh);
    let e3 = e.add(e2, p3);
    let p4 = e.mul(bl, lhl);
    let e4 = e.add(e3, p4);
    let bll = e.mul(b, ll);
    let yl = e.add(e4, bll);
    // Where e^y is 0, +inf or NaN anyway, the low part may be NaN: drop it.
    let ayh = e.abs(yh);
    let ok = e.cmpc(CmpOp::Lt, ayh, 1000.0);
    let zero = e.f(DType::F64, 0.0);
    let yl = e.sel(ok, yl, zero);
    let r = exp_f64(e, yh, Some(yl), true);
    pow_specials(e, a, b, ax, r)
}

fn pow_f32(e: &mut Em<'_>, a: V, b: V) -> V {
    let a = e.cast(DType::F64, a);
    let b = e.cast(DType::F64, b);
    let ax = e.abs(a);
    let l = log_f64(e, ax);
    let y = e.mul(b, l);
    let r = exp_f64(e, y, None, true);
    let r = pow_specials(e, a, b, ax, r);
    e.cast(DType::F32, r)
}
