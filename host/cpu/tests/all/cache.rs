//! The cache of compiled kernels is bounded and owned: it holds no more than its limits, an
//! owner that floods it evicts its own kernels first, JIT modules turn over so that old
//! machine code can be freed, and an evicted kernel compiles again and gives the same bits.

use std::sync::Arc;

use weft_runtime::testing::scale_kernel;
use weft_runtime::{Backend, Binding, CacheLimits, KernelEntry, Owner};

use weft_cpu::{CpuBackend, CpuOptions};

/// `out[i] = a[i] * factor`, named by its factor.
fn scale(factor: f64) -> Arc<KernelEntry> {
    let name = format!("t.scale_{factor}");
    Arc::new(KernelEntry::new(&name, &scale_kernel(&name, factor)).expect("valid"))
}

fn backend(limits: CacheLimits) -> CpuBackend {
    let mut b = CpuBackend::with_options(&CpuOptions {
        threads: 1,
        ..CpuOptions::default()
    })
    .expect("a CPU back end");
    b.set_code_cache_limits(limits);
    b
}

/// Runs `kernel` on `[1, 2, 3, 4]` (preparing it when it is not cached) and returns `out`.
fn run(b: &mut CpuBackend, kernel: &Arc<KernelEntry>, owner: Owner) -> Vec<f64> {
    b.prepare(kernel, owner).expect("compiles");
    let input: Vec<u8> = [1.0f64, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let a = b.alloc(32).expect("a buffer");
    let out = b.alloc(32).expect("a buffer");
    b.write(a, 0, &input).expect("writes");
    let binding = |buffer| Binding::Buffer {
        buffer,
        offset: 0,
        extents: vec![4].into(),
        strides: vec![1].into(),
        origin: vec![0].into(),
        view: vec![4].into(),
        element_size: 8,
        deferred: None,
    };
    b.launch(kernel.id(), &[binding(a), binding(out)], &[])
        .expect("runs");
    let mut bytes = vec![0u8; 32];
    b.read(out, 0, &mut bytes).expect("reads");
    b.free(a);
    b.free(out);
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn want(factor: f64) -> Vec<f64> {
    [1.0, 2.0, 3.0, 4.0].iter().map(|x| x * factor).collect()
}

#[test]
fn the_cache_stays_within_its_limits_and_evicted_kernels_compile_again() {
    let mut b = backend(CacheLimits {
        entries: 3,
        bytes: u64::MAX,
    });
    let kernels: Vec<_> = (1..=6).map(|f| scale(f64::from(f))).collect();
    for (k, f) in kernels.iter().zip(1..) {
        assert_eq!(run(&mut b, k, Owner(0)), want(f64::from(f)));
        assert!(b.code_cache_stats().entries <= 3);
    }
    assert_eq!(b.code_cache_stats().evictions, 3);
    assert!(!b.is_prepared(&kernels[0]), "the oldest went first");
    // Evicted ones compile again, with the same results.
    for (k, f) in kernels.iter().zip(1..) {
        assert_eq!(run(&mut b, k, Owner(0)), want(f64::from(f)));
    }
    // A byte limit bounds the machine code held.
    let mut b = backend(CacheLimits {
        entries: 100,
        bytes: 1,
    });
    for (k, f) in kernels.iter().zip(1..) {
        assert_eq!(run(&mut b, k, Owner(0)), want(f64::from(f)));
        assert_eq!(b.code_cache_stats().entries, 1);
    }
}

#[test]
fn an_owner_that_floods_the_cache_evicts_its_own_kernels_first() {
    let mut b = backend(CacheLimits {
        entries: 8,
        bytes: u64::MAX,
    });
    let quiet: Vec<_> = (1..=2).map(|f| scale(f64::from(f))).collect();
    for k in &quiet {
        run(&mut b, k, Owner(1));
    }
    for f in 100..140 {
        run(&mut b, &scale(f64::from(f)), Owner(2));
    }
    for k in &quiet {
        assert!(b.is_prepared(k), "the quiet owner keeps {}", k.name());
    }
    assert_eq!(b.code_cache_stats().entries, 8);
}

#[test]
fn jit_modules_turn_over_and_the_old_ones_kernels_leave_the_cache() {
    let mut b = backend(CacheLimits {
        entries: 1000,
        bytes: u64::MAX,
    });
    // Every module is full after one kernel: each compile starts a fresh module.
    b.compiler().set_module_code_bytes(1);
    let kernels: Vec<_> = (1..=5).map(|f| scale(f64::from(f))).collect();
    for (k, f) in kernels.iter().zip(1..) {
        assert_eq!(run(&mut b, k, Owner(0)), want(f64::from(f)));
        assert!(
            b.code_cache_stats().entries <= 2,
            "kernels of the current and the previous module only: {:?}",
            b.code_cache_stats()
        );
    }
    assert!(b.compiler().generation() >= 4);
    for (k, f) in kernels.iter().zip(1..) {
        assert_eq!(run(&mut b, k, Owner(0)), want(f64::from(f)));
    }
}
