//! [`Runtime`]: what an application holds. It assembles the parts: a runtime core with the CPU
//! back end and the fusion planner (or none), and the plugin host.

use wasmtime::Store;
use wasmtime::component::Instance;
use weft_cpu::CpuBackend;

use crate::config::Device;
use weft_fusion::Fuser;
use weft_plugin::bindings::base::PluginBase;
use weft_plugin::{CoreSlot, PluginHost, PluginLimits, PluginState, Value};
use weft_runtime::{Core, NoFusion, Planner, PlannerStats, PluginId, Stats, StoreHandle, StoreId};

use crate::config::Config;
use crate::tracing_setup::Tracing;
use crate::{Error, Result};

/// A Weft runtime: the plugins it loaded, their stores, and the window of pending tasks.
///
/// The core moves into a plugin's store during a call and back when it returns; only a panic
/// inside a call could leave it out, and then the counters read as zero and every operation
/// that needs the core returns an error.
pub struct Runtime {
    plugins: PluginHost,
    core: CoreSlot,
    /// The planner not in use, while fusion is switched off (or on) by
    /// [`Runtime::set_fusion`]; it keeps its memo.
    parked: Option<Box<dyn Planner>>,
    config: Config,
    /// Where `tracing` output goes (`WEFT_TRACE`, `WEFT_EXPLAIN`), if anywhere.
    tracing: Option<Tracing>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // The core runs what is pending when it is dropped: drop it under the runtime's
        // subscriber (so the trace is whole) and before the plugins, whose handles it may
        // still count. The trace file is finished when `tracing` is dropped, after this.
        let mut core = self.core.take();
        let profile = self.config.profile;
        self.traced(move |_| {
            if let Some(core) = core.as_deref_mut() {
                // What is pending runs first, so that the summaries and the profile count it.
                let _ = core.flush();
                core.finish_summaries();
                if profile {
                    let (rank, ranks) = core.ranks();
                    let heading = if ranks > 1 {
                        format!("weft profile of rank {rank} of {ranks}:\n")
                    } else {
                        String::new()
                    };
                    eprint!("{heading}{}", core.profile().table(PROFILE_ROWS));
                }
            }
            drop(core)
        });
    }
}

/// How many kernels the profile printed when a runtime is dropped lists (`WEFT_PROFILE=1`).
pub const PROFILE_ROWS: usize = 12;

/// The back end of `config.device`.
fn backend_for(config: &Config) -> Result<Box<dyn weft_runtime::Backend>> {
    match config.device {
        Device::Cpu if config.ptx_check => {
            let ptxas = weft_ptx::ptxas::find()
                .map_err(|e| Error::Usage(format!("WEFT_PTX_CHECK=1: {e}")))?;
            let cpu = CpuBackend::with_options(&config.cpu_options())?;
            Ok(Box::new(weft_ptx::checked(Box::new(cpu), Some(ptxas))))
        }
        Device::Cpu => Ok(Box::new(CpuBackend::with_options(&config.cpu_options())?)),
        #[cfg(feature = "cuda")]
        Device::Gpu => weft_ptx::PtxBackend::with_kernel_time(0, config.limits.kernel_time)
            .map(|mut b| {
                b.set_grid_caps(config.gpu_grid);
                Box::new(b) as Box<dyn weft_runtime::Backend>
            })
            .map_err(|e| Error::Device(e.to_string())),
        #[cfg(not(feature = "cuda"))]
        Device::Gpu => Err(Error::Device(
            "no GPU back end: this build of weft has no `cuda` feature".to_string(),
        )),
        Device::Sim => {
            let mut b = weft_ptx::PtxBackend::simulated();
            b.set_grid_caps(config.gpu_grid);
            Ok(Box::new(b))
        }
    }
}

impl Runtime {
    /// A runtime with this configuration: the back end of `config.device` (the CPU unless it
    /// says otherwise), and the fusion planner unless `config.fusion` is off. Fails on a
    /// problem [`Config::from_env`] found, on a SIMD path the CPU cannot run, and with
    /// [`Error::Device`] where the device cannot start (no NVIDIA driver for the GPU).
    pub fn new(config: Config) -> Result<Runtime> {
        if !config.env_errors.is_empty() {
            return Err(Error::Usage(format!(
                "the environment: {}",
                config.env_errors.join("; ")
            )));
        }
        let backend = backend_for(&config)?;
        Runtime::with_backend(config, backend)
    }

