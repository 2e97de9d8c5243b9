//! The canonical dense product kernel, which back ends may run with a tuned routine.
//!
//! [`matmul`] builds the kernel of `C = A @ B` that the `numeric` plugin submits: `C[i, j]`
//! is the canonical blocked sum of `A[i, p] * BT[c, p]` over `p` ([`blocked_sum`]), where
//! `BT` is `B`'s transpose stored by rows and `c` is `j`'s global column: `p` cut into
//! aligned blocks of [`BLOCK_TERMS`] terms, each block one chain of fused multiply-adds from
//! zero in increasing `p` (`sum = fma(A[i, p], BT[c, p], sum)`, one rounding per term), the
//! blocks' sums combined by the aligned pairwise tree over the block index. The IR fixes
//! every operation and its order, so any routine that gives the same bits may run it: a
//! BLAS-style register tile that keeps a tile of `C` in registers while the terms stream
//! through, continues each element's chain from memory between passes over `k` inside a
//! block, and merges the blocks' sums in its epilogue, does. The blocks let a product split
//! `k` over ranks (a 2.5-D grid's layers each own a subtree of blocks, and their reduction is
//! the tree's top levels) with bits that depend on neither the grid nor the rank count.
//! [`recognize`] says whether a kernel is exactly that kernel (under any name): the host
//! runs a recognized product as a task of its own (never fused), so that the CPU back end can
//! run it through its blocked routine (`weft-cpu`'s `product` module) instead of the
//! compiled loop.
//!
//! [`matmul_tiled`] is the same product over a grid of `C`'s tiles, each point seeing its own
//! panel of `BT` (what the runtime launches on several ranks); [`recognize_tiled`] says
//! whether a kernel is exactly that one.
//!
//! [`matmul_rows`] builds the kernel of `C = X.T @ B` launched over the rows that `X` and `B`
//! share (a transposed tall matrix times a tall one, as k-means' `onehot.T @ x`): each point
//! adds its outer product into `C`, whose elements reduce by element trees
//! ([`crate::reduction::element_trees`]). [`recognize_rows`] says whether a kernel is exactly
//! that one; the host runs it alone too, so that a back end may run a block of points with a
//! register-tiled routine that keeps each element's order.

use crate::builder::{BodyBuilder, KernelBuilder, Value};
use crate::{DType, Kernel, Param, Privilege, ReduceOp};

/// The kernel of `C = A @ B` for a float `dtype`, named `name`: parameters `A` (`(m, k)`,
/// tiled by rows like `C`), `BT` (`(n, k)`, whole: row `c` is column `c` of `B`) and `C`
/// (`(m, n)`, written); each element the canonical blocked sum of its row products
/// ([`blocked_sum`]).
pub fn matmul(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    product(name, dtype, BtRows::Global)
}

/// The kernel of `C = A @ B` launched over a grid of tiles of `C` ([`recognize_tiled`]): the
/// same as [`matmul`] but for `BT`, which each point sees as its own panel, the rows that
/// `C`'s tile's columns name (`BT[j, p]` for `C[i, j]`), rather than whole. The runtime
/// launches the canonical product this way over a grid of ranks (`weft_runtime::products`);
/// each element is the same blocked sum, so the bits are [`matmul`]'s.
pub fn matmul_tiled(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    product(name, dtype, BtRows::Local)
}

/// The kernel of one layer of a 2.5-D product ([`recognize_layered`]): [`matmul_tiled`]
/// writing its tile into `P` (`(layers, m, n)`, rank 3), each point's view of it one layer
/// thick. Each point sees the slice of `k` its layer owns (an aligned subtree of blocks of
/// [`BLOCK_TERMS`] terms), so its sums are nodes of the canonical tree, which [`layers_sum`]
/// completes.
pub fn matmul_layered(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    product(name, dtype, BtRows::Layered)
}

