//! Boxes of root storage: the rectangles that messages carry, and the views whose
//! sub-stores are such boxes.

use weft_runtime::{Rect, ViewMap};

/// The intersection of two boxes of the same rank, if it has an element.
pub fn intersect(a: &Rect, b: &Rect) -> Option<Rect> {
    let mut origin = Vec::with_capacity(a.origin.len());
    let mut extent = Vec::with_capacity(a.origin.len());
    for d in 0..a.origin.len() {
        let lo = a.origin[d].max(b.origin[d]);
        let hi = (a.origin[d] + a.extent[d]).min(b.origin[d] + b.extent[d]);
        if hi <= lo {
            return None;
        }
        origin.push(lo);
        extent.push(hi - lo);
    }
    Some(Rect {
        origin: origin.into(),
        extent: extent.into(),
    })
}

/// `a` minus `b`: at most two boxes per dimension, disjoint, covering exactly the elements of
/// `a` outside `b`.
pub fn subtract(a: &Rect, b: &Rect) -> Vec<Rect> {
    let Some(cut) = intersect(a, b) else {
        return if a.volume() == 0 {
            Vec::new()
        } else {
            vec![a.clone()]
        };
    };
    let mut out = Vec::new();
    let mut rest = a.clone();
    for d in 0..a.origin.len() {
        let (lo, hi) = (rest.origin[d], rest.origin[d] + rest.extent[d]);
        let (clo, chi) = (cut.origin[d], cut.origin[d] + cut.extent[d]);
        if clo > lo {
            let mut below = rest.clone();
            below.extent[d] = clo - lo;
            out.push(below);
        }
        if chi < hi {
            let mut above = rest.clone();
            above.origin[d] = chi;
            above.extent[d] = hi - chi;
            out.push(above);
        }
        rest.origin[d] = clo;
        rest.extent[d] = chi - clo;
    }
    out
}

/// Every box of `boxes` minus `b`.
pub fn subtract_all(boxes: &[Rect], b: &Rect) -> Vec<Rect> {
    boxes.iter().flat_map(|a| subtract(a, b)).collect()
}

/// Whether box `b` holds the element at coordinates `e`.
pub fn contains(b: &Rect, e: &[u64]) -> bool {
    e.len() == b.origin.len()
        && (0..e.len()).all(|d| e[d] >= b.origin[d] && e[d] - b.origin[d] < b.extent[d])
}

/// The coordinates of element `element` (row-major) of a root of shape `root`.
pub fn coords(element: u64, root: &[u64]) -> Vec<u64> {
    let mut left = element;
    weft_runtime::view::row_major_strides(root)
        .iter()
        .map(|&s| {
            let s = s.max(1) as u64;
            let c = left / s;
            left %= s;
            c
        })
        .collect()
}

/// A tiling of dimension 0 into tiles of `tile` rows from `offset`, one per point of a rank-1
/// launch, the other dimensions whole: how the host splits arrays by rows.
pub fn row_tiles(tile: u64, offset: i64, rank: usize) -> weft_runtime::Partition {
    let mut t = weft_runtime::Tiling {
        tile: weft_runtime::smallvec::smallvec![u64::MAX; rank],
        offset: weft_runtime::smallvec::smallvec![0; rank],
        projection: weft_runtime::smallvec::smallvec![None; rank],
        skew: None,
    };
    if rank > 0 {
        t.tile[0] = tile;
        t.offset[0] = offset;
        t.projection[0] = Some(0);
    }
    weft_runtime::Partition::Tiling(t)
}

/// The root elements of `view`'s sub-store `sub`, as boxes: runs along the root's last
/// dimension, in the view's row-major order (for views that are not boxes of their root).
pub fn element_boxes(view: &ViewMap, sub: &Rect, root: &[u64]) -> Vec<Rect> {
    let mut out: Vec<Rect> = Vec::new();
    for i in weft_runtime::partition::points(&sub.extent) {
        let index: Vec<u64> = i.iter().zip(&sub.origin).map(|(a, b)| a + b).collect();
        let coords = coords(view.element(&index), root);
        if let Some(last) = out.last_mut() {
            let r = coords.len();
            let extends = r > 0
                && (0..r - 1).all(|d| last.origin[d] == coords[d])
                && last.origin[r - 1] + last.extent[r - 1] == coords[r - 1];
            if extends {
                last.extent[r - 1] += 1;
                continue;
            }
        }
        out.push(Rect {
            extent: weft_runtime::smallvec::smallvec![1; coords.len()],
            origin: coords.into(),
        });
    }
    out
}

/// Where a view's index space lies in its root, when the view is a box of the root: each
/// view dimension longer than 1 moves along its own root dimension with that dimension's
/// row-major stride (slices without steps, and transposes of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoxView {
    /// The root's shape.
    pub root: Vec<u64>,
    /// The root dimension of each view dimension.
    pub dims: Vec<usize>,
    /// The root index of view index 0.
    pub origin: Vec<u64>,
    /// Per view dimension, whether it runs backwards along its root dimension (a step of -1).
    pub reversed: Vec<bool>,
}

