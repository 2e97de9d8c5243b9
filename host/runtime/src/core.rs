//! The runtime core: the state that plugin calls and the application share (stores, the
//! window, kernels), and the back end and planner it works through.
//!
//! During a plugin call the core moves into the plugin's wasmtime store (so that host imports
//! reach it without locks or reference counting) and moves back when the call returns; see
//! `weft-plugin`.

use crate::Dims;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use weft_ir::DType;
use weft_ir::flat::FlatKernel;

use crate::backend::{Backend, BufferId};
use crate::distribution::{DistContext, Distribution};
use crate::executor::{ExecStats, Executor};
use crate::handle::StoreHandle;
use crate::kernel::{self, KernelEntry};
use crate::limits::Limits;
use crate::mapping::{BlockMapping, Mapping};
use crate::partition::{Tiling, points};
use crate::planner::{Planner, PlannerStats};
use crate::stores::{StoreId, Stores};
use crate::task::PluginId;
use crate::view::ViewMap;
use crate::window::Window;
use crate::{Error, Result};

/// How a core is set up. `weft::Config` fills it from the application's configuration and the
/// environment; the core reads no environment of its own.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Points per launch that the host prefers (1 on one process; more splits arrays into
    /// more tiles).
    pub pieces: u64,
    /// The most tasks the window holds before it runs them (the window starts smaller and
    /// grows while whole windows fuse).
    pub window_bound: usize,
    /// Whether planners' explanations are gathered for [`Core::take_explanations`]. They
    /// are also emitted as `tracing` events of target [`EXPLAIN_TARGET`] whenever a
    /// subscriber listens to that target.
    pub explain: bool,
    /// Whether summaries of the windows run are gathered for [`Core::take_summaries`]. They
    /// are also emitted as `tracing` events of target [`SUMMARY_TARGET`] whenever a
    /// subscriber listens to that target.
    pub summarize: bool,
    /// Whether the time of every task run is added up per kernel, for [`Core::profile`].
    pub profile: bool,
    /// Bounds on launches, arguments, store bytes and kernel time.
    pub limits: Limits,
    /// How dense products are laid over the ranks (see [`crate::products`]).
    pub matmul_grid: crate::products::ProductGrid,
    /// The bytes of memory a rank may hold for one dense product's grid (see
    /// [`crate::products::choose`]): what decides whether a grid of layers, which holds more,
    /// may run. `None`: this machine's memory shared by the ranks
    /// ([`crate::products::machine_memory_per_rank`]).
    pub rank_memory: Option<u64>,
}

/// The bounds of a core's map of plugins' kernels by key: 4096 kernels and 256 MiB of IR
/// (estimated). A plugin that floods it evicts its own kernels first; an evicted kernel is
/// asked of its plugin again when a task names it.
pub const KERNEL_LIMITS: crate::cache::CacheLimits = crate::cache::CacheLimits {
    entries: 4096,
    bytes: 256 << 20,
};

/// The `tracing` target of the planner's explanations in full (`WEFT_EXPLAIN=2` prints
/// them).
pub const EXPLAIN_TARGET: &str = "weft::explain";

/// The `tracing` target of the summaries of the windows run (`WEFT_EXPLAIN=1` prints them).
pub const SUMMARY_TARGET: &str = "weft::summary";

/// The most distinct window summaries a core remembers having shown (see
/// [`Core::take_summaries`]); past it, summaries are shown again.
pub const SUMMARIES_REMEMBERED: usize = 4096;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pieces: 1,
            window_bound: 256,
            explain: false,
            summarize: false,
            profile: false,
            limits: Limits::default(),
            matmul_grid: crate::products::ProductGrid::default(),
            rank_memory: None,
        }
    }
}

/// The tasks the core submits after the one that made them, in order, with a store it made
/// for them all (released once all are submitted): Cannon's later steps, and a layered
/// product's sum of its layers.
pub(crate) type FollowingTask = (Vec<crate::task::IndexTask>, StoreId);

/// Counters of what the runtime did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Tasks plugins submitted.
    pub tasks_submitted: u64,
    /// Bytes copied out of stores to the application or a plugin (`read_bytes`).
    pub bytes_read: u64,
    /// What the executor did.
    pub exec: ExecStats,
    /// Steps made by replaying a trace ([`Core::replay`]), not counted in `exec`.
    pub steps_replayed: u64,
    /// Trace replays begun, finished or not: each may have written stores without
    /// submitting a task (see `Stores::write_generation`).
    pub replays_begun: u64,
    /// Launches those replays made.
    pub launches_replayed: u64,
    /// Seconds those replays took, wall time (their launches and folds; see
    /// [`ExecStats::kernel_seconds`]).
    pub replay_seconds: f64,
}

impl Stats {
    /// Seconds spent running kernels: the executor's tasks and the replayed steps.
    pub fn kernel_seconds(&self) -> f64 {
        self.exec.kernel_seconds + self.replay_seconds
    }
}

