//! Common-subexpression elimination of pure value operations.
//!
//! Fused kernels repeat work: each part reads its scalar parameters, builds its constants and
//! recomputes what an earlier part computed (`sqrt t` in two Black-Scholes steps). An
//! instruction whose operation, with its operands resolved, is identical to one that dominates
//! it (earlier in the same block, or in an enclosing block) is removed and its uses take the
//! earlier result. Operations qualify when their result depends only on their operands and the
//! parameters: constants, `param`, arithmetic, comparisons, `select`, casts, bitcasts,
//! `extent` and `origin`. Loads are left to [forwarding](super::forward), which knows about
//! memory. Operands are compared as they are (`add %a, %b` and `add %b, %a` differ: swapping
//! them may change which NaN payload comes out).

use rustc_hash::FxHashMap as HashMap;

use crate::passes::util::{Subst, map_op_uses};
use crate::{Inst, Kernel, Op, ValueId};

/// What [`cse`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CseStats {
    /// Instructions removed because an identical one dominates them.
    pub reused: usize,
}

/// Removes instructions that recompute a value an earlier instruction computed (see the
/// [module documentation](self)).
pub fn cse(kernel: &Kernel) -> (Kernel, CseStats) {
    let mut c = Cse {
        subst: Subst::new(kernel),
        stats: CseStats::default(),
    };
    let body = c.block(&kernel.body, &HashMap::default());
    let out = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    };
    (out, c.stats)
}

struct Cse {
    subst: Subst,
    stats: CseStats,
}

impl Cse {
    /// Rewrites `body`; `outer` holds the values available from enclosing blocks. The map is
    /// only looked up, never iterated, so the result does not depend on its order (nor on
    /// its hasher: a fast one, as a fused body of hundreds of statements has thousands of
    /// values).
    fn block(&mut self, body: &[Inst], outer: &HashMap<Op, ValueId>) -> Vec<Inst> {
        let mut known = outer.clone();
        known.reserve(body.len());
        let mut out = Vec::with_capacity(body.len());
        for inst in body {
            let mut inst = inst.clone();
            map_op_uses(&mut inst.op, &mut |v| self.subst.get(v));
            if inst.op.is_value()
                && let [result] = inst.results[..]
            {
                if let Some(&earlier) = known.get(&inst.op) {
                    self.subst.set(result, earlier);
                    self.stats.reused += 1;
                    continue;
                }
                known.insert(inst.op.clone(), result);
            }
            match &mut inst.op {
                Op::Parallel(p) => p.body = self.block(&p.body, &known),
                Op::For(l) => {
                    l.body = self.block(&l.body, &known);
                    for y in &mut l.yields {
                        *y = self.subst.get(*y);
                    }
                }
                _ => {}
            }
            out.push(inst);
        }
        out
    }
}
