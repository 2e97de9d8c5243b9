//! The frame: where each kernel parameter lives in it ([`Layout`]), and the registers a
//! function loads from it (frame words, the views of the stores it accesses).

use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};
use weft_ir::{DType, Kernel, Param, Privilege};

use super::reduce::RedMode;
use super::{FnLower, LResult, View, cl_type, frame_flags};

/// The largest store rank the back end accepts: the IR's.
use weft_ir::semantics::MAX_RANK;

/// Where a store parameter lives in the frame.
///
/// Words from `off`: the data pointer; `rank` extents; `rank` strides in bytes; `rank` origins;
/// `rank` dense strides in bytes (of the row-major layout of the extents, used by reduction
/// buffers).
#[derive(Clone, Debug)]
pub(crate) struct StoreSlot {
    /// Index of the parameter in `Kernel::params`.
    pub param: u32,
    pub dtype: DType,
    pub rank: usize,
    pub privilege: Privilege,
    pub off: usize,
    /// A hidden store private to each chunk of its loop, dense, that aliases no other store
    /// (a leaf store of [`crate::leaves`]).
    pub private: bool,
}

impl StoreSlot {
    pub(crate) fn ptr(&self) -> usize {
        self.off
    }
    pub(crate) fn extent(&self, d: usize) -> usize {
        self.off + 1 + d
    }
    pub(crate) fn stride(&self, d: usize) -> usize {
        self.off + 1 + self.rank + d
    }
    pub(crate) fn origin(&self, d: usize) -> usize {
        self.off + 1 + 2 * self.rank + d
    }
    pub(crate) fn dense_stride(&self, d: usize) -> usize {
        self.off + 1 + 3 * self.rank + d
    }
    /// Number of frame words.
    fn words(rank: usize) -> usize {
        1 + 4 * rank
    }
}

/// Where a scalar parameter lives in the frame (one word, the value's bits).
#[derive(Clone, Debug)]
pub(crate) struct ScalarSlot {
    /// Index of the parameter in `Kernel::params`.
    pub param: u32,
    pub dtype: DType,
    pub off: usize,
}

/// A kernel parameter's slot.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    /// Index into [`Layout::stores`].
    Store(usize),
    /// Index into [`Layout::scalars`].
    Scalar(usize),
}

/// The frame layout of a kernel: stores, then scalars, then spill slots.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub stores: Vec<StoreSlot>,
    pub scalars: Vec<ScalarSlot>,
    /// One per kernel parameter.
    pub slots: Vec<Slot>,
    /// Total number of words.
    pub frame_len: usize,
}

impl Layout {
    pub(super) fn new(kernel: &Kernel) -> LResult<Layout> {
        let mut stores = Vec::new();
        let mut scalars = Vec::new();
        let mut slots = Vec::new();
        let mut off = 0usize;
        for (i, p) in kernel.params.iter().enumerate() {
            let param = u32::try_from(i).map_err(|_| "too many parameters".to_string())?;
            match *p {
                Param::Store {
                    dtype,
                    rank,
                    privilege,
                } => {
                    if rank > MAX_RANK {
                        return Err(format!(
                            "store parameter {i} has rank {rank}; the CPU back end supports at \
                             most {MAX_RANK}"
                        ));
                    }
                    let rank = rank as usize;
                    slots.push(Slot::Store(stores.len()));
                    stores.push(StoreSlot {
                        param,
                        dtype,
                        rank,
                        privilege,
                        off,
                        private: false,
                    });
                    off += StoreSlot::words(rank);
                }
                Param::Scalar { dtype } => {
                    slots.push(Slot::Scalar(scalars.len()));
                    scalars.push(ScalarSlot { param, dtype, off });
                    off += 1;
                }
            }
        }
        Ok(Layout {
            stores,
            scalars,
            slots,
            frame_len: off,
        })
    }

    pub(super) fn store(&self, param: u32) -> LResult<(usize, &StoreSlot)> {
        match self.slots.get(param as usize) {
            Some(Slot::Store(s)) => Ok((*s, &self.stores[*s])),
            Some(Slot::Scalar(_)) => Err(format!("parameter {param} is a scalar, not a store")),
            None => Err(format!("no parameter {param}")),
        }
    }
}

impl FnLower<'_, '_> {
    pub(super) fn frame_word(&mut self, ty: Type, word: usize) -> Value {
        // A store's words and the scalars never change while a function runs (only spill
        // words do, and those are read elsewhere): Cranelift may move the load out of loops.
        self.b.ins().load(
            ty,
            frame_flags().with_can_move(),
            self.frame,
            (word * 8) as i32,
        )
    }

    /// Loads the registers of store parameter `param` for the accesses of this function.
    pub(super) fn load_view(&mut self, param: u32, red: Option<(usize, RedMode)>) -> LResult<()> {
        let (_, slot) = self.layout.store(param)?;
        let slot = slot.clone();
        let ext: Vec<Value> = (0..slot.rank)
            .map(|d| self.frame_word(types::I64, slot.extent(d)))
            .collect();
        let view = match red {
            None => View {
                base: self.frame_word(self.ptr_ty, slot.ptr()),
                stride: (0..slot.rank)
                    .map(|d| self.frame_word(types::I64, slot.stride(d)))
                    .collect(),
                ext,
                acc: None,
                unit_inner: false,
                private: slot.private,
            },
            Some((i, RedMode::Buffer)) => View {
                base: self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32),
                stride: (0..slot.rank)
                    .map(|d| self.frame_word(types::I64, slot.dense_stride(d)))
                    .collect(),
                ext,
                acc: None,
                unit_inner: false,
                private: true,
            },
            Some((i, RedMode::Register)) => {
                let Privilege::Reduce(op) = slot.privilege else {
                    return Err(format!("store parameter {param} is not a reduction target"));
                };
                let var = self.b.declare_var(cl_type(slot.dtype));
                // The accumulator starts from the one-element buffer, which the launcher fills
                // with the identity for each chunk: a chunk run in several calls (as with
                // leaf stores) carries it from call to call. Register accumulators are exact
                // operators, so the order of the calls' partials does not change the bits.
                let ptr = self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32);
                let first = self
                    .b
                    .ins()
                    .load(cl_type(slot.dtype), MemFlagsData::trusted(), ptr, 0);
                self.b.def_var(var, first);
                let id = self.constant(op.identity(slot.dtype));
                View {
                    base: id,
                    stride: vec![],
                    ext,
                    acc: Some(var),
                    unit_inner: false,
                    private: true,
                }
            }
        };
        self.views.insert(param, view);
        Ok(())
    }
}
