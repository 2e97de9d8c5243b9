//! The runtime: stores, partitions, index tasks, the window and the executor, and the
//! [`Runtime`] that applications hold.

pub mod core;
pub mod executor;
pub mod mapping;
pub mod partition;
pub mod stores;
pub mod task;
pub mod trace;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use wasmtime::component::{Instance, Linker};
use wasmtime::{Engine, Store};

use crate::config::{Config, PluginLimits};
use crate::plugin::bindings::base::PluginBase;
use crate::plugin::cache::ComponentCache;
use crate::plugin::imports::PluginState;
use crate::plugin::{EPOCH_TICK, Plugin};
use crate::{Error, Result};
use core::{Core, Stats};
use stores::StoreId;
pub use task::PluginId;

/// An application's handle to a store. Clones share one handle; when the last clone is dropped
/// the runtime is told, which (once no pending task needs the store) frees it.
#[derive(Clone)]
pub struct StoreHandle(Arc<HandleInner>);

struct HandleInner {
    id: StoreId,
    released: Sender<StoreId>,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        // The runtime may be gone already; then there is nothing to free.
        let _ = self.released.send(self.id);
    }
}

impl StoreHandle {
    /// The store's id.
    pub fn id(&self) -> StoreId {
        self.0.id
    }
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreHandle({})", self.0.id.0)
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Result<EpochTicker> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weft-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(|e| Error::Usage(format!("cannot start the epoch thread: {e}")))?;
        Ok(EpochTicker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A Weft runtime: the plugins it loaded, their stores, and the window of pending tasks.
pub struct Runtime {
    linker: Linker<PluginState>,
    cache: ComponentCache,
    plugins: Vec<Plugin>,
    core: Option<Box<Core>>,
    released: (Sender<StoreId>, Receiver<StoreId>),
    _ticker: EpochTicker,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(core) = self.core.as_deref_mut() {
            // Run what is still pending, so that the trace is whole; errors have no one to
            // go to now.
            let _ = core.flush();
            if let Some(trace) = &core.trace
                && let Err(e) = trace.write()
            {
                eprintln!("weft: cannot write the trace: {e}");
            }
        }
    }
}

impl Runtime {
    /// A runtime with this configuration.
    pub fn new(config: Config) -> Result<Runtime> {
        let mut wasm = wasmtime::Config::new();
        wasm.epoch_interruption(true);
        wasm.wasm_component_model(true);
        let engine = Engine::new(&wasm).map_err(|e| Error::Usage(format!("wasmtime: {e:#}")))?;
        let linker = crate::plugin::linker(&engine)?;
        let cache = ComponentCache::new(engine.clone(), config.component_cache.clone());
        Ok(Runtime {
            linker,
            cache,
            plugins: Vec::new(),
            core: Some(Box::new(Core::new(config)?)),
            released: channel(),
            _ticker: EpochTicker::start(engine)?,
        })
    }

    fn core(&mut self) -> &mut Core {
        // The core is out only during a plugin call, which holds `&mut self`.
        self.core
            .as_deref_mut()
            .expect("the runtime core is present between plugin calls")
    }

    /// Frees the stores whose last application handle was dropped.
    fn collect_released(&mut self) {
        let ids: Vec<StoreId> = self.released.1.try_iter().collect();
        let core = self.core();
        for id in ids {
            core.stores.release(id);
        }
    }

    /// Loads a plugin from the bytes of a Wasm component, with the configured limits.
    pub fn load(&mut self, bytes: &[u8]) -> Result<PluginId> {
        let limits = self.core().config.plugin_limits.clone();
        self.load_with_limits(bytes, limits)
    }

    /// Loads a plugin with its own limits. A plugin with the same name replaces nothing: names
    /// must be unique.
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

    /// How many components were compiled rather than found in the cache.
    pub fn components_compiled(&self) -> u64 {
        self.cache.compiled
    }

    /// Calls into a plugin: `f` gets the plugin's store (whose state lends and takes store
    /// handles), its instance and its `plugin` exports. `call` names the export in errors.
    pub fn with_plugin<R>(
        &mut self,
        id: PluginId,
        call: &str,
        f: impl FnOnce(&mut Store<PluginState>, &Instance, &PluginBase) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.collect_released();
        let plugin = self
            .plugins
            .get_mut(id.0 as usize)
            .ok_or_else(|| Error::Usage(format!("no plugin with id {}", id.0)))?;
        plugin.call(&mut self.core, call, f)
    }

