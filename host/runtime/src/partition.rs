//! Partitions of stores over launch domains, and rectangles.
//!
//! A partition is stated on a store (a view); the runtime folds the view's map onto its root
//! storage into it, so that every partition it keeps is a partition of *root storage*
//! ([`RootPartition`]). Two views of one root with the same tiles are then different
//! partitions of the same root, and equality is a comparison of a few small vectors: constant
//! time in the size of the launch domain.
//!
//! An *image* partition (sparse matrices' column indices and values, tiled by rows) is named by
//! its source store and the source's partition, never by the ranges it yields: equality stays
//! a constant-time comparison, and the ranges are read from the source's data only when a
//! point task runs ([`RootPartition::sub_rect_with`]).

use crate::Dims;
use crate::stores::StorageId;
use crate::view::ViewMap;

/// A rectangle `origin .. origin + extent` in some store's coordinates.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Rect {
    /// First index per dimension.
    pub origin: Dims<u64>,
    /// Extent per dimension.
    pub extent: Dims<u64>,
}

// Cloned by copying (a derived clone of a `Dims` pushes element by element): every task
// clones its partitions.
impl Clone for Rect {
    fn clone(&self) -> Rect {
        Rect {
            origin: Dims::from_slice(&self.origin),
            extent: Dims::from_slice(&self.extent),
        }
    }
}

impl Rect {
    /// The rectangle `0..shape`.
    pub fn whole(shape: &[u64]) -> Rect {
        Rect {
            origin: smallvec::smallvec![0; shape.len()],
            extent: Dims::from_slice(shape),
        }
    }

    /// Number of elements: 0 when an extent is 0, saturating at `u64::MAX` (never for the
    /// rectangles of a view, which hold at most `MAX_VIEW_ELEMENTS`).
    pub fn volume(&self) -> u64 {
        crate::view::checked_volume(&self.extent).unwrap_or(u64::MAX)
    }
}

/// A tiling as a plugin states it on a store: point `p` sees the rectangle starting at
/// `offset[d] + tile[d] * p[projection[d]]` with extent `tile[d]`, clipped to the store
/// (along a [`Skew`]'s dimension, its tile index in place of `p[projection[d]]`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Tiling {
    /// Tile extent per store dimension.
    pub tile: Dims<u64>,
    /// Offset of tile 0 per store dimension.
    pub offset: Dims<i64>,
    /// Which launch dimension moves the tile along each store dimension (none: it does not).
    pub projection: Dims<Option<u32>>,
    /// A modular skew of one dimension's tile index (only the host makes them, for Cannon's
    /// shifts: `weft_runtime::products`); plugins' tilings have none.
    pub skew: Option<Skew>,
}

/// A tiling's skew along store dimension `dim`: point `p` sees tile
/// `(p[projection[dim]] + p[plus] + shift) mod modulus` along it (`p[projection[dim]]` read as
/// 0 where `dim` has no projection). Step `s` of Cannon's algorithm on a `q x q` grid gives
/// point `(i, j)` the `k` block `(i + j + s) mod q` this way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Skew {
    /// The store dimension whose tile index is skewed.
    pub dim: u32,
    /// The launch dimension added to the projected one.
    pub plus: u32,
    /// Added to both before the modulus.
    pub shift: u64,
    /// The tile index's modulus (at least 1).
    pub modulus: u64,
}

impl Tiling {
    /// The tile index point `point` sees along store dimension `d`: its coordinate along the
    /// projected launch dimension (0 for none, or for a launch dimension the point lacks),
    /// skewed where [`Tiling::skew`] says.
    pub fn tile_index(&self, d: usize, point: &[u64]) -> u64 {
        let coordinate = |k: Option<u32>| k.and_then(|k| point.get(k as usize)).copied();
        let step = coordinate(self.projection.get(d).copied().flatten()).unwrap_or(0);
        match self.skew {
            Some(s) if s.dim as usize == d && s.modulus > 0 => {
                let plus = coordinate(Some(s.plus)).unwrap_or(0);
                let sum = u128::from(step) + u128::from(plus) + u128::from(s.shift);
                (sum % u128::from(s.modulus)) as u64
            }
            _ => step,
        }
    }
}

impl Clone for Tiling {
    fn clone(&self) -> Tiling {
        Tiling {
            tile: Dims::from_slice(&self.tile),
            offset: Dims::from_slice(&self.offset),
            projection: Dims::from_slice(&self.projection),
            skew: self.skew,
        }
    }
}