    /// A runtime on a back end of the caller's (`config.device` is not looked at): a back end
    /// that wraps another one to observe it, in tests, or one of another crate's.
    pub fn with_backend(
        config: Config,
        backend: Box<dyn weft_runtime::Backend>,
    ) -> Result<Runtime> {
        if !config.env_errors.is_empty() {
            return Err(Error::Usage(format!(
                "the environment: {}",
                config.env_errors.join("; ")
            )));
        }
        let (planner, parked): (Box<dyn Planner>, Box<dyn Planner>) = if config.fusion {
            (Box::new(Fuser::default()), Box::new(NoFusion))
        } else {
            (Box::new(NoFusion), Box::new(Fuser::default()))
        };
        let mut core = Core::new(config.core_settings(), backend, planner);
        if let Some(ranks) = config.ranks.as_ref().filter(|r| r.size() > 1) {
            core.set_distribution(Box::new(weft_dist::Distributed::with_check(
                ranks.0.clone(),
                config.check_replication,
            )));
        }
        let plugins =
            PluginHost::new(config.component_cache.clone(), config.plugin_limits.clone())?;
        let tracing = Tracing::new(
            config.trace.as_deref(),
            config.explain_to_stderr,
            config.explain_detail,
        )?;
        Ok(Runtime {
            plugins,
            core: Some(Box::new(core)),
            parked: Some(parked),
            config,
            tracing,
        })
    }

    /// Runs `f` with the runtime's subscriber as the current one, if it has one.
    fn traced<R>(&mut self, f: impl FnOnce(&mut Runtime) -> R) -> R {
        match self.tracing.as_ref().map(|t| t.dispatch.clone()) {
            Some(dispatch) => tracing::dispatcher::with_default(&dispatch, || f(self)),
            None => f(self),
        }
    }

    fn core(&mut self) -> Result<&mut Core> {
        // The core is out only during a plugin call, which holds `&mut self`.
        self.core
            .as_deref_mut()
            .ok_or_else(|| internal("the runtime core is missing (a plugin call panicked)"))
    }

    /// Names where in the application the tasks submitted from now on come from, or stops
    /// naming it (see `weft_runtime::Core::set_call_site`): a task's error then ends with
    /// `(from the call at SITE)`, also when it surfaces at a later read.
    pub fn set_call_site(&mut self, site: Option<std::sync::Arc<str>>) {
        if let Some(core) = self.core.as_deref_mut() {
            core.set_call_site(site);
        }
    }

    /// Gives the runtime the cancel request of the job that runs on it now (`None` once it
    /// ends): [`weft_runtime::CancelToken::cancel`], from any thread, stops the kernel
    /// running at its next check and refuses the launches after it, each with an error that
    /// says the job was cancelled.
    pub fn set_cancel(&mut self, token: Option<std::sync::Arc<weft_runtime::CancelToken>>) {
        if let Some(core) = self.core.as_deref_mut() {
            core.set_cancel(token);
        }
    }

    /// The call site set by [`Runtime::set_call_site`], if any.
    pub fn call_site(&self) -> Option<std::sync::Arc<str>> {
        self.core.as_deref().and_then(|c| c.call_site().cloned())
    }

    /// Loads a plugin from the bytes of a Wasm component, with the configured limits.
    pub fn load(&mut self, bytes: &[u8]) -> Result<PluginId> {
        Ok(self.plugins.load(bytes)?)
    }

    /// Loads a plugin with its own limits. Names must be unique.
    pub fn load_with_limits(&mut self, bytes: &[u8], limits: PluginLimits) -> Result<PluginId> {
        Ok(self.plugins.load_with_limits(bytes, limits)?)
    }

    /// The id of the loaded plugin with this name.
    pub fn plugin(&self, name: &str) -> Option<PluginId> {
        self.plugins.plugin(name)
    }

    /// A loaded plugin's name and version.
    pub fn plugin_info(&self, id: PluginId) -> Option<(&str, &str)> {
        self.plugins.plugin_info(id)
    }

    /// How many components were compiled rather than found in the cache.
    pub fn components_compiled(&self) -> u64 {
        self.plugins.components_compiled()
    }

