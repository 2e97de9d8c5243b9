//! Views broadcast along a loop's innermost dimension (stride 0 there, as NumPy's
//! broadcasting makes them): the back end runs such a launch through a variant of the kernel
//! whose loads read the one element per row, with the bits of the plain kernel over the same
//! values stored densely; and a view that the loop runs past still faults.

use std::sync::Arc;

use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner};

use weft_cpu::{CpuBackend, CpuOptions};

/// `out[i, j] = a[i, j] - m[i, j]`.
fn subtract() -> Arc<KernelEntry> {
    let mut k = KernelBuilder::new("t.subtract");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let m = k.store(DType::F64, 2, Privilege::Read);
    let out = k.store(DType::F64, 2, Privilege::Write);
    k.body().parallel(out, |b, idx| {
        let x = b.load(a, idx);
        let y = b.load(m, idx);
        let z = b.sub(x, y);
        b.store(out, idx, z);
    });
    Arc::new(KernelEntry::new("t.subtract", &k.finish()).expect("valid"))
}

fn buffer(b: &mut CpuBackend, values: &[f64]) -> BufferId {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let id = b.alloc(bytes.len().max(8) as u64).expect("a buffer");
    b.write(id, 0, &bytes).expect("writes");
    id
}

fn binding(buffer: BufferId, extents: [i64; 2], strides: [i64; 2]) -> Binding {
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: extents.to_vec().into(),
        strides: strides.to_vec().into(),
        origin: vec![0, 0].into(),
        view: extents.iter().map(|&e| e as u64).collect(),
        element_size: 8,
        deferred: None,
    }
}

/// Runs the kernel over `rows x cols` with `m` bound as `m_binding` of `m_values`; returns
/// `out`'s bits or the error.
fn run(
    b: &mut CpuBackend,
    (rows, cols): (usize, usize),
    m_values: &[f64],
    m_extents: [i64; 2],
    m_strides: [i64; 2],
) -> Result<Vec<u64>, String> {
    let kernel = subtract();
    b.prepare(&kernel, Owner(0)).expect("compiles");
    let a_values: Vec<f64> = (0..rows * cols).map(|k| (k as f64 * 0.37).sin()).collect();
    let a = buffer(b, &a_values);
    let m = buffer(b, m_values);
    let out = b.alloc((rows * cols * 8) as u64).expect("a buffer");
    let (r, c) = (rows as i64, cols as i64);
    let result = b.launch(
        kernel.id(),
        &[
            binding(a, [r, c], [c, 1]),
            binding(m, m_extents, m_strides),
            binding(out, [r, c], [c, 1]),
        ],
        &[],
    );
    let got = result.map_err(|e| e.to_string()).map(|()| {
        let mut bytes = vec![0u8; rows * cols * 8];
        b.read(out, 0, &mut bytes).expect("reads");
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    });
    for id in [a, m, out] {
        b.free(id);
    }
    got
}

fn backend() -> CpuBackend {
    CpuBackend::with_options(&CpuOptions {
        threads: 2,
        ..CpuOptions::default()
    })
    .expect("a CPU back end")
}

#[test]
fn a_view_broadcast_along_the_rows_runs_through_a_variant_with_the_dense_bits() {
    let mut b = backend();
    for (rows, cols) in [(3usize, 37usize), (17, 1000), (1, 5)] {
        let maxima: Vec<f64> = (0..rows).map(|i| i as f64 * 1.5 - 0.25).collect();
        let (r, c) = (rows as i64, cols as i64);
        let broadcast = run(&mut b, (rows, cols), &maxima, [r, c], [1, 0]).expect("runs");
        assert!(b.splat_variants() >= 1, "no variant for {rows} x {cols}");
        // The variant's rows run in vectors: the broadcast load, at index 0, is the row's.
        if cfg!(target_arch = "x86_64") {
            assert!(
                b.splat_vectorized_loops() >= 1,
                "the variant for {rows} x {cols} runs its rows in scalar code"
            );
        }
        let dense_values: Vec<f64> = (0..rows * cols).map(|k| maxima[k / cols]).collect();
        let dense = run(&mut b, (rows, cols), &dense_values, [r, c], [c, 1]).expect("runs");
        assert_eq!(broadcast, dense, "{rows} x {cols}");
        let want: Vec<u64> = (0..rows * cols)
            .map(|k| ((k as f64 * 0.37).sin() - maxima[k / cols]).to_bits())
            .collect();
        assert_eq!(broadcast, want, "{rows} x {cols}");
    }
    // Dense views alone compile no variant.
    let mut fresh = backend();
    let ones = vec![1.0; 12];
    run(&mut fresh, (3, 4), &ones, [3, 4], [4, 1]).expect("runs");
    assert_eq!(fresh.splat_variants(), 0);
}

#[test]
fn a_broadcast_view_the_loop_runs_past_still_faults() {
    let mut b = backend();
    // `m` covers 3 of the 4 columns the loop runs over.
    let err = run(&mut b, (2, 4), &[1.0, 2.0], [2, 3], [1, 0]).expect_err("out of bounds");
    assert!(err.contains("out of bounds"), "{err}");
    assert_eq!(
        b.splat_variants(),
        0,
        "no variant for a view the loop runs past"
    );
}
