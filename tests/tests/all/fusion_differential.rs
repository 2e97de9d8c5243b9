//! Property-based differential tests of fusion: random programs over numeric ops and sparse
//! matrix-vector products (whose matrix is split by image partitions), with aliasing views of
//! every kind (slices with positive and negative steps, transposes, broadcasts, reshapes),
//! in-place updates, reductions over all and over one axis, reads in the middle and dropped
//! handles, run fused and unfused; every array the program still holds must agree.

use proptest::prelude::*;
use weft::numeric::BinaryOp;
use weft::{Array, Config, CsrMatrix, Ix, Numeric, Range, Sparse};
use weft_ir::DType;

const N: u64 = 42;
/// Every pool array of `N` elements is also seen as a `ROWS` x `COLS` matrix.
const ROWS: i64 = 6;
const COLS: i64 = 7;

/// One step of a random program. Indices pick arrays from the live pool (modulo its size).
#[derive(Clone, Debug)]
enum Step {
    /// A new random array.
    Random(u64),
    /// `pool[a] op pool[b]`.
    Binary(usize, usize, u8),
    /// `pool[a] op scalar`.
    Scalar(usize, u8, f64),
    /// `sqrt(|pool[a]|)`, `-pool[a]` or `exp(pool[a] / 8)`.
    Unary(usize, u8),
    /// `pool[a][lo..lo+len] = pool[b][lo2..lo2+len]` (views that may alias).
    AssignView(usize, usize, u64, u64, u64),
    /// `pool[a][...] = scalar`.
    Fill(usize, f64),
    /// `pool[a] / (1 + |sum(pool[b])|)`: a reduction used by an element-wise op.
    Normalize(usize, usize),
    /// `pool[a] / (1 + norm(pool[b]))`: a norm takes its square root in place (a scalar task
    /// that must not run once per point).
    Norm(usize, usize),
    /// `A @ pool[a]` for a fixed random sparse matrix `A`.
    Spmv(usize),
    /// `pool[a][...] = A @ pool[b]` (in place when `a == b`: the product reads all of `b`).
    SpmvInto(usize, usize),
    /// `pool[a] op pool[b][::-1]`.
    Reversed(usize, usize, u8),
    /// `pool[a][s::k] = pool[b][s2::k]` over `c` elements (strided views that may alias).
    AssignStrided(usize, usize, u64, u64, u64, u64),
    /// `(pool[a].reshape(6, 7) op pool[b].reshape(7, 6).T).reshape(-1)`.
    Transposed(usize, usize, u8),
    /// `(pool[a].reshape(6, 7) op pool[b].reshape(6, 7)[r]).reshape(-1)`: a row broadcast.
    Broadcast(usize, usize, u8, i64),
    /// `pool[a].reshape(6, 7)[...] = pool[b].reshape(7, 6).T` (in place when `a == b`).
    AssignTransposed(usize, usize),
    /// `pool[a]` as a matrix minus its mean over axis 0 (kept), or over axis 1 (kept).
    Center(usize, bool),
    /// Reads `pool[a]` now (a flush of what it needs).
    Read(usize),
    /// Drops `pool[a]`'s handle.
    Drop(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => any::<u64>().prop_map(Step::Random),
        4 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Binary(a, b, o)),
        2 => (0..8usize, 0..5u8, -2.0..2.0f64).prop_map(|(a, o, s)| Step::Scalar(a, o, s)),
        2 => (0..8usize, 0..3u8).prop_map(|(a, o)| Step::Unary(a, o)),
        3 => (0..8usize, 0..8usize, 0..N, 0..N, 1..N).prop_map(|(a, b, l, l2, n)| Step::AssignView(a, b, l, l2, n)),
        1 => (0..8usize, -1.0..1.0f64).prop_map(|(a, s)| Step::Fill(a, s)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::Normalize(a, b)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::Norm(a, b)),
        2 => (0..8usize).prop_map(Step::Spmv),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::SpmvInto(a, b)),
        2 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Reversed(a, b, o)),
        2 => (0..8usize, 0..8usize, 0..N, 0..N, 1..N, 1..4u64)
            .prop_map(|(a, b, s, s2, c, k)| Step::AssignStrided(a, b, s, s2, c, k)),
        2 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Transposed(a, b, o)),
        2 => (0..8usize, 0..8usize, 0..5u8, -ROWS..ROWS)
            .prop_map(|(a, b, o, r)| Step::Broadcast(a, b, o, r)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::AssignTransposed(a, b)),
        1 => (0..8usize, any::<bool>()).prop_map(|(a, rows)| Step::Center(a, rows)),
        1 => (0..8usize).prop_map(Step::Read),
        2 => (0..8usize).prop_map(Step::Drop),
    ]
}

fn numeric(fusion: bool) -> Numeric {
    plugins(fusion).0
}

