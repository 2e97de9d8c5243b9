//! Running one index task: the points this process owns, through a back end.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use weft_ir::Scalar;
use weft_ir::reduction::{LoopPartial, Partial};

use weft_ir::Param;

use crate::backend::{Backend, Binding, Prepared};
use crate::distribution::{DistContext, Distribution};
use crate::mapping::Mapping;
use crate::partition::{Rect, points};
use crate::stores::{Piece, StorageId, StoreId, Stores, piece_holding};
use crate::task::IndexTask;
use crate::{Error, Result};

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
    /// Buffers that a task's output took over from an input whose contents died with the
    /// task (see [`weft_ir::coverage::shares_in_place`]).
    pub buffers_handed_over: u64,
    /// Seconds spent running tasks' kernels: from each task's first launch to its partial
    /// results folded, wall time on this process. A device's launches may return before
    /// its kernels end, so on a GPU this is the time to issue them (and to fold).
    pub kernel_seconds: f64,
}

/// What the executor needs besides the task.
pub struct Executor<'a> {
    /// The store table.
    pub stores: &'a mut Stores,
    /// The back end that holds memory and runs kernels.
    pub backend: &'a mut dyn Backend,
    /// Who owns which point.
    pub mapping: &'a dyn Mapping,
    /// This process's rank.
    pub rank: usize,
    /// Counters to bump.
    pub stats: &'a mut ExecStats,
    /// Whether compiling a kernel is an error.
    pub forbid_compiles: bool,
    /// Per store, how many references to it the tasks that run now (or ran before and are not
    /// yet retired) hold: a store whose pending count is no more than that, with no handle,
    /// dies with the task, and an output may take over its buffer.
    pub uses: &'a crate::FastMap<StoreId, u32>,
    /// Whether an output may take over the buffer of an input that dies with the task (off
    /// while a snapshot must stay able to run the task's parts again).
    pub hand_over: bool,
    /// What crosses ranks, when the program runs on several.
    pub distribution: Option<&'a mut dyn Distribution>,
    /// The trace being recorded, told of each fold of partial reductions.
    pub(crate) recording: Option<&'a crate::trace::Recording>,
}

