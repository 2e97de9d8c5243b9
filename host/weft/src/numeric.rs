//! A typed, NumPy-like facade over the numeric plugin: [`Numeric`] and [`Array`].
//!
//! ```no_run
//! # use weft::{Config, Numeric, Runtime};
//! # use weft_ir::DType;
//! # fn demo(numeric_component: &[u8]) -> weft::Result<f64> {
//! // `numeric_component`: the plugin's bytes, e.g. `weft_plugin_artifacts::NUMERIC`.
//! let np = Numeric::new(Runtime::new(Config::from_env())?, numeric_component)?;
//! let x = np.linspace(0.0, 1.0, 1000, DType::F64);
//! let y = (&x * &x + 1.0).sqrt();
//! let total = y.sum().item()?;
//! # Ok(total)
//! # }
//! ```
//!
//! Operators return an [`Array`] directly. An operation that fails (mismatched shapes, a
//! dtype the operation does not take) returns a *poisoned* array that carries the error; every
//! operation on it passes the error on, and the first read ([`Array::to_vec`], [`Array::item`],
//! [`Array::check`]) returns it. The `try_` methods return the error at once.

use std::cell::RefCell;
use std::rc::Rc;

use wasmtime::component::Resource;
use weft_ir::DType;

mod app_kernel;
mod basic_index;
mod bidiagonal;
mod bitwise;
mod complex;
mod complex_linalg;
mod compressed;
mod counting;
pub use complex::{Complex, ComplexArray, ComplexOperand};
mod grids;
mod host_data;
pub use grids::Indexing;
pub use host_data::Element;
mod interop;
mod joining;
mod linalg;
mod lu;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod products;
mod random;
mod repeat;
mod replayed;
mod search;
mod shape_ops;
mod sorting;
mod statistics;
mod svd;
mod tiling;
mod triangular;
mod trigonometry;
mod unsigned;

use crate::runtime::Runtime;
use crate::typed_exports::TypedExports;
use crate::{Error, Result};
use weft_plugin::bindings::base::weft::plugin::types as wit;
use weft_plugin::bindings::numeric::exports::weft::plugin::numeric::{
    self as api, Guest, GuestIndices,
};
use weft_plugin::convert;
use weft_plugin::imports::{PluginState, StoreRes};
use weft_runtime::StoreHandle;

pub use api::{BinaryOp, Reduction, UnaryOp};
pub use linalg::NormOrd;
pub use repeat::RepeatStats;
use replayed::CallKey;
pub use replayed::ReplayStats;

/// The numeric plugin, loaded in a runtime of its own or shared with other plugins.
#[derive(Clone)]
pub struct Numeric {
    inner: Rc<Inner>,
}

struct Inner {
    rt: RefCell<Runtime>,
    exports: TypedExports<GuestIndices>,
    /// Each call site's text (`file:line:column`), made once per site: formatting it on
    /// every call was a few percent of a tiny operation's cost.
    sites: RefCell<weft_runtime::FastMap<usize, std::sync::Arc<str>>>,
    /// Recorded calls, replayed without entering the plugin.
    memo: RefCell<replayed::CallMemo>,
    /// The positions of the last mask compressed through (see `search::MaskPositions`).
    mask_positions: RefCell<Option<search::MaskPositions>>,
    /// The copy of the last mask a deferred compression was asked through.
    mask_snapshot: RefCell<Option<compressed::MaskSnapshot>>,
}

/// One operand of an element-wise operation.
#[derive(Clone, Debug)]
pub enum Operand<'a> {
    /// An array.
    Array(&'a Array),
    /// A float scalar (NumPy's Python `float`: it takes a float array's type, and makes an
    /// integer array's result `f64`).
    Scalar(f64),
    /// An integer scalar (NumPy's Python `int`: it takes the array's type).
    Int(i64),
}

impl From<i64> for Operand<'_> {
    fn from(v: i64) -> Self {
        Operand::Int(v)
    }
}

impl From<i32> for Operand<'_> {
    fn from(v: i32) -> Self {
        Operand::Int(i64::from(v))
    }
}

