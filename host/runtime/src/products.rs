//! Dense products over a grid of ranks, as DISTAL derives them: a schedule is a distribution
//! of the computation over a grid of processors, and the communication follows from it.
//!
//! A plugin submits the canonical product (`weft_ir::product::matmul`) launched over `C`'s
//! rows: each point reads its rows of `A` and the whole of `BT` (`B` transposed). On `P`
//! ranks that brings the whole of `B` to every rank, so a rank's traffic does not shrink as
//! ranks are added. The core launches such a task over a grid of `r x c` points instead
//! ([`schedule`]): point `(i, j)` computes tile `(i, j)` of `C` from `A`'s row panel `i`
//! (all of `k`) and `BT`'s row panel `j` (`B`'s column panel `j`) with the tiled product
//! kernel (`weft_ir::product::matmul_tiled`). The messages follow from those partitions in
//! closed form, as for any task: a rank receives its panel of `A` from the ranks of its grid
//! row that hold it, and its panel of `B` from those of its grid column (SUMMA's panels
//! broadcast along rows and columns): about `k (m / r + n / c)` elements, `2 n^2 / sqrt(P)`
//! for a square product on a square grid.
//!
//! Each element of `C` stays one chain of `fma`s in increasing `k`, so the bits do not
//! depend on the grid or the rank count.

use std::sync::Arc;

use weft_ir::DType;

use crate::kernel::KernelEntry;
use crate::partition::{Partition, Tiling};
use crate::task::IndexTask;
use crate::{Dims, Result};

/// How products are laid over the ranks (`WEFT_MATMUL_GRID`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProductGrid {
    /// On several ranks, the grid that moves the fewest elements per rank ([`choose`]); on
    /// one process, the plugin's launch (its rows over the threads).
    #[default]
    Auto,
    /// Always the plugin's launch: `C`'s rows split, `B` whole on every rank.
    Rows,
    /// A grid of `rows x cols` points, on any number of ranks (one process included), each
    /// side at most the product's extent along it.
    Fixed {
        /// Points along `C`'s rows.
        rows: u64,
        /// Points along `C`'s columns.
        cols: u64,
    },
}

impl ProductGrid {
    /// Reads `auto`, `rows`, or `RxC` (`2x2`).
    pub fn parse(text: &str) -> std::result::Result<ProductGrid, String> {
        let t = text.trim();
        match t {
            "auto" => return Ok(ProductGrid::Auto),
            "rows" => return Ok(ProductGrid::Rows),
            _ => {}
        }
        let parsed = t.split_once('x').and_then(|(r, c)| {
            let (r, c) = (r.trim().parse::<u64>().ok()?, c.trim().parse::<u64>().ok()?);
            (r > 0 && c > 0 && r.checked_mul(c)? <= 1 << 20).then_some((r, c))
        });
        match parsed {
            Some((rows, cols)) => Ok(ProductGrid::Fixed { rows, cols }),
            None => Err(format!(
                "{text:?} is not a product grid: `auto`, `rows`, or `RxC` with R and C positive \
                 (at most 2^20 points)"
            )),
        }
    }
}

/// A grid of points over `C`: `rows` along its rows, `cols` along its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Points along `C`'s rows.
    pub rows: u64,
    /// Points along `C`'s columns.
    pub cols: u64,
}

impl Grid {
    /// The elements of `A` and `BT` that one point reads: its row panel of `A` and its
    /// column panel of `B`, `k (ceil(m / rows) + ceil(n / cols))`.
    pub fn panel_elements(self, m: u64, n: u64, k: u64) -> u64 {
        let a = m.div_ceil(self.rows.max(1));
        let b = n.div_ceil(self.cols.max(1));
        k.saturating_mul(a.saturating_add(b))
    }
}

