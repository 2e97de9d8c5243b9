//! What an application component's imports are linked to: the plugin interfaces it imports
//! are forwarded to the plugins of the job's runtime that export them, `host` is served for
//! the application's store handles, and WASI by `wasmtime-wasi`.
//!
//! numeric's most called functions are forwarded with typed arguments ([`crate::typed`]);
//! every other function of a plugin interface is forwarded with dynamic values: the
//! application's arguments become [`Value`]s (a `host.store` handle becomes the
//! [`StoreHandle`] it names in the application's table), [`weft::Runtime::call`] calls the
//! plugin's export of the same name, and the results come back the same way (each store the
//! plugin returns becomes a new handle the application owns). A plugin's error result passes
//! through as the application's error result; a failure of the call itself (the plugin
//! trapped, or ran past its limits) stops the application with that message.

use rustc_hash::FxHashMap as HashMap;

use send_wrapper::SendWrapper;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    Component, Linker, Resource, ResourceAny, ResourceTable, ResourceType, Val,
};
use wasmtime::{Engine, StoreContextMut};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use weft::{Runtime, Value};
use weft_plugin::bindings::base::weft::plugin::types as wit;
use weft_plugin::limits::Limiter;
use weft_plugin::replay::Recording;
use weft_runtime::{PluginId, StoreHandle, StoreId};

/// The `host` interface's name, as components import it.
pub const HOST_INTERFACE: &str = "weft:plugin/host@0.1.0";

/// The types interface every plugin interface uses.
const TYPES_INTERFACE: &str = "weft:plugin/types@0.1.0";

/// An application's handle to a store: an entry of its resource table.
pub struct AppStore {
    pub(crate) handle: StoreHandle,
}

/// The data of an application's wasmtime store: its runtime, WASI context, resource table
/// and limiter.
pub struct AppState {
    /// The runtime its calls go to. wasmtime-wasi asks for store data that may cross
    /// threads; a runtime may not, and this one never does: the job's store lives and dies
    /// on the thread that runs the job, and [`SendWrapper`] checks that at run time.
    pub(crate) rt: SendWrapper<Runtime>,
    /// Recordings of the application's plugin calls, by call and arguments (see
    /// [`forward`]), in the same wrapper for the same reason.
    pub(crate) recordings: SendWrapper<Recordings>,
    /// Plugin calls made for real, and replayed from a recording.
    pub(crate) calls: (u64, u64),
    /// Which plugin serves each plugin interface it may import.
    pub(crate) served: HashMap<String, PluginId>,
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
    /// The job's directory, for the `files` interface.
    pub(crate) dir: Option<std::path::PathBuf>,
    /// The most bytes its files may hold (`AppLimits::dir_bytes`).
    pub(crate) dir_bytes: Option<u64>,
}

impl WasiView for AppState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Which plugin of `rt` serves each interface the loaded plugins export (the first plugin
/// loaded wins where two export one).
pub fn served_interfaces(
    rt: &Runtime,
    plugins: &[PluginId],
) -> weft::Result<HashMap<String, PluginId>> {
    let mut served = HashMap::default();
    for &p in plugins {
        for name in rt.exports(p)? {
            if let Some((interface, _)) = name.split_once('#') {
                served.entry(interface.to_string()).or_insert(p);
            }
        }
    }
    Ok(served)
}

/// A linker for `component`: WASI, `host`, and a forwarder for every function of every
/// other interface it imports. An interface no plugin can serve is refused when the job
/// starts (see [`unserved`]).
pub fn linker_for(engine: &Engine, component: &Component) -> wasmtime::Result<Linker<AppState>> {
    let mut linker = Linker::<AppState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    add_host(&mut linker)?;
    crate::files::add_files(&mut linker)?;
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if name.starts_with("wasi:") || host_served(name) {
            continue;
        }
        let mut inst = linker.instance(name)?;
        let typed = name == crate::typed::NUMERIC_INTERFACE;
        if typed {
            crate::typed::add_numeric(&mut inst, name)?;
        }
        for (function, ty) in instance.exports(engine) {
            if !matches!(ty.ty, ComponentItem::ComponentFunc(_))
                || (typed && crate::typed::TYPED.contains(&function))
            {
                continue;
            }
            let call: std::sync::Arc<str> = format!("{name}#{function}").into();
            let interface = name.to_string();
            inst.func_new(function, move |cx, _ty, params, results| {
                forward(cx, &interface, &call, params, results)
            })?;
        }
    }
    Ok(linker)
}

