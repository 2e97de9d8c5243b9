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

use std::cell::{OnceCell, RefCell};
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
    /// The values at the mask's shape (the array's elements are those where the mask is
    /// true) and the mask as it was when the first compression through it was asked for:
    /// dropped once compressed, so that a small compression of a large array holds nothing
    /// of it after.
    parts: RefCell<Option<Parts>>,
    /// The dtype of the values.
    dtype: Result<DType>,
    /// The mask's identity then.
    key: MaskKey,
    /// The compressed store, made the first time it is needed.
    done: OnceCell<std::result::Result<StoreHandle, Rc<Error>>>,
}

/// A deferred compression's values at the full shape, and its mask.
#[derive(Clone)]
pub(super) struct Parts {
    /// The values at the mask's shape.
    pub(super) full: Array,
    /// The mask.
    pub(super) mask: Array,
}

impl Compressed {
    fn new(full: Array, mask: Array, key: MaskKey) -> Compressed {
        Compressed {
            dtype: full.dtype(),
            parts: RefCell::new(Some(Parts { full, mask })),
            key,
            done: OnceCell::new(),
        }
    }

    /// The dtype of the compression (its values'), known without compressing.
    pub(super) fn dtype(&self) -> Result<DType> {
        match &self.dtype {
            Ok(d) => Ok(*d),
            Err(e) => Err(Error::Usage(e.to_string())),
        }
    }

    /// The identity of the mask this compression is through.
    pub(super) fn key(&self) -> MaskKey {
        self.key
    }

    /// The values and the mask, while not yet compressed.
    pub(super) fn parts(&self) -> Option<Parts> {
        self.parts.borrow().clone()
    }

    /// The error that poisoned the values or the mask, found without compressing.
    pub(super) fn check(&self) -> Result<()> {
        match self.parts() {
            Some(p) => p.full.check().and(p.mask.check()),
            None => Ok(()),
        }
    }

