//! The dense Jacobi example (`weft_examples::jacobi`) through the real host and the numeric
//! plugin, against the plain-Rust reference's own loops (`weft_tests::reference::jacobi`).
//!
//! Tolerance on `x`: `|got - want| <= 1e-12 + 1e-10 * |want|` per element. The elements are
//! about `1/n`; the matrix-vector sums may add in another order than the reference (a few ulps
//! of the row sum), and `b - R x` can cancel, hence the absolute part. A wrong diagonal or a
//! transposed product gives errors of 1e-3 or more.

use weft::Array;
use weft_examples::jacobi::{self, Jacobi};
use weft_ir::DType;
use weft_tests::{assert_close, numeric, reference};

const RTOL: f64 = 1e-10;
const ATOL: f64 = 1e-12;

fn read(a: &Array) -> Vec<f64> {
    a.to_vec().expect("the array reads back")
}

#[test]
fn the_system_is_diagonally_dominant() {
    let np = numeric(1);
    let n = 40usize;
    let (a, b) = jacobi::system(&np, n as u64, 3);
    assert_eq!(a.shape().expect("shape"), vec![n as u64, n as u64]);
    assert_eq!(b.shape().expect("shape"), vec![n as u64]);
    let (a, b) = (read(&a), read(&b));
    for i in 0..n {
        let row = &a[i * n..(i + 1) * n];
        let off: f64 = (0..n).filter(|&j| j != i).map(|j| row[j].abs()).sum();
        assert!(
            (n as f64..n as f64 + 1.0).contains(&row[i]),
            "A[{i}][{i}] = {}",
            row[i]
        );
        assert!(row[i] > off, "row {i} is not diagonally dominant");
        assert!(
            (0..n)
                .filter(|&j| j != i)
                .all(|j| (0.0..1.0).contains(&row[j]))
        );
    }
    assert!(b.iter().all(|v| (0.0..1.0).contains(v)));
}

#[test]
fn the_split_is_exact() {
    let np = numeric(1);
    let n = 12usize;
    let (a, b) = jacobi::system(&np, n as u64, 4);
    let split = Jacobi::new(&a, &b);
    let (a, d, r) = (read(&a), read(&split.d), read(&split.r));
    assert_eq!(split.d.shape().expect("shape"), vec![n as u64]);
    for i in 0..n {
        assert_eq!(d[i], a[i * n + i], "d[{i}]");
        for j in 0..n {
            let want = if i == j { 0.0 } else { a[i * n + j] };
            assert_eq!(r[i * n + j], want, "R[{i}][{j}]");
        }
    }
}

fn check_steps(pieces: u64, n: usize, seed: u64, batches: &[usize]) {
    let np = numeric(pieces);
    let (a, b) = jacobi::system(&np, n as u64, seed);
    let solver = Jacobi::new(&a, &b);
    let (av, bv) = (read(&a), read(&b));
    let mut x = np.zeros(&[n as u64], DType::F64);
    let mut done = 0;
    for &batch in batches {
        for _ in 0..batch {
            x = solver.step(&x);
        }
        done += batch;
        let want = reference::jacobi(&av, &bv, &vec![0.0; n], done);
        let what = format!("n={n}, {pieces} piece(s), after {done} steps");
        assert_close(&what, &read(&x), &want, RTOL, ATOL);
        let residual = jacobi::relative_residual(&a, &b, &x)
            .item()
            .expect("residual");
        let want_residual = reference::relative_residual(&av, &bv, &want);
        assert!(
            (residual - want_residual).abs() <= 1e-9 * want_residual + 1e-14,
            "{what}: residual {residual:e}, reference {want_residual:e}"
        );
    }
}

#[test]
fn steps_match_the_reference() {
    check_steps(1, 37, 1, &[1, 9, 30]);
}

#[test]
fn solve_runs_the_steps() {
    let np = numeric(1);
    let n = 20usize;
    let (a, b) = jacobi::system(&np, n as u64, 6);
    let x0 = np.from_vec(&[n as u64], &vec![1.0; n]);
    let x = jacobi::solve(&a, &b, &x0, 15);
    let want = reference::jacobi(&read(&a), &read(&b), &vec![1.0; n], 15);
    assert_close("solve from ones", &read(&x), &want, RTOL, ATOL);
}

#[test]
fn the_iteration_converges_to_the_solution() {
    let np = numeric(1);
    let n = 64usize;
    let (a, b) = jacobi::system(&np, n as u64, 2);
    let x = jacobi::solve(&a, &b, &np.zeros(&[n as u64], DType::F64), 80);
    let residual = jacobi::relative_residual(&a, &b, &x)
        .item()
        .expect("residual");
    assert!(
        residual < 1e-12,
        "relative residual {residual:e} after 80 steps"
    );
    let from_reference = reference::relative_residual(&read(&a), &read(&b), &read(&x));
    assert!(
        from_reference < 1e-12,
        "reference residual {from_reference:e}"
    );
}

#[test]
fn results_do_not_depend_on_partitioning() {
    check_steps(4, 33, 7, &[3, 10]);
    check_steps(3, 16, 7, &[5]);
}

#[test]
fn the_smallest_system_works() {
    check_steps(1, 1, 9, &[1, 2]);
    check_steps(1, 2, 9, &[1, 5]);
}
