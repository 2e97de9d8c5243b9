//! The flat form: numbering, rejection of malformed input, and fuzzing for panics.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use weft_ir::flat::{FlatAccess, FlatKernel, FlatOp, Region, from_flat, to_flat};
use weft_ir::{
    BinaryOp, CmpOp, DType, Param, Privilege, ReduceOp, Scalar, UnaryOp, renumber, text, validate,
};

fn f64_store(rank: u32, privilege: Privilege) -> Param {
    Param::Store {
        dtype: DType::F64,
        rank,
        privilege,
    }
}

fn region(ops: Vec<FlatOp>) -> Region {
    Region {
        ops,
        yields: vec![],
    }
}

fn kernel(params: Vec<Param>, regions: Vec<Region>) -> FlatKernel {
    FlatKernel {
        name: "flat".into(),
        params,
        regions,
    }
}

fn i64_const() -> FlatOp {
    FlatOp::Const(Scalar::I64(0))
}

#[test]
fn numbering_follows_the_wit_comment() {
    // %0 = const 0; parallel over a rank-2 store defines %1, %2; inside: %3 = const;
    // for: induction %4, carried %5 (init %3), body %6 = add %5, %5, yields %6; result %7.
    let flat = kernel(
        vec![f64_store(2, Privilege::Write)],
        vec![
            region(vec![i64_const(), FlatOp::Parallel { over: 0, body: 1 }]),
            region(vec![
                FlatOp::Const(Scalar::F64(0.0)),
                FlatOp::For {
                    lo: 0,
                    hi: 1,
                    init: vec![3],
                    body: 2,
                },
                FlatOp::Store(
                    FlatAccess {
                        param: 0,
                        indices: vec![1, 2],
                    },
                    7,
                ),
            ]),
            Region {
                ops: vec![FlatOp::Binary(BinaryOp::Add, 5, 5)],
                yields: vec![6],
            },
        ],
    );
    let k = from_flat(&flat).unwrap();
    validate(&k).unwrap();
    let printed = text::print(&k);
    assert_eq!(
        printed,
        "kernel @flat(%arg0: store<f64, 2, write>) {
  %0 = const i64 0
  parallel %arg0 (%1, %2) {
    %3 = const f64 0.0
    %7 = for %4 = %0 to %1 iter(%5 = %3) {
      %6 = add %5, %5
      yield %6
    }
    store %arg0[%1, %2], %7
  }
}
"
    );
    assert_eq!(to_flat(&k), flat);
    assert_eq!(renumber(&k), k);
}

