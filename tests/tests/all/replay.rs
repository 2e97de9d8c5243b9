//! Numeric calls replayed from recordings (`weft_plugin::replay`): a call made again with the
//! same operation and options is made by the host alone, and must give what the real call
//! gives: the same bits, the same errors, the same aliasing, whatever the shapes and views.

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use weft::numeric::{BinaryOp, UnaryOp};
use weft::{Array, Config, Ix, Numeric, Range};
use weft_ir::DType;

fn numeric(replay: bool) -> Numeric {
    let np = weft_tests::numeric_with(Config {
        threads: 2,
        pieces: 2,
        component_cache: None,
        ..Config::default()
    });
    np.set_call_replay(replay);
    np
}

/// Every array's elements, or its error's text.
fn read(arrays: &[Array]) -> Vec<Result<Vec<u64>, String>> {
    arrays
        .iter()
        .map(|a| {
            a.to_vec()
                .map(|v| v.iter().map(|x| x.to_bits()).collect())
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// One step of a random program over a pool of arrays.
#[derive(Clone, Debug)]
enum Step {
    Binary(u8, usize, Option<usize>, f64),
    Unary(u8, usize),
    Slice(usize, i64, i64),
    Assign(usize, i64, i64, usize),
    Sum(usize),
    Select(usize, usize),
    Astype(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let at = 0usize..64;
    prop_oneof![
        (
            0u8..5,
            at.clone(),
            prop::option::of(0usize..64),
            -2.0f64..2.0
        )
            .prop_map(|(o, a, b, s)| Step::Binary(o, a, b, s)),
        (0u8..3, at.clone()).prop_map(|(o, a)| Step::Unary(o, a)),
        (at.clone(), -3i64..12, -3i64..12).prop_map(|(a, lo, hi)| Step::Slice(a, lo, hi)),
        (at.clone(), 0i64..12, 0i64..12, at.clone())
            .prop_map(|(a, lo, hi, b)| Step::Assign(a, lo, hi, b)),
        at.clone().prop_map(Step::Sum),
        (at.clone(), at.clone()).prop_map(|(a, b)| Step::Select(a, b)),
        at.prop_map(Step::Astype),
    ]
}

/// Runs `program` on fresh inputs and returns every array it made or changed.
fn run(np: &Numeric, program: &[Step]) -> Vec<Array> {
    let mut pool = vec![
        np.arange(0.0, 12.0, 1.0, DType::F64),
        np.linspace(-1.0, 1.0, 12, DType::F64),
        np.arange(0.0, 6.0, 1.0, DType::F64),
    ];
    for s in program {
        let pick = |i: usize| pool[i % pool.len()].clone();
        let made = match *s {
            Step::Binary(op, a, b, scalar) => {
                let op = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Maximum,
                ][op as usize];
                match b {
                    Some(b) => pick(a).binary(op, &pick(b)),
                    None => pick(a).binary(op, scalar),
                }
            }
            Step::Unary(op, a) => {
                pick(a).unary([UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Exp][op as usize])
            }
            Step::Slice(a, lo, hi) => pick(a).slice(&[Range::new(lo, hi)]),
            Step::Assign(a, lo, hi, b) => {
                let dst = pick(a).slice(&[Range::new(lo, hi)]);
                match dst.assign(&pick(b)) {
                    Ok(()) => dst,
                    Err(_) => continue,
                }
            }
            Step::Sum(a) => pick(a).sum(),
            Step::Select(a, b) => {
                let (x, y) = (pick(a), pick(b));
                x.gt(&y).select(&x, &y)
            }
            Step::Astype(a) => pick(a).astype(DType::F32).astype(DType::F64),
        };
        pool.push(made);
    }
    pool
}

/// Random programs, each run three times on one runtime that replays calls (the first run
/// records them, the later ones replay what still matches) and on one that never does: the
/// arrays and errors are the same, run by run. The recordings outlive each program, so
/// programs also replay (or miss) each other's calls.
#[test]
fn replayed_programs_give_the_bits_and_errors_of_real_calls() {
    let (on, off) = (numeric(true), numeric(false));
    let mut runner = TestRunner::new(ProptestConfig::with_cases(40));
    let result = runner.run(&prop::collection::vec(step(), 1..14), |program| {
        for round in 0..3 {
            let want = read(&run(&off, &program));
            let got = read(&run(&on, &program));
            prop_assert_eq!(got, want, "round {}", round);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let stats = on.replay_stats();
    // Recordings are kept by the shapes of the stores lent, so these programs rarely miss;
    // the misses are the overlap test's below.
    assert!(
        stats.replayed > 200,
        "the programs replayed calls: {stats:?}"
    );
    assert_eq!(off.replay_stats().replayed, 0, "replay off replays nothing");
}

/// A Jacobi sweep in a loop: after the first step every call is a replay, and the grid is the
/// one that real calls give.
#[test]
fn a_time_step_loop_is_replayed_after_its_first_step() {
    let sweep = |np: &Numeric| {
        let n = 40;
        let a = np.linspace(0.0, 1.0, n, DType::F64);
        let b = np.zeros(&[n], DType::F64);
        let n = n as i64;
        for _ in 0..6 {
            for (from, to) in [(&a, &b), (&b, &a)] {
                let s = |lo, hi| from.slice(&[Range::new(lo, hi)]);
                let sum = &(&s(0, n - 2) + &s(1, n - 1)) + &s(2, n);
                to.slice(&[Range::new(1, n - 1)])
                    .assign(&(sum * 0.33333))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        a.to_vec().unwrap_or_else(|e| panic!("{e}"))
    };
    let (on, off) = (numeric(true), numeric(false));
    assert_eq!(sweep(&on), sweep(&off));
    let stats = on.replay_stats();
    // Per sweep: 4 slices (made by the host alone), 2 adds, 1 multiply and 1 assign; 12
    // sweeps.
    assert_eq!(stats.host_views, 12 * 4, "{stats:?}");
    assert_eq!(stats.replayed + stats.recorded, 12 * 4, "{stats:?}");
    assert!(stats.recorded <= 4 * 2, "{stats:?}");
    assert_eq!(stats.missed, 0, "{stats:?}");
}

/// Reductions make their output holding the identity, uploaded by the plugin
/// (`store-from-bytes`): a loop of them is recorded with that element and replayed after its
/// first step, with the bits of real calls, whatever the output's size (a product's
/// 600-element output, past the bound on bytes recorded whole). The scaled operand (its
/// scalar part of the call) is made for real every step.
#[test]
fn a_loop_of_reductions_is_replayed_with_what_it_uploaded() {
    let steps = |np: &Numeric, n: u64| {
        let x = np.linspace(-1.0, 2.0, n, DType::F64);
        let m = np
            .linspace(0.0, 1.0, n * 3, DType::F64)
            .reshape(&[3, n as i64]);
        let wide = np
            .linspace(0.0, 1.0, 600 * 1000, DType::F64)
            .reshape(&[600, 1000]);
        let v = np.linspace(1.0, 3.0, 1000, DType::F64);
        let mut out = Vec::new();
        for i in 0..5 {
            let x = &x * (1.0 + i as f64);
            let dot = x.matmul(&x);
            let total = x.sum();
            let top = x.max();
            let rows = m.matmul(&x);
            let cols = x.matmul(&m.t());
            let long = wide.matmul(&v);
            for a in [dot, total, top, rows, cols, long] {
                out.push(a.to_vec().unwrap_or_else(|e| panic!("{e}")));
            }
        }
        out
    };
    let (on, off) = (numeric(true), numeric(false));
    assert_eq!(
        steps(&on, 16),
        steps(&off, 16),
        "replayed against real calls"
    );
    let stats = on.replay_stats();
    // The 4 steps after the first replay all six products and reductions.
    assert!(stats.replayed >= 4 * 6, "{stats:?}");
    assert_eq!(stats.missed, 0, "{stats:?}");
}

/// Calls on stores of other shapes are recorded apart: each replays its own recording, and a
/// call that fails (a shape error) is the real call, with the real call's error.
#[test]
fn calls_on_other_shapes_are_recorded_apart() {
    let np = numeric(true);
    let x = np.arange(0.0, 4.0, 1.0, DType::F64);
    let y = np.arange(0.0, 6.0, 1.0, DType::F64).reshape(&[2, 3]);
    let plus = |a: &Array, b: &Array| a + b;
    for _ in 0..2 {
        assert_eq!(plus(&x, &x).to_vec().ok(), Some(vec![0.0, 2.0, 4.0, 6.0]));
        assert_eq!(
            plus(&y, &y).to_vec().ok(),
            Some(vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0])
        );
    }
    let stats = np.replay_stats();
    assert_eq!(
        (stats.recorded, stats.replayed, stats.missed),
        // `reshape`, `x + x`, `y + y`: recorded once each.
        (3, 2, 0),
        "{stats:?}"
    );
    let replayed = plus(&x, &y).to_vec().map_err(|e| e.to_string());
    let real = {
        let off = numeric(false);
        let x = off.arange(0.0, 4.0, 1.0, DType::F64);
        let y = off.arange(0.0, 6.0, 1.0, DType::F64).reshape(&[2, 3]);
        plus(&x, &y).to_vec().map_err(|e| e.to_string())
    };
    let err = replayed.expect_err("(4,) + (2, 3) does not broadcast");
    assert!(
        err.contains("numeric") && err.contains("broadcast"),
        "{err}"
    );
    assert_eq!(Err(err), real);
}

/// A loop over shrinking slices (`trisolv`'s `L[i, :i] @ x[:i]`) makes one recording per
/// shape: 6,000 of them, more than the 4,096 recordings once kept (which dropped them all and
/// so recorded every call again on every pass), are kept, and the second pass replays every
/// call with the first pass's bits.
#[test]
fn a_loop_over_thousands_of_shapes_is_replayed_on_its_next_pass() {
    let np = numeric(true);
    let n = 6000i64;
    let x = np.arange(0.0, n as f64, 1.0, DType::F64);
    let pass = || -> Vec<u64> {
        let mut sums = Vec::new();
        for i in 1..=n {
            let head = x.slice(&[Range::new(0, i)]);
            let v = (&head * 0.5).sum().to_vec().expect("sum");
            sums.push(v[0].to_bits());
        }
        sums
    };
    let first = pass();
    let after_first = np.replay_stats();
    let second = pass();
    let after_second = np.replay_stats();
    assert_eq!(first, second);
    // Every `head * 0.5` and every `sum` has its own shape: recorded on the first pass,
    // replayed on the second, none recorded again.
    assert_eq!(
        after_second.recorded, after_first.recorded,
        "{after_first:?} -> {after_second:?}"
    );
    assert!(
        after_second.replayed - after_first.replayed >= 2 * n as u64,
        "{after_first:?} -> {after_second:?}"
    );
    assert_eq!(after_second.missed, 0, "{after_second:?}");
    // Their bits are the real calls': the closed form of the sum of `0.5 k` for `k < i`
    // is exact in `f64` here.
    for (i, bits) in (1..=n).zip(&first) {
        let want = 0.25 * (i * (i - 1)) as f64;
        assert_eq!(f64::from_bits(*bits), want, "i = {i}");
    }
}

/// `a[1:5] = a[0:4]` reads what it overwrites: recorded on arrays that do not overlap and
/// replayed on views that do, the assignment still copies as NumPy does.
#[test]
fn a_replay_keeps_the_aliasing_of_real_calls() {
    let np = numeric(true);
    let a = np.arange(0.0, 6.0, 1.0, DType::F64);
    let b = np.arange(10.0, 16.0, 1.0, DType::F64);
    for src in [&b, &a, &b, &a] {
        let dst = np.arange(0.0, 6.0, 1.0, DType::F64);
        let from = if std::ptr::eq(src, &a) { &dst } else { src };
        dst.slice(&[Range::new(1, 5)])
            .assign(&from.slice(&[Range::new(0, 4)]))
            .unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<f64> = if std::ptr::eq(src, &a) {
            vec![0.0, 0.0, 1.0, 2.0, 3.0, 5.0]
        } else {
            vec![0.0, 10.0, 11.0, 12.0, 13.0, 5.0]
        };
        assert_eq!(dst.to_vec().ok(), Some(want));
    }
    // The later assignments found the recording of an earlier one; on views that overlap
    // where its arrays did not, its answers differ and the real call copies.
    let stats = np.replay_stats();
    assert!(stats.missed > 0, "{stats:?}");
}

/// Basic indexing made by the host alone (replay on) against the plugin's own (replay off):
/// random arrays of rank 1 to 3 and random subscripts (positions in and out of range, slices
/// with any bounds and steps, zero steps, new axes), read back with their shapes or their
/// errors' texts; then written through, which must change the array the view is of.
#[test]
fn basic_indexing_made_by_the_host_is_the_plugins() {
    let (on, off) = (numeric(true), numeric(false));
    let subscript = prop_oneof![
        (-7i64..7).prop_map(Ix::At),
        (
            prop::option::of(-8i64..8),
            prop::option::of(-8i64..8),
            prop::option::of(-3i64..4)
        )
            .prop_map(|(start, stop, step)| Ix::Slice(Range { start, stop, step })),
        Just(Ix::NewAxis),
    ];
    let case = (
        prop::collection::vec(1i64..6, 1..4),
        prop::collection::vec(subscript, 0..4),
    );
    let mut runner = TestRunner::new(ProptestConfig::with_cases(300));
    let result = runner.run(&case, |(shape, subscripts)| {
        let outcome = |np: &Numeric| {
            let n: i64 = shape.iter().product();
            let a = np.arange(0.0, n as f64, 1.0, DType::F64).reshape(&shape);
            let view = a.index(&subscripts);
            let shape = view.shape().map_err(|e| e.to_string());
            let values = read(std::slice::from_ref(&view));
            let written = view.assign(&(&view * 2.0 + 1.0)).map_err(|e| e.to_string());
            (shape, values, written, read(&[a]))
        };
        prop_assert_eq!(outcome(&on), outcome(&off), "{:?}", subscripts);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let stats = on.replay_stats();
    assert!(
        stats.host_views > 100,
        "the host made most views: {stats:?}"
    );
    assert_eq!(off.replay_stats().host_views, 0, "replay off makes none");
}
