//! The host's side of the `host` interface that plugins import, and the per-instance state
//! those imports work on.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use wasmtime::component::Resource;
use wasmtime::{StoreLimits, format_err};

use super::bindings::base::PluginBase;
use super::bindings::base::weft::plugin::{host, kernel_ir, types};
use super::convert;
use crate::runtime::core::Core;
use crate::runtime::stores::StoreId;
use crate::runtime::task::{IndexTask, KernelEntry, PluginId, check_against_kernel};

/// The host-side representative of a plugin's `store` handle; its `rep` keys the plugin's
/// handle table ([`PluginState::handles`]).
pub struct StoreRes;

/// A second instance of a plugin, used only to ask for kernel bodies while the first one is in
/// the middle of a call (the component model forbids re-entering an instance).
pub struct KernelSource {
    /// Its wasmtime store (its state has no core and no kernel source of its own).
    pub store: wasmtime::Store<PluginState>,
    /// Its exports.
    pub guest: PluginBase,
    /// What it is made from, to make it again after a fault.
    pub pre: wasmtime::component::InstancePre<PluginState>,
    /// Its limits.
    pub limits: crate::config::PluginLimits,
}

impl KernelSource {
    /// Asks for the body of kernel `key`; a fault remakes the instance.
    pub fn fetch(&mut self, key: &str) -> Result<kernel_ir::Kernel, String> {
        self.store
            .set_epoch_deadline(self.store.data().deadline_ticks);
        match self
            .guest
            .weft_plugin_plugin()
            .call_kernel_body(&mut self.store, key)
        {
            Ok(result) => result.map_err(|e| format!("kernel `{key}`: {}", e.message)),
            Err(e) => {
                let (id, name) = (self.store.data().id, self.store.data().name.clone());
                if let Ok(fresh) = super::kernel_source(&self.pre, id, &name, &self.limits) {
                    *self = *fresh;
                }
                Err(format!("trapped while producing kernel `{key}`: {e:#}"))
            }
        }
    }
}

/// The state of one plugin instance.
pub struct PluginState {
    /// The shared runtime state, present only while the plugin is being called.
    pub core: Option<Box<Core>>,
    /// The plugin's id.
    pub id: PluginId,
    /// The plugin's name.
    pub name: String,
    /// The plugin's store handles: resource rep to store.
    pub handles: HashMap<u32, StoreId>,
    next_rep: u32,
    /// The memory cap.
    pub limits: StoreLimits,
    /// Where kernel bodies come from.
    pub kernels: Option<Box<KernelSource>>,
    /// Epoch ticks a call may run.
    pub deadline_ticks: u64,
    /// Handles lent for the current call, forgotten when it returns.
    lent: Vec<u32>,
}

impl PluginState {
    /// Fresh state for an instance of plugin `id`.
    pub fn new(id: PluginId, name: String, limits: StoreLimits, deadline_ticks: u64) -> Self {
        PluginState {
            core: None,
            id,
            name,
            handles: HashMap::new(),
            next_rep: 0,
            limits,
            kernels: None,
            deadline_ticks,
            lent: Vec::new(),
        }
    }

    /// A new owned handle to `id` for the plugin (the caller has already counted it).
    pub fn own(&mut self, id: StoreId) -> Resource<StoreRes> {
        Resource::new_own(self.insert(id))
    }

    /// A borrowed handle to `id` for the length of one call; remove it with
    /// [`PluginState::forget_lent`] afterwards.
    pub fn lend(&mut self, id: StoreId) -> Resource<StoreRes> {
        let rep = self.insert(id);
        self.lent.push(rep);
        Resource::new_borrow(rep)
    }

    /// Drops an owned handle the host made (as the plugin's `drop` of it would): its entry goes
    /// and its store loses the handle's count.
    pub fn drop_owned(&mut self, r: &Resource<StoreRes>) -> wasmtime::Result<()> {
        if let Some(id) = self.handles.remove(&r.rep()) {
            self.core()?.stores.release(id);
        }
        Ok(())
    }

    /// Drops the entries of the handles lent for the call that just returned (the stores'
    /// counts are untouched).
    pub fn forget_lent(&mut self) {
        for rep in std::mem::take(&mut self.lent) {
            self.handles.remove(&rep);
        }
    }

    /// Takes an owned handle the plugin returned: the handle's count moves to the caller.
    pub fn take(&mut self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        self.handles
            .remove(&r.rep())
            .ok_or_else(|| format_err!("plugin `{}` returned an unknown store handle", self.name))
    }

    fn insert(&mut self, id: StoreId) -> u32 {
        loop {
            self.next_rep = self.next_rep.wrapping_add(1);
            if !self.handles.contains_key(&self.next_rep) {
                break;
            }
        }
        self.handles.insert(self.next_rep, id);
        self.next_rep
    }

    fn store_of(&self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        self.handles
            .get(&r.rep())
            .copied()
            .ok_or_else(|| format_err!("plugin `{}` used an unknown store handle", self.name))
    }

