//! The state that plugin calls and the application share: stores, the window, kernels, and
//! the executor's resources.
//!
//! During a plugin call the core moves into the plugin's wasmtime store (so host imports reach
//! it without locks or reference counting) and moves back when the call returns.

use std::collections::HashMap;
use std::sync::Arc;

use weft_ir::DType;

use super::executor::{ExecStats, Executor};
use super::mapping::{BlockMapping, Mapping};
use super::partition::{Partition, RootPartition, Tiling};
use super::stores::{StorageId, StoreId, Stores};
use super::task::{IndexTask, KernelEntry, PluginId, TaskArg};
use crate::config::Config;
use crate::cpu::CpuBackend;
use crate::fusion::{self, Fuser};
use crate::{Error, Result};
use weft_ir::Privilege;

/// The window's size before it has grown.
const INITIAL_WINDOW: usize = 16;

/// Counters of what the runtime did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Tasks plugins submitted.
    pub tasks_submitted: u64,
    /// What the executor did.
    pub exec: ExecStats,
}

/// Shared runtime state (see the module docs).
pub struct Core {
    /// The store table.
    pub stores: Stores,
    /// Pending tasks, in program order.
    pub window: Vec<IndexTask>,
    /// Kernels by plugin and key.
    pub kernels: HashMap<(PluginId, String), Arc<KernelEntry>>,
    /// The CPU back end.
    pub backend: CpuBackend,
    /// Worker threads.
    pub pool: rayon::ThreadPool,
    /// Who runs which point.
    pub mapping: Box<dyn Mapping>,
    /// This process's rank.
    pub rank: usize,
    /// The configuration.
    pub config: Config,
    /// Counters.
    pub stats: Stats,
    /// The fusion layer.
    pub fuser: Fuser,
    /// Per storage, how many arguments of pending tasks read or reduce it.
    readers: HashMap<StorageId, u32>,
    /// The last sequence number given to a task.
    next_seq: u64,
    /// The window's current size: it starts small and doubles (up to `Config::window_bound`)
    /// each time a full window could fuse whole.
    window_size: usize,
    /// Whether compiling a kernel is an error now.
    pub forbid_compiles: bool,
    /// The last kernel id given out.
    kernel_ids: u64,
    explain_log: Vec<String>,
    /// Kernel runs, when tracing (`Config::trace`).
    pub trace: Option<super::trace::Trace>,
}

