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
//! # Bounds
//! Loads of one store at one `base` (and the same indices on the other dimensions) form a
//! *site*; each iteration checks the site's lowest and highest index once, before any of its
//! loads (one unsigned comparison of the lowest index with the extent less the site's span),
//! and the other dimensions as the scalar code does (a parallel loop's own indices are
//! proven by the launcher). A gather checks every lane's index after the sites, before any
//! lane loads. A fault therefore stops the kernel in the iteration where the scalar code
//! would, naming a dimension of a store it would name.

use std::collections::{HashMap, HashSet};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    BlockArg, ConstantData, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_module::{FuncId, Module};
use weft_ir::validate::Types;
use weft_ir::{BinaryOp, DType, ForLoop, Inst, Op, Scalar, UnaryOp, ValueId};

use super::inst::operands;
use super::vector::{float_vector_binary, vec_type};
use super::wide::{FoldBody, FoldWord, Isa, UNROLL};
use super::{FaultSite, FnLower, LResult, Layout, cl_type, data_flags};

/// The fewest steps of a wide lane body worth a call (each step runs [`UNROLL`] iterations).
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
        DType::Bool => None,
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

/// Where a value of the body comes from, as the analysis sees it.
struct Analysis<'a> {
    layout: &'a Layout,
    types: &'a Types,
    lanes: u8,
    /// The lanes of a vector of each type (`None`: a type the vectors do not hold).
    width: &'a dyn Fn(DType) -> Option<u8>,
    /// Body value -> its instruction.
    defs: HashMap<ValueId, &'a Inst>,
    /// Carried value -> its position.
    carried: HashMap<ValueId, usize>,
    nodes: Vec<Node>,
    memo: HashMap<Vec<ValueId>, usize>,
    sites: Vec<Site>,
    /// Values a lane owns: computed only as vector lanes.
    owned: HashSet<ValueId>,
    /// Constants defined before the loop.
    outer_const: &'a dyn Fn(ValueId) -> Option<Scalar>,
}

/// Decides whether the `for` loop `l` runs as vectors of lanes, and how; the error says why
/// not. `unit_inner(param)` says whether store parameter `param`'s last stride is known to
/// be one element in the function being lowered; `outer_const(v)` is the value of `v` if it
/// is a constant defined before the loop.
pub(crate) fn plan(
    l: &ForLoop,
    layout: &Layout,
    types: &Types,
    unit_inner: &dyn Fn(u32) -> bool,
    outer_const: &dyn Fn(ValueId) -> Option<Scalar>,
) -> Result<LanePlan, String> {
    plan_of_width(l, layout, types, unit_inner, outer_const, &lanes_of)
}

/// As [`plan`], for the vectors of a wide body of `isa`: lanes of 64 bits only (`f64` and
/// `i64`), [`Isa::lanes`] of them per vector.
pub(crate) fn plan_wide(
    l: &ForLoop,
    layout: &Layout,
    types: &Types,
    unit_inner: &dyn Fn(u32) -> bool,
    outer_const: &dyn Fn(ValueId) -> Option<Scalar>,
    isa: Isa,
) -> Result<LanePlan, String> {
    let lanes = u8::try_from(isa.lanes()).map_err(|e| e.to_string())?;
    let width = move |t: DType| matches!(t, DType::F64 | DType::I64).then_some(lanes);
    let plan = plan_of_width(l, layout, types, unit_inner, outer_const, &width)?;
    // A wide gather addresses `row + 8 index`: the row's elements must be adjacent.
    for node in &plan.nodes {
        if let Node::Gather { param, .. } = *node
            && !unit_inner(param)
        {
            return Err(format!(
                "gathers from store parameter {param}, which may not have a unit last stride here"
            ));
        }
    }
    Ok(plan)
}

/// [`plan`] for vectors of `width(t)` lanes of type `t`.
fn plan_of_width(
    l: &ForLoop,
    layout: &Layout,
    types: &Types,
    unit_inner: &dyn Fn(u32) -> bool,
    outer_const: &dyn Fn(ValueId) -> Option<Scalar>,
    width: &dyn Fn(DType) -> Option<u8>,
) -> Result<LanePlan, String> {
    let n = l.carried.len();
    let first = l.carried.first().ok_or("carries no values")?;
    let t = types.get(*first).ok_or("an untyped carried value")?;
    let lanes = width(t).ok_or_else(|| format!("carries {t} values"))?;
    if n < usize::from(lanes) || !n.is_multiple_of(usize::from(lanes)) {
        return Err(format!(
            "carries {n} values, not a multiple of {lanes} lanes"
        ));
    }
    if l.carried.iter().any(|&c| types.get(c) != Some(t)) {
        return Err("carries values of several types".into());
    }
    if l.yields.len() != n || l.init.len() != n {
        return Err("malformed loop".into());
    }
    let mut defs = HashMap::new();
    for inst in &l.body {
        match &inst.op {
            Op::Store(..) | Op::Reduce(..) | Op::For(_) | Op::Parallel(_) => {
                return Err(format!(
                    "its body holds a {}",
                    super::inst::op_name(&inst.op)
                ));
            }
            _ => {}
        }
        for &r in &inst.results {
            defs.insert(r, inst);
        }
    }
    let mut a = Analysis {
        layout,
        types,
        lanes,
        width,
        defs,
        carried: l.carried.iter().enumerate().map(|(k, &v)| (v, k)).collect(),
        nodes: Vec::new(),
        memo: HashMap::new(),
        sites: Vec::new(),
        owned: HashSet::new(),
        outer_const,
    };
    let mut roots = Vec::new();
    let groups = n / usize::from(lanes);
    for g in 0..groups {
        let tuple = l.yields[g * usize::from(lanes)..(g + 1) * usize::from(lanes)].to_vec();
        roots.push(a.node(&tuple)?);
    }
    for site in &a.sites {
        if !unit_inner(site.param) {
            return Err(format!(
                "store parameter {} may not have a unit last stride here",
                site.param
            ));
        }
    }
    // The scalar code computes every value no lane owns; it must not need one a lane owns.
    let scalar: Vec<bool> = l
        .body
        .iter()
        .map(|inst| {
            matches!(inst.op, Op::Const(_)) || inst.results.iter().all(|r| !a.owned.contains(r))
        })
        .collect();
    let mut needed: Vec<ValueId> = Vec::new();
    for (inst, &s) in l.body.iter().zip(&scalar) {
        if s {
            needed.extend(operands(&inst.op));
        }
    }
    for node in &a.nodes {
        if let Node::Splat(v, _) = node {
            needed.push(*v);
        }
    }
    for site in &a.sites {
        needed.extend(site.outer.iter().copied());
        needed.extend(site.base);
    }
    for node in &a.nodes {
        if let Node::Gather { outer, .. } = node {
            needed.extend(outer.iter().copied());
        }
    }
    if let Some(v) = needed.iter().find(|v| a.owned.contains(v)) {
        return Err(format!("the scalar value {v} is needed outside the lanes"));
    }
    // The scalar code runs once per iteration on scalars: it cannot read the carried values,
    // which live in vectors.
    if let Some(v) = needed.iter().find(|v| a.carried.contains_key(v)) {
        return Err(format!("the scalar code reads carried value {v}"));
    }
    Ok(LanePlan {
        lanes,
        groups: vec![t; groups],
        nodes: a.nodes,
        roots,
        sites: a.sites,
        scalar,
    })
}

