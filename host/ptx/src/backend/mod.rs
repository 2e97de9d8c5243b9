//! The GPU back end: `weft-runtime`'s [`Backend`] seam over a [`Device`]: the CUDA driver
//! (`CudaDevice`, feature `cuda`) or the PTX simulator ([`SimDevice`], a test device).
//!
//! - **Memory**: every buffer is a device allocation; freed buffers go to a pool keyed by
//!   size and are reused (zeroed again where [`Backend::alloc`] asks for zeros). Memory fresh
//!   from the device is always cleared first: the driver's pool may hand back bytes another
//!   runtime of the process freed. Bytes cross to the host only in [`Backend::read`] and from
//!   it only in [`Backend::write`].
//! - **Kernels**: [`Backend::prepare`] emits the kernel's PTX ([`crate::emit()`]) and loads it
//!   (the driver compiles it); the module is cached by [`KernelId`], and the time to emit and
//!   load it is what [`Prepared::Compiled`] reports.
//! - **Launches** run on one stream, entry after entry, without waiting for the host. Each
//!   launch gets a fault word of the epoch's fault array ([`faults`]);
//!   [`Backend::synchronize`] and [`Backend::read`] wait for the stream and report the first
//!   launch whose index check failed, naming its kernel and the access.
//! - **Reductions** in the canonical order ([`reduce`]): an entry leaves each point's
//!   contribution in a leaf buffer ([`crate::emit::Leaf`]). A rank-1 loop's leaves go
//!   through the canonical tree in shared memory ([`crate::tree::block`]: one launch per ten
//!   levels, then one thread that gathers the nodes); a sole launch over the target's whole
//!   view folds the root into the target on the device and reads nothing back, others read
//!   the nodes in one copy for [`Backend::take_reductions`]. Rank-2 loops whose rows span
//!   the view use the level launches of [`crate::tree`]; other loops' leaves are reduced on
//!   the host.
//! - **Deferred bindings** (fusion through a bounded anti-dependence, [`deferred`]): a sole
//!   launch stores into a second buffer and swaps; others store into a dense temporary
//!   copied into place when the task ends.

mod deferred;
mod faults;
mod reduce;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_ir::reduction::LoopPartial;
use weft_ir::{DType, Param, Scalar};
use weft_runtime::{
    Backend, Binding, BoundedCache, BufferId, CacheLimits, KernelEntry, KernelId, MemoryStats,
    Owner, Prepared,
};

use crate::abi::{self, AbiParam};
#[cfg(feature = "cuda")]
use crate::device::cuda::CudaDevice;
use crate::device::{Device, Grid};
use crate::emit::{BLOCK_THREADS, Module, ROWS_BLOCK};
use crate::sim::{SimContext, SimDevice};
use crate::{Error, Result};
use faults::{FaultWords, Stop};
use reduce::Units;

/// The most blocks a launch asks for: threads stride over the rest.
const MAX_BLOCKS: u32 = 1 << 16;

/// The most blocks along a 2-D grid's `y` (the driver's limit), and along its `x` here.
const MAX_GRID_Y: u32 = 65_535;

/// The most blocks of a 2-D grid ([`crate::emit::Entry::rows`]) along `y` times `x`: 2^14
/// blocks of 256 threads (about sixteen waves of an H200's resident threads), so that a
/// thread of an 8190^2 grid walks 16 rows. One point per thread spent most of a stencil sweep on
/// each thread's prologue (`ncu` on an H200: 72% of the SMs' issue rate, 54% of DRAM's).
const ROWS_GRID_BLOCKS: u64 = 1 << 14;

/// How many blocks a launch may ask for: threads stride over the points beyond (the results
/// do not depend on it). Set with [`PtxBackend::set_grid_caps`] (`WEFT_GPU_BLOCKS` and
/// `WEFT_GPU_ROWS_BLOCKS` through `weft::Config`), to measure other grids than the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridCaps {
    /// The most blocks of a 1-D grid (256 threads each); default 2^16.
    pub blocks: u32,
    /// The most blocks of a 2-D grid (a rank-2 loop, 32 x 8 threads each) along `y` times
    /// `x`; default 2^14. Rows beyond the grid's are walked by the same threads.
    pub rows_blocks: u64,
}

