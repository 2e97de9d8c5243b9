//! Dense products over a grid of ranks, as DISTAL derives them: a schedule is a distribution
//! of the computation over a grid of processors, and the communication follows from it.
//!
//! A plugin submits the canonical product (`weft_ir::product::matmul`) launched over `C`'s
//! rows: each point reads its rows of `A` and the whole of `BT` (`B` transposed). On `P`
//! ranks that brings the whole of `B` to every rank, so a rank's traffic does not shrink as
//! ranks are added. The core launches such a task over a grid of `r x c x l` points instead
//! ([`schedule`]):
//!
//! - With one layer (`l = 1`, SUMMA's layout), point `(i, j)` computes tile `(i, j)` of `C`
//!   from `A`'s row panel `i` (all of `k`) and `BT`'s row panel `j` (`B`'s column panel `j`)
//!   with the tiled product kernel (`weft_ir::product::matmul_tiled`). A rank receives its
//!   panel of `A` from the ranks of its grid row that hold it, and its panel of `B` from
//!   those of its grid column (SUMMA's panels broadcast along rows and columns): about
//!   `k (m / r + n / c)` elements, `2 n^2 / sqrt(P)` for a square product on a square grid.
//! - With `l > 1` layers (the 2.5-D family; Johnson's 3-D algorithm where `r = c = l`), `k`
//!   is split too: layer `z` owns an aligned subtree of the canonical product's blocks of
//!   terms (`weft_ir::product::blocked_sum`), point `(i, j, z)` computes that subtree's sums
//!   for tile `(i, j)` into a temporary `P[z]` with the layered kernel
//!   (`weft_ir::product::matmul_layered`), reading `A[i, k_z]` and `BT[j, k_z]`, about
//!   `2 n^2 / sqrt(l P)` elements; a second task, launched over `[r, c l]`, gives each of a
//!   tile's `l` ranks a slice of the tile's columns and sums the layers' partial sums there by
//!   the tree's top levels (`weft_ir::product::layers_sum`), a reduce-scatter along the third
//!   axis of `(l - 1) / l` of a tile per rank.
//!
//! - Cannon's algorithm (by hand, `WEFT_MATMUL_GRID=cannon`) runs on a `q x q` grid in `q`
//!   steps, each a task launched over `[q, q]` ([`cannon_partitions`]): at step `s` point
//!   `(i, j)` reads block `(i, t)` of `A` and block `(j, t)` of `BT` for
//!   `t = (i + j + s) mod q` (a skewed tiling, [`crate::partition::Skew`]) and writes that
//!   block's sums of tile `(i, j)` into layer `t` of the partial sums; a last task sums the
//!   `q` layers of each tile on the tile's own point ([`cannon_sum_partitions`]). With the
//!   operands in the grid's tiles, each step moves one block of each operand per rank, from
//!   one rank to one other along its grid row (`A`) or column (`B`): Cannon's shifts, with
//!   its initial skew folded into the first step. Block `t` of `k` is a node of the
//!   canonical tree, as a layer's terms are.
//!
//! The messages follow from those partitions in closed form, as for any task. Each element of
//! `C` is the canonical blocked sum on every grid (the layers' sums are the tree's nodes), so
//! the bits do not depend on the grid or the rank count.

use std::sync::Arc;

use weft_ir::DType;
use weft_ir::product::BLOCK_TERMS;

use crate::kernel::KernelEntry;
use crate::partition::{Partition, Skew, Tiling};
use crate::task::IndexTask;
use crate::{Dims, Result};

/// The most layers a grid has: each point of the sum of a product's layers adds this many
/// partial sums, written out in its kernel (`weft_ir::product::layers_sum`).
pub const MAX_LAYERS: u64 = 64;

/// How products are laid over the ranks (`WEFT_MATMUL_GRID`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProductGrid {
    /// On several ranks, the grid that moves the fewest elements per rank within the memory
    /// of a rank ([`choose`]); on one process, the plugin's launch (its rows over the
    /// threads).
    #[default]
    Auto,
    /// Always the plugin's launch: `C`'s rows split, `B` whole on every rank.
    Rows,
    /// A grid of `rows x cols x layers` points, on any number of ranks (one process
    /// included), each side at most the product's extent along it (the layers at most what
    /// the blocks of `k` allow).
    Fixed {
        /// Points along `C`'s rows.
        rows: u64,
        /// Points along `C`'s columns.
        cols: u64,
        /// Points along `k` (a power of two; 1 for a 2-D grid).
        layers: u64,
    },
    /// Cannon's algorithm on a `side x side` grid in `side` steps (a power of two up to
    /// [`MAX_LAYERS`]; by default the largest whose square is at most the ranks), cut to what
    /// the product's extents and the blocks of `k` allow ([`cannon_side`]).
    Cannon {
        /// The grid's side, or `None` for the largest that the ranks fill.
        side: Option<u64>,
    },
}

