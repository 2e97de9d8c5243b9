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
use crate::replay::{Event, Recorder, SubmitEvent, ViewOp};

/// The entry of a plugin's `store` handle in its [`ResourceTable`]
/// ([`PluginState::handles`]): the store it names and what the plugin may do with it.
#[derive(Debug, Clone, Copy)]
pub struct StoreRes {
    /// The store.
    pub id: StoreId,
    /// Whether tasks the plugin submits may write the store through this handle. Views made
    /// from the handle inherit it.
    pub writable: bool,
    /// Whether the handle comes from a store lent for one call (the lent handle itself, or a
    /// view made from one). Such handles are revoked when the call returns.
    pub from_lent: bool,
    /// Whether it was revoked: its count on the store was given back, and every use of it
    /// fails. The entry stays until the plugin drops the handle, so that its slot is not
    /// reused while the plugin still holds it.
    pub revoked: bool,
}

impl StoreRes {
    /// A writable handle of the plugin's own.
    pub fn owned(id: StoreId) -> StoreRes {
        StoreRes {
            id,
            writable: true,
            from_lent: false,
            revoked: false,
        }
    }

    /// A handle to a store lent for one call, writable or read-only.
    pub fn lent(id: StoreId, writable: bool) -> StoreRes {
        StoreRes {
            id,
            writable,
            from_lent: true,
            revoked: false,
        }
    }

    /// A handle to `view`, a view made from the store this handle names: the same rights.
    fn derived(&self, view: StoreId) -> StoreRes {
        StoreRes { id: view, ..*self }
    }
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
    /// The most bytes the stores the plugin creates may hold at once.
    pub store_quota: u64,
    /// Handles lent for the current call, forgotten when it returns.
    lent: Vec<u32>,
    /// The recording of the current call, when the caller asked for one
    /// ([`crate::replay`]).
    pub recorder: Option<Box<Recorder>>,
}

impl PluginState {
    /// Fresh state for an instance of plugin `id`.
    pub fn new(
        id: PluginId,
        name: String,
        limits: Limiter,
        deadline_ticks: u64,
        store_quota: u64,
    ) -> Self {
        PluginState {
            core: None,
            id,
            name,
            handles: ResourceTable::new(),
            limits,
            kernels: None,
            deadline_ticks,
            store_quota,
            lent: Vec::new(),
            recorder: None,
        }
    }

    /// A new owned, writable handle to `id` for the plugin (the caller has already counted
    /// it).
    pub fn own(&mut self, id: StoreId) -> wasmtime::Result<Resource<StoreRes>> {
        self.own_entry(StoreRes::owned(id))
    }

    /// A new owned handle with this entry (the caller has already counted its store).
    pub fn own_entry(&mut self, entry: StoreRes) -> wasmtime::Result<Resource<StoreRes>> {
        self.handles.push(entry).map_err(|e| {
            format_err!(
                "plugin `{}`: no room for another store handle: {e}",
                self.name
            )
        })
    }

    /// A borrowed, writable handle to `id` for the length of one call; remove it with
    /// [`PluginState::forget_lent`] afterwards.
    pub fn lend(&mut self, id: StoreId) -> wasmtime::Result<Resource<StoreRes>> {
        let owned = self.own_entry(StoreRes::lent(id, true))?;
        self.lent.push(owned.rep());
        if let Some(r) = self.recorder.as_deref_mut() {
            r.lend(owned.rep(), id);
        }
        Ok(Resource::new_borrow(owned.rep()))
    }

    /// Drops an owned handle (as the plugin's `drop` of it, or the host's after lending it):
    /// its entry goes and its store loses the handle's count (a revoked handle gave its
    /// count back already).
    pub fn drop_owned(&mut self, r: Resource<StoreRes>) -> wasmtime::Result<()> {
        let rep = r.rep();
        if let Some(rec) = self.recorder.as_deref_mut() {
            rec.drop_handle(rep);
        }
        if let Ok(entry) = self.handles.delete(Resource::<StoreRes>::new_own(rep))
            && !entry.revoked
        {
            self.core()?.release(entry.id);
        }
        Ok(())
    }

