//! The GPU back end: `weft-runtime`'s [`Backend`] seam over the CUDA driver (feature `cuda`).
//!
//! - **Memory**: every buffer is device memory ([`CudaSlice<u8>`]); freed buffers go to a pool
//!   keyed by size and are reused (zeroed again where [`Backend::alloc`] asks for zeros).
//!   Bytes cross to the host only in [`Backend::read`] and from it only in [`Backend::write`].
//! - **Kernels**: [`Backend::prepare`] emits the kernel's PTX ([`crate::emit()`]) and loads it
//!   (the driver compiles it, and keeps the machine code in its own cache across runs); the
//!   module is cached by [`KernelId`], and the time to emit and load it is what
//!   [`Prepared::Compiled`] reports.
//! - **Launches** run on one stream, entry after entry, without waiting for the host. Each
//!   launch gets a fault word; [`Backend::synchronize`] and [`Backend::read`] wait for the
//!   stream and report the first launch whose index check failed, naming its kernel and the
//!   access.
//! - **Reductions** in the canonical order: an entry leaves each point's contribution in a leaf
//!   buffer ([`crate::emit::Leaf`]). For a rank-1 loop, and a rank-2 loop whose rows span the
//!   view, the tree runs on the device ([`crate::tree`]: one launch per level) and only its
//!   complete nodes, a few values, come back; for other loops the launcher copies the leaves to the host and reduces
//!   them there ([`weft_ir::reduction::dense_nodes`]). [`Backend::take_reductions`] hands the
//!   nodes to the executor. Element trees' rows come back whole (one per unit).
//! - **Deferred bindings** (fusion through a bounded anti-dependence): the entries store into
//!   a dense temporary, which a copy kernel (emitted from the IR like any other) moves into
//!   place after the launch's last entry; so every point's loads see the old values.

use std::collections::HashMap;
use std::ops::{Add, Mul};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use weft_ir::reduction::{DenseShape, ELEMENT_BLOCK_LEVEL, LoopPartial, Partial, dense_nodes};
use weft_ir::{DType, Param, ReduceOp, Scalar};
use weft_runtime::{
    Backend, Binding, BoundedCache, BufferId, CacheLimits, KernelEntry, KernelId, MemoryStats,
    Owner, Prepared,
};

use crate::abi::{self, AbiParam};
use crate::emit::{BLOCK_THREADS, Leaf, Module, ROWS_BLOCK};
use crate::{Error, Result};

/// The most blocks a launch asks for: threads stride over the rest.
const MAX_BLOCKS: u32 = 1 << 16;

/// The most blocks along a 2-D grid's `y` (the driver's limit), and along its `x` here.
const MAX_GRID_Y: u32 = 65_535;

/// Freed device memory kept for reuse, at most.
const POOL_BYTES: u64 = 4 << 30;

/// A kernel loaded on the device.
struct Loaded {
    /// The kernel it was loaded from: a hit must be this kernel.
    entry: Arc<KernelEntry>,
    /// Bytes per element of each store parameter: a launch's bindings must match.
    element_sizes: Vec<usize>,
    name: String,
    params: Vec<Param>,
    module: Module,
    functions: Vec<CudaFunction>,
}

/// A launch whose fault word has not been read yet.
struct PendingFault {
    kernel: String,
    sites: Vec<abi::FaultSite>,
    word: CudaSlice<u32>,
}

/// One store argument of a launch, as the entries see it.
struct StoreArg {
    /// The device address of the element at index 0.
    address: u64,
    extents: Vec<i64>,
    strides: Vec<i64>,
    origin: Vec<i64>,
    view: Vec<u64>,
}

/// The GPU back end (see the module documentation).
pub struct PtxBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    buffers: HashMap<BufferId, CudaSlice<u8>>,
    next_buffer: u64,
    pool: HashMap<usize, Vec<CudaSlice<u8>>>,
    pooled: u64,
    allocated: u64,
    kernels: BoundedCache<KernelId, Loaded>,
    held: Vec<LoopPartial>,
    faults: Vec<PendingFault>,
    /// Task-local scratch of launches not yet waited for.
    scratch: Vec<CudaSlice<u8>>,
    /// The copy kernels of deferred bindings, by element size and rank.
    copies: HashMap<(usize, usize), Arc<KernelEntry>>,
    /// The reduction tree's level kernels, by operator and type.
    levels: HashMap<(&'static str, DType), Arc<KernelEntry>>,
    /// The longest the host waits for the launches pending at a synchronization before it
    /// stops them, and the stream it writes their fault words on meanwhile (one that does not
    /// wait for the launches).
    kernel_time: Option<(std::time::Duration, Arc<CudaStream>)>,
}

impl std::fmt::Debug for PtxBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtxBackend")
            .field("buffers", &self.buffers.len())
            .field("kernels", &self.kernels.stats())
            .finish_non_exhaustive()
    }
}

/// The bounds of the PTX back end's cache of loaded modules: 1024 kernels and 256 MiB
/// (counted as twice each module's PTX text, for the text it keeps and the code the driver
/// loaded).
pub const MODULE_CACHE_LIMITS: CacheLimits = CacheLimits {
    entries: 1024,
    bytes: 256 << 20,
};

