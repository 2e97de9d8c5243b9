//! A reference interpreter: runs a kernel for one point task, slowly and simply, on buffers of
//! [`Scalar`]s.
//!
//! It is the yardstick for differential tests of the passes (a pass must not change what a
//! kernel computes) and documents the IR's semantics in executable form: integer arithmetic
//! wraps, division and remainder by zero give 0, float-to-integer casts saturate (NaN gives 0),
//! shifts take their amount modulo the bit width and `shr` is logical, float `min` and `max`
//! give NaN when either operand is NaN, and reductions fold into the existing contents.
//! Parallel loops run their points one after another in row-major order; their reductions into
//! 0-d stores, and into the elements of their element trees
//! ([`crate::reduction::element_trees`]), combine the points' contributions in the canonical
//! order ([`crate::reduction`]) and fold into the store when the run ends ([`run_deferring`] hands them back instead). The math functions
//! use Rust's `std` (for `erf`, [`erf`]; for `asinh`, `acosh` and `atanh`, the `libm` crate's,
//! which keep their digits near 1 where `std`'s formulas do not); they are a reference, not bit-for-bit what every
//! back end computes.
//!
//! Stores are [`View`]s of [`Storage`]s, so that two parameters may share elements, as two
//! views of one root storage do. Every access is checked against its view's extent, and a
//! kernel stops with an [`InterpError`] after [`DEFAULT_STEP_LIMIT`] steps (or the limit given
//! to [`run_with_limit`]), so no kernel can make the interpreter loop for ever or
//! touch memory outside its buffers.
//!
//! ```
//! use weft_ir::interp::{Arg, Storage, View, run};
//! use weft_ir::{DType, Scalar, text};
//!
//! let k = text::parse(
//!     "kernel @axpy(%a: f64, %x: store<f64, 1, read>, %y: store<f64, 1, readwrite>) {
//!        %0 = param %a
//!        parallel %y (%i) { %1 = load %x[%i]  %2 = load %y[%i]  %3 = mul %0, %1
//!                           %4 = add %3, %2  store %y[%i], %4 }
//!      }",
//! )
//! .unwrap();
//! let mut storages = vec![
//!     Storage::from_f64(DType::F64, &[1.0, 2.0, 3.0]),
//!     Storage::from_f64(DType::F64, &[10.0, 20.0, 30.0]),
//! ];
//! let args = [
//!     Arg::Scalar(Scalar::F64(2.0)),
//!     Arg::Store(View::dense(0, &[3])),
//!     Arg::Store(View::dense(1, &[3])),
//! ];
//! run(&k, &args, &mut storages).unwrap();
//! assert_eq!(storages[1].to_f64(), vec![12.0, 24.0, 36.0]);
//! ```

use std::collections::BTreeMap;

use crate::reduction::{LoopPartial, Partial, exact_identity};
use crate::{
    BinaryOp, CmpOp, DType, Inst, Kernel, Op, Param, ReduceOp, Scalar, UnaryOp, ValueId, validate,
};

/// The most steps (instructions run, plus loop iterations) [`run`] takes before it gives up.
pub const DEFAULT_STEP_LIMIT: u64 = 50_000_000;

/// A flat buffer of elements of one type: the root storage that [`View`]s look into.
#[derive(Clone, Debug, PartialEq)]
pub struct Storage {
    /// The element type.
    pub dtype: DType,
    /// The elements; each has type `dtype` (an unsigned storage type's elements are the
    /// `i64` values loading them gives: zero-extended, or the same bits for `u64`).
    pub data: Vec<Scalar>,
}

impl Storage {
    /// `len` elements of `dtype`, all zero (false).
    pub fn zeros(dtype: DType, len: usize) -> Storage {
        Storage {
            dtype,
            data: vec![Scalar::from_bits(dtype, 0); len],
        }
    }

    /// The elements `values`, converted to `dtype` as `cast` converts an `f64` (for an
    /// unsigned storage type: to `i64`, then the low bits of its width, as a store keeps them).
    pub fn from_f64(dtype: DType, values: &[f64]) -> Storage {
        let element = |v: f64| match cast(dtype.value_type(), Scalar::F64(v)) {
            s if dtype.is_unsigned() => Scalar::from_bits(dtype, s.to_bits()),
            s => s,
        };
        Storage {
            dtype,
            data: values.iter().map(|&v| element(v)).collect(),
        }
    }

