//! Temporary stores (Definition 4 of the Diffuse paper).
//!
//! A store `S` is temporary in the fusion of a prefix `T_1..T_f` of a window when
//! 1. every read of `S` in the prefix, through a partition `P`, follows a write of `S` through
//!    the same `P` that covers all of `S` (so the prefix produces every value it reads);
//! 2. no pending task after the prefix reads or reduces `S`;
//! 3. nobody holds a handle to `S` (nor to any view of it): neither the application nor a
//!    plugin can name it again.
//!
//! A temporary becomes task-local: the executor gives each point a scratch buffer the size of
//! its tile, and the kernel passes usually make even that disappear. Its storage is never
//! allocated.

use weft_ir::Privilege;

use weft_runtime::partition::RootPartition;
use weft_runtime::stores::StorageId;
use weft_runtime::task::{IndexTask, TaskArg};

/// Whether partition `p` of a launch over `launch` covers every element of a root of `shape`.
/// An image never does as far as this analysis knows (its ranges are data).
pub fn covers(p: &RootPartition, shape: &[u64], launch: &[u64]) -> bool {
    if !p.view.is_whole(shape) || p.image.is_some() {
        return false;
    }
    let Some(t) = &p.tiling else {
        return true;
    };
    // A skewed tiling (Cannon's steps) is not claimed to cover.
    if t.skew.is_some() {
        return false;
    }
    (0..shape.len()).all(|d| {
        let reach = match t.projection[d] {
            Some(k) => launch
                .get(k as usize)
                .map_or(0, |&n| t.tile[d].saturating_mul(n)),
            None => t.tile[d],
        };
        t.offset[d] <= 0 && (t.offset[d] as i128 + reach as i128) >= shape[d] as i128
    })
}

/// The storages that are temporary in the fusion of `inside`, given which storages have live
/// handles, which are read by a pending task after `inside`, and their root shapes. The answer
/// is sorted by storage id.
pub fn temporaries<'s>(
    inside: &[IndexTask],
    live: impl Fn(StorageId) -> bool,
    read_after: impl Fn(StorageId) -> bool,
    shape: impl Fn(StorageId) -> Option<&'s [u64]>,
) -> Vec<StorageId> {
    // Candidates: written inside the prefix, not live.
    let mut candidates: Vec<StorageId> = inside
        .iter()
        .flat_map(|t| t.args.iter())
        .filter(|a| a.privilege.mutates() && !live(a.storage))
        .map(|a| a.storage)
        .collect();
    candidates.sort();
    candidates.dedup();
    // Each candidate's arguments, by task in order: one pass over the prefix, so the check
    // costs what the prefix's arguments do, not that times the candidates.
    let mut uses: weft_runtime::FastMap<StorageId, Vec<(usize, &TaskArg)>> =
        weft_runtime::FastMap::default();
    for (t, task) in inside.iter().enumerate() {
        for a in &task.args {
            if candidates.binary_search(&a.storage).is_ok() {
                uses.entry(a.storage).or_default().push((t, a));
            }
        }
    }
    candidates.retain(|&s| {
        let Some(shape) = shape(s) else {
            return false;
        };
        let args = uses.get(&s).map_or(&[][..], Vec::as_slice);
        !read_after(s) && produced_inside(inside, args, shape)
    });
    candidates
}

/// Whether every read in `uses` (one storage's arguments in `tasks`, by task index in order)
/// follows a covering write through the same partition.
fn produced_inside(tasks: &[IndexTask], uses: &[(usize, &TaskArg)], shape: &[u64]) -> bool {
    let mut covered: Vec<&RootPartition> = Vec::new();
    let mut rest = uses;
    while let Some(&(t, _)) = rest.first() {
        let end = rest.iter().position(|&(u, _)| u != t).unwrap_or(rest.len());
        let (now, later) = rest.split_at(end);
        rest = later;
        let task = &tasks[t];
        let args = now.iter().map(|&(_, a)| a);
        // Reads of this task see only writes of earlier tasks.
        for a in args.clone() {
            let reads = matches!(
                a.privilege,
                Privilege::Read | Privilege::ReadWrite | Privilege::Reduce(_)
            );
            if reads && !covered.contains(&&a.root_partition) {
                return false;
            }
        }
        for a in args {
            let full_write = matches!(a.privilege, Privilege::Write | Privilege::ReadWrite);
            if full_write && covers(&a.root_partition, shape, &task.launch) {
                covered.push(&a.root_partition);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_runtime::partition::Tiling;
    use weft_runtime::view::ViewMap;

    fn tiled(shape: &[u64], tile: u64, offset: i64) -> RootPartition {
        RootPartition {
            view: ViewMap::whole(shape),
            tiling: Some(Tiling {
                tile: weft_runtime::smallvec::smallvec![tile],
                offset: weft_runtime::smallvec::smallvec![offset],
                projection: weft_runtime::smallvec::smallvec![Some(0)],
                skew: None,
            }),
            image: None,
        }
    }

    #[test]
    fn covering_needs_the_whole_root_and_enough_tiles() {
        assert!(covers(&tiled(&[10], 4, 0), &[10], &[3]));
        assert!(!covers(&tiled(&[10], 4, 0), &[10], &[2]));
        assert!(!covers(&tiled(&[10], 4, 1), &[10], &[3]));
        let view = RootPartition {
            view: ViewMap::whole(&[10]).slice(&[1], &[9]).unwrap(),
            tiling: None,
            image: None,
        };
        assert!(!covers(&view, &[10], &[]));
        assert!(covers(
            &RootPartition {
                view: ViewMap::whole(&[10]),
                tiling: None,
                image: None,
            },
            &[10],
            &[]
        ));
    }
}
