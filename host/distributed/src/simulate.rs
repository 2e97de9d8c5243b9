//! Message plans of whole workloads for many ranks, computed without running them: what one
//! rank sends and receives per iteration, and how long deriving its plan takes, as ranks
//! grow under weak scaling (every rank keeps the same share of the problem).

use std::time::Instant;

use weft_runtime::mapping::BlockMapping;
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

/// Runs the plans of `tasks` (one iteration) for every rank, with `reductions` all-reduces of
/// one element per iteration.
fn simulate(ranks: usize, tasks: &[TaskReads<'_>], reductions: u64) -> Result<Simulated, Error> {
    let mapping = BlockMapping { ranks };
    let mut recv = Vec::with_capacity(ranks);
    let mut send_max = 0u64;
    let mut messages_max = 0u64;
    let mut seconds = Vec::with_capacity(ranks);
    let allreduce_rounds = u64::from(usize::BITS - ranks.saturating_sub(1).leading_zeros());
    for rank in 0..ranks {
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
        recv_bytes_mean: recv.iter().sum::<u64>() as f64 / ranks.max(1) as f64,
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
    simulate(ranks, &[task], 0)
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
    let updates = TaskReads {
        reads: vec![own],
        launch,
        root,
        holding: &holding,
        element_bytes: 8,
    };
    simulate(ranks, &[product, updates], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn cg_ranks_receive_their_hull_and_the_dot_products() {
        for ranks in [1, 2, 4, 16] {
            let s = cg(ranks, 3, 5).unwrap();
            let rounds = u64::from(usize::BITS - (ranks - 1).leading_zeros());
            let halo = (ranks as u64 - 1).min(2) * 5 * 8;
            assert_eq!(s.recv_bytes_max, halo + 2 * rounds * 8, "{ranks} ranks");
        }
    }
}
