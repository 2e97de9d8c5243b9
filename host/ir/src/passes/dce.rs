//! Dead-code elimination and removal of unused parameters.
//!
//! [`dce`] keeps what can be observed: stores and reductions, and everything they depend on.
//! It marks, from the stores and reductions, every value they use, every value those use, and
//! so on; a `for` loop is live when it holds a store or reduction or when one of its results or
//! carried values is live, and then its bounds are live too; a live carried value or result
//! makes its initial and yielded values live. Then it deletes:
//! - pure instructions (loads included) whose result is not live;
//! - `for` loops that are not live, and the carried values of live `for` loops whose result and
//!   carried value are both dead;
//! - parallel loops that neither store nor reduce.
//!
//! [`remove_unused_params`] then drops the parameters nothing names.

use crate::passes::util::{for_each_param, has_effects, is_pure, map_params, op_uses};
use crate::{Inst, Kernel, Op, ValueId};

/// What [`dce`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DceStats {
    /// Instructions removed (a removed loop counts as one, whatever its body held).
    pub removed: usize,
    /// Dead carried values removed from live `for` loops.
    pub carried_removed: usize,
}

/// Removes dead code from `kernel` (see the [module documentation](self)).
pub fn dce(kernel: &Kernel) -> (Kernel, DceStats) {
    let mut g = Graph {
        value_deps: vec![Vec::new(); kernel.value_bound() as usize],
        loop_deps: Vec::new(),
        roots: Vec::new(),
    };
    g.build(&kernel.body, &mut Vec::new());
    let live = g.mark();
    let mut stats = DceStats::default();
    let mut next_loop = 0;
    let body = sweep(&kernel.body, &live, &mut next_loop, &mut stats);
    let out = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    };
    (out, stats)
}

/// Drops the parameters that no instruction names, and returns the new kernel with, for each
/// old parameter, its new index (`None` if dropped). The parameters that stay keep their order.
pub fn remove_unused_params(kernel: &Kernel) -> (Kernel, Vec<Option<u32>>) {
    let n = kernel.params.len();
    let mut used = vec![false; n];
    for_each_param(&kernel.body, &mut |p| {
        if let Some(u) = used.get_mut(p as usize) {
            *u = true;
        }
    });
    let mut map = vec![None; n];
    let mut params = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        if used[i] {
            map[i] = Some(params.len() as u32);
            params.push(*p);
        }
    }
    let mut body = kernel.body.clone();
    map_params(&mut body, &mut |p| {
        map.get(p as usize).copied().flatten().unwrap_or(p)
    });
    let out = Kernel {
        name: kernel.name.clone(),
        params,
        body,
    };
    (out, map)
}

#[derive(Clone, Copy, Debug)]
enum Node {
    Value(ValueId),
    Loop(usize),
}

/// "If this is live, so are those": per value and per `for` loop (numbered in pre-order).
struct Graph {
    value_deps: Vec<Vec<Node>>,
    loop_deps: Vec<Vec<Node>>,
    roots: Vec<Node>,
}

struct Live {
    values: Vec<bool>,
    loops: Vec<bool>,
}

impl Live {
    fn value(&self, v: ValueId) -> bool {
        self.values.get(v.0 as usize).copied().unwrap_or(false)
    }
}

impl Graph {
    fn add_value_deps(&mut self, v: ValueId, deps: impl IntoIterator<Item = Node>) {
        if let Some(d) = self.value_deps.get_mut(v.0 as usize) {
            d.extend(deps);
        }
    }