/// Refuses bindings that are not the kernel's store parameters in count and element size
/// ([`weft_runtime::check_element_sizes`]).
fn check_element_sizes(loaded: &Loaded, bindings: &[Binding]) -> Result<()> {
    weft_runtime::check_element_sizes(&loaded.element_sizes, bindings)
        .map_err(|message| Error::Memory(format!("kernel `{}`: {message}", loaded.name)))
}

/// The device address of `slice` (its stream-ordering guard dropped at once: launches and
/// copies all run on the one stream, in order).
fn address_of<T>(stream: &CudaStream, slice: &CudaSlice<T>) -> u64 {
    let (address, _sync) = slice.device_ptr(stream);
    address
}

fn driver(what: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Driver(format!("{what}: {e}"))
}

impl PtxBackend {
    /// The back end on GPU `ordinal`. Fails with [`Error::NoDriver`] where the CUDA driver
    /// library cannot be loaded (checked before any driver call, which would panic), and with
    /// [`Error::Driver`] where the driver has no such device.
    pub fn new(ordinal: usize) -> Result<PtxBackend> {
        PtxBackend::with_kernel_time(ordinal, None)
    }

    /// The back end on GPU `ordinal`, stopping the launches pending at a synchronization
    /// (a read, a reduction, [`Backend::synchronize`]) that it has waited `limit` for: the
    /// host sets their fault words to [`abi::CANCELLED`] from a second stream, and every
    /// `for` loop that no store bounds checks the word on its back edge.
    pub fn with_kernel_time(
        ordinal: usize,
        limit: Option<std::time::Duration>,
    ) -> Result<PtxBackend> {
        crate::driver::check_present()?;
        let ctx = CudaContext::new(ordinal).map_err(driver("cannot open the GPU"))?;
        let stream = ctx.default_stream();
        // Made before any work: making a second stream synchronizes the context once.
        let kernel_time = match limit {
            Some(limit) => Some((
                limit,
                ctx.new_stream()
                    .map_err(driver("a stream for cancelling"))?,
            )),
            None => None,
        };
        Ok(PtxBackend {
            ctx,
            stream,
            buffers: HashMap::new(),
            next_buffer: 1,
            pool: HashMap::new(),
            pooled: 0,
            allocated: 0,
            kernels: BoundedCache::new(MODULE_CACHE_LIMITS),
            held: Vec::new(),
            faults: Vec::new(),
            scratch: Vec::new(),
            copies: HashMap::new(),
            levels: HashMap::new(),
            kernel_time,
        })
    }

    /// The device's name, as the driver gives it.
    pub fn device_name(&self) -> Result<String> {
        self.ctx.name().map_err(driver("device name"))
    }

    fn buffer(&self, id: BufferId) -> Result<&CudaSlice<u8>> {
        self.buffers
            .get(&id)
            .ok_or_else(|| Error::Memory(format!("no buffer {}", id.0)))
    }

    /// A device allocation of `bytes` (at least one), from the pool where one of that size is
    /// free; zeroed if `zero`.
    fn allocate(&mut self, bytes: u64, zero: bool) -> Result<CudaSlice<u8>> {
        let size = usize::try_from(bytes.max(1))
            .map_err(|_| Error::Memory(format!("cannot allocate {bytes} bytes")))?;
        let reused = self.pool.get_mut(&size).and_then(Vec::pop);
        let mut slice = match reused {
            Some(s) => {
                self.pooled = self.pooled.saturating_sub(size as u64);
                s
            }
            None => {
                // SAFETY: the memory is zeroed below or, for `alloc_uninit`, written whole by
                // the task that asked for it before anything reads it (the seam's contract);
                // it never holds another process's data (the driver clears fresh memory).
                unsafe { self.stream.alloc::<u8>(size) }
                    .map_err(driver("cannot allocate device memory"))?
            }
        };
        if zero {
            self.stream
                .memset_zeros(&mut slice)
                .map_err(driver("cannot clear device memory"))?;
        }
        Ok(slice)
    }

    /// The kernel that copies a rank-`rank` rectangle of `size`-byte elements (as integers,
    /// so every bit moves) from one binding into another, prepared.
    fn copy_kernel(&mut self, size: usize, rank: usize) -> Result<KernelId> {
        let entry = match self.copies.get(&(size, rank)) {
            Some(entry) => entry.clone(),
            None => {
                let (name, kernel) = copy_kernel_ir(size, rank)?;
                let entry = KernelEntry::new(&name, &kernel)
                    .map_err(|e| Error::Memory(format!("the copy kernel {name}: {e}")))?;
                let entry = Arc::new(entry);
                self.copies.insert((size, rank), entry.clone());
                entry
            }
        };
        // Prepared again if the module cache evicted it.
        self.prepare(&entry, Owner::RUNTIME)
            .map_err(|e| Error::Memory(format!("the copy kernel {}: {e}", entry.name())))?;
        Ok(entry.id())
    }