    /// The elements converted to `f64`.
    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|s| s.as_f64()).collect()
    }
}

/// A store argument: a strided window into one [`Storage`].
///
/// Element `idx` (one index per dimension, `0 <= idx[d] < extents[d]`) is
/// `storage.data[offset + sum(idx[d] * strides[d])]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The index of the storage in the slice given to [`run`].
    pub storage: usize,
    /// Where element `[0, ..., 0]` is in the storage.
    pub offset: i64,
    /// The step in the storage per unit of each index.
    pub strides: Vec<i64>,
    /// The sub-store's extent along each dimension.
    pub extents: Vec<i64>,
    /// What `origin` gives along each dimension.
    pub origin: Vec<i64>,
}

impl View {
    /// The whole of a row-major storage of shape `extents`, with origin 0.
    pub fn dense(storage: usize, extents: &[i64]) -> View {
        View::window(storage, extents, &vec![0; extents.len()], extents)
    }

    /// The box `start .. start + extents` of a row-major storage of shape `shape`, with
    /// origin `start`.
    pub fn window(storage: usize, shape: &[i64], start: &[i64], extents: &[i64]) -> View {
        let mut strides = vec![0; shape.len()];
        let mut step = 1i64;
        for d in (0..shape.len()).rev() {
            strides[d] = step;
            step = step.saturating_mul(shape[d].max(0));
        }
        let offset = start
            .iter()
            .zip(&strides)
            .map(|(s, t)| s.saturating_mul(*t))
            .fold(0i64, i64::saturating_add);
        View {
            storage,
            offset,
            strides,
            extents: extents.to_vec(),
            origin: start.to_vec(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> i64 {
        self.extents
            .iter()
            .fold(1i64, |a, &e| a.saturating_mul(e.max(0)))
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The storage position of element `idx`, if `idx` is inside the view.
    pub fn address(&self, idx: &[i64]) -> Option<usize> {
        if idx.len() != self.extents.len() || idx.len() != self.strides.len() {
            return None;
        }
        let mut at = self.offset;
        for ((&i, &e), &s) in idx.iter().zip(&self.extents).zip(&self.strides) {
            if i < 0 || i >= e {
                return None;
            }
            at = at.checked_add(i.checked_mul(s)?)?;
        }
        usize::try_from(at).ok()
    }
}

/// An argument of a kernel: a store (a view) or a scalar.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A store parameter's sub-store.
    Store(View),
    /// A scalar parameter's value.
    Scalar(Scalar),
}

/// Why [`run`] stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}`: {message}")]
pub struct InterpError {
    /// The kernel's name.
    pub kernel: String,
    /// What went wrong.
    pub message: String,
    /// Where the run stopped on an index out of bounds: which index, of which store, on
    /// which axis (for errors worded as NumPy words them).
    pub out_of_bounds: Option<OutOfBounds>,
}

/// An access whose index lies outside its store's view: `index` on `axis`, whose extent is
/// `size`, of store parameter `param`. Displays as NumPy words an `IndexError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBounds {
    /// The parameter (its position in `Kernel::params`).
    pub param: u32,
    /// The dimension of the parameter's view the index is out of.
    pub axis: usize,
    /// The index.
    pub index: i64,
    /// The view's extent on `axis`.
    pub size: i64,
}

impl std::fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "index {} is out of bounds for axis {} with size {}",
            self.index, self.axis, self.size
        )
    }
}

/// Runs `kernel` on `args` (one per parameter), whose views look into `storages`, with the
/// default step limit.
///
/// # Errors
/// The kernel is invalid, the arguments do not fit its parameters (kind, element type, rank, a
/// view reaching outside its storage), an access is out of bounds, or the kernel runs more than
/// [`DEFAULT_STEP_LIMIT`] steps. The storages may be partly updated then.
pub fn run(kernel: &Kernel, args: &[Arg], storages: &mut [Storage]) -> Result<(), InterpError> {
    run_with_limit(kernel, args, storages, DEFAULT_STEP_LIMIT)
}

