//! The PTX simulator ([`weft_ptx::sim`]): instruction semantics against Rust, memory and the
//! sticky error, malformed modules, and the emitter's own modules run against the IR's
//! reference interpreter.

#![allow(clippy::unwrap_used)]

use weft_ir::interp::{Arg, Storage, View};
use weft_ir::passes::math::lower_math;
use weft_ir::{DType, Scalar, ValidKernel};
use weft_ptx::Error;
use weft_ptx::device::{Device, Grid};
use weft_ptx::sim::{SimContext, SimDevice, SimFunction};

type Unary = fn(f64) -> f64;
type FloatCmp = fn(f64, f64) -> bool;
type IntCmp = fn(u64, u64) -> bool;

const HEADER: &str = ".version 7.8\n.target sm_80\n.address_size 64\n";

fn grid(blocks: u32, threads: u32) -> Grid {
    Grid {
        blocks: [blocks, 1, 1],
        threads: [threads, 1, 1],
    }
}

fn load(dev: &mut SimDevice, ptx: &str, entry: &str) -> SimFunction {
    let m = dev.load("test", ptx, &[entry.to_string()]);
    m.unwrap_or_else(|e| panic!("{e}\n{ptx}"))
        .functions
        .remove(0)
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

#[rustfmt::skip]
const INT_EDGES: &[u64] = &[
    0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 0x7fff, 0x8000, 0xffff, 0x7fff_ffff, 0x8000_0000,
    0xffff_fffe, 0xffff_ffff, 0x1_0000_0000, 0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000,
    0xffff_ffff_ffff_fffe, u64::MAX, 0xdead_beef_1234_5678,
];

/// Edge pairs of integers and some random ones.
fn int_pairs() -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = INT_EDGES
        .iter()
        .flat_map(|&a| INT_EDGES.iter().map(move |&b| (a, b)))
        .collect();
    let mut r = Rng(0x1234_5678_9abc_def1);
    for _ in 0..400 {
        let (a, b) = (r.next(), r.next());
        out.push((a >> (r.next() % 64), b >> (r.next() % 64)));
    }
    out
}

#[rustfmt::skip]
const F64_EDGES: &[f64] = &[
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 3.7, -3.7, 1e10, -1e10,
    2147483647.5, 2147483648.0, -2147483648.5, 4294967295.7, 4294967296.0, 9.3e18, 1.8e19,
    -9.3e18, 1e300, -1e300, f64::MAX, f64::MIN_POSITIVE, 5e-324, -5e-324, 1e-310, f64::INFINITY,
    f64::NEG_INFINITY, f64::NAN, 3.4028235677973366e38, 1.401298464324817e-45, 0.1, 1.0 / 3.0,
];

fn floats() -> Vec<f64> {
    let mut out = F64_EDGES.to_vec();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let mag = (r.next() % 80) as i32 - 40;
        let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * 2f64.powi(mag);
        out.push(if r.next().is_multiple_of(2) { x } else { -x });
    }
    out
}

fn bits_of(ty: &str) -> u32 {
    if ty == "pred" {
        1
    } else {
        ty[1..].parse().unwrap()
    }
}