/// The kernel that sums a 2.5-D product's layers: parameters `P` (`(layers, m, n)`, read:
/// the layers' partial sums, each a node of the canonical tree at the same level) and `C`
/// (`(m, n)`, written); `C[i, j]` is the aligned pairwise tree over `z` of `P[z, i, j]`
/// (`layers` a power of two, so every node is complete): the canonical tree's top levels, so
/// that `C` has the bits of the one-process product.
pub fn layers_sum(name: impl Into<String>, dtype: DType, layers: u32) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let p = k.store(dtype, 3, Privilege::Read);
    let c = k.store(dtype, 2, Privilege::Write);
    k.parallel(c, |b, idx| {
        let mut level: Vec<_> = (0..i64::from(layers.max(1)))
            .map(|z| {
                let z = b.const_i64(z);
                b.load(p, &[z, idx[0], idx[1]])
            })
            .collect();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| match pair {
                    [l, r] => b.add(*l, *r),
                    _ => pair[0],
                })
                .collect();
        }
        b.store(c, idx, level[0]);
    });
    k
}

/// How a product kernel finds the row of `BT` for column `j` of `C`'s tile, and where it
/// writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BtRows {
    /// `origin(C, 1) + j`: `BT` is whole.
    Global,
    /// `j`: `BT` is the tile's panel.
    Local,
    /// `j`, and `C` is a layer of rank 3 (`(1, rows, cols)` per point).
    Layered,
}

fn product(name: impl Into<String>, dtype: DType, rows: BtRows) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 2, Privilege::Read);
    let bt = k.store(dtype, 2, Privilege::Read);
    let c_rank = if rows == BtRows::Layered { 3 } else { 2 };
    let c = k.store(dtype, c_rank, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(c, |b, idx| {
        let (i, j) = (idx[idx.len() - 2], idx[idx.len() - 1]);
        let col = match rows {
            BtRows::Global => {
                let origin = b.origin(c, 1);
                b.add(origin, j)
            }
            BtRows::Local | BtRows::Layered => j,
        };
        let sum = blocked_sum(b, dtype, n, |b, p| {
            let aip = b.load(a, &[i, p]);
            let bpj = b.load(bt, &[col, p]);
            (aip, bpj)
        });
        b.store(c, idx, sum);
    });
    k
}

/// The terms of one canonical product are cut into aligned blocks of this many: each block's
/// sum is one chain of `fma`s from zero, and the blocks' sums combine by the aligned pairwise
/// tree over the block index (see [`blocked_sum`]).
pub const BLOCK_TERMS: u64 = 1024;

/// The levels of the partial sums' stack that [`blocked_sum`] writes out in the IR: products
/// of up to `BLOCK_TERMS * (2^STACK_LEVELS - 1)` terms (over 4 * 10^12).
pub const STACK_LEVELS: u32 = 32;

/// The canonical sum of the products `x * y` of `term(p)` for `p` in `0..n`: the terms cut
/// into blocks `[q BLOCK_TERMS, (q + 1) BLOCK_TERMS)` (the last one cut at `n`), each
/// block's sum the chain `s = fma(x, y, s)` from `+0` in increasing `p`, and the blocks'
/// sums combined by the aligned pairwise tree over `q` (`weft_ir::reduction`'s order: the
/// node at level `l` and index `t` covers blocks `[t 2^l, (t + 1) 2^l)` and is its left
/// child `+` its right one; a node with no block on its right is its left child). With no
/// terms the sum is `+0`; with one block it is that block's chain.
///
/// The IR computes the tree with a binary counter: after block `q` the partial sums of the
/// complete subtrees so far sit in a stack of [`STACK_LEVELS`] carried values (level `l`
/// holding a subtree of `2^l` blocks); a finished block merges with the levels below the
/// lowest zero bit of `q`, each stacked subtree on the left, and lands at that level; at the
/// end the levels present in the block count fold from the lowest up, each on the left of
/// what the lower ones made.
pub fn blocked_sum(
    b: &mut BodyBuilder,
    dtype: DType,
    n: Value,
    term: impl Fn(&mut BodyBuilder, Value) -> (Value, Value),
) -> Value {
    let shift = BLOCK_TERMS.trailing_zeros() as i64;
    let zero = b.constant(ReduceOp::Sum.identity(dtype));
    let lo = b.const_i64(0);
    let last = b.const_i64(BLOCK_TERMS as i64 - 1);
    let bits = b.const_i64(shift);
    let rounded = b.add(n, last);
    let blocks = b.shr(rounded, bits);
    let stack: Vec<_> = (0..STACK_LEVELS).map(|_| zero).collect();
    let stack = b.for_loop(lo, blocks, &stack, |b, q, stack| {
        let width = b.const_i64(BLOCK_TERMS as i64);
        let start = b.shl(q, bits);
        let end = b.add(start, width);
        let end = b.min(end, n);
        let sum = b.for_loop(start, end, &[zero], |b, p, acc| {
            let (x, y) = term(b, p);
            vec![b.fma(x, y, acc[0])]
        })[0];
        let one = b.const_i64(1);
        let count = b.add(q, one);
        let none = b.const_i64(0);
        let mut carry = sum;
        let mut next = Vec::with_capacity(stack.len());
        for (level, &held) in stack.iter().enumerate() {
            let mask = b.const_i64((2i64 << level) - 1);
            let half = b.const_i64(1i64 << level);
            let low = b.and(count, mask);
            let lands = b.eq(low, half);
            let merges = b.eq(low, none);
            next.push(b.select(lands, carry, held));
            let merged = b.add(held, carry);
            carry = b.select(merges, merged, carry);
        }
        next
    });
    let none = b.const_i64(0);
    let mut acc = zero;
    let mut have = b.const_bool(false);
    for (level, &held) in stack.iter().enumerate() {
        let bit = b.const_i64(1i64 << level);
        let set = b.and(blocks, bit);
        let present = b.ne(set, none);
        let merged = b.add(held, acc);
        let folded = b.select(have, merged, held);
        acc = b.select(present, folded, acc);
        have = b.or(have, present);
    }
    acc
}

