//! The validator: types, scopes, and privileges.
//!
//! [`validate`] checks everything a back end relies on, so that a back end may assume a
//! validated kernel is well formed:
//!
//! - **SSA.** Every value is defined exactly once. A value is visible after its definition in
//!   the block that defines it and in every block nested in it after that point (structured
//!   dominance). A loop's index, induction and carried values belong to its body; a `for`
//!   loop's results are defined after the loop.
//! - **Results.** Value operations define one result; `store`, `reduce` and `parallel` define
//!   none; `for` defines one per carried value.
//! - **Types.** Binary operands have the same type; `pow` takes floats; `and`, `or` and `xor`
//!   take integers or bools; `shl` and `shr` take integers (the amount has the shifted value's
//!   type); `add`, `sub`, `mul`, `div` and `rem` do not take bools (`min` and `max` do: on bools
//!   they are `and` and `or`). Math functions take floats, `not` an integer or bool, `neg` and
//!   `abs` anything but a bool. Comparisons take two operands of one type and give a bool;
//!   `select` takes a bool condition and two arms of one type; `bitcast` goes between types of
//!   one size (`f64` and `i64`, `f32` and `i32`) or from a type to itself. Indices, extents,
//!   origins, loop bounds and induction values are `i64`.
//! - **Parameters.** Parameter indices are in range; `param` reads a scalar parameter; loads,
//!   stores, reductions, extents, origins and parallel loops name a store parameter. Loads need
//!   a readable store, stores a writable one, and reductions a store with the privilege
//!   `reduce(op)` of the same operator; sum and product reductions do not take bools. An access
//!   has one index per dimension, and the stored or reduced value has the element type. The
//!   unsigned storage types (`u8` .. `u64`) load as and store `i64` values; no scalar
//!   parameter, constant, cast or bitcast has one of them, and their stores take no
//!   reductions.
//! - **Structure.** Parallel loops are at the top level of the kernel; stores and reductions are
//!   inside a parallel loop (possibly within `for` loops in it). Loads may appear anywhere.
//! - **No races.** A store inside a parallel loop with indices must have an index that
//!   depends on the loop's indices (through arithmetic, loads, selects or `for` loops), or
//!   store a value that does not: otherwise every iteration writes its own value to the same
//!   element, a data race whose outcome depends on the order iterations run in. Every
//!   iteration may store one same value (a flag), and reductions may combine values into one
//!   element.
//! - **Limits.** Store ranks are at most [`MAX_RANK`], loops nest at most [`MAX_LOOP_DEPTH`]
//!   deep, value ids are below [`MAX_VALUE_ID`], and a kernel has at most [`MAX_PARAMS`]
//!   parameters and [`MAX_INSTS`] instructions and keeps at most [`MAX_LIVE`] values live at
//!   once, so that no kernel can exhaust the stack
//!   or the memory of the passes that walk it.
//!
//! Error messages quote the offending instruction in the text form (see [`crate::text`]), for
//! example ``in `store %arg2[%1], %7`: store through parameter 2 which is read-only``.

use std::collections::HashMap;

use crate::{
    Access, BinaryOp, DType, Inst, Kernel, Op, Param, Privilege, ReduceOp, UnaryOp, ValueId,
};

pub use crate::semantics::{
    MAX_INSTS, MAX_LIVE, MAX_LOOP_DEPTH, MAX_PARAMS, MAX_RANK, MAX_VALUE_ID,
};

/// The type of every value of a validated kernel.
#[derive(Clone, Debug, Default)]
pub struct Types {
    types: Vec<Option<DType>>,
}

impl Types {
    /// The type of `v`.
    ///
    /// # Panics
    /// If `v` is not defined in the kernel these types were inferred for.
    pub fn of(&self, v: ValueId) -> DType {
        self.types[v.0 as usize].expect("value defined in a validated kernel")
    }

    /// The type of `v`, or `None` if `v` is not defined in the kernel.
    pub fn get(&self, v: ValueId) -> Option<DType> {
        self.types.get(v.0 as usize).copied().flatten()
    }

    /// These types and those of `extra`: values that a back end defines itself when it
    /// rewrites a validated kernel (copies of its values, with the copied values' types). A
    /// value both here and in `extra` takes `extra`'s type.
    pub fn with(&self, extra: &[(ValueId, DType)]) -> Types {
        let mut types = self.types.clone();
        for &(v, t) in extra {
            let i = v.0 as usize;
            if types.len() <= i {
                types.resize(i + 1, None);
            }
            types[i] = Some(t);
        }
        Types { types }
    }
}