    /// Ends the lending of the call that just returned: drops the entries of the handles
    /// lent to it (the stores' counts are untouched), and revokes every handle the plugin
    /// still holds that was made from a lent store (a view it kept), giving back its count.
    /// The plugin keeps only what it created itself or was handed as its own.
    pub fn forget_lent(&mut self) {
        for rep in std::mem::take(&mut self.lent) {
            // An entry the plugin already dropped is gone; nothing else to do.
            let _ = self.handles.delete(Resource::<StoreRes>::new_own(rep));
        }
        let mut revoked = Vec::new();
        for entry in self.handles.iter_mut() {
            if let Some(e) = entry.downcast_mut::<StoreRes>()
                && e.from_lent
                && !e.revoked
            {
                e.revoked = true;
                revoked.push(e.id);
            }
        }
        if let Some(core) = self.core.as_deref_mut() {
            for id in revoked {
                core.release(id);
            }
        }
    }

    /// Takes an owned handle the plugin returned: the handle's count moves to the caller.
    pub fn take(&mut self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        if let Some(rec) = self.recorder.as_deref_mut() {
            rec.returned(r.rep());
        }
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
            .filter_map(|entry| entry.downcast_mut::<StoreRes>())
            .filter(|e| !e.revoked)
            .map(|e| e.id)
            .collect()
    }

    /// The entry of a live handle: an unknown or revoked handle is a fault of the plugin.
    fn entry_of(&self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreRes> {
        let entry = self
            .handles
            .get(r)
            .map_err(|_| format_err!("plugin `{}` used an unknown store handle", self.name))?;
        if entry.revoked {
            wasmtime::bail!(
                "plugin `{}` used a revoked store handle: a view of a store that was lent to \
                 it for a call that has returned",
                self.name
            );
        }
        Ok(*entry)
    }

    fn store_of(&self, r: &Resource<StoreRes>) -> wasmtime::Result<StoreId> {
        self.entry_of(r).map(|e| e.id)
    }

    /// Records an event about handle `rep`, made by `event` from its slot (when recording).
    fn record(&mut self, rep: u32, event: impl FnOnce(crate::replay::Slot) -> Event) {
        if let Some(rec) = self.recorder.as_deref_mut()
            && let Some(slot) = rec.slot(rep)
        {
            rec.push(event(slot));
        }
    }

    /// Records that the call cannot be replayed (when recording).
    fn spoil(&mut self) {
        if let Some(rec) = self.recorder.as_deref_mut() {
            rec.spoil();
        }
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
        let shape = self.core()?.stores().get(id)?.shape.clone();
        self.record(s.rep(), |slot| Event::Shape(slot, shape.clone()));
        Ok(shape)
    }

    fn dtype(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<types::Dtype> {
        let id = self.store_of(&s)?;
        let dtype = self.core()?.stores().get(id)?.dtype;
        self.record(s.rep(), |slot| Event::Dtype(slot, dtype));
        Ok(convert::wit_dtype(dtype))
    }

    fn slice(
        &mut self,
        s: Resource<StoreRes>,
        start: Vec<u64>,
        stop: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, ViewOp::Slice(start, stop))
    }

    fn strided(
        &mut self,
        s: Resource<StoreRes>,
        start: Vec<u64>,
        step: Vec<i64>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, ViewOp::Strided(start, step, shape))
    }