impl Analysis<'_> {
    fn ty(&self, v: ValueId) -> Result<DType, String> {
        self.types
            .get(v)
            .ok_or_else(|| format!("no type for value {v}"))
    }

    /// Requires vectors of `t` to have the loop's lane count.
    fn need(&self, t: DType) -> Result<(), String> {
        if (self.width)(t) == Some(self.lanes) {
            Ok(())
        } else {
            Err(format!("mixes {t} with lanes of another width"))
        }
    }

    /// Adds `node`, the node of `tuple`, whose values the lanes own if `owned`.
    fn push(&mut self, tuple: &[ValueId], node: Node, owned: bool) -> usize {
        let i = self.add(node);
        self.memo.insert(tuple.to_vec(), i);
        if owned {
            self.owned.extend(tuple.iter().copied());
        }
        i
    }

    /// Adds `node`, which stands for no tuple of body values.
    fn add(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// The node whose lane `l` is `tuple[l]`.
    fn node(&mut self, tuple: &[ValueId]) -> Result<usize, String> {
        if let Some(&i) = self.memo.get(tuple) {
            return Ok(i);
        }
        let v0 = tuple[0];
        // One value in every lane: the scalar code computes it.
        if tuple.iter().all(|&v| v == v0) {
            if self.carried.contains_key(&v0) {
                return Err(format!("carried value {v0} is read by every lane"));
            }
            let t = self.ty(v0)?;
            self.need(t)?;
            return Ok(self.push(tuple, Node::Splat(v0, t), false));
        }
        // A group's carried values.
        if let Some(&k0) = self.carried.get(&v0) {
            let lanes = usize::from(self.lanes);
            let ok = k0 % lanes == 0
                && tuple
                    .iter()
                    .enumerate()
                    .all(|(l, v)| self.carried.get(v) == Some(&(k0 + l)));
            if !ok {
                return Err("carried values out of lane order".into());
            }
            return Ok(self.push(tuple, Node::Carried(k0 / lanes), false));
        }
        let insts: Vec<&Inst> = tuple
            .iter()
            .map(|v| {
                self.defs
                    .get(v)
                    .copied()
                    .ok_or_else(|| format!("value {v} differs between lanes but is not the body's"))
            })
            .collect::<Result<_, _>>()?;
        match self.isomorphic(tuple, &insts) {
            Ok(i) => Ok(i),
            // Index arithmetic written differently per lane (`base` and `base + 1`).
            Err(why) => match self.affine_tuple(tuple) {
                Some((base, cs)) => {
                    let consts = cs.into_iter().map(Scalar::I64).collect();
                    let c = self.add(Node::Consts(DType::I64, consts));
                    let node = match base {
                        None => c,
                        Some(b) => {
                            let s = self.node(&vec![b; tuple.len()])?;
                            self.add(Node::Binary(BinaryOp::Add, DType::I64, s, c))
                        }
                    };
                    self.memo.insert(tuple.to_vec(), node);
                    self.owned.extend(tuple.iter().copied());
                    Ok(node)
                }
                None => Err(why),
            },
        }
    }

    /// The node of lanes computed by the same operation.
    fn isomorphic(&mut self, tuple: &[ValueId], insts: &[&Inst]) -> Result<usize, String> {
        let same = |f: &dyn Fn(&Op) -> bool| insts.iter().all(|i| f(&i.op));
        let node = match &insts[0].op {
            Op::Const(c0) if same(&|op| matches!(op, Op::Const(c) if c.dtype() == c0.dtype())) => {
                self.need(c0.dtype())?;
                let consts = insts
                    .iter()
                    .filter_map(|i| match i.op {
                        Op::Const(c) => Some(c),
                        _ => None,
                    })
                    .collect();
                Node::Consts(c0.dtype(), consts)
            }
            Op::Binary(op, ..) if same(&|o| matches!(o, Op::Binary(p, ..) if p == op)) => {
                let (xs, ys): (Vec<ValueId>, Vec<ValueId>) = insts
                    .iter()
                    .filter_map(|i| match i.op {
                        Op::Binary(_, x, y) => Some((x, y)),
                        _ => None,
                    })
                    .unzip();
                let t = self.ty(xs[0])?;
                self.need(t)?;
                let ok = match t {
                    DType::F32 | DType::F64 => float_vector_binary(*op),
                    DType::I32 | DType::I64 => matches!(
                        op,
                        BinaryOp::Add
                            | BinaryOp::Sub
                            | BinaryOp::Mul
                            | BinaryOp::And
                            | BinaryOp::Or
                            | BinaryOp::Xor
                            | BinaryOp::Min
                            | BinaryOp::Max
                    ),
                    DType::Bool => false,
                };
                if !ok {
                    return Err(format!("{} on {t} has no vector form here", op.name()));
                }
                let x = self.node(&xs)?;
                let y = self.node(&ys)?;
                Node::Binary(*op, t, x, y)
            }
            Op::Unary(op, _) if same(&|o| matches!(o, Op::Unary(p, _) if p == op)) => {
                let xs: Vec<ValueId> = insts
                    .iter()
                    .filter_map(|i| match i.op {
                        Op::Unary(_, x) => Some(x),
                        _ => None,
                    })
                    .collect();
                let t = self.ty(xs[0])?;
                self.need(t)?;
                let ok = match t {
                    DType::F32 | DType::F64 => {
                        matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt)
                    }
                    DType::I32 | DType::I64 => {
                        matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not)
                    }
                    DType::Bool => false,
                };
                if !ok {
                    return Err(format!("{} on {t} has no vector form here", op.name()));
                }
                let x = self.node(&xs)?;
                Node::Unary(*op, t, x)
            }
            Op::Cast(to, _) if same(&|o| matches!(o, Op::Cast(p, _) if p == to)) => {
                let xs: Vec<ValueId> = insts
                    .iter()
                    .filter_map(|i| match i.op {
                        Op::Cast(_, x) => Some(x),
                        _ => None,
                    })
                    .collect();
                let from = self.ty(xs[0])?;
                if (from, *to) == (DType::I32, DType::I64) {
                    // `i32` elements loaded for `i64` lanes: one narrow load, widened.
                    let loads: Option<Vec<&Inst>> =
                        xs.iter().map(|x| self.defs.get(x).copied()).collect();
                    if let Some(loads) = loads.filter(|ls| {
                        ls.iter().all(|i| matches!(i.op, Op::Load(_)))
                            && (self.width)(DType::I64) == Some(self.lanes)
                    }) {
                        let node = self.load_node(&loads, true)?;
                        self.owned.extend(xs.iter().copied());
                        return Ok(self.push(tuple, node, true));
                    }
                }
                self.need(from)?;
                self.need(*to)?;
                use DType::*;
                if !(from == *to || matches!((from, *to), (I32, F32) | (I64, F64) | (F32, I32))) {
                    return Err(format!(
                        "a cast from {from} to {to} has no vector form here"
                    ));
                }
                let x = self.node(&xs)?;
                Node::Cast(from, *to, x)
            }
            Op::Load(acc0) if same(&|o| matches!(o, Op::Load(a) if a.param == acc0.param)) => {
                self.load_node(insts, false)?
            }
            _ => return Err("lanes compute their values differently".into()),
        };
        Ok(self.push(tuple, node, true))
    }

    /// The node of the loads `insts` (of one store), each lane's: consecutive elements of a
    /// site, or a gather at indices the lanes compute. `widen`: `i32` elements for `i64`
    /// lanes (consecutive only).
    fn load_node(&mut self, insts: &[&Inst], widen: bool) -> Result<Node, String> {
        let Op::Load(acc0) = &insts[0].op else {
            return Err("internal: not a load".into());
        };
        if insts
            .iter()
            .any(|i| !matches!(&i.op, Op::Load(a) if a.param == acc0.param))
        {
            return Err("lanes load different stores".into());
        }
        let (_, slot) = self.layout.store(acc0.param)?;
        let dtype = slot.dtype;
        if widen {
            if dtype != DType::I32 {
                return Err(format!("a widened load of {dtype}"));
            }
        } else {
            self.need(dtype)?;
        }
        if !slot.privilege.can_read() {
            return Err(format!(
                "loads store parameter {}, not readable",
                acc0.param
            ));
        }
        let rank = acc0.indices.len();
        if rank == 0 || rank != slot.rank {
            return Err(format!("loads store parameter {} of rank 0", acc0.param));
        }
        let outer = acc0.indices[..rank - 1].to_vec();
        let mut lasts = Vec::with_capacity(insts.len());
        for inst in insts {
            let Op::Load(acc) = &inst.op else {
                return Err("internal: not a load".into());
            };
            if acc.indices[..rank - 1] != outer[..] {
                return Err("lanes load different rows".into());
            }
            lasts.push(acc.indices[rank - 1]);
        }
        let Some((base, cs)) = self.affine_tuple(&lasts) else {
            if widen {
                return Err("lanes gather i32 elements".into());
            }
            // A gather: the lanes compute their indices.
            if self.ty(lasts[0])? != DType::I64 {
                return Err("lanes gather at indices that are not i64".into());
            }
            let indices = self.node(&lasts)?;
            return Ok(Node::Gather {
                param: acc0.param,
                outer,
                indices,
                dtype,
            });
        };
        let step = cs.windows(2).all(|w| w[1].checked_sub(w[0]) == Some(1));
        let first = cs[0];
        let last = cs[cs.len() - 1];
        let size = i64::try_from(dtype.size()).map_err(|e| e.to_string())?;
        if !step
            || first
                .checked_mul(size)
                .and_then(|o| i32::try_from(o).ok())
                .is_none()
            || last.checked_mul(size).is_none()
        {
            return Err("lanes load elements that are not consecutive".into());
        }
        let key = |s: &Site| s.param == acc0.param && s.outer == outer && s.base == base;
        let site = match self.sites.iter().position(key) {
            Some(i) => {
                let s = &mut self.sites[i];
                s.min = s.min.min(first);
                s.max = s.max.max(last);
                i
            }
            None => {
                self.sites.push(Site {
                    param: acc0.param,
                    outer,
                    base,
                    min: first,
                    max: last,
                });
                self.sites.len() - 1
            }
        };
        Ok(if widen {
            Node::LoadWidened {
                site,
                offset: first,
            }
        } else {
            Node::Load {
                site,
                offset: first,
                dtype,
            }
        })
    }

    /// `tuple[l] = base + c_l` for a value `base` the lanes share (or none) and constants
    /// `c_l`, where the values are `i64` arithmetic of that form written in the body.
    fn affine_tuple(&self, tuple: &[ValueId]) -> Option<(Option<ValueId>, Vec<i64>)> {
        let forms: Vec<(Option<ValueId>, i64)> = tuple
            .iter()
            .map(|&v| self.affine(v))
            .collect::<Option<_>>()?;
        let base = forms[0].0;
        if forms.iter().any(|f| f.0 != base) || self.ty(tuple[0]).ok()? != DType::I64 {
            return None;
        }
        Some((base, forms.into_iter().map(|f| f.1).collect()))
    }

    /// `v` as `base + c`: a constant, a value no lane owns (`c = 0`), or the sum or
    /// difference of such a value and a constant.
    fn affine(&self, v: ValueId) -> Option<(Option<ValueId>, i64)> {
        let konst = |v: ValueId| match self.defs.get(&v).map(|i| &i.op) {
            Some(Op::Const(Scalar::I64(c))) => Some(*c),
            Some(_) => None,
            None => match (self.outer_const)(v) {
                Some(Scalar::I64(c)) => Some(c),
                _ => None,
            },
        };
        if let Some(c) = konst(v) {
            return Some((None, c));
        }
        let plain = |v: ValueId| !self.carried.contains_key(&v) && !self.owned.contains(&v);
        match self.defs.get(&v).map(|i| &i.op) {
            Some(Op::Binary(BinaryOp::Add, x, y)) => match (konst(*x), konst(*y)) {
                (_, Some(c)) if plain(*x) => Some((Some(*x), c)),
                (Some(c), _) if plain(*y) => Some((Some(*y), c)),
                _ => None,
            },
            Some(Op::Binary(BinaryOp::Sub, x, y)) => match konst(*y) {
                Some(c) if plain(*x) => Some((Some(*x), c.checked_neg()?)),
                _ => None,
            },
            _ if plain(v) => Some((Some(v), 0)),
            _ => None,
        }
    }
}