impl ProductGrid {
    /// Reads `auto`, `rows`, `RxC` (`2x2`), `RxCxL` (`2x2x2`, `L` a power of two), `cannon`
    /// or `cannon:Q` (`Q` a power of two).
    pub fn parse(text: &str) -> std::result::Result<ProductGrid, String> {
        let t = text.trim();
        match t {
            "auto" => return Ok(ProductGrid::Auto),
            "rows" => return Ok(ProductGrid::Rows),
            "cannon" => return Ok(ProductGrid::Cannon { side: None }),
            _ => {}
        }
        if let Some(q) = t.strip_prefix("cannon:") {
            return match q.trim().parse::<u64>() {
                Ok(q) if q.is_power_of_two() && q <= MAX_LAYERS => {
                    Ok(ProductGrid::Cannon { side: Some(q) })
                }
                _ => Err(format!(
                    "{text:?} is not a Cannon grid: `cannon:Q` with Q a power of two up to \
                     {MAX_LAYERS}"
                )),
            };
        }
        let sides: Option<Vec<u64>> = t.split('x').map(|s| s.trim().parse().ok()).collect();
        let parsed = match sides.as_deref() {
            Some(&[r, c]) => Some((r, c, 1)),
            Some(&[r, c, l]) => Some((r, c, l)),
            _ => None,
        }
        .filter(|&(r, c, l)| {
            r > 0
                && c > 0
                && l.is_power_of_two()
                && l <= MAX_LAYERS
                && r.checked_mul(c)
                    .and_then(|p| p.checked_mul(l))
                    .is_some_and(|p| p <= 1 << 20)
        });
        match parsed {
            Some((rows, cols, layers)) => Ok(ProductGrid::Fixed { rows, cols, layers }),
            None => Err(format!(
                "{text:?} is not a product grid: `auto`, `rows`, `cannon`, `cannon:Q`, `RxC` or \
                 `RxCxL` with R and C positive and L and Q powers of two up to {MAX_LAYERS} (at \
                 most 2^20 points)"
            )),
        }
    }
}

/// A grid of points over a product: `rows` along `C`'s rows, `cols` along its columns,
/// `layers` along `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Points along `C`'s rows.
    pub rows: u64,
    /// Points along `C`'s columns.
    pub cols: u64,
    /// Points along `k`: 1 for a 2-D grid.
    pub layers: u64,
}

/// The tiles of an `(m, k) @ (k, n)` product over a [`Grid`]: what one point holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// Rows of `C` per tile.
    pub rows: u64,
    /// Columns of `C` per tile (a multiple of the layers: each of a tile's layers sums a
    /// slice of them).
    pub cols: u64,
    /// Terms of `k` per layer (all of `k` for one layer).
    pub terms: u64,
}

impl Grid {
    /// A 2-D grid.
    pub fn flat(rows: u64, cols: u64) -> Grid {
        Grid {
            rows,
            cols,
            layers: 1,
        }
    }

    /// The points.
    pub fn points(self) -> u64 {
        self.rows
            .saturating_mul(self.cols)
            .saturating_mul(self.layers)
    }

    /// The tiles of an `(m, k) @ (k, n)` product over this grid, or `None` where its layers
    /// cannot each own an aligned subtree of the blocks of `k` (layers not a power of two, or
    /// more than leave every layer a block).
    pub fn tiles(self, m: u64, n: u64, k: u64) -> Option<Tiles> {
        let l = self.layers;
        if !l.is_power_of_two() || l > MAX_LAYERS || self.rows == 0 || self.cols == 0 {
            return None;
        }
        let terms = if l == 1 {
            k
        } else {
            // The canonical tree over the blocks has its root at level `top`; layer `z` owns
            // its node at level `top - log2 l`, index `z`; each must hold a block.
            let blocks = k.div_ceil(BLOCK_TERMS);
            let top = u64::from(blocks.next_power_of_two().trailing_zeros());
            let depth = u64::from(l.trailing_zeros());
            if depth > top {
                return None;
            }
            let per_layer = 1u64 << (top - depth);
            if (l - 1) * per_layer >= blocks {
                return None;
            }
            per_layer * BLOCK_TERMS
        };
        Some(Tiles {
            rows: m.div_ceil(self.rows),
            cols: n.div_ceil(self.cols.saturating_mul(l)).saturating_mul(l),
            terms,
        })
    }

    /// The elements of `A` and `BT` that one point reads: its row panel of `A` and its
    /// column panel of `B` over its layer's terms, `k_z (m / rows + n / cols)`; with layers,
    /// also the partial sums of the other layers for its slice of the tile,
    /// `(l - 1) / l` of a tile. `None` as for [`Grid::tiles`].
    pub fn panel_elements(self, m: u64, n: u64, k: u64) -> Option<u64> {
        let t = self.tiles(m, n, k)?;
        let panels = t.terms.saturating_mul(t.rows.saturating_add(t.cols));
        let sums = t.rows.saturating_mul(t.cols) / self.layers * (self.layers - 1);
        Some(panels.saturating_add(sums))
    }

    /// The elements one point holds for the product: its panels of `A` and `B`, and its tile
    /// of `C` (with layers, its layer's partial sums and its slice of the other layers' for
    /// the sum). `None` as for [`Grid::tiles`].
    pub fn memory_elements(self, m: u64, n: u64, k: u64) -> Option<u64> {
        let t = self.tiles(m, n, k)?;
        let panels = t.terms.saturating_mul(t.rows.saturating_add(t.cols));
        let tile = t.rows.saturating_mul(t.cols);
        // With layers: its layer's partial sums, the tile's worth of partial sums for its
        // slice (its own among them), and the slice of `C`.
        let sums = if self.layers > 1 {
            tile.saturating_mul(2).saturating_add(tile / self.layers)
        } else {
            tile
        };
        Some(panels.saturating_add(sums))
    }
}

/// What a product's grid may use of each rank's memory: the bytes of a rank, and of an
/// element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Bytes a rank may hold for one product (`WEFT_RANK_MEMORY`).
    pub rank_bytes: u64,
    /// Bytes the store of a grid of layers' partial sums (`(layers, m, n)`, counted whole)
    /// may take: the room left in the runtime's store quota.
    pub partials_bytes: u64,
    /// Bytes of one element of the product.
    pub element_bytes: u64,
}