/// How a task argument is split across the points of its launch, on the store it names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Partition {
    /// Every point sees the whole store.
    None,
    /// Each point sees one tile.
    Tiling(Tiling),
    /// For a rank-1 store: the image of the task argument with this index (an `(n, 2)` store
    /// of sorted, disjoint index ranges) through that argument's own partition.
    Image(u32),
}

impl Partition {
    /// Checks the partition against a store's rank and a launch's rank.
    pub fn check(&self, store_rank: usize, launch_rank: usize) -> Result<(), String> {
        let t = match self {
            Partition::None => return Ok(()),
            Partition::Image(_) if store_rank == 1 => return Ok(()),
            Partition::Image(_) => {
                return Err(format!(
                    "an image partition needs a store of rank 1, not {store_rank}"
                ));
            }
            Partition::Tiling(t) => t,
        };
        if t.tile.len() != store_rank
            || t.offset.len() != store_rank
            || t.projection.len() != store_rank
        {
            return Err(format!(
                "tiling has {} tile, {} offset and {} projection entries for a store of rank {store_rank}",
                t.tile.len(),
                t.offset.len(),
                t.projection.len()
            ));
        }
        if let Some(d) = t
            .projection
            .iter()
            .flatten()
            .find(|&&d| d as usize >= launch_rank)
        {
            return Err(format!(
                "tiling projects launch dimension {d}, but the launch has rank {launch_rank}"
            ));
        }
        if let Some(s) = t.skew
            && (s.dim as usize >= store_rank || s.plus as usize >= launch_rank || s.modulus == 0)
        {
            return Err(format!(
                "tiling's skew of store dimension {} by launch dimension {} modulo {} does not \
                 fit a store of rank {store_rank} and a launch of rank {launch_rank}",
                s.dim, s.plus, s.modulus
            ));
        }
        Ok(())
    }
}

/// A partition folded onto root storage: what fusion compares.
///
/// It is the view's map onto its root ([`ViewMap`]) together with the tiling of the view's
/// index space (tiles are clipped to the view). Two arguments see the same elements of a root
/// at every point, at the same indices, when their folded partitions are equal; the test is a
/// comparison of a few rank-sized vectors, whatever the view (a slice with steps, a
/// transpose, a broadcast, a reshape).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RootPartition {
    /// The view's map onto its root storage.
    pub view: ViewMap,
    /// The tiling, in the view's coordinates; `None` when every point sees the whole view
    /// (or, for an image, the part of it that the image gives).
    pub tiling: Option<Tiling>,
    /// For an image partition: where its ranges come from.
    pub image: Option<Box<Image>>,
}

/// The source of an image partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Image {
    /// The root storage of the `(n, 2)` store of ranges.
    pub source: StorageId,
    /// The source's partition (its view included): point `p` takes the ranges of the source
    /// rows it sees.
    pub source_partition: RootPartition,
}

impl RootPartition {
    /// The partition of a 0-d store that every point sees whole.
    pub fn scalar() -> RootPartition {
        RootPartition {
            view: ViewMap::whole(&[]),
            tiling: None,
            image: None,
        }
    }

    /// Folds a partition of a view with map `view`. A tiling that gives every point the whole
    /// view (no dimension moves, one tile covers it) becomes `None`, so that equal partitions
    /// compare equal however they were written.
    pub fn fold(partition: &Partition, view: &ViewMap) -> RootPartition {
        let whole = |t: &Tiling| {
            t.projection.iter().all(Option::is_none)
                && t.skew.is_none()
                && t.offset.iter().all(|&o| o == 0)
                && t.tile.iter().zip(&view.shape).all(|(&tile, &e)| tile >= e)
        };
        let tiling = match partition {
            Partition::None | Partition::Image(_) => None,
            Partition::Tiling(t) if whole(t) => None,
            Partition::Tiling(t) => Some(t.clone()),
        };
        RootPartition {
            view: view.clone(),
            tiling,
            image: None,
        }
    }

    /// The rank of the view.
    pub fn rank(&self) -> usize {
        self.view.rank()
    }

