//! Top-level values in a step's function: what a body uses and defines ([`Scan`]), which
//! top-level values any function may recompute and which are spilled to the frame
//! ([`TopLevel`]), and making those a step uses available in its entry block.

use std::collections::{BTreeSet, HashMap, HashSet};

use cranelift_codegen::ir::{InstBuilder, MemFlagsData};
use weft_ir::{Inst, Op, ValueId};

use super::inst::operands;
use super::{FnLower, LResult, MAX_DEPTH, cl_type};

/// What a body (recursively) uses, defines and accesses.
#[derive(Default)]
pub(super) struct Scan {
    pub(super) uses: Vec<ValueId>,
    pub(super) defs: HashSet<ValueId>,
    /// Store parameters that are loaded, stored or reduced into.
    pub(super) accessed: BTreeSet<u32>,
    /// Per parameter reduced into: the index values of dimension 0 of every reduction (or
    /// `None` for a rank-0 access).
    pub(super) reduces: HashMap<u32, Vec<Option<ValueId>>>,
}

impl Scan {
    pub(super) fn body(&mut self, body: &[Inst], depth: usize) -> LResult<()> {
        if depth > MAX_DEPTH {
            return Err(format!("loops nested deeper than {MAX_DEPTH}"));
        }
        for inst in body {
            self.uses.extend(operands(&inst.op));
            self.defs.extend(inst.results.iter().copied());
            match &inst.op {
                Op::Load(acc) | Op::Store(acc, _) => {
                    self.accessed.insert(acc.param);
                }
                Op::Reduce(acc, _, _) => {
                    self.accessed.insert(acc.param);
                    self.reduces
                        .entry(acc.param)
                        .or_default()
                        .push(acc.indices.first().copied());
                }
                Op::For(l) => {
                    self.defs.insert(l.induction);
                    self.defs.extend(l.carried.iter().copied());
                    self.body(&l.body, depth + 1)?;
                    self.uses.extend(l.yields.iter().copied());
                }
                Op::Parallel(p) => {
                    self.defs.extend(p.indices.iter().copied());
                    self.body(&p.body, depth + 1)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Facts about the top-level instructions.
pub(super) struct TopLevel<'k> {
    /// Defining instruction (and its position) of each top-level result.
    pub(super) defs: HashMap<ValueId, (usize, &'k Inst)>,
    /// Top-level values that any function may recompute.
    pub(super) remat: HashSet<ValueId>,
    /// Frame word of each spilled top-level value.
    pub(super) spill: HashMap<ValueId, usize>,
}

impl FnLower<'_, '_> {
    /// Makes the top-level values that `scan` uses but does not define available, for a step
    /// at top-level position `pos`: recomputed in the entry block if pure, else loaded from
    /// their spill words.
    pub(super) fn materialize(&mut self, scan: &Scan, pos: usize) -> LResult<()> {
        let mut need: BTreeSet<(usize, ValueId)> = BTreeSet::new();
        let mut work: Vec<ValueId> = scan
            .uses
            .iter()
            .copied()
            .filter(|v| !scan.defs.contains(v))
            .collect();
        let mut visited = HashSet::new();
        while let Some(v) = work.pop() {
            if !visited.insert(v) {
                continue;
            }
            let Some(&(p, inst)) = self.top.defs.get(&v) else {
                // Not a top-level value: the lowering reports it as undefined when used.
                continue;
            };
            if p >= pos {
                continue;
            }
            need.insert((p, v));
            if self.top.remat.contains(&v) {
                work.extend(operands(&inst.op));
            }
        }
        for (_, v) in need {
            if self.env.map.contains_key(&v) {
                continue;
            }
            let inst = self.top.defs[&v].1;
            if self.top.remat.contains(&v) {
                self.lower_inst(inst)?;
            } else if let Some(&word) = self.top.spill.get(&v) {
                let ty = *self
                    .spill_types
                    .get(&v)
                    .ok_or_else(|| format!("internal: type of spilled value {v} unknown"))?;
                let val = self.b.ins().load(
                    cl_type(ty),
                    MemFlagsData::trusted(),
                    self.frame,
                    (word * 8) as i32,
                );
                self.env.define(v, val, ty);
            }
        }
        Ok(())
    }
}