/// Why a kernel is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid kernel `{kernel}`: {message}")]
pub struct ValidateError {
    /// The kernel's name.
    pub kernel: String,
    /// What is wrong.
    pub message: String,
}

/// Checks a kernel and infers the type of each of its values.
///
/// See the [module documentation](self) for the rules.
pub fn validate(kernel: &Kernel) -> Result<Types, ValidateError> {
    check(kernel).map_err(|message| ValidateError {
        kernel: kernel.name.clone(),
        message,
    })
}

/// A kernel the validator accepted, with the type of each of its values.
///
/// Only [`ValidKernel::new`] makes one, so a pass or a back end that takes a `ValidKernel`
/// needs not validate it again: the runtime's kernel intake validates each kernel once, and
/// everything after it trusts this type.
#[derive(Clone, Debug)]
pub struct ValidKernel {
    kernel: Kernel,
    types: Types,
}

impl ValidKernel {
    /// Validates `kernel`.
    pub fn new(kernel: Kernel) -> Result<ValidKernel, ValidateError> {
        let types = validate(&kernel)?;
        Ok(ValidKernel { kernel, types })
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The type of every value.
    pub fn types(&self) -> &Types {
        &self.types
    }

    /// The kernel, giving up the proof that it is valid.
    pub fn into_kernel(self) -> Kernel {
        self.kernel
    }
}

impl std::ops::Deref for ValidKernel {
    type Target = Kernel;

    fn deref(&self) -> &Kernel {
        &self.kernel
    }
}

/// Renumbers the values of `kernel` into definition order: the `n`-th value defined, walking
/// the body in pre-order as [`crate::visit_defs`] does, becomes `%n`.
///
/// This is the numbering the text parser and [`crate::flat::from_flat`] produce, so
/// `text::parse(&text::print(&k)) == Ok(renumber(&k))` and
/// `flat::from_flat(&flat::to_flat(&k)) == Ok(renumber(&k))` for every valid `k`.
///
/// The renaming is injective, so it keeps an invalid kernel invalid for the same reason: a value
/// defined twice keeps one number (that of its first definition), and values used but never
/// defined are numbered after all defined values, in order of first use.
pub fn renumber(kernel: &Kernel) -> Kernel {
    let mut map = HashMap::new();
    let mut next = 0u32;
    crate::visit_defs(&kernel.body, &mut |v| {
        map.entry(v).or_insert_with(|| {
            let n = ValueId(next);
            next = next.wrapping_add(1);
            n
        });
    });
    let mut body = kernel.body.clone();
    for_each_value_mut(&mut body, &mut |v| {
        *v = *map.entry(*v).or_insert_with(|| {
            let n = ValueId(next);
            next = next.wrapping_add(1);
            n
        });
    });
    Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    }
}

/// Calls `f` on every value id in `body`, definitions and uses, in textual order of the text
/// form except that a `for` loop's results come after its body.
pub(crate) fn for_each_value_mut(body: &mut [Inst], f: &mut impl FnMut(&mut ValueId)) {
    for inst in body {
        match &mut inst.op {
            Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => {}
            Op::Binary(_, a, b) | Op::Cmp(_, a, b) => {
                f(a);
                f(b);
            }
            Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => f(a),
            Op::Select(c, a, b) | Op::Fma(c, a, b) => {
                f(c);
                f(a);
                f(b);
            }
            Op::Load(access) => access.indices.iter_mut().for_each(&mut *f),
            Op::Store(access, v) | Op::Reduce(access, _, v) => {
                access.indices.iter_mut().for_each(&mut *f);
                f(v);
            }
            Op::Parallel(p) => {
                p.indices.iter_mut().for_each(&mut *f);
                for_each_value_mut(&mut p.body, f);
            }
            Op::For(l) => {
                f(&mut l.lo);
                f(&mut l.hi);
                l.init.iter_mut().for_each(&mut *f);
                f(&mut l.induction);
                l.carried.iter_mut().for_each(&mut *f);
                for_each_value_mut(&mut l.body, f);
                l.yields.iter_mut().for_each(&mut *f);
            }
        }
        inst.results.iter_mut().for_each(&mut *f);
    }
}

