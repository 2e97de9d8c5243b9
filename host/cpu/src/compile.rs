//! The kernel compiler: kernel IR to native code with Cranelift, and compiled kernels that
//! run one point task's sub-stores on a thread pool. See the crate documentation for how a
//! kernel runs, its calling convention and its memory safety.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cranelift_codegen::Context;
use cranelift_codegen::ir::AbiParam;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use weft_ir::{DType, Kernel, Scalar};

use crate::function_cache::FunctionCache;
use crate::launch::{KernelFn, Plan, PlanStep};
use crate::leaves;
use crate::lower;
use crate::lower::vector::Features;
use crate::lower::wide::Isa;
use crate::lower::{MathDecls, StepKind, Target};
use crate::math::MathFn;
use crate::rows_product::RowsProduct;
use crate::{Error, Result, SimdPath};
use weft_ir::ValidKernel;

/// The JIT module, shared by the backend and every kernel compiled in it; the code is freed
/// when the last of them is dropped.
struct CodeOwner {
    module: Mutex<Option<JITModule>>,
    /// The cancel flag whose address the code reads on every loop back edge: kept alive as
    /// long as the code.
    _cancel: Arc<AtomicU32>,
}

impl Drop for CodeOwner {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the owner is dropped when no backend and no compiled kernel holds it, so
            // no function of the module can run or be called afterwards.
            unsafe { module.free_memory() };
        }
    }
}

/// The kernel compiler of the CPU back end: one Cranelift JIT module, to which each compiled
/// kernel adds its functions.
pub struct Compiler {
    code: Arc<CodeOwner>,
    ctx: Context,
    math: MathDecls,
    /// What the vector lowering may use on this CPU; `None` when it is off.
    simd: Option<Features>,
    /// The vector lowering's features on this CPU (`None` where it has none), whether or not
    /// the lowering is on.
    simd_detected: Option<Features>,
    /// The ISA that compiles vector functions: the module's, without Cranelift's optimizer.
    vector_isa: OwnedTargetIsa,
    /// Whether scalar `for` loops prefetch the streams they read (see
    /// [`Compiler::set_prefetch`]).
    prefetch: bool,
    /// The flag that stops running kernels: nonzero makes every loop of compiled code return
    /// [`crate::lower::CANCELLED`] at its next back edge, and every chunk not yet started
    /// return at once.
    cancel: Arc<AtomicU32>,
    /// The generation of the current JIT module (see [`Compiler::generation`]).
    generation: u64,
    /// Bytes of machine code in the current JIT module.
    module_bytes: u64,
    /// The code a module takes before a fresh one begins ([`MODULE_CODE_BYTES`]).
    module_limit: u64,
    /// Compiled functions of earlier compiles (and, with a directory, of earlier processes).
    function_cache: FunctionCache,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler").finish_non_exhaustive()
    }
}

/// The host's ISA with the back end's flags and Cranelift's optimization level `opt_level`.
pub(crate) fn native_isa(opt_level: &str) -> Result<OwnedTargetIsa> {
    let mut flags = settings::builder();
    for (name, value) in [
        ("opt_level", opt_level),
        ("use_colocated_libcalls", "false"),
        ("is_pic", "false"),
        // Kernels neither unwind nor are unwound through.
        ("unwind_info", "false"),
        // A frame larger than a page touches each page on the way down, so that it cannot
        // step over a worker stack's guard page (frames are also bounded: `MAX_FRAME_BYTES`).
        ("enable_probestack", "true"),
        ("probestack_strategy", "inline"),
        // The lowering type-checks everything it emits; the verifier would only double
        // the compile time.
        (
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        ),
    ] {
        flags.set(name, value).map_err(backend_error)?;
    }
    cranelift_native::builder()
        .map_err(backend_error)?
        .finish(settings::Flags::new(flags))
        .map_err(backend_error)
}

