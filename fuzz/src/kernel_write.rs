//! Kernels that write, built from the input and run by Cranelift-compiled code on every SIMD
//! path this CPU has (buffers between guard pages) and by `weft-ir`'s reference interpreter,
//! on the same stores, views, launches and partitions.
//!
//! What is generated:
//! - stores of rank 1 to 4 (the reduction target: 0 to 2, its last dimension now and then
//!   longer than the others) of every element type the IR has (`f32`, `f64`, `i32`, `i64`,
//!   `bool`), each a view of a bigger root: a slice with steps (negative ones included), a
//!   permutation of axes, and for read-only arguments a broadcast (strides of 0); one scalar
//!   of every type;
//! - a parallel loop over the written store `out` whose iterations store at the loop's own
//!   element through a fixed map of each dimension (`i` or `n - 1 - i`, injective, so
//!   race-free), into `big` (dimension 0 twice as long) at `2 i + c`, inside `for` loops too,
//!   and load from `out` only at the element they own; a second parallel loop (over `out` or a
//!   read store) may follow, reading `out` anywhere; sequential top-level code between them;
//! - loads at any index the input computes (the loop's indices directly, shifted, reversed,
//!   wrapped by an extent, an induction value, any integer), reductions (`sum`, `prod`, `min`,
//!   `max`, by the store's `reduce` privilege) at any index (float sums and products reduce
//!   small integers, so that every order gives the same bits: the order is open for stores of
//!   rank 1 or more), `for` loops nested three deep whose bounds use outer counters and carry
//!   values of any type, `for` loops that carry nothing and whose iterations touch distinct
//!   elements (a reduction into `acc` at the induction value, loads at it, arithmetic on
//!   what they load: the shape `weft-cpu` runs as vectors of iterations), row reductions in
//!   lane order (`fold_lanes`), and every binary, unary, comparison, select, cast and bitcast
//!   the IR has, on every type that takes them;
//! - a launch of 1 to 3 points, and partitions of every kind: none, tilings with any tile,
//!   offset and projection (the written stores tiled so that points write disjoint tiles), and
//!   an image partition through an `(n, 2)` store of row ranges.
//!
//! What must hold: nothing panics; no access leaves a buffer (a guard page would stop the
//! process); the validator accepts the kernel (a refusal counts as both refusing, and is
//! counted: [`WriteOutcome::Refused`]); every core accepts or refuses the task alike; every
//! compiled path fails where the interpreter fails, and succeeds where it succeeds, except
//! that compiled code may fault where the interpreter does not when an access indexed
//! directly by a parallel loop's index sits in a `for` loop (or a point runs no iteration):
//! the launcher proves those indices for every iteration before the loop starts (see
//! `weft-cpu`'s *Memory safety*); and where all succeed, the roots of every written store hold
//! the same bits (any NaN equals any NaN), padding outside the views included.

use std::sync::Arc;

use weft_cpu::SimdPath;
use weft_ir::builder::{BodyBuilder, StoreParam, Value};
use weft_ir::{BinaryOp, CmpOp, DType, KernelBuilder, Privilege, ReduceOp, Scalar, UnaryOp};
use weft_runtime::testing::FakeBackend;
use weft_runtime::{
    Core, KernelEntry, NoFusion, Partition, PluginId, RootPartition, Settings, StoreId, TaskArg,
    Tiling, ViewMap,
};

use crate::bytes::Bytes;

/// What one input came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The validator refused the generated kernel (so would both cores).
    Refused,
    /// Every core refused the task, or its run failed on every core.
    Failed,
    /// The run failed on some compiled path where the interpreter's succeeded, as it may when
    /// the launcher proves a loop index for iterations that do not run.
    Lenient,
    /// Every core ran the task, and every written root has the same bits.
    Compared,
}

/// The position of a type in [`DType::ALL`].
fn di(t: DType) -> usize {
    DType::ALL.iter().position(|&d| d == t).unwrap_or(0)
}

/// The kernel's store parameters, in task-argument order.
#[derive(Clone, Copy)]
struct Params {
    /// The written store; the first parallel loop runs over it.
    out: StoreParam,
    /// Written at `2 i + c` on dimension 0 (twice `out`'s length there).
    big: StoreParam,
    /// Read-only stores, broadcast or not.
    a: StoreParam,
    c: StoreParam,
    /// The reduction target.
    acc: StoreParam,
    /// `(n, 2)` row ranges, the source of `img`'s image partition.
    bounds: StoreParam,
    /// Rank 1, read through an image partition or another.
    img: StoreParam,
}

const BOUNDS: u32 = 5;

/// A kernel under construction: the values in scope by type, the enclosing loops, and what
/// the current parallel loop may do.
struct Gen<'a, 'b> {
    b: &'a mut Bytes<'b>,
    p: Params,
    pool: [Vec<Value>; 5],
    /// The parallel loop's indices (none at the top level).
    idx: Vec<Value>,
    /// Whether this loop stores into `out` and `big`, and the map of each dimension
    /// (`true`: `n - 1 - i`).
    writes: bool,
    out_flip: Vec<bool>,
    big_flip: Vec<bool>,
    /// Whether this code may reduce (inside a parallel loop).
    reduces: bool,
    /// The induction values of the enclosing `for` loops, innermost last.
    inductions: Vec<Value>,
    /// Steps left to generate.
    budget: usize,
    /// Whether some access in a `for` loop is indexed directly by a parallel loop's index.
    lenient: bool,
}

/// The binary operators that take operands of type `t`.
fn binary_ops(t: DType) -> Vec<BinaryOp> {
    BinaryOp::ALL
        .into_iter()
        .filter(|op| match op {
            BinaryOp::Pow | BinaryOp::Atan2 => t.is_float(),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => t.is_int() || t == DType::Bool,
            BinaryOp::Shl | BinaryOp::Shr => t.is_int(),
            BinaryOp::Min | BinaryOp::Max => true,
            _ => t != DType::Bool,
        })
        .collect()
}