/// Whether the host itself serves interface `name` (not a plugin).
fn host_served(name: &str) -> bool {
    name == HOST_INTERFACE || name == TYPES_INTERFACE || name == crate::files::FILES_INTERFACE
}

/// The plugin interfaces `component` imports that no plugin in `served` exports.
pub fn unserved(
    engine: &Engine,
    component: &Component,
    served: &HashMap<String, PluginId>,
) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .filter(|(name, item)| {
            matches!(item.ty, ComponentItem::ComponentInstance(_))
                && !name.starts_with("wasi:")
                && !host_served(name)
                && !served.contains_key(*name)
        })
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The most recordings an application keeps, and the most import calls they hold together
/// (which bounds their memory); past either, they are all dropped and recorded again as the
/// calls come (the bounds of the `weft` crate's `Numeric`).
const RECORDINGS_KEPT: usize = 1 << 15;
/// See [`RECORDINGS_KEPT`].
const EVENTS_KEPT: usize = 1 << 18;

/// Recordings of plugin calls (`weft_plugin::replay`) by [`CallKey`], and the import calls
/// they hold together.
#[derive(Default)]
pub struct Recordings {
    by_key: HashMap<CallKey, Recording>,
    events: usize,
}

impl Recordings {
    /// Keeps `recording` under `key`, dropping every recording first where the bounds would
    /// be passed.
    fn keep(&mut self, key: CallKey, recording: Recording) {
        if self.by_key.len() >= RECORDINGS_KEPT || self.events + recording.len() > EVENTS_KEPT {
            self.by_key.clear();
            self.events = 0;
        }
        self.events += recording.len();
        if let Some(old) = self.by_key.insert(key, recording) {
            self.events -= old.len();
        }
    }
}

/// What identifies a call for its recording: the export, every argument that is not a store
/// as words, and the element type and shape of each store it lends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub(crate) call: std::sync::Arc<str>,
    pub(crate) words: Vec<u64>,
}

impl CallKey {
    /// The key of a call of `call` (`interface#function`), before its arguments.
    pub(crate) fn new(call: std::sync::Arc<str>) -> CallKey {
        CallKey {
            call,
            words: Vec::with_capacity(16),
        }
    }
}