impl Executor<'_> {
    /// Runs the points of `task` that this process owns.
    pub fn run(&mut self, task: &IndexTask) -> Result<()> {
        // What the task writes is no longer known as indices (nor after it: a point reads
        // through an image before the kernel runs).
        self.forget_written(task);
        let ran = self.run_task(task);
        self.forget_written(task);
        ran
    }

    /// Forgets the index values known of every storage `task` may write.
    fn forget_written(&mut self, task: &IndexTask) {
        if !self.stores.knows_indices() {
            return;
        }
        for arg in &task.args {
            if arg.privilege != weft_ir::Privilege::Read
                && let Ok(info) = self.stores.get(arg.store)
            {
                let storage = info.storage;
                self.stores.forget_indices(storage);
            }
        }
    }

    /// [`Executor::run`], between the forgetting.
    fn run_task(&mut self, task: &IndexTask) -> Result<()> {
        let kernel = &task.kernel;
        if !self.backend.is_prepared(kernel) {
            if self.forbid_compiles {
                return Err(Error::CompileForbidden {
                    kernel: kernel.name().to_string(),
                });
            }
            let span = tracing::info_span!("compile", kernel = kernel.name());
            let _entered = span.enter();
            if let Prepared::Compiled(time) = self
                .backend
                .prepare(kernel, crate::cache::Owner(task.plugin.0))?
            {
                let seconds = time.as_secs_f64();
                self.stats.kernels_compiled += 1;
                self.stats.compile_seconds += seconds;
                self.stats.compile_seconds_max = self.stats.compile_seconds_max.max(seconds);
            }
        }
        // On several ranks, what the points read comes first: a buffer that an output takes
        // over below must already hold it.
        if let Some(d) = self.distribution.as_deref_mut() {
            d.before_task(
                &mut DistContext {
                    stores: self.stores,
                    backend: self.backend,
                },
                task,
            )?;
        }
        // Every storage gets its buffer before any point runs; task-local temporaries get no
        // storage, only scratch memory per point. A fresh storage that the task writes whole
        // before reading it gets a buffer without the zero fill.
        let overwritten = overwritten_args(self.stores, self.mapping, self.rank, task);
        // An output written whole may take over the buffer of an input that dies with the
        // task (`x = x + a * p` updates `x`'s memory in place): one fresh buffer fewer, and
        // its first-touch cost, its cache misses and its write-allocate reads with it.
        let handed = self.hand_over(task, &overwritten);
        let mut buffers = Vec::with_capacity(task.args.len());
        let mut uncleared = Vec::new();
        for (a, (arg, &uninit)) in task.args.iter().zip(&overwritten).enumerate() {
            let info = self.stores.get(arg.store)?;
            let (storage, element_size) = (info.storage, info.dtype.size());
            let pieces = if arg.local {
                Vec::new()
            } else if let Some((_, pieces)) = handed.iter().find(|(from, _)| *from == a) {
                // The input reads the memory it had.
                pieces.clone()
            } else {
                if uninit {
                    uncleared.push(storage);
                }
                self.stores
                    .ensure_allocated(storage, self.backend, uninit)?;
                // On one rank of several, the storage may be held as pieces of it.
                self.stores
                    .storage(storage)
                    .map(|s| s.pieces().to_vec())
                    .unwrap_or_default()
            };
            buffers.push(Held {
                local: arg.local,
                pieces,
                element_size,
            });
        }
        let ran = self.run_points(task, &buffers);
        if ran.is_ok()
            && let Some(d) = self.distribution.as_deref_mut()
        {
            d.after_task(
                &mut DistContext {
                    stores: self.stores,
                    backend: self.backend,
                },
                task,
            )?;
        }
        if ran.is_err() {
            // The task may have stopped before writing all of an uncleared buffer: what it
            // did not write must never be read, so the storage starts again from zeros.
            for storage in uncleared {
                for buffer in self.stores.discard_buffers(storage) {
                    self.backend.free(buffer);
                }
            }
        }
        ran
    }

    /// Moves, for each argument that the task writes whole before reading
    /// (`overwritten`), the buffer of an argument it may share memory with
    /// ([`crate::kernel::KernelEntry::shares_in_place`]) whose contents die with the task: the
    /// same element type and size, whole contiguous views with the same partition (so every
    /// point sees the same addresses through both), neither deferred nor local, and no
    /// other argument of the task on either storage. Returns `(input argument, buffer)` per
    /// move: the input's binding keeps the buffer it read from.
    fn hand_over(&mut self, task: &IndexTask, overwritten: &[bool]) -> Vec<(usize, Vec<Piece>)> {
        let mut handed: Vec<(usize, Vec<Piece>)> = Vec::new();
        if !self.hand_over {
            return handed;
        }
        let kernel = &task.kernel;
        for (k, arg) in task.args.iter().enumerate() {
            if !overwritten.get(k).copied().unwrap_or(false) || arg.deferred.is_some() {
                continue;
            }
            let Some(param) = kernel.store_param(k) else {
                continue;
            };
            for &j_param in kernel.shares_in_place(param) {
                let Some(j) = kernel
                    .store_arg(j_param as usize)
                    .filter(|&j| j < task.args.len())
                else {
                    continue;
                };
                let from = &task.args[j];
                let alone = task
                    .args
                    .iter()
                    .filter(|a| a.storage == from.storage)
                    .count()
                    == 1;
                let uses = self.uses.get(&from.store).copied().unwrap_or(0);
                let same_layout = match (self.stores.get(from.store), self.stores.get(arg.store)) {
                    (Ok(f), Ok(t)) => f.dtype == t.dtype,
                    _ => false,
                };
                let view = &from.root_partition.view;
                let whole = self.stores.storage(from.storage).is_some_and(|s| {
                    view.offset == 0 && view.volume() == s.len() && view.is_contiguous()
                });
                if from.local
                    || from.deferred.is_some()
                    || !alone
                    || !same_layout
                    || !whole
                    || from.root_partition != arg.root_partition
                    || handed.iter().any(|&(a, _)| a == j)
                    || !self.stores.dies_with(from.store, uses)
                {
                    continue;
                }
                if let Some(pieces) = self.stores.hand_over(from.storage, arg.storage) {
                    handed.push((j, pieces));
                    self.stats.buffers_handed_over += 1;
                    break;
                }
            }
        }
        handed
    }

    /// Runs the points this process owns, each with its bindings into `buffers` (one per
    /// argument), and
    /// folds the reductions the back end held back.
    fn run_points(&mut self, task: &IndexTask, buffers: &[Held]) -> Result<()> {
        let kernel = &task.kernel;
        // Whatever an earlier task that failed part-way held back is not this task's.
        drop(self.backend.take_reductions()?);
        self.backend.finish_deferred(false)?;
        // A task of one point on one process is the only contribution to what it reduces
        // and the only writer of its deferred stores: the back end may finish both itself.
        let one_point = task.launch.iter().product::<u64>() == 1;
        self.backend
            .set_sole_launch(one_point && self.distribution.is_none());
        let mut bindings = Vec::with_capacity(task.args.len());
        let mut ran_any = false;
        let started = std::time::Instant::now();
        for point in self.mapping.points_of(self.rank, &task.launch) {
            self.bind(task, buffers, &point, &mut bindings)?;
            self.backend.launch(kernel.id(), &bindings, &task.scalars)?;
            self.stats.points_executed += 1;
            ran_any = true;
        }
        // Deferred stores' held rows land once every point has run.
        self.backend.finish_deferred(true)?;
        let mut held = self.backend.take_reductions()?;
        // A task that reduces into nothing holds nothing back on any rank: no gather.
        let reduces = task
            .args
            .iter()
            .any(|a| matches!(a.privilege, weft_ir::Privilege::Reduce(_)));
        if let Some(d) = self.distribution.as_deref_mut().filter(|_| reduces) {
            // Every rank's partials, the same on every rank (even one that ran no point).
            held = d.gather_partials(held)?;
            if !ran_any && !held.is_empty() {
                let first = vec![0; task.launch.len()];
                self.bind(task, buffers, &first, &mut bindings)?;
            }
        }
        if !held.is_empty() {
            let targets: Vec<u32> = held.iter().map(|p| p.param).collect();
            if let Some(r) = self.recording {
                r.begin_fold(kernel.name());
            }
            let folded = fold_reductions(&mut *self.backend, kernel.name(), &bindings, held);
            if let Some(r) = self.recording {
                r.end_fold();
            }
            folded?;
            if let Some(d) = self.distribution.as_deref_mut() {
                for param in targets {
                    let arg = kernel
                        .ir()
                        .params
                        .iter()
                        .take(param as usize)
                        .filter(|p| matches!(p, Param::Store { .. }))
                        .count();
                    if let Some(a) = task.args.get(arg) {
                        d.replicated(a.storage);
                    }
                }
            }
        }
        self.stats.kernel_seconds += started.elapsed().as_secs_f64();
        self.stats.tasks_executed += 1;
        Ok(())
    }
}

