//! Helpers shared by the integration tests: round-trip checks and a random kernel generator.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;

use weft_ir::builder::{BodyBuilder, KernelBuilder, StoreParam, Value};
use weft_ir::flat::{from_flat, to_flat};
use weft_ir::{
    BinaryOp, CmpOp, DType, Inst, Kernel, Op, Privilege, ReduceOp, Scalar, UnaryOp, ValueId,
    renumber, text, validate,
};

/// Checks that `k` is valid and that every round trip gives `renumber(k)`.
pub fn check_roundtrip(k: &Kernel) {
    if let Err(e) = validate(k) {
        panic!("{e}\n{}", text::print(k));
    }
    let r = renumber(k);
    assert_eq!(renumber(&r), r, "renumber is idempotent");
    validate(&r).unwrap();
    let printed = text::print(k);
    let parsed = text::parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(parsed, r, "parse(print(k)) != renumber(k)\n{printed}");
    assert_eq!(text::print(&parsed), text::print(&r));
    let flat = to_flat(k);
    assert_eq!(
        from_flat(&flat).unwrap(),
        r,
        "from_flat(to_flat(k)) != renumber(k)"
    );
    assert_eq!(to_flat(&r), flat);
}

/// Applies `map` to every value id of `body` (definitions and uses).
pub fn map_ids(body: &[Inst], map: &impl Fn(ValueId) -> ValueId) -> Vec<Inst> {
    let m = |vs: &[ValueId]| vs.iter().map(|&v| map(v)).collect::<Vec<_>>();
    body.iter()
        .map(|inst| {
            let op = match &inst.op {
                Op::Binary(o, a, b) => Op::Binary(*o, map(*a), map(*b)),
                Op::Cmp(o, a, b) => Op::Cmp(*o, map(*a), map(*b)),
                Op::Unary(o, a) => Op::Unary(*o, map(*a)),
                Op::Cast(t, a) => Op::Cast(*t, map(*a)),
                Op::Bitcast(t, a) => Op::Bitcast(*t, map(*a)),
                Op::Select(c, a, b) => Op::Select(map(*c), map(*a), map(*b)),
                Op::Fma(a, b, c) => Op::Fma(map(*a), map(*b), map(*c)),
                Op::Load(a) => Op::Load(weft_ir::Access {
                    param: a.param,
                    indices: m(&a.indices),
                }),
                Op::Store(a, v) => Op::Store(
                    weft_ir::Access {
                        param: a.param,
                        indices: m(&a.indices),
                    },
                    map(*v),
                ),
                Op::Reduce(a, o, v) => Op::Reduce(
                    weft_ir::Access {
                        param: a.param,
                        indices: m(&a.indices),
                    },
                    *o,
                    map(*v),
                ),
                Op::Parallel(p) => Op::Parallel(weft_ir::ParallelLoop {
                    over: p.over,
                    indices: m(&p.indices),
                    body: map_ids(&p.body, map),
                }),
                Op::For(l) => Op::For(weft_ir::ForLoop {
                    lo: map(l.lo),
                    hi: map(l.hi),
                    induction: map(l.induction),
                    init: m(&l.init),
                    carried: m(&l.carried),
                    body: map_ids(&l.body, map),
                    yields: m(&l.yields),
                }),
                other => other.clone(),
            };
            Inst {
                results: m(&inst.results),
                op,
            }
        })
        .collect()
}

/// Interesting f64 bit patterns.
pub fn special_f64() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        1.0 / 3.0,
        1e300,
        -1e-300,
        5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
        f64::from_bits(0xfff8_0000_dead_beef),
        std::f64::consts::PI,
        123456789.0,
        9007199254740993.0,
    ]
}

/// Interesting f32 bit patterns.
pub fn special_f32() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        0.1,
        1e38,
        1e-45,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        16777217.0,
    ]
}

/// Builds random valid kernels from a stream of choices.
pub struct Gen<'a> {
    choices: &'a [u32],
    pos: usize,
    stores: Vec<StoreParam>,
    /// Visible values, one list per open block.
    scopes: Vec<Vec<Value>>,
    budget: usize,
    /// The indices of the parallel loop being built (stores must depend on them: the
    /// validator rejects races).
    parallel: Vec<Value>,
}

impl<'a> Gen<'a> {
    pub fn new(choices: &'a [u32]) -> Self {
        Gen {
            choices,
            pos: 0,
            stores: Vec::new(),
            scopes: vec![Vec::new()],
            budget: 120,
            parallel: Vec::new(),
        }
    }

    /// A choice in `0..n` (n > 0).
    fn pick(&mut self, n: usize) -> usize {
        let c = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        c as usize % n
    }

    fn dtype(&mut self) -> DType {
        DType::ALL[self.pick(5)]
    }

