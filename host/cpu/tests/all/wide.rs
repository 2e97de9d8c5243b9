//! The wide loop bodies, AVX2 and AVX-512: every operation each takes, and random programs
//! (proptest) that keep more values alive than there are registers, give the bits of the
//! 128-bit vector code and of the scalar code, signed zeros included, on rows long and short
//! (not multiples of the step, and several of the launcher's chunks). A NaN equals any NaN:
//! the IR leaves the sign and payload of a NaN made by arithmetic unspecified (Cranelift's
//! optimizer, which compiles the scalar code, rewrites `(-x) * (-y)` as `x * y`, for one).
//! The per-operation tests of `simd` check NaN payloads too. A loop whose body an instruction
//! set does not take (AVX2 has no 64-bit `mul` nor `i64 -> f64` conversion) keeps its 128-bit
//! code, says why, and gives the same bits.
//!
//! On a CPU without an instruction set the same programs run on the widest path it has, each
//! test says so on standard error, and they check that the path is refused and that no body
//! of that instruction set was compiled.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use proptest::prelude::{
    Just, ProptestConfig, Strategy, any, prop, prop_assert, prop_oneof, proptest,
};
use weft_cpu::{CompiledKernel, CpuBackend, Memory, SimdPath, StoreView};
use weft_ir::{BinaryOp, CmpOp, DType, Kernel, Privilege, Scalar, UnaryOp, ValueId};

/// A uniform operand: the kernel's scalar parameter of the type, or a constant.
#[derive(Clone, Copy, Debug)]
enum Uni {
    Param,
    Const(u64),
}

/// One step of a test program. Indices pick a value of the type from the values computed so
/// far (modulo their number); every such value varies with the loop index.
#[derive(Clone, Debug)]
enum Step {
    /// `f64 op f64` (the second operand a value or a uniform).
    F(BinaryOp, usize, Result<usize, Uni>),
    /// `uniform op f64`: a uniform first operand.
    FRev(BinaryOp, Uni, usize),
    /// `fma(x, y, z)`, `x·y + z` rounded once: `x` a value, `y` and `z` values or uniforms.
    Fma(usize, Result<usize, Uni>, Result<usize, Uni>),
    /// `fma(u, y, z)`: a uniform first factor.
    FmaRev(Uni, usize, Result<usize, Uni>),
    FUn(UnaryOp, usize),
    I(BinaryOp, usize, Result<usize, Uni>),
    IShift(BinaryOp, usize, u8),
    IUn(UnaryOp, usize),
    FCmp(CmpOp, usize, Result<usize, Uni>),
    ICmp(CmpOp, usize, Result<usize, Uni>),
    B(BinaryOp, usize, usize),
    BNot(usize),
    FSel(usize, usize, Result<usize, Uni>),
    ISel(usize, usize, usize),
    BSel(usize, usize, usize),
    /// Casts: `i64 -> f64`, `bool -> f64`, `bool -> i64`, `f64 -> bool`, `i64 -> bool`, and the
    /// bitcasts `f64 <-> i64`.
    Cast(u8, usize),
}

const F_OPS: [BinaryOp; 6] = FLOAT_BINARY;
const F_UN: [UnaryOp; 5] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Sqrt,
    UnaryOp::Floor,
    UnaryOp::Ceil,
];
const I_OPS: [BinaryOp; 8] = INT_VECTOR_BINARY;
const I_UN: [UnaryOp; 3] = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Not];
const CMPS: [CmpOp; 6] = CmpOp::ALL;
const B_OPS: [BinaryOp; 5] = [
    BinaryOp::And,
    BinaryOp::Or,
    BinaryOp::Xor,
    BinaryOp::Min,
    BinaryOp::Max,
];
const CASTS: u8 = CAST_KINDS.len() as u8;

/// The values of each type that a program has made so far.
struct Pools {
    f: Vec<ValueId>,
    i: Vec<ValueId>,
    b: Vec<ValueId>,
}

impl Pools {
    fn of(&self, t: DType) -> &Vec<ValueId> {
        match t {
            DType::F64 => &self.f,
            DType::I64 => &self.i,
            _ => &self.b,
        }
    }

    /// Value `k` (modulo their number) of type `t`; `usize::MAX` picks the last one.
    fn pick(&self, t: DType, k: usize) -> ValueId {
        let v = self.of(t);
        if k == usize::MAX {
            v[v.len() - 1]
        } else {
            v[k % v.len()]
        }
    }

    fn push(&mut self, t: DType, r: ValueId) {
        match t {
            DType::F64 => self.f.push(r),
            DType::I64 => self.i.push(r),
            _ => self.b.push(r),
        }
    }
}

/// The casts of [`Step::Cast`]: from, to, and whether it is a bitcast.
const CAST_KINDS: [(DType, DType, bool); 7] = [
    (DType::I64, DType::F64, false),
    (DType::Bool, DType::F64, false),
    (DType::Bool, DType::I64, false),
    (DType::F64, DType::Bool, false),
    (DType::I64, DType::Bool, false),
    (DType::F64, DType::I64, true),
    (DType::I64, DType::F64, true),
];