    /// Drops a tiling that gives the one point of a one-point launch the whole view: it is
    /// then the same partition as `None`, and compares equal to it (so that a task that tiles
    /// a vector over one point fuses with one that reads the vector whole).
    pub fn normalize_for(&mut self, launch: &[u64]) {
        if self.tiling.is_none() || crate::limits::launch_points(launch) != Some(1) {
            return;
        }
        // The one point is the origin of the launch: an empty `point` reads as zeros.
        let whole = self.tiling.as_ref().is_some_and(|t| {
            (0..self.view.rank()).all(|d| self.tile_range(t, d, &[]) == (0, self.view.shape[d]))
        });
        if whole {
            self.tiling = None;
        }
    }

    /// The image partition of a rank-1 view with map `view`, with ranges from `source` (its
    /// root storage) seen through `source_partition`.
    pub fn image(view: &ViewMap, source: StorageId, source_partition: RootPartition) -> Self {
        RootPartition {
            view: view.clone(),
            tiling: None,
            image: Some(Box::new(Image {
                source,
                source_partition,
            })),
        }
    }

    /// The rectangle, in the view's coordinates, that point `point` of the launch sees. For
    /// an image, `read(e)` reads storage element `e` of the source: the point sees
    /// `source[first, 0] .. source[last, 1]` of the view, for the first and the last source
    /// row it sees (nothing if it sees none), clipped to the view. `read` returning `None`
    /// (an element that cannot be read) gives an empty range.
    pub fn sub_rect_with(&self, point: &[u64], mut read: impl FnMut(u64) -> Option<i64>) -> Rect {
        let Some(image) = &self.image else {
            return self.sub_rect(point);
        };
        let extent = self.view.shape.first().copied().unwrap_or(0);
        let source = &image.source_partition;
        let rows = source.sub_rect(point);
        let (Some(&r0), Some(&n), Some(&c0)) =
            (rows.origin.first(), rows.extent.first(), rows.origin.get(1))
        else {
            return Rect {
                origin: smallvec::smallvec![0],
                extent: smallvec::smallvec![0],
            };
        };
        let range = if n == 0 {
            None
        } else {
            read(source.view.element(&[r0, c0]))
                .zip(read(source.view.element(&[r0 + n - 1, c0 + 1])))
        };
        let (lo, hi) = match range {
            Some((lo, hi)) => {
                let lo = lo.clamp(0, extent as i64) as u64;
                (lo, (hi.max(0) as u64).clamp(lo, extent))
            }
            None => (0, 0),
        };
        Rect {
            origin: smallvec::smallvec![lo],
            extent: smallvec::smallvec![hi - lo],
        }
    }

    /// The rectangle, in the view's coordinates, that point `point` of the launch sees; for an
    /// image partition, the whole view (a superset: [`Self::sub_rect_with`] gives the exact
    /// one).
    pub fn sub_rect(&self, point: &[u64]) -> Rect {
        let Some(t) = &self.tiling else {
            return Rect::whole(&self.view.shape);
        };
        let rank = self.view.rank();
        let mut origin = Dims::with_capacity(rank);
        let mut extent = Dims::with_capacity(rank);
        for d in 0..rank {
            let (lo, n) = self.tile_range(t, d, point);
            origin.push(lo);
            extent.push(n);
        }
        Rect { origin, extent }
    }

    /// The first index and the extent along dimension `d` of the tile of `t` that point
    /// `point` sees, clipped to the view.
    fn tile_range(&self, t: &Tiling, d: usize, point: &[u64]) -> (u64, u64) {
        let bound = i128::from(self.view.shape[d]);
        let step = t.tile_index(d, point);
        // Exact, whatever the plugin gave: `tile * step` is below 2^128, and where it
        // passes i128's range the tile starts past any store.
        let tile = i128::from(t.tile[d]);
        let (lo, hi) = match tile
            .checked_mul(i128::from(step))
            .and_then(|s| s.checked_add(i128::from(t.offset[d])))
            .and_then(|start| Some((start, start.checked_add(tile)?)))
        {
            Some((start, end)) => (start.clamp(0, bound), end.clamp(0, bound)),
            None => (bound, bound),
        };
        // Both lie in `0..=shape[d]`, so they fit in u64.
        (lo as u64, (hi - lo) as u64)
    }
}

