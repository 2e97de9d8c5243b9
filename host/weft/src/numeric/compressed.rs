//! Boolean compressions carried out late.
//!
//! NumPy programs update the elements a mask selects by compressing, computing and assigning
//! back: `z[m] = z[m] ** 2 + c[m]`. Done literally, each compression counts the mask on the
//! host (a wait for every task before it) and gathers, and the assignment counts again and
//! scatters. [`Array::masked`] instead returns an array that *stands for* `full[mask]` without
//! compressing: `full` is a copy of the source at its full shape, and the mask is kept as it
//! was. Element-wise operations between such arrays through the same mask (and scalars) run on
//! the full shape and stay deferred; an assignment through that same mask
//! ([`Array::assign_masked`]) becomes `where(mask, full, self)`, one element-wise task that
//! fuses with the rest. Anything else that needs the array's store (its shape, a reduction,
//! a read, an operand beside an ordinary array) compresses it then, once.
//!
//! Computing at the positions the mask leaves out is safe because element-wise operations of
//! the kernel IR are total: none traps or errs on any value (integer division by zero gives
//! 0; floats give infinities and NaNs), and those values are never read.

use std::cell::OnceCell;
use std::rc::Rc;

use weft_runtime::{StoreHandle, StoreId};

use weft_ir::DType;

use super::{Array, BinaryOp, Operand, Reduction, Slot};
use crate::{Error, Result};

/// What identifies a mask's elements: its store and that store's write stamp (see
/// [`super::search::MaskPositions`]). Two deferred compressions with one key select the same
/// positions.
pub(crate) type MaskKey = (StoreId, (u64, u64));

/// The last mask kept for deferred compressions: a copy, so that a later write to the mask
/// does not change what earlier compressions selected. Compressing several arrays through one
/// mask (`z[m]`, `c[m]`) copies it once.
pub(crate) struct MaskSnapshot {
    key: MaskKey,
    copy: StoreHandle,
}

/// `full[mask]`, not yet compressed.
pub(crate) struct Compressed {
    /// The values at the mask's shape; the array's elements are those where the mask is true.
    full: Array,
    /// The mask as it was when the first compression through it was asked for.
    mask: Array,
    /// The mask's identity then.
    key: MaskKey,
    /// The compressed store, made the first time it is needed.
    done: OnceCell<std::result::Result<StoreHandle, Rc<Error>>>,
}

impl Compressed {
    /// The values at the mask's full shape (their dtype is the compression's).
    pub(super) fn full(&self) -> &Array {
        &self.full
    }

    /// The identity of the mask this compression is through.
    pub(super) fn key(&self) -> MaskKey {
        self.key
    }

    /// The compressed store (or the error that compressing gave), made on the first call.
    pub(super) fn value(&self) -> &std::result::Result<StoreHandle, Rc<Error>> {
        self.done.get_or_init(|| {
            let positions = self
                .full
                .mask_positions("numeric.masked", &self.mask)
                .map_err(Rc::new)?;
            self.full.gather_flat(&positions).value().clone()
        })
    }
}