/// The kernel of `steps`: loads `a`, `b` (f64) and `n` (i64), runs the steps, and stores the
/// last f64, the last i64 and the last bool (as 0 or 1) into three outputs. Parameters: `a`,
/// `b`, `n`, `out_f`, `out_i`, `out_b`, then the scalars `pf: f64`, `pi: i64`.
fn program(name: &str, steps: &[Step]) -> Kernel {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let b = kb.store(DType::F64, 1, Privilege::Read);
    let n = kb.store(DType::I64, 1, Privilege::Read);
    let out_f = kb.store(DType::F64, 1, Privilege::Write);
    let out_i = kb.store(DType::I64, 1, Privilege::Write);
    let out_b = kb.store(DType::F64, 1, Privilege::Write);
    let pf = kb.scalar(DType::F64);
    let pi = kb.scalar(DType::I64);
    let (pfv, piv) = (kb.param(pf), kb.param(pi));
    kb.parallel(out_f, 1, |kb, ix| {
        let i = ix[0];
        let zero = kb.f64(0.0);
        let (fa, fb, ni) = (kb.load(a, &[i]), kb.load(b, &[i]), kb.load(n, &[i]));
        let mask = kb.cmp(CmpOp::Lt, fa, zero);
        let mut p = Pools {
            f: vec![fa, fb],
            i: vec![ni],
            b: vec![mask],
        };
        let uni = |kb: &mut Kb, u: Uni, t: DType| match (u, t) {
            (Uni::Param, DType::F64) => pfv,
            (Uni::Param, _) => piv,
            (Uni::Const(bits), DType::F64) => kb.f64(f64::from_bits(bits)),
            (Uni::Const(bits), _) => kb.i64(bits as i64),
        };
        let (f, int, bool) = (DType::F64, DType::I64, DType::Bool);
        for s in steps {
            let operand = |kb: &mut Kb, p: &Pools, t: DType, y: Result<usize, Uni>| {
                y.map_or_else(|u| uni(kb, u, t), |y| p.pick(t, y))
            };
            let (t, r) = match *s {
                Step::F(op, x, y) => {
                    let y = operand(kb, &p, f, y);
                    (f, kb.bin(op, p.pick(f, x), y))
                }
                Step::FRev(op, u, y) => {
                    let x = uni(kb, u, f);
                    (f, kb.bin(op, x, p.pick(f, y)))
                }
                Step::Fma(x, y, z) => {
                    let (y, z) = (operand(kb, &p, f, y), operand(kb, &p, f, z));
                    (f, kb.op(weft_ir::Op::Fma(p.pick(f, x), y, z)))
                }
                Step::FmaRev(u, y, z) => {
                    let (x, z) = (uni(kb, u, f), operand(kb, &p, f, z));
                    (f, kb.op(weft_ir::Op::Fma(x, p.pick(f, y), z)))
                }
                Step::FUn(op, x) => (f, kb.un(op, p.pick(f, x))),
                Step::I(op, x, y) => {
                    let y = operand(kb, &p, int, y);
                    (int, kb.bin(op, p.pick(int, x), y))
                }
                Step::IShift(op, x, amount) => {
                    let c = kb.i64(i64::from(amount));
                    (int, kb.bin(op, p.pick(int, x), c))
                }
                Step::IUn(op, x) => (int, kb.un(op, p.pick(int, x))),
                Step::FCmp(op, x, y) => {
                    let y = operand(kb, &p, f, y);
                    (bool, kb.cmp(op, p.pick(f, x), y))
                }
                Step::ICmp(op, x, y) => {
                    let y = operand(kb, &p, int, y);
                    (bool, kb.cmp(op, p.pick(int, x), y))
                }
                Step::B(op, x, y) => (bool, kb.bin(op, p.pick(bool, x), p.pick(bool, y))),
                Step::BNot(x) => (bool, kb.un(UnaryOp::Not, p.pick(bool, x))),
                Step::FSel(c, x, y) => {
                    let y = operand(kb, &p, f, y);
                    (f, kb.select(p.pick(bool, c), p.pick(f, x), y))
                }
                Step::ISel(c, x, y) => (
                    int,
                    kb.select(p.pick(bool, c), p.pick(int, x), p.pick(int, y)),
                ),
                Step::BSel(c, x, y) => (
                    bool,
                    kb.select(p.pick(bool, c), p.pick(bool, x), p.pick(bool, y)),
                ),
                Step::Cast(kind, x) => {
                    let (from, to, bits) = CAST_KINDS[usize::from(kind % CASTS)];
                    // A bitcast reads only a loaded value: the sign and payload of a NaN that
                    // arithmetic makes are not specified (see the IR's semantics), and a
                    // bitcast would carry them into integers.
                    let v = if bits && from == f {
                        p.f[x % 2]
                    } else {
                        p.pick(from, x)
                    };
                    let r = if bits {
                        kb.op(weft_ir::Op::Bitcast(to, v))
                    } else {
                        kb.cast(to, v)
                    };
                    (to, r)
                }
            };
            p.push(t, r);
        }
        let (lf, li, lb) = (
            p.pick(f, usize::MAX),
            p.pick(int, usize::MAX),
            p.pick(bool, usize::MAX),
        );
        kb.store_to(out_f, &[i], lf);
        kb.store_to(out_i, &[i], li);
        let lb = kb.cast(DType::F64, lb);
        kb.store_to(out_b, &[i], lb);
    });
    kb.finish(name)
}

