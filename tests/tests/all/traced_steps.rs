//! Time-stepped loops run as replayed traces (`Numeric::repeat`, `weft_runtime::trace`): the
//! replayed steps give the bits of the loop written out, and a step that a replay would not
//! reproduce (a host read, a scalar that changes, an array kept past the step) is never
//! replayed.

use weft::{Array, Ix, Numeric, Range, RepeatStats};
use weft_ir::DType;

/// An `n` x `n` grid of values that are not round.
fn grid(np: &Numeric, n: u64) -> Array {
    np.linspace(-1.3, 2.9, n * n, DType::F64)
        .sin()
        .reshape(&[n as i64, n as i64])
}

/// Rows or columns `lo..hi` of every dimension.
fn s(a: &Array, r: &[(i64, i64)]) -> Array {
    let ix: Vec<Ix> = r
        .iter()
        .map(|&(lo, hi)| Ix::Slice(Range::new(lo, hi)))
        .collect();
    a.index(&ix)
}

/// One Jacobi sweep from `f` into `to` (NPBench's `jacobi_2d`).
fn sweep(f: &Array, to: &Array, n: i64) -> weft::Result<()> {
    let (i, lo, hi) = ((1, n - 1), (0, n - 2), (2, n));
    let sum = &(&(&(&s(f, &[i, i]) + &s(f, &[i, lo])) + &s(f, &[i, hi])) + &s(f, &[hi, i]))
        + &s(f, &[lo, i]);
    s(to, &[i, i]).assign(&(sum * 0.2))
}

fn bits(a: &Array) -> Vec<u64> {
    a.to_vec()
        .expect("the array reads")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The same sweeps in plain Rust.
fn reference(a: &mut [f64], b: &mut [f64], n: usize, steps: usize) {
    let one = |f: &[f64], to: &mut [f64]| {
        for r in 1..n - 1 {
            for c in 1..n - 1 {
                let at = |r: usize, c: usize| f[r * n + c];
                to[r * n + c] = ((((at(r, c) + at(r, c - 1)) + at(r, c + 1)) + at(r + 1, c))
                    + at(r - 1, c))
                    * 0.2;
            }
        }
    };
    for _ in 0..steps {
        one(a, b);
        one(b, a);
    }
}

#[test]
fn a_repeated_stencil_step_replays_with_the_bits_of_the_loop_written_out() {
    let (n, steps) = (40u64, 12);
    let plain = weft_tests::numeric(2);
    let (a0, b0) = (grid(&plain, n), grid(&plain, n) * 0.5);
    for _ in 0..steps {
        sweep(&a0, &b0, n as i64).expect("a sweep");
        sweep(&b0, &a0, n as i64).expect("a sweep");
    }

    let np = weft_tests::numeric(2);
    let (a, b) = (grid(&np, n), grid(&np, n) * 0.5);
    let (mut ra, mut rb) = (a.to_vec().expect("reads"), b.to_vec().expect("reads"));
    let stats = np
        .repeat(steps, |_| {
            sweep(&a, &b, n as i64)?;
            sweep(&b, &a, n as i64)
        })
        .expect("the loop runs");
    assert_eq!(
        stats,
        RepeatStats {
            steps_run: 3,
            steps_replayed: steps - 3
        },
        "the first step runs, the next two are recorded, the rest replayed"
    );
    let replayed = np.runtime(|rt| rt.stats());
    assert_eq!(replayed.steps_replayed, (steps - 3) as u64);
    assert!(replayed.launches_replayed >= replayed.steps_replayed);
    assert_eq!(bits(&a), bits(&a0));
    assert_eq!(bits(&b), bits(&b0));

    reference(&mut ra, &mut rb, n as usize, steps);
    let got = a.to_vec().expect("reads");
    for (g, w) in got.iter().zip(&ra) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} against {w}");
    }
}

/// Runs `steps` steps of `step` through `repeat` and as a plain loop, on two runtimes, and
/// returns the repeat's stats; `step` gets the runtime and its step number, and its arrays
/// come from `make`.
fn both<S>(
    steps: usize,
    make: impl Fn(&Numeric) -> S,
    step: impl Fn(&Numeric, &S, usize) -> weft::Result<()>,
    read: impl Fn(&S) -> Vec<u64>,
) -> RepeatStats {
    both_in(2, steps, make, step, read)
}

