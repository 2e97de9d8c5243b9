//! The general product, as BLAS blocks it: for each pass over `k`, a panel of `BT`'s rows
//! packed once and shared by the threads, each thread packing a block of `A`'s rows and
//! running the register tiles (`super::kernels`) over it, the tiles' sums continued in `C`
//! from one pass to the next inside a block of terms (`super::tree`); the pass that ends a
//! block merges each tile's sums into a stack of partial sums the size of `C`'s column panel
//! per level, in the tile's epilogue, and the last block's leaves `C` its final sums.

use std::ops::Range;
use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::kernels::Geometry;
use super::{Cancelled, Element, Job, Matrix, Path, tree};

/// Bytes of `A`'s packed rows per block: the block stays in L2 while the tiles stream it, and
/// a square product of 1024 `f64` has blocks enough for two threads without packing `A` twice.
const A_BLOCK_BYTES: usize = 128 << 10;

/// Bytes of `BT`'s packed rows per panel (a panel covers every column of `C` unless they
/// need more).
const B_PANEL_BYTES: usize = 8 << 20;

/// The most elements of a tile (the AVX-512 `f32` tile's 8 x 48).
const MOST_TILE: usize = 8 * 48;

/// The most rows or columns of a tile (the AVX-512 `f32` tile's 48 columns).
const MOST_ROWS: usize = 48;

/// `C = A @ BT.T`: each element the canonical blocked sum of its terms (see the module
/// documentation of `super`), on the pool's threads. Checks `cancel` before
/// each pass over `k` and stops with [`Cancelled`] once it is set, `C` then holding partial
/// sums.
///
/// # Safety
///
/// As [`super::multiply`].
pub(crate) unsafe fn by_blocks<T: Element>(job: Job<'_, T>) -> Result<(), Cancelled> {
    let Job {
        a,
        bt,
        c,
        path,
        pool,
        cancel,
        stack,
    } = job;
    let (m, n, k) = (c.rows, c.cols, a.cols);
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // The sum of no terms.
        for i in 0..m {
            for j in 0..n {
                // SAFETY: `(i, j)` lies inside `C`, which only this call writes.
                unsafe { c.set(i, j, T::ZERO) };
            }
        }
        return Ok(());
    }
    // `A @ A.T` (a Gram matrix, as NumPy's `cov` and `X @ X.T` make): `C` is symmetric, and
    // `C[j, i]`'s chain is `C[i, j]`'s with each product's factors swapped, the same bits. So
    // the tiles wholly above the diagonal are skipped and their elements copied from below it
    // at the end (as BLAS's `syrk` computes one triangle): about half the work.
    let gram = m == n && same_matrix(&a, &bt);
    let size = std::mem::size_of::<T>();
    let g = Geometry::of(path, size);
    let mc = (A_BLOCK_BYTES / (g.kc * size)).max(g.mr) / g.mr * g.mr;
    let panel_cols = (B_PANEL_BYTES / (g.kc * size)).max(g.nr) / g.nr * g.nr;
    let threads = pool.current_num_threads();
    let mut b_pack = Vec::new();
    // Each thread's packed block of `A`, kept from pass to pass.
    let a_packs: Vec<std::sync::Mutex<Vec<T>>> = (0..threads).map(|_| Default::default()).collect();
    // The stack of the blocks' partial sums: per level, one element per element of `C`'s
    // column panel (level `l` at rows `l m ..`).
    let blocks = tree::blocks(k);
    let levels = tree::levels(blocks);
    // The stack (`levels` panels of `m x nc`) holds about twice `C`'s elements at most (a
    // whole tile's columns at least), so that a product's memory beyond its stores stays in
    // proportion to them: past two levels (more than four blocks of terms) the column panels
    // narrow.
    let nc = match levels {
        0..=2 => panel_cols,
        _ => panel_cols.min(((2 * n / levels).max(g.nr)).div_ceil(g.nr) * g.nr),
    };
    let width = nc.min(n);
    stack.with::<T, _>(levels * m * width, |ptr| {
        let stack = Matrix {
            ptr,
            rows: levels * m,
            cols: width,
            rs: width as isize,
            cs: 1,
        };
        for j0 in (0..n).step_by(nc) {
            let cols = j0..(j0 + nc).min(n);
            let panels = cols.len().div_ceil(g.nr);
            let mut k0 = 0;
            while k0 < k {
                if cancel.load(Ordering::Relaxed) != 0 {
                    return Err(Cancelled);
                }
                // Passes never cross a block of terms: the block's first starts its chains from
                // zero, its last merges them.
                let end = tree::block_end(k0, k);
                let kc = g.kc.min(end - k0);
                // Each block's sums go straight to where they land: the stack's level the
                // counter names, or `C` for the last block.
                let count = k0 / tree::BLOCK + 1;
                let (target, first_col) = match tree::lands(count, blocks) {
                    Some(l) => (
                        Matrix {
                            ptr: stack.ptr.wrapping_add(l * m * width),
                            rows: m,
                            cols: cols.len(),
                            ..stack
                        },
                        cols.start,
                    ),
                    None => (c, 0),
                };
                let merge = (blocks > 1 && k0 + kc == end).then_some(Merge {
                    count,
                    blocks,
                    stack,
                    rows: m,
                });
                let load = !k0.is_multiple_of(tree::BLOCK);
                b_pack.resize(panels * kc * g.nr, T::ZERO);
                pool.install(|| {
                    b_pack
                        .par_chunks_mut(kc * g.nr)
                        .enumerate()
                        .for_each(|(jr, out)| {
                            let first = cols.start + jr * g.nr;
                            // SAFETY: the rows and terms lie inside `BT` (the caller's contract).
                            unsafe { pack(out, &bt, first..(first + g.nr).min(cols.end), k0, kc) };
                        })
                });
                // Work: blocks of `A`'s rows, times runs of `BT`'s panels where the blocks are
                // too few to keep every thread busy.
                let row_blocks = m.div_ceil(mc);
                let runs = (4 * threads).div_ceil(row_blocks).clamp(1, panels);
                let per_run = panels.div_ceil(runs);
                let (b_pack, a_packs) = (&b_pack, &a_packs);
                pool.install(|| {
                    (0..row_blocks * runs).into_par_iter().for_each(|item| {
                        let slot = rayon::current_thread_index().unwrap_or(0) % threads;
                        let mut a_pack = match a_packs[slot].lock() {
                            Ok(pack) => pack,
                            Err(poisoned) => poisoned.into_inner(),
                        };
                        let (bi, run) = (item / runs, item % runs);
                        let rows = bi * mc..(bi * mc + mc).min(m);
                        let groups = rows.len().div_ceil(g.mr);
                        a_pack.resize(groups * kc * g.mr, T::ZERO);
                        for (ir, out) in a_pack.chunks_exact_mut(kc * g.mr).enumerate() {
                            let first = rows.start + ir * g.mr;
                            let group = first..(first + g.mr).min(rows.end);
                            // SAFETY: the rows and terms lie inside `A` (the caller's
                            // contract).
                            unsafe { pack(out, &a, group, k0, kc) };
                        }
                        for jr in run * per_run..((run + 1) * per_run).min(panels) {
                            let panel = &b_pack[jr * kc * g.nr..][..kc * g.nr];
                            for (ir, rows_packed) in a_pack.chunks_exact(kc * g.mr).enumerate() {
                                let i0 = rows.start + ir * g.mr;
                                let j0 = cols.start + jr * g.nr;
                                if gram && j0 >= i0 + g.mr {
                                    // Every element of the tile lies above the diagonal.
                                    continue;
                                }
                                let at = (i0, j0 - first_col);
                                // SAFETY: the tile's rows and columns start inside `C` and
                                // the target, whose elements (and the tile's places on the
                                // stack) only this item touches; the packs hold `kc` terms of
                                // the tile's rows.
                                unsafe {
                                    tile(&target, at, g, kc, rows_packed, panel, path, load);
                                    if let Some(merge) = &merge {
                                        merge.tile(&target, at, j0 - cols.start, g);
                                    }
                                }
                            }
                        }
                    })
                });
                k0 += kc;
            }
        }
        Ok(())
    })?;
    if gram {
        let c = &c;
        pool.install(|| {
            (0..m).into_par_iter().for_each(|i| {
                for j in i + 1..n {
                    // SAFETY: `(i, j)` and `(j, i)` lie inside `C`; this row's item alone
                    // writes `(i, j)` (above the diagonal), and nothing writes `(j, i)` (below
                    // it) any more.
                    unsafe { c.set(i, j, c.get(j, i)) };
                }
            })
        });
    }
    Ok(())
}