impl Budget {
    /// No bound on memory (elements of 8 bytes).
    pub fn unbounded() -> Budget {
        Budget {
            rank_bytes: u64::MAX,
            partials_bytes: u64::MAX,
            element_bytes: 8,
        }
    }

    fn fits(self, elements: u64) -> bool {
        elements.saturating_mul(self.element_bytes) <= self.rank_bytes
    }

    /// Whether a grid of `layers` layers' partial sums of an `m x n` product fit the room
    /// left in the quota (a grid of one layer makes none).
    fn partials_fit(self, layers: u64, m: u64, n: u64) -> bool {
        layers == 1
            || layers
                .saturating_mul(m)
                .saturating_mul(n)
                .saturating_mul(self.element_bytes)
                <= self.partials_bytes
    }
}

/// The grid for an `(m, k) @ (k, n)` product on `ranks` ranks under `setting` within
/// `budget`, with why, or `None` for the plugin's own launch.
///
/// `Cannon` is not a grid of this kind: see [`cannon_side`]. `Auto` takes, among the grids
/// `r x c x l` with `r c l = ranks` (`l` a power of two whose layers each own blocks of `k`,
/// [`Grid::tiles`]; `r <= m`, `c <= n`; with layers, their partial sums within the room left
/// in the store quota) whose points fit in a rank's memory ([`Grid::memory_elements`]), the
/// one whose points read the fewest elements ([`Grid::panel_elements`]), fewer layers first
/// and then the rows on a tie; where none fits, the one that needs the least memory. A grid
/// of one column and one layer is the plugin's launch, which it keeps.
pub fn choose(
    (m, n, k): (u64, u64, u64),
    ranks: u64,
    setting: ProductGrid,
    budget: Budget,
) -> Option<(Grid, String)> {
    match setting {
        ProductGrid::Rows | ProductGrid::Cannon { .. } => None,
        ProductGrid::Fixed { rows, cols, layers } => {
            let mut grid = Grid {
                rows: rows.min(m.max(1)),
                cols: cols.min(n.max(1)),
                layers: layers.max(1),
            };
            while grid.layers > 1 && grid.tiles(m, n, k).is_none() {
                grid.layers /= 2;
            }
            let asked = Grid { rows, cols, layers };
            let clamped = if grid == asked {
                String::new()
            } else {
                format!(", cut to the product's extents and blocks of {BLOCK_TERMS} terms")
            };
            Some((grid, format!("WEFT_MATMUL_GRID={}{clamped}", text(asked))))
        }
        ProductGrid::Auto => {
            if ranks <= 1 {
                return None;
            }
            let candidates: Vec<(Grid, u64, u64)> = (0..u64::BITS)
                .map(|d| 1u64 << d)
                .take_while(|&l| l <= ranks.min(MAX_LAYERS))
                .filter(|&l| ranks.is_multiple_of(l))
                .flat_map(|l| {
                    let flat = ranks / l;
                    (1..=flat)
                        .filter(move |&r| flat.is_multiple_of(r))
                        .map(move |r| Grid {
                            rows: r,
                            cols: flat / r,
                            layers: l,
                        })
                })
                .filter(|g| g.rows <= m && g.cols <= n && budget.partials_fit(g.layers, m, n))
                .filter_map(|g| Some((g, g.panel_elements(m, n, k)?, g.memory_elements(m, n, k)?)))
                .collect();
            let fitting = candidates.iter().filter(|c| budget.fits(c.2));
            let best = match fitting
                .min_by_key(|(g, reads, _)| (*reads, g.layers, std::cmp::Reverse(g.rows)))
            {
                Some(best) => *best,
                None => *candidates.iter().min_by_key(|c| (c.2, c.1))?,
            };
            let (grid, reads, memory) = best;
            if grid.cols == 1 && grid.layers == 1 {
                return None;
            }
            let rows_only = Grid::flat(ranks.min(m.max(1)), 1);
            let against = rows_only
                .panel_elements(m, n, k)
                .map_or_else(String::new, |e| {
                    format!(", against {e} with C's rows alone")
                });
            let memory_note = if budget.fits(memory) {
                format!(
                    "{} bytes a rank, within its {}",
                    memory.saturating_mul(budget.element_bytes),
                    bytes_text(budget.rank_bytes)
                )
            } else {
                format!(
                    "no grid fits a rank's {}: the one that needs least, {} bytes",
                    bytes_text(budget.rank_bytes),
                    memory.saturating_mul(budget.element_bytes)
                )
            };
            Some((
                grid,
                format!(
                    "the grid of {ranks} ranks whose points read the fewest elements of A and \
                     B{}: {reads} each{against}; {memory_note}",
                    if grid.layers > 1 {
                        " and of the layers' partial sums"
                    } else {
                        ""
                    }
                ),
            ))
        }
    }
}

/// `RxC`, or `RxCxL` with layers.
fn text(g: Grid) -> String {
    if g.layers > 1 {
        format!("{}x{}x{}", g.rows, g.cols, g.layers)
    } else {
        format!("{}x{}", g.rows, g.cols)
    }
}

/// A rank's memory as the explanations say it.
fn bytes_text(bytes: u64) -> String {
    if bytes == u64::MAX {
        "unbounded memory".to_string()
    } else {
        format!("{bytes} bytes")
    }
}

/// A tiling of a store: tiles of `tile`, moved along store dimension `d` by launch
/// dimension `projection[d]`.
fn tiling(tile: &[u64], projection: &[Option<u32>]) -> Partition {
    skewed(tile, projection, None)
}

/// [`tiling`] with a skew.
fn skewed(tile: &[u64], projection: &[Option<u32>], skew: Option<Skew>) -> Partition {
    Partition::Tiling(Tiling {
        tile: Dims::from_slice(tile),
        offset: Dims::from_slice(&vec![0; tile.len()]),
        projection: Dims::from_slice(projection),
        skew,
    })
}

