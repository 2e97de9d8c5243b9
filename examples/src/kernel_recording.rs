//! Every kernel a set of programs makes, recorded as the runtime prepares it: the CPU back end
//! observed (`weft_runtime::Observed`), each kernel's IR kept, so that the PTX
//! emitter can be checked (`tests/tests/all/ptx_modules.rs`) and timed (`bench_ptx`) on the
//! kernels the examples really make, fused and unfused, on machines without a GPU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use weft::{Config, Numeric, RowOrder, Runtime, Sparse};
use weft_ir::{DType, ValidKernel};
use weft_runtime::Observed;

use crate::{black_scholes, cfd, jacobi, krylov, logreg, stencil, swe};

/// The kernels recorded so far, by name: each one's validated IR, as back ends receive it.
pub type Seen = Arc<Mutex<BTreeMap<String, ValidKernel>>>;

/// The numeric and sparse plugins on a runtime (2 threads, `fusion` on or off) that records
/// into `seen` every kernel it prepares.
pub fn recorded(fusion: bool, seen: &Seen) -> weft::Result<(Numeric, Sparse)> {
    let config = Config {
        threads: 2,
        fusion,
        ..Config::from_env()
    };
    let cpu = weft_cpu::CpuBackend::with_options(&config.cpu_options())?;
    let seen = seen.clone();
    let backend = Observed::new(
        Box::new(cpu),
        Box::new(move |kernel| {
            if let Ok(mut seen) = seen.lock() {
                seen.insert(kernel.name().to_string(), kernel.ir().clone());
            }
            Ok(())
        }),
    );
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
    // Diagonal scaling on both sides and the sums over each axis.
    let scaled = m.scale_rows(&rhs)?.scale_columns(&(&rhs * 0.5))?;
    (scaled.sum(Some(0))?.sum() + scaled.sum(Some(1))?.sum()).item()?;
    let mg = krylov::Multigrid::new(sp, &m, g)?;
    krylov::gmg(&m, &mg, &rhs, 1e-8, 3)?;
    // A product in the lane order (`spmv.lanes`), rows of 600 entries.
    let (rows, len) = (3u64, 600u64);
    let at: Vec<u64> = (0..rows * len).collect();
    let r: Vec<u64> = at.iter().map(|k| k / len).collect();
    let c: Vec<u64> = at.iter().map(|k| (k * 7) % len).collect();
    let v: Vec<f64> = at.iter().map(|&k| 1.0 / (1.0 + k as f64)).collect();
    let long = sp
        .from_triplets((rows, len), (&r, &c, &v), DType::F64, DType::I64)?
        .with_row_order(RowOrder::Lanes);
    long.matvec(&np.ones(&[len], DType::F64)).sum().item()?;
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