/// The runtime core (see the module documentation).
pub struct Core {
    pub(crate) stores: Stores,
    pub(crate) window: Window,
    /// Kernels by plugin and key, bounded ([`KERNEL_LIMITS`]), each charged to its plugin.
    kernels: crate::cache::BoundedCache<(PluginId, String), Arc<KernelEntry>>,
    pub(crate) backend: Box<dyn Backend>,
    pub(crate) planner: Box<dyn Planner>,
    pub(crate) mapping: Box<dyn Mapping>,
    pub(crate) rank: usize,
    pub(crate) settings: Settings,
    pub(crate) stats: Stats,
    pub(crate) forbid_compiles: bool,
    pub(crate) explain_log: Vec<String>,
    /// What the window shows in its summaries (see [`Core::take_summaries`]).
    pub(crate) summaries: crate::window::Summaries,
    /// The time of the tasks run, per kernel, with [`Settings::profile`].
    profiler: crate::profile::Profiler,
    /// Where in the application the tasks submitted now come from (see
    /// [`Core::set_call_site`]).
    pub(crate) call_site: Option<Arc<str>>,
    /// The call site of each pending task that has one, by sequence number.
    pub(crate) sites: crate::FastMap<u64, Arc<str>>,
    /// How each pending dense product was laid over the ranks, by sequence number, for the
    /// explanations (see [`crate::products`]).
    pub(crate) product_notes: crate::FastMap<u64, String>,
    /// The kernels made for each canonical product kernel's grids, by the latter's id and
    /// whether the grid has layers (the tiled or the layered product).
    tiled_products: crate::FastMap<(crate::kernel::KernelId, bool), Arc<KernelEntry>>,
    /// The kernels that sum a layered product's partial sums, by the product kernel's id and
    /// the layers.
    layer_sums: crate::FastMap<(crate::kernel::KernelId, u64), Arc<KernelEntry>>,
    /// The kernels of products by parts over grids of layers, per plugin kernel, layer count
    /// and role (`false`: a layer, `true`: the sum of the layers).
    matvec_kernels: crate::FastMap<(crate::kernel::KernelId, u64, bool), Arc<KernelEntry>>,
    released: (Sender<StoreId>, Receiver<StoreId>),
    /// This core's identity, shared by the handles it makes.
    pub(crate) token: Arc<crate::handle::CoreToken>,
    /// What crosses ranks, when the program runs on several.
    pub(crate) distribution: Option<Box<dyn Distribution>>,
    /// Failed tasks: the storages they left without a value, and what is not yet reported.
    pub(crate) faults: crate::faults::Faults,
    /// The trace being recorded, if any (see [`crate::trace`]).
    pub(crate) recording: Option<crate::trace::Recording>,
    /// Recordings begun inside it and not yet ended (they record nothing of their own).
    pub(crate) nested_traces: u32,
}

impl Drop for Core {
    fn drop(&mut self) {
        // Run what is still pending, so that traces are whole; errors have no one to go to
        // now.
        let _ = self.flush();
        self.finish_summaries();
    }
}

impl Core {
    /// A core that keeps memory and runs kernels on `backend`, and asks `planner` what runs
    /// together.
    pub fn new(settings: Settings, backend: Box<dyn Backend>, planner: Box<dyn Planner>) -> Core {
        Core {
            stores: Stores::default(),
            window: Window::new(settings.window_bound),
            kernels: crate::cache::BoundedCache::new(KERNEL_LIMITS),
            backend,
            planner,
            mapping: Box::new(BlockMapping { ranks: 1 }),
            rank: 0,
            settings,
            stats: Stats::default(),
            forbid_compiles: false,
            explain_log: Vec::new(),
            summaries: Default::default(),
            profiler: Default::default(),
            call_site: None,
            sites: crate::FastMap::default(),
            product_notes: crate::FastMap::default(),
            tiled_products: crate::FastMap::default(),
            layer_sums: crate::FastMap::default(),
            matvec_kernels: crate::FastMap::default(),
            released: channel(),
            token: Arc::default(),
            distribution: None,
            faults: Default::default(),
            recording: None,
            nested_traces: 0,
        }
    }

    /// Runs the program on the ranks of `distribution`: this process runs the points its rank
    /// owns under the block mapping, and `distribution` moves what crosses ranks.
    pub fn set_distribution(&mut self, distribution: Box<dyn Distribution>) {
        self.rank = distribution.rank();
        self.mapping = Box::new(BlockMapping {
            ranks: distribution.ranks(),
        });
        self.distribution = Some(distribution);
    }

    /// What this rank has sent to others (nothing on one process).
    pub fn traffic(&self) -> crate::distribution::Traffic {
        self.distribution
            .as_ref()
            .map(|d| d.traffic())
            .unwrap_or_default()
    }

    /// This process's rank and the number of ranks.
    pub fn ranks(&self) -> (usize, usize) {
        match &self.distribution {
            Some(d) => (d.rank(), d.ranks()),
            None => (0, 1),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The store table, to look at.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The back end's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// Counters of what the runtime did.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The counters of the map of plugins' kernels.
    pub fn kernel_cache_stats(&self) -> crate::cache::CacheStats {
        self.kernels.stats()
    }

    /// Replaces the map of plugins' kernels by an empty one bounded by `limits` (by default
    /// [`KERNEL_LIMITS`]).
    pub fn set_kernel_cache_limits(&mut self, limits: crate::cache::CacheLimits) {
        self.kernels = crate::cache::BoundedCache::new(limits);
    }

    /// The planner's counters.
    pub fn planner_stats(&self) -> PlannerStats {
        self.planner.stats()
    }

    /// Replaces the planner, after running every pending task; returns the old one.
    pub fn set_planner(&mut self, planner: Box<dyn Planner>) -> Result<Box<dyn Planner>> {
        self.flush()?;
        Ok(std::mem::replace(&mut self.planner, planner))
    }

    /// Turns the gathering of explanations on or off.
    pub fn set_explain(&mut self, on: bool) {
        self.settings.explain = on;
    }

    /// The explanations gathered since the last call (with [`Settings::explain`] on).
    pub fn take_explanations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.explain_log)
    }

    /// Turns the gathering of window summaries on or off.
    pub fn set_summarize(&mut self, on: bool) {
        self.settings.summarize = on;
    }

