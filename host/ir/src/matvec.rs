//! The product of a long-rowed matrix by a vector in an order that splits along `k`.
//!
//! `numeric`'s `matvec` sums each row's products in the lane order
//! ([`crate::builder::BodyBuilder::fold_lanes`]: eight interleaved chains over the whole row,
//! combined by a fixed tree). That order cannot be cut along `k`: a chain runs over every
//! term. For rows longer than [`PARTS_FROM`] terms the plugin submits [`matvec_parts`]
//! instead: the row cut into [`PARTS`] consecutive parts of [`part_width`] terms (the last
//! cut at `k`), each part's sum the lane order over its terms, and the parts' sums combined
//! by the aligned pairwise tree, `((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))`.
//!
//! Every aligned subtree of that tree is a run of whole parts, so a grid of `l` layers
//! (`l` a power of two up to [`PARTS`]) splits `k` with the same bits: layer `z` owns parts
//! `z PARTS / l ..`, computes its subtree's sum for its rows with [`matvec_layer`], and
//! [`matvec_layers_sum`] combines the `l` layers' sums by the tree's top levels. The runtime
//! launches such a product over a grid of ranks where asked (`weft_runtime::matvec_grid`);
//! [`recognize_parts`] says whether a kernel is exactly the plugin's.
//!
//! Each part's loop is a `fold_lanes` at the top of the point's body, as `matvec`'s one loop
//! is, so back ends run it the same way (vector lanes and several rows side by side on the
//! CPU, a group of threads per row on the GPU).

use crate::builder::{BodyBuilder, KernelBuilder, Value};
use crate::{DType, Kernel, Privilege, ReduceOp};

/// The parts a row is cut into.
pub const PARTS: u64 = 8;

/// Rows of more terms than this take [`matvec_parts`]; shorter ones keep the lane order over
/// the whole row (a grid would give each layer too few terms to be worth a message).
pub const PARTS_FROM: u64 = 8192;

/// The terms of each part of a row of `k` terms but the last: `k / PARTS` rounded up to a
/// multiple of eight (the lanes), so that every part but the last starts on a whole group of
/// lanes. For `k > 448` every part holds terms.
pub fn part_width(k: u64) -> u64 {
    k.div_ceil(PARTS).div_ceil(8).saturating_mul(8)
}

/// The kernel of `y = A @ x` by parts, named `name`: parameters `A` (`(m, k)`, read, tiled
/// by rows like `y`, all of `k`), `x` (`(k,)`, read, whole) and `y` (`(m,)`, written).
pub fn matvec_parts(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    by_parts(name, dtype, None)
}

/// The kernel of one layer of a product by parts over a grid: parameters `A` (the point's
/// rows over its layer's terms, read), `x` (its layer's terms, read), `P` (`(layers, m)`,
/// written, each point's view one layer thick over its rows) and the part width (a scalar
/// `i64`, [`part_width`] of the whole row). The layer owns `parts` parts (`PARTS / layers`);
/// `P[z, i]` is their subtree of the row's tree.
pub fn matvec_layer(name: impl Into<String>, dtype: DType, parts: u64) -> KernelBuilder {
    by_parts(name, dtype, Some(parts))
}

/// [`matvec_parts`] (`layer` `None`: all [`PARTS`] parts of whole rows into `y`) or
/// [`matvec_layer`] (`Some(parts)`: a layer's parts into its layer of `P`).
fn by_parts(name: impl Into<String>, dtype: DType, layer: Option<u64>) -> KernelBuilder {
    let mut kb = KernelBuilder::new(name);
    let a = kb.store(dtype, 2, Privilege::Read);
    let x = kb.store(dtype, 1, Privilege::Read);
    let out_rank = if layer.is_some() { 2 } else { 1 };
    let out = kb.store(dtype, out_rank, Privilege::Write);
    // The width comes from the host for a layer (its view is not the whole row), and is
    // computed from the row for the whole.
    let (w, terms) = match layer {
        Some(_) => {
            let w = kb.scalar(DType::I64);
            (w, kb.extent(x, 0))
        }
        None => {
            let k = kb.extent(a, 1);
            (width_of(&mut kb, k), k)
        }
    };
    let parts = layer.unwrap_or(PARTS);
    kb.parallel(out, |b, idx| {
        let row = idx[idx.len() - 1];
        let sum = parts_sum(b, dtype, parts, w, terms, |b, p| {
            let aip = b.load(a, &[row, p]);
            let xp = b.load(x, &[p]);
            b.mul(aip, xp)
        });
        b.store(out, idx, sum);
    });
    kb
}

