//! Round trips through the text form and the flat form, on hand-built and random kernels.

#![allow(clippy::unwrap_used)]

use crate::common::{Gen, check_roundtrip, scramble, special_f32, special_f64};
use proptest::prelude::*;
use weft_ir::builder::KernelBuilder;
use weft_ir::flat::{from_flat, to_flat};
use weft_ir::{
    BinaryOp, CmpOp, DType, Inst, Kernel, Op, Param, Privilege, ReduceOp, Scalar, UnaryOp, ValueId,
    renumber, text, validate,
};

/// A kernel that uses every operation, every dtype and every construct.
fn everything() -> Kernel {
    let mut k = KernelBuilder::new("test.everything");
    let stores: Vec<_> = DType::ALL
        .into_iter()
        .map(|t| k.store(t, 1, Privilege::ReadWrite))
        .collect();
    let scalars: Vec<_> = DType::VALUES.into_iter().map(|t| k.scalar(t)).collect();
    let m2 = k.store(DType::F64, 2, Privilege::Read);
    let col = k.store(DType::I64, 1, Privilege::Read);
    let w = k.store(DType::F32, 3, Privilege::Write);
    let reducers: Vec<_> = ReduceOp::ALL
        .into_iter()
        .map(|op| k.store(DType::F64, 0, Privilege::Reduce(op)))
        .collect();
    let bool_max = k.store(DType::Bool, 1, Privilege::Reduce(ReduceOp::Max));
    let int_sum = k.store(DType::I32, 2, Privilege::Reduce(ReduceOp::Sum));
    // Top-level values: loads, extents and origins outside any parallel loop.
    let e = k.extent(m2, 1);
    let o = k.origin(m2, 0);
    let z = k.const_i64(0);
    let top = k.load(m2, &[z, e]);
    let sum_eo = k.add(e, o);
    k.parallel(stores[1], |b, i| {
        let i = i[0];
        // Every binary op on every type it accepts.
        for (t, s) in DType::VALUES.into_iter().zip(&stores) {
            let x = b.load(*s, &[i]);
            let y = b.load(*s, &[i]);
            for op in BinaryOp::ALL {
                let ok = match op {
                    BinaryOp::Pow | BinaryOp::Atan2 => t.is_float(),
                    BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => !t.is_float(),
                    BinaryOp::Shl | BinaryOp::Shr => t.is_int(),
                    BinaryOp::Min | BinaryOp::Max => true,
                    _ => t != DType::Bool,
                };
                if ok {
                    let r = b.binary(op, x, y);
                    b.store(*s, &[i], r);
                }
            }
            for op in UnaryOp::ALL {
                let ok = match op {
                    UnaryOp::Not => !t.is_float(),
                    UnaryOp::Neg | UnaryOp::Abs => t != DType::Bool,
                    _ => t.is_float(),
                };
                if ok {
                    let r = b.unary(op, x);
                    b.store(*s, &[i], r);
                }
            }
            if t.is_float() {
                let r = b.fma(x, y, x);
                b.store(*s, &[i], r);
            }
            for op in CmpOp::ALL {
                let c = b.cmp(op, x, y);
                let r = b.select(c, x, y);
                b.store(*s, &[i], r);
            }
            // Every cast.
            for to in DType::VALUES {
                let c = b.cast(to, x);
                let back = b.cast(t, c);
                b.store(*s, &[i], back);
            }
            // Every bitcast, there and back.
            for to in DType::VALUES {
                if weft_ir::validate::bitcast_ok(t, to) {
                    let c = b.bitcast(to, x);
                    let back = b.bitcast(t, c);
                    b.store(*s, &[i], back);
                }
            }
        }
        // Scalar parameters.
        for (t, (p, s)) in DType::VALUES.into_iter().zip(scalars.iter().zip(&stores)) {
            assert_eq!(p.dtype(), t);
            b.store(*s, &[i], *p);
        }
        // The unsigned storage types: `i64` values in and out.
        for s in &stores[DType::VALUES.len()..] {
            let x = b.load(*s, &[i]);
            let y = b.add(x, x);
            b.store(*s, &[i], y);
            b.store(stores[3], &[i], x);
        }
        // Constants of every type, special floats included.
        for v in special_f64() {
            let c = b.const_f64(v);
            b.store(stores[1], &[i], c);
        }
        for v in special_f32() {
            let c = b.const_f32(v);
            b.store(stores[0], &[i], c);
        }
        for v in [0, 1, -1, i32::MIN, i32::MAX] {
            let c = b.const_i32(v);
            b.store(stores[2], &[i], c);
        }
        for v in [0, 1, -1, i64::MIN, i64::MAX] {
            let c = b.const_i64(v);
            b.store(stores[3], &[i], c);
        }
        for v in [false, true] {
            let c = b.const_bool(v);
            b.store(stores[4], &[i], c);
        }
        // Nested for loops with carried values, bounds computed at run time, and a load
        // through a computed index (x[col[j]]).
        let zero = b.const_i64(0);
        let n = b.extent(m2, 0);
        let acc0 = b.const_f64(0.0);
        let cnt0 = b.const_i32(0);
        let res = b.for_loop(zero, n, &[acc0, cnt0], |b, j, c| {
            let cj = b.load(col, &[j]);
            let xv = b.load(stores[1], &[cj]);
            let inner = b.for_loop(zero, e, &[c[0]], |b, l, c2| {
                let m = b.load(m2, &[j, l]);
                let p = b.mul(m, xv);
                let s = b.add(c2[0], p);
                let t = b.add(s, top);
                vec![t]
            });
            let one = b.const_i32(1);
            let cnt = b.add(c[1], one);
            vec![inner[0], cnt]
        });
        // A loop with no carried values.
        b.for_loop(sum_eo, n, &[], |b, j, _| {
            let v = b.cast(DType::F32, j);
            b.store(w, &[j, i, j], v);
            vec![]
        });
        // Reductions with every operator, rank 0 and rank 2, and a bool max.
        for r in &reducers {
            b.reduce(*r, &[], res[0]);
        }
        let ci = b.cast(DType::I32, res[0]);
        b.reduce(int_sum, &[i, i], ci);
        let t = b.const_bool(true);
        b.reduce_with(bool_max, ReduceOp::Max, &[i], t);
        b.store(stores[2], &[i], res[1]);
    });
    // A second parallel loop, over a rank-3 store, and one over a rank-0 store.
    k.parallel(w, |b, idx| {
        let x = b.const_f32(1.0);
        b.store(w, idx, x);
    });
    k.parallel(reducers[0], |b, idx| {
        assert!(idx.is_empty());
        let x = b.const_f64(2.0);
        b.reduce(reducers[0], idx, x);
    });
    k.finish()
}