    /// The summaries of the windows run since the last call (with [`Settings::summarize`]
    /// on), as `WEFT_EXPLAIN=1` prints them: one text per run of the window, each shown once
    /// (a run that the window already summarized alike is counted, not shown again; see
    /// [`Core::finish_summaries`]).
    pub fn take_summaries(&mut self) -> Vec<String> {
        std::mem::take(&mut self.summaries.log)
    }

    /// Ends the summaries: the line that counts the runs of the window not shown because
    /// they repeated one shown (`weft: 12 more window run(s) like those above`), gathered and
    /// emitted as the summaries are, if there were any. A core does this when it is dropped.
    pub fn finish_summaries(&mut self) {
        let repeated = std::mem::take(&mut self.summaries.repeated);
        if repeated > 0 {
            self.publish_summary(format!(
                "weft: {repeated} more window run(s) like those above\n"
            ));
        }
    }

    /// Turns the timing of kernel runs on or off (see [`Core::profile`]).
    pub fn set_profile(&mut self, on: bool) {
        self.settings.profile = on;
    }

    /// The time of the kernels run so far, per kernel (with [`Settings::profile`] on; empty
    /// otherwise).
    pub fn profile(&self) -> crate::profile::Profile {
        let exec = &self.stats.exec;
        self.profiler
            .profile(exec.kernels_compiled, exec.compile_seconds)
    }

    /// Makes compiling any kernel an error from now on (or allows it again).
    pub fn forbid_compiles(&mut self, forbid: bool) {
        self.forbid_compiles = forbid;
    }

    /// Names where in the application the tasks submitted from now on come from (for
    /// example `src/main.rs:12:5`, a facade's `#[track_caller]` location), or stops naming
    /// it. An error of a task that has a call site ends with `(from the call at SITE)`, also
    /// when it surfaces later, at a read or a flush.
    pub fn set_call_site(&mut self, site: Option<Arc<str>>) {
        self.call_site = site;
    }

    /// Gives the back end the cancel request of the job that runs now (`None` once it ends):
    /// a cancel then stops the kernel running at its next check, and refuses the launches
    /// after it (see [`crate::cancel`]).
    pub fn set_cancel(&mut self, token: Option<Arc<crate::CancelToken>>) {
        self.backend.set_cancel(token);
    }

    /// Launches `task`, a canonical dense product, over a grid of `C`'s tiles where
    /// [`Settings::matmul_grid`] and the rank count call for one (see [`crate::products`]);
    /// returns the line the explanations give about it, and for a grid of layers the task
    /// that sums them into `C` with the store of partial sums it reads (made here, with one
    /// handle: the caller submits that task after this one and then releases the store).
    pub(crate) fn schedule_product(
        &mut self,
        task: &mut crate::task::IndexTask,
    ) -> Result<Option<(String, Option<FollowingTask>)>> {
        let ranks = self.ranks().1 as u64;
        let shapes: Vec<Option<Vec<u64>>> = task
            .args
            .iter()
            .map(|a| self.stores.get(a.store).ok().map(|i| i.shape.to_vec()))
            .collect();
        let setting = self.settings.matmul_grid;
        // Only the automatic choice on several ranks weighs memory.
        let rank_bytes = match setting {
            crate::products::ProductGrid::Auto if ranks > 1 => self
                .settings
                .rank_memory
                .unwrap_or_else(|| crate::products::machine_memory_per_rank(ranks)),
            _ => u64::MAX,
        };
        // A grid of layers makes a store of partial sums, counted whole in the quota: the
        // automatic choice only takes one that fits the room left.
        self.collect_released();
        let partials_bytes = self
            .settings
            .limits
            .store_bytes
            .saturating_sub(self.stores.live_bytes());
        let cache = &mut self.tiled_products;
        let scheduled = crate::products::schedule(
            task,
            ranks,
            setting,
            (rank_bytes, partials_bytes),
            |i| shapes.get(i).cloned().flatten(),
            |entry, dtype, layered| {
                if let Some(k) = cache.get(&(entry.id(), layered)) {
                    return Ok(k.clone());
                }
                let kernel = Arc::new(crate::products::grid_kernel(entry, dtype, layered)?);
                cache.insert((entry.id(), layered), kernel.clone());
                Ok(kernel)
            },
        )?;
        let Some(scheduled) = scheduled else {
            return Ok(None);
        };
        let Some(sum) = scheduled.sum else {
            return Ok(Some((scheduled.note, None)));
        };
        // The layers' partial sums go to a store of their own; `C` moves to the task that sums
        // them.
        let summing = self.layers_sum_kernel(task, sum.dtype, scheduled.grid.layers)?;
        let (partial, c) = self.write_partials(task, sum.partial_shape.to_vec(), sum.dtype)?;
        // Cannon's later steps: the first with other partitions.
        let mut follow: Vec<crate::task::IndexTask> = scheduled
            .steps
            .into_iter()
            .map(|partitions| {
                let mut step = task.clone();
                for (arg, p) in step.args.iter_mut().zip(partitions) {
                    arg.partition = p;
                }
                step
            })
            .collect();
        follow.push(layers_sum_task(
            task,
            summing,
            sum.launch,
            (partial, c),
            sum.partitions,
        ));
        Ok(Some((scheduled.note, Some((follow, partial)))))
    }