/// Where a value stands during the walk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Not defined yet.
    Before,
    /// Defined and visible.
    Visible,
    /// Defined in a block that has ended.
    Ended,
}

/// Where a block sits.
#[derive(Clone, Copy)]
struct Ctx {
    /// Number of enclosing loops.
    depth: usize,
    /// Whether some enclosing loop is a parallel loop.
    in_parallel: bool,
}

struct Checker<'k> {
    kernel: &'k Kernel,
    /// Every value defined somewhere in the kernel.
    defined: Vec<bool>,
    /// The type of every value defined so far.
    types: Vec<Option<DType>>,
    scope: Vec<Scope>,
}

type Res<T> = Result<T, String>;

fn check(kernel: &Kernel) -> Res<Types> {
    for (i, p) in kernel.params.iter().enumerate() {
        match *p {
            Param::Store { rank, .. } if rank > MAX_RANK => {
                return Err(format!(
                    "parameter {i} (%arg{i}) has rank {rank}, more than the maximum {MAX_RANK}"
                ));
            }
            Param::Store {
                dtype,
                privilege: Privilege::Reduce(op),
                ..
            } if dtype.is_unsigned() => {
                return Err(format!(
                    "parameter {i} (%arg{i}) holds {dtype} with privilege reduce({}): the \
                     unsigned storage types take no reductions (reduce into an i64 store)",
                    op.name()
                ));
            }
            Param::Scalar { dtype } if dtype.is_unsigned() => {
                return Err(format!(
                    "parameter {i} (%arg{i}) is a {dtype} scalar: {dtype} is a storage type \
                     (pass its value as an i64)"
                ));
            }
            _ => {}
        }
    }
    check_limits(kernel)?;
    let mut defined = Vec::new();
    collect_defs(&kernel.body, 0, &mut defined)?;
    let n = defined.len();
    let mut c = Checker {
        kernel,
        defined,
        types: vec![None; n],
        scope: vec![Scope::Before; n],
    };
    c.block(
        &kernel.body,
        Ctx {
            depth: 0,
            in_parallel: false,
        },
    )?;
    check_races(&kernel.body, &mut vec![false; n])?;
    Ok(Types { types: c.types })
}

/// Checks a kernel's size against the limits every kernel is held to: [`MAX_PARAMS`]
/// parameters, [`MAX_INSTS`] instructions and [`MAX_LIVE`] values live at once. The
/// validator runs it first; the fusion planner runs it on a fused kernel, and runs the tasks
/// apart when it fails.
pub fn check_limits(kernel: &Kernel) -> Result<(), String> {
    crate::flat::check_size(kernel.params.len(), count_insts(&kernel.body))?;
    let live = crate::liveness::max_live(kernel);
    if live > MAX_LIVE {
        return Err(format!(
            "{live} values live at once, more than the limit of {MAX_LIVE}"
        ));
    }
    Ok(())
}

/// The number of instructions in `body`, nested bodies included.
pub fn count_insts(body: &[Inst]) -> usize {
    body.iter()
        .map(|inst| {
            1 + match &inst.op {
                Op::Parallel(p) => count_insts(&p.body),
                Op::For(l) => count_insts(&l.body),
                _ => 0,
            }
        })
        .sum()
}