/// (name, flat kernel, expected substring).
fn rejects() -> Vec<(&'static str, FlatKernel, &'static str)> {
    let rw = || vec![f64_store(1, Privilege::ReadWrite)];
    let par = |body| FlatOp::Parallel { over: 0, body };
    let for_ = |body| FlatOp::For {
        lo: 0,
        hi: 0,
        init: vec![],
        body,
    };
    let mut chain = vec![region(vec![i64_const(), for_(1)])];
    for r in 1..200 {
        chain.push(region(vec![for_(r + 1)]));
    }
    chain.push(region(vec![]));
    vec![
        ("no regions", kernel(rw(), vec![]), "no regions"),
        (
            "body out of range",
            kernel(rw(), vec![region(vec![par(1)])]),
            "region 0, op 0: body region 1 is out of range (the kernel has 1 regions)",
        ),
        (
            "huge body index",
            kernel(rw(), vec![region(vec![par(u32::MAX)])]),
            "body region 4294967295 is out of range",
        ),
        (
            "region 0 as a loop body",
            kernel(rw(), vec![region(vec![par(0)])]),
            "region 0 is the kernel body and cannot be a loop body",
        ),
        (
            "region 0 as a nested loop body",
            kernel(
                rw(),
                vec![region(vec![i64_const(), par(1)]), region(vec![for_(0)])],
            ),
            "region 1, op 0: region 0 is the kernel body",
        ),
        (
            "region used twice",
            kernel(rw(), vec![region(vec![par(1), par(1)]), region(vec![])]),
            "region 0, op 1: region 1 is already the body of another loop",
        ),
        (
            "region is its own body",
            kernel(
                rw(),
                vec![region(vec![i64_const(), for_(1)]), region(vec![for_(1)])],
            ),
            "region 1, op 0: region 1 is already the body",
        ),
        (
            "cycle of two regions",
            kernel(
                rw(),
                vec![
                    region(vec![i64_const(), for_(1)]),
                    region(vec![for_(2)]),
                    region(vec![for_(1)]),
                ],
            ),
            "region 2, op 0: region 1 is already the body",
        ),
        (
            "unreachable region",
            kernel(rw(), vec![region(vec![]), region(vec![])]),
            "region 1 is not reachable from region 0",
        ),
        (
            "unreachable cycle",
            kernel(
                rw(),
                vec![
                    region(vec![i64_const()]),
                    region(vec![for_(2)]),
                    region(vec![for_(1)]),
                ],
            ),
            "region 1 is not reachable from region 0",
        ),
        (
            "yields on region 0",
            kernel(
                rw(),
                vec![Region {
                    ops: vec![i64_const()],
                    yields: vec![0],
                }],
            ),
            "region 0 (the kernel body) has yields",
        ),
        (
            "yields on a parallel region",
            kernel(
                rw(),
                vec![
                    region(vec![par(1)]),
                    Region {
                        ops: vec![],
                        yields: vec![0],
                    },
                ],
            ),
            "parallel loop body region 1 has yields",
        ),
        (
            "parallel over a scalar",
            kernel(
                vec![Param::Scalar { dtype: DType::I64 }],
                vec![region(vec![par(1)]), region(vec![])],
            ),
            "parallel loop over parameter 0, which is a scalar",
        ),
        (
            "parallel over an unknown parameter",
            kernel(vec![], vec![region(vec![par(1)]), region(vec![])]),
            "parallel loop over unknown parameter 0 (the kernel has 0 parameters)",
        ),
        (
            "parallel over a huge rank",
            kernel(
                vec![f64_store(u32::MAX, Privilege::Read)],
                vec![region(vec![par(1)]), region(vec![])],
            ),
            "rank 4294967295, more than the maximum 16",
        ),
        (
            "nesting too deep",
            kernel(rw(), chain),
            "loops nest more than 64 deep",
        ),
        (
            "operand out of range",
            kernel(rw(), vec![region(vec![FlatOp::Unary(UnaryOp::Neg, 1)])]),
            "region 0, op 0: value 1 is out of range (the kernel defines 1 values)",
        ),
        (
            "index out of range",
            kernel(
                rw(),
                vec![region(vec![FlatOp::Load(FlatAccess {
                    param: 0,
                    indices: vec![u32::MAX],
                })])],
            ),
            "value 4294967295 is out of range",
        ),
        (
            "loop bound out of range",
            kernel(
                rw(),
                vec![
                    region(vec![FlatOp::For {
                        lo: 7,
                        hi: 0,
                        init: vec![],
                        body: 1,
                    }]),
                    region(vec![]),
                ],
            ),
            "value 7 is out of range (the kernel defines 1 values)",
        ),
        (
            "init out of range",
            kernel(
                rw(),
                vec![
                    region(vec![
                        i64_const(),
                        FlatOp::For {
                            lo: 0,
                            hi: 0,
                            init: vec![9],
                            body: 1,
                        },
                    ]),
                    region(vec![]),
                ],
            ),
            "value 9 is out of range (the kernel defines 4 values)",
        ),
        (
            "yield out of range",
            kernel(
                rw(),
                vec![
                    region(vec![i64_const(), for_(1)]),
                    Region {
                        ops: vec![],
                        yields: vec![2],
                    },
                ],
            ),
            "region 1: yielded value 2 is out of range (the kernel defines 2 values)",
        ),
        (
            "unknown parameter in param",
            kernel(rw(), vec![region(vec![FlatOp::Param(3)])]),
            "unknown parameter 3 (the kernel has 1 parameters)",
        ),
        (
            "unknown parameter in a store",
            kernel(
                rw(),
                vec![
                    region(vec![par(1)]),
                    region(vec![FlatOp::Store(
                        FlatAccess {
                            param: 1,
                            indices: vec![0],
                        },
                        0,
                    )]),
                ],
            ),
            "region 1, op 0: unknown parameter 1",
        ),
        (
            "unknown parameter in extent",
            kernel(
                rw(),
                vec![region(vec![FlatOp::Extent { param: 9, dim: 0 }])],
            ),
            "unknown parameter 9",
        ),
    ]
}