    /// Launches `task`, a product of a matrix by a vector by parts, over a grid of layers
    /// where [`Settings::matmul_grid`] asks for one (see [`crate::matvec_grid`]); returns the
    /// line the explanations give and the task that sums the layers into `y`, with the store
    /// of partial sums it reads (made here, as for [`Core::schedule_product`]).
    pub(crate) fn schedule_matvec(
        &mut self,
        task: &mut crate::task::IndexTask,
    ) -> Result<Option<(String, FollowingTask)>> {
        let shapes: Vec<Option<Vec<u64>>> = task
            .args
            .iter()
            .map(|a| self.stores.get(a.store).ok().map(|i| i.shape.to_vec()))
            .collect();
        let plugin_kernel = task.kernel.clone();
        let name = plugin_kernel.name().to_string();
        let cache = &mut self.matvec_kernels;
        let mut entry = |dtype: DType, layers: u64, sum: bool| -> Result<Arc<KernelEntry>> {
            let key = (plugin_kernel.id(), layers, sum);
            if let Some(k) = cache.get(&key) {
                return Ok(k.clone());
            }
            let (name, ir) = if sum {
                let name = format!("{name}.layers");
                let ir = weft_ir::matvec::matvec_layers_sum(name.clone(), dtype, layers).finish();
                (name, ir)
            } else {
                let name = format!("{name}.layer");
                let parts = weft_ir::matvec::PARTS / layers.max(1);
                let ir = weft_ir::matvec::matvec_layer(name.clone(), dtype, parts).finish();
                (name, ir)
            };
            let kernel = Arc::new(KernelEntry::new(&name, &ir)?);
            cache.insert(key, kernel.clone());
            Ok(kernel)
        };
        let scheduled = crate::matvec_grid::schedule(
            task,
            self.settings.matmul_grid,
            |i| shapes.get(i).cloned().flatten(),
            |dtype, layers| entry(dtype, layers, false),
        )?;
        let Some(grid) = scheduled else {
            return Ok(None);
        };
        let summing = entry(grid.dtype, grid.layers, true)?;
        let (partial, y) = self.write_partials(task, grid.partial_shape.to_vec(), grid.dtype)?;
        let sum = layers_sum_task(
            task,
            summing,
            grid.sum_launch,
            (partial, y),
            grid.sum_partitions,
        );
        Ok(Some((grid.note, (vec![sum], partial))))
    }

    /// Makes a store of partial sums of `shape` for `task`, a product launched over a grid
    /// of layers, and has its third argument (the result) write it instead, with the same
    /// partition: returns the store and the result's argument, which moves to the task that
    /// sums the layers ([`layers_sum_task`]).
    fn write_partials(
        &mut self,
        task: &mut crate::task::IndexTask,
        shape: Vec<u64>,
        dtype: DType,
    ) -> Result<(StoreId, crate::task::TaskArg)> {
        let partial = self.create_store(shape, dtype)?;
        let written = crate::task::TaskArg::new(
            partial,
            task.args[2].partition.clone(),
            weft_ir::Privilege::Write,
        );
        Ok((partial, std::mem::replace(&mut task.args[2], written)))
    }

    /// The kernel that sums `layers` layers of the partial sums of `task`'s product (whose
    /// kernel is the layered one, named after the plugin's), made once per product kernel
    /// and layer count.
    fn layers_sum_kernel(
        &mut self,
        task: &crate::task::IndexTask,
        dtype: DType,
        layers: u64,
    ) -> Result<Arc<KernelEntry>> {
        let key = (task.kernel.id(), layers);
        if let Some(k) = self.layer_sums.get(&key) {
            return Ok(k.clone());
        }
        let kernel = Arc::new(crate::products::sum_kernel(&task.kernel, dtype, layers)?);
        self.layer_sums.insert(key, kernel.clone());
        Ok(kernel)
    }

    /// The call site set by [`Core::set_call_site`], if any.
    pub fn call_site(&self) -> Option<&Arc<str>> {
        self.call_site.as_ref()
    }

    /// How many submitted tasks are waiting in the window.
    pub fn pending_tasks(&mut self) -> usize {
        self.collect_released();
        self.window.len()
    }

    /// Number of stores alive, and bytes of storage allocated.
    pub fn memory(&mut self) -> (usize, u64) {
        self.collect_released();
        (self.stores.len(), self.stores.allocated_bytes())
    }

    /// The back end's counters of compiled functions ([`Backend::functions`]).
    pub fn functions(&self) -> crate::backend::FunctionCounts {
        self.backend.functions()
    }

    /// A mark in the device's stream ([`Backend::record_mark`]); `None` on the host.
    pub fn record_mark(&mut self) -> Result<Option<u64>> {
        self.backend.record_mark()
    }

    /// The device's time between two marks ([`Backend::mark_elapsed`]).
    pub fn mark_elapsed(&mut self, from: u64, to: u64) -> Result<Option<std::time::Duration>> {
        self.backend.mark_elapsed(from, to)
    }

    /// The back end's device-to-device copy probe ([`Backend::copy_bandwidth`]): GB/s per
    /// sample, or `None` where the back end's memory is the host's.
    pub fn copy_bandwidth(&mut self, bytes: u64, samples: usize) -> Result<Option<Vec<f64>>> {
        self.backend.copy_bandwidth(bytes, samples)
    }

    /// The most bytes of storage this process held at once so far (on one rank of several:
    /// only the spans of stores its points use).
    pub fn peak_memory(&self) -> u64 {
        self.stores.peak_bytes()
    }

    /// A handle for a store the caller already counted (one handle).
    pub fn adopt(&self, id: StoreId) -> StoreHandle {
        StoreHandle::new(id, self.released.0.clone(), self.token.clone())
    }