fn plugins(fusion: bool) -> (Numeric, Sparse) {
    let config = Config {
        fusion,
        pieces: 3,
        threads: 2,
        component_cache: None,
        explain_to_stderr: std::env::var("WEFT_EXPLAIN").is_ok_and(|v| v == "1"),
        ..Config::default()
    };
    weft_tests::plugins_with(config)
}

const OPS: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Minimum,
    BinaryOp::Maximum,
];

/// A random N x N matrix with empty rows, the same for every run.
fn matrix(sp: &Sparse) -> CsrMatrix {
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..N {
        for k in 0..(i % 4) {
            r.push(i);
            c.push((i * 7 + k * 13) % N);
            v.push(0.25 * (k as f64 + 1.0) - 0.4);
        }
    }
    sp.from_triplets((N, N), (&r, &c, &v), DType::F64, DType::I32)
        .expect("the matrix")
}

/// Runs the program and returns the final contents of the pool and the mid-program reads.
fn run((np, sp): &(Numeric, Sparse), program: &[Step]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let a = matrix(sp);
    let mut pool: Vec<Array> = (0..3)
        .map(|i| np.random_uniform(&[N], -1.0, 1.0, i, DType::F64))
        .collect();
    let mut reads = Vec::new();
    let pick = |pool: &Vec<Array>, i: usize| pool[i % pool.len()].clone();
    for s in program {
        match *s {
            Step::Random(seed) => pool.push(np.random_uniform(&[N], -1.0, 1.0, seed, DType::F64)),
            Step::Binary(a, b, o) => {
                let r = pick(&pool, a).binary(OPS[o as usize % OPS.len()], &pick(&pool, b));
                pool.push(r);
            }
            Step::Scalar(a, o, v) => {
                let r = pick(&pool, a).binary(OPS[o as usize % OPS.len()], v);
                pool.push(r);
            }
            Step::Unary(a, o) => {
                let x = pick(&pool, a);
                pool.push(match o {
                    0 => x.abs().sqrt(),
                    1 => -&x,
                    _ => (&x / 8.0).exp(),
                });
            }
            Step::AssignView(a, b, lo, lo2, len) => {
                let len = len.min(N - lo).min(N - lo2).max(1);
                let (lo, lo2) = (lo.min(N - len), lo2.min(N - len));
                let dst = pick(&pool, a).slice(&[Range::new(lo as i64, (lo + len) as i64)]);
                let src = pick(&pool, b).slice(&[Range::new(lo2 as i64, (lo2 + len) as i64)]);
                dst.assign(&src).expect("assign");
            }
            Step::Fill(a, v) => pick(&pool, a).assign(v).expect("fill"),
            Step::Normalize(a, b) => {
                let s = pick(&pool, b).sum().abs() + 1.0;
                pool.push(&pick(&pool, a) / &s);
            }
            Step::Norm(a, b) => {
                let s = pick(&pool, b).norm() + 1.0;
                pool.push(&pick(&pool, a) / &s);
            }
            Step::Spmv(x) => pool.push(a.matvec(&pick(&pool, x))),
            Step::SpmvInto(dst, x) => {
                let y = a.matvec(&pick(&pool, x));
                pick(&pool, dst).assign(&y).expect("assign the product");
            }
            Step::Reversed(a, b, o) => {
                let rev = pick(&pool, b).index(&[Ix::Slice(Range::all().step(-1))]);
                pool.push(pick(&pool, a).binary(OPS[o as usize % OPS.len()], &rev));
            }
            Step::AssignStrided(a, b, s, s2, c, k) => {
                // `c` elements `k` apart from `s` and `s2`, cut to fit.
                let fit = |start: u64| (N - 1 - start.min(N - 1)) / k + 1;
                let (s, s2) = (s.min(N - 1), s2.min(N - 1));
                let c = c.min(fit(s)).min(fit(s2)).max(1);
                let view = |x: &Array, start: u64| {
                    let stop = (start + k * (c - 1) + 1) as i64;
                    x.index(&[Ix::Slice(Range::new(start as i64, stop).step(k as i64))])
                };
                let (dst, src) = (view(&pick(&pool, a), s), view(&pick(&pool, b), s2));
                dst.assign(&src).expect("strided assign");
            }
            Step::Transposed(a, b, o) => {
                let m = pick(&pool, a).reshape(&[ROWS, COLS]);
                let t = pick(&pool, b).reshape(&[COLS, ROWS]).t();
                pool.push(m.binary(OPS[o as usize % OPS.len()], &t).reshape(&[-1]));
            }
            Step::Broadcast(a, b, o, r) => {
                let m = pick(&pool, a).reshape(&[ROWS, COLS]);
                let row = pick(&pool, b).reshape(&[ROWS, COLS]).index(&[Ix::At(r)]);
                pool.push(m.binary(OPS[o as usize % OPS.len()], &row).reshape(&[-1]));
            }
            Step::AssignTransposed(a, b) => {
                let dst = pick(&pool, a).reshape(&[ROWS, COLS]);
                let src = pick(&pool, b).reshape(&[COLS, ROWS]).t();
                dst.assign(&src).expect("transposed assign");
            }
            Step::Center(a, rows) => {
                let m = pick(&pool, a).reshape(&[ROWS, COLS]);
                let axis: &[i64] = if rows { &[0] } else { &[1] };
                let centered = &m - &m.mean_axes(Some(axis), true);
                pool.push(centered.reshape(&[-1]));
            }
            Step::Read(a) => reads.push(pick(&pool, a).to_vec().expect("read")),
            Step::Drop(a) => {
                if pool.len() > 2 {
                    pool.remove(a % pool.len());
                }
            }
        }
    }
    let finals = pool
        .iter()
        .map(|a| a.to_vec().expect("final read"))
        .collect();
    (finals, reads)
}