fn backend_error(message: impl std::fmt::Display) -> Error {
    Error::Compile {
        kernel: "<cpu backend>".into(),
        message: message.to_string(),
    }
}

/// A fresh JIT module for the host's CPU, with the math functions declared, and its owner.
fn fresh_module(cancel: &Arc<AtomicU32>) -> Result<(Arc<CodeOwner>, MathDecls)> {
    let isa = native_isa("speed")?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for f in MathFn::ALL {
        for dt in [DType::F32, DType::F64] {
            builder.symbol(f.symbol(dt), f.address(dt));
        }
    }
    for (name, address) in crate::math::fma_libcalls() {
        builder.symbol(name, address);
    }
    builder.symbol_lookup_fn(Box::new(lower::address_symbol));
    let mut module = JITModule::new(builder);
    let mut ids = HashMap::new();
    for f in MathFn::ALL {
        for dt in [DType::F32, DType::F64] {
            let ty = if dt == DType::F32 {
                cranelift_codegen::ir::types::F32
            } else {
                cranelift_codegen::ir::types::F64
            };
            let mut sig = module.make_signature();
            for _ in 0..f.arity() {
                sig.params.push(AbiParam::new(ty));
            }
            sig.returns.push(AbiParam::new(ty));
            let id = module
                .declare_function(f.symbol(dt), Linkage::Import, &sig)
                .map_err(backend_error)?;
            ids.insert((f, dt), id);
        }
    }
    Ok((
        Arc::new(CodeOwner {
            module: Mutex::new(Some(module)),
            _cancel: cancel.clone(),
        }),
        MathDecls { ids },
    ))
}

/// The machine code one JIT module takes before the compiler starts a fresh one: the code of
/// a module is freed only with the module, once no compiled kernel of it is left (see
/// [`Compiler::generation`]).
pub const MODULE_CODE_BYTES: u64 = 32 << 20;

impl Compiler {
    /// A compiler for the host's CPU (features detected at run time), optimizing for speed.
    pub fn new() -> Result<Self> {
        let isa = native_isa("speed")?;
        // Vector functions keep the order in which they are emitted (see `lower::vector`).
        let vector_isa = native_isa("none")?;
        let simd_detected = Features::of(&*isa);
        let cancel = Arc::new(AtomicU32::new(0));
        let (code, math) = fresh_module(&cancel)?;
        let ctx = Context::new();
        Ok(Compiler {
            code,
            cancel,
            ctx,
            math,
            simd: simd_detected,
            simd_detected,
            vector_isa,
            prefetch: true,
            generation: 0,
            module_bytes: 0,
            module_limit: MODULE_CODE_BYTES,
            function_cache: FunctionCache::in_memory(),
        })
    }

    /// The generation of the JIT module that kernels compiled now go into: it grows by one
    /// each time a module has taken [`MODULE_CODE_BYTES`] of code and a fresh one begins. A
    /// cache that drops every kernel of the older generations frees their code.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Takes `cache` as the cache of compiled functions from now on (by default one in memory
    /// only: [`FunctionCache::on_disk`] makes one that later processes find too).
    pub fn set_function_cache(&mut self, cache: FunctionCache) {
        self.function_cache = cache;
    }

    /// The cache of compiled functions, and what it did so far.
    pub fn function_cache(&self) -> &FunctionCache {
        &self.function_cache
    }

    /// Sets the machine code a JIT module takes before a fresh one begins (by default
    /// [`MODULE_CODE_BYTES`]; tests set less to see modules turn over).
    pub fn set_module_code_bytes(&mut self, bytes: u64) {
        self.module_limit = bytes;
    }

    /// Starts a fresh JIT module once the current one holds its limit of machine code.
    fn rotate_if_full(&mut self) -> Result<()> {
        if self.module_bytes >= self.module_limit {
            let (code, math) = fresh_module(&self.cancel)?;
            self.code = code;
            self.math = math;
            self.generation += 1;
            self.module_bytes = 0;
        }
        Ok(())
    }

