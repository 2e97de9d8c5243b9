//! The GPU back end against the CPU's bits: the same programs run on the simulated GPU
//! (`Device::Sim`) and, where an NVIDIA driver is, on the GPU (`Device::Gpu`), and every
//! result must be the CPU's bits
//! (element-wise arithmetic, the canonical reduction order, CSR rows in order). Where none is,
//! the GPU runtime must refuse to start with an error naming the missing driver library, and
//! the host must keep running.

use weft::{Array, Config, Device, Numeric, Runtime, Sparse};
use weft_examples::{black_scholes, krylov, logreg, stencil};
use weft_ir::DType;

fn plugins(device: Device) -> weft::Result<(Numeric, Sparse)> {
    let config = Config {
        device,
        threads: 2,
        ..Config::from_env()
    };
    let np = Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE)?;
    Ok((np, sp))
}

/// The bits of every result of a set of programs on one device.
fn results(device: Device) -> weft::Result<Vec<(String, Vec<u64>)>> {
    let (np, sp) = plugins(device)?;
    let bits = |a: &Array| -> weft::Result<Vec<u64>> {
        Ok(a.to_vec()?.iter().map(|v: &f64| v.to_bits()).collect())
    };
    let mut out = Vec::new();
    let x = np.random_uniform(&[10_001], -1.0, 1.0, 7, DType::F64);
    let y = np.random_uniform(&[10_001], -1.0, 1.0, 8, DType::F64);
    out.push(("dot".to_string(), bits(&x.dot(&y))?));
    out.push(("sum".to_string(), bits(&(&x * &y).sum())?));
    // The inverse trigonometric and hyperbolic functions, fused into one kernel.
    let angles = &(&x.arcsin() + &x.arccos()) * &y.arctan2(&x);
    let hyperbolic = &(&(&x * 30.0).sinh() - &(&y * 3.0).cosh()).arcsinh()
        + &(&(&y * 5.0).abs() + 1.0).arccosh();
    out.push(("inverse trigonometric".to_string(), bits(&angles)?));
    out.push(("hyperbolic".to_string(), bits(&hyperbolic)?));
    out.push((
        "arctanh, arctan".to_string(),
        bits(&(&x.arctanh() - &y.arctan()))?,
    ));
    // NumPy's bitwise operators on integers, arithmetic right shifts of negatives included.
    let xi = (&x * 1e6).astype(DType::I64);
    let yi = (&y * 40.0).abs().astype(DType::I64);
    let mixed = &(&(&(&xi & 0xffff) ^ &(&xi << &yi)) >> &yi) | &!&xi;
    out.push(("bitwise".to_string(), bits(&mixed.astype(DType::F64))?));
    // Scatters: a histogram's weighted sums (one walk a block), repeated positions added and
    // stored in order, counts into bins.
    let (hist, _) = x.histogram(37, None, Some(&y))?;
    out.push(("histogram".to_string(), bits(&hist)?));
    let positions = (&x * 20.0).abs().astype(DType::I64);
    let target = np.zeros(&[21], DType::F64);
    target.add_at(&positions, &y)?;
    out.push(("add_at".to_string(), bits(&target)?));
    let grid = np.zeros(&[3, 7], DType::F64);
    grid.assign_at(&[&(&positions % 3i64), &(&positions % 7i64)], &x)?;
    out.push(("assign_at".to_string(), bits(&grid)?));
    let counts = positions.bincount(None, 0)?.astype(DType::F64);
    out.push(("bincount".to_string(), bits(&counts)?));
    // Sorting: the merge passes (with halvings of the merge path once a pair of runs is longer
    // than a chunk of 4,096 outputs) and
    // the run starts of `unique`.
    let ties = (&x * 50.0).floor();
    out.push(("sort".to_string(), bits(&ties.sort(None)?)?));
    out.push((
        "argsort".to_string(),
        bits(&ties.argsort(Some(0))?.astype(DType::F64))?,
    ));
    let (values, counts) = ties.unique_counts()?;
    out.push(("unique".to_string(), bits(&values)?));
    out.push((
        "unique counts".to_string(),
        bits(&counts.astype(DType::F64))?,
    ));
    let inputs = black_scholes::inputs(&np, 5000, 1);
    let (call, put) = inputs.price(black_scholes::Cnd::Erf);
    out.push(("black-scholes call".to_string(), bits(&call)?));
    out.push(("black-scholes put".to_string(), bits(&put)?));
    let grid = stencil::initial_grid(&np, 66, 2)?;
    stencil::run(&grid, 4)?;
    out.push(("stencil".to_string(), bits(&grid)?));
    // The top row changes between sweeps: a sweep that stored into a stale copy of the grid
    // (the GPU's swapped buffers) would carry an old boundary.
    let moving = stencil::initial_grid(&np, 40, 5)?;
    let s = stencil::Stencil::new(&moving);
    for k in 0..5 {
        moving
            .slice(&[weft::Range::new(0, 1), weft::Range::all()])
            .assign(1.0 + k as f64)?;
        s.step()?;
    }
    out.push(("stencil, moving boundary".to_string(), bits(&moving)?));
    let m = sp.poisson2d(20, DType::F64, DType::I32)?;
    let rhs = np.ones(&[400], DType::F64);
    let cg = krylov::cg(&m, &rhs, 1e-12, 8)?;
    out.push(("cg x".to_string(), bits(&cg.x)?));
    out.push((
        "cg residuals".to_string(),
        cg.residuals.iter().map(|r| r.to_bits()).collect(),
    ));
    let p = logreg::problem(&np, 5000, 4, 5);
    let w = logreg::step(&p, &np.zeros(&[4], DType::F64), 0.1, 5000);
    out.push(("logreg step".to_string(), bits(&w)?));
    Ok(out)
}