    /// The compressed store (or the error that compressing gave), made on the first call;
    /// the values and the mask are let go then.
    pub(super) fn value(&self) -> &std::result::Result<StoreHandle, Rc<Error>> {
        self.done.get_or_init(|| {
            let Parts { full, mask } = self.parts.borrow_mut().take().ok_or_else(|| {
                Rc::new(Error::Usage(
                    "internal: a compression without its values".into(),
                ))
            })?;
            let positions = full
                .mask_positions("numeric.masked", &mask)
                .map_err(Rc::new)?;
            full.gather_flat(&positions).value().clone()
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
        let mask = Array {
            np: self.np.clone(),
            slot: Slot::Ready(Ok(copy)),
        };
        Ok(Array {
            np: self.np.clone(),
            slot: Slot::Compressed(Rc::new(Compressed::new(full, mask, key))),
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

    /// The values and mask of the compression this array stands for, not yet carried out.
    fn deferred_parts(&self) -> Option<(MaskKey, Parts)> {
        let c = self.deferred()?;
        Some((c.key, c.parts()?))
    }

    /// `full` compressed through `mask` (of identity `key`).
    fn deferred_as(&self, key: MaskKey, mask: Array, full: Array) -> Array {
        Array {
            np: self.np.clone(),
            slot: Slot::Compressed(Rc::new(Compressed::new(full, mask, key))),
        }
    }

    /// `self op other` on the full shape, where `self` is a deferred compression and `other`
    /// a scalar or one through the same mask; `None` otherwise. Tasks and errors name the
    /// application's line.
    #[track_caller]
    pub(super) fn deferred_binary(&self, op: BinaryOp, other: &Operand<'_>) -> Option<Array> {
        let (key, p) = self.deferred_parts()?;
        let other_full = full_operand(key, other)?;
        let _site = self.np.site_guard(std::panic::Location::caller());
        let full = p.full.binary(op, other_full.as_operand());
        Some(self.deferred_as(key, p.mask, full))
    }

    /// `scalar op self` on the full shape, where `self` is a deferred compression.
    #[track_caller]
    pub(super) fn deferred_binary_rev(&self, op: BinaryOp, scalar: f64) -> Option<Array> {
        let (key, p) = self.deferred_parts()?;
        let _site = self.np.site_guard(std::panic::Location::caller());
        let full = p.full.binary_rev(op, scalar);
        Some(self.deferred_as(key, p.mask, full))
    }

    /// `f(full)` through the same mask, where `self` is a deferred compression and `f` an
    /// element-wise operation of one array.
    #[track_caller]
    pub(super) fn deferred_map(&self, f: impl FnOnce(&Array) -> Array) -> Option<Array> {
        let (key, p) = self.deferred_parts()?;
        let _site = self.np.site_guard(std::panic::Location::caller());
        let full = f(&p.full);
        Some(self.deferred_as(key, p.mask, full))
    }

    /// `self ? a : b` on the full shape, where `self` is a deferred compression and `a`, `b`
    /// scalars or compressions through the same mask.
    #[track_caller]
    pub(super) fn deferred_select(&self, a: &Operand<'_>, b: &Operand<'_>) -> Option<Array> {
        let (key, p) = self.deferred_parts()?;
        let (a, b) = (full_operand(key, a)?, full_operand(key, b)?);
        let _site = self.np.site_guard(std::panic::Location::caller());
        let full = p.full.select(a.as_operand(), b.as_operand());
        Some(self.deferred_as(key, p.mask, full))
    }

    /// The sum or product of a deferred compression's elements, `None` for other reductions
    /// or an ordinary array: the reduction of `where(mask, full, identity)` over the full
    /// shape (the identity a Python integer, so the dtype is `full`'s), in the canonical
    /// order of that shape, with no count read. Its bits can differ from the sum of the
    /// compressed elements (the pairs of the canonical order are formed over the full shape),
    /// but not between threads, pieces or ranks.
    #[track_caller]
    pub(super) fn deferred_reduce(&self, op: Reduction) -> Option<Array> {
        let identity = match op {
            Reduction::Sum => 0,
            Reduction::Prod => 1,
            _ => return None,
        };
        let (_, p) = self.deferred_parts()?;
        let _site = self.np.site_guard(std::panic::Location::caller());
        Some(p.mask.select(&p.full, Operand::Int(identity)).reduce(op))
    }

    /// The mean of a deferred compression's elements (`None` for an ordinary array): its sum
    /// ([`Array::deferred_reduce`]; anything but floats summed in `float64`, as NumPy's
    /// `mean` accumulates them) over the mask's count, both reductions of one pass. A float
    /// sum keeps its dtype; anything else gives `float64`.
    #[track_caller]
    pub(super) fn deferred_mean(&self) -> Option<Array> {
        let (_, p) = self.deferred_parts()?;
        let _site = self.np.site_guard(std::panic::Location::caller());
        let dtype = p.full.dtype().ok()?;
        let float = matches!(dtype, DType::F32 | DType::F64);
        let full = if float {
            p.full.clone()
        } else {
            p.full.astype(DType::F64)
        };
        let total = p.mask.select(&full, Operand::Int(0)).reduce(Reduction::Sum);
        let count = p.mask.astype(DType::I64).reduce(Reduction::Sum);
        let float = if float { dtype } else { DType::F64 };
        Some(&total / &count.astype(float))
    }

    /// `self[mask] = values` without compressing, where `values` is a deferred compression
    /// through `mask` as it is now: `where(mask, full, self)`. `None` otherwise. The caller
    /// has checked `mask` against this array.
    pub(super) fn assign_deferred(&self, mask: &Array, values: &Array) -> Result<Option<()>> {
        let Some((key, p)) = values.deferred_parts() else {
            return Ok(None);
        };
        if key != self.mask_key(mask)? {
            return Ok(None);
        }
        self.assign_where(mask, &p.full).map(Some)
    }
}

/// An operand on the full shape: a scalar, or the values of a compression.
enum FullOperand<'a> {
    Scalar(Operand<'a>),
    Values(Array),
}

impl FullOperand<'_> {
    fn as_operand(&self) -> Operand<'_> {
        match self {
            FullOperand::Scalar(o) => o.clone(),
            FullOperand::Values(a) => Operand::Array(a),
        }
    }
}

/// `o` on the full shape of the mask of identity `key`: a scalar as it is, a compression
/// through the same mask as its full values; `None` for anything else.
fn full_operand<'a>(key: MaskKey, o: &Operand<'a>) -> Option<FullOperand<'a>> {
    match o {
        Operand::Array(x) => {
            let (k, p) = x.deferred_parts()?;
            (k == key).then_some(FullOperand::Values(p.full))
        }
        scalar => Some(FullOperand::Scalar(scalar.clone())),
    }
}