/// The unary operators that take an operand of type `t`.
fn unary_ops(t: DType) -> Vec<UnaryOp> {
    UnaryOp::ALL
        .into_iter()
        .filter(|op| match op {
            UnaryOp::Not => t.is_int() || t == DType::Bool,
            UnaryOp::Neg | UnaryOp::Abs => t != DType::Bool,
            _ => t.is_float(),
        })
        .collect()
}

/// The reduction operators a store of `t` takes.
fn reduce_ops(t: DType) -> Vec<ReduceOp> {
    ReduceOp::ALL
        .into_iter()
        .filter(|op| t != DType::Bool || matches!(op, ReduceOp::Min | ReduceOp::Max))
        .collect()
}

/// A small deterministic generator of element values, seeded from the input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// An element of `t` as little-endian bytes: small values mostly, the special ones now
    /// and then.
    fn element(&mut self, t: DType) -> Vec<u8> {
        let r = self.next();
        let special = r.is_multiple_of(16);
        let small = ((r >> 8) % 256) as f64 * 0.125 - 8.0;
        let int = match (r >> 16) % 32 {
            0 => i64::MAX,
            1 => i64::MIN,
            2 => 1 << 40,
            k => k as i64 - 12,
        };
        match t {
            DType::F64 => {
                let v = if special {
                    crate::bytes::SPECIAL_F64[((r >> 4) % 10) as usize]
                } else {
                    small
                };
                v.to_le_bytes().to_vec()
            }
            DType::F32 => {
                let v = if special {
                    crate::bytes::SPECIAL_F64[((r >> 4) % 10) as usize] as f32
                } else {
                    small as f32
                };
                v.to_le_bytes().to_vec()
            }
            DType::I64 => int.to_le_bytes().to_vec(),
            DType::I32 => (int as i32).to_le_bytes().to_vec(),
            DType::Bool => vec![(r >> 20) as u8 & 1],
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    /// An element of a float reduction target of `op`: a small integer (sums) or a power of
    /// two of either sign (products), so that every order of the reduction gives its bits.
    fn tame(&mut self, t: DType, op: ReduceOp) -> Vec<u8> {
        let r = self.next();
        let v = match op {
            ReduceOp::Prod => [1.0, 2.0, -1.0, -2.0][(r % 4) as usize],
            _ => (r % 17) as f64 - 8.0,
        };
        match t {
            DType::F32 => (v as f32).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        }
    }
}

impl Gen<'_, '_> {
    fn dtype(&mut self) -> DType {
        DType::VALUES[self.b.below(5)]
    }

    fn pick(&mut self, t: DType) -> Value {
        let pool = &self.pool[di(t)];
        pool[self.b.below(pool.len())]
    }

    fn push(&mut self, v: Value) {
        self.pool[di(v.dtype())].push(v);
    }

    fn constant(&mut self, bb: &BodyBuilder, t: DType) -> Value {
        let w = self.b.word();
        let c = match t {
            DType::F64 => Scalar::F64(self.b.float()),
            DType::F32 => Scalar::F32(self.b.float() as f32),
            DType::I64 => Scalar::I64(w),
            DType::I32 => Scalar::I32(w as i32),
            DType::Bool => Scalar::Bool(w % 2 == 0),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        };
        bb.constant(c)
    }

    /// One of the parallel loop's indices, `d`'s if it has that many (none at the top level).
    fn loop_index(&mut self, d: u32) -> Option<Value> {
        if self.idx.is_empty() {
            return None;
        }
        let k = if (d as usize) < self.idx.len() && !self.b.byte().is_multiple_of(4) {
            d as usize
        } else {
            self.b.below(self.idx.len())
        };
        Some(self.idx[k])
    }

    /// An index into dimension `d` of `store`, computed as the input says.
    fn index(&mut self, bb: &BodyBuilder, store: StoreParam, d: u32) -> Value {
        let choice = self.b.byte() % 10;
        let i = self.loop_index(d);
        match (choice, i) {
            (0..=3, Some(i)) => {
                // Directly the loop's index: proven by the launcher, for every iteration.
                if !self.inductions.is_empty() {
                    self.lenient = true;
                }
                i
            }
            (4, Some(i)) => {
                let k = bb.const_i64(self.b.word());
                bb.add(i, k)
            }
            (5, Some(i)) => {
                let n = bb.extent(store, d);
                let one = bb.const_i64(1);
                let last = bb.sub(n, one);
                bb.sub(last, i)
            }
            (6, _) if !self.inductions.is_empty() => {
                let k = self.b.below(self.inductions.len());
                self.inductions[self.inductions.len() - 1 - k]
            }
            (7, _) => {
                // Wrapped into the extent (in bounds unless the value is `i64::MIN`).
                let x = self.pick(DType::I64);
                let n = bb.extent(store, d);
                let x = bb.abs(x);
                bb.rem(x, n)
            }
            (8, _) => {
                let v = self.pick(DType::I64);
                if self.idx.contains(&v) && !self.inductions.is_empty() {
                    self.lenient = true;
                }
                v
            }
            _ => {
                let c = self.b.below(6) as i64;
                bb.const_i64(c)
            }
        }
    }

    fn indices(&mut self, bb: &BodyBuilder, store: StoreParam) -> Vec<Value> {
        (0..store.rank())
            .map(|d| self.index(bb, store, d))
            .collect()
    }

    /// The element of `out` (or `big`, at `2 i + c` on dimension 0) that this iteration owns.
    fn own(&mut self, bb: &BodyBuilder, big: bool) -> Vec<Value> {
        let store = if big { self.p.big } else { self.p.out };
        let flips = if big {
            self.big_flip.clone()
        } else {
            self.out_flip.clone()
        };
        let idx = self.idx.clone();
        let mut at = Vec::with_capacity(idx.len());
        for (d, (&i, &flip)) in idx.iter().zip(&flips).enumerate() {
            let d = d as u32;
            if big && d == 0 {
                let two = bb.const_i64(2);
                let c = bb.const_i64(i64::from(self.b.byte() % 2));
                let twice = bb.mul(i, two);
                at.push(bb.add(twice, c));
            } else if flip {
                let n = bb.extent(store, d);
                let one = bb.const_i64(1);
                let last = bb.sub(n, one);
                at.push(bb.sub(last, i));
            } else {
                if !self.inductions.is_empty() {
                    self.lenient = true;
                }
                at.push(i);
            }
        }
        at
    }

    fn load(&mut self, bb: &BodyBuilder) {
        let p = self.p;
        let v = match self.b.byte() % 8 {
            0 | 1 => {
                let at = self.indices(bb, p.a);
                bb.load(p.a, &at)
            }
            2 | 3 => {
                let at = self.indices(bb, p.c);
                bb.load(p.c, &at)
            }
            4 => {
                let at = self.indices(bb, p.img);
                bb.load(p.img, &at)
            }
            5 => {
                let at = self.indices(bb, p.bounds);
                bb.load(p.bounds, &at)
            }
            _ if !p.out.privilege().can_read() => return,
            _ if self.writes => {
                // Only the element this iteration owns: the others are another's to write.
                let at = self.own(bb, false);
                bb.load(p.out, &at)
            }
            _ => {
                let at = self.indices(bb, p.out);
                bb.load(p.out, &at)
            }
        };
        self.push(v);
    }

    fn store(&mut self, bb: &BodyBuilder) {
        if !self.writes {
            return;
        }
        let big = self.b.byte().is_multiple_of(3);
        let at = self.own(bb, big);
        let target = if big { self.p.big } else { self.p.out };
        let v = self.pick(target.dtype());
        bb.store(target, &at, v);
    }

    /// A value to reduce into `acc`: for float sums and products, a small integer or a power
    /// of two made from the input's value (see [`Rng::tame`]).
    fn reduced(&mut self, bb: &BodyBuilder) -> Value {
        let acc = self.p.acc;
        let t = acc.dtype();
        let x = self.pick(t);
        let Privilege::Reduce(op) = acc.privilege() else {
            return x;
        };
        if !t.is_float() || matches!(op, ReduceOp::Min | ReduceOp::Max) {
            return x;
        }
        let n = bb.cast(DType::I32, x);
        let (mask, shift) = match op {
            ReduceOp::Prod => (bb.const_i32(1), bb.const_i32(1)),
            _ => (bb.const_i32(3), bb.const_i32(-1)),
        };
        let n = bb.and(n, mask);
        let n = bb.add(n, shift);
        bb.cast(t, n)
    }

    fn reduce(&mut self, bb: &BodyBuilder) {
        if !self.reduces {
            return;
        }
        let at = self.indices(bb, self.p.acc);
        let v = self.reduced(bb);
        bb.reduce(self.p.acc, &at, v);
    }

    /// Bounds of a `for` loop: `lo` small, an outer counter or a loop index, and at most 8
    /// iterations.
    fn bounds(&mut self, bb: &BodyBuilder) -> (Value, Value) {
        let lo = match (self.b.byte() % 4, self.inductions.last(), self.idx.first()) {
            (0, Some(&j), _) => j,
            (1, _, Some(&i)) => i,
            _ => bb.const_i64(self.b.below(5) as i64 - 1),
        };
        let most = bb.const_i64(self.b.below(9) as i64);
        let most = bb.add(lo, most);
        let hi = match self.b.byte() % 5 {
            0 if !self.inductions.is_empty() => {
                let k = self.b.below(self.inductions.len());
                self.inductions[k]
            }
            1 if !self.idx.is_empty() => {
                let i = self.idx[self.b.below(self.idx.len())];
                let one = bb.const_i64(1);
                bb.add(i, one)
            }
            2 => {
                let a = self.p.a;
                let d = self.b.below(a.rank() as usize) as u32;
                bb.extent(a, d)
            }
            3 => self.pick(DType::I64),
            _ => return (lo, most),
        };
        (lo, bb.min(hi, most))
    }

    fn for_loop(&mut self, bb: &mut BodyBuilder) {
        if self.inductions.len() >= 3 {
            return;
        }
        let (lo, hi) = self.bounds(bb);
        let n = 1 + self.b.below(3);
        let init: Vec<Value> = (0..n)
            .map(|_| {
                let t = self.dtype();
                self.pick(t)
            })
            .collect();
        let steps = self.b.below(8);
        let saved: Vec<usize> = self.pool.iter().map(Vec::len).collect();
        let results = bb.for_loop(lo, hi, &init, |lb, j, carried| {
            self.inductions.push(j);
            self.push(j);
            for &c in carried {
                self.push(c);
            }
            self.steps(lb, steps);
            let ys = carried.iter().map(|c| self.pick(c.dtype())).collect();
            self.inductions.pop();
            ys
        });
        for (pool, n) in self.pool.iter_mut().zip(saved) {
            pool.truncate(n);
        }
        for r in results {
            self.push(r);
        }
    }

    /// A `for` loop that carries no values and whose iterations touch distinct elements, the
    /// shape `weft-cpu` runs as vectors of consecutive iterations (`lower::iterations`): each
    /// iteration `j` reduces into `acc` at `[k.., j]` (the same index list every time, `k`
    /// not depending on `j`: race-free, as `acc` is reduced), loads `a`, `c`, `img` or
    /// `bounds` at `[m.., j]`, and computes on what it loaded with the operations that have
    /// a vector form (and now and then one that has none, or operands of another width).
    /// `j` stays inside every extent it indexes unless `lo` is `-1`.
    fn distinct_loop(&mut self, bb: &mut BodyBuilder) {
        let p = self.p;
        let acc = p.acc;
        let t = acc.dtype();
        let last = acc.rank() - 1;
        let width = |u: DType| match u {
            DType::F64 | DType::I64 => 2,
            DType::F32 | DType::I32 => 4,
            DType::Bool => 0,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        };
        // `acc`'s other indices: mostly constants (the reduction then goes to a chunk-private
        // buffer), now and then any index (the parallel loop's own row: in place).
        let mut outer = Vec::new();
        for d in 0..last {
            outer.push(if self.b.byte().is_multiple_of(4) {
                self.index(bb, acc, d)
            } else {
                bb.const_i64(self.b.below(2) as i64)
            });
        }
        // The stores loaded at `j`: mostly of the lanes' width.
        let mut loads = Vec::new();
        for _ in 0..self.b.below(3) {
            let all = [p.a, p.c, p.img, p.bounds];
            let fit: Vec<StoreParam> = all
                .into_iter()
                .filter(|s| width(s.dtype()) == width(t))
                .collect();
            let src = if fit.is_empty() || self.b.byte().is_multiple_of(5) {
                all[self.b.below(all.len())]
            } else {
                fit[self.b.below(fit.len())]
            };
            let at: Vec<Value> = (0..src.rank() - 1)
                .map(|d| self.index(bb, src, d))
                .collect();
            loads.push((src, at));
        }
        // (Indices computed before the loop; a parallel loop's index among them is proven
        // for every iteration, which the loop may not run.)
        self.lenient |= outer
            .iter()
            .chain(loads.iter().flat_map(|(_, at)| at))
            .any(|v| self.idx.contains(v));
        let lo = if self.b.byte().is_multiple_of(8) {
            bb.const_i64(-1)
        } else {
            bb.const_i64(self.b.below(3) as i64)
        };
        let cap = bb.const_i64(self.b.below(20) as i64);
        let mut hi = bb.add(lo, cap);
        let n = bb.extent(acc, last);
        hi = bb.min(hi, n);
        for (src, _) in &loads {
            let n = bb.extent(*src, src.rank() - 1);
            hi = bb.min(hi, n);
        }
        let ops = self.b.below(5);
        let twice = self.b.byte().is_multiple_of(4);
        bb.for_loop(lo, hi, &[], |lb, j, _| {
            let mut vary: Vec<Value> = loads
                .iter()
                .map(|(src, at)| {
                    let mut at = at.clone();
                    at.push(j);
                    lb.load(*src, &at)
                })
                .collect();
            for _ in 0..ops {
                let Some(&x) = vary.get(self.b.below(vary.len())) else {
                    break;
                };
                let u = x.dtype();
                let v = if u.is_float() && self.b.byte().is_multiple_of(4) {
                    let op = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt][self.b.below(3)];
                    lb.unary(op, x)
                } else {
                    let ops: &[BinaryOp] = if u.is_float() {
                        &[
                            BinaryOp::Add,
                            BinaryOp::Sub,
                            BinaryOp::Mul,
                            BinaryOp::Div,
                            BinaryOp::Min,
                            BinaryOp::Max,
                        ]
                    } else if u.is_int() {
                        &[
                            BinaryOp::Add,
                            BinaryOp::Sub,
                            BinaryOp::And,
                            BinaryOp::Or,
                            BinaryOp::Xor,
                        ]
                    } else {
                        &[BinaryOp::And, BinaryOp::Or, BinaryOp::Xor]
                    };
                    // Now and then an operator with no vector form (the loop stays scalar).
                    let op = if self.b.byte().is_multiple_of(16) {
                        let all = binary_ops(u);
                        all[self.b.below(all.len())]
                    } else {
                        ops[self.b.below(ops.len())]
                    };
                    let same: Vec<Value> =
                        vary.iter().copied().filter(|v| v.dtype() == u).collect();
                    let y = if self.b.byte().is_multiple_of(2) {
                        same[self.b.below(same.len())]
                    } else {
                        self.pick(u)
                    };
                    lb.binary(op, x, y)
                };
                vary.push(v);
            }
            // The value reduced: one the iteration computed where every order gives the
            // same bits (integers, `min` and `max`), else a tame one that does not vary.
            let exact = !t.is_float()
                || matches!(
                    acc.privilege(),
                    Privilege::Reduce(ReduceOp::Min | ReduceOp::Max)
                );
            let own: Vec<Value> = vary.iter().copied().filter(|v| v.dtype() == t).collect();
            let v = if exact && !own.is_empty() && !self.b.byte().is_multiple_of(4) {
                own[self.b.below(own.len())]
            } else {
                self.reduced(lb)
            };
            let mut at = outer.clone();
            at.push(j);
            lb.reduce(acc, &at, v);
            if twice {
                let w = self.reduced(lb);
                lb.reduce(acc, &at, w);
            }
            Vec::new()
        });
    }

    /// A row reduction in lane order over the last dimension of `a` or `c`.
    fn fold(&mut self, bb: &mut BodyBuilder) {
        if self.inductions.len() >= 2 {
            return;
        }
        let p = self.p;
        let t = self.dtype();
        let ops = reduce_ops(t);
        let op = ops[self.b.below(ops.len())];
        let src = if self.b.byte().is_multiple_of(2) {
            p.a
        } else {
            p.c
        };
        let last = src.rank() - 1;
        let outer: Vec<Value> = (0..last).map(|d| self.index(bb, src, d)).collect();
        let other = if self.b.byte().is_multiple_of(2) {
            Some(if src == p.a { p.c } else { p.a })
        } else {
            None
        };
        let other_outer: Vec<Value> = match other {
            Some(o) => (0..o.rank() - 1).map(|d| self.index(bb, o, d)).collect(),
            None => Vec::new(),
        };
        let lo = bb.const_i64(self.b.below(3) as i64);
        let n = bb.extent(src, last);
        let cap = bb.const_i64(2 + self.b.below(24) as i64);
        let cap = bb.add(lo, cap);
        let hi = bb.min(n, cap);
        let combine = match t {
            DType::Bool => BinaryOp::And,
            _ if self.b.byte().is_multiple_of(2) => BinaryOp::Mul,
            _ => BinaryOp::Add,
        };
        if !outer.is_empty() || !other_outer.is_empty() {
            // (The outer indices are computed before the loop; a loop index among them is
            // proven for every iteration, which the loop may not run.)
            self.lenient |= outer
                .iter()
                .chain(&other_outer)
                .any(|v| self.idx.contains(v));
        }
        let r = bb.fold_lanes(op, t, lo, hi, |lb, q| {
            let mut at = outer.clone();
            at.push(q);
            let x = lb.load(src, &at);
            let x = if x.dtype() == t { x } else { lb.cast(t, x) };
            match other {
                Some(o) => {
                    let mut at = other_outer.clone();
                    at.push(q);
                    let y = lb.load(o, &at);
                    let y = if y.dtype() == t { y } else { lb.cast(t, y) };
                    lb.binary(combine, x, y)
                }
                None => x,
            }
        });
        self.push(r);
    }

    fn step(&mut self, bb: &mut BodyBuilder) {
        match self.b.byte() % 17 {
            0 => {
                let t = self.dtype();
                let v = self.constant(bb, t);
                self.push(v);
            }
            1..=3 => {
                let t = self.dtype();
                let ops = binary_ops(t);
                let op = ops[self.b.below(ops.len())];
                let (x, y) = (self.pick(t), self.pick(t));
                let v = bb.binary(op, x, y);
                self.push(v);
            }
            4 => {
                let t = self.dtype();
                let ops = unary_ops(t);
                let op = ops[self.b.below(ops.len())];
                let x = self.pick(t);
                let v = bb.unary(op, x);
                self.push(v);
            }
            5 => {
                let t = self.dtype();
                let op = CmpOp::ALL[self.b.below(CmpOp::ALL.len())];
                let (x, y) = (self.pick(t), self.pick(t));
                let cond = bb.cmp(op, x, y);
                let u = self.dtype();
                let (p, q) = (self.pick(u), self.pick(u));
                let v = bb.select(cond, p, q);
                self.push(cond);
                self.push(v);
            }
            6 => {
                let (from, to) = (self.dtype(), self.dtype());
                let x = self.pick(from);
                let v = if self.b.byte().is_multiple_of(4) {
                    let to = match from {
                        DType::F64 => DType::I64,
                        DType::I64 => DType::F64,
                        DType::F32 => DType::I32,
                        DType::I32 => DType::F32,
                        DType::Bool => DType::Bool,
                        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                            unreachable!("storage types hold no values")
                        }
                    };
                    bb.bitcast(to, x)
                } else {
                    bb.cast(to, x)
                };
                self.push(v);
            }
            7..=9 => self.load(bb),
            10 | 11 => self.store(bb),
            12 | 13 => self.reduce(bb),
            14 if self.reduces
                && self.p.acc.rank() >= 1
                && self.inductions.len() < 3
                && self.b.byte().is_multiple_of(2) =>
            {
                self.distinct_loop(bb)
            }
            14 => self.for_loop(bb),
            15 => self.fold(bb),
            _ => {
                let p = self.p;
                let s = [p.a, p.c, p.out, p.big, p.img][self.b.below(5)];
                let d = self.b.below(s.rank() as usize) as u32;
                let v = if self.b.byte().is_multiple_of(2) {
                    bb.extent(s, d)
                } else {
                    bb.origin(s, d)
                };
                self.push(v);
            }
        }
    }

    fn steps(&mut self, bb: &mut BodyBuilder, n: usize) {
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            self.step(bb);
        }
    }

    /// The body of a parallel loop with indices `idx`, writing `out` and `big` if `writes`.
    fn parallel_body(&mut self, bb: &mut BodyBuilder, idx: &[Value], writes: bool) {
        let saved: Vec<usize> = self.pool.iter().map(Vec::len).collect();
        self.idx = idx.to_vec();
        for &i in idx {
            self.push(i);
        }
        self.writes = writes;
        self.reduces = true;
        let rank = self.p.out.rank() as usize;
        self.out_flip = (0..rank).map(|_| self.b.byte().is_multiple_of(4)).collect();
        self.big_flip = (0..rank).map(|_| self.b.byte().is_multiple_of(4)).collect();
        let steps = self.b.below(24);
        self.steps(bb, steps);
        if writes {
            // Every element of `out` is written (so that `Write` leaves nothing undefined).
            let at = self.own(bb, false);
            let v = self.pick(self.p.out.dtype());
            bb.store(self.p.out, &at, v);
        }
        for (pool, n) in self.pool.iter_mut().zip(saved) {
            pool.truncate(n);
        }
        self.idx.clear();
        self.writes = false;
        self.reduces = false;
    }
}