    /// The store a handle names, if this core made it: another runtime's (another tenant's)
    /// handle is refused, never read as one of this core's stores.
    pub fn resolve(&self, handle: &StoreHandle) -> Result<StoreId> {
        if handle.made_by(&self.token) {
            Ok(handle.id())
        } else {
            Err(Error::Usage(format!(
                "store handle {} belongs to another runtime (another tenant): handles mean \
                 nothing outside the runtime that made them",
                handle.id().0
            )))
        }
    }

    /// Frees the stores whose last application handle was dropped.
    pub fn collect_released(&mut self) {
        let ids: Vec<StoreId> = self.released.1.try_iter().collect();
        for id in ids {
            self.release(id);
        }
        self.forget_dead_poison();
    }

    pub(crate) fn free(&mut self, buffers: Vec<BufferId>) {
        for b in buffers {
            self.backend.free(b);
        }
    }

    /// Creates a root store with one handle, within the runtime's quota of store bytes.
    pub fn create_store(&mut self, shape: Vec<u64>, dtype: DType) -> Result<StoreId> {
        self.charge(None, &shape, dtype)?;
        self.stores.create(shape, dtype)
    }

    /// Creates a root store with one handle for plugin `owner` (named `name`), within its
    /// quota of `quota` store bytes and the runtime's.
    pub fn create_store_as(
        &mut self,
        owner: PluginId,
        name: &str,
        quota: u64,
        shape: Vec<u64>,
        dtype: DType,
    ) -> Result<StoreId> {
        self.charge(Some((owner, name, quota)), &shape, dtype)?;
        self.stores.create_owned(shape, dtype, Some(owner))
    }