/// The side of the `q x q` grid Cannon's algorithm runs an `(m, k) @ (k, n)` product on for
/// `ranks` ranks when asked for `side` (`None`: the largest power of two whose square is at
/// most the ranks), halved until each of its `q` steps owns an aligned subtree of the
/// blocks of `k` (as `q` layers would, [`Grid::tiles`]) and `q <= m, n`. `None` where that
/// leaves one point, or where `setting` is not Cannon's.
pub fn cannon_side((m, n, k): (u64, u64, u64), ranks: u64, setting: ProductGrid) -> Option<u64> {
    let ProductGrid::Cannon { side } = setting else {
        return None;
    };
    let mut q = side.unwrap_or_else(|| {
        let mut q = 1u64;
        while q < MAX_LAYERS && (q * 2).saturating_mul(q * 2) <= ranks {
            q *= 2;
        }
        q
    });
    while q > 1 && (q > m || q > n || cannon_tiles(m, n, k, q).is_none()) {
        q /= 2;
    }
    (q > 1).then_some(q)
}

/// The tiles of an `(m, k) @ (k, n)` product under Cannon's algorithm on a `q x q` grid: a
/// tile of `C` per point, and `k`'s terms per step (those of `q` layers). `None` as for
/// [`Grid::tiles`] with `q` layers.
pub fn cannon_tiles(m: u64, n: u64, k: u64, q: u64) -> Option<Tiles> {
    let layered = Grid {
        rows: q,
        cols: q,
        layers: q,
    }
    .tiles(m, n, k)?;
    Some(Tiles {
        rows: m.div_ceil(q),
        cols: n.div_ceil(q),
        terms: layered.terms,
    })
}

/// The launch and partitions of step `step` of Cannon's algorithm for an `(m, k) @ (k, n)`
/// product on a `q x q` grid: launched over `[q, q]`, point `(i, j)` reads `A`'s block
/// `(i, t)` and `BT`'s block `(j, t)` for `t = (i + j + step) mod q` (blocks of
/// [`cannon_tiles`]), and writes layer `t` of tile `(i, j)` of the partial sums
/// (`(q, m, n)`). `None` as for [`cannon_tiles`].
pub fn cannon_partitions(
    m: u64,
    n: u64,
    k: u64,
    q: u64,
    step: u64,
) -> Option<(Vec<u64>, [Partition; 3])> {
    let t = cannon_tiles(m, n, k, q)?;
    let skew = |dim| {
        Some(Skew {
            dim,
            plus: 1,
            shift: step % q,
            modulus: q,
        })
    };
    Some((
        vec![q, q],
        [
            skewed(&[t.rows, t.terms], &[Some(0), Some(0)], skew(1)),
            skewed(&[t.cols, t.terms], &[Some(1), Some(0)], skew(1)),
            skewed(&[1, t.rows, t.cols], &[Some(0), Some(0), Some(1)], skew(0)),
        ],
    ))
}

/// The launch and partitions of the task that sums the `q` layers of Cannon's partial sums
/// into `C`: launched over `[q, q]`, point `(i, j)` (the rank that wrote every layer of tile
/// `(i, j)`) reads all the layers of the tile and writes the tile of `C`. `None` as for
/// [`cannon_tiles`].
pub fn cannon_sum_partitions(m: u64, n: u64, k: u64, q: u64) -> Option<(Vec<u64>, [Partition; 2])> {
    let t = cannon_tiles(m, n, k, q)?;
    Some((
        vec![q, q],
        [
            tiling(&[q, t.rows, t.cols], &[None, Some(0), Some(1)]),
            tiling(&[t.rows, t.cols], &[Some(0), Some(1)]),
        ],
    ))
}

/// The launch and partitions of an `(m, k) @ (k, n)` product over `grid`: launched over
/// `[rows, cols]` (one layer) or `[rows, cols, layers]`, `A`'s row panels over the layer's
/// terms, `BT`'s row panels (`B`'s column panels) over them, and `C`'s tiles (one layer) or
/// the partial sums' tiles (`(layers, m, n)`, one layer thick). `None` as for
/// [`Grid::tiles`].
pub fn grid_partitions(m: u64, n: u64, k: u64, grid: Grid) -> Option<(Vec<u64>, [Partition; 3])> {
    let t = grid.tiles(m, n, k)?;
    if grid.layers == 1 {
        return Some((
            vec![grid.rows, grid.cols],
            [
                tiling(&[t.rows, k], &[Some(0), None]),
                tiling(&[t.cols, k], &[Some(1), None]),
                tiling(&[t.rows, t.cols], &[Some(0), Some(1)]),
            ],
        ));
    }
    Some((
        vec![grid.rows, grid.cols, grid.layers],
        [
            tiling(&[t.rows, t.terms], &[Some(0), Some(2)]),
            tiling(&[t.cols, t.terms], &[Some(1), Some(2)]),
            tiling(&[1, t.rows, t.cols], &[Some(2), Some(0), Some(1)]),
        ],
    ))
}

/// The launch and partitions of the task that sums a layered product's partial sums
/// (`(layers, m, n)`) into `C`: launched over `[rows, cols layers]`, so that point
/// `(i, j l + z)` is the rank of the product's point `(i, j, z)`; it reads every layer's sums
/// of its slice of tile `(i, j)`'s columns and writes that slice of `C`. `None` for one layer
/// or as for [`Grid::tiles`].
pub fn sum_partitions(m: u64, n: u64, k: u64, grid: Grid) -> Option<(Vec<u64>, [Partition; 2])> {
    let t = grid.tiles(m, n, k)?;
    if grid.layers == 1 {
        return None;
    }
    let slice = t.cols / grid.layers;
    Some((
        vec![grid.rows, grid.cols.saturating_mul(grid.layers)],
        [
            tiling(&[grid.layers, t.rows, slice], &[None, Some(0), Some(1)]),
            tiling(&[t.rows, slice], &[Some(0), Some(1)]),
        ],
    ))
}

