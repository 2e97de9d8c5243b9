//! The dynamic call API: call any export of any plugin by name, with [`Value`]s.
//!
//! This is how an application uses a plugin it has no typed bindings for. Stores cross as
//! [`Value::Store`]: the host lends them to the plugin for a `borrow<store>` parameter, hands
//! over a counted handle for an `own<store>` one, and wraps every store the plugin returns in a
//! [`StoreHandle`].

use wasmtime::component::types::Type;
use wasmtime::component::{Resource, Val};

use weft_runtime::{Core, PluginId, StoreHandle, StoreId};

use crate::imports::{PluginState, StoreRes};
use crate::{CoreSlot, Error, PluginHost, Result, replay};

/// A component-model value, with stores as [`StoreHandle`]s.
#[derive(Clone, Debug)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `s8`.
    S8(i8),
    /// `u8`.
    U8(u8),
    /// `s16`.
    S16(i16),
    /// `u16`.
    U16(u16),
    /// `s32`.
    S32(i32),
    /// `u32`.
    U32(u32),
    /// `s64`.
    S64(i64),
    /// `u64`.
    U64(u64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `char`.
    Char(char),
    /// `string`.
    String(String),
    /// `list<T>`.
    List(Vec<Value>),
    /// A record: fields by name, in order.
    Record(Vec<(String, Value)>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A variant case and its payload.
    Variant(String, Option<Box<Value>>),
    /// An enum case.
    Enum(String),
    /// `option<T>`.
    Option(Option<Box<Value>>),
    /// `result<T, E>`.
    Result(std::result::Result<Option<Box<Value>>, Option<Box<Value>>>),
    /// Flags that are set.
    Flags(Vec<String>),
    /// A store (for `borrow<store>` and `own<store>`). Lent for a `borrow<store>`: the plugin
    /// may read it, write it and make views of it during the call, and every view it keeps
    /// is revoked when the call returns.
    Store(StoreHandle),
    /// A store lent read-only (for `borrow<store>` or `own<store>`): tasks the plugin submits
    /// may read it but not write or reduce into it, nor any view made from it.
    ReadOnly(StoreHandle),
}

/// A dynamic call's recording, with the stores lent to it in order (the `args` of
/// [`PluginHost::replay`]).
pub type RecordedCall = (replay::Recording, Vec<StoreId>);

impl PluginHost {
    /// The functions a plugin exports, as [`PluginHost::call`] names them: `"interface#function"`
    /// for a function of an exported interface, a plain name for one the component exports
    /// directly. The `plugin` interface every plugin exports is left out.
    pub fn exports(&self, plugin: PluginId) -> Result<Vec<String>> {
        use wasmtime::component::types::ComponentItem;
        let loaded = self
            .plugins
            .get(plugin.0 as usize)
            .ok_or_else(|| Error::Usage(format!("no plugin with id {}", plugin.0)))?;
        let engine = self.linker.engine();
        let mut names = Vec::new();
        for (name, export) in loaded.component.component_type().exports(engine) {
            match export.ty {
                ComponentItem::ComponentFunc(_) => names.push(name.to_string()),
                ComponentItem::ComponentInstance(instance)
                    if !name.starts_with("weft:plugin/plugin") =>
                {
                    for (function, item) in instance.exports(engine) {
                        if matches!(item.ty, ComponentItem::ComponentFunc(_)) {
                            names.push(format!("{name}#{function}"));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(names)
    }

    /// Calls export `name` of a plugin: `"interface#function"` for a function of an exported
    /// interface (for example `"weft:plugin/numeric@0.1.0#zeros"`), or a plain name for a
    /// function the component exports directly.
    pub fn call(
        &mut self,
        core: &mut CoreSlot,
        plugin: PluginId,
        name: &str,
        args: &[Value],
    ) -> Result<Vec<Value>> {
        self.call_maybe_recorded(core, plugin, name, args, false)
            .map(|(values, _)| values)
    }

    /// [`PluginHost::call`], recorded for replay ([`crate::replay`]): the results, and the
    /// recording where the call can be replayed (it returned one store and neither read nor
    /// kept anything), with the stores lent to it in the order it was lent them (the `args`
    /// of [`PluginHost::replay`]).
    pub fn call_recorded(
        &mut self,
        core: &mut CoreSlot,
        plugin: PluginId,
        name: &str,
        args: &[Value],
    ) -> Result<(Vec<Value>, Option<RecordedCall>)> {
        self.call_maybe_recorded(core, plugin, name, args, true)
    }

    fn call_maybe_recorded(
        &mut self,
        core: &mut CoreSlot,
        plugin: PluginId,
        name: &str,
        args: &[Value],
        record: bool,
    ) -> Result<(Vec<Value>, Option<RecordedCall>)> {
        let plugin_name = self.plugin_name(plugin);
        let usage = |m: String| Error::Usage(format!("plugin `{plugin_name}`, call `{name}`: {m}"));
        let (interface, function) = match name.split_once('#') {
            Some((i, f)) => (Some(i), f),
            None => (None, name),
        };
        let outcome = self.with_plugin(core, plugin, name, |store, instance, _| {
            let parent = match interface {
                Some(i) => Some(
                    instance
                        .get_export_index(&mut *store, None, i)
                        .ok_or_else(|| wasmtime::format_err!("no exported interface `{i}`"))?,
                ),
                None => None,
            };
            let index = instance
                .get_export_index(&mut *store, parent.as_ref(), function)
                .ok_or_else(|| wasmtime::format_err!("no exported function `{function}`"))?;
            let func = instance
                .get_func(&mut *store, index)
                .ok_or_else(|| wasmtime::format_err!("`{function}` is not a function"))?;
            let ty = func.ty(&*store);
            let param_types: Vec<Type> = ty.params().map(|(_, t)| t).collect();
            if param_types.len() != args.len() {
                return Ok(Err(format!(
                    "takes {} arguments, {} given",
                    param_types.len(),
                    args.len()
                )));
            }
            if record {
                store.data_mut().recorder = Some(Box::default());
            }
            let mut params = Vec::with_capacity(args.len());
            let mut lent = Vec::new();
            for (arg, ty) in args.iter().zip(&param_types) {
                match to_val(arg, ty, store, &mut lent) {
                    Ok(v) => params.push(v),
                    Err(m) => {
                        store.data_mut().recorder = None;
                        give_back(lent, store)?;
                        return Ok(Err(m));
                    }
                }
            }
            let mut results = vec![Val::Bool(false); ty.results().len()];
            let called = func.call(&mut *store, &params, &mut results);
            let mut out = Vec::with_capacity(results.len());
            if called.is_ok() {
                for r in results {
                    out.push(from_val(r, store)?);
                }
            }
            // The recording ends before the lent handles go: dropping a borrow is not the
            // plugin's doing.
            let recorder = store.data_mut().recorder.take();
            let ids: Vec<StoreId> = lent.iter().map(|(_, id)| *id).collect();
            give_back(lent, store)?;
            called?;
            let returned_one_store = matches!(
                out.as_slice(),
                [Returned::Result(Ok(Some(v)))] if matches!(**v, Returned::Store(_))
            );
            let recording = recorder
                .filter(|_| returned_one_store)
                .and_then(|r| r.finish(&ids))
                .map(|r| (r, ids));
            Ok(Ok((out, recording)))
        });
        let (values, recording) = outcome?.map_err(usage)?;
        let core = core.as_deref().ok_or_else(|| {
            weft_runtime::Error::Internal("the runtime core is missing after a call".into())
        })?;
        Ok((
            values.into_iter().map(|v| v.into_value(core)).collect(),
            recording,
        ))
    }
}

/// Drops the handles made to lend stores to a call: the plugin only borrowed them.
fn give_back(
    lent: Vec<(wasmtime::component::ResourceAny, StoreId)>,
    store: &mut wasmtime::Store<PluginState>,
) -> wasmtime::Result<()> {
    for (any, _) in lent {
        let r: Resource<StoreRes> = any.try_into_resource(&mut *store)?;
        store.data_mut().drop_owned(r)?;
    }
    Ok(())
}

/// A value coming back from a plugin, with stores as ids until handles are made.
enum Returned {
    Plain(Value),
    List(Vec<Returned>),
    Record(Vec<(String, Returned)>),
    Tuple(Vec<Returned>),
    Variant(String, Option<Box<Returned>>),
    Option(Option<Box<Returned>>),
    Result(std::result::Result<Option<Box<Returned>>, Option<Box<Returned>>>),
    Store(StoreId),
}

impl Returned {
    fn into_value(self, rt: &Core) -> Value {
        let boxed = |b: Option<Box<Returned>>, rt: &Core| b.map(|v| Box::new(v.into_value(rt)));
        match self {
            Returned::Plain(v) => v,
            Returned::List(l) => Value::List(l.into_iter().map(|v| v.into_value(rt)).collect()),
            Returned::Record(r) => {
                Value::Record(r.into_iter().map(|(n, v)| (n, v.into_value(rt))).collect())
            }
            Returned::Tuple(t) => Value::Tuple(t.into_iter().map(|v| v.into_value(rt)).collect()),
            Returned::Variant(c, p) => Value::Variant(c, boxed(p, rt)),
            Returned::Option(o) => Value::Option(boxed(o, rt)),
            Returned::Result(r) => Value::Result(match r {
                Ok(v) => Ok(boxed(v, rt)),
                Err(e) => Err(boxed(e, rt)),
            }),
            Returned::Store(id) => Value::Store(rt.adopt(id)),
        }
    }
}

/// `v` as a value of type `ty`; every handle made to lend a store for a `borrow<store>`, at
/// any depth (an operand variant's payload, a record's field), goes into `lent`, which
/// `call` gives back when the call returns.
fn to_val(
    v: &Value,
    ty: &Type,
    store: &mut wasmtime::Store<PluginState>,
    lent: &mut Vec<(wasmtime::component::ResourceAny, StoreId)>,
) -> std::result::Result<Val, String> {
    let mismatch = || format!("a value {v:?} does not fit type {ty:?}");
    Ok(match (v, ty) {
        (Value::Bool(b), Type::Bool) => Val::Bool(*b),
        (Value::S8(x), Type::S8) => Val::S8(*x),
        (Value::U8(x), Type::U8) => Val::U8(*x),
        (Value::S16(x), Type::S16) => Val::S16(*x),
        (Value::U16(x), Type::U16) => Val::U16(*x),
        (Value::S32(x), Type::S32) => Val::S32(*x),
        (Value::U32(x), Type::U32) => Val::U32(*x),
        (Value::S64(x), Type::S64) => Val::S64(*x),
        (Value::U64(x), Type::U64) => Val::U64(*x),
        (Value::F32(x), Type::Float32) => Val::Float32(*x),
        (Value::F64(x), Type::Float64) => Val::Float64(*x),
        (Value::Char(c), Type::Char) => Val::Char(*c),
        (Value::String(s), Type::String) => Val::String(s.clone()),
        (Value::List(items), Type::List(l)) => {
            let item = l.ty();
            Val::List(
                items
                    .iter()
                    .map(|i| to_val(i, &item, store, lent))
                    .collect::<std::result::Result<_, _>>()?,
            )
        }
        (Value::Record(fields), Type::Record(r)) => {
            let mut out = Vec::new();
            for (field, (name, value)) in r.fields().zip(fields) {
                if field.name != name {
                    return Err(format!(
                        "record field `{name}` given where `{}` is expected",
                        field.name
                    ));
                }
                out.push((name.clone(), to_val(value, &field.ty, store, lent)?));
            }
            if out.len() != r.fields().len() {
                return Err(mismatch());
            }
            Val::Record(out)
        }
        (Value::Tuple(items), Type::Tuple(t)) if items.len() == t.types().len() => Val::Tuple(
            items
                .iter()
                .zip(t.types())
                .map(|(i, ty)| to_val(i, &ty, store, lent))
                .collect::<std::result::Result<_, _>>()?,
        ),
        (Value::Variant(case, payload), Type::Variant(var)) => {
            let c = var
                .cases()
                .find(|c| c.name == case)
                .ok_or_else(|| format!("no variant case `{case}`"))?;
            let payload = match (payload, c.ty) {
                (Some(p), Some(t)) => Some(Box::new(to_val(p, &t, store, lent)?)),
                (None, None) => None,
                _ => return Err(mismatch()),
            };
            Val::Variant(case.clone(), payload)
        }
        (Value::Enum(case), Type::Enum(e)) if e.names().any(|n| n == case) => {
            Val::Enum(case.clone())
        }
        (Value::Option(o), Type::Option(t)) => Val::Option(match o {
            Some(v) => Some(Box::new(to_val(v, &t.ty(), store, lent)?)),
            None => None,
        }),
        (Value::Flags(f), Type::Flags(_)) => Val::Flags(f.clone()),
        // A borrow is lent as a handle the host owns (a host borrow cannot be made outside a
        // call); `call` drops it once the call returns.
        (Value::Store(h) | Value::ReadOnly(h), Type::Borrow(_) | Type::Own(_)) => {
            let core = store
                .data_mut()
                .core
                .as_deref_mut()
                .ok_or("no runtime during this call")?;
            let id = core.resolve(h).map_err(|e| e.to_string())?;
            core.retain(id).map_err(|e| e.to_string())?;
            let writable = matches!(v, Value::Store(_));
            let entry = match ty {
                Type::Borrow(_) => StoreRes::lent(id, writable),
                _ => StoreRes {
                    writable,
                    ..StoreRes::owned(id)
                },
            };
            let r: Resource<StoreRes> = store
                .data_mut()
                .own_entry(entry)
                .map_err(|e| e.to_string())?;
            let rep = r.rep();
            let any = r
                .try_into_resource_any(&mut *store)
                .map_err(|e| e.to_string())?;
            if matches!(ty, Type::Borrow(_)) {
                if let Some(rec) = store.data_mut().recorder.as_deref_mut() {
                    rec.lend(rep, id);
                }
                lent.push((any, id));
            } else if let Some(rec) = store.data_mut().recorder.as_deref_mut() {
                // A store handed over for good: not a call that can be replayed.
                rec.spoil();
            }
            Val::Resource(any)
        }
        _ => return Err(mismatch()),
    })
}

fn from_val(v: Val, store: &mut wasmtime::Store<PluginState>) -> wasmtime::Result<Returned> {
    let boxed = |b: Option<Box<Val>>, store: &mut wasmtime::Store<PluginState>| {
        b.map(|v| from_val(*v, store).map(Box::new)).transpose()
    };
    Ok(match v {
        Val::Bool(b) => Returned::Plain(Value::Bool(b)),
        Val::S8(x) => Returned::Plain(Value::S8(x)),
        Val::U8(x) => Returned::Plain(Value::U8(x)),
        Val::S16(x) => Returned::Plain(Value::S16(x)),
        Val::U16(x) => Returned::Plain(Value::U16(x)),
        Val::S32(x) => Returned::Plain(Value::S32(x)),
        Val::U32(x) => Returned::Plain(Value::U32(x)),
        Val::S64(x) => Returned::Plain(Value::S64(x)),
        Val::U64(x) => Returned::Plain(Value::U64(x)),
        Val::Float32(x) => Returned::Plain(Value::F32(x)),
        Val::Float64(x) => Returned::Plain(Value::F64(x)),
        Val::Char(c) => Returned::Plain(Value::Char(c)),
        Val::String(s) => Returned::Plain(Value::String(s)),
        Val::Enum(e) => Returned::Plain(Value::Enum(e)),
        Val::Flags(f) => Returned::Plain(Value::Flags(f)),
        Val::List(l) | Val::FixedLengthList(l) => Returned::List(
            l.into_iter()
                .map(|v| from_val(v, store))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Record(r) => Returned::Record(
            r.into_iter()
                .map(|(n, v)| Ok((n, from_val(v, store)?)))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Tuple(t) => Returned::Tuple(
            t.into_iter()
                .map(|v| from_val(v, store))
                .collect::<wasmtime::Result<_>>()?,
        ),
        Val::Variant(c, p) => Returned::Variant(c, boxed(p, store)?),
        Val::Option(o) => Returned::Option(boxed(o, store)?),
        Val::Result(r) => Returned::Result(match r {
            Ok(v) => Ok(boxed(v, store)?),
            Err(e) => Err(boxed(e, store)?),
        }),
        Val::Resource(any) => {
            let r: Resource<StoreRes> = Resource::try_from_resource_any(any, &mut *store)?;
            Returned::Store(store.data_mut().take(&r)?)
        }
        other => wasmtime::bail!("the dynamic API does not carry values like {other:?}"),
    })
}