/// Inputs of length `len`: special values mixed with random ones, and a NaN with a payload.
fn inputs(len: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<i64>) {
    let (fsp, isp) = (specials(DType::F64), specials(DType::I64));
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let f = |rng: &mut Rng| {
        let r = rng.next();
        match r % 4 {
            0 => f64::from_bits(fsp[(r >> 8) as usize % fsp.len()]),
            1 => f64::from_bits(0x7ff8_0000_0000_0123 | (r >> 60)),
            _ => ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 200.0,
        }
    };
    let a = (0..len).map(|_| f(&mut rng)).collect();
    let b = (0..len).map(|_| f(&mut rng)).collect();
    let n = (0..len)
        .map(|_| {
            let r = rng.next();
            if r.is_multiple_of(3) {
                isp[(r >> 8) as usize % isp.len()] as i64
            } else {
                (r as i64) >> (r % 50)
            }
        })
        .collect();
    (a, b, n)
}

/// Whether `path`'s bodies take the operations of `steps` (AVX-512 takes them all; `fma`
/// needs the CPU's FMA instructions on both).
fn takes(path: SimdPath, steps: &[Step]) -> bool {
    let fma = |s: &Step| matches!(s, Step::Fma(..) | Step::FmaRev(..));
    if steps.iter().any(fma) && !std::arch::is_x86_feature_detected!("fma") {
        return false;
    }
    path != SimdPath::Avx2
        || !steps.iter().any(|s| match *s {
            Step::I(op, ..) => op == BinaryOp::Mul,
            Step::Cast(kind, _) => CAST_KINDS[usize::from(kind % CASTS)] == CAST_KINDS[0],
            _ => false,
        })
}

/// The loops of `k` that run bodies of `path`.
fn wide_loops(k: &CompiledKernel, path: SimdPath) -> usize {
    match path {
        SimdPath::Avx2 => k.avx2_loops(),
        SimdPath::Avx512 => k.avx512_loops(),
        _ => 0,
    }
}

/// `k` compiled three ways: on `path` (where the CPU has it; else on the widest path it has),
/// with 128-bit vectors only, and scalar. `takes`: whether `path`'s bodies take the loop.
fn three_ways(k: &Kernel, path: SimdPath, takes: bool) -> [CompiledKernel; 3] {
    let mut be = CpuBackend::new().unwrap();
    let available = be.compiler().set_path(path).is_ok();
    let wide = be.compile(k).unwrap();
    be.compiler().set_path(SimdPath::Sse).unwrap();
    let narrow = be.compile(k).unwrap();
    be.compiler().set_path(SimdPath::Scalar).unwrap();
    let scalar = be.compile(k).unwrap();
    if available {
        assert_eq!(
            wide_loops(&wide, path),
            usize::from(takes),
            "{}: the {path} body",
            k.name
        );
        if !takes {
            let why = wide.wide_refusals();
            assert!(
                why.len() == 1 && (why[0].contains("AVX2") || why[0].contains("FMA")),
                "{}: {why:?}",
                k.name
            );
        }
    } else {
        eprintln!(
            "{}: no {path} on this CPU: checked the 128-bit code only",
            k.name
        );
        assert!(!be.compiler().available_paths().contains(&path));
        assert_eq!(wide_loops(&wide, path), 0);
    }
    assert_eq!(wide_loops(&narrow, SimdPath::Avx2), 0);
    assert_eq!(wide_loops(&narrow, SimdPath::Avx512), 0);
    assert_eq!(narrow.vectorized_loops(), 1);
    assert_eq!(scalar.vectorized_loops(), 0);
    [wide, narrow, scalar]
}

/// Runs `k` on rows of length `len` three ways and returns the first difference from the
/// scalar code's bits.
fn first_difference(ks: &[CompiledKernel; 3], len: usize, seed: u64) -> Option<String> {
    let (mut a, mut b, mut n) = inputs(len, seed);
    let mut outs = vec![];
    for k in ks {
        let (mut of, mut oi, mut ob) = (vec![0.0f64; len], vec![0i64; len], vec![0.0f64; len]);
        let m = len as i64;
        let views: [StoreView; 6] = [
            dense(&mut a, &[m]),
            dense(&mut b, &[m]),
            dense(&mut n, &[m]),
            dense(&mut of, &[m]),
            dense(&mut oi, &[m]),
            dense(&mut ob, &[m]),
        ];
        run_on(k, &views, &[Scalar::F64(-1.5), Scalar::I64(-7)], 2).unwrap();
        outs.push((of, oi, ob));
    }
    // Bits, except that every NaN is one (its sign and payload are unspecified).
    let f = |x: f64| {
        if x.is_nan() {
            f64::NAN.to_bits()
        } else {
            x.to_bits()
        }
    };
    let bits = |o: &(Vec<f64>, Vec<i64>, Vec<f64>), i: usize| [f(o.0[i]), o.1[i] as u64, f(o.2[i])];
    for i in 0..len {
        let want = bits(&outs[2], i);
        for (w, name) in [(0, "wide"), (1, "128-bit")] {
            let got = bits(&outs[w], i);
            if got != want {
                return Some(format!(
                    "len {len}, element {i} (a {:#x}, b {:#x}, n {}): {name} {got:x?}, scalar \
                     {want:x?}",
                    a[i].to_bits(),
                    b[i].to_bits(),
                    n[i]
                ));
            }
        }
    }
    None
}