/// The shapes of the kernel's stores, from the input.
struct Ranks {
    out: (DType, u32, Privilege),
    a: (DType, u32),
    c: (DType, u32),
    acc: (DType, u32, ReduceOp),
    img: DType,
}

fn ranks(b: &mut Bytes) -> Ranks {
    let dt = |b: &mut Bytes| DType::VALUES[b.below(5)];
    let out_t = dt(b);
    let out = (
        out_t,
        1 + b.below(4) as u32,
        if b.byte().is_multiple_of(3) {
            Privilege::ReadWrite
        } else {
            Privilege::Write
        },
    );
    let a = (dt(b), 1 + b.below(4) as u32);
    let c = (dt(b), 1 + b.below(4) as u32);
    let acc_t = dt(b);
    let ops = reduce_ops(acc_t);
    let acc = (acc_t, b.below(3) as u32, ops[b.below(ops.len())]);
    Ranks {
        out,
        a,
        c,
        acc,
        img: dt(b),
    }
}

/// Builds the kernel the input describes (see the module documentation); the kernel, whether
/// it may fault only in compiled code, and the parameters.
fn kernel(b: &mut Bytes, r: &Ranks) -> (weft_ir::Kernel, bool) {
    let mut k = KernelBuilder::new("fz.write");
    let p = Params {
        out: k.store(r.out.0, r.out.1, r.out.2),
        big: k.store(r.out.0, r.out.1, Privilege::Write),
        a: k.store(r.a.0, r.a.1, Privilege::Read),
        c: k.store(r.c.0, r.c.1, Privilege::Read),
        acc: k.store(r.acc.0, r.acc.1, Privilege::Reduce(r.acc.2)),
        bounds: k.store(DType::I64, 2, Privilege::Read),
        img: k.store(r.img, 1, Privilege::Read),
    };
    let scalars: Vec<Value> = DType::VALUES.iter().map(|&t| k.scalar(t)).collect();
    let mut g = Gen {
        b,
        p,
        pool: Default::default(),
        idx: Vec::new(),
        writes: false,
        out_flip: Vec::new(),
        big_flip: Vec::new(),
        reduces: false,
        inductions: Vec::new(),
        budget: 64,
        lenient: false,
    };
    for v in scalars {
        g.push(v);
    }
    let bb = k.body();
    // Pure top-level values first, visible everywhere.
    let top = g.b.below(3);
    for _ in 0..top {
        let t = g.dtype();
        let v = g.constant(bb, t);
        g.push(v);
    }
    bb.parallel(p.out, |bb, idx| g.parallel_body(bb, idx, true));
    if g.b.byte().is_multiple_of(2) {
        // Sequential code between the loops: loads (of `out` too), arithmetic, `for` loops.
        let n = g.b.below(6);
        let saved: Vec<usize> = g.pool.iter().map(Vec::len).collect();
        g.steps(bb, n);
        if g.b.byte().is_multiple_of(2) {
            // A second loop reads what the first wrote, anywhere, or writes again.
            match g.b.byte() % 3 {
                0 => bb.parallel(p.out, |bb, idx| g.parallel_body(bb, idx, true)),
                1 => bb.parallel(p.a, |bb, idx| g.parallel_body(bb, idx, false)),
                _ => bb.parallel(p.c, |bb, idx| g.parallel_body(bb, idx, false)),
            }
        }
        for (pool, n) in g.pool.iter_mut().zip(saved) {
            pool.truncate(n);
        }
    }
    let lenient = g.lenient;
    (k.finish(), lenient)
}

