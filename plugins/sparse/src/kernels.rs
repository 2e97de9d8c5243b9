//! Kernel bodies, built from their keys with the SDK's [`KernelBuilder`].
//!
//! Keys are `<kind>.<value dtype>.<index dtype>` (the dtypes a kind does not use are left
//! out; `spmv.lanes.V.I` is `spmv.V.I` with its rows in the lane order, see [`RowOrder`]).
//! Parameters are the task's store arguments in order, then its scalars. Row kernels run one
//! parallel loop over rows, with `pos` tiled by rows like the output and `crd`/`vals`
//! partitioned by the image of `pos`: the ranges in `pos` are indices of the whole `crd`, and
//! `origin(crd, 0)` turns them into indices of the point's sub-store.
//!
//! | key | stores | scalars |
//! | --- | --- | --- |
//! | `spmv.V.I`, `spmv.lanes.V.I` | `pos` (read, rows), `crd`, `vals` (read, image), `x` (read, image of `hull`), `y` (write, rows), `hull` (read, rows) | |
//! | `diag.V.I` | `pos` (read, rows), `crd`, `vals` (read, image), `d` (write, rows) | |
//! | `dense.V.I` | `pos` (read, rows), `crd`, `vals` (read, image), `out` (write, rows x cols) | |
//! | `scale.V` | `vals` (read), `out` (write), both tiled alike | `s: V` |
//! | `scalerows.V.I` | `pos` (read, rows), `vals` (read, image), `d` (read, rows), `out` (write, image) | |
//! | `add.V` | `a`, `b` (read), `out` (write), all tiled alike | |
//! | `same.I` | `a_pos`, `b_pos` (read), `a_crd`, `b_crd` (read), `diff` (reduce sum, rank 0, i64) | |
//! | `poisson2d.pos.I`, `poisson3d.pos.I` | `pos` (write, rows) | `g: i64` |
//! | `poisson2d.fill.V.I`, `poisson3d.fill.V.I` | `pos` (read, rows), `crd`, `vals` (write, image) | `g: i64` |

use weft_sdk::KernelBuilder;
use weft_sdk::ir::builder::{BodyBuilder, StoreParam, Value};
use weft_sdk::ir::{DType, Kernel, Privilege, ReduceOp};

/// The order in which `spmv` sums each row's terms `vals[j] * x[crd[j]]` (the WIT
/// `row-order`, which the caller picks). Either gives the same bits on every back end, SIMD
/// path, thread count, piece count and rank count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOrder {
    /// One chain, entry by entry, as SciPy's loop sums a row. The CPU back end runs it as
    /// scalar code, two entries per trip, prefetched.
    Sequential,
    /// The canonical lane order of `fold_lanes`: eight partials over whole blocks of eight
    /// entries, their fixed tree, then the tail in order. The CPU back end gathers `x` in
    /// vectors, in wide code where the CPU has it.
    Lanes,
}

/// A kernel key, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// `y = A @ x`.
    Spmv {
        /// The value type.
        v: DType,
        /// The index type.
        i: DType,
        /// The order of each row's sum.
        order: RowOrder,
    },
    /// The diagonal.
    Diag {
        /// The value type.
        v: DType,
        /// The index type.
        i: DType,
    },
    /// The dense matrix.
    Dense {
        /// The value type.
        v: DType,
        /// The index type.
        i: DType,
    },
    /// `out = s * vals`.
    Scale {
        /// The value type.
        v: DType,
    },
    /// `out = diag(d) @ A`'s values.
    ScaleRows {
        /// The value type.
        v: DType,
        /// The index type.
        i: DType,
    },
    /// `out = a + b`.
    Add {
        /// The value type.
        v: DType,
    },
    /// Counts where two patterns differ.
    Same {
        /// The index type.
        i: DType,
    },
    /// The row ranges of a Poisson matrix (2 or 3 dimensions).
    PoissonPos {
        /// The grid's dimensions (2 or 3).
        dims: u8,
        /// The index type.
        i: DType,
    },
    /// The columns and values of a Poisson matrix.
    PoissonFill {
        /// The grid's dimensions (2 or 3).
        dims: u8,
        /// The value type.
        v: DType,
        /// The index type.
        i: DType,
    },
}

fn dtype_name(d: DType) -> &'static str {
    d.name()
}