/// Adds `v` to `words`, and the stores it lends to `ids`, in the order the dynamic call
/// lends them (depth first, as `weft_plugin::dynamic` converts values).
fn key_words(v: &Value, words: &mut Vec<u64>, ids: &mut Vec<StoreId>) {
    let text = |words: &mut Vec<u64>, s: &str| {
        words.push(s.len() as u64);
        words.extend(s.bytes().map(u64::from));
    };
    match v {
        Value::Bool(b) => words.extend([1, u64::from(*b)]),
        Value::S8(x) => words.extend([2, *x as u64]),
        Value::U8(x) => words.extend([3, u64::from(*x)]),
        Value::S16(x) => words.extend([4, *x as u64]),
        Value::U16(x) => words.extend([5, u64::from(*x)]),
        Value::S32(x) => words.extend([6, *x as u64]),
        Value::U32(x) => words.extend([7, u64::from(*x)]),
        Value::S64(x) => words.extend([8, *x as u64]),
        Value::U64(x) => words.extend([9, *x]),
        Value::F32(x) => words.extend([10, u64::from(x.to_bits())]),
        Value::F64(x) => words.extend([11, x.to_bits()]),
        Value::Char(c) => words.extend([12, u64::from(*c)]),
        Value::String(s) => {
            words.push(13);
            text(words, s);
        }
        Value::List(l) | Value::Tuple(l) => {
            words.extend([14, l.len() as u64]);
            l.iter().for_each(|v| key_words(v, words, ids));
        }
        Value::Record(r) => {
            words.extend([15, r.len() as u64]);
            for (name, v) in r {
                text(words, name);
                key_words(v, words, ids);
            }
        }
        Value::Variant(case, payload) => {
            words.push(16);
            text(words, case);
            match payload {
                Some(p) => key_words(p, words, ids),
                None => words.push(0),
            }
        }
        Value::Enum(case) => {
            words.push(17);
            text(words, case);
        }
        Value::Option(o) => match o {
            Some(v) => {
                words.push(18);
                key_words(v, words, ids);
            }
            None => words.push(19),
        },
        Value::Result(r) => {
            words.push(20);
            let (tag, v) = match r {
                Ok(v) => (0, v),
                Err(v) => (1, v),
            };
            words.push(tag);
            if let Some(v) = v {
                key_words(v, words, ids);
            }
        }
        Value::Flags(f) => {
            words.extend([21, f.len() as u64]);
            f.iter().for_each(|name| text(words, name));
        }
        Value::Store(h) | Value::ReadOnly(h) => {
            words.push(if matches!(v, Value::Store(_)) { 22 } else { 23 });
            ids.push(h.id());
        }
    }
}

/// Calls `call` (`interface#function`) of the plugin that serves `interface` with the
/// application's `params`, and writes its results (see [`replay_or_call`]).
fn forward(
    mut cx: StoreContextMut<'_, AppState>,
    interface: &str,
    call: &std::sync::Arc<str>,
    params: &[Val],
    results: &mut [Val],
) -> wasmtime::Result<()> {
    let mut args = Vec::with_capacity(params.len());
    for p in params {
        args.push(to_value(p, &mut cx)?);
    }
    let mut key = CallKey::new(call.clone());
    let mut ids = Vec::new();
    args.iter()
        .for_each(|a| key_words(a, &mut key.words, &mut ids));
    let out = match replay_or_call(cx.data_mut(), interface, key, &ids, move || args)? {
        Made::Replayed(handle) => {
            vec![Value::Result(Ok(handle.map(|h| Box::new(Value::Store(h)))))]
        }
        Made::Called(out) => out,
    };
    if out.len() != results.len() {
        wasmtime::bail!(
            "call `{call}`: the plugin gave {} results where the application expects {}",
            out.len(),
            results.len()
        );
    }
    for (slot, v) in results.iter_mut().zip(out) {
        *slot = to_val(v, &mut cx)?;
    }
    Ok(())
}

/// What [`replay_or_call`] did.
pub(crate) enum Made {
    /// The call was replayed from its recording: the store it returned, if any.
    Replayed(Option<StoreHandle>),
    /// The call was made for real: the plugin's results.
    Called(Vec<Value>),
}

