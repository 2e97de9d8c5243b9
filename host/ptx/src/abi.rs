//! What a launch passes to an entry, and the faults an entry reports.
//!
//! Every entry of a module takes the same parameters, in this order:
//! - `fault` (`.u64`): the address of a 32-bit word, zero before the launch. A thread whose
//!   index check fails writes its [`FaultSite`]'s code there if the word is still zero (so
//!   the first fault wins) and stops.
//! - for each kernel parameter `i`, in order:
//!   - a store of rank `r`: `p{i}_ptr` (`.u64`, the byte address of the sub-store's element at
//!     index 0 in every dimension), then `p{i}_e{d}` (its extents), `p{i}_s{d}` (its strides,
//!     in elements) and `p{i}_o{d}` (the global coordinates of its origin), each `.s64`, for
//!     `d` in `0..r`;
//!   - a scalar: `p{i}` (`.u64`), its bits as [`weft_ir::Scalar::to_bits`] gives them;
//! - then, for an entry whose loop sums or multiplies floats into 0-d stores, one leaf
//!   buffer `leaf_p{i}` (`.u64`) per such store, in the order of [`crate::emit::Entry::leaves`];
//! - then, for an entry with element trees, `units_head` and `units_whole_end` (`.s64`) and
//!   one tree buffer `tree_p{i}` (`.u64`) per tree, in the order of
//!   [`crate::emit::Entry::trees`].

use weft_ir::Param;

/// One parameter of an entry, as the launcher fills it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbiParam {
    /// The fault word's address.
    Fault,
    /// The address of store parameter `param`'s element at index 0.
    Pointer {
        /// The kernel parameter.
        param: u32,
    },
    /// An extent of a store parameter's sub-store.
    Extent {
        /// The kernel parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// A stride, in elements.
    Stride {
        /// The kernel parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// A coordinate of the sub-store's origin.
    Origin {
        /// The kernel parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// A scalar parameter's bits.
    Scalar {
        /// The kernel parameter.
        param: u32,
    },
    /// The leaf buffer of a float sum or product into 0-d store parameter `param` (only the
    /// entries whose loop makes one take it; see [`crate::emit::Leaf`]).
    Leaf {
        /// The kernel parameter reduced into.
        param: u32,
    },
    /// For an entry with element trees: the loose points before the first whole block.
    UnitsHead,
    /// For an entry with element trees: the local index where the whole blocks end.
    UnitsWholeEnd,
    /// The tree buffer of an element tree into store parameter `param` (see
    /// [`crate::emit::Entry::trees`]).
    Tree {
        /// The kernel parameter reduced into.
        param: u32,
    },
}

impl AbiParam {
    /// The parameter's name in the PTX text.
    pub fn name(self) -> String {
        match self {
            AbiParam::Fault => "fault".to_string(),
            AbiParam::Pointer { param } => format!("p{param}_ptr"),
            AbiParam::Extent { param, dim } => format!("p{param}_e{dim}"),
            AbiParam::Stride { param, dim } => format!("p{param}_s{dim}"),
            AbiParam::Origin { param, dim } => format!("p{param}_o{dim}"),
            AbiParam::Scalar { param } => format!("p{param}"),
            AbiParam::Leaf { param } => format!("leaf_p{param}"),
            AbiParam::UnitsHead => "units_head".to_string(),
            AbiParam::UnitsWholeEnd => "units_whole_end".to_string(),
            AbiParam::Tree { param } => format!("tree_p{param}"),
        }
    }

    /// The parameter's PTX type.
    pub fn ptx_type(self) -> &'static str {
        match self {
            AbiParam::Fault
            | AbiParam::Pointer { .. }
            | AbiParam::Scalar { .. }
            | AbiParam::Leaf { .. }
            | AbiParam::Tree { .. } => "u64",
            AbiParam::Extent { .. }
            | AbiParam::Stride { .. }
            | AbiParam::Origin { .. }
            | AbiParam::UnitsHead
            | AbiParam::UnitsWholeEnd => "s64",
        }
    }
}

/// The parameters every entry of the module of a kernel with parameters `params` takes, in
/// order (see the module documentation; an entry with leaves takes those after them).
pub fn params_of(params: &[Param]) -> Vec<AbiParam> {
    let mut out = vec![AbiParam::Fault];
    for (i, p) in params.iter().enumerate() {
        let param = u32::try_from(i).unwrap_or(u32::MAX);
        match *p {
            Param::Store { rank, .. } => {
                out.push(AbiParam::Pointer { param });
                for make in [
                    (|param, dim| AbiParam::Extent { param, dim }) as fn(u32, u32) -> AbiParam,
                    |param, dim| AbiParam::Stride { param, dim },
                    |param, dim| AbiParam::Origin { param, dim },
                ] {
                    out.extend((0..rank).map(|dim| make(param, dim)));
                }
            }
            Param::Scalar { .. } => out.push(AbiParam::Scalar { param }),
        }
    }
    out
}

/// The fault word's value when the host stopped a launch at the kernel time limit: every
/// `for` loop that no store bounds reads the word on its back edge and stops its thread once
/// the word is set (see [`weft_ir::coverage::bounded_by_a_store`]).
pub const CANCELLED: u32 = u32::MAX;

/// An index check of an entry: which access failed. Its code in the fault word is its
/// position in [`crate::Module::faults`] plus one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FaultSite {
    /// The store parameter accessed.
    pub param: u32,
    /// The dimension whose index was out of range.
    pub dim: u32,
    /// What the access was.
    pub access: AccessKind,
}

/// The kind of a checked access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A load.
    Load,
    /// A store.
    Store,
    /// A reduction.
    Reduce,
}

impl std::fmt::Display for FaultSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.access {
            AccessKind::Load => "load",
            AccessKind::Store => "store",
            AccessKind::Reduce => "reduction",
        };
        write!(
            f,
            "index out of bounds: {what} through parameter {}, dimension {}",
            self.param, self.dim
        )
    }
}