    /// Turns the vector lowering of parallel loops on (the default) or off, for the kernels
    /// compiled from now on. With it off every loop runs the scalar code; the results are the
    /// same bits either way (up to the sign and payload of a NaN made by arithmetic).
    pub fn set_simd(&mut self, enabled: bool) {
        self.simd = if enabled { self.simd_detected } else { None };
    }

    /// Turns software prefetches on (the default) or off, for the kernels compiled from now
    /// on. With them on, a scalar `for` loop that loads a rank-1 store of unit stride at its
    /// induction value (a CSR row reading `crd` and `vals`) prefetches that store a fixed
    /// number of iterations past its first one, where the loops that follow it will read.
    /// Results are the same either way.
    pub fn set_prefetch(&mut self, enabled: bool) {
        self.prefetch = enabled;
    }

    /// Whether kernels compiled now prefetch (see [`Compiler::set_prefetch`]).
    pub fn prefetch(&self) -> bool {
        self.prefetch
    }

    /// The flag that cancels running kernels (see the field's documentation).
    pub fn cancel_flag(&self) -> Arc<AtomicU32> {
        self.cancel.clone()
    }

    /// Whether the vector lowering is on (it is never on for a CPU without 128-bit vectors that
    /// Cranelift supports).
    pub fn simd(&self) -> bool {
        self.simd.is_some()
    }

    /// Turns the AVX-512 bodies on (the default where the CPU has AVX-512 F and DQ) or off,
    /// for the kernels compiled from now on. With them on, a vectorized loop with 64-bit lanes
    /// whose body they take runs each row's first `32 * floor(len / 32)` iterations in 512-bit
    /// registers; the results are the same bits either way. They are never on without the
    /// vector lowering, nor on a CPU without AVX-512. Turning them off leaves 128-bit vectors
    /// only (as the `sse` path); turning them on replaces AVX2 bodies.
    pub fn set_avx512(&mut self, enabled: bool) {
        self.set_wide(Isa::Avx512, enabled);
    }

    /// Whether kernels compiled now may use AVX-512 bodies.
    pub fn avx512(&self) -> bool {
        self.wide() == Some(Isa::Avx512)
    }

    /// Turns the AVX2 bodies on (the default where the CPU has AVX2 but not AVX-512) or off,
    /// for the kernels compiled from now on: as [`Compiler::set_avx512`], with 256-bit
    /// registers and `16 * floor(len / 16)` iterations per row.
    pub fn set_avx2(&mut self, enabled: bool) {
        self.set_wide(Isa::Avx2, enabled);
    }

    /// Whether kernels compiled now may use AVX2 bodies.
    pub fn avx2(&self) -> bool {
        self.wide() == Some(Isa::Avx2)
    }

    fn wide(&self) -> Option<Isa> {
        self.simd.and_then(|f| f.wide)
    }

    /// Turns the bodies of `isa` on (where the CPU has it and the vector lowering is on) or
    /// off (leaving 128-bit vectors, if they were the bodies in use).
    fn set_wide(&mut self, isa: Isa, enabled: bool) {
        if let Some(f) = &mut self.simd {
            if enabled && isa.detected() {
                f.wide = Some(isa);
            } else if f.wide == Some(isa) {
                f.wide = None;
            }
        }
    }

    /// The paths this CPU can run, narrowest first.
    pub fn available_paths(&self) -> Vec<SimdPath> {
        let mut paths = vec![SimdPath::Scalar];
        if self.simd_detected.is_some() {
            paths.push(SimdPath::Sse);
            for wide in [SimdPath::Avx2, SimdPath::Avx512] {
                if wide.detected() {
                    paths.push(wide);
                }
            }
        }
        paths
    }