/// Makes the call of `key` (lent the stores `ids`, in the order the call lends them) to the
/// plugin that serves `interface`.
///
/// A call whose key (with the lent stores' element types and shapes) was recorded before is
/// replayed (`weft::Runtime::replay`): made by the host alone, without entering the plugin,
/// when every answer the plugin saw is the same (the plugin interfaces promise that a call is
/// a function of its arguments and of those answers); otherwise, or the first time, it is
/// made for real with the dynamic values `args` gives, and recorded.
pub(crate) fn replay_or_call(
    state: &mut AppState,
    interface: &str,
    mut key: CallKey,
    ids: &[StoreId],
    args: impl FnOnce() -> Vec<Value>,
) -> wasmtime::Result<Made> {
    let plugin = *state
        .served
        .get(interface)
        .ok_or_else(|| wasmtime::format_err!("no loaded plugin exports `{interface}`"))?;
    state.rt.each_layout(ids, |shape, dtype| {
        key.words.extend([dtype as u64, shape.len() as u64]);
        key.words.extend_from_slice(shape);
    });
    let call = key.call.clone();
    if let Some(recording) = state.recordings.by_key.get(&key)
        && let Ok(out) = state.rt.replay(plugin, recording, ids)
    {
        state.calls.1 += 1;
        let handle = out
            .map(|id| state.rt.adopt(id))
            .transpose()
            .map_err(|e| wasmtime::format_err!("call `{call}`: {e}"))?;
        return Ok(Made::Replayed(handle));
    }
    state.calls.0 += 1;
    let (out, recording) = state
        .rt
        .call_recorded(plugin, &call, &args())
        .map_err(|e| wasmtime::format_err!("call `{call}`: {e}"))?;
    if let Some((recording, _)) = recording {
        state.recordings.keep(key, recording);
    }
    Ok(Made::Called(out))
}

/// The store handle an application's resource names.
fn handle_of(
    any: ResourceAny,
    cx: &mut StoreContextMut<'_, AppState>,
) -> wasmtime::Result<StoreHandle> {
    let owned = any.owned();
    let r: Resource<AppStore> = any.try_into_resource(&mut *cx)?;
    let table = &mut cx.data_mut().table;
    if owned {
        // Handed over: the application no longer holds it.
        Ok(table.delete(r)?.handle)
    } else {
        Ok(table.get(&r)?.handle.clone())
    }
}

/// A new handle the application owns for `handle`.
fn own(
    handle: StoreHandle,
    cx: &mut StoreContextMut<'_, AppState>,
) -> wasmtime::Result<ResourceAny> {
    let r = cx.data_mut().table.push(AppStore { handle })?;
    ResourceAny::try_from_resource(r, &mut *cx)
}