fn dtype_of(s: &str) -> Option<DType> {
    Some(match s {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "i32" => DType::I32,
        "i64" => DType::I64,
        _ => return None,
    })
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = dtype_name;
        match *self {
            Key::Spmv { v, i, order } => match order {
                RowOrder::Sequential => write!(f, "spmv.{}.{}", n(v), n(i)),
                RowOrder::Lanes => write!(f, "spmv.lanes.{}.{}", n(v), n(i)),
            },
            Key::Diag { v, i } => write!(f, "diag.{}.{}", n(v), n(i)),
            Key::Dense { v, i } => write!(f, "dense.{}.{}", n(v), n(i)),
            Key::Scale { v } => write!(f, "scale.{}", n(v)),
            Key::ScaleRows { v, i } => write!(f, "scalerows.{}.{}", n(v), n(i)),
            Key::Add { v } => write!(f, "add.{}", n(v)),
            Key::Same { i } => write!(f, "same.{}", n(i)),
            Key::PoissonPos { dims, i } => write!(f, "poisson{dims}d.pos.{}", n(i)),
            Key::PoissonFill { dims, v, i } => {
                write!(f, "poisson{dims}d.fill.{}.{}", n(v), n(i))
            }
        }
    }
}

impl std::str::FromStr for Key {
    type Err = String;

    fn from_str(s: &str) -> Result<Key, String> {
        let parts: Vec<&str> = s.split('.').collect();
        let bad = || format!("unknown kernel key `{s}`");
        let float = |p: &str| dtype_of(p).filter(|d| d.is_float()).ok_or_else(bad);
        let index = |p: &str| {
            dtype_of(p)
                .filter(|d| matches!(d, DType::I32 | DType::I64))
                .ok_or_else(bad)
        };
        Ok(match parts.as_slice() {
            ["spmv", v, i] => Key::Spmv {
                v: float(v)?,
                i: index(i)?,
                order: RowOrder::Sequential,
            },
            ["spmv", "lanes", v, i] => Key::Spmv {
                v: float(v)?,
                i: index(i)?,
                order: RowOrder::Lanes,
            },
            ["diag", v, i] => Key::Diag {
                v: float(v)?,
                i: index(i)?,
            },
            ["dense", v, i] => Key::Dense {
                v: float(v)?,
                i: index(i)?,
            },
            ["scale", v] => Key::Scale { v: float(v)? },
            ["scalerows", v, i] => Key::ScaleRows {
                v: float(v)?,
                i: index(i)?,
            },
            ["add", v] => Key::Add { v: float(v)? },
            ["same", i] => Key::Same { i: index(i)? },
            [p, "pos", i] if p.starts_with("poisson") => Key::PoissonPos {
                dims: poisson_dims(p).ok_or_else(bad)?,
                i: index(i)?,
            },
            [p, "fill", v, i] if p.starts_with("poisson") => Key::PoissonFill {
                dims: poisson_dims(p).ok_or_else(bad)?,
                v: float(v)?,
                i: index(i)?,
            },
            _ => return Err(bad()),
        })
    }
}

fn poisson_dims(p: &str) -> Option<u8> {
    match p {
        "poisson2d" => Some(2),
        "poisson3d" => Some(3),
        _ => None,
    }
}

/// The kernel named by `key`, validated.
pub fn build(key: &Key) -> Result<Kernel, String> {
    let name = key.to_string();
    let k = match *key {
        Key::Spmv { v, i, order } => spmv(name, v, i, order),
        Key::Diag { v, i } => diag(name, v, i),
        Key::Dense { v, i } => dense(name, v, i),
        Key::Scale { v } => scale(name, v),
        Key::ScaleRows { v, i } => scale_rows(name, v, i),
        Key::Add { v } => add(name, v),
        Key::Same { i } => same(name, i),
        Key::PoissonPos { dims, i } => poisson_pos(name, dims, i),
        Key::PoissonFill { dims, v, i } => poisson_fill(name, dims, v, i),
    };
    k.finish_validated().map_err(|e| e.to_string())
}