    /// Compiles the kernels from now on for `path`: scalar code, 128-bit vectors, or 128-bit
    /// vectors with AVX2 or AVX-512 bodies. A path this CPU cannot run is an error that names
    /// the paths it can.
    pub fn set_path(&mut self, path: SimdPath) -> Result<()> {
        let available = self.available_paths();
        if !available.contains(&path) {
            let names: Vec<&str> = available.iter().map(|p| p.name()).collect();
            return Err(Error::Simd(format!(
                "SIMD path `{path}` cannot run: this CPU does not have it (this CPU runs {})",
                names.join(", ")
            )));
        }
        self.set_simd(path != SimdPath::Scalar);
        if let Some(f) = &mut self.simd {
            f.wide = match path {
                SimdPath::Avx2 => Some(Isa::Avx2),
                SimdPath::Avx512 => Some(Isa::Avx512),
                SimdPath::Scalar | SimdPath::Sse => None,
            };
        }
        Ok(())
    }

    /// The path kernels compiled now use.
    pub fn path(&self) -> SimdPath {
        match self.simd {
            None => SimdPath::Scalar,
            Some(f) => match f.wide {
                Some(Isa::Avx512) => SimdPath::Avx512,
                Some(Isa::Avx2) => SimdPath::Avx2,
                None => SimdPath::Sse,
            },
        }
    }

    /// Whether this CPU has what the AVX-512 bodies need (AVX-512 F and DQ, enabled by the
    /// operating system).
    pub fn avx512_detected() -> bool {
        Isa::Avx512.detected()
    }

    /// Whether this CPU has what the AVX2 bodies need (AVX2, enabled by the operating
    /// system).
    pub fn avx2_detected() -> bool {
        Isa::Avx2.detected()
    }

    /// Validates `kernel` and compiles it. Any problem is an [`Error::Compile`] naming the
    /// kernel.
    pub fn compile(&mut self, kernel: &Kernel) -> Result<CompiledKernel> {
        let start = Instant::now();
        let valid = ValidKernel::new(kernel.clone()).map_err(|e| Error::Compile {
            kernel: kernel.name.clone(),
            message: format!("invalid IR: {}", e.message),
        })?;
        self.compile_valid(&valid, start)
    }

    /// `valid` with its loops cut into segments where that lets a long straight run vectorize
    /// (see [`crate::strips`]), and the groups; `None` and no groups where no loop is cut
    /// (always so without the vector lowering).
    fn cut_into_segments(
        &self,
        valid: &ValidKernel,
    ) -> std::result::Result<(Option<ValidKernel>, Vec<crate::strips::Group>), String> {
        let Some(features) = self.simd else {
            return Ok((None, Vec::new()));
        };
        let mut skip = std::collections::HashSet::new();
        loop {
            let (kernel, groups) = crate::strips::rewrite(valid.kernel(), valid.types(), &skip);
            if groups.is_empty() {
                return Ok((None, groups));
            }
            let cut = ValidKernel::new(kernel).map_err(|e| {
                format!(
                    "internal: a loop cut into segments is invalid: {}",
                    e.message
                )
            })?;
            // A cut pays only if its straight run vectorizes.
            let failed: Vec<usize> = groups
                .iter()
                .filter(|g| {
                    !lower::vectorizes(cut.kernel(), g.first + g.heavy, cut.types(), features)
                })
                .map(|g| g.source)
                .collect();
            if failed.is_empty() {
                return Ok((Some(cut), groups));
            }
            skip.extend(failed);
        }
    }

