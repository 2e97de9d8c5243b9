//! Float remainder lowering: replaces every `rem` on `f64` or `f32` by integer arithmetic and
//! one `for` loop, for back ends with no `fmod` of their own (PTX has none).
//!
//! The float remainder is C's `fmod`: exact, with the sign of the dividend. The expansion is
//! the classic long division on the significands (as musl's `fmod` does it):
//! - `x` and `y` as bits: `|x|`, `|y|`, the sign of `x`; exponents `ex`, `ey` and significands
//!   normalized to a leading bit at 52 (a subnormal's exponent goes below 1; its top bit comes
//!   from its exact conversion to a float, as the IR has no count of leading zeros);
//! - `max(ex - ey, 0)` steps of `m = (m >= my ? m - my : m) << 1` carried by a `for` loop, then
//!   one last subtraction: `m < my`, and the remainder is `m · 2^(ey - 1075)`, exact (it is a
//!   multiple of the smallest subnormal below `|y|`, so for `ey < 1` the low `1 - ey` bits of
//!   `m` are zero and are shifted out first), built as an integer-to-float cast (exact,
//!   `m < 2^53`) times a power of two;
//! - selects for the rest: NaN where `y` is zero or NaN or `x` is infinite or NaN, `x` itself
//!   where `|x| < |y|`, a zero with the sign of `x` where `|x| == |y|`.
//!
//! `f32` operands are widened to `f64` and the result narrowed: both casts are exact, since the
//! remainder of two `f32`s is an `f32`. The loop runs at most 2046 times per remainder (for
//! `fmod(1e308, 1e-308)`). The expansion of an instruction goes where it was and ends with the
//! definition of its result value. A kernel that does not validate, or holds no float `rem`,
//! is returned unchanged.

use crate::validate::{MAX_VALUE_ID, Types};
use crate::{BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, Scalar, ValueId, validate};

/// Whether `kernel` (valid) holds a `rem` of floats.
pub fn has_float_rem(kernel: &Kernel) -> bool {
    let Ok(types) = validate(kernel) else {
        return false;
    };
    fn any(body: &[Inst], types: &Types) -> bool {
        body.iter().any(|inst| match &inst.op {
            Op::Parallel(p) => any(&p.body, types),
            Op::For(l) => any(&l.body, types),
            Op::Binary(BinaryOp::Rem, a, _) => types.get(*a).is_some_and(DType::is_float),
            _ => false,
        })
    }
    any(&kernel.body, &types)
}

/// `kernel` with every float `rem` expanded (see the module documentation).
pub fn lower_float_rem(kernel: &Kernel) -> Kernel {
    if !has_float_rem(kernel) {
        return kernel.clone();
    }
    let Ok(types) = validate(kernel) else {
        return kernel.clone();
    };
    let mut e = Expander {
        types,
        next: kernel.value_bound(),
        out: Vec::new(),
    };
    let body = e.block(&kernel.body);
    if e.next >= MAX_VALUE_ID {
        return kernel.clone();
    }
    Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    }
}

struct Expander {
    types: Types,
    next: u32,
    /// The instructions of the expansion being built.
    out: Vec<Inst>,
}

impl Expander {
    fn block(&mut self, body: &[Inst]) -> Vec<Inst> {
        super::util::expand_body(body, &mut |inst| {
            let Op::Binary(BinaryOp::Rem, a, b) = inst.op else {
                return None;
            };
            let t = self.types.get(a).filter(|t| t.is_float())?;
            let result = *inst.results.first()?;
            self.out.clear();
            self.fmod(a, b, t, result);
            Some(std::mem::take(&mut self.out))
        })
    }

    fn fresh(&mut self) -> ValueId {
        let v = ValueId(self.next);
        self.next = self.next.saturating_add(1);
        v
    }

    fn push(&mut self, op: Op) -> ValueId {
        let v = self.fresh();
        self.out.push(Inst {
            results: vec![v],
            op,
        });
        v
    }

    fn int(&mut self, x: i64) -> ValueId {
        self.push(Op::Const(Scalar::I64(x)))
    }

    fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.push(Op::Binary(op, a, b))
    }

    fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> ValueId {
        self.push(Op::Cmp(op, a, b))
    }

    fn sel(&mut self, c: ValueId, a: ValueId, b: ValueId) -> ValueId {
        self.push(Op::Select(c, a, b))
    }

    /// The exponent and the normalized significand (its leading bit at 52) of the absolute
    /// bits `abs` of a finite nonzero float: a subnormal's significand is shifted up by what
    /// its own conversion to a float says its top bit is, and its exponent goes below 1.
    fn split(&mut self, abs: ValueId) -> (ValueId, ValueId) {
        let (c0, c1, c52) = (self.int(0), self.int(1), self.int(52));
        let mant = self.int((1 << 52) - 1);
        let implicit = self.int(1 << 52);
        let bias = self.int(1023);
        let field = self.bin(BinaryOp::Shr, abs, c52);
        let subnormal = self.cmp(CmpOp::Eq, field, c0);
        let low = self.bin(BinaryOp::And, abs, mant);
        let normal_m = self.bin(BinaryOp::Or, low, implicit);
        // A subnormal: its significand as a float (exact) has the top bit's position.
        let as_float = self.push(Op::Cast(DType::F64, low));
        let float_bits = self.push(Op::Bitcast(DType::I64, as_float));
        let top_field = self.bin(BinaryOp::Shr, float_bits, c52);
        let top = self.bin(BinaryOp::Sub, top_field, bias);
        let shift = self.bin(BinaryOp::Sub, c52, top);
        let sub_m = self.bin(BinaryOp::Shl, low, shift);
        let sub_e = self.bin(BinaryOp::Sub, c1, shift);
        let m = self.sel(subnormal, sub_m, normal_m);
        let e = self.sel(subnormal, sub_e, field);
        (e, m)
    }

    /// Defines `result` as `a rem b` of type `t` (`f64` or `f32`).
    fn fmod(&mut self, a: ValueId, b: ValueId, t: DType, result: ValueId) {
        let (x, y) = if t == DType::F32 {
            (
                self.push(Op::Cast(DType::F64, a)),
                self.push(Op::Cast(DType::F64, b)),
            )
        } else {
            (a, b)
        };
        let ux = self.push(Op::Bitcast(DType::I64, x));
        let uy = self.push(Op::Bitcast(DType::I64, y));
        let sign = self.int(i64::MIN);
        let abs_mask = self.int(i64::MAX);
        let inf = self.int(0x7ff0_0000_0000_0000);
        let c0 = self.int(0);
        let c1 = self.int(1);
        let c52 = self.int(52);
        let sx = self.bin(BinaryOp::And, ux, sign);
        let ax = self.bin(BinaryOp::And, ux, abs_mask);
        let ay = self.bin(BinaryOp::And, uy, abs_mask);
        // NaN: y zero or NaN, x infinite or NaN.
        let y_zero = self.cmp(CmpOp::Eq, ay, c0);
        let y_nan = self.cmp(CmpOp::Gt, ay, inf);
        let x_big = self.cmp(CmpOp::Ge, ax, inf);
        let bad_y = self.bin(BinaryOp::Or, y_zero, y_nan);
        let special = self.bin(BinaryOp::Or, bad_y, x_big);
        let small = self.cmp(CmpOp::Lt, ax, ay);
        let equal = self.cmp(CmpOp::Eq, ax, ay);
        let (ex, mx) = self.split(ax);
        let (ey, my) = self.split(ay);
        let diff = self.bin(BinaryOp::Sub, ex, ey);
        let steps = self.bin(BinaryOp::Max, diff, c0);
        // The long division: `steps` times, subtract where it fits, then shift.
        let (k, m) = (self.fresh(), self.fresh());
        let saved = std::mem::take(&mut self.out);
        let r = self.bin(BinaryOp::Sub, m, my);
        let fits = self.cmp(CmpOp::Ge, r, c0);
        let kept = self.sel(fits, r, m);
        let next = self.bin(BinaryOp::Shl, kept, c1);
        let body = std::mem::replace(&mut self.out, saved);
        let m_end = self.fresh();
        self.out.push(Inst {
            results: vec![m_end],
            op: Op::For(ForLoop {
                lo: c0,
                hi: steps,
                induction: k,
                init: vec![mx],
                carried: vec![m],
                body,
                yields: vec![next],
            }),
        });
        let r = self.bin(BinaryOp::Sub, m_end, my);
        let fits = self.cmp(CmpOp::Ge, r, c0);
        let rem = self.sel(fits, r, m_end);
        // rem · 2^(ey - 1075), exact: where ey < 1 (a subnormal y), rem has 1 - ey trailing
        // zeros (the remainder is a multiple of the smallest subnormal), shifted out first.
        let up = self.bin(BinaryOp::Sub, c1, ey);
        let adjust = self.bin(BinaryOp::Max, up, c0);
        let rem = self.bin(BinaryOp::Shr, rem, adjust);
        let ey = self.bin(BinaryOp::Add, ey, adjust);
        // The power of two: normal where ey > 52, else subnormal.
        let remf = self.push(Op::Cast(DType::F64, rem));
        let normal = self.cmp(CmpOp::Gt, ey, c52);
        let shifted = self.bin(BinaryOp::Sub, ey, c52);
        let normal_bits = self.bin(BinaryOp::Shl, shifted, c52);
        let below = self.bin(BinaryOp::Sub, ey, c1);
        let sub_bits = self.bin(BinaryOp::Shl, c1, below);
        let scale_bits = self.sel(normal, normal_bits, sub_bits);
        let scale = self.push(Op::Bitcast(DType::F64, scale_bits));
        let magnitude = self.bin(BinaryOp::Mul, remf, scale);
        let mbits = self.push(Op::Bitcast(DType::I64, magnitude));
        let signed = self.bin(BinaryOp::Or, mbits, sx);
        let value = self.push(Op::Bitcast(DType::F64, signed));
        let zero = self.push(Op::Bitcast(DType::F64, sx));
        let value = self.sel(equal, zero, value);
        let value = self.sel(small, x, value);
        let nan = self.push(Op::Const(Scalar::F64(f64::NAN)));
        let value = self.sel(special, nan, value);
        let op = if t == DType::F32 {
            Op::Cast(DType::F32, value)
        } else {
            Op::Bitcast(DType::F64, value)
        };
        self.out.push(Inst {
            results: vec![result],
            op,
        });
    }
}