impl FnLower<'_, '_> {
    /// Defines the machine code of `body`, compiled from `plan`, as a function of the module
    /// (signature `fn(args: *const u64, steps: i64)`) and keeps its constant table.
    pub(super) fn define_fold(&mut self, body: FoldBody, plan: &LanePlan) -> LResult<FoldCall> {
        let what = format!("the {} lane body", body.isa.name());
        let func = super::define::define_wide_code(self.module, self.ptr_ty, &body.code, &what)?;
        self.loop_counts.code_bytes += body.code.len();
        self.tables.push(body.table);
        Ok(FoldCall {
            func,
            args: body.args,
            stride: body.stride,
            sites: plan.sites.clone(),
            gathers: body.gathers,
            scalar: plan.scalar.clone(),
        })
    }

    /// Runs the first iterations of `l` (from `lo`, below `hi`, the carried vectors `init`)
    /// in the wide body `w`, as many whole steps as there are (at most 2^22, at least
    /// [`MIN_STEPS`]), where every site of the last of them is in bounds; returns the
    /// iteration to go on from and the carried vectors there. The first iteration's scalar
    /// code and checks run before the call, as the loop's would: a fault stops the kernel
    /// where the loop would stop it. If a later iteration's site or a gathered row's other
    /// indices would fault, the loop runs every iteration and faults where it must; a gathered
    /// index out of range stops the body before its step, and the loop goes on from there.
    fn call_fold(
        &mut self,
        l: &ForLoop,
        plan: &LanePlan,
        w: &FoldCall,
        (lo, hi): (Value, Value),
        init: &[Value],
    ) -> LResult<(Value, Vec<Value>)> {
        let lanes = plan.lanes;
        let join = self.b.create_block();
        self.b.append_block_param(join, types::I64);
        for &t in &plan.groups {
            self.b.append_block_param(join, vec_type(t, lanes));
        }
        let skip: Vec<BlockArg> = std::iter::once(lo)
            .chain(init.iter().copied())
            .map(BlockArg::Value)
            .collect();
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let diff = self.b.ins().isub(hi, lo);
        let zero = self.b.ins().iconst(types::I64, 0);
        let n = self.b.ins().select(go, diff, zero);
        // `hi - lo`, taken unsigned, is the iteration count when `lo < hi`.
        let steps = self.b.ins().udiv_imm_u(n, UNROLL);
        // At most `2^22` steps per call (the rest run in the 128-bit loop, which checks the
        // cancel flag on every back edge): a call stays well under a second.
        let cap = self.b.ins().iconst(types::I64, 1 << 22);
        let steps = self.b.ins().umin(steps, cap);
        // Short loops stay in the 128-bit code: the call costs more than it saves.
        let enough = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, steps, MIN_STEPS);
        let prologue = self.b.create_block();
        self.b.ins().brif(enough, prologue, &[], join, &skip);

