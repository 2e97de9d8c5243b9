//! Words for a launch that stopped on an index out of bounds.
//!
//! Compiled code stops at an out-of-bounds index with a status that names only the store
//! parameter and its dimension (vector code checks whole ranges of indices at once, and
//! knows no single culprit). An error path can afford more: [`index_fault`] runs the same
//! launch again through `weft-ir`'s reference interpreter, on copies of the elements its
//! views reach, and returns the first index the interpreter finds out of bounds, so that a
//! back end can say what NumPy says (`index 7 is out of bounds for axis 0 with size 5`).
//! Nothing is written back. A launch whose views reach more than [`MAX_ELEMENTS`] elements,
//! or that runs past [`MAX_STEPS`] interpreter steps before it stops, is not diagnosed: the
//! back end keeps its own words.

use weft_ir::interp::{self, Arg, OutOfBounds, View};
use weft_ir::{DType, Kernel, Param, Scalar};

use crate::backend::{Backend, Binding, BufferId};

/// The most elements [`index_fault`] copies out of the back end.
pub const MAX_ELEMENTS: u64 = 1 << 22;

/// The most interpreter steps [`index_fault`] spends.
pub const MAX_STEPS: u64 = 1 << 24;

/// The elements of a buffer of `dtype`, decoded from its little-endian bytes.
pub(crate) fn decode(bytes: &[u8], dtype: DType) -> Vec<Scalar> {
    bytes
        .chunks_exact(dtype.size())
        .map(|c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            Scalar::from_bits(dtype, u64::from_le_bytes(word))
        })
        .collect()
}

/// The element types of `kernel`'s store parameters, in order (one per binding).
pub(crate) fn store_dtypes(kernel: &Kernel) -> Vec<DType> {
    kernel
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Store { dtype, .. } => Some(*dtype),
            Param::Scalar { .. } => None,
        })
        .collect()
}

/// The interpreter's arguments, in parameter order: `views` for the store parameters and
/// `scalars` for the scalar ones, each in order.
pub(crate) fn interp_args(kernel: &Kernel, views: Vec<View>, scalars: &[Scalar]) -> Vec<Arg> {
    let (mut views, mut scalars) = (views.into_iter(), scalars.iter());
    kernel
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Store { .. } => views.next().map(Arg::Store),
            Param::Scalar { .. } => scalars.next().map(|&s| Arg::Scalar(s)),
        })
        .collect()
}

/// The interpreter's view of `binding` in storage `storage`, which holds the binding's
/// buffer from element `base` on (a scratch binding's storage is its own, dense); `None`
/// where the offset does not fit.
pub(crate) fn binding_view(binding: &Binding, storage: usize, base: i64) -> Option<View> {
    Some(match binding {
        Binding::Buffer {
            offset,
            extents,
            strides,
            origin,
            ..
        } => View {
            storage,
            offset: i64::try_from(*offset).ok()?.checked_sub(base)?,
            strides: strides.to_vec(),
            extents: extents.to_vec(),
            origin: origin.to_vec(),
        },
        Binding::Scratch {
            extents, origin, ..
        } => {
            let mut view = View::dense(storage, extents);
            view.origin = origin.to_vec();
            view
        }
    })
}

/// The first and last element (from the buffer's start) that a view of `extents` and
/// `strides` at `offset` reaches; `None` for a view with no elements.
fn span(offset: u64, extents: &[i64], strides: &[i64]) -> Option<(i64, i64)> {
    if extents.iter().any(|&e| e <= 0) {
        return None;
    }
    let (mut lo, mut hi) = (i64::try_from(offset).ok()?, i64::try_from(offset).ok()?);
    for (&e, &s) in extents.iter().zip(strides) {
        let reach = (e - 1).checked_mul(s)?;
        if reach < 0 {
            lo = lo.checked_add(reach)?;
        } else {
            hi = hi.checked_add(reach)?;
        }
    }
    Some((lo, hi))
}