/// The row's entries as a range of local indices of `crd`'s sub-store: `pos[i, 0] - o ..
/// pos[i, 1] - o` with `o = origin(crd, 0)`.
fn row_range(b: &mut BodyBuilder, pos: StoreParam, crd: StoreParam, i: Value) -> (Value, Value) {
    let (c0, c1) = (b.const_i64(0), b.const_i64(1));
    let lo = b.load(pos, &[i, c0]);
    let hi = b.load(pos, &[i, c1]);
    let lo = b.cast(DType::I64, lo);
    let hi = b.cast(DType::I64, hi);
    let o = b.origin(crd, 0);
    (b.sub(lo, o), b.sub(hi, o))
}

/// The CSR parameters every row kernel starts with.
fn csr_params(k: &mut KernelBuilder, v: DType, i: DType) -> (StoreParam, StoreParam, StoreParam) {
    let pos = k.store(i, 2, Privilege::Read);
    let crd = k.store(i, 1, Privilege::Read);
    let vals = k.store(v, 1, Privilege::Read);
    (pos, crd, vals)
}

/// `y[i] = sum over row i of vals[j] * x[crd[j]]`, each row summed in `order`.
fn spmv(name: String, v: DType, i: DType, order: RowOrder) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let (pos, crd, vals) = csr_params(&mut k, v, i);
    let x = k.store(v, 1, Privilege::Read);
    let y = k.store(v, 1, Privilege::Write);
    // Read by the runtime alone: it gives each point its range of `x`.
    let _hull = k.store(i, 2, Privilege::Read);
    k.parallel(y, |b, idx| {
        let (lo, hi) = row_range(b, pos, crd, idx[0]);
        let zero = b.const_of(v, 0.0);
        // Columns are global; the point's `x` starts at column `origin(x, 0)`.
        let x0 = b.origin(x, 0);
        let term = |b: &mut BodyBuilder, j: Value| {
            let c = b.load(crd, &[j]);
            let c = b.cast(DType::I64, c);
            let c = b.sub(c, x0);
            let a = b.load(vals, &[j]);
            let xc = b.load(x, &[c]);
            b.mul(a, xc)
        };
        let sum = match order {
            RowOrder::Sequential => {
                let sum = b.for_loop(lo, hi, &[zero], |b, j, acc| {
                    let t = term(b, j);
                    vec![b.add(acc[0], t)]
                });
                sum[0]
            }
            RowOrder::Lanes => b.fold_lanes(ReduceOp::Sum, v, lo, hi, term),
        };
        b.store(y, idx, sum);
    });
    k
}

/// The sum of row `i`'s (local) values whose column is `col`: the row's entry at `col`, with
/// duplicates summed, or 0.
fn entry(
    b: &mut BodyBuilder,
    (pos, crd, vals): (StoreParam, StoreParam, StoreParam),
    v: DType,
    i: Value,
    col: Value,
) -> Value {
    let (lo, hi) = row_range(b, pos, crd, i);
    let zero = b.const_of(v, 0.0);
    let sum = b.for_loop(lo, hi, &[zero], |b, j, acc| {
        let c = b.load(crd, &[j]);
        let c = b.cast(DType::I64, c);
        let a = b.load(vals, &[j]);
        let on = b.eq(c, col);
        let zero = b.const_of(v, 0.0);
        let t = b.select(on, a, zero);
        vec![b.add(acc[0], t)]
    });
    sum[0]
}

/// `d[i] = A[g, g]` with `g` the global row of `i`.
fn diag(name: String, v: DType, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let csr = csr_params(&mut k, v, i);
    let d = k.store(v, 1, Privilege::Write);
    k.parallel(d, |b, idx| {
        let o = b.origin(d, 0);
        let row = b.add(o, idx[0]);
        let a = entry(b, csr, v, idx[0], row);
        b.store(d, idx, a);
    });
    k
}

/// `out[i, c] = A[i, c]`.
fn dense(name: String, v: DType, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let csr = csr_params(&mut k, v, i);
    let out = k.store(v, 2, Privilege::Write);
    k.parallel(out, |b, idx| {
        let o = b.origin(out, 1);
        let col = b.add(o, idx[1]);
        let a = entry(b, csr, v, idx[0], col);
        b.store(out, idx, a);
    });
    k
}

/// `out[j] = s * vals[j]`.
fn scale(name: String, v: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let vals = k.store(v, 1, Privilege::Read);
    let out = k.store(v, 1, Privilege::Write);
    let s = k.scalar(v);
    k.parallel(out, |b, idx| {
        let a = b.load(vals, idx);
        let r = b.mul(s, a);
        b.store(out, idx, r);
    });
    k
}