/// [`run`] with a limit of `max_steps` steps (instructions run, plus loop iterations).
///
/// # Errors
/// As for [`run`].
pub fn run_with_limit(
    kernel: &Kernel,
    args: &[Arg],
    storages: &mut [Storage],
    max_steps: u64,
) -> Result<(), InterpError> {
    let err = |message: String| InterpError {
        kernel: kernel.name.clone(),
        message,
        out_of_bounds: None,
    };
    let pending = run_deferring_with_limit(kernel, args, storages, max_steps)?;
    for p in pending {
        fold_loop_partial(kernel, args, storages, p).map_err(err)?;
    }
    Ok(())
}

/// [`run`], except that the reductions of parallel loops into 0-d stores are not folded into
/// their stores: each loop's canonical partial result over this run's points is returned, for
/// the caller to merge with other point tasks' and fold once (see
/// [`crate::reduction::LoopPartial`]).
///
/// # Errors
/// As for [`run`].
pub fn run_deferring(
    kernel: &Kernel,
    args: &[Arg],
    storages: &mut [Storage],
) -> Result<Vec<LoopPartial>, InterpError> {
    run_deferring_with_limit(kernel, args, storages, DEFAULT_STEP_LIMIT)
}

fn run_deferring_with_limit(
    kernel: &Kernel,
    args: &[Arg],
    storages: &mut [Storage],
    max_steps: u64,
) -> Result<Vec<LoopPartial>, InterpError> {
    let err = |message: String| InterpError {
        kernel: kernel.name.clone(),
        message,
        out_of_bounds: None,
    };
    validate(kernel).map_err(|e| err(format!("invalid kernel: {}", e.message)))?;
    check_args(kernel, args, storages).map_err(err)?;
    let mut m = Machine {
        params: &kernel.params,
        args,
        storages,
        env: vec![None; kernel.value_bound() as usize],
        steps: 0,
        max_steps,
        point: None,
        trees: Vec::new(),
        loops: 0,
        pending: Vec::new(),
        out_of_bounds: None,
    };
    if let Err(message) = m.block(&kernel.body) {
        return Err(InterpError {
            kernel: kernel.name.clone(),
            message,
            out_of_bounds: m.out_of_bounds,
        });
    }
    Ok(m.pending)
}

/// Folds a loop's finished partial into its 0-d store: `old op result`.
fn fold_loop_partial(
    kernel: &Kernel,
    args: &[Arg],
    storages: &mut [Storage],
    mut p: LoopPartial,
) -> Result<(), String> {
    let Some(result) = p.partial.finish().map_err(|e| e.to_string())? else {
        return Ok(());
    };
    let Some(Arg::Store(view)) = args.get(p.param as usize) else {
        return Err(format!("parameter {} is not a store", p.param));
    };
    let element = p
        .element
        .iter()
        .zip(&view.origin)
        .map(|(&e, &o)| i64::try_from(e).map_or(i64::MAX, |e| e - o))
        .collect::<Vec<i64>>();
    let at = view.address(&element).ok_or_else(|| {
        format!(
            "parameter {}: element {:?} of a reduction lies outside the store",
            p.param, p.element
        )
    })?;
    let slot = storages
        .get_mut(view.storage)
        .and_then(|s| s.data.get_mut(at))
        .ok_or_else(|| format!("parameter {}: element outside its storage", p.param))?;
    *slot = reduce(p.partial.op(), *slot, result).ok_or_else(|| {
        format!(
            "kernel `{}`: cannot fold the reduction into parameter {}",
            kernel.name, p.param
        )
    })?;
    Ok(())
}

