//! Helpers shared by the CPU back-end tests: a small kernel builder and runners.

#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use weft_cpu::{CompiledKernel, CpuBackend, StoreView};
use weft_ir::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, Privilege,
    ReduceOp, Scalar, UnaryOp, ValueId,
};

/// Builds kernels instruction by instruction.
pub struct Kb {
    next: u32,
    params: Vec<Param>,
    bodies: Vec<Vec<Inst>>,
}

impl Default for Kb {
    fn default() -> Self {
        Self::new()
    }
}

impl Kb {
    pub fn new() -> Kb {
        Kb {
            next: 0,
            params: vec![],
            bodies: vec![vec![]],
        }
    }

    pub fn store(&mut self, dtype: DType, rank: u32, privilege: Privilege) -> u32 {
        self.params.push(Param::Store {
            dtype,
            rank,
            privilege,
        });
        self.params.len() as u32 - 1
    }

    pub fn scalar(&mut self, dtype: DType) -> u32 {
        self.params.push(Param::Scalar { dtype });
        self.params.len() as u32 - 1
    }

    pub fn fresh(&mut self) -> ValueId {
        self.next += 1;
        ValueId(self.next - 1)
    }

    fn emit(&mut self, results: Vec<ValueId>, op: Op) {
        self.bodies
            .last_mut()
            .expect("a body")
            .push(Inst { results, op });
    }

    pub fn op(&mut self, op: Op) -> ValueId {
        let v = self.fresh();
        self.emit(vec![v], op);
        v
    }

    pub fn effect(&mut self, op: Op) {
        self.emit(vec![], op);
    }

    pub fn c(&mut self, s: Scalar) -> ValueId {
        self.op(Op::Const(s))
    }
    pub fn f64(&mut self, x: f64) -> ValueId {
        self.c(Scalar::F64(x))
    }
    pub fn i64(&mut self, x: i64) -> ValueId {
        self.c(Scalar::I64(x))
    }
    pub fn param(&mut self, p: u32) -> ValueId {
        self.op(Op::Param(p))
    }
    pub fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Binary(op, a, b))
    }
    pub fn add(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.bin(BinaryOp::Add, a, b)
    }
    pub fn mul(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.bin(BinaryOp::Mul, a, b)
    }
    pub fn un(&mut self, op: UnaryOp, a: ValueId) -> ValueId {
        self.op(Op::Unary(op, a))
    }
    pub fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Cmp(op, a, b))
    }
    pub fn select(&mut self, c: ValueId, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Select(c, a, b))
    }
    pub fn fma(&mut self, a: ValueId, b: ValueId, c: ValueId) -> ValueId {
        self.op(Op::Fma(a, b, c))
    }
    pub fn cast(&mut self, to: DType, a: ValueId) -> ValueId {
        self.op(Op::Cast(to, a))
    }
    pub fn extent(&mut self, param: u32, dim: u32) -> ValueId {
        self.op(Op::Extent { param, dim })
    }
    pub fn origin(&mut self, param: u32, dim: u32) -> ValueId {
        self.op(Op::Origin { param, dim })
    }
    pub fn load(&mut self, param: u32, indices: &[ValueId]) -> ValueId {
        self.op(Op::Load(Access {
            param,
            indices: indices.to_vec(),
        }))
    }
    pub fn store_to(&mut self, param: u32, indices: &[ValueId], v: ValueId) {
        self.effect(Op::Store(
            Access {
                param,
                indices: indices.to_vec(),
            },
            v,
        ))
    }
    pub fn reduce(&mut self, param: u32, indices: &[ValueId], op: ReduceOp, v: ValueId) {
        self.effect(Op::Reduce(
            Access {
                param,
                indices: indices.to_vec(),
            },
            op,
            v,
        ))
    }

    /// A parallel loop over `over` (of rank `rank`); `f` builds the body from the indices.
    pub fn parallel(&mut self, over: u32, rank: usize, f: impl FnOnce(&mut Kb, &[ValueId])) {
        let indices: Vec<ValueId> = (0..rank).map(|_| self.fresh()).collect();
        self.bodies.push(vec![]);
        f(self, &indices);
        let body = self.bodies.pop().expect("a body");
        self.effect(Op::Parallel(ParallelLoop {
            over,
            indices,
            body,
        }));
    }

    /// `for i in lo..hi` carrying `init`; `f` gets (i, carried) and returns the yields.
    pub fn for_loop(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        init: &[ValueId],
        f: impl FnOnce(&mut Kb, ValueId, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let induction = self.fresh();
        let carried: Vec<ValueId> = init.iter().map(|_| self.fresh()).collect();
        self.bodies.push(vec![]);
        let yields = f(self, induction, &carried);
        let body = self.bodies.pop().expect("a body");
        let results: Vec<ValueId> = init.iter().map(|_| self.fresh()).collect();
        self.emit(
            results.clone(),
            Op::For(ForLoop {
                lo,
                hi,
                induction,
                init: init.to_vec(),
                carried,
                body,
                yields,
            }),
        );
        results
    }

    pub fn finish(self, name: &str) -> Kernel {
        let mut bodies = self.bodies;
        Kernel {
            name: name.into(),
            params: self.params,
            body: bodies.pop().expect("a body"),
        }
    }
}

pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a pool")
}

pub fn compile(k: &Kernel) -> CompiledKernel {
    let mut be = CpuBackend::new().expect("backend");
    be.compile(k).expect("compiles")
}

/// A dense view of a whole slice.
pub fn dense<T>(v: &mut [T], extents: &[i64]) -> StoreView {
    let n: i64 = extents.iter().product();
    assert_eq!(n as usize, v.len(), "extents match the buffer");
    StoreView::dense(v.as_mut_ptr().cast(), extents)
}

/// A rank-0 view of one element.
pub fn scalar_view<T>(x: &mut T) -> StoreView {
    StoreView::dense((x as *mut T).cast(), &[])
}

/// Runs `k` on `stores` with one thread.
pub fn run(k: &CompiledKernel, stores: &[StoreView], scalars: &[Scalar]) -> weft_cpu::Result<()> {
    run_on(k, stores, scalars, 1)
}

pub fn run_on(
    k: &CompiledKernel,
    stores: &[StoreView],
    scalars: &[Scalar],
    threads: usize,
) -> weft_cpu::Result<()> {
    // SAFETY: the tests build every view from a live buffer that covers it.
    unsafe { k.run(stores, scalars, &pool(threads)) }
}

/// Float equality that treats all NaNs as equal and tells -0.0 from 0.0.
pub fn same_f64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

pub fn same_f32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// A Black-Scholes kernel `@bs` in the text form: `s`, `k`, `t` (read), then the rate and the
/// volatility (0-d stores `%r0`, `%v0` when `zero_d`, else scalars `%r`, `%v` after the
/// outputs), then `call` (write) and, when `put`, `put` (write). Call price
/// `S·N(d1) - K·e^(-rT)·N(d2)`, `N(x) = (1 + erf(x/√2))/2`; put by parity.
pub fn black_scholes_ir(zero_d: bool, put: bool) -> String {
    let rates = if zero_d {
        "%r0: store<f64, 0, read>, %v0: store<f64, 0, read>, "
    } else {
        ""
    };
    let outs = if put {
        "%call: store<f64, 1, write>, %put: store<f64, 1, write>"
    } else {
        "%call: store<f64, 1, write>"
    };
    let scalars = if zero_d { "" } else { ", %r: f64, %v: f64" };
    let (top, inner) = if zero_d {
        (
            "",
            "        %rate = load %r0[]\n        %vol = load %v0[]\n",
        )
    } else {
        ("      %rate = param %r\n      %vol = param %v\n", "")
    };
    let put_body = if put {
        "        %m2 = sub %one, %n2
        %m1 = sub %one, %n1
        %q1 = mul %kd, %m2
        %q2 = mul %sv, %m1
        %pp = sub %q1, %q2
        store %put[%i], %pp
"
    } else {
        ""
    };
    format!(
        "kernel @bs(%s: store<f64, 1, read>, %k: store<f64, 1, read>, %t: store<f64, 1, read>,
            {rates}{outs}{scalars}) {{
{top}      %half = const f64 0.5
      %one = const f64 1.0
      %rsqrt2 = const f64 0.7071067811865476
      parallel %call (%i) {{
{inner}        %sv = load %s[%i]
        %kv = load %k[%i]
        %tv = load %t[%i]
        %ratio = div %sv, %kv
        %lr = log %ratio
        %v2 = mul %vol, %vol
        %hv2 = mul %half, %v2
        %drift = add %rate, %hv2
        %dt = mul %drift, %tv
        %num = add %lr, %dt
        %st = sqrt %tv
        %den = mul %vol, %st
        %d1 = div %num, %den
        %d2 = sub %d1, %den
        %x1 = mul %d1, %rsqrt2
        %x2 = mul %d2, %rsqrt2
        %e1 = erf %x1
        %e2 = erf %x2
        %n1a = add %one, %e1
        %n1 = mul %half, %n1a
        %n2a = add %one, %e2
        %n2 = mul %half, %n2a
        %mrt = neg %rate
        %a = mul %mrt, %tv
        %disc = exp %a
        %kd = mul %kv, %disc
        %p1 = mul %sv, %n1
        %p2 = mul %kd, %n2
        %price = sub %p1, %p2
        store %call[%i], %price
{put_body}      }}
    }}"
    )
}

