//! The messages a task needs, derived the same way on every rank from the partitions alone.
//!
//! Before a task runs, the rank that owns point `p` needs, for each argument the task reads,
//! the latest values of the root box that `p` reads. The parts another rank holds
//! ([`Holding::holders`]) come in messages. A receiver finds its messages from its own points
//! and the tiles that meet their boxes; a sender finds the same messages from its own tiles
//! and the reader points whose boxes meet them (for a tiling in closed form, so the work does
//! not grow with the points of other ranks), and runs the receiver's computation for each such
//! point: both sides derive every message by the same function, so they agree exactly.

use std::collections::BTreeMap;

use weft_runtime::mapping::Mapping;
use weft_runtime::{Rect, RootPartition};

use crate::Error;
use crate::boxes::{intersect, subtract_all};
use crate::holding::{Holding, Layer};

/// The part of an exchange between two ranks: the boxes of one root that `from` sends `to`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transfer {
    /// Disjoint root boxes, in the order both sides list them.
    pub boxes: Vec<Rect>,
}

impl Transfer {
    /// Elements carried.
    pub fn elements(&self) -> u64 {
        self.boxes.iter().map(Rect::volume).sum()
    }
}

/// One rank's messages for one read: what it receives, by sender, and what it sends, by
/// receiver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExchangePlan {
    /// By sending rank.
    pub recvs: BTreeMap<usize, Transfer>,
    /// By receiving rank.
    pub sends: BTreeMap<usize, Transfer>,
}

impl ExchangePlan {
    /// Elements this rank receives and sends, in all.
    pub fn elements(&self) -> (u64, u64) {
        let sum = |m: &BTreeMap<usize, Transfer>| m.values().map(Transfer::elements).sum();
        (sum(&self.recvs), sum(&self.sends))
    }

    /// Messages this rank receives and sends (one per peer and direction).
    pub fn messages(&self) -> (usize, usize) {
        (self.recvs.len(), self.sends.len())
    }
}

/// A read of a store by a task: its partition and launch, and where the store's latest values
/// are.
#[derive(Clone, Copy, Debug)]
pub struct Read<'a> {
    /// The read partition, folded onto the root.
    pub partition: &'a RootPartition,
    /// The task's launch domain.
    pub launch: &'a [u64],
    /// The root's shape.
    pub root: &'a [u64],
    /// Where the latest values are.
    pub holding: &'a Holding,
}

/// The messages of `read` that concern `rank`, under `mapping`.
pub fn exchange(read: Read<'_>, rank: usize, mapping: &dyn Mapping) -> Result<ExchangePlan, Error> {
    let reader = Layer::new(read.partition, read.launch, read.root)?;
    exchange_with(read, reader, rank, mapping)
}

/// [`exchange`] for a read whose points' root boxes are given (`reader`, a
/// [`Layer::given`]): an image partition's ranges, read from its source.
pub fn exchange_with(
    read: Read<'_>,
    reader: Layer,
    rank: usize,
    mapping: &dyn Mapping,
) -> Result<ExchangePlan, Error> {
    let reader = ReaderShape { layer: reader };
    let mut plan = ExchangePlan::default();
    // Receives: this rank's own points.
    for p in mapping.points_of(rank, read.launch) {
        for (from, b) in needs_of(read, &reader, &p, rank, mapping) {
            add(&mut plan.recvs, from, b);
        }
    }
    // Sends: the reader points that meet this rank's tiles, once each, in order.
    let mut candidates: Vec<Vec<u64>> = Vec::new();
    for layer in &read.holding.layers {
        for q in mapping.points_of(rank, &layer.launch) {
            for tile in layer.tiles(&q) {
                candidates.extend(reader.points_meeting(&tile));
            }
        }
    }
    candidates.sort();
    candidates.dedup();
    for p in candidates {
        let to = mapping.owner(&p, read.launch);
        if to == rank {
            continue;
        }
        for (from, b) in needs_of(read, &reader, &p, to, mapping) {
            if from == rank {
                add(&mut plan.sends, to, b);
            }
        }
    }
    Ok(plan)
}

/// Adds box `b` to the transfer with `peer`, minus what it already carries.
fn add(map: &mut BTreeMap<usize, Transfer>, peer: usize, b: Rect) {
    let t = map.entry(peer).or_default();
    let mut fresh = vec![b];
    for have in &t.boxes {
        fresh = subtract_all(&fresh, have);
    }
    t.boxes.extend(fresh);
}

/// What point `p`, run by `rank`, reads from other ranks: `(holder, box)`.
fn needs_of(
    read: Read<'_>,
    reader: &ReaderShape,
    p: &[u64],
    rank: usize,
    mapping: &dyn Mapping,
) -> Vec<(usize, Rect)> {
    let mut out = Vec::new();
    for b in reader.layer.tiles(p) {
        out.extend(
            read.holding
                .holders(&b, mapping)
                .into_iter()
                .filter(|(holder, _)| *holder != rank),
        );
    }
    out
}

/// A read partition seen as the tiles of a layer (the same closed forms).
struct ReaderShape {
    layer: Layer,
}

impl ReaderShape {
    fn points_meeting(&self, b: &Rect) -> Vec<Vec<u64>> {
        self.layer
            .points_meeting(b)
            .into_iter()
            .filter(|p| {
                self.layer
                    .tiles(p)
                    .iter()
                    .any(|t| intersect(t, b).is_some())
            })
            .collect()
    }
}
