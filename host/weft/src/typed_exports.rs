//! A plugin's typed exports (an interface of its own, such as `numeric` or `sparse`), as the
//! typed facades call them: the export handles are looked up once per instance and looked up
//! again after the instance is remade (a fault replaces it), and a plugin's error becomes an
//! `weft_plugin::Error::Plugin` naming the plugin and the call.

use std::cell::RefCell;

use wasmtime::component::{Instance, InstancePre};

use crate::runtime::Runtime;
use crate::{Error, Result};
use weft_plugin::PluginState;
use weft_plugin::bindings::base::weft::plugin::types as wit;
use weft_plugin::bindings::{numeric, sparse};
use weft_runtime::PluginId;

/// The generated index of an exported interface: it finds the interface in an instance.
pub(crate) trait ExportIndices: Sized {
    /// The typed handles of the interface's functions.
    type Guest;
    /// Finds the interface among a component's exports.
    fn new(pre: &InstancePre<PluginState>) -> wasmtime::Result<Self>;
    /// The handles in one instance.
    fn load(
        &self,
        store: &mut wasmtime::Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<Self::Guest>;
}

macro_rules! export_indices {
    ($($module:ident),*) => {
        $(
            impl ExportIndices for $module::exports::weft::plugin::$module::GuestIndices {
                type Guest = $module::exports::weft::plugin::$module::Guest;
                fn new(pre: &InstancePre<PluginState>) -> wasmtime::Result<Self> {
                    Self::new(pre)
                }
                fn load(
                    &self,
                    store: &mut wasmtime::Store<PluginState>,
                    instance: &Instance,
                ) -> wasmtime::Result<Self::Guest> {
                    Self::load(self, store, instance)
                }
            }
        )*
    };
}

export_indices!(numeric, sparse);

/// One loaded plugin's typed exports of the interface `I`.
pub(crate) struct TypedExports<I: ExportIndices> {
    /// The plugin.
    pub plugin: PluginId,
    /// Its name, as errors show it.
    name: &'static str,
    indices: I,
    /// The handles, and the instance generation they belong to.
    guest: RefCell<Option<(u64, I::Guest)>>,
}

impl<I: ExportIndices> TypedExports<I> {
    /// Loads the plugin `component` into `rt` and finds the interface in it.
    pub fn load(rt: &mut Runtime, component: &[u8], name: &'static str) -> Result<Self> {
        let plugin = rt.load(component)?;
        let indices = rt.with_plugin(plugin, &format!("load {name}"), |store, instance, _| {
            I::new(&instance.instance_pre(&*store))
        })?;
        Ok(TypedExports {
            plugin,
            name,
            indices,
            guest: RefCell::new(None),
        })
    }

    /// Calls an export: `f` gets the handles and the plugin's store.
    pub fn call<R>(
        &self,
        rt: &mut Runtime,
        call: &str,
        f: impl FnOnce(
            &I::Guest,
            &mut wasmtime::Store<PluginState>,
        ) -> wasmtime::Result<std::result::Result<R, wit::Error>>,
    ) -> Result<R> {
        let generation = rt.plugin_generation(self.plugin);
        let mut cached = self.guest.borrow_mut();
        let result = rt.with_plugin(self.plugin, call, |store, instance, _| {
            if cached.as_ref().is_none_or(|(g, _)| *g != generation) {
                *cached = Some((generation, self.indices.load(&mut *store, instance)?));
            }
            let Some((_, guest)) = cached.as_ref() else {
                wasmtime::bail!("{} exports are not loaded", self.name);
            };
            f(guest, store)
        })?;
        result.map_err(|e| {
            Error::from(weft_plugin::Error::Plugin {
                plugin: self.name.into(),
                call: call.to_string(),
                message: e.message,
            })
        })
    }
}