/// A xorshift generator for test inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Special and ordinary values of `dt`, as bits.
pub fn specials(dt: DType) -> Vec<u64> {
    match dt {
        DType::F64 => [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.5,
            -3.75,
            0.5,
            1e-310,
            -1e-310,
            f64::MIN_POSITIVE,
            f64::MAX,
            -f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            1e300,
            7.0,
            -7.25,
            1.5,
            // Around the ends of `i64`: 2^63, -2^63, and the floats next to them inside.
            9_223_372_036_854_775_808.0,
            -9_223_372_036_854_775_808.0,
            9_223_372_036_854_774_784.0,
            -9_223_372_036_854_777_856.0,
        ]
        .iter()
        .map(|x| x.to_bits())
        .chain([
            0x7ff8_0000_0000_0123,
            0x7ff0_0000_0000_0001,
            0xfff0_0000_dead_0001,
        ])
        .collect(),
        DType::F32 => [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            2.5,
            -3.75,
            0.5,
            1e-40,
            -1e-40,
            f32::MIN_POSITIVE,
            f32::MAX,
            -f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            1e30,
            7.0,
            -7.25,
            3e9,
        ]
        .iter()
        .map(|x| u64::from(x.to_bits()))
        .chain([0x7fc0_0123, 0x7f80_0001, 0xff80_0f01])
        .collect(),
        DType::I64 => [
            0i64,
            1,
            -1,
            2,
            -2,
            63,
            64,
            65,
            i64::MIN,
            i64::MAX,
            12345,
            -98765,
            1 << 40,
            -(1 << 33),
            0x0123_4567_89ab_cdef,
        ]
        .iter()
        .map(|&x| x as u64)
        .collect(),
        DType::I32 => [
            0i32,
            1,
            -1,
            2,
            -2,
            31,
            32,
            33,
            i32::MIN,
            i32::MAX,
            12345,
            -98765,
            1 << 20,
            -(1 << 17),
            0x0123_4567,
        ]
        .iter()
        .map(|&x| u64::from(x as u32))
        .collect(),
        DType::Bool => vec![0, 1],
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unreachable!("storage types hold no values")
        }
    }
}

/// The float binary operators that have vector forms.
pub const FLOAT_BINARY: [BinaryOp; 6] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Min,
    BinaryOp::Max,
];

/// The integer binary operators that have vector forms (shifts aside).
pub const INT_VECTOR_BINARY: [BinaryOp; 8] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::And,
    BinaryOp::Or,
    BinaryOp::Xor,
    BinaryOp::Min,
    BinaryOp::Max,
];

/// The lane order of `fold_lanes` for sums, written directly.
pub fn lane_sum(terms: &[f64]) -> f64 {
    let blocks = terms.len() / weft_ir::builder::FOLD_LANES;
    let mut s = [0.0f64; weft_ir::builder::FOLD_LANES];
    for q in 0..blocks {
        for (k, acc) in s.iter_mut().enumerate() {
            *acc += terms[q * weft_ir::builder::FOLD_LANES + k];
        }
    }
    let tail = terms[blocks * weft_ir::builder::FOLD_LANES..]
        .iter()
        .fold(0.0f64, |acc, t| acc + t);
    (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail
}

/// `m = mask[i]; out[i] = m ? x[i] : -x[i]; flags[i] = m & (x[i] > 0)` over stores `mask`
/// (bool), `x` (`t`), `out` (`t`) and `flags` (bool): a mask loaded and one stored.
pub fn mask_kernel(name: &str, t: DType) -> Kernel {
    let mut kb = Kb::new();
    let m = kb.store(DType::Bool, 1, Privilege::Read);
    let x = kb.store(t, 1, Privilege::Read);
    let out = kb.store(t, 1, Privilege::Write);
    let flags = kb.store(DType::Bool, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let mv = kb.load(m, &[i[0]]);
        let xv = kb.load(x, &[i[0]]);
        let neg = kb.un(UnaryOp::Neg, xv);
        let picked = kb.select(mv, xv, neg);
        kb.store_to(out, &[i[0]], picked);
        let zero = kb.c(Scalar::from_bits(t, 0));
        let positive = kb.cmp(CmpOp::Gt, xv, zero);
        let and = kb.bin(BinaryOp::And, mv, positive);
        kb.store_to(flags, &[i[0]], and);
    });
    kb.finish(name)
}