/// The kernel that combines a grid's layers: parameters `P` (`(layers, m)`, read) and `y`
/// (`(m,)`, written); `y[i]` is the aligned pairwise tree over `z` of `P[z, i]` (`layers` a
/// power of two): the top levels of the row's tree.
pub fn matvec_layers_sum(name: impl Into<String>, dtype: DType, layers: u64) -> KernelBuilder {
    let mut kb = KernelBuilder::new(name);
    let p = kb.store(dtype, 2, Privilege::Read);
    let y = kb.store(dtype, 1, Privilege::Write);
    kb.parallel(y, |b, idx| {
        let sums: Vec<Value> = (0..layers.max(1))
            .map(|z| {
                let z = b.const_i64(z as i64);
                b.load(p, &[z, idx[0]])
            })
            .collect();
        let sum = tree(b, sums);
        b.store(y, idx, sum);
    });
    kb
}

/// The dtype of `kernel` if it is exactly [`matvec_parts`]'s kernel of a float dtype (its
/// name aside), else `None`.
pub fn recognize_parts(kernel: &Kernel) -> Option<DType> {
    crate::product::recognize_built(kernel, (2, 3), |name, dtype| {
        matvec_parts(name, dtype).finish()
    })
}

/// [`part_width`] in the IR, of `k` terms.
fn width_of(b: &mut BodyBuilder, k: Value) -> Value {
    let seven = b.const_i64(7);
    let three = b.const_i64(3);
    let lanes = b.add(k, seven);
    let per_part = b.shr(lanes, three);
    let rounded = b.add(per_part, seven);
    let groups = b.shr(rounded, three);
    b.shl(groups, three)
}

/// The sum of `term(p)` over `0..terms` cut into `parts` parts of `w` terms (the last cut at
/// `terms`), each part's sum in the lane order, the parts' sums combined by the aligned
/// pairwise tree.
fn parts_sum(
    b: &mut BodyBuilder,
    dtype: DType,
    parts: u64,
    w: Value,
    terms: Value,
    mut term: impl FnMut(&mut BodyBuilder, Value) -> Value,
) -> Value {
    let sums: Vec<Value> = (0..parts.max(1))
        .map(|j| {
            let j = b.const_i64(j as i64);
            let start = b.mul(j, w);
            let lo = b.min(start, terms);
            let end = b.add(lo, w);
            let hi = b.min(end, terms);
            b.fold_lanes(ReduceOp::Sum, dtype, lo, hi, &mut term)
        })
        .collect();
    tree(b, sums)
}