impl Default for GridCaps {
    fn default() -> GridCaps {
        GridCaps {
            blocks: MAX_BLOCKS,
            rows_blocks: ROWS_GRID_BLOCKS,
        }
    }
}

/// Freed device memory kept for reuse, at most.
const POOL_BYTES: u64 = 4 << 30;

/// A kernel loaded on the device.
struct Loaded<F> {
    /// The kernel it was loaded from: a hit must be this kernel.
    entry: Arc<KernelEntry>,
    /// Bytes per element of each store parameter: a launch's bindings must match.
    element_sizes: Vec<usize>,
    name: String,
    params: Vec<Param>,
    module: Module,
    /// The entries of the 64-bit variant (`[0]`) and the narrow one (`[1]`), once loaded.
    variants: [Option<Vec<F>>; 2],
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

/// The GPU back end over device `D` (see the module documentation).
pub struct PtxBackend<D: Device> {
    device: D,
    /// Each buffer's address and size in bytes, as asked for (its allocation is
    /// [`allocation_size`] of it).
    buffers: HashMap<BufferId, (u64, u64)>,
    next_buffer: u64,
    /// Freed allocations of this back end, by size.
    pool: HashMap<u64, Vec<u64>>,
    pooled: u64,
    allocated: u64,
    kernels: BoundedCache<KernelId, Loaded<D::Function>>,
    held: Vec<LoopPartial>,
    faults: FaultWords,
    /// The copy kernels of deferred bindings, by element size and rank.
    copies: HashMap<(usize, usize), Arc<KernelEntry>>,
    /// The reduction tree's level kernels, by operator and type.
    levels: HashMap<(&'static str, DType), Arc<KernelEntry>>,
    /// The shared-memory tree modules' entries (pass, fold), by operator and type.
    block_trees: HashMap<(&'static str, DType), Vec<D::Function>>,
    /// Each buffer's shadow after a swap ([`deferred`]): a buffer of the same size, equal to
    /// it outside the rectangle it holds.
    shadows: HashMap<BufferId, (BufferId, deferred::Rect)>,
    /// Dense temporaries of deferred stores, to land at the end of the task.
    held_copies: Vec<deferred::HeldCopy>,
    /// Whether launches may run entries' narrow variants ([`crate::emit::Entry::narrow`]).
    narrow_offsets: bool,
    /// Marks recorded in the stream ([`Backend::record_mark`]), by number.
    marks: HashMap<u64, D::Mark>,
    next_mark: u64,
    /// Whether the launches may fold a whole-view reduction on the device
    /// ([`Backend::set_sole_launch`]).
    sole_launch: bool,
    /// The longest the host waits for the launches pending at a synchronization before it
    /// stops them.
    kernel_time: Option<std::time::Duration>,
    /// The most blocks its launches ask for.
    grid_caps: GridCaps,
    /// The cancel request of the job running now ([`Backend::set_cancel`]).
    cancel: Option<Arc<weft_runtime::CancelToken>>,
}

impl<D: Device> std::fmt::Debug for PtxBackend<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtxBackend")
            .field("buffers", &self.buffers.len())
            .field("kernels", &self.kernels.stats())
            .finish_non_exhaustive()
    }
}

impl<D: Device> Drop for PtxBackend<D> {
    fn drop(&mut self) {
        self.faults.free(&mut self.device);
        for (_, (address, _)) in self.buffers.drain() {
            self.device.free(address);
        }
        for (_, addresses) in self.pool.drain() {
            for a in addresses {
                self.device.free(a);
            }
        }
    }
}

/// How often a synchronization looks at the job's cancel token while launches run.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// The bounds of the PTX back end's cache of loaded modules: 1024 kernels and 256 MiB
/// (counted as twice each module's PTX text, for the text it keeps and the code the driver
/// loaded).
pub const MODULE_CACHE_LIMITS: CacheLimits = CacheLimits {
    entries: 1024,
    bytes: 256 << 20,
};

/// Refuses bindings that are not the kernel's store parameters in count and element size
/// ([`weft_runtime::check_element_sizes`]).
fn check_element_sizes<F>(loaded: &Loaded<F>, bindings: &[Binding]) -> Result<()> {
    weft_runtime::check_element_sizes(&loaded.element_sizes, bindings)
        .map_err(|message| Error::Memory(format!("kernel `{}`: {message}", loaded.name)))
}

#[cfg(feature = "cuda")]
impl PtxBackend<CudaDevice> {
    /// The back end on GPU `ordinal`. Fails with [`Error::NoDriver`] where the CUDA driver
    /// library cannot be loaded (checked before any driver call, which would panic), and with
    /// [`Error::Driver`] where the driver has no such device.
    pub fn new(ordinal: usize) -> Result<PtxBackend<CudaDevice>> {
        PtxBackend::with_kernel_time(ordinal, None)
    }