        self.b.switch_to_block(prologue);
        let mark = self.env.mark();
        self.env.define(l.induction, lo, DType::I64);
        for (inst, &scalar) in l.body.iter().zip(&w.scalar) {
            if scalar {
                self.lower_inst(inst)?;
            }
        }
        let addrs = self.site_addresses(&w.sites)?;
        // The last iteration's sites: `stride (S - 1)` elements further than the first's.
        let count = self.b.ins().imul_imm_s(steps, UNROLL);
        let last = self.b.ins().iadd_imm_s(count, -1);
        let extra = self.b.ins().imul_imm_s(last, w.stride);
        let mut ok = None;
        for site in &w.sites {
            let (_, slot) = self.layout.store(site.param)?;
            let ext = *self
                .views
                .get(&site.param)
                .and_then(|v| v.ext.get(slot.rank.wrapping_sub(1)))
                .ok_or_else(|| format!("internal: store parameter {} not loaded", site.param))?;
            let base = match site.base {
                Some(b) => self.typed(b, DType::I64, "index")?,
                None => self.b.ins().iconst(types::I64, 0),
            };
            // The first iteration's check proved `base + max < ext`.
            let high = self.b.ins().iadd_imm_s(base, site.max);
            let room = self.b.ins().isub(ext, high);
            let fits = self.b.ins().icmp(IntCC::SignedLessThan, extra, room);
            ok = Some(match ok {
                None => fits,
                Some(o) => self.b.ins().band(o, fits),
            });
        }
        let mut ok = ok.ok_or("internal: a wide lane body without sites")?;
        // Each gathered row: its address and bound. Its other indices are the same in every
        // iteration; if one is out of range the loop runs every iteration and faults there.
        let mut rows = Vec::with_capacity(w.gathers.len());
        for (param, outer) in &w.gathers {
            let (store, slot) = self.layout.store(*param)?;
            let view = self
                .views
                .get(param)
                .ok_or_else(|| format!("internal: store parameter {param} not loaded"))?;
            let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
            let mut checks = Vec::new();
            let offset = self.index_offset((*param, store), outer, (&ext, &stride), &mut checks)?;
            for (i, e, _) in checks {
                let fits = self.b.ins().icmp(IntCC::UnsignedLessThan, i, e);
                ok = self.b.ins().band(ok, fits);
            }
            let row = match offset {
                None => base_ptr,
                Some(o) => self.b.ins().iadd(base_ptr, o),
            };
            let n = *ext
                .get(slot.rank.wrapping_sub(1))
                .ok_or("internal: a gather from a store of rank 0")?;
            rows.push((row, n));
        }
        let call = self.b.create_block();
        self.b.ins().brif(ok, call, &[], join, &skip);

