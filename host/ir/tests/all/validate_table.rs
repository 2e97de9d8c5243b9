//! A table of malformed kernels that the validator must reject, each with the substring its
//! message must contain.

#![allow(clippy::unwrap_used)]

use weft_ir::{
    Access, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, Privilege, Scalar, ValueId,
    text, validate,
};

/// Parameters shared by the text rows.
const PARAMS: &str = "%r: store<f64, 1, read>, %w: store<f64, 1, write>, \
    %rw: store<i64, 2, readwrite>, %sum: store<f64, 0, reduce(sum)>, \
    %bmax: store<bool, 1, reduce(max)>, %bsum: store<bool, 1, reduce(sum)>, %s: f64, %n: i64";

/// (name, body, expected substring).
const TEXT_ROWS: &[(&str, &str, &str)] = &[
    // Privileges.
    (
        "store through read",
        "parallel %r (%i) { %x = load %r[%i]\n store %r[%i], %x }",
        "in `store %arg0[%0], %1`: store through parameter 0 which is read-only",
    ),
    (
        "load through write",
        "parallel %w (%i) { %x = load %w[%i] }",
        "load through parameter 1 which is not readable (privilege write)",
    ),
    (
        "load through reduce",
        "%x = load %sum[]",
        "load through parameter 3 which is not readable (privilege reduce(sum))",
    ),
    (
        "store through reduce",
        "parallel %w (%i) { %x = const f64 1.0\n store %sum[], %x }",
        "store through parameter 3 which is not writable (privilege reduce(sum))",
    ),
    (
        "reduce with another op",
        "parallel %w (%i) { %x = const f64 1.0\n reduce max %sum[], %x }",
        "max reduction through parameter 3 whose privilege is reduce(sum)",
    ),
    (
        "reduce through write",
        "parallel %w (%i) { %x = const f64 1.0\n reduce sum %w[%i], %x }",
        "sum reduction through parameter 1 whose privilege is write",
    ),
    (
        "sum of bools",
        "parallel %bsum (%i) { %x = const bool true\n reduce sum %bsum[%i], %x }",
        "sum reduction of bools",
    ),
    (
        "stored value of the wrong type",
        "parallel %w (%i) { store %w[%i], %i }",
        "value %0 has type i64 but parameter 1 holds f64",
    ),
    (
        "reduced value of the wrong type",
        "parallel %bmax (%i) { reduce max %bmax[%i], %i }",
        "value %0 has type i64 but parameter 4 holds bool",
    ),
    // Binary operations.
    (
        "binary type mismatch",
        "%a = param %s\n%b = param %n\n%c = add %a, %b",
        "in `%2 = add %0, %1`: operand types differ: %0 is f64, %1 is i64",
    ),
    (
        "pow on integers",
        "%a = param %n\n%c = pow %a, %a",
        "`pow` needs float operands, got i64",
    ),
    (
        "and on floats",
        "%a = param %s\n%c = and %a, %a",
        "`and` needs integer or bool operands, got f64",
    ),
    (
        "xor on floats",
        "%a = const f32 1.0\n%c = xor %a, %a",
        "`xor` needs integer or bool operands, got f32",
    ),
    (
        "add on bools",
        "%a = const bool true\n%c = add %a, %a",
        "`add` needs number (not bool) operands, got bool",
    ),
    (
        "shl on floats",
        "%a = param %s\n%c = shl %a, %a",
        "in `%1 = shl %0, %0`: `shl` needs integer operands, got f64",
    ),
    (
        "shr on bools",
        "%a = const bool true\n%c = shr %a, %a",
        "`shr` needs integer operands, got bool",
    ),
    (
        "shr on f32",
        "%a = const f32 1.0\n%c = shr %a, %a",
        "`shr` needs integer operands, got f32",
    ),
    (
        "shift amount of another type",
        "%a = param %n\n%b = const i32 1\n%c = shl %a, %b",
        "operand types differ: %0 is i64, %1 is i32",
    ),
    // Bitcasts.
    (
        "bitcast f64 to i32",
        "%a = param %s\n%c = bitcast i32 %a",
        "in `%1 = bitcast i32 %0`: cannot bitcast f64 to i32",
    ),
    (
        "bitcast f64 to f32",
        "%a = param %s\n%c = bitcast f32 %a",
        "cannot bitcast f64 to f32",
    ),
    (
        "bitcast i64 to i32",
        "%a = param %n\n%c = bitcast i32 %a",
        "cannot bitcast i64 to i32",
    ),
    (
        "bitcast f32 to i64",
        "%a = const f32 1.0\n%c = bitcast i64 %a",
        "cannot bitcast f32 to i64",
    ),
    (
        "bitcast bool to i32",
        "%a = const bool true\n%c = bitcast i32 %a",
        "cannot bitcast bool to i32",
    ),
    (
        "bitcast i64 to bool",
        "%a = param %n\n%c = bitcast bool %a",
        "cannot bitcast i64 to bool",
    ),
    (
        "bitcast of an undefined value",
        "%c = bitcast i64 %zz\n%zz = param %s",
        "is used before its definition",
    ),
    // Unary operations.
    (
        "sqrt on an integer",
        "%a = param %n\n%c = sqrt %a",
        "`sqrt` needs a float operand, got i64",
    ),
    (
        "erf on a bool",
        "%a = const bool false\n%c = erf %a",
        "`erf` needs a float operand, got bool",
    ),
    (
        "not on a float",
        "%a = param %s\n%c = not %a",
        "`not` needs an integer or bool operand, got f64",
    ),
    (
        "neg on a bool",
        "%a = const bool true\n%c = neg %a",
        "`neg` needs a number (not bool) operand, got bool",
    ),
    (
        "abs on a bool",
        "%a = const bool true\n%c = abs %a",
        "`abs` needs a number (not bool) operand, got bool",
    ),
    // Comparisons and select.
    (
        "compare mismatch",
        "%a = param %s\n%b = const f32 1.0\n%c = lt %a, %b",
        "compared types differ: %0 is f64, %1 is f32",
    ),
    (
        "select condition not bool",
        "%a = param %s\n%c = select %a, %a, %a",
        "select condition %0 has type f64, expected bool",
    ),
    (
        "select arms differ",
        "%a = param %s\n%b = param %n\n%t = const bool true\n%c = select %t, %a, %b",
        "select arms differ in type: %0 is f64, %1 is i64",
    ),
    (
        "fma of mixed types",
        "%a = param %s\n%b = const f32 1.0\n%c = fma %a, %a, %b",
        "fma operands differ in type: %0 is f64, %1 is f32",
    ),
    (
        "fma of integers",
        "%a = param %n\n%c = fma %a, %a, %a",
        "fma needs float operands, got i64",
    ),
    // Accesses.
    (
        "index not i64",
        "parallel %w (%i) { %j = cast i32 %i\n %x = load %r[%j] }",
        "index %1 has type i32, expected i64",
    ),
    (
        "too few indices",
        "parallel %w (%i) { %x = load %rw[%i] }",
        "1 indices for parameter 2 of rank 2",
    ),
    (
        "too many indices",
        "parallel %w (%i) { %x = load %r[%i, %i] }",
        "2 indices for parameter 0 of rank 1",
    ),
    (
        "load through a scalar",
        "%z = const i64 0\n%x = load %s[%z]",
        "parameter 6 is a scalar (f64), not a store",
    ),
    // Extent, origin, param.
    (
        "extent dimension out of range",
        "%e = extent %r, 1",
        "dimension 1 out of range for parameter 0 of rank 1",
    ),
    (
        "origin of a rank-0 store",
        "%e = origin %sum, 0",
        "dimension 0 out of range for parameter 3 of rank 0",
    ),
    (
        "extent of a scalar",
        "%e = extent %n, 0",
        "parameter 7 is a scalar (i64), not a store",
    ),
    (
        "param of a store",
        "%p = param %r",
        "in `%0 = param %arg0`: parameter 0 is a store, not a scalar",
    ),
    // For loops.
    (
        "lower bound not i64",
        "%a = param %s\n%b = param %n\nfor %i = %a to %b { }",
        "lower bound %0 has type f64, expected i64",
    ),
    (
        "upper bound not i64",
        "%a = param %s\n%b = param %n\nfor %i = %b to %a { }",
        "upper bound %0 has type f64, expected i64",
    ),
    (
        "yield of the wrong type",
        "%a = param %s\n%b = param %n\n%res = for %i = %b to %b iter(%c = %a) { yield %i }",
        "yielded value %2 has type i64 but the carried value has type f64",
    ),
    (
        "missing yield",
        "%a = param %s\n%b = param %n\n%res = for %i = %b to %b iter(%c = %a) { }",
        "the body yields 0 values for 1 carried values",
    ),
    (
        "extra yield",
        "%b = param %n\nfor %i = %b to %b { yield %i }",
        "the body yields 1 values for 0 carried values",
    ),
    (
        "for results do not match init",
        "%b = param %n\n%res = for %i = %b to %b iter(%c = %b, %d = %b) { yield %c, %d }",
        "1 results, expected 2",
    ),
    // Results.
    (
        "value op without result",
        "%a = param %s\nadd %a, %a",
        "in `add %0, %0`: 0 results, expected 1",
    ),
    (
        "value op with two results",
        "%a, %b = const f64 1.0",
        "in `%0, %1 = const f64 1.0`: 2 results, expected 1",
    ),
    (
        "store with a result",
        "parallel %w (%i) { %x = const f64 1.0\n %y = store %w[%i], %x }",
        "1 results, expected 0",
    ),
    (
        "parallel with a result",
        "%p = parallel %w (%i) { }",
        "1 results, expected 0",
    ),
    // Parallel loops.
    (
        "parallel in parallel",
        "parallel %w (%i) { parallel %r (%j) { } }",
        "parallel loop nested in another loop",
    ),
    (
        "parallel in for",
        "%b = param %n\nfor %i = %b to %b { parallel %r (%j) { } }",
        "parallel loop nested in another loop",
    ),
    (
        "parallel with too few indices",
        "parallel %rw (%i) { }",
        "1 loop indices over parameter 2 of rank 2",
    ),
    (
        "parallel over a scalar",
        "parallel %s () { }",
        "parameter 6 is a scalar (f64), not a store",
    ),
    (
        "store outside a parallel loop",
        "%z = const i64 0\n%x = const f64 1.0\nstore %w[%z], %x",
        "store outside a parallel loop",
    ),
    (
        "reduction in a top-level for loop",
        "%b = param %n\nfor %i = %b to %b { %x = const f64 1.0\n reduce sum %sum[], %x }",
        "reduction outside a parallel loop",
    ),
    // Scopes.
    (
        "index used after its loop",
        "parallel %w (%i) { }\n%j = add %i, %i",
        "in `%1 = add %0, %0`: %0 is used outside the loop body that defines it",
    ),
    (
        "carried value used after its loop",
        "%b = param %n\n%res = for %i = %b to %b iter(%c = %b) { yield %c }\n%d = add %c, %res",
        "%2 is used outside the loop body that defines it",
    ),
    (
        "body value used after its loop",
        "%b = param %n\nfor %i = %b to %b { %x = const f64 1.0 }\n%y = neg %x",
        "%2 is used outside the loop body that defines it",
    ),
    (
        "use before definition",
        "%a = add %b, %b\n%b = const i64 1",
        "in `%0 = add %1, %1`: %1 is used before its definition",
    ),
    (
        "use of its own result",
        "%a = add %a, %a",
        "%0 is used before its definition",
    ),
    (
        "loop result used in its own body",
        "%b = param %n\n%res = for %i = %b to %b iter(%c = %b) { %d = add %res, %i\n yield %d }",
        "used before its definition",
    ),
    (
        "init uses the carried value",
        "%b = param %n\n%res = for %i = %b to %b iter(%c = %c) { yield %c }",
        "is used before its definition",
    ),
];