/// `out[j] = d[i] * vals[j]` for each entry `j` of row `i` (`vals` and `out` partitioned by
/// the same image of `pos`, each indexed in its own sub-store).
fn scale_rows(name: String, v: DType, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let pos = k.store(i, 2, Privilege::Read);
    let vals = k.store(v, 1, Privilege::Read);
    let d = k.store(v, 1, Privilege::Read);
    let out = k.store(v, 1, Privilege::Write);
    k.parallel(d, |b, idx| {
        let (lo, hi) = row_range(b, pos, vals, idx[0]);
        let s = b.load(d, idx);
        // From `vals`'s local indices to `out`'s.
        let ov = b.origin(vals, 0);
        let oo = b.origin(out, 0);
        let shift = b.sub(ov, oo);
        b.for_loop(lo, hi, &[], |b, j, _| {
            let a = b.load(vals, &[j]);
            let r = b.mul(s, a);
            let at = b.add(j, shift);
            b.store(out, &[at], r);
            Vec::new()
        });
    });
    k
}

/// `out[j] = a[j] + b[j]`.
fn add(name: String, v: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(v, 1, Privilege::Read);
    let bv = k.store(v, 1, Privilege::Read);
    let out = k.store(v, 1, Privilege::Write);
    k.parallel(out, |b, idx| {
        let x = b.load(a, idx);
        let y = b.load(bv, idx);
        let r = b.add(x, y);
        b.store(out, idx, r);
    });
    k
}

/// `diff = #(a_pos != b_pos) + #(a_crd != b_crd)` (same shapes).
fn same(name: String, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a_pos = k.store(i, 2, Privilege::Read);
    let b_pos = k.store(i, 2, Privilege::Read);
    let a_crd = k.store(i, 1, Privilege::Read);
    let b_crd = k.store(i, 1, Privilege::Read);
    let diff = k.store(DType::I64, 0, Privilege::Reduce(ReduceOp::Sum));
    for (a, bs) in [(a_pos, b_pos), (a_crd, b_crd)] {
        k.parallel(a, |b, idx| {
            let x = b.load(a, idx);
            let y = b.load(bs, idx);
            let ne = b.ne(x, y);
            let one = b.cast(DType::I64, ne);
            b.reduce(diff, &[], one);
        });
    }
    k
}

/// Number of grid points per dimension `dims` of a Poisson matrix with `g` points per side.
/// The row ranges of the Poisson matrix: `pos[r, 0] = S(k)`, `pos[r, 1] = S(k + 1)` for
/// global row `k`, where `S(k)` (the entries in rows before `k`) is in closed form: `(2 dims +
/// 1) k` less the neighbours that rows before `k` lack at each face of the grid.
fn poisson_pos(name: String, dims: u8, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let pos = k.store(i, 2, Privilege::Write);
    let g = k.scalar(DType::I64);
    k.parallel(pos, |b, idx| {
        let o = b.origin(pos, 0);
        let row = b.add(o, idx[0]);
        // Column 0 holds S(row), column 1 S(row + 1).
        let kk = b.add(row, idx[1]);
        let s = entries_before(b, dims, g, kk);
        let s = b.cast(i, s);
        b.store(pos, idx, s);
    });
    k
}

/// `S(k)`: the entries of the Poisson matrix in its first `k` rows.
fn entries_before(b: &mut BodyBuilder, dims: u8, g: Value, k: Value) -> Value {
    let zero = b.const_i64(0);
    let one = b.const_i64(1);
    let per_row = b.const_i64(2 * i64::from(dims) + 1);
    let mut s = b.mul(per_row, k);
    // Along each dimension with stride `st` (1, g, g^2) and block `bl = st * g`: among rows
    // `m < k`, those with coordinate 0 lack the lower neighbour and those with coordinate
    // g - 1 lack the upper one. With q = k / bl and rem = k % bl: low = q * st + min(rem, st),
    // high = q * st + max(0, rem - (bl - st)).
    let mut st = one;
    for _ in 0..dims {
        let bl = b.mul(st, g);
        let q = b.div(k, bl);
        let qr = b.mul(q, bl);
        let rem = b.sub(k, qr);
        let qs = b.mul(q, st);
        let low_part = b.min(rem, st);
        let low = b.add(qs, low_part);
        let top = b.sub(bl, st);
        let over = b.sub(rem, top);
        let high_part = b.max(over, zero);
        let high = b.add(qs, high_part);
        s = b.sub(s, low);
        s = b.sub(s, high);
        st = bl;
    }
    s
}

