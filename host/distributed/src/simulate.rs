//! Message plans of whole workloads for many ranks, computed without running them: what one
//! rank sends and receives per iteration, and how long deriving its plan takes, as ranks
//! grow under weak scaling (every rank keeps the same share of the problem).

use std::time::Instant;

use weft_runtime::mapping::BlockMapping;
use weft_runtime::products::{Budget, Grid};
use weft_runtime::{RootPartition, ViewMap};

use crate::boxes::row_tiles;

use crate::{Error, ExchangePlan, Holding, Layer, Read, exchange};

/// One workload's plans at one rank count.
#[derive(Clone, Debug, PartialEq)]
pub struct Simulated {
    /// Ranks.
    pub ranks: usize,
    /// The most bytes one rank receives per iteration, and the mean over ranks.
    pub recv_bytes_max: u64,
    /// Mean bytes received per rank per iteration.
    pub recv_bytes_mean: f64,
    /// The most bytes one rank sends per iteration.
    pub send_bytes_max: u64,
    /// The most messages one rank receives per iteration (one per peer and task), with the
    /// reductions' messages (a recursive-doubling all-reduce: `ceil(log2 ranks)` each).
    pub messages_max: u64,
    /// The median over ranks of the seconds one rank takes to derive its plans of one
    /// iteration.
    pub plan_seconds_median: f64,
}

/// A task's reads of one store, for the simulation: the partitions, one launch.
struct TaskReads<'a> {
    reads: Vec<RootPartition>,
    launch: Vec<u64>,
    root: Vec<u64>,
    holding: &'a Holding,
    element_bytes: u64,
}

impl<'a> TaskReads<'a> {
    /// One read of `root` (8-byte elements) by `read` over `launch`, from `holding`.
    fn one(read: RootPartition, launch: Vec<u64>, root: Vec<u64>, holding: &'a Holding) -> Self {
        TaskReads {
            reads: vec![read],
            launch,
            root,
            holding,
            element_bytes: 8,
        }
    }
}

/// The ranks whose plans [`simulate`] derives for a sample: all of them up to
/// [`SAMPLED_RANKS`], else that many spread evenly from the first to the last.
fn sample(ranks: usize) -> Vec<usize> {
    if ranks <= SAMPLED_RANKS {
        return (0..ranks).collect();
    }
    let mut out: Vec<usize> = (0..SAMPLED_RANKS)
        .map(|i| i * (ranks - 1) / (SAMPLED_RANKS - 1))
        .collect();
    out.dedup();
    out
}

/// How many ranks' plans a sampled simulation derives: every rank up to this many, else this
/// many spread evenly from the first to the last. A rank's plan of a product whose operands
/// every rank holds a part of has a peer per rank, and deriving its sends looks at every
/// reader point's holders: all ranks' plans of 4,096 ranks would take hours.
pub const SAMPLED_RANKS: usize = 16;