/// How one store is laid out in its root: per dimension a step (negative: reversed) and
/// padding, a permutation of axes, and for read-only stores the dimensions broadcast.
struct Layout {
    steps: Vec<i64>,
    pads: Vec<(u64, u64)>,
    axes: Vec<u32>,
    broadcast: Vec<bool>,
    /// Leading broadcast dimensions the root does not have.
    lead: usize,
}

fn layout(b: &mut Bytes, rank: usize, read_only: bool) -> Layout {
    if b.byte().is_multiple_of(3) {
        return Layout {
            steps: vec![1; rank],
            pads: vec![(0, 0); rank],
            axes: (0..rank as u32).collect(),
            broadcast: vec![false; rank],
            lead: 0,
        };
    }
    let steps = (0..rank).map(|_| [1, 1, 2, -1, -2][b.below(5)]).collect();
    let pads = (0..rank)
        .map(|_| (b.below(3) as u64, b.below(2) as u64))
        .collect();
    let mut axes: Vec<u32> = (0..rank as u32).collect();
    if b.byte().is_multiple_of(2) {
        for k in (1..rank).rev() {
            axes.swap(k, b.below(k + 1));
        }
    }
    let broadcast: Vec<bool> = (0..rank)
        .map(|_| read_only && b.byte().is_multiple_of(3))
        .collect();
    let lead = if read_only {
        broadcast.iter().take_while(|&&x| x).count().min(b.below(3))
    } else {
        0
    };
    Layout {
        steps,
        pads,
        axes,
        broadcast,
        lead,
    }
}