impl From<u32> for Operand<'_> {
    fn from(v: u32) -> Self {
        Operand::Int(i64::from(v))
    }
}

impl From<u16> for Operand<'_> {
    fn from(v: u16) -> Self {
        Operand::Int(i64::from(v))
    }
}

impl From<u8> for Operand<'_> {
    fn from(v: u8) -> Self {
        Operand::Int(i64::from(v))
    }
}

impl<'a> From<&'a Array> for Operand<'a> {
    fn from(a: &'a Array) -> Self {
        Operand::Array(a)
    }
}

impl From<f64> for Operand<'_> {
    fn from(v: f64) -> Self {
        Operand::Scalar(v)
    }
}

pub use weft_ir::index::{Ix, Range};

/// Keeps a facade call's source location as the runtime's call site while it lives (see
/// [`Numeric::site_guard`]).
pub(crate) struct SiteGuard<'a> {
    np: &'a Numeric,
    set: bool,
}

impl Drop for SiteGuard<'_> {
    fn drop(&mut self) {
        if self.set
            && let Ok(mut rt) = self.np.inner.rt.try_borrow_mut()
        {
            rt.set_call_site(None);
        }
    }
}

/// An n-d array of the numeric plugin (or a view of one), or the error that made it.
#[derive(Clone)]
pub struct Array {
    np: Numeric,
    slot: Slot,
}

/// What an [`Array`] holds: its store (or the error that poisoned it), or a boolean
/// compression not yet carried out ([`compressed::Compressed`]).
#[derive(Clone)]
enum Slot {
    /// A store, or the error in its place.
    Ready(std::result::Result<StoreHandle, Rc<Error>>),
    /// `full[mask]`, compressed when something needs its store.
    Compressed(Rc<compressed::Compressed>),
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.deferred().is_some() {
            return write!(f, "Array(a boolean compression not yet carried out)");
        }
        match self.value() {
            Ok(h) => write!(f, "Array({h:?})"),
            Err(e) => write!(f, "Array(poisoned: {e})"),
        }
    }
}

pub(crate) fn shared(e: &Rc<Error>) -> Error {
    Error::Usage(e.to_string())
}

impl Numeric {
    /// An error unless `other` is this `Numeric` (arrays of another runtime name stores of
    /// another tenant: their ids mean nothing here).
    pub(crate) fn check_same(&self, other: &Numeric) -> std::result::Result<(), Rc<Error>> {
        if Rc::ptr_eq(&self.inner, &other.inner) {
            Ok(())
        } else {
            Err(Rc::new(Error::Usage(
                "an array of another runtime (another tenant) cannot be used here: each \
                 runtime's arrays mean nothing to another"
                    .into(),
            )))
        }
    }
}

impl Numeric {
    /// Loads the numeric plugin (the bytes of its component) into `rt`.
    pub fn new(mut rt: Runtime, component: &[u8]) -> Result<Numeric> {
        let exports = TypedExports::load(&mut rt, component, "numeric")?;
        Ok(Numeric {
            inner: Rc::new(Inner {
                rt: RefCell::new(rt),
                exports,
                sites: RefCell::default(),
                memo: RefCell::default(),
                mask_positions: RefCell::default(),
                mask_snapshot: RefCell::default(),
            }),
        })
    }

    /// The runtime, for another plugin's facade that shares it.
    pub(crate) fn runtime_cell(&self) -> &RefCell<Runtime> {
        &self.inner.rt
    }

    /// An array of this plugin's runtime around a store handle (or an error).
    #[track_caller]
    pub(crate) fn wrap(&self, value: Result<StoreHandle>) -> Array {
        Array {
            np: self.clone(),
            slot: Slot::Ready(value.map_err(|e| Rc::new(self.located(e)))),
        }
    }

    /// Runs `f` on the runtime (to load other plugins, read statistics, flush, ...).
    pub fn runtime<R>(&self, f: impl FnOnce(&mut Runtime) -> R) -> R {
        f(&mut self.inner.rt.borrow_mut())
    }