/// This machine's memory (`MemTotal` of `/proc/meminfo`) shared by `ranks` ranks: the
/// default bytes a rank may hold for one product (as if every rank ran on this machine), or
/// no bound where the system does not say.
pub fn machine_memory_per_rank(ranks: u64) -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    total.map_or(u64::MAX, |bytes| bytes / ranks.max(1))
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

/// What [`schedule`] did to a task: its grid and why, for the explanations, and for a grid of
/// layers the task that must follow it.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The grid.
    pub grid: Grid,
    /// The line the explanations give.
    pub note: String,
    /// For a grid of layers: the task that sums the layers into `C`. The scheduled task then
    /// writes the partial sums into a store the core makes for it, in place of `C`.
    pub sum: Option<LayersSum>,
    /// For Cannon's algorithm, the partitions of `A`, `BT` and the partial sums in its steps
    /// after the first (the scheduled task): each is the scheduled task with these
    /// partitions, submitted after it and before the sum.
    pub steps: Vec<[Partition; 3]>,
}

/// The second task of a layered product ([`sum_partitions`]), for the core to make and submit
/// after the product: it reads the partial sums (a store of `partial_shape`) and writes `C`.
#[derive(Clone, Debug)]
pub struct LayersSum {
    /// The partial sums' shape, `(layers, m, n)`.
    pub partial_shape: [u64; 3],
    /// The product's element type.
    pub dtype: DType,
    /// The launch.
    pub launch: Vec<u64>,
    /// The partitions of the partial sums and of `C`.
    pub partitions: [Partition; 2],
}

/// Launches `task`, if it is a canonical product as a plugin launches it (over `C`'s rows,
/// `A` by rows of all of `k` in step with them, `BT` whole, the tiles covering `C`), over the
/// grid [`choose`] gives for `ranks`, `setting`, `rank_bytes` of memory a rank and
/// `partials_bytes` of room for a grid of layers' partial sums: each
/// point computes one tile of `C`, or one layer's partial sums of it, with `kernel(product,
/// dtype, layered)` (what [`grid_kernel`] makes). `shape(i)` is argument `i`'s shape. Returns
/// what it did, or `None` with the task as it was.
pub fn schedule(
    task: &mut IndexTask,
    ranks: u64,
    setting: ProductGrid,
    (rank_bytes, partials_bytes): (u64, u64),
    shape: impl Fn(usize) -> Option<Vec<u64>>,
    kernel: impl FnOnce(&KernelEntry, DType, bool) -> Result<Arc<KernelEntry>>,
) -> Result<Option<Scheduled>> {
    let Some([m, n, k]) = plugin_product(task, shape) else {
        return Ok(None);
    };
    let Some(dtype) = task.kernel.product() else {
        return Ok(None);
    };
    if let Some(q) = cannon_side((m, n, k), ranks, setting) {
        return schedule_cannon(task, (m, n, k), q, setting, dtype, kernel);
    }
    let budget = Budget {
        rank_bytes,
        partials_bytes,
        element_bytes: dtype.size() as u64,
    };
    let Some((grid, why)) = choose((m, n, k), ranks, setting, budget) else {
        return Ok(None);
    };
    let Some((launch, [pa, pb, pc])) = grid_partitions(m, n, k, grid) else {
        return Ok(None);
    };
    let layered = grid.layers > 1;
    let sum = match sum_partitions(m, n, k, grid) {
        Some((launch, partitions)) if layered => Some(LayersSum {
            partial_shape: [grid.layers, m, n],
            dtype,
            launch,
            partitions,
        }),
        _ => None,
    };
    let entry = kernel(&task.kernel, dtype, layered)?;
    task.args[0].partition = pa;
    task.args[1].partition = pb;
    task.args[2].partition = pc;
    task.launch = Dims::from_slice(&launch);
    let note = if layered {
        format!(
            "{} ({m}x{k} @ {k}x{n}) launched over a {} grid: {} layers of {} terms of k each \
             summed into C's tiles by the canonical tree ({why})",
            task.kernel.name(),
            text(grid),
            grid.layers,
            grid.tiles(m, n, k).map_or(k, |t| t.terms),
        )
    } else {
        format!(
            "{} ({m}x{k} @ {k}x{n}) launched over a {}x{} grid of C's tiles ({why})",
            task.kernel.name(),
            grid.rows,
            grid.cols
        )
    };
    task.kernel = entry;
    Ok(Some(Scheduled {
        grid,
        note,
        sum,
        steps: Vec::new(),
    }))
}