fn hand_rows() -> Vec<(&'static str, Kernel, &'static str)> {
    let store = |privilege| Param::Store {
        dtype: DType::F64,
        rank: 1,
        privilege,
    };
    let konst = |v: u32| Inst {
        results: vec![ValueId(v)],
        op: Op::Const(Scalar::I64(0)),
    };
    let kernel = |params: Vec<Param>, body: Vec<Inst>| Kernel {
        name: "hand".into(),
        params,
        body,
    };
    let for_loop = |init: Vec<u32>, carried: Vec<u32>, body: Vec<Inst>, results: Vec<u32>| Inst {
        results: results.into_iter().map(ValueId).collect(),
        op: Op::For(ForLoop {
            lo: ValueId(0),
            hi: ValueId(0),
            induction: ValueId(1),
            init: init.into_iter().map(ValueId).collect(),
            carried: carried.into_iter().map(ValueId).collect(),
            body,
            yields: vec![],
        }),
    };
    let mut deep = vec![];
    for _ in 0..70 {
        deep = vec![Inst {
            results: vec![],
            op: Op::Parallel(ParallelLoop {
                over: 0,
                indices: vec![],
                body: deep,
            }),
        }];
    }
    vec![
        (
            "value defined twice",
            kernel(vec![], vec![konst(0), konst(0)]),
            "in `%0 = const i64 0`: %0 is defined more than once",
        ),
        (
            "induction defined twice",
            kernel(
                vec![],
                vec![konst(0), for_loop(vec![], vec![], vec![konst(1)], vec![])],
            ),
            "%1 is defined more than once",
        ),
        (
            "value never defined",
            kernel(
                vec![],
                vec![Inst {
                    results: vec![ValueId(0)],
                    op: Op::Unary(weft_ir::UnaryOp::Neg, ValueId(5)),
                }],
            ),
            "in `%0 = neg %5`: %5 is never defined",
        ),
        (
            "param index out of range",
            kernel(
                vec![],
                vec![Inst {
                    results: vec![ValueId(0)],
                    op: Op::Param(5),
                }],
            ),
            "parameter index 5 is out of range (the kernel has 0 parameters)",
        ),
        (
            "load parameter out of range",
            kernel(
                vec![store(Privilege::Read)],
                vec![
                    konst(0),
                    Inst {
                        results: vec![ValueId(1)],
                        op: Op::Load(Access {
                            param: 3,
                            indices: vec![ValueId(0)],
                        }),
                    },
                ],
            ),
            "parameter index 3 is out of range (the kernel has 1 parameters)",
        ),
        (
            "parallel over a parameter out of range",
            kernel(
                vec![],
                vec![Inst {
                    results: vec![],
                    op: Op::Parallel(ParallelLoop {
                        over: 0,
                        indices: vec![],
                        body: vec![],
                    }),
                }],
            ),
            "parameter index 0 is out of range",
        ),
        (
            "carried values do not match init",
            kernel(
                vec![],
                vec![konst(0), for_loop(vec![0], vec![], vec![], vec![2])],
            ),
            "0 carried values for 1 initial values",
        ),
        (
            "value id above the limit",
            kernel(vec![], vec![konst(weft_ir::validate::MAX_VALUE_ID)]),
            "is not below the limit",
        ),
        (
            "loops nested too deep",
            kernel(
                vec![Param::Store {
                    dtype: DType::F64,
                    rank: 0,
                    privilege: Privilege::Read,
                }],
                deep,
            ),
            "loops nest more than 64 deep",
        ),
        (
            "rank above the limit",
            kernel(
                vec![Param::Store {
                    dtype: DType::F64,
                    rank: 17,
                    privilege: Privilege::Read,
                }],
                vec![],
            ),
            "parameter 0 (%arg0) has rank 17, more than the maximum 16",
        ),
    ]
}

