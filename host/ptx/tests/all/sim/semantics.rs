//! Instruction semantics against Rust: each instruction over edge cases and random inputs,
//! in a grid of several blocks.

use weft_ptx::device::Device;
use weft_ptx::sim::SimDevice;

use super::{F64_EDGES, HEADER, INT_EDGES, Rng, floats, grid, load};

type Unary = fn(f64) -> f64;
type FloatCmp = fn(f64, f64) -> bool;
type IntCmp = fn(u64, u64) -> bool;

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
fn bit_counts_and_reversals_match_rust() {
    let mut p: Vec<(u64, u64)> = int_pairs();
    for k in 0..64 {
        p.extend([
            (1 << k, 0),
            ((1 << k) - 1, 0),
            (!0u64 << k, 0),
            (!(1u64 << k), 0),
        ]);
    }
    let u = |x: u32| u64::from(x);
    check("b32", "b32", "u32", "clz.b32 %d, %a", &p, |a, _| {
        u((a as u32).leading_zeros())
    });
    check("b64", "b64", "u32", "clz.b64 %d, %a", &p, |a, _| {
        u(a.leading_zeros())
    });
    check("b32", "b32", "u32", "popc.b32 %d, %a", &p, |a, _| {
        u((a as u32).count_ones())
    });
    check("b64", "b64", "u32", "popc.b64 %d, %a", &p, |a, _| {
        u(a.count_ones())
    });
    check("b32", "b32", "b32", "brev.b32 %d, %a", &p, |a, _| {
        u((a as u32).reverse_bits())
    });
    check("b64", "b64", "b64", "brev.b64 %d, %a", &p, |a, _| {
        a.reverse_bits()
    });
    // The top 1 bit's position (of a negative value: the top 0 bit's), or all ones.
    let top = |x: u64, bits: u32| {
        if x == 0 {
            u(u32::MAX)
        } else {
            u(63 - x.leading_zeros()).min(u64::from(bits - 1))
        }
    };
    check("u32", "u32", "u32", "bfind.u32 %d, %a", &p, |a, _| {
        top(a, 32)
    });
    check("u64", "u64", "u32", "bfind.u64 %d, %a", &p, |a, _| {
        top(a, 64)
    });
    check("s32", "s32", "u32", "bfind.s32 %d, %a", &p, |a, _| {
        let x = a as u32 as i32;
        top(u64::from(if x < 0 { !x } else { x } as u32), 32)
    });
    check("s64", "s64", "u32", "bfind.s64 %d, %a", &p, |a, _| {
        let x = a as i64;
        top(if x < 0 { !x } else { x } as u64, 64)
    });
    check(
        "u32",
        "u32",
        "u32",
        "bfind.shiftamt.u32 %d, %a",
        &p,
        |a, _| {
            if a == 0 {
                u(u32::MAX)
            } else {
                u((a as u32).leading_zeros())
            }
        },
    );
    check(
        "s64",
        "s64",
        "u32",
        "bfind.shiftamt.s64 %d, %a",
        &p,
        |a, _| {
            let x = a as i64;
            let y = if x < 0 { !x } else { x };
            if y == 0 {
                u(u32::MAX)
            } else {
                u(y.leading_zeros())
            }
        },
    );
    // Edges by hand: clz of 0 is the width, bfind of 0 (and of -1, signed) all ones.
    let edges = [(0, 0), (u64::MAX, 0), (1, 0), (0x8000_0000, 0)];
    assert_eq!(
        run_op("b32", "b32", "u32", "clz.b32 %d, %a", &edges),
        [32, 0, 31, 0]
    );
    assert_eq!(
        run_op("s32", "s32", "u32", "bfind.s32 %d, %a", &edges),
        [0xffff_ffff, 0xffff_ffff, 0, 30]
    );
    assert_eq!(
        run_op("u64", "u64", "u32", "bfind.u64 %d, %a", &edges),
        [0xffff_ffff, 63, 0, 31]
    );
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
        // The unsigned storage types' loads and stores.
        ("u64", "u16"),
        ("u16", "u64"),
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
