//! The cache of compiled functions on disk: a second compiler (as a later process would)
//! compiles nothing that the first compiled, on every SIMD path, and the code it takes from the
//! cache reads its own constants and its own cancel flag, not the first compiler's.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::atomic::Ordering;

use crate::util::*;
use weft_cpu::{Compiler, FunctionCache, SimdPath};
use weft_ir::{DType, Kernel, Privilege, Scalar};

/// `out[i, j] = a[i, j] * 2.5 + 1.25`: constants that vector code keeps in tables.
fn affine() -> Kernel {
    let mut k = Kb::new();
    let a = k.store(DType::F64, 2, Privilege::Read);
    let out = k.store(DType::F64, 2, Privilege::Write);
    k.parallel(out, 2, |k, ix| {
        let x = k.load(a, ix);
        let (m, c) = (k.f64(2.5), k.f64(1.25));
        let y = k.mul(x, m);
        let y = k.add(y, c);
        k.store_to(out, ix, y);
    });
    k.finish("t.affine")
}

/// `out[i] = (sum of 1.0, n times)`: a `for` loop whose bound no store gives, so its back edge
/// reads the cancel flag.
fn counted() -> Kernel {
    let mut k = Kb::new();
    let out = k.store(DType::F64, 1, Privilege::Write);
    let n = k.scalar(DType::I64);
    k.parallel(out, 1, |k, ix| {
        let (lo, hi, zero) = (k.i64(0), k.param(n), k.f64(0.0));
        let sum = k.for_loop(lo, hi, &[zero], |k, _, acc| {
            let one = k.f64(1.0);
            vec![k.add(acc[0], one)]
        });
        k.store_to(out, ix, sum[0]);
    });
    k.finish("t.counted")
}

fn compiler(dir: &Path, path: SimdPath) -> Compiler {
    let mut c = Compiler::new().expect("a compiler");
    c.set_path(path).expect("an available path");
    c.set_function_cache(FunctionCache::on_disk(dir));
    assert_eq!(c.function_cache().dir(), Some(dir));
    c
}

/// Runs `affine` on a 5 x 37 matrix (rows that are not a multiple of any vector width).
fn run_affine(k: &weft_cpu::CompiledKernel) -> Vec<f64> {
    let (rows, cols) = (5i64, 37i64);
    let mut a: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 0.37 - 11.0).collect();
    let mut out = vec![0.0; a.len()];
    run_on(
        k,
        &[dense(&mut a, &[rows, cols]), dense(&mut out, &[rows, cols])],
        &[],
        2,
    )
    .expect("runs");
    out
}

#[test]
fn a_second_compiler_takes_every_function_from_disk_with_its_own_addresses() {
    let want: Vec<f64> = (0..5 * 37)
        .map(|i| (i as f64 * 0.37 - 11.0) * 2.5 + 1.25)
        .collect();
    for path in Compiler::new().expect("a compiler").available_paths() {
        let dir = std::env::temp_dir().join(format!(
            "weft-function-cache-{}-{}",
            path.name(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);

        let mut first = compiler(&dir, path);
        let first_flag = first.cancel_flag();
        {
            let k = first.compile(&affine()).expect("compiles");
            assert_eq!(run_affine(&k), want, "{path}: the first compile");
            first.compile(&counted()).expect("compiles");
        }
        let made = first.function_cache().stats();
        assert!(made.misses > 0, "{path}: {made:?}");
        assert_eq!(made.disk_writes, made.misses, "{path}: {made:?}");
        // The first compiler's code and tables are freed before the second compiles.
        drop(first);

        let mut second = compiler(&dir, path);
        let affine_k = second.compile(&affine()).expect("compiles");
        let counted_k = second.compile(&counted()).expect("compiles");
        let found = second.function_cache().stats();
        assert_eq!(found.misses, 0, "{path}: nothing compiled again: {found:?}");
        assert_eq!(found.disk_hits, made.misses, "{path}: {found:?}");
        assert_eq!(run_affine(&affine_k), want, "{path}: from the cache");

        // The first compiler's flag set: the second's code runs on (it reads its own flag).
        first_flag.store(1, Ordering::SeqCst);
        let mut out = [0.0f64];
        run(&counted_k, &[dense(&mut out, &[1])], &[Scalar::I64(1000)]).expect("runs");
        assert_eq!(out[0], 1000.0, "{path}");

        // The second's flag, set while its loop runs (it would never end by itself), stops it.
        let flag = second.cancel_flag();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            flag.store(1, Ordering::SeqCst);
        });
        let err = run(
            &counted_k,
            &[dense(&mut out, &[1])],
            &[Scalar::I64(i64::MAX)],
        )
        .expect_err("cancelled");
        setter.join().expect("joins");
        assert!(err.to_string().contains("cancel"), "{path}: {err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_corrupt_entry_is_compiled_again_and_replaced() {
    let dir = std::env::temp_dir().join(format!("weft-function-cache-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = SimdPath::Scalar;
    let mut first = compiler(&dir, path);
    first.compile(&affine()).expect("compiles");
    let written = first.function_cache().stats().disk_writes;
    assert!(written > 0);
    for entry in std::fs::read_dir(&dir).expect("lists") {
        let file = entry.expect("an entry").path();
        if file.file_name().is_some_and(|n| n == "trimmed") {
            continue; // the directory's measure, not an entry
        }
        let mut bytes = std::fs::read(&file).expect("reads");
        let last = bytes.len() - 40;
        bytes[last] ^= 0x40;
        std::fs::write(&file, &bytes).expect("writes");
    }
    let mut second = compiler(&dir, path);
    let k = second.compile(&affine()).expect("compiles");
    let stats = second.function_cache().stats();
    assert_eq!(stats.disk_rejected, written, "{stats:?}");
    assert_eq!(stats.misses, written, "{stats:?}");
    assert_eq!(stats.disk_hits, 0, "{stats:?}");
    let want: Vec<f64> = (0..5 * 37)
        .map(|i| (i as f64 * 0.37 - 11.0) * 2.5 + 1.25)
        .collect();
    assert_eq!(run_affine(&k), want);
    // Replaced: a third compiler finds them whole.
    let mut third = compiler(&dir, path);
    third.compile(&affine()).expect("compiles");
    assert_eq!(third.function_cache().stats().disk_hits, written);
    let _ = std::fs::remove_dir_all(&dir);
}
