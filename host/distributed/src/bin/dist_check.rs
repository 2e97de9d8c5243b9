//! Runs message plans over MPI and checks what lands: `mpirun -n N dist_check`. Every rank
//! writes, into its copy of each root, the values of the tiles it holds (a function of the
//! element and of the write), runs the exchange of each read, and checks that every element
//! its points read holds the last writer's value. `--fault-on-rank R` makes rank R fail
//! instead: the job must end on every rank with an error naming it.
//!
//! `--stop-on-rank R` and `--cancel-on-rank R` run the same on a job's own communicator
//! (`Comm::for_job`), where rank R's part of the job stops before its first exchange (told
//! to stop as a failed task is, or its job cancelled): every other rank's run must fail
//! with a stop naming rank R instead of waiting for it, rank 0 must get every rank's outcome
//! at the job's end, and the ranks must still be in step on the world afterwards.
//! `--stop-on-every-rank-after R`: rank R stops, and every other rank stops too once R's
//! notice has reached it (a failure of its own at the same time): it must take the notice,
//! not send its own.

use weft_dist::boxes::{contains, coords};
use weft_dist::comm::{Comm, JobStop};
use weft_dist::mpi_comm::MpiComm;
use weft_dist::transfer::{Local, Slice, run_exchange};
use weft_dist::{Holding, Layer, Read, exchange};
use weft_runtime::mapping::{BlockMapping, Mapping};
use weft_runtime::partition::points;
use weft_runtime::{Partition, RootPartition, Tiling, ViewMap};

fn tiling(tile: &[u64], offset: &[i64], projection: &[Option<u32>]) -> Partition {
    Partition::Tiling(Tiling {
        tile: weft_runtime::Dims::from_slice(tile),
        offset: weft_runtime::Dims::from_slice(offset),
        projection: weft_runtime::Dims::from_slice(projection),
        skew: None,
    })
}

/// The value element `e` holds after write `w` (0: the base every rank holds).
fn value(e: u64, w: u64) -> f64 {
    (e * 1000 + w) as f64
}

/// One case: a root, its writes (partition, launch) in order, and a read.
struct Case {
    name: &'static str,
    root: Vec<u64>,
    writes: Vec<(RootPartition, Vec<u64>)>,
    read: (RootPartition, Vec<u64>),
}

fn cases(ranks: u64) -> Result<Vec<Case>, String> {
    let e = |e: weft_runtime::ViewError| e.to_string();
    let mut out = Vec::new();
    // The stencil: the center of an (n+2) x (m+2) grid by row tiles, read through the north,
    // south, east and west views; rows that do not divide evenly.
    let (n, m) = (3 * ranks + 2, 6);
    let root = vec![n + 2, m + 2];
    let grid = ViewMap::whole(&root);
    let rows = tiling(&[n.div_ceil(ranks), m], &[0, 0], &[Some(0), None]);
    let center = RootPartition::fold(&rows, &grid.slice(&[1, 1], &[n + 1, m + 1]).map_err(e)?);
    for (name, r, c) in [
        ("north", 0, 1),
        ("south", 2, 1),
        ("east", 1, 2),
        ("west", 1, 0),
    ] {
        let view = grid.slice(&[r, c], &[r + n, c + m]).map_err(e)?;
        out.push(Case {
            name,
            root: root.clone(),
            writes: vec![(center.clone(), vec![ranks])],
            read: (RootPartition::fold(&rows, &view), vec![ranks]),
        });
    }
    // 2-D tiles written, then read through shifted 2-D tiles over another launch.
    let root2 = vec![7, 9];
    let g2 = ViewMap::whole(&root2);
    let w2 = RootPartition::fold(&tiling(&[3, 4], &[0, 0], &[Some(0), Some(1)]), &g2);
    let r2 = RootPartition::fold(&tiling(&[2, 5], &[-1, 1], &[Some(0), Some(1)]), &g2);
    out.push(Case {
        name: "tiles2d",
        root: root2,
        writes: vec![(w2, vec![3, 3])],
        read: (r2, vec![4, 2]),
    });
    // A vector by row tiles, read whole by every point (a broadcast), after a second write.
    let nv = 5 * ranks + 3;
    let rootv = vec![nv];
    let v = ViewMap::whole(&rootv);
    let tiles = RootPartition::fold(&tiling(&[nv.div_ceil(ranks)], &[0], &[Some(0)]), &v);
    let halves = RootPartition::fold(&tiling(&[nv.div_ceil(2)], &[0], &[Some(0)]), &v);
    out.push(Case {
        name: "broadcast",
        root: rootv,
        writes: vec![(tiles, vec![ranks]), (halves, vec![2])],
        read: (RootPartition::fold(&Partition::None, &v), vec![ranks]),
    });
    Ok(out)
}