/// A store of shape `shape` laid out as `lay` in a root filled with `data` (the root's
/// elements): the view and its root.
fn make_store(
    core: &mut Core,
    dtype: DType,
    shape: &[u64],
    lay: &Layout,
    data: &dyn Fn(u64) -> Vec<u8>,
) -> Option<(StoreId, StoreId)> {
    // Before the broadcast: stretched dimensions of extent 1, leading ones dropped.
    let pre: Vec<u64> = shape
        .iter()
        .zip(&lay.broadcast)
        .map(|(&n, &bc)| if bc { 1 } else { n })
        .collect();
    let pre = &pre[lay.lead..];
    let axes: Vec<u32> = if lay.lead == 0 {
        lay.axes.clone()
    } else {
        (0..pre.len() as u32).collect()
    };
    // The strided view has shape `q`, so that its permutation by `axes` has shape `pre`.
    let mut q = vec![0; pre.len()];
    for (d, &a) in axes.iter().enumerate() {
        q[a as usize] = pre[d];
    }
    let mut root_shape = Vec::with_capacity(q.len());
    let mut start = Vec::with_capacity(q.len());
    for (e, &n) in q.iter().enumerate() {
        let (s, (lo, hi)) = (lay.steps[e], lay.pads[e]);
        let span = if n == 0 {
            0
        } else {
            s.unsigned_abs() * (n - 1) + 1
        };
        root_shape.push(lo + span + hi);
        start.push(if s < 0 && n > 0 {
            lo + s.unsigned_abs() * (n - 1)
        } else {
            lo
        });
    }
    let volume: u64 = root_shape.iter().product();
    if volume > 1 << 14 {
        return None;
    }
    let bytes: Vec<u8> = (0..volume).flat_map(data).collect();
    let root = core
        .store_from_bytes(root_shape.clone(), dtype, &bytes)
        .ok()?;
    core.retain(root).ok()?;
    let steps = lay.steps[..q.len()].to_vec();
    let mut view = root;
    let derive = |core: &mut Core,
                  view: &mut StoreId,
                  make: &dyn Fn(&ViewMap) -> Result<ViewMap, weft_runtime::ViewError>|
     -> Option<()> {
        let next = core.view(*view, make).ok()?;
        core.release(*view);
        *view = next;
        Some(())
    };
    let plain = steps.iter().all(|&s| s == 1) && start.iter().all(|&s| s == 0) && q == root_shape;
    if !plain {
        derive(core, &mut view, &|m| m.strided(&start, &steps, &q))?;
    }
    if axes.iter().enumerate().any(|(d, &a)| a as usize != d) {
        derive(core, &mut view, &|m| m.permute(&axes))?;
    }
    if pre != shape {
        derive(core, &mut view, &|m| m.broadcast_to(shape))?;
    }
    Some((view, root))
}

