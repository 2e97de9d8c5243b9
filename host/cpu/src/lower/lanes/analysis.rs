//! The analysis of a lane loop: whether a `for` loop's carried values form lanes whose
//! expressions are isomorphic, and the [`LanePlan`] it is lowered by ([`plan`], [`plan_wide`]).

use std::collections::{HashMap, HashSet};

use weft_ir::validate::Types;
use weft_ir::{BinaryOp, DType, ForLoop, Inst, Op, Scalar, UnaryOp, ValueId};

use super::{LanePlan, Node, Site, lanes_of};
use crate::lower::Layout;
use crate::lower::inst::operands;
use crate::lower::vector::float_vector_binary;
use crate::lower::wide::Isa;

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
                    crate::lower::inst::op_name(&inst.op)
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
                    DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => false,
                };
                if !ok {
                    return Err(format!("{} on {t} has no vector form here", op.name()));
                }
                let x = self.node(&xs)?;
                let y = self.node(&ys)?;
                Node::Binary(*op, t, x, y)
            }
            Op::Fma(..) if same(&|o| matches!(o, Op::Fma(..))) => {
                let mut parts: [Vec<ValueId>; 3] = Default::default();
                for i in insts {
                    if let Op::Fma(x, y, z) = i.op {
                        for (part, v) in parts.iter_mut().zip([x, y, z]) {
                            part.push(v);
                        }
                    }
                }
                let t = self.ty(parts[0][0])?;
                self.need(t)?;
                if !matches!(t, DType::F32 | DType::F64) {
                    return Err(format!("fma on {t} has no vector form here"));
                }
                let [xs, ys, zs] = parts;
                let x = self.node(&xs)?;
                let y = self.node(&ys)?;
                let z = self.node(&zs)?;
                Node::Fma(t, x, y, z)
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
                    DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => false,
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
