//! One loaded plugin: its component, its live instance, and the calls into it under limits.

use wasmtime::Engine;
use wasmtime::component::{Component, Instance, InstancePre, Linker};
use weft_runtime::PluginId;

use crate::bindings::base::PluginBase;
use crate::imports::{KernelSource, PluginState};
use crate::limits::{Limiter, MemoryCapExceeded, PluginLimits, TableCapExceeded};
use crate::ticker::EPOCH_TICK;
use crate::{CoreSlot, Error, Fault, Result};

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

pub(crate) fn new_store(
    engine: &Engine,
    id: PluginId,
    name: &str,
    limits: &PluginLimits,
) -> wasmtime::Store<PluginState> {
    let store_limits = Limiter::new(limits);
    let ticks = (limits.time.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
    let mut store = wasmtime::Store::new(
        engine,
        PluginState::new(
            id,
            name.to_string(),
            store_limits,
            ticks,
            limits.store_bytes,
        ),
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

pub(crate) fn kernel_source(
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
        core: &mut CoreSlot,
        call: &str,
        f: impl FnOnce(&mut wasmtime::Store<PluginState>, &Instance, &PluginBase) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let ticks = self.store.data().deadline_ticks;
        self.store.set_epoch_deadline(ticks);
        let mark = core.as_ref().map_or(0, |c| c.next_seq());
        self.store.data_mut().core = core.take();
        // A panic below the call (in a host import, the runtime, a back end) is caught here,
        // so that the core comes back and the runtime stays usable.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(&mut self.store, &self.instance, &self.guest)
        }))
        .unwrap_or_else(|payload| Err(wasmtime::Error::new(HostPanicked::from(payload))));
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
                Err(Error::Fault {
                    plugin: self.name.clone(),
                    call: call.to_string(),
                    fault,
                })
            }
        }
    }

    /// What kind of fault `e` is, from its type.
    fn describe_fault(&self, e: &wasmtime::Error) -> Fault {
        if let Some(cap) = e.downcast_ref::<MemoryCapExceeded>() {
            return Fault::MemoryCap {
                cap: cap.cap,
                desired: cap.desired,
            };
        }
        if let Some(cap) = e.downcast_ref::<TableCapExceeded>() {
            return Fault::TableCap {
                desired: cap.desired,
            };
        }
        if let Some(panic) = e.downcast_ref::<HostPanicked>() {
            return Fault::HostPanic(panic.0.clone());
        }
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => Fault::Timeout {
                limit: self.limits.time,
            },
            Some(wasmtime::Trap::UnreachableCodeReached) => Fault::Panic,
            Some(trap) => Fault::Trap(*trap),
            None => Fault::Host(format!("{e:#}")),
        }
    }

    /// Throws the instance away and makes a fresh one; the old instance's store handles are
    /// released.
    pub fn reset(&mut self, core: Option<&mut weft_runtime::Core>) -> Result<()> {
        let engine = self.component.engine().clone();
        let mut store = new_store(&engine, self.id, &self.name, &self.limits);
        let (instance, guest) = instantiate(&self.pre, &mut store, &self.name)?;
        let old = std::mem::replace(&mut self.store, store);
        let mut old_state = old.into_data();
        if let Some(core) = core {
            for id in old_state.held_stores() {
                core.release(id);
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

/// A panic below a plugin call, caught at the call's boundary.
#[derive(Debug, thiserror::Error)]
#[error("the host panicked: {0}")]
struct HostPanicked(String);

impl From<Box<dyn std::any::Any + Send>> for HostPanicked {
    fn from(payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        HostPanicked(message)
    }
}