    /// Calls into a plugin: `f` gets the plugin's store (whose state lends and takes store
    /// handles), its instance and its `plugin` exports. `call` names the export in errors.
    pub fn with_plugin<R>(
        &mut self,
        id: PluginId,
        call: &str,
        f: impl FnOnce(&mut Store<PluginState>, &Instance, &PluginBase) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.traced(|rt| Ok(rt.plugins.with_plugin(&mut rt.core, id, call, f)?))
    }

    /// Calls `f` with the shape and element type of each of `args`, in order (a store that
    /// does not exist is skipped: the call it is lent to fails on its own).
    pub fn each_layout(&mut self, args: &[StoreId], mut f: impl FnMut(&[u64], weft_ir::DType)) {
        if let Ok(core) = self.core() {
            for id in args {
                if let Ok(info) = core.stores().get(*id) {
                    f(&info.shape, info.dtype);
                }
            }
        }
    }

    /// Replays a recorded call of `plugin` with `args` as its lent stores, without entering
    /// the plugin (see `weft_plugin::replay`): the store the call returns, or `None`, or a
    /// miss (nothing was done: make the real call).
    pub fn replay(
        &mut self,
        plugin: PluginId,
        recording: &weft_plugin::replay::Recording,
        args: &[weft_runtime::StoreId],
    ) -> std::result::Result<Option<weft_runtime::StoreId>, weft_plugin::replay::Miss> {
        self.traced(|rt| rt.plugins.replay(&mut rt.core, plugin, recording, args))
    }

    /// Calls export `name` of a plugin with dynamic values: `"interface#function"` for a
    /// function of an exported interface (for example `"weft:plugin/numeric@0.1.0#zeros"`), or
    /// a plain name for a function the component exports directly.
    pub fn call(&mut self, plugin: PluginId, name: &str, args: &[Value]) -> Result<Vec<Value>> {
        self.traced(|rt| Ok(rt.plugins.call(&mut rt.core, plugin, name, args)?))
    }

    /// [`Runtime::call`], recorded: the results, and where the call can be replayed, its
    /// recording and the stores lent to it in order (the `args` of [`Runtime::replay`]); see
    /// `weft_plugin::PluginHost::call_recorded`.
    pub fn call_recorded(
        &mut self,
        plugin: PluginId,
        name: &str,
        args: &[Value],
    ) -> Result<(Vec<Value>, Option<weft_plugin::dynamic::RecordedCall>)> {
        self.traced(|rt| Ok(rt.plugins.call_recorded(&mut rt.core, plugin, name, args)?))
    }

    /// The functions a plugin exports, as [`Runtime::call`] names them (`"interface#function"`,
    /// or a plain name for a function the component exports directly).
    pub fn exports(&self, plugin: PluginId) -> Result<Vec<String>> {
        Ok(self.plugins.exports(plugin)?)
    }

    /// Calls a plugin function that returns `result<T, error>`, as [`Runtime::call`] does, and
    /// unwraps it: `Some(payload)` (`None` for `result<_, error>`), or the plugin's own error
    /// as [`weft_plugin::Error::Plugin`], naming the plugin, the call and the message.
    pub fn invoke(
        &mut self,
        plugin: PluginId,
        name: &str,
        args: &[Value],
    ) -> Result<Option<Value>> {
        let results = self.call(plugin, name, args)?;
        let plugin_name = self
            .plugin_info(plugin)
            .map_or_else(|| format!("{plugin:?}"), |(n, _)| n.to_string());
        let mut results = results.into_iter();
        match (results.next(), results.next()) {
            (Some(v), None) => Ok(v.into_plugin_result(&plugin_name, name)?),
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(Error::Usage(format!(
                "plugin `{plugin_name}`, call `{name}`: returns several values; use Runtime::call"
            ))),
        }
    }

    /// How many times a plugin's instance was remade after a fault.
    pub fn plugin_generation(&self, id: PluginId) -> u64 {
        self.plugins.plugin_generation(id)
    }

    /// The name of a plugin, for errors.
    pub fn plugin_name(&self, id: PluginId) -> String {
        self.plugins.plugin_name(id)
    }

    /// A handle for a store the caller already counted (one handle).
    pub fn adopt(&self, id: StoreId) -> Result<StoreHandle> {
        self.core
            .as_deref()
            .map(|c| c.adopt(id))
            .ok_or_else(|| internal("the runtime core is missing (a plugin call panicked)"))
    }