    fn scalar(&mut self, t: DType) -> Scalar {
        let raw = u64::from(self.choices.get(self.pos).copied().unwrap_or(7))
            | (u64::from(self.choices.get(self.pos + 1).copied().unwrap_or(3)) << 32);
        let special = self.pick(3) == 0;
        self.pos += 1;
        match t {
            DType::F64 if special => Scalar::F64(f64::from_bits(raw)),
            DType::F64 => {
                let s = special_f64();
                Scalar::F64(s[self.pick(s.len())])
            }
            DType::F32 if special => Scalar::F32(f32::from_bits(raw as u32)),
            DType::F32 => {
                let s = special_f32();
                Scalar::F32(s[self.pick(s.len())])
            }
            DType::I32 => Scalar::I32(raw as i32),
            DType::I64 => Scalar::I64(if special {
                raw as i64
            } else {
                raw as i64 % 100
            }),
            DType::Bool => Scalar::Bool(raw & 1 == 1),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    fn visible(&self) -> impl Iterator<Item = Value> + '_ {
        self.scopes.iter().flatten().copied()
    }

    fn add(&mut self, v: Value) -> Value {
        if let Some(s) = self.scopes.last_mut() {
            s.push(v);
        }
        v
    }

    /// A visible value of type `t`, or a new constant.
    fn value_of(&mut self, b: &mut BodyBuilder, t: DType) -> Value {
        let vs: Vec<Value> = self.visible().filter(|v| v.dtype() == t).collect();
        if !vs.is_empty() && self.pick(4) != 0 {
            return vs[self.pick(vs.len())];
        }
        let c = self.scalar(t);
        let v = b.constant(c);
        self.add(v)
    }

    /// Any visible value, or a new constant.
    fn any_value(&mut self, b: &mut BodyBuilder) -> Value {
        let vs: Vec<Value> = self.visible().collect();
        if !vs.is_empty() && self.pick(5) != 0 {
            return vs[self.pick(vs.len())];
        }
        let t = self.dtype();
        self.value_of(b, t)
    }

    fn indices(&mut self, b: &mut BodyBuilder, rank: u32) -> Vec<Value> {
        (0..rank).map(|_| self.value_of(b, DType::I64)).collect()
    }

    pub fn kernel(&mut self) -> Kernel {
        let names = [
            "k",
            "numeric.add.f64",
            "a-b_c.1",
            "with space",
            "quote\"\\\n",
            "",
        ];
        let name = names[self.pick(names.len())];
        let mut k = KernelBuilder::new(name);
        let nparams = 1 + self.pick(5);
        for _ in 0..nparams {
            if self.pick(4) == 0 {
                let t = self.dtype();
                let v = k.scalar(t);
                self.add(v);
            } else {
                let t = self.dtype();
                let rank = self.pick(4) as u32;
                let mut p = match self.pick(4) {
                    0 => Privilege::Read,
                    1 => Privilege::Write,
                    2 => Privilege::ReadWrite,
                    _ => Privilege::Reduce(ReduceOp::ALL[self.pick(4)]),
                };
                if t == DType::Bool
                    && matches!(p, Privilege::Reduce(ReduceOp::Sum | ReduceOp::Prod))
                {
                    p = Privilege::Reduce(ReduceOp::Max);
                }
                let s = k.store(t, rank, p);
                self.stores.push(s);
            }
        }
        let n = self.pick(3);
        self.block(k.body(), n, 0, false);
        if !self.stores.is_empty() {
            for _ in 0..1 + self.pick(3) {
                let j = self.pick(self.stores.len());
                let over = self.stores[j];
                let n = 1 + self.pick(6);
                k.parallel(over, |b, idx| {
                    self.scopes.push(idx.to_vec());
                    self.parallel = idx.to_vec();
                    self.block(b, n, 1, true);
                    self.parallel.clear();
                    self.scopes.pop();
                });
            }
        }
        let n = self.pick(2);
        self.block(k.body(), n, 0, false);
        k.finish()
    }

    fn block(&mut self, b: &mut BodyBuilder, n: usize, depth: usize, in_parallel: bool) {
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            self.inst(b, depth, in_parallel);
        }
    }