    /// Calls a numeric export; `f` gets the typed exports and the plugin's store.
    #[track_caller]
    fn call<R>(
        &self,
        name: &str,
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
        ) -> wasmtime::Result<std::result::Result<R, wit::Error>>,
    ) -> Result<R> {
        let _site = self.site_guard(std::panic::Location::caller());
        let inner = &*self.inner;
        let result = inner.exports.call(&mut inner.rt.borrow_mut(), name, f);
        result.map_err(|e| self.located(e))
    }

    /// Names `caller` as the runtime's call site (so that the tasks submitted meanwhile, and
    /// the errors they raise later, name it), unless an outer facade call already did; the
    /// guard clears what it set when dropped.
    pub(crate) fn site_guard(
        &self,
        caller: &'static std::panic::Location<'static>,
    ) -> SiteGuard<'_> {
        let mut rt = self.inner.rt.borrow_mut();
        if rt.call_site().is_some() {
            return SiteGuard {
                np: self,
                set: false,
            };
        }
        let key = std::ptr::from_ref(caller) as usize;
        let site = self
            .inner
            .sites
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                format!("{}:{}:{}", caller.file(), caller.line(), caller.column()).into()
            })
            .clone();
        rt.set_call_site(Some(site));
        SiteGuard {
            np: self,
            set: true,
        }
    }

    /// `e` with the current call site, if one is set and `e` does not carry one yet.
    pub(crate) fn located(&self, e: Error) -> Error {
        if matches!(e, Error::At { .. }) {
            return e;
        }
        match self
            .inner
            .rt
            .try_borrow()
            .ok()
            .and_then(|rt| rt.call_site())
        {
            Some(site) => Error::At {
                site: site.to_string(),
                source: Box::new(e),
            },
            None => e,
        }
    }

    /// Calls an export that returns a new store, and wraps it.
    #[track_caller]
    fn make(
        &self,
        name: &str,
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
        ) -> wasmtime::Result<std::result::Result<Resource<StoreRes>, wit::Error>>,
    ) -> Array {
        let result = self.call(name, |guest, store| {
            Ok(match f(guest, store)? {
                Ok(r) => Ok(store.data_mut().take(&r)?),
                Err(e) => Err(e),
            })
        });
        let value = result.and_then(|id| self.inner.rt.borrow().adopt(id));
        Array {
            np: self.clone(),
            slot: Slot::Ready(value.map_err(Rc::new)),
        }
    }

    /// An array of `shape` filled with `value`.
    #[track_caller]
    pub fn full(&self, shape: &[u64], value: f64, dtype: DType) -> Array {
        let scalar = convert::wit_scalar(weft_ir::Scalar::F64(value));
        self.make("full", |g, s| {
            g.call_full(s, shape, scalar, convert::wit_dtype(dtype))
        })
    }

    /// An array of zeros.
    #[track_caller]
    pub fn zeros(&self, shape: &[u64], dtype: DType) -> Array {
        self.make("zeros", |g, s| {
            g.call_zeros(s, shape, convert::wit_dtype(dtype))
        })
    }

    /// An array to be written before it is read (NumPy's `empty`, whose contents are
    /// unspecified): here, zeros.
    #[track_caller]
    pub fn empty(&self, shape: &[u64], dtype: DType) -> Array {
        self.zeros(shape, dtype)
    }

    /// An array of ones.
    #[track_caller]
    pub fn ones(&self, shape: &[u64], dtype: DType) -> Array {
        self.make("ones", |g, s| {
            g.call_ones(s, shape, convert::wit_dtype(dtype))
        })
    }

    /// `start, start + step, ...` below `stop`.
    #[track_caller]
    pub fn arange(&self, start: f64, stop: f64, step: f64, dtype: DType) -> Array {
        self.make("arange", |g, s| {
            g.call_arange(s, start, stop, step, convert::wit_dtype(dtype))
        })
    }

    /// `num` evenly spaced values from `start` to `stop`, inclusive.
    #[track_caller]
    pub fn linspace(&self, start: f64, stop: f64, num: u64, dtype: DType) -> Array {
        self.make("linspace", |g, s| {
            g.call_linspace(s, start, stop, num, convert::wit_dtype(dtype))
        })
    }

    /// Uniform random numbers in `[low, high)`, determined by `seed` alone.
    #[track_caller]
    pub fn random_uniform(
        &self,
        shape: &[u64],
        low: f64,
        high: f64,
        seed: u64,
        dtype: DType,
    ) -> Array {
        self.make("random-uniform", |g, s| {
            g.call_random_uniform(s, shape, low, high, seed, convert::wit_dtype(dtype))
        })
    }

    /// An array from host values, converted to `dtype` by the plugin.
    #[track_caller]
    pub fn from_f64s(&self, shape: &[u64], values: &[f64], dtype: DType) -> Array {
        self.make("from-f64s", |g, s| {
            g.call_from_f64s(s, shape, values, convert::wit_dtype(dtype))
        })
    }

    /// An array of f64 from host data, copied straight into a store (no trip through the
    /// plugin: the fast path for large inputs).
    #[track_caller]
    pub fn from_vec(&self, shape: &[u64], values: &[f64]) -> Array {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let value = self
            .inner
            .rt
            .borrow_mut()
            .store_from_bytes(shape, DType::F64, &bytes);
        Array {
            np: self.clone(),
            slot: Slot::Ready(value.map_err(Rc::new)),
        }
    }
}