/// Runs the plans of `tasks` (one iteration) for every rank (for the ranks of [`sample`] when
/// `sampled`), with `reductions` all-reduces of one element per iteration.
fn simulate(
    ranks: usize,
    tasks: &[TaskReads<'_>],
    reductions: u64,
    sampled: bool,
) -> Result<Simulated, Error> {
    let mapping = BlockMapping { ranks };
    let planned = if sampled {
        sample(ranks)
    } else {
        (0..ranks).collect()
    };
    let mut recv = Vec::with_capacity(planned.len());
    let mut send_max = 0u64;
    let mut messages_max = 0u64;
    let mut seconds = Vec::with_capacity(planned.len());
    let allreduce_rounds = u64::from(usize::BITS - ranks.saturating_sub(1).leading_zeros());
    for rank in planned {
        let start = Instant::now();
        let (mut r, mut s, mut m) = (0u64, 0u64, 0u64);
        for task in tasks {
            // One message per peer per task: the reads' boxes travel together.
            let mut peers = std::collections::BTreeSet::new();
            for partition in &task.reads {
                let plan: ExchangePlan = exchange(
                    Read {
                        partition,
                        launch: &task.launch,
                        root: &task.root,
                        holding: task.holding,
                    },
                    rank,
                    &mapping,
                )?;
                let (er, es) = plan.elements();
                r += er * task.element_bytes;
                s += es * task.element_bytes;
                peers.extend(plan.recvs.keys().copied());
            }
            m += peers.len() as u64;
        }
        seconds.push(start.elapsed().as_secs_f64());
        r += reductions * allreduce_rounds * 8;
        s += reductions * allreduce_rounds * 8;
        m += reductions * allreduce_rounds;
        recv.push(r);
        send_max = send_max.max(s);
        messages_max = messages_max.max(m);
    }
    seconds.sort_by(f64::total_cmp);
    Ok(Simulated {
        ranks,
        recv_bytes_max: recv.iter().copied().max().unwrap_or(0),
        recv_bytes_mean: recv.iter().sum::<u64>() as f64 / recv.len().max(1) as f64,
        send_bytes_max: send_max,
        messages_max,
        plan_seconds_median: seconds.get(seconds.len() / 2).copied().unwrap_or(0.0),
    })
}

/// Figure 1's five-point stencil on an `(n + 2) x (m + 2)` grid with `n = ranks * rows`: each
/// rank's point writes `rows` rows of the center and reads the four shifted views and the
/// center through the same row tiles (one sweep per iteration).
pub fn stencil(ranks: usize, rows: u64, m: u64) -> Result<Simulated, Error> {
    let n = rows * ranks as u64;
    let root = vec![n + 2, m + 2];
    let grid = ViewMap::whole(&root);
    let view = |r: u64, c: u64| {
        grid.slice(&[r, c], &[r + n, c + m])
            .map_err(|e| Error::Unsupported(e.to_string()))
    };
    let tiles = row_tiles(rows, 0, 2);
    let center = RootPartition::fold(&tiles, &view(1, 1)?);
    let launch = vec![ranks as u64];
    let mut holding = Holding::replicated();
    holding.write(Layer::new(&center, &launch, &root)?, &root);
    let mut reads = Vec::new();
    for (r, c) in [(1, 1), (0, 1), (2, 1), (1, 0), (1, 2)] {
        reads.push(RootPartition::fold(&tiles, &view(r, c)?));
    }
    let task = TaskReads {
        reads,
        launch,
        root,
        holding: &holding,
        element_bytes: 8,
    };
    simulate(ranks, &[task], 0, false)
}

/// CG on the 5-point Poisson matrix of a `width x (ranks * rows)` grid, rows of the grid
/// split over ranks: per iteration the product reads `p` through each point's column hull
/// (its own rows and `width` unknowns either side, what an image through the rows' column
/// bounds gives for this matrix), the vector updates read only their own tiles, and two dot
/// products all-reduce.
pub fn cg(ranks: usize, rows: u64, width: u64) -> Result<Simulated, Error> {
    let local = rows * width;
    let n = local * ranks as u64;
    let root = vec![n];
    let x = ViewMap::whole(&root);
    let launch = vec![ranks as u64];
    let own = RootPartition::fold(&row_tiles(local, 0, 1), &x);
    let mut holding = Holding::replicated();
    holding.write(Layer::new(&own, &launch, &root)?, &root);
    let g = i64::try_from(width).map_err(|e| Error::Unsupported(e.to_string()))?;
    let product = TaskReads {
        reads: vec![
            RootPartition::fold(&row_tiles(local, -g, 1), &x),
            own.clone(),
            RootPartition::fold(&row_tiles(local, g, 1), &x),
        ],
        launch: launch.clone(),
        root: root.clone(),
        holding: &holding,
        element_bytes: 8,
    };
    let updates = TaskReads::one(own, launch, root, &holding);
    simulate(ranks, &[product, updates], 2, false)
}

/// Where a product's operands are held before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// By rows over the ranks, as element-wise tasks leave them (`A` and `B` each split by
    /// their first dimension).
    Rows,
    /// In the grid's own tiles, as an earlier product on the same grid leaves its result
    /// (`A` and `B` each split `r x c`): SUMMA's layout.
    Grid,
}

