//! Vector code for `for` loops whose carried values form *lanes*: the inner loops of row
//! reductions (a `matvec` row, a reduction over the last dimension of a store) written in the
//! form `weft_ir::builder::BodyBuilder::fold_lanes` emits.
//!
//! A loop qualifies when its `K` carried values split into groups of `L` consecutive ones (`L`
//! the lanes of a 128-bit vector of their type, `K` a multiple of `L`) and, for each group,
//! the `L` yielded values are computed by *isomorphic* expressions: the same operations, lane
//! `l` reading carried value `g L + l`, values the lanes share, constants, and elements of a
//! store at consecutive indices of its last dimension (`base + c + l`, `base` shared by the
//! lanes, `c` a constant), or at indices the lanes compute (a gather, `x[crd[base + l]]`).
//! Each group then runs as one vector: its expression becomes vector operations, the
//! consecutive loads become vector loads (`i32` elements cast to `i64` lanes, one narrow load
//! sign-extended), a gather one scalar load per lane (one `vgatherqpd` in a wide body), and
//! lane `l` of every vector holds exactly the value the scalar code computes for carried value
//! `g L + l`, by the same operations in the same order (no reassociation, no contraction), so
//! the results are the same bits.
//!
//! This is superword-level parallelism over the lanes a plugin wrote out, not a reordering of
//! one chain of additions: the IR's order is kept, and the order is the plugin's to choose
//! (see `weft_ir::semantics`, *Reduction order*).
//!
//! [`plan`] decides and says why not; [`FnLower::lower_for_lanes`] emits the loop.
//!
//! [`FnLower::lower_for_lanes`]: crate::lower::FnLower::lower_for_lanes
//!
//! # Bounds
//! Loads of one store at one `base` (and the same indices on the other dimensions) form a
//! *site*; each iteration checks the site's lowest and highest index once, before any of its
//! loads (one unsigned comparison of the lowest index with the extent less the site's span),
//! and the other dimensions as the scalar code does (a parallel loop's own indices are
//! proven by the launcher). A gather checks every lane's index after the sites, before any
//! lane loads. A fault therefore stops the kernel in the iteration where the scalar code
//! would, naming a dimension of a store it would name.
//!
//! # Files
//! This file holds the plan ([`LanePlan`], its [`Node`]s and [`Site`]s) and the wide body a
//! loop calls ([`FoldCall`]); [`analysis`] decides, [`emit`] emits, `tests` tests the analysis.

use cranelift_module::FuncId;
use weft_ir::{BinaryOp, DType, Scalar, UnaryOp, ValueId};

use super::wide::FoldWord;

mod analysis;
mod emit;
#[cfg(test)]
mod tests;

pub(crate) use analysis::{plan, plan_wide};

/// The fewest steps of a wide lane body worth a call (each step runs
/// [`UNROLL`](super::wide::UNROLL) iterations).
const MIN_STEPS: i64 = 4;

/// A wide body of a lane loop ([`super::wide::compile_fold`]) defined in the module, with
/// what its caller needs: the plan it was compiled from (its sites and scalar code) and its
/// arguments.
pub(crate) struct FoldCall {
    func: FuncId,
    args: Vec<FoldWord>,
    stride: i64,
    sites: Vec<Site>,
    gathers: Vec<(u32, Vec<ValueId>)>,
    scalar: Vec<bool>,
}

/// Lanes of a 128-bit vector of `t` (`None` for `bool`, which this lowering does not take).
fn lanes_of(t: DType) -> Option<u8> {
    match t {
        DType::F64 | DType::I64 => Some(2),
        DType::F32 | DType::I32 => Some(4),
        // Bools, and the unsigned storage types (which these vectors do not load or store).
        DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => None,
    }
}

/// One vector value of the loop body, lane `l` holding the value of lane `l`'s expression.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Node {
    /// A value every lane shares, computed by the scalar code and splat.
    Splat(ValueId, DType),
    /// A constant per lane.
    Consts(DType, Vec<Scalar>),
    /// The carried values of group `.0`.
    Carried(usize),
    /// `op` of two nodes whose lanes have type `.1`.
    Binary(BinaryOp, DType, usize, usize),
    /// `op` of a node whose lanes have type `.1`.
    Unary(UnaryOp, DType, usize),
    /// `x * y + z` rounded once, of three nodes whose lanes have float type `.0`.
    Fma(DType, usize, usize, usize),
    /// A conversion of a node from `.0` to `.1`.
    Cast(DType, DType, usize),
    /// `L` consecutive elements of a site, the first at the site's base plus `offset`.
    Load {
        site: usize,
        offset: i64,
        dtype: DType,
    },
    /// `L` consecutive `i32` elements of a site, the first at the site's base plus `offset`,
    /// each sign-extended to an `i64` lane (a load cast to `i64`, as a CSR row reads its
    /// column indices).
    LoadWidened { site: usize, offset: i64 },
    /// Lane `l` loads element `indices[l]` of the last dimension of store parameter `param`
    /// (its other dimensions at `outer`, shared by the lanes): a gather, as a CSR row reads
    /// `x[crd[j]]`. `indices` is a node of `i64` lanes.
    Gather {
        param: u32,
        outer: Vec<ValueId>,
        indices: usize,
        dtype: DType,
    },
}

/// The loads of one store at one shared base index of its last dimension.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Site {
    pub param: u32,
    /// The indices of the dimensions before the last (shared by the lanes).
    pub outer: Vec<ValueId>,
    /// The shared part of the last index (`None`: a constant index).
    pub base: Option<ValueId>,
    /// The lowest and highest constant added to `base` over the site's lanes.
    pub min: i64,
    pub max: i64,
}

/// How a qualifying loop is lowered (the result of [`plan`]).
#[derive(Clone, Debug)]
pub(crate) struct LanePlan {
    pub(super) lanes: u8,
    /// The type of each group's lanes.
    pub(super) groups: Vec<DType>,
    /// In an order where operands come first.
    pub(super) nodes: Vec<Node>,
    /// Per group, the node of its yielded values.
    pub(super) roots: Vec<usize>,
    pub(super) sites: Vec<Site>,
    /// Per body instruction: lowered by the scalar code (every instruction whose value a
    /// lane does not own, and constants).
    pub(super) scalar: Vec<bool>,
}