/// Converts an operand to its WIT form, lending arrays to the plugin for the call.
fn operand(
    store: &mut wasmtime::Store<PluginState>,
    o: &OperandRef,
) -> wasmtime::Result<api::Operand> {
    Ok(match o {
        OperandRef::Store(id) => api::Operand::Array(store.data_mut().lend(*id)?),
        OperandRef::Scalar(v) => api::Operand::Scalar(wit::Scalar::F64(*v)),
        OperandRef::Int(v) => api::Operand::Scalar(wit::Scalar::I64(*v)),
    })
}

/// An operand whose array is known to be healthy.
pub(crate) enum OperandRef {
    Store(weft_runtime::StoreId),
    Scalar(f64),
    Int(i64),
}

impl Operand<'_> {
    /// The operand as `np` passes it: an array of another `Numeric` (another runtime, another
    /// tenant) is refused.
    fn resolve(&self, np: &Numeric) -> std::result::Result<OperandRef, Rc<Error>> {
        match self {
            Operand::Array(a) => {
                let h = a.value().as_ref().map_err(Rc::clone)?;
                np.check_same(&a.np)?;
                Ok(OperandRef::Store(h.id()))
            }
            Operand::Scalar(v) => Ok(OperandRef::Scalar(*v)),
            Operand::Int(v) => Ok(OperandRef::Int(*v)),
        }
    }
}

impl Array {
    /// The store or the error; a deferred compression is carried out here, once.
    fn value(&self) -> &std::result::Result<StoreHandle, Rc<Error>> {
        match &self.slot {
            Slot::Ready(value) => value,
            Slot::Compressed(c) => c.value(),
        }
    }

    /// The runtime's handle to the store, or the error that poisoned this array.
    pub fn handle(&self) -> Result<&StoreHandle> {
        self.value().as_ref().map_err(shared)
    }

    /// Returns the error that poisoned this array, if any.
    #[track_caller]
    pub fn check(&self) -> Result<()> {
        if let Some(c) = self.deferred() {
            return c.check();
        }
        self.handle().map(|_| ())
    }

    /// The numeric plugin this array belongs to.
    pub fn numeric(&self) -> &Numeric {
        &self.np
    }

    /// This array, with `name` as the name fusion explanations (`WEFT_EXPLAIN=1`) give its
    /// storage: `store 8 "grid" (argument 0 of ...)`. For a view, the name goes to the storage
    /// it views, which all its views share. A poisoned array stays as it is.
    pub fn named(self, name: &str) -> Array {
        if self.deferred().is_some() {
            // Its store does not exist yet; the name would go nowhere.
            return self;
        }
        if let Ok(h) = self.value() {
            let id = h.id();
            // Naming is for explanations only: an array whose store is gone keeps no name.
            let _ = self.np.runtime(|rt| rt.set_label(id, name));
        }
        self
    }

