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
use super::stores::{StoreId, Stores};
use super::task::{IndexTask, KernelEntry, PluginId, TaskArg};
use crate::config::Config;
use crate::cpu::CpuBackend;
use crate::{Error, Result};

/// Counters of what the runtime did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

impl Core {
    /// A core for `config`.
    pub fn new(config: Config) -> Result<Core> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("weft-worker-{i}"))
            .build()
            .map_err(|e| Error::Usage(format!("cannot start worker threads: {e}")))?;
        Ok(Core {
            stores: Stores::default(),
            window: Vec::new(),
            kernels: HashMap::new(),
            backend: CpuBackend::new()?,
            pool,
            mapping: Box::new(BlockMapping { ranks: 1 }),
            rank: 0,
            config,
            stats: Stats::default(),
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
            arg.root_partition = RootPartition::fold(&arg.partition, &info.rect);
        }
        for arg in &task.args {
            self.stores.add_pending(arg.store);
        }
        self.stats.tasks_submitted += 1;
        self.window.push(task);
        if self.window.len() >= self.config.window_bound {
            self.flush()?;
        }
        Ok(())
    }

    /// Runs every pending task, in order. On an error the rest of the window is dropped.
    pub fn flush(&mut self) -> Result<()> {
        let window = std::mem::take(&mut self.window);
        let mut result = Ok(());
        for task in &window {
            if result.is_ok() {
                let mut exec = Executor {
                    stores: &mut self.stores,
                    backend: &mut self.backend,
                    pool: &self.pool,
                    mapping: self.mapping.as_ref(),
                    rank: self.rank,
                    stats: &mut self.stats.exec,
                };
                result = exec.run(task);
            }
            for arg in &task.args {
                self.stores.remove_pending(arg.store);
            }
        }
        result
    }

    /// Drops the tasks at positions `mark..` of the window (a failed plugin call's tasks).
    pub fn truncate_window(&mut self, mark: usize) {
        if mark >= self.window.len() {
            return;
        }
        for task in self.window.split_off(mark) {
            for arg in &task.args {
                self.stores.remove_pending(arg.store);
            }
            self.stats.tasks_submitted = self.stats.tasks_submitted.saturating_sub(1);
        }
    }

    /// The elements of a store, as little-endian bytes in row-major order, after running the
    /// tasks pending before the read.
    pub fn read_bytes(&mut self, id: StoreId) -> Result<Vec<u8>> {
        self.flush()?;
        let info = self.stores.get(id)?;
        let (storage_id, rect, dtype) = (info.storage, info.rect.clone(), info.dtype);
        let size = dtype.size();
        let storage = self
            .stores
            .storage_mut(storage_id)
            .ok_or_else(|| Error::Usage(format!("storage of store {} vanished", id.0)))?;
        let strides = storage.strides();
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
        self.flush()?;
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
            partition,
            root_partition: RootPartition {
                bounds: super::partition::Rect::whole(&[]),
                tiling: None,
            },
            privilege,
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