/// [`both`], with launches split into `pieces` points.
fn both_in<S>(
    pieces: u64,
    steps: usize,
    make: impl Fn(&Numeric) -> S,
    step: impl Fn(&Numeric, &S, usize) -> weft::Result<()>,
    read: impl Fn(&S) -> Vec<u64>,
) -> RepeatStats {
    let plain = weft_tests::numeric(pieces);
    let state = make(&plain);
    for k in 0..steps {
        step(&plain, &state, k).expect("a plain step");
    }
    let np = weft_tests::numeric(pieces);
    let repeated = make(&np);
    let stats = np
        .repeat(steps, |k| step(&np, &repeated, k))
        .expect("the loop runs");
    assert_eq!(read(&repeated), read(&state), "{stats:?}");
    assert_eq!(stats.steps_run + stats.steps_replayed, steps);
    stats
}

#[test]
fn a_step_that_reads_on_the_host_is_never_replayed() {
    let stats = both(
        8,
        |np| grid(np, 16),
        |_, a, _| {
            a.assign(&(a * 0.75 + 0.25))?;
            // A host read in the step: a replay would not make it.
            let _ = a.to_vec()?;
            Ok(())
        },
        bits,
    );
    assert_eq!(stats.steps_replayed, 0);
}

#[test]
fn a_step_whose_scalars_change_is_never_replayed() {
    let stats = both(
        8,
        |np| grid(np, 16),
        |_, a, k| a.assign(&(a * (1.0 + k as f64 / 8.0))),
        bits,
    );
    assert_eq!(stats.steps_replayed, 0);
}

#[test]
fn a_step_that_keeps_an_array_is_never_replayed() {
    let kept = std::cell::RefCell::new(Vec::new());
    let stats = both(
        6,
        |np| grid(np, 16),
        |_, a, _| {
            a.assign(&(a * 0.5 - 1.0))?;
            kept.borrow_mut().push(a.copy());
            Ok(())
        },
        bits,
    );
    assert_eq!(stats.steps_replayed, 0);
    // Each copy holds its step's values: the last two plain and repeated copies agree.
    let kept = kept.into_inner();
    assert_eq!(kept.len(), 12);
    assert_eq!(bits(&kept[5]), bits(&kept[11]));
}

#[test]
fn a_step_with_a_reduction_gives_the_loops_bits() {
    both(
        9,
        |np| grid(np, 24),
        |_, a, _| a.assign(&(a / &(a.sum() * 0.01 + 3.0))),
        bits,
    );
}

#[test]
fn an_error_in_a_recorded_step_ends_the_loop_and_the_runtime_keeps_running() {
    let np = weft_tests::numeric(2);
    let a = grid(&np, 8);
    let mut ran = 0;
    let result = np.repeat(10, |k| {
        ran += 1;
        a.assign(&(&a * 2.0))?;
        if k == 1 {
            // The second step is the first recorded: a shape mismatch there.
            a.assign(&np.ones(&[3, 4], DType::F64))?;
        }
        Ok(())
    });
    let err = result.expect_err("the mismatch is reported");
    assert!(err.to_string().contains("shape"), "{err}");
    assert_eq!(ran, 2, "no step runs after the failing one");
    // The back end is back in place: arrays are made, computed and read.
    let v = (np.arange(0.0, 4.0, 1.0, DType::F64) * 3.0)
        .to_vec()
        .expect("the runtime keeps running");
    assert_eq!(v, vec![0.0, 3.0, 6.0, 9.0]);
    let twice = bits(&(grid(&np, 8) * 4.0));
    assert_eq!(bits(&a), twice, "the two steps before the error landed");
}

/// A step that writes `src[f(k)]` into a row and updates the grid (as NPBench's `fdtd_2d`
/// does with `_fict_[t]`).
fn moving_step(
    f: impl Fn(usize) -> i64,
) -> impl Fn(&Numeric, &(Array, Array), usize) -> weft::Result<()> {
    move |_, (a, src), k| {
        a.index(&[Ix::At(0)]).assign(&src.index(&[Ix::At(f(k))]))?;
        let body = s(a, &[(1, 16), (0, 16)]);
        body.assign(&(&(&body * 0.5) + &(&s(a, &[(0, 15), (0, 16)]) * 0.25)))
    }
}

fn moving_state(np: &Numeric) -> (Array, Array) {
    (grid(np, 16), np.linspace(0.5, 7.5, 40, DType::F64).exp())
}

#[test]
fn a_view_that_moves_the_same_amount_each_step_is_replayed_moved() {
    let stats = both(
        12,
        moving_state,
        moving_step(|k| 1 + 3 * k as i64),
        |(a, _)| bits(a),
    );
    assert_eq!(
        stats,
        RepeatStats {
            steps_run: 4,
            steps_replayed: 8
        },
        "a run step, three recordings to see the view move by the same amount, replays"
    );
}