    #[track_caller]
    pub(crate) fn derive(
        &self,
        name: &str,
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            weft_runtime::StoreId,
        ) -> wasmtime::Result<std::result::Result<Resource<StoreRes>, wit::Error>>,
    ) -> Array {
        match self.value() {
            Ok(h) => {
                let id = h.id();
                self.np.make(name, |g, s| f(g, s, id))
            }
            Err(e) => Array {
                np: self.np.clone(),
                slot: Slot::Ready(Err(e.clone())),
            },
        }
    }

    /// The shape.
    #[track_caller]
    pub fn shape(&self) -> Result<Vec<u64>> {
        let h = self.handle()?;
        self.np.inner.rt.borrow_mut().shape(h)
    }

    /// The element type.
    #[track_caller]
    pub fn dtype(&self) -> Result<DType> {
        if let Some(c) = self.deferred() {
            return c.dtype();
        }
        let h = self.handle()?;
        self.np.inner.rt.borrow_mut().dtype(h)
    }

    /// The elements in row-major order, converted to f64. This runs the pending tasks.
    #[track_caller]
    pub fn to_vec(&self) -> Result<Vec<f64>> {
        let h = self.handle()?;
        let mut rt = self.np.inner.rt.borrow_mut();
        let dtype = rt.dtype(h)?;
        let bytes = rt.read_bytes(h)?;
        Ok(decode(&bytes, dtype))
    }

    /// The single element of a 0-d (or one-element) array.
    #[track_caller]
    pub fn item(&self) -> Result<f64> {
        let caller = std::panic::Location::caller();
        let v = self.to_vec()?;
        match v.as_slice() {
            [x] => Ok(*x),
            _ => Err(at(
                caller,
                Error::Usage(format!(
                    "item(): can only convert an array of size 1 to a scalar, not one of size {}",
                    v.len()
                )),
            )),
        }
    }

    /// A view `self[ranges]` sharing this array's storage.
    #[track_caller]
    pub fn slice(&self, ranges: &[Range]) -> Array {
        let as_indices: Vec<Ix> = ranges.iter().map(|&r| Ix::Slice(r)).collect();
        if let Some(view) = self.host_index(&as_indices) {
            return view;
        }
        let ranges: Vec<api::Range> = ranges
            .iter()
            .map(|r| api::Range {
                start: r.start,
                stop: r.stop,
                step: r.step,
            })
            .collect();
        let key = CallKey::new("slice").ranges(&ranges);
        self.derive_replayed("slice", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_slice(s, a, &ranges)
        })
    }

    /// An element-wise binary operation.
    #[track_caller]
    pub fn binary<'a>(&self, op: BinaryOp, other: impl Into<Operand<'a>>) -> Array {
        let other = other.into();
        if let Some(deferred) = self.deferred_binary(op, &other) {
            return deferred;
        }
        let rhs = match other.resolve(&self.np) {
            Ok(r) => r,
            Err(e) => {
                return Array {
                    np: self.np.clone(),
                    slot: Slot::Ready(Err(e)),
                };
            }
        };
        let key = CallKey::new(op_name(op)).word(0).operand(&rhs);
        self.derive_replayed(op_name(op), key, &[&rhs], |g, s, id| {
            let a = api::Operand::Array(s.data_mut().lend(id)?);
            let b = operand(s, &rhs)?;
            g.call_binary(s, op, a, b)
        })
    }

    /// `scalar op self`, for operators with a scalar on the left.
    #[track_caller]
    pub fn binary_rev(&self, op: BinaryOp, scalar: f64) -> Array {
        if let Some(deferred) = self.deferred_binary_rev(op, scalar) {
            return deferred;
        }
        let key = CallKey::new(op_name(op)).word(1).word(scalar.to_bits());
        self.derive_replayed(op_name(op), key, &[], |g, s, id| {
            let b = api::Operand::Array(s.data_mut().lend(id)?);
            g.call_binary(s, op, api::Operand::Scalar(wit::Scalar::F64(scalar)), b)
        })
    }

    /// An element-wise unary operation.
    #[track_caller]
    pub fn unary(&self, op: UnaryOp) -> Array {
        if let Some(deferred) = self.deferred_map(|full| full.unary(op)) {
            return deferred;
        }
        let key = CallKey::new("unary").word(op as u64);
        self.derive_replayed("unary", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_unary(s, op, a)
        })
    }

    /// `self ? a : b`, element-wise (NumPy's `where`); `self` is a bool array.
    #[track_caller]
    pub fn select<'a, 'b>(&self, a: impl Into<Operand<'a>>, b: impl Into<Operand<'b>>) -> Array {
        let (a, b) = (a.into(), b.into());
        if let Some(deferred) = self.deferred_select(&a, &b) {
            return deferred;
        }
        let (a, b) = match (a.resolve(&self.np), b.resolve(&self.np)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                return Array {
                    np: self.np.clone(),
                    slot: Slot::Ready(Err(e)),
                };
            }
        };
        let key = CallKey::new("select").operand(&a).operand(&b);
        self.derive_replayed("select", key, &[&a, &b], |g, s, id| {
            let cond = s.data_mut().lend(id)?;
            let (a, b) = (operand(s, &a)?, operand(s, &b)?);
            g.call_select(s, cond, a, b)
        })
    }

    /// A copy converted to `dtype`.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Array {
        if let Some(deferred) = self.deferred_map(|full| full.astype(dtype)) {
            return deferred;
        }
        let key = CallKey::new("astype").word(dtype as u64);
        self.derive_replayed("astype", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_astype(s, a, convert::wit_dtype(dtype))
        })
    }

    /// A fresh copy.
    #[track_caller]
    pub fn copy(&self) -> Array {
        if let Some(deferred) = self.deferred_map(Array::copy) {
            return deferred;
        }
        self.derive_replayed("copy", CallKey::new("copy"), &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_copy(s, a)
        })
    }

    /// `self[...] = src`: an array of the same shape, or a scalar.
    #[track_caller]
    pub fn assign<'a>(&self, src: impl Into<Operand<'a>>) -> Result<()> {
        let dst = self.handle()?.id();
        let src = src.into().resolve(&self.np).map_err(|e| shared(&e))?;
        let key = CallKey::new("assign").operand(&src);
        let mut args = vec![dst];
        args.extend(replayed::stores_of(&[&src]));
        self.np
            .replayed("assign", key, &args, |g, s| {
                let d = s.data_mut().lend(dst)?;
                let src = operand(s, &src)?;
                Ok(g.call_assign(s, d, src)?.map(|()| None))
            })
            .map(|_| ())
    }

    /// A reduction of all elements to a 0-d array.
    #[track_caller]
    pub fn reduce(&self, op: Reduction) -> Array {
        if let Some(deferred) = self.deferred_reduce(op) {
            return deferred;
        }
        if let Some(r) = self.through_i64(unsigned::Kept::of(op), |a| a.reduce(op)) {
            return r;
        }
        let key = CallKey::new("reduce").word(op as u64);
        self.derive_replayed("reduce", key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_reduce(s, op, a)
        })
    }

    /// The sum of all elements (0-d).
    #[track_caller]
    pub fn sum(&self) -> Array {
        self.reduce(Reduction::Sum)
    }

    /// The product of all elements (0-d).
    #[track_caller]
    pub fn prod(&self) -> Array {
        self.reduce(Reduction::Prod)
    }

    /// The smallest element (0-d).
    #[track_caller]
    pub fn min(&self) -> Array {
        self.reduce(Reduction::Min)
    }

    /// The largest element (0-d).
    #[track_caller]
    pub fn max(&self) -> Array {
        self.reduce(Reduction::Max)
    }

    /// The dot product with another vector (0-d). Up to 16,384 elements it is one point that
    /// folds the terms in `weft-ir`'s lane order by fused multiply-adds (and fuses with the
    /// scalar steps that use it); longer vectors reduce in the canonical order on every
    /// thread. Either way the bits do not depend on threads, pieces or ranks.
    #[track_caller]
    pub fn dot(&self, other: &Array) -> Array {
        self.pair("dot", CallKey::new("dot"), other, |g, s, a, b| {
            g.call_dot(s, a, b)
        })
    }

    /// The 2-norm of all elements (0-d).
    #[track_caller]
    pub fn norm(&self) -> Array {
        self.derive_replayed("norm", CallKey::new("norm"), &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_norm(s, a)
        })
    }

    /// `self @ x` for a matrix and a vector.
    #[track_caller]
    pub fn matvec(&self, x: &Array) -> Array {
        self.pair("matvec", CallKey::new("matvec"), x, |g, s, a, b| {
            g.call_matvec(s, a, b)
        })
    }

    /// `self @ b` with NumPy's rules: 1-d and 2-d operands as the plugin's `matmul` (a
    /// transposed operand is read in place), more dimensions as a stack of matrices whose
    /// batch dimensions broadcast.
    #[track_caller]
    pub fn matmul(&self, b: &Array) -> Array {
        let stacked = match (self.shape(), b.shape()) {
            (Ok(sa), Ok(sb)) => sa.len() > 2 || sb.len() > 2,
            _ => false,
        };
        if stacked {
            return self
                .stacked_matmul(b)
                .unwrap_or_else(|e| self.np.wrap(Err(e)));
        }
        self.pair("matmul", CallKey::new("matmul"), b, |g, s, a, b| {
            g.call_matmul(s, a, b)
        })
    }

    /// The diagonal of a matrix, or a matrix with this vector on its diagonal.
    #[track_caller]
    pub fn diag(&self) -> Array {
        self.derive_replayed("diag", CallKey::new("diag"), &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_diag(s, a)
        })
    }

    #[track_caller]
    pub(crate) fn pair(
        &self,
        name: &'static str,
        key: CallKey,
        other: &Array,
        f: impl FnOnce(
            &Guest,
            &mut wasmtime::Store<PluginState>,
            Resource<StoreRes>,
            Resource<StoreRes>,
        ) -> wasmtime::Result<std::result::Result<Resource<StoreRes>, wit::Error>>,
    ) -> Array {
        let other = match self
            .np
            .check_same(&other.np)
            .and(other.value().as_ref().map_err(Rc::clone))
        {
            Ok(h) => h.id(),
            Err(e) => {
                return Array {
                    np: self.np.clone(),
                    slot: Slot::Ready(Err(e.clone())),
                };
            }
        };
        let rest = OperandRef::Store(other);
        self.derive_replayed(name, key, &[&rest], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            let b = s.data_mut().lend(other)?;
            f(g, s, a, b)
        })
    }

    /// `sqrt(self)`.
    #[track_caller]
    pub fn sqrt(&self) -> Array {
        self.unary(UnaryOp::Sqrt)
    }

    /// `exp(self)`.
    #[track_caller]
    pub fn exp(&self) -> Array {
        self.unary(UnaryOp::Exp)
    }

    /// `log(self)`.
    #[track_caller]
    pub fn log(&self) -> Array {
        self.unary(UnaryOp::Log)
    }

    /// `erf(self)`.
    #[track_caller]
    pub fn erf(&self) -> Array {
        self.unary(UnaryOp::Erf)
    }

    /// `|self|`.
    #[track_caller]
    pub fn abs(&self) -> Array {
        self.unary(UnaryOp::Abs)
    }

    /// `self ** p`.
    #[track_caller]
    pub fn pow<'a>(&self, p: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Pow, p)
    }

    /// Element-wise minimum.
    #[track_caller]
    pub fn minimum<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Minimum, other)
    }

    /// Element-wise maximum.
    #[track_caller]
    pub fn maximum<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Maximum, other)
    }

    /// Element-wise `self < other` (bool).
    #[track_caller]
    pub fn lt<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Less, other)
    }

    /// Element-wise `self > other` (bool).
    #[track_caller]
    pub fn gt<'a>(&self, other: impl Into<Operand<'a>>) -> Array {
        self.binary(BinaryOp::Greater, other)
    }
}