/// The points of a launch domain `0..extents`, in row-major order: none when an extent is
/// 0, one (the empty point) for no extents. Made one at a time, with no count of them
/// computed, so that it is right for any extents (their product may pass `u64::MAX`).
pub fn points(extents: &[u64]) -> impl Iterator<Item = Vec<u64>> + '_ {
    let mut next = (!extents.contains(&0)).then(|| vec![0u64; extents.len()]);
    std::iter::from_fn(move || {
        let point = next.take()?;
        // The row-major successor, unless `point` is the last.
        let mut succ = point.clone();
        for d in (0..extents.len()).rev() {
            succ[d] += 1;
            if succ[d] < extents[d] {
                next = Some(succ);
                break;
            }
            succ[d] = 0;
        }
        Some(point)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(tile: u64) -> Partition {
        Partition::Tiling(Tiling {
            tile: smallvec::smallvec![tile],
            offset: smallvec::smallvec![0],
            projection: smallvec::smallvec![Some(0)],
            skew: None,
        })
    }

    #[test]
    fn views_fold_into_distinct_root_partitions() {
        // grid is 6x6; center = grid[1:-1, 1:-1], north = grid[0:-2, 1:-1], tiles of 2 rows.
        let tiling = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![2, 4],
            offset: smallvec::smallvec![0, 0],
            projection: smallvec::smallvec![Some(0), None],
            skew: None,
        });
        let grid = ViewMap::whole(&[6, 6]);
        let center = RootPartition::fold(&tiling, &grid.slice(&[1, 1], &[5, 5]).unwrap());
        let north = RootPartition::fold(&tiling, &grid.slice(&[0, 1], &[4, 5]).unwrap());
        assert_ne!(center, north);
        assert_eq!(center.sub_rect(&[1]).origin.as_slice(), &[2, 0]);
        assert_eq!(center.view.element(&[2, 0]), 19);
        assert_eq!(north.view.element(&[2, 0]), 13);
        assert_eq!(north.sub_rect(&[1]).extent.as_slice(), &[2, 4]);
        // A transpose of the same elements is another partition.
        let t = grid.permute(&[1, 0]).unwrap();
        assert_ne!(
            RootPartition::fold(&Partition::None, &t),
            RootPartition::fold(&Partition::None, &grid)
        );
    }

    #[test]
    fn a_tiling_that_gives_every_point_everything_is_none() {
        let scalar = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![],
            offset: smallvec::smallvec![],
            projection: smallvec::smallvec![],
            skew: None,
        });
        assert_eq!(
            RootPartition::fold(&scalar, &ViewMap::whole(&[])),
            RootPartition::scalar()
        );
        assert!(
            RootPartition::fold(&rows(4), &ViewMap::whole(&[4]))
                .tiling
                .is_some()
        );
    }

    #[test]
    fn a_tiling_of_one_point_that_covers_the_view_is_none() {
        let mut p = RootPartition::fold(&rows(10), &ViewMap::whole(&[10]));
        p.normalize_for(&[2]);
        assert!(p.tiling.is_some(), "two points see different tiles");
        p.normalize_for(&[1]);
        assert_eq!(
            p,
            RootPartition::fold(&Partition::None, &ViewMap::whole(&[10]))
        );
        // A tile smaller than the view stays a tiling.
        let mut p = RootPartition::fold(&rows(5), &ViewMap::whole(&[10]));
        p.normalize_for(&[1]);
        assert!(p.tiling.is_some());
    }

    #[test]
    fn tiles_are_clipped_to_the_view() {
        let p = RootPartition::fold(&rows(4), &ViewMap::whole(&[10]));
        assert_eq!(p.sub_rect(&[2]).extent.as_slice(), &[2]);
        assert_eq!(p.sub_rect(&[3]).extent.as_slice(), &[0]);
        // Huge tiles and offsets saturate instead of overflowing.
        let huge = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![u64::MAX],
            offset: smallvec::smallvec![i64::MAX],
            projection: smallvec::smallvec![Some(0)],
            skew: None,
        });
        let p = RootPartition::fold(&huge, &ViewMap::whole(&[10]));
        assert_eq!(p.sub_rect(&[u64::MAX]).extent.as_slice(), &[0]);
    }

    #[test]
    fn an_image_takes_the_ranges_of_the_source_rows_a_point_sees() {
        // Source: 4 rows of ranges [0,2) [2,2) [2,5) [5,6), tiled 2 rows per point; target: a
        // view at root offset 10 of length 6.
        let ranges = [0i64, 2, 2, 2, 2, 5, 5, 6];
        let two_rows = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![2, 2],
            offset: smallvec::smallvec![0, 0],
            projection: smallvec::smallvec![Some(0), None],
            skew: None,
        });
        let source = RootPartition::fold(&two_rows, &ViewMap::whole(&[4, 2]));
        let target = ViewMap::whole(&[16]).slice(&[10], &[16]).unwrap();
        let p = RootPartition::image(&target, StorageId(7), source.clone());
        let read = |e: u64| ranges.get(e as usize).copied();
        assert_eq!(p.sub_rect_with(&[0], read).origin.as_slice(), &[0]);
        assert_eq!(p.sub_rect_with(&[0], read).extent.as_slice(), &[2]);
        assert_eq!(p.sub_rect_with(&[1], read).origin.as_slice(), &[2]);
        assert_eq!(p.sub_rect_with(&[1], read).extent.as_slice(), &[4]);
        // Equal sources and partitions give equal images; another source does not.
        assert_eq!(
            p,
            RootPartition::image(&target, StorageId(7), source.clone())
        );
        assert_ne!(p, RootPartition::image(&target, StorageId(8), source));
        // Ranges past the view are clipped to it.
        let wild = |e: u64| Some(if e.is_multiple_of(2) { -5 } else { 100 });
        assert_eq!(p.sub_rect_with(&[0], wild).extent.as_slice(), &[6]);
    }

    #[test]
    fn a_skew_moves_one_dimensions_tile_modulo_its_count() {
        // Cannon's step 1 on a 3x3 grid: point (i, j) sees column tile (i + j + 1) mod 3.
        let skewed = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![2, 4],
            offset: smallvec::smallvec![0, 0],
            projection: smallvec::smallvec![Some(0), Some(0)],
            skew: Some(Skew {
                dim: 1,
                plus: 1,
                shift: 1,
                modulus: 3,
            }),
        });
        let p = RootPartition::fold(&skewed, &ViewMap::whole(&[6, 12]));
        assert_eq!(p.sub_rect(&[0, 0]).origin.as_slice(), &[0, 4]);
        assert_eq!(p.sub_rect(&[1, 1]).origin.as_slice(), &[2, 0]);
        assert_eq!(p.sub_rect(&[2, 2]).origin.as_slice(), &[4, 8]);
        // It is another partition than the unskewed tiling, and never the whole view.
        let Partition::Tiling(t) = &skewed else {
            unreachable!()
        };
        let plain = Partition::Tiling(Tiling {
            skew: None,
            ..t.clone()
        });
        assert_ne!(p, RootPartition::fold(&plain, &ViewMap::whole(&[6, 12])));
        let wide = Partition::Tiling(Tiling {
            tile: smallvec::smallvec![6, 12],
            projection: smallvec::smallvec![None, None],
            ..t.clone()
        });
        assert!(
            RootPartition::fold(&wide, &ViewMap::whole(&[6, 12]))
                .tiling
                .is_some()
        );
        // A skew that names a dimension past the store or the launch is refused.
        assert!(skewed.check(2, 2).is_ok());
        assert!(skewed.check(2, 1).is_err());
        let Partition::Tiling(mut bad) = skewed.clone() else {
            unreachable!()
        };
        bad.skew = bad.skew.map(|s| Skew { modulus: 0, ..s });
        assert!(Partition::Tiling(bad).check(2, 2).is_err());
    }

    #[test]
    fn points_are_row_major() {
        let all: Vec<_> = points(&[2, 3]).collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[4], vec![1, 1]);
        assert_eq!(points(&[]).count(), 1);
    }

    #[test]
    fn points_and_volumes_are_right_past_u64() {
        // The old count of points wrapped (to 0 here) or overflowed.
        let huge = [1u64 << 32, 1 << 32];
        let first: Vec<_> = points(&huge).take(2).collect();
        assert_eq!(first, vec![vec![0, 0], vec![0, 1]]);
        assert_eq!(points(&[1 << 63, 1 << 63, 0]).count(), 0);
        let r = Rect {
            origin: smallvec::smallvec![0; 3],
            extent: smallvec::smallvec![1 << 63, 1 << 63, 0],
        };
        assert_eq!(r.volume(), 0);
        let r = Rect {
            origin: smallvec::smallvec![0; 2],
            extent: Dims::from_slice(&huge),
        };
        assert_eq!(r.volume(), u64::MAX);
    }
}