#[test]
fn a_view_that_moves_by_changing_amounts_is_never_replayed() {
    let stats = both(
        8,
        moving_state,
        moving_step(|k| (k * k) as i64 % 40),
        |(a, _)| bits(a),
    );
    assert_eq!(stats.steps_replayed, 0);
}

#[test]
fn a_view_that_grows_by_the_same_amount_each_step_is_replayed_grown() {
    // `a[:k + 1] = a[:k + 1] * 0.5 + src[k]`: the view's extent and the scalar's offset move.
    // In one piece: split in two, the pieces' extents would not grow by the same amount.
    let step = |_: &Numeric, (a, src): &(Array, Array), k: usize| {
        let k = k as i64;
        let head = a.slice(&[Range::new(0, k + 1)]);
        head.assign(&(&(&head * 0.5) + &src.index(&[Ix::At(k)])))
    };
    let state = |np: &Numeric| {
        (
            np.linspace(-2.0, 3.0, 64, DType::F64).sin(),
            np.linspace(0.25, 9.0, 64, DType::F64).exp(),
        )
    };
    let stats = both_in(1, 20, state, step, |(a, _)| bits(a));
    assert_eq!(
        stats,
        RepeatStats {
            steps_run: 4,
            steps_replayed: 16
        }
    );
    // In two pieces the recordings differ by more than a fixed amount: never replayed.
    let stats = both_in(2, 20, state, step, |(a, _)| bits(a));
    assert_eq!(stats.steps_replayed, 0);
}

#[test]
fn a_step_whose_temporary_grows_by_the_same_amount_is_replayed_with_it() {
    // NPBench's `durbin`: `y[:k] += alpha * flip(y[:k])` reads the view it writes, so the
    // product goes to a temporary of `k` elements, one more each step; `alpha` and `beta`
    // are 0-d arrays updated in place.
    let n = 40usize;
    let state = |np: &Numeric| {
        let r = np.linspace(3.0, 1.0, n as u64, DType::F64);
        let y = np.zeros(&[n as u64], DType::F64);
        let alpha = -&r.index(&[Ix::At(0)]);
        y.index(&[Ix::At(0)]).assign(&alpha).expect("y[0]");
        (r, y, alpha, np.ones(&[], DType::F64))
    };
    let step = |_: &Numeric, (r, y, alpha, beta): &(Array, Array, Array, Array), k: usize| {
        let k = k as i64 + 1;
        let flip = |v: &Array| v.index(&[Ix::Slice(Range::all().step(-1))]);
        let mut beta = beta.clone();
        beta *= &(1.0 - &(alpha * alpha));
        let head = Ix::Slice(Range::new(0, k));
        let dot = flip(&r.index(&[head])).dot(&y.index(&[head]));
        alpha.assign(&(-(&r.index(&[Ix::At(k)]) + &dot) / &beta))?;
        let mut y_head = y.index(&[head]);
        y_head += &(alpha * &flip(&y.index(&[head])));
        y.index(&[Ix::At(k)]).assign(alpha)
    };
    let stats = both_in(1, n - 1, state, step, |(_, y, _, _)| bits(y));
    assert!(stats.steps_replayed >= n - 8, "{stats:?}");
    both_in(2, n - 1, state, step, |(_, y, _, _)| bits(y));
}

#[test]
fn a_loop_whose_first_steps_differ_replays_once_they_settle() {
    // The view read moves by 3, 5, 7, ... elements (`k * k`) while `k < 6`, then stays: the
    // first four recordings do not settle, the steps run as they are, and the next round of
    // recordings, 16 steps later, settles and replays the rest (with the loop's bits).
    let step = |_: &Numeric, (a, src): &(Array, Array), k: usize| {
        let at = (k.min(6) * k.min(6)) as i64;
        a.assign(&(&(a * 0.5) + &src.index(&[Ix::At(at)])))
    };
    let state = |np: &Numeric| {
        (
            np.linspace(-1.0, 2.0, 32, DType::F64).sin(),
            np.linspace(0.5, 4.0, 64, DType::F64).exp(),
        )
    };
    let stats = both_in(1, 60, state, step, |(a, _)| bits(a));
    assert_eq!(
        stats,
        RepeatStats {
            steps_run: 23,
            steps_replayed: 37
        }
    );
}

