//! The indices a `for` loop's range check proves (`for_proven` in `weft-cpu`'s `lower.rs`)
//! must not outlive the copy of the loop nest that checked them.
//!
//! A parallel loop with a `for` loop inside is compiled as up to three copies of its loop nest
//! in one function (every origin the body reads zero; unit innermost strides; any strides),
//! and on the vector paths the first two run their points several at a time where the loop
//! jams (`lower::jam`). Here the loop's own `for` loop carries one `f64` (no lanes: it runs
//! as scalar code, whose range check of `x[j]` before the loop records `x`'s dimension 0 as
//! proven for the induction value), while the jammed loop carries one per point (lanes, whose
//! scalar part loads `x[j]` for all of them and checks nothing of its own). The zero-origin
//! copy is lowered first, its remainder points by the scalar loop; the unit-stride copy's
//! jammed loop comes after it in the same function. The launch has two points, so point 1's
//! origin is not zero and it runs the unit-stride copy: with `n` past `x`'s extent, its loads
//! of `x[j]` must fault as the interpreter's do, not read past the buffer.

use std::sync::Arc;

use weft_ir::{DType, Scalar};
use weft_runtime::testing::FakeBackend;
use weft_runtime::{
    Core, IndexTask, KernelEntry, NoFusion, Partition, PluginId, Settings, StoreId, TaskArg, Tiling,
};

const KERNEL: &str = "kernel @proven(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>, %arg3: i64) {
  %0 = param %arg3
  %1 = const i64 0
  %2 = const f64 0.5
  %15 = const i64 1000
  parallel %arg2 (%3) {
    %4 = load %arg1[%3]
    %11 = origin %arg2, 0
    %16 = mul %11, %15
    %17 = add %0, %16
    %5 = for %6 = %1 to %17 iter(%7 = %4) {
      %8 = load %arg0[%6]
      %9 = mul %7, %2
      %10 = add %9, %8
      yield %10
    }
    %12 = cast f64 %11
    %13 = mul %12, %2
    %14 = add %5, %13
    store %arg2[%3], %14
  }
}";

fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs the kernel with `n` iterations over `x` of `x_len` elements, on `rows` points of
/// `out` in tiles of `tile`; the output's bytes, or the error.
fn run(
    core: &mut Core,
    kernel: &Arc<KernelEntry>,
    n: i64,
    x_len: usize,
) -> Result<Vec<u8>, String> {
    let rows = 16;
    let x: Vec<f64> = (0..x_len).map(|k| k as f64 + 0.25).collect();
    let y: Vec<f64> = (0..rows).map(|k| 2.0 * k as f64).collect();
    let mk = |core: &mut Core, v: &[f64]| -> StoreId {
        core.store_from_bytes(vec![v.len() as u64], DType::F64, &f64_bytes(v))
            .expect("small stores are made")
    };
    let (xs, ys) = (mk(core, &x), mk(core, &y));
    let out = core
        .create_store(vec![rows as u64], DType::F64)
        .expect("small stores are made");
    let task = IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![2],
        vec![
            TaskArg::new(xs, Partition::None, weft_ir::Privilege::Read),
            TaskArg::new(ys, Partition::None, weft_ir::Privilege::Read),
            TaskArg::new(
                out,
                Partition::Tiling(Tiling {
                    tile: weft_runtime::smallvec::smallvec![rows as u64 / 2],
                    offset: weft_runtime::smallvec::smallvec![0],
                    projection: weft_runtime::smallvec::smallvec![Some(0)],
                    skew: None,
                }),
                weft_ir::Privilege::Write,
            ),
        ],
        vec![Scalar::I64(n)],
    );
    let result = core
        .submit(task)
        .and_then(|()| core.flush())
        .and_then(|()| core.read_bytes(out))
        .map_err(|e| e.to_string());
    for s in [xs, ys, out] {
        core.release(s);
    }
    let _ = core.flush();
    result
}

/// The same loop without the origin: there is no zero-origin copy, so the unit-stride copy's
/// jammed loop is the first lowering of the `for` loop in its function.
const CONTROL: &str = "kernel @control(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>, %arg3: i64) {
  %0 = param %arg3
  %1 = const i64 0
  %2 = const f64 0.5
  parallel %arg2 (%3) {
    %4 = load %arg1[%3]
    %5 = for %6 = %1 to %0 iter(%7 = %4) {
      %8 = load %arg0[%6]
      %9 = mul %7, %2
      %10 = add %9, %8
      yield %10
    }
    store %arg2[%3], %5
  }
}";

#[test]
fn a_jammed_lane_loop_lowered_first_checks_its_range() {
    compare(CONTROL);
}

/// Failed (a read past `x`'s buffer: SIGSEGV between guard pages) while `for_proven`
/// outlived the zero-origin copy of the loop nest (found by the `kernel_write` target); see the
/// module documentation. `lower_for` now forgets what a loop proved once it is lowered.
#[test]
fn a_jammed_lane_loop_after_a_scalar_copy_checks_its_range() {
    compare(KERNEL);
}

/// Runs `src` on the interpreter and on every SIMD path, in bounds and out of bounds, and
/// requires the same bits or a fault in both.
fn compare(src: &str) {
    let ir = weft_ir::text::parse(src).expect("the kernel parses");
    let kernel = Arc::new(KernelEntry::new("proven", &ir).expect("the kernel is valid"));
    let mut interpreted = Core::new(
        Settings::default(),
        Box::new(FakeBackend::default()),
        Box::new(NoFusion),
    );
    for path in weft_cpu::SimdPath::ALL.into_iter().filter(|p| p.detected()) {
        let options = weft_cpu::CpuOptions {
            threads: 1,
            pool_bytes: 0,
            guard_pages: true,
            simd: Some(path),
            ..weft_cpu::CpuOptions::default()
        };
        let mut backend =
            weft_cpu::CpuBackend::with_options(&options).expect("the back end starts");
        let compiled = backend.compile(&ir).expect("the kernel compiles");
        eprintln!(
            "{path}: {} jammed, {} lane loops, {} paired",
            compiled.jammed_loops(),
            compiled.lane_loops(),
            compiled.paired_loops()
        );
        let mut core = Core::new(Settings::default(), Box::new(backend), Box::new(NoFusion));
        // In bounds, out of bounds by one, and far out (past the guard page's reach).
        for (n, x_len) in [(6, 6), (7, 6), (5000, 6), (0, 0), (3, 0)] {
            let want = run(&mut interpreted, &kernel, n, x_len);
            let got = run(&mut core, &kernel, n, x_len);
            eprintln!(
                "  n {n}, x of {x_len}: compiled {:?}, interpreted {:?}",
                got.as_ref().map(|_| "ok"),
                want.as_ref().map(|_| "ok")
            );
            match (&got, &want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{path}: n {n}, x of {x_len}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{path}: n {n}, x of {x_len}: compiled {got:?}, interpreted {want:?}"),
            }
        }
    }
}