/// Everything about one run but the kernel: shapes, layouts, data, partitions, scalars.
struct Setup {
    shapes: Vec<Vec<u64>>,
    layouts: Vec<Layout>,
    seed: u64,
    points: u64,
    partitions: Vec<Partition>,
    scalars: Vec<Scalar>,
}

fn tiling(b: &mut Bytes, rank: usize, projected: Option<usize>) -> Tiling {
    let tile = (0..rank)
        .map(|_| match b.byte() % 8 {
            0 => b.word().unsigned_abs(),
            k => u64::from(k) - 1,
        })
        .collect();
    let offset = (0..rank).map(|_| b.word()).collect();
    let projection = (0..rank)
        .map(|d| match projected {
            Some(p) => (p == d).then_some(0),
            None => b.byte().is_multiple_of(2).then_some(0),
        })
        .collect();
    Tiling {
        tile,
        offset,
        projection,
        skew: None,
    }
}

fn setup(b: &mut Bytes, r: &Ranks) -> Setup {
    let base: Vec<u64> = (0..4).map(|_| b.below(6) as u64).collect();
    let shape = |b: &mut Bytes, rank: u32| -> Vec<u64> {
        let mut s = base[..rank as usize].to_vec();
        if b.byte().is_multiple_of(4) && !s.is_empty() {
            let d = b.below(s.len());
            s[d] = b.below(7) as u64;
        }
        s
    };
    let out = shape(b, r.out.1);
    let mut big = out.clone();
    big[0] *= 2;
    let a = shape(b, r.a.1);
    let c = shape(b, r.c.1);
    let mut acc = shape(b, r.acc.1);
    if let Some(n) = acc.last_mut()
        && b.byte().is_multiple_of(3)
    {
        // Now and then a longer last dimension, so that loops over it run whole vectors of
        // iterations, unrolled (see `Gen::distinct_loop`).
        *n = 7 + b.below(12) as u64;
    }
    let bounds = vec![b.below(6) as u64, 2];
    let img = vec![b.below(12) as u64];
    let shapes = vec![out, big, a, c, acc, bounds, img];
    let layouts: Vec<Layout> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| layout(b, s.len(), !matches!(k, 0 | 1 | 4)))
        .collect();
    let seed = u64::from(b.byte()) << 8 | u64::from(b.byte()) | 1;
    let points = 1 + b.below(3) as u64;
    // `out` and `big` tiled alike, `big` at twice the tile and offset on dimension 0, one
    // dimension moved by the launch: the points write disjoint tiles.
    let (out_p, big_p) = if points == 1 && b.byte().is_multiple_of(4) {
        (Partition::None, Partition::None)
    } else {
        let moved = b.below(shapes[0].len());
        let t = tiling(b, shapes[0].len(), Some(moved));
        let mut u = t.clone();
        u.tile[0] = u.tile[0].saturating_mul(2);
        u.offset[0] = u.offset[0].saturating_mul(2);
        (Partition::Tiling(t), Partition::Tiling(u))
    };
    let any = |b: &mut Bytes, rank: usize| {
        if b.byte().is_multiple_of(2) {
            Partition::None
        } else {
            Partition::Tiling(tiling(b, rank, None))
        }
    };
    let a_p = any(b, shapes[2].len());
    let c_p = any(b, shapes[3].len());
    let acc_p = any(b, shapes[4].len());
    let bounds_p = if b.byte().is_multiple_of(2) {
        Partition::None
    } else {
        let t = tiling(b, 1, Some(0));
        Partition::Tiling(Tiling {
            tile: vec![t.tile[0], 2].into(),
            offset: vec![t.offset[0], 0].into(),
            projection: weft_runtime::smallvec::smallvec![Some(0), None],
            skew: None,
        })
    };
    let img_p = match b.byte() % 3 {
        0 => Partition::Image(BOUNDS),
        1 => Partition::None,
        _ => Partition::Tiling(tiling(b, 1, None)),
    };
    let scalars = vec![
        Scalar::F32(b.float() as f32),
        Scalar::F64(b.float()),
        Scalar::I32(b.word() as i32),
        Scalar::I64(b.word()),
        Scalar::Bool(b.byte().is_multiple_of(2)),
    ];
    Setup {
        shapes,
        layouts,
        seed,
        points,
        partitions: vec![out_p, big_p, a_p, c_p, acc_p, bounds_p, img_p],
        scalars,
    }
}