/// The grid for an `(m, k) @ (k, n)` product on `ranks` ranks under `setting`, with why, or
/// `None` for the plugin's own launch.
///
/// `Auto` takes, among the grids `r x c` with `r c = ranks` (`r <= m`, `c <= n`), the one
/// whose points read the fewest elements ([`Grid::panel_elements`]), the rows first on a
/// tie; a grid of one column is the plugin's launch, which it keeps.
pub fn choose(m: u64, n: u64, k: u64, ranks: u64, setting: ProductGrid) -> Option<(Grid, String)> {
    match setting {
        ProductGrid::Rows => None,
        ProductGrid::Fixed { rows, cols } => {
            let grid = Grid {
                rows: rows.min(m.max(1)),
                cols: cols.min(n.max(1)),
            };
            let clamped = if (grid.rows, grid.cols) == (rows, cols) {
                String::new()
            } else {
                format!(", {rows}x{cols} cut to the product's extents")
            };
            Some((grid, format!("WEFT_MATMUL_GRID={rows}x{cols}{clamped}")))
        }
        ProductGrid::Auto => {
            if ranks <= 1 {
                return None;
            }
            let best = (1..=ranks)
                .filter(|&r| ranks.is_multiple_of(r))
                .map(|r| Grid {
                    rows: r,
                    cols: ranks / r,
                })
                .filter(|g| g.rows <= m && g.cols <= n)
                .min_by_key(|g| (g.panel_elements(m, n, k), std::cmp::Reverse(g.rows)))?;
            if best.cols == 1 {
                return None;
            }
            let rows_only = Grid {
                rows: ranks.min(m.max(1)),
                cols: 1,
            };
            Some((
                best,
                format!(
                    "the grid of {ranks} ranks whose points read the fewest elements of A and \
                     B: {} each, against {} with C's rows alone",
                    best.panel_elements(m, n, k),
                    rows_only.panel_elements(m, n, k)
                ),
            ))
        }
    }
}

/// A tiling of a 2-d store: tiles of `tile`, moved along store dimension `d` by launch
/// dimension `projection[d]`.
fn tiling(tile: [u64; 2], projection: [Option<u32>; 2]) -> Partition {
    Partition::Tiling(Tiling {
        tile: Dims::from_slice(&tile),
        offset: Dims::from_slice(&[0, 0]),
        projection: Dims::from_slice(&projection),
    })
}

/// The partitions of an `(m, k) @ (k, n)` product over `grid` (launched over
/// `[grid.rows, grid.cols]`): `A`'s row panels (all of `k`), `BT`'s row panels (`B`'s column
/// panels, all of `k`) and `C`'s tiles.
pub fn grid_partitions(m: u64, n: u64, k: u64, grid: Grid) -> [Partition; 3] {
    let (tm, tn) = (m.div_ceil(grid.rows.max(1)), n.div_ceil(grid.cols.max(1)));
    [
        tiling([tm, k], [Some(0), None]),
        tiling([tn, k], [Some(1), None]),
        tiling([tm, tn], [Some(0), Some(1)]),
    ]
}

/// Whether `task` is a canonical product launched as a plugin launches it: over `C`'s rows
/// (a launch of one dimension, or of two whose second has one point), `A` by rows of all of
/// `k` in step with `C`'s, `BT` whole, and the tiles covering `C`. Returns `(m, n, k)`.
fn plugin_product(task: &IndexTask, shape: impl Fn(usize) -> Option<Vec<u64>>) -> Option<[u64; 3]> {
    task.kernel.product()?;
    let [a, bt, c] = task.args.as_slice() else {
        return None;
    };
    let (sa, sb, sc) = (shape(0)?, shape(1)?, shape(2)?);
    let ([m, k], [n, k2], [m2, n2]) = (sa.as_slice(), sb.as_slice(), sc.as_slice()) else {
        return None;
    };
    if (m, n, k) != (m2, n2, k2) {
        return None;
    }
    let points = match task.launch.as_slice() {
        [p] | [p, 1] => *p,
        _ => return None,
    };
    let rows_of = |p: &Partition, width: u64| match p {
        Partition::Tiling(t)
            if t.offset.iter().all(|&o| o == 0)
                && t.projection.first() == Some(&Some(0))
                && t.tile.get(1).is_some_and(|&w| w >= width)
                && t.projection
                    .get(1)
                    .is_some_and(|p| p.is_none() || *p == Some(1)) =>
        {
            t.tile.first().copied()
        }
        _ => None,
    };
    let (ta, tc) = (rows_of(&a.partition, *k)?, rows_of(&c.partition, *n)?);
    let covers = ta == tc && tc.checked_mul(points)? >= *m;
    (covers && bt.partition == Partition::None).then_some([*m, *n, *k])
}

/// What [`schedule`] did to a task: its grid and why, for the explanations.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The grid.
    pub grid: Grid,
    /// The line the explanations give.
    pub note: String,
}

