//! The analysis of a parallel loop for its vector variant: which values are uniform and
//! which varying, whether every varying operation has a vector form ([`analyze`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use weft_ir::validate::Types;
use weft_ir::{Access, BinaryOp, DType, Op, ParallelLoop, Privilege, UnaryOp, ValueId};

use super::{AccessKind, Features, VecPlan, lanes_of};
use crate::lower::Layout;
use crate::lower::inst::operands;

/// The analysis's state.
struct Analysis<'a> {
    layout: &'a Layout,
    types: &'a Types,
    inner: ValueId,
    loop_dims: HashMap<ValueId, usize>,
    lanes: Option<u8>,
    varying: HashMap<ValueId, DType>,
    splats: Vec<ValueId>,
    splat_set: HashSet<ValueId>,
    uses_iota: bool,
}

impl Analysis<'_> {
    fn ty(&self, v: ValueId) -> Result<DType, String> {
        self.types
            .get(v)
            .ok_or_else(|| format!("no type for value {v}"))
    }

    fn is_varying(&self, v: ValueId) -> bool {
        self.varying.contains_key(&v)
    }

    /// Requires vectors of `t` to have the loop's lane count.
    fn need(&mut self, t: DType) -> Result<(), String> {
        let Some(l) = lanes_of(t) else {
            return Ok(());
        };
        match self.lanes {
            None => {
                self.lanes = Some(l);
                Ok(())
            }
            Some(m) if m == l => Ok(()),
            Some(_) => Err("mixes 32-bit and 64-bit lanes".into()),
        }
    }

    /// Notes that a vector operation reads `v`: a uniform `v` is splat, the innermost index
    /// becomes `j + lane`.
    fn vector_operand(&mut self, v: ValueId) -> Result<(), String> {
        let t = self.ty(v)?;
        self.need(t)?;
        if v == self.inner {
            self.uses_iota = true;
        } else if !self.is_varying(v) && self.splat_set.insert(v) {
            self.splats.push(v);
        }
        Ok(())
    }

    fn access_kind(&self, acc: &Access) -> Result<AccessKind, String> {
        let n = acc.indices.len();
        let contiguous = acc.indices.last() == Some(&self.inner);
        for (d, iv) in acc.indices.iter().enumerate() {
            // An access the same for the whole row (no index is the innermost index or
            // varies with it) is made by the row's scalar code, which takes any index (a
            // broadcast view's loads read index 0, see `splat`); a contiguous one addresses
            // its rows by loop indices.
            let row_value = !contiguous && *iv != self.inner && !self.is_varying(*iv);
            if !self.loop_dims.contains_key(iv) && !row_value {
                return Err(format!(
                    "an index of parameter {} is not a loop index",
                    acc.param
                ));
            }
            if *iv == self.inner && d + 1 != n {
                return Err(format!(
                    "the innermost loop index indexes dimension {d} of parameter {}, not its \
                     last",
                    acc.param
                ));
            }
        }
        Ok(if acc.indices.last() == Some(&self.inner) {
            AccessKind::Contiguous
        } else {
            AccessKind::Uniform
        })
    }
}

/// Whether `op` on floats is one of the arithmetic operations every 128-bit lowering
/// (vector loops, lanes, iterations) takes as a vector operation.
pub(crate) fn float_vector_binary(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Min
            | BinaryOp::Max
    )
}