/// The first index out of bounds that `kernel`, launched on `bindings` and `scalars`,
/// reaches, found by running it in the reference interpreter on copies of what its views
/// reach in `backend`'s buffers (see the module documentation). `None` where the
/// interpreter finds none, stops for another reason, or the launch is too large.
pub fn index_fault(
    kernel: &Kernel,
    bindings: &[Binding],
    scalars: &[Scalar],
    backend: &mut dyn Backend,
) -> Option<OutOfBounds> {
    let dtypes = store_dtypes(kernel);
    if dtypes.len() != bindings.len() {
        return None;
    }
    // One storage per buffer, covering every element its views reach (views of one
    // buffer alias), and one per deferred or scratch binding.
    struct Source {
        buffer: Option<BufferId>,
        dtype: DType,
        lo: i64,
        hi: i64,
    }
    let mut sources: Vec<Source> = Vec::new();
    let mut placed: Vec<usize> = Vec::new();
    for (binding, &dtype) in bindings.iter().zip(&dtypes) {
        let (buffer, reach) = match binding {
            Binding::Buffer {
                buffer,
                offset,
                extents,
                strides,
                deferred,
                ..
            } => {
                let reach = span(*offset, extents, strides).unwrap_or((0, -1));
                (deferred.is_none().then_some(*buffer), reach)
            }
            Binding::Scratch { extents, .. } => {
                let len: i64 = extents.iter().product();
                sources.push(Source {
                    buffer: None,
                    dtype,
                    lo: 0,
                    hi: len.max(0) - 1,
                });
                placed.push(sources.len() - 1);
                continue;
            }
        };
        let shared = buffer.and_then(|b| {
            sources
                .iter()
                .position(|s| s.buffer == Some(b) && s.dtype == dtype)
        });
        match shared {
            Some(i) if reach.0 <= reach.1 => {
                let s = &mut sources[i];
                if s.lo > s.hi {
                    (s.lo, s.hi) = reach;
                } else {
                    (s.lo, s.hi) = (s.lo.min(reach.0), s.hi.max(reach.1));
                }
                placed.push(i);
            }
            Some(i) => placed.push(i),
            None => {
                let Binding::Buffer { buffer, .. } = binding else {
                    return None;
                };
                // A deferred binding reads nothing of its own (its stores land after the
                // launch), but its buffer holds the view's elements all the same.
                sources.push(Source {
                    buffer: Some(*buffer),
                    dtype,
                    lo: reach.0,
                    hi: reach.1,
                });
                placed.push(sources.len() - 1);
            }
        }
    }
    let total = sources.iter().fold(0i64, |t, s| {
        t.saturating_add(s.hi.saturating_sub(s.lo).saturating_add(1).max(0))
    });
    if u64::try_from(total).map_or(true, |t| t > MAX_ELEMENTS) {
        return None;
    }
    let mut storages = Vec::with_capacity(sources.len());
    for s in &sources {
        let len = usize::try_from((s.hi - s.lo + 1).max(0)).ok()?;
        storages.push(match s.buffer {
            Some(buffer) if len > 0 => {
                let size = s.dtype.size();
                let mut bytes = vec![0u8; len * size];
                let at = u64::try_from(s.lo).ok()? * size as u64;
                backend.read(buffer, at, &mut bytes).ok()?;
                interp::Storage {
                    dtype: s.dtype,
                    data: decode(&bytes, s.dtype),
                }
            }
            _ => interp::Storage::zeros(s.dtype, len),
        });
    }
    let mut views = Vec::with_capacity(bindings.len());
    for (binding, &i) in bindings.iter().zip(&placed) {
        views.push(binding_view(binding, i, sources[i].lo)?);
    }
    let args = interp_args(kernel, views, scalars);
    match interp::run_with_limit(kernel, &args, &mut storages, MAX_STEPS) {
        Err(e) => e.out_of_bounds,
        Ok(()) => None,
    }
}
