//! Every kernel a set of programs makes, recorded as the runtime prepares it: a back end that
//! runs everything on another one (the CPU's) and keeps each kernel's IR, so that the PTX
//! emitter can be checked (`tests/tests/all/ptx_modules.rs`) and timed (`bench_ptx`) on the
//! kernels the examples really make, fused and unfused, on machines without a GPU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use weft::{Config, Numeric, Runtime, Sparse};
use weft_ir::reduction::LoopPartial;
use weft_ir::{DType, Scalar, ValidKernel};
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, KernelId, MemoryStats, Prepared};

use crate::{black_scholes, cfd, jacobi, krylov, logreg, stencil, swe};

/// The kernels recorded so far, by name: each one's validated IR, as back ends receive it.
pub type Seen = Arc<Mutex<BTreeMap<String, ValidKernel>>>;

/// A back end that runs everything on `inner` and records every kernel prepared.
pub struct Recording {
    inner: Box<dyn Backend>,
    seen: Seen,
}

impl Backend for Recording {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn alloc(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        self.inner.alloc(bytes)
    }
    fn alloc_uninit(&mut self, bytes: u64) -> weft_runtime::Result<BufferId> {
        self.inner.alloc_uninit(bytes)
    }
    fn free(&mut self, buffer: BufferId) {
        self.inner.free(buffer)
    }
    fn write(&mut self, buffer: BufferId, offset: u64, data: &[u8]) -> weft_runtime::Result<()> {
        self.inner.write(buffer, offset, data)
    }
    fn read(&mut self, buffer: BufferId, offset: u64, out: &mut [u8]) -> weft_runtime::Result<()> {
        self.inner.read(buffer, offset, out)
    }
    fn is_prepared(&self, kernel: KernelId) -> bool {
        self.inner.is_prepared(kernel)
    }
    fn prepare(&mut self, kernel: &KernelEntry) -> weft_runtime::Result<Prepared> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert(kernel.name().to_string(), kernel.ir().clone());
        }
        self.inner.prepare(kernel)
    }
    fn launch(
        &mut self,
        kernel: KernelId,
        bindings: &[Binding],
        scalars: &[Scalar],
    ) -> weft_runtime::Result<()> {
        self.inner.launch(kernel, bindings, scalars)
    }
    fn take_reductions(&mut self) -> weft_runtime::Result<Vec<LoopPartial>> {
        self.inner.take_reductions()
    }
    fn finish_deferred(&mut self, commit: bool) -> weft_runtime::Result<()> {
        self.inner.finish_deferred(commit)
    }
    fn synchronize(&mut self) -> weft_runtime::Result<()> {
        self.inner.synchronize()
    }
    fn memory(&self) -> MemoryStats {
        self.inner.memory()
    }
}

/// The numeric and sparse plugins on a runtime (2 threads, `fusion` on or off) that records
/// into `seen` every kernel it prepares.
pub fn recorded(fusion: bool, seen: &Seen) -> weft::Result<(Numeric, Sparse)> {
    let config = Config {
        threads: 2,
        fusion,
        ..Config::from_env()
    };
    let cpu = weft_cpu::CpuBackend::with_options(&config.cpu_options())?;
    let backend = Recording {
        inner: Box::new(cpu),
        seen: seen.clone(),
    };
    let rt = Runtime::with_backend(config, Box::new(backend))?;
    let np = Numeric::new(rt, weft_plugin_artifacts::NUMERIC)?;
    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE)?;
    Ok((np, sp))
}

/// Every example's program, small, on `np` and `sp`.
pub fn run_examples(np: &Numeric, sp: &Sparse) -> weft::Result<()> {
    let inputs = black_scholes::inputs(np, 1000, 1);
    for form in [black_scholes::Cnd::Erf, black_scholes::Cnd::Polynomial] {
        let (call, put) = inputs.price(form);
        (call.sum() + put.sum()).item()?;
    }
    let grid = stencil::initial_grid(np, 34, 2)?;
    stencil::run(&grid, 3)?;
    grid.sum().item()?;
    let (a, b) = jacobi::system(np, 40, 3);
    let x = jacobi::solve(&a, &b, &np.zeros(&[40], DType::F64), 3);
    jacobi::relative_residual(&a, &b, &x).item()?;
    let g = 15;
    let m = sp.poisson2d(g, DType::F64, DType::I32)?;
    let rhs = np.ones(&[g * g], DType::F64);
    krylov::cg(&m, &rhs, 1e-8, 5)?;
    krylov::bicgstab(&m, &rhs, 1e-8, 5)?;
    let mg = krylov::Multigrid::new(sp, &m, g)?;
    krylov::gmg(&m, &mg, &rhs, 1e-8, 3)?;
    let prm = cfd::Params::new(17, 3);
    let flow = cfd::initial_flow(np, &prm, 4)?;
    cfd::step(&prm, &flow)?.item()?;
    let water = swe::initial_water(np, 17);
    swe::step(&water, 0.1, 0.1)?.item()?;
    swe::mass(&water.h).item()?;
    let p = logreg::problem(np, 300, 4, 5);
    let w = logreg::step(&p, &np.zeros(&[4], DType::F64), 0.1, 300);
    w.sum().item()?;
    Ok(())
}