/// Whether a varying operation has a vector form.
fn vector_op(op: &Op, a: &Analysis<'_>, features: Features) -> Result<(), String> {
    let ty = |v: ValueId| a.ty(v);
    let ok = match op {
        Op::Binary(bop, x, y) => match ty(*x)? {
            DType::F32 | DType::F64 => float_vector_binary(*bop),
            DType::I32 | DType::I64 => match bop {
                BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Min
                | BinaryOp::Max => true,
                // One shift amount for all lanes.
                BinaryOp::Shl | BinaryOp::Shr => !a.is_varying(*y) && *y != a.inner,
                BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 => false,
            },
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => false,
            DType::Bool => matches!(
                bop,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Min | BinaryOp::Max
            ),
        },
        Op::Unary(uop, x) => match ty(*x)? {
            DType::F32 | DType::F64 => match uop {
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt => true,
                UnaryOp::Floor | UnaryOp::Ceil => features.round,
                _ => false,
            },
            DType::I32 | DType::I64 => {
                matches!(uop, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not)
            }
            DType::Bool => *uop == UnaryOp::Not,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => false,
        },
        Op::Cmp(_, x, _) => ty(*x)? != DType::Bool,
        Op::Select(..) | Op::Bitcast(..) => true,
        Op::Fma(x, ..) => matches!(ty(*x)?, DType::F32 | DType::F64) && features.fma,
        Op::Cast(to, x) => {
            use DType::*;
            let from = ty(*x)?;
            from == *to
                || from == Bool
                || *to == Bool
                || matches!(
                    (from, *to),
                    (I32, F32) | (I64, F64) | (F32, I32) | (F64, I64)
                )
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("an operation with no vector form".into())
    }
}

/// Decides whether the parallel loop `pl` has a vector variant, and how to lower it; the error
/// says why not.
pub(crate) fn analyze(
    pl: &ParallelLoop,
    layout: &Layout,
    types: &Types,
    features: Features,
) -> Result<VecPlan, String> {
    let rank = pl.indices.len();
    let Some(&inner) = pl.indices.last() else {
        return Err("a rank-0 loop".into());
    };
    let mut a = Analysis {
        layout,
        types,
        inner,
        loop_dims: pl
            .indices
            .iter()
            .enumerate()
            .map(|(d, &v)| (v, d))
            .collect(),
        lanes: None,
        varying: HashMap::new(),
        splats: Vec::new(),
        splat_set: HashSet::new(),
        uses_iota: false,
    };
    if rank > 1 && pl.indices[..rank - 1].contains(&inner) {
        return Err("a loop index repeated".into());
    }
    let mut row_level = vec![false; pl.body.len()];
    let mut unit_stride = BTreeSet::new();
    // Per store parameter: the index lists of its loads and stores, and whether it is stored.
    let mut accesses: HashMap<u32, (Vec<&[ValueId]>, bool, bool)> = HashMap::new();
    for (pos, inst) in pl.body.iter().enumerate() {
        let result = inst.results.first().copied();
        match &inst.op {
            Op::For(_) | Op::Parallel(_) => return Err("a loop in the body".into()),
            Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => {
                row_level[pos] = true;
            }
            Op::Load(acc) | Op::Store(acc, _) => {
                let is_store = matches!(inst.op, Op::Store(..));
                let kind = a.access_kind(acc)?;
                let (store, slot) = a.layout.store(acc.param)?;
                let entry = accesses.entry(acc.param).or_default();
                entry.0.push(&acc.indices);
                entry.1 |= is_store;
                entry.2 |= !is_store;
                match (kind, &inst.op) {
                    (AccessKind::Uniform, Op::Store(_, v)) => {
                        if a.is_varying(*v) || *v == inner {
                            return Err("a varying value stored into one element".into());
                        }
                        row_level[pos] = true;
                    }
                    (AccessKind::Uniform, _) => row_level[pos] = true,
                    (AccessKind::Contiguous, op) => {
                        if slot.dtype.is_unsigned() {
                            return Err(format!("a vector access to a {} store", slot.dtype));
                        }
                        a.need(slot.dtype)?;
                        unit_stride.insert(store);
                        if let Op::Store(_, v) = op {
                            a.vector_operand(*v)?;
                        }
                        if let Some(r) = result {
                            a.varying.insert(r, slot.dtype);
                        }
                    }
                }
            }
            Op::Reduce(acc, _, v) => {
                if !acc.indices.is_empty() {
                    return Err("a reduction into a store of rank > 0".into());
                }
                let (_, slot) = a.layout.store(acc.param)?;
                if !matches!(slot.privilege, Privilege::Reduce(_)) {
                    return Err("a reduction into a store without reduce privilege".into());
                }
                a.need(slot.dtype)?;
                a.vector_operand(*v)?;
            }
            op => {
                let ops = operands(op);
                if !ops.iter().any(|v| a.is_varying(*v) || *v == inner) {
                    row_level[pos] = true;
                    continue;
                }
                vector_op(op, &a, features)?;
                for (k, &v) in ops.iter().enumerate() {
                    let shift_amount =
                        k == 1 && matches!(op, Op::Binary(BinaryOp::Shl | BinaryOp::Shr, ..));
                    if !shift_amount {
                        a.vector_operand(v)?;
                    }
                }
                let r = result.ok_or("an operation without a result")?;
                let t = a.ty(r)?;
                a.need(t)?;
                a.varying.insert(r, t);
            }
        }
    }
    // A store that the loop writes: every access to it addresses the same element of the
    // iteration (so no lane reads what another lane writes), and one written once per row is
    // not read in the loop at all.
    for (param, (lists, stored, loaded)) in &accesses {
        if *stored {
            if lists.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!(
                    "parameter {param} is written and accessed at different indices"
                ));
            }
            let per_row = lists.first().is_some_and(|l| l.last() != Some(&inner));
            if per_row && *loaded {
                return Err(format!(
                    "parameter {param} is written once per row and read in the loop"
                ));
            }
        }
    }
    let lanes = a.lanes.ok_or("no vector values")?;
    Ok(VecPlan {
        lanes,
        row_level,
        varying: a.varying,
        splats: a.splats,
        unit_stride: unit_stride.into_iter().collect(),
        uses_iota: a.uses_iota,
    })
}