#[test]
fn everything_round_trips() {
    let k = everything();
    check_roundtrip(&k);
    check_roundtrip(&scramble(&k, 12345));
    assert_eq!(renumber(&scramble(&k, 99)), k);
}

#[test]
fn every_op_appears_in_everything() {
    fn walk(body: &[Inst], seen: &mut std::collections::BTreeSet<String>) {
        for inst in body {
            let head = text::inst_head(inst);
            let op = if head.starts_with('%') {
                head.split_once(" = ").unwrap().1
            } else {
                &head
            };
            let name = op.split(' ').next().unwrap().to_string();
            seen.insert(name);
            match &inst.op {
                Op::Parallel(p) => walk(&p.body, seen),
                Op::For(l) => walk(&l.body, seen),
                _ => {}
            }
        }
    }
    let mut seen = Default::default();
    walk(&everything().body, &mut seen);
    let mut want: Vec<&str> = vec![
        "const", "param", "select", "fma", "cast", "bitcast", "load", "store", "reduce", "extent",
        "origin", "parallel", "for",
    ];
    want.extend(BinaryOp::ALL.iter().map(|o| o.name()));
    want.extend(UnaryOp::ALL.iter().map(|o| o.name()));
    want.extend(CmpOp::ALL.iter().map(|o| o.name()));
    for w in want {
        assert!(seen.contains(w), "{w} missing");
    }
}

