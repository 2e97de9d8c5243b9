//! Views as affine maps of their root storage (NumPy's strided layout).
//!
//! Every store is a [`ViewMap`] over the row-major memory of one root storage: element `i` of
//! the view is element `offset + Σ_d strides[d] * i[d]` of the storage. A root store is the
//! identity map of its own shape. Each kind of view is a change of that map, never a copy:
//! - a slice with steps (negative steps included) moves the offset and scales the strides;
//! - a permutation of axes (transpose) permutes shape and strides;
//! - broadcasting (NumPy's rules) gives the new and the size-1 dimensions a stride of 0;
//! - `reshape` (and so `newaxis`, `expand_dims` and `squeeze`) regroups dimensions where the
//!   strides allow it, as NumPy's no-copy reshape does; where they do not, there is no view
//!   and the caller copies.
//!
//! A map is a few rank-sized vectors, so two views compare for equality in constant time in
//! the size of the store. Only broadcasting makes a view whose elements overlap (a stride of 0
//! over more than one index); such a view may be read but never written
//! ([`ViewMap::overlaps_itself`]).
//!
//! Shapes come from plugins, so every size derived from one is checked arithmetic: a view
//! never has more than [`MAX_VIEW_ELEMENTS`] elements (counting only its nonzero extents, as
//! NumPy does, so that no extent and no product of extents is past the bound either) nor
//! more than [`MAX_RANK`] dimensions, and every constructor refuses one that would. The
//! questions asked of a map ([`ViewMap::volume`], [`ViewMap::span`],
//! [`ViewMap::overlaps_itself`], [`ViewMap::is_contiguous`], [`ViewMap::may_overlap`]) give
//! correct (or, for overlap, conservative) answers for any map, even one built by hand past
//! the bounds: nothing in them wraps.

use crate::Dims;
use std::fmt;

use weft_ir::semantics::MAX_RANK;

/// The most elements a view (or a root store) may have: 2^48, past any machine's memory for
/// elements of a byte or more, and far enough from 2^64 that element and byte counts of a
/// view never overflow. Counted over the nonzero extents, so an empty view's other extents
/// are held to it too.
pub const MAX_VIEW_ELEMENTS: u64 = 1 << 48;

/// Why a view cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewError(pub String);

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

type ViewResult<T> = std::result::Result<T, ViewError>;

fn err<T>(message: String) -> ViewResult<T> {
    Err(ViewError(message))
}

/// The map of a view onto its root storage's row-major memory, in elements.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ViewMap {
    /// The storage element of view index 0 (every index 0).
    pub offset: u64,
    /// The view's shape.
    pub shape: Dims<u64>,
    /// The storage distance, in elements, between neighbours along each dimension.
    pub strides: Dims<i64>,
}

// Cloned by copying (a derived clone of a `Dims` pushes element by element): every task
// clones the maps of its arguments.
impl Clone for ViewMap {
    fn clone(&self) -> ViewMap {
        ViewMap {
            offset: self.offset,
            shape: Dims::from_slice(&self.shape),
            strides: Dims::from_slice(&self.strides),
        }
    }
}

/// Row-major strides (in elements) of a shape. A stride past `i64::MAX` (only for shapes
/// past [`MAX_VIEW_ELEMENTS`]) saturates there; no stride is ever negative.
pub fn row_major_strides(shape: &[u64]) -> Dims<i64> {
    let mut strides: Dims<i64> = smallvec::smallvec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        let extent = i64::try_from(shape[d + 1]).unwrap_or(i64::MAX);
        strides[d] = strides[d + 1].saturating_mul(extent);
    }
    strides
}

/// The number of elements of `shape`, exactly: 0 when an extent is 0 (whatever the others),
/// `None` when the product passes `u64::MAX`.
pub fn checked_volume(shape: &[u64]) -> Option<u64> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1u64, |acc, &e| acc.checked_mul(e))
}

