//! The host's side of the `host` interface that plugins import, and the per-instance state
//! those imports work on.

use std::sync::Arc;

use wasmtime::component::{Resource, ResourceTable};
use wasmtime::format_err;
use weft_runtime::{Core, IndexTask, KernelEntry, PluginId, StoreId, TaskArg};

use crate::bindings::base::PluginBase;
use crate::bindings::base::weft::plugin::{host, kernel_ir, types};
use crate::convert;
use crate::limits::{Limiter, PluginLimits};

/// The entry of a plugin's `store` handle in its [`ResourceTable`]
/// ([`PluginState::handles`]): the store it names.
#[derive(Debug)]
pub struct StoreRes {
    /// The store.
    pub id: StoreId,
}

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
    pub limits: PluginLimits,
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
                if let Ok(fresh) = crate::plugin::kernel_source(&self.pre, id, &name, &self.limits)
                {
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
    /// The plugin's store handles.
    pub handles: ResourceTable,
    /// The memory cap.
    pub limits: Limiter,
    /// Where kernel bodies come from.
    pub kernels: Option<Box<KernelSource>>,
    /// Epoch ticks a call may run.
    pub deadline_ticks: u64,
    /// Handles lent for the current call, forgotten when it returns.
    lent: Vec<u32>,
}

impl PluginState {
    /// Fresh state for an instance of plugin `id`.
    pub fn new(id: PluginId, name: String, limits: Limiter, deadline_ticks: u64) -> Self {
        PluginState {
            core: None,
            id,
            name,
            handles: ResourceTable::new(),
            limits,
            kernels: None,
            deadline_ticks,
            lent: Vec::new(),
        }
    }

    /// A new owned handle to `id` for the plugin (the caller has already counted it).
    pub fn own(&mut self, id: StoreId) -> wasmtime::Result<Resource<StoreRes>> {
        self.handles.push(StoreRes { id }).map_err(|e| {
            format_err!(
                "plugin `{}`: no room for another store handle: {e}",
                self.name
            )
        })
    }

    /// A borrowed handle to `id` for the length of one call; remove it with
    /// [`PluginState::forget_lent`] afterwards.
    pub fn lend(&mut self, id: StoreId) -> wasmtime::Result<Resource<StoreRes>> {
        let owned = self.own(id)?;
        self.lent.push(owned.rep());
        Ok(Resource::new_borrow(owned.rep()))
    }

    /// Drops an owned handle (as the plugin's `drop` of it, or the host's after lending it):
    /// its entry goes and its store loses the handle's count.
    pub fn drop_owned(&mut self, r: Resource<StoreRes>) -> wasmtime::Result<()> {
        let rep = r.rep();
        if let Ok(entry) = self.handles.delete(Resource::<StoreRes>::new_own(rep)) {
            self.core()?.release(entry.id);
        }
        Ok(())
    }

    /// Drops the entries of the handles lent for the call that just returned (the stores'
    /// counts are untouched).
    pub fn forget_lent(&mut self) {
        for rep in std::mem::take(&mut self.lent) {
            // An entry the plugin already dropped is gone; nothing else to do.
            let _ = self.handles.delete(Resource::<StoreRes>::new_own(rep));
        }
    }

    /// Takes an owned handle the plugin returned: the handle's count moves to the caller.
    pub fn take(&mut self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        self.handles
            .delete(Resource::<StoreRes>::new_own(r.rep()))
            .map(|entry| entry.id)
            .map_err(|_| format_err!("plugin `{}` returned an unknown store handle", self.name))
    }

    /// Every store an entry of the handle table names (to release them when the instance is
    /// thrown away).
    pub fn held_stores(&mut self) -> Vec<StoreId> {
        self.handles
            .iter_mut()
            .filter_map(|entry| entry.downcast_mut::<StoreRes>().map(|e| e.id))
            .collect()
    }

    fn store_of(&self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        self.handles
            .get(r)
            .map(|entry| entry.id)
            .map_err(|_| format_err!("plugin `{}` used an unknown store handle", self.name))
    }

    fn core(&mut self) -> wasmtime::Result<&mut Core> {
        let name = &self.name;
        self.core.as_deref_mut().ok_or_else(|| {
            format_err!(
                "plugin `{name}` called the host outside a call (or while producing a kernel body)"
            )
        })
    }

