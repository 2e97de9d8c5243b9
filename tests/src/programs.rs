//! Random programs over the numeric and sparse plugins, for differential tests: the fusion
//! property tests run them fused and unfused (`tests/tests/all/fusion_differential.rs`), and
//! `rank_programs` runs them on several ranks.

use weft::numeric::BinaryOp;
use weft::{Array, CsrMatrix, Ix, Numeric, Range, RowOrder, Sparse};
use weft_ir::DType;

/// Elements of every array of a program.
pub const N: u64 = 42;
/// Every pool array of `N` elements is also seen as a `ROWS` x `COLS` matrix.
pub const ROWS: i64 = 6;
/// Columns of that matrix view.
pub const COLS: i64 = 7;

/// One step of a random program. Indices pick arrays from the live pool (modulo its size).
#[derive(Clone, Debug)]
#[allow(missing_docs)] // the variants' fields are described on each variant
pub enum Step {
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
    /// `pool[a][...] = A @ pool[b]` with `A`'s rows summed in the lane order
    /// (`weft::RowOrder::Lanes`; in place when `a == b`: the product reads all of `b`).
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
    /// `pool[a]` sorted (flattened), or the positions that sort each row of
    /// `pool[a].reshape(6, 7)` (stably, as floats): the merge passes of `sort`.
    Sort(usize, bool),
    /// `pool[a]` as a matrix minus its mean over axis 0 (kept), or over axis 1 (kept).
    Center(usize, bool),
    /// `(m + ((m * s) @ pool[b][:7]).reshape(6, 1)).reshape(-1)` with `m = pool[a].reshape(6,
    /// 7)`: a product of a scaled matrix, whose scaled copy fusion may recompute inside the
    /// product (see `weft_ir::passes::inline`), added back as a column broadcast.
    ScaledMatvec(usize, usize, f64),
    /// `x[i] -= x[:len] . y[:len]; x[i] /= 1 + |x[j]|` with `x = pool[a]`, `y = pool[b]`: a
    /// short dot product and scalar steps that write one element of an array and read others
    /// (tasks that launch on one point, fused through other views of one store).
    ElementStep(usize, usize, u64, u64, u64),
    /// `((x op y) % 200) / 100` in an unsigned dtype (`UNSIGNED[t]`), `x` and `y` being
    /// `pool[a]` and `pool[b]` times 1000 converted to it (negative ones wrap): wrapping
    /// arithmetic whose temporaries fusion must keep to the width, orders, remainders and
    /// shifts that see the high bits, back as `f64`.
    Unsigned(usize, usize, u8, u8),
    /// Reads `pool[a]` now (a flush of what it needs).
    Read(usize),
    /// Drops `pool[a]`'s handle.
    Drop(usize),
}

/// The unsigned dtypes of [`Step::Unsigned`].
pub const UNSIGNED: [DType; 4] = [DType::U8, DType::U16, DType::U32, DType::U64];

/// The binary operators programs use.
pub const OPS: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Minimum,
    BinaryOp::Maximum,
];

/// A random N x N matrix with empty rows and some rows of 17 to 20 entries (where the row
/// orders differ), the same for every run.
pub fn matrix(sp: &Sparse) -> CsrMatrix {
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..N {
        let long = if i % 5 == 0 { 17 } else { 0 };
        // Distinct columns: 13 is prime to N.
        for k in 0..(i % 4 + long) {
            r.push(i);
            c.push((i * 7 + k * 13) % N);
            v.push(0.25 * (k as f64 + 1.0) - 0.4);
        }
    }
    sp.from_triplets((N, N), (&r, &c, &v), DType::F64, DType::I32)
        .expect("the matrix")
}