/// Checks that a view (or a root) of `shape` stays within the host's bounds: at most
/// [`MAX_RANK`] dimensions and at most [`MAX_VIEW_ELEMENTS`] elements, counting the nonzero
/// extents only (an empty view of absurd extents is refused too, as NumPy refuses it).
pub fn check_shape(shape: &[u64]) -> Result<(), ViewError> {
    if shape.len() > MAX_RANK as usize {
        return err(format!(
            "a view of shape {} has rank {}, more than the maximum {MAX_RANK}",
            shape_text(shape),
            shape.len()
        ));
    }
    let nominal = shape
        .iter()
        .filter(|&&e| e != 0)
        .try_fold(1u64, |acc, &e| acc.checked_mul(e));
    match nominal {
        Some(n) if n <= MAX_VIEW_ELEMENTS => Ok(()),
        n => err(format!(
            "a view of shape {} would have {} elements, more than the bound of {} \
             (2^48, MAX_VIEW_ELEMENTS)",
            shape_text(shape),
            n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
            MAX_VIEW_ELEMENTS
        )),
    }
}

impl ViewMap {
    /// The identity map of a root of this shape.
    pub fn whole(shape: &[u64]) -> ViewMap {
        ViewMap {
            offset: 0,
            shape: Dims::from_slice(shape),
            strides: row_major_strides(shape),
        }
    }

