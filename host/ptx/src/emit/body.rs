//! The lowering of IR instructions to PTX, for the body of one entry.
//!
//! Every SSA value `%N` of the kernel is the PTX register `%vN` of its type (`bool` values are
//! predicates); temporaries are `%tN`. PTX registers are variables, so a `for` loop's carried
//! values are registers that the loop assigns at the end of each iteration. Errors are
//! messages; the caller names the kernel.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use weft_ir::reduction::{ELEMENT_BLOCK_LEVEL, element_trees, exact_identity};
use weft_ir::validate::Types;
use weft_ir::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, ReduceOp,
    Scalar, UnaryOp, ValueId,
};

use super::Leaf;
use crate::abi::{AbiParam, AccessKind, FaultSite};

mod group;
use group::MAX_GROUPED_LEAVES;
mod lanes;

pub use lanes::LANES;

type Res<T = ()> = std::result::Result<T, String>;

/// The PTX register type of a value of `d` (of an unsigned storage type: of the `i64` value
/// that loading one gives).
fn reg_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I32 => "s32",
        DType::I64 | DType::U8 | DType::U16 | DType::U32 | DType::U64 => "s64",
        DType::Bool => "pred",
    }
}

/// How an element of a narrow unsigned storage type (`u8`, `u16`, `u32`) moves between
/// memory and its 64-bit value: the PTX type of the access, and the type of the register
/// that holds the element itself (PTX has no 8-bit registers). `None` for every other type.
fn narrow_unsigned(d: DType) -> Option<(&'static str, &'static str)> {
    match d {
        DType::U8 => Some(("u8", "u16")),
        DType::U16 => Some(("u16", "u16")),
        DType::U32 => Some(("u32", "u32")),
        _ => None,
    }
}

/// The PTX bit-size type of a number of `d` (`b32` or `b64`).
fn bits_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::I32 => "b32",
        _ => "b64",
    }
}

/// Zero as a literal of `d`'s register type.
fn zero_bits(d: DType) -> &'static str {
    match d {
        DType::F32 => "0f00000000",
        DType::F64 => "0d0000000000000000",
        _ => "0",
    }
}

/// The PTX literal of a constant of a number type.
fn literal(s: Scalar) -> String {
    match s {
        Scalar::F32(v) => format!("0f{:08X}", v.to_bits()),
        Scalar::F64(v) => format!("0d{:016X}", v.to_bits()),
        Scalar::I32(v) => format!("0x{:08X}", v as u32),
        Scalar::I64(v) => format!("0x{:016X}", v as u64),
        Scalar::Bool(v) => u8::from(v).to_string(),
    }
}

/// The body of one entry being written.
pub(super) struct Body<'a> {
    kernel: &'a Kernel,
    types: &'a Types,
    faults: &'a mut Vec<FaultSite>,
    /// Register declarations: name to type.
    regs: BTreeMap<String, &'static str>,
    /// Parameters loaded in the prologue: ABI parameter to register.
    loaded: HashMap<AbiParam, String>,
    prologue: String,
    code: String,
    /// Fault codes this entry may raise.
    raised: HashSet<u32>,
    /// Whether a loop's back edge checks the fault word (and so the `$stopped` exit exists).
    stoppable: bool,
    /// The register accumulating each leaf reduction of the loop, by its store parameter.
    accumulators: HashMap<u32, (String, Leaf)>,
    /// The register holding the address of the unit's row of each element tree, by its
    /// store parameter.
    trees: HashMap<u32, String>,
    /// The store parameters whose accesses at exactly the loop's indices are proven in
    /// bounds for the whole loop (see [`Body::hoist_checks`]), and those indices.
    proven: (HashSet<u32>, Vec<ValueId>),
    /// Whether offsets are computed in 32 bits (the entry's narrow variant).
    narrow: bool,
    temps: u32,
    labels: u32,
    /// A predicate that must hold for a store or a reduction into memory to run (thread 0
    /// of a lanes group), if any.
    guard: Option<String>,
    /// Where index checks record a failure instead of branching (a split loop's body): the
    /// register of the pending fault code.
    deferred: Option<String>,
    /// The predicate of the last deferred-checked address that failed its check: the access
    /// that uses it is predicated off.
    last_bad: Option<String>,
    /// Whether a split loop raises its pending fault code (`$fault_pending`).
    pending_raised: bool,
    /// The registers of a lanes entry ([`lanes`]), once its points begin.
    lanes: Option<lanes::LaneRegs>,
    /// Whether the entry runs a group of [`LANES`] threads per point.
    pub(super) lanes_entry: bool,
    /// The bytes of shared memory of an entry whose block combines its leaves
    /// (`group.rs`), if this is one.
    pub(super) group_slots: Option<u64>,
    /// Values the body defines itself (lane constants), with their types.
    overrides: HashMap<ValueId, DType>,
    synthetics: u32,
}

impl<'a> Body<'a> {
    pub(super) fn new(
        kernel: &'a Kernel,
        types: &'a Types,
        faults: &'a mut Vec<FaultSite>,
        narrow: bool,
    ) -> Self {
        Body {
            kernel,
            types,
            faults,
            regs: BTreeMap::new(),
            loaded: HashMap::new(),
            prologue: String::new(),
            code: String::new(),
            raised: HashSet::new(),
            stoppable: false,
            accumulators: HashMap::new(),
            trees: HashMap::new(),
            proven: (HashSet::new(), Vec::new()),
            narrow,
            temps: 0,
            labels: 0,
            guard: None,
            deferred: None,
            last_bad: None,
            pending_raised: false,
            lanes: None,
            group_slots: None,
            lanes_entry: false,
            overrides: HashMap::new(),
            synthetics: 0,
        }
    }

    /// Writes the entry's body (declarations, prologue, code, fault exits) into `out`.
    pub(super) fn finish(mut self, out: &mut String) {
        let fault = self.loaded.get(&AbiParam::Fault).cloned();
        if fault.is_some() {
            self.regs.insert("%fault_old".to_string(), "b32");
        }
        // Registers sort by name, so the text does not depend on hashing.
        for (name, ty) in &self.regs {
            let _ = writeln!(out, "    .reg .{ty} {name};");
        }
        if let Some(shared) = self.lanes_shared() {
            out.push_str(&shared);
        }
        if let Some(shared) = self.group_shared() {
            out.push_str(&shared);
        }
        out.push_str(&self.prologue);
        out.push_str(&self.code);
        let _ = writeln!(out, "    ret;");
        if self.stoppable {
            let _ = writeln!(out, "    // the fault word was set while a loop ran: stop");
            let _ = writeln!(out, "$stopped:");
            let _ = writeln!(out, "    ret;");
        }
        if self.pending_raised {
            let ptr = fault.as_deref().unwrap_or("%a_fault");
            let _ = writeln!(out, "    // a split loop's index check that failed");
            let _ = writeln!(out, "$fault_pending:");
            let _ = writeln!(
                out,
                "    atom.global.cas.b32 %fault_old, [{ptr}], 0, %fault_pending;"
            );
            let _ = writeln!(out, "    ret;");
        }
        let mut raised: Vec<u32> = self.raised.into_iter().collect();
        raised.sort_unstable();
        if !raised.is_empty() {
            let _ = writeln!(
                out,
                "    // index checks that failed: record the first, stop"
            );
        }
        for code in raised {
            let _ = writeln!(out, "$fault_{code}:");
            let ptr = fault.as_deref().unwrap_or("%a_fault");
            let _ = writeln!(
                out,
                "    atom.global.cas.b32 %fault_old, [{ptr}], 0, {code};"
            );
            let _ = writeln!(out, "    ret;");
        }
    }