fn agree(label: &str, fused: &[Vec<f64>], unfused: &[Vec<f64>]) -> Result<(), TestCaseError> {
    prop_assert_eq!(fused.len(), unfused.len());
    for (i, (f, u)) in fused.iter().zip(unfused).enumerate() {
        prop_assert_eq!(f.len(), u.len());
        for (j, (x, y)) in f.iter().zip(u).enumerate() {
            // Element-wise steps agree bit for bit; reductions may add in another order.
            let ok = x == y || (x - y).abs() <= 1e-9 * (1.0 + y.abs());
            prop_assert!(ok, "{} {}[{}]: fused {} unfused {}", label, i, j, x, y);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    #[test]
    fn fused_programs_equal_unfused_ones(program in proptest::collection::vec(step(), 1..40)) {
        let (fused, fused_reads) = run(&plugins(true), &program);
        let (unfused, unfused_reads) = run(&plugins(false), &program);
        agree("array", &fused, &unfused)?;
        agree("read", &fused_reads, &unfused_reads)?;
    }
}

/// A read runs the window up to the last task it needs: a pending task that reads the store
/// the read's producer overwrites (a write-after-read hazard) runs first, and a chain
/// submitted after the producer stays in the window.
#[test]
fn a_read_flushes_up_to_what_it_needs() {
    let np = numeric(true);
    let a = np.random_uniform(&[N], -1.0, 1.0, 1, DType::F64);
    let b = np.random_uniform(&[N], -1.0, 1.0, 2, DType::F64);
    np.runtime(|rt| rt.flush()).expect("flush");
    let before = a.to_vec().expect("a");
    // Pending: c = a + 1 (reads a), then a[...] = 5, then an unrelated chain on b.
    let c = &a + 1.0;
    // a[...] = 5 overwrites what c reads: c must run before the write.
    a.assign(5.0).expect("assign");
    let unrelated = (&b * 2.0).exp();
    assert_eq!(np.runtime(|rt| rt.pending_tasks()), 4);
    let got = a.to_vec().expect("read a");
    assert!(got.iter().all(|&x| x == 5.0));
    // c's task and the fill ran; the unrelated chain (two tasks) did not.
    assert_eq!(
        np.runtime(|rt| rt.pending_tasks()),
        2,
        "the unrelated chain is still pending"
    );
    let c = c.to_vec().expect("c");
    let want: Vec<f64> = before.iter().map(|x| x + 1.0).collect();
    assert_eq!(c, want, "c saw a before the write");
    let bs = b.to_vec().expect("b");
    let want: Vec<f64> = bs.iter().map(|x| (x * 2.0).exp()).collect();
    let got = unrelated.to_vec().expect("unrelated");
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-14 * w.abs(), "{g} vs {w}");
    }
}

/// The window grows while whole windows fuse: a long chain of element-wise operations ends
/// up in one task.
#[test]
fn the_window_grows_while_whole_windows_fuse() {
    let np = numeric(true);
    let x = np.random_uniform(&[N], 0.0, 1.0, 3, DType::F64);
    np.runtime(|rt| rt.flush()).expect("flush");
    let mut y = &x * 1.0;
    for _ in 0..100 {
        y = &y * 0.999 + 0.001;
    }
    let before = np.runtime(|rt| rt.stats().exec.tasks_executed);
    y.to_vec().expect("read");
    let ran = np.runtime(|rt| rt.stats().exec.tasks_executed) - before;
    assert!(ran <= 2, "201 tasks ran as {ran} fused task(s)");
}

/// A case proptest found: `y = sqrt(|x|)`, then `x[...] = 0`: the fill must not reach `y`.
#[test]
fn a_fill_after_a_read_does_not_change_what_was_read() {
    let program = [
        Step::Random(0),
        Step::Random(0),
        Step::Unary(4, 0),
        Step::Fill(4, 0.0),
    ];
    let (fused, _) = run(&plugins(true), &program);
    let (unfused, _) = run(&plugins(false), &program);
    assert_eq!(fused, unfused);
}