/// Row lengths: short ones (no step, one, one and a remainder, around a multiple of the step)
/// and one over several of the launcher's chunks: AVX2 steps are 16 iterations, AVX-512 steps
/// 32.
fn lengths(path: SimdPath) -> &'static [usize] {
    match path {
        SimdPath::Avx2 => &[0, 1, 15, 16, 17, 100, 1000, 40_003],
        _ => &[0, 7, 31, 32, 33, 64, 95, 130, 40_003],
    }
}

fn check(path: SimdPath, name: &str, steps: &[Step]) {
    let k = program(name, steps);
    let ks = three_ways(&k, path, takes(path, steps));
    for (s, &len) in lengths(path).iter().enumerate() {
        if let Some(d) = first_difference(&ks, len, s as u64 + 1) {
            panic!("{path} {name}: {d}");
        }
    }
}

/// Each operation, alone: those `path`'s bodies take give the scalar bits in them, the others
/// in the 128-bit code.
fn every_operation_gives_the_scalar_bits(path: SimdPath) {
    let check = |name: &str, steps: &[Step]| check(path, name, steps);
    let unis = [
        Uni::Param,
        Uni::Const(2.5f64.to_bits()),
        Uni::Const((-0.0f64).to_bits()),
    ];
    for op in F_OPS {
        check(&format!("f64.{}", op.name()), &[Step::F(op, 0, Ok(1))]);
        for u in unis {
            check(
                &format!("f64.{}.uniform", op.name()),
                &[Step::F(op, 0, Err(u))],
            );
            check(&format!("f64.{}.rev", op.name()), &[Step::FRev(op, u, 1)]);
        }
    }
    for op in F_UN {
        check(&format!("f64.{}", op.name()), &[Step::FUn(op, 0)]);
    }
    // `fma` with every operand a value, and each of the three (then two) uniform.
    check("f64.fma", &[Step::Fma(0, Ok(1), Ok(0))]);
    for u in unis {
        check("f64.fma.uniform_y", &[Step::Fma(0, Err(u), Ok(1))]);
        check("f64.fma.uniform_z", &[Step::Fma(0, Ok(1), Err(u))]);
        check("f64.fma.uniform_yz", &[Step::Fma(1, Err(u), Err(u))]);
        check("f64.fma.uniform_x", &[Step::FmaRev(u, 0, Ok(1))]);
        check("f64.fma.uniform_xz", &[Step::FmaRev(u, 1, Err(Uni::Param))]);
    }
    // The first factor lives on and the addend is uniform: the result takes the second
    // factor's register (`vfmadd213pd`), and the first is read again after.
    check(
        "f64.fma.second_factor_dies",
        &[
            Step::F(BinaryOp::Add, 0, Ok(1)),
            Step::Fma(0, Ok(2), Err(Uni::Param)),
            Step::F(BinaryOp::Sub, 0, Ok(3)),
        ],
    );
    // Both factors live on and the addend is uniform: the addend is copied into the result's
    // own register first (`vfmadd231pd`).
    for u in unis {
        check(
            "f64.fma.factors_live_on",
            &[
                Step::Fma(0, Ok(1), Err(u)),
                Step::F(BinaryOp::Sub, 0, Ok(1)),
                Step::F(BinaryOp::Add, 2, Ok(3)),
            ],
        );
    }
    // A Horner chain: each step's result the next step's factor, the addend a constant.
    let horner: Vec<Step> = (0..6)
        .map(|k| {
            Step::Fma(
                usize::MAX,
                Ok(0),
                Err(Uni::Const((0.5 + k as f64).to_bits())),
            )
        })
        .collect();
    check("f64.fma.horner", &horner);
    for op in I_OPS {
        check(&format!("i64.{}", op.name()), &[Step::I(op, 0, Ok(0))]);
        check(
            &format!("i64.{}.self", op.name()),
            &[Step::IUn(UnaryOp::Neg, 0), Step::I(op, 0, Ok(1))],
        );
        check(
            &format!("i64.{}.uniform", op.name()),
            &[Step::I(op, 0, Err(Uni::Param))],
        );
        check(
            &format!("i64.{}.const", op.name()),
            &[Step::I(op, 0, Err(Uni::Const(0x00ff_00ff_1234_5678)))],
        );
    }
    for op in [BinaryOp::Shl, BinaryOp::Shr] {
        for amount in [0, 1, 52, 63, 64, 70] {
            check(
                &format!("i64.{}.{amount}", op.name()),
                &[Step::IShift(op, 0, amount)],
            );
        }
    }
    for op in I_UN {
        check(&format!("i64.{}", op.name()), &[Step::IUn(op, 0)]);
    }
    for op in CMPS {
        check(&format!("f64.{}", op.name()), &[Step::FCmp(op, 0, Ok(1))]);
        check(
            &format!("f64.{}.uniform", op.name()),
            &[Step::FCmp(op, 0, Err(Uni::Param))],
        );
        check(
            &format!("i64.{}", op.name()),
            &[Step::IUn(UnaryOp::Not, 0), Step::ICmp(op, 0, Ok(1))],
        );
        check(
            &format!("i64.{}.const", op.name()),
            &[Step::ICmp(op, 0, Err(Uni::Const(12345)))],
        );
    }
    let two_masks = [Step::FCmp(CmpOp::Gt, 1, Err(Uni::Param))];
    for op in B_OPS {
        let mut steps = two_masks.to_vec();
        steps.push(Step::B(op, 0, 1));
        check(&format!("bool.{}", op.name()), &steps);
    }
    let mut steps = two_masks.to_vec();
    steps.extend([Step::BNot(1), Step::BSel(0, 1, 2)]);
    check("bool.not.select", &steps);
    check("f64.select", &[Step::FSel(0, 0, Ok(1))]);
    check("f64.select.uniform", &[Step::FSel(0, 1, Err(Uni::Param))]);
    check(
        "i64.select",
        &[Step::IUn(UnaryOp::Neg, 0), Step::ISel(0, 0, 1)],
    );
    for kind in 0..CASTS {
        check(
            &format!("cast.{kind}"),
            &[Step::Cast(kind, 1), Step::Cast(kind, 0)],
        );
    }
}