/// What one core made of the task: submit and flush accepted, and each written root's bytes.
#[derive(Debug)]
struct Run {
    submitted: bool,
    /// The flush's error, if any.
    flushed: Result<(), String>,
    roots: Vec<Option<Vec<u8>>>,
}

impl Run {
    fn failed(&self) -> bool {
        self.flushed.is_err() || self.roots.iter().any(Option::is_none)
    }

    /// Whether the run failed as the launcher fails an access indexed directly by a parallel
    /// loop's index when the loop's extent passes the store's (`weft-cpu`'s
    /// `check_obligations`), before any iteration runs.
    fn failed_proving(&self) -> bool {
        self.flushed
            .as_ref()
            .is_err_and(|e| e.contains("the parallel loop over parameter"))
    }
}

/// The stores of one run, made on `core`; `None` if a view cannot be made (the same on
/// every core).
fn run(core: &mut Core, kernel: &Arc<KernelEntry>, r: &Ranks, s: &Setup) -> Option<Run> {
    let dtypes = [r.out.0, r.out.0, r.a.0, r.c.0, r.acc.0, DType::I64, r.img];
    let mut made = Vec::new();
    for (k, ((shape, lay), &t)) in s.shapes.iter().zip(&s.layouts).zip(&dtypes).enumerate() {
        let rng = std::cell::RefCell::new(Rng(s.seed.wrapping_mul(k as u64 + 1) | 1));
        let bound = s.shapes[6][0] + 2;
        let data = |_e: u64| -> Vec<u8> {
            let mut g = rng.borrow_mut();
            match k {
                4 if t.is_float() && matches!(r.acc.2, ReduceOp::Sum | ReduceOp::Prod) => {
                    g.tame(t, r.acc.2)
                }
                // Row ranges: mostly inside `img`, now and then past it or reversed.
                5 => ((g.next() % (bound + 1)) as i64 - 1).to_le_bytes().to_vec(),
                _ => g.element(t),
            }
        };
        match make_store(core, t, shape, lay, &data) {
            Some(pair) => made.push(pair),
            None => {
                for (v, root) in made {
                    core.release(v);
                    core.release(root);
                }
                return None;
            }
        }
    }
    let args = made
        .iter()
        .zip(&s.partitions)
        .zip(kernel.ir().params.iter())
        .filter_map(|((&(view, _), part), param)| match param {
            weft_ir::Param::Store { privilege, .. } => {
                Some(TaskArg::new(view, part.clone(), *privilege))
            }
            weft_ir::Param::Scalar { .. } => None,
        })
        .collect();
    let task = weft_runtime::IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![s.points],
        args,
        s.scalars.clone(),
    );
    let submitted = core.submit(task).is_ok();
    let flushed = core.flush().map_err(|e| e.to_string());
    let roots = [0, 1, 4]
        .iter()
        .map(|&k| core.read_bytes(made[k].1).ok())
        .collect();
    for (v, root) in made {
        core.release(v);
        core.release(root);
    }
    let _ = core.flush();
    assert_eq!(core.memory(), (0, 0), "stores or bytes left");
    Some(Run {
        submitted,
        flushed,
        roots,
    })
}