/// One dense product `C = A @ B`, `A` of `m x k` and `B` of `k x n`, on `ranks` ranks (the
/// plans of a sample of them past [`SAMPLED_RANKS`]), laid over the grid
/// `weft_runtime::products::choose` picks within `budget` (the plugin's rows where it keeps
/// them), with the operands held as `held` says. A grid of layers adds the task that sums
/// the layers' partial sums (its reads of the other layers' sums).
pub fn product(
    ranks: usize,
    (m, n, k): (u64, u64, u64),
    held: Held,
    budget: Budget,
) -> Result<ProductPlans, Error> {
    use weft_runtime::products::{ProductGrid, choose, grid_partitions, sum_partitions};
    let p = ranks as u64;
    let grid = choose((m, n, k), p, ProductGrid::Auto, budget)
        .map_or(Grid::flat(p.min(m.max(1)), 1), |(g, _)| g);
    let unsupported = || Error::Unsupported(format!("no partitions for the grid {grid:?}"));
    let (launch, [pa, pb, pp]) = grid_partitions(m, n, k, grid).ok_or_else(unsupported)?;
    let (a_root, b_root) = (vec![m, k], vec![k, n]);
    let a_view = ViewMap::whole(&a_root);
    let bt_view = ViewMap::whole(&b_root)
        .permute(&[1, 0])
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    // Where the grid leaves its result: `C`'s tiles, or with layers the sum's slices of them.
    let (result_launch, result) = match sum_partitions(m, n, k, grid) {
        Some((launch, [_, c])) => (launch, c),
        None => (launch.clone(), pp.clone()),
    };
    // Who holds each operand: a layer written by a task over the ranks.
    let holding = |root: &[u64]| -> Result<Holding, Error> {
        let (partition, over) = match held {
            Held::Rows => (row_tiles(root[0].div_ceil(p), 0, 2), vec![p]),
            Held::Grid => {
                // The result's layout, for a matrix of this shape.
                let scaled = match &result {
                    weft_runtime::Partition::Tiling(t) => {
                        weft_runtime::Partition::Tiling(weft_runtime::partition::Tiling {
                            tile: weft_runtime::Dims::from_slice(&[
                                root[0].div_ceil(grid.rows),
                                root[1].div_ceil(result_launch[1]),
                            ]),
                            ..t.clone()
                        })
                    }
                    other => other.clone(),
                };
                (scaled, result_launch.clone())
            }
        };
        let written = RootPartition::fold(&partition, &ViewMap::whole(root));
        let mut h = Holding::replicated();
        h.write(Layer::new(&written, &over, root)?, root);
        Ok(h)
    };
    let (ha, hb) = (holding(&a_root)?, holding(&b_root)?);
    let mut tasks = vec![
        TaskReads::one(
            RootPartition::fold(&pa, &a_view),
            launch.clone(),
            a_root,
            &ha,
        ),
        TaskReads::one(
            RootPartition::fold(&pb, &bt_view),
            launch.clone(),
            b_root,
            &hb,
        ),
    ];
    // The layers' partial sums, written by the product's points and read by the sum's.
    let partial_root = vec![grid.layers, m, n];
    let mut hp = Holding::replicated();
    let sum = sum_partitions(m, n, k, grid);
    if sum.is_some() {
        let written = RootPartition::fold(&pp, &ViewMap::whole(&partial_root));
        hp.write(Layer::new(&written, &launch, &partial_root)?, &partial_root);
    }
    if let Some((sum_launch, [read, _])) = sum {
        tasks.push(TaskReads::one(
            RootPartition::fold(&read, &ViewMap::whole(&partial_root)),
            sum_launch,
            partial_root.clone(),
            &hp,
        ));
    }
    let plans = simulate(ranks, &tasks, 0, true)?;
    let panels = grid.panel_elements(m, n, k).ok_or_else(unsupported)?;
    let tiles = grid.tiles(m, n, k).ok_or_else(unsupported)?;
    let sums = tiles.rows * tiles.cols / grid.layers * (grid.layers - 1);
    // Each operand's share of one rank (1 / P of it) lies in its panels already.
    let share = (m * k + k * n) / p.max(1);
    Ok(ProductPlans {
        plans,
        grid,
        panel_elements: panels,
        summa_elements: panels.saturating_sub(share),
        sum_elements: sums,
    })
}