#[test]
fn avx2_every_operation_gives_the_scalar_bits() {
    every_operation_gives_the_scalar_bits(SimdPath::Avx2);
}

#[test]
fn avx512_every_operation_gives_the_scalar_bits() {
    every_operation_gives_the_scalar_bits(SimdPath::Avx512);
}

/// More values alive at once than registers: 48 vectors and 12 masks, all used at the end, so
/// the body stores values into stack slots, reads them back and reads them from the slots as
/// operands (of `fma` too).
fn values_beyond_the_registers_are_spilled_and_reloaded(path: SimdPath) {
    let mut steps = vec![];
    for k in 0..48 {
        steps.push(Step::F(
            BinaryOp::Mul,
            k % 2,
            Err(Uni::Const((1.0 + k as f64 / 8.0).to_bits())),
        ));
    }
    for k in 0..12 {
        steps.push(Step::FCmp(CmpOp::Lt, 2 + k, Ok(3 + 2 * k)));
    }
    // Fold every value made above: f64 values 2..50 and masks 1..13.
    for k in 0..48 {
        steps.push(Step::F(BinaryOp::Add, 50 + k, Ok(2 + k)));
    }
    for k in 0..12 {
        steps.push(Step::B(BinaryOp::Xor, 13 + k, 1 + k));
    }
    // And by `fma`, whose operands are read back from their slots or from memory: f64
    // values 2..98, the first factor the previous result.
    for k in 0..48 {
        steps.push(Step::Fma(98 + k, Ok(2 + k), Ok(50 + k)));
    }
    check(path, "spills", &steps);
}

#[test]
fn avx2_values_beyond_the_registers_are_spilled_and_reloaded() {
    values_beyond_the_registers_are_spilled_and_reloaded(SimdPath::Avx2);
}

#[test]
fn avx512_values_beyond_the_registers_are_spilled_and_reloaded() {
    values_beyond_the_registers_are_spilled_and_reloaded(SimdPath::Avx512);
}

fn arb_uni() -> impl Strategy<Value = Uni> {
    prop_oneof![
        Just(Uni::Param),
        prop::sample::select(specials(DType::F64)).prop_map(Uni::Const),
        prop::sample::select(specials(DType::I64)).prop_map(Uni::Const),
    ]
}

fn arb_operand() -> impl Strategy<Value = Result<usize, Uni>> {
    prop_oneof![3 => any::<usize>().prop_map(Ok), 1 => arb_uni().prop_map(Err)]
}