/// Launches `task`, if it is a canonical product as a plugin launches it (over `C`'s rows,
/// `A` by rows of all of `k` in step with them, `BT` whole, the tiles covering `C`), over the
/// grid [`choose`] gives for `ranks` and `setting`: each
/// point computes one tile of `C` with `tiled` (the kernel [`tiled_kernel`] makes for the
/// task's dtype). `shape(i)` is argument `i`'s shape. Returns what it did, or `None` with the
/// task as it was.
pub fn schedule(
    task: &mut IndexTask,
    ranks: u64,
    setting: ProductGrid,
    shape: impl Fn(usize) -> Option<Vec<u64>>,
    tiled: impl FnOnce(&KernelEntry) -> Result<Arc<KernelEntry>>,
) -> Result<Option<Scheduled>> {
    let Some([m, n, k]) = plugin_product(task, shape) else {
        return Ok(None);
    };
    let Some((grid, why)) = choose(m, n, k, ranks, setting) else {
        return Ok(None);
    };
    let kernel = tiled(&task.kernel)?;
    let [pa, pb, pc] = grid_partitions(m, n, k, grid);
    task.args[0].partition = pa;
    task.args[1].partition = pb;
    task.args[2].partition = pc;
    task.launch = Dims::from_slice(&[grid.rows, grid.cols]);
    let note = format!(
        "{} ({m}x{k} @ {k}x{n}) launched over a {}x{} grid of C's tiles ({why})",
        task.kernel.name(),
        grid.rows,
        grid.cols
    );
    task.kernel = kernel;
    Ok(Some(Scheduled { grid, note }))
}

/// The tiled product kernel of `product`'s dtype, under its name.
pub fn tiled_kernel(product: &KernelEntry, dtype: DType) -> Result<KernelEntry> {
    let ir = weft_ir::product::matmul_tiled(product.name(), dtype).finish();
    KernelEntry::new(product.name(), &ir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_parse_and_bad_ones_are_refused() {
        assert_eq!(ProductGrid::parse("auto"), Ok(ProductGrid::Auto));
        assert_eq!(ProductGrid::parse("rows"), Ok(ProductGrid::Rows));
        assert_eq!(
            ProductGrid::parse("2x3"),
            Ok(ProductGrid::Fixed { rows: 2, cols: 3 })
        );
        for bad in ["", "2", "0x2", "2x", "x2", "axb", "2x3x4", "4096x4096"] {
            assert!(ProductGrid::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn auto_takes_the_grid_that_reads_least_and_keeps_rows_where_they_win() {
        let auto = ProductGrid::Auto;
        // One process, and two ranks of a square product: the plugin's launch.
        assert_eq!(choose(4096, 4096, 4096, 1, auto), None);
        assert_eq!(choose(4096, 4096, 4096, 2, auto), None);
        // Four ranks, square: 2x2 reads n/2 + n/2 rows of k against n/4 + n.
        let (g, _) = choose(4096, 4096, 4096, 4, auto).expect("a grid");
        assert_eq!((g.rows, g.cols), (2, 2));
        // Eight: 2x4 and 4x2 tie; the rows first.
        let (g, _) = choose(4096, 4096, 4096, 8, auto).expect("a grid");
        assert_eq!((g.rows, g.cols), (4, 2));
        // Tall and skinny (C of 10^6 x 64): the rows alone.
        assert_eq!(choose(1 << 20, 64, 64, 16, auto), None);
        // Short and wide: the columns.
        let (g, _) = choose(64, 1 << 20, 64, 16, auto).expect("a grid");
        assert_eq!((g.rows, g.cols), (1, 16));
        // Brute force over every factor pair: nothing reads less.
        for (m, n, k, p) in [(1000, 300, 50, 12), (7, 9, 3, 6), (300, 1000, 20, 36)] {
            let chosen = choose(m, n, k, p, auto)
                .map_or(Grid { rows: p, cols: 1 }, |(g, _)| g)
                .panel_elements(m, n, k);
            for r in (1..=p).filter(|r| p % r == 0) {
                let g = Grid {
                    rows: r,
                    cols: p / r,
                };
                if g.rows <= m && g.cols <= n {
                    assert!(
                        chosen <= g.panel_elements(m, n, k),
                        "{m} {n} {k} {p}: {g:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_fixed_grid_is_kept_and_cut_to_the_extents() {
        let fixed = ProductGrid::Fixed { rows: 3, cols: 5 };
        let (g, why) = choose(100, 100, 10, 1, fixed).expect("a grid");
        assert_eq!((g.rows, g.cols), (3, 5));
        assert!(why.contains("WEFT_MATMUL_GRID=3x5"), "{why}");
        let (g, why) = choose(2, 100, 10, 4, fixed).expect("a grid");
        assert_eq!((g.rows, g.cols), (2, 5));
        assert!(why.contains("cut"), "{why}");
        assert_eq!(choose(100, 100, 10, 4, ProductGrid::Rows), None);
    }
}