    /// Compiles a validated kernel; `start` is when compiling began (for
    /// [`CompiledKernel::compile_time`]).
    pub fn compile_valid(&mut self, valid: &ValidKernel, start: Instant) -> Result<CompiledKernel> {
        let err = |message: String| Error::Compile {
            kernel: valid.kernel().name.clone(),
            message,
        };
        // The canonical product by rows runs its blocks through a routine (`rows_product`).
        let rows_product =
            weft_ir::product::recognize_rows(valid.kernel()).map(|dtype| RowsProduct {
                dtype,
                avx2: self.simd.is_some() && avx2_detected(),
            });
        // Reductions into 0-d stores go through leaf stores (see `leaves`).
        let (rewritten, leaves) = leaves::rewrite(valid.kernel());
        let with_leaves = if leaves.is_empty() {
            None
        } else {
            Some(ValidKernel::new(rewritten).map_err(|e| {
                err(format!(
                    "internal: the leaf-store rewrite is invalid: {}",
                    e.message
                ))
            })?)
        };
        let valid = with_leaves.as_ref().unwrap_or(valid);
        // Deferral is decided per loop of the kernel as the runtime knows it, before any loop
        // is cut into segments (a group runs as one step).
        let deferrable = crate::deferred::deferrable_by_loop(valid.kernel());
        let (cut, groups) = self.cut_into_segments(valid).map_err(err)?;
        let valid = cut.as_ref().unwrap_or(valid);
        let kernel = valid.kernel();
        let types = valid.types();
        self.rotate_if_full()?;
        let mut guard = self
            .code
            .module
            .lock()
            .map_err(|_| err("the JIT module was poisoned by an earlier panic".into()))?;
        let module = guard
            .as_mut()
            .ok_or_else(|| err("the JIT module is gone".into()))?;
        let lowered = lower::lower_kernel(
            kernel,
            Target {
                module,
                ctx: &mut self.ctx,
                math: &self.math,
                types,
                simd: self.simd,
                vector_isa: &*self.vector_isa,
                cancel_flag: self.cancel.as_ptr() as i64,
                function_cache: &mut self.function_cache,
                groups: &groups,
                private: &leaves.iter().map(|l| l.param).collect::<Vec<u32>>(),
                grouped: &leaves
                    .iter()
                    .filter(|l| l.groupable())
                    .map(|l| (l.param, l.op))
                    .collect::<Vec<_>>(),
                prefetch: self.prefetch,
            },
        )
        .map_err(err)?;
        module
            .finalize_definitions()
            .map_err(|e| err(format!("finalize: {e}")))?;
        let steps = lowered
            .steps
            .into_iter()
            .map(|s| {
                let code = module.get_finalized_function(s.func);
                // SAFETY: `code` is a finalized function of this module, compiled with the
                // signature that `KernelFn` spells out (see `lower`), in the default calling
                // convention of the host, which is `extern "C"`. The module outlives every
                // `CompiledKernel` (each holds the `CodeOwner`).
                let func = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
                PlanStep {
                    kind: s.kind,
                    func,
                    vectorized: s.vectorized,
                    wide: s.wide,
                    wide_refusal: s.wide_refusal,
                    whole_rows: s.whole_rows,
                }
            })
            .collect();
        drop(guard);
        let code_bytes = lowered.loop_counts.code_bytes as u64;
        self.module_bytes = self.module_bytes.saturating_add(code_bytes);
        let mut plan = Plan {
            name: kernel.name.clone(),
            layout: lowered.layout,
            steps,
            faults: lowered.faults,
            leaves,
            scratch: groups
                .iter()
                .flat_map(|g| g.scratch.iter().map(|&p| (p, g.over)))
                .collect(),
            deferrable,
            cancel: self.cancel.clone(),
            rows_product,
            quick: false,
        };
        plan.quick = crate::quick::allowed(&plan);
        Ok(CompiledKernel {
            inner: Arc::new(KernelInner {
                plan,
                compile_time: start.elapsed(),
                generation: self.generation,
                loop_counts: lowered.loop_counts,
                cut_loops: groups.len(),
                _tables: lowered.tables,
                _code: Arc::clone(&self.code),
            }),
        })
    }
}