    /// The back end on GPU `ordinal`, stopping the launches pending at a synchronization
    /// (a read, a reduction, [`Backend::synchronize`]) that it has waited `limit` for: the
    /// host sets their fault words to [`abi::CANCELLED`] from a second stream, and every
    /// `for` loop that no store bounds checks the word on its back edge.
    pub fn with_kernel_time(
        ordinal: usize,
        limit: Option<std::time::Duration>,
    ) -> Result<PtxBackend<CudaDevice>> {
        let device = CudaDevice::new(ordinal, limit.is_some())?;
        Ok(PtxBackend::on(device, limit))
    }
}

impl PtxBackend<SimDevice> {
    /// The back end on a simulated GPU of its own ([`SimDevice`]): the PTX runs in the
    /// simulator on the host. A test device, not a product one.
    pub fn simulated() -> PtxBackend<SimDevice> {
        PtxBackend::on(SimDevice::new(), None)
    }

    /// The back end on simulated GPU `context`, shared with every other back end on it (as
    /// runtimes of one process share a GPU's memory).
    pub fn simulated_on(context: &SimContext) -> PtxBackend<SimDevice> {
        PtxBackend::on(context.device(), None)
    }
}

impl<D: Device> PtxBackend<D> {
    /// The back end on `device`, with an optional kernel time limit (see
    /// `PtxBackend::with_kernel_time`).
    pub fn on(device: D, kernel_time: Option<std::time::Duration>) -> PtxBackend<D> {
        PtxBackend {
            device,
            buffers: HashMap::new(),
            next_buffer: 1,
            pool: HashMap::new(),
            pooled: 0,
            allocated: 0,
            kernels: BoundedCache::new(MODULE_CACHE_LIMITS),
            held: Vec::new(),
            faults: FaultWords::default(),
            copies: HashMap::new(),
            levels: HashMap::new(),
            block_trees: HashMap::new(),
            sole_launch: false,
            narrow_offsets: true,
            marks: HashMap::new(),
            shadows: HashMap::new(),
            held_copies: Vec::new(),
            next_mark: 0,
            kernel_time,
            grid_caps: GridCaps::default(),
            cancel: None,
        }
    }

    /// The device's name, as the driver gives it.
    pub fn device_name(&self) -> Result<String> {
        self.device.name()
    }

    /// The most blocks its launches ask for from now on (each cap at least 1).
    pub fn set_grid_caps(&mut self, caps: GridCaps) {
        self.grid_caps = GridCaps {
            blocks: caps.blocks.max(1),
            rows_blocks: caps.rows_blocks.max(1),
        };
    }

    /// Whether launches may run entries' 32-bit-offset variants where the arguments allow
    /// (the default); off, every launch runs the 64-bit entries (tests compare the two).
    pub fn set_narrow_offsets(&mut self, allowed: bool) {
        self.narrow_offsets = allowed;
    }

