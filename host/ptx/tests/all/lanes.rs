//! Folds split by lanes (`emit/body/lanes.rs`): a rank-1 loop whose points run a loop of
//! eight independent partials runs a group of eight threads per point. The results must be
//! the bits of the IR's lane order, computed here independently; a point's stores and leaves
//! are written once; a failed index check in a lane is a fault of the kernel; and a loop whose
//! partials depend on each other is not split.

use std::sync::Arc;

use weft_ir::builder::{FOLD_LANES, KernelBuilder};
use weft_ir::{DType, Kernel, Privilege, ReduceOp, Scalar, ValidKernel};
use weft_ptx::emit::LANES;
use weft_ptx::{PtxBackend, emit};
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner};

use crate::backend_sim::{download, scalar_store, upload, vector};

/// `y[i] = 0.5 * sum_j A[i, j] * x[j]` in the lane order, and `total += y[i]`.
fn scaled_matvec() -> Kernel {
    let mut k = KernelBuilder::new("test.lanes.matvec");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let x = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let total = k.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let n = k.extent(a, 1);
    k.parallel(y, |b, idx| {
        let i = idx[0];
        let lo = b.const_i64(0);
        let sum = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
            let aij = b.load(a, &[i, j]);
            let xj = b.load(x, &[j]);
            b.mul(aij, xj)
        });
        let half = b.const_f64(0.5);
        let v = b.mul(sum, half);
        b.store(y, idx, v);
        b.reduce(total, &[], v);
    });
    k.finish_validated().expect("a valid kernel")
}

/// The lane order of `fold_lanes`, written out: partial `k` takes terms `8q + k`, the tail the
/// rest, the partials meet by the fixed tree.
fn lane_order_dot(row: &[f64], x: &[f64]) -> f64 {
    let n = row.len();
    let whole = n / FOLD_LANES * FOLD_LANES;
    let mut partials = [0.0f64; FOLD_LANES];
    for j in 0..whole {
        partials[j % FOLD_LANES] += row[j] * x[j];
    }
    let mut tail = 0.0f64;
    for j in whole..n {
        tail += row[j] * x[j];
    }
    let p = partials;
    (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) + tail
}

fn matrix(buffer: BufferId, rows: usize, cols: usize, by_columns: bool) -> Binding {
    let strides = if by_columns {
        vec![1, rows as i64]
    } else {
        vec![cols as i64, 1]
    };
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: vec![rows as i64, cols as i64].into(),
        strides: strides.into(),
        origin: vec![0, 0].into(),
        view: vec![rows as u64, cols as u64].into(),
        element_size: 8,
        deferred: None,
    }
}

/// Values with many distinct bits, so that another order of the terms shows.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn a_matvec_entry_runs_eight_threads_a_point() {
    let kernel = scaled_matvec();
    let module = emit(&ValidKernel::new(kernel).expect("valid")).expect("emits");
    assert_eq!(module.entries.len(), 1);
    assert_eq!(module.entries[0].lanes, LANES);
    assert_eq!(LANES as usize, FOLD_LANES);
    assert!(module.text.contains("bar.sync 0;"), "{}", module.text);
    assert!(module.text.contains("weft_lanes"), "{}", module.text);
}

/// Rows and columns around the group and step sizes (a group's eight lanes, a step of eight
/// unrolled iterations), by rows and by columns: the bits of the lane order, every row
/// written once, and the leaves' sum that of the rows.
#[test]
fn split_lanes_give_the_lane_orders_bits() {
    let kernel = scaled_matvec();
    let entry = Arc::new(KernelEntry::new(&kernel.name, &kernel).expect("valid"));
    for &(rows, cols) in &[
        (1, 0),
        (1, 1),
        (3, 7),
        (5, 8),
        (33, 9),
        (40, 31),
        (70, 45),
        (2, 64),
        // Unrolled steps of eight blocks of eight, then the rest and the tail.
        (3, 157),
        (9, 300),
    ] {
        for by_columns in [false, true] {
            let mut backend = PtxBackend::simulated();
            backend.prepare(&entry, Owner::RUNTIME).expect("prepares");
            let a = values(rows * cols, (rows * 100 + cols) as u64);
            let x = values(cols, 7 + cols as u64);
            // `a` holds row-major values; by columns, the same matrix stored transposed.
            let stored: Vec<f64> = if by_columns {
                (0..rows * cols)
                    .map(|s| a[(s % rows) * cols + s / rows])
                    .collect()
            } else {
                a.clone()
            };
            let (ba, bx) = (upload(&mut backend, &stored), upload(&mut backend, &x));
            let by = upload(&mut backend, &vec![f64::NAN; rows]);
            let bt = upload(&mut backend, &[0.0]);
            let args = [
                matrix(ba, rows, cols, by_columns),
                vector(bx, cols, 8),
                vector(by, rows, 8),
                scalar_store(bt),
            ];
            backend.launch(entry.id(), &args, &[]).expect("launches");
            let mut parts = backend.take_reductions().expect("reductions");
            let got = download(&mut backend, by, rows);
            let want: Vec<f64> = (0..rows)
                .map(|i| lane_order_dot(&a[i * cols..(i + 1) * cols], &x) * 0.5)
                .collect();
            let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{rows}x{cols}, by columns {by_columns}"
            );
            let total = parts[0].partial.finish().expect("finishes");
            let canonical =
                weft_ir::reduction::canonical(ReduceOp::Sum, DType::F64, &[rows as u64], &|p| {
                    Scalar::F64(want[p[0] as usize])
                });
            assert_eq!(total, canonical, "{rows}x{cols} leaves");
        }
    }
}