fn check_args(kernel: &Kernel, args: &[Arg], storages: &[Storage]) -> Result<(), String> {
    if args.len() != kernel.params.len() {
        return Err(format!(
            "{} arguments for {} parameters",
            args.len(),
            kernel.params.len()
        ));
    }
    for (i, (p, a)) in kernel.params.iter().zip(args).enumerate() {
        match (p, a) {
            (Param::Scalar { dtype }, Arg::Scalar(s)) if s.dtype() == *dtype => {}
            (Param::Store { dtype, rank, .. }, Arg::Store(v)) => {
                let r = *rank as usize;
                if v.extents.len() != r || v.strides.len() != r || v.origin.len() != r {
                    return Err(format!(
                        "argument {i}: view of rank {} for rank {r}",
                        v.extents.len()
                    ));
                }
                let Some(s) = storages.get(v.storage) else {
                    return Err(format!("argument {i}: no storage {}", v.storage));
                };
                if s.dtype != *dtype {
                    return Err(format!("argument {i}: storage of {} for {dtype}", s.dtype));
                }
                if v.extents.iter().any(|&e| e < 0) {
                    return Err(format!("argument {i}: negative extent"));
                }
                if !v.is_empty() {
                    let (mut lo, mut hi) = (v.offset, v.offset);
                    for (&e, &st) in v.extents.iter().zip(&v.strides) {
                        let span = (e - 1).checked_mul(st).ok_or("view too large")?;
                        lo = lo.checked_add(span.min(0)).ok_or("view too large")?;
                        hi = hi.checked_add(span.max(0)).ok_or("view too large")?;
                    }
                    if lo < 0 || hi >= s.data.len() as i64 {
                        return Err(format!("argument {i}: view reaches outside its storage"));
                    }
                }
            }
            _ => return Err(format!("argument {i} does not match parameter {i}")),
        }
    }
    Ok(())
}

/// A reduced element: its parameter, and its coordinates in the parameter's view (none for a
/// 0-d store).
type ElementKey = (u32, Vec<u64>);

struct Machine<'a> {
    /// The kernel's parameters.
    params: &'a [Param],
    args: &'a [Arg],
    storages: &'a mut [Storage],
    env: Vec<Option<Scalar>>,
    steps: u64,
    max_steps: u64,
    /// Inside a parallel loop: the current point's contribution to each element it reduces
    /// into by a canonical tree (a 0-d store's, and the elements of the loop's element trees,
    /// [`crate::reduction::element_trees`]), keyed by parameter and element, its reductions
    /// folded in execution order.
    point: Option<BTreeMap<ElementKey, (ReduceOp, Scalar)>>,
    /// The current parallel loop's element-tree parameters.
    trees: Vec<u32>,
    /// Top-level parallel loops run so far.
    loops: u32,
    /// The canonical partials of the loops run so far.
    pending: Vec<LoopPartial>,
    /// The access out of bounds that stopped the run, if one did.
    out_of_bounds: Option<OutOfBounds>,
}

type Res<T> = Result<T, String>;