    /// Records the edges of `body`; `loops` are the enclosing `for` loops.
    fn build(&mut self, body: &[Inst], loops: &mut Vec<usize>) {
        for inst in body {
            match &inst.op {
                Op::Store(..) | Op::Reduce(..) => {
                    let mut uses = Vec::new();
                    op_uses(&inst.op, &mut |v| uses.push(Node::Value(v)));
                    self.roots.extend(uses);
                    self.roots.extend(loops.iter().map(|&l| Node::Loop(l)));
                }
                Op::Parallel(p) => self.build(&p.body, loops),
                Op::For(l) => {
                    let id = self.loop_deps.len();
                    self.loop_deps
                        .push(vec![Node::Value(l.lo), Node::Value(l.hi)]);
                    self.add_value_deps(l.induction, [Node::Loop(id)]);
                    for (k, &c) in l.carried.iter().enumerate() {
                        let mut deps = vec![Node::Loop(id)];
                        deps.extend(l.init.get(k).map(|&v| Node::Value(v)));
                        deps.extend(l.yields.get(k).map(|&v| Node::Value(v)));
                        self.add_value_deps(c, deps.clone());
                        if let Some(&r) = inst.results.get(k) {
                            self.add_value_deps(r, deps);
                        }
                    }
                    loops.push(id);
                    self.build(&l.body, loops);
                    loops.pop();
                }
                op => {
                    let mut uses = Vec::new();
                    op_uses(op, &mut |v| uses.push(Node::Value(v)));
                    for &r in &inst.results {
                        self.add_value_deps(r, uses.iter().copied());
                    }
                }
            }
        }
    }

    fn mark(&self) -> Live {
        let mut live = Live {
            values: vec![false; self.value_deps.len()],
            loops: vec![false; self.loop_deps.len()],
        };
        let mut work: Vec<Node> = self.roots.clone();
        while let Some(node) = work.pop() {
            let deps = match node {
                Node::Value(v) => match live.values.get_mut(v.0 as usize) {
                    Some(l) if !*l => {
                        *l = true;
                        &self.value_deps[v.0 as usize]
                    }
                    _ => continue,
                },
                Node::Loop(i) => match live.loops.get_mut(i) {
                    Some(l) if !*l => {
                        *l = true;
                        &self.loop_deps[i]
                    }
                    _ => continue,
                },
            };
            work.extend(deps.iter().copied());
        }
        live
    }
}

/// The number of `for` loops in `body`, nested ones included.
fn count_fors(body: &[Inst]) -> usize {
    body.iter()
        .map(|inst| match &inst.op {
            Op::For(l) => 1 + count_fors(&l.body),
            Op::Parallel(p) => count_fors(&p.body),
            _ => 0,
        })
        .sum()
}

fn sweep(body: &[Inst], live: &Live, next_loop: &mut usize, stats: &mut DceStats) -> Vec<Inst> {
    let mut out = Vec::with_capacity(body.len());
    for inst in body {
        match &inst.op {
            Op::Parallel(p) => {
                if !has_effects(&p.body) {
                    *next_loop += count_fors(&p.body);
                    stats.removed += 1;
                    continue;
                }
                let mut inst = inst.clone();
                if let Op::Parallel(q) = &mut inst.op {
                    q.body = sweep(&p.body, live, next_loop, stats);
                }
                out.push(inst);
            }
            Op::For(l) => {
                let id = *next_loop;
                *next_loop += 1;
                if !live.loops.get(id).copied().unwrap_or(false) {
                    *next_loop += count_fors(&l.body);
                    stats.removed += 1;
                    continue;
                }
                let mut l2 = l.clone();
                l2.body = sweep(&l.body, live, next_loop, stats);
                let n = l.carried.len();
                let keep: Vec<bool> = (0..n)
                    .map(|k| {
                        live.value(l.carried[k])
                            || inst.results.get(k).is_some_and(|&r| live.value(r))
                    })
                    .collect();
                if n == l.init.len() && n == l.yields.len() && n == inst.results.len() {
                    let pick = |vs: &[ValueId]| -> Vec<ValueId> {
                        vs.iter()
                            .zip(&keep)
                            .filter(|(_, k)| **k)
                            .map(|(v, _)| *v)
                            .collect()
                    };
                    l2.init = pick(&l.init);
                    l2.carried = pick(&l.carried);
                    l2.yields = pick(&l.yields);
                    stats.carried_removed += keep.iter().filter(|k| !**k).count();
                    out.push(Inst {
                        results: pick(&inst.results),
                        op: Op::For(l2),
                    });
                } else {
                    out.push(Inst {
                        results: inst.results.clone(),
                        op: Op::For(l2),
                    });
                }
            }
            op if is_pure(op) => {
                if inst.results.iter().any(|&r| live.value(r)) {
                    out.push(inst.clone());
                } else {
                    stats.removed += 1;
                }
            }
            _ => out.push(inst.clone()),
        }
    }
    out
}