fn arb_step() -> impl Strategy<Value = Step> {
    let i = any::<usize>;
    prop_oneof![
        (prop::sample::select(F_OPS.to_vec()), i(), arb_operand())
            .prop_map(|(o, x, y)| Step::F(o, x, y)),
        (prop::sample::select(F_OPS.to_vec()), arb_uni(), i())
            .prop_map(|(o, u, y)| Step::FRev(o, u, y)),
        (prop::sample::select(F_UN.to_vec()), i()).prop_map(|(o, x)| Step::FUn(o, x)),
        (i(), arb_operand(), arb_operand()).prop_map(|(x, y, z)| Step::Fma(x, y, z)),
        (arb_uni(), i(), arb_operand()).prop_map(|(u, y, z)| Step::FmaRev(u, y, z)),
        (prop::sample::select(I_OPS.to_vec()), i(), arb_operand())
            .prop_map(|(o, x, y)| Step::I(o, x, y)),
        (
            prop::sample::select(vec![BinaryOp::Shl, BinaryOp::Shr]),
            i(),
            0u8..130
        )
            .prop_map(|(o, x, a)| Step::IShift(o, x, a)),
        (prop::sample::select(I_UN.to_vec()), i()).prop_map(|(o, x)| Step::IUn(o, x)),
        (prop::sample::select(CMPS.to_vec()), i(), arb_operand())
            .prop_map(|(o, x, y)| Step::FCmp(o, x, y)),
        (prop::sample::select(CMPS.to_vec()), i(), arb_operand())
            .prop_map(|(o, x, y)| Step::ICmp(o, x, y)),
        (prop::sample::select(B_OPS.to_vec()), i(), i()).prop_map(|(o, x, y)| Step::B(o, x, y)),
        i().prop_map(Step::BNot),
        (i(), i(), arb_operand()).prop_map(|(c, x, y)| Step::FSel(c, x, y)),
        (i(), i(), i()).prop_map(|(c, x, y)| Step::ISel(c, x, y)),
        (i(), i(), i()).prop_map(|(c, x, y)| Step::BSel(c, x, y)),
        (0..CASTS, i()).prop_map(|(k, x)| Step::Cast(k, x)),
    ]
}