#[test]
fn special_floats_round_trip_bit_exactly() {
    for v in special_f64() {
        let lit = text::scalar_literal(Scalar::F64(v));
        let back = text::parse_scalar(DType::F64, &lit).unwrap();
        assert_eq!(back, Scalar::F64(v), "{lit}");
    }
    for v in special_f32() {
        let lit = text::scalar_literal(Scalar::F32(v));
        let back = text::parse_scalar(DType::F32, &lit).unwrap();
        assert_eq!(back, Scalar::F32(v), "{lit}");
    }
    assert_eq!(text::scalar_literal(Scalar::F64(-0.0)), "-0.0");
    assert_eq!(text::scalar_literal(Scalar::F64(f64::NAN)), "nan");
    assert_eq!(
        text::scalar_literal(Scalar::F64(f64::from_bits(0x7ff0_0000_0000_0001))),
        "0x7ff0000000000001"
    );
    assert_eq!(text::scalar_literal(Scalar::F32(f32::NEG_INFINITY)), "-inf");
    // Bit patterns are accepted for any float.
    assert_eq!(
        text::parse_scalar(DType::F64, "0x3ff0000000000000"),
        Some(Scalar::F64(1.0))
    );
    assert_eq!(
        text::parse_scalar(DType::F32, "0x3f800000"),
        Some(Scalar::F32(1.0))
    );
    assert_eq!(text::parse_scalar(DType::F32, "0x3f8000000"), None);
    assert_eq!(
        text::parse_scalar(DType::F64, "1e400"),
        Some(Scalar::F64(f64::INFINITY))
    );
    assert_eq!(text::parse_scalar(DType::F64, "infinity"), None);
    assert_eq!(text::parse_scalar(DType::I32, "2147483648"), None);
    assert_eq!(
        text::parse_scalar(DType::I64, "-9223372036854775808"),
        Some(Scalar::I64(i64::MIN))
    );
}

#[test]
fn kernel_names_round_trip() {
    for name in [
        "numeric.add.f64",
        "a-b_c.0",
        "",
        "with space",
        "q\"uote\\",
        "tab\tnl\nbell\u{7}",
        "ünïcödé",
        "@%;",
    ] {
        let k = Kernel {
            name: name.into(),
            params: vec![],
            body: vec![],
        };
        let printed = text::print(&k);
        assert_eq!(text::parse(&printed), Ok(k), "{printed}");
    }
    assert!(
        text::print(&Kernel {
            name: "numeric.add.f64".into(),
            params: vec![],
            body: vec![]
        })
        .starts_with("kernel @numeric.add.f64()")
    );
}

#[test]
fn parses_named_values_in_definition_order() {
    let src = r#"
; a dot product with hand-written names
kernel @dot(%x: store<f64, 1, read>, %y: store<f64, 1, read>, %out: store<f64, 0, reduce(sum)>, %n: i64) {
  %len = param %n              ; value 0
  parallel %x (%i) {           ; index: value 1
    %a = load %x[%i]
    %b = load %y[%i]
    %p = mul %a, %b
    reduce sum %out[], %p
  }
  parallel %out () {
    %zero = const i64 0
    %one = const f64 1.0
    %s = for %i = %zero to %len iter(%s = %one) {   ; %i and %s reused: new values
      %a = load %x[%i]
      %s2 = add %s, %a
      yield %s2
    }
    reduce sum %out[], %s
  }
}
"#;
    let k = text::parse(src).unwrap();
    validate(&k).unwrap();
    assert_eq!(renumber(&k), k);
    assert_eq!(k.value_bound(), 12);
    assert_eq!(k.body[0].results, vec![ValueId(0)]);
    let Op::Parallel(p) = &k.body[1].op else {
        panic!()
    };
    assert_eq!(p.indices, vec![ValueId(1)]);
    let Op::Parallel(p) = &k.body[2].op else {
        panic!()
    };
    let Op::For(l) = &p.body[2].op else { panic!() };
    assert_eq!(l.induction, ValueId(7));
    assert_eq!(l.carried, vec![ValueId(8)]);
    assert_eq!(l.yields, vec![ValueId(10)]);
    assert_eq!(p.body[2].results, vec![ValueId(11)]);
    assert_eq!(k.params[3], Param::Scalar { dtype: DType::I64 });
    check_roundtrip(&k);
}

