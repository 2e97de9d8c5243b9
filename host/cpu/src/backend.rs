//! [`CpuBackend`]: the CPU's implementation of the runtime's back-end seam.

use crate::HeldRow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use weft_ir::reduction::LoopPartial;
use weft_ir::{Kernel, Scalar};
use weft_runtime::{
    Backend, Binding, BoundedCache, BufferId, CacheLimits, CacheStats, CancelToken, KernelEntry,
    KernelId, MemoryStats, Owner, Prepared,
};

use crate::compile::{CompiledKernel, Compiler, StoreView};
use crate::function_cache::FunctionCache;
use crate::memory::Memory;
use crate::pool::WorkerPool;
use crate::quick::BoundStore;
use crate::{Error, Result, SimdPath};
use weft_runtime::smallvec::SmallVec;

/// How a CPU back end is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Worker threads that run kernels (0: one per core).
    pub threads: usize,
    /// The most bytes of freed buffers kept for reuse (0: memory is freed at once).
    pub pool_bytes: u64,
    /// The code path of vectorized loops (`None`: the widest this CPU runs). A path the CPU
    /// cannot run is an error when the back end starts.
    pub simd: Option<SimdPath>,
    /// The longest one launch may run before it is cancelled (`None`: no limit). Compiled
    /// loops check the cancel flag on every back edge either way.
    pub kernel_time: Option<std::time::Duration>,
    /// Whether every buffer sits between guard pages, and none is reused (for fuzzing: an
    /// access outside a buffer stops the process). Costs a mapping per buffer.
    pub guard_pages: bool,
    /// A pool of workers to share with other back ends (`None`: a pool of `threads` workers
    /// of its own); `threads` is then ignored.
    pub pool: Option<WorkerPool>,
    /// Whether buffers of 2 MiB or more ask the system for transparent huge pages (on Linux,
    /// `madvise(MADV_HUGEPAGE)`; see `memory.rs`).
    pub huge_pages: bool,
    /// Whether scalar `for` loops prefetch the streams they read (see
    /// [`Compiler::set_prefetch`]).
    pub prefetch: bool,
    /// Where compiled functions are cached for later processes (`None`: in memory only; see
    /// [`FunctionCache::on_disk`]).
    pub function_cache: Option<std::path::PathBuf>,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            threads: 0,
            pool_bytes: 1 << 30,
            simd: None,
            kernel_time: None,
            guard_pages: false,
            pool: None,
            huge_pages: true,
            prefetch: true,
            function_cache: None,
        }
    }
}

/// The bounds of the CPU back end's cache of compiled kernels: 2048 kernels and 128 MiB
/// (machine code, and the IR each entry keeps to confirm hits). Machine code lives in JIT
/// modules of [`crate::compile::MODULE_CODE_BYTES`]; the cache keeps kernels of the current
/// and the previous module only, so at most two modules' code is alive.
pub const CODE_CACHE_LIMITS: CacheLimits = CacheLimits {
    entries: 2048,
    bytes: 128 << 20,
};

/// A compiled kernel in the cache, with what confirms a hit and checks a launch.
struct Cached {
    /// The kernel it was compiled from: a hit must be this kernel.
    entry: Arc<KernelEntry>,
    compiled: CompiledKernel,
    /// Bytes per element of each store parameter, in order: a launch's bindings must match.
    element_sizes: Vec<usize>,
    /// Its loads that a view broadcast along a loop's innermost dimension lets read one
    /// element per row (see `splat`).
    splats: Vec<crate::splat::Candidate>,
}

/// The most kernel variants for broadcast views (see `splat`) the back end keeps; past it
/// they are compiled again as launches need them.
const MAX_SPLAT_VARIANTS: usize = 256;

/// The CPU back end: host memory, a Cranelift compiler, a bounded cache of compiled kernels by
/// content id (each hit confirmed against the kernel's IR), and a thread pool that runs them.
pub struct CpuBackend {
    compiler: Compiler,
    memory: Memory,
    kernels: BoundedCache<KernelId, Cached>,
    /// Variants of cached kernels for views broadcast along a loop's innermost dimension, by
    /// kernel and mask of rewritten loads (see `splat`); at most [`MAX_SPLAT_VARIANTS`].
    splat_variants: HashMap<(KernelId, u64), CompiledKernel>,
    pool: WorkerPool,
    /// Scratch memory of task-local temporaries, one per binding, reused across points.
    scratch: Vec<Vec<u64>>,
    /// The extents, strides and origins of earlier launches' views, reused so that a launch
    /// allocates nothing per binding.
    spare: Vec<[Vec<i64>; 3]>,
    /// Reductions held back by launches (see `Backend::launch`), their targets named by store
    /// argument.
    held: Vec<LoopPartial>,
    /// Rows of deferred bindings held back until the task's last point has run.
    held_rows: Vec<PendingRow>,
    /// The kernel time limit's watchdog, when there is a limit.
    watchdog: Option<crate::watchdog::Watchdog>,
    /// The cancel request of the job running now (see `Backend::set_cancel`).
    cancel: Option<Arc<CancelToken>>,
    /// Whether each launch is the whole of its task (see `Backend::set_sole_launch`): it
    /// then folds its reductions itself.
    sole: bool,
    /// What quick launches keep from one to the next (see `quick`).
    quick: crate::quick::QuickScratch,
    /// The dense products' stack of partial sums, kept from one product to the next (see
    /// `product::StackScratch`).
    product_stack: crate::product::StackScratch,
}