impl Machine<'_> {
    fn get(&self, v: ValueId) -> Res<Scalar> {
        self.env
            .get(v.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| format!("{v} has no value"))
    }

    fn set(&mut self, v: ValueId, s: Scalar) {
        if let Some(slot) = self.env.get_mut(v.0 as usize) {
            *slot = Some(s);
        }
    }

    fn view(&self, param: u32) -> Res<&View> {
        match self.args.get(param as usize) {
            Some(Arg::Store(v)) => Ok(v),
            _ => Err(format!("parameter {param} is not a store")),
        }
    }

    fn i64_of(&self, v: ValueId) -> Res<i64> {
        match self.get(v)? {
            Scalar::I64(i) => Ok(i),
            s => Err(format!("{v} is {}, not i64", s.dtype())),
        }
    }

    /// The storage and position of `param[indices]`.
    fn element(&mut self, param: u32, indices: &[ValueId]) -> Res<(usize, usize)> {
        let view = self.view(param)?;
        let idx = indices
            .iter()
            .map(|&v| self.i64_of(v))
            .collect::<Res<Vec<i64>>>()?;
        let Some(at) = view.address(&idx) else {
            let extents = view.extents.clone();
            let outside = idx
                .iter()
                .zip(&extents)
                .position(|(&i, &e)| i < 0 || i >= e);
            if let Some(axis) = outside {
                let found = OutOfBounds {
                    param,
                    axis,
                    index: idx[axis],
                    size: extents[axis],
                };
                self.out_of_bounds = Some(found);
                return Err(format!(
                    "{found} (parameter {param}, element {idx:?} of extents {extents:?})"
                ));
            }
            return Err(format!(
                "index {idx:?} out of bounds for parameter {param} of extents {extents:?}"
            ));
        };
        match self.storages.get(view.storage) {
            Some(s) if at < s.data.len() => Ok((view.storage, at)),
            _ => Err(format!("parameter {param}: element outside its storage")),
        }
    }

    fn block(&mut self, body: &[Inst]) -> Res<()> {
        for inst in body {
            self.inst(inst)?;
        }
        Ok(())
    }

    /// Counts one step against the limit.
    fn tick(&mut self) -> Res<()> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(format!("more than {} steps run", self.max_steps));
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst) -> Res<()> {
        self.tick()?;
        let bad = || format!("cannot evaluate `{}`", crate::text::inst_head(inst));
        let value = match &inst.op {
            Op::Const(s) => *s,
            Op::Param(p) => match self.args.get(*p as usize) {
                Some(Arg::Scalar(s)) => *s,
                _ => return Err(bad()),
            },
            Op::Binary(op, a, b) => binary(*op, self.get(*a)?, self.get(*b)?).ok_or_else(bad)?,
            Op::Unary(op, a) => unary(*op, self.get(*a)?).ok_or_else(bad)?,
            Op::Cmp(op, a, b) => {
                Scalar::Bool(compare(*op, self.get(*a)?, self.get(*b)?).ok_or_else(bad)?)
            }
            Op::Select(c, a, b) => match self.get(*c)? {
                Scalar::Bool(true) => self.get(*a)?,
                Scalar::Bool(false) => self.get(*b)?,
                _ => return Err(bad()),
            },
            Op::Fma(a, b, c) => match (self.get(*a)?, self.get(*b)?, self.get(*c)?) {
                (Scalar::F64(x), Scalar::F64(y), Scalar::F64(z)) => Scalar::F64(x.mul_add(y, z)),
                (Scalar::F32(x), Scalar::F32(y), Scalar::F32(z)) => Scalar::F32(x.mul_add(y, z)),
                _ => return Err(bad()),
            },
            Op::Cast(t, a) => cast(*t, self.get(*a)?),
            Op::Bitcast(t, a) => bitcast(*t, self.get(*a)?).ok_or_else(bad)?,
            Op::Load(a) => {
                let (s, at) = self.element(a.param, &a.indices)?;
                self.storages[s].data[at]
            }
            Op::Store(a, v) => {
                let (s, at) = self.element(a.param, &a.indices)?;
                let value = self.get(*v)?;
                let storage = &mut self.storages[s];
                // An unsigned storage type keeps the low bits of its width.
                storage.data[at] = if storage.dtype.is_unsigned() {
                    Scalar::from_bits(storage.dtype, value.to_bits())
                } else {
                    value
                };
                return Ok(());
            }
            Op::Reduce(a, op, v)
                if self.point.is_some()
                    && (a.indices.is_empty() || self.trees.contains(&a.param)) =>
            {
                // Checked against the store's extents as any access is.
                self.element(a.param, &a.indices)?;
                let origin = self.view(a.param)?.origin.clone();
                let element = a
                    .indices
                    .iter()
                    .zip(&origin)
                    .map(|(&i, &o)| u64::try_from(self.i64_of(i)? + o).map_err(|_| bad()))
                    .collect::<Res<Vec<u64>>>()?;
                let v = self.get(*v)?;
                let contrib = self.point.as_mut().ok_or_else(bad)?;
                let key = (a.param, element);
                let now = match contrib.get(&key) {
                    Some(&(_, c)) => reduce(*op, c, v).ok_or_else(bad)?,
                    None => reduce(*op, exact_identity(*op, v.dtype()), v).ok_or_else(bad)?,
                };
                contrib.insert(key, (*op, now));
                return Ok(());
            }
            Op::Reduce(a, op, v) => {
                let (s, at) = self.element(a.param, &a.indices)?;
                let old = self.storages[s].data[at];
                self.storages[s].data[at] = reduce(*op, old, self.get(*v)?).ok_or_else(bad)?;
                return Ok(());
            }
            Op::Extent { param, dim } => Scalar::I64(
                *self
                    .view(*param)?
                    .extents
                    .get(*dim as usize)
                    .ok_or_else(bad)?,
            ),
            Op::Origin { param, dim } => Scalar::I64(
                *self
                    .view(*param)?
                    .origin
                    .get(*dim as usize)
                    .ok_or_else(bad)?,
            ),
            Op::Parallel(p) => {
                let ordinal = self.loops;
                self.loops += 1;
                let (extents, origin) = {
                    let view = self.view(p.over)?;
                    (view.extents.clone(), view.origin.clone())
                };
                if extents.iter().any(|&e| e <= 0) {
                    return Ok(());
                }
                let mut partials: BTreeMap<ElementKey, Partial> = BTreeMap::new();
                self.trees = crate::reduction::element_trees(self.params, p);
                let mut point = vec![0i64; extents.len()];
                let mut coords = vec![0u64; extents.len()];
                loop {
                    self.tick()?;
                    for (&v, &i) in p.indices.iter().zip(&point) {
                        self.set(v, Scalar::I64(i));
                    }
                    self.point = Some(BTreeMap::new());
                    let ran = self.block(&p.body);
                    let contrib = self.point.take().unwrap_or_default();
                    ran?;
                    // The point's contributions, at its coordinates in the task's view.
                    for ((c, &o), &i) in coords.iter_mut().zip(&origin).zip(&point) {
                        *c = u64::try_from(o + i)
                            .map_err(|_| format!("point {point:?} lies before its view"))?;
                    }
                    for (key, (op, value)) in contrib {
                        let tree = !key.1.is_empty();
                        partials
                            .entry(key)
                            .or_insert_with(|| {
                                if tree {
                                    Partial::unbounded_blocked(
                                        op,
                                        value.dtype(),
                                        crate::reduction::ELEMENT_BLOCK_LEVEL,
                                    )
                                } else {
                                    Partial::unbounded(op, value.dtype(), coords.len())
                                }
                            })
                            .add(&coords, value)
                            .map_err(|e| e.to_string())?;
                    }
                    // Next point in row-major order.
                    let mut d = point.len();
                    let done = loop {
                        if d == 0 {
                            break true;
                        }
                        d -= 1;
                        point[d] += 1;
                        if point[d] < extents[d] {
                            break false;
                        }
                        point[d] = 0;
                    };
                    if done {
                        break;
                    }
                }
                self.trees.clear();
                self.pending
                    .extend(
                        partials
                            .into_iter()
                            .map(|((param, element), partial)| LoopPartial {
                                loop_index: ordinal,
                                param,
                                element,
                                partial,
                            }),
                    );
                return Ok(());
            }
            Op::For(l) => {
                let (lo, hi) = (self.i64_of(l.lo)?, self.i64_of(l.hi)?);
                let mut carried = l
                    .init
                    .iter()
                    .map(|&v| self.get(v))
                    .collect::<Res<Vec<Scalar>>>()?;
                let mut i = lo;
                while i < hi {
                    // Every iteration counts, so that an empty body cannot loop for ever.
                    self.tick()?;
                    self.set(l.induction, Scalar::I64(i));
                    for (&c, &v) in l.carried.iter().zip(&carried) {
                        self.set(c, v);
                    }
                    self.block(&l.body)?;
                    carried = l
                        .yields
                        .iter()
                        .map(|&v| self.get(v))
                        .collect::<Res<Vec<Scalar>>>()?;
                    i += 1;
                }
                for (&r, &v) in inst.results.iter().zip(&carried) {
                    self.set(r, v);
                }
                return Ok(());
            }
        };
        if let Some(&r) = inst.results.first() {
            self.set(r, value);
        }
        Ok(())
    }
}