/// One dense product by Cannon's algorithm (`weft_runtime::products::cannon_partitions`) on
/// `ranks` ranks, a square of a power of two (the plans of a sample of them past
/// [`SAMPLED_RANKS`]): its `q` steps' skewed reads of `A`'s and `BT`'s blocks, with the
/// operands held as `held` says (for [`Held::Grid`], in the `q x q` grid's tiles), and the
/// sum's reads of the partial sums that the steps wrote. `Unsupported` where Cannon's grid
/// does not fill the ranks or the blocks of `k` do not give each step one.
pub fn cannon(ranks: usize, (m, n, k): (u64, u64, u64), held: Held) -> Result<ProductPlans, Error> {
    use weft_runtime::products::{
        ProductGrid, cannon_partitions, cannon_side, cannon_sum_partitions,
    };
    let p = ranks as u64;
    let q = cannon_side((m, n, k), p, ProductGrid::Cannon { side: None })
        .filter(|&q| q * q == p)
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "Cannon's algorithm for {m}x{k} @ {k}x{n} does not fill {ranks} ranks"
            ))
        })?;
    let (a_root, b_root) = (vec![m, k], vec![k, n]);
    let a_view = ViewMap::whole(&a_root);
    let bt_view = ViewMap::whole(&b_root)
        .permute(&[1, 0])
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    let holding = |root: &[u64]| -> Result<Holding, Error> {
        let (partition, over) = match held {
            Held::Rows => (row_tiles(root[0].div_ceil(p), 0, 2), vec![p]),
            Held::Grid => (
                weft_runtime::Partition::Tiling(weft_runtime::Tiling {
                    tile: weft_runtime::Dims::from_slice(&[
                        root[0].div_ceil(q),
                        root[1].div_ceil(q),
                    ]),
                    offset: weft_runtime::Dims::from_slice(&[0, 0]),
                    projection: weft_runtime::Dims::from_slice(&[Some(0), Some(1)]),
                    skew: None,
                }),
                vec![q, q],
            ),
        };
        let written = RootPartition::fold(&partition, &ViewMap::whole(root));
        let mut h = Holding::replicated();
        h.write(Layer::new(&written, &over, root)?, root);
        Ok(h)
    };
    let (ha, hb) = (holding(&a_root)?, holding(&b_root)?);
    let unsupported = || Error::Unsupported(format!("no Cannon partitions for q = {q}"));
    let partial_root = vec![q, m, n];
    let mut hp = Holding::replicated();
    let mut tasks = Vec::new();
    for s in 0..q {
        let (launch, [pa, pb, pp]) = cannon_partitions(m, n, k, q, s).ok_or_else(unsupported)?;
        tasks.push((
            launch.clone(),
            RootPartition::fold(&pa, &a_view),
            a_root.clone(),
            &ha,
        ));
        tasks.push((
            launch.clone(),
            RootPartition::fold(&pb, &bt_view),
            b_root.clone(),
            &hb,
        ));
        let written = RootPartition::fold(&pp, &ViewMap::whole(&partial_root));
        hp.write(Layer::new(&written, &launch, &partial_root)?, &partial_root);
    }
    let (sum_launch, [read, _]) = cannon_sum_partitions(m, n, k, q).ok_or_else(unsupported)?;
    let sum_read = RootPartition::fold(&read, &ViewMap::whole(&partial_root));
    let mut reads: Vec<TaskReads<'_>> = tasks
        .into_iter()
        .map(|(launch, partition, root, holding)| TaskReads::one(partition, launch, root, holding))
        .collect();
    reads.push(TaskReads::one(
        sum_read,
        sum_launch,
        partial_root.clone(),
        &hp,
    ));
    let plans = simulate(ranks, &reads, 0, true)?;
    let flat = Grid::flat(q, q);
    let panels = flat.panel_elements(m, n, k).ok_or_else(unsupported)?;
    let share = (m * k + k * n) / p.max(1);
    Ok(ProductPlans {
        plans,
        grid: Grid {
            rows: q,
            cols: q,
            layers: q,
        },
        panel_elements: panels,
        summa_elements: panels.saturating_sub(share),
        sum_elements: 0,
    })
}