        self.b.switch_to_block(call);
        let words = u32::try_from((w.args.len() + 1) * 8).map_err(|e| e.to_string())?;
        let args = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            words,
            3,
        ));
        let vector_bytes = u32::from(lanes) * 8;
        let carried_bytes = u32::try_from(plan.groups.len())
            .ok()
            .and_then(|g| g.checked_mul(16))
            .ok_or("internal: too many carried values")?;
        let carried = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            carried_bytes,
            4,
        ));
        for (k, word) in w.args.iter().enumerate() {
            let x = match *word {
                FoldWord::Site(i) => *addrs.get(i).ok_or("internal: no such site")?,
                FoldWord::GatherRow(g) => rows.get(g).ok_or("internal: no such gather")?.0,
                FoldWord::Bound { gather, less_one } => {
                    let n = rows.get(gather).ok_or("internal: no such gather")?.1;
                    if less_one {
                        self.b.ins().iadd_imm_s(n, -1)
                    } else {
                        n
                    }
                }
                FoldWord::Uniform(v) => {
                    let (x, t) = self.val(v)?;
                    match t {
                        DType::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), x),
                        DType::I64 => x,
                        _ => return Err(format!("internal: a uniform {t} for a wide body")),
                    }
                }
            };
            let offset = i32::try_from(k * 8).map_err(|e| e.to_string())?;
            self.b.ins().stack_store(self.ptr_ty, x, args, offset);
        }
        let at = self.b.ins().stack_addr(self.ptr_ty, carried, 0);
        let offset = i32::try_from(w.args.len() * 8).map_err(|e| e.to_string())?;
        self.b.ins().stack_store(self.ptr_ty, at, args, offset);
        for (g, &v) in init.iter().enumerate() {
            let offset = i32::try_from(g as u32 * vector_bytes).map_err(|e| e.to_string())?;
            self.b.ins().stack_store(self.ptr_ty, v, carried, offset);
        }
        let args_at = self.b.ins().stack_addr(self.ptr_ty, args, 0);
        let callee = self.module.declare_func_in_func(w.func, self.b.func);
        // The body's bytes may land anywhere in the address space, further than a 32-bit
        // displacement reaches from the caller: call it through its absolute address.
        self.b.func.dfg.ext_funcs[callee].colocated = false;
        let call = self.b.ins().call(callee, &[args_at, steps]);
        // The steps it left to the loop: a gathered index out of range stopped it there.
        let left = self.b.inst_results(call)[0];
        let ran = self.b.ins().isub(steps, left);
        let ran = self.b.ins().imul_imm_s(ran, UNROLL);
        let mut back = vec![BlockArg::Value(self.b.ins().iadd(lo, ran))];
        for (g, &t) in plan.groups.iter().enumerate() {
            let offset = i32::try_from(g as u32 * vector_bytes).map_err(|e| e.to_string())?;
            let v = self
                .b
                .ins()
                .stack_load(self.ptr_ty, vec_type(t, lanes), carried, offset);
            back.push(BlockArg::Value(v));
        }
        self.b.ins().jump(join, &back);
        self.env.pop_to(mark);

        self.b.switch_to_block(join);
        let params = self.b.block_params(join).to_vec();
        Ok((params[0], params[1..].to_vec()))
    }

    /// The `for` loop `l` (instruction `inst`) as vectors of lanes, by `plan`, its bulk in the
    /// wide body `wide` if there is one.
    pub(super) fn lower_for_lanes(
        &mut self,
        inst: &Inst,
        l: &ForLoop,
        plan: &LanePlan,
        wide: Option<&FoldCall>,
    ) -> LResult<()> {
        let lanes = plan.lanes;
        let w = usize::from(lanes);
        let lo = self.typed(l.lo, DType::I64, "loop bound")?;
        let hi = self.typed(l.hi, DType::I64, "loop bound")?;
        let mut init = Vec::with_capacity(plan.groups.len());
        for (g, &t) in plan.groups.iter().enumerate() {
            let first = self.typed(l.init[g * w], t, "initial value")?;
            let mut v = self.b.ins().splat(vec_type(t, lanes), first);
            for lane in 1..lanes {
                let x = self.typed(l.init[g * w + usize::from(lane)], t, "initial value")?;
                v = self.b.ins().insertlane(v, x, lane);
            }
            init.push(v);
        }
        let (lo, init) = match wide {
            Some(w) => self.call_fold(l, plan, w, (lo, hi), &init)?,
            None => (lo, init),
        };
        let body = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(body, types::I64);
        for &t in &plan.groups {
            self.b.append_block_param(body, vec_type(t, lanes));
            self.b.append_block_param(exit, vec_type(t, lanes));
        }
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let mut body_args = vec![BlockArg::Value(lo)];
        body_args.extend(init.iter().map(|&v| BlockArg::Value(v)));
        let exit_args: Vec<BlockArg> = init.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(go, body, &body_args, exit, &exit_args);

        self.b.switch_to_block(body);
        let params = self.b.block_params(body).to_vec();
        let mark = self.env.mark();
        self.env.define(l.induction, params[0], DType::I64);
        for (inst, &scalar) in l.body.iter().zip(&plan.scalar) {
            if scalar {
                self.lower_inst(inst)?;
            }
        }
        let addrs = self.site_addresses(&plan.sites)?;
        let mut vals: Vec<Value> = Vec::with_capacity(plan.nodes.len());
        for node in &plan.nodes {
            let v = match *node {
                Node::Splat(v, t) => {
                    let x = self.typed(v, t, "lane operand")?;
                    self.splat(x, t, lanes)
                }
                Node::Consts(t, ref cs) => {
                    let mut bytes = Vec::with_capacity(16);
                    for c in cs {
                        let bits = c.to_bits().to_le_bytes();
                        bytes.extend_from_slice(&bits[..t.size()]);
                    }
                    let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
                    self.b.ins().vconst(vec_type(t, lanes), c)
                }
                Node::Carried(g) => params[1 + g],
                Node::Binary(op, t, x, y) => self.vbinary(op, t, vals[x], vals[y], lanes)?,
                Node::Unary(op, t, x) => self.vunary(op, t, vals[x])?,
                Node::Cast(from, to, x) => self.vcast(vals[x], from, to, lanes)?,
                Node::Load {
                    site,
                    offset,
                    dtype,
                } => {
                    let size = i64::try_from(dtype.size()).map_err(|e| e.to_string())?;
                    let off = i32::try_from(offset * size).map_err(|e| e.to_string())?;
                    self.b
                        .ins()
                        .load(vec_type(dtype, lanes), data_flags(), addrs[site], off)
                }
                Node::LoadWidened { site, offset } => {
                    if lanes != 2 {
                        return Err(format!("internal: a widened load of {lanes} lanes"));
                    }
                    let off = i32::try_from(offset * 4).map_err(|e| e.to_string())?;
                    self.b.ins().sload32x2(data_flags(), addrs[site], off)
                }
                Node::Gather {
                    param,
                    ref outer,
                    indices,
                    dtype,
                } => self.gather(param, outer, vals[indices], dtype, lanes)?,
            };
            vals.push(v);
        }
        let ys: Vec<Value> = plan.roots.iter().map(|&r| vals[r]).collect();
        self.env.pop_to(mark);
        if !super::loops::bounded_by_a_store(l) {
            self.check_cancel();
        }
        let next = self.b.ins().iadd_imm_s(params[0], 1);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        let mut back = vec![BlockArg::Value(next)];
        back.extend(ys.iter().map(|&v| BlockArg::Value(v)));
        let out: Vec<BlockArg> = ys.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(more, body, &back, exit, &out);

        self.b.switch_to_block(exit);
        let results = self.b.block_params(exit).to_vec();
        for (g, &t) in plan.groups.iter().enumerate() {
            for lane in 0..lanes {
                let k = g * w + usize::from(lane);
                let x = self.lane(results[g], lane, t);
                self.env.define(inst.results[k], x, t);
            }
        }
        Ok(())
    }

    /// Lane `l` of the result: element `indices[l]` of the last dimension of store parameter
    /// `param` (its other dimensions at `outer`). Every lane's index is checked, after the
    /// outer ones, before any lane loads; a failure names the last dimension, as the scalar
    /// code's first failing load of the store would.
    fn gather(
        &mut self,
        param: u32,
        outer: &[ValueId],
        indices: Value,
        dtype: DType,
        lanes: u8,
    ) -> LResult<Value> {
        let (store, slot) = self.layout.store(param)?;
        let view = self
            .views
            .get(&param)
            .ok_or_else(|| format!("internal: store parameter {param} not loaded"))?;
        let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
        let mut checks = Vec::new();
        let offset = self.index_offset((param, store), outer, (&ext, &stride), &mut checks)?;
        let last = slot.rank - 1;
        let code = self.faults.code(FaultSite {
            param,
            dim: last as u32,
        });
        let idx: Vec<Value> = (0..lanes)
            .map(|l| self.b.ins().extractlane(indices, l))
            .collect();
        for &i in &idx {
            checks.push((i, ext[last], code));
        }
        let cont = self.b.create_block();
        self.check_or_fault(checks, cont, &[]);
        self.b.switch_to_block(cont);
        let row = match offset {
            None => base_ptr,
            Some(o) => self.b.ins().iadd(base_ptr, o),
        };
        let mut v = None;
        for (l, &i) in idx.iter().enumerate() {
            let at = self.b.ins().imul(i, stride[last]);
            let at = self.b.ins().iadd(row, at);
            let x = self.b.ins().load(cl_type(dtype), data_flags(), at, 0);
            v = Some(match v {
                None => self.b.ins().scalar_to_vector(vec_type(dtype, lanes), x),
                Some(v) => {
                    let lane = u8::try_from(l).map_err(|e| e.to_string())?;
                    self.b.ins().insertlane(v, x, lane)
                }
            });
        }
        v.ok_or_else(|| "internal: a gather of no lanes".into())
    }

    /// Checks every site's indices for this iteration and returns the address of each
    /// site's element at `base` (offset 0 of its last dimension).
    fn site_addresses(&mut self, sites: &[Site]) -> LResult<Vec<Value>> {
        let mut checks = Vec::new();
        let mut addrs = Vec::with_capacity(sites.len());
        // Checks first, in site order; addresses after, once every check passed.
        let mut parts = Vec::with_capacity(sites.len());
        for site in sites {
            let (store, slot) = self.layout.store(site.param)?;
            let (dtype, rank) = (slot.dtype, slot.rank);
            let view = self
                .views
                .get(&site.param)
                .ok_or_else(|| format!("internal: store parameter {} not loaded", site.param))?;
            let (base_ptr, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
            let offset = self.index_offset(
                (site.param, store),
                &site.outer,
                (&ext, &stride),
                &mut checks,
            )?;
            let last = rank - 1;
            let base = match site.base {
                Some(b) => self.typed(b, DType::I64, "index")?,
                None => self.b.ins().iconst(types::I64, 0),
            };
            let code = self.faults.code(FaultSite {
                param: site.param,
                dim: last as u32,
            });
            // `low..=low + span` lies in `0..ext` exactly when `low`, taken unsigned, is below
            // `max(ext - span, 0)`: one comparison per site.
            let low = self.b.ins().iadd_imm_s(base, site.min);
            let span = site
                .max
                .checked_sub(site.min)
                .ok_or("a site's span overflows")?;
            let room = self.b.ins().iadd_imm_s(ext[last], -span);
            let zero = self.b.ins().iconst(types::I64, 0);
            let limit = self.b.ins().smax(room, zero);
            checks.push((low, limit, code));
            parts.push((base_ptr, offset, base, dtype));
        }
        if !checks.is_empty() {
            let cont = self.b.create_block();
            self.check_or_fault(checks, cont, &[]);
            self.b.switch_to_block(cont);
        }
        for (base_ptr, offset, base, dtype) in parts {
            // The last stride is one element (the plan requires it).
            let shift = i64::from(dtype.size().trailing_zeros());
            let last = self.b.ins().ishl_imm_u(base, shift);
            let off = match offset {
                None => last,
                Some(o) => self.b.ins().iadd(o, last),
            };
            addrs.push(self.b.ins().iadd(base_ptr, off));
        }
        Ok(addrs)
    }
}

