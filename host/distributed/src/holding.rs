//! Who holds the latest value of each element of a store, in closed form.
//!
//! Under control replication every rank sees the same tasks, so every rank can say, for any
//! element, which rank wrote it last: the owner (through the [`Mapping`]) of the point of the
//! last task whose write partition covers it. A [`Holding`] keeps that as layers, one per
//! write partition, newest on top, over a base that every rank holds (a store no task wrote
//! yet: zeros, or data the application wrote on every rank). A write through a partition
//! equal to a layer's moves that layer to the top; one that covers the whole store drops the
//! layers under it, so a loop that writes the same way every iteration keeps a bounded stack.

use weft_runtime::mapping::Mapping;
use weft_runtime::{Rect, RootPartition};

use crate::Error;
use crate::boxes::{BoxView, contains, intersect, subtract_all};

/// One write partition: the tiles of a task's points, each held by its point's owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// The write partition, folded onto the root.
    pub partition: RootPartition,
    /// Its view as a box of the root (`None` for a layer of given boxes whose view is not
    /// one).
    pub view: Option<BoxView>,
    /// The launch domain of the task that wrote it.
    pub launch: Vec<u64>,
    /// Each point's root boxes, in row-major point order, where no tiling gives them (an
    /// image partition's ranges, read from its source when the task ran; the runs of a view
    /// that is not a box of its root).
    pub explicit: Option<Vec<Vec<Rect>>>,
}

impl Layer {
    /// A layer for a task over `launch` writing through `partition` into a root of shape
    /// `root`; views that are not boxes of the root are refused.
    pub fn new(partition: &RootPartition, launch: &[u64], root: &[u64]) -> Result<Layer, Error> {
        if partition.image.is_some() {
            return Err(Error::Unsupported(
                "a write through an image partition".into(),
            ));
        }
        let view = BoxView::of(&partition.view, root).ok_or_else(|| {
            Error::Unsupported(format!(
                "a write through a view that is not a box of its root (shape {:?}, strides {:?})",
                partition.view.shape, partition.view.strides
            ))
        })?;
        Ok(Layer {
            partition: partition.clone(),
            view: Some(view),
            launch: launch.to_vec(),
            explicit: None,
        })
    }

    /// A layer whose points' root boxes are given: `boxes[i]` are the boxes the `i`-th point
    /// (row-major) wrote, disjoint.
    pub fn given(
        partition: &RootPartition,
        launch: &[u64],
        root: &[u64],
        boxes: Vec<Vec<Rect>>,
    ) -> Result<Layer, Error> {
        let points: u64 = launch.iter().product();
        if boxes.len() as u64 != points {
            return Err(Error::Unsupported(format!(
                "boxes for {} points in a launch of {points}",
                boxes.len()
            )));
        }
        Ok(Layer {
            partition: partition.clone(),
            view: BoxView::of(&partition.view, root),
            launch: launch.to_vec(),
            explicit: Some(boxes),
        })
    }

    /// The row-major index of `point` in the launch.
    fn linear(&self, point: &[u64]) -> usize {
        point
            .iter()
            .zip(&self.launch)
            .fold(0u64, |acc, (&p, &e)| acc * e + p) as usize
    }

    /// The points whose tiles may meet root box `b`, in row-major order: along each launch
    /// dimension that moves a tile, only the tile indices whose tiles meet `b` (closed form);
    /// along the others, every index.
    pub fn points_meeting(&self, b: &Rect) -> Vec<Vec<u64>> {
        if self.explicit.is_some() {
            return weft_runtime::partition::points(&self.launch).collect();
        }
        let rank = self.launch.len();
        let mut lo = vec![0u64; rank];
        let mut hi = self.launch.clone();
        if let Some(t) = &self.partition.tiling {
            for (vd, proj) in t.projection.iter().enumerate() {
                let Some(k) = proj.map(|k| k as usize).filter(|&k| k < rank) else {
                    continue;
                };
                // A skewed dimension's tile index mixes two launch dimensions modulo a
                // count: every index along them may meet `b`.
                if t.skew.is_some_and(|s| s.dim as usize == vd) {
                    continue;
                }
                let extent = self.partition.view.shape[vd];
                let Some(view) = &self.view else {
                    break;
                };
                let (a, z) = view.view_interval(vd, b, extent);
                if a >= z || t.tile[vd] == 0 {
                    hi[k] = lo[k];
                    continue;
                }
                let (tile, off) = (t.tile[vd] as i128, i128::from(t.offset[vd]));
                // Tile p covers off + tile*p .. off + tile*(p+1); it meets a..z when
                // off + tile*p < z and off + tile*(p+1) > a.
                let first = (i128::from(a) - off).div_euclid(tile).max(0);
                let last = (i128::from(z) - 1 - off).div_euclid(tile);
                let first = u64::try_from(first).unwrap_or(0);
                let last = u64::try_from(last.max(-1) + 1).unwrap_or(0);
                lo[k] = lo[k].max(first);
                hi[k] = hi[k].min(last);
            }
        }
        let extents: Vec<u64> = lo
            .iter()
            .zip(&hi)
            .map(|(&l, &h)| h.saturating_sub(l))
            .collect();
        weft_runtime::partition::points(&extents)
            .map(|p| p.iter().zip(&lo).map(|(i, l)| i + l).collect())
            .collect()
    }