#[test]
fn print_looks_as_documented() {
    let mut k = KernelBuilder::new("numeric.axpy.f64");
    let s = k.scalar(DType::F64);
    let x = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::ReadWrite);
    k.parallel(y, |b, i| {
        let xv = b.load(x, i);
        let yv = b.load(y, i);
        let p = b.mul(s, xv);
        let r = b.add(p, yv);
        b.store(y, i, r);
    });
    let k = k.finish_validated().unwrap();
    let expected = "\
kernel @numeric.axpy.f64(%arg0: f64, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, readwrite>) {
  %0 = param %arg0
  parallel %arg2 (%1) {
    %2 = load %arg1[%1]
    %3 = load %arg2[%1]
    %4 = mul %0, %2
    %5 = add %4, %3
    store %arg2[%1], %5
  }
}
";
    assert_eq!(text::print(&k), expected);
    assert_eq!(k.to_string(), expected);
    assert_eq!(expected.parse::<Kernel>(), Ok(k));
}

#[test]
fn for_loop_syntax() {
    let src = "kernel @f(%o: store<i64, 1, write>) {
  parallel %o (%i) {
    %lo = const i64 0
    %r0, %r1 = for %j = %lo to %i iter(%acc = %lo, %b = %i) {
      %n0 = add %acc, %j
      %n1 = sub %b, %j
      yield %n0, %n1
    }
    for %j = %r0 to %r1 {
    }
    for %j = %r0 to %r1 iter() { yield }
    %m = max %r0, %r1
    store %o[%i], %m
  }
}";
    let k = text::parse(src).unwrap();
    validate(&k).unwrap();
    check_roundtrip(&k);
    let printed = text::print(&k);
    assert!(
        printed.contains("%7, %8 = for %2 = %1 to %0 iter(%3 = %1, %4 = %0) {"),
        "{printed}"
    );
    assert!(printed.contains("      yield %5, %6\n"), "{printed}");
    assert!(printed.contains("for %9 = %7 to %8 {\n    }"), "{printed}");
}

#[test]
fn invalid_kernels_print_without_panicking() {
    let k = Kernel {
        name: "bad".into(),
        params: vec![],
        body: vec![Inst {
            results: vec![ValueId(3), ValueId(3)],
            op: Op::For(weft_ir::ForLoop {
                lo: ValueId(9),
                hi: ValueId(9),
                induction: ValueId(0),
                init: vec![ValueId(1)],
                carried: vec![],
                body: vec![Inst {
                    results: vec![],
                    op: Op::Param(7),
                }],
                yields: vec![ValueId(2), ValueId(2)],
            }),
        }],
    };
    let printed = text::print(&k);
    assert!(printed.contains("iter(? = %1)"), "{printed}");
    assert!(validate(&k).is_err());
    let _ = to_flat(&k);
    let _ = renumber(&k);
}

fn arb_kernel() -> impl Strategy<Value = Kernel> {
    prop::collection::vec(any::<u32>(), 0..400).prop_map(|choices| Gen::new(&choices).kernel())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_kernels_round_trip(k in arb_kernel(), seed in any::<u64>()) {
        check_roundtrip(&k);
        // The builder numbers values in definition order.
        prop_assert_eq!(&renumber(&k), &k);
        let scrambled = scramble(&k, seed);
        check_roundtrip(&scrambled);
        prop_assert_eq!(text::parse(&text::print(&scrambled)), Ok(k.clone()));
        prop_assert_eq!(from_flat(&to_flat(&scrambled)), Ok(k));
    }
}