/// The dtype of `kernel` if it is exactly [`matmul`]'s kernel of a float dtype (its name
/// aside), else `None`.
pub fn recognize(kernel: &Kernel) -> Option<DType> {
    recognize_as(kernel, BtRows::Global)
}

/// The dtype of `kernel` if it is exactly [`matmul_tiled`]'s kernel of a float dtype (its
/// name aside), else `None`.
pub fn recognize_tiled(kernel: &Kernel) -> Option<DType> {
    recognize_as(kernel, BtRows::Local)
}

/// The dtype of `kernel` if it is exactly [`matmul_layered`]'s kernel of a float dtype (its
/// name aside), else `None`.
pub fn recognize_layered(kernel: &Kernel) -> Option<DType> {
    recognize_as(kernel, BtRows::Layered)
}

fn recognize_as(kernel: &Kernel, rows: BtRows) -> Option<DType> {
    recognize_built(kernel, (2, 3), |name, dtype| {
        product(name, dtype, rows).finish()
    })
}

/// The dtype of `kernel` if it is exactly the kernel `build(name, dtype)` gives for its name
/// and a float dtype, read from its first parameter (a store of `rank`, read); `params` is
/// its parameter count, checked before anything is built.
pub(crate) fn recognize_built(
    kernel: &Kernel,
    (rank, params): (u32, usize),
    build: impl Fn(String, DType) -> Kernel,
) -> Option<DType> {
    let dtype = match kernel.params.first()? {
        Param::Store {
            dtype: d @ (DType::F32 | DType::F64),
            rank: r,
            privilege: Privilege::Read,
        } if *r == rank => *d,
        _ => return None,
    };
    if kernel.params.len() != params {
        return None;
    }
    let canonical = build(kernel.name.clone(), dtype);
    (canonical.params == kernel.params && canonical.body == kernel.body).then_some(dtype)
}

/// The kernel of `C += X.T @ B` for a float `dtype`, named `name`: parameters `rows` (`(p,)`,
/// a view of `X`'s first column, never read: the loop runs over it), `X` (`(p, m)`), `B`
/// (`(p, n)`), both tiled by rows like `rows`, and `C` (`(m, n)`, whole, reduced by sums).
/// Point `i` adds `X[i, r] * B[i, j]` (one rounded product) into every `C[r, j]`, `r` outer
/// and `j` inner; the loop has rank 1, so each element of `C` reduces by its element tree
/// (its contributions in blocks of points, in point order).
pub fn matmul_rows(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let rows = k.store(dtype, 1, Privilege::Read);
    let xm = k.store(dtype, 2, Privilege::Read);
    let bm = k.store(dtype, 2, Privilege::Read);
    let c = k.store(dtype, 2, Privilege::Reduce(ReduceOp::Sum));
    let m = k.extent(xm, 1);
    let n = k.extent(bm, 1);
    k.parallel(rows, |b, idx| {
        let i = idx[0];
        let lo = b.const_i64(0);
        b.for_loop(lo, m, &[], |b, r, _| {
            let xir = b.load(xm, &[i, r]);
            let lo = b.const_i64(0);
            b.for_loop(lo, n, &[], |b, j, _| {
                let bij = b.load(bm, &[i, j]);
                let p = b.mul(xir, bij);
                b.reduce(c, &[r, j], p);
                vec![]
            });
            vec![]
        });
    });
    k
}