/// [`schedule`] for Cannon's algorithm on a `q x q` grid: `task` becomes its first step, and
/// the rest and the sum of the layers follow.
fn schedule_cannon(
    task: &mut IndexTask,
    (m, n, k): (u64, u64, u64),
    q: u64,
    setting: ProductGrid,
    dtype: DType,
    kernel: impl FnOnce(&KernelEntry, DType, bool) -> Result<Arc<KernelEntry>>,
) -> Result<Option<Scheduled>> {
    let step = |s| cannon_partitions(m, n, k, q, s).map(|(_, p)| p);
    let (Some((launch, [pa, pb, pc])), Some((sum_launch, partitions)), Some(terms)) = (
        cannon_partitions(m, n, k, q, 0),
        cannon_sum_partitions(m, n, k, q),
        cannon_tiles(m, n, k, q).map(|t| t.terms),
    ) else {
        return Ok(None);
    };
    let Some(steps) = (1..q).map(step).collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let entry = kernel(&task.kernel, dtype, true)?;
    let asked = match setting {
        ProductGrid::Cannon { side: Some(side) } if side != q => format!(
            "WEFT_MATMUL_GRID=cannon:{side}, cut to the product's extents and blocks of \
             {BLOCK_TERMS} terms"
        ),
        ProductGrid::Cannon { side: Some(side) } => format!("WEFT_MATMUL_GRID=cannon:{side}"),
        _ => "WEFT_MATMUL_GRID=cannon, the largest square of ranks".to_string(),
    };
    let note = format!(
        "{} ({m}x{k} @ {k}x{n}) launched as Cannon's algorithm on a {q}x{q} grid: {q} steps, \
         at step s point (i, j) multiplies the blocks (i, t) of A and (t, j) of B of {terms} \
         terms for t = (i + j + s) mod {q}, and the {q} blocks' sums of each tile are summed \
         into C by the canonical tree ({asked})",
        task.kernel.name()
    );
    task.args[0].partition = pa;
    task.args[1].partition = pb;
    task.args[2].partition = pc;
    task.launch = Dims::from_slice(&launch);
    task.kernel = entry;
    Ok(Some(Scheduled {
        grid: Grid {
            rows: q,
            cols: q,
            layers: q,
        },
        note,
        sum: Some(LayersSum {
            partial_shape: [q, m, n],
            dtype,
            launch: sum_launch,
            partitions,
        }),
        steps,
    }))
}

/// The kernel a grid's points run for `product` (of `dtype`), under its name: the tiled
/// product, or with `layered` the layered one.
pub fn grid_kernel(product: &KernelEntry, dtype: DType, layered: bool) -> Result<KernelEntry> {
    let ir = if layered {
        weft_ir::product::matmul_layered(product.name(), dtype).finish()
    } else {
        weft_ir::product::matmul_tiled(product.name(), dtype).finish()
    };
    KernelEntry::new(product.name(), &ir)
}

