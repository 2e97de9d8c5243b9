//! How many values a kernel keeps live at once: its register pressure, which bounds the
//! stack frame a back end gives it and the work of its register allocator. The validator
//! refuses kernels above [`crate::semantics::MAX_LIVE`].

use crate::{Inst, Kernel, Op, ValueId};

/// The most values live at once anywhere in `kernel`. A value is live from its definition to
/// its last use; a value used inside a loop but defined before it stays live to the loop's
/// end (every iteration needs it). Linear in the kernel's size (times its loop depth).
pub fn max_live(kernel: &Kernel) -> usize {
    let mut walk = Walk::default();
    walk.spans(&kernel.body);
    walk.pos = 0;
    walk.uses(&kernel.body);
    // A value is live at the positions `def + 1 ..= last use`.
    let mut delta = vec![0i64; walk.pos + 2];
    for (v, &d) in walk.def.iter().enumerate() {
        let (Some(d), Some(&Some(u))) = (d, walk.last.get(v)) else {
            continue;
        };
        if u > d {
            delta[d + 1] += 1;
            delta[u + 1] -= 1;
        }
    }
    let (mut live, mut most) = (0i64, 0i64);
    for d in delta {
        live += d;
        most = most.max(live);
    }
    most as usize
}

#[derive(Default)]
struct Walk {
    /// The position being visited.
    pos: usize,
    /// Each loop's first and last position, in the order the loops are visited.
    loops: Vec<(usize, usize)>,
    /// The loops open around the position being visited (indices into `loops`).
    open: Vec<usize>,
    next_loop: usize,
    /// Where each value is defined, and used last.
    def: Vec<Option<usize>>,
    last: Vec<Option<usize>>,
}

impl Walk {
    /// Numbers the positions and records each loop's span.
    fn spans(&mut self, body: &[Inst]) {
        for inst in body {
            self.pos += 1;
            let inner = match &inst.op {
                Op::Parallel(p) => Some(&p.body),
                Op::For(l) => Some(&l.body),
                _ => None,
            };
            if let Some(inner) = inner {
                let k = self.loops.len();
                self.loops.push((self.pos, 0));
                self.spans(inner);
                self.pos += 1;
                self.loops[k].1 = self.pos;
            }
        }
    }

    fn define(&mut self, v: ValueId) {
        let i = v.0 as usize;
        if self.def.len() <= i {
            self.def.resize(i + 1, None);
            self.last.resize(i + 1, None);
        }
        self.def[i] = Some(self.pos);
    }

    fn use_(&mut self, v: ValueId) {
        let i = v.0 as usize;
        let Some(Some(d)) = self.def.get(i).copied() else {
            return;
        };
        // Used inside a loop that starts after the definition: live to that loop's end (the
        // outermost such loop).
        let at = self
            .open
            .iter()
            .map(|&k| self.loops[k])
            .find(|&(start, _)| start > d)
            .map_or(self.pos, |(_, end)| end);
        let last = &mut self.last[i];
        *last = Some(last.map_or(at, |l| l.max(at)));
    }

    /// Records definitions and uses at the positions `spans` numbered.
    fn uses(&mut self, body: &[Inst]) {
        for inst in body {
            self.pos += 1;
            let mut operands = Vec::new();
            crate::passes::op_uses(&inst.op, &mut |v| operands.push(v));
            match &inst.op {
                Op::Parallel(p) => {
                    self.open_loop(&p.indices);
                    self.uses(&p.body);
                    self.close_loop(&[]);
                }
                Op::For(l) => {
                    for v in [l.lo, l.hi].iter().chain(&l.init) {
                        self.use_(*v);
                    }
                    let mut defined = vec![l.induction];
                    defined.extend(&l.carried);
                    self.open_loop(&defined);
                    self.uses(&l.body);
                    for &y in &l.yields {
                        self.use_(y);
                    }
                    self.close_loop(&inst.results);
                }
                _ => {
                    for v in operands {
                        self.use_(v);
                    }
                    for &r in &inst.results {
                        self.define(r);
                    }
                }
            }
        }
    }

    fn open_loop(&mut self, defined: &[ValueId]) {
        for &v in defined {
            self.define(v);
        }
        self.open.push(self.next_loop);
        self.next_loop += 1;
    }

    fn close_loop(&mut self, results: &[ValueId]) {
        self.open.pop();
        self.pos += 1;
        for &r in results {
            self.define(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::KernelBuilder;
    use crate::{DType, Privilege};

    /// `out[i] = i + (i + 0) + (i + 1) + ... + (i + n - 1)`, with every `i + c` computed
    /// before the sum: `n` of them live at once.
    fn pressure(n: usize, in_loop: bool) -> Kernel {
        let mut k = KernelBuilder::new("pressure");
        let out = k.store(DType::F64, 1, Privilege::Write);
        k.body().parallel(out, |b, i| {
            let x = b.cast(DType::F64, i[0]);
            let vs: Vec<_> = (0..n).map(|c| b.add(x, b.const_f64(c as f64))).collect();
            let sum = if in_loop {
                // Used inside a loop: live for the whole loop.
                let (zero, two) = (b.const_i64(0), b.const_i64(2));
                b.for_loop(zero, two, &[x], |b, _, acc| {
                    vec![vs.iter().fold(acc[0], |a, &v| b.add(a, v))]
                })[0]
            } else {
                vs.iter().rev().fold(x, |a, &v| b.add(a, v))
            };
            b.store(out, i, sum);
        });
        k.finish()
    }

    #[test]
    fn pressure_counts_the_values_live_at_once() {
        for n in [1, 10, 100, 3000] {
            for in_loop in [false, true] {
                let live = max_live(&pressure(n, in_loop));
                assert!(
                    (n..n + 6).contains(&live),
                    "{n} values, in a loop: {in_loop}: {live}"
                );
            }
        }
    }

    #[test]
    fn the_validator_refuses_a_kernel_above_the_live_limit() {
        let err = crate::validate(&pressure(crate::semantics::MAX_LIVE + 10, false))
            .expect_err("refused");
        assert!(err.message.contains("values live at once"), "{err}");
        crate::validate(&pressure(100, true)).expect("fine");
    }
}