/// How many vector loads a plan makes per iteration.
#[cfg(test)]
fn loads(plan: &LanePlan) -> usize {
    plan.nodes
        .iter()
        .filter(|n| matches!(n, Node::Load { .. }))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> (weft_ir::Kernel, Types) {
        let k = weft_ir::text::parse(src).expect("parses");
        let v = weft_ir::validate(&k).expect("valid");
        (k, v)
    }

    fn first_for(body: &[Inst]) -> Option<&ForLoop> {
        body.iter().find_map(|i| match &i.op {
            Op::For(l) => Some(l),
            Op::Parallel(p) => first_for(&p.body),
            _ => None,
        })
    }

    fn plan_of(src: &str) -> Result<LanePlan, String> {
        let (k, types) = parse(src);
        let layout = Layout::new(&k)?;
        let l = first_for(&k.body).expect("a for loop");
        plan(l, &layout, &types, &|_| true, &|_| None)
    }

    const ROW: &str = "
kernel @row(%a: store<f64, 2, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %a, 1
  parallel %y (%i) {
    %zero = const f64 0.0
    %lo = const i64 0
    %two = const i64 2
    %blocks = div %n, %two
    %s0, %s1 = for %q = %lo to %blocks iter(%c0 = %zero, %c1 = %zero) {
      %p0 = mul %q, %two
      %one = const i64 1
      %p1 = add %p0, %one
      %a0 = load %a[%i, %p0]
      %x0 = load %x[%p0]
      %t0 = mul %a0, %x0
      %n0 = add %c0, %t0
      %a1 = load %a[%i, %p1]
      %x1 = load %x[%p1]
      %t1 = mul %a1, %x1
      %n1 = add %c1, %t1
      yield %n0, %n1
    }
    %s = add %s0, %s1
    store %y[%i], %s
  }
}
";

    #[test]
    fn a_two_lane_row_product_runs_as_one_vector() {
        let plan = plan_of(ROW).expect("qualifies");
        assert_eq!(plan.lanes, 2);
        assert_eq!(plan.groups, vec![DType::F64]);
        assert_eq!(loads(&plan), 2);
        assert_eq!(plan.sites.len(), 2);
        assert!(plan.sites.iter().all(|s| (s.min, s.max) == (0, 1)));
    }

    /// `y[i] = sum of vals[j] * x[crd[j]]` over two lanes, `crd` of `i32`.
    const GATHER: &str = "
kernel @gather(%crd: store<i32, 1, read>, %vals: store<f64, 1, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %crd, 0
  parallel %y (%i) {
    %zero = const f64 0.0
    %lo = const i64 0
    %two = const i64 2
    %blocks = div %n, %two
    %s0, %s1 = for %q = %lo to %blocks iter(%c0 = %zero, %c1 = %zero) {
      %p0 = mul %q, %two
      %one = const i64 1
      %p1 = add %p0, %one
      %k0 = load %crd[%p0]
      %w0 = cast i64 %k0
      %a0 = load %vals[%p0]
      %x0 = load %x[%w0]
      %t0 = mul %a0, %x0
      %n0 = add %c0, %t0
      %k1 = load %crd[%p1]
      %w1 = cast i64 %k1
      %a1 = load %vals[%p1]
      %x1 = load %x[%w1]
      %t1 = mul %a1, %x1
      %n1 = add %c1, %t1
      yield %n0, %n1
    }
    %s = add %s0, %s1
    store %y[%i], %s
  }
}
";

    #[test]
    fn a_csr_row_gathers_at_widened_column_indices() {
        let plan = plan_of(GATHER).expect("qualifies");
        assert_eq!(plan.lanes, 2);
        // `crd` and `vals` are sites; `x` is gathered at the widened `crd` elements.
        assert_eq!(plan.sites.len(), 2);
        assert_eq!(loads(&plan), 1);
        let widened = plan
            .nodes
            .iter()
            .position(|n| matches!(n, Node::LoadWidened { offset: 0, .. }))
            .expect("a widened load");
        assert!(plan.nodes.iter().any(|n| matches!(
            n,
            Node::Gather { param: 2, indices, dtype: DType::F64, .. } if *indices == widened
        )));
        // No scalar code loads what the lanes own.
        let body = first_for(&parse(GATHER).0.body)
            .expect("a loop")
            .body
            .clone();
        for (inst, &scalar) in body.iter().zip(&plan.scalar) {
            assert!(!(scalar && matches!(inst.op, Op::Load(_))), "{inst:?}");
        }
    }

    #[test]
    fn gathered_i32_elements_do_not_qualify() {
        // The gathered elements are `i32`: two of them are not a 128-bit vector of `i32`.
        let src = GATHER
            .replace("%x: store<f64, 1, read>", "%x: store<i32, 1, read>")
            .replace(
                "%x0 = load %x[%w0]",
                "%xn0 = load %x[%w0]\n      %x0 = cast f64 %xn0",
            )
            .replace(
                "%x1 = load %x[%w1]",
                "%xn1 = load %x[%w1]\n      %x1 = cast f64 %xn1",
            );
        let why = plan_of(&src).expect_err("does not qualify");
        assert!(why.contains("mixes i32"), "{why}");
    }

    #[test]
    fn lanes_out_of_order_do_not_qualify() {
        // Lane 1 reads element `2q`, lane 0 element `2q + 1`.
        let swapped = ROW
            .replace("%a0 = load %a[%i, %p0]", "%a0 = load %a[%i, %p1]")
            .replace("%a1 = load %a[%i, %p1]", "%a1 = load %a[%i, %p0]");
        let why = plan_of(&swapped).expect_err("does not qualify");
        assert!(why.contains("consecutive"), "{why}");
    }

    #[test]
    fn a_lane_value_used_by_the_scalar_code_does_not_qualify() {
        let leaky = ROW.replace(
            "%n1 = add %c1, %t1",
            "%n1 = add %c1, %t1\n      %u = add %t0, %t0",
        );
        let why = plan_of(&leaky).expect_err("does not qualify");
        assert!(why.contains("needed outside"), "{why}");
    }

    #[test]
    fn scalar_code_that_reads_a_carried_value_does_not_qualify() {
        // `%u` is the same in both lanes (a splat) but computed from carried value `%c0`.
        let reading = ROW
            .replace(
                "%t0 = mul %a0, %x0",
                "%u = add %c0, %c0\n      %t0 = mul %a0, %u",
            )
            .replace("%t1 = mul %a1, %x1", "%t1 = mul %a1, %u");
        let why = plan_of(&reading).expect_err("does not qualify");
        assert!(why.contains("carried"), "{why}");
    }

    #[test]
    fn a_store_in_the_body_does_not_qualify() {
        let storing = ROW.replace(
            "%x0 = load %x[%p0]",
            "%x0 = load %x[%p0]\n      store %y[%i], %x0",
        );
        assert!(plan_of(&storing).is_err());
    }

    #[test]
    fn an_odd_lane_count_does_not_qualify() {
        let src = "
kernel @odd(%a: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %a, 0
  parallel %y (%i) {
    %zero = const f64 0.0
    %lo = const i64 0
    %s = for %j = %lo to %n iter(%c = %zero) {
      %v = load %a[%j]
      %next = add %c, %v
      yield %next
    }
    store %y[%i], %s
  }
}
";
        let why = plan_of(src).expect_err("does not qualify");
        assert!(why.contains("multiple"), "{why}");
    }
}