fn float_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

fn float_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// `a op b` with the IR's semantics, or `None` if the operand types differ or the operator
/// does not take them.
pub fn binary(op: BinaryOp, a: Scalar, b: Scalar) -> Option<Scalar> {
    use BinaryOp::*;
    use Scalar as S;
    // `op` on two integers `x` and `y` (their unsigned type `$u`): arithmetic wraps, division
    // and remainder by zero give 0, shift amounts are taken modulo the width and `shr` is
    // logical.
    macro_rules! int_binary {
        ($x:ident, $y:ident, $u:ty) => {
            match op {
                Add => $x.wrapping_add($y),
                Sub => $x.wrapping_sub($y),
                Mul => $x.wrapping_mul($y),
                Div | Rem if $y == 0 => 0,
                Div => $x.wrapping_div($y),
                Rem => $x.wrapping_rem($y),
                Min => $x.min($y),
                Max => $x.max($y),
                And => $x & $y,
                Or => $x | $y,
                Xor => $x ^ $y,
                Shl => $x.wrapping_shl($y as u32),
                Shr => ($x as $u).wrapping_shr($y as u32) as _,
                Pow | Atan2 => return None,
            }
        };
    }
    Some(match (a, b) {
        (S::F64(x), S::F64(y)) => S::F64(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Rem => x % y,
            Min => float_min(x, y),
            Max => float_max(x, y),
            Pow => x.powf(y),
            Atan2 => x.atan2(y),
            _ => return None,
        }),
        (S::F32(x), S::F32(y)) => S::F32(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Rem => x % y,
            Min => float_min(f64::from(x), f64::from(y)) as f32,
            Max => float_max(f64::from(x), f64::from(y)) as f32,
            Pow => x.powf(y),
            Atan2 => x.atan2(y),
            _ => return None,
        }),
        (S::I64(x), S::I64(y)) => S::I64(int_binary!(x, y, u64)),
        (S::I32(x), S::I32(y)) => S::I32(int_binary!(x, y, u32)),
        (S::Bool(x), S::Bool(y)) => S::Bool(match op {
            Min | And => x & y,
            Max | Or => x | y,
            Xor => x ^ y,
            _ => return None,
        }),
        _ => return None,
    })
}