/// Random programs of up to 120 steps: the body of `path`, the 128-bit code and the scalar
/// code agree bit for bit.
fn random_program_gives_the_scalar_bits(
    path: SimdPath,
    steps: &[Step],
    seed: u64,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let k = program("random", steps);
    let ks = three_ways(&k, path, takes(path, steps));
    for len in [33usize, 200] {
        let d = first_difference(&ks, len, seed);
        prop_assert!(d.is_none(), "{path}: {}", d.unwrap_or_default());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn avx2_random_programs_give_the_scalar_bits(
        steps in prop::collection::vec(arb_step(), 1..120),
        seed in any::<u64>(),
    ) {
        random_program_gives_the_scalar_bits(SimdPath::Avx2, &steps, seed)?;
    }

    #[test]
    fn avx512_random_programs_give_the_scalar_bits(
        steps in prop::collection::vec(arb_step(), 1..120),
        seed in any::<u64>(),
    ) {
        random_program_gives_the_scalar_bits(SimdPath::Avx512, &steps, seed)?;
    }
}

/// An AVX2 or AVX-512 body runs whole rows, the last partial vector's loads and stores moving
/// only the row's own lanes: over an interior view (gaps between its rows) whose first element
/// starts the buffer and whose last ends it at a guard page, rows of 1 to 45 iterations (up to
/// one step and a partial vector on both paths) give the scalar code's bits, the gaps keep
/// what they held, and no access reaches a guard page (a whole vector loaded or stored past
/// the last row would stop the process).
#[test]
fn wide_a_rows_last_partial_step_moves_only_its_own_lanes() {
    for path in [SimdPath::Avx2, SimdPath::Avx512] {
        a_rows_last_partial_step_moves_only_its_own_lanes(path);
    }
}

fn a_rows_last_partial_step_moves_only_its_own_lanes(path: SimdPath) {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let b = kb.store(DType::F64, 2, Privilege::Read);
    let out = kb.store(DType::F64, 2, Privilege::ReadWrite);
    let s = kb.scalar(DType::F64);
    kb.parallel(out, 2, |kb, i| {
        let ix = [i[0], i[1]];
        let x = kb.load(a, &ix);
        let y = kb.load(b, &ix);
        let o = kb.load(out, &ix);
        let u = kb.param(s);
        let t = kb.mul(x, u);
        let d = kb.bin(BinaryOp::Sub, t, y);
        let r = kb.add(d, o);
        kb.store_to(out, &ix, r);
    });
    let k = kb.finish("wide.whole_rows");
    let mut be = CpuBackend::new().unwrap();
    if be.compiler().set_path(path).is_err() {
        eprintln!("wide.whole_rows: no {path} on this CPU: nothing to check");
        assert!(!be.compiler().available_paths().contains(&path));
        return;
    }
    let wide = be.compile(&k).unwrap();
    let loops = match path {
        SimdPath::Avx2 => wide.avx2_loops(),
        _ => wide.avx512_loops(),
    };
    assert_eq!((loops, wide.whole_row_loops()), (1, 1), "{path}");
    be.compiler().set_path(SimdPath::Scalar).unwrap();
    let scalar = be.compile(&k).unwrap();
    assert_eq!(scalar.whole_row_loops(), 0);
    let (rows, gap) = (3usize, 3usize);
    for len in 1..=45usize {
        let stride = len + gap;
        let words = (rows - 1) * stride + len;
        let in_row = |e: usize| e % stride < len;
        let mut outs = Vec::new();
        for kernel in [&wide, &scalar] {
            let mut mem = Memory::guarded();
            let mut buffer = |fill: &dyn Fn(usize) -> f64| {
                let id = mem.alloc((words * 8) as u64).unwrap();
                let bytes = mem.bytes_mut(id).unwrap();
                for (e, w) in bytes.chunks_exact_mut(8).enumerate() {
                    w.copy_from_slice(&fill(e).to_le_bytes());
                }
                id
            };
            let ids = [
                buffer(&|e| e as f64 * 0.75 - 3.0),
                buffer(&|e| 1.0 / (e as f64 + 0.5)),
                buffer(&|e| if in_row(e) { e as f64 } else { -42.5 }),
            ];
            let views: Vec<StoreView> = ids
                .iter()
                .map(|&id| {
                    let (ptr, got) = mem.base(id).unwrap();
                    assert_eq!(got, words * 8);
                    StoreView {
                        ptr,
                        extents: vec![rows as i64, len as i64],
                        strides: vec![stride as i64, 1],
                        origin: vec![0, 0],
                    }
                })
                .collect();
            run_on(kernel, &views, &[Scalar::F64(1.25)], 2).unwrap();
            let bytes = mem.bytes(ids[2]).unwrap();
            let got: Vec<u64> = bytes
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
                .collect();
            outs.push(got);
        }
        assert_eq!(outs[0].len(), words);
        for (e, (&w, &s)) in outs[0].iter().zip(&outs[1]).enumerate() {
            if !in_row(e) {
                assert_eq!(
                    f64::from_bits(w),
                    -42.5,
                    "{path}, len {len}: gap element {e}"
                );
            }
            assert_eq!(w, s, "{path}, len {len}: element {e}");
        }
    }
}

/// A body that runs whole rows walks the rows of the dimension around them in one call, each
/// pointer advancing by its access's stride along that dimension, unless the rows differ in
/// more than their addresses. Rank-3 loops, AVX2 and AVX-512 against the scalar code: rows
/// that read a value broadcast along them (`b[i, j]`), the row index as a value, and a
/// permuted access (`c[j, i, k]`), whose row stride is another dimension's.
#[test]
fn wide_rows_walked_in_one_call_give_the_scalar_bits() {
    for path in [SimdPath::Avx2, SimdPath::Avx512] {
        rows_walked_in_one_call_give_the_scalar_bits(path);
    }
}

fn rows_walked_in_one_call_give_the_scalar_bits(path: SimdPath) {
    // (name, uses b[i, j] at row level, uses j as a value)
    for (name, broadcast, index_value) in [
        ("wide.walk", false, false),
        ("wide.walk_broadcast", true, false),
        ("wide.walk_index", false, true),
    ] {
        let mut kb = Kb::new();
        let a = kb.store(DType::F64, 3, Privilege::Read);
        let b = kb.store(DType::F64, 2, Privilege::Read);
        let c = kb.store(DType::F64, 3, Privilege::Read);
        let out = kb.store(DType::F64, 3, Privilege::Write);
        kb.parallel(out, 3, |kb, i| {
            let x = kb.load(a, &[i[0], i[1], i[2]]);
            let y = kb.load(c, &[i[1], i[0], i[2]]);
            let mut r = kb.bin(BinaryOp::Sub, x, y);
            if broadcast {
                let u = kb.load(b, &[i[0], i[1]]);
                r = kb.add(r, u);
            }
            if index_value {
                let j = kb.cast(DType::F64, i[1]);
                r = kb.mul(r, j);
            }
            kb.store_to(out, &[i[0], i[1], i[2]], r);
        });
        let k = kb.finish(name);
        let mut be = CpuBackend::new().unwrap();
        if be.compiler().set_path(path).is_err() {
            eprintln!("{name}: no {path} on this CPU: nothing to check");
            assert!(!be.compiler().available_paths().contains(&path));
            return;
        }
        let wide = be.compile(&k).unwrap();
        assert_eq!(wide.whole_row_loops(), 1, "{name}, {path}");
        be.compiler().set_path(SimdPath::Scalar).unwrap();
        let scalar = be.compile(&k).unwrap();
        let (n0, n1) = (4i64, 5i64);
        for n2 in [1i64, 3, 16, 19, 37] {
            let len = (n0 * n1 * n2) as usize;
            let mut rng = Rng(n2 as u64 + 5);
            let mut av: Vec<f64> = (0..len).map(|_| rng.uniform(-4.0, 4.0)).collect();
            let mut bv: Vec<f64> = (0..n0 * n1).map(|_| rng.uniform(-4.0, 4.0)).collect();
            let mut cv: Vec<f64> = (0..len).map(|_| rng.uniform(-4.0, 4.0)).collect();
            let mut outs = Vec::new();
            for kernel in [&wide, &scalar] {
                let mut o = vec![0.0f64; len];
                let views = [
                    dense(&mut av, &[n0, n1, n2]),
                    dense(&mut bv, &[n0, n1]),
                    dense(&mut cv, &[n1, n0, n2]),
                    dense(&mut o, &[n0, n1, n2]),
                ];
                run_on(kernel, &views, &[], 2).unwrap();
                outs.push(o);
            }
            for (e, (w, s)) in outs[0].iter().zip(&outs[1]).enumerate() {
                assert_eq!(
                    w.to_bits(),
                    s.to_bits(),
                    "{name}, {path}, rows of {n2}: element {e}"
                );
            }
        }
    }
}

/// Bool masks loaded from bytes and stored as bytes in AVX-512 bodies: `m = mask[i] (any
/// nonzero byte true); out[i] = m ? x : -x; flags[i] = m & (x > 0)`, three ways (the
/// AVX-512 body, the 128-bit code, scalar code) with the same bytes and bits on every
/// length, mask bytes 0, 1, 2 and 255; the AVX2 bodies leave it to the 128-bit code.
#[test]
fn avx512_bool_bytes_load_and_store_in_the_body() {
    let k = mask_kernel("wide.bool_bytes", DType::F64);
    for path in [SimdPath::Avx512, SimdPath::Avx2] {
        let mut be = CpuBackend::new().unwrap();
        let available = be.compiler().set_path(path).is_ok();
        let wide = be.compile(&k).unwrap();
        be.compiler().set_path(SimdPath::Sse).unwrap();
        let narrow = be.compile(&k).unwrap();
        be.compiler().set_path(SimdPath::Scalar).unwrap();
        let scalar = be.compile(&k).unwrap();
        if available {
            let takes = usize::from(path == SimdPath::Avx512);
            assert_eq!(wide_loops(&wide, path), takes, "{path}: the wide body");
        }
        assert_eq!(narrow.vectorized_loops(), 1);
        for &len in lengths(path) {
            let bytes: Vec<u8> = (0..len).map(|i| [0u8, 1, 2, 255, 0, 7, 0][i % 7]).collect();
            let xs: Vec<f64> = (0..len).map(|i| (i as f64 * 0.37).sin()).collect();
            let mut runs = vec![];
            for c in [&wide, &narrow, &scalar] {
                let (mut mb, mut xb) = (bytes.clone(), xs.clone());
                let (mut o, mut f) = (vec![0.0f64; len], vec![9u8; len]);
                let n = len as i64;
                let views = [
                    dense(&mut mb, &[n]),
                    dense(&mut xb, &[n]),
                    dense(&mut o, &[n]),
                    dense(&mut f, &[n]),
                ];
                run_on(c, &views, &[], 2).unwrap();
                runs.push((o.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), f));
            }
            assert_eq!(
                runs[0], runs[2],
                "{path}, len {len}: the wide body against scalar"
            );
            assert_eq!(
                runs[1], runs[2],
                "{path}, len {len}: 128-bit against scalar"
            );
            assert!(runs[2].1.iter().all(|&b| b <= 1), "stored bools are 0 or 1");
        }
    }
}