#[test]
fn validator_rejects_malformed_kernels() {
    let mut failures = Vec::new();
    let mut rows: Vec<(String, Kernel, String)> = Vec::new();
    for (name, body, expected) in TEXT_ROWS {
        let src = format!("kernel @table({PARAMS}) {{\n{body}\n}}\n");
        match text::parse(&src) {
            Ok(k) => rows.push((name.to_string(), k, expected.to_string())),
            Err(e) => failures.push(format!("{name}: does not parse: {e}\n{src}")),
        }
    }
    for (name, k, expected) in hand_rows() {
        rows.push((name.to_string(), k, expected.to_string()));
    }
    assert!(rows.len() >= 20);
    for (name, k, expected) in &rows {
        match validate(k) {
            Ok(_) => failures.push(format!("{name}: accepted\n{}", text::print(k))),
            Err(e) => {
                assert_eq!(e.kernel, k.name);
                if !e.message.contains(expected.as_str()) {
                    failures.push(format!(
                        "{name}: message {:?} does not contain {expected:?}",
                        e.message
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn table_kernels_are_one_fix_away_from_valid() {
    // The shared parameters and a minimal body are valid, so each row fails for its own reason.
    let src = format!(
        "kernel @table({PARAMS}) {{\n%a = param %s\nparallel %w (%i) {{ store %w[%i], %a }}\n}}"
    );
    let k = text::parse(&src).unwrap();
    let types = validate(&k).unwrap();
    assert_eq!(types.of(ValueId(0)), DType::F64);
    assert_eq!(types.of(ValueId(1)), DType::I64);
    assert_eq!(types.get(ValueId(2)), None);
}

#[test]
fn error_display_names_the_kernel() {
    let k = text::parse("kernel @my.kernel() { %a = const bool true\n %b = neg %a }").unwrap();
    let e = validate(&k).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid kernel `my.kernel`: in `%1 = neg %0`: `neg` needs a number (not bool) operand, \
         got bool"
    );
}

#[test]
fn shifts_and_bitcasts_type_as_documented() {
    let src = "kernel @ok(%s: f64, %n: i64) {
  %a = param %s
  %b = param %n
  %c = bitcast i64 %a
  %d = bitcast f64 %b
  %e = shl %b, %c
  %f = shr %e, %b
  %g = const f32 1.0
  %h = bitcast i32 %g
  %i = bitcast f32 %h
  %j = shl %h, %h
  %k = shr %j, %h
  %l = bitcast f64 %a
  %m = const bool true
  %o = bitcast bool %m
  %p = bitcast i32 %k
}";
    let k = text::parse(src).unwrap();
    let t = validate(&k).unwrap();
    let want = [
        DType::F64,
        DType::I64,
        DType::I64,
        DType::F64,
        DType::I64,
        DType::I64,
        DType::F32,
        DType::I32,
        DType::F32,
        DType::I32,
        DType::I32,
        DType::F64,
        DType::Bool,
        DType::Bool,
        DType::I32,
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(t.of(ValueId(i as u32)), *w, "%{i}");
    }
    for from in DType::VALUES {
        for to in DType::VALUES {
            let ok = weft_ir::validate::bitcast_ok(from, to);
            assert_eq!(
                ok,
                from == to || (from.size() == to.size() && from.is_float() != to.is_float())
            );
        }
    }
}

#[test]
fn unsigned_storage_types_hold_i64_values_and_nothing_else() {
    let ok = text::parse(
        "kernel @u(%a: store<u8, 1, read>, %b: store<u64, 1, write>, %c: store<i64, 1, write>) {\n\
         parallel %b (%i) { %x = load %a[%i]\n %y = add %x, %x\n store %b[%i], %y\n \
         store %c[%i], %x }\n}",
    )
    .unwrap();
    let types = validate(&ok).unwrap();
    assert_eq!(
        types.of(ValueId(1)),
        DType::I64,
        "a u8 load gives an i64 value"
    );
    // The interpreter's storages hold the i64 values a load gives.
    let st = weft_ir::interp::Storage::from_f64(DType::U8, &[300.0, -1.0, 7.9]);
    assert_eq!(st.data, [Scalar::I64(44), Scalar::I64(255), Scalar::I64(7)]);
    let refused = [
        (
            "%a: store<u16, 1, reduce(sum)>",
            "parallel %a (%i) { %x = const i64 1\n reduce sum %a[%i], %x }",
            "holds u16 with privilege reduce(sum): the unsigned storage types take no reductions",
        ),
        (
            "%s: u32, %a: store<i64, 1, write>",
            "%x = param %s",
            "parameter 0 (%arg0) is a u32 scalar",
        ),
        (
            "%a: store<u8, 1, write>",
            "parallel %a (%i) { %x = cast u8 %i\n store %a[%i], %x }",
            "no value has type u8",
        ),
        (
            "%a: store<u32, 1, write>",
            "parallel %a (%i) { %x = const i32 1\n store %a[%i], %x }",
            "value %1 has type i32 but parameter 0 holds u32",
        ),
    ];
    for (params, body, expected) in refused {
        let src = format!("kernel @u({params}) {{\n{body}\n}}\n");
        let k = text::parse(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let e = validate(&k).expect_err(&src);
        assert!(e.message.contains(expected), "{src}: {}", e.message);
    }
}