/// Runs the program and returns the final contents of the pool and the mid-program reads.
pub fn run((np, sp): &(Numeric, Sparse), program: &[Step]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
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
                    2 => (&x / 8.0).exp(),
                    3 => x.arctan2(0.5),
                    _ => (&x / 8.0).cosh().arccosh(),
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
                let y = a.with_row_order(RowOrder::Lanes).matvec(&pick(&pool, x));
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
            Step::Sort(a, rows) => {
                let x = pick(&pool, a);
                pool.push(if rows {
                    x.reshape(&[ROWS, COLS])
                        .argsort(Some(1))
                        .expect("argsorts")
                        .astype(DType::F64)
                        .reshape(&[-1])
                } else {
                    x.sort(None).expect("sorts")
                });
            }
            Step::Unsigned(a, b, op, t) => {
                let dtype = UNSIGNED[usize::from(t) % UNSIGNED.len()];
                let x = (pick(&pool, a) * 1000.0).astype(dtype);
                let y = (pick(&pool, b) * 1000.0).astype(dtype);
                let r = match op % 8 {
                    0 => &x + &y,
                    1 => &x - &y,
                    2 => &(&x * &y) + &x,
                    3 => (&x + &y).maximum(&y),
                    4 => (&x + &y).lt(&x).astype(dtype),
                    5 => &(&x * &x) % &(&y + 1i64),
                    6 => (&x - &y).right_shift(&(&y % 70i64)),
                    _ => (&x * &y).left_shift(&(&x % 9i64)).minimum(&x),
                };
                pool.push((&r % 200i64).astype(DType::F64) / 100.0);
            }
            Step::Center(a, rows) => {
                let m = pick(&pool, a).reshape(&[ROWS, COLS]);
                let axis: &[i64] = if rows { &[0] } else { &[1] };
                let centered = &m - &m.mean_axes(Some(axis), true);
                pool.push(centered.reshape(&[-1]));
            }
            Step::ScaledMatvec(a, b, scale) => {
                let m = pick(&pool, a).reshape(&[ROWS, COLS]);
                let x = pick(&pool, b).index(&[Ix::Slice(Range::new(0, COLS))]);
                let y = (&m * scale).matmul(&x).reshape(&[ROWS, 1]);
                pool.push((&m + &y).reshape(&[-1]));
            }
            Step::ElementStep(a, b, i, j, len) => {
                let (x, y) = (pick(&pool, a), pick(&pool, b));
                let (i, j, len) = (i.min(N - 1) as i64, j.min(N - 1) as i64, len.clamp(1, N));
                let head = |v: &Array| v.slice(&[Range::new(0, len as i64)]);
                let mut at = x.index(&[Ix::At(i)]);
                at -= &head(&x).dot(&head(&y));
                at /= &(x.index(&[Ix::At(j)]).abs() + 1.0);
                at.check().expect("the element step");
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

/// A random program of 1 to 39 steps from `seed` (SplitMix64), with the same kinds of steps
/// and ranges as the fusion property tests' strategy: for runs without proptest.
pub fn random_program(seed: u64) -> Vec<Step> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let len = 1 + next() % 39;
    let mut program = Vec::new();
    for _ in 0..len {
        let mut r = |m: u64| next() % m.max(1);
        let ix = |v: u64| v as usize;
        let f = |v: u64, lo: f64, hi: f64| lo + (hi - lo) * (v % 1_000_000) as f64 / 1e6;
        let step = match r(22) {
            0 => Step::Random(r(u64::MAX)),
            1 => Step::Binary(ix(r(8)), ix(r(8)), r(5) as u8),
            2 => Step::Scalar(ix(r(8)), r(5) as u8, f(r(u64::MAX), -2.0, 2.0)),
            3 => Step::Unary(ix(r(8)), r(5) as u8),
            4 => Step::AssignView(ix(r(8)), ix(r(8)), r(N), r(N), 1 + r(N - 1)),
            5 => Step::Fill(ix(r(8)), f(r(u64::MAX), -1.0, 1.0)),
            6 => Step::Normalize(ix(r(8)), ix(r(8))),
            7 => Step::Norm(ix(r(8)), ix(r(8))),
            8 => Step::Spmv(ix(r(8))),
            9 => Step::SpmvInto(ix(r(8)), ix(r(8))),
            10 => Step::Reversed(ix(r(8)), ix(r(8)), r(5) as u8),
            11 => Step::AssignStrided(ix(r(8)), ix(r(8)), r(N), r(N), 1 + r(N - 1), 1 + r(3)),
            12 => Step::Transposed(ix(r(8)), ix(r(8)), r(5) as u8),
            13 => Step::Broadcast(
                ix(r(8)),
                ix(r(8)),
                r(5) as u8,
                r(2 * ROWS as u64) as i64 - ROWS,
            ),
            14 => Step::AssignTransposed(ix(r(8)), ix(r(8))),
            15 => Step::Center(ix(r(8)), r(2) == 0),
            16 => Step::Read(ix(r(8))),
            17 => Step::ScaledMatvec(ix(r(8)), ix(r(8)), f(r(u64::MAX), -2.0, 2.0)),
            18 => Step::ElementStep(ix(r(8)), ix(r(8)), r(N), r(N), 1 + r(N)),
            19 => Step::Sort(ix(r(8)), r(2) == 0),
            20 => Step::Unsigned(ix(r(8)), ix(r(8)), r(8) as u8, r(4) as u8),
            _ => Step::Drop(ix(r(8))),
        };
        program.push(step);
    }
    program
}