/// Every difference between the CPU's results and `other`'s, listed.
fn differences(cpu: &[(String, Vec<u64>)], other: &[(String, Vec<u64>)]) -> Vec<String> {
    let mut out = Vec::new();
    if cpu.len() != other.len() {
        out.push(format!("{} results against {}", other.len(), cpu.len()));
    }
    for ((name, want), (_, got)) in cpu.iter().zip(other) {
        if got.len() != want.len() {
            out.push(format!(
                "{name}: {} elements against {}",
                got.len(),
                want.len()
            ));
            continue;
        }
        let differ = got.iter().zip(want).filter(|(a, b)| a != b).count();
        if differ > 0 {
            out.push(format!(
                "{name}: {differ} of {} elements differ",
                want.len()
            ));
        }
    }
    out
}

/// The GPU back end on the simulated GPU (its PTX run as a GPU would) gives the CPU's bits.
#[test]
fn the_simulated_gpu_gives_the_cpu_bits() {
    let cpu = results(Device::Cpu).expect("the CPU runs the programs");
    let sim = results(Device::Sim).expect("the simulated GPU runs the programs");
    let differ = differences(&cpu, &sim);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn gpu_results_are_the_cpu_bits_or_the_gpu_names_its_missing_driver() {
    if !weft_ptx::driver::present() {
        match Runtime::new(Config {
            device: Device::Gpu,
            ..Config::from_env()
        }) {
            Err(weft::Error::Device(message)) => {
                assert!(message.contains("libcuda.so.1"), "{message}")
            }
            Err(e) => panic!("the wrong error without a driver: {e}"),
            Ok(_) => panic!("a GPU runtime started without a driver"),
        }
        // The host keeps running: the CPU still works.
        let cpu = results(Device::Cpu).expect("the CPU runs the programs");
        assert_eq!(cpu.len(), 21);
        return;
    }
    let cpu = results(Device::Cpu).expect("the CPU runs the programs");
    let gpu = results(Device::Gpu).expect("the GPU runs the programs");
    let differ = differences(&cpu, &gpu);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// On the GPU back end a flush only enqueues the launches: a failed index check on the
/// device shows at [`Runtime::synchronize`] (which a benchmark calls before it stops its
/// clock), naming the operation, and the runtime keeps working.
#[test]
fn a_flush_enqueues_and_synchronize_waits_for_the_device() {
    let (np, _) = plugins(Device::Sim).expect("the simulated GPU starts");
    let n = 60u64;
    let x = np.arange(0.0, n as f64, 1.0, DType::F64);
    let positions: Vec<f64> = (0..n)
        .map(|i| if i == n - 1 { 1e6 } else { i as f64 })
        .collect();
    let indices = np.from_vec(&[n], &positions).astype(DType::I64);
    let taken = x.take(&indices, None);
    np.runtime(|rt| rt.flush())
        .expect("the flush enqueues the gather without waiting for it");
    let e = np
        .runtime(|rt| rt.synchronize())
        .expect_err("the device's index check failed");
    assert!(e.to_string().contains("take"), "{e}");
    drop(taken);
    let y = np.arange(0.0, 4.0, 1.0, DType::F64);
    assert_eq!((&y * &y).sum().to_vec().expect("reads"), vec![14.0]);
}