    /// Checks that a new store of `shape` fits the runtime's quota and its owner's (a plugin,
    /// its name and its quota).
    fn charge(
        &mut self,
        owner: Option<(PluginId, &str, u64)>,
        shape: &[u64],
        dtype: DType,
    ) -> Result<()> {
        // Stores the application let go of count until they are collected.
        self.collect_released();
        let bytes = Stores::store_bytes(shape, dtype)?;
        // The owner's name is only formatted for an error: this runs for every store made.
        let over = |who: &dyn Fn() -> String, held: u64, quota: u64| {
            let total = held.saturating_add(bytes);
            (total > quota).then(|| Error::Quota {
                owner: who(),
                shape: crate::view::shape_text(shape),
                bytes,
                total,
                quota,
            })
        };
        if let Some((id, name, quota)) = owner
            && let Some(e) = over(
                &|| format!("plugin `{name}`"),
                self.stores.owned_bytes(id),
                quota,
            )
        {
            return Err(e);
        }
        match over(
            &|| "the runtime".into(),
            self.stores.live_bytes(),
            self.settings.limits.store_bytes,
        ) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Creates a view of `parent`'s rectangle `start..stop`, with one handle.
    pub fn slice(&mut self, parent: StoreId, start: &[u64], stop: &[u64]) -> Result<StoreId> {
        self.stores.slice(parent, start, stop)
    }

    /// Creates a view of `parent` whose map `make` derives from the parent's (a slice with
    /// steps, a permutation of axes, a broadcast), with one handle.
    pub fn view(
        &mut self,
        parent: StoreId,
        make: impl FnOnce(&ViewMap) -> std::result::Result<ViewMap, crate::ViewError>,
    ) -> Result<StoreId> {
        self.stores.view(parent, make)
    }

    /// Creates a view of `parent` reshaped to `shape` where its strides allow it, with one
    /// handle; `None` where only a copy can reshape it.
    pub fn reshape(&mut self, parent: StoreId, shape: &[u64]) -> Result<Option<StoreId>> {
        self.stores.reshape(parent, shape)
    }

    /// Names the storage of store `id` in fusion explanations (`store 8 "grid" (...)`).
    pub fn set_label(&mut self, id: StoreId, label: std::sync::Arc<str>) -> Result<()> {
        self.stores.set_label(id, label)
    }

    /// Counts one more handle on a store.
    pub fn retain(&mut self, id: StoreId) -> Result<()> {
        self.stores.retain(id)
    }

    /// Drops a handle to a store (freeing it once nothing needs it).
    pub fn release(&mut self, id: StoreId) {
        let freed = self.stores.release(id);
        self.free(freed);
    }

    /// Creates a store from host data (little-endian bytes in row-major order), with one
    /// handle.
    pub fn store_from_bytes(
        &mut self,
        shape: Vec<u64>,
        dtype: DType,
        data: &[u8],
    ) -> Result<StoreId> {
        self.store_from_bytes_as(None, shape, dtype, data)
    }

    /// [`Core::store_from_bytes`] for plugin `owner` (its id, name and quota of store bytes).
    pub fn store_from_bytes_as(
        &mut self,
        owner: Option<(PluginId, &str, u64)>,
        shape: Vec<u64>,
        dtype: DType,
        data: &[u8],
    ) -> Result<StoreId> {
        self.charge(owner, &shape, dtype)?;
        // Checked before the store exists: `charge` bounded the bytes (`Stores::store_bytes`).
        let bytes = Stores::store_bytes(&shape, dtype)?;
        if u64::try_from(data.len()).ok() != Some(bytes) {
            return Err(Error::Usage(format!(
                "{} bytes given for a store of shape {} and type {dtype} ({bytes} bytes)",
                data.len(),
                crate::view::shape_text(&shape)
            )));
        }
        let id = self
            .stores
            .create_owned(shape, dtype, owner.map(|(id, _, _)| id))?;
        if let Err(e) = self.write_bytes(id, data) {
            self.release(id);
            return Err(e);
        }
        Ok(id)
    }

    /// The launch domain and tiling the host prefers for an array of `shape`: dimension 0 is
    /// split into at most `pieces` tiles, the others stay whole.
    pub fn preferred_tiling(&self, shape: &[u64]) -> (Dims<u64>, Tiling) {
        let Some(&rows) = shape.first() else {
            return (
                Dims::new(),
                Tiling {
                    tile: Dims::new(),
                    offset: Dims::new(),
                    projection: Dims::new(),
                    skew: None,
                },
            );
        };
        let pieces = self.settings.pieces.clamp(1, rows.max(1));
        let tile_rows = rows.div_ceil(pieces).max(1);
        let launch = rows.div_ceil(tile_rows);
        let mut tile = Dims::from_slice(shape);
        tile[0] = tile_rows;
        let mut projection: Dims<Option<u32>> = smallvec::smallvec![None; shape.len()];
        projection[0] = Some(0);
        (
            smallvec::smallvec![launch],
            Tiling {
                tile,
                offset: smallvec::smallvec![0; shape.len()],
                projection,
                skew: None,
            },
        )
    }

    /// The kernel `key` of plugin `plugin` (named `plugin_name`): from the cache, or through
    /// the kernel intake from the flat IR that `fetch` gets from the plugin.
    pub fn kernel(
        &mut self,
        plugin: PluginId,
        plugin_name: &str,
        key: &str,
        fetch: impl FnOnce() -> std::result::Result<FlatKernel, String>,
    ) -> Result<Arc<KernelEntry>> {
        if let Some(k) = self.kernels.get(&(plugin, key.to_string())) {
            return Ok(k.clone());
        }
        let flat = fetch().map_err(|message| Error::KernelSource {
            plugin: plugin_name.to_string(),
            key: key.to_string(),
            message,
        })?;
        let entry = Arc::new(kernel::plugin_kernel(plugin_name, key, &flat)?);
        let bytes = (entry.insts() as u64)
            .saturating_mul(64)
            .saturating_add(key.len() as u64 + 256);
        self.kernels.insert(
            (plugin, key.to_string()),
            entry.clone(),
            crate::cache::Owner(plugin.0),
            bytes,
        );
        Ok(entry)
    }

    /// Runs `task`, in a `tracing` span named by its kernel (its provenance); `uses` counts,
    /// per store, the references that it and the earlier tasks run but not yet retired hold
    /// (see [`Executor::uses`]), and `hand_over` lets an output take over a dying input's
    /// buffer.
    pub(crate) fn execute(
        &mut self,
        task: &crate::task::IndexTask,
        uses: &crate::FastMap<StoreId, u32>,
        hand_over: bool,
    ) -> Result<()> {
        let span = tracing::info_span!("kernel", kernel = task.name());
        let _entered = span.enter();
        let timed = self
            .settings
            .profile
            .then(|| (std::time::Instant::now(), self.stats.exec.compile_seconds));
        let mut result = Executor {
            stores: &mut self.stores,
            backend: self.backend.as_mut(),
            mapping: self.mapping.as_ref(),
            rank: self.rank,
            stats: &mut self.stats.exec,
            forbid_compiles: self.forbid_compiles,
            uses,
            hand_over,
            distribution: self
                .distribution
                .as_deref_mut()
                .map(|d| d as &mut dyn Distribution),
            recording: self.recording.as_ref(),
        }
        .run(task);
        if let Some((start, compiled_before)) = timed
            && result.is_ok()
        {
            // The task's time is its own only once the back end has finished its work.
            result = self.backend.synchronize();
            let compiling = self.stats.exec.compile_seconds - compiled_before;
            let seconds = (start.elapsed().as_secs_f64() - compiling).max(0.0);
            let site = self.sites.get(&task.seq);
            self.profiler.record(task.name(), site, seconds);
        }
        // On several ranks a failure may be this rank's alone: the other ranks are told, or
        // the job ends (see `Distribution::fail`).
        if let (Err(e), Some(d)) = (&result, self.distribution.as_deref()) {
            d.fail(e);
        }
        result
    }

    /// The elements of a store, as little-endian bytes in row-major order, after running the
    /// tasks pending before the read; within the runtime's quota (see
    /// [`Core::read_bytes_as`]).
    pub fn read_bytes(&mut self, id: StoreId) -> Result<Vec<u8>> {
        self.read_bytes_as(None, id)
    }

    /// [`Core::read_bytes`] for plugin `owner` (its id, name and quota of store bytes).
    ///
    /// What a read returns is host memory that the reader makes the host allocate, so it is
    /// held to the quotas of stores, with checked arithmetic, before anything is allocated
    /// or any task runs. The rule: a read may return at most as many bytes as one store may
    /// hold under the reader's quota (the plugin's, when a plugin reads) and under the
    /// runtime's, each on its own (`bytes <= quota`). A read is not added to the stores'
    /// live bytes: it is transient and a core serves one at a time, so a tenant's host
    /// memory stays within its stores plus one read. A broadcast view has no storage of its
    /// own, but a read of it is charged in full (`Error::ReadQuota`). The buffer a strided
    /// read gathers from is held to the same bound.
    pub fn read_bytes_as(
        &mut self,
        owner: Option<(PluginId, &str, u64)>,
        id: StoreId,
    ) -> Result<Vec<u8>> {
        self.collect_released();
        let info = self.stores.get(id)?;
        let storage = info.storage;
        let len = self.read_len(owner, &info.map, info.dtype.size())?;
        // The most bytes one read may hold at once, the gather buffer included.
        let limit = owner
            .map_or(u64::MAX, |(_, _, quota)| quota)
            .min(self.settings.limits.store_bytes);
        self.flush_for(storage, false)?;
        if let Some(e) = self.poison_error(storage) {
            return Err(e);
        }
        self.backend.synchronize()?;
        // On several ranks: every element, brought here apart from this rank's buffer.
        let gathered = match self.distribution.as_deref_mut() {
            Some(d) => Some(d.gather(
                &mut DistContext {
                    stores: &mut self.stores,
                    backend: self.backend.as_mut(),
                },
                storage,
            )?),
            None => None,
        };
        let info = self.stores.get(id)?;
        let (map, size) = (info.map.clone(), info.dtype.size());
        let s = self
            .stores
            .storage(storage)
            .ok_or_else(|| Error::Internal(format!("storage of store {} vanished", id.0)))?;
        self.stats.bytes_read = self.stats.bytes_read.saturating_add(len as u64);
        let Some((lo, hi)) = map.span() else {
            return zeroed(len, id);
        };
        let short = || Error::Internal(format!("the runs of store {} overrun its read", id.0));
        if let Some(whole) = gathered {
            let mut out = reserved(len, id)?;
            for (offset, n) in runs(&map, size) {
                let from = usize::try_from(offset)
                    .ok()
                    .and_then(|o| whole.get(o..o.checked_add(n)?))
                    .ok_or_else(|| {
                        Error::Internal(format!("the gathered store {} is too short", id.0))
                    })?;
                append(&mut out, from, len).ok_or_else(short)?;
            }
            out.resize(len, 0);
            return Ok(out);
        }
        // Never written: zeros, without allocating the storage for a read.
        let Some(buffer) = s.buffer() else {
            return zeroed(len, id);
        };
        let size64 = size as u64;
        // `hi >= lo`; both are elements of a storage of at most `MAX_STORE_BYTES`.
        let span = (hi - lo).checked_add(1).and_then(|n| n.checked_mul(size64));
        let base = lo.checked_mul(size64);
        if let (Some(span), Some(base)) = (span, base)
            && !map.is_contiguous()
            && span <= (len as u64).saturating_mul(4)
            && span <= limit
        {
            // A strided view (a transpose, a column; more than one run): one read of the
            // span, then a gather.
            let mut whole = zeroed(usize::try_from(span).map_err(|_| short())?, id)?;
            self.backend.read(buffer, base, &mut whole)?;
            let mut out = reserved(len, id)?;
            for (offset, n) in runs(&map, size) {
                let from = offset
                    .checked_sub(base)
                    .and_then(|f| usize::try_from(f).ok())
                    .and_then(|f| whole.get(f..f.checked_add(n)?))
                    .ok_or_else(short)?;
                append(&mut out, from, len).ok_or_else(short)?;
            }
            out.resize(len, 0);
            return Ok(out);
        }
        // Each run appended, with no zeroing pass before.
        let mut out = reserved(len, id)?;
        for (offset, n) in runs(&map, size) {
            if out.len() + n > len {
                return Err(short());
            }
            self.backend.read_append(buffer, offset, n, &mut out)?;
        }
        out.resize(len, 0);
        Ok(out)
    }

    /// The bytes a read of a view with map `map`, of elements of `size` bytes, returns:
    /// checked arithmetic, held to the reader's quotas (see [`Core::read_bytes_as`]).
    fn read_len(
        &self,
        owner: Option<(PluginId, &str, u64)>,
        map: &ViewMap,
        size: usize,
    ) -> Result<usize> {
        let shape = || crate::view::shape_text(&map.shape);
        let bytes = map
            .checked_volume()
            .and_then(|v| v.checked_mul(size as u64))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "a read of a store of shape {} would return more than 2^64 bytes",
                    shape()
                ))
            })?;
        let over = |who: String, quota: u64| {
            (bytes > quota).then(|| Error::ReadQuota {
                owner: who,
                shape: shape(),
                bytes,
                quota,
            })
        };
        if let Some((_, name, quota)) = owner
            && let Some(e) = over(format!("plugin `{name}`"), quota)
        {
            return Err(e);
        }
        if let Some(e) = over("the runtime".into(), self.settings.limits.store_bytes) {
            return Err(e);
        }
        usize::try_from(bytes).map_err(|_| {
            Error::Usage(format!(
                "a read of a store of shape {} would return {bytes} bytes, more than this \
                 host can address",
                shape()
            ))
        })
    }

    /// Overwrites a store's elements with little-endian bytes in row-major order.
    ///
    /// The data is already in host memory, and the storage it lands in was charged to its
    /// owner's quota when its root was created; a view that could take more bytes than its
    /// root holds repeats elements, and is refused. Every check runs before any pending
    /// task does.
    pub fn write_bytes(&mut self, id: StoreId, data: &[u8]) -> Result<()> {
        let info = self.stores.get(id)?;
        let (storage, map, dtype) = (info.storage, info.map.clone(), info.dtype);
        let size = dtype.size();
        let expected = map
            .checked_volume()
            .and_then(|v| v.checked_mul(size as u64));
        if expected != u64::try_from(data.len()).ok() {
            return Err(Error::Usage(format!(
                "{} bytes given for a store of shape {} and type {dtype} ({} bytes)",
                data.len(),
                crate::view::shape_text(&map.shape),
                expected.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
            )));
        }
        if map.overlaps_itself() {
            return Err(Error::Usage(format!(
                "cannot write a broadcast view of shape {}: its elements repeat",
                crate::view::shape_text(&map.shape)
            )));
        }
        if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
            return Err(Error::Usage("bool data must be 0 or 1".into()));
        }
        self.flush_for(storage, true)?;
        // Every rank writes the same bytes: with the rest of the store brought here first,
        // every rank then holds all of it.
        if let Some(d) = self.distribution.as_deref_mut() {
            d.before_write(
                &mut DistContext {
                    stores: &mut self.stores,
                    backend: self.backend.as_mut(),
                },
                storage,
            )?;
        }
        // A storage that this write fills whole, in one run, needs no zeroing first: it is
        // allocated uncleared (a new store from a plugin's or the user's bytes).
        let whole = self
            .stores
            .storage(storage)
            .is_some_and(|s| s.len() == map.volume());
        let uninit = whole && map.is_contiguous();
        self.stores.forget_indices(storage);
        self.stores.written(storage);
        self.stores
            .ensure_allocated(storage, self.backend.as_mut(), uninit)?;
        let buffer = self.stores.ensure_buffer(storage, self.backend.as_mut())?;
        let mut at = 0;
        for (offset, len) in runs(&map, size) {
            let from = data.get(at..at + len).ok_or_else(|| {
                Error::Internal(format!("the runs of store {} overrun its data", id.0))
            })?;
            self.backend.write(buffer, offset, from)?;
            at += len;
        }
        if let Some(d) = self.distribution.as_deref_mut() {
            d.replicated(storage);
        }
        // Written whole, the storage holds values again whatever failed before.
        if whole {
            self.cure(storage);
        }
        Ok(())
    }
}