    /// The device, for probes and tests.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Loads whichever variant of a prepared kernel ([`crate::emit::Module::variants`]) no
    /// launch has needed yet, so that every entry of the module has been through the
    /// driver's JIT (the `jit` check), and returns the time the loads took.
    pub fn load_every_variant(&mut self, kernel: KernelId) -> weft_runtime::Result<Duration> {
        let start = Instant::now();
        for narrow in 0..2 {
            self.variant(kernel, narrow)?;
        }
        Ok(start.elapsed())
    }

    /// The entries of variant `narrow` (0: 64-bit offsets, 1: narrow) of a prepared
    /// kernel, loaded now if no launch has needed them yet.
    fn variant(&mut self, kernel: KernelId, narrow: usize) -> Result<Vec<D::Function>> {
        let k = self
            .kernels
            .get_mut(&kernel)
            .ok_or_else(|| Error::Memory(format!("kernel {kernel} is not prepared")))?;
        if let Some(functions) = &k.variants[narrow] {
            return Ok(functions.clone());
        }
        let functions = load_variant(&mut self.device, &k.name, &k.module, narrow)?;
        k.variants[narrow] = Some(functions.clone());
        Ok(functions)
    }

    /// Loads variant `narrow` of `module` (of kernel `name`): its entries, in order.
    fn load_variant(
        &mut self,
        name: &str,
        module: &Module,
        narrow: usize,
    ) -> Result<Vec<D::Function>> {
        load_variant(&mut self.device, name, module, narrow)
    }

    /// A buffer's address and size.
    fn buffer(&self, id: BufferId) -> Result<(u64, u64)> {
        self.buffers
            .get(&id)
            .copied()
            .ok_or_else(|| Error::Memory(format!("no buffer {}", id.0)))
    }

    /// A device allocation of `bytes` (at least one): from the pool where one of that size is
    /// free (this back end's own bytes: zeroed only if `zero`), else fresh from the device
    /// and always zeroed (it may hold what another runtime freed).
    fn allocate(&mut self, bytes: u64, zero: bool) -> Result<(u64, u64)> {
        let size = allocation_size(bytes);
        if let Some(address) = self.pool.get_mut(&size).and_then(Vec::pop) {
            self.pooled = self.pooled.saturating_sub(size);
            if zero {
                self.device.memset_zero(address, size)?;
            }
            return Ok((address, size));
        }
        let address = self.device.alloc(size)?;
        self.device.memset_zero(address, size)?;
        Ok((address, size))
    }

    /// Gives an allocation back: to the pool while it has room, else to the device.
    fn release(&mut self, address: u64, size: u64) {
        if self.pooled + size <= POOL_BYTES {
            self.pooled += size;
            self.pool.entry(size).or_default().push(address);
        } else {
            self.device.free(address);
        }
    }

    /// A new buffer of `bytes`.
    fn new_buffer(&mut self, bytes: u64, zero: bool) -> Result<BufferId> {
        let (address, size) = self.allocate(bytes, zero)?;
        let id = BufferId(self.next_buffer);
        self.next_buffer += 1;
        self.allocated += size;
        self.buffers.insert(id, (address, bytes));
        Ok(id)
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
        let stopped = self.wait_or_stop()?;
        self.device.synchronize()?;
        self.faults.drain(&mut self.device, stopped)
    }

    /// With a kernel time limit or a job's cancel token, waits for the launches on the
    /// stream until they finish, the limit passes or the job is cancelled (looked at every
    /// [`CANCEL_POLL`]); then sets every pending fault word to [`abi::CANCELLED`] at once, so
    /// their loops stop at their next check. Returns why it stopped them.
    fn wait_or_stop(&mut self) -> Result<Option<Stop>> {
        if (self.kernel_time.is_none() && self.cancel.is_none()) || !self.faults.any_pending() {
            return Ok(None);
        }
        let start = Instant::now();
        let stop = loop {
            let slice = match (self.kernel_time, &self.cancel) {
                (Some(limit), None) => limit.saturating_sub(start.elapsed()),
                (Some(limit), Some(_)) => limit.saturating_sub(start.elapsed()).min(CANCEL_POLL),
                (None, _) => CANCEL_POLL,
            };
            if self.device.wait_for(slice)? {
                return Ok(None);
            }
            if self.cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
                break Stop::Job;
            }
            if let Some(limit) = self.kernel_time
                && start.elapsed() >= limit
            {
                break Stop::Limit(limit);
            }
        };
        let word = abi::CANCELLED.to_le_bytes();
        for address in self.faults.pending_addresses() {
            self.device.write_now(address, &word)?;
        }
        Ok(Some(stop))
    }