    /// The kernel for `key`: from the core's cache, or from the plugin's kernel source
    /// through the core's kernel intake.
    fn kernel(&mut self, key: &str) -> weft_runtime::Result<Arc<KernelEntry>> {
        let (id, name) = (self.id, self.name.clone());
        let source = self.kernels.as_deref_mut();
        let core = self.core.as_deref_mut().ok_or_else(|| {
            weft_runtime::Error::Internal(format!("plugin `{name}`: no runtime during this call"))
        })?;
        core.kernel(id, &name, key, || {
            let source = source.ok_or("no kernel source for this plugin")?;
            source.fetch(key).map(convert::flat_kernel)
        })
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
        Ok(self.core()?.stores().get(id)?.shape.clone())
    }

    fn dtype(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<types::Dtype> {
        let id = self.store_of(&s)?;
        Ok(convert::wit_dtype(self.core()?.stores().get(id)?.dtype))
    }

    fn slice(
        &mut self,
        s: Resource<StoreRes>,
        start: Vec<u64>,
        stop: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let id = self.store_of(&s)?;
        match self.core()?.slice(id, &start, &stop) {
            Ok(view) => Ok(Ok(self.own(view)?)),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }

    fn strided(
        &mut self,
        s: Resource<StoreRes>,
        start: Vec<u64>,
        step: Vec<i64>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, |m| m.strided(&start, &step, &shape))
    }

    fn permute(
        &mut self,
        s: Resource<StoreRes>,
        axes: Vec<u32>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, |m| m.permute(&axes))
    }

    fn broadcast_to(
        &mut self,
        s: Resource<StoreRes>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, |m| m.broadcast_to(&shape))
    }

    fn reshape(
        &mut self,
        s: Resource<StoreRes>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Option<Resource<StoreRes>>, types::Error>> {
        let id = self.store_of(&s)?;
        match self.core()?.reshape(id, &shape) {
            Ok(Some(view)) => Ok(Ok(Some(self.own(view)?))),
            Ok(None) => Ok(Ok(None)),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }

    fn may_overlap(
        &mut self,
        a: Resource<StoreRes>,
        b: Resource<StoreRes>,
    ) -> wasmtime::Result<bool> {
        let (a, b) = (self.store_of(&a)?, self.store_of(&b)?);
        let stores = self.core()?.stores();
        let (a, b) = (stores.get(a)?, stores.get(b)?);
        let root = stores.storage(a.storage).map(|s| s.shape.as_slice());
        Ok(a.storage == b.storage && root.is_none_or(|root| a.map.may_overlap(&b.map, root)))
    }

    fn same_root(
        &mut self,
        a: Resource<StoreRes>,
        b: Resource<StoreRes>,
    ) -> wasmtime::Result<bool> {
        let (a, b) = (self.store_of(&a)?, self.store_of(&b)?);
        let stores = self.core()?.stores();
        Ok(stores.get(a)?.storage == stores.get(b)?.storage)
    }

    fn drop(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<()> {
        self.drop_owned(s)
    }
}

impl PluginState {
    /// A handle to the view `make` makes of `s`'s map, or the error that made it impossible.
    fn view_of(
        &mut self,
        s: &Resource<StoreRes>,
        make: impl FnOnce(
            &weft_runtime::ViewMap,
        )
            -> std::result::Result<weft_runtime::ViewMap, weft_runtime::ViewError>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let id = self.store_of(s)?;
        match self.core()?.view(id, make) {
            Ok(view) => Ok(Ok(self.own(view)?)),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }
}

impl host::Host for PluginState {
    fn create_store(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        match self.core()?.create_store(shape, convert::dtype(dtype)) {
            Ok(id) => Ok(Ok(self.own(id)?)),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
    }

    fn store_from_bytes(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        match self
            .core()?
            .store_from_bytes(shape, convert::dtype(dtype), &data)
        {
            Ok(id) => Ok(Ok(self.own(id)?)),
            Err(e) => Ok(Err(err(e.to_string()))),
        }
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
            args.push(TaskArg::new(
                store,
                convert::partition(arg.partition),
                convert::privilege(arg.privilege),
            ));
        }
        let kernel = match self.kernel(&task.kernel) {
            Ok(k) => k,
            Err(e) => return Ok(Err(err(e.to_string()))),
        };
        let scalars = task.scalars.into_iter().map(convert::scalar).collect();
        let task = IndexTask::new(self.id, kernel, task.launch, args, scalars);
        Ok(self.core()?.submit(task).map_err(|e| err(e.to_string())))
    }
}