    fn permute(
        &mut self,
        s: Resource<StoreRes>,
        axes: Vec<u32>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, ViewOp::Permute(axes))
    }

    fn broadcast_to(
        &mut self,
        s: Resource<StoreRes>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        self.view_of(&s, ViewOp::Broadcast(shape))
    }

    fn reshape(
        &mut self,
        s: Resource<StoreRes>,
        shape: Vec<u64>,
    ) -> wasmtime::Result<Result<Option<Resource<StoreRes>>, types::Error>> {
        let entry = self.entry_of(&s)?;
        match self.core()?.reshape(entry.id, &shape) {
            Ok(Some(view)) => {
                let handle = self.own_entry(entry.derived(view))?;
                if let Some(rec) = self.recorder.as_deref_mut()
                    && let Some(slot) = rec.slot(s.rep())
                {
                    rec.made(handle.rep(), Event::Reshape(slot, shape, true));
                }
                Ok(Ok(Some(handle)))
            }
            Ok(None) => {
                self.record(s.rep(), |slot| Event::Reshape(slot, shape, false));
                Ok(Ok(None))
            }
            Err(e) => {
                self.spoil();
                Ok(Err(err(e.to_string())))
            }
        }
    }

    fn may_overlap(
        &mut self,
        a: Resource<StoreRes>,
        b: Resource<StoreRes>,
    ) -> wasmtime::Result<bool> {
        let (x, y) = (self.store_of(&a)?, self.store_of(&b)?);
        let answer = crate::replay::may_overlap(self.core()?, x, y)?;
        self.record_pair(&a, &b, |x, y| Event::MayOverlap(x, y, answer));
        Ok(answer)
    }

    fn same_root(
        &mut self,
        a: Resource<StoreRes>,
        b: Resource<StoreRes>,
    ) -> wasmtime::Result<bool> {
        let (x, y) = (self.store_of(&a)?, self.store_of(&b)?);
        let answer = crate::replay::same_root(self.core()?, x, y)?;
        self.record_pair(&a, &b, |x, y| Event::SameRoot(x, y, answer));
        Ok(answer)
    }

    fn drop(&mut self, s: Resource<StoreRes>) -> wasmtime::Result<()> {
        self.drop_owned(s)
    }
}

impl PluginState {
    /// A handle to the view `op` of `s`, or the error that made it impossible.
    fn view_of(
        &mut self,
        s: &Resource<StoreRes>,
        op: ViewOp,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let entry = self.entry_of(s)?;
        match crate::replay::make_view(self.core()?, entry.id, &op) {
            Ok(view) => {
                let handle = self.own_entry(entry.derived(view))?;
                if let Some(rec) = self.recorder.as_deref_mut()
                    && let Some(slot) = rec.slot(s.rep())
                {
                    rec.made(handle.rep(), Event::View(slot, op));
                }
                Ok(Ok(handle))
            }
            Err(e) => {
                self.spoil();
                Ok(Err(err(e.to_string())))
            }
        }
    }

    /// Records an event about two handles (when recording).
    fn record_pair(
        &mut self,
        a: &Resource<StoreRes>,
        b: &Resource<StoreRes>,
        event: impl FnOnce(crate::replay::Slot, crate::replay::Slot) -> Event,
    ) {
        if let Some(rec) = self.recorder.as_deref_mut()
            && let (Some(x), Some(y)) = (rec.slot(a.rep()), rec.slot(b.rep()))
        {
            rec.push(event(x, y));
        }
    }
}

impl host::Host for PluginState {
    fn create_store(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let (id, quota, name) = (self.id, self.store_quota, self.name.clone());
        let dtype = convert::dtype(dtype);
        match self
            .core()?
            .create_store_as(id, &name, quota, shape.clone(), dtype)
        {
            Ok(id) => {
                let handle = self.own(id)?;
                if let Some(rec) = self.recorder.as_deref_mut() {
                    rec.made(handle.rep(), Event::Create(shape, dtype));
                }
                Ok(Ok(handle))
            }
            Err(e) => {
                self.spoil();
                Ok(Err(err(e.to_string())))
            }
        }
    }