    /// Names a store's storage (for a view, the storage it views) in fusion explanations:
    /// `store 8 "grid" (argument 0 of ...)`.
    pub fn set_label(&mut self, id: StoreId, label: &str) -> Result<()> {
        Ok(self.core()?.set_label(id, label.into())?)
    }

    /// Counts one more handle on a store, for handing it to a plugin as an owned handle.
    pub fn retain(&mut self, id: StoreId) -> Result<()> {
        Ok(self.core()?.retain(id)?)
    }

    /// Creates a store from host data (little-endian bytes in row-major order), without any
    /// plugin.
    pub fn store_from_bytes(
        &mut self,
        shape: &[u64],
        dtype: weft_ir::DType,
        data: &[u8],
    ) -> Result<StoreHandle> {
        self.traced(|rt| {
            let core = rt.core()?;
            let id = core.store_from_bytes(shape.to_vec(), dtype, data)?;
            Ok(core.adopt(id))
        })
    }

    /// A store's shape.
    pub fn shape(&mut self, s: &StoreHandle) -> Result<Vec<u64>> {
        let core = self.core()?;
        Ok(core.stores().get(core.resolve(s)?)?.shape.clone())
    }

    /// What changes when store `s`'s elements may have changed: its storage's write
    /// generation (tasks submitted that write it, host writes) and the count of trace replays
    /// begun (which write without submitting). Equal values at two times mean its elements
    /// are the same.
    pub(crate) fn write_stamp(&mut self, s: &StoreHandle) -> Result<(u64, u64)> {
        let core = self.core()?;
        let storage = core.stores().get(core.resolve(s)?)?.storage;
        Ok((
            core.stores().write_generation(storage),
            core.stats().replays_begun,
        ))
    }

    /// The view `parent[start[d] :: step[d]]` of `extent[d]` elements per dimension, with
    /// shape `shape` (the same elements, extents of 1 dropped or added): basic indexing as the
    /// `numeric` plugin makes it, made by the host alone. The caller owns the view's count.
    pub(crate) fn basic_view(
        &mut self,
        parent: StoreId,
        start: &[u64],
        step: &[i64],
        extent: &[u64],
        shape: &[u64],
    ) -> Result<StoreId> {
        let core = self.core()?;
        let view = core.view(parent, |m| m.strided(start, step, extent))?;
        if shape == extent {
            return Ok(view);
        }
        let reshaped = core.reshape(view, shape);
        core.release(view);
        reshaped?.ok_or_else(|| internal("a view could not drop or add an axis of extent 1"))
    }

    /// A store's element type.
    pub fn dtype(&mut self, s: &StoreHandle) -> Result<weft_ir::DType> {
        let core = self.core()?;
        Ok(core.stores().get(core.resolve(s)?)?.dtype)
    }

    /// A store's elements as little-endian bytes in row-major order. This runs the pending
    /// tasks it needs first.
    pub fn read_bytes(&mut self, s: &StoreHandle) -> Result<Vec<u8>> {
        self.traced(|rt| {
            let core = rt.core()?;
            let id = core.resolve(s)?;
            Ok(core.read_bytes(id)?)
        })
    }

    /// Submits `kernel` as one task of one point (an application's kernel: see
    /// `Numeric::run_kernel`): each store whole, with the privilege given beside it, and the
    /// scalars in order. The caller checked them against the kernel's parameters.
    pub(crate) fn submit_application_task(
        &mut self,
        kernel: std::sync::Arc<weft_runtime::KernelEntry>,
        stores: &[(&StoreHandle, weft_ir::Privilege)],
        scalars: Vec<weft_ir::Scalar>,
    ) -> Result<()> {
        self.traced(|rt| {
            let core = rt.core()?;
            let mut args = Vec::with_capacity(stores.len());
            for (handle, privilege) in stores {
                let id = core.resolve(handle)?;
                args.push(weft_runtime::TaskArg::new(
                    id,
                    weft_runtime::Partition::None,
                    *privilege,
                ));
            }
            let task = weft_runtime::IndexTask::new(
                weft_runtime::task::APPLICATION,
                kernel,
                Vec::<u64>::new(),
                args,
                scalars,
            );
            Ok(core.submit(task)?)
        })
    }

