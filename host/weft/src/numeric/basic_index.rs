//! Basic indexing made by the host alone: `a[i, lo:hi:step, ...]` is a view of `a`'s storage,
//! so the facade computes it from NumPy's rules and makes the view itself, without entering
//! the plugin. A loop whose indices change every step (`L[i, :i]`, `a[i, i]`) then pays for a
//! view, not for a plugin call that no recording can replay (its key holds the indices).
//!
//! The rules are the `numeric` plugin's own (`ops::views::index`): a position removes its
//! dimension, a range keeps it as `(first, step, len)` (Python's slice rules), trailing
//! dimensions are taken whole; the view is one strided view of the array, reshaped when
//! positions dropped dimensions. Anything else (a new axis, a position out of range, a zero
//! step, more indices than dimensions, an array in error) goes to the plugin, whose call
//! gives the result or the error. With call replay off ([`Numeric::set_call_replay`]) every
//! call enters the plugin, and the tests compare the two.
//!
//! [`Numeric::set_call_replay`]: super::Numeric::set_call_replay

use super::{Array, Ix, Range};

/// A view of basic indexing: the strided view's start, step and extent per dimension of the
/// array, then the result's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BasicView {
    pub start: Vec<u64>,
    pub step: Vec<i64>,
    pub extent: Vec<u64>,
    pub shape: Vec<u64>,
}

/// Python's slice rules over an extent `n` (the plugin's `shapes::slice_indices`): the first
/// index, the step and the length; `None` for a zero step.
pub(crate) fn slice_indices(r: &Range, n: u64) -> Option<(u64, i64, u64)> {
    let step = r.step.unwrap_or(1);
    if step == 0 {
        return None;
    }
    let n = i128::from(n);
    let (step_w, neg) = (i128::from(step), step < 0);
    let adjust = |b: i64, lo: i128, hi: i128| {
        let b = i128::from(b);
        let b = if b < 0 { b + n } else { b };
        b.clamp(lo, hi)
    };
    let (lo, hi) = if neg { (-1, n - 1) } else { (0, n) };
    let first = r
        .start
        .map_or(if neg { n - 1 } else { 0 }, |b| adjust(b, lo, hi));
    let last = r
        .stop
        .map_or(if neg { -1 } else { n }, |b| adjust(b, lo, hi));
    let len = if neg {
        if first > last {
            (first - last - 1) / -step_w + 1
        } else {
            0
        }
    } else if last > first {
        (last - first - 1) / step_w + 1
    } else {
        0
    };
    let first = if len == 0 { 0 } else { first };
    Some((first as u64, step, len as u64))
}

/// The view `indices` select from an array of shape `shape`, or `None` where the plugin
/// must decide (see the module documentation).
pub(crate) fn basic_view(shape: &[u64], indices: &[Ix]) -> Option<BasicView> {
    if indices.len() > shape.len() {
        return None;
    }
    let mut view = BasicView {
        start: vec![0; shape.len()],
        step: vec![1; shape.len()],
        extent: shape.to_vec(),
        shape: Vec::with_capacity(shape.len()),
    };
    for (d, index) in indices.iter().enumerate() {
        let n = shape[d];
        match index {
            Ix::NewAxis => return None,
            Ix::At(i) => {
                let at = if *i < 0 {
                    i128::from(*i) + i128::from(n)
                } else {
                    i128::from(*i)
                };
                if at < 0 || at >= i128::from(n) {
                    return None;
                }
                (view.start[d], view.extent[d]) = (at as u64, 1);
            }
            Ix::Slice(r) => {
                let (first, step, len) = slice_indices(r, n)?;
                (view.start[d], view.step[d], view.extent[d]) = (first, step, len);
                view.shape.push(len);
            }
        }
    }
    view.shape.extend(&shape[indices.len()..]);
    Some(view)
}

impl Array {
    /// `self[indices]` made by the host (see the module documentation), or `None` for the
    /// plugin's call.
    pub(crate) fn host_index(&self, indices: &[Ix]) -> Option<Array> {
        let handle = self.value().as_ref().ok()?;
        if !self.np.call_replay() {
            return None;
        }
        let mut rt = self.np.inner.rt.borrow_mut();
        let shape = rt.shape(handle).ok()?;
        let view = basic_view(&shape, indices)?;
        let id = rt
            .basic_view(
                handle.id(),
                &view.start,
                &view.step,
                &view.extent,
                &view.shape,
            )
            .ok()?;
        let value = rt.adopt(id).map_err(std::rc::Rc::new);
        drop(rt);
        self.np.count_host_view();
        Some(Array {
            np: self.np.clone(),
            slot: super::Slot::Ready(value),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Ix {
        Ix::Slice(Range { start, stop, step })
    }

    #[test]
    fn positions_drop_their_dimension_and_ranges_keep_theirs() {
        let v = basic_view(&[5, 6, 7], &[Ix::At(-1), range(Some(1), Some(5), Some(2))])
            .unwrap_or_else(|| panic!("a view"));
        assert_eq!(v.start, vec![4, 1, 0]);
        assert_eq!(v.step, vec![1, 2, 1]);
        assert_eq!(v.extent.as_slice(), &[1, 2, 7]);
        assert_eq!(v.shape.as_slice(), &[2, 7]);
    }

    /// A slice's `(start, stop, step)`.
    type Bounds = (Option<i64>, Option<i64>, Option<i64>);

    #[test]
    fn python_slice_rules() {
        // (start, stop, step) over 10 elements, against Python's `range(10)[s]`.
        let cases: &[(Bounds, (u64, i64, u64))] = &[
            ((None, None, None), (0, 1, 10)),
            ((Some(-3), None, None), (7, 1, 3)),
            ((Some(2), Some(100), Some(3)), (2, 3, 3)),
            ((Some(8), Some(2), None), (0, 1, 0)),
            ((None, None, Some(-1)), (9, -1, 10)),
            ((Some(-2), Some(-20), Some(-4)), (8, -4, 3)),
            ((Some(100), Some(-100), Some(-3)), (9, -3, 4)),
            ((Some(-100), Some(3), None), (0, 1, 3)),
        ];
        for &((start, stop, step), want) in cases {
            let r = Range { start, stop, step };
            assert_eq!(slice_indices(&r, 10), Some(want), "{r:?}");
        }
        let zero = Range {
            start: None,
            stop: None,
            step: Some(0),
        };
        assert_eq!(slice_indices(&zero, 10), None);
    }

    #[test]
    fn what_the_plugin_decides_is_left_to_it() {
        assert_eq!(basic_view(&[3], &[Ix::At(3)]), None);
        assert_eq!(basic_view(&[3], &[Ix::At(-4)]), None);
        assert_eq!(basic_view(&[3], &[Ix::NewAxis]), None);
        assert_eq!(basic_view(&[3], &[Ix::At(0), Ix::At(0)]), None);
        assert_eq!(basic_view(&[3], &[range(None, None, Some(0))]), None);
    }
}
