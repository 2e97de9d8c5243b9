//! Sorting (NumPy's `sort`, `argsort` and `unique`) on the host: the array is read once in
//! its own dtype, each line along the axis is sorted there by a stable merge sort in NumPy's
//! order (NaN after every number; `-0.0` and `0.0` equal, so they keep their order), and the
//! result is written back as a new array. *Chosen over* a sort in the kernel IR for now: a
//! network of compare-exchange steps that runs as tasks takes `log^2 n / 2` passes over the
//! array (210 for a million elements), several times NumPy's time on the CPU, where the
//! host's sort runs at NumPy's speed (a GPU pays a round trip). `argsort` is stable (NumPy's
//! `kind="stable"`: equal elements keep their order; NumPy's default quicksort may order
//! them otherwise).

use std::cmp::Ordering;

use weft_ir::DType;

use super::Array;
use super::host_data::Element;
use super::search::normalize_axis;
use crate::{Error, Result};

/// NumPy's sort order for one element type: NaN after everything, equal NaNs equal.
trait SortKey: Element {
    fn order(a: &Self, b: &Self) -> Ordering;
}

fn float_order<T: PartialOrd>(a: &T, b: &T, a_nan: bool, b_nan: bool) -> Ordering {
    match (a_nan, b_nan) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}

impl SortKey for f64 {
    fn order(a: &f64, b: &f64) -> Ordering {
        float_order(a, b, a.is_nan(), b.is_nan())
    }
}

impl SortKey for f32 {
    fn order(a: &f32, b: &f32) -> Ordering {
        float_order(a, b, a.is_nan(), b.is_nan())
    }
}

impl SortKey for i64 {
    fn order(a: &i64, b: &i64) -> Ordering {
        a.cmp(b)
    }
}

impl SortKey for i32 {
    fn order(a: &i32, b: &i32) -> Ordering {
        a.cmp(b)
    }
}

impl SortKey for bool {
    fn order(a: &bool, b: &bool) -> Ordering {
        a.cmp(b)
    }
}

/// Per line of `len` elements of `values` (consecutive), the stable order of its elements,
/// and, when `values_too`, the sorted elements.
fn sort_lines<T: SortKey>(values: &[T], len: usize, values_too: bool) -> (Vec<i64>, Vec<T>) {
    let mut order = Vec::with_capacity(values.len());
    let mut sorted = Vec::with_capacity(if values_too { values.len() } else { 0 });
    if len == 0 {
        return (order, sorted);
    }
    for line in values.chunks(len) {
        let mut idx: Vec<usize> = (0..line.len()).collect();
        idx.sort_by(|&i, &j| T::order(&line[i], &line[j]));
        if values_too {
            sorted.extend(idx.iter().map(|&i| line[i]));
        }
        order.extend(idx.into_iter().map(|i| i as i64));
    }
    (order, sorted)
}

/// `work`'s lines of `len` sorted on the host as `T` (its dtype): each line's order, and the
/// sorted elements uploaded in `shape` when `values_too`.
fn sorted_as<T: SortKey>(
    work: &Array,
    shape: &[u64],
    len: usize,
    values_too: bool,
) -> Result<(Vec<i64>, Option<Array>)> {
    let (order, sorted) = sort_lines(&work.to_vec_of::<T>()?, len, values_too);
    Ok((
        order,
        values_too.then(|| work.np.from_slice(shape, &sorted)),
    ))
}

/// What [`Array::sorted`] gives: per line, the stable order, or the sorted elements.
enum Sorted {
    Order,
    Values,
}

impl Array {
    /// This array with `axis` moved last and made contiguous, and the permutation that moves
    /// it back (`None` when `axis` is already last).
    fn axis_last(&self, axis: usize, rank: usize) -> (Array, Option<Vec<u32>>) {
        if axis + 1 == rank {
            return (self.copy(), None);
        }
        let mut to_last: Vec<u32> = (0..rank as u32).filter(|&d| d != axis as u32).collect();
        to_last.push(axis as u32);
        let mut back = vec![0u32; rank];
        for (i, &d) in to_last.iter().enumerate() {
            back[d as usize] = i as u32;
        }
        (self.permute(&to_last).copy(), Some(back))
    }

    /// The array (flattened when `axis` is `None`) with its lines along `axis` moved last,
    /// each line's stable order or its sorted elements (`what`), put back in place.
    fn sorted(&self, op: &str, axis: Option<i64>, what: Sorted) -> Result<Array> {
        let shape = self.shape()?;
        let (work, back) = match axis {
            None => (self.reshape(&[-1]).copy(), None),
            Some(a) => {
                if shape.is_empty() {
                    return Err(Error::Usage(format!(
                        "numeric.{op}: axis {a} is out of bounds for array of dimension 0"
                    )));
                }
                let d = normalize_axis(a, shape.len())?;
                self.axis_last(d, shape.len())
            }
        };
        let wshape = work.shape()?;
        let len = wshape.last().copied().unwrap_or(1) as usize;
        let values = matches!(what, Sorted::Values);
        let np = &self.np;
        let (order, sorted) = match work.dtype()? {
            DType::F64 => sorted_as::<f64>(&work, &wshape, len, values)?,
            DType::F32 => sorted_as::<f32>(&work, &wshape, len, values)?,
            DType::I64 => sorted_as::<i64>(&work, &wshape, len, values)?,
            DType::I32 => sorted_as::<i32>(&work, &wshape, len, values)?,
            DType::Bool => sorted_as::<bool>(&work, &wshape, len, values)?,
        };
        let result = match sorted {
            Some(sorted) => sorted,
            None => np.from_slice(&wshape, &order),
        };
        result.check()?;
        Ok(match back {
            Some(p) => result.permute(&p).copy(),
            None => result,
        })
    }

    /// A sorted copy along `axis` (`None`: of the flattened array), as NumPy's `sort`
    /// (`np.sort(a)` sorts along the last axis: pass `Some(-1)`). NaN sorts last.
    #[track_caller]
    pub fn sort(&self, axis: Option<i64>) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.sorted("sort", axis, Sorted::Values)
    }

    /// The positions (`int64`) that sort each line along `axis` (`None`: the flattened
    /// array), as NumPy's `argsort` with `kind="stable"`: equal elements keep their order,
    /// NaN sorts last.
    #[track_caller]
    pub fn argsort(&self, axis: Option<i64>) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.sorted("argsort", axis, Sorted::Order)
    }

    /// The sorted distinct elements of the flattened array, as NumPy's `unique` (NaNs count
    /// as one, last, as NumPy 2's `equal_nan=True`).
    #[track_caller]
    pub fn unique(&self) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let sorted = self.sort(None)?;
        let n = sorted.shape()?.first().copied().unwrap_or(0) as i64;
        if n <= 1 {
            return Ok(sorted);
        }
        // An element is kept where it differs from the one before it (NaN after NaN does
        // not differ).
        let head = sorted.index(&[super::Ix::Slice(super::Range::new(1, n))]);
        let before = sorted.index(&[super::Ix::Slice(super::Range::new(0, n - 1))]);
        let both_nan = head.ne(&head) & before.ne(&before);
        let differs = head.ne(&before) & !&both_nan;
        let first = self.np.from_slice(&[1], &[true]);
        let keep = self.np.concatenate(&[&first, &differs], 0);
        sorted.masked(&keep)
    }
}