    fn line(&mut self, s: impl AsRef<str>) {
        self.code.push_str("    ");
        self.code.push_str(s.as_ref());
        self.code.push('\n');
    }

    fn label(&mut self, what: &str) -> String {
        self.labels += 1;
        format!("$L{}_{what}", self.labels)
    }

    fn place(&mut self, label: &str) {
        let _ = writeln!(self.code, "{label}:");
    }

    /// A fresh temporary register of PTX type `ty`.
    fn tmp(&mut self, ty: &'static str) -> String {
        self.temps += 1;
        let name = format!("%t{}", self.temps);
        self.regs.insert(name.clone(), ty);
        name
    }

    fn ty(&self, v: ValueId) -> DType {
        match self.overrides.get(&v) {
            Some(&d) => d,
            None => self.types.of(v),
        }
    }

    /// The register of value `v`, declared with its type.
    fn reg(&mut self, v: ValueId) -> String {
        let name = format!("%v{}", v.0);
        let ty = reg_type(self.ty(v));
        self.regs.insert(name.clone(), ty);
        name
    }

    /// The register holding ABI parameter `p`, loaded in the prologue.
    fn abi(&mut self, p: AbiParam) -> String {
        if let Some(r) = self.loaded.get(&p) {
            return r.clone();
        }
        let name = format!("%a_{}", p.name());
        let ty = p.ptx_type();
        self.regs.insert(name.clone(), ty);
        let _ = writeln!(self.prologue, "    ld.param.{ty} {name}, [{}];", p.name());
        if matches!(p, AbiParam::Fault | AbiParam::Pointer { .. }) {
            let _ = writeln!(self.prologue, "    cvta.to.global.u64 {name}, {name};");
        }
        self.loaded.insert(p, name.clone());
        name
    }

    /// Lowers one instruction (not a parallel loop).
    pub(super) fn inst(&mut self, inst: &Inst) -> Res {
        let out = inst.results.first().copied();
        let result = || out.ok_or_else(|| "an instruction without its result".to_string());
        match &inst.op {
            Op::Const(s) => {
                let v = result()?;
                self.constant(v, *s)
            }
            Op::Param(i) => self.scalar_param(result()?, *i),
            Op::Binary(op, a, b) => self.binary(result()?, *op, *a, *b),
            Op::Unary(op, a) => self.unary(result()?, *op, *a),
            Op::Cmp(op, a, b) => self.cmp(result()?, *op, *a, *b),
            Op::Select(c, a, b) => self.select(result()?, *c, *a, *b),
            Op::Fma(a, b, c) => {
                let d = self.ty(*a);
                if !d.is_float() {
                    return Err(format!("`fma` of {d}"));
                }
                let rv = self.reg(result()?);
                let (ra, rb, rc) = (self.reg(*a), self.reg(*b), self.reg(*c));
                // `.rn`: one rounding, as the IR defines it.
                self.line(format!("fma.rn.{} {rv}, {ra}, {rb}, {rc};", reg_type(d)));
                Ok(())
            }
            Op::Cast(to, a) => self.cast(result()?, *to, *a),
            Op::Bitcast(_, a) => {
                let (v, a) = (result()?, *a);
                let (rv, ra) = (self.reg(v), self.reg(a));
                let bits = bits_type(self.ty(v));
                self.line(format!("mov.{bits} {rv}, {ra};"));
                Ok(())
            }
            Op::Extent { param, dim } | Op::Origin { param, dim } => {
                let (param, dim) = (*param, *dim);
                let p = if matches!(inst.op, Op::Extent { .. }) {
                    AbiParam::Extent { param, dim }
                } else {
                    AbiParam::Origin { param, dim }
                };
                let src = self.abi(p);
                let rv = self.reg(result()?);
                self.line(format!("mov.s64 {rv}, {src};"));
                Ok(())
            }
            Op::Load(a) => self.load(result()?, a),
            Op::Store(a, v) => self.guarded(|b| b.store(a, *v, AccessKind::Store)),
            Op::Reduce(a, op, v) if self.accumulators.contains_key(&a.param) => {
                self.reduce(a, *op, *v)
            }
            Op::Reduce(a, op, v) => self.guarded(|b| b.reduce(a, *op, *v)),
            Op::For(l) => self.for_loop(l, &inst.results),
            Op::Parallel(_) => Err("a parallel loop inside a loop".to_string()),
        }
    }

    /// `write`, skipped where the store guard (a lanes group's thread 0) does not hold.
    fn guarded(&mut self, write: impl FnOnce(&mut Self) -> Res) -> Res {
        let Some(guard) = self.guard.clone() else {
            return write(self);
        };
        let skip = self.label("unguarded");
        self.line(format!("@!{guard} bra {skip};"));
        write(self)?;
        self.place(&skip);
        Ok(())
    }

    fn constant(&mut self, v: ValueId, s: Scalar) -> Res {
        let rv = self.reg(v);
        match s {
            Scalar::Bool(b) => {
                let t = self.tmp("u32");
                self.line(format!("mov.u32 {t}, {};", u8::from(b)));
                self.line(format!("setp.ne.u32 {rv}, {t}, 0;"));
            }
            Scalar::F32(_) | Scalar::F64(_) => {
                let ty = reg_type(s.dtype());
                self.line(format!("mov.{ty} {rv}, {};", literal(s)));
            }
            Scalar::I32(_) | Scalar::I64(_) => {
                let bits = bits_type(s.dtype());
                self.line(format!("mov.{bits} {rv}, {};", literal(s)));
            }
        }
        Ok(())
    }

    fn scalar_param(&mut self, v: ValueId, param: u32) -> Res {
        if !matches!(
            self.kernel.params.get(param as usize),
            Some(Param::Scalar { .. })
        ) {
            return Err(format!("parameter {param} is not a scalar"));
        }
        let word = self.abi(AbiParam::Scalar { param });
        let rv = self.reg(v);
        match self.ty(v) {
            DType::F64 | DType::I64 => self.line(format!("mov.b64 {rv}, {word};")),
            DType::F32 | DType::I32 => {
                let t = self.tmp("u32");
                self.line(format!("cvt.u32.u64 {t}, {word};"));
                self.line(format!("mov.b32 {rv}, {t};"));
            }
            DType::Bool => self.line(format!("setp.ne.u64 {rv}, {word}, 0;")),
            d @ (DType::U8 | DType::U16 | DType::U32 | DType::U64) => {
                return Err(format!("a scalar parameter of the storage type {d}"));
            }
        }
        Ok(())
    }