impl Executor<'_> {
    /// The bindings of `point` of `task` into `buffers` (see [`Executor::run_points`]).
    fn bind(
        &mut self,
        task: &IndexTask,
        buffers: &[Held],
        point: &[u64],
        bindings: &mut Vec<Binding>,
    ) -> Result<()> {
        bindings.clear();
        for (arg, held) in task.args.iter().zip(buffers) {
            let element_size = held.element_size;
            let p = &arg.root_partition;
            let rect = match &p.image {
                None => p.sub_rect(point),
                Some(image) => {
                    // On one process, values read back stay known until the storage changes
                    // (on several, a rank's pieces may be refilled by the distribution).
                    let known = self.distribution.is_none();
                    let (stores, backend) = (&mut *self.stores, &mut *self.backend);
                    p.sub_rect_with(point, |element| {
                        if known && let Some(v) = stores.known_index(image.source, element) {
                            return Some(v);
                        }
                        let v = read_index(stores, backend, image.source, element)?;
                        if known {
                            stores.remember_index(image.source, element, v);
                        }
                        Some(v)
                    })
                }
            };
            let origin: crate::Dims<i64> = rect.origin.iter().map(|&o| o as i64).collect();
            let extents: crate::Dims<i64> = rect.extent.iter().map(|&e| e as i64).collect();
            if held.local {
                bindings.push(Binding::Scratch {
                    extents,
                    origin,
                    view: p.view.shape.clone(),
                    element_size,
                });
                continue;
            }
            // The piece of the storage that holds the elements the point reaches (on one
            // process, the one piece of every element).
            let first = p.view.element(&rect.origin);
            let (lo, hi) = if rect.volume() == 0 {
                (0, 0)
            } else {
                // The lowest and one past the highest element the sub-store reaches (without
                // allocating: this runs for every argument of every point).
                let (mut lo, mut hi) = (i128::from(first), i128::from(first));
                for (&e, &st) in rect.extent.iter().zip(&p.view.strides) {
                    let reach = (i128::from(e) - 1) * i128::from(st);
                    if reach < 0 {
                        lo += reach;
                    } else {
                        hi += reach;
                    }
                }
                (lo.max(0) as u64, hi.max(0) as u64 + 1)
            };
            let piece = if rect.volume() == 0 {
                held.pieces.first()
            } else {
                piece_holding(&held.pieces, lo, hi)
            };
            let Some(Piece {
                lo: base,
                buffer: Some(buffer),
                ..
            }) = piece.copied()
            else {
                return Err(Error::Internal(format!(
                    "kernel `{}`: no piece of storage {} holds elements {lo}..{hi} that point \
                     {point:?} uses",
                    task.kernel.name(),
                    arg.storage.0
                )));
            };
            bindings.push(Binding::Buffer {
                buffer,
                offset: if rect.volume() == 0 { 0 } else { first - base },
                extents,
                strides: p.view.strides.clone(),
                origin,
                view: p.view.shape.clone(),
                element_size,
                deferred: arg.deferred,
            });
        }
        Ok(())
    }
}