/// Runs `inst` (over registers `%a`, `%b` of types `a`, `b` into `%d` of type `d`) once per
/// input pair, in a grid of several blocks; each result as `u64` bits (a predicate as 0/1).
fn run_op(a: &str, b: &str, d: &str, inst: &str, inputs: &[(u64, u64)]) -> Vec<u64> {
    let store = if d == "pred" {
        "selp.b64 %out, 1, 0, %d;\n    st.global.b64 [%t64], %out;".to_string()
    } else {
        format!("st.global.b{} [%t64], %d;", bits_of(d))
    };
    let (ab, bb) = (bits_of(a), bits_of(b));
    let ptx = format!(
        "{HEADER}
.visible .entry t(.param .u64 pa, .param .u64 pb, .param .u64 pd, .param .u64 n)
.maxntid 128, 1, 1
{{
    .reg .u64 %pa, %pb, %pd, %n, %i, %off, %t64;
    .reg .u32 %c, %nt, %tid;
    .reg .pred %done;
    .reg .{a} %a;
    .reg .{b} %b;
    .reg .{d} %d;
    .reg .b64 %out;
    ld.param.u64 %pa, [pa];
    ld.param.u64 %pb, [pb];
    ld.param.u64 %pd, [pd];
    ld.param.u64 %n, [n];
    mov.u32 %c, %ctaid.x;
    mov.u32 %nt, %ntid.x;
    mov.u32 %tid, %tid.x;
    mul.wide.u32 %i, %c, %nt;
    cvt.u64.u32 %t64, %tid;
    add.s64 %i, %i, %t64;
    setp.ge.u64 %done, %i, %n;
    @%done bra $end;
    shl.b64 %off, %i, 3;
    add.s64 %t64, %pa, %off;
    ld.global.b{ab} %a, [%t64];
    add.s64 %t64, %pb, %off;
    ld.global.b{bb} %b, [%t64];
    add.s64 %t64, %pd, %off;
    {inst};
    {store}
$end:
    ret;
}}
"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "t");
    let n = inputs.len() as u64;
    let bytes = n * 8;
    let (pa, pb, pd) = (
        dev.alloc(bytes).unwrap(),
        dev.alloc(bytes).unwrap(),
        dev.alloc(bytes).unwrap(),
    );
    let words = |f: fn(&(u64, u64)) -> u64| -> Vec<u8> {
        inputs.iter().flat_map(|p| f(p).to_le_bytes()).collect()
    };
    dev.write(pa, &words(|p| p.0)).unwrap();
    dev.write(pb, &words(|p| p.1)).unwrap();
    dev.memset_zero(pd, bytes).unwrap();
    let blocks = n.div_ceil(128) as u32;
    dev.launch(&f, grid(blocks, 128), &[pa, pb, pd, n])
        .unwrap_or_else(|e| panic!("{inst}: {e}"));
    let mut out = vec![0u8; bytes as usize];
    dev.read(pd, &mut out).unwrap();
    out.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Checks `inst` against `want` on every input pair.
fn check(
    a: &str,
    b: &str,
    d: &str,
    inst: &str,
    inputs: &[(u64, u64)],
    want: impl Fn(u64, u64) -> u64,
) {
    let got = run_op(a, b, d, inst, inputs);
    let (ma, mb) = (mask(bits_of(a)), mask(bits_of(b)));
    for (&(x, y), g) in inputs.iter().zip(got) {
        let w = want(x & ma, y & mb);
        assert_eq!(
            g, w,
            "{inst}: a = {x:#x}, b = {y:#x}: got {g:#x}, want {w:#x}"
        );
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Float results agree when both are NaN.
fn check_float(ty: &str, inst: &str, inputs: &[(u64, u64)], want: impl Fn(u64, u64) -> u64) {
    check_nan(ty, ty, ty, inst, inputs, want);
}

/// [`check`] for a float result: results agree when both are NaN.
fn check_nan(
    a: &str,
    b: &str,
    d: &str,
    inst: &str,
    inputs: &[(u64, u64)],
    want: impl Fn(u64, u64) -> u64,
) {
    let got = run_op(a, b, d, inst, inputs);
    let (ma, mb) = (mask(bits_of(a)), mask(bits_of(b)));
    let nan = |v: u64| {
        if d == "f32" {
            f32::from_bits(v as u32).is_nan()
        } else {
            f64::from_bits(v).is_nan()
        }
    };
    for (&(x, y), g) in inputs.iter().zip(got) {
        let w = want(x & ma, y & mb);
        assert!(
            g == w || (nan(g) && nan(w)),
            "{inst}: {x:#x}, {y:#x}: got {g:#x}, want {w:#x}"
        );
    }
}

#[test]
fn integer_arithmetic_wraps() {
    let p = int_pairs();
    let w32 = |f: fn(u32, u32) -> u32| move |a: u64, b: u64| u64::from(f(a as u32, b as u32));
    check(
        "s32",
        "s32",
        "s32",
        "add.s32 %d, %a, %b",
        &p,
        w32(u32::wrapping_add),
    );
    check(
        "u32",
        "u32",
        "u32",
        "sub.u32 %d, %a, %b",
        &p,
        w32(u32::wrapping_sub),
    );
    check(
        "s32",
        "s32",
        "s32",
        "mul.lo.s32 %d, %a, %b",
        &p,
        w32(u32::wrapping_mul),
    );
    check(
        "s64",
        "s64",
        "s64",
        "add.s64 %d, %a, %b",
        &p,
        u64::wrapping_add,
    );
    check(
        "u64",
        "u64",
        "u64",
        "sub.u64 %d, %a, %b",
        &p,
        u64::wrapping_sub,
    );
    check(
        "s64",
        "s64",
        "s64",
        "mul.lo.s64 %d, %a, %b",
        &p,
        u64::wrapping_mul,
    );
    check(
        "s64",
        "s64",
        "s64",
        "mad.lo.s64 %d, %a, %b, %a",
        &p,
        |a, b| a.wrapping_mul(b).wrapping_add(a),
    );
    check(
        "u32",
        "u32",
        "u64",
        "mul.wide.u32 %d, %a, %b",
        &p,
        |a, b| a * b,
    );
    check(
        "s32",
        "s32",
        "s64",
        "mul.wide.s32 %d, %a, %b",
        &p,
        |a, b| (i64::from(a as i32) * i64::from(b as i32)) as u64,
    );
    check("s64", "s64", "s64", "mul.hi.s64 %d, %a, %b", &p, |a, b| {
        ((i128::from(a as i64) * i128::from(b as i64)) >> 64) as u64
    });
    check("u64", "u64", "u64", "mul.hi.u64 %d, %a, %b", &p, |a, b| {
        ((u128::from(a) * u128::from(b)) >> 64) as u64
    });
    check("s32", "s32", "s32", "add.sat.s32 %d, %a, %b", &p, |a, b| {
        u64::from((a as i32).saturating_add(b as i32) as u32)
    });
    check("u64", "u64", "u64", "min.u64 %d, %a, %b", &p, u64::min);
    check("s64", "s64", "s64", "max.s64 %d, %a, %b", &p, |a, b| {
        (a as i64).max(b as i64) as u64
    });
    check("s32", "s32", "s32", "min.s32 %d, %a, %b", &p, |a, b| {
        u64::from((a as i32).min(b as i32) as u32)
    });
    check("b64", "b64", "b64", "xor.b64 %d, %a, %b", &p, |a, b| a ^ b);
    check("b32", "b32", "b32", "and.b32 %d, %a, %b", &p, |a, b| a & b);
    check("b16", "b16", "b16", "or.b16 %d, %a, %b", &p, |a, b| a | b);
    check("b32", "b32", "b32", "not.b32 %d, %a", &p, |a, _| {
        u64::from(!(a as u32))
    });
    check("s64", "s64", "s64", "neg.s64 %d, %a", &p, |a, _| {
        a.wrapping_neg()
    });
    check("s32", "s32", "s32", "abs.s32 %d, %a", &p, |a, _| {
        u64::from((a as i32).wrapping_abs() as u32)
    });
    check("s64", "s64", "s64", "abs.s64 %d, %a", &p, |a, _| {
        (a as i64).wrapping_abs() as u64
    });
}

#[test]
fn division_and_remainder() {
    let p = int_pairs();
    let sdiv32 = |a: u64, b: u64| match b as i32 {
        0 => 0xffff_ffff,
        d => u64::from((a as i32).wrapping_div(d) as u32),
    };
    check("s32", "s32", "s32", "div.s32 %d, %a, %b", &p, sdiv32);
    check("u32", "u32", "u32", "div.u32 %d, %a, %b", &p, |a, b| {
        a.checked_div(b).unwrap_or(0xffff_ffff)
    });
    check(
        "s64",
        "s64",
        "s64",
        "div.s64 %d, %a, %b",
        &p,
        |a, b| match b as i64 {
            0 => u64::MAX,
            d => (a as i64).wrapping_div(d) as u64,
        },
    );
    check("u64", "u64", "u64", "div.u64 %d, %a, %b", &p, |a, b| {
        a.checked_div(b).unwrap_or(u64::MAX)
    });
    check(
        "s32",
        "s32",
        "s32",
        "rem.s32 %d, %a, %b",
        &p,
        |a, b| match b as i32 {
            0 => a,
            d => u64::from((a as i32).wrapping_rem(d) as u32),
        },
    );
    check(
        "s64",
        "s64",
        "s64",
        "rem.s64 %d, %a, %b",
        &p,
        |a, b| match b as i64 {
            0 => a,
            d => (a as i64).wrapping_rem(d) as u64,
        },
    );
    check("u64", "u64", "u64", "rem.u64 %d, %a, %b", &p, |a, b| {
        a.checked_rem(b).unwrap_or(a)
    });
}

#[test]
fn shifts_clamp_their_amount() {
    let mut p = Vec::new();
    for &a in INT_EDGES {
        for n in (0..=70).chain([127, 255, 256, 0x8000_0000, u32::MAX as u64]) {
            p.push((a, n));
        }
    }
    let sh = |ok: bool, v: u64| if ok { v } else { 0 };
    check("b32", "u32", "b32", "shl.b32 %d, %a, %b", &p, |a, n| {
        sh(n < 32, (a << n.min(63)) & 0xffff_ffff)
    });
    check("b64", "u32", "b64", "shl.b64 %d, %a, %b", &p, |a, n| {
        sh(n < 64, a << n.min(63))
    });
    check("u32", "u32", "u32", "shr.u32 %d, %a, %b", &p, |a, n| {
        sh(n < 32, a >> n.min(63))
    });
    check("b64", "u32", "b64", "shr.b64 %d, %a, %b", &p, |a, n| {
        sh(n < 64, a >> n.min(63))
    });
    check("s32", "u32", "s32", "shr.s32 %d, %a, %b", &p, |a, n| {
        u64::from(((a as i32) >> n.min(31)) as u32)
    });
    check("s64", "u32", "s64", "shr.s64 %d, %a, %b", &p, |a, n| {
        ((a as i64) >> n.min(63)) as u64
    });
    check("b16", "u32", "b16", "shl.b16 %d, %a, %b", &p, |a, n| {
        sh(n < 16, (a << n.min(63)) & 0xffff)
    });
    check("b32", "u32", "b32", "shl.b32 %d, 1, %b", &p, |_, n| {
        sh(n < 32, 1u64 << n.min(63))
    });
}

#[test]
fn integer_conversions_extend_and_truncate() {
    let p = int_pairs();
    let sext = |v: u64, bits: u32| (((v << (64 - bits)) as i64) >> (64 - bits)) as u64;
    for (to, from) in [
        ("s64", "s32"),
        ("u64", "u32"),
        ("s64", "u32"),
        ("u64", "s32"),
        ("u32", "u64"),
        ("s32", "s64"),
        ("s16", "s32"),
        ("u16", "s64"),
        ("s32", "s16"),
        ("u32", "u16"),
        ("s64", "s16"),
        ("u32", "s32"),
    ] {
        let (tb, fb) = (bits_of(to), bits_of(from));
        let inst = format!("cvt.{to}.{from} %d, %a");
        check(from, from, to, &inst, &p, |a, _| {
            let v = if from.starts_with('s') {
                sext(a, fb)
            } else {
                a
            };
            v & mask(tb)
        });
        let inst = format!("cvt.sat.{to}.{from} %d, %a");
        check(from, from, to, &inst, &p, |a, _| {
            let v = if from.starts_with('s') {
                i128::from(sext(a, fb) as i64)
            } else {
                i128::from(a)
            };
            let (lo, hi) = if to.starts_with('s') {
                (-(1i128 << (tb - 1)), (1i128 << (tb - 1)) - 1)
            } else {
                (0, (1i128 << tb) - 1)
            };
            (v.clamp(lo, hi) as u64) & mask(tb)
        });
    }
}

#[test]
fn float_to_integer_rounds_saturates_and_maps_nan_to_zero() {
    let xs = floats();
    let p64: Vec<(u64, u64)> = xs.iter().map(|x| (x.to_bits(), 0)).collect();
    let p32: Vec<(u64, u64)> = xs
        .iter()
        .map(|&x| (u64::from((x as f32).to_bits()), 0))
        .collect();
    let rounds: [(&str, Unary); 4] = [
        ("rni", f64::round_ties_even),
        ("rzi", f64::trunc),
        ("rmi", f64::floor),
        ("rpi", f64::ceil),
    ];
    for (rnd, f) in rounds {
        for from in ["f32", "f64"] {
            let p = if from == "f32" { &p32 } else { &p64 };
            let val = move |a: u64| {
                if from == "f32" {
                    f64::from(f32::from_bits(a as u32))
                } else {
                    f64::from_bits(a)
                }
            };
            for sat in ["", ".sat"] {
                let i = |to: &str| format!("cvt.{rnd}{sat}.{to}.{from} %d, %a");
                check(from, from, "s32", &i("s32"), p, |a, _| {
                    u64::from(f(val(a)) as i32 as u32)
                });
                check(from, from, "u32", &i("u32"), p, |a, _| {
                    u64::from(f(val(a)) as u32)
                });
                check(from, from, "s64", &i("s64"), p, |a, _| {
                    f(val(a)) as i64 as u64
                });
                check(from, from, "u64", &i("u64"), p, |a, _| f(val(a)) as u64);
                check(from, from, "s16", &i("s16"), p, |a, _| {
                    u64::from(f(val(a)) as i16 as u16)
                });
            }
        }
        // To an integral float.
        let inst = format!("cvt.{rnd}.f64.f64 %d, %a");
        check_float("f64", &inst, &p64, |a, _| f(f64::from_bits(a)).to_bits());
        let inst = format!("cvt.{rnd}.f32.f32 %d, %a");
        check_float("f32", &inst, &p32, |a, _| {
            u64::from((f(f64::from(f32::from_bits(a as u32))) as f32).to_bits())
        });
    }
}

#[test]
fn float_conversions_round_as_asked() {
    let xs = floats();
    let p64: Vec<(u64, u64)> = xs.iter().map(|x| (x.to_bits(), 0)).collect();
    check_nan(
        "f64",
        "f64",
        "f32",
        "cvt.rn.f32.f64 %d, %a",
        &p64,
        |a, _| u64::from((f64::from_bits(a) as f32).to_bits()),
    );
    for (rnd, ok) in [
        (
            "rz",
            (|r: f64, x: f64| r.abs() <= x.abs()) as fn(f64, f64) -> bool,
        ),
        ("rm", |r, x| r <= x),
        ("rp", |r, x| r >= x),
    ] {
        let got = run_op(
            "f64",
            "f64",
            "f32",
            &format!("cvt.{rnd}.f32.f64 %d, %a"),
            &p64,
        );
        for (&x, g) in xs.iter().zip(got) {
            let r = f32::from_bits(g as u32);
            if x.is_nan() {
                assert!(r.is_nan());
                continue;
            }
            // On the right side of x, and no float between.
            let near = x as f32;
            assert!(ok(f64::from(r), x), "{rnd}: {x:e} -> {r:e}");
            assert!(
                r == near || r.next_up() == near || r.next_down() == near,
                "{rnd}: {x:e} -> {r:e}"
            );
        }
    }
    let p32: Vec<(u64, u64)> = xs
        .iter()
        .map(|&x| (u64::from((x as f32).to_bits()), 0))
        .collect();
    check_nan("f32", "f32", "f64", "cvt.f64.f32 %d, %a", &p32, |a, _| {
        f64::from(f32::from_bits(a as u32)).to_bits()
    });
    let p = int_pairs();
    check("s64", "s64", "f64", "cvt.rn.f64.s64 %d, %a", &p, |a, _| {
        (a as i64 as f64).to_bits()
    });
    check("u64", "u64", "f64", "cvt.rn.f64.u64 %d, %a", &p, |a, _| {
        (a as f64).to_bits()
    });
    check("s32", "s32", "f32", "cvt.rn.f32.s32 %d, %a", &p, |a, _| {
        u64::from((a as i32 as f32).to_bits())
    });
    check("u32", "u32", "f64", "cvt.rn.f64.u32 %d, %a", &p, |a, _| {
        (a as u32 as f64).to_bits()
    });
    check("s64", "s64", "f32", "cvt.rn.f32.s64 %d, %a", &p, |a, _| {
        u64::from((a as i64 as f32).to_bits())
    });
    for rnd in ["rz", "rm", "rp"] {
        let got = run_op(
            "s64",
            "s64",
            "f64",
            &format!("cvt.{rnd}.f64.s64 %d, %a"),
            &p,
        );
        for (&(a, _), g) in p.iter().zip(got) {
            let (v, r) = (i128::from(a as i64), f64::from_bits(g));
            let ok = match rnd {
                "rz" => (r as i128).abs() <= v.abs(),
                "rm" => (r as i128) <= v,
                _ => (r as i128) >= v,
            };
            let near = v as f64;
            assert!(
                ok && (r == near || r.next_up() == near || r.next_down() == near),
                "{rnd}: {v} -> {r:e}"
            );
        }
    }
}

fn float_pairs(x32: bool) -> Vec<(u64, u64)> {
    let xs = floats();
    let mut r = Rng(77);
    let mut out = Vec::new();
    for &a in F64_EDGES {
        for &b in F64_EDGES {
            out.push((a, b));
        }
    }
    for _ in 0..500 {
        out.push((r.pick(&xs), r.pick(&xs)));
    }
    let enc = |x: f64| {
        if x32 {
            u64::from((x as f32).to_bits())
        } else {
            x.to_bits()
        }
    };
    out.into_iter().map(|(a, b)| (enc(a), enc(b))).collect()
}

#[test]
fn float_arithmetic_is_ieee() {
    let (p64, p32) = (float_pairs(false), float_pairs(true));
    let f64b = |f: fn(f64, f64) -> f64| {
        move |a: u64, b: u64| f(f64::from_bits(a), f64::from_bits(b)).to_bits()
    };
    let f32b = |f: fn(f32, f32) -> f32| {
        move |a: u64, b: u64| {
            u64::from(f(f32::from_bits(a as u32), f32::from_bits(b as u32)).to_bits())
        }
    };
    check_float("f64", "add.rn.f64 %d, %a, %b", &p64, f64b(|a, b| a + b));
    check_float("f64", "sub.rn.f64 %d, %a, %b", &p64, f64b(|a, b| a - b));
    check_float("f64", "mul.rn.f64 %d, %a, %b", &p64, f64b(|a, b| a * b));
    check_float("f64", "div.rn.f64 %d, %a, %b", &p64, f64b(|a, b| a / b));
    check_float("f64", "sqrt.rn.f64 %d, %a", &p64, f64b(|a, _| a.sqrt()));
    check_float(
        "f64",
        "fma.rn.f64 %d, %a, %b, %a",
        &p64,
        f64b(|a, b| a.mul_add(b, a)),
    );
    check_float("f64", "neg.f64 %d, %a", &p64, f64b(|a, _| -a));
    check_float("f64", "abs.f64 %d, %a", &p64, f64b(|a, _| a.abs()));
    check_float("f32", "add.rn.f32 %d, %a, %b", &p32, f32b(|a, b| a + b));
    check_float("f32", "sub.rn.f32 %d, %a, %b", &p32, f32b(|a, b| a - b));
    check_float("f32", "mul.rn.f32 %d, %a, %b", &p32, f32b(|a, b| a * b));
    check_float("f32", "div.rn.f32 %d, %a, %b", &p32, f32b(|a, b| a / b));
    check_float("f32", "sqrt.rn.f32 %d, %a", &p32, f32b(|a, _| a.sqrt()));
    check_float("f32", "neg.f32 %d, %a", &p32, f32b(|a, _| -a));
    check_float("f32", "abs.f32 %d, %a", &p32, f32b(|a, _| a.abs()));
    check_float(
        "f64",
        "add.rn.f64 %d, %a, 0d3FF0000000000000",
        &p64,
        f64b(|a, _| a + 1.0),
    );
    check_float(
        "f32",
        "mul.rn.f32 %d, %a, 0f40000000",
        &p32,
        f32b(|a, _| a * 2.0),
    );
}

/// PTX `min`/`max`: the other operand when one is NaN, `-0.0` below `+0.0`.
fn ptx_min_max(a: f64, b: f64, max: bool) -> Option<f64> {
    if a.is_nan() && b.is_nan() {
        return None;
    }
    if a.is_nan() {
        return Some(b);
    }
    if b.is_nan() {
        return Some(a);
    }
    if a == b {
        let neg = a.is_sign_negative() || b.is_sign_negative();
        let pos = a.is_sign_positive() || b.is_sign_positive();
        return Some(if max {
            if pos { a.abs() } else { a }
        } else if neg {
            -a.abs()
        } else {
            a
        });
    }
    Some(if (a < b) != max { a } else { b })
}

#[test]
fn float_min_max_follow_ptx() {
    for (ty, p) in [("f64", float_pairs(false)), ("f32", float_pairs(true))] {
        for max in [false, true] {
            let name = if max { "max" } else { "min" };
            let got = run_op(ty, ty, ty, &format!("{name}.{ty} %d, %a, %b"), &p);
            for (&(a, b), g) in p.iter().zip(got) {
                let (x, y, r) = if ty == "f32" {
                    let f = |v: u64| f64::from(f32::from_bits(v as u32));
                    (f(a), f(b), f(g))
                } else {
                    (f64::from_bits(a), f64::from_bits(b), f64::from_bits(g))
                };
                match ptx_min_max(x, y, max) {
                    None => assert!(r.is_nan(), "{name} {x} {y} -> {r}"),
                    Some(w) => assert_eq!(r.to_bits(), w.to_bits(), "{name} {x} {y} -> {r}"),
                }
            }
        }
    }
}

#[test]
fn setp_orders_and_unorders() {
    let table: [(&str, FloatCmp); 14] = [
        ("eq", |a, b| a == b),
        ("ne", |a, b| !a.is_nan() && !b.is_nan() && a != b),
        ("lt", |a, b| a < b),
        ("le", |a, b| a <= b),
        ("gt", |a, b| a > b),
        ("ge", |a, b| a >= b),
        ("equ", |a, b| a.is_nan() || b.is_nan() || a == b),
        ("neu", |a, b| a.is_nan() || b.is_nan() || a != b),
        ("ltu", |a, b| a.is_nan() || b.is_nan() || a < b),
        ("leu", |a, b| a.is_nan() || b.is_nan() || a <= b),
        ("gtu", |a, b| a.is_nan() || b.is_nan() || a > b),
        ("geu", |a, b| a.is_nan() || b.is_nan() || a >= b),
        ("num", |a, b| !a.is_nan() && !b.is_nan()),
        ("nan", |a, b| a.is_nan() || b.is_nan()),
    ];
    let (p64, p32) = (float_pairs(false), float_pairs(true));
    for (cc, f) in table {
        check(
            "f64",
            "f64",
            "pred",
            &format!("setp.{cc}.f64 %d, %a, %b"),
            &p64,
            |a, b| u64::from(f(f64::from_bits(a), f64::from_bits(b))),
        );
        check(
            "f32",
            "f32",
            "pred",
            &format!("setp.{cc}.f32 %d, %a, %b"),
            &p32,
            |a, b| {
                u64::from(f(
                    f64::from(f32::from_bits(a as u32)),
                    f64::from(f32::from_bits(b as u32)),
                ))
            },
        );
    }
    let p = int_pairs();
    let ints: [(&str, &str, IntCmp); 8] = [
        ("lt", "s64", |a, b| (a as i64) < (b as i64)),
        ("ge", "s64", |a, b| (a as i64) >= (b as i64)),
        ("lo", "s64", |a, b| a < b),
        ("hs", "u64", |a, b| a >= b),
        ("gt", "s32", |a, b| (a as i32) > (b as i32)),
        ("le", "u32", |a, b| (a as u32) <= (b as u32)),
        ("ne", "b64", |a, b| a != b),
        ("eq", "s16", |a, b| a as u16 == b as u16),
    ];
    for (cc, ty, f) in ints {
        check(
            ty,
            ty,
            "pred",
            &format!("setp.{cc}.{ty} %d, %a, %b"),
            &p,
            |a, b| u64::from(f(a, b)),
        );
    }
    // Predicated non-branch instructions, and predicate logic.
    check(
        "u64",
        "u64",
        "u64",
        "setp.lt.u64 %done, %a, %b;\n    mov.u64 %d, 7;\n    @!%done mov.u64 %d, %a",
        &p,
        |a, b| {
            if a < b { 7 } else { a }
        },
    );
    check(
        "u64",
        "u64",
        "pred",
        "setp.lt.u64 %d, %a, %b;\n    setp.eq.u64 %done, %a, 0;\n    xor.pred %d, %d, %done;\n    not.pred %d, %d",
        &p,
        |a, b| u64::from(!((a < b) ^ (a == 0))),
    );
    check(
        "u64",
        "u64",
        "u64",
        "setp.hi.u64 %done, %a, %b;\n    selp.u64 %d, %a, %b, %done",
        &p,
        |a, b| a.max(b),
    );
}

/// A module whose one thread does `inst` at `[%p + off]` from its parameter `p`.
fn access_module(inst: &str) -> String {
    format!(
        "{HEADER}.visible .entry poke(.param .u64 p)\n{{\n    .reg .u64 %p, %v;\n    .reg .b32 %w;\n    \
         ld.param.u64 %p, [p];\n    {inst}\n    ret;\n}}\n"
    )
}

#[test]
fn an_illegal_address_loses_the_context_for_every_device() {
    let ctx = SimContext::new();
    let mut dev = ctx.device();
    let buf = dev.alloc(64).unwrap();
    let f = load(
        &mut dev,
        &access_module("ld.global.u32 %w, [%p+64];"),
        "poke",
    );
    let Err(Error::DeviceLost(msg)) = dev.launch(&f, grid(1, 1), &[buf]) else {
        panic!("an out-of-bounds read must lose the device");
    };
    let addr = format!("0x{:x}", buf + 64);
    assert!(
        msg.contains("`test`") && msg.contains("`poke`") && msg.contains(&addr),
        "{msg}"
    );
    assert!(
        msg.contains("a load of 4 bytes") && msg.contains("outside every allocation"),
        "{msg}"
    );
    // Sticky: every later call of every device on the context.
    let mut other = ctx.device();
    let same = |r: Result<(), Error>| match r {
        Err(Error::DeviceLost(m)) => assert_eq!(m, msg),
        r => panic!("expected the sticky error, got {r:?}"),
    };
    same(other.alloc(8).map(drop));
    same(other.synchronize());
    same(dev.write(buf, &[1]));
    same(other.read(buf, &mut [0]));
    same(other.launch(&f, grid(1, 1), &[buf]));
    same(other.load("x", HEADER, &[]).map(drop));
    other.free(buf);
    assert_eq!(ctx.lost(), Some(msg));
    // Another context still works.
    let mut fresh = SimDevice::new();
    let b = fresh.alloc(64).unwrap();
    let f = load(
        &mut fresh,
        &access_module("ld.global.u32 %w, [%p+60];"),
        "poke",
    );
    fresh.launch(&f, grid(1, 1), &[b]).unwrap();
    fresh.synchronize().unwrap();
}

#[test]
fn misaligned_and_unallocated_accesses_are_illegal() {
    for (inst, want) in [
        ("st.global.u64 [%p+4], %v;", "misaligned"),
        ("ld.global.u64 %v, [%p+-8];", "outside every allocation"),
        ("atom.global.add.u32 %w, [%p+2], 1;", "misaligned"),
        ("ld.global.u64 %v, [0];", "outside every allocation"),
        (
            "st.global.u64 [%p+256], %v;",
            "past the end of the allocation of 260 bytes",
        ),
    ] {
        let mut dev = SimDevice::new();
        let buf = dev.alloc(260).unwrap();
        let f = load(&mut dev, &access_module(inst), "poke");
        match dev.launch(&f, grid(1, 1), &[buf]) {
            Err(Error::DeviceLost(m)) => assert!(m.contains(want), "{inst}: {m}"),
            r => panic!("{inst}: {r:?}"),
        }
    }
}

#[test]
fn memory_is_dirty_pooled_and_bounded() {
    let ctx = SimContext::new();
    let (mut a, mut b) = (ctx.device(), ctx.device());
    let p = a.alloc(1000).unwrap();
    assert_eq!(p % 256, 0);
    let mut out = vec![0u8; 1000];
    a.read(p, &mut out).unwrap();
    assert!(out.iter().all(|&x| x != 0), "fresh memory must not be zero");
    let data: Vec<u8> = (0..1000).map(|i| (i % 251) as u8).collect();
    a.write(p, &data).unwrap();
    a.free(p);
    let q = b.alloc(1000).unwrap();
    assert_eq!(
        q, p,
        "an allocation of the same size reuses the freed range"
    );
    b.read(q, &mut out).unwrap();
    assert_eq!(out, data, "with its old bytes");
    // Copies and zeroing within and between allocations.
    let r = b.alloc(16).unwrap();
    b.copy(r, q + 8, 16).unwrap();
    b.memset_zero(q, 8).unwrap();
    let mut w = [0u8; 16];
    b.read(r, &mut w).unwrap();
    assert_eq!(&w[..], &data[8..24]);
    b.read(q, &mut w).unwrap();
    assert_eq!(&w[..8], &[0; 8]);
    assert!(b.wait_for(std::time::Duration::ZERO).unwrap());
    // Reading past the end is an illegal address.
    assert!(matches!(
        b.read(r + 8, &mut [0; 9]),
        Err(Error::DeviceLost(_))
    ));
    assert!(matches!(a.alloc(8), Err(Error::DeviceLost(_))));
}

#[test]
fn malformed_modules_are_refused_with_their_line() {
    let body = |inst: &str| {
        format!(
            "{HEADER}.visible .entry e(.param .u64 p)\n{{\n    .reg .u64 %r;\n    {inst}\n    ret;\n}}\n"
        )
    };
    for (ptx, want) in [
        (
            body("foo.bar %r;"),
            "line 7 (entry `e`): unknown instruction `foo.bar`: `foo.bar %r;`",
        ),
        (
            body("add.s64 %r, %r, %q;"),
            "line 7 (entry `e`): unknown register `%q`",
        ),
        (body("add.s32 %r, %r, 1;"), "line 7"),
        (body("bra $nowhere;"), "unknown label `$nowhere`"),
        (body("bar.sync 0;"), "barriers"),
        (body("ld.shared.u64 %r, [%r];"), "shared"),
        (body("mov.u64 %r, 0x1ffffffffffffffff;"), "line 7"),
        (
            body("add.rn.f64 %r, %r, %r"),
            "line 7 (entry `e`): a malformed operand `%rret`",
        ),
        (body("cvt.s32.f64 %r, %r;"), "line 7"),
        (body("ld.global.u64 %r, [%r+];"), "malformed address"),
        (body(".shared .b8 buf[16];"), "not simulated"),
        (body("mov.u32 %tid.x, 1;"), "line 7"),
        (format!("{HEADER}.visible .entry e(\n{{"), "line 5"),
        ("garbage".to_string(), "line 1"),
        (
            ".version 7.8\n.target sm_80\n.address_size 32\n".to_string(),
            "line 3",
        ),
        (format!("{HEADER}.func f()\n{{\n}}\n"), "device functions"),
    ] {
        match SimDevice::new().load("bad", &ptx, &["e".to_string()]) {
            Err(Error::Driver(m)) => {
                assert!(
                    m.starts_with("kernel `bad`: the PTX JIT failed:") && m.contains(want),
                    "{m}\n{ptx}"
                )
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted:\n{ptx}"),
        }
    }
    // A missing entry.
    match SimDevice::new().load("k", &body("ret;"), &["nope".to_string()]) {
        Err(Error::Driver(m)) => assert!(m.contains("no entry `nope`"), "{m}"),
        r => panic!("{:?}", r.map(|_| ())),
    }
}

#[test]
fn no_prefix_of_a_module_panics() {
    let ptx = emitted("axpy.ir").text;
    let mut dev = SimDevice::new();
    let chars: Vec<(usize, char)> = ptx.char_indices().collect();
    for &(at, _) in chars.iter().step_by(3) {
        let _ = dev.load("cut", &ptx[..at], &["weft_0".to_string()]);
        let mangled = format!("{}@!{}", &ptx[..at], &ptx[at..]);
        let _ = dev.load("mangled", &mangled, &["weft_0".to_string()]);
    }
}

#[test]
fn launches_check_their_arguments_and_step_limit() {
    let ctx = SimContext::with_step_limit(10_000);
    let mut dev = ctx.device();
    let spin =
        format!("{HEADER}.visible .entry spin(.param .u64 p)\n{{\n$top:\n    bra.uni $top;\n}}\n");
    let f = load(&mut dev, &spin, "spin");
    match dev.launch(&f, grid(1, 1), &[]) {
        Err(Error::Driver(m)) => assert!(m.contains("`spin` takes 1 parameters"), "{m}"),
        r => panic!("{r:?}"),
    }
    match dev.launch(&f, grid(1, 1), &[0]) {
        Err(Error::KernelFault { kernel, message }) => {
            assert_eq!(kernel, "test");
            assert!(message.contains("step limit of 10000"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    // Not sticky.
    dev.synchronize().unwrap();
    assert!(matches!(
        dev.launch(&f, grid(0, 1), &[0]),
        Err(Error::Driver(_))
    ));
    let limited = format!("{HEADER}.visible .entry e()\n.maxntid 64, 1, 1\n{{\n    ret;\n}}\n");
    let e = load(&mut dev, &limited, "e");
    assert!(matches!(
        dev.launch(&e, grid(1, 128), &[]),
        Err(Error::Driver(_))
    ));
    dev.launch(&e, grid(3, 64), &[]).unwrap();
}

#[test]
fn atomics_and_reductions_combine_every_thread() {
    let ptx = format!(
        "{HEADER}.visible .entry a(.param .u64 p)\n.maxntid 256, 1, 1\n{{\n    \
         .reg .u64 %p, %q, %old64;\n    .reg .u32 %t, %old;\n    .reg .s32 %s;\n    .reg .pred %won;\n    \
         ld.param.u64 %p, [p];\n    mov.u32 %t, %tid.x;\n    \
         atom.global.add.u32 %old, [%p], 1;\n    \
         red.global.add.u64 [%p+8], 3;\n    \
         sub.s32 %s, 100, %t;\n    red.global.min.s32 [%p+16], %s;\n    \
         atom.global.max.u32 %old, [%p+20], %t;\n    \
         atom.global.cas.b32 %old, [%p+24], 0, 7;\n    \
         setp.eq.u32 %won, %old, 0;\n    @%won red.global.add.u32 [%p+28], 1;\n    \
         atom.global.exch.b64 %old64, [%p+32], 5;\n    \
         ret;\n}}\n"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "a");
    let p = dev.alloc(40).unwrap();
    dev.memset_zero(p, 40).unwrap();
    dev.write(p + 16, &i32::MAX.to_le_bytes()).unwrap();
    dev.launch(&f, grid(4, 256), &[p]).unwrap();
    let mut out = [0u8; 40];
    dev.read(p, &mut out).unwrap();
    let u32_at = |i: usize| u32::from_le_bytes(out[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 1024);
    assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), 3 * 1024);
    assert_eq!(u32_at(16) as i32, 100 - 255);
    assert_eq!(u32_at(20), 255);
    assert_eq!(u32_at(24), 7);
    assert_eq!(u32_at(28), 1, "one thread wins the compare-and-swap");
    assert_eq!(u64::from_le_bytes(out[32..40].try_into().unwrap()), 5);
}

// ---- the emitter's modules ----

fn emitted(file: &str) -> weft_ptx::Module {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(file);
    crate::filetests::emit_file(&path).unwrap().unwrap()
}

fn emit_text(src: &str) -> weft_ptx::Module {
    let kernel = weft_ir::text::parse(src).unwrap();
    weft_ptx::emit(&ValidKernel::new(lower_math(&kernel)).unwrap()).unwrap()
}

#[test]
fn every_filetest_module_loads() {
    let mut n = 0;
    for path in crate::filetests::files() {
        let Ok(Ok(m)) = crate::filetests::emit_file(&path) else {
            continue;
        };
        let names: Vec<String> = m.entries.iter().map(|e| e.name.clone()).collect();
        let loaded = SimDevice::new()
            .load("filetest", &m.text, &names)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(loaded.functions.len(), names.len());
        n += 1;
    }
    assert!(n >= 10, "only {n} filetests emitted");
}

fn dense_view(storage: usize, extents: &[i64]) -> View {
    let mut strides = vec![1i64; extents.len()];
    for d in (0..extents.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * extents[d + 1];
    }
    View {
        storage,
        offset: 0,
        strides,
        extents: extents.to_vec(),
        origin: vec![0; extents.len()],
    }
}

/// Runs `module` (of `kernel`) on the simulator with the interpreter's arguments: each
/// storage in its own allocation, the ABI laid out by hand. Returns the storages after it
/// and the fault word.
fn run_module(
    module: &weft_ptx::Module,
    kernel: &weft_ir::Kernel,
    args: &[Arg],
    storages: &[Storage],
) -> (Vec<Storage>, u32) {
    let mut dev = SimDevice::new();
    let names: Vec<String> = module.entries.iter().map(|e| e.name.clone()).collect();
    let fs = dev
        .load(&kernel.name, &module.text, &names)
        .unwrap()
        .functions;
    let fault = dev.alloc(4).unwrap();
    dev.memset_zero(fault, 4).unwrap();
    let mut bases = Vec::new();
    for s in storages {
        let size = s.dtype.size();
        let bytes: Vec<u8> = s
            .data
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes()[..size].to_vec())
            .collect();
        // Padded to whole 32-bit words: a bool reduction is an atomic on the word holding
        // its byte.
        let p = dev
            .alloc(bytes.len().max(1).next_multiple_of(4) as u64)
            .unwrap();
        dev.write(p, &bytes).unwrap();
        bases.push(p);
    }
    for (entry, f) in module.entries.iter().zip(&fs) {
        assert!(
            entry.leaves.is_empty() && entry.trees.is_empty(),
            "the harness lays out no leaves"
        );
        let mut words = vec![fault];
        for a in args {
            match a {
                Arg::Scalar(s) => words.push(s.to_bits()),
                Arg::Store(v) => {
                    let size = storages[v.storage].dtype.size() as i64;
                    words.push(bases[v.storage].wrapping_add((v.offset * size) as u64));
                    for list in [&v.extents, &v.strides, &v.origin] {
                        words.extend(list.iter().map(|&x| x as u64));
                    }
                }
            }
        }
        let Arg::Store(over) = &args[entry.over as usize] else {
            panic!("not a store")
        };
        let g = if entry.rows {
            let b = |n: i64, t: u64| ((n as u64).div_ceil(t).clamp(1, 3)) as u32;
            Grid {
                blocks: [b(over.extents[1], 32), b(over.extents[0], 8), 1],
                threads: [32, 8, 1],
            }
        } else {
            let n: i64 = over.extents.iter().product();
            grid(((n as u64).div_ceil(256).clamp(1, 3)) as u32, 256)
        };
        dev.launch(f, g, &words).unwrap();
    }
    let mut word = [0u8; 4];
    dev.read(fault, &mut word).unwrap();
    let out = storages
        .iter()
        .zip(&bases)
        .map(|(s, &p)| {
            let size = s.dtype.size();
            let mut bytes = vec![0u8; s.data.len() * size];
            dev.read(p, &mut bytes).unwrap();
            let data = bytes
                .chunks(size)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w[..size].copy_from_slice(c);
                    Scalar::from_bits(s.dtype, u64::from_le_bytes(w))
                })
                .collect();
            Storage {
                dtype: s.dtype,
                data,
            }
        })
        .collect();
    (out, u32::from_le_bytes(word))
}

fn same(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) if x.is_nan() && y.is_nan() => true,
        (Scalar::F64(x), Scalar::F64(y)) if x.is_nan() && y.is_nan() => true,
        _ => a.to_bits() == b.to_bits(),
    }
}

/// Values of `dtype` with edge cases.
fn values(dtype: DType, n: usize, seed: u64) -> Vec<Scalar> {
    let mut r = Rng(seed);
    let xs = floats();
    (0..n)
        .map(|_| match dtype {
            DType::F64 => {
                Scalar::F64(r.pick(&xs) * if r.next().is_multiple_of(3) { 1e3 } else { 1.0 })
            }
            DType::F32 => Scalar::F32(r.pick(&xs) as f32),
            DType::I64 => Scalar::I64(if r.next().is_multiple_of(4) {
                r.pick(INT_EDGES) as i64
            } else {
                (r.next() % 2001) as i64 - 1000
            }),
            DType::I32 => Scalar::I32(r.pick(INT_EDGES) as i32),
            DType::Bool => Scalar::Bool(r.next().is_multiple_of(2)),
        })
        .collect()
}

/// A store parameter's dense array (extents, elements), or a scalar's value.
enum In {
    Store(Vec<i64>, Vec<Scalar>),
    Scalar(Scalar),
}

/// Random inputs for `kernel`: every store `n` elements along each dimension.
fn random_inputs(kernel: &weft_ir::Kernel, n: i64) -> Vec<In> {
    let mut out = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        out.push(match *p {
            weft_ir::Param::Store { dtype, rank, .. } => {
                let len = n.pow(rank) as usize;
                In::Store(vec![n; rank as usize], values(dtype, len, 17 + i as u64))
            }
            weft_ir::Param::Scalar { dtype } => In::Scalar(values(dtype, 1, 99)[0]),
        });
    }
    out
}

/// Kernel `src` (math-lowered, as the back end gets it) on the simulator and in the
/// reference interpreter: the same stores bit for bit (NaN payloads aside), or both fail
/// (the fault word set).
fn agrees(name: &str, src: &str, inputs: Option<Vec<In>>, n: i64) {
    let kernel = lower_math(&weft_ir::text::parse(src).unwrap());
    let module = emit_text(src);
    let (mut storages, mut args) = (Vec::new(), Vec::new());
    for input in inputs.unwrap_or_else(|| random_inputs(&kernel, n)) {
        args.push(match input {
            In::Store(extents, data) => {
                let dtype = data.first().map_or(DType::F64, |v| v.dtype());
                storages.push(Storage { dtype, data });
                Arg::Store(dense_view(storages.len() - 1, &extents))
            }
            In::Scalar(s) => Arg::Scalar(s),
        });
    }
    let mut want = storages.clone();
    let reference = weft_ir::interp::run(&kernel, &args, &mut want);
    let (got, fault) = run_module(&module, &kernel, &args, &storages);
    match reference {
        Err(e) => assert_ne!(
            fault, 0,
            "{name}: the interpreter failed ({e}), the simulator did not"
        ),
        Ok(()) => {
            assert_eq!(fault, 0, "{name}: fault {fault}");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                for (j, (a, b)) in g.data.iter().zip(&w.data).enumerate() {
                    assert!(
                        same(a, b),
                        "{name}: storage {k}[{j}]: simulator {a:?}, interpreter {b:?}"
                    );
                }
            }
        }
    }
}

fn filetest(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn emitted_modules_agree_with_the_interpreter() {
    for (file, n) in [
        ("axpy.ir", 1000),
        ("int_ops.ir", 700),
        ("casts_bools.ir", 700),
        ("float_min_max.ir", 700),
        ("float_rem.ir", 300),
        ("math_all_f32.ir", 300),
        ("math_all_f64.ir", 300),
        ("two_loops_zero_d.ir", 500),
        // Its stencil reads row -1: both fail.
        ("stencil_2d.ir", 40),
    ] {
        agrees(file, &filetest(file), None, n);
    }
    // Rank 2 (a 2-D grid) and rank 3 (indices divided out of the linear one).
    let src = "kernel @k(%a: store<f64, 2, read>, %out: store<f64, 2, write>) {\n  parallel %out (%i, %j) {\n    \
               %v = load %a[%i, %j]\n    %f = cast f64 %i\n    %w = mul %v, %f\n    %x = sub %w, %v\n    \
               store %out[%i, %j], %x\n  }\n}\n";
    agrees("rank 2", src, None, 77);
    let src = "kernel @k(%a: store<i32, 3, read>, %out: store<i64, 3, write>) {\n  parallel %out (%i, %j, %k) {\n    \
               %v = load %a[%i, %j, %k]\n    %w = cast i64 %v\n    %x = mul %w, %j\n    %y = sub %x, %k\n    \
               store %out[%i, %j, %k], %y\n  }\n}\n";
    agrees("rank 3", src, None, 13);
    // Atomic reductions of every kind, the bins in range.
    let n = 600;
    let k = random_inputs(
        &weft_ir::text::parse(&filetest("reduce_atomics.ir")).unwrap(),
        n,
    );
    let inputs = k
        .into_iter()
        .enumerate()
        .map(|(i, input)| match (i, input) {
            (0, In::Store(e, d)) => In::Store(
                e,
                d.iter()
                    .map(|v| Scalar::I64(v.to_bits() as i64 % 7 + 3))
                    .collect(),
            ),
            (_, input) => input,
        })
        .collect();
    agrees(
        "reduce_atomics.ir",
        &filetest("reduce_atomics.ir"),
        Some(inputs),
        n,
    );
    // Sparse rows: a loop over each row's range of columns.
    let rows = 300;
    let mut r = Rng(5);
    let (mut pos, mut col, mut at) = (Vec::new(), Vec::new(), 0i32);
    for _ in 0..rows {
        let len = (r.next() % 6) as i32;
        pos.extend([Scalar::I32(at), Scalar::I32(at + len)]);
        col.extend((0..len).map(|_| Scalar::I32((r.next() % rows as u64) as i32)));
        at += len;
    }
    let nnz = col.len() as i64;
    let inputs = vec![
        In::Store(vec![rows, 2], pos),
        In::Store(vec![nnz], col),
        In::Store(vec![nnz], values(DType::F64, nnz as usize, 3)),
        In::Store(vec![rows], values(DType::F64, rows as usize, 4)),
        In::Store(vec![rows], values(DType::F64, rows as usize, 6)),
    ];
    agrees("spmv_csr.ir", &filetest("spmv_csr.ir"), Some(inputs), 0);
}

#[test]
fn a_runaway_loop_stops_at_the_step_limit_or_when_the_host_sets_the_fault_word() {
    let m = emitted("for_cancel.ir");
    let mut dev = SimContext::with_step_limit(100_000).device();
    let f = load(&mut dev, &m.text, "weft_0");
    let (fault, x, out) = (
        dev.alloc(4).unwrap(),
        dev.alloc(80).unwrap(),
        dev.alloc(80).unwrap(),
    );
    dev.memset_zero(fault, 4).unwrap();
    let args = [fault, x, 10, 1, 0, out, 10, 1, 0];
    match dev.launch(&f, grid(1, 256), &args) {
        Err(Error::KernelFault { message, .. }) => {
            assert!(message.contains("step limit"), "{message}")
        }
        r => panic!("{r:?}"),
    }
    dev.write_now(fault, &weft_ptx::abi::CANCELLED.to_le_bytes())
        .unwrap();
    dev.launch(&f, grid(1, 256), &args).unwrap();
    dev.synchronize().unwrap();
}

#[test]
fn axpy_runs_on_a_sub_store_and_a_failed_index_check_sets_the_fault_word() {
    let m = emitted("axpy.ir");
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &m.text, "weft_0");
    let n = 3000usize;
    let (x, y): (Vec<f64>, Vec<f64>) = (0..n).map(|i| (i as f64 * 0.37, 1.0 - i as f64)).unzip();
    let bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let (fault, px, py) = (
        dev.alloc(4).unwrap(),
        dev.alloc(8 * n as u64).unwrap(),
        dev.alloc(8 * n as u64).unwrap(),
    );
    dev.memset_zero(fault, 4).unwrap();
    dev.write(px, &bytes(&x)).unwrap();
    dev.write(py, &bytes(&y)).unwrap();
    // y[10..2010] += 2.5 x[10..2010], with two blocks striding over the rest.
    let (lo, len) = (10u64, 2000u64);
    let a = 2.5f64;
    let args = [
        fault,
        a.to_bits(),
        px + 8 * lo,
        len,
        1,
        lo,
        py + 8 * lo,
        len,
        1,
        lo,
    ];
    dev.launch(&f, grid(2, 256), &args).unwrap();
    let mut out = vec![0u8; 8 * n];
    dev.read(py, &mut out).unwrap();
    for i in 0..n {
        let got = f64::from_le_bytes(out[8 * i..8 * i + 8].try_into().unwrap());
        let want = if (lo as usize..(lo + len) as usize).contains(&i) {
            a * x[i] + y[i]
        } else {
            y[i]
        };
        assert_eq!(got.to_bits(), want.to_bits(), "y[{i}]");
    }
    let mut word = [0u8; 4];
    dev.read(fault, &mut word).unwrap();
    assert_eq!(word, [0; 4]);

    // A gather whose index is out of range: the check fails, the fault word gets its code.
    let m = emit_text(
        "kernel @gather(%idx: store<i64, 1, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {\n  \
         parallel %y (%i) {\n    %j = load %idx[%i]\n    %v = load %x[%j]\n    store %y[%i], %v\n  }\n}\n",
    );
    let g = load(&mut dev, &m.text, &m.entries[0].name);
    let idx: Vec<u8> = [0i64, 2, 1, 7]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let pi = dev.alloc(32).unwrap();
    dev.write(pi, &idx).unwrap();
    let args = [fault, pi, 4, 1, 0, px, 4, 1, 0, py, 4, 1, 0];
    dev.launch(&g, grid(1, 256), &args).unwrap();
    dev.read(fault, &mut word).unwrap();
    let code = u32::from_le_bytes(word);
    let site = m.faults[(code - 1) as usize];
    assert_eq!(
        (site.param, site.dim, site.access),
        (1, 0, weft_ptx::abi::AccessKind::Load)
    );
    dev.synchronize().unwrap();
}

/// Interpreter speed in release: `cargo test --release -p weft-ptx --no-default-features
/// --test all sim::speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed() {
    let ptx = format!(
        "{HEADER}.visible .entry spin(.param .u64 n, .param .u64 out)\n{{\n    .reg .u64 %n, %i, %acc, %o;\n    \
         .reg .f64 %f;\n    .reg .pred %p;\n    ld.param.u64 %n, [n];\n    ld.param.u64 %o, [out];\n    \
         mov.u64 %i, 0;\n    mov.u64 %acc, 1;\n    mov.f64 %f, 0d3FF0000000000000;\n$top:\n    \
         mad.lo.s64 %acc, %acc, 3, %i;\n    add.rn.f64 %f, %f, 0d3FF8000000000000;\n    \
         add.s64 %i, %i, 1;\n    setp.lt.u64 %p, %i, %n;\n    @%p bra $top;\n    \
         st.global.u64 [%o], %acc;\n    ret;\n}}\n"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "spin");
    let out = dev.alloc(8).unwrap();
    let (iters, threads) = (100_000u64, 1024u32);
    let t = std::time::Instant::now();
    dev.launch(&f, grid(4, threads / 4), &[iters, out]).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let insts = (iters * 5 + 7) as f64 * f64::from(threads);
    println!("ALU loop: {:.0} M instructions/s", insts / secs / 1e6);

    let m = emitted("axpy.ir");
    let f = load(&mut dev, &m.text, "weft_0");
    let n = 4_000_000u64;
    let (fault, px, py) = (
        dev.alloc(4).unwrap(),
        dev.alloc(8 * n).unwrap(),
        dev.alloc(8 * n).unwrap(),
    );
    dev.memset_zero(fault, 4).unwrap();
    let t = std::time::Instant::now();
    dev.launch(
        &f,
        grid(n.div_ceil(256) as u32, 256),
        &[fault, 0, px, n, 1, 0, py, n, 1, 0],
    )
    .unwrap();
    let secs = t.elapsed().as_secs_f64();
    // The grid-stride loop's body is 26 instructions a point, the prologue 24 a thread.
    let insts = (n * 26 + n * 24) as f64;
    println!(
        "axpy: {:.1} M points/s, about {:.0} M instructions/s",
        n as f64 / secs / 1e6,
        insts / secs / 1e6
    );
}