    fn store_from_bytes(
        &mut self,
        shape: Vec<u64>,
        dtype: types::Dtype,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Resource<StoreRes>, types::Error>> {
        let (id, quota, name) = (self.id, self.store_quota, self.name.clone());
        let dtype = convert::dtype(dtype);
        match self.core()?.store_from_bytes_as(
            Some((id, &name, quota)),
            shape.clone(),
            dtype,
            &data,
        ) {
            Ok(id) => {
                let handle = self.own(id)?;
                // Recorded with what it uploaded (`Recorder::uploaded`: one element repeated, or
                // a few bytes).
                if let Some(rec) = self.recorder.as_deref_mut() {
                    rec.uploaded(handle.rep(), shape, dtype, data);
                }
                Ok(Ok(handle))
            }
            Err(e) => {
                self.spoil();
                Ok(Err(err(e.to_string())))
            }
        }
    }

    fn read_bytes(
        &mut self,
        s: Resource<StoreRes>,
    ) -> wasmtime::Result<Result<Vec<u8>, types::Error>> {
        // Charged to the plugin's quota and the runtime's before anything is allocated: a
        // broadcast view costs no storage, but its read costs its full size.
        self.spoil();
        let id = self.store_of(&s)?;
        let (plugin, quota, name) = (self.id, self.store_quota, self.name.clone());
        Ok(self
            .core()?
            .read_bytes_as(Some((plugin, &name, quota)), id)
            .map_err(|e| err(e.to_string())))
    }

    fn preferred_tiling(&mut self, shape: Vec<u64>) -> wasmtime::Result<(Vec<u64>, types::Tiling)> {
        let (launch, tiling) = self.core()?.preferred_tiling(&shape);
        let wit = convert::wit_tiling(tiling.clone());
        if let Some(rec) = self.recorder.as_deref_mut() {
            rec.push(Event::Tiling(shape, launch.clone(), tiling));
        }
        Ok((launch.to_vec(), wit))
    }

    fn submit(&mut self, task: host::IndexTask) -> wasmtime::Result<Result<(), types::Error>> {
        let mut args = Vec::with_capacity(task.args.len());
        let mut reps = Vec::with_capacity(task.args.len());
        for (i, arg) in task.args.into_iter().enumerate() {
            let entry = self.entry_of(&arg.store)?;
            let privilege = convert::privilege(arg.privilege);
            if privilege.mutates() && !entry.writable {
                self.spoil();
                return Ok(Err(err(format!(
                    "task `{}`: argument {i} {} a store the plugin holds read-only",
                    task.kernel,
                    match privilege {
                        weft_ir::Privilege::Reduce(_) => "reduces into",
                        _ => "writes",
                    }
                ))));
            }
            reps.push(arg.store.rep());
            args.push(TaskArg::new(
                entry.id,
                convert::partition(arg.partition),
                privilege,
            ));
        }
        let kernel = match self.kernel(&task.kernel) {
            Ok(k) => k,
            Err(e) => {
                self.spoil();
                return Ok(Err(err(e.to_string())));
            }
        };
        let scalars: Vec<weft_ir::Scalar> = task.scalars.into_iter().map(convert::scalar).collect();
        let event = match self.recorder.as_deref_mut() {
            Some(rec) => {
                let slots: Option<Vec<_>> = reps.iter().map(|&rep| rec.slot(rep)).collect();
                slots.map(|slots| SubmitEvent {
                    kernel: Arc::clone(&kernel),
                    launch: task.launch.clone().into(),
                    args: slots
                        .into_iter()
                        .zip(&args)
                        .map(|(slot, a)| (slot, a.partition.clone(), a.privilege))
                        .collect(),
                    scalars: scalars.clone(),
                })
            }
            None => None,
        };
        let task = IndexTask::new(self.id, kernel, task.launch, args, scalars);
        match self.core()?.submit(task) {
            Ok(()) => {
                if let (Some(rec), Some(event)) = (self.recorder.as_deref_mut(), event) {
                    rec.push(Event::Submit(Box::new(event)));
                }
                Ok(Ok(()))
            }
            Err(e) => {
                self.spoil();
                Ok(Err(err(e.to_string())))
            }
        }
    }
}