/// The memory of one argument of a task.
#[derive(Clone, Debug)]
struct Held {
    /// A task-local temporary: scratch memory per point, no storage.
    local: bool,
    /// The pieces of its storage that this process holds, allocated.
    pieces: Vec<Piece>,
    /// Bytes per element.
    element_size: usize,
}

/// Per argument of `task`, whether its storage may get an uncleared buffer
/// ([`Backend::alloc_uninit`]): the storage has no buffer yet, no other argument of the task
/// names it, the argument's view is the whole storage (contiguous, from element 0), the
/// points' sub-stores of the argument cover the view exactly (no image partition), this
/// process's points write all of the storage that it holds (on one rank of several, the
/// pieces they reserved), and the kernel's parallel loop over some argument `q` writes every
/// element of the argument before reading it, with `q`'s sub-store the same extents at every
/// point (see [`weft_ir::coverage`]).
pub(crate) fn overwritten_args(
    stores: &Stores,
    mapping: &dyn Mapping,
    rank: usize,
    task: &IndexTask,
) -> Vec<bool> {
    covered_args(stores, mapping, rank, task, true)
}

/// Per argument of `task`, whether this process's points write all of its storage (as
/// [`overwritten_args`] says, for storages that already hold values too): a storage that a
/// failure left without a value holds values again after such a task.
pub(crate) fn written_whole(
    stores: &Stores,
    mapping: &dyn Mapping,
    rank: usize,
    task: &IndexTask,
) -> Vec<bool> {
    covered_args(stores, mapping, rank, task, false)
}