/// A lane's failed index check (`x` shorter than `A`'s rows) is a fault of the kernel, and
/// the device runs the next launch.
#[test]
fn a_lanes_failed_check_is_a_fault_of_the_kernel() {
    let kernel = scaled_matvec();
    let entry = Arc::new(KernelEntry::new(&kernel.name, &kernel).expect("valid"));
    let mut backend = PtxBackend::simulated();
    backend.prepare(&entry, Owner::RUNTIME).expect("prepares");
    let (rows, cols) = (12, 21);
    let a = values(rows * cols, 3);
    let x = values(cols, 4);
    let (ba, bx) = (upload(&mut backend, &a), upload(&mut backend, &x));
    let by = upload(&mut backend, &vec![0.0; rows]);
    let bt = upload(&mut backend, &[0.0]);
    let short = [
        matrix(ba, rows, cols, false),
        vector(bx, cols - 3, 8),
        vector(by, rows, 8),
        scalar_store(bt),
    ];
    // Reported by the launch or at the next synchronization.
    let e = match backend.launch(entry.id(), &short, &[]) {
        Err(e) => e,
        Ok(()) => backend.synchronize().expect_err("x has 18 of 21 elements"),
    };
    let text = e.to_string();
    assert!(text.contains("test.lanes.matvec"), "{text}");
    assert!(text.contains("parameter 1"), "{text}");
    assert!(!text.contains("lost"), "{text}");
    let _ = backend.take_reductions();
    let good = [
        matrix(ba, rows, cols, false),
        vector(bx, cols, 8),
        vector(by, rows, 8),
        scalar_store(bt),
    ];
    backend.launch(entry.id(), &good, &[]).expect("launches");
    let got = download(&mut backend, by, rows);
    let want: Vec<f64> = (0..rows)
        .map(|i| lane_order_dot(&a[i * cols..(i + 1) * cols], &x) * 0.5)
        .collect();
    assert_eq!(got, want);
}

/// Eight carried values that feed each other (a recurrence, not lanes) keep a thread per
/// point.
#[test]
fn partials_that_depend_on_each_other_are_not_split() {
    let mut k = KernelBuilder::new("test.lanes.chain");
    let x = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let n = k.extent(x, 0);
    k.parallel(y, |b, idx| {
        let lo = b.const_i64(0);
        let zero = b.const_f64(0.0);
        let out = b.for_loop(lo, n, &[zero; FOLD_LANES], |b, j, acc| {
            let xj = b.load(x, &[j]);
            // Partial k takes partial k - 1's value: a chain across the lanes.
            (0..FOLD_LANES)
                .map(|l| {
                    let prev = acc[(l + FOLD_LANES - 1) % FOLD_LANES];
                    b.add(prev, xj)
                })
                .collect()
        });
        b.store(y, idx, out[0]);
    });
    let kernel = k.finish_validated().expect("valid");
    let module = emit(&ValidKernel::new(kernel).expect("valid")).expect("emits");
    assert_eq!(module.entries[0].lanes, 1);
}

/// A product by parts (`weft_ir::matvec::matvec_parts`: each row's eight parts in the lane
/// order, combined by the pairwise tree) splits each part's loop across a group's threads:
/// the bits of the parts order, computed here from the lane order of each part.
#[test]
fn a_product_by_parts_splits_every_part_with_its_bits() {
    use weft_ir::matvec::{PARTS, matvec_parts, part_width};
    let kernel = matvec_parts("test.lanes.parts", DType::F64)
        .finish_validated()
        .expect("a valid kernel");
    let module = emit(&ValidKernel::new(kernel.clone()).expect("valid")).expect("emits");
    assert_eq!(module.entries[0].lanes, LANES);
    // Each part's partials meet at a barrier of their own.
    let barriers = module.text.matches("bar.sync 0;").count();
    assert!(barriers >= PARTS as usize, "{barriers} barriers");
    let entry = Arc::new(KernelEntry::new(&kernel.name, &kernel).expect("valid"));
    for &(rows, cols) in &[(3, 7), (5, 500), (2, 1203)] {
        let mut backend = PtxBackend::simulated();
        backend.prepare(&entry, Owner::RUNTIME).expect("prepares");
        let a = values(rows * cols, (rows * 100 + cols) as u64);
        let x = values(cols, 11 + cols as u64);
        let (ba, bx) = (upload(&mut backend, &a), upload(&mut backend, &x));
        let by = upload(&mut backend, &vec![f64::NAN; rows]);
        let args = [
            matrix(ba, rows, cols, false),
            vector(bx, cols, 8),
            vector(by, rows, 8),
        ];
        backend.launch(entry.id(), &args, &[]).expect("launches");
        let got = download(&mut backend, by, rows);
        let w = part_width(cols as u64) as usize;
        let want: Vec<f64> = (0..rows)
            .map(|i| {
                let row = &a[i * cols..(i + 1) * cols];
                let mut level: Vec<f64> = (0..PARTS as usize)
                    .map(|j| {
                        let lo = (j * w).min(cols);
                        let hi = (lo + w).min(cols);
                        lane_order_dot(&row[lo..hi], &x[lo..hi])
                    })
                    .collect();
                while level.len() > 1 {
                    level = level.chunks(2).map(|p| p[0] + p[1]).collect();
                }
                level[0]
            })
            .collect();
        let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{rows}x{cols}");
    }
}