    fn core(&mut self) -> wasmtime::Result<&mut Core> {
        let name = &self.name;
        self.core.as_deref_mut().ok_or_else(|| {
            format_err!(
                "plugin `{name}` called the host outside a call (or while producing a kernel body)"
            )
        })
    }

    /// The kernel for `key`, from the cache or from the plugin's kernel source.
    fn kernel(&mut self, key: &str) -> Result<Arc<KernelEntry>, String> {
        let id = self.id;
        let core = self
            .core
            .as_deref_mut()
            .ok_or("no runtime during this call")?;
        if let Some(k) = core.kernels.get(&(id, key.to_string())) {
            return Ok(k.clone());
        }
        let source = self
            .kernels
            .as_deref_mut()
            .ok_or("no kernel source for this plugin")?;
        let wit = source.fetch(key)?;
        let flat = convert::flat_kernel(wit);
        let ir = weft_ir::flat::from_flat(&flat).map_err(|e| e.to_string())?;
        weft_ir::validate(&ir).map_err(|e| e.to_string())?;
        // Math functions become plain arithmetic in every kernel, fused or not, so results do
        // not depend on fusion or on the back end.
        let mut ir = weft_ir::passes::math::lower_math(&ir);
        let name = format!("{}.{key}", self.name);
        ir.name = name.clone();
        let entry = Arc::new(KernelEntry {
            id: core.new_kernel_id(),
            name,
            ir,
            compiled: OnceLock::new(),
        });
        core.kernels.insert((id, key.to_string()), entry.clone());
        Ok(entry)
    }
}

fn err(message: impl Into<String>) -> types::Error {
    types::Error {
        message: message.into(),
    }
}

impl types::Host for PluginState {}
impl kernel_ir::Host for PluginState {}

impl host::HostStore for PluginState {
    fn shape(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<Vec<u64>> {
        let id = self.store_of(&s)?;
        Ok(self.core()?.stores.get(id)?.shape.clone())
    }

    fn dtype(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<types::Dtype> {
        let id = self.store_of(&s)?;
        Ok(convert::wit_dtype(self.core()?.stores.get(id)?.dtype))
    }

    fn slice(
        &mut self,
        s: Resource<StoreRes>,
        start: Vec<u64>,
        stop: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let id = self.store_of(&s)?;
        match self.core()?.stores.slice(id, &start, &stop) {
            Ok(view) => Ok(Ok(self.own(view))),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }

    fn same_root(
        &mut self,
        a: Resource<StoreRes>,
        b: Resource<StoreRes>,
    ) -> wasmtime::Result<bool> {
        let (a, b) = (self.store_of(&a)?, self.store_of(&b)?);
        let stores = &self.core()?.stores;
        Ok(stores.get(a)?.storage == stores.get(b)?.storage)
    }

    fn drop(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<()> {
        self.drop_owned(&s)
    }
}

impl host::Host for PluginState {
    fn create_store(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        match self.core()?.stores.create(shape, convert::dtype(dtype)) {
            Ok(id) => Ok(Ok(self.own(id))),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }

    fn store_from_bytes(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let core = self.core()?;
        let id = match core.stores.create(shape, convert::dtype(dtype)) {
            Ok(id) => id,
            Err(e) => return Ok(Err(err(e.to_string()))),
        };
        if let Err(e) = core.write_bytes(id, &data) {
            core.stores.release(id);
            return Ok(Err(err(e.to_string())));
        }
        Ok(Ok(self.own(id)))
    }

    fn read_bytes(
        &mut self,
        s: Resource<StoreRes>,
    ) -> wasmtime::Result<Result<Vec<u8>, types::Error>> {
        let id = self.store_of(&s)?;
        Ok(self.core()?.read_bytes(id).map_err(|e| err(e.to_string())))
    }

    fn preferred_tiling(&mut self, shape: Vec<u64>) -> wasmtime::Result<(Vec<u64>, types::Tiling)> {
        let (launch, tiling) = self.core()?.preferred_tiling(&shape);
        Ok((launch, convert::wit_tiling(tiling)))
    }

    fn submit(&mut self, task: host::IndexTask) -> wasmtime::Result<Result<(), types::Error>> {
        let mut args = Vec::with_capacity(task.args.len());
        for arg in task.args {
            let store = self.store_of(&arg.store)?;
            args.push(Core::task_arg(
                store,
                convert::partition(arg.partition),
                convert::privilege(arg.privilege),
            ));
        }
        let kernel = match self.kernel(&task.kernel) {
            Ok(k) => k,
            Err(message) => return Ok(Err(err(message))),
        };
        let task = IndexTask {
            seq: 0,
            plugin: self.id,
            key: task.kernel,
            kernel: Some(kernel.clone()),
            launch: task.launch,
            args,
            scalars: task.scalars.into_iter().map(convert::scalar).collect(),
        };
        let core = self.core()?;
        let stores = &core.stores;
        if let Err(message) = check_against_kernel(&task, &kernel.ir, |id| {
            stores.get(id).ok().map(|i| (i.shape.len(), i.dtype))
        }) {
            return Ok(Err(err(message)));
        }
        Ok(core.submit(task).map_err(|e| err(e.to_string())))
    }
}