impl Core {
    /// A core for `config`.
    pub fn new(config: Config) -> Result<Core> {
        let trace = config.trace.clone().map(super::trace::Trace::new);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("weft-worker-{i}"))
            .build()
            .map_err(|e| Error::Usage(format!("cannot start worker threads: {e}")))?;
        let mut backend = CpuBackend::new()?;
        backend.set_avx512(config.avx512);
        Ok(Core {
            stores: Stores::with_pool(config.pool_bytes),
            window: Vec::new(),
            kernels: HashMap::new(),
            backend,
            pool,
            mapping: Box::new(BlockMapping { ranks: 1 }),
            rank: 0,
            window_size: INITIAL_WINDOW.min(config.window_bound.max(1)),
            config,
            stats: Stats::default(),
            fuser: Fuser::default(),
            readers: HashMap::new(),
            next_seq: 0,
            forbid_compiles: false,
            kernel_ids: 0,
            explain_log: Vec::new(),
            trace,
        })
    }

    /// The launch domain and tiling the host prefers for an array of `shape`: dimension 0 is
    /// split into at most `pieces` tiles, the others stay whole.
    pub fn preferred_tiling(&self, shape: &[u64]) -> (Vec<u64>, Tiling) {
        let Some(&rows) = shape.first() else {
            return (
                Vec::new(),
                Tiling {
                    tile: Vec::new(),
                    offset: Vec::new(),
                    projection: Vec::new(),
                },
            );
        };
        let pieces = self.config.pieces.clamp(1, rows.max(1));
        let tile_rows = rows.div_ceil(pieces).max(1);
        let launch = rows.div_ceil(tile_rows);
        let mut tile = shape.to_vec();
        tile[0] = tile_rows;
        let mut projection = vec![None; shape.len()];
        projection[0] = Some(0);
        (
            vec![launch],
            Tiling {
                tile,
                offset: vec![0; shape.len()],
                projection,
            },
        )
    }

    /// Checks a task's partitions and adds it to the window. Its kernel must already be set.
    pub fn submit(&mut self, mut task: IndexTask) -> Result<()> {
        let kernel_name = task
            .kernel
            .as_ref()
            .map(|k| k.name.clone())
            .unwrap_or_else(|| task.key.clone());
        let invalid = |message: String| Error::InvalidTask {
            plugin: kernel_name
                .split('.')
                .next()
                .unwrap_or_default()
                .to_string(),
            kernel: kernel_name.clone(),
            message,
        };
        if task.launch.len() > 8 {
            return Err(invalid(format!(
                "launch domain of rank {} (at most 8)",
                task.launch.len()
            )));
        }
        for (i, arg) in task.args.iter_mut().enumerate() {
            let info = self.stores.get(arg.store)?;
            arg.partition
                .check(info.shape.len(), task.launch.len())
                .map_err(|m| invalid(format!("argument {i}: {m}")))?;
            if matches!(arg.privilege, Privilege::Write | Privilege::ReadWrite)
                && let Some(d) = overlapping_launch_dim(&arg.partition, &task.launch)
            {
                return Err(invalid(format!(
                    "argument {i} is written through a partition whose tiles overlap: \
                     points that differ in launch dimension {d} see the same elements"
                )));
            }
            arg.storage = info.storage;
            arg.root_partition = RootPartition::fold(&arg.partition, &info.rect);
            arg.root_partition.normalize_for(&task.launch);
        }
        // Image partitions, now that their sources are folded.
        for i in 0..task.args.len() {
            let Partition::Image(k) = task.args[i].partition else {
                continue;
            };
            let source = self.image_source(&task, i, k as usize).map_err(&invalid)?;
            if task.args[i].privilege.mutates()
                && let Some(d) =
                    overlapping_launch_dim(&task.args[k as usize].partition, &task.launch)
            {
                return Err(invalid(format!(
                    "argument {i} is written through an image of argument {k}, whose partition \
                     gives points that differ in launch dimension {d} the same rows"
                )));
            }
            let bounds = self.stores.get(task.args[i].store)?.rect.clone();
            task.args[i].root_partition = RootPartition::image(&bounds, source.0, source.1);
        }
        self.next_seq += 1;
        task.seq = self.next_seq;
        for arg in &task.args {
            self.stores.add_pending(arg.store);
            if !matches!(arg.privilege, Privilege::Write) {
                *self.readers.entry(arg.storage).or_insert(0) += 1;
            }
        }
        self.stats.tasks_submitted += 1;
        self.window.push(task);
        while self.window.len() >= self.window_size {
            self.munch()?;
        }
        Ok(())
    }

    /// The source storage and partition of argument `i`'s image of argument `k`, checked: `k`
    /// is another argument, read-only, an `(n, 2)` store of `i32` or `i64` whose partition
    /// keeps both columns together.
    fn image_source(
        &self,
        task: &IndexTask,
        i: usize,
        k: usize,
    ) -> std::result::Result<(super::stores::StorageId, RootPartition), String> {
        let bad = |m: String| format!("argument {i}: image of argument {k}: {m}");
        let src = task
            .args
            .get(k)
            .filter(|_| k != i)
            .ok_or_else(|| bad("no such other argument".into()))?;
        if src.privilege != Privilege::Read {
            return Err(bad("the source must be passed read-only".into()));
        }
        if matches!(src.partition, Partition::Image(_)) {
            return Err(bad("the source is itself an image".into()));
        }
        let info = self.stores.get(src.store).map_err(|e| bad(e.to_string()))?;
        if info.shape.len() != 2 || info.shape[1] != 2 {
            return Err(bad(format!(
                "the source must have shape (n, 2), not {:?}",
                info.shape
            )));
        }
        if !matches!(info.dtype, weft_ir::DType::I32 | weft_ir::DType::I64) {
            return Err(bad(format!(
                "the source must hold i32 or i64, not {}",
                info.dtype
            )));
        }
        if let Some(t) = &src.root_partition.tiling
            && (t.projection[1].is_some()
                || t.tile[1] < 2
                || t.offset[1] != info.rect.origin[1] as i64)
        {
            return Err(bad("the source's partition splits its two columns".into()));
        }
        Ok((src.storage, src.root_partition.clone()))
    }

    /// A new kernel id.
    pub fn new_kernel_id(&mut self) -> u64 {
        self.kernel_ids += 1;
        self.kernel_ids
    }

    /// The sequence number the next submitted task will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq + 1
    }

    /// Deals with a full window: if all of it could fuse, the window grows (up to
    /// `Config::window_bound`) and nothing runs yet, so that fusion is not cut short at an
    /// arbitrary place; otherwise its fusible prefix runs.
    fn munch(&mut self) -> Result<()> {
        let bound = self.config.window_bound.max(1);
        if self.config.fusion && self.window_size < bound {
            let (prefix, _) = fusion::constraints::fusible_prefix(&self.window);
            if prefix == self.window.len() {
                self.window_size = (self.window_size * 2).min(bound);
                return Ok(());
            }
        }
        let mut window = std::mem::take(&mut self.window);
        let result = self.run_prefix(&mut window);
        self.window = window;
        result
    }

    /// Runs the front of `tasks` (one fused task, or one task) and removes it from `tasks`.
    fn run_prefix(&mut self, tasks: &mut Vec<IndexTask>) -> Result<()> {
        if tasks.is_empty() {
            return Ok(());
        }
        let (prefix, fused) = if self.config.fusion {
            let planned = self.fuser.plan(tasks, &self.stores, &self.readers)?;
            if self.config.explain || self.config.explain_to_stderr {
                let text = planned.plan.explanation.render(&planned.key, planned.hit);
                if self.config.explain_to_stderr {
                    eprint!("{text}");
                }
                if self.config.explain {
                    self.explain_log.push(text);
                }
            }
            let prefix = planned.plan.prefix;
            (prefix, fusion::instantiate(&planned.plan, &tasks[..prefix]))
        } else {
            (1, None)
        };
        let done: Vec<IndexTask> = tasks.drain(..prefix).collect();
        let result = match &fused {
            Some(task) => self.execute(task),
            None => done.iter().try_for_each(|t| self.execute(t)),
        };
        for task in &done {
            self.retire(task);
        }
        result
    }

    fn execute(&mut self, task: &IndexTask) -> Result<()> {
        let start = std::time::Instant::now();
        let points_before = self.stats.exec.points_executed;
        let result = Executor {
            stores: &mut self.stores,
            backend: &mut self.backend,
            pool: &self.pool,
            mapping: self.mapping.as_ref(),
            rank: self.rank,
            stats: &mut self.stats.exec,
            forbid_compiles: self.forbid_compiles,
        }
        .run(task);
        if let Some(trace) = &mut self.trace {
            let name = task
                .kernel
                .as_ref()
                .map_or(task.key.as_str(), |k| k.name.as_str());
            trace.record(name, start, self.stats.exec.points_executed - points_before);
        }
        result
    }

    /// Runs every pending task, in order. On an error the rest of the window is dropped.
    pub fn flush(&mut self) -> Result<()> {
        let mut window = std::mem::take(&mut self.window);
        self.run_all(&mut window)
    }

    /// Runs all of `tasks`; on an error drops the rest.
    fn run_all(&mut self, tasks: &mut Vec<IndexTask>) -> Result<()> {
        while !tasks.is_empty() {
            if let Err(e) = self.run_prefix(tasks) {
                for task in std::mem::take(tasks) {
                    self.retire(&task);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs the pending tasks that a read of `storage` needs: its writers, what they read, and
    /// the earlier tasks that read or write what they write (so the rest can run later in
    /// program order). The others stay in the window.
    /// With `for_write`, the pending readers of `storage` run too (the caller overwrites it).
    pub fn flush_for(&mut self, storage: StorageId, for_write: bool) -> Result<()> {
        let window = std::mem::take(&mut self.window);
        let mut need_values = vec![storage];
        let mut will_write: Vec<StorageId> = if for_write { vec![storage] } else { Vec::new() };
        let mut needed = vec![false; window.len()];
        for (i, task) in window.iter().enumerate().rev() {
            let writes = |a: &TaskArg| a.privilege.mutates();
            let hit = task.args.iter().any(|a| {
                (writes(a) && need_values.contains(&a.storage)) || will_write.contains(&a.storage)
            });
            if hit {
                needed[i] = true;
                for a in &task.args {
                    if writes(a) && !will_write.contains(&a.storage) {
                        will_write.push(a.storage);
                    }
                    if !matches!(a.privilege, Privilege::Write) && !need_values.contains(&a.storage)
                    {
                        need_values.push(a.storage);
                    }
                }
            }
        }
        let (mut now, later): (Vec<_>, Vec<_>) =
            window.into_iter().zip(needed).partition(|(_, n)| *n);
        self.window = later.into_iter().map(|(t, _)| t).collect();
        let mut tasks: Vec<IndexTask> = now.drain(..).map(|(t, _)| t).collect();
        self.run_all(&mut tasks)
    }

    /// Drops the pending tasks numbered `first_seq` or later (a failed plugin call's tasks).
    pub fn truncate_window(&mut self, first_seq: u64) {
        let keep = self.window.iter().position(|t| t.seq >= first_seq);
        let Some(mark) = keep else {
            return;
        };
        for task in self.window.split_off(mark) {
            self.retire(&task);
            self.stats.tasks_submitted = self.stats.tasks_submitted.saturating_sub(1);
        }
    }

    /// Forgets a task that ran (or was dropped): its stores' pending counts and its reads.
    fn retire(&mut self, task: &IndexTask) {
        for arg in &task.args {
            self.stores.remove_pending(arg.store);
            if !matches!(arg.privilege, Privilege::Write)
                && let Some(n) = self.readers.get_mut(&arg.storage)
            {
                *n -= 1;
                if *n == 0 {
                    self.readers.remove(&arg.storage);
                }
            }
        }
    }

    /// The explanations gathered since the last call (with `Config::explain` on).
    pub fn take_explanations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.explain_log)
    }

    /// The elements of a store, as little-endian bytes in row-major order, after running the
    /// tasks pending before the read.
    pub fn read_bytes(&mut self, id: StoreId) -> Result<Vec<u8>> {
        let storage = self.stores.get(id)?.storage;
        self.flush_for(storage, false)?;
        let info = self.stores.get(id)?;
        let (storage_id, rect, dtype) = (info.storage, info.rect.clone(), info.dtype);
        let size = dtype.size();
        let storage = self
            .stores
            .storage_mut(storage_id)
            .ok_or_else(|| Error::Usage(format!("storage of store {} vanished", id.0)))?;
        let strides = storage.strides();
        if !storage.is_allocated() {
            // Never written: zeros, without allocating the storage for a read.
            return Ok(vec![0; rect.volume() as usize * size]);
        }
        let mut out = Vec::with_capacity(rect.volume() as usize * size);
        if rect.volume() == 0 {
            return Ok(out);
        }
        let bytes = storage.bytes_mut();
        copy_rect(&rect, &strides, size, |offset, len| {
            out.extend_from_slice(&bytes[offset..offset + len]);
        });
        Ok(out)
    }

    /// Overwrites a store's elements with little-endian bytes in row-major order.
    pub fn write_bytes(&mut self, id: StoreId, data: &[u8]) -> Result<()> {
        let storage = self.stores.get(id)?.storage;
        self.flush_for(storage, true)?;
        let info = self.stores.get(id)?;
        let (storage_id, rect, dtype) = (info.storage, info.rect.clone(), info.dtype);
        let size = dtype.size();
        let expected = rect.volume() as usize * size;
        if data.len() != expected {
            return Err(Error::Usage(format!(
                "{} bytes given for a store of shape {:?} and type {dtype} ({expected} bytes)",
                data.len(),
                rect.extent
            )));
        }
        if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
            return Err(Error::Usage("bool data must be 0 or 1".into()));
        }
        self.stores.allocate(storage_id)?;
        let storage = self
            .stores
            .storage_mut(storage_id)
            .ok_or_else(|| Error::Usage(format!("storage of store {} vanished", id.0)))?;
        let strides = storage.strides();
        let bytes = storage.bytes_mut();
        let mut at = 0;
        copy_rect(&rect, &strides, size, |offset, len| {
            bytes[offset..offset + len].copy_from_slice(&data[at..at + len]);
            at += len;
        });
        Ok(())
    }

    /// A task argument, before the runtime folds its partition.
    pub fn task_arg(
        store: StoreId,
        partition: Partition,
        privilege: weft_ir::Privilege,
    ) -> TaskArg {
        TaskArg {
            store,
            storage: super::stores::StorageId(0),
            partition,
            root_partition: RootPartition {
                bounds: super::partition::Rect::whole(&[]),
                tiling: None,
                image: None,
            },
            privilege,
            local: false,
        }
    }
}

