//! Running one index task: its points, on this process's threads.

use crate::cpu::{CpuBackend, StoreView};
use crate::{Error, Result};

use super::mapping::Mapping;
use super::partition::points;
use super::stores::{Stores, row_major_strides};
use super::task::IndexTask;

/// Counters of what the executor did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExecStats {
    /// Tasks run.
    pub tasks_executed: u64,
    /// Point tasks run on this process.
    pub points_executed: u64,
    /// Kernels compiled.
    pub kernels_compiled: u64,
    /// Seconds spent compiling kernels, in all.
    pub compile_seconds: f64,
    /// The longest compile of one kernel, in seconds.
    pub compile_seconds_max: f64,
}

/// What the executor needs besides the task.
pub struct Executor<'a> {
    /// The store table.
    pub stores: &'a mut Stores,
    /// The CPU back end.
    pub backend: &'a mut CpuBackend,
    /// The worker threads.
    pub pool: &'a rayon::ThreadPool,
    /// Who owns which point.
    pub mapping: &'a dyn Mapping,
    /// This process's rank.
    pub rank: usize,
    /// Counters to bump.
    pub stats: &'a mut ExecStats,
    /// Whether compiling a kernel is an error.
    pub forbid_compiles: bool,
}

impl Executor<'_> {
    /// Runs the points of `task` that this process owns.
    pub fn run(&mut self, task: &IndexTask) -> Result<()> {
        let entry = task.kernel.as_ref().ok_or_else(|| {
            Error::Usage(format!(
                "task `{}` reached the executor without a kernel",
                task.key
            ))
        })?;
        let compiled = match entry.compiled.get() {
            Some(c) => c,
            None => {
                if self.forbid_compiles {
                    return Err(Error::Usage(format!(
                        "kernel `{}` would be compiled, but compiling is forbidden now \
                         (Runtime::forbid_compiles)",
                        entry.name
                    )));
                }
                let c = self.backend.compile(&entry.ir)?;
                self.stats.kernels_compiled += 1;
                let seconds = c.compile_time().as_secs_f64();
                self.stats.compile_seconds += seconds;
                self.stats.compile_seconds_max = self.stats.compile_seconds_max.max(seconds);
                entry.compiled.get_or_init(|| c)
            }
        };
        // Make sure every storage exists before taking pointers into any of them; task-local
        // temporaries get no storage, only a scratch buffer per point.
        let mut bases = Vec::with_capacity(task.args.len());
        for arg in &task.args {
            let info = self.stores.get(arg.store)?;
            let (storage_id, view_origin, size) =
                (info.storage, info.rect.origin.clone(), info.dtype.size());
            if arg.local {
                bases.push((std::ptr::null_mut(), Vec::new(), size, view_origin));
                continue;
            }
            let base = self.stores.allocate(storage_id)?;
            let storage = self
                .stores
                .storage(storage_id)
                .ok_or_else(|| Error::Usage(format!("storage {} vanished", storage_id.0)))?;
            bases.push((base, storage.strides(), size, view_origin));
        }
        let mut scratch: Vec<Vec<u64>> = vec![Vec::new(); task.args.len()];
        for point in points(&task.launch) {
            if self.mapping.owner(&point, &task.launch) != self.rank {
                continue;
            }
            let mut views = Vec::with_capacity(task.args.len());
            for (i, (arg, (base, strides, size, view_origin))) in
                task.args.iter().zip(&bases).enumerate()
            {
                let rect = match &arg.root_partition.image {
                    None => arg.root_partition.sub_rect(&point),
                    Some(image) => {
                        let stores = &*self.stores;
                        arg.root_partition
                            .sub_rect_with(&point, |r, c| stores.read_index(image.source, &[r, c]))
                    }
                };
                let origin: Vec<i64> = rect
                    .origin
                    .iter()
                    .zip(view_origin)
                    .map(|(&o, &v)| o as i64 - v as i64)
                    .collect();
                if arg.local {
                    let bytes = rect.volume() as usize * size;
                    let buffer = &mut scratch[i];
                    buffer.clear();
                    buffer.resize(bytes.div_ceil(8).max(1), 0);
                    views.push(StoreView {
                        ptr: buffer.as_mut_ptr().cast(),
                        extents: rect.extent.iter().map(|&e| e as i64).collect(),
                        strides: row_major_strides(&rect.extent),
                        origin,
                    });
                    continue;
                }
                let offset: i64 = rect
                    .origin
                    .iter()
                    .zip(strides)
                    .map(|(&o, &s)| o as i64 * s)
                    .sum();
                views.push(StoreView {
                    // SAFETY: `rect` lies inside the root storage (sub_rect clips to the
                    // view's bounds, which lie inside the root), so the offset of its origin
                    // is at most the storage's length; `wrapping_add` keeps this sound even
                    // for an empty rectangle at the very end.
                    ptr: base.wrapping_add(offset as usize * size),
                    extents: rect.extent.iter().map(|&e| e as i64).collect(),
                    strides: strides.clone(),
                    origin,
                });
            }
            // SAFETY: each view describes a rectangle inside an allocated storage with that
            // storage's row-major strides (or a scratch buffer of the rectangle's size with
            // dense strides), and the storages and buffers stay alive and unmoved for the call
            // (`self.stores` is borrowed mutably, and `scratch` is not touched until the next
            // point).
            unsafe { compiled.run(&views, &task.scalars, self.pool) }?;
            self.stats.points_executed += 1;
        }
        self.stats.tasks_executed += 1;
        Ok(())
    }
}