/// [`overwritten_args`] (`fresh_only`) and [`written_whole`].
fn covered_args(
    stores: &Stores,
    mapping: &dyn Mapping,
    rank: usize,
    task: &IndexTask,
    fresh_only: bool,
) -> Vec<bool> {
    /// More points than this are not checked (the cover test is quadratic); their stores
    /// are zeroed.
    const MAX_POINTS: usize = 64;
    let mut result = vec![false; task.args.len()];
    let kernel = &task.kernel;
    let store_params: Vec<usize> = kernel
        .ir()
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p, Param::Store { .. }))
        .map(|(i, _)| i)
        .collect();
    if store_params.len() != task.args.len() {
        return result;
    }
    let launch: Vec<Vec<u64>> = points(&task.launch).take(MAX_POINTS + 1).collect();
    if launch.len() > MAX_POINTS {
        return result;
    }
    let mine: Vec<&Vec<u64>> = launch
        .iter()
        .filter(|p| mapping.owner(p, &task.launch) == rank)
        .collect();
    for (k, arg) in task.args.iter().enumerate() {
        let Some(over) = kernel.overwritten_by(store_params[k]) else {
            continue;
        };
        let Some(q) = store_params.iter().position(|&p| p == over as usize) else {
            continue;
        };
        let over_arg = &task.args[q];
        let Some(storage) = stores.storage(arg.storage) else {
            continue;
        };
        let view = &arg.root_partition.view;
        let fresh = (!fresh_only || !storage.is_allocated())
            && task
                .args
                .iter()
                .filter(|a| a.storage == arg.storage)
                .count()
                == 1;
        let whole = view.offset == 0 && view.volume() == storage.len() && view.is_contiguous();
        if arg.local
            || !fresh
            || !whole
            || arg.root_partition.image.is_some()
            || over_arg.root_partition.image.is_some()
        {
            continue;
        }
        let rects: Vec<Rect> = launch
            .iter()
            .map(|p| arg.root_partition.sub_rect(p))
            .collect();
        let same_extents = launch
            .iter()
            .zip(&rects)
            .all(|(p, r)| over_arg.root_partition.sub_rect(p).extent == r.extent);
        // This process's points must write all it holds of the storage (on one rank of
        // several, the pieces its points reserved): their rectangles lie in memory without
        // gaps (row-major runs), and hold as many elements as the pieces.
        let held = if storage.pieces().is_empty() {
            storage.len()
        } else {
            storage.pieces().iter().map(|p| p.hi - p.lo).sum()
        };
        let mut written = 0;
        let mut dense = true;
        for p in &mine {
            let r = arg.root_partition.sub_rect(p);
            let sub = crate::view::ViewMap {
                offset: view.element(&r.origin),
                shape: r.extent.clone(),
                strides: view.strides.clone(),
            };
            written += r.volume();
            dense &= r.volume() == 0 || sub.is_contiguous();
        }
        result[k] = same_extents && covers_exactly(&rects, &view.shape) && dense && written == held;
    }
    result
}

/// Whether `rects` lie inside `0..shape`, overlap nowhere, and so, with as many elements as
/// the shape, cover it.
fn covers_exactly(rects: &[Rect], shape: &[u64]) -> bool {
    let inside = |r: &Rect| {
        r.origin.len() == shape.len()
            && r.extent.len() == shape.len()
            && (0..shape.len()).all(|d| r.origin[d].saturating_add(r.extent[d]) <= shape[d])
    };
    let disjoint = |a: &Rect, b: &Rect| {
        a.volume() == 0
            || b.volume() == 0
            || (0..shape.len()).any(|d| {
                a.origin[d] + a.extent[d] <= b.origin[d] || b.origin[d] + b.extent[d] <= a.origin[d]
            })
    };
    let total: u64 = rects.iter().map(Rect::volume).sum();
    rects.iter().all(inside)
        && total == shape.iter().product::<u64>()
        && rects
            .iter()
            .enumerate()
            .all(|(i, a)| rects[i + 1..].iter().all(|b| disjoint(a, b)))
}