/// Rejects stores that every iteration of a parallel loop makes to the same element (see
/// *No races* in the module documentation). `varies[v]` says whether value `v` depends on
/// the indices of the enclosing parallel loop.
fn check_races(body: &[Inst], varies: &mut [bool]) -> Res<()> {
    let get = |varies: &[bool], v: ValueId| varies.get(v.0 as usize).copied().unwrap_or(false);
    for inst in body {
        let result_varies = match &inst.op {
            Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => false,
            Op::Binary(_, a, b) | Op::Cmp(_, a, b) => get(varies, *a) || get(varies, *b),
            Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => get(varies, *a),
            Op::Select(c, a, b) | Op::Fma(c, a, b) => {
                get(varies, *c) || get(varies, *a) || get(varies, *b)
            }
            Op::Load(access) => access.indices.iter().any(|&i| get(varies, i)),
            // Only reached inside a parallel loop with indices (see `Op::Parallel` below, and
            // the validator's structure rule).
            Op::Store(access, v) => {
                if get(varies, *v) && !access.indices.iter().any(|&i| get(varies, i)) {
                    return Err(format!(
                        "in `{}`: a data race: every iteration of the parallel loop stores its \
                         own value to the same element of parameter {} (no index depends on \
                         the loop's indices; use a reduction to combine values into one \
                         element)",
                        crate::text::inst_head(inst),
                        access.param
                    ));
                }
                false
            }
            Op::Reduce(..) => false,
            Op::Parallel(p) => {
                // A loop without indices runs once: it races with nothing.
                if p.indices.is_empty() {
                    continue;
                }
                for &i in &p.indices {
                    if let Some(v) = varies.get_mut(i.0 as usize) {
                        *v = true;
                    }
                }
                check_races(&p.body, varies)?;
                continue;
            }
            Op::For(l) => {
                // What a loop carries varies when its bounds, its start or anything its body
                // yields varies; iterate until nothing changes (each round marks more).
                let inputs = get(varies, l.lo)
                    || get(varies, l.hi)
                    || l.init.iter().any(|&v| get(varies, v));
                let mark = |varies: &mut [bool], vs: &[ValueId]| {
                    for &v in vs {
                        if let Some(x) = varies.get_mut(v.0 as usize) {
                            *x = true;
                        }
                    }
                };
                if inputs {
                    mark(varies, &[l.induction]);
                    mark(varies, &l.carried);
                }
                loop {
                    check_races(&l.body, varies)?;
                    let changed: Vec<ValueId> = l
                        .yields
                        .iter()
                        .zip(&l.carried)
                        .filter(|&(&y, &c)| get(varies, y) && !get(varies, c))
                        .map(|(_, &c)| c)
                        .collect();
                    if changed.is_empty() {
                        break;
                    }
                    mark(varies, &changed);
                }
                inputs || l.carried.iter().any(|&c| get(varies, c))
            }
        };
        if result_varies {
            for &r in &inst.results {
                if let Some(v) = varies.get_mut(r.0 as usize) {
                    *v = true;
                }
            }
        }
    }
    Ok(())
}

/// Marks every defined value in `defined`, checking the nesting depth, the value-id bound and
/// that no value is defined twice.
fn collect_defs(body: &[Inst], depth: usize, defined: &mut Vec<bool>) -> Res<()> {
    fn def(v: ValueId, inst: &Inst, defined: &mut Vec<bool>) -> Res<()> {
        if v.0 >= MAX_VALUE_ID {
            return Err(format!(
                "in `{}`: value id {v} is not below the limit {MAX_VALUE_ID}",
                crate::text::inst_head(inst)
            ));
        }
        let i = v.0 as usize;
        if defined.len() <= i {
            defined.resize(i + 1, false);
        }
        if defined[i] {
            return Err(format!(
                "in `{}`: {v} is defined more than once",
                crate::text::inst_head(inst)
            ));
        }
        defined[i] = true;
        Ok(())
    }
    for inst in body {
        let inner = match &inst.op {
            Op::Parallel(p) => {
                for &v in &p.indices {
                    def(v, inst, defined)?;
                }
                Some(&p.body)
            }
            Op::For(l) => {
                def(l.induction, inst, defined)?;
                for &v in &l.carried {
                    def(v, inst, defined)?;
                }
                Some(&l.body)
            }
            _ => None,
        };
        if let Some(inner) = inner {
            if depth >= MAX_LOOP_DEPTH {
                return Err(format!(
                    "in `{}`: loops nest more than {MAX_LOOP_DEPTH} deep",
                    crate::text::inst_head(inst)
                ));
            }
            collect_defs(inner, depth + 1, defined)?;
        }
        for &v in &inst.results {
            def(v, inst, defined)?;
        }
    }
    Ok(())
}

/// Whether `bitcast` may reinterpret a `from` as a `to`: same-size pairs of a float and an
/// integer, or a type as itself.
pub fn bitcast_ok(from: DType, to: DType) -> bool {
    use DType::*;
    from == to
        || matches!(
            (from, to),
            (F64, I64) | (I64, F64) | (F32, I32) | (I32, F32)
        )
}

fn is_arith(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
    )
}