fn op_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Pow => "pow",
        BinaryOp::Minimum => "minimum",
        BinaryOp::Maximum => "maximum",
        BinaryOp::Equal => "equal",
        BinaryOp::NotEqual => "not-equal",
        BinaryOp::Less => "less",
        BinaryOp::LessEqual => "less-equal",
        BinaryOp::Greater => "greater",
        BinaryOp::GreaterEqual => "greater-equal",
        BinaryOp::LogicalAnd => "logical-and",
        BinaryOp::LogicalOr => "logical-or",
        BinaryOp::Remainder => "remainder",
        BinaryOp::Arctan2 => "arctan2",
        BinaryOp::BitwiseAnd => "bitwise-and",
        BinaryOp::BitwiseOr => "bitwise-or",
        BinaryOp::BitwiseXor => "bitwise-xor",
        BinaryOp::LeftShift => "left-shift",
        BinaryOp::RightShift => "right-shift",
    }
}

/// `e` with `caller`'s `file:line:column`, unless it carries a call site already.
pub(crate) fn at(caller: &std::panic::Location<'_>, e: Error) -> Error {
    if matches!(e, Error::At { .. }) {
        return e;
    }
    Error::At {
        site: format!("{}:{}:{}", caller.file(), caller.line(), caller.column()),
        source: Box::new(e),
    }
}