    fn binary(&mut self, v: ValueId, op: BinaryOp, a: ValueId, b: ValueId) -> Res {
        let d = self.ty(a);
        let (rv, ra, rb) = (self.reg(v), self.reg(a), self.reg(b));
        let ty = reg_type(d);
        if d == DType::Bool {
            let pop = match op {
                BinaryOp::And | BinaryOp::Min => "and",
                BinaryOp::Or | BinaryOp::Max => "or",
                BinaryOp::Xor => "xor",
                _ => return Err(format!("`{}` of bools", op.name())),
            };
            self.line(format!("{pop}.pred {rv}, {ra}, {rb};"));
            return Ok(());
        }
        if d.is_float() {
            match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                    let name = op.name();
                    self.line(format!("{name}.rn.{ty} {rv}, {ra}, {rb};"));
                }
                BinaryOp::Min | BinaryOp::Max => self.float_min_max(op, d, &rv, &ra, &rb),
                BinaryOp::Rem => return Err("float `rem` survived its lowering".to_string()),
                _ => return Err(format!("`{}` of floats", op.name())),
            }
            return Ok(());
        }
        let bits = bits_type(d);
        let width = if d == DType::I32 { 31 } else { 63 };
        match op {
            BinaryOp::Add | BinaryOp::Sub => {
                self.line(format!("{}.{ty} {rv}, {ra}, {rb};", op.name()))
            }
            BinaryOp::Mul => self.line(format!("mul.lo.{ty} {rv}, {ra}, {rb};")),
            BinaryOp::Div | BinaryOp::Rem => {
                // Division by zero gives 0 and by -1 wraps; PTX leaves both undefined.
                let (zero, minus) = (self.tmp("pred"), self.tmp("pred"));
                let (bad, safe, q) = (self.tmp("pred"), self.tmp(ty), self.tmp(ty));
                self.line(format!("setp.eq.{ty} {zero}, {rb}, 0;"));
                self.line(format!("setp.eq.{ty} {minus}, {rb}, -1;"));
                self.line(format!("or.pred {bad}, {zero}, {minus};"));
                self.line(format!("selp.{ty} {safe}, 1, {rb}, {bad};"));
                if op == BinaryOp::Div {
                    let neg = self.tmp(ty);
                    self.line(format!("div.{ty} {q}, {ra}, {safe};"));
                    self.line(format!("neg.{ty} {neg}, {ra};"));
                    self.line(format!("selp.{ty} {q}, {neg}, {q}, {minus};"));
                    self.line(format!("selp.{ty} {rv}, 0, {q}, {zero};"));
                } else {
                    self.line(format!("rem.{ty} {q}, {ra}, {safe};"));
                    self.line(format!("selp.{ty} {rv}, 0, {q}, {bad};"));
                }
            }
            BinaryOp::Min | BinaryOp::Max => {
                self.line(format!("{}.{ty} {rv}, {ra}, {rb};", op.name()));
            }
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                self.line(format!("{}.{bits} {rv}, {ra}, {rb};", op.name()));
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                // The amount is taken modulo the width; PTX clamps it instead.
                let amount = self.tmp("u32");
                if d == DType::I64 {
                    let t = self.tmp("b64");
                    self.line(format!("and.b64 {t}, {rb}, {width};"));
                    self.line(format!("cvt.u32.u64 {amount}, {t};"));
                } else {
                    self.line(format!("and.b32 {amount}, {rb}, {width};"));
                }
                let inst = if op == BinaryOp::Shl {
                    format!("shl.{bits}")
                } else if d == DType::I64 {
                    "shr.u64".to_string()
                } else {
                    "shr.u32".to_string()
                };
                self.line(format!("{inst} {rv}, {ra}, {amount};"));
            }
            BinaryOp::Pow | BinaryOp::Atan2 => {
                return Err(format!("`{}` survived math lowering", op.name()));
            }
        }
        Ok(())
    }

    /// Float `min`/`max` as the IR defines them: NaN if either operand is NaN, `-0.0` below
    /// `+0.0` (equal operands combine their bits: `or` keeps a sign for `min`, `and` drops it
    /// for `max`).
    fn float_min_max(&mut self, op: BinaryOp, d: DType, rv: &str, ra: &str, rb: &str) {
        let ty = reg_type(d);
        let bits = bits_type(d);
        let (pick, eq, nan) = (self.tmp("pred"), self.tmp("pred"), self.tmp("pred"));
        let (ia, ib, ij, joined, sum) = (
            self.tmp(bits),
            self.tmp(bits),
            self.tmp(bits),
            self.tmp(ty),
            self.tmp(ty),
        );
        let (cmp, join) = if op == BinaryOp::Min {
            ("lt", "or")
        } else {
            ("gt", "and")
        };
        self.line(format!("setp.{cmp}.{ty} {pick}, {ra}, {rb};"));
        self.line(format!("selp.{ty} {rv}, {ra}, {rb}, {pick};"));
        self.line(format!("setp.eq.{ty} {eq}, {ra}, {rb};"));
        self.line(format!("mov.{bits} {ia}, {ra};"));
        self.line(format!("mov.{bits} {ib}, {rb};"));
        self.line(format!("{join}.{bits} {ij}, {ia}, {ib};"));
        self.line(format!("mov.{bits} {joined}, {ij};"));
        self.line(format!("selp.{ty} {rv}, {joined}, {rv}, {eq};"));
        self.line(format!("setp.nan.{ty} {nan}, {ra}, {rb};"));
        self.line(format!("add.rn.{ty} {sum}, {ra}, {rb};"));
        self.line(format!("selp.{ty} {rv}, {sum}, {rv}, {nan};"));
    }

    fn unary(&mut self, v: ValueId, op: UnaryOp, a: ValueId) -> Res {
        let d = self.ty(a);
        let (rv, ra) = (self.reg(v), self.reg(a));
        let ty = reg_type(d);
        let line = match (op, d) {
            (UnaryOp::Not, DType::Bool) => format!("not.pred {rv}, {ra};"),
            (UnaryOp::Not, _) => format!("not.{} {rv}, {ra};", bits_type(d)),
            (UnaryOp::Neg, _) => format!("neg.{ty} {rv}, {ra};"),
            (UnaryOp::Abs, _) => format!("abs.{ty} {rv}, {ra};"),
            (UnaryOp::Sqrt, _) => format!("sqrt.rn.{ty} {rv}, {ra};"),
            (UnaryOp::Floor, _) => format!("cvt.rmi.{ty}.{ty} {rv}, {ra};"),
            (UnaryOp::Ceil, _) => format!("cvt.rpi.{ty}.{ty} {rv}, {ra};"),
            (op, _) => return Err(format!("`{}` survived math lowering", op.name())),
        };
        self.line(line);
        Ok(())
    }

    /// `v` as a `u32` 0 or 1, for comparing bools.
    fn bool_word(&mut self, r: &str) -> String {
        let t = self.tmp("u32");
        self.line(format!("selp.u32 {t}, 1, 0, {r};"));
        t
    }

    fn cmp(&mut self, v: ValueId, op: CmpOp, a: ValueId, b: ValueId) -> Res {
        let d = self.ty(a);
        let (rv, mut ra, mut rb) = (self.reg(v), self.reg(a), self.reg(b));
        let mut ty = reg_type(d);
        if d == DType::Bool {
            ra = self.bool_word(&ra);
            rb = self.bool_word(&rb);
            ty = "u32";
        }
        let cc = match (op, d.is_float()) {
            // Float `ne` is unordered: NaN differs from everything.
            (CmpOp::Ne, true) => "neu",
            (op, _) => op.name(),
        };
        self.line(format!("setp.{cc}.{ty} {rv}, {ra}, {rb};"));
        Ok(())
    }

    fn select(&mut self, v: ValueId, c: ValueId, a: ValueId, b: ValueId) -> Res {
        let (rv, rc, ra, rb) = (self.reg(v), self.reg(c), self.reg(a), self.reg(b));
        if self.ty(v) == DType::Bool {
            let (x, nc, y) = (self.tmp("pred"), self.tmp("pred"), self.tmp("pred"));
            self.line(format!("and.pred {x}, {rc}, {ra};"));
            self.line(format!("not.pred {nc}, {rc};"));
            self.line(format!("and.pred {y}, {nc}, {rb};"));
            self.line(format!("or.pred {rv}, {x}, {y};"));
        } else {
            let ty = reg_type(self.ty(v));
            self.line(format!("selp.{ty} {rv}, {ra}, {rb}, {rc};"));
        }
        Ok(())
    }

    fn cast(&mut self, v: ValueId, to: DType, a: ValueId) -> Res {
        let from = self.ty(a);
        let (rv, ra) = (self.reg(v), self.reg(a));
        let (ft, tt) = (reg_type(from), reg_type(to));
        if from == to {
            self.line(format!("mov.{tt} {rv}, {ra};"));
            return Ok(());
        }
        match (from, to) {
            (DType::Bool, _) => {
                let (one, zero) = (
                    literal(Scalar::from_bits(to, one_bits(to))),
                    literal(Scalar::from_bits(to, 0)),
                );
                let ty = if to.is_float() { tt } else { bits_type(to) };
                self.line(format!("selp.{ty} {rv}, {one}, {zero}, {ra};"));
            }
            (_, DType::Bool) => {
                let zero = literal(Scalar::from_bits(from, 0));
                // Floats: NaN is true (unordered `ne`).
                let cc = if from.is_float() { "neu" } else { "ne" };
                self.line(format!("setp.{cc}.{ft} {rv}, {ra}, {zero};"));
            }
            (DType::F32, DType::F64) => self.line(format!("cvt.f64.f32 {rv}, {ra};")),
            (DType::F64, DType::F32) => self.line(format!("cvt.rn.f32.f64 {rv}, {ra};")),
            (f, t) if f.is_int() && t.is_float() => {
                self.line(format!("cvt.rn.{tt}.{ft} {rv}, {ra};"));
            }
            (f, t) if f.is_float() && t.is_int() => {
                // Truncate toward zero, saturating; NaN gives 0.
                let nan = self.tmp("pred");
                self.line(format!("cvt.rzi.sat.{tt}.{ft} {rv}, {ra};"));
                self.line(format!("setp.nan.{ft} {nan}, {ra}, {ra};"));
                self.line(format!("selp.{tt} {rv}, 0, {rv}, {nan};"));
            }
            (DType::I64, DType::I32) => self.line(format!("cvt.u32.u64 {rv}, {ra};")),
            (DType::I32, DType::I64) => self.line(format!("cvt.s64.s32 {rv}, {ra};")),
            (f, t) => return Err(format!("a cast from {f} to {t}")),
        }
        Ok(())
    }

    /// The element type of store parameter `param`.
    fn store_dtype(&self, param: u32) -> Res<DType> {
        match self.kernel.params.get(param as usize) {
            Some(Param::Store { dtype, .. }) => Ok(*dtype),
            _ => Err(format!("parameter {param} is not a store")),
        }
    }

    /// The address of `a`'s element, after checking every index against its extent.
    fn address(&mut self, a: &Access, kind: AccessKind) -> Res<String> {
        let param = a.param;
        let dtype = self.store_dtype(param)?;
        let ptr = self.abi(AbiParam::Pointer { param });
        if a.indices.is_empty() {
            return Ok(ptr);
        }
        let proven = self.proven.0.contains(&param) && a.indices == self.proven.1;
        // A deferred check's failure: the access is predicated off.
        let mut bad: Option<String> = None;
        let offset = self.tmp("s64");
        let narrow = if self.narrow {
            Some(self.tmp("s32"))
        } else {
            None
        };
        for (d, &ix) in a.indices.iter().enumerate() {
            let dim = u32::try_from(d).map_err(|_| "too many dimensions".to_string())?;
            let ext = self.abi(AbiParam::Extent { param, dim });
            let stride = self.abi(AbiParam::Stride { param, dim });
            let rix = self.reg(ix);
            if !proven {
                let code = self.fault_code(FaultSite {
                    param,
                    dim,
                    access: kind,
                });
                let out = self.tmp("pred");
                // Unsigned: a negative index is out of range too.
                self.line(format!("setp.ge.u64 {out}, {rix}, {ext};"));
                if let Some(pending) = self.deferred.clone() {
                    self.line(format!("@{out} mov.b32 {pending}, {code};"));
                    match &bad {
                        Some(b) => self.line(format!("or.pred {b}, {b}, {out};")),
                        None => bad = Some(out),
                    }
                } else {
                    self.line(format!("@{out} bra $fault_{code};"));
                }
            }
            if let Some(off32) = &narrow {
                // The launcher runs this variant only where every offset fits in 32 bits.
                let (ix32, st32) = (self.tmp("s32"), self.tmp("s32"));
                self.line(format!("cvt.u32.u64 {ix32}, {rix};"));
                self.line(format!("cvt.u32.u64 {st32}, {stride};"));
                if d == 0 {
                    self.line(format!("mul.lo.s32 {off32}, {ix32}, {st32};"));
                } else {
                    self.line(format!("mad.lo.s32 {off32}, {ix32}, {st32}, {off32};"));
                }
            } else if d == 0 {
                self.line(format!("mul.lo.s64 {offset}, {rix}, {stride};"));
            } else {
                self.line(format!("mad.lo.s64 {offset}, {rix}, {stride}, {offset};"));
            }
        }
        let shift = dtype.size().trailing_zeros();
        let addr = self.tmp("u64");
        if let Some(off32) = &narrow {
            let size = dtype.size();
            self.line(format!("mul.wide.s32 {offset}, {off32}, {size};"));
        } else if shift > 0 {
            self.line(format!("shl.b64 {offset}, {offset}, {shift};"));
        }
        self.line(format!("add.s64 {addr}, {ptr}, {offset};"));
        self.last_bad = bad;
        Ok(addr)
    }

    fn fault_code(&mut self, site: FaultSite) -> u32 {
        let index = match self.faults.iter().position(|s| *s == site) {
            Some(i) => i,
            None => {
                self.faults.push(site);
                self.faults.len() - 1
            }
        };
        let code = u32::try_from(index + 1).unwrap_or(u32::MAX);
        self.raised.insert(code);
        self.abi(AbiParam::Fault);
        code
    }

    fn load(&mut self, v: ValueId, a: &Access) -> Res {
        let dtype = self.store_dtype(a.param)?;
        let addr = self.address(a, AccessKind::Load)?;
        let bad = self.last_bad.take();
        let on = match &bad {
            Some(bad) => format!("@!{bad} "),
            None => String::new(),
        };
        // A split loop's group reads 64 bytes of a row a step: the L2 fetches the next
        // steps' bytes with them.
        let ld = if self.deferred.is_some() {
            "ld.global.L2::256B"
        } else {
            "ld.global"
        };
        let rv = self.reg(v);
        if let Some((access, held)) = narrow_unsigned(dtype) {
            // The element in a register of its own width, zero-extended to the `i64` value.
            let narrow = self.tmp(held);
            if bad.is_some() {
                // A fresh value first (see below).
                self.line(format!("mov.{held} {narrow}, 0;"));
            }
            self.line(format!("{on}{ld}.{access} {narrow}, [{addr}];"));
            self.line(format!("cvt.u64.{held} {rv}, {narrow};"));
            return Ok(());
        }
        match self.ty(v) {
            DType::Bool => {
                let byte = self.tmp("u16");
                self.line(format!("{on}{ld}.u8 {byte}, [{addr}];"));
                self.line(format!("setp.ne.u16 {rv}, {byte}, 0;"));
            }
            DType::I64 if dtype == DType::U64 => {
                if bad.is_some() {
                    self.line(format!("mov.u64 {rv}, 0;"));
                }
                self.line(format!("{on}{ld}.u64 {rv}, [{addr}];"));
            }
            d => {
                if bad.is_some() {
                    // A fresh value first: a load predicated off keeps its register's old
                    // value, which would chain an unrolled loop's copies of this load (the
                    // assembler cannot rename the register), one load in flight at a time.
                    self.line(format!("mov.{} {rv}, {};", reg_type(d), zero_bits(d)));
                }
                self.line(format!("{on}{ld}.{} {rv}, [{addr}];", reg_type(d)));
            }
        }
        Ok(())
    }

    fn store(&mut self, a: &Access, v: ValueId, kind: AccessKind) -> Res {
        let dtype = self.store_dtype(a.param)?;
        let addr = self.address(a, kind)?;
        let rv = self.reg(v);
        if let Some((access, held)) = narrow_unsigned(dtype) {
            // The `i64` value's low bits: truncated to the element's width, then stored.
            let narrow = self.tmp(held);
            self.line(format!("cvt.{held}.u64 {narrow}, {rv};"));
            self.line(format!("st.global.{access} [{addr}], {narrow};"));
            return Ok(());
        }
        match self.ty(v) {
            DType::Bool => {
                let byte = self.tmp("u16");
                self.line(format!("selp.u16 {byte}, 1, 0, {rv};"));
                self.line(format!("st.global.u8 [{addr}], {byte};"));
            }
            DType::I64 if dtype == DType::U64 => {
                self.line(format!("st.global.u64 [{addr}], {rv};"));
            }
            d => self.line(format!("st.global.{} [{addr}], {rv};", reg_type(d))),
        }
        Ok(())
    }

    fn for_loop(&mut self, l: &ForLoop, results: &[ValueId]) -> Res {
        let (head, end) = (self.label("for"), self.label("end"));
        let (ri, rlo, rhi) = (self.reg(l.induction), self.reg(l.lo), self.reg(l.hi));
        self.line(format!("mov.s64 {ri}, {rlo};"));
        for (&c, &i) in l.carried.iter().zip(&l.init) {
            let (rc, rinit) = (self.reg(c), self.reg(i));
            self.line(format!("mov.{} {rc}, {rinit};", reg_type(self.ty(c))));
        }
        self.place(&head);
        let done = self.tmp("pred");
        self.line(format!("setp.ge.s64 {done}, {ri}, {rhi};"));
        self.line(format!("@{done} bra {end};"));
        for inst in &l.body {
            self.inst(inst)?;
        }
        // The next carried values, through temporaries: a yield may be another carried value.
        let mut next = Vec::new();
        for &y in &l.yields {
            let ty = reg_type(self.ty(y));
            let (t, ry) = (self.tmp(ty), self.reg(y));
            self.line(format!("mov.{ty} {t}, {ry};"));
            next.push(t);
        }
        for (&c, t) in l.carried.iter().zip(&next) {
            let rc = self.reg(c);
            self.line(format!("mov.{} {rc}, {t};", reg_type(self.ty(c))));
        }
        self.stop_check(weft_ir::coverage::bounded_by_a_store(l));
        self.line(format!("add.s64 {ri}, {ri}, 1;"));
        self.line(format!("bra.uni {head};"));
        self.place(&end);
        for (&r, &c) in results.iter().zip(&l.carried) {
            let (rr, rc) = (self.reg(r), self.reg(c));
            self.line(format!("mov.{} {rr}, {rc};", reg_type(self.ty(r))));
        }
        Ok(())
    }

    /// A loop's back edge, unless a store bounds the loop (`bounded`): a runaway loop stops
    /// once the fault word is set, by a fault of another thread or by the host at the kernel
    /// time limit (`abi::CANCELLED`).
    fn stop_check(&mut self, bounded: bool) {
        if bounded {
            return;
        }
        let fault = self.abi(AbiParam::Fault);
        let (word, set) = (self.tmp("b32"), self.tmp("pred"));
        self.line(format!("ld.volatile.global.u32 {word}, [{fault}];"));
        self.line(format!("setp.ne.u32 {set}, {word}, 0;"));
        self.line(format!("@{set} bra $stopped;"));
        self.stoppable = true;
    }

    /// The entry's parallel loop: a grid-stride loop over the linear index of `lp.over`'s
    /// sub-store, its indices recovered row-major; or, where the loop reduces by element
    /// trees, over the loop's units (see [`super::Entry::trees`]). Returns the loop's leaves
    /// and element trees.
    pub(super) fn parallel(&mut self, lp: &ParallelLoop) -> Res<(Vec<Leaf>, Vec<Leaf>)> {
        let over = lp.over;
        let mut leaves: Vec<Leaf> = Vec::new();
        let tree_params = element_trees(&self.kernel.params, lp);
        let mut trees: Vec<Leaf> = Vec::new();
        reductions(&lp.body, &mut |param, op| {
            let Some(Param::Store { dtype, rank, .. }) = self.kernel.params.get(param as usize)
            else {
                return;
            };
            let leaf = Leaf {
                param,
                op,
                dtype: *dtype,
            };
            let ordered = dtype.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod);
            if ordered && *rank == 0 && !leaves.contains(&leaf) {
                leaves.push(leaf);
            }
            if ordered && tree_params.contains(&param) && !trees.contains(&leaf) {
                trees.push(leaf);
            }
        });
        for leaf in &leaves {
            let name = format!("%acc_p{}", leaf.param);
            self.regs.insert(name.clone(), reg_type(leaf.dtype));
            self.accumulators.insert(leaf.param, (name, *leaf));
        }
        let rank = lp.indices.len();
        let mut extents = Vec::new();
        for d in 0..rank {
            let dim = u32::try_from(d).map_err(|_| "too many dimensions".to_string())?;
            extents.push(self.abi(AbiParam::Extent { param: over, dim }));
        }
        self.hoist_checks(lp, &extents)?;
        if rank == 2 && trees.is_empty() {
            self.rows_and_columns(lp, &leaves, &extents)?;
            return Ok((leaves, Vec::new()));
        }
        if rank == 1 && trees.is_empty() {
            let splits = lanes::plan(self.kernel, lp);
            if !splits.is_empty() {
                self.lanes_points(lp, &leaves, &extents, &splits)?;
                return Ok((leaves, Vec::new()));
            }
        }
        if rank == 1 && trees.is_empty() && !leaves.is_empty() && leaves.len() <= MAX_GROUPED_LEAVES
        {
            self.grouped_points(lp, &leaves, &extents)?;
            return Ok((leaves, Vec::new()));
        }
        let (linear, step, _) = self.grid();
        if !trees.is_empty() {
            self.units(lp, &leaves, &trees, &extents, &linear, &step)?;
            return Ok((leaves, trees));
        }
        let total = self.tmp("u64");
        self.line(format!("mov.u64 {total}, 1;"));
        for e in &extents {
            self.line(format!("mul.lo.s64 {total}, {total}, {e};"));
        }
        let (head, end) = (self.label("point"), self.label("done"));
        self.place(&head);
        let done = self.tmp("pred");
        self.line(format!("setp.ge.u64 {done}, {linear}, {total};"));
        self.line(format!("@{done} bra {end};"));
        if rank > 0 {
            let rest = self.tmp("u64");
            self.line(format!("mov.u64 {rest}, {linear};"));
            for d in (0..rank).rev() {
                let ix = self.reg(lp.indices[d]);
                if d == 0 {
                    self.line(format!("mov.s64 {ix}, {rest};"));
                } else {
                    let e = &extents[d];
                    self.line(format!("rem.u64 {ix}, {rest}, {e};"));
                    self.line(format!("div.u64 {rest}, {rest}, {e};"));
                }
            }
        }
        self.point(lp, &leaves, &linear)?;
        self.line(format!("add.s64 {linear}, {linear}, {step};"));
        self.line(format!("bra.uni {head};"));
        self.place(&end);
        Ok((leaves, Vec::new()))
    }

    /// The index checks the loop's range proves, made once before the loop (as the CPU back
    /// end hoists them): an access at exactly the loop's indices, in the body's top level,
    /// runs at every point, so it is in bounds at every point if and only if each of the
    /// loop's extents (`over`'s) is at most its store's. A loop with points whose extents
    /// are not faults at once with that access's code, before any store; one without
    /// points never does. The loop's own store needs no check at all. The accesses of those
    /// stores at the loop's indices (anywhere in the body) then skip their checks.
    fn hoist_checks(&mut self, lp: &ParallelLoop, extents: &[String]) -> Res {
        self.proven = (HashSet::new(), Vec::new());
        let Some(first) = extents.first() else {
            return Ok(());
        };
        let mut sites: Vec<(u32, AccessKind)> = Vec::new();
        for inst in &lp.body {
            let (a, kind) = match &inst.op {
                Op::Load(a) => (a, AccessKind::Load),
                Op::Store(a, _) => (a, AccessKind::Store),
                _ => continue,
            };
            if a.indices == lp.indices && !sites.iter().any(|s| s.0 == a.param) {
                sites.push((a.param, kind));
            }
        }
        self.proven = (sites.iter().map(|s| s.0).collect(), lp.indices.clone());
        let checked: Vec<(u32, AccessKind)> =
            sites.into_iter().filter(|s| s.0 != lp.over).collect();
        if checked.is_empty() {
            return Ok(());
        }
        // Whether the loop has points at all.
        let some = self.tmp("pred");
        self.line(format!("setp.ne.u64 {some}, {first}, 0;"));
        for e in &extents[1..] {
            let nonzero = self.tmp("pred");
            self.line(format!("setp.ne.u64 {nonzero}, {e}, 0;"));
            self.line(format!("and.pred {some}, {some}, {nonzero};"));
        }
        for (param, kind) in checked {
            for (d, over_extent) in extents.iter().enumerate() {
                let dim = u32::try_from(d).map_err(|_| "too many dimensions".to_string())?;
                let ext = self.abi(AbiParam::Extent { param, dim });
                let code = self.fault_code(FaultSite {
                    param,
                    dim,
                    access: kind,
                });
                let past = self.tmp("pred");
                self.line(format!("setp.gt.u64 {past}, {over_extent}, {ext};"));
                self.line(format!("and.pred {past}, {past}, {some};"));
                self.line(format!("@{past} bra $fault_{code};"));
            }
        }
        Ok(())
    }

    /// A rank-2 loop on a 2-D grid ([`super::Entry::rows`]): `y` threads stride over rows,
    /// `x` threads over columns, so no index is divided out of a linear one; the linear index
    /// (for leaves) is `i * columns + j`.
    fn rows_and_columns(&mut self, lp: &ParallelLoop, leaves: &[Leaf], extents: &[String]) -> Res {
        let (rows, cols) = (&extents[0], &extents[1]);
        let axis = |s: &mut Self, a: &str| -> (String, String) {
            let (ctaid, ntid, tid, nctaid) =
                (s.tmp("u32"), s.tmp("u32"), s.tmp("u32"), s.tmp("u32"));
            let (first, step, t64) = (s.tmp("u64"), s.tmp("u64"), s.tmp("u64"));
            s.line(format!("mov.u32 {ctaid}, %ctaid.{a};"));
            s.line(format!("mov.u32 {ntid}, %ntid.{a};"));
            s.line(format!("mov.u32 {tid}, %tid.{a};"));
            s.line(format!("mov.u32 {nctaid}, %nctaid.{a};"));
            s.line(format!("mul.wide.u32 {first}, {ctaid}, {ntid};"));
            s.line(format!("cvt.u64.u32 {t64}, {tid};"));
            s.line(format!("add.s64 {first}, {first}, {t64};"));
            s.line(format!("mul.wide.u32 {step}, {nctaid}, {ntid};"));
            (first, step)
        };
        let (row0, row_step) = axis(self, "y");
        let (col0, col_step) = axis(self, "x");
        let (i, j) = (self.reg(lp.indices[0]), self.reg(lp.indices[1]));
        let linear = self.tmp("u64");
        let (row_top, row_end) = (self.label("row"), self.label("rows_done"));
        let (col_top, col_end) = (self.label("col"), self.label("cols_done"));
        let (rows_done, cols_done) = (self.tmp("pred"), self.tmp("pred"));
        self.line(format!("mov.s64 {i}, {row0};"));
        self.place(&row_top);
        self.line(format!("setp.ge.u64 {rows_done}, {i}, {rows};"));
        self.line(format!("@{rows_done} bra {row_end};"));
        self.line(format!("mov.s64 {j}, {col0};"));
        self.place(&col_top);
        self.line(format!("setp.ge.u64 {cols_done}, {j}, {cols};"));
        self.line(format!("@{cols_done} bra {col_end};"));
        self.line(format!("mad.lo.s64 {linear}, {i}, {cols}, {j};"));
        // The body may not change the indices: they are SSA values of the loop.
        self.point(lp, leaves, &linear)?;
        self.line(format!("add.s64 {j}, {j}, {col_step};"));
        self.line(format!("bra.uni {col_top};"));
        self.place(&col_end);
        self.line(format!("add.s64 {i}, {i}, {row_step};"));
        self.line(format!("bra.uni {row_top};"));
        self.place(&row_end);
        Ok(())
    }

    /// The thread's first linear index, the grid's stride and the thread's index in its
    /// block, each in a 64-bit register.
    fn grid(&mut self) -> (String, String, String) {
        let (ctaid, ntid, tid, nctaid) = (
            self.tmp("u32"),
            self.tmp("u32"),
            self.tmp("u32"),
            self.tmp("u32"),
        );
        let (linear, step, t64) = (self.tmp("u64"), self.tmp("u64"), self.tmp("u64"));
        self.line(format!("mov.u32 {ctaid}, %ctaid.x;"));
        self.line(format!("mov.u32 {ntid}, %ntid.x;"));
        self.line(format!("mov.u32 {tid}, %tid.x;"));
        self.line(format!("mov.u32 {nctaid}, %nctaid.x;"));
        self.line(format!("mul.wide.u32 {linear}, {ctaid}, {ntid};"));
        self.line(format!("cvt.u64.u32 {t64}, {tid};"));
        self.line(format!("add.s64 {linear}, {linear}, {t64};"));
        self.line(format!("mul.wide.u32 {step}, {nctaid}, {ntid};"));
        (linear, step, t64)
    }

    /// One point: the leaves' registers start from the exact identity, the body runs, and
    /// each leaf's value goes to the leaf buffer at the point's linear index `point`.
    fn point(&mut self, lp: &ParallelLoop, leaves: &[Leaf], point: &str) -> Res {
        self.point_split(lp, leaves, point, &[])
    }

    /// [`Body::point`] with the loops of `splits` run split by lanes.
    fn point_split(
        &mut self,
        lp: &ParallelLoop,
        leaves: &[Leaf],
        point: &str,
        splits: &[lanes::Split],
    ) -> Res {
        for leaf in leaves {
            let acc = format!("%acc_p{}", leaf.param);
            let identity = literal(exact_identity(leaf.op, leaf.dtype));
            self.line(format!("mov.{} {acc}, {identity};", reg_type(leaf.dtype)));
        }
        for (at, inst) in lp.body.iter().enumerate() {
            match splits.iter().find(|s| s.at() == at) {
                Some(split) => self.split_loop(inst, split)?,
                None => self.inst(inst)?,
            }
        }
        for leaf in leaves {
            self.guarded(|b| b.leaf_store(leaf, point))?;
        }
        Ok(())
    }

    /// A leaf's value into the leaf buffer at the point's linear index `point`.
    fn leaf_store(&mut self, leaf: &Leaf, point: &str) -> Res {
        let acc = format!("%acc_p{}", leaf.param);
        let base = self.abi(AbiParam::Leaf { param: leaf.param });
        let (offset, addr) = (self.tmp("u64"), self.tmp("u64"));
        let shift = leaf.dtype.size().trailing_zeros();
        self.line(format!("shl.b64 {offset}, {point}, {shift};"));
        self.line(format!("add.s64 {addr}, {base}, {offset};"));
        let ty = reg_type(leaf.dtype);
        self.line(format!("st.global.{ty} [{addr}], {acc};"));
        Ok(())
    }

    /// A rank-1 loop with element trees, a thread per unit: `units_head` loose points, then
    /// whole aligned blocks of `2^ELEMENT_BLOCK_LEVEL` points up to local index
    /// `units_whole_end` (the last may be shorter, clipped by the view), then loose points
    /// to the end. A unit's points run in order, each tree's reductions folding into the
    /// unit's row of the tree buffer (one value per element of the target, from the exact
    /// identity), so a block's row holds its points' contributions folded in point order.
    fn units(
        &mut self,
        lp: &ParallelLoop,
        leaves: &[Leaf],
        trees: &[Leaf],
        extents: &[String],
        unit: &str,
        step: &str,
    ) -> Res {
        let n = extents
            .first()
            .cloned()
            .ok_or_else(|| "element trees of a 0-d loop".to_string())?;
        let head = self.abi(AbiParam::UnitsHead);
        let whole_end = self.abi(AbiParam::UnitsWholeEnd);
        let block = 1u64 << ELEMENT_BLOCK_LEVEL;
        let (blocks, tail, total) = (self.tmp("u64"), self.tmp("u64"), self.tmp("u64"));
        self.line(format!("sub.s64 {blocks}, {whole_end}, {head};"));
        self.line(format!("add.s64 {blocks}, {blocks}, {};", block - 1));
        self.line(format!(
            "shr.u64 {blocks}, {blocks}, {ELEMENT_BLOCK_LEVEL};"
        ));
        self.line(format!("sub.s64 {tail}, {n}, {whole_end};"));
        self.line(format!("add.s64 {total}, {head}, {blocks};"));
        self.line(format!("add.s64 {total}, {total}, {tail};"));
        // Each tree's row length: the target's elements.
        let mut rows = Vec::new();
        for t in trees {
            let rank = match self.kernel.params.get(t.param as usize) {
                Some(Param::Store { rank, .. }) => *rank,
                _ => return Err(format!("parameter {} is not a store", t.param)),
            };
            let len = self.tmp("u64");
            self.line(format!("mov.u64 {len}, 1;"));
            for dim in 0..rank {
                let e = self.abi(AbiParam::Extent {
                    param: t.param,
                    dim,
                });
                self.line(format!("mul.lo.s64 {len}, {len}, {e};"));
            }
            rows.push(len);
        }
        let (top, end) = (self.label("unit"), self.label("done"));
        self.place(&top);
        let done = self.tmp("pred");
        self.line(format!("setp.ge.u64 {done}, {unit}, {total};"));
        self.line(format!("@{done} bra {end};"));
        // The unit's first point and point count.
        let (in_head, in_blocks) = (self.tmp("pred"), self.tmp("pred"));
        let (start, count, t, limit) = (
            self.tmp("u64"),
            self.tmp("u64"),
            self.tmp("u64"),
            self.tmp("u64"),
        );
        self.line(format!("setp.lt.u64 {in_head}, {unit}, {head};"));
        self.line(format!("add.s64 {limit}, {head}, {blocks};"));
        self.line(format!("setp.lt.u64 {in_blocks}, {unit}, {limit};"));
        // In the blocks: head + (unit - head) * block, up to whole_end.
        self.line(format!("sub.s64 {t}, {unit}, {head};"));
        self.line(format!("shl.b64 {t}, {t}, {ELEMENT_BLOCK_LEVEL};"));
        self.line(format!("add.s64 {start}, {head}, {t};"));
        self.line(format!("sub.s64 {count}, {whole_end}, {start};"));
        self.line(format!("min.u64 {count}, {count}, {block};"));
        // In the tail: whole_end + (unit - head - blocks), one point.
        let tail_start = self.tmp("u64");
        self.line(format!("sub.s64 {tail_start}, {unit}, {limit};"));
        self.line(format!("add.s64 {tail_start}, {tail_start}, {whole_end};"));
        self.line(format!(
            "selp.u64 {start}, {start}, {tail_start}, {in_blocks};"
        ));
        self.line(format!("selp.u64 {count}, {count}, 1, {in_blocks};"));
        self.line(format!("selp.u64 {start}, {unit}, {start}, {in_head};"));
        self.line(format!("selp.u64 {count}, 1, {count}, {in_head};"));
        // Each tree's row for this unit, filled with the exact identity.
        self.trees.clear();
        for (tree, len) in trees.iter().zip(&rows) {
            let base = self.abi(AbiParam::Tree { param: tree.param });
            let size = tree.dtype.size() as u64;
            let (row, k, addr, full) = (
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("pred"),
            );
            self.line(format!("mul.lo.s64 {row}, {unit}, {len};"));
            self.line(format!("mul.lo.s64 {row}, {row}, {size};"));
            self.line(format!("add.s64 {row}, {base}, {row};"));
            let (fill, filled) = (self.label("fill"), self.label("filled"));
            self.line(format!("mov.u64 {k}, 0;"));
            self.place(&fill);
            self.line(format!("setp.ge.u64 {full}, {k}, {len};"));
            self.line(format!("@{full} bra {filled};"));
            self.line(format!("mad.lo.s64 {addr}, {k}, {size}, {row};"));
            let identity = literal(exact_identity(tree.op, tree.dtype));
            let ty = reg_type(tree.dtype);
            let value = self.tmp(ty);
            self.line(format!("mov.{ty} {value}, {identity};"));
            self.line(format!("st.global.{ty} [{addr}], {value};"));
            self.line(format!("add.s64 {k}, {k}, 1;"));
            self.line(format!("bra.uni {fill};"));
            self.place(&filled);
            self.trees.insert(tree.param, row);
        }
        // The unit's points, in order.
        let (point, stop, more) = (self.tmp("u64"), self.tmp("u64"), self.tmp("pred"));
        let (next, finished) = (self.label("next"), self.label("unit_done"));
        self.line(format!("mov.u64 {point}, {start};"));
        self.line(format!("add.s64 {stop}, {start}, {count};"));
        self.place(&next);
        self.line(format!("setp.ge.u64 {more}, {point}, {stop};"));
        self.line(format!("@{more} bra {finished};"));
        let ix = self.reg(lp.indices[0]);
        self.line(format!("mov.s64 {ix}, {point};"));
        self.point(lp, leaves, &point)?;
        self.line(format!("add.s64 {point}, {point}, 1;"));
        self.line(format!("bra.uni {next};"));
        self.place(&finished);
        self.line(format!("add.s64 {unit}, {unit}, {step};"));
        self.line(format!("bra.uni {top};"));
        self.place(&end);
        Ok(())
    }

    /// A reduction into an element tree's row: the element's value in the unit's row, folded
    /// with `v` (the row is the thread's own).
    fn tree_reduce(&mut self, a: &Access, op: ReduceOp, v: ValueId, row: &str) -> Res {
        let param = a.param;
        let d = self.ty(v);
        let ty = reg_type(d);
        let lin = self.tmp("s64");
        for (k, &ix) in a.indices.iter().enumerate() {
            let dim = u32::try_from(k).map_err(|_| "too many dimensions".to_string())?;
            let ext = self.abi(AbiParam::Extent { param, dim });
            let rix = self.reg(ix);
            let code = self.fault_code(FaultSite {
                param,
                dim,
                access: AccessKind::Reduce,
            });
            let out = self.tmp("pred");
            self.line(format!("setp.ge.u64 {out}, {rix}, {ext};"));
            self.line(format!("@{out} bra $fault_{code};"));
            if k == 0 {
                self.line(format!("mov.s64 {lin}, {rix};"));
            } else {
                self.line(format!("mad.lo.s64 {lin}, {lin}, {ext}, {rix};"));
            }
        }
        let (addr, old, rv) = (self.tmp("u64"), self.tmp(ty), self.reg(v));
        let shift = d.size().trailing_zeros();
        self.line(format!("shl.b64 {lin}, {lin}, {shift};"));
        self.line(format!("add.s64 {addr}, {row}, {lin};"));
        self.line(format!("ld.global.{ty} {old}, [{addr}];"));
        let inst = if op == ReduceOp::Sum { "add" } else { "mul" };
        self.line(format!("{inst}.rn.{ty} {old}, {old}, {rv};"));
        self.line(format!("st.global.{ty} [{addr}], {old};"));
        Ok(())
    }

    /// A reduction: into a leaf's register, or into memory by an atomic operation (the
    /// operators whose result does not depend on the order: integer ones, float and bool
    /// `min`/`max`).
    fn reduce(&mut self, a: &Access, op: ReduceOp, v: ValueId) -> Res {
        let d = self.ty(v);
        let target = self.store_dtype(a.param)?;
        if target.is_unsigned() {
            // Validation refuses these; an `i64` atomic would write past a narrow element.
            return Err(format!(
                "a {} reduction into parameter {} of the storage type {target}",
                op.name(),
                a.param
            ));
        }
        if let Some(row) = self.trees.get(&a.param).cloned() {
            return self.tree_reduce(a, op, v, &row);
        }
        if let Some((acc, _)) = self.accumulators.get(&a.param).cloned() {
            let ty = reg_type(d);
            let rv = self.reg(v);
            let inst = if op == ReduceOp::Sum { "add" } else { "mul" };
            self.line(format!("{inst}.rn.{ty} {acc}, {acc}, {rv};"));
            return Ok(());
        }
        if d.is_float() && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
            return Err(format!(
                "a float {} into parameter {} of rank {} (only 0-d targets are lowered to PTX \
                 yet; the canonical order of the others needs element trees)",
                op.name(),
                a.param,
                a.indices.len()
            ));
        }
        let addr = self.address(a, AccessKind::Reduce)?;
        let rv = self.reg(v);
        match (d, op) {
            (DType::Bool, _) => self.bool_reduce(&addr, op, &rv),
            (DType::I32 | DType::I64, ReduceOp::Sum) => {
                let ty = if d == DType::I32 { "u32" } else { "u64" };
                self.line(format!("red.global.add.{ty} [{addr}], {rv};"));
            }
            (DType::I32 | DType::I64, ReduceOp::Min | ReduceOp::Max) => {
                let ty = reg_type(d);
                self.line(format!("red.global.{}.{ty} [{addr}], {rv};", op.name()));
            }
            _ => self.cas_reduce(&addr, op, d, &rv),
        }
        Ok(())
    }

    /// `any` (`max`) and `all` (`min`) into a byte: an atomic `or` or `and` on the aligned
    /// 32-bit word that holds it (bytes are 0 or 1, and any nonzero byte is true).
    fn bool_reduce(&mut self, addr: &str, op: ReduceOp, rv: &str) {
        let (word, low, shift, mask) = (
            self.tmp("u64"),
            self.tmp("u64"),
            self.tmp("u32"),
            self.tmp("b32"),
        );
        self.line(format!("and.b64 {word}, {addr}, -4;"));
        self.line(format!("and.b64 {low}, {addr}, 3;"));
        self.line(format!("cvt.u32.u64 {shift}, {low};"));
        self.line(format!("shl.b32 {shift}, {shift}, 3;"));
        if op == ReduceOp::Max || op == ReduceOp::Sum {
            self.line(format!("shl.b32 {mask}, 1, {shift};"));
            self.line(format!("@{rv} red.global.or.b32 [{word}], {mask};"));
        } else {
            let skip = self.tmp("pred");
            self.line(format!("shl.b32 {mask}, 255, {shift};"));
            self.line(format!("not.b32 {mask}, {mask};"));
            self.line(format!("not.pred {skip}, {rv};"));
            self.line(format!("@{skip} red.global.and.b32 [{word}], {mask};"));
        }
    }

    /// A reduction by compare-and-swap: integer products and float `min`/`max`.
    fn cas_reduce(&mut self, addr: &str, op: ReduceOp, d: DType, rv: &str) {
        let ty = reg_type(d);
        let bits = bits_type(d);
        let (old, seen, new_bits) = (self.tmp(bits), self.tmp(bits), self.tmp(bits));
        let (old_v, new_v, again) = (self.tmp(ty), self.tmp(ty), self.tmp("pred"));
        let retry = self.label("cas");
        self.line(format!("ld.global.{bits} {old}, [{addr}];"));
        self.place(&retry);
        self.line(format!("mov.{bits} {old_v}, {old};"));
        match (op, d.is_float()) {
            (ReduceOp::Min | ReduceOp::Max, true) => {
                let bop = if op == ReduceOp::Min {
                    BinaryOp::Min
                } else {
                    BinaryOp::Max
                };
                self.float_min_max(bop, d, &new_v, &old_v, rv);
            }
            _ => self.line(format!("mul.lo.{ty} {new_v}, {old_v}, {rv};")),
        }
        self.line(format!("mov.{bits} {new_bits}, {new_v};"));
        self.line(format!(
            "atom.global.cas.{bits} {seen}, [{addr}], {old}, {new_bits};"
        ));
        self.line(format!("setp.ne.{bits} {again}, {seen}, {old};"));
        self.line(format!("mov.{bits} {old}, {seen};"));
        self.line(format!("@{again} bra {retry};"));
    }
}

/// Calls `f(param, op)` for every reduction in `body`, at any depth.
fn reductions(body: &[Inst], f: &mut impl FnMut(u32, ReduceOp)) {
    for inst in body {
        match &inst.op {
            Op::Reduce(a, op, _) => f(a.param, *op),
            Op::For(l) => reductions(&l.body, f),
            Op::Parallel(p) => reductions(&p.body, f),
            _ => {}
        }
    }
}

/// The bits of 1 in type `d`.
fn one_bits(d: DType) -> u64 {
    match d {
        DType::F32 => u64::from(1f32.to_bits()),
        DType::F64 => 1f64.to_bits(),
        _ => 1,
    }
}