#[test]
fn from_flat_rejects_malformed_input() {
    let mut failures = Vec::new();
    for (name, flat, expected) in rejects() {
        match from_flat(&flat) {
            Ok(k) => failures.push(format!("{name}: accepted:\n{}", text::print(&k))),
            Err(e) => {
                assert_eq!(e.kernel, "flat");
                if !e.message.contains(expected) {
                    failures.push(format!(
                        "{name}: {:?} does not contain {expected:?}",
                        e.message
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn from_flat_leaves_types_to_the_validator() {
    // Structurally fine, but adds an f64 to an i64 and uses a value before its definition.
    let flat = kernel(
        vec![],
        vec![region(vec![
            FlatOp::Const(Scalar::F64(1.0)),
            FlatOp::Binary(BinaryOp::Add, 0, 2),
            FlatOp::Const(Scalar::I64(1)),
        ])],
    );
    let k = from_flat(&flat).unwrap();
    let e = validate(&k).unwrap_err();
    assert!(
        e.message.contains("%2 is used before its definition"),
        "{e}"
    );
}

fn arb_scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        any::<u32>().prop_map(|b| Scalar::F32(f32::from_bits(b))),
        any::<u64>().prop_map(|b| Scalar::F64(f64::from_bits(b))),
        any::<i32>().prop_map(Scalar::I32),
        any::<i64>().prop_map(Scalar::I64),
        any::<bool>().prop_map(Scalar::Bool),
    ]
}

fn arb_dtype() -> impl Strategy<Value = DType> {
    (0..5usize).prop_map(|i| DType::ALL[i])
}

fn arb_param() -> impl Strategy<Value = Param> {
    let privilege = prop_oneof![
        Just(Privilege::Read),
        Just(Privilege::Write),
        Just(Privilege::ReadWrite),
        (0..4usize).prop_map(|i| Privilege::Reduce(ReduceOp::ALL[i])),
    ];
    prop_oneof![
        arb_dtype().prop_map(|dtype| Param::Scalar { dtype }),
        (arb_dtype(), 0..4u32, privilege).prop_map(|(dtype, rank, privilege)| Param::Store {
            dtype,
            rank,
            privilege
        }),
    ]
}

/// Small numbers, so that references are often in range.
fn n() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0..12u32, 1 => any::<u32>()]
}

fn arb_op() -> impl Strategy<Value = FlatOp> {
    let access = || {
        (0..4u32, prop::collection::vec(n(), 0..3))
            .prop_map(|(param, indices)| FlatAccess { param, indices })
    };
    prop_oneof![
        arb_scalar().prop_map(FlatOp::Const),
        (0..4u32).prop_map(FlatOp::Param),
        (0..BinaryOp::ALL.len(), n(), n()).prop_map(|(o, a, b)| FlatOp::Binary(
            BinaryOp::ALL[o],
            a,
            b
        )),
        (0..UnaryOp::ALL.len(), n()).prop_map(|(o, a)| FlatOp::Unary(UnaryOp::ALL[o], a)),
        (0..6usize, n(), n()).prop_map(|(o, a, b)| FlatOp::Cmp(CmpOp::ALL[o], a, b)),
        (n(), n(), n()).prop_map(|(c, a, b)| FlatOp::Select(c, a, b)),
        (n(), n(), n()).prop_map(|(a, b, c)| FlatOp::Fma(a, b, c)),
        (arb_dtype(), n()).prop_map(|(t, a)| FlatOp::Cast(t, a)),
        (arb_dtype(), n()).prop_map(|(t, a)| FlatOp::Bitcast(t, a)),
        access().prop_map(FlatOp::Load),
        (access(), n()).prop_map(|(a, v)| FlatOp::Store(a, v)),
        (access(), 0..4usize, n()).prop_map(|(a, o, v)| FlatOp::Reduce(a, ReduceOp::ALL[o], v)),
        (0..4u32, 0..4u32).prop_map(|(param, dim)| FlatOp::Extent { param, dim }),
        (0..4u32, 0..4u32).prop_map(|(param, dim)| FlatOp::Origin { param, dim }),
        (0..4u32, 0..5u32).prop_map(|(over, body)| FlatOp::Parallel { over, body }),
        (n(), n(), prop::collection::vec(n(), 0..3), 0..5u32)
            .prop_map(|(lo, hi, init, body)| FlatOp::For { lo, hi, init, body }),
    ]
}

/// Rewrites the loops of `flat` so that its regions form a tree (each region below 0 the body
/// of one loop in an earlier region), so that `from_flat` accepts it more often.
fn make_tree(flat: &mut FlatKernel, seeds: &[u32]) {
    let mut seed = seeds.iter().copied().cycle();
    let mut next = || seed.next().unwrap_or(0) as usize;
    for r in &mut flat.regions {
        r.ops
            .retain(|op| !matches!(op, FlatOp::Parallel { .. } | FlatOp::For { .. }));
    }
    let store = flat
        .params
        .iter()
        .position(|p| matches!(p, Param::Store { .. }));
    for j in 1..flat.regions.len() {
        let parent = next() % j;
        let op = match store {
            Some(over) if parent == 0 && next() % 2 == 0 => FlatOp::Parallel {
                over: over as u32,
                body: j as u32,
            },
            _ => FlatOp::For {
                lo: (next() % 8) as u32,
                hi: (next() % 8) as u32,
                init: (0..next() % 3).map(|_| (next() % 8) as u32).collect(),
                body: j as u32,
            },
        };
        if matches!(op, FlatOp::Parallel { .. }) {
            flat.regions[j].yields.clear();
        }
        let ops = &mut flat.regions[parent].ops;
        let at = next() % (ops.len() + 1);
        ops.insert(at, op);
    }
    flat.regions[0].yields.clear();
    // Bring value numbers and parameter indices into range.
    fn count(flat: &FlatKernel, r: usize) -> u32 {
        let mut n = 0;
        for op in &flat.regions[r].ops {
            n += match op {
                FlatOp::Parallel { over, body } => match flat.params[*over as usize] {
                    Param::Store { rank, .. } => rank + count(flat, *body as usize),
                    Param::Scalar { .. } => unreachable!(),
                },
                FlatOp::For { init, body, .. } => {
                    1 + 2 * init.len() as u32 + count(flat, *body as usize)
                }
                FlatOp::Store(..) | FlatOp::Reduce(..) => 0,
                _ => 1,
            };
        }
        n
    }
    let values = count(flat, 0).max(1);
    let params = flat.params.len().max(1) as u32;
    let v = |x: &mut u32| *x %= values;
    let p = |x: &mut u32| *x %= params;
    for r in &mut flat.regions {
        r.yields.iter_mut().for_each(v);
        for op in &mut r.ops {
            match op {
                FlatOp::Param(x)
                | FlatOp::Extent { param: x, .. }
                | FlatOp::Origin { param: x, .. } => p(x),
                FlatOp::Binary(_, a, b) | FlatOp::Cmp(_, a, b) => {
                    v(a);
                    v(b);
                }
                FlatOp::Unary(_, a) | FlatOp::Cast(_, a) | FlatOp::Bitcast(_, a) => v(a),
                FlatOp::Select(a, b, c) | FlatOp::Fma(a, b, c) => {
                    v(a);
                    v(b);
                    v(c);
                }
                FlatOp::Load(acc) => {
                    p(&mut acc.param);
                    acc.indices.iter_mut().for_each(v);
                }
                FlatOp::Store(acc, a) | FlatOp::Reduce(acc, _, a) => {
                    p(&mut acc.param);
                    acc.indices.iter_mut().for_each(v);
                    v(a);
                }
                FlatOp::Parallel { .. } | FlatOp::Const(_) => {}
                FlatOp::For { lo, hi, init, .. } => {
                    v(lo);
                    v(hi);
                    init.iter_mut().for_each(v);
                }
            }
        }
    }
}

fn arb_flat() -> impl Strategy<Value = FlatKernel> {
    let region = (
        prop::collection::vec(arb_op(), 0..6),
        prop::collection::vec(n(), 0..3),
    )
        .prop_map(|(ops, yields)| Region { ops, yields });
    (
        prop::collection::vec(arb_param(), 0..4),
        prop::collection::vec(region, 1..6),
        any::<bool>(),
        prop::collection::vec(any::<u32>(), 1..20),
    )
        .prop_map(|(params, regions, tree, seeds)| {
            let mut flat = FlatKernel {
                name: "fuzz".into(),
                params,
                regions,
            };
            if tree {
                make_tree(&mut flat, &seeds);
            }
            flat
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary flat kernels never make `from_flat`, `validate` or `print` panic, and what
    /// `from_flat` accepts survives every round trip.
    #[test]
    fn arbitrary_flat_kernels_never_panic(mut flat in arb_flat(), clear_yields in any::<bool>()) {
        if clear_yields {
            for r in &mut flat.regions {
                r.yields.clear();
            }
        }
        if let Ok(k) = from_flat(&flat) {
            let _ = validate(&k);
            prop_assert_eq!(&renumber(&k), &k);
            prop_assert_eq!(from_flat(&to_flat(&k)), Ok(k.clone()));
            let printed = text::print(&k);
            prop_assert_eq!(text::parse(&printed), Ok(k), "{}", printed);
        }
    }
}