    /// The store arguments of a launch, checked against their buffers and the kernel's
    /// parameters. Task-local scratch goes into `keep`, which the caller releases once every
    /// entry of the launch is on the stream.
    fn store_args(
        &mut self,
        kernel: &str,
        params: &[Param],
        bindings: &[Binding],
        keep: &mut Vec<(u64, u64)>,
    ) -> Result<Vec<StoreArg>> {
        let ranks = params.iter().filter_map(|p| match p {
            Param::Store { rank, .. } => Some(*rank as usize),
            Param::Scalar { .. } => None,
        });
        let mut out = Vec::with_capacity(bindings.len());
        for (b, rank) in bindings.iter().zip(ranks) {
            let (extents, origin, view) = match b {
                Binding::Buffer {
                    extents,
                    origin,
                    view,
                    ..
                }
                | Binding::Scratch {
                    extents,
                    origin,
                    view,
                    ..
                } => (extents, origin, view),
            };
            if extents.len() != rank || origin.len() != rank || view.len() != rank {
                return Err(Error::KernelFault {
                    kernel: kernel.to_string(),
                    message: format!(
                        "a binding of rank {} (origin {}, view {}) for a store of rank {rank}",
                        extents.len(),
                        origin.len(),
                        view.len()
                    ),
                });
            }
            match b {
                Binding::Buffer {
                    buffer,
                    offset,
                    extents,
                    strides,
                    element_size,
                    deferred,
                    ..
                } => {
                    if deferred.is_some() {
                        return Err(Error::Memory(format!(
                            "kernel `{kernel}`: a deferred binding reached the entries"
                        )));
                    }
                    let (address, bytes) = self.buffer(*buffer)?;
                    let len = usize::try_from(bytes).unwrap_or(usize::MAX);
                    weft_runtime::check_view(*offset, extents, strides, *element_size, len)
                        .map_err(|message| Error::KernelFault {
                            kernel: kernel.to_string(),
                            message,
                        })?;
                    out.push(StoreArg {
                        address: address.wrapping_add(offset.wrapping_mul(*element_size as u64)),
                        extents: extents.to_vec(),
                        strides: strides.to_vec(),
                        origin: origin.to_vec(),
                        view: view.to_vec(),
                    });
                }
                Binding::Scratch { element_size, .. } => {
                    let count = extents
                        .iter()
                        .try_fold(1u64, |a, &e| {
                            u64::try_from(e).ok().and_then(|e| a.checked_mul(e))
                        })
                        .and_then(|n| n.checked_mul(*element_size as u64))
                        .ok_or_else(|| Error::Memory(format!("scratch of extents {extents:?}")))?;
                    let (address, size) = self.allocate(count, true)?;
                    keep.push((address, size));
                    out.push(StoreArg {
                        address,
                        extents: extents.to_vec(),
                        strides: dense_strides(extents),
                        origin: origin.to_vec(),
                        view: view.to_vec(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The bytes allocated for a buffer of `bytes`: at least one, in whole 8-byte words (a
/// bool reduction's atomic works on the aligned 32-bit word that holds its byte, which must
/// lie inside the allocation).
fn allocation_size(bytes: u64) -> u64 {
    bytes.max(1).next_multiple_of(8)
}

/// Loads variant `narrow` of `module` (kernel `name`) on `device`: its entries, in order.
fn load_variant<D: Device>(
    device: &mut D,
    name: &str,
    module: &Module,
    narrow: usize,
) -> Result<Vec<D::Function>> {
    let names: Vec<String> = module
        .entries
        .iter()
        .map(|e| {
            if narrow == 1 {
                e.narrow.clone()
            } else {
                e.name.clone()
            }
        })
        .collect();
    let text = module.variants.get(narrow).unwrap_or(&module.text);
    Ok(device.load(name, text, &names)?.functions)
}

/// The launch geometry of `entry` over `points` points of sub-store `over`, within `caps`.
fn grid_of(entry: &crate::emit::Entry, over: &StoreArg, points: u64, caps: GridCaps) -> Grid {
    if entry.rows {
        let extent = |d: usize| {
            over.extents
                .get(d)
                .and_then(|&e| u64::try_from(e).ok())
                .unwrap_or(0)
        };
        let (bx, by) = ROWS_BLOCK;
        let gx = extent(1)
            .div_ceil(u64::from(bx))
            .clamp(1, u64::from(MAX_GRID_Y));
        // Rows beyond the grid's are walked by the same threads (a grid-stride loop): a
        // thread's prologue (its parameters, the hoisted index checks) is then spread over
        // several points instead of paid for each.
        let most_rows = (caps.rows_blocks / gx).clamp(1, u64::from(MAX_GRID_Y));
        let gy = extent(0).div_ceil(u64::from(by)).clamp(1, most_rows);
        Grid {
            blocks: [gx as u32, gy as u32, 1],
            threads: [bx, by, 1],
        }
    } else {
        let blocks = points
            .saturating_mul(u64::from(entry.lanes))
            .div_ceil(u64::from(BLOCK_THREADS))
            .clamp(1, u64::from(caps.blocks)) as u32;
        Grid {
            blocks: [blocks, 1, 1],
            threads: [BLOCK_THREADS, 1, 1],
        }
    }
}

/// The IR of the copy kernel of deferred bindings ([`PtxBackend`]'s `copy_kernel`): its
/// name and body. Each size copies as an integer type of its width, so every bit moves (a
/// byte as `u8`, not `bool`, which would turn any nonzero byte into 1).
fn copy_kernel_ir(size: usize, rank: usize) -> Result<(String, weft_ir::Kernel)> {
    let dtype = match size {
        1 => "u8",
        2 => "u16",
        4 => "i32",
        8 => "i64",
        _ => {
            return Err(Error::Memory(format!(
                "no copy kernel for elements of {size} bytes"
            )));
        }
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

impl<D: Device> Backend for PtxBackend<D> {
    fn name(&self) -> &'static str {
        "ptx"
    }

    fn alloc(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        Ok(self.new_buffer(bytes, true)?)
    }

    fn alloc_uninit(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        Ok(self.new_buffer(bytes, false)?)
    }

    fn free(&mut self, buffer: BufferId) {
        self.drop_shadow(buffer);
        if let Some((address, bytes)) = self.buffers.remove(&buffer) {
            let size = allocation_size(bytes);
            self.allocated = self.allocated.saturating_sub(size);
            self.release(address, size);
        }
    }

    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> weft_runtime::Result<()> {
        self.drop_shadow(buffer);
        let (address, size) = self.buffer(buffer)?;
        let end = offset.checked_add(data.len() as u64).filter(|&e| e <= size);
        if end.is_none() {
            return Err(Error::Memory(format!(
                "a write of {} bytes at {offset} outside a buffer of {size} bytes",
                data.len()
            ))
            .into());
        }
        Ok(self.device.write(address + offset, data)?)
    }

    fn copy(&mut self, from: BufferId, to: BufferId, bytes: u64) -> weft_runtime::Result<()> {
        let (src, src_size) = self.buffer(from)?;
        let (dst, dst_size) = self.buffer(to)?;
        if bytes > src_size || bytes > dst_size {
            return Err(Error::Memory(format!(
                "a copy of {bytes} bytes from a buffer of {src_size} bytes into one of \
                 {dst_size}"
            ))
            .into());
        }
        self.drop_shadow(to);
        if bytes == 0 {
            return Ok(());
        }
        // On the stream, after the launches before it: nothing waits.
        Ok(self.device.copy(dst, src, bytes)?)
    }

    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> weft_runtime::Result<()> {
        self.drain_faults()?;
        let (address, size) = self.buffer(buffer)?;
        let end = offset.checked_add(out.len() as u64).filter(|&e| e <= size);
        if end.is_none() {
            return Err(Error::Memory(format!(
                "a read of {} bytes at {offset} outside a buffer of {size} bytes",
                out.len()
            ))
            .into());
        }
        Ok(self.device.read(address + offset, out)?)
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
        // The variant launches take by default now; the other on its first launch.
        let first = usize::from(self.narrow_offsets);
        let mut variants = [None, None];
        variants[first] = Some(self.load_variant(kernel.name(), &module, first)?);
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
                variants,
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
        if self.cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
            let name = self
                .kernels
                .get(&kernel)
                .map_or_else(|| kernel.to_string(), |k| k.name.clone());
            return Err(Error::KernelFault {
                kernel: name,
                message: weft_runtime::backend::CANCELLED_BY_JOB.to_string(),
            }
            .into());
        }
        let (name, params, entries, sites) = {
            let k = self
                .kernels
                .get(&kernel)
                .ok_or_else(|| Error::Memory(format!("kernel {kernel} is not prepared")))?;
            check_element_sizes(k, bindings)?;
            (
                k.name.clone(),
                k.params.clone(),
                k.module.entries.clone(),
                k.module.faults.clone(),
            )
        };
        let (bindings, swaps) = self.rebind_deferred(&params, bindings)?;
        let bindings = &bindings[..];
        let mut scratch = Vec::new();
        let stores = self.store_args(&name, &params, bindings, &mut scratch)?;
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
        let word_address = self.faults.take(&mut self.device, &name, sites)?;
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
        let mut folds = Vec::new();
        // 32-bit offsets where every store argument allows them.
        let narrow = usize::from(
            self.narrow_offsets
                && stores
                    .iter()
                    .all(|s| crate::emit::fits_narrow(&s.extents, &s.strides)),
        );
        let functions = self.variant(kernel, narrow)?;
        for (index, entry) in entries.iter().enumerate() {
            let function = functions.get(index).ok_or_else(|| {
                Error::Memory(format!("kernel `{name}`: entry {index} is not loaded"))
            })?;
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
                leaves.push(self.new_buffer(bytes, false)?);
            }
            let mut args = words.clone();
            for &l in &leaves {
                args.push(self.buffer(l)?.0);
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
                    let buffer = self.new_buffer(bytes, false)?;
                    args.push(self.buffer(buffer)?.0);
                    tree_buffers.push(buffer);
                }
            }
            self.device.launch(
                function,
                grid_of(entry, over, points, self.grid_caps),
                &args,
            )?;
            let mut kept = Vec::new();
            for (leaf, &buffer) in entry.leaves.iter().zip(&leaves) {
                let whole_rows = over.extents.len() == 2
                    && over.origin.get(1) == Some(&0)
                    && u64::try_from(over.extents[1]).ok() == over.view.get(1).copied();
                let partial = if over.extents.len() == 1 {
                    let start = over
                        .origin
                        .first()
                        .and_then(|&o| u64::try_from(o).ok())
                        .unwrap_or(0);
                    let whole = start == 0 && over.view.first() == Some(&points);
                    if whole && self.sole_launch && index + 1 == entries.len() && folds.is_empty() {
                        // The launch's last entry, nothing folded before it: its last pass
                        // may fold at once, in loop order all the same.
                        let target = store(leaf.param).address;
                        self.block_tree_passes_and_fold(
                            leaf,
                            buffer,
                            points,
                            entry.leaf_level,
                            target,
                        )?;
                        continue;
                    }
                    self.block_tree_passes(leaf, buffer, (start, points), entry.leaf_level..63)?;
                    if whole && self.sole_launch {
                        // Folded once every entry has run, as the executor would.
                        folds.push((*leaf, buffer, points, store(leaf.param).address));
                        kept.push(buffer);
                        continue;
                    }
                    self.block_tree_nodes(leaf, buffer, start, points, over)?
                } else if whole_rows {
                    self.device_tree(leaf, buffer, over, points)?
                } else {
                    self.leaf_partial(leaf, buffer, over)?
                };
                self.held.push(LoopPartial {
                    loop_index: u32::try_from(index).unwrap_or(u32::MAX),
                    param: u32::try_from(position[leaf.param as usize]).unwrap_or(u32::MAX),
                    element: Vec::new(),
                    partial,
                });
            }
            if let Some(u) = &units {
                for (tree, &buffer) in entry.trees.iter().zip(&tree_buffers) {
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
            for b in leaves.into_iter().chain(tree_buffers) {
                if !kept.contains(&b) {
                    self.free(b);
                }
            }
        }
        // Whole-view reductions fold into their targets after the launch's last entry, in
        // loop order.
        for (leaf, buffer, points, target) in folds {
            let folded = self.block_tree_fold(&leaf, buffer, points, target);
            self.free(buffer);
            folded?;
        }
        // Reused only by later calls on the stream, so after this launch.
        for (address, size) in scratch {
            self.release(address, size);
        }
        self.finish_swaps(swaps)?;
        Ok(())
    }

    fn finish_deferred(&mut self, commit: bool) -> weft_runtime::Result<()> {
        Ok(self.land_copies(commit)?)
    }

    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        Ok(std::mem::take(&mut self.held))
    }

    fn record_mark(&mut self) -> weft_runtime::Result<Option<u64>> {
        let mark = self.device.mark()?;
        self.next_mark += 1;
        self.marks.insert(self.next_mark, mark);
        Ok(Some(self.next_mark))
    }

    fn mark_elapsed(
        &mut self,
        from: u64,
        to: u64,
    ) -> weft_runtime::Result<Option<std::time::Duration>> {
        let (Some(a), Some(b)) = (self.marks.remove(&from), self.marks.remove(&to)) else {
            return Ok(None);
        };
        Ok(Some(self.device.elapsed(&a, &b)?))
    }

    fn set_sole_launch(&mut self, allowed: bool) {
        self.sole_launch = allowed;
    }

    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        Ok(self.drain_faults()?)
    }

    fn set_cancel(&mut self, token: Option<Arc<weft_runtime::CancelToken>>) {
        self.cancel = token;
    }

    fn memory(&self) -> MemoryStats {
        MemoryStats {
            allocated: self.allocated,
            pooled: self.pooled,
        }
    }

    fn copy_bandwidth(
        &mut self,
        bytes: u64,
        samples: usize,
    ) -> weft_runtime::Result<Option<Vec<f64>>> {
        let bytes = bytes.max(1);
        let (src, size) = self.allocate(bytes, true)?;
        let (dst, _) = self.allocate(bytes, true)?;
        let mut rates = Vec::with_capacity(samples);
        let mut run = || -> Result<()> {
            // Once untimed, so the first sample does not pay for first touches.
            self.device.copy(dst, src, bytes)?;
            for _ in 0..samples {
                let from = self.device.mark()?;
                self.device.copy(dst, src, bytes)?;
                let to = self.device.mark()?;
                let seconds = self.device.elapsed(&from, &to)?.as_secs_f64();
                rates.push(2.0 * bytes as f64 / seconds.max(1e-9) / 1e9);
            }
            Ok(())
        };
        let result = run();
        self.release(src, size);
        self.release(dst, size);
        result?;
        Ok(Some(rates))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn copy_kernels_parse_emit_and_assemble() {
        for size in [1, 2, 4, 8] {
            for rank in 0..4 {
                let (name, kernel) = super::copy_kernel_ir(size, rank).expect("the copy parses");
                let valid = weft_ir::ValidKernel::new(kernel).expect("the copy validates");
                let module = crate::emit(&valid).expect("the copy emits");
                assert_eq!(module.entries.len(), 1);
                crate::ptxas::assemble(&module.text, "sm_80", &name).expect("ptxas takes it");
            }
        }
    }
}