/// A zeroed buffer of `len` bytes for a read of store `id`: a failed allocation is an error,
/// never an abort of the host.
fn zeroed(len: usize, id: StoreId) -> Result<Vec<u8>> {
    let mut out = reserved(len, id)?;
    out.resize(len, 0);
    Ok(out)
}

/// Appends `from` to `out` unless that would take it past `len` bytes (`None`).
fn append(out: &mut Vec<u8>, from: &[u8], len: usize) -> Option<()> {
    (out.len() + from.len() <= len).then(|| out.extend_from_slice(from))
}

/// An empty buffer with room for `len` bytes, for a read of store `id`: a failed allocation
/// is an error, never an abort of the host.
fn reserved(len: usize, id: StoreId) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|e| {
        Error::Usage(format!(
            "the host cannot allocate {len} bytes to read store {}: {e}",
            id.0
        ))
    })?;
    Ok(out)
}

/// The runs `(byte_offset, byte_len)` of storage that the view's elements occupy, in the
/// view's row-major order: one run per row where rows are dense, one per element otherwise,
/// and one in all for a dense view. Made one at a time, so that a read of a large strided or
/// broadcast view holds no more host memory than its output.
fn runs(map: &ViewMap, size: usize) -> impl Iterator<Item = (u64, usize)> + '_ {
    let rank = map.rank();
    let size64 = size as u64;
    let bytes =
        |elements: u64| usize::try_from(elements.saturating_mul(size64)).unwrap_or(usize::MAX);
    // The dimensions walked (one run per point of them) and the bytes of each run.
    let (walk, len): (&[u64], usize) = if map.volume() == 0 {
        // An extent is 0: no point.
        (&map.shape[..], 0)
    } else if map.is_contiguous() {
        (&[], bytes(map.volume()))
    } else if map.strides.last() == Some(&1) {
        (&map.shape[..rank - 1], bytes(map.shape[rank - 1]))
    } else {
        (&map.shape[..], size)
    };
    points(walk).map(move |mut point| {
        point.resize(rank, 0);
        (map.element(&point).saturating_mul(size64), len)
    })
}