#[test]
fn a_triangular_solve_replays_its_rows_dot_products_with_the_loops_bits() {
    // NPBench's `trisolv`: each row's dot product grows by one term and is folded by the
    // executor, in the replays as in the loop.
    let n = 48;
    let state = |np: &Numeric| {
        let l =
            (np.linspace(0.5, 3.5, n * n, DType::F64).cos() + 2.5).reshape(&[n as i64, n as i64]);
        (
            l,
            np.linspace(-1.0, 2.0, n, DType::F64),
            np.zeros(&[n], DType::F64),
        )
    };
    let step = |_: &Numeric, (l, b, x): &(Array, Array, Array), i: usize| {
        let i = i as i64;
        let dot = l
            .index(&[Ix::At(i), Ix::Slice(Range::new(0, i))])
            .matmul(&x.slice(&[Range::new(0, i)]));
        let value = (&b.index(&[Ix::At(i)]) - &dot) / &l.index(&[Ix::At(i), Ix::At(i)]);
        x.index(&[Ix::At(i)]).assign(&value)
    };
    // In one piece the rows' launches change by fixed amounts; in two, their pieces do not
    // (the loop's bits either way).
    let stats = both_in(1, n as usize, state, step, |(_, _, x)| bits(x));
    assert!(stats.steps_replayed >= n as usize - 8, "{stats:?}");
    both_in(2, n as usize, state, step, |(_, _, x)| bits(x));
    let runtime = weft_tests::numeric(1);
    let (l, b, x) = state(&runtime);
    for i in 0..n as usize {
        step(&runtime, &(l.clone(), b.clone(), x.clone()), i).expect("a row");
    }
    // Against plain Rust: the solve's residual is tiny.
    let (lv, bv, xv) = (
        l.to_vec().expect("reads"),
        b.to_vec().expect("reads"),
        x.to_vec().expect("reads"),
    );
    let n = n as usize;
    for r in 0..n {
        let lhs: f64 = (0..=r).map(|c| lv[r * n + c] * xv[c]).sum();
        assert!((lhs - bv[r]).abs() < 1e-9 * bv[r].abs().max(1.0), "row {r}");
    }
}

#[test]
fn a_repeated_loop_inside_a_repeated_step_gives_the_loops_bits() {
    // An inner loop (`syrk`'s over `k`) inside an outer repeated step: the inner loop
    // records nothing of its own while the outer step is recorded, and both give the bits
    // of the loops written out.
    let (n, inner) = (12u64, 6usize);
    let state = |np: &Numeric| (grid(np, n), np.linspace(0.1, 0.9, n * n, DType::F64));
    let step = |np: &Numeric, (a, src): &(Array, Array), _: usize| -> weft::Result<()> {
        np.repeat(inner, |k| {
            let k = k as i64;
            let row = a.index(&[Ix::At(k)]);
            row.assign(&(&(&row * 0.5) + &src.slice(&[Range::new(k, k + n as i64)])))
        })?;
        a.assign(&(a * 0.75))
    };
    let plain = weft_tests::numeric(2);
    let (a0, src0) = state(&plain);
    for _ in 0..7 {
        for k in 0..inner as i64 {
            let row = a0.index(&[Ix::At(k)]);
            row.assign(&(&(&row * 0.5) + &src0.slice(&[Range::new(k, k + n as i64)])))
                .expect("a row");
        }
        a0.assign(&(&a0 * 0.75)).expect("a scaling");
    }
    let np = weft_tests::numeric(2);
    let s = state(&np);
    let stats = np.repeat(7, |k| step(&np, &s, k)).expect("the loops run");
    assert_eq!(bits(&s.0), bits(&a0), "{stats:?}");
    assert!(stats.steps_replayed > 0, "{stats:?}");
}

#[test]
fn a_trace_replayed_on_another_runtime_is_refused() {
    let (one, other) = (weft_tests::numeric(1), weft_tests::numeric(1));
    let a = grid(&one, 8);
    let b = grid(&other, 8);
    let step = |a: &Array| a.assign(&(a * 0.5));
    // A first step each, so that the recorded one compiles nothing.
    step(&a).expect("a step");
    step(&b).expect("a step");
    one.runtime(|rt| rt.begin_trace())
        .expect("recording begins");
    step(&a).expect("a step");
    let trace = one
        .runtime(|rt| rt.end_trace())
        .expect("recording ends")
        .expect("an in-place step traces");
    let before = bits(&b);
    let err = other
        .runtime(|rt| rt.replay_trace(&trace, 1))
        .expect_err("another runtime's trace is refused");
    assert!(err.to_string().contains("another runtime"), "{err}");
    assert_eq!(bits(&b), before, "nothing ran");
    // On its own runtime it replays.
    assert!(
        one.runtime(|rt| rt.replay_trace(&trace, 1))
            .expect("replays")
    );
}