    fn inst(&mut self, b: &mut BodyBuilder, depth: usize, in_parallel: bool) {
        match self.pick(12) {
            0 => {
                let t = self.dtype();
                let c = self.scalar(t);
                let v = b.constant(c);
                self.add(v);
            }
            1 | 2 => {
                let a = self.any_value(b);
                let t = a.dtype();
                let ops: Vec<BinaryOp> = BinaryOp::ALL
                    .into_iter()
                    .filter(|op| match op {
                        BinaryOp::Pow | BinaryOp::Atan2 => t.is_float(),
                        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => !t.is_float(),
                        BinaryOp::Shl | BinaryOp::Shr => t.is_int(),
                        BinaryOp::Min | BinaryOp::Max => true,
                        _ => t != DType::Bool,
                    })
                    .collect();
                let op = ops[self.pick(ops.len())];
                let c = self.value_of(b, t);
                let v = b.binary(op, a, c);
                self.add(v);
            }
            3 => {
                let a = self.any_value(b);
                let t = a.dtype();
                let ops: Vec<UnaryOp> = UnaryOp::ALL
                    .into_iter()
                    .filter(|op| match op {
                        UnaryOp::Not => !t.is_float(),
                        UnaryOp::Neg | UnaryOp::Abs => t != DType::Bool,
                        _ => t.is_float(),
                    })
                    .collect();
                let op = ops[self.pick(ops.len())];
                let v = b.unary(op, a);
                self.add(v);
            }
            4 => {
                let a = self.any_value(b);
                let c = self.value_of(b, a.dtype());
                let v = b.cmp(CmpOp::ALL[self.pick(6)], a, c);
                self.add(v);
            }
            5 => {
                let c = self.value_of(b, DType::Bool);
                let x = self.any_value(b);
                let y = self.value_of(b, x.dtype());
                let v = b.select(c, x, y);
                self.add(v);
            }
            6 => {
                let a = self.any_value(b);
                let bitcast_to = match a.dtype() {
                    DType::F64 => Some(DType::I64),
                    DType::I64 => Some(DType::F64),
                    DType::F32 => Some(DType::I32),
                    DType::I32 => Some(DType::F32),
                    DType::Bool => None,
                    DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                        unreachable!("storage types hold no values")
                    }
                };
                let v = match bitcast_to {
                    Some(t) if self.pick(3) == 0 => b.bitcast(t, a),
                    _ => {
                        let t = self.dtype();
                        b.cast(t, a)
                    }
                };
                self.add(v);
            }
            7 => {
                let readable: Vec<StoreParam> = self
                    .stores
                    .iter()
                    .copied()
                    .filter(|s| s.privilege().can_read())
                    .collect();
                if readable.is_empty() {
                    return;
                }
                let s = readable[self.pick(readable.len())];
                let idx = self.indices(b, s.rank());
                let v = b.load(s, &idx);
                self.add(v);
            }
            8 if in_parallel => {
                let targets: Vec<StoreParam> = self
                    .stores
                    .iter()
                    .copied()
                    .filter(|s| s.privilege().mutates())
                    .collect();
                if targets.is_empty() {
                    return;
                }
                let s = targets[self.pick(targets.len())];
                let mut idx = self.indices(b, s.rank());
                let v = self.value_of(b, s.dtype());
                // A store depends on the loop's indices (or it would be a race).
                if s.privilege().can_write()
                    && let Some(&i) = self.parallel.first()
                {
                    match idx.first_mut() {
                        Some(first) => *first = b.add(*first, i),
                        None => return,
                    }
                }
                if s.privilege().can_write() {
                    b.store(s, &idx, v);
                } else {
                    b.reduce(s, &idx, v);
                }
            }
            9 => {
                let ranked: Vec<StoreParam> = self
                    .stores
                    .iter()
                    .copied()
                    .filter(|s| s.rank() > 0)
                    .collect();
                if ranked.is_empty() {
                    return;
                }
                let s = ranked[self.pick(ranked.len())];
                let dim = self.pick(s.rank() as usize) as u32;
                let v = if self.pick(2) == 0 {
                    b.extent(s, dim)
                } else {
                    b.origin(s, dim)
                };
                self.add(v);
            }
            10 | 11 if depth < 4 => {
                let lo = self.value_of(b, DType::I64);
                let hi = self.value_of(b, DType::I64);
                let init: Vec<Value> = (0..self.pick(4)).map(|_| self.any_value(b)).collect();
                let n = self.pick(5);
                let results = b.for_loop(lo, hi, &init, |b, iv, carried| {
                    let mut scope = vec![iv];
                    scope.extend_from_slice(carried);
                    self.scopes.push(scope);
                    self.block(b, n, depth + 1, in_parallel);
                    let yields = carried
                        .iter()
                        .map(|c| self.value_of(b, c.dtype()))
                        .collect();
                    self.scopes.pop();
                    yields
                });
                for r in results {
                    self.add(r);
                }
            }
            _ => {}
        }
    }
}

/// Renames the values of `k` by a permutation derived from `seed`, so that ids are no longer
/// in definition order.
pub fn scramble(k: &Kernel, seed: u64) -> Kernel {
    let n = k.value_bound();
    let mut perm: Vec<u32> = (0..n).collect();
    let mut s = seed | 1;
    for i in (1..perm.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        perm.swap(i, (s % (i as u64 + 1)) as usize);
    }
    // Spread the ids out too, leaving holes.
    let map: HashMap<u32, u32> = perm
        .iter()
        .enumerate()
        .map(|(i, &p)| (i as u32, p * 3 + 1))
        .collect();
    Kernel {
        name: k.name.clone(),
        params: k.params.clone(),
        body: map_ids(&k.body, &|v| ValueId(map[&v.0])),
    }
}
