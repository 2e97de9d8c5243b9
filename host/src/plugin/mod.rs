//! Loading plugins and calling them under limits.
//!
//! Every plugin runs in its own wasmtime store with a memory cap and an epoch deadline. A call
//! that traps, runs past its deadline or grows past its cap becomes an [`Error::PluginFault`]
//! that names the plugin and the call; the instance is then thrown away and a fresh one is made
//! from the plugin's `InstancePre`, so the plugin is usable again at once.

pub mod bindings;
pub mod cache;
pub mod convert;
pub(crate) mod exports;
pub mod imports;

use wasmtime::component::{Component, Instance, InstancePre, Linker};
use wasmtime::{Engine, StoreLimitsBuilder};

use crate::config::PluginLimits;
use crate::runtime::core::Core;
use crate::runtime::task::PluginId;
use crate::{Error, Result};
use bindings::base::PluginBase;
use imports::{KernelSource, PluginState};

/// How often the runtime's ticker advances the engine's epoch.
pub const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(1);

/// A loaded plugin: its compiled component and a live instance.
pub struct Plugin {
    /// Its name, from its `plugin.name` export.
    pub name: String,
    /// Its version, from its `plugin.version` export.
    pub version: String,
    /// Its id in the runtime.
    pub id: PluginId,
    /// The compiled component.
    pub component: Component,
    pre: InstancePre<PluginState>,
    limits: PluginLimits,
    /// The live instance's store.
    pub store: wasmtime::Store<PluginState>,
    /// The live instance.
    pub instance: Instance,
    /// The live instance's `plugin` exports.
    pub guest: PluginBase,
    /// How many times the instance was remade (typed export handles of an older instance must
    /// be loaded again).
    pub generation: u64,
}

/// The linker every plugin is instantiated with: the `host` imports and nothing else.
pub fn linker(engine: &Engine) -> Result<Linker<PluginState>> {
    let mut linker = Linker::new(engine);
    PluginBase::add_to_linker::<PluginState, wasmtime::component::HasSelf<PluginState>>(
        &mut linker,
        |s| s,
    )
    .map_err(|e| Error::Load {
        plugin: "(linker)".into(),
        message: format!("{e:#}"),
    })?;
    Ok(linker)
}

