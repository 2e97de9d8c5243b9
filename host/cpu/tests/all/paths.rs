//! Choosing the code path of vectorized loops (`WEFT_SIMD`): every path this CPU lists
//! compiles for itself, the wide paths are listed exactly when the CPU has their instructions,
//! one it cannot run is an error naming what it can, and an element-wise loop gives the same
//! bits on every available path.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CpuBackend, CpuOptions, SimdPath};
use weft_ir::{DType, Privilege, UnaryOp};

/// Whether the CPU has what a wide path needs, asked of the standard library directly.
/// (The back end runs wide bodies on x86-64 Unix only.)
fn cpu_has(path: SimdPath) -> bool {
    #[cfg(all(target_arch = "x86_64", unix))]
    let (avx2, avx512) = (
        std::is_x86_feature_detected!("avx2"),
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq"),
    );
    #[cfg(not(all(target_arch = "x86_64", unix)))]
    let (avx2, avx512) = (false, false);
    match path {
        SimdPath::Scalar | SimdPath::Sse => true,
        SimdPath::Avx2 => avx2,
        SimdPath::Avx512 => avx512,
    }
}

#[test]
fn available_paths_are_set_and_others_are_refused_with_the_reason() {
    let mut be = CpuBackend::new().unwrap();
    let available = be.compiler().available_paths();
    assert_eq!(available[0], SimdPath::Scalar);
    assert!(
        available.contains(&SimdPath::Sse),
        "x86-64 always has 128-bit vectors"
    );
    // The default is the widest.
    assert_eq!(be.compiler().path(), *available.last().unwrap());
    for path in SimdPath::ALL {
        assert_eq!(available.contains(&path), cpu_has(path), "{path}");
        assert_eq!(path.detected(), cpu_has(path), "{path}");
        let set = be.compiler().set_path(path);
        if available.contains(&path) {
            set.unwrap();
            assert_eq!(be.compiler().path(), path);
            assert_eq!(be.simd(), path != SimdPath::Scalar);
            assert_eq!(be.avx2(), path == SimdPath::Avx2);
            assert_eq!(be.avx512(), path == SimdPath::Avx512);
        } else {
            let e = set.unwrap_err().to_string();
            assert!(
                e.contains(path.name()) && e.contains("this CPU does not have it"),
                "{e}"
            );
            assert!(e.contains("scalar, sse"), "{e}");
        }
        // The same through the options a back end starts with.
        let options = CpuOptions {
            simd: Some(path),
            ..CpuOptions::default()
        };
        match CpuBackend::with_options(&options) {
            Ok(mut b) => {
                assert!(available.contains(&path), "{path}");
                assert_eq!(b.compiler().path(), path);
            }
            Err(e) => assert!(!available.contains(&path), "{path}: {e}"),
        }
    }
    let scalar = CpuBackend::with_options(&CpuOptions {
        simd: Some(SimdPath::Scalar),
        ..CpuOptions::default()
    })
    .unwrap();
    assert!(!scalar.simd());
}

/// `set_avx2` and `set_avx512` turn their own bodies on and off, and only where the CPU has
/// them; off leaves 128-bit vectors.
#[test]
fn wide_bodies_are_turned_on_and_off_one_instruction_set_at_a_time() {
    let mut be = CpuBackend::new().unwrap();
    be.compiler().set_path(SimdPath::Sse).unwrap();
    be.set_avx2(true);
    assert_eq!(be.avx2(), cpu_has(SimdPath::Avx2));
    be.set_avx512(false);
    assert_eq!(be.avx2(), cpu_has(SimdPath::Avx2), "AVX2 stays on");
    be.set_avx512(true);
    assert_eq!(be.avx512(), cpu_has(SimdPath::Avx512));
    be.set_avx2(false);
    be.set_avx512(false);
    assert_eq!(be.compiler().path(), SimdPath::Sse);
    // Never without the vector lowering.
    be.set_simd(false);
    be.set_avx2(true);
    assert!(!be.avx2() && !be.avx512());
    assert_eq!(be.compiler().path(), SimdPath::Scalar);
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
        assert_eq!(compiled.avx2_loops(), usize::from(path == SimdPath::Avx2));
        assert_eq!(
            compiled.avx512_loops(),
            usize::from(path == SimdPath::Avx512)
        );
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