impl Array {
    /// `self[mask]`: the elements where `mask` (a bool array of this shape) is true, in
    /// row-major order, as a 1-d array (NumPy's boolean indexing, a copy). The compression is
    /// deferred (see this module): `z[m]` used only element-wise and assigned back through
    /// `m` never compresses.
    #[track_caller]
    pub fn masked(&self, mask: &Array) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.check_mask("numeric.masked", mask)?;
        let key = self.mask_key(mask)?;
        let kept = self
            .np
            .inner
            .mask_snapshot
            .borrow()
            .as_ref()
            .filter(|s| s.key == key)
            .map(|s| s.copy.clone());
        let copy = match kept {
            Some(copy) => copy,
            None => {
                let copy = mask.copy().handle()?.clone();
                *self.np.inner.mask_snapshot.borrow_mut() = Some(MaskSnapshot {
                    key,
                    copy: copy.clone(),
                });
                copy
            }
        };
        let full = self.copy();
        full.check()?;
        Ok(Array {
            np: self.np.clone(),
            slot: Slot::Compressed(Rc::new(Compressed {
                full,
                mask: Array {
                    np: self.np.clone(),
                    slot: Slot::Ready(Ok(copy)),
                },
                key,
                done: OnceCell::new(),
            })),
        })
    }

    /// The identity of `mask`'s elements now.
    pub(super) fn mask_key(&self, mask: &Array) -> Result<MaskKey> {
        let handle = mask.handle()?;
        let stamp = self.np.inner.rt.borrow_mut().write_stamp(handle)?;
        Ok((handle.id(), stamp))
    }

    /// The deferred compression this array stands for, if it is one not yet carried out.
    pub(super) fn deferred(&self) -> Option<&Rc<Compressed>> {
        match &self.slot {
            Slot::Compressed(c) if c.done.get().is_none() => Some(c),
            _ => None,
        }
    }

    /// `full` compressed through `like`'s mask.
    fn deferred_as(&self, like: &Compressed, full: Array) -> Array {
        Array {
            np: self.np.clone(),
            slot: Slot::Compressed(Rc::new(Compressed {
                full,
                mask: like.mask.clone(),
                key: like.key,
                done: OnceCell::new(),
            })),
        }
    }

    /// `self op other` on the full shape, where `self` is a deferred compression and `other`
    /// a scalar or one through the same mask; `None` otherwise.
    pub(super) fn deferred_binary(&self, op: BinaryOp, other: &Operand<'_>) -> Option<Array> {
        let c = self.deferred()?;
        let other = full_operand(c, other)?;
        Some(self.deferred_as(c, c.full.binary(op, other)))
    }

    /// `scalar op self` on the full shape, where `self` is a deferred compression.
    pub(super) fn deferred_binary_rev(&self, op: BinaryOp, scalar: f64) -> Option<Array> {
        let c = self.deferred()?;
        Some(self.deferred_as(c, c.full.binary_rev(op, scalar)))
    }

    /// `f(full)` through the same mask, where `self` is a deferred compression and `f` an
    /// element-wise operation of one array.
    pub(super) fn deferred_map(&self, f: impl FnOnce(&Array) -> Array) -> Option<Array> {
        let c = self.deferred()?;
        Some(self.deferred_as(c, f(&c.full)))
    }

    /// `self ? a : b` on the full shape, where `self` is a deferred compression and `a`, `b`
    /// scalars or compressions through the same mask.
    pub(super) fn deferred_select(&self, a: &Operand<'_>, b: &Operand<'_>) -> Option<Array> {
        let c = self.deferred()?;
        let (a, b) = (full_operand(c, a)?, full_operand(c, b)?);
        Some(self.deferred_as(c, c.full.select(a, b)))
    }

    /// The sum or product of a deferred compression's elements, `None` for other reductions
    /// or an ordinary array: the reduction of `where(mask, full, identity)` over the full
    /// shape (the identity a Python integer, so the dtype is `full`'s), in the canonical
    /// order of that shape, with no count read.
    pub(super) fn deferred_reduce(&self, op: Reduction) -> Option<Array> {
        let identity = match op {
            Reduction::Sum => 0,
            Reduction::Prod => 1,
            _ => return None,
        };
        let c = self.deferred()?;
        Some(c.mask.select(&c.full, Operand::Int(identity)).reduce(op))
    }

    /// The mean of a deferred compression's elements (`None` for an ordinary array): its sum
    /// ([`Array::deferred_reduce`]; integers summed as NumPy's `mean` sums them, unsigned
    /// ones in `float64`) over the mask's count, both reductions of one pass. A float sum
    /// keeps its dtype; an integer one gives `float64`.
    pub(super) fn deferred_mean(&self) -> Option<Array> {
        let c = self.deferred()?;
        let dtype = c.full.dtype().ok()?;
        let full = if dtype.is_unsigned() {
            c.full.astype(DType::F64)
        } else {
            c.full.clone()
        };
        let total = c.mask.select(&full, Operand::Int(0)).reduce(Reduction::Sum);
        let count = c.mask.astype(DType::I64).reduce(Reduction::Sum);
        Some(match total.dtype().ok()? {
            float @ (DType::F32 | DType::F64) => &total / &count.astype(float),
            _ => &total.astype(DType::F64) / &count.astype(DType::F64),
        })
    }

    /// `self[mask] = values` without compressing, where `values` is a deferred compression
    /// through `mask` as it is now: `where(mask, full, self)`. `None` otherwise. The caller
    /// has checked `mask` against this array.
    pub(super) fn assign_deferred(&self, mask: &Array, values: &Array) -> Result<Option<()>> {
        let Some(c) = values.deferred() else {
            return Ok(None);
        };
        if c.key != self.mask_key(mask)? {
            return Ok(None);
        }
        self.assign_where(mask, &c.full).map(Some)
    }
}

/// `o` on the full shape of `c`'s mask: a scalar as it is, a compression through the same mask
/// as its full values; `None` for anything else.
fn full_operand<'a>(c: &Compressed, o: &Operand<'a>) -> Option<Operand<'a>> {
    match o {
        Operand::Array(x) => {
            let d = x.deferred().filter(|d| d.key == c.key)?;
            Some(Operand::Array(&d.full))
        }
        scalar => Some(scalar.clone()),
    }
}
