//! Compile time and a rough throughput figure (printed; run with `--nocapture` to see them).

#![allow(clippy::unwrap_used)]

mod cpu_util;

use std::time::{Duration, Instant};

use cpu_util::*;
use weft_host::cpu::CpuBackend;
use weft_ir::{DType, Privilege, ReduceOp, Scalar};

fn axpy(name: &str) -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::ReadWrite);
    let a = kb.scalar(DType::F64);
    let av = kb.param(a);
    kb.parallel(y, 1, |kb, i| {
        let xv = kb.load(x, &[i[0]]);
        let yv = kb.load(y, &[i[0]]);
        let p = kb.mul(av, xv);
        let s = kb.add(p, yv);
        kb.store_to(y, &[i[0]], s);
    });
    kb.finish(name)
}

fn dot() -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Read);
    let s = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(x, 1, |kb, i| {
        let a = kb.load(x, &[i[0]]);
        let b = kb.load(y, &[i[0]]);
        let p = kb.mul(a, b);
        kb.reduce(s, &[], ReduceOp::Sum, p);
    });
    kb.finish("perf.dot")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn compile_time_of_a_simple_kernel() {
    let mut be = CpuBackend::new().unwrap();
    let first = be.compile(&axpy("perf.axpy.0")).unwrap().compile_time();
    let times: Vec<Duration> = (1..=50)
        .map(|i| {
            be.compile(&axpy(&format!("perf.axpy.{i}")))
                .unwrap()
                .compile_time()
        })
        .collect();
    let m = median(times);
    let d = be.compile(&dot()).unwrap().compile_time();
    println!("compile time: axpy first {first:?}, axpy median of 50 {m:?}, dot {d:?}");
    assert!(m < Duration::from_millis(50), "compile took {m:?}");
}

#[test]
fn throughput_of_axpy_and_dot() {
    let mut be = CpuBackend::new().unwrap();
    let ax = be.compile(&axpy("perf.axpy")).unwrap();
    let dt = be.compile(&dot()).unwrap();
    let n = 1 << 16; // in cache
    let mut x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut y = vec![1.0; n];
    let pool = pool(1);
    let reps = 2000;
    let t = Instant::now();
    for _ in 0..reps {
        let views = [dense(&mut x, &[n as i64]), dense(&mut y, &[n as i64])];
        // SAFETY: the views cover live buffers.
        unsafe { ax.run(&views, &[Scalar::F64(1e-9)], &pool) }.unwrap();
    }
    let axpy_ns = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
    let mut s = 0.0f64;
    let t = Instant::now();
    for _ in 0..reps {
        let views = [
            dense(&mut x, &[n as i64]),
            dense(&mut y, &[n as i64]),
            scalar_view(&mut s),
        ];
        // SAFETY: as above.
        unsafe { dt.run(&views, &[], &pool) }.unwrap();
    }
    let dot_ns = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
    println!("1 thread, 2^16 f64 in cache: axpy {axpy_ns:.3} ns/elem, dot {dot_ns:.3} ns/elem");
    assert!(s.is_finite());
}