fn new_store(
    engine: &Engine,
    id: PluginId,
    name: &str,
    limits: &PluginLimits,
) -> wasmtime::Store<PluginState> {
    let store_limits = StoreLimitsBuilder::new()
        .memory_size(limits.memory_bytes)
        .trap_on_grow_failure(true)
        .instances(4)
        .build();
    let ticks = (limits.time.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
    let mut store = wasmtime::Store::new(
        engine,
        PluginState::new(id, name.to_string(), store_limits, ticks),
    );
    store.limiter(|s| &mut s.limits);
    store.epoch_deadline_trap();
    store.set_epoch_deadline(ticks);
    store
}

fn instantiate(
    pre: &InstancePre<PluginState>,
    store: &mut wasmtime::Store<PluginState>,
    name: &str,
) -> Result<(Instance, PluginBase)> {
    let load_err = |what: &str, e: wasmtime::Error| Error::Load {
        plugin: name.to_string(),
        message: format!("{what}: {e:#}"),
    };
    let ticks = store.data().deadline_ticks;
    store.set_epoch_deadline(ticks);
    let instance = pre
        .instantiate(&mut *store)
        .map_err(|e| load_err("cannot instantiate", e))?;
    let guest = PluginBase::new(&mut *store, &instance)
        .map_err(|e| load_err("does not export `weft:plugin/plugin`", e))?;
    Ok((instance, guest))
}

fn kernel_source(
    pre: &InstancePre<PluginState>,
    id: PluginId,
    name: &str,
    limits: &PluginLimits,
) -> Result<Box<KernelSource>> {
    let mut store = new_store(pre.engine(), id, name, limits);
    let (_, guest) = instantiate(pre, &mut store, name)?;
    Ok(Box::new(KernelSource {
        store,
        guest,
        pre: pre.clone(),
        limits: limits.clone(),
    }))
}

impl Plugin {
    /// Instantiates a compiled component as plugin `id`, and asks its name and version.
    pub fn new(
        linker: &Linker<PluginState>,
        component: Component,
        id: PluginId,
        label: &str,
        limits: PluginLimits,
    ) -> Result<Plugin> {
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| Error::Load {
                plugin: label.to_string(),
                message: format!("its imports do not match the host: {e:#}"),
            })?;
        let engine = component.engine().clone();
        let mut store = new_store(&engine, id, label, &limits);
        let (instance, guest) = instantiate(&pre, &mut store, label)?;
        let ask = |what: &str, e: wasmtime::Error| Error::Load {
            plugin: label.to_string(),
            message: format!("`{what}` failed: {e:#}"),
        };
        let name = guest
            .weft_plugin_plugin()
            .call_name(&mut store)
            .map_err(|e| ask("name", e))?;
        let version = guest
            .weft_plugin_plugin()
            .call_version(&mut store)
            .map_err(|e| ask("version", e))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::Load {
                plugin: label.to_string(),
                message: format!("its name {name:?} is not a plain identifier"),
            });
        }
        store.data_mut().name = name.clone();
        store.data_mut().kernels = Some(kernel_source(&pre, id, &name, &limits)?);
        Ok(Plugin {
            name,
            version,
            id,
            component,
            pre,
            limits,
            store,
            instance,
            guest,
            generation: 0,
        })
    }

    /// Calls into the plugin with the core moved into its store; `call` names the export for
    /// errors. A fault resets the instance.
    pub fn call<R>(
        &mut self,
        core: &mut Option<Box<Core>>,
        call: &str,
        f: impl FnOnce(&mut wasmtime::Store<PluginState>, &Instance, &PluginBase) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let ticks = self.store.data().deadline_ticks;
        self.store.set_epoch_deadline(ticks);
        let mark = core.as_ref().map_or(0, |c| c.next_seq());
        self.store.data_mut().core = core.take();
        let result = f(&mut self.store, &self.instance, &self.guest);
        self.store.data_mut().forget_lent();
        *core = self.store.data_mut().core.take();
        match result {
            Ok(r) => Ok(r),
            Err(e) => {
                let fault = self.describe_fault(&e);
                if let Some(c) = core.as_deref_mut() {
                    c.truncate_window(mark);
                }
                self.reset(core.as_deref_mut())?;
                Err(Error::PluginFault {
                    plugin: self.name.clone(),
                    call: call.to_string(),
                    fault,
                })
            }
        }
    }

    fn describe_fault(&self, e: &wasmtime::Error) -> String {
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => format!(
                "ran past its time limit of {} ms and was stopped",
                self.limits.time.as_millis()
            ),
            Some(wasmtime::Trap::UnreachableCodeReached) => {
                "trapped: unreachable code reached (a panic in the plugin)".to_string()
            }
            Some(trap) => format!("trapped: {trap}"),
            None => {
                let text = format!("{e:#}");
                if text.contains("memory") && text.contains("grow") {
                    format!(
                        "tried to grow its memory past the cap of {} bytes ({text})",
                        self.limits.memory_bytes
                    )
                } else {
                    format!("failed: {text}")
                }
            }
        }
    }

    /// Throws the instance away and makes a fresh one; the old instance's store handles are
    /// released.
    pub fn reset(&mut self, core: Option<&mut Core>) -> Result<()> {
        let engine = self.component.engine().clone();
        let mut store = new_store(&engine, self.id, &self.name, &self.limits);
        let (instance, guest) = instantiate(&self.pre, &mut store, &self.name)?;
        let old = std::mem::replace(&mut self.store, store);
        let mut old_state = old.into_data();
        if let Some(core) = core {
            for id in old_state.handles.values() {
                core.stores.release(*id);
            }
        }
        // The kernel source only answers pure `kernel` calls; keep it unless it is the one that
        // failed, in which case make a new one.
        let source = match old_state.kernels.take() {
            Some(k) => k,
            None => kernel_source(&self.pre, self.id, &self.name, &self.limits)?,
        };
        self.store.data_mut().kernels = Some(source);
        self.instance = instance;
        self.guest = guest;
        self.generation += 1;
        Ok(())
    }
}