/// The merge that the pass ending a block of terms makes: block `count - 1` of `blocks`.
struct Merge<T> {
    count: usize,
    blocks: usize,
    /// The stack of partial sums: level `l` of `C`'s element `(i, j)` at `(l rows + i, j -
    /// the column panel's first column)`.
    stack: Matrix<T>,
    /// `C`'s rows.
    rows: usize,
}

impl<T: Element> Merge<T> {
    /// Merges, row by row by [`tree::merge_run`], the block sums of the tile whose first
    /// element is `target[i0, j0]` (the part inside `target`, where the block's sums land:
    /// the stack's level, or `C` for the last block), its column `x` of the stack's panel.
    ///
    /// # Safety
    ///
    /// `(i0, j0)` lies inside `target` and `(i0, x)` in each level of the stack; the tile's
    /// elements of `target` are valid and only this thread touches them meanwhile, and
    /// nothing writes the tile's elements on the levels below the one it lands at.
    #[inline(always)]
    unsafe fn tile(&self, target: &Matrix<T>, (i0, j0): (usize, usize), x: usize, g: Geometry) {
        let (rows, cols) = (g.mr.min(target.rows - i0), g.nr.min(target.cols - j0));
        let stack = self.stack;
        let mut run = [T::ZERO; MOST_ROWS];
        let run = &mut run[..cols];
        for i in i0..i0 + rows {
            for (v, j) in run.iter_mut().zip(j0..) {
                // SAFETY: `(i, j)` lies inside `target` (the caller's contract).
                *v = unsafe { target.get(i, j) };
            }
            let rows = self.rows;
            // SAFETY: level `l`'s run of row `i` starts at `(l rows + i, x)` and holds `cols`
            // elements of the stack's row, which nothing writes meanwhile (the caller's
            // contract).
            unsafe {
                tree::merge_run(self.count, self.blocks, run, |l| {
                    stack
                        .ptr
                        .wrapping_offset((l * rows + i) as isize * stack.rs + x as isize)
                        .cast_const()
                })
            };
            for (&v, j) in run.iter().zip(j0..) {
                // SAFETY: as above, and only this thread writes it.
                unsafe { target.set(i, j, v) };
            }
        }
    }
}

