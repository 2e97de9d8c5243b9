//! The stencil example (`weft_examples::stencil`, Figure 1 of the Diffuse paper) through the
//! real host and the numeric plugin, against the plain-Rust reference's own double-buffered
//! loops (`weft_tests::reference::stencil`).
//!
//! Tolerance: `|got - want| <= 1e-13 + 1e-12 * |want|` per grid point. Values stay in [0, 1]
//! and a sweep is a convex average, so rounding differences never grow past a few ulps per
//! sweep; reading a view at the wrong offset, or updating in place (Gauss-Seidel instead of
//! Jacobi), gives errors of 1e-2 or more.

use weft::{Array, Range};
use weft_examples::stencil::{self, COLD, HOT, Stencil};
use weft_tests::{assert_close, numeric, reference};

const RTOL: f64 = 1e-12;
const ATOL: f64 = 1e-13;

fn read(a: &Array) -> Vec<f64> {
    a.to_vec().expect("the array reads back")
}

#[test]
fn the_initial_grid_has_fixed_boundaries_and_a_random_interior() {
    let np = numeric(1);
    let n = 9usize;
    let w = n + 2;
    let grid = stencil::initial_grid(&np, n as u64, 3).expect("grid");
    assert_eq!(grid.shape().expect("shape"), vec![w as u64, w as u64]);
    let g = read(&grid);
    for j in 0..w {
        assert_eq!(g[j], HOT, "top row [0][{j}]");
        assert_eq!(g[(w - 1) * w + j], COLD, "bottom row [{}][{j}]", w - 1);
    }
    for i in 1..w {
        assert_eq!(g[i * w], COLD, "left column [{i}][0]");
        assert_eq!(g[i * w + w - 1], COLD, "right column [{i}][{}]", w - 1);
    }
    let interior: Vec<f64> = (1..=n)
        .flat_map(|i| (1..=n).map(move |j| (i, j)))
        .map(|(i, j)| g[i * w + j])
        .collect();
    assert!(interior.iter().all(|v| (0.0..1.0).contains(v)));
    let distinct: std::collections::BTreeSet<u64> = interior.iter().map(|v| v.to_bits()).collect();
    assert!(distinct.len() > n * n / 2, "the interior is not random");
    let again = read(&stencil::initial_grid(&np, n as u64, 3).expect("grid"));
    assert_eq!(g, again, "the same seed gives the same grid");
    let other = read(&stencil::initial_grid(&np, n as u64, 4).expect("grid"));
    assert_ne!(g, other, "another seed gives another grid");
}

/// Runs sweeps in several batches on one grid and checks the grid after each batch.
fn check_sweeps(pieces: u64, n: usize, seed: u64, batches: &[usize]) {
    let np = numeric(pieces);
    let grid = stencil::initial_grid(&np, n as u64, seed).expect("grid");
    let g0 = read(&grid);
    let mut done = 0;
    for &batch in batches {
        stencil::run(&grid, batch).expect("sweeps");
        done += batch;
        let want = reference::stencil(&g0, n, done);
        let what = format!("n={n}, {pieces} piece(s), after {done} sweeps");
        assert_close(&what, &read(&grid), &want, RTOL, ATOL);
    }
}

#[test]
fn sweeps_match_the_reference() {
    check_sweeps(1, 13, 1, &[0, 1, 4, 10]);
}

#[test]
fn the_smallest_grid_works() {
    check_sweeps(1, 1, 2, &[1, 3]);
    check_sweeps(1, 2, 2, &[1, 3]);
}

#[test]
fn results_do_not_depend_on_partitioning() {
    check_sweeps(4, 16, 5, &[1, 6]);
    check_sweeps(3, 17, 5, &[2, 5]);
}

#[test]
fn the_views_alias_the_grid() {
    let np = numeric(1);
    let n = 6usize;
    let w = n + 2;
    let grid = stencil::initial_grid(&np, n as u64, 8).expect("grid");
    let views = Stencil::new(&grid);
    let g = read(&grid);
    let pick = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| -> Vec<f64> {
        rows.flat_map(|i| cols.clone().map(move |j| (i, j)))
            .map(|(i, j)| g[i * w + j])
            .collect()
    };
    assert_eq!(read(&views.center), pick(1..w - 1, 1..w - 1));
    assert_eq!(read(&views.north), pick(0..w - 2, 1..w - 1));
    assert_eq!(read(&views.east), pick(1..w - 1, 2..w));
    assert_eq!(read(&views.west), pick(1..w - 1, 0..w - 2));
    assert_eq!(read(&views.south), pick(2..w, 1..w - 1));
    for v in [&views.center, &views.north, &views.south] {
        assert_eq!(v.shape().expect("shape"), vec![n as u64, n as u64]);
    }
    // A sweep writes through `center` and every view (and the grid) sees it.
    views.step().expect("sweep");
    let after = read(&grid);
    let inner = grid.slice(&[Range::new(1, -1), Range::new(1, -1)]);
    let center = read(&views.center);
    assert_eq!(read(&inner), center);
    assert_eq!(read(&views.south)[..n * (n - 1)], center[n..]);
    assert_eq!(after[..w], g[..w], "the top row did not move");
}

#[test]
fn a_steady_state_loop_compiles_nothing_new() {
    let np = numeric(1);
    let grid = stencil::initial_grid(&np, 32, 1).expect("grid");
    let views = Stencil::new(&grid);
    for _ in 0..2 {
        views.step().expect("sweep");
        np.runtime(|rt| rt.flush()).expect("flush");
    }
    let compiled = np.runtime(|rt| rt.stats().exec.kernels_compiled);
    for _ in 0..3 {
        views.step().expect("sweep");
        np.runtime(|rt| rt.flush()).expect("flush");
    }
    assert_eq!(np.runtime(|rt| rt.stats().exec.kernels_compiled), compiled);
}