/// The task, of `product`'s plugin, that sums the layers of a product's partial sums
/// (`partial`, read by `read`) into its result (`out`, written by `write`) with `summing`
/// over `launch`.
fn layers_sum_task(
    product: &crate::task::IndexTask,
    summing: Arc<KernelEntry>,
    launch: Vec<u64>,
    (partial, out): (StoreId, crate::task::TaskArg),
    [read, write]: [crate::partition::Partition; 2],
) -> crate::task::IndexTask {
    crate::task::IndexTask::new(
        product.plugin,
        summing,
        launch,
        vec![
            crate::task::TaskArg::new(partial, read, weft_ir::Privilege::Read),
            crate::task::TaskArg::new(out.store, write, out.privilege),
        ],
        Vec::new(),
    )
}

#[cfg(test)]
mod runs_tests {
    use super::*;

    #[test]
    fn runs_are_made_one_at_a_time() {
        // 2^48 runs of one element: only the first few are ever made.
        let map = ViewMap::whole(&[1])
            .broadcast_to(&[crate::view::MAX_VIEW_ELEMENTS])
            .unwrap();
        let first: Vec<_> = runs(&map, 8).take(3).collect();
        assert_eq!(first, vec![(0, 8), (0, 8), (0, 8)]);
        // Rows of a transpose's rows, and one run of a dense view.
        let t = ViewMap::whole(&[2, 3]).permute(&[1, 0]).unwrap();
        let all: Vec<_> = runs(&t, 4).collect();
        assert_eq!(all, vec![(0, 4), (12, 4), (4, 4), (16, 4), (8, 4), (20, 4)]);
        let rows = ViewMap::whole(&[3, 4]).slice(&[0, 1], &[2, 3]).unwrap();
        assert_eq!(runs(&rows, 1).collect::<Vec<_>>(), vec![(1, 2), (5, 2)]);
        assert_eq!(
            runs(&ViewMap::whole(&[2, 3]), 8).collect::<Vec<_>>(),
            vec![(0, 48)]
        );
        assert_eq!(runs(&ViewMap::whole(&[2, 0]), 8).count(), 0);
    }
}