fn to_value(v: &Val, cx: &mut StoreContextMut<'_, AppState>) -> wasmtime::Result<Value> {
    let boxed = |b: &Option<Box<Val>>, cx: &mut StoreContextMut<'_, AppState>| {
        b.as_deref()
            .map(|v| to_value(v, cx).map(Box::new))
            .transpose()
    };
    Ok(match v {
        Val::Bool(b) => Value::Bool(*b),
        Val::S8(x) => Value::S8(*x),
        Val::U8(x) => Value::U8(*x),
        Val::S16(x) => Value::S16(*x),
        Val::U16(x) => Value::U16(*x),
        Val::S32(x) => Value::S32(*x),
        Val::U32(x) => Value::U32(*x),
        Val::S64(x) => Value::S64(*x),
        Val::U64(x) => Value::U64(*x),
        Val::Float32(x) => Value::F32(*x),
        Val::Float64(x) => Value::F64(*x),
        Val::Char(c) => Value::Char(*c),
        Val::String(s) => Value::String(s.clone()),
        Val::Enum(e) => Value::Enum(e.clone()),
        Val::Flags(f) => Value::Flags(f.clone()),
        Val::List(l) | Val::FixedLengthList(l) => Value::List(
            l.iter()
                .map(|v| to_value(v, cx))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Record(r) => Value::Record(
            r.iter()
                .map(|(n, v)| Ok((n.clone(), to_value(v, cx)?)))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Tuple(t) => Value::Tuple(
            t.iter()
                .map(|v| to_value(v, cx))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Variant(c, p) => Value::Variant(c.clone(), boxed(p, cx)?),
        Val::Option(o) => Value::Option(boxed(o, cx)?),
        Val::Result(r) => Value::Result(match r {
            Ok(v) => Ok(boxed(v, cx)?),
            Err(e) => Err(boxed(e, cx)?),
        }),
        Val::Resource(any) => Value::Store(handle_of(*any, cx)?),
        other => {
            wasmtime::bail!("an application passed a value the host does not carry: {other:?}")
        }
    })
}

fn to_val(v: Value, cx: &mut StoreContextMut<'_, AppState>) -> wasmtime::Result<Val> {
    let boxed = |b: Option<Box<Value>>, cx: &mut StoreContextMut<'_, AppState>| {
        b.map(|v| to_val(*v, cx).map(Box::new)).transpose()
    };
    Ok(match v {
        Value::Bool(b) => Val::Bool(b),
        Value::S8(x) => Val::S8(x),
        Value::U8(x) => Val::U8(x),
        Value::S16(x) => Val::S16(x),
        Value::U16(x) => Val::U16(x),
        Value::S32(x) => Val::S32(x),
        Value::U32(x) => Val::U32(x),
        Value::S64(x) => Val::S64(x),
        Value::U64(x) => Val::U64(x),
        Value::F32(x) => Val::Float32(x),
        Value::F64(x) => Val::Float64(x),
        Value::Char(c) => Val::Char(c),
        Value::String(s) => Val::String(s),
        Value::Enum(e) => Val::Enum(e),
        Value::Flags(f) => Val::Flags(f),
        Value::List(l) => Val::List(
            l.into_iter()
                .map(|v| to_val(v, cx))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Value::Record(r) => Val::Record(
            r.into_iter()
                .map(|(n, v)| Ok((n, to_val(v, cx)?)))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Value::Tuple(t) => Val::Tuple(
            t.into_iter()
                .map(|v| to_val(v, cx))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Value::Variant(c, p) => Val::Variant(c, boxed(p, cx)?),
        Value::Option(o) => Val::Option(boxed(o, cx)?),
        Value::Result(r) => Val::Result(match r {
            Ok(v) => Ok(boxed(v, cx)?),
            Err(e) => Err(boxed(e, cx)?),
        }),
        Value::Store(h) | Value::ReadOnly(h) => Val::Resource(own(h, cx)?),
    })
}

/// A `types.error` result with `message`.
fn refused(message: String) -> wit::Error {
    wit::Error { message }
}

/// The `host` interface, as an application sees it: its store handles' shapes and element
/// types, stores made from bytes and read back as bytes. Views are made through `numeric`
/// (`slice`, `permute`, ...); `submit` and the views of `host.store` are refused, since
/// tasks and their partitions are the plugins' business.
fn add_host(linker: &mut Linker<AppState>) -> wasmtime::Result<()> {
    let mut host = linker.instance(HOST_INTERFACE)?;
    host.resource("store", ResourceType::host::<AppStore>(), |mut cx, rep| {
        cx.data_mut()
            .table
            .delete(Resource::<AppStore>::new_own(rep))?;
        Ok(())
    })?;
    host.func_wrap(
        "[method]store.shape",
        |mut cx: StoreContextMut<'_, AppState>, (s,): (Resource<AppStore>,)| {
            let state = cx.data_mut();
            let h = state.table.get(&s)?.handle.clone();
            let shape = state
                .rt
                .shape(&h)
                .map_err(|e| wasmtime::format_err!("store.shape: {e}"))?;
            Ok((shape,))
        },
    )?;
    host.func_wrap(
        "[method]store.dtype",
        |mut cx: StoreContextMut<'_, AppState>, (s,): (Resource<AppStore>,)| {
            let state = cx.data_mut();
            let h = state.table.get(&s)?.handle.clone();
            let d = state
                .rt
                .dtype(&h)
                .map_err(|e| wasmtime::format_err!("store.dtype: {e}"))?;
            Ok((weft_plugin::convert::wit_dtype(d),))
        },
    )?;
    for view in ["slice", "strided", "permute", "broadcast-to"] {
        let name = format!("[method]store.{view}");
        host.func_new(&name, move |_cx, _ty, _params, results| {
            results[0] = Val::Result(Err(Some(Box::new(error_val(format!(
                "host.store.{view} is for plugins; an application makes views with numeric's \
                 `slice`, `index`, `permute` and `broadcast-to`"
            ))))));
            Ok(())
        })?;
    }
    host.func_new("[method]store.reshape", |_cx, _ty, _params, results| {
        results[0] = Val::Result(Err(Some(Box::new(error_val(
            "host.store.reshape is for plugins; an application reshapes with numeric's `reshape`"
                .into(),
        )))));
        Ok(())
    })?;
    host.func_wrap(
        "[method]store.same-root",
        |mut cx: StoreContextMut<'_, AppState>,
         (a, b): (Resource<AppStore>, Resource<AppStore>)| {
            let state = cx.data_mut();
            let (a, b) = (
                state.table.get(&a)?.handle.id(),
                state.table.get(&b)?.handle.id(),
            );
            Ok((a == b,))
        },
    )?;
    host.func_wrap(
        "[method]store.may-overlap",
        |mut cx: StoreContextMut<'_, AppState>,
         (a, b): (Resource<AppStore>, Resource<AppStore>)| {
            // Without the views' geometry at hand, the safe answer: they may.
            let state = cx.data_mut();
            let _ = (state.table.get(&a)?, state.table.get(&b)?);
            Ok((true,))
        },
    )?;
    host.func_wrap(
        "create-store",
        |mut cx: StoreContextMut<'_, AppState>, (shape, dtype): (Vec<u64>, wit::Dtype)| {
            let d = weft_plugin::convert::dtype(dtype);
            let bytes = shape
                .iter()
                .try_fold(d.size() as u64, |acc, &e| acc.checked_mul(e))
                .and_then(|b| usize::try_from(b).ok());
            let Some(bytes) = bytes else {
                return Ok((Err(refused(format!(
                    "create-store: a store of shape {shape:?} is too large"
                ))),));
            };
            made(&mut cx, "create-store", |rt| {
                rt.store_from_bytes(&shape, d, &vec![0; bytes])
            })
        },
    )?;
    host.func_wrap(
        "store-from-bytes",
        |mut cx: StoreContextMut<'_, AppState>,
         (shape, dtype, data): (Vec<u64>, wit::Dtype, Vec<u8>)| {
            let d = weft_plugin::convert::dtype(dtype);
            made(&mut cx, "store-from-bytes", |rt| {
                rt.store_from_bytes(&shape, d, &data)
            })
        },
    )?;
    host.func_wrap(
        "read-bytes",
        |mut cx: StoreContextMut<'_, AppState>, (s,): (Resource<AppStore>,)| {
            let state = cx.data_mut();
            let h = state.table.get(&s)?.handle.clone();
            Ok((state
                .rt
                .read_bytes(&h)
                .map_err(|e| refused(format!("read-bytes: {e}"))),))
        },
    )?;
    host.func_new("preferred-tiling", |_cx, _ty, _params, _results| {
        wasmtime::bail!("host.preferred-tiling is for plugins, which split arrays into tasks")
    })?;
    host.func_new("submit", |_cx, _ty, _params, results| {
        results[0] = Val::Result(Err(Some(Box::new(error_val(
            "host.submit is for plugins: an application's tasks come from the plugins it calls"
                .into(),
        )))));
        Ok(())
    })?;
    Ok(())
}

/// A store made by `f`, as a handle the application owns, or `f`'s error as its result.
fn made(
    cx: &mut StoreContextMut<'_, AppState>,
    call: &str,
    f: impl FnOnce(&mut Runtime) -> weft::Result<StoreHandle>,
) -> wasmtime::Result<(Result<Resource<AppStore>, wit::Error>,)> {
    let state = cx.data_mut();
    Ok((match f(&mut state.rt) {
        Ok(handle) => Ok(state.table.push(AppStore { handle })?),
        Err(e) => Err(refused(format!("{call}: {e}"))),
    },))
}

/// A `types.error` record as a dynamic value.
fn error_val(message: String) -> Val {
    Val::Record(vec![("message".into(), Val::String(message))])
}