/// Merges the partial results that the points of one task held back (see
/// [`Backend::launch`]), per loop and element reduced into, and folds each into it once, in
/// loop order (as the unfused tasks would): `old op result`. `bindings` are the last point's (a
/// 0-d store's binding is the same for every point). A target bound to scratch memory (a
/// temporary) is never read, and is skipped.
pub fn fold_reductions(
    backend: &mut dyn Backend,
    kernel: &str,
    bindings: &[Binding],
    held: Vec<LoopPartial>,
) -> Result<()> {
    let fault = |message: String| Error::KernelFault {
        kernel: kernel.to_string(),
        message,
    };
    let mut merged: BTreeMap<(u32, u32, Vec<u64>), Partial> = BTreeMap::new();
    for part in held {
        match merged.entry((part.loop_index, part.param, part.element)) {
            Entry::Vacant(v) => {
                v.insert(part.partial);
            }
            Entry::Occupied(mut o) => o
                .get_mut()
                .merge(part.partial)
                .map_err(|e| fault(e.to_string()))?,
        }
    }
    for ((_, param, element), mut partial) in merged {
        let Some(result) = partial.finish().map_err(|e| fault(e.to_string()))? else {
            continue;
        };
        let Some(Binding::Buffer {
            buffer,
            offset,
            strides,
            origin,
            view,
            ..
        }) = bindings.get(param as usize)
        else {
            continue;
        };
        // The element of an element tree (none for a 0-d store), in the view's coordinates:
        // the same view for every point, so any point's binding reaches it.
        let inside = element.len() == view.len()
            && element.iter().zip(view).all(|(e, x)| e < x)
            && origin.len() == view.len();
        if !inside {
            return Err(fault(format!(
                "element {element:?} of parameter {param} lies outside its view {view:?}"
            )));
        }
        let delta: i64 = element
            .iter()
            .zip(origin)
            .zip(strides)
            .map(|((&e, &o), &st)| (e as i64 - o).saturating_mul(st))
            .sum();
        let Some(offset) = offset.checked_add_signed(delta) else {
            return Err(fault(format!(
                "element {element:?} of parameter {param} lies outside its buffer"
            )));
        };
        let dtype = result.dtype();
        let at = offset.saturating_mul(dtype.size() as u64);
        let mut bytes = [0u8; 8];
        backend.read(*buffer, at, &mut bytes[..dtype.size()])?;
        let old = Scalar::from_bits(dtype, u64::from_le_bytes(bytes));
        let new = weft_ir::interp::reduce(partial.op(), old, result)
            .ok_or_else(|| fault(format!("cannot fold a reduction into parameter {param}")))?;
        let bits = match new {
            Scalar::Bool(b) => u64::from(b),
            other => other.to_bits(),
        };
        backend.write(*buffer, at, &bits.to_le_bytes()[..dtype.size()])?;
    }
    Ok(())
}

/// The integer element (`i32` or `i64`) at storage element `element` of a storage, if the
/// storage holds integers, has its buffer and has that element.
pub fn read_index(
    stores: &Stores,
    backend: &mut dyn Backend,
    storage: StorageId,
    element: u64,
) -> Option<i64> {
    let s = stores.storage(storage)?;
    let piece = s.piece_of(element, element + 1)?;
    let buffer = piece.buffer?;
    let size = s.dtype.size();
    let mut bytes = [0u8; 8];
    backend
        .read(
            buffer,
            (element - piece.lo) * size as u64,
            &mut bytes[..size],
        )
        .ok()?;
    match s.dtype {
        weft_ir::DType::I64 => Some(i64::from_le_bytes(bytes)),
        weft_ir::DType::I32 => {
            let mut half = [0u8; 4];
            half.copy_from_slice(&bytes[..4]);
            Some(i64::from(i32::from_le_bytes(half)))
        }
        _ => None,
    }
}