/// A launch dimension along which the tiles of `partition` overlap (two points that differ
/// only in it see the same elements), if the launch has more than one point.
fn overlapping_launch_dim(partition: &Partition, launch: &[u64]) -> Option<usize> {
    let points: u64 = launch.iter().product();
    if points <= 1 {
        return None;
    }
    match partition {
        Partition::None => launch.iter().position(|&e| e > 1),
        // The ranges of an image's source are disjoint (its contract): so are the images.
        Partition::Image(_) => None,
        Partition::Tiling(t) => {
            (0..launch.len()).find(|&d| launch[d] > 1 && !t.projection.contains(&Some(d as u32)))
        }
    }
}

/// Calls `f(byte_offset, byte_len)` for each contiguous run of `rect` in a row-major storage,
/// in row-major order.
fn copy_rect(
    rect: &super::partition::Rect,
    strides: &[i64],
    size: usize,
    mut f: impl FnMut(usize, usize),
) {
    let rank = rect.origin.len();
    if rank == 0 {
        f(0, size);
        return;
    }
    let inner = rect.extent[rank - 1] as usize * size;
    let outer = &rect.extent[..rank - 1];
    for point in super::partition::points(outer) {
        let offset: i64 = (0..rank)
            .map(|d| {
                let i = if d < rank - 1 { point[d] } else { 0 };
                (rect.origin[d] + i) as i64 * strides[d]
            })
            .sum();
        f(offset as usize * size, inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::task::PluginId;

    fn task(launch: Vec<u64>, args: Vec<TaskArg>) -> IndexTask {
        IndexTask {
            seq: 0,
            plugin: PluginId(0),
            key: "test.image".into(),
            kernel: None,
            launch,
            args,
            scalars: Vec::new(),
        }
    }

    #[test]
    fn reading_a_store_never_written_gives_zeros_and_allocates_nothing() {
        let config = Config {
            threads: 1,
            component_cache: None,
            ..Config::default()
        };
        let mut core = Core::new(config).unwrap();
        let s = core.stores.create(vec![3], DType::I32).unwrap();
        assert_eq!(core.read_bytes(s).unwrap(), vec![0u8; 12]);
        assert_eq!(core.stores.allocated_bytes(), 0);
        core.stores.release(s);
        assert_eq!(core.stores.allocated_bytes(), 0);
    }

    #[test]
    fn image_partitions_are_checked_at_submit() {
        let config = Config {
            threads: 1,
            component_cache: None,
            ..Config::default()
        };
        let mut core = Core::new(config).unwrap();
        let pos = core.stores.create(vec![4, 2], DType::I64).unwrap();
        let vals = core.stores.create(vec![10], DType::F64).unwrap();
        let rows = Partition::Tiling(Tiling {
            tile: vec![2, 2],
            offset: vec![0, 0],
            projection: vec![Some(0), None],
        });
        let arg = |s, p, privilege| Core::task_arg(s, p, privilege);
        // Written through an image of a source every point sees whole: two points would
        // write the same entries.
        let e = core
            .submit(task(
                vec![2],
                vec![
                    arg(pos, Partition::None, Privilege::Read),
                    arg(vals, Partition::Image(0), Privilege::Write),
                ],
            ))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("image of argument 0") && e.contains("same rows"),
            "{e}"
        );
        // A source that is not read-only, not (n, 2), or not an argument.
        for (source, partition, privilege, image) in [
            (pos, rows.clone(), Privilege::ReadWrite, 0),
            (vals, Partition::None, Privilege::Read, 0),
            (pos, rows.clone(), Privilege::Read, 5),
        ] {
            let e = core
                .submit(task(
                    vec![2],
                    vec![
                        arg(source, partition, privilege),
                        arg(vals, Partition::Image(image), Privilege::Read),
                    ],
                ))
                .unwrap_err()
                .to_string();
            assert!(e.contains("image of argument"), "{e}");
        }
        // Rows tiled like the launch: accepted, and the image names the source's storage.
        core.submit(task(
            vec![2],
            vec![
                arg(pos, rows, Privilege::Read),
                arg(vals, Partition::Image(0), Privilege::Write),
            ],
        ))
        .unwrap();
        let queued = core.window.last().unwrap();
        let image = queued.args[1].root_partition.image.as_ref().unwrap();
        assert_eq!(image.source, core.stores.get(pos).unwrap().storage);
    }
}
