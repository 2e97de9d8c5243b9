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

use std::fmt;

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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewMap {
    /// The storage element of view index 0 (every index 0).
    pub offset: u64,
    /// The view's shape.
    pub shape: Vec<u64>,
    /// The storage distance, in elements, between neighbours along each dimension.
    pub strides: Vec<i64>,
}

/// Row-major strides (in elements) of a shape.
pub fn row_major_strides(shape: &[u64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(shape[d + 1] as i64);
    }
    strides
}

impl ViewMap {
    /// The identity map of a root of this shape.
    pub fn whole(shape: &[u64]) -> ViewMap {
        ViewMap {
            offset: 0,
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
        }
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn volume(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Whether this is the identity map of a root of shape `root`: every element of the root,
    /// once, in row-major order.
    pub fn is_whole(&self, root: &[u64]) -> bool {
        self.shape == root && self.offset == 0 && self.strides == row_major_strides(root)
    }

    /// Whether two different indices of the view reach the same element (a broadcast view).
    pub fn overlaps_itself(&self) -> bool {
        // An empty view has no elements to repeat.
        self.volume() > 1
            && self
                .shape
                .iter()
                .zip(&self.strides)
                .any(|(&e, &s)| e > 1 && s == 0)
    }

    /// Whether the view is dense and row-major: its elements are one run of the storage.
    pub fn is_contiguous(&self) -> bool {
        self.volume() <= 1
            || self
                .shape
                .iter()
                .zip(&self.strides)
                .zip(row_major_strides(&self.shape))
                .all(|((&e, &s), r)| e == 1 || s == r)
    }

    /// The storage element of view index `index` (which must be inside the shape).
    pub fn element(&self, index: &[u64]) -> u64 {
        let at = index
            .iter()
            .zip(&self.strides)
            .fold(self.offset as i128, |acc, (&i, &s)| {
                acc + i128::from(i) * i128::from(s)
            });
        at.max(0) as u64
    }

    /// The lowest and the highest storage element the view reaches (none when it is empty).
    pub fn span(&self) -> Option<(u64, u64)> {
        if self.volume() == 0 {
            return None;
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&e, &s) in self.shape.iter().zip(&self.strides) {
            let reach = i128::from(e - 1) * i128::from(s);
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        Some((lo.max(0) as u64, hi.max(0) as u64))
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
                let r = r.max(1) as u64;
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
            let r = (0..root.len()).find(|&r| {
                let rs = rs[r];
                rs != 0 && s % rs == 0 && (s / rs).unsigned_abs() < root[r]
            })?;
            let k = s / rs[r];
            let reach = i128::from(k) * i128::from(e - 1);
            let dim = &mut dims[r];
            if reach < 0 {
                dim.lo += reach;
            } else {
                dim.hi += reach;
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
                offset += i128::from(start[d]) * i128::from(self.strides[d]);
            }
            strides.push(self.strides[d].saturating_mul(step[d]));
        }
        Ok(ViewMap {
            offset: u64::try_from(offset.max(0)).unwrap_or(u64::MAX),
            shape: shape.to_vec(),
            strides,
        })
    }

    /// The view of the sub-rectangle `start..stop` (per dimension, steps of 1).
    pub fn slice(&self, start: &[u64], stop: &[u64]) -> ViewResult<ViewMap> {
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
        Ok(ViewMap {
            offset: self.offset,
            shape: axes.iter().map(|&a| self.shape[a as usize]).collect(),
            strides: axes.iter().map(|&a| self.strides[a as usize]).collect(),
        })
    }

    /// The view broadcast to `shape` by NumPy's rules: dimensions align at the end, a
    /// dimension of extent 1 stretches to any extent, and missing leading dimensions are
    /// added; stretched and added dimensions have stride 0.
    pub fn broadcast_to(&self, shape: &[u64]) -> ViewResult<ViewMap> {
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
        Ok(ViewMap {
            offset: self.offset,
            shape: shape.to_vec(),
            strides,
        })
    }

    /// The same elements in row-major order as an array of `shape`, as a view where the
    /// strides allow one (NumPy's no-copy reshape), or `None` where only a copy can do.
    /// The volumes must agree.
    pub fn reshape(&self, shape: &[u64]) -> ViewResult<Option<ViewMap>> {
        let volume: Option<u64> = shape.iter().try_fold(1u64, |a, &e| a.checked_mul(e));
        if volume != Some(self.volume()) {
            return err(format!(
                "cannot reshape an array of shape {} ({} elements) into shape {}",
                shape_text(&self.shape),
                self.volume(),
                shape_text(shape)
            ));
        }
        if self.volume() == 0 {
            return Ok(Some(ViewMap {
                offset: self.offset,
                shape: shape.to_vec(),
                strides: row_major_strides(shape),
            }));
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
        let mut strides = vec![0i64; shape.len()];
        let (mut oi, mut ni) = (0usize, 0usize);
        while oi < old.len() && ni < shape.len() {
            let (mut oj, mut nj) = (oi + 1, ni + 1);
            let (mut op, mut np) = (old[oi], shape[ni]);
            while op != np {
                if np < op {
                    np *= shape[nj];
                    nj += 1;
                } else {
                    op *= old[oj];
                    oj += 1;
                }
            }
            for k in oi..oj - 1 {
                if old_strides[k] != (old[k + 1] as i64).saturating_mul(old_strides[k + 1]) {
                    return Ok(None);
                }
            }
            strides[nj - 1] = old_strides[oj - 1];
            for k in (ni + 1..nj).rev() {
                strides[k - 1] = strides[k].saturating_mul(shape[k] as i64);
            }
            oi = oj;
            ni = nj;
        }
        Ok(Some(ViewMap {
            offset: self.offset,
            shape: shape.to_vec(),
            strides,
        }))
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
        g <= 1
            || (self.lo - other.lo)
                .unsigned_abs()
                .is_multiple_of(u128::from(g))
    }
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
        assert_eq!(t.shape, vec![3, 2]);
        assert_eq!(elements(&t), vec![0, 3, 1, 4, 2, 5]);
        assert!(!t.is_contiguous());
        assert!(v.permute(&[0, 0]).is_err());
        assert!(v.permute(&[0]).is_err());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let col = ViewMap::whole(&[3, 1]);
        let b = col.broadcast_to(&[2, 3, 4]).unwrap();
        assert_eq!(b.strides, vec![0, 1, 0]);
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
        assert_eq!(empty.reshape(&[3, 0]).unwrap().unwrap().shape, vec![3, 0]);
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
    fn shapes_print_as_numpy_prints_them() {
        assert_eq!(shape_text(&[8]), "(8,)");
        assert_eq!(shape_text(&[10, 1]), "(10, 1)");
        assert_eq!(shape_text(&[]), "()");
    }
}