/// Whether two roots of `t` hold the same elements (any NaN equals any NaN).
fn same(t: DType, x: &[u8], y: &[u8]) -> bool {
    let n = t.size();
    x.len() == y.len()
        && x.chunks_exact(n).zip(y.chunks_exact(n)).all(|(p, q)| {
            let mut w = [[0u8; 8]; 2];
            w[0][..n].copy_from_slice(p);
            w[1][..n].copy_from_slice(q);
            let (a, b) = (u64::from_le_bytes(w[0]), u64::from_le_bytes(w[1]));
            a == b
                || match t {
                    DType::F64 => f64::from_bits(a).is_nan() && f64::from_bits(b).is_nan(),
                    DType::F32 => {
                        f32::from_bits(a as u32).is_nan() && f32::from_bits(b as u32).is_nan()
                    }
                    _ => false,
                }
        })
}

/// Whether some point of the launch runs no iteration of a parallel loop over a store of
/// `shape` partitioned by `part`.
fn some_point_empty(shape: &[u64], part: &Partition, points: u64) -> bool {
    let folded = RootPartition::fold(part, &ViewMap::whole(shape));
    (0..points).any(|p| folded.sub_rect(&[p]).extent.contains(&0))
}

/// The cores: the interpreter first, then one compiled core per SIMD path this CPU runs,
/// buffers between guard pages.
fn cores() -> Vec<(String, Core)> {
    let mut out = vec![(
        "interpreter".to_string(),
        Core::new(
            Settings::default(),
            Box::new(FakeBackend::default()),
            Box::new(NoFusion),
        ),
    )];
    for path in SimdPath::ALL.into_iter().filter(|p| p.detected()) {
        if let Ok(backend) = weft_cpu::CpuBackend::with_options(&weft_cpu::CpuOptions {
            threads: 1,
            pool_bytes: 0,
            guard_pages: true,
            simd: Some(path),
            ..weft_cpu::CpuOptions::default()
        }) {
            out.push((
                path.name().to_string(),
                Core::new(Settings::default(), Box::new(backend), Box::new(NoFusion)),
            ));
        }
    }
    out
}

/// The kernel `data` decodes, in the text form (for reports).
pub fn kernel_write_text(data: &[u8]) -> String {
    let mut b = Bytes::new(data);
    let r = ranks(&mut b);
    let (k, _) = kernel(&mut b, &r);
    weft_ir::text::print(&k)
}

/// Runs the kernel, stores, views, launch and partitions that `data` decodes on the
/// interpreter and on every SIMD path, and compares them (see the module documentation).
pub fn kernel_write(data: &[u8]) -> WriteOutcome {
    let trace = std::env::var_os("WEFT_FUZZ_TRACE").is_some();
    let mut b = Bytes::new(data);
    let r = ranks(&mut b);
    let (ir, lenient) = kernel(&mut b, &r);
    if trace {
        eprintln!("kernel_write:\n{}", weft_ir::text::print(&ir));
    }
    let kernel = match KernelEntry::new("fz.write", &ir) {
        Ok(k) => Arc::new(k),
        Err(e) => {
            if trace {
                eprintln!("  refused: {e}");
            }
            return WriteOutcome::Refused;
        }
    };
    let s = setup(&mut b, &r);
    let lenient = lenient
        || some_point_empty(&s.shapes[0], &s.partitions[0], s.points)
        || (2..4).any(|k| some_point_empty(&s.shapes[k], &s.partitions[k], s.points));
    let mut runs = Vec::new();
    for (name, mut core) in cores() {
        let Some(out) = run(&mut core, &kernel, &r, &s) else {
            assert!(
                runs.is_empty(),
                "{name}: the stores are made on one core only"
            );
            return WriteOutcome::Failed;
        };
        if trace {
            eprintln!("  {name}: {out:?}");
        }
        runs.push((name, out));
    }
    let Some(((_, reference), compiled)) = runs.split_first() else {
        return WriteOutcome::Failed;
    };
    let dtypes = [r.out.0, r.out.0, r.acc.0];
    let mut outcome = if reference.failed() {
        WriteOutcome::Failed
    } else {
        WriteOutcome::Compared
    };
    for (name, c) in compiled {
        assert_eq!(
            c.submitted, reference.submitted,
            "{name}: submit {c:?} against the interpreter's {reference:?}"
        );
        match (c.failed(), reference.failed()) {
            (true, true) => {}
            (false, true) => panic!("{name} ran where the interpreter failed: {c:?}"),
            (true, false) => {
                assert!(
                    lenient && c.failed_proving(),
                    "{name} failed where the interpreter ran: {c:?} against {reference:?}"
                );
                outcome = WriteOutcome::Lenient;
            }
            (false, false) => {
                for (k, (x, y)) in c.roots.iter().zip(&reference.roots).enumerate() {
                    if let (Some(x), Some(y)) = (x, y) {
                        assert!(
                            same(dtypes[k], x, y),
                            "{name}: root {k} differs from the interpreter's: {x:?} against {y:?}"
                        );
                    }
                }
            }
        }
    }
    outcome
}