/// The kernel that sums `layers` layers of `product`'s partial sums (of `dtype`) into `C`,
/// named after it (`weft_ir::product::layers_sum`).
pub fn sum_kernel(product: &KernelEntry, dtype: DType, layers: u64) -> Result<KernelEntry> {
    let name = format!("{}.layers", product.name());
    let layers = u32::try_from(layers).unwrap_or(u32::MAX);
    let ir = weft_ir::product::layers_sum(name.clone(), dtype, layers).finish();
    KernelEntry::new(&name, &ir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQUARE: (u64, u64, u64) = (4096, 4096, 4096);

    #[test]
    fn grids_parse_and_bad_ones_are_refused() {
        assert_eq!(ProductGrid::parse("auto"), Ok(ProductGrid::Auto));
        assert_eq!(ProductGrid::parse("rows"), Ok(ProductGrid::Rows));
        assert_eq!(
            ProductGrid::parse("2x3"),
            Ok(ProductGrid::Fixed {
                rows: 2,
                cols: 3,
                layers: 1
            })
        );
        assert_eq!(
            ProductGrid::parse("2x3x4"),
            Ok(ProductGrid::Fixed {
                rows: 2,
                cols: 3,
                layers: 4
            })
        );
        for bad in [
            "",
            "2",
            "0x2",
            "2x",
            "x2",
            "axb",
            "2x3x3",
            "2x3x0",
            "1x1x128",
            "4096x4096",
            "2x2x2x2",
        ] {
            assert!(ProductGrid::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn layers_own_aligned_subtrees_of_the_blocks_of_k() {
        let b = BLOCK_TERMS;
        // Four blocks: two layers of two, four of one; eight layers would leave some none.
        let t = |l, k| {
            Grid {
                rows: 1,
                cols: 1,
                layers: l,
            }
            .tiles(64, 64, k)
            .map(|t| t.terms)
        };
        assert_eq!(t(1, 4 * b), Some(4 * b));
        assert_eq!(t(2, 4 * b), Some(2 * b));
        assert_eq!(t(4, 4 * b), Some(b));
        assert_eq!(t(8, 4 * b), None);
        // Three blocks (the tree's root at level 2): two layers own two blocks and one; four
        // would leave the last layer none.
        assert_eq!(t(2, 3 * b), Some(2 * b));
        assert_eq!(t(4, 3 * b), None);
        // Five blocks: the root at level 3, so two layers own four blocks and one; four
        // layers of two would leave the last none, but seven blocks fill them (2, 2, 2, 1).
        assert_eq!(t(2, 5 * b), Some(4 * b));
        assert_eq!(t(4, 5 * b), None);
        assert_eq!(t(4, 7 * b), Some(2 * b));
        // One block cannot be split.
        assert_eq!(t(2, b), None);
        // Tiles' columns are a multiple of the layers.
        let g = Grid {
            rows: 3,
            cols: 5,
            layers: 4,
        };
        let tiles = g.tiles(100, 101, 4 * b).expect("tiles");
        assert_eq!((tiles.rows, tiles.cols), (34, 24));
        assert!(tiles.cols * g.cols >= 101);
    }

    #[test]
    fn auto_takes_the_grid_that_reads_least_within_memory() {
        let auto = ProductGrid::Auto;
        let free = Budget::unbounded();
        // One process, and two ranks of a square product: the plugin's launch.
        assert_eq!(choose(SQUARE, 1, auto, free), None);
        assert_eq!(choose(SQUARE, 2, auto, free), None);
        // Four ranks, square: 2x2 reads n/2 + n/2 rows of k against n/4 + n; a 2x1x2 grid
        // reads as much (with its sum), so the fewer layers win.
        let (g, _) = choose(SQUARE, 4, auto, free).expect("a grid");
        assert_eq!(g, Grid::flat(2, 2));
        // Eight: 2x2x2 reads 2 n^2 / 4 + n^2 / 8 against 4x2's 3 n^2 / 4.
        let (g, why) = choose(SQUARE, 8, auto, free).expect("a grid");
        assert_eq!(
            g,
            Grid {
                rows: 2,
                cols: 2,
                layers: 2
            }
        );
        assert!(why.contains("partial sums"), "{why}");
        // With memory for a 2-D grid's point but not for the layered one's, 4x2.
        let flat = Grid::flat(4, 2)
            .memory_elements(4096, 4096, 4096)
            .expect("fits");
        let layered = g.memory_elements(4096, 4096, 4096).expect("fits");
        assert!(flat < layered);
        let tight = Budget {
            rank_bytes: flat * 8,
            ..free
        };
        let (g, why) = choose(SQUARE, 8, auto, tight).expect("a grid");
        assert_eq!(g, Grid::flat(4, 2));
        assert!(
            why.contains(&format!("within its {} bytes", flat * 8)),
            "{why}"
        );
        // With memory for none, the least memory.
        let none = Budget {
            rank_bytes: 1,
            ..free
        };
        let (_, why) = choose(SQUARE, 8, auto, none).expect("a grid");
        assert!(why.contains("no grid fits"), "{why}");
        // With no room in the quota for two layers' partial sums, 4x2 again.
        let no_room = Budget {
            partials_bytes: 2 * 4096 * 4096 * 8 - 1,
            ..free
        };
        let (g, _) = choose(SQUARE, 8, auto, no_room).expect("a grid");
        assert_eq!(g, Grid::flat(4, 2));
        // Tall and skinny (C of 10^6 x 64): the rows alone.
        assert_eq!(choose((1 << 20, 64, 64), 16, auto, free), None);
        // Short and wide: the columns.
        let (g, _) = choose((64, 1 << 20, 64), 16, auto, free).expect("a grid");
        assert_eq!(g, Grid::flat(1, 16));
        // Brute force over every grid: nothing that fits reads less.
        for (shape, p, bytes) in [
            ((1000, 300, 5000), 12, u64::MAX),
            ((7, 9, 3000), 6, u64::MAX),
            ((300, 1000, 20), 36, u64::MAX),
            ((2048, 2048, 8192), 64, u64::MAX),
            ((2048, 2048, 8192), 64, 4 << 20),
        ] {
            let (m, n, k) = shape;
            let budget = Budget {
                rank_bytes: bytes,
                ..Budget::unbounded()
            };
            let chosen = choose(shape, p, auto, budget).map_or(Grid::flat(p, 1), |(g, _)| g);
            let reads = chosen.panel_elements(m, n, k).expect("valid");
            for l in [1, 2, 4, 8, 16, 32, 64].into_iter().filter(|l| p % l == 0) {
                for r in (1..=p / l).filter(|r| (p / l) % r == 0) {
                    let g = Grid {
                        rows: r,
                        cols: p / l / r,
                        layers: l,
                    };
                    let fits = g.memory_elements(m, n, k).is_some_and(|e| budget.fits(e));
                    if g.rows <= m && g.cols <= n && fits {
                        let other = g.panel_elements(m, n, k).expect("valid");
                        assert!(reads <= other, "{shape:?} {p}: {chosen:?} against {g:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_fixed_grid_is_kept_and_cut_to_the_extents_and_blocks() {
        let fixed = |rows, cols, layers| ProductGrid::Fixed { rows, cols, layers };
        let free = Budget::unbounded();
        let (g, why) = choose((100, 100, 10), 1, fixed(3, 5, 1), free).expect("a grid");
        assert_eq!(g, Grid::flat(3, 5));
        assert!(
            why.contains("WEFT_MATMUL_GRID=3x5") && !why.contains("cut"),
            "{why}"
        );
        let (g, why) = choose((2, 100, 10), 4, fixed(3, 5, 1), free).expect("a grid");
        assert_eq!(g, Grid::flat(2, 5));
        assert!(why.contains("cut"), "{why}");
        // Two blocks of k allow two layers, not four.
        let (g, why) = choose((64, 64, 2048), 1, fixed(1, 2, 4), free).expect("a grid");
        assert_eq!(
            g,
            Grid {
                rows: 1,
                cols: 2,
                layers: 2
            }
        );
        assert!(why.contains("WEFT_MATMUL_GRID=1x2x4, cut"), "{why}");
        assert_eq!(choose((100, 100, 4), 4, ProductGrid::Rows, free), None);
    }

    #[test]
    fn a_layered_grids_sum_reads_each_slice_of_a_tile_from_its_layers() {
        // The sum's point `(i, j l + z)` has the place of the product's `(i, j, z)` in their
        // launches' row-major order (so a block mapping puts them on one rank), and its slice
        // of `C`'s columns lies inside the product's tile `(i, j)`.
        let (m, n, k) = (50, 70, 4 * BLOCK_TERMS);
        let g = Grid {
            rows: 2,
            cols: 3,
            layers: 4,
        };
        let (launch, [_, _, partial]) = grid_partitions(m, n, k, g).expect("partitions");
        let (sum_launch, [read, write]) = sum_partitions(m, n, k, g).expect("partitions");
        assert_eq!(launch, vec![2, 3, 4]);
        assert_eq!(sum_launch, vec![2, 12]);
        let tile = |p: &Partition| match p {
            Partition::Tiling(t) => (t.tile.to_vec(), t.projection.to_vec()),
            other => panic!("{other:?}"),
        };
        let (pt, pp) = tile(&partial);
        let (rt, rp) = tile(&read);
        let (wt, wp) = tile(&write);
        assert_eq!(
            (pp, rp, wp.clone()),
            (
                vec![Some(2), Some(0), Some(1)],
                vec![None, Some(0), Some(1)],
                vec![Some(0), Some(1)]
            )
        );
        assert_eq!((rt[0], rt[1], rt[2]), (4, pt[1], wt[1]));
        for j in 0..3u64 {
            for z in 0..4u64 {
                let slice = (j * 4 + z) * wt[1]..(j * 4 + z + 1) * wt[1];
                let product_tile = j * pt[2]..(j + 1) * pt[2];
                assert!(
                    product_tile.start <= slice.start && slice.end <= product_tile.end,
                    "slice {slice:?} of tile {product_tile:?}"
                );
            }
        }
        assert!(sum_partitions(m, n, k, Grid::flat(2, 3)).is_none());
    }

    #[test]
    fn cannon_is_parsed_and_its_side_cut_to_the_ranks_extents_and_blocks() {
        assert_eq!(
            ProductGrid::parse("cannon"),
            Ok(ProductGrid::Cannon { side: None })
        );
        assert_eq!(
            ProductGrid::parse("cannon:4"),
            Ok(ProductGrid::Cannon { side: Some(4) })
        );
        for bad in ["cannon:3", "cannon:0", "cannon:128", "cannon:", "cannon:x"] {
            assert!(ProductGrid::parse(bad).is_err(), "{bad}");
        }
        let auto = ProductGrid::Cannon { side: None };
        // The largest power of two whose square the ranks fill.
        assert_eq!(cannon_side(SQUARE, 1, auto), None);
        assert_eq!(cannon_side(SQUARE, 4, auto), Some(2));
        assert_eq!(cannon_side(SQUARE, 15, auto), Some(2));
        assert_eq!(cannon_side(SQUARE, 16, auto), Some(4));
        // 4,096 terms are four blocks: at most four steps; a side past `m` is cut.
        assert_eq!(cannon_side(SQUARE, 64, auto), Some(4));
        let asked = |q| ProductGrid::Cannon { side: Some(q) };
        assert_eq!(cannon_side(SQUARE, 1, asked(4)), Some(4));
        assert_eq!(cannon_side((3, 4096, 4096), 1, asked(4)), Some(2));
        assert_eq!(cannon_side((64, 64, 1000), 1, asked(4)), None);
        assert_eq!(cannon_side(SQUARE, 4, ProductGrid::Auto), None);
        // `choose` leaves Cannon to `cannon_side`.
        assert_eq!(choose(SQUARE, 4, auto, Budget::unbounded()), None);
    }

    /// Over Cannon's `q` steps each point multiplies every block of `k` once, and in each
    /// step the blocks of `A` (and of `BT`) that a grid row (column) reads are a permutation:
    /// each block goes to one point, the shift.
    #[test]
    fn cannons_steps_give_each_point_every_block_once_and_shift_the_blocks() {
        use crate::partition::RootPartition;
        use crate::view::ViewMap;
        let (m, n, k) = (40, 36, 4000);
        let q = 4;
        let terms = cannon_tiles(m, n, k, q).map(|t| t.terms);
        assert_eq!(terms, Some(BLOCK_TERMS));
        let block = |p: &Partition, shape: &[u64], point: &[u64], d: usize| {
            let r = RootPartition::fold(p, &ViewMap::whole(shape)).sub_rect(point);
            r.origin[d] / r.extent[d].max(1)
        };
        let mut seen = vec![vec![Vec::new(); q as usize]; q as usize];
        for s in 0..q {
            let (launch, [pa, pb, pc]) = cannon_partitions(m, n, k, q, s).unwrap();
            assert_eq!(launch, vec![q, q]);
            for i in 0..q {
                let mut a_blocks = Vec::new();
                let mut b_blocks = Vec::new();
                for j in 0..q {
                    let ta = block(&pa, &[m, k], &[i, j], 1);
                    assert_eq!(ta, (i + j + s) % q);
                    // `BT`'s block and the layer written are the same `t`.
                    assert_eq!(block(&pb, &[n, k], &[i, j], 1), ta);
                    assert_eq!(block(&pc, &[q, m, n], &[i, j], 0), ta);
                    a_blocks.push(ta);
                    b_blocks.push(block(&pb, &[n, k], &[j, i], 1));
                    seen[i as usize][j as usize].push(ta);
                }
                a_blocks.sort_unstable();
                b_blocks.sort_unstable();
                assert_eq!(a_blocks, (0..q).collect::<Vec<_>>());
                assert_eq!(b_blocks, (0..q).collect::<Vec<_>>());
            }
        }
        for mut point in seen.into_iter().flatten() {
            point.sort_unstable();
            assert_eq!(point, (0..q).collect::<Vec<_>>());
        }
        let (launch, [read, write]) = cannon_sum_partitions(m, n, k, q).unwrap();
        assert_eq!(launch, vec![q, q]);
        let r = RootPartition::fold(&read, &ViewMap::whole(&[q, m, n])).sub_rect(&[1, 2]);
        assert_eq!(r.origin.as_slice(), &[0, 10, 18]);
        assert_eq!(r.extent.as_slice(), &[q, 10, 9]);
        let w = RootPartition::fold(&write, &ViewMap::whole(&[m, n])).sub_rect(&[1, 2]);
        assert_eq!(w.origin.as_slice(), &[10, 18]);
    }
}
