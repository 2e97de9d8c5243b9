//! The entries of NumPy's basic indexing (`a[1:-1, 0]`), as the `weft` crate and the guest
//! crate `weft-app` give them to applications, and as the `numeric` interface's `range` and
//! `subscript` carry them.

/// A slice `start:stop:step` of one dimension, as in NumPy: `None` bounds are open (in the
/// step's direction), negative ones count from the end, and the step (1 when `None`) may be
/// negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    /// First index.
    pub start: Option<i64>,
    /// Where to stop (not included).
    pub stop: Option<i64>,
    /// The step.
    pub step: Option<i64>,
}

impl Range {
    /// `start:stop`.
    pub fn new(start: i64, stop: i64) -> Range {
        Range {
            start: Some(start),
            stop: Some(stop),
            step: None,
        }
    }

    /// `:` (the whole dimension).
    pub fn all() -> Range {
        Range::default()
    }

    /// `start:` (from `start` to the end).
    pub fn from(start: i64) -> Range {
        Range {
            start: Some(start),
            ..Range::default()
        }
    }

    /// `:stop` (from the start to `stop`).
    pub fn to(stop: i64) -> Range {
        Range {
            stop: Some(stop),
            ..Range::default()
        }
    }

    /// The same range with a step: `Range::all().step(-1)` is `::-1`.
    pub fn step(self, step: i64) -> Range {
        Range {
            step: Some(step),
            ..self
        }
    }
}

/// One entry of NumPy's basic indexing (the `weft` crate's `Array::index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ix {
    /// One position (negative counts from the end); the dimension goes away.
    At(i64),
    /// A slice; the dimension stays.
    Slice(Range),
    /// `np.newaxis`: a new dimension of extent 1.
    NewAxis,
}