/// The dtype of `kernel` if it is exactly [`matmul_rows`]'s kernel of a float dtype (its
/// name aside), else `None`.
pub fn recognize_rows(kernel: &Kernel) -> Option<DType> {
    recognize_built(kernel, (1, 4), |name, dtype| {
        matmul_rows(name, dtype).finish()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_product_kernel_is_recognized_under_any_name_and_nothing_else_is() {
        for dtype in [DType::F32, DType::F64] {
            let mut k = matmul("some.name", dtype).finish();
            assert_eq!(recognize(&k), Some(dtype));
            k.name = "another".into();
            assert_eq!(recognize(&k), Some(dtype));
            // One instruction fewer: not the product.
            let mut short = k.clone();
            if let Some(crate::Inst {
                op: crate::Op::Parallel(p),
                ..
            }) = short.body.last_mut()
            {
                p.body.pop();
            }
            assert_eq!(recognize(&short), None);
            // Another privilege on `C`.
            let mut rw = k.clone();
            rw.params[2] = Param::Store {
                dtype,
                rank: 2,
                privilege: Privilege::ReadWrite,
            };
            assert_eq!(recognize(&rw), None);
        }
        let ints = matmul("ints", DType::I64).finish();
        assert_eq!(recognize(&ints), None);
    }

    /// The canonical sum written independently: blocks of `BLOCK_TERMS` chains, combined by
    /// splitting the block range at its largest power of two below its length (the aligned
    /// tree's left subtree), recursively.
    fn reference(x: &[f64], y: &[f64]) -> f64 {
        fn tree(blocks: &[f64]) -> f64 {
            match blocks {
                [] => 0.0,
                [one] => *one,
                _ => {
                    // The largest power of two below the length.
                    let half = 1usize << (usize::BITS - 1 - (blocks.len() - 1).leading_zeros());
                    tree(&blocks[..half]) + tree(&blocks[half..])
                }
            }
        }
        let blocks: Vec<f64> = x
            .chunks(BLOCK_TERMS as usize)
            .zip(y.chunks(BLOCK_TERMS as usize))
            .map(|(xs, ys)| xs.iter().zip(ys).fold(0.0, |s, (a, b)| a.mul_add(*b, s)))
            .collect();
        tree(&blocks)
    }

    #[test]
    fn the_kernel_sums_blocks_of_terms_by_the_aligned_tree() {
        use crate::Scalar;
        use crate::interp::{Arg, Storage, View, run_with_limit};
        let kernel = matmul("p", DType::F64).finish();
        let block = BLOCK_TERMS as usize;
        for k in [
            0,
            1,
            7,
            block - 1,
            block,
            block + 1,
            3 * block,
            5 * block + 7,
            8 * block,
        ] {
            // Terms of many magnitudes, so that the order shows in the bits.
            let x: Vec<f64> = (0..k)
                .map(|p| ((p * 7919 % 1013) as f64 - 506.0) * 1.5f64.powi((p % 37) as i32 - 18))
                .collect();
            let y: Vec<f64> = (0..k).map(|p| 1.0 + (p % 11) as f64 / 3.0).collect();
            let mut storages = vec![
                Storage::from_f64(DType::F64, &x),
                Storage::from_f64(DType::F64, &y),
                Storage::zeros(DType::F64, 1),
            ];
            let args = [
                Arg::Store(View::dense(0, &[1, k as i64])),
                Arg::Store(View::dense(1, &[1, k as i64])),
                Arg::Store(View::dense(2, &[1, 1])),
            ];
            run_with_limit(&kernel, &args, &mut storages, 1 << 30).expect("runs");
            let got = match storages[2].data[0] {
                Scalar::F64(v) => v,
                other => panic!("{other:?}"),
            };
            let chain = x.iter().zip(&y).fold(0.0, |s, (a, b)| a.mul_add(*b, s));
            assert_eq!(got.to_bits(), reference(&x, &y).to_bits(), "k = {k}");
            if k > 2 * block {
                // The order shows: one chain of all the terms gives other bits.
                assert_ne!(got.to_bits(), chain.to_bits(), "k = {k}");
            }
        }
    }

    #[test]
    fn the_tiled_product_is_recognized_as_itself_and_not_as_the_whole_one() {
        for dtype in [DType::F32, DType::F64] {
            let tiled = matmul_tiled("numeric.matmul", dtype).finish();
            let whole = matmul("numeric.matmul", dtype).finish();
            assert_eq!(recognize_tiled(&tiled), Some(dtype));
            assert_eq!(recognize(&tiled), None);
            assert_eq!(recognize_tiled(&whole), None);
            assert_eq!(recognize_rows(&tiled), None);
            assert_ne!(tiled.body, whole.body);
        }
    }

    #[test]
    fn the_layered_product_is_recognized_as_itself_alone() {
        for dtype in [DType::F32, DType::F64] {
            let layered = matmul_layered("numeric.matmul", dtype).finish();
            assert_eq!(recognize_layered(&layered), Some(dtype));
            assert_eq!(recognize_tiled(&layered), None);
            assert_eq!(recognize(&layered), None);
            let tiled = matmul_tiled("numeric.matmul", dtype).finish();
            assert_eq!(recognize_layered(&tiled), None);
        }
    }

    #[test]
    fn the_layers_sum_is_the_aligned_tree_over_the_layers() {
        use crate::Scalar;
        use crate::interp::{Arg, Storage, View, run};
        for layers in [1u32, 2, 4, 8] {
            let kernel = layers_sum("sum", DType::F64, layers).finish();
            let (m, n) = (2usize, 3usize);
            let l = layers as usize;
            let p: Vec<f64> = (0..l * m * n)
                .map(|x| (1.0 + x as f64 / 3.0) * 10f64.powi((x * 7 % 19) as i32 - 9))
                .collect();
            let mut storages = vec![
                Storage::from_f64(DType::F64, &p),
                Storage::zeros(DType::F64, m * n),
            ];
            let args = [
                Arg::Store(View::dense(0, &[l as i64, m as i64, n as i64])),
                Arg::Store(View::dense(1, &[m as i64, n as i64])),
            ];
            run(&kernel, &args, &mut storages).expect("runs");
            fn tree(xs: &[f64]) -> f64 {
                match xs {
                    [one] => *one,
                    _ => tree(&xs[..xs.len() / 2]) + tree(&xs[xs.len() / 2..]),
                }
            }
            for e in 0..m * n {
                let column: Vec<f64> = (0..l).map(|z| p[z * m * n + e]).collect();
                assert_eq!(
                    storages[1].data[e],
                    Scalar::F64(tree(&column)),
                    "{layers} layers, element {e}"
                );
            }
        }
    }

    #[test]
    fn the_rows_product_kernel_is_recognized_under_any_name_and_nothing_else_is() {
        recognized_exactly(
            |name, dtype| matmul_rows(name, dtype).finish(),
            recognize_rows,
            (3, 2),
        );
        for dtype in [DType::F32, DType::F64] {
            let k = matmul_rows("some.name", dtype).finish();
            assert_eq!(recognize(&k), None);
            assert_eq!(recognize_rows(&matmul("p", dtype).finish()), None);
        }
    }

    /// Checks a recognizer of a kernel that `build(name, dtype)` makes: it takes the kernel of
    /// either float dtype under any name, and neither the kernel with another privilege on its
    /// written parameter (`written`: its index and rank) nor an integer dtype's.
    pub(crate) fn recognized_exactly(
        build: impl Fn(&str, DType) -> Kernel,
        recognize: impl Fn(&Kernel) -> Option<DType>,
        (written, rank): (usize, u32),
    ) {
        for dtype in [DType::F32, DType::F64] {
            let mut k = build("some.name", dtype);
            assert_eq!(recognize(&k), Some(dtype));
            k.name = "another".into();
            assert_eq!(recognize(&k), Some(dtype));
            let mut rw = k.clone();
            rw.params[written] = Param::Store {
                dtype,
                rank,
                privilege: Privilege::ReadWrite,
            };
            assert_eq!(recognize(&rw), None, "read-write parameter {written}");
        }
        assert_eq!(recognize(&build("ints", DType::I64)), None);
    }
}