    /// The identity map of a root of this shape, or an error where the shape passes the
    /// host's bounds ([`check_shape`]).
    pub fn checked_whole(shape: &[u64]) -> ViewResult<ViewMap> {
        check_shape(shape)?;
        Ok(ViewMap::whole(shape))
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements, exactly, or `None` where it passes `u64::MAX` (only for a map
    /// built by hand: constructors hold views to [`MAX_VIEW_ELEMENTS`]).
    pub fn checked_volume(&self) -> Option<u64> {
        checked_volume(&self.shape)
    }

    /// Number of elements, saturating at `u64::MAX`: never 0 or 1 for a view of more
    /// elements, whatever their number.
    pub fn volume(&self) -> u64 {
        self.checked_volume().unwrap_or(u64::MAX)
    }

    /// Checks that the map is well formed and within the host's bounds (see [`check_shape`]):
    /// as many strides as extents.
    fn check(self) -> ViewResult<ViewMap> {
        if self.strides.len() != self.shape.len() {
            return err(format!(
                "a view of shape {} has {} strides",
                shape_text(&self.shape),
                self.strides.len()
            ));
        }
        check_shape(&self.shape)?;
        Ok(self)
    }

    /// Refuses to derive a view from a malformed map (strides and extents of different
    /// lengths), which only a map built by hand can be.
    fn check_parent(&self) -> ViewResult<()> {
        if self.strides.len() != self.shape.len() {
            return err(format!(
                "cannot make a view of a map of shape {} with {} strides",
                shape_text(&self.shape),
                self.strides.len()
            ));
        }
        Ok(())
    }

    /// Whether this is the identity map of a root of shape `root`: every element of the root,
    /// once, in row-major order.
    pub fn is_whole(&self, root: &[u64]) -> bool {
        self.shape.as_slice() == root && self.offset == 0 && self.strides == row_major_strides(root)
    }

    /// Whether two different indices of the view reach the same element (a broadcast view).
    /// A map whose strides and extents differ in number counts as overlapping (no write
    /// goes through it).
    pub fn overlaps_itself(&self) -> bool {
        // An empty view has no elements to repeat; the volume saturates, so a view of more
        // than one element never counts as one.
        self.volume() > 1
            && (self.strides.len() != self.shape.len()
                || self
                    .shape
                    .iter()
                    .zip(&self.strides)
                    .any(|(&e, &s)| e > 1 && s == 0))
    }

    /// Whether the view is dense and row-major: its elements are one run of the storage.
    /// Exact for any map: the row-major strides are computed without wrapping, and a
    /// dimension whose row-major stride would pass `i64::MAX` is never dense.
    pub fn is_contiguous(&self) -> bool {
        if self.volume() <= 1 {
            return true;
        }
        if self.strides.len() != self.shape.len() {
            return false;
        }
        // The row-major stride of each dimension, from the last: `None` once past i64.
        let mut expected = Some(1i64);
        for (&e, &s) in self.shape.iter().zip(&self.strides).rev() {
            if e != 1 && expected != Some(s) {
                return false;
            }
            expected = expected.and_then(|x| x.checked_mul(i64::try_from(e).ok()?));
        }
        true
    }

    /// The storage element of view index `index` (which must be inside the shape), in exact
    /// arithmetic, clamped to `0..=u64::MAX` for a map that reaches past either end.
    pub fn element(&self, index: &[u64]) -> u64 {
        let at = index
            .iter()
            .zip(&self.strides)
            .fold(i128::from(self.offset), |acc, (&i, &s)| {
                acc.saturating_add(i128::from(i).saturating_mul(i128::from(s)))
            });
        clamp_u64(at)
    }

    /// The lowest and the highest storage element the view reaches (none when it is empty:
    /// never for a view of one element or more, however many), clamped to `0..=u64::MAX`.
    pub fn span(&self) -> Option<(u64, u64)> {
        if self.volume() == 0 {
            return None;
        }
        let (mut lo, mut hi) = (i128::from(self.offset), i128::from(self.offset));
        for (&e, &s) in self.shape.iter().zip(&self.strides) {
            // `e >= 1` here: the volume is not 0.
            let reach = i128::from(e.saturating_sub(1)).saturating_mul(i128::from(s));
            if reach < 0 {
                lo = lo.saturating_add(reach);
            } else {
                hi = hi.saturating_add(reach);
            }
        }
        Some((clamp_u64(lo), clamp_u64(hi)))
    }

    /// Whether the two views of one root of shape `root` may share an element: false only
    /// when they provably do not. Views whose maps split into one progression per root
    /// dimension (slices with steps, transposes, broadcasts, most reshapes) are compared
    /// dimension by dimension, exactly up to the progressions' ranges and strides; other
    /// views by their spans and the common divisor of their strides.
    pub fn may_overlap(&self, other: &ViewMap, root: &[u64]) -> bool {
        let (Some(a), Some(b)) = (self.span(), other.span()) else {
            return false;
        };
        if a.1 < b.0 || b.1 < a.0 {
            return false;
        }
        let gcd_all = self
            .strides
            .iter()
            .chain(&other.strides)
            .fold(0u64, |g, &s| gcd(g, s.unsigned_abs()));
        let diff = self.offset.abs_diff(other.offset);
        if gcd_all > 1 && !diff.is_multiple_of(gcd_all) {
            return false;
        }
        match (self.per_root_dim(root), other.per_root_dim(root)) {
            (Some(pa), Some(pb)) => pa.iter().zip(&pb).all(|(x, y)| x.may_meet(y)),
            _ => true,
        }
    }

    /// The view as one progression per root dimension, when its map splits so: each view
    /// dimension moves one root coordinate, and no coordinate leaves the root's range (so no
    /// index carries into the next dimension).
    fn per_root_dim(&self, root: &[u64]) -> Option<Vec<Progression>> {
        let rs = row_major_strides(root);
        let mut offset = self.offset;
        let mut dims: Vec<Progression> = root
            .iter()
            .zip(&rs)
            .map(|(_, &r)| {
                let r = r.max(1).unsigned_abs();
                let c = offset / r;
                offset %= r;
                Progression {
                    lo: c as i128,
                    hi: c as i128,
                    step: 0,
                }
            })
            .collect();
        for (&e, &s) in self.shape.iter().zip(&self.strides) {
            if e <= 1 || s == 0 {
                continue;
            }
            // Row-major strides are never negative, so `s / rs` cannot overflow.
            let r = (0..root.len()).find(|&r| {
                let rs = rs[r];
                rs > 0 && s % rs == 0 && (s / rs).unsigned_abs() < root[r]
            })?;
            let k = s / rs[r];
            let reach = i128::from(k).checked_mul(i128::from(e - 1))?;
            let dim = &mut dims[r];
            // Exact or not at all: a bound that saturated would lose the congruence.
            if reach < 0 {
                dim.lo = dim.lo.checked_add(reach)?;
            } else {
                dim.hi = dim.hi.checked_add(reach)?;
            }
            dim.step = gcd(dim.step, k.unsigned_abs());
        }
        dims.iter()
            .zip(root)
            .all(|(d, &n)| d.lo >= 0 && d.hi < i128::from(n))
            .then_some(dims)
    }

    /// The view of elements `start + step * i` for `i` in `0..shape`, per dimension (a NumPy
    /// slice `start:stop:step` once normalized). A step may be negative, not 0.
    pub fn strided(&self, start: &[u64], step: &[i64], shape: &[u64]) -> ViewResult<ViewMap> {
        self.check_parent()?;
        let rank = self.rank();
        if start.len() != rank || step.len() != rank || shape.len() != rank {
            return err(format!(
                "a strided view of a rank-{rank} array needs {rank} starts, steps and extents, \
                 got {}, {} and {}",
                start.len(),
                step.len(),
                shape.len()
            ));
        }
        let empty = shape.contains(&0);
        let mut offset = self.offset as i128;
        let mut strides = Vec::with_capacity(rank);
        for d in 0..rank {
            let n = self.shape[d];
            if step[d] == 0 {
                return err(format!("slice step cannot be zero (dimension {d})"));
            }
            if shape[d] > 0 {
                let last = i128::from(start[d]) + i128::from(step[d]) * i128::from(shape[d] - 1);
                if start[d] >= n || last < 0 || last >= i128::from(n) {
                    return err(format!(
                        "slice of {} elements from {} by {} is out of range for dimension {d} \
                         of extent {n}",
                        shape[d], start[d], step[d]
                    ));
                }
            }
            if !empty {
                let moved = i128::from(start[d])
                    .checked_mul(i128::from(self.strides[d]))
                    .and_then(|m| offset.checked_add(m));
                offset = match moved {
                    Some(o) => o,
                    None => {
                        return err(format!(
                            "slice from {} along dimension {d} moves past any storage",
                            start[d]
                        ));
                    }
                };
            }
            strides.push(self.strides[d].saturating_mul(step[d]));
        }
        ViewMap {
            offset: clamp_u64(offset),
            shape: Dims::from_slice(shape),
            strides: strides.into(),
        }
        .check()
    }

    /// The view of the sub-rectangle `start..stop` (per dimension, steps of 1).
    pub fn slice(&self, start: &[u64], stop: &[u64]) -> ViewResult<ViewMap> {
        self.check_parent()?;
        let rank = self.rank();
        if start.len() != rank || stop.len() != rank {
            return err(format!(
                "slice of a rank-{rank} array needs {rank} bounds, got {} and {}",
                start.len(),
                stop.len()
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for d in 0..rank {
            if start[d] > stop[d] || stop[d] > self.shape[d] {
                return err(format!(
                    "slice {}..{} is out of range for dimension {d} of extent {}",
                    start[d], stop[d], self.shape[d]
                ));
            }
            shape.push(stop[d] - start[d]);
        }
        self.strided(start, &vec![1; rank], &shape)
    }

    /// The view whose dimension `d` is this view's dimension `axes[d]` (a transpose).
    pub fn permute(&self, axes: &[u32]) -> ViewResult<ViewMap> {
        self.check_parent()?;
        let rank = self.rank();
        let mut seen = vec![false; rank];
        let valid = axes.len() == rank
            && axes.iter().all(|&a| {
                let fresh = seen.get(a as usize).is_some_and(|s| !s);
                if fresh {
                    seen[a as usize] = true;
                }
                fresh
            });
        if !valid {
            return err(format!(
                "axes {axes:?} are not a permutation of the {rank} axes of the array"
            ));
        }
        ViewMap {
            offset: self.offset,
            shape: axes.iter().map(|&a| self.shape[a as usize]).collect(),
            strides: axes.iter().map(|&a| self.strides[a as usize]).collect(),
        }
        .check()
    }

    /// The view broadcast to `shape` by NumPy's rules: dimensions align at the end, a
    /// dimension of extent 1 stretches to any extent, and missing leading dimensions are
    /// added; stretched and added dimensions have stride 0.
    pub fn broadcast_to(&self, shape: &[u64]) -> ViewResult<ViewMap> {
        self.check_parent()?;
        let rank = self.rank();
        let fail = || {
            err(format!(
                "could not broadcast an array of shape {} to shape {}",
                shape_text(&self.shape),
                shape_text(shape)
            ))
        };
        if shape.len() < rank {
            return fail();
        }
        // Before the strides vector: the rank asked for is the plugin's to choose.
        check_shape(shape)?;
        let lead = shape.len() - rank;
        let mut strides = vec![0i64; shape.len()];
        for d in 0..rank {
            let (from, to) = (self.shape[d], shape[lead + d]);
            strides[lead + d] = if from == to {
                self.strides[d]
            } else if from == 1 {
                0
            } else {
                return fail();
            };
        }
        ViewMap {
            offset: self.offset,
            shape: Dims::from_slice(shape),
            strides: strides.into(),
        }
        .check()
    }

    /// The same elements in row-major order as an array of `shape`, as a view where the
    /// strides allow one (NumPy's no-copy reshape), or `None` where only a copy can do.
    /// The volumes must agree.
    pub fn reshape(&self, shape: &[u64]) -> ViewResult<Option<ViewMap>> {
        self.check_parent()?;
        check_shape(shape)?;
        let volume = checked_volume(shape);
        if volume.is_none() || volume != self.checked_volume() {
            return err(format!(
                "cannot reshape an array of shape {} ({} elements) into shape {}",
                shape_text(&self.shape),
                self.checked_volume()
                    .map_or_else(|| "more than 2^64".to_string(), |v| v.to_string()),
                shape_text(shape)
            ));
        }
        if self.volume() == 0 {
            return ViewMap {
                offset: self.offset,
                shape: Dims::from_slice(shape),
                strides: row_major_strides(shape),
            }
            .check()
            .map(Some);
        }
        // Dimensions of extent 1 carry no layout: drop them, then match groups of old and new
        // dimensions with equal products; each old group must be one strided run.
        let (old, old_strides): (Vec<u64>, Vec<i64>) = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(e, _)| **e != 1)
            .map(|(&e, &s)| (e, s))
            .unzip();
        // Both volumes are equal, nonzero and within the bound, so every partial product
        // below is too; the checks only keep a broken invariant from panicking.
        let broken = || {
            err(format!(
                "cannot reshape an array of shape {} into shape {}",
                shape_text(&self.shape),
                shape_text(shape)
            ))
        };
        let extent = |e: u64| i64::try_from(e).unwrap_or(i64::MAX);
        let mut strides = vec![0i64; shape.len()];
        let (mut oi, mut ni) = (0usize, 0usize);
        while oi < old.len() && ni < shape.len() {
            let (mut oj, mut nj) = (oi + 1, ni + 1);
            let (mut op, mut np) = (old[oi], shape[ni]);
            while op != np {
                if np < op {
                    let Some(p) = shape.get(nj).and_then(|&e| np.checked_mul(e)) else {
                        return broken();
                    };
                    np = p;
                    nj += 1;
                } else {
                    let Some(p) = old.get(oj).and_then(|&e| op.checked_mul(e)) else {
                        return broken();
                    };
                    op = p;
                    oj += 1;
                }
            }
            for k in oi..oj - 1 {
                if old_strides[k] != extent(old[k + 1]).saturating_mul(old_strides[k + 1]) {
                    return Ok(None);
                }
            }
            strides[nj - 1] = old_strides[oj - 1];
            for k in (ni + 1..nj).rev() {
                strides[k - 1] = strides[k].saturating_mul(extent(shape[k]));
            }
            oi = oj;
            ni = nj;
        }
        ViewMap {
            offset: self.offset,
            shape: Dims::from_slice(shape),
            strides: strides.into(),
        }
        .check()
        .map(Some)
    }
}

/// The coordinates one view reaches along one root dimension: inside `lo..=hi`, congruent to
/// `lo` modulo `step` (0 when the coordinate never moves).
struct Progression {
    lo: i128,
    hi: i128,
    step: u64,
}

impl Progression {
    /// Whether the two sets may share a coordinate.
    fn may_meet(&self, other: &Progression) -> bool {
        if self.hi < other.lo || other.hi < self.lo {
            return false;
        }
        let g = gcd(self.step, other.step);
        // The bounds are exact (`per_root_dim` gives up rather than saturate), so the
        // difference fits; were it not to, "may" is the sound answer.
        g <= 1
            || self
                .lo
                .checked_sub(other.lo)
                .is_none_or(|d| d.unsigned_abs().is_multiple_of(u128::from(g)))
    }
}

/// `x` clamped to `0..=u64::MAX`.
fn clamp_u64(x: i128) -> u64 {
    u64::try_from(x.max(0)).unwrap_or(u64::MAX)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A shape as NumPy prints it: `(3,)`, `(10, 1)`, `()`.
pub fn shape_text(shape: &[u64]) -> String {
    weft_ir::shape::tuple(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of a view, in row-major view order.
    fn elements(v: &ViewMap) -> Vec<u64> {
        crate::partition::points(&v.shape)
            .map(|i| v.element(&i))
            .collect()
    }

    #[test]
    fn a_root_is_the_identity() {
        let v = ViewMap::whole(&[2, 3]);
        assert_eq!(elements(&v), vec![0, 1, 2, 3, 4, 5]);
        assert!(v.is_whole(&[2, 3]) && v.is_contiguous() && !v.overlaps_itself());
        assert_eq!(v.span(), Some((0, 5)));
    }

    #[test]
    fn negative_steps_walk_backwards() {
        let v = ViewMap::whole(&[6]);
        // v[4::-2] = elements 4, 2, 0.
        let r = v.strided(&[4], &[-2], &[3]).unwrap();
        assert_eq!(elements(&r), vec![4, 2, 0]);
        assert_eq!(r.span(), Some((0, 4)));
        assert!(v.strided(&[4], &[-2], &[4]).is_err(), "reaches index -2");
        assert!(v.strided(&[0], &[0], &[2]).is_err(), "step 0");
        assert!(
            v.strided(&[6], &[1], &[0]).is_ok(),
            "an empty slice at the end"
        );
    }

    #[test]
    fn transposes_permute_strides() {
        let v = ViewMap::whole(&[2, 3]);
        let t = v.permute(&[1, 0]).unwrap();
        assert_eq!(t.shape.as_slice(), &[3, 2]);
        assert_eq!(elements(&t), vec![0, 3, 1, 4, 2, 5]);
        assert!(!t.is_contiguous());
        assert!(v.permute(&[0, 0]).is_err());
        assert!(v.permute(&[0]).is_err());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let col = ViewMap::whole(&[3, 1]);
        let b = col.broadcast_to(&[2, 3, 4]).unwrap();
        assert_eq!(b.strides.as_slice(), &[0, 1, 0]);
        assert!(b.overlaps_itself());
        let e = ViewMap::whole(&[10, 1])
            .broadcast_to(&[8])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "could not broadcast an array of shape (10, 1) to shape (8,)"
        );
        assert!(ViewMap::whole(&[3]).broadcast_to(&[3, 2]).is_err());
    }

    #[test]
    fn reshape_is_a_view_where_numpy_gives_one() {
        let v = ViewMap::whole(&[2, 3, 4]);
        let r = v.reshape(&[6, 4]).unwrap().unwrap();
        assert_eq!(elements(&r), elements(&v));
        let r = v.reshape(&[2, 1, 12, 1]).unwrap().unwrap();
        assert_eq!(elements(&r), elements(&v));
        // A transpose cannot be flattened without a copy, but can be split and given axes.
        let t = v.permute(&[2, 1, 0]).unwrap();
        assert_eq!(t.reshape(&[24]).unwrap(), None);
        let s = t.reshape(&[4, 1, 3, 2, 1]).unwrap().unwrap();
        assert_eq!(elements(&s), elements(&t));
        // Reversed rows flatten to a reversed run.
        let rev = ViewMap::whole(&[6]).strided(&[5], &[-1], &[6]).unwrap();
        let r = rev.reshape(&[2, 3]).unwrap().unwrap();
        assert_eq!(elements(&r), vec![5, 4, 3, 2, 1, 0]);
        assert!(v.reshape(&[5, 5]).is_err());
        // Empty arrays reshape freely.
        let empty = ViewMap::whole(&[0, 3]);
        assert_eq!(
            empty.reshape(&[3, 0]).unwrap().unwrap().shape.as_slice(),
            &[3, 0]
        );
    }

    /// The overlap test against brute force: it may say "may" when they do not, never "no"
    /// when they do, and it is exact for these slices of one grid.
    #[test]
    fn overlap_is_sound_and_exact_on_grid_slices() {
        let root = [6u64, 5];
        let grid = ViewMap::whole(&root);
        let views = [
            grid.slice(&[0, 4], &[6, 5]).unwrap(),            // last column
            grid.slice(&[0, 3], &[6, 4]).unwrap(),            // the one before
            grid.slice(&[1, 1], &[5, 4]).unwrap(),            // interior
            grid.slice(&[0, 0], &[1, 5]).unwrap(),            // first row
            grid.strided(&[0, 0], &[2, 2], &[3, 3]).unwrap(), // even points
            grid.strided(&[1, 1], &[2, 2], &[3, 2]).unwrap(), // odd points
            grid.strided(&[5, 4], &[-1, -1], &[6, 5]).unwrap(), // reversed
            grid.permute(&[1, 0]).unwrap(),
            grid.slice(&[2, 0], &[3, 5])
                .unwrap()
                .broadcast_to(&[4, 1, 5])
                .unwrap(),
        ];
        for (i, a) in views.iter().enumerate() {
            for (j, b) in views.iter().enumerate() {
                let ea = elements(a);
                let truth = elements(b).iter().any(|e| ea.contains(e));
                let said = a.may_overlap(b, &root);
                assert!(said || !truth, "views {i} and {j} share an element");
                assert_eq!(said, truth, "views {i} and {j}");
            }
        }
    }

    #[test]
    fn a_broadcast_whose_volume_would_wrap_is_refused() {
        let one = ViewMap::whole(&[1]);
        // 2^32 * 2^32 wraps to 0 in u64: it was called empty and not overlapping.
        let e = one
            .broadcast_to(&[1 << 32, 1 << 32])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(4294967296, 4294967296)") && e.contains("MAX_VIEW_ELEMENTS"),
            "{e}"
        );
        assert!(one.broadcast_to(&[u64::MAX, u64::MAX]).is_err());
        assert!(one.broadcast_to(&[MAX_VIEW_ELEMENTS + 1]).is_err());
        // At the bound: a view, read-only and nonempty.
        let b = one.broadcast_to(&[1 << 24, 1 << 24]).unwrap();
        assert_eq!(b.checked_volume(), Some(MAX_VIEW_ELEMENTS));
        assert!(b.overlaps_itself() && b.span() == Some((0, 0)));
        // Empty views of absurd extents are refused, as NumPy refuses them.
        let empty = ViewMap::whole(&[1, 0]);
        assert!(empty.broadcast_to(&[u64::MAX, 0]).is_err());
        assert!(empty.broadcast_to(&[5, 0]).is_ok());
        // Ranks past the maximum.
        assert!(one.broadcast_to(&[1; 17]).is_err());
        assert!(one.reshape(&[1; 17]).is_err());
        assert!(ViewMap::whole(&[0]).reshape(&[0, 1 << 50]).is_err());
    }

    #[test]
    fn volume_saturates_and_a_huge_map_is_many_elements() {
        for shape in [
            [1u64 << 32, 1 << 32],
            [1 << 63, 2],
            [u64::MAX, 2],
            [u64::MAX, u64::MAX],
        ] {
            let m = ViewMap {
                offset: 7,
                shape: Dims::from_slice(&shape),
                strides: smallvec::smallvec![0, 0],
            };
            assert_eq!(m.checked_volume(), None, "{shape:?}");
            assert_eq!(m.volume(), u64::MAX, "{shape:?}");
            assert!(m.overlaps_itself(), "{shape:?}");
            assert!(!m.is_contiguous(), "{shape:?}");
            assert_eq!(m.span(), Some((7, 7)), "{shape:?}");
            assert!(m.may_overlap(&m, &[8]), "{shape:?}");
        }
        // An extent of 0 makes any shape empty, whatever the others multiply to.
        let zero = ViewMap {
            offset: 0,
            shape: smallvec::smallvec![u64::MAX, u64::MAX, 0],
            strides: smallvec::smallvec![0, 0, 0],
        };
        assert_eq!(zero.checked_volume(), Some(0));
        assert_eq!(zero.span(), None);
        assert!(!zero.overlaps_itself() && zero.is_contiguous());
    }

    #[test]
    fn span_never_says_empty_for_a_nonempty_view() {
        let up = ViewMap {
            offset: 5,
            shape: smallvec::smallvec![u64::MAX; 16],
            strides: smallvec::smallvec![i64::MAX; 16],
        };
        assert_eq!(up.span(), Some((5, u64::MAX)));
        let down = ViewMap {
            offset: 5,
            shape: smallvec::smallvec![u64::MAX; 16],
            strides: smallvec::smallvec![i64::MIN; 16],
        };
        assert_eq!(down.span(), Some((0, 5)));
        assert_eq!(down.element(&[u64::MAX; 16]), 0);
        assert_eq!(up.element(&[u64::MAX; 16]), u64::MAX);
        // Dense strides past i64: never contiguous (the saturated row-major stride of the
        // first dimension is i64::MAX, which these strides match).
        let past = ViewMap {
            offset: 0,
            shape: smallvec::smallvec![2, 1 << 62, 4],
            strides: smallvec::smallvec![i64::MAX, 4, 1],
        };
        assert!(!past.is_contiguous());
        // Progressions past i128 in one root dimension: "may", never a panic.
        let wide = ViewMap {
            offset: 0,
            shape: smallvec::smallvec![u64::MAX, u64::MAX, u64::MAX],
            strides: smallvec::smallvec![i64::MAX, i64::MAX, i64::MAX],
        };
        assert!(wide.may_overlap(&wide, &[u64::MAX]));
    }

    #[test]
    fn views_of_hand_built_maps_are_errors_not_panics() {
        // A start times a stride past i128 when summed over dimensions.
        let far = ViewMap {
            offset: 0,
            shape: smallvec::smallvec![u64::MAX, u64::MAX],
            strides: smallvec::smallvec![i64::MAX, i64::MAX],
        };
        assert!(far.strided(&[u64::MAX - 1; 2], &[1, 1], &[1, 1]).is_err());
        // Strides and extents of different lengths.
        let bent = ViewMap {
            offset: 0,
            shape: smallvec::smallvec![4, 4],
            strides: smallvec::smallvec![1],
        };
        assert!(bent.strided(&[0, 0], &[1, 1], &[1, 1]).is_err());
        assert!(bent.slice(&[0, 0], &[1, 1]).is_err());
        assert!(bent.permute(&[1, 0]).is_err());
        assert!(bent.broadcast_to(&[4, 4]).is_err());
        assert!(bent.reshape(&[16]).is_err());
        assert!(bent.overlaps_itself() && !bent.is_contiguous());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Every question asked of any map, however wild, answers without a panic, and a
        /// nonempty map always has a span.
        #[test]
        fn questions_about_any_map_never_panic(
            offset in proptest::prelude::any::<u64>(),
            dims in proptest::collection::vec(
                (extent(), proptest::prelude::any::<i64>()),
                0..9,
            ),
            other in proptest::collection::vec(extent(), 0..9),
        ) {
            let (shape, strides): (Vec<u64>, Vec<i64>) = dims.into_iter().unzip();
            let m = ViewMap { offset, shape: shape.clone().into(), strides: strides.into() };
            let nonempty = !shape.contains(&0);
            proptest::prop_assert_eq!(m.span().is_some(), nonempty);
            proptest::prop_assert_eq!(m.volume() == 0, !nonempty);
            let _ = (m.overlaps_itself(), m.is_contiguous(), m.may_overlap(&m, &shape));
            let _ = m.element(&shape);
            let _ = m.broadcast_to(&other);
            let _ = m.reshape(&other);
            let _ = m.strided(&other, &vec![-1; other.len()], &other);
            let _ = m.slice(&vec![0; other.len()], &other);
            if let Ok(v) = m.broadcast_to(&other) {
                proptest::prop_assert!(v.checked_volume().is_some_and(|n| n <= MAX_VIEW_ELEMENTS));
            }
        }
    }

    /// Extents at the edges: 0, 1, 2, 2^32, 2^40, 2^63, u64::MAX, and small ones.
    fn extent() -> impl proptest::strategy::Strategy<Value = u64> {
        use proptest::prelude::*;
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(1 << 32),
            Just(1 << 40),
            Just(1 << 63),
            Just(u64::MAX),
            0u64..8,
        ]
    }

    #[test]
    fn shapes_print_as_numpy_prints_them() {
        assert_eq!(shape_text(&[8]), "(8,)");
        assert_eq!(shape_text(&[10, 1]), "(10, 1)");
        assert_eq!(shape_text(&[]), "()");
    }
}
