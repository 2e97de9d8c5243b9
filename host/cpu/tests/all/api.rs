//! The back end's API: kernels outlive their backend, run concurrently, and one backend
//! compiles many kernels.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CompiledKernel, CpuBackend};
use weft_ir::{DType, Privilege, Scalar};

fn scale(name: &str) -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    let a = kb.scalar(DType::F64);
    let av = kb.param(a);
    kb.parallel(y, 1, |kb, i| {
        let v = kb.load(x, &[i[0]]);
        let v = kb.mul(v, av);
        kb.store_to(y, &[i[0]], v);
    });
    kb.finish(name)
}

fn check_scale(k: &CompiledKernel, factor: f64, threads: usize) {
    let n = 70_000usize;
    let mut x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut y = vec![0.0; n];
    run_on(
        k,
        &[dense(&mut x, &[n as i64]), dense(&mut y, &[n as i64])],
        &[Scalar::F64(factor)],
        threads,
    )
    .unwrap();
    assert!(y.iter().enumerate().all(|(i, &v)| v == i as f64 * factor));
}

#[test]
fn kernels_outlive_their_backend() {
    let k = {
        let mut be = CpuBackend::new().unwrap();
        be.compile(&scale("api.scale")).unwrap()
    };
    assert_eq!(k.name(), "api.scale");
    assert!(k.compile_time().as_nanos() > 0);
    assert_eq!(k.parallel_loops(), 1);
    check_scale(&k, 3.0, 2);
}

#[test]
fn one_kernel_runs_on_many_threads_at_once() {
    let k = compile(&scale("api.shared"));
    std::thread::scope(|s| {
        for t in 0..4 {
            let k = k.clone();
            s.spawn(move || {
                for r in 0..5 {
                    check_scale(&k, f64::from(t * 10 + r), 1 + (t as usize % 2));
                }
            });
        }
    });
}

#[test]
fn one_backend_compiles_many_kernels() {
    let mut be = CpuBackend::new().unwrap();
    let ks: Vec<CompiledKernel> = (0..100)
        .map(|i| be.compile(&scale(&format!("api.k{i}"))).unwrap())
        .collect();
    for (i, k) in ks.iter().enumerate().step_by(17) {
        assert_eq!(k.name(), format!("api.k{i}"));
        check_scale(k, i as f64, 1);
    }
}