struct KernelInner {
    plan: Plan,
    compile_time: Duration,
    /// The generation of the JIT module that holds its code.
    generation: u64,
    loop_counts: crate::lower::LoopCounts,
    cut_loops: usize,
    /// The constant tables that the machine code reads at fixed addresses; kept alive with it.
    _tables: Vec<lower::vector::ConstTable>,
    /// Keeps the machine code alive.
    _code: Arc<CodeOwner>,
}

/// A kernel compiled for the CPU. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct CompiledKernel {
    inner: Arc<KernelInner>,
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledKernel")
            .field("name", &self.name())
            .field("parallel_loops", &self.parallel_loops())
            .field("vectorized_loops", &self.vectorized_loops())
            .field("avx2_loops", &self.avx2_loops())
            .field("avx512_loops", &self.avx512_loops())
            .field("compile_time", &self.compile_time())
            .finish()
    }
}

/// One store argument of one point task: the sub-store of a store parameter.
#[derive(Clone, Debug)]
pub struct StoreView {
    /// Address of the element at index 0 in every dimension.
    pub ptr: *mut u8,
    /// Extent of each dimension.
    pub extents: Vec<i64>,
    /// Stride of each dimension, in elements.
    pub strides: Vec<i64>,
    /// Global coordinates of the sub-store's origin (what `Op::Origin` reads).
    pub origin: Vec<i64>,
}

impl StoreView {
    /// A dense row-major view of `extents` at `ptr`, with origin 0.
    pub fn dense(ptr: *mut u8, extents: &[i64]) -> StoreView {
        let mut strides = vec![1i64; extents.len()];
        for d in (0..extents.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].saturating_mul(extents[d + 1]);
        }
        StoreView {
            ptr,
            extents: extents.to_vec(),
            strides,
            origin: vec![0; extents.len()],
        }
    }
}