/// `acosh(x)`: `libm`'s, which gives NaN below 1 only for some arguments.
pub fn acosh(x: f64) -> f64 {
    if x >= 1.0 { libm::acosh(x) } else { f64::NAN }
}

/// `op a` with the IR's semantics, or `None` if the operator does not take `a`'s type.
pub fn unary(op: UnaryOp, a: Scalar) -> Option<Scalar> {
    use Scalar as S;
    use UnaryOp::*;
    let f = |x: f64| -> Option<f64> {
        Some(match op {
            Neg => -x,
            Abs => x.abs(),
            Sqrt => x.sqrt(),
            Exp => x.exp(),
            Log => x.ln(),
            Sin => x.sin(),
            Cos => x.cos(),
            Tanh => x.tanh(),
            Erf => erf(x),
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Asinh => libm::asinh(x),
            Acosh => acosh(x),
            Atanh => libm::atanh(x),
            Floor => x.floor(),
            Ceil => x.ceil(),
            Not => return None,
        })
    };
    Some(match a {
        S::F64(x) => S::F64(f(x)?),
        S::F32(x) => S::F32(match op {
            Neg => -x,
            Abs => x.abs(),
            Sqrt => x.sqrt(),
            Exp => x.exp(),
            Log => x.ln(),
            Sin => x.sin(),
            Cos => x.cos(),
            Tanh => x.tanh(),
            Erf => erf(f64::from(x)) as f32,
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Asinh => libm::asinh(f64::from(x)) as f32,
            Acosh => acosh(f64::from(x)) as f32,
            Atanh => libm::atanh(f64::from(x)) as f32,
            Floor => x.floor(),
            Ceil => x.ceil(),
            Not => return None,
        }),
        S::I64(x) => S::I64(match op {
            Neg => x.wrapping_neg(),
            Abs => x.wrapping_abs(),
            Not => !x,
            _ => return None,
        }),
        S::I32(x) => S::I32(match op {
            Neg => x.wrapping_neg(),
            Abs => x.wrapping_abs(),
            Not => !x,
            _ => return None,
        }),
        S::Bool(x) => match op {
            Not => S::Bool(!x),
            _ => return None,
        },
    })
}

