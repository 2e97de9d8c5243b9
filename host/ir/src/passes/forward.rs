//! Store-to-load forwarding and redundant-load elimination inside parallel loop bodies.
//!
//! Within one iteration of a parallel loop the body runs in order, so memory behaves like
//! ordinary sequential memory there. The pass walks each parallel loop's body keeping a list of
//! *available* elements: `(param, indices) -> value`, from stores (the stored value) and loads
//! (the loaded value), where indices are compared as SSA values (identical ids mean the same
//! element; different ids may or may not).
//!
//! - A load of an available element is removed and its uses take the available value
//!   (forwarding when the value came from a store, deduplication when it came from a load).
//! - A store to `X` makes every available element of every parameter that may overlap `X`
//!   ([`FusionFacts::may_alias`]) unavailable, then makes the stored element available. A
//!   reduction into `X` only makes elements unavailable.
//! - A `for` loop first makes unavailable every element of a parameter that may overlap one the
//!   loop stores to or reduces into anywhere in its body (an iteration may run after those
//!   writes). What remains is available inside the body, whose own stores and loads then add
//!   elements that are available only for the rest of that iteration's body. After the loop the
//!   list is what it was on entry, less what the loop's writes made unavailable.
//!
//! Loads outside parallel loops are left alone.

use crate::passes::pipeline::FusionFacts;
use crate::passes::util::{AccessKind, Subst, for_each_access, map_op_uses};
use crate::{Inst, Kernel, Op, ValueId};

/// What [`forward_loads`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Loads replaced by the value stored earlier at the same element.
    pub forwarded: usize,
    /// Loads replaced by an earlier load of the same element.
    pub deduplicated: usize,
}

/// Forwards stored values to later loads of the same element and removes redundant loads, in
/// every parallel loop of `kernel` (see the [module documentation](self)).
pub fn forward_loads(kernel: &Kernel, facts: &FusionFacts) -> (Kernel, ForwardStats) {
    let mut f = Forward {
        facts,
        subst: Subst::new(kernel),
        stats: ForwardStats::default(),
        narrow: narrow_params(kernel),
    };
    let mut body = Vec::with_capacity(kernel.body.len());
    for inst in &kernel.body {
        let mut inst = inst.clone();
        map_op_uses(&mut inst.op, &mut |v| f.subst.get(v));
        if let Op::Parallel(p) = &mut inst.op {
            let mut avail = Vec::new();
            p.body = f.block(&p.body, &mut avail);
        }
        body.push(inst);
    }
    let out = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    };
    (out, f.stats)
}

/// An available element.
#[derive(Clone, Debug)]
struct Avail {
    param: u32,
    indices: Vec<ValueId>,
    value: ValueId,
    from_store: bool,
}

struct Forward<'a> {
    facts: &'a FusionFacts,
    subst: Subst,
    stats: ForwardStats,
    /// Per parameter: whether it is a store of a narrow unsigned type (`u8`, `u16`, `u32`),
    /// whose stores keep only the low bits of the value: a later load gives those bits, not
    /// the stored value, so such a store forwards nothing.
    narrow: Vec<bool>,
}

/// Per parameter of `kernel`: whether it is a store of `u8`, `u16` or `u32` (see
/// [`Forward::narrow`]).
pub(crate) fn narrow_params(kernel: &Kernel) -> Vec<bool> {
    kernel
        .params
        .iter()
        .map(|p| {
            matches!(p, crate::Param::Store { dtype, .. }
                if dtype.is_unsigned() && *dtype != crate::DType::U64)
        })
        .collect()
}

impl Forward<'_> {
    /// Drops every available element of a parameter that may overlap `param`.
    fn kill(&self, avail: &mut Vec<Avail>, param: u32) {
        avail.retain(|a| !self.facts.may_alias(a.param, param));
    }

    fn block(&mut self, body: &[Inst], avail: &mut Vec<Avail>) -> Vec<Inst> {
        let mut out = Vec::with_capacity(body.len());
        for inst in body {
            let mut inst = inst.clone();
            map_op_uses(&mut inst.op, &mut |v| self.subst.get(v));
            match &mut inst.op {
                Op::Load(a) => {
                    if let [result] = inst.results[..]
                        && let Some(hit) = avail
                            .iter()
                            .find(|e| e.param == a.param && e.indices == a.indices)
                    {
                        if hit.from_store {
                            self.stats.forwarded += 1;
                        } else {
                            self.stats.deduplicated += 1;
                        }
                        self.subst.set(result, hit.value);
                        continue;
                    }
                    if let [result] = inst.results[..] {
                        avail.push(Avail {
                            param: a.param,
                            indices: a.indices.clone(),
                            value: result,
                            from_store: false,
                        });
                    }
                }
                Op::Store(a, _) if self.narrow.get(a.param as usize) == Some(&true) => {
                    self.kill(avail, a.param);
                }
                Op::Store(a, v) => {
                    self.kill(avail, a.param);
                    avail.push(Avail {
                        param: a.param,
                        indices: a.indices.clone(),
                        value: *v,
                        from_store: true,
                    });
                }
                Op::Reduce(a, _, _) => self.kill(avail, a.param),
                Op::For(l) => {
                    let mut written = Vec::new();
                    for_each_access(&l.body, true, &mut |a, kind, _| {
                        if kind != AccessKind::Load && !written.contains(&a.param) {
                            written.push(a.param);
                        }
                    });
                    for w in written {
                        self.kill(avail, w);
                    }
                    let mut inner = avail.clone();
                    l.body = self.block(&l.body, &mut inner);
                    for y in &mut l.yields {
                        *y = self.subst.get(*y);
                    }
                }
                Op::Parallel(p) => {
                    // Not valid here (parallel loops are top level); keep it, and forget
                    // everything.
                    avail.clear();
                    let mut inner = Vec::new();
                    p.body = self.block(&p.body, &mut inner);
                }
                _ => {}
            }
            out.push(inst);
        }
        out
    }
}
