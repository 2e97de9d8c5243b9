//! Sorting (NumPy's `sort`, `argsort` and `unique`) as tasks: the lines along the axis are
//! moved last and made contiguous, and the numeric plugin's `sort-rows` sorts every line by a
//! stable merge sort on the back end (`ceil(log2 n)` tasks for lines of `n`, each merging
//! pairs of sorted runs, every point one chunk of the output; see
//! `plugins/numeric/src/ops/sorting.rs`), in NumPy's order: NaN after every number, `-0.0`
//! and `0.0` equal, so they keep their order. `argsort` is stable (NumPy's
//! `kind="stable"`: equal elements keep their order; NumPy's default quicksort may order
//! them otherwise). Nothing is read on the host.

use super::Array;
use super::search::normalize_axis;
use crate::{Error, Result};

/// What [`Array::sorted`] gives: per line, the stable order, or the sorted elements.
#[derive(Clone, Copy)]
enum Sorted {
    Order,
    Values,
}

impl Array {
    /// This array with `axis` moved last (a copy, contiguous, when it moves), and the
    /// permutation that moves it back (`None` when `axis` is already last).
    fn axis_last(&self, axis: usize, rank: usize) -> (Array, Option<Vec<u32>>) {
        if axis + 1 == rank {
            return (self.clone(), None);
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
            None => (self.reshape(&[-1]), None),
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
        let len = wshape.last().copied().unwrap_or(1);
        let indices = matches!(what, Sorted::Order);
        let result = if wshape.contains(&0) {
            if indices {
                self.np.zeros(&wshape, weft_ir::DType::I64)
            } else {
                work.copy()
            }
        } else {
            let rows = work.reshape(&[-1, len as i64]);
            let key = super::replayed::CallKey::new("sort-rows").word(u64::from(indices));
            let sorted = rows.derive_replayed(op, key, &[], |g, s, id| {
                let a = s.data_mut().lend(id)?;
                g.call_sort_rows(s, a, indices)
            });
            let wide: Vec<i64> = wshape.iter().map(|&d| d as i64).collect();
            sorted.reshape(&wide)
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
        let (sorted, keep) = self.sorted_and_firsts()?;
        match keep {
            Some(keep) => sorted.masked(&keep),
            None => Ok(sorted),
        }
    }

    /// The sorted distinct elements of the flattened array and how many times each occurs
    /// (`int64`), as NumPy's `unique(a, return_counts=True)`: the positions where each run of
    /// equal elements starts in the sorted array (one count read for their number), and the
    /// differences between them, as tasks.
    #[track_caller]
    pub fn unique_counts(&self) -> Result<(Array, Array)> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let (sorted, keep) = self.sorted_and_firsts()?;
        let n = sorted.shape()?.first().copied().unwrap_or(0);
        let Some(keep) = keep else {
            return Ok((sorted, self.np.ones(&[n], weft_ir::DType::I64)));
        };
        let starts = keep.flatnonzero();
        let runs = starts.shape()?.first().copied().unwrap_or(0) as i64;
        let end = self.np.from_slice(&[1], &[n as i64]);
        let next = self.np.concatenate(
            &[
                &starts.index(&[super::Ix::Slice(super::Range::new(1, runs))]),
                &end,
            ],
            0,
        );
        let counts = &next - &starts;
        Ok((sorted.masked(&keep)?, counts))
    }

    /// The flattened array sorted, and (for more than one element) whether each element
    /// starts a run of equal ones: it differs from the one before it (NaN after NaN does not).
    fn sorted_and_firsts(&self) -> Result<(Array, Option<Array>)> {
        let sorted = self.sort(None)?;
        let n = sorted.shape()?.first().copied().unwrap_or(0) as i64;
        if n <= 1 {
            return Ok((sorted, None));
        }
        let head = sorted.index(&[super::Ix::Slice(super::Range::new(1, n))]);
        let before = sorted.index(&[super::Ix::Slice(super::Range::new(0, n - 1))]);
        let both_nan = head.ne(&head) & before.ne(&before);
        let differs = head.ne(&before) & !&both_nan;
        let first = self.np.from_slice(&[1], &[true]);
        let keep = self.np.concatenate(&[&first, &differs], 0);
        Ok((sorted, Some(keep)))
    }
}