/// Writes the entries of each Poisson row in column order: neighbours below (highest stride
/// first), the diagonal, neighbours above (lowest stride first).
fn poisson_fill(name: String, dims: u8, v: DType, i: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let pos = k.store(i, 2, Privilege::Read);
    let crd = k.store(i, 1, Privilege::Write);
    let vals = k.store(v, 1, Privilege::Write);
    let g = k.scalar(DType::I64);
    // Rows are the first column of `pos`: the loop runs over `pos` and does its work only
    // where the column index is 0 (a loop of zero or one iteration stands in for an `if`).
    k.parallel(pos, |b, idx| {
        let zero = b.const_i64(0);
        let one = b.const_i64(1);
        let first_col = b.eq(idx[1], zero);
        let once = b.cast(DType::I64, first_col);
        b.for_loop(zero, once, &[], |b, _, _| {
            let o = b.origin(pos, 0);
            let row = b.add(o, idx[0]);
            let (start, _) = row_range(b, pos, crd, idx[0]);
            // Coordinates and strides per dimension, lowest stride first.
            let mut coords = Vec::new();
            let mut strides = Vec::new();
            let mut st = one;
            for _ in 0..dims {
                let bl = b.mul(st, g);
                let q = b.div(row, st);
                let c = b.rem(q, g);
                coords.push(c);
                strides.push(st);
                st = bl;
            }
            let minus_one = b.const_of(v, -1.0);
            let diag = b.const_of(v, 2.0 * f64::from(dims));
            let gm1 = b.sub(g, one);
            let mut at = start;
            // Below: highest stride first (smallest column first).
            for d in (0..dims as usize).rev() {
                let has = b.gt(coords[d], zero);
                let col = b.sub(row, strides[d]);
                at = put(b, crd, vals, at, has, col, minus_one, i);
            }
            let yes = b.const_bool(true);
            at = put(b, crd, vals, at, yes, row, diag, i);
            for d in 0..dims as usize {
                let has = b.lt(coords[d], gm1);
                let col = b.add(row, strides[d]);
                at = put(b, crd, vals, at, has, col, minus_one, i);
            }
            let _ = at;
            Vec::new()
        });
    });
    k
}

/// Writes `crd[at] = col` and `vals[at] = value` if `has`, and returns the next position.
#[allow(clippy::too_many_arguments, reason = "one entry's every part")]
fn put(
    b: &mut BodyBuilder,
    crd: StoreParam,
    vals: StoreParam,
    at: Value,
    has: Value,
    col: Value,
    value: Value,
    i: DType,
) -> Value {
    let zero = b.const_i64(0);
    let n = b.cast(DType::I64, has);
    b.for_loop(zero, n, &[], |b, _, _| {
        let c = b.cast(i, col);
        b.store(crd, &[at], c);
        b.store(vals, &[at], value);
        Vec::new()
    });
    b.add(at, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_round_trips_and_builds() {
        let mut keys = Vec::new();
        for v in [DType::F32, DType::F64] {
            keys.push(Key::Scale { v });
            keys.push(Key::Add { v });
            for i in [DType::I32, DType::I64] {
                keys.push(Key::ScaleRows { v, i });
                for order in [RowOrder::Sequential, RowOrder::Lanes] {
                    keys.push(Key::Spmv { v, i, order });
                }
                keys.push(Key::Diag { v, i });
                keys.push(Key::Dense { v, i });
                for dims in [2, 3] {
                    keys.push(Key::PoissonFill { dims, v, i });
                }
            }
        }
        for i in [DType::I32, DType::I64] {
            keys.push(Key::Same { i });
            for dims in [2, 3] {
                keys.push(Key::PoissonPos { dims, i });
            }
        }
        for key in keys {
            let text = key.to_string();
            assert_eq!(text.parse::<Key>(), Ok(key), "{text}");
            build(&key).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        assert!("spmv.i64.i64".parse::<Key>().is_err());
        assert!("spmv.rows.f64.i64".parse::<Key>().is_err());
        assert!("poisson4d.pos.i64".parse::<Key>().is_err());
    }
}