impl CompiledKernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.plan.name
    }

    /// How long [`Compiler::compile`] took for this kernel (validation included).
    pub fn compile_time(&self) -> Duration {
        self.inner.compile_time
    }

    /// Bytes of machine code the kernel defined.
    pub fn code_bytes(&self) -> u64 {
        self.inner.loop_counts.code_bytes as u64
    }

    /// The generation of the JIT module that holds its code (see [`Compiler::generation`]).
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }

    /// Number of parallel loops (each a separately launched step).
    pub fn parallel_loops(&self) -> usize {
        self.inner
            .plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Parallel { .. }))
            .count()
    }

    /// Number of parallel loops compiled as vector functions (see the module documentation). A
    /// vectorized loop still runs its scalar code when a store it reads or writes as contiguous
    /// vectors has an innermost stride other than one element.
    pub fn vectorized_loops(&self) -> usize {
        self.inner
            .plan
            .steps
            .iter()
            .filter(|s| s.vectorized)
            .count()
    }

    /// Number of `for` loops compiled as vectors of lanes: loops whose carried values form
    /// lanes, as `weft_ir::builder::BodyBuilder::fold_lanes` writes a row reduction (see the
    /// `lower::lanes` module), and loops whose iterations reduce into distinct elements of a
    /// chunk buffer, run a vector of iterations at a time (the `lower::iterations` module).
    /// A parallel step compiles such a loop as vectors in the copies of its loop nest for unit
    /// innermost strides (counted once: the one where every origin is zero repeats the
    /// other), and as scalar code in the general copy.
    pub fn lane_loops(&self) -> usize {
        self.inner.loop_counts.vector
    }

    /// Number of the [`Self::lane_loops`] whose carried values form lanes and that run their
    /// bulk in wide bodies (AVX2 or AVX-512, by the path: see [`Compiler::set_path`]), eight
    /// 64-bit lanes at a time, with the 128-bit code's bits.
    pub fn wide_lane_loops(&self) -> usize {
        self.inner.loop_counts.wide
    }

    /// Number of parallel loops whose points run several at a time (four beside wide bodies,
    /// else two) in the copies of their loop nest for unit innermost strides, so that the
    /// rows of a `matvec` share their loads of `x` (the `lower::jam` module): rank-1 loops
    /// with `for` loops of fixed bounds inside, whose accesses index rows by the point only.
    pub fn jammed_loops(&self) -> usize {
        self.inner.loop_counts.jammed
    }

    /// How many times a scalar `for` loop was lowered with prefetches of the streams it reads
    /// (see [`Compiler::set_prefetch`]; a loop lowered in several copies of its loop nest,
    /// or once per point of a group, counts once per copy).
    pub fn prefetched_loops(&self) -> usize {
        self.inner.loop_counts.prefetched
    }

    /// How many times a scalar `for` loop was lowered to run two iterations per trip (a
    /// short, read-only body whose accesses at its induction value are checked before it,
    /// such as a CSR row's product; counted per copy as [`Self::prefetched_loops`]).
    pub fn paired_loops(&self) -> usize {
        self.inner.loop_counts.paired
    }

    /// Number of parallel steps that leave the contributions of their points to a float sum
    /// or product into a 0-d store grouped: a rank-1 loop with `for` loops inside (a CSR
    /// row) that does not jam, or a vectorized rank-1 loop, combines each aligned group of
    /// eight points in registers by the canonical tree, and stores one node per group instead
    /// of a leaf per point.
    pub fn grouped_loops(&self) -> usize {
        self.inner
            .plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Parallel { grouped: true, .. }))
            .count()
    }

    /// Number of parallel loops cut into segments so that a long straight run of arithmetic
    /// between their `for` loops runs as vector code (see the `strips` module); each runs as
    /// one step, whose vectorized flag is its straight run's.
    pub fn cut_loops(&self) -> usize {
        self.inner.cut_loops
    }

    /// Number of vectorized loops whose rows run their bulk, eight iterations at a time, in
    /// AVX-512 code (see [`Compiler::set_avx512`]).
    pub fn avx512_loops(&self) -> usize {
        self.wide_loops(Isa::Avx512)
    }

    /// Number of vectorized loops whose rows run their bulk, four iterations at a time, in
    /// AVX2 code (see [`Compiler::set_avx2`]).
    pub fn avx2_loops(&self) -> usize {
        self.wide_loops(Isa::Avx2)
    }

    /// Number of loops whose wide body runs whole rows: the bulk in whole steps, then the
    /// row's last iterations one vector at a time, the last, partial vector's loads and
    /// stores moving only its lanes (bodies without gathers, widened loads or grouped
    /// stores), so that short rows (a 3-D stencil's 38 elements) leave nothing to the
    /// 128-bit and scalar loops; where the rows differ only in their addresses, one call
    /// runs every row of the dimension around them.
    pub fn whole_row_loops(&self) -> usize {
        let steps = &self.inner.plan.steps;
        steps.iter().filter(|s| s.whole_rows).count()
    }

    /// Why each vectorized loop that runs without a wide body on a path that has them (AVX2 or
    /// AVX-512) was refused one, in loop order: the first operation the body's instruction
    /// selector has no form for, say.
    pub fn wide_refusals(&self) -> Vec<&str> {
        let steps = &self.inner.plan.steps;
        steps
            .iter()
            .filter_map(|s| s.wide_refusal.as_deref())
            .collect()
    }

    fn wide_loops(&self, isa: Isa) -> usize {
        let steps = &self.inner.plan.steps;
        steps.iter().filter(|s| s.wide == Some(isa)).count()
    }

    /// Runs the kernel on one point task: `stores` are the kernel's store parameters in order,
    /// `scalars` its scalar parameters in order. Parallel loops are split across `pool`.
    ///
    /// Returns [`Error::KernelFault`] if the arguments do not match the kernel's parameters
    /// (count, rank, scalar type, a negative extent) or an index is out of bounds. After a fault
    /// the stores the kernel writes hold unspecified values (but nothing outside them changed).
    ///
    /// # Safety
    /// Each view's `ptr` is valid for reads and writes (as its parameter's privilege allows) of
    /// every element at offset `sum(i_d * strides_d)` elements for `0 <= i_d < extents_d`, and
    /// no other thread touches stores written here while this runs.
    pub unsafe fn run(
        &self,
        stores: &[StoreView],
        scalars: &[Scalar],
        pool: &rayon::ThreadPool,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.plan.run(stores, scalars, pool) }
    }

    /// Runs the kernel on one point task of a larger launch: as [`CompiledKernel::run`], but
    /// the float sums and products of parallel loops into 0-d stores are handed back as
    /// canonical partials ([`weft_ir::reduction`]) instead of folded, for the caller to merge
    /// with the other points' and fold once. `views` gives, per store argument, the extents of
    /// the view its sub-store is cut from (the coordinates of the canonical order run over it);
    /// `None` takes each sub-store's origin plus its extents. Each partial names its target by
    /// its kernel parameter. `deferred` gives, per store argument (or none), `Some(halo)` for
    /// an argument whose stores are deferred: each parallel loop that stores it (at its own
    /// index only) writes the rows nothing else reads as it goes, and hands back the first
    /// and last `halo` rows of each chunk ([`crate::TaskOutput::held_rows`]), for the caller
    /// to write once every point task of the launch has run (see `weft_runtime::Binding`).
    ///
    /// # Safety
    /// As for [`CompiledKernel::run`].
    pub unsafe fn run_task(
        &self,
        stores: &[StoreView],
        scalars: &[Scalar],
        pool: &rayon::ThreadPool,
        views: Option<&[weft_runtime::Dims<u64>]>,
        deferred: &[Option<u32>],
    ) -> Result<crate::TaskOutput> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.inner
                .plan
                .run_deferring(stores, scalars, pool, views, deferred)
        }
    }

    /// Whether the kernel's form allows quick launches (see [`crate::quick`]).
    pub(crate) fn allows_quick(&self) -> bool {
        self.inner.plan.quick
    }

    /// Whether the kernel only reads its store argument `store` (in binding order).
    pub(crate) fn reads_only(&self, store: usize) -> bool {
        self.inner
            .plan
            .layout
            .stores
            .get(store)
            .is_some_and(|s| matches!(s.privilege, weft_ir::Privilege::Read))
    }

    /// Runs the kernel as a quick launch (see [`crate::quick`]): `Ok(false)`, having done
    /// nothing, where the launch is not one.
    ///
    /// # Safety
    /// As for [`CompiledKernel::run`].
    pub(crate) unsafe fn run_quick(
        &self,
        stores: &[crate::quick::BoundStore<'_>],
        scalars: &[Scalar],
        threads: usize,
        sole: bool,
        scratch: &mut crate::quick::QuickScratch,
    ) -> Result<bool> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.inner
                .plan
                .run_quick(stores, scalars, threads, sole, scratch)
        }
    }

    /// The store argument (its position among the store parameters) of kernel parameter
    /// `param`, if it is a store.
    pub fn store_argument(&self, param: u32) -> Option<u32> {
        match self.inner.plan.layout.slots.get(param as usize)? {
            lower::Slot::Store(i) => u32::try_from(*i).ok(),
            lower::Slot::Scalar(_) => None,
        }
    }
}

/// Whether this CPU has AVX2.
fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_and_compiler_are_thread_safe() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>() {}
        assert_send_sync::<CompiledKernel>();
        assert_send::<Compiler>();
    }

    #[test]
    fn compiled_functions_probe_their_stack_inline() {
        for opt in ["speed", "none"] {
            let isa = native_isa(opt).expect("isa");
            assert!(isa.flags().enable_probestack(), "{opt}");
            assert_eq!(
                isa.flags().probestack_strategy(),
                settings::ProbestackStrategy::Inline,
                "{opt}"
            );
        }
    }
}