/// One product of a matrix by a vector by parts (`weft_runtime::matvec_grid`), `A` of
/// `m x k`, on `ranks` ranks (the plans of a sample of them past [`SAMPLED_RANKS`]) over
/// `rows x layers` points (`layers` cut as the runtime cuts it; `rows x layers` should be the
/// ranks), with `A` held as `held` says ([`Held::Grid`]: in the grid's own tiles) and `x` by
/// rows over the ranks: the layers' reads of `A` and of `x`'s parts, and the sum's reads of
/// the other layers' partial sums. With one layer it is the plugin's launch (rows, `x` whole).
/// Returns the plans and the layers.
pub fn matvec(
    ranks: usize,
    (m, k): (u64, u64),
    (rows, layers): (u64, u64),
    held: Held,
) -> Result<(Simulated, u64), Error> {
    use weft_runtime::matvec_grid::{layers_for, partitions, sum_partitions};
    let p = ranks as u64;
    let l = layers_for(k, layers);
    let (launch, [pa, px, pp]) = if l == 1 {
        let rows_tile = m.div_ceil(p);
        (
            vec![p],
            [
                row_tiles(rows_tile, 0, 2),
                weft_runtime::Partition::None,
                row_tiles(rows_tile, 0, 1),
            ],
        )
    } else {
        partitions(m, k, rows, l)
    };
    let (a_root, x_root) = (vec![m, k], vec![k]);
    let written = |partition: &weft_runtime::Partition, over: &[u64], root: &[u64]| {
        let folded = RootPartition::fold(partition, &ViewMap::whole(root));
        let mut h = Holding::replicated();
        h.write(Layer::new(&folded, over, root)?, root);
        Ok::<Holding, Error>(h)
    };
    let ha = match held {
        Held::Rows => written(&row_tiles(m.div_ceil(p), 0, 2), &[p], &a_root)?,
        Held::Grid => written(&pa, &launch, &a_root)?,
    };
    let hx = written(&row_tiles(k.div_ceil(p), 0, 1), &[p], &x_root)?;
    let mut tasks = vec![
        TaskReads::one(
            RootPartition::fold(&pa, &ViewMap::whole(&a_root)),
            launch.clone(),
            a_root,
            &ha,
        ),
        TaskReads::one(
            RootPartition::fold(&px, &ViewMap::whole(&x_root)),
            launch.clone(),
            x_root,
            &hx,
        ),
    ];
    let partial_root = vec![l, m];
    let hp;
    if l > 1 {
        hp = written(&pp, &launch, &partial_root)?;
        let (sum_launch, [read, _]) = sum_partitions(m, rows, l);
        tasks.push(TaskReads::one(
            RootPartition::fold(&read, &ViewMap::whole(&partial_root)),
            sum_launch,
            partial_root.clone(),
            &hp,
        ));
    }
    Ok((simulate(ranks, &tasks, 0, true)?, l))
}