/// The aligned pairwise tree over `values` (a power of two of them).
fn tree(b: &mut BodyBuilder, mut level: Vec<Value>) -> Value {
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [l, r] => b.add(*l, *r),
                _ => pair[0],
            })
            .collect();
    }
    level[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scalar;
    use crate::interp::{Arg, Storage, View, run_with_limit};

    /// Terms of many magnitudes, so that the order shows in the bits.
    fn values(n: usize, seed: usize) -> Vec<f64> {
        (0..n)
            .map(|p| {
                let q = p * 7919 + seed * 104_729;
                ((q % 1013) as f64 - 506.0) * 1.5f64.powi((q % 37) as i32 - 18)
            })
            .collect()
    }

    /// The lane order of `fold_lanes` over `terms`, written out.
    fn lanes(terms: &[f64]) -> f64 {
        let whole = terms.len() / 8 * 8;
        let mut s = [0.0f64; 8];
        for group in terms[..whole].chunks(8) {
            for (acc, t) in s.iter_mut().zip(group) {
                *acc += t;
            }
        }
        let tail = terms[whole..].iter().fold(0.0, |acc, t| acc + t);
        (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail
    }

    /// The parts order written out: parts of `part_width(k)` terms, each in the lane order,
    /// by the pairwise tree.
    fn reference(terms: &[f64]) -> f64 {
        let w = part_width(terms.len() as u64) as usize;
        let sums: Vec<f64> = (0..PARTS as usize)
            .map(|j| {
                let lo = (j * w).min(terms.len());
                let hi = (lo + w).min(terms.len());
                lanes(&terms[lo..hi])
            })
            .collect();
        fn tree(xs: &[f64]) -> f64 {
            match xs {
                [one] => *one,
                _ => tree(&xs[..xs.len() / 2]) + tree(&xs[xs.len() / 2..]),
            }
        }
        tree(&sums)
    }

    fn f64s(storage: &Storage) -> Vec<f64> {
        storage
            .data
            .iter()
            .map(|s| match s {
                Scalar::F64(v) => *v,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// `y = A @ x` by [`matvec_parts`] for `A` of `rows x k`.
    fn whole(a: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
        let k = x.len() as i64;
        let kernel = matvec_parts("mv", DType::F64).finish();
        let mut storages = vec![
            Storage::from_f64(DType::F64, a),
            Storage::from_f64(DType::F64, x),
            Storage::zeros(DType::F64, rows),
        ];
        let args = [
            Arg::Store(View::dense(0, &[rows as i64, k])),
            Arg::Store(View::dense(1, &[k])),
            Arg::Store(View::dense(2, &[rows as i64])),
        ];
        run_with_limit(&kernel, &args, &mut storages, 1 << 32).expect("runs");
        f64s(&storages[2])
    }

    #[test]
    fn each_row_is_its_parts_in_the_lane_order_by_the_tree() {
        let rows = 3;
        for k in [0usize, 1, 9, 447, 8193, 20_011] {
            let a = values(rows * k, 1);
            let x = values(k, 2);
            let got = whole(&a, &x, rows);
            let mut differs = false;
            for (i, y) in got.iter().enumerate() {
                let terms: Vec<f64> = (0..k).map(|p| a[i * k + p] * x[p]).collect();
                assert_eq!(y.to_bits(), reference(&terms).to_bits(), "k = {k}, row {i}");
                differs |= y.to_bits() != lanes(&terms).to_bits();
            }
            // The order shows: for some row, the lane order over the whole row gives other
            // bits.
            assert!(differs || k < 8000, "k = {k}");
        }
    }

    #[test]
    fn layers_and_their_sum_give_the_whole_rows_bits() {
        let (rows, k) = (5usize, 9_001usize);
        let a = values(rows * k, 3);
        let x = values(k, 4);
        let want = whole(&a, &x, rows);
        let w = part_width(k as u64) as usize;
        for layers in [1usize, 2, 4, 8] {
            let parts = PARTS as usize / layers;
            let span = parts * w;
            let layer = matvec_layer("mv.layer", DType::F64, parts as u64).finish();
            let mut partial = Storage::zeros(DType::F64, layers * rows);
            // Rows in two uneven tiles, as a grid's points see them.
            for z in 0..layers {
                for (r0, r1) in [(0usize, 2usize), (2, rows)] {
                    let (lo, hi) = ((z * span).min(k), ((z + 1) * span).min(k));
                    let mut storages = vec![
                        Storage::from_f64(DType::F64, &a),
                        Storage::from_f64(DType::F64, &x),
                        partial.clone(),
                    ];
                    let args = [
                        Arg::Store(View::window(
                            0,
                            &[rows as i64, k as i64],
                            &[r0 as i64, lo as i64],
                            &[(r1 - r0) as i64, (hi - lo) as i64],
                        )),
                        Arg::Store(View::window(
                            1,
                            &[k as i64],
                            &[lo as i64],
                            &[(hi - lo) as i64],
                        )),
                        Arg::Store(View::window(
                            2,
                            &[layers as i64, rows as i64],
                            &[z as i64, r0 as i64],
                            &[1, (r1 - r0) as i64],
                        )),
                        Arg::Scalar(Scalar::I64(w as i64)),
                    ];
                    run_with_limit(&layer, &args, &mut storages, 1 << 32).expect("runs");
                    partial = storages.pop().expect("three storages");
                }
            }
            let sum = matvec_layers_sum("mv.sum", DType::F64, layers as u64).finish();
            let mut storages = vec![partial, Storage::zeros(DType::F64, rows)];
            let args = [
                Arg::Store(View::dense(0, &[layers as i64, rows as i64])),
                Arg::Store(View::dense(1, &[rows as i64])),
            ];
            run_with_limit(&sum, &args, &mut storages, 1 << 32).expect("runs");
            let got = f64s(&storages[1]);
            let bits = |v: &[f64]| v.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{layers} layers");
        }
    }

    #[test]
    fn the_kernel_is_recognized_under_any_name_and_nothing_else_is() {
        crate::product::tests::recognized_exactly(
            |name, dtype| matvec_parts(name, dtype).finish(),
            recognize_parts,
            (2, 1),
        );
        for dtype in [DType::F32, DType::F64] {
            let layer = matvec_layer("numeric.matvec_parts", dtype, PARTS).finish();
            assert_eq!(recognize_parts(&layer), None);
        }
    }

    #[test]
    fn every_part_holds_terms_past_448() {
        for k in [449u64, 1000, 8193, 65_537, 1 << 30] {
            let w = part_width(k);
            assert_eq!(w % 8, 0);
            assert!((PARTS - 1) * w < k, "k = {k}");
            assert!(PARTS * w >= k, "k = {k}");
        }
    }
}
