//! What the host does with a kernel's loads, as the guide's section on neighbours states it,
//! on the CPU back end that runs plugins' kernels: every load runs where the kernel has it and
//! its indices are checked (unless proven in bounds), so `select` does not spare the load of
//! the arm it does not pick, and a load whose value nothing uses still faults when it is out
//! of bounds in a kernel run as its plugin wrote it. The fusion passes delete loads whose
//! values nothing uses, so in a fused kernel such a load may not run at all. Clamping the
//! index is what keeps a neighbour's load in bounds.

use weft_cpu::{CpuBackend, StoreView};
use weft_sdk::KernelDef;
use weft_sdk::ir::passes::pipeline::{FusionFacts, optimize};
use weft_sdk::ir::{Inst, Op};

weft_sdk::kernel! {
    /// `out[i] = i + 1 < n ? x[i + 1] : 0`, the load unguarded: it runs for the last `i` too.
    struct NextOrZero {}
    stores { x: (F64, 1, Read), out: (F64, 1, Write) }
    parallel(out, |b, i| {
        let next = b.add(i[0], b.const_i64(1));
        let inside = b.lt(next, b.extent(x, 0));
        b.store(out, i, b.select(inside, b.load(x, &[next]), b.const_f64(0.0)));
    })
}

weft_sdk::kernel! {
    /// The same, the index clamped into `x` before the load, and the value selected after.
    struct NextOrZeroClamped {}
    stores { x: (F64, 1, Read), out: (F64, 1, Write) }
    parallel(out, |b, i| {
        let next = b.add(i[0], b.const_i64(1));
        let inside = b.lt(next, b.extent(x, 0));
        let last = b.sub(b.extent(x, 0), b.const_i64(1));
        let v = b.load(x, &[b.min(next, last)]);
        b.store(out, i, b.select(inside, v, b.const_f64(0.0)));
    })
}

weft_sdk::kernel! {
    /// `out[i] = x[i]`, beside a load of `x[i + 1]` whose value nothing uses.
    struct CopyBesideAnUnusedLoad {}
    stores { x: (F64, 1, Read), out: (F64, 1, Write) }
    parallel(out, |b, i| {
        let _unused = b.load(x, &[b.add(i[0], b.const_i64(1))]);
        b.store(out, i, b.load(x, i));
    })
}

/// Runs `kernel` on the CPU back end over `x` and an output of its length, as one point task
/// that sees both whole: the output, or the fault's message.
fn run(kernel: &weft_sdk::ir::Kernel, x: &[f64]) -> Result<Vec<f64>, String> {
    let compiled = CpuBackend::new()
        .and_then(|mut cpu| cpu.compile(kernel))
        .map_err(|e| format!("compiling: {e}"))?;
    let mut x = x.to_vec();
    let mut out = vec![f64::NAN; x.len()];
    let n = [x.len() as i64];
    let views = [
        StoreView::dense(x.as_mut_ptr().cast(), &n),
        StoreView::dense(out.as_mut_ptr().cast(), &n),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| e.to_string())?;
    // SAFETY: each view is a live buffer of `n` f64s, which only this call touches.
    unsafe { compiled.run(&views, &[], &pool) }.map_err(|e| e.to_string())?;
    Ok(out)
}

fn loads(kernel: &weft_sdk::ir::Kernel) -> usize {
    fn count(body: &[Inst]) -> usize {
        body.iter()
            .map(|inst| match &inst.op {
                Op::Load(_) => 1,
                Op::Parallel(p) => count(&p.body),
                Op::For(f) => count(&f.body),
                _ => 0,
            })
            .sum()
    }
    count(&kernel.body)
}

const X: [f64; 4] = [1.0, 2.0, 3.0, 4.0];

#[test]
fn select_does_not_spare_the_load_of_the_arm_it_does_not_pick() {
    let kernel = NextOrZero {}.kernel().expect("a valid kernel");
    let e = run(&kernel, &X).expect_err("x[4] is out of bounds");
    assert!(
        e.contains("next_or_zero") && e.contains("out of bounds"),
        "{e}"
    );
}

#[test]
fn a_clamped_index_keeps_the_load_in_bounds_and_select_pads() {
    let kernel = NextOrZeroClamped {}.kernel().expect("a valid kernel");
    assert_eq!(run(&kernel, &X), Ok(vec![2.0, 3.0, 4.0, 0.0]));
}

#[test]
fn an_unused_load_faults_as_written_and_vanishes_when_the_passes_run() {
    let kernel = CopyBesideAnUnusedLoad {}.kernel().expect("a valid kernel");
    assert_eq!(loads(&kernel), 2);
    let e = run(&kernel, &X).expect_err("x[4] is out of bounds, though unused");
    assert!(e.contains("out of bounds"), "{e}");
    // The passes a fused kernel goes through delete the unused load.
    let optimized = optimize(&kernel, &FusionFacts::distinct(&kernel)).kernel;
    assert_eq!(loads(&optimized), 1);
    assert_eq!(run(&optimized, &X), Ok(X.to_vec()));
}