/// A shape as NumPy prints it: `(3, 4)`, `(5,)`, `()`.
pub(crate) fn shape_text(shape: &[u64]) -> String {
    weft_ir::shape::tuple(shape)
}

/// Little-endian elements of `dtype`, as f64 ([`weft_ir::elements::to_f64s`]).
pub fn decode(bytes: &[u8], dtype: DType) -> Vec<f64> {
    weft_ir::elements::to_f64s(bytes, dtype)
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait<&Array> for &Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: &Array) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<Array> for &Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: Array) -> Array {
                self.binary($op, &rhs)
            }
        }
        impl std::ops::$trait<&Array> for Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: &Array) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<Array> for Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: Array) -> Array {
                self.binary($op, &rhs)
            }
        }
        impl std::ops::$trait<f64> for &Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: f64) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<f64> for Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: f64) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<i64> for &Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: i64) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<i64> for Array {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: i64) -> Array {
                self.binary($op, rhs)
            }
        }
        impl std::ops::$trait<&Array> for f64 {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: &Array) -> Array {
                rhs.binary_rev($op, self)
            }
        }
        impl std::ops::$trait<Array> for f64 {
            type Output = Array;
            #[track_caller]
            fn $method(self, rhs: Array) -> Array {
                rhs.binary_rev($op, self)
            }
        }
    };
}