    /// How many times a plugin's instance was remade after a fault.
    pub fn plugin_generation(&self, id: PluginId) -> u64 {
        self.plugins.get(id.0 as usize).map_or(0, |p| p.generation)
    }

    /// The name of a plugin, for errors.
    pub fn plugin_name(&self, id: PluginId) -> String {
        self.plugins
            .get(id.0 as usize)
            .map_or_else(|| format!("#{}", id.0), |p| p.name.clone())
    }

    /// A handle for a store the caller already counted (one handle).
    pub fn adopt(&self, id: StoreId) -> StoreHandle {
        StoreHandle(Arc::new(HandleInner {
            id,
            released: self.released.0.clone(),
        }))
    }

    /// Counts one more handle on a store, for handing it to a plugin as an owned handle.
    pub fn retain(&mut self, id: StoreId) -> Result<()> {
        self.core().stores.retain(id)
    }

    /// Creates a store from host data, without any plugin.
    pub fn store_from_bytes(
        &mut self,
        shape: &[u64],
        dtype: weft_ir::DType,
        data: &[u8],
    ) -> Result<StoreHandle> {
        self.collect_released();
        let core = self.core();
        let id = core.stores.create(shape.to_vec(), dtype)?;
        if let Err(e) = core.write_bytes(id, data) {
            core.stores.release(id);
            return Err(e);
        }
        Ok(self.adopt(id))
    }

    /// A store's shape.
    pub fn shape(&mut self, s: &StoreHandle) -> Result<Vec<u64>> {
        Ok(self.core().stores.get(s.id())?.shape.clone())
    }

    /// A store's element type.
    pub fn dtype(&mut self, s: &StoreHandle) -> Result<weft_ir::DType> {
        Ok(self.core().stores.get(s.id())?.dtype)
    }

    /// A store's elements as little-endian bytes in row-major order. This runs the pending
    /// tasks first.
    pub fn read_bytes(&mut self, s: &StoreHandle) -> Result<Vec<u8>> {
        self.collect_released();
        self.core().read_bytes(s.id())
    }

    /// Runs every pending task.
    pub fn flush(&mut self) -> Result<()> {
        self.collect_released();
        self.core().flush()
    }

    /// Counters of what the runtime did.
    pub fn stats(&mut self) -> Stats {
        self.core().stats
    }

    /// Number of stores alive, and bytes of storage allocated.
    pub fn memory(&mut self) -> (usize, u64) {
        self.collect_released();
        let stores = &self.core().stores;
        (stores.len(), stores.allocated_bytes())
    }

    /// The configuration.
    pub fn config(&mut self) -> &Config {
        &self.core().config
    }

    /// Turns fusion on or off (pending tasks are run first).
    pub fn set_fusion(&mut self, on: bool) -> Result<()> {
        self.flush()?;
        self.core().config.fusion = on;
        Ok(())
    }

    /// Turns the gathering of fusion explanations on or off; see
    /// [`Runtime::take_explanations`].
    pub fn set_explain(&mut self, on: bool) {
        self.core().config.explain = on;
    }

    /// The fusion explanations gathered since the last call: one text per window prefix run.
    pub fn take_explanations(&mut self) -> Vec<String> {
        self.core().take_explanations()
    }

    /// Makes compiling any kernel an error from now on (or allows it again). Tests use it to
    /// show that a loop in steady state compiles nothing.
    pub fn forbid_compiles(&mut self, forbid: bool) {
        self.core().forbid_compiles = forbid;
    }

    /// Marks the end of an application's warm-up: with `WEFT_FORBID_COMPILES_AFTER_WARMUP=1`
    /// in the environment, compiling a kernel after this point is an error.
    pub fn warmed_up(&mut self) {
        if std::env::var("WEFT_FORBID_COMPILES_AFTER_WARMUP").is_ok_and(|v| v.trim() == "1") {
            self.forbid_compiles(true);
        }
    }

    /// How many submitted tasks are waiting in the window.
    pub fn pending_tasks(&mut self) -> usize {
        self.collect_released();
        self.core().window.len()
    }

    /// Counters of the fusion layer.
    pub fn fusion_stats(&mut self) -> crate::fusion::FusionStats {
        self.core().fuser.stats
    }
}