/// What [`product`] or [`cannon`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct ProductPlans {
    /// The plans' figures.
    pub plans: Simulated,
    /// The grid the product ran over.
    pub grid: Grid,
    /// The elements one point reads ([`Grid::panel_elements`]): its panels of `A` and `B`
    /// over its layer's terms, `k_z (m / r + n / c)` (about `2 n^2 / sqrt(l P)` for a square
    /// product on a square grid of `l` layers), and with layers the other layers' partial
    /// sums of its slice of the tile.
    pub panel_elements: u64,
    /// The schedule's count of what a rank receives when it holds `1 / P` of each operand
    /// inside its panels: [`ProductPlans::panel_elements`] less that share (SUMMA's count for
    /// one layer).
    pub summa_elements: u64,
    /// Of [`ProductPlans::panel_elements`], the other layers' partial sums (the reduction
    /// along the third axis, `(l - 1) / l` of a tile; none for one layer).
    pub sum_elements: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matvec_over_layers_of_its_own_tiles_receives_parts_of_x_and_other_layers_sums() {
        // 16 ranks, 4 x 4: with `A` in the grid's tiles a rank receives its layer's parts of
        // `x` (less what it holds) and the other layers' sums of its slice; by rows it
        // receives the whole of `x` less its share.
        let (m, k) = (4096u64, 1 << 16);
        let (grid, l) = matvec(16, (m, k), (4, 4), Held::Grid).unwrap();
        assert_eq!(l, 4);
        let span = 2 * weft_ir::matvec::part_width(k);
        let slice = m / 4 / 4;
        assert!(grid.recv_bytes_max <= (span + 3 * slice) * 8, "{grid:?}");
        assert!(grid.recv_bytes_max >= (span - k / 16) * 8, "{grid:?}");
        let (rows, l) = matvec(16, (m, k), (16, 1), Held::Rows).unwrap();
        assert_eq!(l, 1);
        assert_eq!(rows.recv_bytes_max, (k - k / 16) * 8, "{rows:?}");
        assert!(grid.recv_bytes_max * 3 < rows.recv_bytes_max);
    }

    #[test]
    fn stencil_ranks_receive_a_halo_row_per_neighbour() {
        for ranks in [1, 2, 3, 8] {
            // Interior ranks have two neighbours, the first and the last one.
            let neighbours = (ranks as u64 - 1).min(2);
            let s = stencil(ranks, 5, 7).unwrap();
            assert_eq!(s.recv_bytes_max, neighbours * 7 * 8, "{ranks} ranks");
            assert_eq!(s.send_bytes_max, neighbours * 7 * 8, "{ranks} ranks");
            assert_eq!(s.messages_max, neighbours);
        }
    }

    #[test]
    fn a_square_product_moves_summas_panels() {
        // On a 2x2 grid, operands in the grid's tiles: each rank receives the other tile of
        // its row panel of A and of its column panel of B, one message each.
        let r = product(4, (64, 64, 64), Held::Grid, Budget::unbounded()).unwrap();
        assert_eq!((r.grid.rows, r.grid.cols), (2, 2));
        assert_eq!(r.panel_elements, 64 * (32 + 32));
        assert_eq!(r.plans.recv_bytes_max, 2 * 32 * 32 * 8);
        assert_eq!(r.plans.recv_bytes_max, r.summa_elements * 8);
        assert_eq!(r.plans.messages_max, 2);
        // Operands by rows (16 each): A's panel lacks 16 rows of 64, held by one rank; B's
        // column panel (32 wide) lacks 48 of its 64 rows, held by three.
        let r = product(4, (64, 64, 64), Held::Rows, Budget::unbounded()).unwrap();
        assert_eq!(r.plans.recv_bytes_max, (16 * 64 + 48 * 32) * 8);
        assert_eq!(r.plans.messages_max, 4);
    }

    #[test]
    fn layered_products_receive_the_2_5_d_volume() {
        // Square products of four blocks of `k`: a 2x2x2 grid on 8 ranks, Johnson's 4x4x4 on
        // 64. A rank receives its panels over its layer's terms and the other layers' sums of
        // its slice, `2 n^2 / sqrt(l P) + (l - 1) n^2 / P`, less what it holds.
        let n = 4096u64;
        for (ranks, layers) in [(8usize, 2u64), (64, 4)] {
            for held in [Held::Rows, Held::Grid] {
                let r = product(ranks, (n, n, n), held, Budget::unbounded()).unwrap();
                let p = ranks as f64;
                let l = layers as f64;
                let volume = 2.0 * (n * n) as f64 / (l * p).sqrt() + (l - 1.0) * (n * n) as f64 / p;
                let what = format!("{ranks} ranks, {held:?}: {r:?}");
                assert_eq!(r.grid.layers, layers, "{what}");
                assert_eq!(r.panel_elements as f64, volume, "{what}");
                let recv = r.plans.recv_bytes_max as f64 / 8.0;
                assert!(recv <= volume && recv >= 0.85 * volume, "{what}");
            }
        }
    }

    #[test]
    fn no_rank_receives_more_than_its_panels() {
        for ranks in [1, 2, 3, 4, 8, 16, 64, 256] {
            for held in [Held::Rows, Held::Grid] {
                for shape in [(1000, 1000, 1000), (20_000, 64, 64), (77, 300, 129)] {
                    let r = product(ranks, shape, held, Budget::unbounded()).unwrap();
                    let what = format!("{ranks} {held:?} {shape:?}");
                    assert_eq!(r.grid.points(), ranks as u64, "{what}");
                    assert!(r.plans.recv_bytes_max <= r.panel_elements * 8, "{what}");
                    let (rows, cols) = (r.grid.rows, r.grid.cols);
                    let (m, n, k) = shape;
                    let divides = m % rows == 0 && k % cols == 0 && k % rows == 0 && n % cols == 0;
                    if held == Held::Grid && divides {
                        // In the grid's own layout, SUMMA's count when the tiles divide.
                        assert!(r.plans.recv_bytes_max <= r.summa_elements * 8, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn cg_ranks_receive_their_hull_and_the_dot_products() {
        for ranks in [1, 2, 4, 16] {
            let s = cg(ranks, 3, 5).unwrap();
            let rounds = u64::from(usize::BITS - (ranks - 1).leading_zeros());
            let halo = (ranks as u64 - 1).min(2) * 5 * 8;
            assert_eq!(s.recv_bytes_max, halo + 2 * rounds * 8, "{ranks} ranks");
        }
    }

    #[test]
    fn cannons_shifts_move_one_block_of_each_operand_a_step() {
        // Four blocks of `k`: a 2x2 grid on 4 ranks, 4x4 on 16.
        let shape = (64, 64, 4096);
        for (ranks, q) in [(4usize, 2u64), (16, 4)] {
            let r = cannon(ranks, shape, Held::Grid).unwrap();
            assert_eq!(r.grid.rows, q);
            // In the grid's tiles, a rank receives the other q - 1 blocks of its row of `A`
            // and of its column of `B`, one message each, and sums its tile's layers alone.
            let block = (64 / q) * (4096 / q) * 8;
            assert_eq!(r.plans.recv_bytes_max, 2 * (q - 1) * block, "{ranks} ranks");
            assert_eq!(r.plans.recv_bytes_mean, (2 * (q - 1) * block) as f64);
            assert_eq!(r.plans.messages_max, 2 * (q - 1), "{ranks} ranks");
            assert_eq!(r.summa_elements * 8, 2 * (q - 1) * block);
            // By rows, never more than the panels.
            let rows = cannon(ranks, shape, Held::Rows).unwrap();
            assert!(rows.plans.recv_bytes_max <= rows.panel_elements * 8);
        }
        // Not a square of ranks, or too few blocks of `k` for the side.
        assert!(cannon(8, shape, Held::Grid).is_err());
        assert!(cannon(64, shape, Held::Grid).is_err());
    }
}