    /// Runs every pending task.
    pub fn flush(&mut self) -> Result<()> {
        self.traced(|rt| Ok(rt.core()?.flush()?))
    }

    /// Poisons the storage of store `id` with `error` (see [`Core::poison`]): a read of any
    /// store on it returns the error, as after a failed task. For updates that fail on the
    /// host, before a task could carry the failure (an in-place operator whose operands do
    /// not fit): the failure is never dropped.
    pub fn poison(&mut self, id: weft_runtime::StoreId, error: &Error) -> Result<()> {
        let error = match error {
            Error::Runtime(e) => e.clone(),
            other => weft_runtime::Error::Usage(other.to_string()),
        };
        self.traced(|rt| Ok(rt.core()?.poison(id, error)?))
    }

    /// Runs every pending task, as [`Runtime::flush`] does, then waits until the device has
    /// finished them: on a GPU, [`Runtime::flush`] returns once the launches are enqueued,
    /// so a benchmark synchronizes before it stops a clock.
    pub fn synchronize(&mut self) -> Result<()> {
        self.traced(|rt| Ok(rt.core()?.synchronize()?))
    }

    /// Runs what is pending, then records the back-end work of what follows, up to
    /// [`Runtime::end_trace`] (see `weft_runtime::trace`; [`crate::Numeric::repeat`] uses it).
    pub fn begin_trace(&mut self) -> Result<()> {
        self.traced(|rt| Ok(rt.core()?.begin_trace()?))
    }

    /// Ends the recording that [`Runtime::begin_trace`] began: the step's trace, or `None`
    /// where the step cannot be replayed.
    pub fn end_trace(&mut self) -> Result<Option<weft_runtime::Trace>> {
        self.traced(|rt| Ok(rt.core()?.end_trace()?))
    }

    /// Makes the back-end calls of a trace again, as the step `after` steps after the one it
    /// recorded; `Ok(false)`, having done nothing, where a kernel of the trace is no longer
    /// compiled.
    pub fn replay_trace(&mut self, trace: &weft_runtime::Trace, after: u64) -> Result<bool> {
        self.traced(|rt| Ok(rt.core()?.replay(trace, after)?))
    }

    /// Counters of what the runtime did.
    pub fn stats(&mut self) -> Stats {
        self.core.as_deref().map(Core::stats).unwrap_or_default()
    }

    /// What this rank sent to other ranks so far (nothing on one process).
    pub fn traffic(&self) -> weft_runtime::Traffic {
        self.core.as_deref().map(Core::traffic).unwrap_or_default()
    }

    /// This process's rank and the number of ranks.
    pub fn ranks(&self) -> (usize, usize) {
        self.core.as_deref().map_or((0, 1), Core::ranks)
    }

    /// Records a mark in the device's stream, which the device stamps with its own clock
    /// when it reaches it (on a GPU, a CUDA event); `None` on the CPU, whose clock is the
    /// host's. With [`Runtime::mark_elapsed`], benchmarks time the device itself.
    pub fn record_mark(&mut self) -> Result<Option<u64>> {
        self.traced(|rt| Ok(rt.core()?.record_mark()?))
    }

    /// The device's time from mark `from` to mark `to`, once it has reached `to`; both marks
    /// are forgotten. `None` for marks the device does not know.
    pub fn mark_elapsed(&mut self, from: u64, to: u64) -> Result<Option<std::time::Duration>> {
        self.traced(|rt| Ok(rt.core()?.mark_elapsed(from, to)?))
    }

    /// The device's copy bandwidth: `samples` timed device-to-device copies of `bytes` bytes,
    /// each in GB/s of bytes moved (read plus written); `None` on the CPU, whose memory the
    /// examples probe from the host. The floor of a GPU benchmark.
    pub fn copy_bandwidth(&mut self, bytes: u64, samples: usize) -> Result<Option<Vec<f64>>> {
        self.traced(|rt| Ok(rt.core()?.copy_bandwidth(bytes, samples)?))
    }

    /// The back end's counters of compiled functions: how many it compiled, and how many it
    /// found in its cache (with a cache directory, also those compiled by earlier processes).
    pub fn functions(&self) -> crate::FunctionCounts {
        self.core
            .as_deref()
            .map(Core::functions)
            .unwrap_or_default()
    }

