//! Weft's plugin host: Wasm components loaded under limits, the host side of the WIT
//! interfaces they import, and calls into them (typed, through [`bindings`], or dynamic,
//! through [`Value`]s).
//!
//! Every plugin runs in its own wasmtime store with a memory cap and an epoch deadline. A call
//! that traps, runs past its deadline or grows past its cap becomes an [`Error::Fault`] that
//! names the plugin and the call and says which [`Fault`] it was; the instance is then thrown
//! away and a fresh one is made from the plugin's `InstancePre`, so the plugin is usable again
//! at once, and the tasks the failed call had submitted are dropped.
//!
//! During a call the runtime core ([`weft_runtime::Core`]) moves into the plugin's store, so
//! that the host imports ([`imports`]) reach it without locks; it moves back when the call
//! returns.
//!
//! It depends on `weft-runtime`, `weft-ir` and wasmtime, and must not depend on a back end,
//! the planner or the application facade.

#![deny(missing_docs)]

pub mod bindings;
pub mod cache;
pub mod convert;
pub mod dynamic;
mod error;
pub mod imports;
pub mod limits;
mod plugin;
pub mod replay;
pub mod ticker;
mod value_conversions;

use std::path::PathBuf;

use wasmtime::component::{Instance, Linker};
use wasmtime::{Engine, Store};
use weft_runtime::{Core, PluginId};

pub use dynamic::Value;
pub use error::{Error, Fault, Result};
pub use imports::PluginState;
pub use limits::{MemoryCapExceeded, PluginLimits};

use bindings::base::PluginBase;
use cache::ComponentCache;
use plugin::Plugin;
use ticker::EpochTicker;

/// The runtime core as a plugin call borrows it: present between calls, moved into the
/// plugin's store during one.
pub type CoreSlot = Option<Box<Core>>;

/// The plugins of one runtime: a wasmtime engine, the linker of the host imports, the cache of
/// compiled components, and the loaded plugins.
pub struct PluginHost {
    linker: Linker<PluginState>,
    cache: ComponentCache,
    plugins: Vec<Plugin>,
    limits: PluginLimits,
    _ticker: EpochTicker,
}

impl PluginHost {
    /// A host whose compiled components are cached in memory and, if given, under `cache_dir`;
    /// plugins loaded without limits of their own get `limits`.
    pub fn new(cache_dir: Option<PathBuf>, limits: PluginLimits) -> Result<PluginHost> {
        let mut wasm = wasmtime::Config::new();
        wasm.epoch_interruption(true);
        wasm.wasm_component_model(true);
        let engine = Engine::new(&wasm).map_err(|e| Error::Load {
            plugin: "(engine)".into(),
            message: format!("wasmtime: {e:#}"),
        })?;
        let linker = plugin::linker(&engine)?;
        let cache = ComponentCache::new(engine.clone(), cache_dir);
        Ok(PluginHost {
            linker,
            cache,
            plugins: Vec::new(),
            limits,
            _ticker: EpochTicker::start(engine)?,
        })
    }

    /// Loads a plugin from the bytes of a Wasm component, with the host's default limits.
    pub fn load(&mut self, bytes: &[u8]) -> Result<PluginId> {
        let limits = self.limits.clone();
        self.load_with_limits(bytes, limits)
    }

    /// Loads a plugin with its own limits. Names must be unique.
    pub fn load_with_limits(&mut self, bytes: &[u8], limits: PluginLimits) -> Result<PluginId> {
        let label = format!("component #{}", self.plugins.len());
        let component = self.cache.get(bytes, &label)?;
        let id = PluginId(self.plugins.len() as u32);
        let plugin = Plugin::new(&self.linker, component, id, &label, limits)?;
        if self.plugins.iter().any(|p| p.name == plugin.name) {
            return Err(Error::Load {
                plugin: plugin.name,
                message: "a plugin with this name is already loaded".into(),
            });
        }
        self.plugins.push(plugin);
        Ok(id)
    }

    /// The id of the loaded plugin with this name.
    pub fn plugin(&self, name: &str) -> Option<PluginId> {
        self.plugins.iter().find(|p| p.name == name).map(|p| p.id)
    }

    /// A loaded plugin's name and version.
    pub fn plugin_info(&self, id: PluginId) -> Option<(&str, &str)> {
        self.plugins
            .get(id.0 as usize)
            .map(|p| (p.name.as_str(), p.version.as_str()))
    }

    /// The name of a plugin, for errors.
    pub fn plugin_name(&self, id: PluginId) -> String {
        self.plugins
            .get(id.0 as usize)
            .map_or_else(|| format!("#{}", id.0), |p| p.name.clone())
    }

    /// How many times a plugin's instance was remade after a fault.
    pub fn plugin_generation(&self, id: PluginId) -> u64 {
        self.plugins.get(id.0 as usize).map_or(0, |p| p.generation)
    }

    /// Replays a recorded call of plugin `id` with `args` as its lent stores, on the core
    /// alone (see [`replay`]): the store the call returns, or `None`, or a
    /// [`replay::Miss`] (nothing done; make the real call). The tasks it submits carry the
    /// plugin's id, and the stores it makes count against the plugin's quota, as the real
    /// call's would.
    pub fn replay(
        &mut self,
        core: &mut CoreSlot,
        id: PluginId,
        recording: &replay::Recording,
        args: &[weft_runtime::StoreId],
    ) -> std::result::Result<Option<weft_runtime::StoreId>, replay::Miss> {
        let plugin = self.plugins.get(id.0 as usize).ok_or(replay::Miss)?;
        let core = core.as_deref_mut().ok_or(replay::Miss)?;
        core.collect_released();
        let caller = replay::Caller {
            id,
            name: &plugin.name,
            quota: plugin.store.data().store_quota,
        };
        recording.replay(core, caller, args)
    }

    /// How many components were compiled rather than found in the cache.
    pub fn components_compiled(&self) -> u64 {
        self.cache.compiled
    }

    /// Calls into a plugin with the core moved into its store: `f` gets the plugin's store
    /// (whose state lends and takes store handles), its instance and its `plugin` exports.
    /// `call` names the export in errors. A fault remakes the instance and drops the tasks the
    /// call submitted.
    pub fn with_plugin<R>(
        &mut self,
        core: &mut CoreSlot,
        id: PluginId,
        call: &str,
        f: impl FnOnce(&mut Store<PluginState>, &Instance, &PluginBase) -> wasmtime::Result<R>,
    ) -> Result<R> {
        if let Some(c) = core.as_deref_mut() {
            c.collect_released();
        }
        let plugin = self
            .plugins
            .get_mut(id.0 as usize)
            .ok_or_else(|| Error::Usage(format!("no plugin with id {}", id.0)))?;
        let span = tracing::info_span!("plugin call", plugin = plugin.name.as_str(), call);
        let _entered = span.enter();
        plugin.call(core, call, f)
    }
}
