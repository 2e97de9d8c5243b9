//! Fusion through a bounded anti-dependence (`weft_fusion::constraints`): stencil programs,
//! element-wise arithmetic on views of one grid shifted by up to two rows and columns, then
//! `center[:] = result` or an in-place update, give the same bits fused and unfused, on one
//! and three pieces and one and two threads; Figure 1's sweep runs as one task and says why,
//! on one point or on several (whose tiles' boundary rows are held back to the end).

use proptest::prelude::*;
use weft::{Array, Config, Numeric, Range};
use weft_ir::DType;

/// Padding of the grid around the interior: the largest shift.
const PAD: i64 = 2;

/// One sweep: `center[:] = sum c * grid shifted by (di, dj)` (or `center += ...`).
#[derive(Clone, Debug)]
struct Sweep {
    terms: Vec<(i64, i64, f64)>,
    in_place: bool,
}

fn sweep() -> impl Strategy<Value = Sweep> {
    (
        proptest::collection::vec((-PAD..=PAD, -PAD..=PAD, -2.0f64..2.0), 1..5),
        any::<bool>(),
    )
        .prop_map(|(terms, in_place)| Sweep { terms, in_place })
}

fn numeric(fusion: bool, pieces: u64, threads: usize) -> Numeric {
    weft_tests::numeric_with(Config {
        fusion,
        pieces,
        threads,
        component_cache: None,
        ..Config::default()
    })
}

/// Runs `sweeps` on a seeded random `(h + 4) x (w + 4)` grid and returns it.
fn run(np: &Numeric, (h, w): (i64, i64), sweeps: &[Sweep], seed: u64) -> Vec<f64> {
    let grid = np.random_uniform(
        &[(h + 2 * PAD) as u64, (w + 2 * PAD) as u64],
        -1.0,
        1.0,
        seed,
        DType::F64,
    );
    let view = |di: i64, dj: i64| {
        grid.slice(&[
            Range::new(PAD + di, PAD + di + h),
            Range::new(PAD + dj, PAD + dj + w),
        ])
    };
    let mut center = view(0, 0);
    for s in sweeps {
        let mut acc: Option<Array> = None;
        for &(di, dj, c) in &s.terms {
            let t = &view(di, dj) * c;
            acc = Some(match acc {
                None => t,
                Some(a) => &a + &t,
            });
        }
        let Some(acc) = acc else { continue };
        if s.in_place {
            center += &acc;
        } else {
            center.assign(&acc).expect("the assignment runs");
        }
    }
    grid.to_vec().expect("the grid reads back")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn stencil_programs_fused_equal_unfused(
        sweeps in proptest::collection::vec(sweep(), 1..5),
        // Large enough grids run in several chunks and slices (see `weft_cpu`'s deferred
        // stores), small ones in one.
        h in prop_oneof![1i64..20, 150i64..400],
        w in prop_oneof![1i64..8, 60i64..130],
        seed in any::<u64>(),
    ) {
        let want = run(&numeric(false, 1, 1), (h, w), &sweeps, seed);
        for (pieces, threads) in [(1, 1), (1, 2), (3, 2)] {
            let got = run(&numeric(true, pieces, threads), (h, w), &sweeps, seed);
            let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
            prop_assert!(same, "{pieces} piece(s), {threads} thread(s)");
        }
    }
}

#[test]
fn figure_1s_sweep_runs_as_one_task_through_a_bounded_anti_dependence() {
    let np = numeric(true, 1, 2);
    let (h, w) = (300, 40);
    let sweeps = vec![
        Sweep {
            terms: vec![
                (0, 0, 0.2),
                (-1, 0, 0.2),
                (1, 0, 0.2),
                (0, -1, 0.2),
                (0, 1, 0.2)
            ],
            in_place: false,
        };
        6
    ];
    np.runtime(|rt| rt.set_explain(true));
    let got = run(&np, (h, w), &sweeps, 7);
    let text = np.runtime(|rt| rt.take_explanations()).join("");
    assert!(
        text.contains("fused through a bounded anti-dependence")
            && text.contains("shifted by at most 1 row(s)"),
        "{text}"
    );
    assert!(
        !text.contains(": anti-dependence on"),
        "no window is cut at the anti-dependence: {text}"
    );
    assert_eq!(
        text.matches("fused through a bounded anti-dependence")
            .count(),
        sweeps.len(),
        "one fused task per sweep: {text}"
    );
    let want = run(&numeric(false, 1, 1), (h, w), &sweeps, 7);
    assert_eq!(got, want);
}

#[test]
fn a_multi_point_launch_fuses_too_holding_each_tiles_boundary_rows() {
    let np = numeric(true, 3, 2);
    let sweeps = vec![
        Sweep {
            terms: vec![(-1, 0, 0.5), (1, 0, 0.5)],
            in_place: false,
        };
        3
    ];
    np.runtime(|rt| rt.set_explain(true));
    let got = run(&np, (300, 70), &sweeps, 9);
    let text = np.runtime(|rt| rt.take_explanations()).join("");
    assert_eq!(
        text.matches("fused through a bounded anti-dependence")
            .count(),
        sweeps.len(),
        "{text}"
    );
    assert_eq!(got, run(&numeric(false, 1, 1), (300, 70), &sweeps, 9));
}

/// A ping-pong stencil whose step starts with a read of the centre only (`twice = 2 * f`, as
/// NPBench's `heat_3d`), on `(h + 2) x (w + 2)` grids `a` and `b`; returns both.
fn ping_pong(np: &Numeric, (h, w): (i64, i64), steps: usize) -> Vec<f64> {
    let grid = |seed| {
        np.random_uniform(
            &[(h + 2) as u64, (w + 2) as u64],
            -1.0,
            1.0,
            seed,
            DType::F64,
        )
    };
    let (a, b) = (grid(3), grid(4));
    let view = |f: &Array, di: i64, dj: i64| {
        f.slice(&[
            Range::new(1 + di, 1 + di + h),
            Range::new(1 + dj, 1 + dj + w),
        ])
    };
    for _ in 0..steps {
        for (f, to) in [(&a, &b), (&b, &a)] {
            let c = view(f, 0, 0);
            let twice = &c * 2.0;
            let rows = &(&(&view(f, -1, 0) - &twice) + &view(f, 1, 0)) * 0.125;
            let cols = &(&(&view(f, 0, -1) - &twice) + &view(f, 0, 1)) * 0.125;
            view(to, 0, 0)
                .assign(&(&(&rows + &cols) + &c))
                .expect("the assignment runs");
        }
    }
    let mut out = a.to_vec().expect("a reads back");
    out.extend(b.to_vec().expect("b reads back"));
    out
}

#[test]
fn a_steps_first_read_of_the_centre_waits_for_the_step_it_starts() {
    let (h, w) = (60, 50);
    for (pieces, threads) in [(1, 1), (3, 2)] {
        let np = numeric(true, pieces, threads);
        np.runtime(|rt| rt.set_explain(true));
        let got = ping_pong(&np, (h, w), 3);
        let text = np.runtime(|rt| rt.take_explanations()).join("");
        // `twice` of each step after the first is left for the step's kernel, where it is a
        // temporary, instead of joining the step before and being written out for it.
        assert_eq!(
            text.matches(": left for its consumer").count(),
            5,
            "{pieces} piece(s): {text}"
        );
        let want = ping_pong(&numeric(false, 1, 1), (h, w), 3);
        let same = got
            .iter()
            .zip(&want)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same && got.len() == want.len(),
            "{pieces} piece(s), {threads} thread(s)"
        );
    }
}
