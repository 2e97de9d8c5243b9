//! Choosing the code path of vectorized loops (`WEFT_SIMD`): every path this CPU lists
//! compiles for itself, one it cannot run (`avx2` until its bodies exist, `avx512` without
//! AVX-512) is an error naming what it can, and an element-wise loop gives the same bits on
//! every available path.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CpuBackend, CpuOptions, SimdPath};
use weft_ir::{DType, Privilege, UnaryOp};

#[test]
fn available_paths_are_set_and_others_are_refused_with_the_reason() {
    let mut be = CpuBackend::new().unwrap();
    let available = be.compiler().available_paths();
    assert_eq!(available[0], SimdPath::Scalar);
    assert!(
        available.contains(&SimdPath::Sse),
        "x86-64 always has 128-bit vectors"
    );
    for path in SimdPath::ALL {
        let set = be.compiler().set_path(path);
        if available.contains(&path) {
            set.unwrap();
            assert_eq!(be.compiler().path(), path);
            assert_eq!(be.simd(), path != SimdPath::Scalar);
            assert_eq!(be.avx512(), path == SimdPath::Avx512);
        } else {
            let e = set.unwrap_err().to_string();
            let why = match path {
                SimdPath::Avx2 => "not built yet",
                _ => "this CPU does not have it",
            };
            assert!(e.contains(path.name()) && e.contains(why), "{e}");
            assert!(e.contains("scalar, sse"), "{e}");
        }
    }
    // The same through the options a back end starts with.
    let refused = CpuBackend::with_options(&CpuOptions {
        simd: Some(SimdPath::Avx2),
        ..CpuOptions::default()
    });
    assert!(refused.is_err());
    let scalar = CpuBackend::with_options(&CpuOptions {
        simd: Some(SimdPath::Scalar),
        ..CpuOptions::default()
    })
    .unwrap();
    assert!(!scalar.simd());
}

#[test]
fn an_element_wise_loop_has_the_same_bits_on_every_available_path() {
    // out = sqrt(a) * a - a, over 1003 elements with signed zeros and a NaN.
    let mut k = weft_ir::builder::KernelBuilder::new("paths");
    let a = k.store(DType::F64, 1, Privilege::Read);
    let out = k.store(DType::F64, 1, Privilege::Write);
    k.parallel(out, |b, i| {
        let x = b.load(a, i);
        let y = b.sub(b.mul(b.unary(UnaryOp::Sqrt, x), x), x);
        b.store(out, i, y);
    });
    let kernel = k.finish_validated().unwrap();
    let n = 1003usize;
    let input: Vec<f64> = (0..n)
        .map(|i| match i % 7 {
            0 => -0.0,
            1 => f64::NAN,
            _ => i as f64 * 0.37,
        })
        .collect();
    let mut results = Vec::new();
    let mut be = CpuBackend::new().unwrap();
    for path in be.compiler().available_paths() {
        be.compiler().set_path(path).unwrap();
        let compiled = be.compile(&kernel).unwrap();
        let vector_loops = usize::from(path != SimdPath::Scalar);
        assert_eq!(compiled.vectorized_loops(), vector_loops, "{path}");
        let mut av = input.clone();
        let mut o = vec![0.0f64; n];
        run_on(
            &compiled,
            &[dense(&mut av, &[n as i64]), dense(&mut o, &[n as i64])],
            &[],
            2,
        )
        .unwrap();
        results.push((
            path,
            o.iter().map(|v: &f64| v.to_bits()).collect::<Vec<_>>(),
        ));
    }
    for (path, bits) in &results[1..] {
        assert_eq!(bits, &results[0].1, "{path} against scalar");
    }
}