/// `repeat_while`: a loop that stops on a value each step computes (the change of a sum, as
/// NPBench's `channel_flow` stops on `udiff`) takes as many steps as the same loop written
/// out with a host read in each step, with the same bits, and replays its later steps; it
/// stops after `max_steps` when the test never fails.
#[test]
fn a_loop_that_tests_each_step_replays_and_stops_where_the_loop_written_out_stops() {
    let n = 24u64;
    // Each sweep halves the grid's change: stop once a sweep changes the sum by at most
    // 1e-6 of it.
    let run = |np: &Numeric, replayed: bool, max_steps: usize| {
        let (a, b) = (grid(np, n), grid(np, n) * 0.5);
        let change = np.full(&[], 1.0, DType::F64);
        let step = |_| {
            let before = a.sum();
            sweep(&a, &b, n as i64)?;
            sweep(&b, &a, n as i64)?;
            change.assign(&(&(&a.sum() - &before) / &a.sum()).abs())
        };
        let mut steps = 0usize;
        let stats = if replayed {
            np.repeat_while(max_steps, step, |_| {
                steps += 1;
                Ok(change.item()? > 1e-6)
            })
            .expect("the loop runs")
        } else {
            while steps < max_steps {
                step(steps).expect("a step");
                steps += 1;
                if change.item().expect("reads") <= 1e-6 {
                    break;
                }
            }
            RepeatStats::default()
        };
        (bits(&a), bits(&b), steps, stats)
    };
    let (a0, b0, steps0, _) = run(&weft_tests::numeric(2), false, usize::MAX);
    assert!(
        steps0 > 8,
        "the written-out loop stops after {steps0} steps"
    );
    let (a1, b1, steps1, stats) = run(&weft_tests::numeric(2), true, usize::MAX);
    assert_eq!(steps1, steps0, "the same number of steps");
    assert!(a1 == a0 && b1 == b0, "the same bits");
    assert_eq!(stats.steps_run + stats.steps_replayed, steps0);
    assert!(
        stats.steps_replayed >= steps0 - 4,
        "later steps replayed: {stats:?} of {steps0}"
    );
    // A bound below the test's stop: exactly that many steps.
    let (_, _, steps2, stats) = run(&weft_tests::numeric(2), true, 5);
    assert_eq!((steps2, stats.steps_run + stats.steps_replayed), (5, 5));
}

/// A replayed step whose scalar tasks write one element of an array and read another fuse
/// into one task on one point (`weft_fusion`'s constraints); at a later step the two views
/// are one element, and the read must still see the step's write: `b[k] = (a[k] + 1) * 2`
/// reads `a[5]`, which step 5 itself just wrote.
#[test]
fn a_replayed_scalar_step_whose_views_meet_later_reads_its_own_write() {
    let steps = 9;
    let make = |np: &Numeric| {
        let a = np.linspace(0.25, 3.75, steps as u64, DType::F64);
        let b = np.zeros(&[steps as u64], DType::F64);
        (a, b)
    };
    let step = |_: &Numeric, (a, b): &(Array, Array), k: usize| {
        let k = k as i64;
        let mut at = a.index(&[Ix::At(k)]);
        at += 1.0;
        b.index(&[Ix::At(k)])
            .assign(&(&a.index(&[Ix::At(5)]) * 2.0))
    };
    let read = |(a, b): &(Array, Array)| {
        let mut v = bits(a);
        v.extend(bits(b));
        v
    };
    let stats = both(steps, make, step, read);
    assert!(stats.steps_replayed >= 5, "step 5 is replayed: {stats:?}");
    // The loop in plain Rust: `b[k]` is twice `a[5]`, plus 1 from step 5 on.
    let np = weft_tests::numeric(2);
    let state = make(&np);
    np.repeat(steps, |k| step(&np, &state, k))
        .expect("the loop runs");
    let a0: Vec<f64> = (0..steps).map(|k| 0.25 + 3.5 * k as f64 / 8.0).collect();
    let got = state.1.to_vec().expect("reads");
    for (k, g) in got.iter().enumerate() {
        let want = (a0[5] + if k >= 5 { 1.0 } else { 0.0 }) * 2.0;
        assert_eq!(*g, want, "b[{k}]");
    }
}