binary_operator!(Add, add, BinaryOp::Add);
binary_operator!(Sub, sub, BinaryOp::Sub);
binary_operator!(Mul, mul, BinaryOp::Mul);
binary_operator!(Div, div, BinaryOp::Div);
binary_operator!(Rem, rem, BinaryOp::Remainder);
binary_operator!(BitAnd, bitand, BinaryOp::BitwiseAnd);
binary_operator!(BitOr, bitor, BinaryOp::BitwiseOr);
binary_operator!(BitXor, bitxor, BinaryOp::BitwiseXor);
binary_operator!(Shl, shl, BinaryOp::LeftShift);
binary_operator!(Shr, shr, BinaryOp::RightShift);

/// `!a`: NumPy's `~a` (bitwise not of integers, logical not of bools).
impl std::ops::Not for &Array {
    type Output = Array;
    #[track_caller]
    fn not(self) -> Array {
        self.invert()
    }
}

/// `!a`: NumPy's `~a`.
impl std::ops::Not for Array {
    type Output = Array;
    #[track_caller]
    fn not(self) -> Array {
        self.invert()
    }
}

impl std::ops::Neg for &Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        self.unary(UnaryOp::Neg)
    }
}

impl std::ops::Neg for Array {
    type Output = Array;
    #[track_caller]
    fn neg(self) -> Array {
        self.unary(UnaryOp::Neg)
    }
}