/// `a op b` for a comparison, or `None` if the operand types differ. Float comparisons follow
/// IEEE 754: every comparison with NaN is false except `ne`.
pub fn compare(op: CmpOp, a: Scalar, b: Scalar) -> Option<bool> {
    use Scalar as S;
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (S::F64(x), S::F64(y)) => x.partial_cmp(&y),
        (S::F32(x), S::F32(y)) => x.partial_cmp(&y),
        (S::I64(x), S::I64(y)) => Some(x.cmp(&y)),
        (S::I32(x), S::I32(y)) => Some(x.cmp(&y)),
        (S::Bool(x), S::Bool(y)) => Some(x.cmp(&y)),
        _ => return None,
    };
    Some(match (op, ord) {
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
        (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
    })
}

/// `a` converted to `to`: floats to integers truncate toward zero and saturate (NaN gives 0),
/// wider integers to narrower wrap, bools give 0 or 1, and anything to bool compares with zero.
pub fn cast(to: DType, a: Scalar) -> Scalar {
    use Scalar as S;
    if to == DType::Bool {
        return S::Bool(match a {
            S::F64(x) => x != 0.0,
            S::F32(x) => x != 0.0,
            S::I64(x) => x != 0,
            S::I32(x) => x != 0,
            S::Bool(x) => x,
        });
    }
    let a = match a {
        S::Bool(x) => S::I64(i64::from(x)),
        other => other,
    };
    match (to, a) {
        (DType::F64, S::F64(x)) => S::F64(x),
        (DType::F64, S::F32(x)) => S::F64(f64::from(x)),
        (DType::F64, S::I64(x)) => S::F64(x as f64),
        (DType::F64, S::I32(x)) => S::F64(f64::from(x)),
        (DType::F32, S::F64(x)) => S::F32(x as f32),
        (DType::F32, S::F32(x)) => S::F32(x),
        (DType::F32, S::I64(x)) => S::F32(x as f32),
        (DType::F32, S::I32(x)) => S::F32(x as f32),
        (DType::I64, S::F64(x)) => S::I64(x as i64),
        (DType::I64, S::F32(x)) => S::I64(x as i64),
        (DType::I64, S::I64(x)) => S::I64(x),
        (DType::I64, S::I32(x)) => S::I64(i64::from(x)),
        (DType::I32, S::F64(x)) => S::I32(x as i32),
        (DType::I32, S::F32(x)) => S::I32(x as i32),
        (DType::I32, S::I64(x)) => S::I32(x as i32),
        (DType::I32, S::I32(x)) => S::I32(x),
        // Bools were turned into integers above, and `to` is not bool here.
        (_, other) => other,
    }
}

/// `a`'s bits read as `to`, or `None` if the sizes differ (see [`crate::Op::Bitcast`]).
pub fn bitcast(to: DType, a: Scalar) -> Option<Scalar> {
    crate::validate::bitcast_ok(a.dtype(), to).then(|| Scalar::from_bits(to, a.to_bits()))
}

/// `acc op v` for a reduction, or `None` if the types differ or the operator does not take
/// them.
pub fn reduce(op: ReduceOp, acc: Scalar, v: Scalar) -> Option<Scalar> {
    let b = match op {
        ReduceOp::Sum => BinaryOp::Add,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::Min => BinaryOp::Min,
        ReduceOp::Max => BinaryOp::Max,
    };
    binary(b, acc, v)
}

/// The error function, from its everywhere-convergent series of positive terms (Abramowitz and
/// Stegun 7.1.6): `erf(x) = 2/sqrt(pi) exp(-x^2) sum_k 2^k x^(2k+1) / (1 3 ... (2k+1))`,
/// good to a few ulps for `|x| < 6`; beyond, `erf(x)` rounds to `±1`.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x.abs() >= 6.0 {
        return x.signum();
    }
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    let mut k = 0.0f64;
    loop {
        k += 1.0;
        term *= 2.0 * x2 / (2.0 * k + 1.0);
        sum += term;
        if term.abs() <= sum.abs() * 1e-17 {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x2).exp() * sum
}