impl BoxView {
    /// The box form of `view` over a root of shape `root`, or `None` when the view is not a
    /// box of it (steps, broadcasts, reshapes across dimensions).
    pub fn of(view: &ViewMap, root: &[u64]) -> Option<BoxView> {
        let strides = weft_runtime::view::row_major_strides(root);
        let mut origin = vec![0u64; root.len()];
        let mut left = view.offset;
        for d in 0..root.len() {
            let s = u64::try_from(strides[d]).ok()?.max(1);
            origin[d] = left / s;
            left %= s;
        }
        if origin.iter().zip(root).any(|(&o, &e)| o >= e.max(1)) && view.volume() > 0 {
            return None;
        }
        let mut used = vec![false; root.len()];
        let mut dims = vec![usize::MAX; view.rank()];
        let mut reversed = vec![false; view.rank()];
        for (vd, (&e, &s)) in view.shape.iter().zip(&view.strides).enumerate() {
            if e <= 1 {
                continue;
            }
            let rd = strides
                .iter()
                .zip(root)
                .position(|(&rs, &re)| rs == s.saturating_abs() && re > 1)?;
            let back = s < 0;
            let fits = if back {
                origin[rd] + 1 >= e
            } else {
                origin[rd] + e <= root[rd]
            };
            if used[rd] || !fits {
                return None;
            }
            used[rd] = true;
            dims[vd] = rd;
            reversed[vd] = back;
        }
        // Dimensions of extent 1 take any root dimension left (they never move).
        for d in dims.iter_mut().filter(|d| **d == usize::MAX) {
            let free = (0..root.len()).find(|&r| !used[r]);
            match free {
                Some(r) => {
                    used[r] = true;
                    *d = r;
                }
                None => *d = root.len(),
            }
        }
        Some(BoxView {
            root: root.to_vec(),
            dims,
            origin,
            reversed,
        })
    }

    /// The root box of the view's sub-store `sub` (view coordinates).
    pub fn root_box(&self, sub: &Rect) -> Rect {
        let mut out = Rect {
            origin: self.origin.clone().into(),
            extent: weft_runtime::smallvec::smallvec![1; self.root.len()],
        };
        for (vd, &rd) in self.dims.iter().enumerate() {
            if rd < self.root.len() {
                if self.reversed[vd] {
                    let last = sub.origin[vd] + sub.extent[vd].max(1) - 1;
                    out.origin[rd] = out.origin[rd].saturating_sub(last);
                } else {
                    out.origin[rd] += sub.origin[vd];
                }
                out.extent[rd] = sub.extent[vd];
            } else if sub.extent[vd] == 0 {
                out.extent = weft_runtime::smallvec::smallvec![0; self.root.len()];
            }
        }
        if sub.extent.contains(&0) {
            out.extent = weft_runtime::smallvec::smallvec![0; self.root.len()];
        }
        out
    }

    /// The view-coordinate interval along view dimension `vd` that root box `b` covers,
    /// clipped to `0..extent` (empty as `(x, x)`).
    pub fn view_interval(&self, vd: usize, b: &Rect, extent: u64) -> (u64, u64) {
        let rd = self.dims[vd];
        if rd >= self.root.len() {
            return (0, extent.min(1));
        }
        if self.reversed[vd] {
            // View index i is root index origin - i.
            let o = self.origin[rd] + 1;
            let lo = o.saturating_sub(b.origin[rd] + b.extent[rd]);
            let hi = o.saturating_sub(b.origin[rd]).min(extent);
            return (lo.min(hi), hi);
        }
        let lo = b.origin[rd].saturating_sub(self.origin[rd]);
        let hi = (b.origin[rd] + b.extent[rd])
            .saturating_sub(self.origin[rd])
            .min(extent);
        (lo.min(hi), hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(origin: &[u64], extent: &[u64]) -> Rect {
        Rect {
            origin: weft_runtime::Dims::from_slice(origin),
            extent: weft_runtime::Dims::from_slice(extent),
        }
    }

    fn elements(b: &Rect) -> Vec<Vec<u64>> {
        weft_runtime::partition::points(&b.extent)
            .map(|p| p.iter().zip(&b.origin).map(|(i, o)| i + o).collect())
            .collect()
    }

    #[test]
    fn subtraction_leaves_exactly_the_elements_outside() {
        let a = r(&[1, 2], &[5, 6]);
        for b in [
            r(&[0, 0], &[3, 4]),
            r(&[2, 3], &[2, 2]),
            r(&[7, 0], &[2, 2]),
            r(&[0, 0], &[10, 10]),
        ] {
            let parts = subtract(&a, &b);
            let mut got: Vec<Vec<u64>> = parts.iter().flat_map(elements).collect();
            got.sort();
            let mut want: Vec<Vec<u64>> = elements(&a)
                .into_iter()
                .filter(|e| !elements(&b).contains(e))
                .collect();
            want.sort();
            assert_eq!(got, want, "{a:?} - {b:?}");
        }
    }

    #[test]
    fn slices_and_transposes_are_boxes_steps_are_not() {
        let root = [6, 8];
        let grid = ViewMap::whole(&root);
        let center = grid.slice(&[1, 2], &[5, 7]).unwrap();
        let b = BoxView::of(&center, &root).unwrap();
        assert_eq!(b.root_box(&r(&[1, 0], &[2, 5])), r(&[2, 2], &[2, 5]));
        let t = center.permute(&[1, 0]).unwrap();
        let bt = BoxView::of(&t, &root).unwrap();
        assert_eq!(bt.root_box(&r(&[0, 1], &[5, 2])), r(&[2, 2], &[2, 5]));
        // A reversed column range: view column j is root column 6 - j.
        let back = grid.strided(&[1, 6], &[1, -1], &[3, 4]).unwrap();
        let bb = BoxView::of(&back, &root).unwrap();
        assert_eq!(bb.root_box(&r(&[0, 1], &[2, 2])), r(&[1, 4], &[2, 2]));
        assert_eq!(bb.view_interval(1, &r(&[0, 4], &[6, 2]), 4), (1, 3));
        let stepped = grid.strided(&[0, 0], &[2, 1], &[3, 8]).unwrap();
        assert_eq!(BoxView::of(&stepped, &root), None);
        let row = grid.slice(&[3, 0], &[4, 8]).unwrap();
        assert!(BoxView::of(&row, &root).is_some());
    }
}