fn run(comm: &dyn Comm, fault_on: Option<usize>) -> Result<u64, String> {
    let (rank, ranks) = (comm.rank(), comm.size());
    if fault_on == Some(rank) {
        return Err("a kernel fault, on purpose".into());
    }
    let mapping = BlockMapping { ranks };
    let mut sent = 0;
    for case in cases(ranks as u64)? {
        let total: u64 = case.root.iter().product();
        let mut holding = Holding::replicated();
        let mut data: Vec<f64> = (0..total).map(|e| value(e, 0)).collect();
        for (w, (part, launch)) in case.writes.iter().enumerate() {
            let layer = Layer::new(part, launch, &case.root).map_err(|e| e.to_string())?;
            // This rank writes the tiles of its points: the values of write `w + 1`.
            for p in mapping.points_of(rank, launch) {
                let t = layer.tile(&p);
                for i in points(&t.extent) {
                    let c: Vec<u64> = i.iter().zip(&t.origin).map(|(a, b)| a + b).collect();
                    let at = c
                        .iter()
                        .zip(weft_runtime::view::row_major_strides(&case.root))
                        .map(|(&a, s)| a * s as u64)
                        .sum::<u64>();
                    data[at as usize] = value(at, w as u64 + 1);
                }
            }
            holding.write(layer, &case.root);
        }
        let (part, launch) = &case.read;
        let read = Read {
            partition: part,
            launch,
            root: &case.root,
            holding: &holding,
        };
        let plan = exchange(read, rank, &mapping).map_err(|e| e.to_string())?;
        let mut bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        sent += run_exchange(
            comm,
            &plan,
            &mut Local {
                bytes: &mut Slice(&mut bytes),
                root: &case.root,
                element: 8,
            },
        )
        .map_err(|e| e.to_string())?;
        // Every element this rank's points read holds its last writer's value.
        for p in mapping.points_of(rank, launch) {
            let sub = part.sub_rect(&p);
            for i in points(&sub.extent) {
                let idx: Vec<u64> = i.iter().zip(&sub.origin).map(|(a, b)| a + b).collect();
                let at = part.view.element(&idx);
                let coords = coords(at, &case.root);
                let writer = case
                    .writes
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(w, (wp, wl))| {
                        let layer = Layer::new(wp, wl, &case.root).ok()?;
                        points(wl)
                            .any(|q| contains(&layer.tile(&q), &coords))
                            .then_some(w as u64 + 1)
                    })
                    .unwrap_or(0);
                let off = at as usize * 8;
                let got =
                    f64::from_le_bytes(bytes[off..off + 8].try_into().map_err(|_| "short buffer")?);
                if got != value(at, writer) {
                    return Err(format!(
                        "{}: element {at} holds {got}, not write {writer}'s value",
                        case.name
                    ));
                }
            }
        }
    }
    Ok(sent)
}

/// How rank R's part of a job stops, in the job modes.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// Told to stop, as after a failed task.
    Told,
    /// Its job cancelled.
    Cancelled,
    /// Told to stop, and every other rank told to stop too, once rank R's notice has
    /// reached it: the notice is what it reports.
    Both,
}

/// The job modes: the cases on a job's own communicator, where rank `on` stops.
fn run_job(world: &MpiComm, on: usize, how: Stop) -> Result<(), String> {
    let cancel = std::sync::Arc::new(weft_runtime::CancelToken::new());
    let job = world
        .for_job(JobStop {
            cancel: cancel.clone(),
            deadline: None,
        })
        .map_err(|e| e.to_string())?;
    let rank = job.rank();
    let ran = if rank == on && how != Stop::Cancelled {
        job.stop("a fault, on purpose");
        if how == Stop::Both {
            world.all_gather(&[]).map_err(|e| e.to_string())?;
        }
        Err("a fault, on purpose".to_string())
    } else if how == Stop::Both {
        // Rank R told before its part of this all-gather, so the notice has arrived, unread
        // (Open MPI delivers one sender's messages in order, across communicators too).
        world.all_gather(&[]).map_err(|e| e.to_string())?;
        if !job.stop("a fault of its own") {
            return Err("a job's ranks could not be told".into());
        }
        Err(job.stopped().unwrap_or_default())
    } else {
        if rank == on {
            cancel.cancel();
        }
        run(job.as_ref(), None).map(|_| ())
    };
    let outcome = match &ran {
        Ok(()) => String::new(),
        Err(e) => e.clone(),
    };
    let all = job.finish(&outcome).map_err(|e| e.to_string())?;
    drop(job);
    // Every rank is back in step on the world.
    let ranks = world.all_gather(&[1]).map_err(|e| e.to_string())?;
    if rank == 0 {
        let outcomes: Vec<serde_json::Value> = all.into_iter().map(Into::into).collect();
        println!(
            "{}",
            serde_json::json!({
                "example": "dist_check",
                "ranks": ranks.len(),
                "outcomes": outcomes,
            })
        );
    }
    Ok(())
}

fn main() {
    let Some(comm) = MpiComm::init() else {
        eprintln!("dist_check: MPI was initialized already");
        std::process::exit(2);
    };
    let mut fault_on = None;
    let mut job = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--fault-on-rank", Some(r)) => fault_on = Some(r),
            ("--stop-on-rank", Some(r)) => job = Some((r, Stop::Told)),
            ("--cancel-on-rank", Some(r)) => job = Some((r, Stop::Cancelled)),
            ("--stop-on-every-rank-after", Some(r)) => job = Some((r, Stop::Both)),
            _ => {
                eprintln!(
                    "dist_check: usage: dist_check [--fault-on-rank R | --stop-on-rank R | \
                     --cancel-on-rank R | --stop-on-every-rank-after R]"
                );
                comm.abort(2);
            }
        }
    }
    if let Some((on, how)) = job {
        if let Err(e) = run_job(&comm, on, how) {
            eprintln!("dist_check: rank {}: {e}", comm.rank());
            comm.abort(3);
        }
        return;
    }
    match run(&comm, fault_on) {
        Ok(sent) => {
            let all = comm.all_gather(&sent.to_le_bytes()).unwrap_or_default();
            if comm.rank() == 0 {
                let total: u64 = all
                    .iter()
                    .filter_map(|b| b.as_slice().try_into().ok())
                    .map(u64::from_le_bytes)
                    .sum();
                println!(
                    "{{\"example\":\"dist_check\",\"ranks\":{},\"bytes_sent\":{total}}}",
                    comm.size()
                );
            }
        }
        Err(e) => {
            // One write, so that `mpirun`'s own messages cannot cut the line.
            let line = format!(
                "dist_check: rank {} of {} failed: {e}\n",
                comm.rank(),
                comm.size()
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            comm.abort(3);
        }
    }
}