/// `f64 -> i64` casts in the AVX-512 body (`vcvttpd2qq`, then `i64::MAX` at or above 2^63
/// and 0 for NaN) and in the 128-bit code (lane by lane) give the scalar code's saturated
/// bits: on the special values (infinities, NaNs, the floats around +-2^63, subnormals) and
/// on ordinary ones, at every length.
#[test]
fn avx512_float_to_integer_casts_saturate_in_the_body() {
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::I64, 1, Privilege::Write);
    let scaled = kb.store(DType::I64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let xv = kb.load(x, &[i[0]]);
        let t = kb.cast(DType::I64, xv);
        kb.store_to(out, &[i[0]], t);
        let big = kb.c(Scalar::F64(3.0e17));
        let y = kb.bin(BinaryOp::Mul, xv, big);
        let u = kb.cast(DType::I64, y);
        kb.store_to(scaled, &[i[0]], u);
    });
    let k = kb.finish("wide.f64_to_i64");
    // The AVX-512 body takes the loop, the 128-bit code vectorizes it (lane by lane).
    let [wide, narrow, scalar] = three_ways(&k, SimdPath::Avx512, true);
    let specials = specials(DType::F64);
    for &len in lengths(SimdPath::Avx512) {
        let mut rng = Rng(len as u64 + 3);
        let xs: Vec<f64> = (0..len)
            .map(|i| match i % 3 {
                0 => f64::from_bits(specials[(i / 3) % specials.len()]),
                _ => rng.uniform(-40.0, 40.0),
            })
            .collect();
        let mut runs = vec![];
        for c in [&wide, &narrow, &scalar] {
            let mut xb = xs.clone();
            let (mut o, mut s) = (vec![5i64; len], vec![5i64; len]);
            let n = len as i64;
            let views = [
                dense(&mut xb, &[n]),
                dense(&mut o, &[n]),
                dense(&mut s, &[n]),
            ];
            run_on(c, &views, &[], 2).unwrap();
            runs.push((o, s));
        }
        assert_eq!(runs[0], runs[2], "len {len}: the wide body against scalar");
        assert_eq!(runs[1], runs[2], "len {len}: 128-bit against scalar");
        for (v, &t) in xs.iter().zip(&runs[2].0) {
            assert_eq!(t, *v as i64, "{v}: Rust's `as` saturates alike");
        }
    }
}