/// Whether two matrices are the same elements of the same memory.
fn same_matrix<T>(x: &Matrix<T>, y: &Matrix<T>) -> bool {
    std::ptr::eq(x.ptr, y.ptr)
        && x.rows == y.rows
        && x.cols == y.cols
        && x.rs == y.rs
        && x.cs == y.cs
}

/// Packs rows `rows` of `x`, terms `k0..k0 + kc`, term by term into `out`
/// (`out[p * width + r]`, `width = out.len() / kc`), the rows past `rows` zero.
///
/// # Safety
///
/// The rows and terms lie inside `x`, whose memory is valid for reads.
unsafe fn pack<T: Element>(out: &mut [T], x: &Matrix<T>, rows: Range<usize>, k0: usize, kc: usize) {
    let width = out.len() / kc;
    let len = rows.len();
    if x.rs == 1 {
        // Stored by columns: each term's rows are one run of memory.
        for (p, terms) in out.chunks_exact_mut(width).enumerate() {
            // SAFETY: the caller's contract: rows `rows` of column `k0 + p` lie inside `x`,
            // one element apart.
            let column = unsafe {
                std::slice::from_raw_parts(
                    x.ptr.offset(rows.start as isize + (k0 + p) as isize * x.cs),
                    len,
                )
            };
            terms[..len].copy_from_slice(column);
            terms[len..].fill(T::ZERO);
        }
        return;
    }
    if x.cs == 1 {
        // Stored by rows: read the rows side by side, each term's values one run of `out`.
        let mut sources = [&[] as &[T]; MOST_ROWS];
        for (source, i) in sources.iter_mut().zip(rows.clone()) {
            // SAFETY: the caller's contract: `kc` terms from `(i, k0)` lie inside `x`.
            *source = unsafe {
                std::slice::from_raw_parts(x.ptr.offset(i as isize * x.rs + k0 as isize), kc)
            };
        }
        let sources = &sources[..len];
        for (p, terms) in out.chunks_exact_mut(width).enumerate() {
            for (t, source) in terms.iter_mut().zip(sources) {
                *t = source[p];
            }
        }
    } else {
        for (r, i) in rows.enumerate() {
            for p in 0..kc {
                // SAFETY: the caller's contract.
                out[p * width + r] = unsafe { x.get(i, k0 + p) };
            }
        }
    }
    if len < width {
        for terms in out.chunks_exact_mut(width) {
            terms[len..].fill(T::ZERO);
        }
    }
}

/// Runs one register tile whose first element is `C[i0, j0]`: straight on `C` where the
/// whole tile lies inside it with unit column stride, else on a copy of the part that does.
///
/// # Safety
///
/// `(i0, j0)` lies inside `C`, whose elements only this thread writes meanwhile; `a` and `b`
/// hold `kc` terms of the tile's `g.mr` rows and `g.nr` columns; `path` is one this CPU
/// runs.
#[allow(clippy::too_many_arguments)]
unsafe fn tile<T: Element>(
    c: &Matrix<T>,
    (i0, j0): (usize, usize),
    g: Geometry,
    kc: usize,
    a: &[T],
    b: &[T],
    path: Path,
    load: bool,
) {
    let (rows, cols) = (g.mr.min(c.rows - i0), g.nr.min(c.cols - j0));
    if rows == g.mr && cols == g.nr && c.cs == 1 && c.rs > 0 {
        // SAFETY: the tile lies inside `C` (the caller's contract), rows `rs` apart.
        unsafe {
            let at = c.ptr.offset(i0 as isize * c.rs + j0 as isize);
            T::tile(path, kc, a.as_ptr(), b.as_ptr(), at, c.rs as usize, load);
        }
        return;
    }
    let mut part = [T::ZERO; MOST_TILE];
    if load {
        for r in 0..rows {
            for x in 0..cols {
                // SAFETY: `(i0 + r, j0 + x)` lies inside `C`.
                part[r * g.nr + x] = unsafe { c.get(i0 + r, j0 + x) };
            }
        }
    }
    // SAFETY: `part` holds the whole tile, rows `g.nr` apart.
    unsafe {
        T::tile(
            path,
            kc,
            a.as_ptr(),
            b.as_ptr(),
            part.as_mut_ptr(),
            g.nr,
            load,
        )
    };
    for r in 0..rows {
        for x in 0..cols {
            // SAFETY: as above, and only this thread writes it.
            unsafe { c.set(i0 + r, j0 + x, part[r * g.nr + x]) };
        }
    }
}