    /// Waits for the stream (stopping the pending launches at the kernel time limit) and
    /// reports the first launch whose index check failed or that was stopped.
    fn drain_faults(&mut self) -> Result<()> {
        let cancelled = self.wait_within_kernel_time()?;
        self.stream
            .synchronize()
            .map_err(driver("waiting for the GPU"))?;
        self.scratch.clear();
        let pending = std::mem::take(&mut self.faults);
        for p in pending {
            let word = self
                .stream
                .clone_dtoh(&p.word)
                .map_err(driver("reading a fault word"))?;
            let code = word.first().copied().unwrap_or(0);
            if code == abi::CANCELLED
                && let Some(limit) = cancelled
            {
                return Err(Error::KernelFault {
                    kernel: p.kernel,
                    message: format!(
                        "ran past the kernel time limit of {} ms and was cancelled",
                        limit.as_millis()
                    ),
                });
            }
            if code != 0 {
                let site = usize::try_from(code - 1)
                    .ok()
                    .and_then(|i| p.sites.get(i))
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| format!("unknown fault code {code}"));
                return Err(Error::KernelFault {
                    kernel: p.kernel,
                    message: site,
                });
            }
        }
        Ok(())
    }

    /// With a kernel time limit, waits for the launches on the stream until they finish or
    /// the limit passes; then sets every pending fault word to [`abi::CANCELLED`] from the
    /// second stream, so their runaway loops stop. Returns the limit when it did.
    fn wait_within_kernel_time(&mut self) -> Result<Option<std::time::Duration>> {
        let Some((limit, cancel)) = self.kernel_time.clone() else {
            return Ok(None);
        };
        if self.faults.is_empty() {
            return Ok(None);
        }
        let done = self
            .stream
            .record_event(None)
            .map_err(driver("recording an event"))?;
        let start = Instant::now();
        while !done
            .try_is_complete()
            .map_err(driver("waiting for the GPU"))?
        {
            if start.elapsed() < limit {
                std::thread::sleep(std::time::Duration::from_micros(200));
                continue;
            }
            static STOP: [u32; 1] = [abi::CANCELLED];
            for p in &self.faults {
                let address = address_of(&self.stream, &p.word);
                // SAFETY: `address` is the device address of a live 4-byte allocation
                // (`p.word`, kept in `self.faults` until the stream has been synchronized),
                // `STOP` is 4 bytes of host memory that live forever, and the copy runs on
                // `cancel`, a stream of this context that does not wait for the launches
                // (it ignores cudarc's event tracking on purpose: the launches reading the
                // word must see it while they run).
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(address, &STOP, cancel.cu_stream())
                }
                .map_err(driver("stopping a launch"))?;
            }
            cancel.synchronize().map_err(driver("stopping a launch"))?;
            return Ok(Some(limit));
        }
        Ok(None)
    }

    /// The store arguments of a launch, checked against their buffers.
    /// Task-local scratch goes into `keep`, which the caller holds until every entry of the
    /// launch is on the stream.
    fn store_args(
        &mut self,
        kernel: &str,
        bindings: &[Binding],
        keep: &mut Vec<CudaSlice<u8>>,
    ) -> Result<Vec<StoreArg>> {
        let mut out = Vec::with_capacity(bindings.len());
        for b in bindings {
            match b {
                Binding::Buffer {
                    buffer,
                    offset,
                    extents,
                    strides,
                    origin,
                    view,
                    element_size,
                    deferred,
                } => {
                    if deferred.is_some() {
                        return Err(Error::Memory(format!(
                            "kernel `{kernel}`: a deferred binding reached the entries"
                        )));
                    }
                    let slice = self.buffer(*buffer)?;
                    weft_runtime::check_view(*offset, extents, strides, *element_size, slice.len())
                        .map_err(|message| Error::KernelFault {
                            kernel: kernel.to_string(),
                            message,
                        })?;
                    let address = address_of(&self.stream, slice)
                        .wrapping_add(offset.wrapping_mul(*element_size as u64));
                    out.push(StoreArg {
                        address,
                        extents: extents.clone(),
                        strides: strides.clone(),
                        origin: origin.clone(),
                        view: view.clone(),
                    });
                }
                Binding::Scratch {
                    extents,
                    origin,
                    view,
                    element_size,
                } => {
                    let count = extents
                        .iter()
                        .try_fold(1u64, |a, &e| {
                            u64::try_from(e).ok().and_then(|e| a.checked_mul(e))
                        })
                        .and_then(|n| n.checked_mul(*element_size as u64))
                        .ok_or_else(|| Error::Memory(format!("scratch of extents {extents:?}")))?;
                    let slice = self.allocate(count, true)?;
                    let address = address_of(&self.stream, &slice);
                    let strides = dense_strides(extents);
                    keep.push(slice);
                    out.push(StoreArg {
                        address,
                        extents: extents.clone(),
                        strides,
                        origin: origin.clone(),
                        view: view.clone(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Copies a leaf buffer to the host and reduces it into the canonical tree's nodes over
    /// the loop's sub-store `over`.
    fn leaf_partial(
        &self,
        leaf: &Leaf,
        buffer: &CudaSlice<u8>,
        over: &StoreArg,
    ) -> Result<Partial> {
        let bytes = self
            .stream
            .clone_dtoh(buffer)
            .map_err(driver("reading a reduction's leaves"))?;
        self.stream
            .synchronize()
            .map_err(driver("waiting for the GPU"))?;
        let mut part = Partial::new(leaf.op, leaf.dtype, &over.view);
        let shape = DenseShape {
            lo: 0,
            hi: over.extents.first().copied().unwrap_or(1),
            extents: &over.extents,
            origin: &over.origin,
            view: &over.view,
        };
        let product = leaf.op == ReduceOp::Prod;
        let done = match leaf.dtype {
            DType::F64 => {
                let mut v: Vec<f64> = bytes.chunks_exact(8).map(f64_of).collect();
                let f = if product { f64::mul } else { f64::add };
                dense_nodes(&mut v, &shape, &mut part, f, Scalar::F64)
            }
            _ => {
                let mut v: Vec<f32> = bytes.chunks_exact(4).map(f32_of).collect();
                let f = if product { f32::mul } else { f32::add };
                dense_nodes(&mut v, &shape, &mut part, f, Scalar::F32)
            }
        };
        done.map_err(|e| Error::Memory(format!("a reduction's leaves: {e}")))?;
        Ok(part)
    }

    /// A rank-1 loop's leaves, or a rank-2 loop's whose rows are whole lines of the view,
    /// reduced on the device by the canonical tree ([`crate::tree`]): the level launches,
    /// then one read per complete node.
    fn device_tree(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        over: &StoreArg,
        points: u64,
    ) -> Result<Partial> {
        let start = u64::try_from(over.origin.first().copied().unwrap_or(0)).unwrap_or(0);
        let (steps, nodes) = match over.extents.as_slice() {
            [_, width] => {
                let width = u64::try_from(*width).unwrap_or(0).max(1);
                crate::tree::plan_rows(start, points / width, width)
            }
            _ => crate::tree::plan(start, points),
        };
        let level = self.tree_kernel(leaf.op, leaf.dtype)?;
        let size = leaf.dtype.size();
        let view = |offset: u64, step: &crate::tree::LevelStep| Binding::Buffer {
            buffer,
            offset,
            extents: vec![i64::try_from(step.count).unwrap_or(0)],
            strides: vec![i64::try_from(step.stride).unwrap_or(0)],
            origin: vec![0],
            view: vec![step.count],
            element_size: size,
            deferred: None,
        };
        for step in &steps {
            let pair = [
                view(step.offset, step),
                view(step.offset + step.stride / 2, step),
            ];
            self.launch(level, &pair, &[])
                .map_err(|e| Error::Driver(format!("a reduction tree's level: {e}")))?;
        }
        let mut part = Partial::new(leaf.op, leaf.dtype, &over.view);
        for node in nodes {
            let mut bytes = vec![0u8; size];
            self.read(buffer, node.local * size as u64, &mut bytes)
                .map_err(|e| Error::Driver(format!("reading a reduction's node: {e}")))?;
            let value = scalar_of(leaf.dtype, &bytes);
            part.add_node(&[], node.level, node.index, value)
                .map_err(|e| Error::Memory(format!("a reduction's node: {e}")))?;
        }
        Ok(part)
    }

    /// The tree level kernel of `op` on `dtype`, prepared.
    fn tree_kernel(&mut self, op: ReduceOp, dtype: DType) -> Result<KernelId> {
        let entry = match self.levels.get(&(op.name(), dtype)) {
            Some(entry) => entry.clone(),
            None => {
                let kernel = crate::tree::level_kernel(op, dtype).map_err(Error::Memory)?;
                let name = kernel.name.clone();
                let entry = KernelEntry::new(&name, &kernel)
                    .map_err(|e| Error::Memory(format!("{name}: {e}")))?;
                let entry = Arc::new(entry);
                self.levels.insert((op.name(), dtype), entry.clone());
                entry
            }
        };
        // Prepared again if the module cache evicted it.
        self.prepare(&entry, Owner::RUNTIME)
            .map_err(|e| Error::Memory(format!("{}: {e}", entry.name())))?;
        Ok(entry.id())
    }

    /// Copies an element tree's buffer to the host and hands each row to each element's
    /// blocked partial, as a block or a loose point: `(element coordinates in the target's
    /// view, partial)` per element of the target's sub-store.
    fn tree_partials(
        &self,
        tree: &Leaf,
        buffer: &CudaSlice<u8>,
        units: &Units,
        target: &StoreArg,
        over: &StoreArg,
    ) -> Result<Vec<(Vec<u64>, Partial)>> {
        let bytes = self
            .stream
            .clone_dtoh(buffer)
            .map_err(driver("reading an element tree"))?;
        self.stream
            .synchronize()
            .map_err(driver("waiting for the GPU"))?;
        let width = usize::try_from(elements(&target.extents)).unwrap_or(0);
        let size = tree.dtype.size();
        let view = over.view.first().copied().unwrap_or(0);
        let mut out = Vec::with_capacity(width);
        for e in 0..width {
            let mut part = Partial::blocked(tree.op, tree.dtype, view, ELEMENT_BLOCK_LEVEL);
            for u in 0..units.count() {
                let at = (usize::try_from(u).unwrap_or(usize::MAX))
                    .saturating_mul(width)
                    .saturating_add(e)
                    .saturating_mul(size);
                let raw = bytes.get(at..at + size).unwrap_or(&[]);
                let value = scalar_of(tree.dtype, raw);
                let added = match units.unit(u) {
                    Ok(block) => part.add_block(block, value),
                    Err(point) => part.add(&[point], value),
                };
                added.map_err(|err| Error::Memory(format!("an element tree: {err}")))?;
            }
            // The element's coordinates in the target's view.
            let mut rest = e as u64;
            let mut element = vec![0u64; target.extents.len()];
            for d in (0..element.len()).rev() {
                let ext = u64::try_from(target.extents[d]).unwrap_or(1).max(1);
                let origin = u64::try_from(target.origin[d]).unwrap_or(0);
                element[d] = origin + rest % ext;
                rest /= ext;
            }
            out.push((element, part));
        }
        Ok(out)
    }
}

/// The IR of the copy kernel of deferred bindings ([`PtxBackend`]'s `copy_kernel`): its
/// name and body.
fn copy_kernel_ir(size: usize, rank: usize) -> Result<(String, weft_ir::Kernel)> {
    let dtype = match size {
        1 => "bool",
        4 => "i32",
        _ => "i64",
    };
    let ix: Vec<String> = (0..rank).map(|d| format!("%i{d}")).collect();
    let ix = ix.join(", ");
    let name = format!("weft.gpu.copy.{dtype}.r{rank}");
    let text = format!(
        "kernel @{name}(%src: store<{dtype}, {rank}, read>, %dst: store<{dtype}, {rank}, \
         write>) {{\n  parallel %dst ({ix}) {{\n    %v = load %src[{ix}]\n    store \
         %dst[{ix}], %v\n  }}\n}}\n"
    );
    let kernel = weft_ir::text::parse(&text)
        .map_err(|e| Error::Memory(format!("the copy kernel {name}: {e}")))?;
    Ok((name, kernel))
}

/// An `f64` from its little-endian bytes (0 if they are not 8).
fn f64_of(raw: &[u8]) -> f64 {
    f64::from_le_bytes(raw.try_into().unwrap_or([0; 8]))
}

/// An `f32` from its little-endian bytes (0 if they are not 4).
fn f32_of(raw: &[u8]) -> f32 {
    f32::from_le_bytes(raw.try_into().unwrap_or([0; 4]))
}

/// A float of `dtype` (`f32`, else `f64`) from its little-endian bytes.
fn scalar_of(dtype: DType, raw: &[u8]) -> Scalar {
    match dtype {
        DType::F32 => Scalar::F32(f32_of(raw)),
        _ => Scalar::F64(f64_of(raw)),
    }
}

/// Row-major strides, in elements, of a dense rectangle of `extents`.
fn dense_strides(extents: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; extents.len()];
    for d in (0..extents.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(extents[d + 1]);
    }
    strides
}

/// The number of elements of a sub-store of `extents`.
fn elements(extents: &[i64]) -> u64 {
    extents
        .iter()
        .map(|&e| u64::try_from(e).unwrap_or(0))
        .product()
}

/// How an entry with element trees cuts its loop's points into units (see
/// [`crate::emit::Entry::trees`]): loose points, whole aligned blocks of the canonical
/// order, loose points.
struct Units {
    /// Loose points before the first whole block.
    head: u64,
    /// The local index where the whole blocks end.
    whole_end: u64,
    /// The loop's points.
    points: u64,
    /// The global coordinate of local index 0.
    origin: u64,
    /// The first whole block's index.
    first_block: u64,
}

impl Units {
    /// The units of `points` points from global coordinate `origin`, in a view of extent
    /// `view`: a block (aligned, the last clipped to the view) is whole when the points
    /// cover all of it.
    fn new(origin: u64, points: u64, view: u64) -> Units {
        let block = 1u64 << ELEMENT_BLOCK_LEVEL;
        let end = origin.saturating_add(points);
        let first = origin.div_ceil(block);
        let past_last = if end >= view {
            view.div_ceil(block)
        } else {
            end / block
        };
        let (head, whole_end) = if first < past_last {
            (
                first * block - origin,
                (past_last * block).min(view) - origin,
            )
        } else {
            (points, points)
        };
        Units {
            head,
            whole_end,
            points,
            origin,
            first_block: first,
        }
    }

    fn blocks(&self) -> u64 {
        (self.whole_end - self.head).div_ceil(1 << ELEMENT_BLOCK_LEVEL)
    }

    /// How many units (rows of a tree buffer).
    fn count(&self) -> u64 {
        self.head + self.blocks() + (self.points - self.whole_end)
    }

    /// What unit `u` is: `Ok(block index)` or `Err(global coordinate of a loose point)`.
    fn unit(&self, u: u64) -> std::result::Result<u64, u64> {
        if u < self.head {
            Err(self.origin + u)
        } else if u < self.head + self.blocks() {
            Ok(self.first_block + (u - self.head))
        } else {
            Err(self.origin + self.whole_end + (u - self.head - self.blocks()))
        }
    }
}

impl Backend for PtxBackend {
    fn name(&self) -> &'static str {
        "ptx"
    }

    fn alloc(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        let slice = self.allocate(bytes, true)?;
        let id = BufferId(self.next_buffer);
        self.next_buffer += 1;
        self.allocated += slice.len() as u64;
        self.buffers.insert(id, slice);
        Ok(id)
    }

    fn alloc_uninit(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        let slice = self.allocate(bytes, false)?;
        let id = BufferId(self.next_buffer);
        self.next_buffer += 1;
        self.allocated += slice.len() as u64;
        self.buffers.insert(id, slice);
        Ok(id)
    }

    fn free(&mut self, buffer: BufferId) {
        if let Some(slice) = self.buffers.remove(&buffer) {
            let size = slice.len();
            self.allocated = self.allocated.saturating_sub(size as u64);
            if self.pooled + size as u64 <= POOL_BYTES {
                self.pooled += size as u64;
                self.pool.entry(size).or_default().push(slice);
            }
        }
    }

    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> weft_runtime::Result<()> {
        let stream = self.stream.clone();
        let slice = self
            .buffers
            .get_mut(&buffer)
            .ok_or_else(|| Error::Memory(format!("no buffer {}", buffer.0)))?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.checked_add(data.len()).filter(|&e| e <= slice.len());
        let Some(end) = end else {
            return Err(Error::Memory(format!(
                "a write of {} bytes at {offset} outside a buffer of {} bytes",
                data.len(),
                slice.len()
            ))
            .into());
        };
        let mut view = slice.slice_mut(start..end);
        stream
            .memcpy_htod(data, &mut view)
            .map_err(driver("copying to the GPU"))?;
        Ok(())
    }

    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> weft_runtime::Result<()> {
        self.drain_faults()?;
        let slice = self.buffer(buffer)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.checked_add(out.len()).filter(|&e| e <= slice.len());
        let Some(end) = end else {
            return Err(Error::Memory(format!(
                "a read of {} bytes at {offset} outside a buffer of {} bytes",
                out.len(),
                slice.len()
            ))
            .into());
        };
        let view = slice.slice(start..end);
        self.stream
            .memcpy_dtoh(&view, out)
            .map_err(driver("copying from the GPU"))?;
        self.stream
            .synchronize()
            .map_err(driver("waiting for the GPU"))?;
        Ok(())
    }

    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool {
        self.kernels
            .get(&kernel.id())
            .is_some_and(|k| k.entry.same_kernel(kernel))
    }

    fn prepare(
        &mut self,
        kernel: &Arc<KernelEntry>,
        owner: Owner,
    ) -> weft_runtime::Result<Prepared> {
        if let Some(cached) = self.kernels.get(&kernel.id()) {
            return weft_runtime::confirm_hit(&cached.entry, kernel);
        }
        let start = Instant::now();
        let module = crate::emit(kernel.ir())?;
        let loaded = self
            .ctx
            .load_module(Ptx::from_src(module.text.clone()))
            .map_err(|e| {
                Error::Driver(format!("kernel `{}`: loading its PTX: {e}", kernel.name()))
            })?;
        let functions = module
            .entries
            .iter()
            .map(|e| loaded.load_function(&e.name))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(driver("finding an entry"))?;
        let bytes = (module.text.len() as u64).saturating_mul(2);
        // Evicted modules are unloaded when their last function is dropped.
        self.kernels.insert(
            kernel.id(),
            Loaded {
                entry: kernel.clone(),
                element_sizes: weft_runtime::store_element_sizes(&kernel.ir().params),
                name: kernel.name().to_string(),
                params: kernel.ir().params.clone(),
                module,
                functions,
            },
            owner,
            bytes,
        );
        Ok(Prepared::Compiled(start.elapsed()))
    }

    fn launch(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> weft_runtime::Result<()> {
        let (name, params) = {
            let k = self
                .kernels
                .get(&kernel)
                .ok_or_else(|| Error::Memory(format!("kernel {kernel} is not prepared")))?;
            check_element_sizes(k, bindings)?;
            (k.name.clone(), k.params.clone())
        };
        // Deferred bindings: the entries store into a dense temporary of the rectangle,
        // copied into place once every entry has run (so every point's loads see the old
        // values, as the seam requires).
        let mut bindings = bindings.to_vec();
        let mut copies = Vec::new();
        for b in bindings.iter_mut() {
            if let Binding::Buffer {
                extents,
                origin,
                view,
                element_size,
                deferred: Some(_),
                ..
            } = b
            {
                let bytes = elements(extents).saturating_mul(*element_size as u64);
                let temp = self.alloc_uninit(bytes)?;
                let dense = Binding::Buffer {
                    buffer: temp,
                    offset: 0,
                    extents: extents.clone(),
                    strides: dense_strides(extents),
                    origin: origin.clone(),
                    view: view.clone(),
                    element_size: *element_size,
                    deferred: None,
                };
                let mut target = std::mem::replace(b, dense.clone());
                if let Binding::Buffer { deferred, .. } = &mut target {
                    *deferred = None;
                }
                copies.push((temp, dense, target));
            }
        }
        let bindings = &bindings[..];
        let mut scratch = Vec::new();
        let stores = self.store_args(&name, bindings, &mut scratch)?;
        // Kernel parameter to store argument or scalar position.
        let mut position = Vec::with_capacity(params.len());
        let (mut s, mut c) = (0usize, 0usize);
        for p in &params {
            match p {
                Param::Store { .. } => {
                    position.push(s);
                    s += 1;
                }
                Param::Scalar { .. } => {
                    position.push(c);
                    c += 1;
                }
            }
        }
        if s != stores.len() || c != scalars.len() {
            return Err(Error::KernelFault {
                kernel: name,
                message: format!(
                    "{} store and {} scalar arguments for {s} store and {c} scalar parameters",
                    stores.len(),
                    scalars.len()
                ),
            }
            .into());
        }
        let word = self
            .stream
            .alloc_zeros::<u32>(1)
            .map_err(driver("allocating a fault word"))?;
        let word_address = address_of(&self.stream, &word);
        let store = |param: u32| &stores[position[param as usize]];
        let dim = |v: &[i64], d: u32| v.get(d as usize).copied().unwrap_or(0) as u64;
        let mut words: Vec<u64> = Vec::new();
        for p in abi::params_of(&params) {
            words.push(match p {
                AbiParam::Fault => word_address,
                AbiParam::Pointer { param } => store(param).address,
                AbiParam::Extent { param, dim: d } => dim(&store(param).extents, d),
                AbiParam::Stride { param, dim: d } => dim(&store(param).strides, d),
                AbiParam::Origin { param, dim: d } => dim(&store(param).origin, d),
                AbiParam::Scalar { param } => scalars[position[param as usize]].to_bits(),
                // Per entry, below.
                AbiParam::Leaf { .. }
                | AbiParam::UnitsHead
                | AbiParam::UnitsWholeEnd
                | AbiParam::Tree { .. } => continue,
            });
        }
        let entries = self
            .kernels
            .get(&kernel)
            .map(|k| {
                (
                    k.module.entries.clone(),
                    k.functions.clone(),
                    k.module.faults.clone(),
                )
            })
            .ok_or_else(|| Error::Memory(format!("kernel {kernel} is not prepared")))?;
        let (entries, functions, sites) = entries;
        for (index, (entry, function)) in entries.iter().zip(&functions).enumerate() {
            let over = store(entry.over);
            let points = over
                .extents
                .iter()
                .try_fold(1u64, |a, &e| {
                    u64::try_from(e).ok().map(|e| a.saturating_mul(e))
                })
                .unwrap_or(0);
            if points == 0 {
                continue;
            }
            // Leaf buffers are buffers of the back end, so the tree's level launches can bind
            // views of them.
            let mut leaves = Vec::new();
            for leaf in &entry.leaves {
                let bytes = points.saturating_mul(leaf.dtype.size() as u64);
                leaves.push(self.alloc_uninit(bytes)?);
            }
            let mut args = words.clone();
            for &l in &leaves {
                args.push(address_of(&self.stream, self.buffer(l)?));
            }
            let units = if entry.trees.is_empty() {
                None
            } else {
                let origin = over.origin.first().copied().unwrap_or(0);
                let view = over.view.first().copied().unwrap_or(0);
                Some(Units::new(u64::try_from(origin).unwrap_or(0), points, view))
            };
            let mut tree_buffers = Vec::new();
            if let Some(u) = &units {
                args.push(u.head);
                args.push(u.whole_end);
                for tree in &entry.trees {
                    let bytes = u
                        .count()
                        .saturating_mul(elements(&store(tree.param).extents))
                        .saturating_mul(tree.dtype.size() as u64);
                    let buffer = self.allocate(bytes, false)?;
                    args.push(address_of(&self.stream, &buffer));
                    tree_buffers.push(buffer);
                }
            }
            let cfg = if entry.rows {
                let extent = |d: usize| u64::try_from(over.extents[d]).unwrap_or(0);
                let (bx, by) = ROWS_BLOCK;
                let gx = extent(1).div_ceil(u64::from(bx)).min(u64::from(MAX_GRID_Y));
                let gy = extent(0).div_ceil(u64::from(by)).min(u64::from(MAX_GRID_Y));
                LaunchConfig {
                    grid_dim: (gx as u32, gy as u32, 1),
                    block_dim: (bx, by, 1),
                    shared_mem_bytes: 0,
                }
            } else {
                let blocks = points
                    .div_ceil(u64::from(BLOCK_THREADS))
                    .min(u64::from(MAX_BLOCKS)) as u32;
                LaunchConfig {
                    grid_dim: (blocks, 1, 1),
                    block_dim: (BLOCK_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                }
            };
            let mut launch = self.stream.launch_builder(function);
            for a in &args {
                launch.arg(a);
            }
            // SAFETY: the arguments are the entry's parameters in the order `abi` states,
            // each a 64-bit word: addresses of live device buffers (the stores, checked above
            // to hold every element their extents and strides reach; the fault word; the
            // leaves, one element per point) and plain integers. Every access the entry makes
            // is checked against those extents.
            unsafe { launch.launch(cfg) }.map_err(driver("launching a kernel"))?;
            for (leaf, &buffer) in entry.leaves.iter().zip(&leaves) {
                let whole_rows = over.extents.len() == 2
                    && over.origin.get(1) == Some(&0)
                    && u64::try_from(over.extents[1]).ok() == over.view.get(1).copied();
                let partial = if over.extents.len() == 1 || whole_rows {
                    self.device_tree(leaf, buffer, over, points)?
                } else {
                    let slice = self.buffer(buffer)?;
                    self.leaf_partial(leaf, slice, over)?
                };
                self.held.push(LoopPartial {
                    loop_index: u32::try_from(index).unwrap_or(u32::MAX),
                    param: u32::try_from(position[leaf.param as usize]).unwrap_or(u32::MAX),
                    element: Vec::new(),
                    partial,
                });
            }
            if let Some(u) = &units {
                for (tree, buffer) in entry.trees.iter().zip(&tree_buffers) {
                    let target = store(tree.param);
                    let parts = self.tree_partials(tree, buffer, u, target, over)?;
                    for (element, partial) in parts {
                        self.held.push(LoopPartial {
                            loop_index: u32::try_from(index).unwrap_or(u32::MAX),
                            param: u32::try_from(position[tree.param as usize]).unwrap_or(u32::MAX),
                            element,
                            partial,
                        });
                    }
                }
            }
            for l in leaves {
                self.free(l);
            }
            self.scratch.extend(tree_buffers);
        }
        self.faults.push(PendingFault {
            kernel: name,
            sites,
            word,
        });
        // Freed once the stream has run past this launch.
        self.scratch.extend(scratch);
        for (temp, dense, target) in copies {
            let rank = match &target {
                Binding::Buffer { extents, .. } => extents.len(),
                Binding::Scratch { extents, .. } => extents.len(),
            };
            let size = match &target {
                Binding::Buffer { element_size, .. } | Binding::Scratch { element_size, .. } => {
                    *element_size
                }
            };
            let copy = self.copy_kernel(size, rank)?;
            self.launch(copy, &[dense, target], &[])?;
            self.free(temp);
        }
        Ok(())
    }

    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        Ok(std::mem::take(&mut self.held))
    }

    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        Ok(self.drain_faults()?)
    }

    fn memory(&self) -> MemoryStats {
        MemoryStats {
            allocated: self.allocated,
            pooled: self.pooled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Units;

    const B: u64 = 1 << weft_ir::reduction::ELEMENT_BLOCK_LEVEL;

    fn kinds(u: &Units) -> Vec<std::result::Result<u64, u64>> {
        (0..u.count()).map(|i| u.unit(i)).collect()
    }

    #[test]
    fn copy_kernels_parse_emit_and_assemble() {
        for size in [1, 4, 8] {
            for rank in 0..4 {
                let (name, kernel) = super::copy_kernel_ir(size, rank).expect("the copy parses");
                let valid = weft_ir::ValidKernel::new(kernel).expect("the copy validates");
                let module = crate::emit(&valid).expect("the copy emits");
                assert_eq!(module.entries.len(), 1);
                crate::ptxas::assemble(&module.text, "sm_80", &name).expect("ptxas takes it");
            }
        }
    }

    #[test]
    fn units_are_whole_blocks_and_loose_points() {
        // One clipped block that the points cover whole.
        let u = Units::new(0, 300, 300);
        assert_eq!(kinds(&u), vec![Ok(0)]);
        // Three blocks, the last clipped by the view.
        let u = Units::new(0, 2 * B + 7, 2 * B + 7);
        assert_eq!(kinds(&u), vec![Ok(0), Ok(1), Ok(2)]);
        // A piece inside one block: every point loose.
        let u = Units::new(100, 50, 10 * B);
        assert_eq!(kinds(&u), (100..150).map(Err).collect::<Vec<_>>());
        // Loose points, a whole block, loose points.
        let u = Units::new(B - 2, B + 5, 10 * B);
        let mut want = vec![Err(B - 2), Err(B - 1), Ok(1)];
        want.extend((2 * B..2 * B + 3).map(Err));
        assert_eq!(kinds(&u), want);
        // Every point of the view is in exactly one unit.
        for (origin, points, view) in [(0, 5 * B + 3, 5 * B + 3), (3, 3 * B, 4 * B), (7, 9, 16)] {
            let u = Units::new(origin, points, view);
            let covered: u64 = kinds(&u)
                .iter()
                .map(|k| match k {
                    Ok(b) => ((b + 1) * B).min(view) - b * B,
                    Err(_) => 1,
                })
                .sum();
            assert_eq!(covered, points, "{origin} {points} {view}");
        }
    }
}