/// A held row of a deferred binding and where it goes.
#[derive(Debug)]
struct PendingRow {
    buffer: BufferId,
    /// The binding's element at index 0, in elements from the buffer's start.
    offset: u64,
    extents: Vec<i64>,
    strides: Vec<i64>,
    element_size: usize,
    row: HeldRow,
}

impl PendingRow {
    /// Writes the row into its buffer, a run of elements at a time (a whole innermost row
    /// when its stride is one element, else one element), each run checked against the
    /// buffer.
    fn commit(&self, memory: &mut Memory) -> Result<()> {
        let bytes = memory.bytes_mut(self.buffer)?;
        let size = self.element_size;
        let (inner, strides) = (
            self.extents.get(1..).unwrap_or(&[]),
            self.strides.get(1..).unwrap_or(&[]),
        );
        let row_at = i128::from(self.offset)
            + i128::from(self.row.row) * i128::from(self.strides.first().copied().unwrap_or(0));
        let contiguous = strides.last().is_none_or(|&s| s == 1);
        let run = match inner.last() {
            Some(&n) if contiguous => usize::try_from(n).unwrap_or(0).max(1),
            _ => 1,
        };
        // The dimensions the runs step through (all but the innermost when it is one run).
        let outer = if contiguous && !inner.is_empty() {
            inner.len() - 1
        } else {
            inner.len()
        };
        let mut index = vec![0i64; outer];
        let run_bytes = run.saturating_mul(size);
        if run_bytes == 0 {
            return Ok(());
        }
        for chunk in self.row.bytes.chunks(run_bytes) {
            let at = index
                .iter()
                .zip(strides)
                .fold(row_at, |a, (&i, &s)| a + i128::from(i) * i128::from(s));
            let range = usize::try_from(at)
                .ok()
                .and_then(|e| e.checked_mul(size))
                .and_then(|b| Some(b..b.checked_add(chunk.len())?))
                .filter(|r| r.end <= bytes.len())
                .ok_or_else(|| {
                    Error::Memory(format!("a held row outside buffer {}", self.buffer.0))
                })?;
            bytes[range].copy_from_slice(chunk);
            for d in (0..outer).rev() {
                index[d] += 1;
                if index[d] < inner[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("kernels", &self.kernels.stats())
            .field("threads", &self.pool.threads())
            .finish_non_exhaustive()
    }
}

impl CpuBackend {
    /// A back end with the default options (one thread per core).
    pub fn new() -> Result<CpuBackend> {
        CpuBackend::with_options(&CpuOptions::default())
    }

    /// A back end with `options`.
    pub fn with_options(options: &CpuOptions) -> Result<CpuBackend> {
        let pool = match &options.pool {
            Some(shared) => shared.clone(),
            None => WorkerPool::private(options.threads)?,
        };
        let mut compiler = Compiler::new()?;
        if let Some(path) = options.simd {
            compiler.set_path(path)?;
        }
        compiler.set_prefetch(options.prefetch);
        if let Some(dir) = &options.function_cache {
            compiler.set_function_cache(FunctionCache::on_disk(dir));
        }
        let watchdog = match options.kernel_time {
            Some(limit) => Some(
                crate::watchdog::Watchdog::start(compiler.cancel_flag(), limit)
                    .map_err(|e| Error::Threads(e.to_string()))?,
            ),
            None => None,
        };
        Ok(CpuBackend {
            compiler,
            memory: if options.guard_pages {
                Memory::guarded()
            } else {
                Memory::with_pool(options.pool_bytes).huge_pages(options.huge_pages)
            },
            kernels: BoundedCache::new(CODE_CACHE_LIMITS),
            splat_variants: HashMap::new(),
            pool,
            scratch: Vec::new(),
            spare: Vec::new(),
            held: Vec::new(),
            held_rows: Vec::new(),
            sole: false,
            quick: crate::quick::QuickScratch::default(),
            product_stack: Default::default(),
            watchdog,
            cancel: None,
        })
    }

    /// The compiler, to change its settings (see [`Compiler::set_simd`],
    /// [`Compiler::set_path`] and [`Compiler::set_avx512`]).
    pub fn compiler(&mut self) -> &mut Compiler {
        &mut self.compiler
    }

    /// Validates `kernel` and compiles it (without caching it): see [`Compiler::compile`].
    pub fn compile(&mut self, kernel: &Kernel) -> Result<CompiledKernel> {
        self.compiler.compile(kernel)
    }

    /// Turns the vector lowering on or off: see [`Compiler::set_simd`].
    pub fn set_simd(&mut self, enabled: bool) {
        self.compiler.set_simd(enabled);
    }

    /// Turns the AVX-512 bodies on or off: see [`Compiler::set_avx512`].
    pub fn set_avx512(&mut self, enabled: bool) {
        self.compiler.set_avx512(enabled);
    }

    /// Whether the vector lowering is on.
    pub fn simd(&self) -> bool {
        self.compiler.simd()
    }

    /// Whether kernels compiled now may use AVX-512 bodies.
    pub fn avx512(&self) -> bool {
        self.compiler.avx512()
    }

    /// Whether this CPU has what the AVX-512 bodies need.
    pub fn avx512_detected() -> bool {
        Compiler::avx512_detected()
    }

    /// Turns the AVX2 bodies on or off: see [`Compiler::set_avx2`].
    pub fn set_avx2(&mut self, enabled: bool) {
        self.compiler.set_avx2(enabled);
    }

    /// Whether kernels compiled now may use AVX2 bodies.
    pub fn avx2(&self) -> bool {
        self.compiler.avx2()
    }

    /// Whether this CPU has what the AVX2 bodies need.
    pub fn avx2_detected() -> bool {
        Compiler::avx2_detected()
    }

    /// The compiled kernel cached for `id`.
    pub fn compiled(&self, id: KernelId) -> Option<&CompiledKernel> {
        self.kernels.get(&id).map(|c| &c.compiled)
    }

    /// How many kernel variants for views broadcast along a loop's innermost dimension the
    /// back end holds (each compiled on the first launch that needs it).
    pub fn splat_variants(&self) -> usize {
        self.splat_variants.len()
    }

    /// How many of those variants' parallel loops run in vectors (see
    /// [`CompiledKernel::vectorized_loops`]): a broadcast load read once per row leaves the
    /// row's other accesses free to run in vectors.
    pub fn splat_vectorized_loops(&self) -> usize {
        self.splat_variants
            .values()
            .map(CompiledKernel::vectorized_loops)
            .sum()
    }

    /// The counters of the cache of compiled kernels.
    pub fn code_cache_stats(&self) -> CacheStats {
        self.kernels.stats()
    }

    /// Replaces the cache of compiled kernels by an empty one with `limits` (for tests of
    /// eviction, and hosts that want another bound).
    pub fn set_code_cache_limits(&mut self, limits: CacheLimits) {
        self.kernels = BoundedCache::new(limits);
    }

    /// The threads kernels run on.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// The pool kernels run on (shared with other back ends when the options gave one).
    pub fn pool(&self) -> &WorkerPool {
        &self.pool
    }

    /// [`CpuBackend::launch_views`], with an out-of-bounds index worded as NumPy words it:
    /// the launch runs again in the reference interpreter to find the index (see
    /// `weft_runtime::diagnose`), where the compiled code names only the parameter and
    /// dimension.
    fn launch_worded(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> Result<()> {
        let result = self.launch_views(kernel, bindings, scalars);
        let Err(Error::KernelFault {
            kernel: name,
            message,
        }) = result
        else {
            return result;
        };
        if !message.starts_with(crate::launch::INDEX_FAULT_MESSAGE) {
            return Err(Error::KernelFault {
                kernel: name,
                message,
            });
        }
        let ir = self.kernels.get(&kernel).map(|c| c.entry.clone());
        let found = ir.and_then(|entry| {
            weft_runtime::diagnose::index_fault(entry.ir().kernel(), bindings, scalars, self)
        });
        let message = match found {
            Some(oob) => format!("{oob} (store parameter {} of the kernel)", oob.param),
            None => message,
        };
        Err(Error::KernelFault {
            kernel: name,
            message,
        })
    }

    fn launch_views(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> Result<()> {
        let cached = self
            .kernels
            .get(&kernel)
            .ok_or_else(|| Error::Memory(format!("kernel {kernel} was not prepared")))?;
        check_element_sizes(cached, bindings)?;
        // Small strided views that the kernel only reads, copied dense (see `packed`).
        let read_only = |j: usize| cached.compiled.reads_only(j);
        let mut packs: SmallVec<[Option<crate::packed::Packed>; 8]> = SmallVec::new();
        if (0..bindings.len()).any(|j| crate::packed::wanted(bindings, j, &read_only)) {
            for (j, binding) in bindings.iter().enumerate() {
                let Binding::Buffer {
                    extents,
                    strides,
                    element_size,
                    ..
                } = binding
                else {
                    packs.push(None);
                    continue;
                };
                if !crate::packed::wanted(bindings, j, &read_only) {
                    packs.push(None);
                    continue;
                }
                let start = buffer_start(&mut self.memory, cached.compiled.name(), binding)?;
                // SAFETY: `checked_start` showed that every element the view reaches lies
                // inside the buffer, which is alive and unmoved for the call.
                packs.push(Some(unsafe {
                    crate::packed::pack(start, extents, strides, *element_size)
                }));
            }
        }
        let pack = |j: usize| packs.get(j).and_then(Option::as_ref);
        if cached.compiled.allows_quick()
            && cached.entry.product().is_none()
            && cached.entry.tiled_product().is_none()
        {
            let mut stores: SmallVec<[BoundStore<'_>; 8]> = SmallVec::new();
            for binding in bindings {
                let Binding::Buffer {
                    extents,
                    strides,
                    origin,
                    view,
                    deferred: None,
                    ..
                } = binding
                else {
                    break;
                };
                let start = buffer_start(&mut self.memory, cached.compiled.name(), binding)?;
                let (ptr, strides) = match pack(stores.len()) {
                    // The kernel only reads a packed view: its words are not written.
                    Some(p) => (p.words.as_ptr().cast::<u8>().cast_mut(), &p.strides[..]),
                    None => (start, &strides[..]),
                };
                stores.push(BoundStore {
                    ptr,
                    extents,
                    strides,
                    origin,
                    view,
                });
            }
            // Views broadcast along a loop's innermost dimension take the general path, and its
            // variant (see `splat`).
            let splat = !cached.splats.is_empty()
                && crate::splat::active_by(&cached.splats, |k| {
                    stores.get(k).map(|s| (s.extents, s.strides))
                }) != 0;
            if stores.len() == bindings.len() && !splat {
                let threads = self.pool.rayon().current_num_threads();
                // SAFETY: every view lies inside its buffer (checked above) with the buffer's
                // strides; the buffers stay alive and unmoved for the call (`self` is
                // borrowed mutably); a quick launch runs on this thread alone.
                let ran = unsafe {
                    cached
                        .compiled
                        .run_quick(&stores, scalars, threads, self.sole, &mut self.quick)
                }?;
                if ran {
                    return Ok(());
                }
            }
        }
        let mut compiled = &cached.compiled;
        if self.scratch.len() < bindings.len() {
            self.scratch.resize(bindings.len(), Vec::new());
        }
        let mut views = Vec::with_capacity(bindings.len());
        for (j, (binding, scratch)) in bindings.iter().zip(self.scratch.iter_mut()).enumerate() {
            let [mut e, mut s, mut o] = self.spare.pop().unwrap_or_default();
            views.push(match binding {
                Binding::Buffer {
                    extents,
                    strides,
                    origin,
                    ..
                } => {
                    let start = buffer_start(&mut self.memory, compiled.name(), binding)?;
                    refill(&mut e, extents);
                    refill(&mut o, origin);
                    let ptr = match pack(j) {
                        // The kernel only reads a packed view: its words are not written.
                        Some(p) => {
                            refill(&mut s, &p.strides);
                            p.words.as_ptr().cast::<u8>().cast_mut()
                        }
                        None => {
                            refill(&mut s, strides);
                            start
                        }
                    };
                    StoreView {
                        ptr,
                        extents: e,
                        strides: s,
                        origin: o,
                    }
                }
                Binding::Scratch {
                    extents,
                    origin,
                    element_size,
                    ..
                } => {
                    let volume = extents
                        .iter()
                        .try_fold(1usize, |a, &e| a.checked_mul(usize::try_from(e).ok()?))
                        .and_then(|v| v.checked_mul(*element_size))
                        .ok_or_else(|| {
                            Error::Memory(format!("scratch of extents {extents:?} is too large"))
                        })?;
                    scratch.clear();
                    scratch.resize(volume.div_ceil(8).max(1), 0);
                    refill(&mut e, extents);
                    s.clear();
                    s.resize(extents.len(), 1);
                    for d in (0..extents.len().saturating_sub(1)).rev() {
                        s[d] = s[d + 1].saturating_mul(extents[d + 1]);
                    }
                    refill(&mut o, origin);
                    StoreView {
                        ptr: scratch.as_mut_ptr().cast(),
                        extents: e,
                        strides: s,
                        origin: o,
                    }
                }
            });
        }
        // The canonical dense product runs through the blocked routine, with the compiled
        // kernel's bits (see `product`), where its views are plain buffers that hold every
        // element the kernel would touch; otherwise the kernel runs and checks them itself.
        // Over tiles of `C` (`tiled_product`), `BT` is the tile's panel: its rows count from 0.
        let tiled = cached.entry.tiled_product();
        if let Some(dtype) = cached.entry.product().or(tiled)
            && bindings
                .iter()
                .all(|b| matches!(b, Binding::Buffer { deferred: None, .. }))
            && distinct_output(bindings)
            && let Some(shape) = ProductShape::of(&views, tiled.is_some())
        {
            let path = crate::product::Path::detect(self.compiler.avx512());
            let cancel = self.compiler.cancel_flag();
            let pool = self.pool.rayon();
            let stack = &self.product_stack;
            // SAFETY: `ProductShape::of` showed that every element the three matrices name
            // lies inside its view, and every view inside its buffer (checked above); the
            // buffers stay alive and unmoved for the call; `C` is written and lies in a buffer
            // of its own (`distinct_output`), the operands read; the path is AVX-512 or
            // AVX2 only where `Path::detect` found it.
            let result = unsafe {
                match dtype {
                    weft_ir::DType::F32 => shape.run::<f32>(path, pool, &cancel, stack),
                    _ => shape.run::<f64>(path, pool, &cancel, stack),
                }
            };
            let name = compiled.name().to_string();
            self.spare
                .extend(views.into_iter().map(|v| [v.extents, v.strides, v.origin]));
            return result.map_err(|crate::product::Cancelled| Error::KernelFault {
                kernel: name,
                message: crate::launch::CANCELLED_MESSAGE.to_string(),
            });
        }
        // Views broadcast along a loop's innermost dimension run through a variant whose
        // loads of them read one element per row (see `splat`). It only saves time: should
        // the variant not compile, the kernel itself runs.
        let mask = crate::splat::active(&cached.splats, &views);
        if mask != 0 {
            let key = (kernel, mask);
            if !self.splat_variants.contains_key(&key) {
                if self.splat_variants.len() >= MAX_SPLAT_VARIANTS {
                    self.splat_variants.clear();
                }
                let ir = crate::splat::rewrite(cached.entry.ir(), &cached.splats, mask);
                if let Ok(variant) = self.compiler.compile(&ir) {
                    self.splat_variants.insert(key, variant);
                }
            }
            if let Some(variant) = self.splat_variants.get(&key) {
                compiled = variant;
            }
        }
        // SAFETY: every buffer view lies inside its buffer (checked above) with the buffer's
        // strides, every scratch view inside a dense buffer of its volume; buffers and scratch
        // stay alive and unmoved for the call (`self` is borrowed mutably), and the runtime
        // never binds one buffer's element to two points that write it concurrently (a
        // written partition's tiles are disjoint; a compiled kernel splits only its own
        // parallel loop across threads). A broadcast variant reads index 0 only on dimensions
        // whose extent is at least 1 (`splat::active`), so inside the same views.
        let view_extents: Vec<weft_runtime::Dims<u64>> =
            bindings.iter().map(|b| b.view().into()).collect();
        let deferred: Vec<Option<u32>> = bindings
            .iter()
            .map(|b| match b {
                Binding::Buffer { deferred, .. } => *deferred,
                Binding::Scratch { .. } => None,
            })
            .collect();
        let result = unsafe {
            compiled.run_task(
                &views,
                scalars,
                self.pool.rayon(),
                Some(&view_extents),
                &deferred,
            )
        };
        self.spare
            .extend(views.into_iter().map(|v| [v.extents, v.strides, v.origin]));
        let out = result?;
        for h in out.held_rows {
            let Some(Binding::Buffer {
                buffer,
                offset,
                extents,
                strides,
                element_size,
                ..
            }) = bindings.get(h.store)
            else {
                return Err(Error::Memory(format!(
                    "a held row of store argument {}, not a buffer",
                    h.store
                )));
            };
            self.held_rows.push(PendingRow {
                buffer: *buffer,
                offset: *offset,
                extents: extents.to_vec(),
                strides: strides.to_vec(),
                element_size: *element_size,
                row: h,
            });
        }
        for mut part in out.partials {
            part.param = compiled
                .store_argument(part.param)
                .ok_or_else(|| Error::KernelFault {
                    kernel: compiled.name().to_string(),
                    message: format!("a reduction into parameter {}, not a store", part.param),
                })?;
            self.held.push(part);
        }
        Ok(())
    }
}

impl CpuBackend {
    /// After a sole launch (see `Backend::set_sole_launch`), folds the partials it held back
    /// into their targets, as the executor would after the task's one point, so that a sole
    /// launch never holds partials back: whether the launch was quick or not, its task's
    /// reductions are done when it returns.
    fn fold_sole(&mut self, kernel: KernelId, bindings: &[Binding]) -> weft_runtime::Result<()> {
        if !self.sole || self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        let name = self
            .kernels
            .get(&kernel)
            .map_or_else(|| kernel.to_string(), |c| c.entry.name().to_string());
        weft_runtime::executor::fold_reductions(self, &name, bindings, held)
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn alloc(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        Ok(self.memory.alloc(bytes)?)
    }

    fn alloc_uninit(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        Ok(self.memory.alloc_uninit(bytes)?)
    }

    fn free(&mut self, buffer: BufferId) {
        self.memory.free(buffer);
    }

    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> weft_runtime::Result<()> {
        let bytes = self.memory.bytes_mut(buffer)?;
        let range = byte_range(bytes.len(), offset, data.len())?;
        bytes[range].copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> weft_runtime::Result<()> {
        let bytes = self.memory.bytes(buffer)?;
        let range = byte_range(bytes.len(), offset, out.len())?;
        out.copy_from_slice(&bytes[range]);
        Ok(())
    }

    fn read_append(
        &mut self,
        buffer: BufferId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> weft_runtime::Result<()> {
        let bytes = self.memory.bytes(buffer)?;
        let range = byte_range(bytes.len(), offset, len)?;
        out.extend_from_slice(&bytes[range]);
        Ok(())
    }

    fn is_prepared(&self, kernel: &Arc<KernelEntry>) -> bool {
        self.kernels
            .get(&kernel.id())
            .is_some_and(|c| c.entry.same_kernel(kernel))
    }

    fn prepare(
        &mut self,
        kernel: &Arc<KernelEntry>,
        owner: Owner,
    ) -> weft_runtime::Result<Prepared> {
        if let Some(cached) = self.kernels.get(&kernel.id()) {
            return weft_runtime::confirm_hit(&cached.entry, kernel);
        }
        let generation = self.compiler.generation();
        let compiled = self.compiler.compile_valid(kernel.ir(), Instant::now())?;
        let time = compiled.compile_time();
        let element_sizes = weft_runtime::store_element_sizes(&kernel.ir().params);
        let splats = crate::splat::candidates(kernel.ir());
        let bytes = compiled
            .code_bytes()
            .saturating_add((kernel.insts() as u64).saturating_mul(64));
        self.kernels.insert(
            kernel.id(),
            Cached {
                entry: kernel.clone(),
                compiled,
                element_sizes,
                splats,
            },
            owner,
            bytes,
        );
        // A fresh JIT module began: the kernels of the modules before the previous one go,
        // and with the last of them their machine code.
        let now = self.compiler.generation();
        if now != generation {
            self.kernels
                .remove_where(|_, c| c.compiled.generation().saturating_add(1) < now);
            self.splat_variants
                .retain(|_, c| c.generation().saturating_add(1) >= now);
        }
        Ok(Prepared::Compiled(time))
    }

    fn launch(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> weft_runtime::Result<()> {
        if self.watchdog.is_none() && self.cancel.is_none() {
            self.launch_worded(kernel, bindings, scalars)?;
            return self.fold_sole(kernel, bindings);
        }
        if let Some(watchdog) = &self.watchdog {
            watchdog.arm();
        }
        // Read after the watchdog cleared the flag: a cancel sets the request before the
        // flag, so one of the two shows it (see `weft_runtime::cancel`).
        let result = if self.cancel.as_ref().is_some_and(|t| t.is_cancelled()) {
            let name = self
                .kernels
                .get(&kernel)
                .map_or_else(|| format!("{kernel:?}"), |c| c.compiled.name().to_string());
            Err(Error::KernelFault {
                kernel: name,
                message: crate::launch::CANCELLED_MESSAGE.to_string(),
            })
        } else {
            self.launch_worded(kernel, bindings, scalars)
        };
        let timed_out = self.watchdog.as_ref().is_some_and(|w| w.disarm());
        let result: weft_runtime::Result<()> = match result {
            Err(Error::KernelFault { kernel, message })
                if message == crate::launch::CANCELLED_MESSAGE
                    && self.cancel.as_ref().is_some_and(|t| t.is_cancelled()) =>
            {
                Err(Error::KernelFault {
                    kernel,
                    message: weft_runtime::backend::CANCELLED_BY_JOB.to_string(),
                }
                .into())
            }
            Err(Error::KernelFault { kernel, message })
                if timed_out && message == crate::launch::CANCELLED_MESSAGE =>
            {
                let limit = self.watchdog.as_ref().map_or(0, |w| w.limit().as_millis());
                Err(Error::KernelFault {
                    kernel,
                    message: format!(
                        "ran past the kernel time limit of {limit} ms and was cancelled"
                    ),
                }
                .into())
            }
            other => Ok(other?),
        };
        result?;
        self.fold_sole(kernel, bindings)
    }

    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        Ok(std::mem::take(&mut self.held))
    }

    fn set_sole_launch(&mut self, sole: bool) {
        self.sole = sole;
    }

    fn set_cancel(&mut self, token: Option<Arc<CancelToken>>) {
        // A cancelled job's flag is not the next one's; a cancel from now on sets it again.
        let flag = self.compiler.cancel_flag();
        flag.store(0, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = &token {
            t.attach(flag);
        }
        self.cancel = token;
    }

    fn finish_deferred(&mut self, commit: bool) -> weft_runtime::Result<()> {
        for row in std::mem::take(&mut self.held_rows) {
            if commit {
                row.commit(&mut self.memory)?;
            }
        }
        Ok(())
    }

    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        // Launches run to completion before `launch` returns.
        Ok(())
    }

    fn memory(&self) -> MemoryStats {
        MemoryStats {
            allocated: self.memory.allocated(),
            pooled: self.memory.pooled(),
        }
    }

    fn functions(&self) -> weft_runtime::backend::FunctionCounts {
        let s = self.compiler.function_cache().stats();
        weft_runtime::backend::FunctionCounts {
            compiled: s.misses,
            from_cache: s.memory_hits + s.disk_hits,
        }
    }
}

/// Whether the last of three bindings (a product's `C`) lies in another buffer than the
/// first two.
fn distinct_output(bindings: &[Binding]) -> bool {
    let buffer = |b: &Binding| match b {
        Binding::Buffer { buffer, .. } => Some(*buffer),
        Binding::Scratch { .. } => None,
    };
    match bindings {
        [a, bt, c] => buffer(c).is_some_and(|c| Some(c) != buffer(a) && Some(c) != buffer(bt)),
        _ => false,
    }
}

/// The matrices of one launch of the canonical product (`weft_ir::product`): `A` (rows of
/// `C`, `k` columns), `BT` (the rows that `C`'s columns name, `k` columns) and `C` (or a
/// layer of it, for a 2.5-D grid's layered kernel).
struct ProductShape {
    rows: usize,
    cols: usize,
    k: usize,
    /// Element `(0, 0)` and the strides of `A`, `BT` and `C`.
    a: (*mut u8, isize, isize),
    bt: (*mut u8, isize, isize),
    c: (*mut u8, isize, isize),
    /// The row of `BT` that `C`'s first column names (`origin(C, 1)`).
    first: isize,
}

impl ProductShape {
    /// The product's matrices, if every element the kernel would read or write lies inside
    /// the views: `A` has `C`'s rows at least, `BT` the rows `origin(C, 1) ..` of `C`'s
    /// columns (from its first row where `tiled`: `BT` is the tile's panel) and `A`'s
    /// columns at least.
    fn of(views: &[StoreView], tiled: bool) -> Option<ProductShape> {
        let [a, bt, c] = views else { return None };
        // A layer of a 2.5-D product writes a `C` of rank 3, one layer thick: its last two
        // dimensions.
        let c = &match (
            c.extents.as_slice(),
            c.strides.as_slice(),
            c.origin.as_slice(),
        ) {
            ([1, e @ ..], [_, s @ ..], [_, o @ ..]) if tiled && e.len() == 2 => StoreView {
                ptr: c.ptr,
                extents: e.to_vec(),
                strides: s.to_vec(),
                origin: o.to_vec(),
            },
            _ => c.clone(),
        };
        if [a, bt, c]
            .iter()
            .any(|v| v.extents.len() != 2 || v.origin.len() != 2)
        {
            return None;
        }
        let rows = usize::try_from(c.extents[0]).ok()?;
        let cols = usize::try_from(c.extents[1]).ok()?;
        let k = usize::try_from(a.extents[1]).ok()?;
        let first = if tiled {
            0
        } else {
            usize::try_from(c.origin[1]).ok()?
        };
        let fits = usize::try_from(a.extents[0]).ok()? >= rows
            && first.checked_add(cols)? <= usize::try_from(bt.extents[0]).ok()?
            && usize::try_from(bt.extents[1]).ok()? >= k;
        if !fits {
            return None;
        }
        let stride = |v: &StoreView, d: usize| isize::try_from(v.strides[d]).ok();
        Some(ProductShape {
            rows,
            cols,
            k,
            a: (a.ptr, stride(a, 0)?, stride(a, 1)?),
            bt: (bt.ptr, stride(bt, 0)?, stride(bt, 1)?),
            c: (c.ptr, stride(c, 0)?, stride(c, 1)?),
            first: isize::try_from(first).ok()?,
        })
    }

    /// Runs the product on elements of type `T`.
    ///
    /// # Safety
    ///
    /// As `product::multiply`: the views `of` came from are valid for the call, hold `T`s,
    /// and `path` runs on this CPU.
    unsafe fn run<T: crate::product::Element>(
        &self,
        path: crate::product::Path,
        pool: &rayon::ThreadPool,
        cancel: &std::sync::atomic::AtomicU32,
        stack: &crate::product::StackScratch,
    ) -> std::result::Result<(), crate::product::Cancelled> {
        use crate::product::Matrix;
        let matrix = |ptr: *mut u8, rows, cols, rs, cs| Matrix {
            ptr: ptr.cast::<T>(),
            rows,
            cols,
            rs,
            cs,
        };
        let a = matrix(self.a.0, self.rows, self.k, self.a.1, self.a.2);
        let (bt_ptr, bt_rs, bt_cs) = self.bt;
        // `BT`'s row `first` (inside the view where `C` has columns, as `of` checked; with
        // none, the routine reads nothing).
        let bt_row = bt_ptr
            .cast::<T>()
            .wrapping_offset(self.first.wrapping_mul(bt_rs));
        let bt = Matrix {
            ptr: bt_row,
            rows: self.cols,
            cols: self.k,
            rs: bt_rs,
            cs: bt_cs,
        };
        let c = matrix(self.c.0, self.rows, self.cols, self.c.1, self.c.2);
        // SAFETY: the caller's contract.
        unsafe { crate::product::multiply(a, bt, c, path, pool, cancel, stack) }
    }
}

/// Refuses bindings that are not the kernel's store parameters in count and element size
/// ([`weft_runtime::check_element_sizes`]).
fn check_element_sizes(cached: &Cached, bindings: &[Binding]) -> Result<()> {
    weft_runtime::check_element_sizes(&cached.element_sizes, bindings).map_err(|message| {
        Error::KernelFault {
            kernel: cached.entry.name().to_string(),
            message,
        }
    })
}

fn byte_range(len: usize, offset: u64, n: usize) -> Result<std::ops::Range<usize>> {
    usize::try_from(offset)
        .ok()
        .and_then(|start| Some(start..start.checked_add(n)?))
        .filter(|r| r.end <= len)
        .ok_or_else(|| {
            Error::Memory(format!(
                "{n} bytes at offset {offset} reach outside a buffer of {len} bytes"
            ))
        })
}

/// `v` holding `from`'s elements, in the memory it already has.
/// The address of the element at index 0 of a buffer binding's view, after checking that
/// every element the view reaches lies inside its buffer; a fault of `kernel` otherwise (and
/// for a scratch binding, which has no buffer).
fn buffer_start(memory: &mut Memory, kernel: &str, binding: &Binding) -> Result<*mut u8> {
    let fault = |message: String| Error::KernelFault {
        kernel: kernel.to_string(),
        message,
    };
    let Binding::Buffer {
        buffer,
        offset,
        extents,
        strides,
        element_size,
        ..
    } = binding
    else {
        return Err(fault("internal: a scratch binding has no buffer".into()));
    };
    let (base, len) = memory.base(*buffer)?;
    weft_runtime::check_view(*offset, extents, strides, *element_size, len).map_err(fault)?;
    // `check_view` showed that the element at `offset` lies inside the buffer (an empty view
    // may point one past its end, which `wrapping_add` keeps sound).
    Ok(base.wrapping_add(*offset as usize * element_size))
}

fn refill<T: Copy>(v: &mut Vec<T>, from: &[T]) {
    v.clear();
    v.extend_from_slice(from);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits row `row` of a `4 x 3 x 5` view of `f64` with `strides` (in elements, from
    /// `offset`) into a buffer of 512 elements, and returns the buffer's elements: each
    /// written element is `1000 + its position in the row`, the rest `-1`.
    fn commit_into(row: i64, offset: u64, strides: [i64; 3]) -> Vec<f64> {
        let mut memory = Memory::default();
        let buffer = memory.alloc(512 * 8).expect("allocates");
        let fill: Vec<u8> = (0..512).flat_map(|_| (-1.0f64).to_le_bytes()).collect();
        memory
            .bytes_mut(buffer)
            .expect("exists")
            .copy_from_slice(&fill);
        let bytes: Vec<u8> = (0..15)
            .flat_map(|k| (1000.0 + f64::from(k)).to_le_bytes())
            .collect();
        let pending = PendingRow {
            buffer,
            offset,
            extents: vec![4, 3, 5],
            strides: strides.to_vec(),
            element_size: 8,
            row: HeldRow {
                store: 0,
                row,
                bytes,
            },
        };
        pending.commit(&mut memory).expect("inside the buffer");
        memory
            .bytes(buffer)
            .expect("exists")
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    }

    /// What committing writes, element by element.
    fn reference(row: i64, offset: u64, strides: [i64; 3]) -> Vec<f64> {
        let mut want = vec![-1.0; 512];
        for j in 0..3 {
            for k in 0..5 {
                let at = offset as i64 + row * strides[0] + j * strides[1] + k * strides[2];
                want[at as usize] = 1000.0 + (j * 5 + k) as f64;
            }
        }
        want
    }

    #[test]
    fn a_held_row_commits_to_the_elements_its_strides_name() {
        // Dense, with padding between rows, and transposed (the innermost stride not one).
        for (row, offset, strides) in [(2, 0, [15, 5, 1]), (3, 7, [40, 8, 1]), (1, 3, [1, 4, 12])] {
            assert_eq!(
                commit_into(row, offset, strides),
                reference(row, offset, strides),
                "row {row} at {offset} with strides {strides:?}"
            );
        }
    }

    #[test]
    fn a_held_row_outside_its_buffer_is_an_error() {
        let mut memory = Memory::default();
        let buffer = memory.alloc(64).expect("allocates");
        let pending = PendingRow {
            buffer,
            offset: 0,
            extents: vec![4, 8],
            strides: vec![8, 1],
            element_size: 8,
            row: HeldRow {
                store: 0,
                row: 1,
                bytes: vec![0; 64],
            },
        };
        let err = pending
            .commit(&mut memory)
            .expect_err("row 1 lies past the end");
        assert!(err.to_string().contains("outside buffer"), "{err}");
    }
}