    /// The root box of point `point`'s tile, for a layer of a tiling (an empty box for one of
    /// given boxes: see [`Layer::tiles`]).
    pub fn tile(&self, point: &[u64]) -> Rect {
        let rank = self
            .partition
            .view
            .rank()
            .max(self.view.as_ref().map_or(0, |v| v.root.len()));
        match (&self.explicit, &self.view) {
            (None, Some(view)) => view.root_box(&self.partition.sub_rect(point)),
            _ => Rect {
                origin: weft_runtime::smallvec::smallvec![0; rank],
                extent: weft_runtime::smallvec::smallvec![0; rank],
            },
        }
    }

    /// The root boxes point `point` wrote: its tile, or the boxes given for it.
    pub fn tiles(&self, point: &[u64]) -> Vec<Rect> {
        match &self.explicit {
            Some(boxes) => boxes.get(self.linear(point)).cloned().unwrap_or_default(),
            None => vec![self.tile(point)],
        }
    }

    /// Whether the tiles cover every element of a root of shape `root` (closed form: the
    /// view is the whole root, and along each of its dimensions the tiles start at or before
    /// 0 and reach its end; never for a skewed tiling, whose answer may be `false` where
    /// they do).
    pub fn covers(&self, root: &[u64]) -> bool {
        if let Some(boxes) = &self.explicit {
            let mut left = vec![Rect::whole(root)];
            for r in boxes.iter().flatten() {
                left = subtract_all(&left, r);
            }
            return left.is_empty();
        }
        let view = &self.partition.view;
        let Some(boxed) = &self.view else {
            return false;
        };
        let whole = boxed.root_box(&Rect::whole(&view.shape)) == Rect::whole(root);
        let Some(t) = &self.partition.tiling else {
            return whole;
        };
        // A skewed tiling's dimensions do not move independently (Cannon's steps write one
        // layer of each tile): it is not claimed to cover.
        if t.skew.is_some() {
            return false;
        }
        whole
            && (0..view.rank()).all(|d| {
                let steps = match t.projection[d] {
                    Some(k) => self.launch.get(k as usize).copied().unwrap_or(0),
                    None => 1,
                };
                let reach = i128::from(t.offset[d]) + i128::from(t.tile[d]) * i128::from(steps);
                t.offset[d] <= 0 && steps > 0 && reach >= i128::from(view.shape[d])
            })
    }
}

/// The layers of a store's holding, newest first, over a base every rank holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    /// The layers, newest first.
    pub layers: Vec<Layer>,
}

impl Holding {
    /// A store every rank holds whole (never written, or written by the application).
    pub fn replicated() -> Holding {
        Holding::default()
    }

    /// Records a write through `layer`: it goes on top; an equal layer below it goes, and
    /// so does every layer under one that covers all of `root`.
    pub fn write(&mut self, layer: Layer, root: &[u64]) {
        // An equal layer (for given tiles, the same tiles) holds nothing the new one does not.
        self.layers.retain(|l| {
            l.partition != layer.partition
                || l.launch != layer.launch
                || l.explicit != layer.explicit
        });
        if layer.covers(root) {
            self.layers.clear();
        }
        self.layers.insert(0, layer);
    }

    /// Who holds the latest value of each part of root box `b`: `(rank, box)` pieces that
    /// cover the written part of `b` exactly once (the rest is in the base, held by every
    /// rank). Only the tiles that meet `b` are visited.
    pub fn holders(&self, b: &Rect, mapping: &dyn Mapping) -> Vec<(usize, Rect)> {
        let mut out = Vec::new();
        let mut left = if b.volume() == 0 {
            Vec::new()
        } else {
            vec![b.clone()]
        };
        for layer in &self.layers {
            if left.is_empty() {
                break;
            }
            for p in layer.points_meeting(b) {
                let owner = mapping.owner(&p, &layer.launch);
                for tile in layer.tiles(&p) {
                    for piece in &left {
                        if let Some(x) = intersect(piece, &tile) {
                            out.push((owner, x));
                        }
                    }
                    left = subtract_all(&left, &tile);
                }
                if left.is_empty() {
                    break;
                }
            }
        }
        out
    }

    /// The rank holding root element `e` (`None`: the base), found by trying every tile:
    /// the brute force the closed form is tested against.
    pub fn holder_of(&self, e: &[u64], mapping: &dyn Mapping) -> Option<usize> {
        for layer in &self.layers {
            for p in weft_runtime::partition::points(&layer.launch) {
                if layer.tiles(&p).iter().any(|t| contains(t, e)) {
                    return Some(mapping.owner(&p, &layer.launch));
                }
            }
        }
        None
    }
}