    /// Number of stores alive, and bytes of storage allocated.
    pub fn memory(&mut self) -> (usize, u64) {
        self.core
            .as_deref_mut()
            .map(Core::memory)
            .unwrap_or_default()
    }

    /// The most bytes of storage this process held at once so far (on one rank of several:
    /// only the parts of stores its points use).
    pub fn peak_memory(&self) -> u64 {
        self.core.as_deref().map_or(0, Core::peak_memory)
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Turns fusion on or off (pending tasks are run first).
    pub fn set_fusion(&mut self, on: bool) -> Result<()> {
        if on == self.config.fusion {
            return self.flush();
        }
        let parked = self
            .parked
            .take()
            .ok_or_else(|| internal("no planner to switch to"))?;
        let previous = self.traced(|rt| rt.core().map(|c| c.set_planner(parked)))?;
        match previous {
            Ok(p) => {
                self.parked = Some(p);
                self.config.fusion = on;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Turns the gathering of fusion explanations on or off; see
    /// [`Runtime::take_explanations`].
    pub fn set_explain(&mut self, on: bool) {
        self.config.explain = on;
        if let Some(core) = self.core.as_deref_mut() {
            core.set_explain(on);
        }
    }

    /// The fusion explanations gathered since the last call: one text per window prefix run.
    pub fn take_explanations(&mut self) -> Vec<String> {
        self.core
            .as_deref_mut()
            .map(Core::take_explanations)
            .unwrap_or_default()
    }

    /// Turns the gathering of the summaries of the window's runs on or off; see
    /// [`Runtime::take_summaries`].
    pub fn set_summarize(&mut self, on: bool) {
        self.config.summarize = on;
        if let Some(core) = self.core.as_deref_mut() {
            core.set_summarize(on);
        }
    }

    /// The summaries of the window's runs gathered since the last call (with
    /// [`Config::summarize`]), as `WEFT_EXPLAIN=1` prints them: one text per run of the window
    /// not summarized alike before (see `weft_runtime::Core::take_summaries`).
    pub fn take_summaries(&mut self) -> Vec<String> {
        self.core
            .as_deref_mut()
            .map(Core::take_summaries)
            .unwrap_or_default()
    }

    /// Turns the timing of kernel runs on or off (see [`Config::profile`]).
    pub fn set_profile(&mut self, on: bool) {
        self.config.profile = on;
        if let Some(core) = self.core.as_deref_mut() {
            core.set_profile(on);
        }
    }

    /// The time of the kernels run so far, per kernel, the most time first (with
    /// [`Config::profile`] on, `WEFT_PROFILE=1`; empty otherwise). Run
    /// [`Runtime::flush`] first to count the pending tasks.
    pub fn profile(&self) -> weft_runtime::Profile {
        self.core.as_deref().map(Core::profile).unwrap_or_default()
    }

    /// Makes compiling any kernel an error from now on (or allows it again). Tests use it to
    /// show that a loop in steady state compiles nothing.
    pub fn forbid_compiles(&mut self, forbid: bool) {
        if let Some(core) = self.core.as_deref_mut() {
            core.forbid_compiles(forbid);
        }
    }

    /// Marks the end of an application's warm-up: with
    /// [`Config::forbid_compiles_after_warmup`] (`WEFT_FORBID_COMPILES_AFTER_WARMUP=1`),
    /// compiling a kernel after this point is an error.
    pub fn warmed_up(&mut self) {
        if self.config.forbid_compiles_after_warmup {
            self.forbid_compiles(true);
        }
    }

    /// How many submitted tasks are waiting in the window.
    pub fn pending_tasks(&mut self) -> usize {
        self.core
            .as_deref_mut()
            .map(Core::pending_tasks)
            .unwrap_or_default()
    }

    /// Counters of the planner (fusion analyses, memo hits, fused kernels).
    pub fn fusion_stats(&mut self) -> PlannerStats {
        self.core
            .as_deref()
            .map(Core::planner_stats)
            .unwrap_or_default()
    }
}

/// An error for a broken invariant of the runtime (a bug in Weft, not a misuse).
fn internal(message: &str) -> Error {
    Error::Runtime(weft_runtime::Error::Internal(message.to_string()))
}
