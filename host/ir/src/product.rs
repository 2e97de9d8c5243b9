//! The canonical dense product kernel, which back ends may run with a tuned routine.
//!
//! [`matmul`] builds the kernel of `C = A @ B` that the `numeric` plugin submits: `C[i, j]`
//! is the sum of `A[i, p] * BT[c, p]` over `p` as one chain of fused multiply-adds from zero
//! in increasing `p` (`sum = fma(A[i, p], BT[c, p], sum)`, one rounding per term), where `BT`
//! is `B`'s transpose stored by rows and `c` is `j`'s global column. The IR fixes every
//! operation and its order, so any routine that gives the same bits may run it: a BLAS-style
//! register tile that keeps a tile of `C` in registers while the terms stream through, and
//! continues each element's chain from memory between passes over `k`, does. [`recognize`] says whether a kernel is exactly that kernel (under any name): the host
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

use crate::builder::KernelBuilder;
use crate::{DType, Kernel, Param, Privilege, ReduceOp};

/// The kernel of `C = A @ B` for a float `dtype`, named `name`: parameters `A` (`(m, k)`,
/// tiled by rows like `C`), `BT` (`(n, k)`, whole: row `c` is column `c` of `B`) and `C`
/// (`(m, n)`, written); each element the chain of `fma`s of its row products, in order.
pub fn matmul(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    product(name, dtype, BtRows::Global)
}

/// The kernel of `C = A @ B` launched over a grid of tiles of `C` ([`recognize_tiled`]): the
/// same as [`matmul`] but for `BT`, which each point sees as its own panel, the rows that
/// `C`'s tile's columns name (`BT[j, p]` for `C[i, j]`), rather than whole. The runtime
/// launches the canonical product this way over a grid of ranks (`weft_runtime::products`);
/// each element is the same chain, so the bits are [`matmul`]'s.
pub fn matmul_tiled(name: impl Into<String>, dtype: DType) -> KernelBuilder {
    product(name, dtype, BtRows::Local)
}

/// How a product kernel finds the row of `BT` for column `j` of `C`'s tile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BtRows {
    /// `origin(C, 1) + j`: `BT` is whole.
    Global,
    /// `j`: `BT` is the tile's panel.
    Local,
}

fn product(name: impl Into<String>, dtype: DType, rows: BtRows) -> KernelBuilder {
    let mut k = KernelBuilder::new(name);
    let a = k.store(dtype, 2, Privilege::Read);
    let bt = k.store(dtype, 2, Privilege::Read);
    let c = k.store(dtype, 2, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(c, |b, idx| {
        let (i, j) = (idx[0], idx[1]);
        let col = match rows {
            BtRows::Global => {
                let origin = b.origin(c, 1);
                b.add(origin, j)
            }
            BtRows::Local => j,
        };
        let lo = b.const_i64(0);
        let zero = b.constant(ReduceOp::Sum.identity(dtype));
        let sum = b.for_loop(lo, n, &[zero], |b, p, acc| {
            let aip = b.load(a, &[i, p]);
            let bpj = b.load(bt, &[col, p]);
            vec![b.fma(aip, bpj, acc[0])]
        });
        b.store(c, idx, sum[0]);
    });
    k
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

fn recognize_as(kernel: &Kernel, rows: BtRows) -> Option<DType> {
    let dtype = match kernel.params.first()? {
        Param::Store {
            dtype: d @ (DType::F32 | DType::F64),
            rank: 2,
            privilege: Privilege::Read,
        } => *d,
        _ => return None,
    };
    if kernel.params.len() != 3 {
        return None;
    }
    let canonical = product(kernel.name.clone(), dtype, rows).finish();
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
    let dtype = match kernel.params.first()? {
        Param::Store {
            dtype: d @ (DType::F32 | DType::F64),
            rank: 1,
            privilege: Privilege::Read,
        } => *d,
        _ => return None,
    };
    if kernel.params.len() != 4 {
        return None;
    }
    let canonical = matmul_rows(kernel.name.clone(), dtype).finish();
    (canonical.params == kernel.params && canonical.body == kernel.body).then_some(dtype)
}

#[cfg(test)]
mod tests {
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
    fn the_rows_product_kernel_is_recognized_under_any_name_and_nothing_else_is() {
        for dtype in [DType::F32, DType::F64] {
            let mut k = matmul_rows("some.name", dtype).finish();
            assert_eq!(recognize_rows(&k), Some(dtype));
            assert_eq!(recognize(&k), None);
            k.name = "another".into();
            assert_eq!(recognize_rows(&k), Some(dtype));
            assert_eq!(recognize_rows(&matmul("p", dtype).finish()), None);
            // Another privilege on `C`.
            let mut rw = k.clone();
            rw.params[3] = Param::Store {
                dtype,
                rank: 2,
                privilege: Privilege::ReadWrite,
            };
            assert_eq!(recognize_rows(&rw), None);
        }
        assert_eq!(
            recognize_rows(&matmul_rows("ints", DType::I64).finish()),
            None
        );
    }
}