impl Checker<'_> {
    /// The type of `v` used by `inst`, if `v` is visible there.
    fn use_(&self, inst: &Inst, v: ValueId) -> Res<DType> {
        let i = v.0 as usize;
        let at = || format!("in `{}`: {v}", crate::text::inst_head(inst));
        if !self.defined.get(i).copied().unwrap_or(false) {
            return Err(format!("{} is never defined", at()));
        }
        match (self.scope[i], self.types[i]) {
            (Scope::Visible, Some(t)) => Ok(t),
            (Scope::Ended, _) => Err(format!(
                "{} is used outside the loop body that defines it",
                at()
            )),
            _ => Err(format!("{} is used before its definition", at())),
        }
    }

    fn define(&mut self, v: ValueId, t: DType) {
        // `collect_defs` has sized the tables and checked that `v` is defined once.
        let i = v.0 as usize;
        if let (Some(s), Some(ty)) = (self.scope.get_mut(i), self.types.get_mut(i)) {
            *s = Scope::Visible;
            *ty = Some(t);
        }
    }

    fn end(&mut self, vs: &[ValueId]) {
        for v in vs {
            if let Some(s) = self.scope.get_mut(v.0 as usize) {
                *s = Scope::Ended;
            }
        }
    }

    /// Checks `v` as an `i64` operand called `what`.
    fn use_i64(&self, inst: &Inst, v: ValueId, what: &str) -> Res<()> {
        let t = self.use_(inst, v)?;
        if t != DType::I64 {
            return Err(format!(
                "in `{}`: {what} {v} has type {t}, expected i64",
                crate::text::inst_head(inst)
            ));
        }
        Ok(())
    }

    /// The store parameter `param` named by `inst` (element type, rank, privilege).
    fn store_param(&self, inst: &Inst, param: u32) -> Res<(DType, u32, Privilege)> {
        match self.kernel.params.get(param as usize) {
            None => Err(format!(
                "in `{}`: parameter index {param} is out of range (the kernel has {} parameters)",
                crate::text::inst_head(inst),
                self.kernel.params.len()
            )),
            Some(Param::Scalar { dtype }) => Err(format!(
                "in `{}`: parameter {param} is a scalar ({dtype}), not a store",
                crate::text::inst_head(inst)
            )),
            Some(&Param::Store {
                dtype,
                rank,
                privilege,
            }) => Ok((dtype, rank, privilege)),
        }
    }

    /// Checks an access's indices; returns the store's element type and privilege.
    fn access(&self, inst: &Inst, access: &Access) -> Res<(DType, Privilege)> {
        let (dtype, rank, privilege) = self.store_param(inst, access.param)?;
        if access.indices.len() != rank as usize {
            return Err(format!(
                "in `{}`: {} indices for parameter {} of rank {rank}",
                crate::text::inst_head(inst),
                access.indices.len(),
                access.param
            ));
        }
        for &i in &access.indices {
            self.use_i64(inst, i, "index")?;
        }
        Ok((dtype, privilege))
    }

    fn block(&mut self, body: &[Inst], ctx: Ctx) -> Res<()> {
        for inst in body {
            self.inst(inst, ctx)?;
        }
        Ok(())
    }

    fn expect_results(inst: &Inst, n: usize) -> Res<()> {
        if inst.results.len() != n {
            return Err(format!(
                "in `{}`: {} results, expected {n}",
                crate::text::inst_head(inst),
                inst.results.len()
            ));
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst, ctx: Ctx) -> Res<()> {
        let head = || crate::text::inst_head(inst);
        let result: Option<DType> = match &inst.op {
            Op::Const(s) => Some(s.dtype()),
            Op::Param(p) => match self.kernel.params.get(*p as usize) {
                None => {
                    return Err(format!(
                        "in `{}`: parameter index {p} is out of range (the kernel has {} \
                         parameters)",
                        head(),
                        self.kernel.params.len()
                    ));
                }
                Some(Param::Store { .. }) => {
                    return Err(format!(
                        "in `{}`: parameter {p} is a store, not a scalar",
                        head()
                    ));
                }
                Some(Param::Scalar { dtype }) => Some(*dtype),
            },
            Op::Binary(op, a, b) => {
                let (ta, tb) = (self.use_(inst, *a)?, self.use_(inst, *b)?);
                if ta != tb {
                    return Err(format!(
                        "in `{}`: operand types differ: {a} is {ta}, {b} is {tb}",
                        head()
                    ));
                }
                let ok = match op {
                    BinaryOp::Pow | BinaryOp::Atan2 => ta.is_float(),
                    BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                        ta.is_int() || ta == DType::Bool
                    }
                    BinaryOp::Shl | BinaryOp::Shr => ta.is_int(),
                    _ if is_arith(*op) => ta != DType::Bool,
                    _ => true,
                };
                if !ok {
                    let need = match op {
                        BinaryOp::Pow | BinaryOp::Atan2 => "float",
                        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => "integer or bool",
                        BinaryOp::Shl | BinaryOp::Shr => "integer",
                        _ => "number (not bool)",
                    };
                    return Err(format!(
                        "in `{}`: `{}` needs {need} operands, got {ta}",
                        head(),
                        op.name()
                    ));
                }
                Some(ta)
            }
            Op::Unary(op, a) => {
                let t = self.use_(inst, *a)?;
                let (ok, need) = match op {
                    UnaryOp::Not => (t.is_int() || t == DType::Bool, "an integer or bool"),
                    UnaryOp::Neg | UnaryOp::Abs => (t != DType::Bool, "a number (not bool)"),
                    _ => (t.is_float(), "a float"),
                };
                if !ok {
                    return Err(format!(
                        "in `{}`: `{}` needs {need} operand, got {t}",
                        head(),
                        op.name()
                    ));
                }
                Some(t)
            }
            Op::Cmp(_, a, b) => {
                let (ta, tb) = (self.use_(inst, *a)?, self.use_(inst, *b)?);
                if ta != tb {
                    return Err(format!(
                        "in `{}`: compared types differ: {a} is {ta}, {b} is {tb}",
                        head()
                    ));
                }
                Some(DType::Bool)
            }
            Op::Select(c, a, b) => {
                let tc = self.use_(inst, *c)?;
                let (ta, tb) = (self.use_(inst, *a)?, self.use_(inst, *b)?);
                if tc != DType::Bool {
                    return Err(format!(
                        "in `{}`: select condition {c} has type {tc}, expected bool",
                        head()
                    ));
                }
                if ta != tb {
                    return Err(format!(
                        "in `{}`: select arms differ in type: {a} is {ta}, {b} is {tb}",
                        head()
                    ));
                }
                Some(ta)
            }
            Op::Fma(a, b, c) => {
                let t = self.use_(inst, *a)?;
                for v in [*b, *c] {
                    let tv = self.use_(inst, v)?;
                    if tv != t {
                        return Err(format!(
                            "in `{}`: fma operands differ in type: {a} is {t}, {v} is {tv}",
                            head()
                        ));
                    }
                }
                if !t.is_float() {
                    return Err(format!(
                        "in `{}`: fma needs float operands, got {t}",
                        head()
                    ));
                }
                Some(t)
            }
            Op::Cast(to, a) | Op::Bitcast(to, a) if to.is_unsigned() => {
                self.use_(inst, *a)?;
                return Err(format!(
                    "in `{}`: no value has type {to} (a storage type: its values are i64s)",
                    head()
                ));
            }
            Op::Cast(to, a) => {
                self.use_(inst, *a)?;
                Some(*to)
            }
            Op::Bitcast(to, a) => {
                let from = self.use_(inst, *a)?;
                if !bitcast_ok(from, *to) {
                    return Err(format!(
                        "in `{}`: cannot bitcast {from} to {to} (bitcast goes between f64 and \
                         i64, between f32 and i32, or from a type to itself)",
                        head()
                    ));
                }
                Some(*to)
            }
            Op::Load(access) => {
                let (dtype, privilege) = self.access(inst, access)?;
                if !privilege.can_read() {
                    return Err(format!(
                        "in `{}`: load through parameter {} which is not readable (privilege {})",
                        head(),
                        access.param,
                        crate::text::privilege_name(privilege)
                    ));
                }
                Some(dtype.value_type())
            }
            Op::Store(access, v) | Op::Reduce(access, _, v) => {
                let (dtype, privilege) = self.access(inst, access)?;
                let t = self.use_(inst, *v)?;
                if let Op::Reduce(_, op, _) = &inst.op {
                    if privilege != Privilege::Reduce(*op) {
                        return Err(format!(
                            "in `{}`: {} reduction through parameter {} whose privilege is {}",
                            head(),
                            op.name(),
                            access.param,
                            crate::text::privilege_name(privilege)
                        ));
                    }
                    if dtype == DType::Bool && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
                        return Err(format!(
                            "in `{}`: {} reduction of bools (use max or min)",
                            head(),
                            op.name()
                        ));
                    }
                } else if !privilege.can_write() {
                    let why = if privilege == Privilege::Read {
                        "read-only".to_string()
                    } else {
                        format!(
                            "not writable (privilege {})",
                            crate::text::privilege_name(privilege)
                        )
                    };
                    return Err(format!(
                        "in `{}`: store through parameter {} which is {why}",
                        head(),
                        access.param
                    ));
                }
                if t != dtype.value_type() {
                    return Err(format!(
                        "in `{}`: value {v} has type {t} but parameter {} holds {dtype}",
                        head(),
                        access.param
                    ));
                }
                if !ctx.in_parallel {
                    let what = if matches!(inst.op, Op::Store(..)) {
                        "store"
                    } else {
                        "reduction"
                    };
                    return Err(format!("in `{}`: {what} outside a parallel loop", head()));
                }
                None
            }
            Op::Extent { param, dim } | Op::Origin { param, dim } => {
                let (_, rank, _) = self.store_param(inst, *param)?;
                if *dim >= rank {
                    return Err(format!(
                        "in `{}`: dimension {dim} out of range for parameter {param} of rank {rank}",
                        head()
                    ));
                }
                Some(DType::I64)
            }
            Op::Parallel(p) => {
                if ctx.depth > 0 {
                    return Err(format!(
                        "in `{}`: parallel loop nested in another loop (parallel loops must be at \
                         the top level)",
                        head()
                    ));
                }
                let (_, rank, _) = self.store_param(inst, p.over)?;
                if p.indices.len() != rank as usize {
                    return Err(format!(
                        "in `{}`: {} loop indices over parameter {} of rank {rank}",
                        head(),
                        p.indices.len(),
                        p.over
                    ));
                }
                Self::expect_results(inst, 0)?;
                for &i in &p.indices {
                    self.define(i, DType::I64);
                }
                self.block(
                    &p.body,
                    Ctx {
                        depth: ctx.depth + 1,
                        in_parallel: true,
                    },
                )?;
                self.end(&p.indices);
                end_block(self, &p.body);
                return Ok(());
            }
            Op::For(l) => {
                self.use_i64(inst, l.lo, "lower bound")?;
                self.use_i64(inst, l.hi, "upper bound")?;
                let mut init = Vec::with_capacity(l.init.len());
                for &v in &l.init {
                    init.push(self.use_(inst, v)?);
                }
                let n = l.init.len();
                if l.carried.len() != n {
                    return Err(format!(
                        "in `{}`: {} carried values for {n} initial values",
                        head(),
                        l.carried.len()
                    ));
                }
                if l.yields.len() != n {
                    return Err(format!(
                        "in `{}`: the body yields {} values for {n} carried values",
                        head(),
                        l.yields.len()
                    ));
                }
                Self::expect_results(inst, n)?;
                self.define(l.induction, DType::I64);
                for (&v, &t) in l.carried.iter().zip(&init) {
                    self.define(v, t);
                }
                self.block(
                    &l.body,
                    Ctx {
                        depth: ctx.depth + 1,
                        in_parallel: ctx.in_parallel,
                    },
                )?;
                for (&y, &t) in l.yields.iter().zip(&init) {
                    let ty = self.use_(inst, y)?;
                    if ty != t {
                        return Err(format!(
                            "in `{}`: yielded value {y} has type {ty} but the carried value has \
                             type {t}",
                            head()
                        ));
                    }
                }
                self.end(&[l.induction]);
                self.end(&l.carried);
                end_block(self, &l.body);
                for (&r, &t) in inst.results.iter().zip(&init) {
                    self.define(r, t);
                }
                return Ok(());
            }
        };
        let n = usize::from(result.is_some());
        Self::expect_results(inst, n)?;
        if let (Some(t), Some(&r)) = (result, inst.results.first()) {
            self.define(r, t);
        }
        Ok(())
    }
}

/// Ends the scope of the values defined directly in `body` (nested blocks ended themselves).
fn end_block(c: &mut Checker<'_>, body: &[Inst]) {
    for inst in body {
        c.end(&inst.results);
    }
}
